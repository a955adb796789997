# outcome: crash (to_static)
# dy2st.errors.BranchOutputError: File "<tmpdir>/dy2st_fuzz_620de8bbc4672780.py", line 21, in f
#     if y.min() != -3.0:
# 'v1' is defined in the else branch only, and is used after the `if`.
# To fix: assign 'v1' before the `if` or in both branches.
# --------------------
# For simplicity, JAX has removed its internal frames from the traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.
# inputs: x=[1.0, 0.0, 0.0, 0.0] y=[1.0, 0.0, 0.0, 0.0]
#         m=[[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 3.0, 3.0], [1.0, 0.0, 0.0, 0.0]] n=3 n_as_array=False
import jax.numpy as jnp


def h0(a, k, m):
    return jnp.clip(jnp.minimum(a, a[::-1]), -1000.0, 1000.0), jnp.sum(a > -1.0)
    return a, k


def h1(a, k, m):
    a, k = h0(a, 0, m)
    k = k
    a = a
    return a, k


def f(x, y, m, n):
    a0 = x
    a1 = y
    k0 = n
    k1 = 0
    if y.min() != -3.0:
        if (not y.sum() != 0 or not -4 <= y.min() <= -3):
            a1 = x if not y.sum() else y
        else:
            a1 = a0 if a0.min() <= -3 else jnp.where(a1 > 1.0, a1, y)
        return a0, a0, k0, 1
    else:
        a1 = a1
        v1 = a0
    a0 = x
    k1 = k0
    a0 = jnp.clip((a1 * k0), -1000.0, 1000.0)
    a0 = jnp.clip((a0 * v1), -1000.0, 1000.0)
    k0 = 0
    a0 = a0
    return a0, a1, k0, k1
