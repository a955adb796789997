"""What kind of value is this: the one definition of each test the runtime and the call path use.

* `ARRAY_TYPES`: concrete arrays (jax, numpy arrays and numpy scalars) — program inputs, weights.
* `PY_SCALARS`: Python numbers (bool, int, float, complex) — static, or promoted like `jnp.where`.
* `is_traced`: only exists inside a trace (a jax Tracer).
* `is_array`: an array, concrete or traced — what staged control flow carries.
* `flatten_state`: a variable's leaves, with dy2st's `Undefined` markers kept as leaves.
"""

from __future__ import annotations

import jax
import numpy as np

from dy2st.runtime.undefined import Undefined

ARRAY_TYPES = (jax.Array, np.ndarray, np.generic)
PY_SCALARS = (bool, int, float, complex)


def is_traced(value) -> bool:
    """The one test for "this value only exists inside a trace": a jax Tracer."""
    return isinstance(value, jax.core.Tracer)


def is_array(value) -> bool:
    """An array, concrete or traced (a Tracer is a jax.Array too, but say it)."""
    return isinstance(value, ARRAY_TYPES) or is_traced(value)


def _is_undefined(value) -> bool:
    return isinstance(value, Undefined)


def flatten_state(value):
    """`(leaves, treedef)` of a state variable; an `Undefined` marker is one leaf."""
    return jax.tree_util.tree_flatten(value, is_leaf=_is_undefined)
