"""Equinox modules: to_static __call__ on an immutable pytree module, eqx.filter_grad /
filter_jit, state passed as eqx.nn.State, and apply_updates without recompiling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.testing import _assert_tree_close
from dy2st.testing.models import run_eagerly

pytestmark = pytest.mark.models
eqx = pytest.importorskip("equinox")
optax = pytest.importorskip("optax")

POS = jnp.linspace(0.1, 1.0, 12).reshape(3, 4)
NEG = -POS


class Net(eqx.Module):
    layers: list
    depth_limit: int = 3

    def __init__(self, width=6, seed=0):
        k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
        self.layers = [eqx.nn.Linear(4, width, key=k1), eqx.nn.Linear(width, 2, key=k2)]

    @dy2st.to_static
    def __call__(self, x):
        h = jax.vmap(self.layers[0])(x)
        if h.mean() > 0:
            h = jax.nn.relu(h)
        else:
            h = -h * self.depth_limit
        return jax.vmap(self.layers[1])(h)


def loss(model, x):
    return jnp.sum(model(x) ** 2)


@pytest.mark.parametrize("x", [POS, NEG], ids=["pos", "neg"])
def test_outputs_and_filter_grad(x):
    model = Net()
    _assert_tree_close(run_eagerly(model, x), model(x), "output")
    g_static = eqx.filter_grad(loss)(model, x)
    g_eager = run_eagerly(eqx.filter_grad(loss), model, x)
    _assert_tree_close(eqx.filter(g_eager, eqx.is_array), eqx.filter(g_static, eqx.is_array), "filter_grad")
    _assert_tree_close(run_eagerly(model, x), eqx.filter_jit(lambda m, x: m(x))(model, x), "filter_jit")


def test_apply_updates_reuses_the_program_and_shape_change_recompiles():
    model = Net()
    model(POS)
    count = len(Net.__call__.programs)
    opt = optax.adam(0.05)
    state = opt.init(eqx.filter(model, eqx.is_array))
    for x in (POS, NEG, POS):
        grads = eqx.filter_grad(loss)(model, x)
        updates, state = opt.update(grads, state)
        model = eqx.apply_updates(model, updates)
        _assert_tree_close(run_eagerly(model, x), model(x), "after update")
    assert len(Net.__call__.programs) == count
    Net(width=5)(POS)
    assert len(Net.__call__.programs) == count + 1


class Stateful(eqx.Module):
    """Running statistics live in eqx.nn.State, passed in and returned (Equinox's way)."""

    lin: eqx.nn.Linear
    norm: eqx.nn.BatchNorm

    def __init__(self):
        self.lin = eqx.nn.Linear(4, 3, key=jax.random.PRNGKey(2))
        self.norm = eqx.nn.BatchNorm(3, axis_name="batch", mode="batch")

    def __call__(self, x, state):
        h = jax.vmap(self.lin)(x)
        if h.sum() > 0:
            h, state = jax.vmap(self.norm, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(h, state)
        return h, state


def test_to_static_model_with_eqx_state():
    model, state = eqx.nn.make_with_state(Stateful)()
    f = dy2st.to_static(model)
    static_state = eager_state = state
    for x in (POS, NEG, POS):
        y_static, static_state = f(x, static_state)
        y_eager, eager_state = model(x, eager_state)
        _assert_tree_close(y_eager, y_static, "output", atol=1e-5)
    _assert_tree_close(jax.tree_util.tree_leaves(eager_state), jax.tree_util.tree_leaves(static_state), "state", atol=1e-5)
    assert len(f.programs) == 1


class _Counter(eqx.Module):
    idx: eqx.nn.StateIndex

    def __init__(self):
        self.idx = eqx.nn.StateIndex(jnp.array(0.0))

    def __call__(self, x, state):
        c = state.get(self.idx)
        return x + c, state.set(self.idx, c + 1)


class _TwoCounters(eqx.Module):
    a: _Counter
    b: _Counter

    def __init__(self):
        self.a, self.b = _Counter(), _Counter()


def _thread_state(net, state, x, n):
    for _ in range(n):
        x, state = net.a(x, state)
        x, state = net.b(x, state)
        if x.sum() > 100:
            break
    return x, state


def test_eqx_state_threaded_through_stateful_layers():
    # `state.set` marks the State it was called on as used: the program's trace did that to its
    # own copy, and dy2st's check of the arguments after the trace met Equinox's raw ValueError
    static = dy2st.to_static(_thread_state)
    (net, eager_state), (_, static_state) = eqx.nn.make_with_state(_TwoCounters)(), \
        eqx.nn.make_with_state(_TwoCounters)()
    x = jnp.ones(3)
    for n in (1, 2, 0, 3):
        given_eager, given_static = eager_state, static_state
        y_eager, eager_state = _thread_state(net, eager_state, x, n)
        y_static, static_state = static(net, static_state, x, n)
        _assert_tree_close(y_eager, y_static, "output")
        _assert_tree_close(jax.tree_util.tree_leaves(eager_state), jax.tree_util.tree_leaves(static_state), "state")
        if n:  # eagerly the State given is used up, as the caller's is now
            for used in (given_eager, given_static):
                with pytest.raises(ValueError, match="old state"):
                    jax.tree_util.tree_leaves(used)


def _halve_and_run(model, x):
    model = jax.tree.map(lambda p: p * 0.5 if eqx.is_array(p) else p, model)
    return model, jax.vmap(model)(x).sum()


def test_an_updated_mlp_is_returned():
    # its activation, `jax.nn.relu`, is a custom_jvp: refused as a non-array output before, which
    # blocked Equinox's `return model, opt_state, loss`
    model = eqx.nn.MLP(3, 1, 8, 2, key=jax.random.PRNGKey(0))
    x = jnp.ones((4, 3))
    static = dy2st.to_static(_halve_and_run)
    for _ in range(2):
        (want_model, want), (got_model, got) = _halve_and_run(model, x), static(model, x)
        assert got_model.activation is want_model.activation is jax.nn.relu
        _assert_tree_close(eqx.filter(want_model, eqx.is_array), eqx.filter(got_model, eqx.is_array), "model")
        _assert_tree_close(want, got, "loss")


class AutoEncoder(eqx.Module):
    enc: eqx.nn.Linear
    dec: eqx.nn.Linear

    def __init__(self, seed=0):
        k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
        self.enc = eqx.nn.Linear(4, 2, key=k1)
        self.dec = eqx.nn.Linear(2, 4, key=k2)

    def encode(self, x):
        z = self.enc(x)
        if jnp.linalg.norm(z) > 1.0:  # an `if` on data in a helper method the forward calls
            z = z / jnp.linalg.norm(z)
        return z

    def __call__(self, x):
        return self.dec(self.encode(x))


@pytest.mark.parametrize("scale", [1.0, 0.01])
def test_a_helper_method_of_an_equinox_module_is_converted(scale):
    """Equinox binds a module's methods as its own `BoundMethod` (a pytree, not Python's bound
    method): it was run as library code, so its `if` on data was refused (found by a probe)."""
    model = AutoEncoder()
    x = jnp.arange(4.0) * scale
    static = dy2st.to_static(model)
    for _ in range(2):
        _assert_tree_close(run_eagerly(model, x), static(x), "output")
    _assert_tree_close(run_eagerly(model, x), jax.jit(dy2st.to_static(lambda m, x: m(x)))(model, x), "jit")


class Decoder(eqx.Module):
    w: jax.Array

    def decode(self, h):
        print("decode", h.shape[0])
        t = 0
        while h.sum() < 10.0 and t < 5:  # a data-dependent loop in the method itself
            h = h * self.w
            t += 1
        return h


def test_to_static_of_an_equinox_modules_bound_method_converts_it(capsys):
    """(Probe of real-model code: `to_static(m.decode)`, an Equinox `BoundMethod`, ran the method
    as it is: its print ran once, while tracing, and its data-dependent loop was refused.)"""
    m = Decoder(jnp.float32(2.0))
    static = dy2st.to_static(m.decode)
    for h in (jnp.ones(2), jnp.full(2, 20.0), jnp.ones(2)):
        want = m.decode(h)
        eager = capsys.readouterr().out
        for _ in range(2):
            np.testing.assert_allclose(static(h), want)
            jax.effects_barrier()
            assert capsys.readouterr().out == eager
