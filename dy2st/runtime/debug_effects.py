"""A switch that leaves `print` and `assert` of traced values out of a trace.

Both become host callbacks (`jax.debug.callback`), which `jax.export` cannot serialize, so
`dy2st.save(..., debug_effects="drop")` traces with the switch on: a traced `print` prints
nothing and a traced `assert` checks nothing in the saved program. Python-valued prints and
asserts are unaffected (they run while tracing, as always).

    with dropped():
        ...                      # trace here
    if debug_effects_dropped(): return
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

_DROPPED: contextvars.ContextVar[bool] = contextvars.ContextVar("dy2st_debug_effects_dropped", default=False)


def debug_effects_dropped() -> bool:
    """True while tracing under `dropped()`."""
    return _DROPPED.get()


@contextlib.contextmanager
def dropped() -> Iterator[None]:
    token = _DROPPED.set(True)
    try:
        yield
    finally:
        _DROPPED.reset(token)
