"""The public API of DESIGN.md: decorator forms, functions of every kind, StaticFunction
introspection, the global switch, not_to_static, program caching and composition with JAX."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.testing import check_equivalent

POS = jnp.array([1.0, 2.0, 3.0])
NEG = -POS

SCALE = 3.0


def branchy(x):
    if x.sum() > 0:
        return x * SCALE
    return x - 1


def test_decorator_forms():
    @dy2st.to_static
    def bare(x):
        return x * SCALE if x.sum() > 0 else x - 1

    @dy2st.to_static()
    def called(x):
        return x * SCALE if x.sum() > 0 else x - 1

    @dy2st.to_static(full_graph=True)
    def with_kw(x):
        return x * SCALE if x.sum() > 0 else x - 1

    for f in (bare, called, with_kw, dy2st.to_static(branchy)):
        assert isinstance(f, dy2st.StaticFunction)
        np.testing.assert_allclose(f(POS), POS * 3)
        np.testing.assert_allclose(f(NEG), NEG - 1)
    assert dy2st.to_static(bare) is bare


def test_closure_and_nested_function():
    offset = jnp.array(10.0)

    def outer(x):
        def inner(y):
            if y.sum() > 0:
                return y + offset
            return y - offset

        return inner(x) * 2

    check_equivalent(outer, POS, grad_argnums=0)
    check_equivalent(outer, NEG, grad_argnums=0)


def test_closure_cells_are_shared_not_copied():
    scale = [2.0]

    def make():
        factor = jnp.array(2.0)

        def f(x):
            if x.sum() > 0:
                return x * factor
            return x

        return f

    f = make()
    g = dy2st.to_static(f)
    np.testing.assert_allclose(g(POS), POS * 2)
    # the converted function reads the same cell the original closes over
    converted = g._converted
    assert converted.__closure__[[c for c in converted.__code__.co_freevars].index("factor")] is f.__closure__[0]
    assert scale == [2.0]


def test_lambda():
    f = dy2st.to_static(lambda x: x * 2 if x.sum() > 0 else x - 1)
    np.testing.assert_allclose(f(POS), POS * 2)
    np.testing.assert_allclose(f(NEG), NEG - 1)
    np.testing.assert_allclose(jax.jit(f)(NEG), NEG - 1)
    assert "convert_ifexp" in f.code


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    @dy2st.to_static
    def forward(self, x):
        if x.sum() > 0:
            return x * self.factor
        return x


class Child(Scaler):
    @dy2st.to_static
    def forward(self, x):
        y = super().forward(x)
        if y.sum() < 0:
            y = y + self.__bias()
        return y

    def __bias(self):
        return 100.0


def test_method_decorator_binds_per_instance():
    a, b = Scaler(2.0), Scaler(5.0)
    np.testing.assert_allclose(a.forward(POS), POS * 2)
    np.testing.assert_allclose(b.forward(POS), POS * 5)
    # like a bound method, each access binds; the programs live on the class's StaticFunction
    assert a.forward.__self__ is a if hasattr(a.forward, "__self__") else True
    np.testing.assert_allclose(Scaler.forward(a, POS), POS * 2)


def test_super_and_private_names_in_methods():
    c = Child(3.0)
    np.testing.assert_allclose(c.forward(POS), POS * 3)
    np.testing.assert_allclose(c.forward(NEG), NEG + 100.0)


def test_bound_method_passed_to_to_static():
    s = Scaler(4.0)
    f = dy2st.to_static(Scaler.forward.rollback().__get__(s))
    np.testing.assert_allclose(f(POS), POS * 4)


def test_code_and_to_code():
    f = dy2st.to_static(branchy)
    assert f.code.startswith("def branchy(x):")
    assert "convert_ifelse" in f.code
    assert dy2st.to_code(branchy) == f.code
    assert "do_return" in dy2st.to_code(branchy)


def test_concrete_program_introspection():
    f = dy2st.to_static(branchy)
    program = f.get_concrete_program(POS)
    assert isinstance(program, dy2st.ConcreteProgram)
    assert "cond" in str(program.jaxpr)
    assert "stablehlo" in program.as_text()
    assert [(s.shape, s.dtype) for s in program.input_spec] == [((3,), jnp.float32)]
    assert program.output_spec.shape == (3,)
    np.testing.assert_allclose(program.compiled(POS), POS * 3)
    assert program.cost_analysis() is not None
    # abstract inputs work too
    abstract = f.get_concrete_program(jax.ShapeDtypeStruct((7,), jnp.float32))
    assert abstract.output_spec.shape == (7,)
    assert len(f.programs) == 2


def test_programs_cached_per_signature():
    f = dy2st.to_static(branchy)
    assert f.programs == []
    f(POS)
    f(NEG)
    assert len(f.programs) == 1
    f(jnp.ones(4))
    f(jnp.ones(3, jnp.int32))
    assert len(f.programs) == 3
    f.clear_cache()
    assert f.programs == []


def test_inside_jit_grad_vmap_inlines_without_own_program():
    f = dy2st.to_static(branchy)
    jax.jit(f)(POS)
    jax.grad(lambda x: f(x).sum())(POS)
    jax.vmap(f)(jnp.stack([POS, NEG]))
    assert f.programs == []


def test_rollback_and_enable_switch():
    calls = []

    def f(x):
        calls.append(type(x).__name__)
        return x + 1

    g = dy2st.to_static(f)
    assert g.rollback() is f
    g(POS)
    assert calls and "Tracer" in calls[-1]  # traced once
    dy2st.enable_to_static(False)
    try:
        calls.clear()
        g(POS)
        assert calls == ["ArrayImpl"]  # ran eagerly
    finally:
        dy2st.enable_to_static(True)


def test_hit_path_keeps_the_switch_the_cache_and_run_time_checks():
    # Calls with positional arrays go straight to the jit shared by their signatures; the
    # global switch, clear_cache and a check first traced for a new shape still take effect.
    def f(x):
        if x.shape[0] > 3:
            assert x.sum() > 0, "sum must be positive"
        return x + 1

    g = dy2st.to_static(f)
    for _ in range(3):
        np.testing.assert_allclose(g(jnp.ones(2)), 2.0)
    assert g._cache.traced == 1 and g._fast is not None
    dy2st.enable_to_static(False)
    try:
        np.testing.assert_allclose(g(jnp.ones(2)), 2.0)
        assert g._cache.traced == 1  # ran eagerly
    finally:
        dy2st.enable_to_static(True)
    g.clear_cache()
    assert g._fast is None and g.programs == []
    np.testing.assert_allclose(g(jnp.ones(2)), 2.0)
    assert len(g.programs) == 1
    np.testing.assert_allclose(g(jnp.ones(4)), 2.0)  # traces the check, on the hit path
    with pytest.raises(AssertionError, match="sum must be positive"):
        g(-jnp.ones(4))
    with pytest.raises(AssertionError, match="sum must be positive"):
        g(-jnp.ones(4))
    np.testing.assert_allclose(g(-jnp.ones(2)), 0.0)


@dy2st.to_static
def module_level_static(x):
    return x * 2 if x.sum() > 0 else x - 1


def test_copies_and_pickles_like_a_function():
    import copy
    import pickle

    assert copy.copy(module_level_static) is module_level_static
    assert copy.deepcopy([module_level_static])[0] is module_level_static
    assert pickle.loads(pickle.dumps(module_level_static)) is module_level_static
    local = dy2st.to_static(lambda x: x + 1)
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(local)


def test_not_to_static_marks_function():
    @dy2st.not_to_static
    def helper(x):
        return x

    assert dy2st.api.is_not_to_static(helper)


def test_conversion_cached_per_code_object():
    from dy2st import conversion

    key = (branchy.__code__, branchy.__code__.co_filename)
    dy2st.to_static(branchy)(POS)
    before = conversion._cache[key]
    dy2st.to_static(branchy)(NEG)
    assert conversion._cache[key] is before


def test_no_writes_into_user_globals():
    before = set(globals())
    dy2st.to_static(branchy)(POS)
    assert set(globals()) == before


def test_global_variable_written_in_branch():
    def f(x):
        global SCALE
        if x.sum() > 0:
            SCALE = 3.0
        return x * SCALE

    check_equivalent(f, POS)


def test_numpy_inputs_are_program_inputs():
    f = dy2st.to_static(branchy)
    np.testing.assert_allclose(f(np.asarray(POS)), POS * 3)
    np.testing.assert_allclose(f(np.asarray(NEG)), NEG - 1)
    assert len(f.programs) == 1


# -- bad arguments to the public functions: a Dy2StaticError at the caller's line ----------
def _refused_here(error_type, call, *words):
    """`call()` raises `error_type` whose message starts at this file's line and has `words`."""
    with pytest.raises(error_type) as info:
        call()
    message = str(info.value)
    assert isinstance(info.value, dy2st.Dy2StaticError)
    assert message.startswith(f'File "{__file__}", line '), message
    assert "To fix:" in message, message
    for word in words:
        assert word in message, message
    return info.value


def two_params(x, y=1):
    return x * y


@pytest.mark.parametrize("call, words", [
    (lambda: dy2st.to_static(3), ["to_static expects a function", "got int 3", "dy2st.to_static(f)"]),
    (lambda: dy2st.to_static(branchy, max_programs=0), ["max_programs must be a positive integer, got int 0"]),
    (lambda: dy2st.to_static(branchy, max_programs=None), ["max_programs must be a positive integer, got NoneType"]),
    (lambda: dy2st.to_static(max_programs=2.5), ["max_programs must be a positive integer, got float 2.5"]),
    (lambda: dy2st.to_static(branchy, in_shardings="x"), ["in_shardings holds str 'x', which is not a sharding",
                                                          "NamedSharding"]),
    (lambda: dy2st.to_static(branchy, out_shardings=[3]), ["out_shardings holds int 3"]),
    (lambda: dy2st.to_static(two_params, in_shardings=[None] * 3), ["in_shardings has 3 entries", "takes 1 to 2",
                                                                    "one sharding (or None) per positional argument"]),
    (lambda: dy2st.explain(None, POS), ["explain needs the function to explain", "dy2st.explain(f, *args)"]),
    (lambda: dy2st.explain(3, POS), ["to_static expects a function", "got int 3"]),
    (lambda: dy2st.to_code(3), ["to_static expects a function", "got int 3"]),
    (lambda: dy2st.to_code(None), ["to_code needs the function"]),
    (lambda: dy2st.set_code_level("a"), ["set_code_level(level) takes an int >= 0, got str 'a'"]),
    (lambda: dy2st.set_verbosity(None), ["set_verbosity(level) takes an int >= 0, got NoneType None"]),
    (lambda: dy2st.set_verbosity(-1), ["takes an int >= 0, got int -1", "0 to turn it off"]),
])
def test_bad_arguments_are_refused_at_the_callers_line(call, words):
    """Also a TypeError and a ValueError, what Python raises for such a misuse (and what these
    raised before: code catching either still does)."""
    error = _refused_here(dy2st.errors.ArgumentError, call, *words)
    assert isinstance(error, TypeError) and isinstance(error, ValueError)


@pytest.mark.parametrize("spec, shown", [("x:float32[3]", "str 'x:float32[3]'"), ("x", "str 'x'"),
                                         (5, "int 5"), (dy2st.InputSpec((3,)), "InputSpec")])
def test_an_input_spec_that_is_not_a_list_is_refused(spec, shown):
    """A string was counted one entry per character ('has 12 entries'; a 1-character one passed)."""
    _refused_here(dy2st.errors.InputSpecError, lambda: dy2st.to_static(branchy, input_spec=spec),
                  "input_spec must be a list with one entry per input", shown, "wrap it in a list")


def test_to_code_takes_what_to_static_takes():
    import functools

    assert dy2st.to_code(functools.partial(two_params, y=2)) == dy2st.to_code(two_params)
    assert "def __call__" in dy2st.to_code(Model())  # a model: its __call__
    _refused_here(dy2st.errors.ConversionError, lambda: dy2st.to_code(abs), "abs", "no Python source")


class Model:
    def __call__(self, x):
        if x.sum() > 0:
            return x * 2
        return x
