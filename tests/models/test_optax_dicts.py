"""An optax step over a dict of parameters in insertion order (`{"w": ..., "b": ...}`), as
training code writes it: optax's trees meet the arguments' (`tree_map(f, params, updates)`),
and the step keeps jit's own dispatch, one program for every key order, eager's results."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st

optax = pytest.importorskip("optax")

OPT = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-2))


def loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p["w"] + p["b"]) - y) ** 2)


def step(p, s, x, y):
    value, g = jax.value_and_grad(loss)(p, x, y)
    if value > 0.5:  # a data-dependent step size, staged
        g = jax.tree.map(lambda t: t * 0.5, g)
    u, s = OPT.update(g, s, p)
    return optax.apply_updates(p, u), s, value


@pytest.fixture(scope="module")
def data():
    k1, k2 = jax.random.split(jax.random.key(0))
    x = jax.random.normal(k1, (8, 3))
    return x, jnp.where(jax.random.normal(k2, (8, 3)) > 0, 2.0, 0.0)


def params(order):
    values = {"w": jnp.eye(3) * 0.5, "b": jnp.zeros(3)}
    return {k: values[k] for k in order}


def assert_same(eager, got):
    assert jax.tree.structure(eager) == jax.tree.structure(got)
    for e, g in zip(jax.tree.leaves(eager), jax.tree.leaves(got)):
        np.testing.assert_allclose(e, g, rtol=1e-5, atol=1e-6)
    assert list(eager[0]) == list(got[0]) and type(got[0]) is dict


@pytest.mark.parametrize("order", [("w", "b"), ("b", "w")])
def test_an_optax_step_over_a_dict_keeps_one_program_and_eagers_results(order, data):
    static, jitted = dy2st.to_static(step), None
    p = params(order)
    s_eager = s_static = OPT.init(p)
    p_eager = p_static = p
    for _ in range(3):
        eager = step(p_eager, s_eager, *data)
        got = static(p_static, s_static, *data)
        assert_same(eager, got)
        (p_eager, s_eager, _), (p_static, s_static, _) = eager, got
    other = params(order[::-1])  # the other order: the same program (the order is not observed)
    assert_same(step(other, OPT.init(other), *data), static(other, OPT.init(other), *data))
    assert not static.policy.orders_observed
    assert len(static.programs) == 1
    jitted = jax.jit(static)
    assert_same(step(p, OPT.init(p), *data), jitted(p, OPT.init(p), *data))
