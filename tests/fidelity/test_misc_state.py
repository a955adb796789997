"""issue 13, class 6 and 10 (c): state written by methods and attributes set in branches."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import BranchOutputError, LoopVariableError


class Counter:
    def __init__(self):
        self.count = 0
        self.total = jnp.zeros(())
        self.h = jnp.zeros(2)
        self.cache = []

    def bump(self, x):
        self.total = self.total + x.sum()
        return x * 2

    def step(self, x):
        self.h = jnp.tanh(x + self.h)
        return self.h

    def remember(self, x):
        self.cache.append(x)
        return x


def _holds_tracer(obj) -> bool:
    leaves = jax.tree_util.tree_leaves(vars(obj))
    return any(isinstance(l, jax.core.Tracer) for l in leaves)


def _state(obj):
    return {k: np.asarray(v) if not isinstance(v, list) else [np.asarray(i) for i in v] for k, v in vars(obj).items()}


def _compare(fn, *args):
    eager_obj, static_obj = Counter(), Counter()
    expected = fn(eager_obj, *args)
    out = dy2st.to_static(fn)(static_obj, *args)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    e_state, s_state = _state(eager_obj), _state(static_obj)
    assert e_state.keys() == s_state.keys()
    for k in e_state:
        np.testing.assert_allclose(np.asarray(s_state[k]), np.asarray(e_state[k]), rtol=1e-6, err_msg=k)


def method_in_if(obj, x):
    if x.sum() > 0:
        x = obj.bump(x)
    return x


def method_in_else(obj, x):
    if x.sum() > 0:
        x = x + 1
    else:
        x = obj.step(x)
    return x


def two_methods_in_if(obj, x):
    if x.sum() > 0:
        x = obj.bump(obj.step(x))
    return x


def nested_method_ifs(obj, x):
    if x.sum() > 0:
        if x[0] > 1:
            x = obj.step(x)
        x = obj.bump(x)
    return x


@pytest.mark.parametrize("fn", [method_in_if, method_in_else, two_methods_in_if, nested_method_ifs])
@pytest.mark.parametrize("values", [[2.0, 1.0], [0.5, 1.0], [-1.0, -1.0]])
def test_method_writes_in_staged_if_are_carried(fn, values):
    _compare(fn, jnp.array(values))


def method_in_while(obj, x):
    while x.sum() < 10.0:
        x = obj.bump(x) + 1
    return x


def test_method_writes_in_staged_loop_are_refused():
    obj = Counter()
    with pytest.raises(LoopVariableError) as info:
        dy2st.to_static(method_in_while)(obj, jnp.ones(2))
    text = str(info.value)
    assert "while x.sum() < 10.0:" in text and "Counter.total" in text and "assign it in the loop body" in text
    assert not _holds_tracer(obj)


def test_list_appended_by_method_in_one_branch_is_refused():
    def f(obj, x):
        if x.sum() > 0:
            obj.remember(x)
        return x

    obj = Counter()
    with pytest.raises(BranchOutputError, match="Counter.cache"):
        dy2st.to_static(f)(obj, jnp.ones(2))
    assert obj.cache == [] and not _holds_tracer(obj)


class Plain:
    pass


def sets_attribute_under_python_if(obj, x, flag):
    if flag:
        obj.y = x
    return x * 2


@pytest.mark.parametrize("flag", [True, False])
def test_no_undefined_marker_left_on_objects(flag):
    eager_obj, static_obj = Plain(), Plain()
    sets_attribute_under_python_if(eager_obj, jnp.ones(2), flag)
    dy2st.to_static(sets_attribute_under_python_if)(static_obj, jnp.ones(2), flag)
    assert vars(static_obj).keys() == vars(eager_obj).keys()


def test_attribute_in_one_staged_branch_is_refused_and_object_clean():
    def f(obj, x):
        if x.sum() > 0:
            obj.y = x
        return x

    obj = Plain()
    with pytest.raises(BranchOutputError, match="obj.y"):
        dy2st.to_static(f)(obj, jnp.ones(2))
    assert vars(obj) == {}


def test_dict_key_in_one_python_branch():
    def f(x, flag):
        d = {"a": x}
        if flag:
            d["b"] = x * 2
        if x.sum() > 0:
            x = x + 1
        return d, x

    for flag in (True, False):
        for x in (jnp.ones(2), -jnp.ones(2)):
            eager, static = f(x, flag), dy2st.to_static(f)(x, flag)
            assert eager[0].keys() == static[0].keys()
            np.testing.assert_allclose(static[1], eager[1])


def test_nnx_submodule_called_in_staged_branches():
    nnx = pytest.importorskip("flax.nnx")

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(2, 2, rngs=rngs)
            self.scale = 2.0

        def __call__(self, x):
            return self.linear(x) * self.scale

    class Net(nnx.Module):
        def __init__(self):
            self.block = Block(nnx.Rngs(0))

        def __call__(self, x):
            if x.sum() > 0:
                x = self.block(x)
            else:
                x = -self.block(x)
            return x

    for value in (1.0, -1.0):
        x = jnp.full((1, 2), value)
        np.testing.assert_allclose(dy2st.to_static(Net())(x), Net()(x), rtol=1e-6)


def sets_attribute_in_python_for(obj, x, n):
    for i in range(n):
        obj.y = x * i
    return x


def sets_attribute_in_python_while(obj, x, n):
    i = 0
    while i < n:
        obj.z = x
        i += 1
    return x


@pytest.mark.parametrize("fn", [sets_attribute_in_python_for, sets_attribute_in_python_while])
@pytest.mark.parametrize("n", [0, 2])
def test_no_undefined_marker_left_by_zero_trip_loops(fn, n):
    eager_obj, static_obj = Plain(), Plain()
    fn(eager_obj, jnp.ones(2), n)
    dy2st.to_static(fn)(static_obj, jnp.ones(2), n)
    assert vars(static_obj).keys() == vars(eager_obj).keys()


def writes_then_fails(obj, x):
    if x.sum() > 0:
        x = obj.bump(x)
        y = jnp.ones(3)
    else:
        y = jnp.ones(2)
    return x, y


def test_no_tracer_left_after_a_failed_staged_if():
    obj = Counter()
    before = {k: v for k, v in vars(obj).items()}
    with pytest.raises(BranchOutputError, match="'y'"):
        dy2st.to_static(writes_then_fails)(obj, jnp.ones(2))
    assert not _holds_tracer(obj)
    assert all(vars(obj)[k] is before[k] for k in before)


GLOBAL_COUNTER = Counter()


def global_method_then_fails(x):
    if x.sum() > 0:
        x = GLOBAL_COUNTER.bump(x)
        y = jnp.ones(3)
    else:
        y = jnp.ones(2)
    return x, y


def test_global_object_clean_after_error():
    with pytest.raises(BranchOutputError):
        dy2st.to_static(global_method_then_fails)(jnp.ones(2))
    assert not _holds_tracer(GLOBAL_COUNTER)


# -- objects of classes with __slots__ ---------------------------------------------------------------
class _Slotted:
    __slots__ = ("w", "n")

    def __init__(self, w):
        self.w, self.n = w, 0


class _HoldsSlotted:
    def __init__(self):
        self.p = _Slotted(jnp.zeros(2))


def _writes_slots(x, p):
    p.w = x * 2
    p.n += 1
    return x


def _reads_held_slots(x, holder):
    return x + holder.p.w


@dataclasses.dataclass(frozen=True, slots=True)
class _Config:
    scale: float = 2.0


def _scaled(x, cfg):
    return x * cfg.scale


def test_an_object_with_slots_is_refused_at_the_call():
    """Keyed by identity as a static value, it was left holding a tracer and a second call
    skipped its changes (eager: n == 2; dy2st: n == 1, w a JitTracer), silently."""
    p = _Slotted(jnp.zeros(2))
    with pytest.raises(dy2st.errors.InputSignatureError) as err:
        dy2st.to_static(_writes_slots)(jnp.ones(2), p)
    assert "an argument of class _Slotted (a class with __slots__, no __dict__)" in str(err.value)
    assert str(err.value).startswith('File "' + __file__)
    assert p.n == 0 and not isinstance(p.w, jax.core.Tracer)
    with pytest.raises(dy2st.errors.InputSignatureError):
        dy2st.to_static(_reads_held_slots)(jnp.ones(2), _HoldsSlotted())


def test_a_frozen_slotted_dataclass_is_a_static_value_by_value():
    static = dy2st.to_static(_scaled)
    for cfg in (_Config(), _Config(3.0), _Config()):
        np.testing.assert_array_equal(static(jnp.ones(2), cfg), _scaled(jnp.ones(2), cfg))


# -- `del` of a loop's variables after it --------------------------------------------------------------
def _del_for_target(x):
    for i in range(3):
        x = x + i
    del i
    return x


def _del_set_in_staged_while(x):
    while x.sum() > 0:
        x = x - 1
        last = x
    del last
    return x


def _del_enumerate_target(x):
    for i, v in enumerate(x):
        pass
    del v
    return i


@pytest.mark.parametrize("fn", [_del_for_target, _del_set_in_staged_while, _del_enumerate_target])
def test_del_of_a_loop_variable_after_the_loop(fn):
    """`del` reads the binding it removes: the loop must leave the variable bound (it raised a
    raw UnboundLocalError)."""
    x = jnp.array([1.0, 2.0])
    static = dy2st.to_static(fn)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(static(x)), np.asarray(fn(x)))


def _returns_a_loop_variable_caught_unbound(x):
    for i in range(0):
        pass
    try:
        return i
    except UnboundLocalError:
        return "unbound"


def test_reading_a_variable_no_path_assigned_raises_where_eager_does():
    """The message named an internal marker ("the function returns a DeadValue"); then it was
    refused. Now the read raises UnboundLocalError, as eagerly, and the `except` catches it."""
    static = dy2st.to_static(_returns_a_loop_variable_caught_unbound)
    for _ in range(2):
        assert static(jnp.ones(2)) == _returns_a_loop_variable_caught_unbound(jnp.ones(2)) == "unbound"
