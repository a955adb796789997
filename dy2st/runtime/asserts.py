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

import contextlib
import dis
import inspect

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dy2st import _jax_compat

from dy2st.errors import BuiltinError, IntOverflowError, is_library_file, OriginInfo, RuntimeChecks, StagedInTryError, record_runtime_failure
from dy2st.runtime import events, guards
from dy2st.runtime.formatting import TracedString
from dy2st.runtime.debug_effects import debug_effects_dropped
from dy2st.runtime.staging import handler_around, scalar_predicate
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.values import PythonNumbers, is_traced, python_numbers


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
    refuse_under_handler("AssertionError", origin)
    text = message() if message is not None else None
    traced_text = is_traced(text)
    formatted = isinstance(text, TracedString)  # f"bad {x}": its text exists at run time

    def check(ok, *value):
        if np.all(ok):
            return
        shown = text.render(list(value)) if formatted else str(np.asarray(value[0])) if traced_text else text
        _raise_from_check(AssertionError(_failure_message(shown, origin)))

    call_on_failure(check, test, *(text.arrays if formatted else (text,) if traced_text else ()))
    guards.note_deferred_raise(origin, check=True)
    RuntimeChecks.record_traced()
    if events.active():
        events.note(origin, "check", "run-time check: assert",
                    "the condition is traced: a host callback raises AssertionError when the program runs")


def refuse_under_handler(error: str, origin: OriginInfo, frames=None) -> None:
    """A run-time check that raises `error`, an exception eager code raises on such data, inside
    a `try` whose `except` may catch it: eagerly the handler runs; the program's check would
    raise past it when it runs. Refused at the line. (A `with` block is not taken for a
    handler here: context managers that suppress errors are rare, asserts inside `with` are not.)
    `frames`: those of an operation traced earlier (`handler_around`), not the live ones."""
    if handler_around(with_blocks=False, converted_only=True, frames=frames):
        raise StagedInTryError(
            f"this line raises {error} when the program runs on data where eager Python raises it, inside a `try` "
            "whose `except` would catch it: a compiled program's run-time check raises past the handler.",
            origin,
            advice="make the code valid for every input instead of catching the error (`next(it, default)`; "
            "`jnp.where` for an assert's condition; `jnp.where(d == 0, fallback, a / d)` for a division), or move "
            "the `try` out of the converted function.")


def check_when_run(ok, make_error, origin: OriginInfo | None = None, what: str = "", detail=None,
                   raises: str | None = None) -> None:
    """Raise `make_error()` when the program runs and the traced scalar bool `ok` is false.

    `raises`: the exception's name where eager code raises it too on such data (StopIteration,
    ValueError), so that an `except` around the line would catch it: refused there
    (`refuse_under_handler`). None for dy2st's own refusals made at run time.

    `origin` and `what` (what the check guards) describe it for `dy2st.explain`. With a traced
    `detail`, `make_error` is given its value (which of several things failed). The host is
    called only when the check fails (`call_on_failure`).

    The error keeps its own type (an `UnboundLocalError` stays one) and reaches the caller of
    the StaticFunction as is (see `dy2st.errors.at_boundary`). Dropped, like asserts, when
    `dy2st.save(..., debug_effects="drop")` exports a program without host callbacks."""
    if raises is not None:
        refuse_under_handler(raises, origin)
    if debug_effects_dropped():
        return

    def check(ok_value, *details):
        if np.all(ok_value):
            return
        _raise_from_check(make_error(*details))

    call_on_failure(check, ok, *(() if detail is None else (detail,)))
    if raises is not None and origin is not None:  # (eager's own error, at this line: not after)
        guards.note_deferred_raise(origin, check=True)
    RuntimeChecks.record_traced()
    if events.active():
        events.note(origin, "check", "run-time check", what)


def call_on_failure(check, ok, *operands) -> None:
    """`check(ok, *operands)` as a host callback that runs only where the traced `ok` is false
    when the program runs: a program whose checks hold makes no host round trip (a callback
    costs about 0.14 ms per call on a CPU, a check per loop iteration that much per iteration).
    Where a transformation runs both branches (`vmap` makes the cond a select), `check` is
    called anyway and finds `ok` true. Ordered with the program's prints (as `print` is, where
    jax can order it: not under vmap), so that a failed check stops what comes after it, as
    eagerly: a print after a failed assert never shows."""
    check_numbers_so_far()
    ordered = not any(_jax_compat.is_batch_tracer(v) for v in (ok, *operands))
    lax.cond(jnp.all(ok), lambda *values: None,
             lambda *values: jax.debug.callback(check, *values, ordered=ordered), ok, *operands)


def _failure_message(message, origin: OriginInfo) -> str:
    first = str(message) if message is not None else "assertion failed"
    return f"{first}\n(dy2st) assert failed when the program ran, at:\n  {origin.as_header()}"


# -- Python ints in int32 (the numbers rule) -------------------------------------------------
_INT32_MIN = -(2 ** 31)
_COUNTER_STEP = 2 ** 10  # a sum with a smaller constant needs over 2**21 iterations to leave int32


def check_python_numbers(mark, origin: OriginInfo) -> None:
    """At run time, raise what eager Python raises where an operation traced since `mark`
    (`_jax_compat.trace_mark`) on Python numbers the data decides would have raised:

    * IntOverflowError where one on a Python int (a weakly typed int32: what a Python int a
      staged loop carries or a staged `if` picks becomes) left int32's range: eagerly the int
      grows, the program's would wrap. Checked: products, powers (`k ** 3`, in float32 with a
      margin), negation, left shifts, and sums and differences of two such values or with a constant of 2**10
      or more (`k + 2 ** 30` wraps in two iterations); not a sum with a smaller constant (`k += 1`,
      a counter), which needs over 2**21 iterations to leave the range and would cost every
      counting loop a check per iteration.
    * ZeroDivisionError where a Python number divides (`/`, `//`, `%`) by one that is 0
      (`PythonNumbers`): XLA gives inf or garbage; an array divided by 0 stays XLA's, as eagerly.

    Each error names the line of the first operation that failed."""
    numbers = python_numbers()
    overflows, divisions = _FailedLines(origin), _FailedLines(origin, raises="ZeroDivisionError")
    for operation in _jax_compat.traced_operations_since(mark):
        outputs = operation.outputs
        if len(outputs) == 1 and _is_python_int(outputs[0]):
            overflows.add(_overflow(operation), operation)
        if numbers is None:
            continue
        zero = numbers.zero_divisor(operation)
        if zero is not None:
            divisions.add(zero[0], operation, zero[1])
        if operation.name in _BOOLS_AS_INTS:
            _refuse_bool_arithmetic(numbers, operation, origin)
    overflows.check_when_run(lambda line, detail: IntOverflowError(
        "a Python int this line computes left int32's range when the program ran: eagerly it would "
        "grow, the compiled program's (a weakly typed int32) would wrap.",
        line,
        advice="keep the value within int32, compute it as a float (`1.0 * ...`), or make the loop's "
        "trip count a Python value so it runs in Python.",
    ), "a Python int computed on stays within int32")
    divisions.check_when_run(_zero_division, "a Python number divides by no Python number that is 0")


# jnp's operations on bools that a Python operator on bools makes, where Python's operator
# computes on them as ints (`True + True == 2`, `True * True == 1`, `~True == -2`)
_BOOLS_AS_INTS = {"or": {"+", "+="}, "and": {"*", "*="}, "not": {"~"}}


def _refuse_bool_arithmetic(numbers: PythonNumbers, operation, origin: OriginInfo) -> None:
    """Refuse `b + c`, `b * c` or `~b` on a Python bool the data decides (a 0-d bool array
    that `numbers` says stands for one): jnp computes them as `or`, `and` and `not` on bools,
    eager Python as ints. (`b | c`, `b & c`, `not b` make the same operations, and mean them.)"""
    if not any(value.dtype == np.bool_ and numbers.holds(value) for value in operation.inputs):
        return
    for code, offset in _jax_compat.equation_code_offsets(operation.equation):
        if is_library_file(code.co_filename):
            continue
        operator = _operator_at(code, offset)
        if operator in _BOOLS_AS_INTS[operation.name]:
            line = next((l for f, l in _jax_compat.equation_lines(operation.equation) if f == code.co_filename),
                        origin.lineno)
            raise BuiltinError(
                f"`{operator}` on a Python bool the data decides: eagerly Python computes it on the bools as "
                f"ints (`True + True == 2`, `~True == -2`); the compiled program's bools (0-d bool arrays) "
                f"would give a bool.",
                OriginInfo(code.co_filename, line, code.co_name),
                advice="convert first: `int(flag) + int(other)`, or use `|`, `&`, `not` where a bool is meant.")
        return


_OPERATORS: dict = {}  # code -> {bytecode offset: the operator of the instruction there}


def _operator_at(code, offset: int) -> str | None:
    """The Python operator of `code`'s instruction at `offset` (`+` for `a + b`, `~` for `~a`),
    or None for another instruction (a call)."""
    operators = _OPERATORS.get(code)
    if operators is None:
        if len(_OPERATORS) > 1024:
            _OPERATORS.clear()
        operators = _OPERATORS[code] = {
            i.offset: i.argrepr if i.opname == "BINARY_OP" else _UNARY.get(i.opname)
            for i in dis.get_instructions(code) if i.opname == "BINARY_OP" or i.opname in _UNARY}
    return operators.get(offset)


_UNARY = {"UNARY_INVERT": "~"}  # (the unary operator jnp computes as `not` on bools)


class _Level:
    """A level of code being traced (a program's function, an inline run, a staged side, a loop
    body): its jaxpr, what of it the numbers rule checked so far, and where it is."""

    __slots__ = ("frame", "mark", "origin")

    def __init__(self, origin: OriginInfo):
        self.frame, self.mark, self.origin = _jax_compat.tracing_frame(), _jax_compat.trace_mark(), origin

    def check(self) -> None:
        """The numbers rule's checks of what this level computed since it last checked (not of
        what staging those checks computes: they stage a run-time check themselves)."""
        if self.frame is not _jax_compat.tracing_frame() or CONTEXT.checking_numbers:
            return  # (an operation of another jaxpr: a scan's body the user wrote, say)
        mark = self.mark
        CONTEXT.checking_numbers = True
        try:
            check_python_numbers(mark, self.origin)
        finally:
            CONTEXT.checking_numbers = False
            self.mark = _jax_compat.trace_mark()


@contextlib.contextmanager
def numbers_checked(origin: OriginInfo):
    """Around a level of code being traced: the numbers rule's run-time checks of what it computes
    (`check_python_numbers`), made before each ordered effect it stages (a print, a write, a
    check: `check_numbers_so_far`) and at its end, so that a Python number divided by a 0 the
    data decides stops what comes after it, as eagerly, not after a print that follows it."""
    level = _Level(origin)
    CONTEXT.number_levels.append(level)
    try:
        yield
        level.check()
    finally:
        CONTEXT.number_levels.pop()


def numbers_checked_of(fn):
    """`numbers_checked` for `fn` (a converted function run as a program, or inline into an
    enclosing trace) at its own level, outside its staged `if`s and loops."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return contextlib.nullcontext()
    return numbers_checked(OriginInfo(code.co_filename, code.co_firstlineno, code.co_name))


def check_numbers_so_far() -> None:
    """Before an ordered effect is staged: the numbers rule's checks of what the level being
    traced computed before it (not while those checks are themselves being staged)."""
    if CONTEXT.number_levels:
        CONTEXT.number_levels[-1].check()


class _FailedLines:
    """Traced flags, each with the user's line of the operation it tests: one run-time check
    that fails with the error of the first flag set. `raises`: the exception's name where eager
    Python raises it too, refused where an `except` around the operation would catch it."""

    def __init__(self, origin: OriginInfo, raises: str | None = None):
        self.origin, self.raises, self.flags, self.lines = origin, raises, [], []

    def add(self, flag, operation, detail=None) -> None:
        if flag is None:
            return
        origin = self.origin
        line = next((l for f, l in _jax_compat.equation_lines(operation.equation) if f == origin.filename),
                    origin.lineno)
        line = OriginInfo(origin.filename, line, origin.function_name)
        if self.raises is not None:
            refuse_under_handler(self.raises, line, _jax_compat.equation_code_offsets(operation.equation))
        self.flags.append(flag)
        self.lines.append((line, detail))

    def check_when_run(self, error, what: str) -> None:
        if not self.flags:
            return
        failed = jnp.stack(self.flags)
        check_when_run(~failed.any(), lambda first: error(*self.lines[int(first)]), self.origin, what,
                       detail=jnp.argmax(failed))


def _zero_division(line: OriginInfo, text: str) -> ZeroDivisionError:
    error = ZeroDivisionError(text)
    error.add_note(f"(dy2st) a Python number the data decides was 0 when the program ran, at:\n  {line.as_header()}")
    return error


def _is_python_int(aval) -> bool:
    return getattr(aval, "weak_type", False) and aval.dtype == np.int32 and aval.shape == ()


def _overflow(operation):
    """A traced bool: whether the operation wraps in int32 (None: not checked)."""
    name, inputs = operation.name, operation.inputs
    if name == "neg":
        return inputs[0] == _INT32_MIN
    if name == "integer_pow":  # in float32, with a margin: near the bound it refuses, never wraps
        magnitude = jnp.abs(inputs[0].astype(jnp.float32)) ** operation.params["y"]
        return magnitude >= np.float32(2.0 ** 31 * (1 - 2.0 ** -20))
    if len(inputs) != 2 or any(np.dtype(getattr(i, "dtype", np.int64)) != np.int32 for i in inputs):
        return None
    a, b = inputs
    constants = [c for c in map(_jax_compat.literal_value, inputs) if c is not None]
    if name in ("add", "sub") and constants and abs(int(constants[0])) < _COUNTER_STEP:
        return None  # a counter's step: see check_python_numbers
    if name == "add":
        r = lax.add(a, b)
        return ((a ^ r) & (b ^ r)) < 0
    if name == "sub":
        r = lax.sub(a, b)
        return ((a ^ b) & (a ^ r)) < 0
    if name == "shift_left":  # (a shift past the width gives 0, a negative one garbage)
        in_width = (b >= 0) & (b < 32)
        shift = jnp.where(in_width, b, 0)
        return (a != 0) & (~in_width | (lax.shift_right_arithmetic(lax.shift_left(a, shift), shift) != a))
    if name == "mul":
        r = lax.mul(a, b)
        nonzero = a != 0
        return nonzero & ((lax.div(r, jnp.where(nonzero, a, 1)) != b) | ((a == -1) & (b == _INT32_MIN)))
    return None
