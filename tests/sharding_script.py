"""Sharding checks run on 8 host CPU devices; `tests/test_sharding.py` runs this in a subprocess
with XLA_FLAGS=--xla_force_host_platform_device_count=8 (the flag must be set before jax starts).

Prints one line per check, `PASS <name>` or `FAIL <name>: <why>`, and exits 0 if all passed.
"""

import sys
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import dy2st

jax.config.update("jax_platforms", "cpu")
MESH = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
DATA = NamedSharding(MESH, P("data"))
REPLICATED = NamedSharding(MESH, P())


def close(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-5)


def branchy(x, w):
    h = x @ w
    if h.mean() > 0:  # data-dependent: reads every shard
        h = jnp.tanh(h) * 2
    elif (h < -1).any():
        return jnp.zeros_like(h), -1
    else:
        h = h - 1
    scale = 2.0 if h.max() > 1 else 0.5
    return h * scale, 1


def _inputs(sign):
    x = jnp.arange(16 * 4, dtype=jnp.float32).reshape(16, 4) / 64 * sign
    w = jnp.eye(4, dtype=jnp.float32) + 0.1
    return x, w


def check_sharded_matches_unsharded():
    """Every branch: the sharded run is one SPMD program whose result equals the unsharded one."""
    f = dy2st.to_static(branchy)
    for sign in (1.0, -1.0, -0.01):
        x, w = _inputs(sign)
        expected = branchy(x, w)
        close(f(x, w), expected)
        xs, ws = jax.device_put(x, DATA), jax.device_put(w, REPLICATED)
        out = f(xs, ws)
        close(out, expected)
        assert len(out[0].sharding.device_set) == 8, f"output on {out[0].sharding}"


def check_cache_keyed_by_sharding():
    """A new input sharding gives a new program in `.programs`; a repeat call reuses it."""
    f = dy2st.to_static(branchy)
    x, w = _inputs(1.0)
    f(x, w)
    assert len(f.programs) == 1, f.programs
    xs, ws = jax.device_put(x, DATA), jax.device_put(w, REPLICATED)
    f(xs, ws)
    f(xs, ws)
    assert len(f.programs) == 2, f"expected a second program for sharded inputs, got {f.programs}"
    f(x, w)
    assert len(f.programs) == 2, f.programs


def check_in_out_shardings():
    """in_shardings places unsharded inputs on the mesh; out_shardings places the outputs."""
    f = dy2st.to_static(branchy, in_shardings=(DATA, REPLICATED), out_shardings=(DATA, None))
    for sign in (1.0, -1.0, -0.01):
        x, w = _inputs(sign)
        out = f(x, w)
        close(out, branchy(x, w))
        assert out[0].sharding.is_equivalent_to(DATA, 2), out[0].sharding
    text = f.programs[0].as_text()
    assert "sharding" in text, "the program's StableHLO carries no sharding annotation"


def check_in_shardings_with_static_args():
    """A Python argument is static: shardings apply to the array leaves only."""

    def g(x, n, pair):
        a, b = pair
        if n > 1:  # Python condition
            x = x * n
        if x.sum() > 0:  # staged
            return x + a - b
        return x - a

    x, _ = _inputs(1.0)
    a, b = jnp.ones((16, 4)), jnp.full((16, 4), 0.5)
    f = dy2st.to_static(g, in_shardings=(DATA, None, (DATA, REPLICATED)))
    for n, sign in ((3, 1.0), (1, -1.0)):
        out = f(x * sign, n, (a, b))
        close(out, g(x * sign, n, (a, b)))
        assert out.sharding.is_equivalent_to(DATA, 2), out.sharding


def mlp(params, x):
    h = x @ params["w1"] + params["b1"]
    if h.mean() > 0:  # a data-dependent choice of activation, over the whole global batch
        h = jax.nn.relu(h)
    else:
        h = jnp.tanh(h)
    return h @ params["w2"]


forward = dy2st.to_static(mlp)


def loss_fn(params, x, y):
    pred = forward(params, x)[:, 0]
    return jnp.mean((pred - y) ** 2)


def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    norm = jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree_util.tree_leaves(grads)))
    if norm > 1.0:  # data-dependent gradient clipping
        grads = jax.tree_util.tree_map(lambda g: g / norm, grads)
    params = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
    return params, loss


def check_data_parallel_training():
    """Params replicated, batch sharded: the steps equal the unsharded eager steps."""
    k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
    params = {
        "w1": jax.random.normal(k1, (8, 16)) * 0.5,
        "b1": jnp.zeros(16),
        "w2": jax.random.normal(k2, (16, 1)) * 0.5,
    }
    x = jax.random.normal(k3, (64, 8))
    y = jax.random.normal(k4, (64,))
    step = dy2st.to_static(
        train_step,
        in_shardings=(REPLICATED, DATA, DATA),
        out_shardings=(REPLICATED, REPLICATED),
    )
    eager_params, params_sharded = params, jax.device_put(params, REPLICATED)
    losses = []
    for i in range(4):
        shift = 2.0 if i % 2 else -2.0  # flip the activation branch between steps
        xi = x + shift
        eager_params, eager_loss = train_step(eager_params, xi, y)
        params_sharded, loss = step(params_sharded, jax.device_put(xi, DATA), jax.device_put(y, DATA))
        close(loss, eager_loss)
        close(params_sharded, eager_params)
        losses.append(float(loss))
    for leaf in jax.tree_util.tree_leaves(params_sharded):
        assert leaf.sharding.is_equivalent_to(REPLICATED, leaf.ndim), leaf.sharding
    assert len(step.programs) == 1, step.programs
    hlo = step.programs[0].as_text()
    assert "cond" in hlo or "case" in hlo, "the staged ifs are missing from the program"


def check_nnx_partitioned_model():
    """An NNX model whose parameters carry partitioning annotations (`nnx.with_partitioning`),
    placed on a 2x4 mesh: `to_static(model)` keeps the outputs' and the updated parameters'
    shardings, its program holds the collectives, and the values equal the eager forward's."""
    import re

    from flax import nnx

    from dy2st.state import Layout

    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))

    class Block(nnx.Module):
        def __init__(self, rngs):
            init = nnx.initializers.lecun_normal()
            self.l1 = nnx.Linear(16, 32, kernel_init=nnx.with_partitioning(init, (None, "model")), rngs=rngs)
            self.l2 = nnx.Linear(32, 8, kernel_init=nnx.with_partitioning(init, ("model", None)), rngs=rngs)
            self.count = nnx.Variable(jnp.zeros((), jnp.int32))

        def __call__(self, x):
            h = jnp.tanh(self.l1(x))
            if h.mean() > 0:  # data-dependent: a lax.cond
                h = h * 2
            self.count.value += 1
            return self.l2(h)

    def placed():
        model = Block(nnx.Rngs(0))
        state = nnx.state(model)
        return nnx.merge(nnx.graphdef(model), jax.device_put(state, nnx.get_named_sharding(state, mesh)))

    with jax.set_mesh(mesh):
        model, eager = placed(), placed()
        kernel_sharding = model.l1.kernel.value.sharding
        x = jax.device_put(jnp.linspace(-1.0, 1.0, 8 * 16).reshape(8, 16), NamedSharding(mesh, P("data")))
        forward = dy2st.to_static(model)
        for sign in (1.0, -1.0, 1.0):
            y, want = forward(x * sign), eager(x * sign)
            close(y, want)
        assert y.sharding.spec == P("data"), y.sharding
        assert model.l1.kernel.value.sharding == kernel_sharding, model.l1.kernel.value.sharding
        assert int(model.count.value) == int(eager.count.value) == 3
        (program,) = forward.programs
        compiled = program._jitted.lower(*Layout([model]).leaves, x).compile().as_text()
        assert re.search(r"all-reduce|reduce-scatter|all-gather", compiled), "no collective in the program"


CHECKS = [
    check_sharded_matches_unsharded,
    check_cache_keyed_by_sharding,
    check_in_out_shardings,
    check_in_shardings_with_static_args,
    check_data_parallel_training,
    check_nnx_partitioned_model,
]


def main() -> int:
    assert len(jax.devices()) == 8, f"expected 8 CPU devices, got {jax.devices()}"
    failed = 0
    for check in CHECKS:
        try:
            check()
            print(f"PASS {check.__name__}", flush=True)
        except Exception:  # noqa: BLE001 - reported per check
            failed += 1
            why = traceback.format_exc().strip().replace("\n", "\n    ")
            print(f"FAIL {check.__name__}: {why}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
