"""W6 and W7: training steps, where arguments are pytrees and models (the real-code case).

W6 is an optax step on a list of `(w, b)` layers with the optimizer state; W7 a Flax NNX step
(model and `nnx.Optimizer` as arguments, updated in place); W8 an NNX model's forward,
`to_static(model)(x)`, its arrays lifted to program inputs on every call. Each hand-written reference is the
same code under `jax.jit` (W6) or `nnx.jit` (W7): they hold no Python control flow to rewrite,
so the difference is the cost of the call path alone.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

try:  # the `models` extra
    import optax
    from flax import nnx
except ImportError:  # pragma: no cover - the benchmarks then skip W6 and W7
    optax = nnx = None

_ADAM = optax.adam(1e-3) if optax is not None else None


def optax_step(params, opt_state, x, y):
    def loss_fn(p):
        h = x
        for w, b in p[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = p[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = _ADAM.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def optax_args():
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    sizes = (32, 64, 64, 8)
    params = [(jax.random.normal(k, (m, n), jnp.float32) / m**0.5, jnp.zeros((n,), jnp.float32))
              for k, (m, n) in zip(keys, zip(sizes[:-1], sizes[1:]))]
    x = jax.random.normal(keys[-1], (16, 32), jnp.float32)
    return params, _ADAM.init(params), x, jnp.zeros((16, 8), jnp.float32)


if nnx is not None:
    class NNXModel(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(32, 64, rngs=rngs)
            self.l2 = nnx.Linear(64, 8, rngs=rngs)

        def __call__(self, x):
            return self.l2(jnp.tanh(self.l1(x)))


def nnx_step(model, optimizer, x, y):
    def loss_fn(m):
        return jnp.mean((m(x) - y) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def nnx_args():
    model = NNXModel(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    x = jax.random.normal(jax.random.PRNGKey(4), (16, 32), jnp.float32)
    return model, optimizer, x, jnp.zeros((16, 8), jnp.float32)


def nnx_forward_parts():
    """W8: `(model, hand-written forward of x, args, fresh hand)`; the hand-written forward is
    `nnx.jit` of the same call on the same model."""
    model = NNXModel(nnx.Rngs(1))
    x = jax.random.normal(jax.random.PRNGKey(5), (16, 32), jnp.float32)

    def fresh():
        forward = nnx.jit(lambda m, x: m(x))
        return lambda x: forward(model, x)

    return model, fresh(), lambda: (x,), fresh
