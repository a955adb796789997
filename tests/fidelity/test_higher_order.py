"""Callables handed to JAX's, Flax NNX's and Equinox's higher-order functions inside converted
code are converted (runtime/higher_order.py): a Python `if` on their traced arguments stages as it
would had the user decorated them. Compared with applying `to_static` to the argument by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import dy2st

W = jnp.array([[1.0, -0.5], [0.25, 2.0]])
X = jnp.array([[1.0, -2.0], [0.5, 0.5], [-3.0, 1.0]])


def loss(w, x):
    y = x @ w
    if y.sum() > 0:
        return (y ** 2).sum()
    return -y.sum()


def per_row(xi):
    if xi.sum() > 0:
        return xi * 2
    return xi - 1


def scan_body(c, xi):
    if xi.sum() > 0:
        c = c + xi.sum()
    return c, c * 2


def fori_body(i, a):
    if a > 3:
        a = a - 1.0
    else:
        a = a + 2.0
    return a


def while_cond(state):
    i, a = state
    if a.sum() > 100:
        return False
    return i < 5


def while_body(state):
    i, a = state
    if a.sum() > 0:
        a = a * 2
    return i + 1, a


def branch_pos(a):
    return a + 1 if a.sum() > 0 else a


def branch_neg(a):
    return a * 3 if a.sum() > 0 else a - 3


def uses_jax(w, x):
    g = jax.grad(loss)(w, x)
    v, gx = jax.value_and_grad(loss, argnums=1)(w, x)
    ys = jax.vmap(per_row)(x)
    c, cs = lax.scan(scan_body, 0.0, x)
    f = lax.fori_loop(0, 4, fori_body, 0.0)
    _, loop = lax.while_loop(while_cond, while_body, (0, w))
    t = jax.tree.map(branch_pos, {"a": w, "b": -w})
    s = lax.switch(1, [branch_pos, branch_neg], w)
    k = lax.cond(x.sum() > 0, branch_pos, branch_neg, w)
    m = lax.map(per_row, x)
    r = jax.checkpoint(per_row)(x[0])
    return g, v, gx, ys, c, cs, f, loop, t, s, k, m, r


def by_hand(w, x):
    S = dy2st.to_static
    g = jax.grad(S(loss))(w, x)
    v, gx = jax.value_and_grad(S(loss), argnums=1)(w, x)
    ys = jax.vmap(S(per_row))(x)
    c, cs = lax.scan(S(scan_body), 0.0, x)
    f = lax.fori_loop(0, 4, S(fori_body), 0.0)
    _, loop = lax.while_loop(S(while_cond), S(while_body), (0, w))
    t = jax.tree.map(S(branch_pos), {"a": w, "b": -w})
    s = lax.switch(1, [S(branch_pos), S(branch_neg)], w)
    k = lax.cond(x.sum() > 0, S(branch_pos), S(branch_neg), w)
    m = lax.map(S(per_row), x)
    r = jax.checkpoint(S(per_row))(x[0])
    return g, v, gx, ys, c, cs, f, loop, t, s, k, m, r


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_callables_handed_to_jax_are_converted(sign):
    w, x = W * sign, X * sign
    expected = by_hand(w, x)
    static, jitted = dy2st.to_static(uses_jax), jax.jit(dy2st.to_static(uses_jax))
    for run in (static, static, jitted, jitted):
        for got, want in zip(jax.tree.leaves(run(w, x)), jax.tree.leaves(expected)):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_flax_and_equinox_transforms_convert_their_callables():
    nnx = pytest.importorskip("flax.nnx")
    eqx = pytest.importorskip("equinox")

    def step(w, x):
        g1 = nnx.grad(loss)(w, x)
        g2 = eqx.filter_grad(loss)(w, x)
        ys = eqx.filter_vmap(per_row)(x)
        zs = nnx.vmap(per_row)(x)
        return g1, g2, ys, zs

    static = dy2st.to_static(step)
    want = (jax.grad(dy2st.to_static(loss))(W, X), jax.grad(dy2st.to_static(loss))(W, X),
            jax.vmap(dy2st.to_static(per_row))(X), jax.vmap(dy2st.to_static(per_row))(X))
    for _ in range(2):
        for got, expected in zip(static(W, X), want):
            np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_explain_reports_the_converted_callables():
    report = str(dy2st.explain(uses_jax, W, X))
    assert "converted call: loss" in report and "converted call: per_row" in report
    assert "converted call: scan_body" in report


WRAPPED_CALLS = []


def logged(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        WRAPPED_CALLS.append(fn.__name__)
        return fn(*args, **kwargs)

    return wrapper


@logged
def decorated_helper(x):
    if x.sum() > 0:
        return x * 2
    return -x


def calls_a_decorated_helper(x):
    return decorated_helper(x) + 1


@pytest.mark.parametrize("x", [X, -X])
def test_a_helper_wrapped_by_the_users_own_decorator_is_converted(x):
    """The wrapper (`functools.wraps`) is the user's code: converted, and so is the function it
    calls, whose `if` on traced values stages; the wrapper's own effect happens on every call."""
    static = dy2st.to_static(calls_a_decorated_helper)
    for fn in (static, jax.jit(static), static):
        WRAPPED_CALLS.clear()
        np.testing.assert_array_equal(fn(x), calls_a_decorated_helper(x))
        assert WRAPPED_CALLS == ["decorated_helper"] * 2  # (the converted call's, then eager's)
    jax.tree_util.tree_map(np.testing.assert_allclose, jax.grad(lambda v: static(v).sum())(x),
                           jax.grad(lambda v: calls_a_decorated_helper(v).sum())(x))
