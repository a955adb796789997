"""Outputs that are not arrays (a Python number argument returned, `x.shape[0]`, a string, a
numpy constant) come back as eager gives them, on every call; values a program could not give
back the same each call are a ProgramOutputError at the call (found in issue 17's work: jit
made the number an array and refused the string with its own error)."""

import enum

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import ProgramOutputError
from dy2st.testing.fuzz import tree_difference

X = jnp.arange(3.0)


def _same(got, expected):
    """Eager's leaves, of eager's types; only a Python number the data decides (returned under
    the key "chosen") is a 0-d array of its value (the numbers rule, `tree_difference`)."""
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree_util.tree_leaves(expected)):
        if "chosen" in jax.tree_util.keystr(path):
            assert tree_difference(b, a, "to_static") is None
        else:
            assert type(a) is type(b), (a, b)
            np.testing.assert_array_equal(a, b)


def returns_argument(x, n):
    return x * n, n


def returns_shape(x):
    return x.sum(), x.shape[0], "rows"


def returns_nested(x, scale):
    if x.sum() > 0:
        y = x * scale
    else:
        y = x - scale
    return {"y": y, "meta": {"scale": scale, "tag": "ok", "none": None}, "chosen": max(0, x.sum())}


def returns_numpy(x):
    return x + 1, np.arange(3)


@pytest.mark.parametrize("fn, args", [
    (returns_argument, (X, 2)),
    (returns_argument, (X, 2.5)),
    (returns_argument, (X, True)),
    (returns_shape, (X,)),
    (returns_shape, (jnp.ones((5, 2)),)),
    (returns_nested, (X, 2)),
    (returns_nested, (-X - 1, 2)),
    (returns_numpy, (X,)),
], ids=lambda v: getattr(v, "__name__", None) or str(v)[:12])
def test_constants_come_back_as_eager_gives_them(fn, args):
    static = dy2st.to_static(fn)
    for _ in range(3):  # the first call traces; the others run the cached program
        _same(static(*args), fn(*args))
    # Under an enclosing jit, jit's own rules: numbers become arrays, a string is refused.
    statics = tuple(range(1, len(args)))
    try:
        expected = jax.jit(fn, static_argnums=statics)(*args)
    except TypeError:
        with pytest.raises(TypeError, match="not a valid JAX type"):
            jax.jit(static, static_argnums=statics)(*args)
    else:
        _same(jax.jit(static, static_argnums=statics)(*args), expected)


def test_a_returned_numpy_array_is_a_new_one_each_call():
    static = dy2st.to_static(returns_numpy)
    _, first = static(X)
    first[0] = 100
    _, second = static(X)
    assert second[0] == 0 and second is not first


class Counter:
    def __init__(self):
        self.w = jnp.ones(3)
        self.calls = 0

    @dy2st.to_static
    def forward(self, x):
        self.calls += 1
        return x * self.w, self.calls


def test_a_method_returning_a_python_value_of_its_state():
    model, eager = Counter(), Counter()
    for _ in range(3):
        _same(model.forward(X), Counter.forward.__wrapped__(eager, X))
    assert model.calls == eager.calls == 3


def _closure(x):
    scale = x.sum()
    return x, lambda v: v * scale


@pytest.mark.parametrize("fn, kind", [
    (_closure, "function"),
], ids=["closure"])
def test_values_made_once_per_trace_are_refused(fn, kind):
    def f(x):
        return fn(x)

    with pytest.raises(ProgramOutputError, match=rf"(?s)returns a {kind}, which is not an array.*To fix: return arrays") as info:
        dy2st.to_static(f)(X)
    assert info.value.origin.filename == __file__
    assert info.value.origin.source_line.strip() == "return fn(x)"  # the function's return, not the call


class Perm(enum.Flag):
    R = 4
    W = 2


def returns_a_flag_combination(x):
    return x + 1, Perm.R | Perm.W, Perm.R


def test_an_enum_flags_combination_is_returned_as_eager_returns_it():
    """`Perm.R | Perm.W` is a member Python makes once and keeps in the class (found by a stdlib
    probe: refused as an object something outside the call holds)."""
    static = dy2st.to_static(returns_a_flag_combination)
    for _ in range(2):
        got = static(jnp.ones(2))
        assert got[1] is Perm.R | Perm.W and got[2] is Perm.R


def returns_a_nested_function(x):
    def scale(v):
        return v * 2

    return x + 1, scale, scale


def make_adder(k):
    def add(v):
        return v + k

    return add


def returns_a_function_with_a_list_default(x):
    def g(v, seen=[]):
        return v

    return x, g


def test_a_function_the_call_defines_is_a_new_one_on_every_call():
    """A nested `def` returned was the first trace's function on every call, so attributes a
    caller set on it stayed (probe of Python semantics); a closure over a Python number was
    refused. Eager makes a new function per call (one object where returned twice)."""
    static = dy2st.to_static(returns_a_nested_function)
    seen = []
    for _ in range(3):
        _, h, again = static(X)
        assert h is again and not hasattr(h, "uses") and h(3) == 6
        h.uses = 1
        seen.append(h)
    assert len({id(h) for h in seen}) == 3
    adder = dy2st.to_static(make_adder)
    assert adder(2)(1) == 3 and adder(5)(1) == 6 and adder(2) is not adder(2)


def test_a_function_the_call_defines_with_a_list_default_is_refused():
    with pytest.raises(ProgramOutputError, match="returns a function"):
        dy2st.to_static(returns_a_function_with_a_list_default)(X)


def returns_a_closure_calling_a_builtin(x, s):
    def scaled(v):
        return v * len(s)

    return x, scaled


def test_a_closure_calling_a_builtin_is_a_new_function_per_call():
    """Its converted code reads the runtime through a cell holding a module: refused as a
    closure over a value made once (fuzzer, models stream)."""
    static = dy2st.to_static(returns_a_closure_calling_a_builtin)
    _, first = static(X, "abc")
    _, second = static(X, "abc")
    assert first is not second and first(2) == second(2) == 6
