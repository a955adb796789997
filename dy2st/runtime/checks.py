"""Checks that depend on whether a value is traced, so the fence cannot make them up front.

* `ld(value)` is every read of a local that a staged `if` or loop may leave unbound there
  (`transformers.unbound_reads`): a `MaybeUnbound` gives its value, checked when the program
  runs (eager Python raises UnboundLocalError at the read where the data left it unbound).
* `check_scoped_write(value, name, kind)` follows every write to a `global` (or the converted
  function's own `nonlocal`) name: a traced value there would outlive the trace as a leaked
  tracer, so it is refused with the user's line.
"""

from __future__ import annotations

import functools
import sys

import jax

from dy2st.errors import OriginInfo, ScopeWriteError
from dy2st.runtime import writes
from dy2st.runtime.asserts import check_when_run
from dy2st.runtime.undefined import MaybeUnbound, Undefined
from dy2st.runtime.staging import tracing_staged_code
from dy2st.runtime.values import is_traced
from dy2st.runtime.trace_context import CONTEXT


_MISSING = object()  # the global did not exist before the write


def _remembered_globals() -> dict:
    """The values remembered before global writes: the program's being traced (dropped with its
    trace, so a refused call's leftovers never reach another), or this thread's outside one."""
    scratch = writes.program_scratch()
    if scratch is not None:
        return scratch.setdefault("remembered_globals", {})
    return CONTEXT.remembered_globals


def remember_global(name: str) -> None:
    """Called just before a write to global `name`: keep its value, to restore if refused.
    A stack per name: a write inside a staged branch is checked (and forgotten) before the
    write of the `if` around it, which must still find its own value."""
    module_globals = sys._getframe(1).f_globals
    _remembered_globals().setdefault((id(module_globals), name), []).append(module_globals.get(name, _MISSING))


def _forget(module_globals: dict, name: str) -> None:
    """A write that was not refused: its remembered value is no longer needed."""
    key = (id(module_globals), name)
    stack = _remembered_globals().get(key)
    if stack:
        stack.pop()
        if not stack:
            del _remembered_globals()[key]


def _restore_global(module_globals: dict, name: str) -> None:
    """Put back the value from before the outermost write still pending (an `if`'s or loop's
    around this one wrote the carried tracer in between), now and once the refused trace has
    unwound (a loop's state may be written back on the way)."""
    stack = _remembered_globals().get((id(module_globals), name))
    if not stack:
        return  # nothing remembered: leave the global as it is
    del stack[1:]  # (the outermost write's own check, if one comes, finds its value still)
    put_back = functools.partial(_put_back, module_globals, name, stack[0])
    put_back()
    writes.on_abandon(put_back)


def _put_back(module_globals: dict, name: str, previous) -> None:
    if previous is _MISSING:
        module_globals.pop(name, None)
    else:
        module_globals[name] = previous


def check_scoped_write(value, name: str, kind: str) -> None:
    """Raise ScopeWriteError if `value` (just written to `kind` variable `name`) is traced; a
    refused global gets back the value it had before the write (no tracer is left in it)."""
    module_globals = sys._getframe(1).f_globals
    if not any(is_traced(leaf) for leaf in jax.tree_util.tree_leaves(value)):
        if kind == "global":
            _forget(module_globals, name)
        return
    if kind == "global":
        _restore_global(module_globals, name)
    raise ScopeWriteError(
        f"A traced value is written to the {kind} variable '{name}'. It would outlive the "
        "trace (a leaked tracer), and the program would not update it when it runs.",
        OriginInfo.of_caller(),
        advice=f"return the value instead of writing it to '{name}' (e.g. `return y, {name}`), "
        f"or keep '{name}' a Python value (int(...) of a concrete array, a constant).",
    )


def ld(value):
    """A read of a local variable the analysis cannot show bound on every path: the value, or a
    `MaybeUnbound`'s value with its check (a Python-unbound name raised before this call, as
    eagerly; an `Undefined` marker, which staging binds for it, raises here too)."""
    if isinstance(value, Undefined):  # eager raises here, on this path (a DeadValue: one past a `break` too)
        if tracing_staged_code():  # in a staged side: when the data takes it (deferred)
            raise UnboundLocalError(f"cannot access local variable '{value.name}' where it is not associated with a value")
        error = value.error_at(OriginInfo.of_caller())  # (the read's line)
        writes.handled_refusal(error)  # eager's own UnboundLocalError here, no refusal: an `except` may catch it
        raise error
    if type(value) is not MaybeUnbound:
        return value
    origin = OriginInfo.of_caller()
    if not is_traced(value.bound):  # (True where every path bound it)
        if not value.bound:
            raise _unbound_when_run(value.name, origin)
        return value.value
    check_when_run(value.bound, lambda: _unbound_when_run(value.name, origin), origin,
                   f"'{value.name}' is bound on the path the data took (eager Python raises UnboundLocalError "
                   "reading it otherwise)", raises="UnboundLocalError")
    return value.value


def _unbound_when_run(name: str, origin: OriginInfo) -> UnboundLocalError:
    """Eager's own error (the call then runs eagerly from the state before it, so what it
    changed before the read is kept, as eagerly: `program_body.changes_lost_with`)."""
    error = UnboundLocalError(f"cannot access local variable '{name}' where it is not associated with a value")
    error.add_note(f"(dy2st) the data left '{name}' unassigned when the program ran, at:\n  {origin.as_header()}")
    return error
