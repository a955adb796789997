"""dy2st quickstart: an eager model forward with a data-dependent `if` and an early return,
run as one compiled XLA program.

    python examples/quickstart.py
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

import dy2st


def forward(params, x):
    """A tiny MLP whose depth and output depend on the data, written the way one debugs it."""
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    if h.mean() > 0:                     # data-dependent branch
        h = jnp.tanh(h @ params["w2"])   # an extra layer only for "positive" inputs
    else:
        h = h * 0.5
    score = h.sum()
    if score < -100.0:                   # early return on a data-dependent condition
        return jnp.zeros(x.shape[:1])
    return h @ params["w_out"]


def median_time_us(fn, *args, repeat=300):
    fn(*args).block_until_ready()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def main():
    key = jax.random.PRNGKey(0)
    k1, k2, k3, kx = jax.random.split(key, 4)
    params = {
        "w1": jax.random.normal(k1, (16, 32)) * 0.3,
        "b1": jnp.zeros(32),
        "w2": jax.random.normal(k2, (32, 32)) * 0.3,
        "w_out": jax.random.normal(k3, (32,)) * 0.3,
    }
    static_forward = dy2st.to_static(forward)

    print("=== translated code ===")
    print(static_forward.code)

    print("=== eager vs to_static ===")
    for sign in (+1.0, -1.0):
        x = sign * jnp.abs(jax.random.normal(kx, (8, 16)))
        eager = forward(params, x)
        static = static_forward(params, x)
        np.testing.assert_allclose(eager, static, rtol=1e-5, atol=1e-5)
        print(f"input sign {sign:+.0f}: outputs agree (max |diff| = {float(jnp.abs(eager - static).max()):.2e})")
    print(f"compiled programs: {len(static_forward.programs)} (one per input signature)")

    print("=== what dy2st made of each line (static_forward.explain) ===")
    print(static_forward.explain(params, x))

    x = jax.random.normal(kx, (8, 16))
    eager_us = median_time_us(forward, params, x)
    static_us = median_time_us(static_forward, params, x)
    print("=== per-call time (median) ===")
    print(f"eager:     {eager_us:8.1f} us")
    print(f"to_static: {static_us:8.1f} us  ({eager_us / static_us:.1f}x faster)")


if __name__ == "__main__":
    main()
