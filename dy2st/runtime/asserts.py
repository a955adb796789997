"""`assert` on traced values: checked when the program runs, failing with the user's line.

Generated code calls::

    jst.convert_assert(x.sum() > 0, lambda: 'x must be positive')

A Python condition is a plain `assert` (the message thunk runs only on failure). A traced one
adds a `jax.debug.callback` that raises `AssertionError` when the program runs and the
condition is false; its message is the user's message followed by the user's file, line and
source line. The callback also records the error, so `StaticFunction` (see
`dy2st.errors.at_boundary`) re-raises that very AssertionError instead of the
`JaxRuntimeError` XLA wraps it in. Inside an outer `jax.jit(...)` the JaxRuntimeError reaches
the user as is; its text ends with the same message and location.

`python -O` drops asserts before dy2st sees the source's compiled form but not the source
itself, so dy2st mirrors it: with `sys.flags.optimize` set, asserts are not converted at all.
"""

from __future__ import annotations

import jax
import numpy as np

from dy2st.errors import OriginInfo, RuntimeChecks, record_runtime_failure
from dy2st.runtime import events
from dy2st.runtime.formatting import TracedString
from dy2st.runtime.debug_effects import debug_effects_dropped
from dy2st.runtime.staging import scalar_predicate
from dy2st.runtime.values import is_traced


def _raise_from_check(error: BaseException):
    """Raise `error` from inside a run-time check's callback (see `errors.at_boundary`)."""
    record_runtime_failure(error)
    raise error


def convert_assert(test, message=None):
    """`assert test, message()`; staged as a run-time check when `test` is traced.

    Args:
      test: the condition's value.
      message: a thunk giving the message, or None when the assert has none.
    """
    if not is_traced(test):
        if not test:
            raise AssertionError(message()) if message is not None else AssertionError()
        return
    if debug_effects_dropped():  # dy2st.save(..., debug_effects="drop")
        return
    origin = OriginInfo.of_caller()
    test = scalar_predicate(test, origin, "The asserted condition", "reduce it first, e.g. `assert (x > 0).all()`.")
    text = message() if message is not None else None
    traced_text = is_traced(text)
    formatted = isinstance(text, TracedString)  # f"bad {x}": its text exists at run time

    def check(ok, *value):
        if np.all(ok):
            return
        shown = text.render(list(value)) if formatted else str(np.asarray(value[0])) if traced_text else text
        _raise_from_check(AssertionError(_failure_message(shown, origin)))

    jax.debug.callback(check, test, *(text.arrays if formatted else (text,) if traced_text else ()))
    RuntimeChecks.record_traced()
    if events.active():
        events.note(origin, "check", "run-time check: assert",
                    "the condition is traced: a host callback raises AssertionError when the program runs")


def check_when_run(ok, make_error, origin: OriginInfo | None = None, what: str = "") -> None:
    """Raise `make_error()` when the program runs and the traced scalar bool `ok` is false.

    `origin` and `what` (what the check guards) describe it for `dy2st.explain`.

    The error keeps its own type (an `UnboundLocalError` stays one) and reaches the caller of
    the StaticFunction as is (see `dy2st.errors.at_boundary`). Dropped, like asserts, when
    `dy2st.save(..., debug_effects="drop")` exports a program without host callbacks."""
    if debug_effects_dropped():
        return

    def check(ok_value):
        if np.all(ok_value):
            return
        _raise_from_check(make_error())

    jax.debug.callback(check, ok)
    RuntimeChecks.record_traced()
    if events.active():
        events.note(origin, "check", "run-time check", what)


def _failure_message(message, origin: OriginInfo) -> str:
    first = str(message) if message is not None else "assertion failed"
    return f"{first}\n(dy2st) assert failed when the program ran, at:\n  {origin.as_header()}"
