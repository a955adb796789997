"""The generated dispatcher (api._positional_dispatch) takes the function's own parameters."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st

X = jnp.arange(3.0)


def uses_builtin_names(type, Exception, x=None):  # noqa: A002 - parameters named like builtins
    return type * 2 + Exception + (0 if x is None else x)


def with_default(x, n=3):
    return x * n


def test_parameters_named_like_builtins():
    static = dy2st.to_static(uses_builtin_names)
    for _ in range(2):
        np.testing.assert_allclose(static(X, X, X), uses_builtin_names(X, X, X))
    np.testing.assert_allclose(static(X, Exception=X), uses_builtin_names(X, X))


def test_keywords_defaults_and_errors_bind_as_python_does():
    static = dy2st.to_static(with_default)
    np.testing.assert_allclose(static(X), X * 3)
    np.testing.assert_allclose(static(X, 2), X * 2)
    np.testing.assert_allclose(static(n=2, x=X), X * 2)
    np.testing.assert_allclose(static(X, jnp.float32(4)), X * 4)
    with pytest.raises(TypeError, match="unexpected keyword"):
        static(X, m=1)
    with pytest.raises(TypeError, match="with_default"):
        static(X, 1, 2)


class Holder:
    def method(self, x, n=2):
        return x * n

    @dy2st.to_static
    def decorated(self, x, n=2):
        return x * n


def _type_error(call) -> str:
    with pytest.raises(TypeError) as err:
        call()
    return str(err.value)


@pytest.mark.parametrize("call", [
    lambda f: f(X, 2, 3), lambda f: f(), lambda f: f(X, m=1), lambda f: f(X, 2, x=1), lambda f: f(X, 2, 3, n=1),
], ids=["too-many", "missing", "unknown-keyword", "twice", "twice-and-too-many"])
def test_a_bad_calls_type_error_is_eagers_word_for_word(call):
    """Python's text counts the parameters with defaults and names the qualified function:
    `with_default() takes from 1 to 2 positional arguments` (the dispatcher, all of whose
    parameters have defaults, said "from 0 to 2"; a method's said `method()` for `Holder.method()`)."""
    holder = Holder()
    eager_method = Holder.decorated.__wrapped__.__get__(holder) if hasattr(Holder.decorated, "__wrapped__") else None
    pairs = [(with_default, dy2st.to_static(with_default)), (holder.method, dy2st.to_static(holder.method))]
    for eager, static in pairs:
        expected = _type_error(lambda: call(eager))
        for _ in range(2):
            assert _type_error(lambda: call(static)) == expected
    if eager_method is not None:
        assert _type_error(lambda: call(holder.decorated)) == _type_error(lambda: call(eager_method))


def test_a_keyword_call_shares_the_positional_program():
    static = dy2st.to_static(lambda x, y: x + y)
    static(X, X)
    static(x=X, y=X)
    static(X, y=X)
    assert len(static.programs) == 1
    assert jax.jit(static)(X, X).shape == (3,)


def scaled(x, n, name="a"):
    return x * n, n, name + "!"


@pytest.mark.parametrize("max_programs", [2, 64])
def test_python_scalar_arguments_find_their_program_by_type_and_value(max_programs):
    """Calls of arrays and Python scalars seen before go to their program without the table's
    key (`ProgramCache.program_for_statics`): 1, 1.0 and True, 0.0 and -0.0, a NaN, strings and
    shapes each keep their own program, across evictions (a bound of 2) and clear_cache."""
    static = dy2st.to_static(scaled, max_programs=max_programs)
    calls = [(X, 1), (X, 1.0), (X, True), (X, 0.0), (X, -0.0), (X, float("nan")), (X, 2, "b"),
             (jnp.ones(2), 1), (X, 1), (X, True)]
    for round_ in range(3):
        for args in calls:
            want, got = scaled(*args), static(*args)
            np.testing.assert_array_equal(got[0], want[0])
            assert type(got[1]) is type(want[1]) and got[2] == want[2], (args, got, want)
            if isinstance(want[1], float):
                assert str(got[1]) == str(want[1])  # -0.0 and nan kept
        if round_ == 1:
            static.clear_cache()
    assert len(static.programs) <= max_programs


def scales(x, lr=0.5, n=2, mask=None):
    for _ in range(n):
        x = x * lr
    return x if mask is None else x * mask


def test_omitted_defaults_take_the_hit_paths_as_passed_ones_do(monkeypatch):
    static = dy2st.to_static(scales)
    for _ in range(2):  # (the first call's program holds the defaults as its trace read them)
        np.testing.assert_allclose(static(X), scales(X))
        np.testing.assert_allclose(static(X, mask=X), scales(X, mask=X))
    general = []
    real = dy2st.api.StaticFunction._call_general
    monkeypatch.setattr(dy2st.api.StaticFunction, "_call_general", lambda *a: general.append(1) or real(*a))
    for _ in range(3):
        np.testing.assert_allclose(static(X), scales(X))  # defaults filled in: the statics lookup
        np.testing.assert_allclose(static(X, n=2, lr=0.5), scales(X))
    assert general == []
    try:
        scales.__defaults__ = (2.0, 1, None)  # set between calls: the next call's defaults
        np.testing.assert_allclose(static(X), scales(X))
        scales.__defaults__ = (2.0,)  # `n` and `mask` lose theirs: eager's TypeError
        with pytest.raises(TypeError, match="missing"):
            scales(X)
        with pytest.raises(TypeError, match="missing"):
            static(X)
    finally:
        scales.__defaults__ = (0.5, 2, None)


def lists_keys(d, x, s):
    return [k for k in d], x * s


def bumps(d, x, s):
    d["n"] = d["n"] + x * s
    return x


def returns_its_dict(d, x, s):
    if x.sum() > 0:
        y = x * s
    else:
        y = x
    return y, d


def reads_nested(d, x, s):
    return d["a"][0] * s + d["a"][1]["b"] + x


def sgd_with_clipping(params, x, lr):
    g = jax.grad(lambda p: jnp.sum((x @ p["l1"]["w"] + p["l1"]["b"]) ** 2))(params)
    if x.sum() > 0:
        g = jax.tree_util.tree_map(lambda v: v * 0.5, g)
    return jax.tree_util.tree_map(lambda p, v: p - lr * v, params, g)


def test_trees_of_arrays_beside_python_scalars_take_the_statics_lookup(monkeypatch):
    """A dict of params beside a learning rate found its program through the general path (the
    table's key, each dict's order: 23 us a call against 8 us for jax.jit, 12 us now); the
    statics lookup keys trees of arrays too, each dict's key order and structure, and what the
    general path did per call (write a changed dict back, give the argument back) still happens."""
    params = {"l1": {"w": jnp.ones((3, 2)), "b": jnp.zeros(2)}}
    x = jnp.ones((4, 3))
    static = dy2st.to_static(sgd_with_clipping)
    for _ in range(2):
        _same_tree(static(params, x, 0.1), sgd_with_clipping(params, x, 0.1))
    general = []
    real = dy2st.api.StaticFunction._call_general
    monkeypatch.setattr(dy2st.api.StaticFunction, "_call_general", lambda *a: general.append(1) or real(*a))
    for sign in (1.0, -1.0, 1.0):
        _same_tree(static(params, sign * x, 0.1), sgd_with_clipping(params, sign * x, 0.1))
    assert general == []
    monkeypatch.undo()
    ordered, bumping, returning, nested = map(dy2st.to_static, (lists_keys, bumps, returns_its_dict, reads_nested))
    for _ in range(3):
        for d in ({"a": X, "b": X}, {"b": X, "a": X}):  # one program per key order
            assert ordered(d, X, 0.5)[0] == lists_keys(d, X, 0.5)[0]
        eager_d, static_d = {"n": jnp.zeros(3)}, {"n": jnp.zeros(3)}
        for _ in range(3):
            bumps(eager_d, X, 0.5), bumping(static_d, X, 0.5)
        np.testing.assert_array_equal(eager_d["n"], static_d["n"])
        d = {"w": X}
        assert returning(d, X, 2.0)[1] is d and returning(d, -X, 2.0)[1] is d
        d = {"a": [X, {"b": X}]}
        for s in (3.0, 3):
            _same_tree(nested(d, X, s), reads_nested(d, X, s))


def _same_tree(got, want):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6)


def keyword_only_beside_a_scalar(x, lr, *, k=2):
    if x.sum() > 0:
        return x * lr * k
    return x


def test_the_generic_dispatchers_statics_lookup(monkeypatch):
    """A keyword-only parameter keeps the generic dispatcher (no generated one): its statics
    lookup took the lookup's `(program, arrays)` for the program and raised 'tuple' object is not
    callable on the third call."""
    static = dy2st.to_static(keyword_only_beside_a_scalar)
    for _ in range(2):
        for x in (X, -X):
            np.testing.assert_allclose(static(x, 0.5), keyword_only_beside_a_scalar(x, 0.5))
    general = []
    real = dy2st.api.StaticFunction._call_general
    monkeypatch.setattr(dy2st.api.StaticFunction, "_call_general", lambda *a: general.append(1) or real(*a))
    for x in (X, -X, X):
        np.testing.assert_allclose(static(x, 0.5), keyword_only_beside_a_scalar(x, 0.5))
        np.testing.assert_allclose(static(x, 0.5, k=3), keyword_only_beside_a_scalar(x, 0.5, k=3))
    assert len(general) == 1  # (the first keyword call builds its program; the lookup then takes keywords too)
