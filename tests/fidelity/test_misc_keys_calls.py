"""issue 13, class 10 (a, e, f): typed PRNG keys, library callables and library modules."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.testing import check_equivalent


def _same_dtypes(expected, actual):
    exp = [jnp.asarray(l).dtype for l in jax.tree_util.tree_leaves(expected)]
    act = [jnp.asarray(l).dtype for l in jax.tree_util.tree_leaves(actual)]
    assert exp == act


def keyed_branch_and_loops(key, x):
    if x.sum() > 0:
        key, sub = jax.random.split(key)
        x = x + jax.random.normal(sub, x.shape)
    for _ in range(3):
        key, sub = jax.random.split(key)
        x = x + jax.random.uniform(sub, x.shape)
    n = 0
    while x.sum() > -5.0 and n < 3:
        key, sub = jax.random.split(key)
        x = x - jax.random.uniform(sub, x.shape)
        n += 1
    return x, jax.random.key_data(key)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_typed_key_through_branches_and_loops(sign):
    x = jnp.full(3, sign)
    expected = keyed_branch_and_loops(jax.random.key(0), x)
    static = dy2st.to_static(keyed_branch_and_loops)
    for out in (static(jax.random.key(0), x), jax.jit(static)(jax.random.key(0), x)):
        np.testing.assert_allclose(out[0], expected[0], rtol=1e-5)
        np.testing.assert_array_equal(out[1], expected[1])


def test_typed_key_returned_from_staged_if():
    def f(key, x):
        if x.sum() > 0:
            key = jax.random.split(key)[0]
        return jax.random.key_data(key)

    for x in (jnp.ones(2), -jnp.ones(2)):
        np.testing.assert_array_equal(dy2st.to_static(f)(jax.random.key(1), x), f(jax.random.key(1), x))


def test_typed_key_mismatch_is_a_clear_error():
    def f(key, x):
        if x.sum() > 0:
            key = jnp.zeros((), jnp.float32)
        return key

    with pytest.raises(dy2st.errors.BranchOutputError, match="PRNG key"):
        dy2st.to_static(f)(jax.random.key(0), jnp.ones(2))


@pytest.mark.parametrize("fn", [jax.nn.relu, jnp.tanh, jax.nn.softmax, jnp.linalg.norm,
                                functools.partial(jnp.clip, min=0.0)])
def test_jax_callables_run_as_is(fn):
    check_equivalent(fn, jnp.array([-1.0, 2.0, 0.5]))


@pytest.mark.parametrize("fn, arg", [(np.sin, np.array([-1.0, 2.0])), (len, [3, 1]), (sorted, [3, 1]),
                                     (math.sqrt, 4.0), (np.linalg.norm, np.array([3.0, 4.0]))])
def test_numpy_and_builtin_callables_run_as_is(fn, arg):
    expected = fn(arg)
    out = dy2st.to_static(fn)(arg)
    assert type(out) is type(expected)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected))


def test_wraps_of_jax_function():
    @functools.wraps(jax.nn.relu)
    def wrapper(x):
        return jax.nn.relu(x) * 2

    check_equivalent(wrapper, jnp.array([-1.0, 2.0]))


def test_nnx_linear_object():
    nnx = pytest.importorskip("flax.nnx")
    model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    x = jnp.ones((1, 3))
    static = dy2st.to_static(model)
    np.testing.assert_allclose(static(x), model(x), rtol=1e-6)
    model.kernel[...] = model.kernel[...] * 2  # new parameter values reach the program
    np.testing.assert_allclose(static(x), model(x), rtol=1e-6)


def test_nnx_module_with_rngs_and_branch():
    nnx = pytest.importorskip("flax.nnx")

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.a = nnx.Linear(3, 3, rngs=rngs)
            self.b = nnx.Linear(3, 2, rngs=rngs)
            self.key = rngs.params()  # a typed key held by the module

        def __call__(self, x):
            h = self.a(x)
            if h.sum() > 0:
                h = jax.nn.relu(h)
            else:
                h = -h
            return self.b(h) + jax.random.normal(self.key, (2,))

    net = Net(nnx.Rngs(0))
    for x in (jnp.ones((1, 3)), -jnp.ones((1, 3))):
        np.testing.assert_allclose(dy2st.to_static(net)(x), net(x), rtol=1e-5)


def test_equinox_mlp_object():
    eqx = pytest.importorskip("equinox")
    mlp = eqx.nn.MLP(3, 2, 4, 2, key=jax.random.PRNGKey(0))
    x = jnp.ones(3)
    out = dy2st.to_static(mlp)(x)
    np.testing.assert_allclose(out, mlp(x), rtol=1e-6)
    _same_dtypes(mlp(x), out)


@jax.custom_jvp
def clipped_log(x):
    return jnp.log(x)


clipped_log.defjvp(lambda primals, tangents: (jnp.log(primals[0]), tangents[0] / jnp.maximum(primals[0], 0.5)))


def test_custom_jvp_object_keeps_its_rule():
    x = jnp.array([0.25, 2.0])
    static = dy2st.to_static(clipped_log)
    np.testing.assert_allclose(static(x), clipped_log(x))
    grad = jax.grad(lambda v: static(v).sum())(x)
    np.testing.assert_allclose(grad, jax.grad(lambda v: clipped_log(v).sum())(x))


def test_jit_wrapped_user_function_still_converts():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return -x

    for x in (jnp.ones(2), -jnp.ones(2)):
        np.testing.assert_allclose(dy2st.to_static(jax.jit(f))(x), f(x))
