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

import dataclasses
import linecache
import sys
import types


# Code objects of converted user functions. Generated helpers (branch and loop bodies) run
# nested inside them; errors name the enclosing user function rather than `if_body`.
_converted_codes: set = set()


def register_converted_code(code: types.CodeType) -> None:
    _converted_codes.add(code)


def _user_function_name(frame: types.FrameType) -> str:
    probe = frame
    while probe is not None:
        if probe.f_code in _converted_codes:
            return probe.f_code.co_name
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
        return cls(frame.f_code.co_filename, frame.f_lineno, _user_function_name(frame))

    @classmethod
    def of_caller(cls, depth: int = 1) -> "OriginInfo":
        """The frame `depth` levels above the function that calls this."""
        return cls.from_frame(sys._getframe(depth + 1))

    def as_header(self) -> str:
        header = f'File "{self.filename}", line {self.lineno}, in {self.function_name}'
        line = self.source_line
        return f"{header}\n    {line}" if line else header


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


class LoopGradientError(Dy2StaticError):
    """Reverse-mode differentiation through a staged `while` whose trip count is unknown.

    XLA's while loop keeps no history of its iterations, so `jax.grad` cannot run it backwards.
    Fix: call `dy2st.set_loop_options(maximum_iterations=N)` inside the loop body; the loop is
    then staged as a scan of N masked steps, which reverse mode supports.
    """


class UndefinedVariableError(Dy2StaticError, NameError):
    """A variable is read where eager Python would raise UnboundLocalError/NameError."""


class InputSignatureError(Dy2StaticError, TypeError):
    """An argument cannot be part of a program's input signature (e.g. unhashable static)."""


def user_frame_note(origin: OriginInfo) -> str:
    """A note for exceptions that keep their own type but gain the user's location."""
    return f"(dy2st) raised while converting/tracing:\n  {origin.as_header()}"
