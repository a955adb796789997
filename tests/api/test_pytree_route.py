"""The pytree route (issue 17): tuples, lists and dicts of arrays go to the shared jit as they
are, flattened by jit's C++ dispatch; whatever dy2st's own flatten would have told apart (a
Python number, a string, a list the function changes) still gets eager's answer."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st

X = jnp.arange(3.0)
WEAK = jnp.add(1.0, 2.0)  # a weak-typed array: jit gives it the signature of a Python float
assert WEAK.weak_type


def layers(params, state, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return x * state[0], (state[0] + 1, state[1])


def _args():
    params = [(jnp.ones((3, 3)), jnp.zeros(3)), (jnp.ones((3, 3)) / 2, jnp.ones(3))]
    return params, (jnp.float32(2), jnp.zeros(3)), X


def _same(got, expected):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)):
        assert type(a) is type(b) or (isinstance(a, jax.Array) and isinstance(b, jax.Array))
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_pytrees_of_arrays_take_the_route_and_keep_one_program(monkeypatch):
    static = dy2st.to_static(layers)
    _same(static(*_args()), layers(*_args()))  # the first call arms the route
    flattens = []
    real = jax.tree_util.tree_flatten
    monkeypatch.setattr(jax.tree_util, "tree_flatten", lambda *a, **k: flattens.append(1) or real(*a, **k))
    for _ in range(3):
        _same(static(*_args()), layers(*_args()))
    assert static.policy.pytree_route and static._stateful is None and len(static.programs) == 1
    assert flattens == []  # no flatten of dy2st's on the way: jit's own


def pick(pair, x):
    scale = pair[1]
    if isinstance(scale, (bool, float, int)):
        return x * 2, scale  # eager gives the Python value back
    return x * 3, scale


@pytest.mark.parametrize("order", ["number first", "array first"])
@pytest.mark.parametrize("number, array", [(2.0, WEAK), (True, jnp.bool_(True)), (3, jnp.add(1, 2))],
                         ids=["float", "bool", "int"])
def test_a_python_number_where_a_same_signature_array_was(order, number, array):
    # jit cannot tell a Python number from a weak-typed (or bool) scalar array; dy2st keeps the
    # number static and the array an input, whichever came first.
    static = dy2st.to_static(pick)
    calls = [number, array] if order == "number first" else [array, number]
    calls += calls
    for value in calls:
        for container in ((X, value), [X, value]):
            got, expected = static(container, X), pick(container, X)
            _same(got, expected)
            assert type(got[1]) is type(expected[1]) or isinstance(expected[1], jax.Array)


def test_a_weak_typed_array_with_dims_keeps_the_shared_jit():
    # no Python number has its signature (`jnp.where(c, 2.0, 0.0)`, weak float32[3]): one
    # program, traced once, for a pytree holding it
    weak = jnp.where(X > 0, 2.0, 0.0)
    assert weak.weak_type and weak.shape
    static = dy2st.to_static(pick)
    for _ in range(3):
        _same(static((X, weak), X), pick((X, weak), X))
    assert len(static.programs) == 1 and not static.policy.ambiguous_seen


def test_a_string_in_a_dict_is_static():
    def f(config, x):
        return x * 2 if config["act"] == "double" else x + 1

    static = dy2st.to_static(f)
    for act in ("double", "inc", "double"):
        np.testing.assert_allclose(static({"act": act, "w": X}, X), f({"act": act, "w": X}, X))
    assert len(static.programs) == 2


def test_a_python_int_beyond_int32_in_a_list_is_static():
    def f(xs, x):
        return x * 2, xs[1] + 1

    static = dy2st.to_static(f)
    static([X, X], X)  # armed on a pytree of arrays
    for big in (2**40, 2**41):
        _same(static([X, big], X), f([X, big], X))


def test_a_list_changed_on_a_later_signature_is_written_back():
    def f(xs, x):
        if x.shape[0] > 3:
            xs.append(x)
        return x.sum()

    static = dy2st.to_static(f)
    xs = [X]
    for _ in range(2):
        static(xs, X)
    assert len(xs) == 1 and static.policy.pytree_route
    longer = jnp.arange(5.0)
    eager = [X]
    f(eager, longer)
    static(xs, longer)
    assert len(xs) == len(eager) == 2 and xs[1] is longer or np.array_equal(xs[1], longer)


def test_the_functions_own_type_error_is_not_swallowed():
    def f(pair, x):
        if x.shape[0] > 3:
            return x + "a"
        return pair[0] * x

    static = dy2st.to_static(f)
    static((X,), X)
    static((X,), X)
    with pytest.raises(TypeError) as info:
        static((X,), jnp.arange(5.0))
    assert "unsupported operand" in str(info.value)
    assert any("test_pytree_route.py" in note for note in getattr(info.value, "__notes__", ()))
    assert static.policy.pytree_route


def test_transformations_of_pytree_calls_match_eager():
    static = dy2st.to_static(layers)
    params, state, x = _args()
    static(params, state, x)  # armed

    def loss(fn, params):
        return fn(params, state, x)[0].sum()

    _same(jax.grad(lambda p: loss(static, p))(params), jax.grad(lambda p: loss(layers, p))(params))
    _same(jax.jit(static)(params, state, x), layers(params, state, x))
    xs = jnp.stack([x, x + 1])
    _same(jax.vmap(lambda v: static(params, state, v))(xs), jax.vmap(lambda v: layers(params, state, v))(xs))


@pytest.mark.parametrize("values", [
    [__import__("decimal").Decimal("2"), __import__("decimal").Decimal("2.0")],
    [frozenset({1}), frozenset({1.0}), frozenset({True})],
    [(0.0,), (-0.0,)],
], ids=["decimal", "frozenset", "tuple"])
def test_static_arguments_equal_but_told_apart_by_eager_code_are_two_programs(values):
    def f(x, k):
        return x * 2, repr(k)

    static = dy2st.to_static(f)
    for value in values * 2:
        assert static(X, value)[1] == repr(value)


def test_a_frozen_dataclass_of_a_negative_zero():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        v: float

    def f(x, c):
        return x * c.v, repr(c.v)

    static = dy2st.to_static(f)
    for v in (-0.0, 0.0, -0.0):
        assert static(X, Cfg(v))[1] == repr(v)


def test_a_numpy_string_scalar_is_a_static_argument():
    def f(x, name):
        return x * 2 if name == "double" else x, str(name)

    static = dy2st.to_static(f)
    for name in (np.str_("double"), np.str_("same"), np.str_("double")):
        got, want = static(X, name), f(X, name)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1] == want[1]


class Pair(__import__("typing").NamedTuple):
    w: jax.Array
    b: dict


def steps_a_state(state, x):
    if x.sum() > 0:
        return Pair(state.w * 2, {"k": state.b["k"] + x}), x
    return Pair(state.w, dict(state.b)), -x


def test_a_namedtuple_argument_takes_the_pytree_route_after_its_first_call(monkeypatch):
    static = dy2st.to_static(steps_a_state)
    state = Pair(X, {"k": X})
    _same(static(state, X), steps_a_state(state, X))
    assert Pair in static.policy.node_types
    flattens = []
    real = jax.tree_util.tree_flatten
    monkeypatch.setattr(jax.tree_util, "tree_flatten", lambda *a, **k: flattens.append(1) or real(*a, **k))
    for x in (X, -X, X):
        got, want = static(state, x), steps_a_state(state, x)
        _same(got, want)
        assert type(got[0]) is Pair
    assert flattens == [] and len(static.programs) == 1


def returns_metrics(params, x):
    loss = jnp.sum(params["w"] * x)
    return {"w": params["w"] - 0.1 * x}, {"loss": loss, "acc": loss * 0, "step": 1}  # unsorted, a Python int


def test_outputs_the_call_decodes_keep_the_hit_path(monkeypatch):
    static = dy2st.to_static(returns_metrics)
    params = {"w": X}
    want = returns_metrics(params, X)
    for _ in range(2):
        static(params, X)
    general = []
    real = dy2st.api.StaticFunction._call_general
    monkeypatch.setattr(dy2st.api.StaticFunction, "_call_general", lambda *a: general.append(1) or real(*a))
    for _ in range(3):
        got = static(params, X)
        assert list(got[1]) == ["loss", "acc", "step"] and got[1]["step"] == 1 and type(got[1]["step"]) is int
        np.testing.assert_allclose(got[1]["loss"], want[1]["loss"])
        np.testing.assert_allclose(got[0]["w"], want[0]["w"])
    assert general == [] and static.policy.decodes_outputs


def noisy_step(params, key, x, lr):
    key, sub = jax.random.split(key)
    noise = jax.random.normal(sub, x.shape)
    if (x + noise).sum() > 0:
        x = x * 2
    return {k: v - lr * x.sum() for k, v in params.items()}, key


def _same_step(got, want):
    (new, key), (new_want, key_want) = got, want
    _same(new, new_want)
    assert type(key) is type(key_want) and key.dtype == key_want.dtype
    data = jax.random.key_data if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else (lambda k: k)
    np.testing.assert_array_equal(data(key), data(key_want))


@pytest.mark.parametrize("make_key", [jax.random.key, jax.random.PRNGKey], ids=["typed", "raw"])
def test_typed_and_raw_prng_keys_take_the_hit_paths(make_key, monkeypatch):
    """A typed key (`jax.random.key`, not an ArrayImpl) sent every call to the general path's
    flatten and key (a linen dropout step: 245 us against 125 us for jax.jit, 145 us now)."""
    params = {"w": jnp.ones(3), "b": jnp.zeros(3)}
    static = dy2st.to_static(noisy_step)
    for lr in (0.1, 0.5, 0.1):  # (the first calls arm the routes)
        for args in ((params, make_key(0), jnp.ones(3)), (params, make_key(1), -jnp.ones(3))):
            _same_step(static(*args, lr), noisy_step(*args, lr))
    general = []
    real = dy2st.api.StaticFunction._call_general
    monkeypatch.setattr(dy2st.api.StaticFunction, "_call_general", lambda *a: general.append(1) or real(*a))
    key = make_key(2)
    for _ in range(3):
        got = static(params, key, jnp.ones(3), 0.1)
        _same_step(got, noisy_step(params, key, jnp.ones(3), 0.1))
        key = got[1]
    assert general == []


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Frozen:
    step: jax.Array
    params: dict


def frozen_step(state, x):
    if x.sum() > 0:
        x = x * 2
    return dataclasses.replace(state, step=state.step + 1, params={k: v + x for k, v in state.params.items()})


def test_a_frozen_dataclass_pytree_takes_the_pytree_route(monkeypatch):
    """A Flax TrainState-like argument (a frozen dataclass registered as a pytree of arrays)
    went through the general path's flatten on every call; after its first call its class joins
    the pytree route's, as a namedtuple's does. A later one holding a Python number is still
    static (the route gives it back)."""
    static = dy2st.to_static(frozen_step)
    state = Frozen(jnp.int32(0), {"w": jnp.ones(3)})
    for x in (jnp.ones(3), -jnp.ones(3)):
        _same(dataclasses.asdict(static(state, x)), dataclasses.asdict(frozen_step(state, x)))
    assert Frozen in static.policy.node_types
    general = []
    real = dy2st.api.StaticFunction._call_general
    monkeypatch.setattr(dy2st.api.StaticFunction, "_call_general", lambda *a: general.append(1) or real(*a))
    for x in (jnp.ones(3), -jnp.ones(3), jnp.ones(3)):
        got = static(state, x)
        assert type(got) is Frozen
        _same(dataclasses.asdict(got), dataclasses.asdict(frozen_step(state, x)))
    assert general == []
    monkeypatch.undo()
    python_step = Frozen(3, {"w": jnp.ones(3)})
    for _ in range(2):
        got, want = static(python_step, jnp.ones(3)), frozen_step(python_step, jnp.ones(3))
        assert type(got.step) is int and got.step == want.step == 4
