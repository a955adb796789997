"""Every error dy2st raises itself, and the one formatter that points them at user code.

A message always starts with the user's frame, the way a Python traceback would print it::

    File "model.py", line 12, in forward
        if x.sum() > 0:
    'y' is float32[3] in the if branch but int32[3] in the else branch.
    To fix: give 'y' the same shape and dtype in both branches, e.g. with y.astype(...).

The location comes from the node or frame that caused the error: generated code keeps the
user's file name and line numbers, so a runtime operator finds its caller's line from its own
frame (`OriginInfo.from_frame`), with no source map to consult.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import linecache
import logging
import os
import re
import sys
import sysconfig
import threading
import types

import jax

from dy2st import _jax_compat
from dy2st.config import config

if config.traceback_filtering:
    # jax drops the frames of registered files from tracebacks leaving its own api boundaries.
    _jax_compat.register_traceback_exclusion(os.path.join(os.path.dirname(os.path.abspath(__file__)), ""))


# Code objects of converted user functions. Generated helpers (branch and loop bodies) run
# nested inside them; errors name the enclosing user function rather than `if_body`.
_converted_codes: set = set()
_nested_codes: set = set()  # the code objects nested in those: generated helpers, the user's own defs


def register_converted_code(code: types.CodeType) -> None:
    """Note a converted function's code (and apart, those of the functions nested in it)."""
    _converted_codes.add(code)
    stack = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    while stack:
        nested = stack.pop()
        _nested_codes.add(nested)
        stack.extend(c for c in nested.co_consts if isinstance(c, types.CodeType))


def user_function_name(frame: types.FrameType) -> str:
    """The name of the converted function a frame runs in (itself, or a function dy2st made in
    it); a frame of code dy2st did not convert (a Flax module's `__call__` the converted code
    calls through a library) is named by its own code."""
    probe = frame
    while probe is not None:
        if probe.f_code in _converted_codes:
            return probe.f_code.co_name
        if probe.f_code not in _nested_codes and not is_library_file(probe.f_code.co_filename):
            break  # (jax's and dy2st's frames lie between a branch function and its function)
        probe = probe.f_back
    return frame.f_code.co_name


@dataclasses.dataclass(frozen=True)
class OriginInfo:
    """Where in the user's source something comes from."""

    filename: str
    lineno: int
    function_name: str = "<unknown>"

    @property
    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    @classmethod
    def from_frame(cls, frame: types.FrameType) -> "OriginInfo":
        return cls(frame.f_code.co_filename, frame.f_lineno, user_function_name(frame))

    @classmethod
    def of_caller(cls, depth: int = 1) -> "OriginInfo":
        """The frame `depth` levels above the function that calls this."""
        return cls.from_frame(sys._getframe(depth + 1))

    @classmethod
    def of_user_code(cls) -> "OriginInfo | None":
        """The innermost running frame of the user's code (not dy2st's, jax's or a library's)."""
        frame = sys._getframe(1)
        while frame is not None and is_library_file(frame.f_code.co_filename):
            frame = frame.f_back
        return cls.from_frame(frame) if frame is not None else None

    def as_header(self) -> str:
        header = f'File "{self.filename}", line {self.lineno}, in {self.function_name}'
        line = self.source_line
        return f"{header}\n    {line}" if line else header


# Told of every Dy2StaticError made: while a program is traced, `runtime.writes` notes it, so a
# refusal the user's own `except` (or a `finally` that returns) swallowed is raised after the trace.
REFUSAL_LISTENERS: list = []


class Dy2StaticError(Exception):
    """Base of every error dy2st raises itself.

    Its message starts with the user's file, line and source line, then says what went wrong
    and what to do instead.
    """

    def __init__(self, message: str, origin: OriginInfo | None = None, advice: str | None = None):
        self.origin = origin
        self.problem = message
        self.advice = advice
        super().__init__(self._format())
        for listener in REFUSAL_LISTENERS:  # (the program being traced notes it: runtime.writes)
            listener(self)

    def _format(self) -> str:
        parts = []
        if self.origin is not None:
            parts.append(self.origin.as_header())
        parts.append(self.problem)
        if self.advice:
            parts.append(f"To fix: {self.advice}")
        return "\n".join(parts)


class ConversionError(Dy2StaticError):
    """The function could not be converted at all (e.g. its source cannot be read).

    Example: a function typed into the interactive interpreter has no source file; define it in
    a module, or call it unconverted with `dy2st.not_to_static`.
    """


class UnsupportedSyntaxError(ConversionError):
    """The function uses a construct dy2st cannot convert (`yield`, `async`, ...).

    Raised once, before any rewrite, by `dy2st.analysis.fence`; the message names the
    construct and what to write instead.
    """


class BranchOutputError(Dy2StaticError):
    """The two sides of a staged `if` (or `and`/`or`/ternary) leave a variable in forms XLA
    cannot merge: defined in one branch only, different structure, shape or dtype.

    Example::

        if x.sum() > 0:
            y = x          # float32[3]
        else:
            y = x[:2]      # float32[2]

    Fix: make both branches produce the same shape and dtype (pad, slice, cast), or define the
    variable before the `if`.
    """


class PredicateError(Dy2StaticError):
    """A traced condition is not a single truth value (e.g. an array of 3 booleans).

    Fix: reduce it first, e.g. `if (x > 0).all():` or `if (x > 0).any():`.
    """


class LoopVariableError(Dy2StaticError):
    """A variable carried through a staged loop cannot keep one type across iterations: its
    shape, dtype or structure changes, it holds a Python value the body changes, or a list is
    appended to where the number of appends is not fixed.

    Example::

        while x.sum() < 10:
            x = jnp.concatenate([x, x])   # float32[3] becomes float32[6]

    Fix: keep every carried variable the same shape and dtype in every iteration (preallocate
    and write with `.at[i].set(...)`, cast with `.astype(...)`), or make the loop Python-only.
    """


class PythonEffectError(Dy2StaticError):
    """A staged `if` or loop whose code has a Python effect that tracing would run the wrong
    number of times: an object dy2st cannot put back changed in place (a set, a deque, a NumPy
    array; in a staged loop, a list or dict from before it), a nonlocal written by a nested
    function, or an iterator advanced with `next()`. A staged `if` traces both branches; a
    staged loop traces its body once. (Lists and dicts changed in place in a staged `if`,
    `log.extend(v)`, `d.update(...)`, `xs.pop()`, are carried and written back.)

    Example::

        if x.sum() > 0:
            seen.add(key)          # a set: tracing both branches would add it either way

    Fix: build new values instead (`seen = seen | {key}`, return what changed), read by index
    (`xs[i]`) instead of `next()`, or make the condition a Python value.
    """


class LoopGradientError(Dy2StaticError):
    """Reverse-mode differentiation through a staged `while` whose trip count is unknown.

    XLA's while loop keeps no history of its iterations, so `jax.grad` cannot run it backwards.
    Fix: call `dy2st.set_loop_options(maximum_iterations=N)` inside the loop body; the loop is
    then staged as a scan of N masked steps, which reverse mode supports.
    """


class LoopBoundError(Dy2StaticError):
    """A staged loop stopped at a bound while its condition was still true.

    Raised when the program runs (like a failed `assert`), at the loop's line: either the
    loop reached `maximum_iterations` from `dy2st.set_loop_options` (eagerly it would have gone
    on: the result would be wrong), or it passed the debug bound `DY2ST_MAX_WHILE_TRIPS`.
    Fix: raise the bound to a true upper bound; `set_loop_options(..., on_bound="stop")` stops
    at `maximum_iterations` on purpose.
    """


class UndefinedVariableError(Dy2StaticError, UnboundLocalError):
    """A variable is read where eager Python would raise UnboundLocalError/NameError."""


class StagedBranchError(Dy2StaticError):
    """Tracing one side of a staged `if` raised (an IndexError, a shape TypeError, ...), or
    the body of a loop whose number of iterations is traced.

    The condition is a traced array, so both sides are traced whichever the data picks; eager
    Python raises only when the data takes that side (or when an iteration runs). The error is also an instance of what was
    raised (an `IndexError` stays one), with that exception as its cause. Fix: make the side
    valid for every input (guard the index, fix the shape), or use `assert` for run-time checks.
    """

    __str__ = Exception.__str__  # a KeyError's would quote the message

    # Builtin exceptions whose one-message constructor the combined class can call.
    # NameError: a variable no path has assigned, read by the side (eager reads it only when taken).
    KEPT_TYPES = (IndexError, KeyError, ValueError, TypeError, ZeroDivisionError, AttributeError, NameError,
                  UnboundLocalError)
    _classes: dict = {}

    @classmethod
    def wrapping(cls, error: BaseException, branch_name: str, origin: "OriginInfo",
                 inline: bool = False) -> "StagedBranchError":
        """`inline`: the side was traced inside the caller's own `jax.jit` (or grad, vmap), where
        dy2st's program does not run, so the raise cannot wait for the data."""
        return cls._as(type(error),
            f"tracing the {branch_name} of this staged `if` raised {type(error).__name__}: {_first_line(error)} The "
            "condition is a traced array, so both sides are traced whichever one the data picks; eager Python "
            "raises this only when the data takes that side." + (
                " Inside your own `jax.jit` (or grad, vmap) of the converted function the raise cannot wait for "
                "the data, as it does when dy2st compiles the function itself." if inline else ""),
            origin,
            advice=_UNBOUND_IN_BRANCH if issubclass(type(error), NameError) else
            _INVALID_BRANCH + (" Or call the converted function outside `jax.jit`." if inline else ""),
        )

    @classmethod
    def wrapping_loop_body(cls, error: BaseException, origin: "OriginInfo") -> "StagedBranchError":
        return cls._as(type(error),
            f"tracing the body of this staged loop raised {type(error).__name__}: {_first_line(error)} Its number "
            "of iterations is traced, so the body is traced whether or not it runs; eager Python raises this only "
            "when an iteration runs.",
            origin,
            advice="make the body valid for the state before the loop as well (guard the index or key, fix the "
            "shape), or make the loop's condition or range a Python value so the loop runs as Python.",
        )

    @classmethod
    def wrapping_after_raise(cls, error: BaseException, origin: "OriginInfo") -> "StagedBranchError":
        """`error`, raised while tracing code after this staged `if` (at `origin`), whose side raises
        when the data takes it: eagerly that raise comes first, on those data."""
        return cls._as(type(error),
            f"tracing the code after this staged `if` raised {type(error).__name__}"
            f"{': ' + _first_line(error) if str(error) else '.'} A side "
            "of the `if` raises when the data takes it, and eager Python then raises that first; the program "
            "cannot tell which when it is traced.",
            origin,
            advice="make the code after the `if` valid whatever the data (guard the index, give `next` a default), "
            "or raise with a Python condition.",
        )

    @classmethod
    def _as(cls, kind: type, message: str, origin: "OriginInfo", advice: str) -> "StagedBranchError":
        """The error, also an instance of `kind` where `kind` can be made from one message (not
        an ExceptionGroup, a UnicodeDecodeError: then a StagedBranchError alone)."""
        try:
            return cls._combined(kind)(message, origin, advice=advice)
        except TypeError:
            return cls(message, origin, advice=advice)

    @classmethod
    def _combined(cls, kind: type) -> type:
        """This class and `kind` in one: the error is also what was raised."""
        combined = cls._classes.get(kind)
        if combined is None:
            combined = cls._classes[kind] = type(cls.__name__, (cls, kind), {"__module__": cls.__module__})
        return combined


def rebinding_hint(name: str, value: str) -> str:
    """Code for a fix that rebinds `name` to `value` (`{}` in it stands for `name`): `xs =
    list(xs)`; where `name` is how messages call a function's return value, `return list(...)`."""
    if " " in name:  # "the return value": no variable of the user's
        return f"return {value.format('...')}"
    return f"{name} = {value.format(name)}"


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0].rstrip(".") + "." if str(error) else ""


_INVALID_BRANCH = ("make that side valid for every input (guard the index or key, fix the shape), or make the "
                   "condition a Python value; to raise only for bad values, use `assert` (checked when the program runs).")
_UNBOUND_IN_BRANCH = ("assign the variable on every path before this `if` (a default value), or make the condition "
                      "a Python value.")


class IntOverflowError(Dy2StaticError, OverflowError):
    """A Python int that a staged loop or branch computes on left int32's range when the program ran.

    Eagerly a Python int grows without bound; in a compiled program it is a weakly typed int32
    (the numbers rule), which would wrap silently. Raised when the program runs, at the line that
    computed it. Fix: keep the value within int32, compute it as a float (`1.0 * ...`), or make the
    loop's trip count a Python value so it runs in Python.
    """


class TracedRecursionError(Dy2StaticError, RecursionError):
    """A recursive call did not end while its function was traced.

    A staged `if` traces both of its sides, so a recursion whose base case is decided by a
    traced value (`if n == 0: return ...` with `n` an array) calls itself again on every trace,
    where eager Python stops when the data says. (A recursion that never ends eagerly either
    raises this too: it is also a RecursionError.) Fix: make the base case a Python value (a
    static int argument), or write the recursion as a loop.
    """


class MissingAfterLoopError(Dy2StaticError, KeyError, AttributeError):
    """A dict item or attribute first set inside a staged loop that ran zero times is live after it.

    Eager Python raises KeyError (an item) or AttributeError (an attribute) where it is read;
    the check runs when the loop ends, so this is also a KeyError and an AttributeError. Fix:
    set the item or attribute before the loop.
    """

    __str__ = Exception.__str__  # KeyError's would quote the message


class InputSignatureError(Dy2StaticError, TypeError):
    """An argument cannot be part of a program's input signature (e.g. unhashable static)."""


class BuiltinError(Dy2StaticError, TypeError):
    """A builtin (`int`, `max`, `range`, ...) got a traced value it cannot handle staged.

    Example: `int(x)` of an array of 3 values, or `max(a, b, key=f)` on traced values.
    Fix: reduce the array first, or use the jnp function (`jnp.max`, `jnp.arange`).
    """


class TracedValueError(Dy2StaticError, TypeError):
    """Python code that dy2st runs as it is needed a concrete value (bool, int, index) of a traced array.

    Such code: `xs.index(v)` or `v in xs` over arrays, the `if` of a comprehension, a helper
    marked `not_to_static`, library code. JAX's own error (a TracerBoolConversionError, ...) is kept as the cause. Fix: write the
    decision as an `if` statement in converted code, or compute it with jnp (`jnp.where`,
    `jnp.argmax(xs == v)`), or keep the value a Python number.
    """


class ProgramOutputError(Dy2StaticError, TypeError):
    """The function returns a value a compiled program cannot give back on every call.

    Arrays, and Python constants made while tracing (numbers, strings, numpy values), come
    back as eager gives them; a set, an object of a class or a closure would be one object
    made once, where eager makes a new one per call.

    Example::

        return x * 2, {1, 2}     # a set

    Fix: return arrays (or numbers, strings) and build the object from them after the call.
    """


class ScopeWriteError(Dy2StaticError):
    """A traced value is written to a `global` or outer `nonlocal` variable.

    The variable would keep a tracer after the trace ends (a leaked tracer) and the program
    would never update it when it runs. Fix: return the value instead.
    """


class StagedInTryError(UnsupportedSyntaxError):
    """An `if`/`while` with a traced condition sits inside a `try` block.

    A staged branch is traced whether or not it runs, so `except` would catch errors of the
    branch that does not run. Fix: move the `try` out of the function or into the branches.
    """


class InputSpecError(InputSignatureError):
    """An argument does not match its `dy2st.InputSpec` (rank, dtype, a fixed dimension, or a
    named dimension that differs between inputs), or a spec itself is malformed.

    The message names the argument, the spec and what was given. Fix: pass an array of the
    spec's dtype and shape (`None` dims take any size >= 1), or widen the spec.
    """


class ExportError(Dy2StaticError):
    """`dy2st.save` could not trace the function for every size its InputSpecs allow.

    Typical cause: Python code that needs a dynamic dimension's value (`if x.shape[0] > 3:`),
    or two dynamic dims that must be equal but were given separate symbols. Fix: give the
    dimension a fixed size, or name equal dims alike (`InputSpec(("batch", 784))`).
    """


class ArgumentError(Dy2StaticError, TypeError, ValueError):
    """A dy2st function was given an argument it cannot take: `to_static(3)`, `max_programs=0`,
    `in_shardings` that are not shardings, `set_verbosity(None)`.

    The message names the argument and says what to pass instead. It is also a TypeError and a
    ValueError, what Python raises for such a misuse, so code that catches either still does.
    """


class ArtifactError(Dy2StaticError):
    """A saved artifact cannot be loaded: a file is missing, truncated or altered (its sha256
    differs from the manifest's), or it was written by an incompatible dy2st/jax/platform.

    The message names the artifact, the file and what is wrong. Fix: save the artifact again
    with `dy2st.save` (or `dy2st save`), or load it with a matching dy2st version.
    """


def user_frame_note(origin: OriginInfo) -> str:
    """A note for exceptions that keep their own type but gain the user's location."""
    return f"(dy2st) raised while converting/tracing:\n  {origin.as_header()}"


# -- the boundary: what exceptions look like when they leave a StaticFunction ---------------
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS = tuple(
    {os.path.join(os.path.abspath(p), "") for key in ("stdlib", "platstdlib", "purelib", "platlib")
     if (p := sysconfig.get_paths().get(key))}
)
_NOTED_ATTR = "__dy2st_noted__"
_WRITTEN_ATTR = "_dy2st_written"  # a run-time failure: what its program wrote before it
_EAGER_ATTR = "__dy2st_run_eagerly__"


def note_raised_while_tracing(error: BaseException, put_back: bool) -> None:
    """A program's trace ended with `error`: where it is the function's own exception (Python's
    or the user's class, not dy2st's or jax's) and what the trace changed outside the call was
    put back (`put_back`; the caller's objects it changed are put back too, its prints not yet
    made), the call runs the function eagerly instead (`rerun_eagerly`): eager's prints,
    changes made before the raise and the exception itself, where the trace had only abstract
    values."""
    package = (type(error).__module__ or "").split(".")[0]
    if (put_back and isinstance(error, Exception) and not isinstance(error, Dy2StaticError)
            and package not in ("jax", "jaxlib", "dy2st")):
        try:
            setattr(error, _EAGER_ATTR, True)
        except AttributeError:
            pass


def mark_noted(exc: BaseException) -> None:
    """`exc` says where it was raised already: no boundary adds a note of the user's line."""
    try:
        setattr(exc, _NOTED_ATTR, True)
    except AttributeError:
        pass


def at_eager_boundary(exc: BaseException, filtering: bool) -> None:
    """Prepare the error of a call run eagerly (`rerun_eagerly`) to leave: our frames hidden,
    and a note of the user's line, as the trace's error would have had."""
    origin = innermost_user_frame(exc.__traceback__)
    if origin is not None and not getattr(exc, _NOTED_ATTR, False):
        exc.add_note(f"(dy2st) raised by the function run eagerly (its trace raised it too):\n  {origin.as_header()}")
    mark_noted(exc)  # (a boundary around this one, the front's, adds no note of its own)
    if filtering:
        exc.__traceback__ = filter_traceback(exc.__traceback__)


def rerun_eagerly(exc: BaseException, error: BaseException) -> bool:
    """Whether a call whose error `exc` became `error` (`at_boundary`) runs the function eagerly
    instead of raising: `exc` is the function's own, raised while tracing (not one that shows
    a traced value used as a Python one: `error` is then a Dy2StaticError; an UnboundLocalError
    a NameError of converted code stands for is eager's own)."""
    return getattr(exc, _EAGER_ATTR, False) and not isinstance(error, Dy2StaticError)


_TRACED_AS_PYTHON = (
    "write the decision as an `if` statement in converted code (dy2st stages it), or compute it "
    "with jnp (`jnp.where(...)`, `jnp.argmax(xs == v)` for a position), or keep the value a Python "
    "number. Code dy2st runs as it is: a comprehension's `if`, a `match`, list methods that compare "
    "arrays (`xs.index(v)`, `v in xs`), helpers marked not_to_static or from a library."
)
# JAX's errors for Python code that needs a concrete value of a tracer: at the boundary they
# become a TracedValueError at the user's line (the JAX error is its cause).
_TRACED_SLICE = "Slice entries must be static integers"  # jax's IndexError for `x[:k]` with a traced k
_TRACED_SLICE_ADVICE = (
    "keep the bound a Python value (decide it with a Python condition), slice a fixed size at a "
    "traced start (`lax.dynamic_slice(x, (start,), (size,))`), or keep the shape and mask the rest "
    "(`jnp.where(jnp.arange(len(x)) < k, x, 0)`).")
_TRACED_KEY_ADVICE = (
    "count or index with arrays (`jnp.bincount(preds, length=n)`, `counts.at[k].add(1)`), or fetch "
    "the values first (`jax.device_get`) and build the dict outside the converted function.")
_TRACED_MASK_ADVICE = (
    "keep the shape and mask the values instead: `jnp.where(mask, x, 0)` for `x[mask] = 0` or "
    "`x.at[mask].set(0)`, `jnp.mean(d ** 2, where=mask)` or `jnp.sum(jnp.where(mask, d, 0))` for a "
    "reduction of `d[mask]`; or index with `jnp.nonzero(mask, size=n, fill_value=...)`, of a fixed size.")
_TRACED_INDEX_ADVICE = (
    "to pick an item, index an array instead: `jnp.stack(items)[i]` for arrays of one shape, "
    "`jax.tree_util.tree_map(lambda *v: jnp.stack(v)[i], *items)` for pytrees, or `lax.switch(i, "
    "[lambda: f(a), lambda: f(b)])`; otherwise keep the value a Python value (decide it with a Python "
    "condition).")
_NEEDS_CONCRETE = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                   jax.errors.TracerArrayConversionError)


_runtime_failures: list = []  # errors raised by run-time checks, not yet re-raised by a boundary
_runtime_failures_lock = threading.Lock()


_RUNTIME_FAILURE_ATTR = "__dy2st_runtime_failure__"


def record_runtime_failure(error: BaseException) -> None:
    """Called by a run-time check (in a jax callback) just before it raises `error`."""
    setattr(error, _RUNTIME_FAILURE_ATTR, True)
    with _runtime_failures_lock:
        _runtime_failures.append(error)


class _QuietRuntimeFailures(logging.Filter):
    """jax logs every exception a debug callback raises, traceback included, to stderr before
    XLA re-raises it. A failed dy2st check reaches the user as the exception itself, at their
    line, so that log is noise: drop it (callbacks of the user's own still log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not getattr(error, _RUNTIME_FAILURE_ATTR, False)


_jax_compat.debug_callback_logger().addFilter(_QuietRuntimeFailures())


class HostArray:
    """A run-time value among a deferred error's arguments (`ValueError("bad", x.sum())` in a
    staged side), as its host callback got it: the callback must not call jax, so the boundary
    that re-raises the error makes it a jax array, as eager's argument is."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return "Array" + repr(self.value)[len("array"):]  # as jax shows the array eager raises with

    __str__ = __repr__


def _with_jax_arrays(failure: BaseException) -> BaseException:
    def as_jax(tree):
        return jax.tree_util.tree_map(lambda v: jax.numpy.asarray(v.value) if isinstance(v, HostArray) else v,
                                      tree, is_leaf=lambda v: isinstance(v, HostArray))

    failure.args = as_jax(failure.args)
    attributes = getattr(failure, "__dict__", None) or {}
    for name, value in list(attributes.items()):  # (`self.code = code`: set directly)
        if isinstance(value, HostArray):
            attributes[name] = jax.numpy.asarray(value.value)
    return failure


def runtime_failure_of(wrapper: BaseException, forget: bool = False) -> BaseException | None:
    """The recorded failure that `wrapper` (XLA's error) reports, if any; `forget`: forget every
    recorded one (the boundary's, which raises it)."""
    with _runtime_failures_lock:
        failures = list(_runtime_failures)
        if forget:
            _runtime_failures.clear()
    text = str(wrapper)
    return next((f for f in reversed(failures) if str(f) in text), None)


def note_failed_when_run(wrapper: BaseException, failure: BaseException, written: dict) -> None:
    """A program raised `wrapper` (XLA's error) for `failure`, a failed run-time check that
    raises eager's own exception, after writing `written` (`output_replayed`): what the call did
    before the check (changes to its arguments, globals, a `finally`'s print after it) is lost
    with the program's outputs, so the call runs the function eagerly instead (`rerun_eagerly`),
    from the state before the call, dropping from its output what the program printed already."""
    setattr(wrapper, _EAGER_ATTR, True)
    setattr(failure, _WRITTEN_ATTR, written)


def written_before_failing(failure: BaseException) -> dict:
    """What the program that failed with `failure` had written (`note_failed_when_run`)."""
    return getattr(failure, _WRITTEN_ATTR, {})


def failed_when_run(error: BaseException) -> bool:
    """Whether `error` is a run-time check's, raised when a program ran (not while tracing)."""
    return getattr(error, _RUNTIME_FAILURE_ATTR, False)


@contextlib.contextmanager
def output_replayed(written: dict):
    """While inside, the first text written into each stream is dropped where it is what
    `written` says the failed program wrote into it already (`writes.WrittenLog.since`): the
    eager run that replaces its call writes the same again first, then what the program did
    not reach (a `finally`'s print, an `__exit__`'s). `sys.stdout`/`sys.stderr` drop it as it
    comes; a file is rewound by it, for the eager run to write it again. The streams are the
    process's: another thread's print meanwhile may be dropped instead, on this rare path."""
    stdout, stderr = sys.stdout, sys.stderr
    for file, text in written.items():
        if file is not stdout and file is not stderr:
            _rewind(file, text)
    sys.stdout = _Dropping(stdout, written.get(stdout))
    sys.stderr = _Dropping(stderr, written.get(stderr)) if stderr is not stdout else sys.stdout
    try:
        yield
    finally:
        try:
            jax.effects_barrier()  # the eager run's programs' prints, made before the streams return
        finally:
            sys.stdout, sys.stderr = stdout, stderr


def can_rewind(file) -> bool:
    """Whether `output_replayed` can take back text written into `file` (a seekable file's)."""
    try:
        return not file.closed and file.seekable()
    except (AttributeError, ValueError, OSError):
        return False


def _rewind(file, text) -> None:
    """Take back the `text` last written into `file`, which `can_rewind` (as a string's
    characters in a StringIO, its encoded bytes in a text file, as it is in a binary one)."""
    if isinstance(file, io.TextIOBase) and not isinstance(file, io.StringIO):
        file.flush()
        text = text.encode(file.encoding or "utf-8")
    file.seek(file.tell() - len(text))
    file.truncate()


class _Dropping:
    """A stream that drops the first `len(text)` characters written into it (`output_replayed`)."""

    def __init__(self, stream, text):
        self._stream, self._left = stream, len(text or "")

    def write(self, text):
        dropped = min(self._left, len(text))
        self._left -= dropped
        if dropped < len(text):
            self._stream.write(text[dropped:])
        return len(text)

    def __getattr__(self, name):  # flush, encoding, isatty, fileno, ...: the stream's own
        return getattr(self._stream, name)


class RuntimeChecks:
    """Counts run-time checks traced so far, so a StaticFunction learns its programs have some.

    A program with checks is waited for before its call returns: with asynchronous dispatch
    (GPU/TPU) a failed check would otherwise surface later, outside the call that caused it.
    """

    traced = 0

    @classmethod
    def record_traced(cls) -> None:
        cls.traced += 1


def is_internal(filename: str) -> bool:
    """True for dy2st's own files."""
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)


def is_library_file(filename: str) -> bool:
    """True for dy2st's, the stdlib's and installed packages' files: not the user's."""
    if filename.startswith("<"):
        return True
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIR) or path.startswith(_LIBRARY_DIRS)


def _walk(tb):
    while tb is not None:
        yield tb
        tb = tb.tb_next


def innermost_user_frame(tb) -> OriginInfo | None:
    """The deepest traceback entry in user code (not dy2st, jax, the stdlib, site-packages)."""
    found = None
    for entry in _walk(tb):
        if not is_library_file(entry.tb_frame.f_code.co_filename):
            frame = entry.tb_frame
            found = OriginInfo(frame.f_code.co_filename, entry.tb_lineno, user_function_name(frame))
    return found


def filter_traceback(tb):
    """`tb` without dy2st's own frames, nor JAX's unless JAX_TRACEBACK_FILTERING=off (a new
    chain; the frames themselves are shared). The user's frames are what remain."""
    drop_jax = _jax_compat.traceback_filtering_mode() != "off"

    def hidden(filename: str) -> bool:
        return is_internal(filename) or (drop_jax and not _jax_compat.traceback_shows(filename))

    kept = [e for e in _walk(tb) if not hidden(e.tb_frame.f_code.co_filename)]
    if not kept:
        return tb
    new = None
    for entry in reversed(kept):
        new = types.TracebackType(new, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return new


_FREE_VARIABLE = re.compile(r"cannot access free variable '(\w+)' where it is not associated with a value in enclosing scope")
_NOT_DEFINED = re.compile(r"name '(\w+)' is not defined")


def _as_unbound_local(exc: BaseException) -> BaseException:
    """A user's local read before assignment is, in converted code, a free variable of a
    generated branch or loop function, where Python raises NameError; eager Python raises
    UnboundLocalError for it, so that is what leaves a StaticFunction."""
    if type(exc) is not NameError:
        return exc
    match = _FREE_VARIABLE.fullmatch(str(exc)) or _NOT_DEFINED.fullmatch(str(exc))
    entries = list(_walk(exc.__traceback__))
    top = _converted_code_of(entries[-1].tb_frame) if match and entries else None
    if top is None or (match.re is _NOT_DEFINED and not _binds(top, match.group(1))):
        return exc  # not converted code, or a global that is truly not defined
    error = UnboundLocalError(f"cannot access local variable '{match.group(1)}' where it is not associated with a value")
    error.__traceback__ = exc.__traceback__
    return error


def _text(exc: BaseException) -> str:
    """`str(exc)`, or "" where its message cannot be made now (the user's own error raised
    while tracing with a message formatted from traced values: the call runs eagerly after it,
    which makes eager's)."""
    try:
        return str(exc)
    except Exception:
        return ""


def _as_undefined_use(exc: BaseException) -> BaseException:
    """A variable unbound on the path taken holds dy2st's `Undefined` marker in converted code;
    library code given it (`jnp.where(c, x, marker)`) fails with its own TypeError, where eager
    Python raised UnboundLocalError reading the variable. Found in a frame of the user's, the
    marker's own error is raised instead (an UndefinedVariableError, an UnboundLocalError)."""
    if isinstance(exc, Dy2StaticError) or not isinstance(exc, (TypeError, ValueError)) or "Undefined" not in _text(exc):
        return exc  # only errors about the marker itself ("got <class '...Undefined'>")
    for entry in reversed(list(_walk(exc.__traceback__))):
        frame = entry.tb_frame
        if is_library_file(frame.f_code.co_filename):
            continue
        line = linecache.getline(frame.f_code.co_filename, entry.tb_lineno)
        marker = next((v for k, v in frame.f_locals.items()
                       if getattr(type(v), "is_undefined_marker", False) and re.search(rf"\b{re.escape(k)}\b", line)), None)
        if marker is not None:  # a variable on the failing line holds it
            try:
                marker._fail()
            except UndefinedVariableError as error:
                error.__traceback__ = exc.__traceback__
                return error
    return exc


def _as_traced_recursion(exc: BaseException) -> BaseException:
    """Python's RecursionError from a recursion of the user's code while tracing, as a
    TracedRecursionError at the line of the recursive call (it is still a RecursionError)."""
    if type(exc) is not RecursionError:
        return exc
    # the recursive call's line: the user's line the traceback holds most often (the limit strikes
    # at a depth that depends on the stack the call began with, anywhere in the recursion)
    lines = collections.Counter(
        OriginInfo(entry.tb_frame.f_code.co_filename, entry.tb_lineno, user_function_name(entry.tb_frame))
        for entry in _walk(exc.__traceback__) if not is_library_file(entry.tb_frame.f_code.co_filename))
    if not lines:
        return exc
    origin = lines.most_common(1)[0][0]
    error = TracedRecursionError(
        "a recursive call did not end while the function was traced: a staged `if` traces both of its "
        "sides, so a recursion whose base case a traced value decides calls itself on every trace.",
        origin,
        advice="make the base case a Python value (a static int argument, `x.shape[0]`), or write the "
        "recursion as a loop.")
    error.__cause__, error.__traceback__ = exc, exc.__traceback__
    return error


def _converted_code_of(frame) -> types.CodeType | None:
    """The converted user function's code that `frame` runs in (itself or a generated branch or
    loop function nested in it), or None."""
    while frame is not None:
        if frame.f_code in _converted_codes:
            return frame.f_code
        frame = frame.f_back
    return None


def _binds(code: types.CodeType, name: str) -> bool:
    """Whether `code` or a function nested in it assigns `name`: a local of the user's function,
    which a generated function reading it before any assignment sees as an unknown global."""
    if name in code.co_varnames or name in code.co_cellvars:
        return True
    return any(_binds(c, name) for c in code.co_consts if isinstance(c, types.CodeType))


def _concrete_value_needed(exc: BaseException) -> tuple[str, str] | None:
    """`(message, advice)` of the TracedValueError that JAX's `exc` stands for, where Python code
    needed a concrete value of a traced array (a slice bound, a dict key, a boolean mask, an
    int); None for any other error."""
    text = _text(exc)
    if isinstance(exc, IndexError) and text.startswith(_TRACED_SLICE):
        return (f"a slice bound here is a traced value (a number the data decides): {text.splitlines()[0]} The "
                "slice's size is the result's shape, which XLA fixes when it compiles.", _TRACED_SLICE_ADVICE)
    if type(exc) is TypeError and text.startswith("unhashable type:") and "Tracer" in text:
        return ("a traced value is a dict key or a set item here (a number the data decides): the keys of a "
                "Python dict are known while tracing, and eagerly these would depend on the data.", _TRACED_KEY_ADVICE)
    if isinstance(exc, jax.errors.NonConcreteBooleanIndexError):
        return ("a boolean mask of traced values indexes an array here (`x[mask]`, `x.at[mask]`): the result's "
                "shape would be how many items the data selects, and XLA fixes shapes when it compiles.",
                _TRACED_MASK_ADVICE)
    if not isinstance(exc, _NEEDS_CONCRETE):
        return None
    if isinstance(exc, jax.errors.TracerIntegerConversionError) and "__index__()" in text:
        return ("a traced value is used where Python needs a concrete int (a list's or tuple's index, `chr()`, "
                "`hex()`, `'ab' * k`): a number the data decides, such as a position a staged `if` or loop "
                "picked, is a 0-d array (the numbers rule).", _TRACED_INDEX_ADVICE)
    return (f"Python needs a concrete value of a traced array here, in code dy2st runs as it is: "
            f"{text.splitlines()[0] if text else type(exc).__name__}", _TRACED_AS_PYTHON)


def at_boundary(exc: BaseException, filtering: bool) -> BaseException:
    """Prepare `exc` to leave a StaticFunction: the user's line as a note, our frames hidden.

    A run-time assert failure that XLA wrapped in a JaxRuntimeError is swapped for the
    AssertionError the check raised. The exception keeps its type otherwise.
    """
    failure = runtime_failure_of(exc, forget=True) if isinstance(exc, jax.errors.JaxRuntimeError) else None
    if failure is not None:
        failure.__suppress_context__ = True  # (its cause, if any, the user's: `raise ... from e`)
        failure = _as_unbound_local(_with_jax_arrays(failure))  # (a staged side's deferred error: eager's type)
        setattr(failure, _RUNTIME_FAILURE_ATTR, True)
        if filtering:
            failure.__traceback__ = filter_traceback(failure.__traceback__)
        return failure
    exc = _as_traced_recursion(_as_undefined_use(_as_unbound_local(exc)))
    needed = _concrete_value_needed(exc)
    if needed is not None:
        origin = innermost_user_frame(exc.__traceback__)
        if origin is not None:
            error = TracedValueError(needed[0], origin, advice=needed[1])
            error.__cause__, error.__traceback__ = exc, exc.__traceback__
            exc = error  # filtered below, as every error leaving a StaticFunction
    if not isinstance(exc, Dy2StaticError) and not getattr(exc, _NOTED_ATTR, False):
        origin = innermost_user_frame(exc.__traceback__)
        mark_noted(exc)
        if origin is not None:
            exc.add_note(user_frame_note(origin))
    if filtering:
        exc.__traceback__ = filter_traceback(exc.__traceback__)
    return exc
