"""The benchmark workloads, each written three ways: eagerly (what a user writes and what
`dy2st.to_static` converts), and by hand with `jax.jit` + `lax` (the reference dy2st is
measured against). Functions live at module level so dy2st can read their source.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
from jax import lax

# -- W1: tiny branch ------------------------------------------------------------------------


def tiny_branch(x):
    return x * 2 if x.sum() > 0 else x - 1


@jax.jit
def tiny_branch_lax(x):
    return lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, x)


# -- W2: data-dependent while (Newton's square root to tolerance) -----------------------------


def newton_sqrt(a):
    x = a
    while jnp.max(jnp.abs(x * x - a) / a) > 1e-6:
        x = 0.5 * (x + a / x)
    return x


@jax.jit
def newton_sqrt_lax(a):
    def cond(x):
        return jnp.max(jnp.abs(x * x - a) / a) > 1e-6

    return lax.while_loop(cond, lambda x: 0.5 * (x + a / x), a)


# -- W3: MLP forward with a data-dependent branch ---------------------------------------------


def mlp(params, x):
    (w1, b1), (w2, b2), (w3, b3) = params
    h = jnp.tanh(x @ w1 + b1)
    if h.mean() > 0:
        h = jnp.tanh(h @ w2 + b2)
    else:
        h = jax.nn.relu(h @ w2 + b2)
    return h @ w3 + b3


def _mlp_lax(params, x):
    (w1, b1), (w2, b2), (w3, b3) = params
    h = jnp.tanh(x @ w1 + b1)
    h = lax.cond(h.mean() > 0, lambda h: jnp.tanh(h @ w2 + b2), lambda h: jax.nn.relu(h @ w2 + b2), h)
    return h @ w3 + b3


mlp_lax = jax.jit(_mlp_lax)

# -- W4: RNN over time, a static length and a per-call length ---------------------------------


def rnn(params, xs):
    wx, wh, b = params
    h = jnp.zeros((xs.shape[1], wh.shape[0]), xs.dtype)
    for t in range(xs.shape[0]):
        h = jnp.tanh(xs[t] @ wx + h @ wh + b)
    return h


def _rnn_lax(params, xs):
    wx, wh, b = params

    def step(h, x):
        return jnp.tanh(x @ wx + h @ wh + b), None

    h0 = jnp.zeros((xs.shape[1], wh.shape[0]), xs.dtype)
    return lax.scan(step, h0, xs)[0]


rnn_lax = jax.jit(_rnn_lax)


def rnn_len(params, xs, n):
    wx, wh, b = params
    h = jnp.zeros((xs.shape[1], wh.shape[0]), xs.dtype)
    for t in range(n):
        h = jnp.tanh(xs[t] @ wx + h @ wh + b)
    return h


def _rnn_len_lax(params, xs, n):
    wx, wh, b = params

    def step(t, h):
        return jnp.tanh(xs[t] @ wx + h @ wh + b)

    h0 = jnp.zeros((xs.shape[1], wh.shape[0]), xs.dtype)
    return lax.fori_loop(0, n, step, h0)


rnn_len_lax = jax.jit(_rnn_len_lax)

# -- inputs ---------------------------------------------------------------------------------


def mlp_params(key, sizes=(256, 256, 256, 256)):
    params = []
    for k, (m, n) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((jax.random.normal(k, (m, n), jnp.float32) / m**0.5, jnp.zeros((n,), jnp.float32)))
    return tuple(params)


def rnn_params(key, d_in=128, d_h=128):
    k1, k2 = jax.random.split(key)
    return (
        jax.random.normal(k1, (d_in, d_h), jnp.float32) / d_in**0.5,
        jax.random.normal(k2, (d_h, d_h), jnp.float32) / d_h**0.5,
        jnp.zeros((d_h,), jnp.float32),
    )


@dataclasses.dataclass
class Workload:
    """One benchmark: the eager function (also what dy2st converts), the hand-written
    reference, and how to make its arguments and a fresh reference (for first-call timings)."""

    name: str
    title: str
    eager: Callable
    hand: Callable
    args: Callable[[], tuple]
    fresh_hand: Callable[[], Callable]
    first_call: bool = False  # time the first call (W5)


def train_workloads() -> list[Workload]:
    """W6 (optax step), W7 (Flax NNX step) and W8 (NNX forward), when the `models` extra is installed."""
    import train_workloads as tw

    if tw.optax is None:
        return []
    model, forward, forward_args, fresh_forward = tw.nnx_forward_parts()
    return [
        Workload("W6", "optax adam step, list of 3 (w, b)", tw.optax_step, jax.jit(tw.optax_step), tw.optax_args,
                 lambda: jax.jit(lambda *a: tw.optax_step(*a))),
        Workload("W7", "Flax NNX step, model + optimizer", tw.nnx_step, tw.nnx.jit(tw.nnx_step), tw.nnx_args,
                 lambda: tw.nnx.jit(lambda *a: tw.nnx_step(*a))),
        Workload("W8", "Flax NNX forward, to_static(model)", model, forward, forward_args, fresh_forward),
    ]


def real_workloads() -> list[Workload]:
    """W9-W12: the arguments real programs pass (a dict cache and a key, a list of arrays, a
    mask, an Equinox model), against `jax.jit` / `eqx.filter_jit` of the same function."""
    import real_workloads as rw

    found = [
        Workload("W9", "sampler step, dict cache + PRNG key", rw.sampler_step, jax.jit(rw.sampler_step),
                 rw.sampler_args, lambda: jax.jit(lambda *a: rw.sampler_step(*a))),
        Workload("W10", "HMM EM step, list of 3 arrays", rw.em_step, jax.jit(rw.em_step), rw.em_args,
                 lambda: jax.jit(lambda *a: rw.em_step(*a))),
        Workload("W11", "attention forward with a mask", rw.attention, jax.jit(rw.attention), rw.attention_args,
                 lambda: jax.jit(lambda *a: rw.attention(*a))),
        Workload("W13", "CG solver, Python while + counter", rw.cg_solve, jax.jit(rw.cg_solve_lax), rw.cg_args,
                 lambda: jax.jit(lambda *a: rw.cg_solve_lax(*a))),
        Workload("W14", "MLP step, Python scalars (steps, flag, lr)", rw.scalar_step,
                 jax.jit(rw.scalar_step, static_argnums=(2, 3, 4)), rw.scalar_args,
                 lambda: jax.jit(lambda *a: rw.scalar_step(*a), static_argnums=(2, 3, 4))),
    ]
    if rw.eqx is not None:
        model, forward, forward_args, fresh_forward = rw.equinox_parts()
        found.append(Workload("W12", "Equinox MLP forward, to_static(model)", model, forward, forward_args,
                              fresh_forward))
    return found


def workloads() -> list[Workload]:
    key = jax.random.PRNGKey(0)
    x16 = jnp.linspace(-1.0, 2.0, 16, dtype=jnp.float32)
    a64 = jnp.linspace(1.0, 100.0, 64, dtype=jnp.float32)
    params3 = mlp_params(key)
    xb = jax.random.normal(jax.random.PRNGKey(1), (64, 256), jnp.float32)
    rparams = rnn_params(key)
    xs = jax.random.normal(jax.random.PRNGKey(2), (100, 32, 128), jnp.float32)
    n = jnp.asarray(100, jnp.int32)
    return [
        Workload("W1", "tiny branch, f32[16]", tiny_branch, tiny_branch_lax, lambda: (x16,),
                 lambda: jax.jit(lambda x: lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, x))),
        Workload("W2", "Newton while to tol, f32[64]", newton_sqrt, newton_sqrt_lax, lambda: (a64,),
                 lambda: jax.jit(lambda a: newton_sqrt_lax.__wrapped__(a))),
        Workload("W3", "MLP 3x256, batch 64, branch", mlp, mlp_lax, lambda: (params3, xb),
                 lambda: jax.jit(lambda p, x: _mlp_lax(p, x)), first_call=True),
        Workload("W4", "RNN for range(100), [100,32,128]", rnn, rnn_lax, lambda: (rparams, xs),
                 lambda: jax.jit(lambda p, x: _rnn_lax(p, x)), first_call=True),
        Workload("W4n", "RNN for range(n), n per call", rnn_len, rnn_len_lax, lambda: (rparams, xs, n),
                 lambda: jax.jit(lambda p, x, n: _rnn_len_lax(p, x, n)), first_call=True),
        *train_workloads(),
        *real_workloads(),
    ]
