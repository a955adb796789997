"""Whether reverse-mode AD (jax.grad/vjp) differentiates the code being traced, nested loops included.

XLA's while loop cannot run backwards, so a staged `while` with no bound must be refused when
reverse-mode AD will differentiate it. The values a loop gets say so directly (they are
linearize tracers) — except inside the body of another staged loop or branch, where they are
that loop's own tracers. Staging code therefore traces bodies inside `scope(values)`, and
`active(values)` answers for the innermost loop from its own values or any enclosing scope.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp

from dy2st import _jax_compat
from dy2st.runtime.values import is_traced
from dy2st.runtime.trace_context import CONTEXT

def active(values) -> bool:
    """Whether reverse-mode AD is tracing any floating value of `values`, or an enclosing loop's."""
    return CONTEXT.reverse_depth > 0 or _differentiated(values)


@contextlib.contextmanager
def scope(values):
    """Trace a loop's or branch's body inside this: nested loops then know about reverse mode."""
    reverse = active(values)
    CONTEXT.reverse_depth += reverse
    try:
        yield
    finally:
        CONTEXT.reverse_depth -= reverse


def _differentiated(values) -> bool:
    for value in jax.tree_util.tree_leaves(values):
        while is_traced(value):
            if _jax_compat.is_linearize_tracer(value):
                if jnp.issubdtype(jax.typeof(value).dtype, jnp.inexact):
                    return True
                break
            value = getattr(value, "val", None)  # a vmap tracer wraps the value it batches
    return False
