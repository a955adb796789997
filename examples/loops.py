"""dy2st loops: Newton iteration to a tolerance and an RNN over a data-dependent length,
written as plain Python loops, run as one XLA program, and timed against eager execution
and hand-written `jax.jit` + `lax` code.

    python examples/loops.py
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import dy2st


# -- Newton's method for sqrt, until the residual is below a tolerance ------------------------
def newton_sqrt(x):
    y = jnp.maximum(x, 1.0)
    err = jnp.abs(y * y - x).max()
    while err > 1e-4:
        y = 0.5 * (y + x / y)
        err = jnp.abs(y * y - x).max()
    return y


@jax.jit
def newton_sqrt_lax(x):
    def cond(state):
        return state[1] > 1e-4

    def body(state):
        y = 0.5 * (state[0] + x / state[0])
        return y, jnp.abs(y * y - x).max()

    y = jnp.maximum(x, 1.0)
    return lax.while_loop(cond, body, (y, jnp.abs(y * y - x).max()))[0]


# -- an RNN over the first n steps of a sequence (n is data) ------------------------------------
def rnn(params, xs, n):
    h = jnp.zeros(params["w_h"].shape[0])
    t = 0
    while t < n:
        dy2st.set_loop_options(maximum_iterations=xs.shape[0])  # lets jax.grad through it
        h = jnp.tanh(params["w_h"] @ h + params["w_x"] @ xs[t] + params["b"])
        t += 1
    return h


@jax.jit
def rnn_lax(params, xs, n):
    def step(t, h):
        return jnp.tanh(params["w_h"] @ h + params["w_x"] @ xs[t] + params["b"])

    return lax.fori_loop(0, n, step, jnp.zeros(params["w_h"].shape[0]))


# -- the same RNN over all T steps: a static range, staged as one lax.scan ----------------------
def rnn_full(params, xs):
    h = jnp.zeros(params["w_h"].shape[0])
    for t in range(xs.shape[0]):
        h = jnp.tanh(params["w_h"] @ h + params["w_x"] @ xs[t] + params["b"])
    return h


@jax.jit
def rnn_full_lax(params, xs):
    def step(h, x):
        return jnp.tanh(params["w_h"] @ h + params["w_x"] @ x + params["b"]), None

    return lax.scan(step, jnp.zeros(params["w_h"].shape[0]), xs)[0]


def median_time_us(fn, *args, repeat=50):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def report(name, eager_fn, static_fn, lax_fn, *args, repeat=50):
    np.testing.assert_allclose(static_fn(*args), eager_fn(*args), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lax_fn(*args), eager_fn(*args), rtol=1e-4, atol=1e-5)
    eager = median_time_us(eager_fn, *args, repeat=max(3, repeat // 10))
    static = median_time_us(static_fn, *args, repeat=repeat)
    hand = median_time_us(lax_fn, *args, repeat=repeat)
    print(f"{name:24s} eager {eager:10.1f} us | to_static {static:8.1f} us | jit+lax {hand:8.1f} us | "
          f"eager/static {eager / static:7.1f}x | static/lax {static / hand:5.2f}x")
    return eager, static, hand


def main():
    static_newton = dy2st.to_static(newton_sqrt)
    print("=== newton_sqrt, translated ===")
    print(static_newton.code)

    x = jnp.linspace(0.5, 1000.0, 4096)
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    hidden, features, steps = 64, 32, 100
    params = {
        "w_h": jax.random.normal(k1, (hidden, hidden)) * 0.1,
        "w_x": jax.random.normal(k2, (hidden, features)) * 0.1,
        "b": jnp.zeros(hidden),
    }
    xs = jax.random.normal(k3, (steps, features))
    n = jnp.array(73)

    print("=== per-call time (median, this machine's CPU) ===")
    report("newton (4096 values)", newton_sqrt, static_newton, newton_sqrt_lax, x)
    report("rnn, n=73 of T=100", rnn, dy2st.to_static(rnn), rnn_lax, params, xs, n)
    report("rnn, static T=100", rnn_full, dy2st.to_static(rnn_full), rnn_full_lax, params, xs)

    grad = jax.jit(jax.grad(lambda p: dy2st.to_static(rnn)(p, xs, n).sum()))
    expected = jax.grad(lambda p: rnn(p, xs, n).sum())(params)
    np.testing.assert_allclose(grad(params)["w_h"], expected["w_h"], rtol=1e-4, atol=1e-6)
    print("jax.jit(jax.grad(rnn)) through the bounded while loop matches eager gradients")


if __name__ == "__main__":
    main()
