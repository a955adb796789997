"""`explain`: what became of each line of a converted function, for one input signature.

    report = f.explain(x)            # or dy2st.explain(f, x); InputSpecs work too
    print(report)                    # the source, each touched line annotated in the margin
    report.as_dict()                 # the same for tools; report.to_html() for notebooks

The report is built from two sources that it cross-checks:

* the decisions the runtime operators note while the program is traced (`dy2st.runtime.events`):
  which `if` became a `lax.cond` and what it carries, which loop became a scan, a while loop or
  a Python unroll and why, which calls were converted, which run-time checks and prints remain;
* the traced program itself: every jaxpr equation is attributed to the innermost user line that
  created it (`jaxpr_lines`), so a line reported as a scan holds a `scan` equation.

Explaining traces into a fresh `jax.jit` of its own: the function's program cache is left as it
is, and a normal call pays nothing for this module (the operators note events only while a
recording is open, and only while tracing).
"""

from __future__ import annotations

import collections
import dataclasses
import html
import inspect
import os
import time
from typing import Any

import jax
import numpy as np

from dy2st import _jax_compat
from dy2st.config import config
from dy2st.errors import Dy2StaticError, at_boundary
from dy2st.runtime import events
from dy2st.runtime.events import Event
from dy2st.runtime.values import ARRAY_TYPES

# How each kind of event is shown: a colour for the HTML report, a mark for the text one.
_STYLE = {
    "cond": ("#1a7f37", "⇄"),
    "while_loop": ("#1a7f37", "↻"),
    "scan": ("#1a7f37", "↻"),
    "python_if": ("#57606a", "·"),
    "flag": ("#1a7f37", "∨"),
    "python_loop": ("#57606a", "·"),
    "unrolled": ("#9a6700", "⋯"),
    "converted_call": ("#0969da", "→"),
    "python_call": ("#9a6700", "→"),
    "check": ("#8250df", "!"),
    "print": ("#8250df", "»"),
    "error": ("#cf222e", "✗"),
}
_CALLBACK_PRIMITIVES = ("callback",)  # debug_callback, pure_callback, io_callback
_MARGIN_AT = 56  # the margin starts after this many characters of source (longer lines push it)


@dataclasses.dataclass(frozen=True)
class SourceBlock:
    """The source of one function the report shows: the explained one, or a converted callee."""

    name: str
    filename: str
    first_line: int
    lines: tuple[str, ...]

    @property
    def last_line(self) -> int:
        return self.first_line + len(self.lines) - 1

    def holds(self, filename: str, lineno: int) -> bool:
        return filename == self.filename and self.first_line <= lineno <= self.last_line


@dataclasses.dataclass(frozen=True)
class LineNote:
    """What happened at one line: `count` times the same decision (an `if` in an unrolled loop
    is traced once per iteration, and is as many `lax.cond`s in the program)."""

    event: Event
    count: int

    @property
    def margin(self) -> str:
        times = f" ×{self.count}" if self.count > 1 else ""
        return f"{_STYLE.get(self.event.kind, ('', '·'))[1]} {self.event.summary}{times}"


@dataclasses.dataclass
class Report:
    """What `explain` found; `str()` for a terminal, `to_html()` for a notebook, `as_dict()` for tools."""

    function: str
    signature: str
    programs_cached: int
    equations: int  # every equation, nested ones (branch and loop bodies) included
    primitives: dict[str, int]  # control flow and callbacks by primitive name, nested included
    host_callbacks: int
    convert_seconds: float
    trace_seconds: float
    compile_seconds: float | None  # None: not compiled (see compile_note)
    compile_note: str
    notes: list[LineNote]
    blocks: list[SourceBlock]
    jaxpr_lines: dict[tuple[str, int], dict[str, int]]  # (file, line) -> primitive -> count
    error: Dy2StaticError | None = None
    jaxpr: Any = dataclasses.field(default=None, repr=False)
    route: list[str] = dataclasses.field(default_factory=list)  # the call policy's reasons (`call_policy`)

    # -- queries -------------------------------------------------------------------------------
    def at(self, lineno: int, filename: str | None = None) -> list[LineNote]:
        """The notes of one line (of the explained function's file unless `filename` is given)."""
        filename = filename or (self.blocks[0].filename if self.blocks else None)
        return [n for n in self.notes if n.event.lineno == lineno and n.event.filename == filename]

    def kinds_at(self, lineno: int, filename: str | None = None) -> list[str]:
        return [n.event.kind for n in self.at(lineno, filename)]

    # -- output ----------------------------------------------------------------------------------
    def as_dict(self) -> dict:
        return {
            "function": self.function,
            "signature": self.signature,
            "programs_cached": self.programs_cached,
            "equations": self.equations,
            "primitives": dict(self.primitives),
            "host_callbacks": self.host_callbacks,
            "seconds": {"convert": self.convert_seconds, "trace": self.trace_seconds,
                        "compile": self.compile_seconds},
            "compile_note": self.compile_note,
            "events": [{"file": n.event.filename, "line": n.event.lineno, "function": n.event.function,
                        "kind": n.event.kind, "summary": n.event.summary, "detail": n.event.detail,
                        "count": n.count} for n in self.notes],
            "jaxpr_lines": [{"file": f, "line": l, "primitives": dict(p)} for (f, l), p in sorted(self.jaxpr_lines.items())],
            "error": str(self.error) if self.error is not None else None,
            "route": list(self.route),
        }

    def _header(self) -> list[str]:
        control = ", ".join(f"{k} {v}" for k, v in sorted(self.primitives.items())) or "no control flow"
        times = f"convert {self.convert_seconds * 1e3:.1f} ms · trace {self.trace_seconds * 1e3:.1f} ms · "
        times += (f"compile {self.compile_seconds * 1e3:.1f} ms" if self.compile_seconds is not None
                  else f"compile: {self.compile_note}")
        lines = [f"dy2st.explain: {self.function}", f"  signature (the program's cache key): {self.signature}"]
        if self.error is None:
            lines.append(f"  program: {self.equations} equations ({control}), "
                         f"{self.host_callbacks} host callback{'s' if self.host_callbacks != 1 else ''}; "
                         f"{self.programs_cached} program{'s' if self.programs_cached != 1 else ''} cached for this function")
        else:
            lines.append("  no program: tracing stopped at the error below")
        lines.append(f"  time: {times}")
        lines += [f"  calls: {reason}" for reason in self.route]  # what earlier calls showed (the policy)
        return lines

    def _rows(self):
        """`(block, [(lineno, text, notes)])` for every block, then notes outside any block."""
        by_line = collections.defaultdict(list)
        for note in self.notes:
            by_line[(note.event.filename, note.event.lineno)].append(note)
        shown = set()
        for block in self.blocks:
            rows = []
            for offset, text in enumerate(block.lines):
                key = (block.filename, block.first_line + offset)
                rows.append((key[1], text.rstrip("\n"), by_line.get(key, [])))
                shown.add(key)
            yield block, rows
        rest = [(key, notes) for key, notes in by_line.items() if key not in shown]
        if rest:
            yield None, [(lineno, f"{_short_path(f)}:{lineno}", notes) for (f, lineno), notes in rest]

    def _footnotes(self) -> list[LineNote]:
        """The notes that have a detail, in order: footnote i + 1 is the i-th."""
        return [note for note in self.notes if note.event.detail]

    def __str__(self) -> str:
        out = self._header()
        numbers = {id(n): i + 1 for i, n in enumerate(self._footnotes())}
        for block, rows in self._rows():
            out.append("")
            out.append(f"{_short_path(block.filename)}, in {block.name}:" if block else "elsewhere:")
            width = min(_MARGIN_AT, max((len(t) for _, t, _ in rows), default=0))
            for lineno, text, notes in rows:
                if not notes:
                    out.append(f"{lineno:5d} | {text}".rstrip())
                    continue
                marks = "; ".join(n.margin + (f" [{numbers[id(n)]}]" if id(n) in numbers else "") for n in notes)
                out.append(f"{lineno:5d} | {text.ljust(width)}  | {marks}")
        footnotes = self._footnotes()
        if footnotes:
            out.append("")
            out.extend(f"  [{i + 1}] line {n.event.lineno}: {n.event.detail}" for i, n in enumerate(footnotes))
        return "\n".join(out)

    def to_html(self) -> str:
        parts = ['<div class="dy2st-explain" style="font-family:monospace">']
        parts.extend(f"<div>{html.escape(line)}</div>" for line in self._header())
        for block, rows in self._rows():
            title = f"{_short_path(block.filename)}, in {block.name}" if block else "elsewhere"
            parts.append(f'<div style="margin-top:0.6em;font-weight:bold">{html.escape(title)}</div>')
            parts.append('<table style="border-collapse:collapse">')
            for lineno, text, notes in rows:
                margin = "; ".join(
                    f'<span style="color:{_STYLE.get(n.event.kind, ("#57606a",))[0]}" '
                    f'title="{html.escape(n.event.detail, quote=True)}">{html.escape(n.margin)}</span>'
                    for n in notes)
                parts.append(f'<tr><td style="color:#8c959f;padding-right:1em;text-align:right">{lineno}</td>'
                             f'<td><pre style="margin:0">{html.escape(text)}</pre></td>'
                             f'<td style="padding-left:2em">{margin}</td></tr>')
            parts.append("</table>")
        footnotes = self._footnotes()
        if footnotes:
            parts.append("<ul>")
            parts.extend(f"<li>line {n.event.lineno}: {html.escape(n.event.detail)}</li>" for n in footnotes)
            parts.append("</ul>")
        parts.append("</div>")
        return "\n".join(parts)

    def _repr_html_(self) -> str:
        return self.to_html()


def explain(fn, *args, **kwargs) -> Report:
    """Trace `fn` (a function, a StaticFunction, a method or a model) for these arguments and
    report what became of each line; see the module docstring.

    Arguments are given as for a call: arrays, `jax.ShapeDtypeStruct`s or `dy2st.InputSpec`s
    (a `None` dim traces symbolically; such a program is not compiled). Python values are static,
    as in a call. A Dy2StaticError raised while tracing is part of the report (`report.error`,
    shown at its line), not raised.
    """
    static_function = fn  # a StaticFunction (`dy2st.explain` converts anything else first)
    request = static_function.trace_request(*args, **kwargs)
    call_args, kwargs = request.call
    start = time.perf_counter()
    error = None
    try:
        request.convert()  # (once; timed apart from tracing)
    except Dy2StaticError as err:
        error = err
    convert_seconds = time.perf_counter() - start
    traced, trace_seconds, specs = None, 0.0, []
    with events.recording() as recorded:
        if error is None:
            program, specs = _traceable(*request.runner())
            start = time.perf_counter()
            try:
                traced = jax.jit(program).trace(*specs)
            except Exception as exc:  # noqa: BLE001 (mapped as a call's boundary maps it)
                mapped = at_boundary(exc, config.traceback_filtering)
                if not isinstance(mapped, Dy2StaticError):
                    raise mapped from mapped.__cause__
                error = mapped
            trace_seconds = time.perf_counter() - start
    symbolic = any(not isinstance(d, int) for spec in specs for d in spec.shape)
    compile_seconds, compile_note = (None, "not compiled: symbolic dims (give fixed sizes to compile)") if symbolic \
        else _compile(traced)
    jaxpr = traced.jaxpr if traced is not None else None
    recorded_events = recorded.events + ([_error_event(error)] if error is not None and error.origin else [])
    blocks = _blocks(request.user_function, recorded_events)
    counts = _ProgramCounts.of(jaxpr, {b.filename for b in blocks})
    return Report(
        function=getattr(static_function, "__qualname__", repr(static_function)),
        signature=_describe_signature(static_function, call_args[request.bound:], kwargs),
        programs_cached=len(static_function.programs),
        equations=counts.equations,
        primitives=counts.control,
        host_callbacks=counts.callbacks,
        convert_seconds=convert_seconds,
        trace_seconds=trace_seconds,
        compile_seconds=compile_seconds,
        compile_note=compile_note,
        notes=_line_notes(recorded_events),
        blocks=blocks,
        jaxpr_lines=counts.by_line,
        error=error,
        jaxpr=jaxpr,
        route=static_function.policy.reasons(),
    )


# -- helpers -------------------------------------------------------------------------------------
def _traceable(run, call_args, kwargs):
    """`(program, specs)`: a function of the array arguments that runs what the call
    `run(*call_args, **kwargs)` runs (`TraceRequest.runner`), and their ShapeDtypeStructs.
    Python values stay static, as in a call."""
    leaves, tree = jax.tree_util.tree_flatten((call_args, kwargs))
    arrays = [i for i, leaf in enumerate(leaves) if _is_array_like(leaf)]

    def program(*values):
        filled = list(leaves)
        for i, value in zip(arrays, values):
            filled[i] = value
        a, k = jax.tree_util.tree_unflatten(tree, filled)
        return run(*a, **k)

    return program, [_spec_of(leaves[i]) for i in arrays]


def _is_array_like(leaf) -> bool:
    return isinstance(leaf, ARRAY_TYPES) or isinstance(leaf, jax.ShapeDtypeStruct)


def _spec_of(leaf) -> jax.ShapeDtypeStruct:
    if isinstance(leaf, jax.ShapeDtypeStruct):
        return leaf
    aval = jax.typeof(leaf) if isinstance(leaf, jax.Array) else None
    weak = bool(aval is not None and aval.weak_type)
    return jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype, weak_type=weak)


def _describe_signature(static_function, args, kwargs) -> str:
    """`x: float32[8,4], n=3`: each argument by name, arrays by type, Python values as they are
    (the cache key of a program is made of exactly these)."""
    try:
        bound = inspect.signature(static_function).bind(*args, **kwargs)
        named = list(bound.arguments.items())
    except (TypeError, ValueError):  # no signature, or arguments that do not bind: by position
        named = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    return ", ".join(f"{name}: {_describe_value(value)}" for name, value in named)


def _describe_value(value) -> str:
    if _is_array_like(value):
        spec = _spec_of(value)
        return f"{spec.dtype.name}[{','.join(str(d) for d in spec.shape)}]"
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        inner = ", ".join(_describe_value(v) for v in value[:8]) + (", ..." if len(value) > 8 else "")
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if type(value) is dict:
        return "{" + ", ".join(f"{k!r}: {_describe_value(v)}" for k, v in list(value.items())[:8]) + "}"
    if isinstance(value, (int, float, complex, str, bool, type(None))):
        return repr(value)
    return type(value).__name__


def _compile(traced) -> tuple[float | None, str]:
    if traced is None:
        return None, "not traced"
    start = time.perf_counter()
    try:
        traced.lower().compile()
    except Exception as err:  # noqa: BLE001 (symbolic dims and platform limits: reported, not raised)
        return None, f"not compiled ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
    return time.perf_counter() - start, ""


def _error_event(error: Dy2StaticError) -> Event:
    origin = error.origin
    return Event(origin.filename, origin.lineno, origin.function_name, "error", f"error: {type(error).__name__}",
                 error.problem.splitlines()[0] if error.problem else "")


def _line_notes(recorded: list[Event]) -> list[LineNote]:
    """One note per decision shown at a line, in the order first seen, with how often it was
    taken; the same decision with different details (a Python `if` taking either branch in
    different iterations) is one note listing each detail once."""
    groups: dict[tuple, list[Event]] = {}
    for event in recorded:
        groups.setdefault((event.filename, event.lineno, event.kind, event.summary), []).append(event)
    notes = []
    for same in groups.values():
        taken = collections.Counter(e.detail for e in same if e.detail)
        details = "; ".join(d + (f" (×{n})" if n > 1 and len(taken) > 1 else "") for d, n in taken.items())
        notes.append(LineNote(dataclasses.replace(same[0], detail=details), len(same)))
    return notes


def _blocks(function, recorded: list[Event]) -> list[SourceBlock]:
    """The explained function's source, then each converted callee's, in the order called."""
    functions = [function]
    for event in recorded:
        if event.callee is not None and event.callee not in functions:
            functions.append(event.callee)
    blocks = []
    for fn in functions:
        block = _source_block(fn)
        if block is not None and not any(b.holds(block.filename, block.first_line) for b in blocks):
            blocks.append(block)
    return blocks


def _source_block(fn) -> SourceBlock | None:
    fn = getattr(fn, "__func__", fn)
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError):
        return None
    code = getattr(fn, "__code__", None)
    if code is not None:
        filename = code.co_filename  # as the converted code's frames name it
    return SourceBlock(getattr(fn, "__qualname__", repr(fn)), filename, first, tuple(lines))


@dataclasses.dataclass
class _ProgramCounts:
    equations: int
    control: dict[str, int]
    callbacks: int
    by_line: dict[tuple[str, int], dict[str, int]]

    @classmethod
    def of(cls, closed_jaxpr, files: set[str]) -> "_ProgramCounts":
        counts = cls(0, collections.Counter(), 0, collections.defaultdict(collections.Counter))
        if closed_jaxpr is not None:
            counts._walk(closed_jaxpr.jaxpr, files)
        counts.control = dict(counts.control)
        counts.by_line = {k: dict(v) for k, v in counts.by_line.items()}
        return counts

    def _walk(self, jaxpr, files: set[str], enclosing: tuple[str, int] | None = None) -> None:
        """Count `jaxpr`'s equations; one whose traceback names no user line (made by dy2st or
        JAX for a construct, such as a masked loop step) counts at its enclosing equation's line."""
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            self.equations += 1
            checked = name == "cond" and _only_calls_on_failure(eqn)  # a run-time check's, not the user's
            if any(word in name for word in _CALLBACK_PRIMITIVES):
                self.callbacks += 1
                self.control[name] += 1
            elif name in ("cond", "while", "scan") and not checked:
                self.control[name] += 1
            line = next(((f, l) for f, l in _jax_compat.equation_lines(eqn) if f in files), enclosing)
            if line is not None and not checked:
                self.by_line[line][name] += 1
            for sub in _jaxprs_in_params(eqn.params):
                self._walk(sub, files, line)


def _only_calls_on_failure(eqn) -> bool:
    """A `lax.cond` a run-time check made (`asserts.call_on_failure`): one branch empty, the
    other only host callbacks."""
    branches = [b.jaxpr for b in eqn.params.get("branches", ())]
    return len(branches) == 2 and any(not b.eqns for b in branches) and all(
        any(word in e.primitive.name for word in _CALLBACK_PRIMITIVES) for b in branches for e in b.eqns)


def _short_path(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith("..") else relative


def _jaxprs_in_params(params):
    import jax.extend.core  # (imported when first explained: jax.extend brings in Pallas and MLIR)

    return jax.extend.core.jaxprs_in_params(params)
