# outcome: crash (to_static)
# NameError: cannot access free variable 'k0' where it is not associated with a value in enclosing scope
# (dy2st) raised while tracing the if branch of a staged `if`:
#   File "<tmpdir>/dy2st_fuzz_59f770b8d059a2ec.py", line 11, in f
#     if y[k1 % 4] > 0.0:
# The condition is a traced array, so both sides are traced, whichever one runs. To raise only when a value is bad, use `assert` (checked at run time) instead of `raise` inside the branch.
# --------------------
# For simplicity, JAX has removed its internal frames from the traceback of the following exception. Set JAX_TRACEBACK_FILTERING=off to include these.
# (dy2st) raised while converting/tracing:
#   File "<tmpdir>/dy2st_fuzz_59f770b8d059a2ec.py", line 20, in get_state_3
#     if (not a0[0] < 1 and not a0.sum() < 1):
# inputs: x=[0.0, 0.0, 0.0, 0.0] y=[0.0, 0.0, 0.0, 0.0]
#         m=[[2.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [2.0, 2.0, 0.0, 1.0]] n=0 n_as_array=False
import jax.numpy as jnp


def f(x, y, m, n):
    a0 = x
    a1 = y
    k0 = n
    k1 = 1
    k1 = (-k0)
    a1 = jnp.clip(jnp.minimum((y + a1), (x + k0)), -1000.0, 1000.0)
    if y[k1 % 4] > 0.0:
        return a0, a1, (((2 if m[2, 3] < -1.0 else k1) + 0) % 97), k1
    elif m[0, 0] <= 3.0:
        a0 += y
        k1 = (0 + 0)
    elif (0 and (a1.sum() < 2 or a0.sum() > 0)):
        a0 = y
    else:
        k0 = (0 // 2)
    if (not a0[0] < 1 and not a0.sum() < 1):
        k0 = 2
    else:
        k0 = 1
    return a0, a1, k0, k1
