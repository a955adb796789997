# outcome: crash (to_static)
# dy2st.errors.BranchOutputError: File "<tmpdir>/dy2st_fuzz_5c1bab2fb2fd20a1.py", line 15, in f
#     if n:
# 'v1' is defined in the else branch only, and is used after the `if`.
# To fix: assign 'v1' before the `if` or in both branches.
# --------------------
# For simplicity, JAX has removed its internal frames from the traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.
# inputs: x=[1.0, -1.0, -1.0, -2.0] y=[1.0, -1.0, -1.0, -2.0]
#         m=[[2.0, 2.0, 0.0, -3.0], [3.0, 3.0, 3.0, 1.0], [1.0, -2.0, -3.0, 2.0]] n=3 n_as_array=True
import jax.numpy as jnp


def h0(a, k, m):
    a = a
    return a, k


def f(x, y, m, n):
    a0 = x
    a1 = y
    k0 = n
    k1 = 2
    a1 = jnp.clip((a0[::-1] - a0[::-1]), -1000.0, 1000.0)
    if n:
        a1 = jnp.clip((a1 + a1), -1000.0, 1000.0)
        k1 = n
        return a0, a1, 4, k1
    else:
        pass
        v1 = jnp.clip(((a0 - a0) - x), -1000.0, 1000.0)
    if a1.min() == x.max():
        if y.min() < -4.0:
            pass
            k1 = n if jnp.maximum(x, v1).sum() <= -4.0 else -2
    elif not n >= -2:
        k1 = (k0 // 3)
    elif m[2, 2] > -3:
        t2 = jnp.clip(jnp.where(a1 > -1, jnp.abs(v1), (y + y)), -1000.0, 1000.0)
    return a0, a1, k0, k1
