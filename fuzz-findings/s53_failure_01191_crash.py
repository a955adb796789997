# outcome: crash (to_static)
# dy2st.errors.BranchOutputError: File "<tmpdir>/dy2st_fuzz_706d6234ea6edd4b.py", line 19, in f
#     if a0.sum() < 0:
# 'v1' is defined in the if branch only, and is used after the `if`.
# To fix: assign 'v1' before the `if` or in both branches.
# --------------------
# For simplicity, JAX has removed its internal frames from the traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.
# inputs: x=[-1.0, -2.0, -2.0, -3.0] y=[-2.0, 1.0, 3.0, -1.0]
#         m=[[-1.0, 0.0, -1.0, 2.0], [-3.0, -2.0, -2.0, -1.0], [-1.0, -2.0, -2.0, -3.0]] n=0 n_as_array=False
import jax.numpy as jnp


def h0(a, k, m):
    k = -2 if (a < a).all() else k
    return a, k


def h1(a, k, m):
    return a, 0
    return a, k


def f(x, y, m, n):
    a0 = x
    a1 = y
    k0 = n
    k1 = 3
    if a0.sum() < 0:
        a0 = y
        v1 = a0
    else:
        return a0, a0, (2 if a0.sum() < 2 else ((1 + 0) % 97)), k0
    a0 = a0
    a0 += v1
    a0 = v1
    a0 = a0
    a0 = a0
    a0 = y
    return a0, a1, k0, k1
