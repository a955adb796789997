"""What the runtime operators decided while tracing, per user line, for `dy2st.explain`.

Every operator that chooses between Python and `jax.lax` (an `if`, a loop, a call, a print, a
run-time check) says what it chose with `note(...)`. Outside `recording()` that is one
thread-local read and nothing else, and it only happens while a program is traced: a cached
call runs no runtime operator at all, so `explain` costs a normal call nothing.

    with events.recording() as log:
        jax.jit(converted).trace(x)
    log.events  # [Event(filename, lineno, 'cond', 'lax.cond', 'carries y: float32[3]'), ...]

Building a staged construct can take several tries (a loop whose carry changes type is traced
again; a static `range` that cannot be a scan is unrolled instead). What a discarded try noted
is dropped with it (`Attempt.discard`), so the report shows only what the program holds.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

from dy2st.errors import OriginInfo
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.values import describe


@dataclasses.dataclass(frozen=True)
class Event:
    """One decision at one user line.

    `kind` is a stable word for tools (see `KINDS`); `summary` is the short text shown in the
    report's margin; `detail` says why, or what was carried. `callee` is the user's function a
    converted call reached (its source is shown in the report too), else None.
    """

    filename: str
    lineno: int
    function: str
    kind: str
    summary: str
    detail: str = ""
    callee: object = dataclasses.field(default=None, compare=False, hash=False, repr=False)


# The kinds of events, each with the jaxpr primitive it leaves in the program (None: none).
KINDS = {
    "cond": "cond",  # a traced `if` or conditional expression: one lax.cond
    "while_loop": "while",  # a loop with a traced condition
    "scan": "scan",  # a loop with a static trip count, or a bounded traced one
    "python_if": None,  # a Python condition: only the branch taken was traced
    "flag": None,  # a traced `if c: break` (continue, return) alone: its flag or-ed with `c`, no cond
    "python_loop": None,  # a loop run by Python (Python condition or iterable)
    "unrolled": None,  # a loop that could have been staged, unrolled and why
    "converted_call": None,  # a call whose target dy2st converted
    "python_call": None,  # a call to user code that runs as it is, and why
    "check": None,  # a run-time check (assert, zero-trip, loop bound): a host callback
    "print": None,  # print / formatting of traced values at run time: a host callback
}


# Appended to the log line of every fallback (a loop unrolled, a call left unconverted).
EXPLAIN_HINT = " [f.explain(*args) shows every such decision, line by line]"


class Recording:
    """The events noted on this thread while `recording()` is open."""

    def __init__(self):
        self.events: list[Event] = []


def active() -> bool:
    """Whether a recording is open on this thread (compute event details only then)."""
    return CONTEXT.recording is not None


def note(origin: OriginInfo | None, kind: str, summary: str, detail: str = "", callee=None) -> None:
    """Record a decision at `origin` when a recording is open; otherwise do nothing."""
    log = CONTEXT.recording
    if log is None or origin is None:
        return
    log.events.append(Event(origin.filename, origin.lineno, origin.function_name, kind, summary, detail, callee))


@contextlib.contextmanager
def recording() -> Iterator[Recording]:
    """Record the events of the traces run inside; nested recordings are independent."""
    outer = CONTEXT.recording
    log = CONTEXT.recording = Recording()
    try:
        yield log
    finally:
        CONTEXT.recording = outer


class Attempt:
    """A try at staging something; `discard()` drops what it noted when the try is given up."""

    def __init__(self):
        log = CONTEXT.recording
        self._log = log
        self._start = len(log.events) if log is not None else 0

    def discard(self) -> None:
        if self._log is not None:
            del self._log.events[self._start:]


def describe_values(names, values) -> str:
    """`y: float32[3], n: int32[]` for traced values; Python values are shown as they are."""

    return ", ".join(f"{name}: {describe(value)}" for name, value in zip(names, values))
