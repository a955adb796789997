"""W9-W12: calls shaped like real programs' (the arguments real code passes), against `jax.jit`
(or `eqx.filter_jit`) of the same function in the same run. They hold no Python control flow to
rewrite: the difference is the cost of the call path alone, with the arguments real code passes.

W9  an autoregressive sampler step: a dict cache `{"h", "n"}`, a prompt, a PRNG key;
W10 an HMM EM step: a list of three arrays, a sequence, an int array;
W11 an attention forward with a mask (four arrays, one a bool mask);
W12 an Equinox MLP's forward, `to_static(model)(x)`, against `eqx.filter_jit` of the same call.
W13 a conjugate-gradient solver with a Python `while` returning its iteration count (a Python
    int the data decides: the numbers rule's 0-d array, with no host round trip per call),
    against `jax.jit` of the same algorithm written with `lax.while_loop`.
W14 an MLP step given Python scalars, as training code passes them (a number of inner steps, a
    `train` flag, a learning rate), against `jax.jit` with those arguments static.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

try:  # the `models` extra
    import equinox as eqx
except ImportError:  # pragma: no cover - W12 is then skipped
    eqx = None


def sampler_step(cache, prompt, key):
    h = jnp.tanh(cache["h"] @ prompt["w"] + prompt["emb"][cache["n"] % prompt["emb"].shape[0]])
    logits = h @ prompt["w_out"]
    key, sub = jax.random.split(key)
    token = jax.random.categorical(sub, logits)
    return {"h": h, "n": cache["n"] + 1}, token, key


def sampler_args():
    k = jax.random.split(jax.random.PRNGKey(7), 4)
    cache = {"h": jnp.zeros((64,), jnp.float32), "n": jnp.asarray(0, jnp.int32)}
    prompt = {"w": jax.random.normal(k[0], (64, 64)) / 8, "emb": jax.random.normal(k[1], (16, 64)),
              "w_out": jax.random.normal(k[2], (64, 32)) / 8}
    return cache, prompt, k[3]


def em_step(params, seq, iters):
    """One EM step of a discrete HMM: params = [initial, transition, emission] probabilities."""
    pi, a, b = params
    alpha = pi * b[:, seq[0]]
    alpha = alpha / alpha.sum()
    for t in range(1, seq.shape[0]):
        alpha = (alpha @ a) * b[:, seq[t]]
        alpha = alpha / alpha.sum()
    new_a = a * 0.9 + 0.1 * jnp.outer(alpha, alpha)
    new_a = new_a / new_a.sum(axis=1, keepdims=True)
    return [alpha, new_a, b], iters + 1


def em_args():
    k = jax.random.split(jax.random.PRNGKey(8), 3)
    pi = jax.nn.softmax(jax.random.normal(k[0], (4,)))
    a = jax.nn.softmax(jax.random.normal(k[1], (4, 4)), axis=1)
    b = jax.nn.softmax(jax.random.normal(k[2], (4, 6)), axis=1)
    seq = jnp.arange(12, dtype=jnp.int32) % 6
    return [pi, a, b], seq, jnp.asarray(0, jnp.int32)


def attention(q, k, v, mask):
    scores = q @ k.T / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    scores = jnp.where(mask, scores, -1e9)
    return jax.nn.softmax(scores, axis=-1) @ v


def attention_args():
    ks = jax.random.split(jax.random.PRNGKey(9), 3)
    q, k, v = (jax.random.normal(key, (32, 64)) for key in ks)
    return q, k, v, jnp.tril(jnp.ones((32, 32), bool))


def equinox_parts():
    """W12: `(model, hand-written forward of x, args, fresh hand)`."""
    model = eqx.nn.MLP(64, 32, 128, 2, key=jax.random.PRNGKey(10))
    x = jax.random.normal(jax.random.PRNGKey(11), (64,))

    def fresh():
        forward = eqx.filter_jit(lambda m, x: m(x))
        return lambda x: forward(model, x)

    return model, fresh(), lambda: (x,), fresh


def cg_solve(a, b, tol):
    """Conjugate gradients as one writes it eagerly: a Python `while` and a Python counter."""
    x = jnp.zeros_like(b)
    r = b - a @ x
    p = r
    rs = r @ r
    k = 0
    while jnp.sqrt(rs) > tol and k < 50:
        ap = a @ p
        alpha = rs / (p @ ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = r @ r
        p = r + (rs_new / rs) * p
        rs = rs_new
        k += 1
    return x, k


def cg_solve_lax(a, b, tol):
    """The same algorithm by hand: `lax.while_loop` over (x, r, p, rs, k)."""
    def cond(state):
        _, _, _, rs, k = state
        return (jnp.sqrt(rs) > tol) & (k < 50)

    def body(state):
        x, r, p, rs, k = state
        ap = a @ p
        alpha = rs / (p @ ap)
        x = x + alpha * p
        r = r - alpha * ap
        rs_new = r @ r
        return x, r, r + (rs_new / rs) * p, rs_new, k + 1

    r = b - a @ jnp.zeros_like(b)
    x, _, _, _, k = jax.lax.while_loop(cond, body, (jnp.zeros_like(b), r, r, r @ r, jnp.asarray(0)))
    return x, k


def cg_args():
    m = jax.random.normal(jax.random.PRNGKey(12), (32, 32))
    return m @ m.T + 32 * jnp.eye(32), jax.random.normal(jax.random.PRNGKey(13), (32,)), jnp.float32(1e-4)


def scalar_step(w, x, steps, train, lr):
    for _ in range(steps):  # a Python int: unrolled
        h = jnp.tanh(x @ w)
        if train:  # a Python bool
            h = h * 0.9
        w = w - lr * (x.T @ h) / x.shape[0]
    return w


def scalar_args():
    k1, k2 = jax.random.split(jax.random.PRNGKey(21))
    return jax.random.normal(k1, (64, 64)) / 8, jax.random.normal(k2, (32, 64)), 2, True, 0.05
