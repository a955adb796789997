"""Staging a two-way choice as one `lax.cond`, with the values of both sides merged.

Each branch runs inside the `lax.cond` being built, where it is traced once. The side traced
second sees both sides' values before the cond's output types are fixed, and merges them:
which outputs are Python values equal on both sides (they stay Python, so later Python-only
code keeps working), which need promotion (a Python scalar against an array, a weak type
against a strong one, as `jnp.where` would), and which cannot be merged (an error naming the
variable). The side traced first cannot wait for that merge: it emits its own types, and when
the merge needs others (it gave a Python number or a weak type the other side's array
overrides) the cond is built again with both sides' types known, tracing each side twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import dis
import enum
import functools
import reprlib
import sys
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dy2st import _jax_compat
from dy2st.errors import (BranchOutputError, Dy2StaticError, OriginInfo, PredicateError, PythonEffectError, RuntimeChecks,
                          StagedBranchError, StagedInTryError, HostArray, IntOverflowError, is_library_file, rebinding_hint,
                          record_runtime_failure)
from dy2st.runtime import events, guards, key_order, reachable, static_outputs, writes
from dy2st.runtime.debug_effects import debug_effects_dropped
from dy2st.runtime.formatting import bind_traced
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.undefined import UNDEFINED_RETURN, MaybeUnbound, Undefined, UndefinedReturn, maybe_unbound_tree
from dy2st.user_code import is_users_object
from dy2st.runtime.values import (describe, flatten_state, is_array, is_python_number, note_python_numbers,
                                  python_numbers, stands_for_python_number)

def scalar_predicate(pred, origin: OriginInfo, what: str = "The condition",
                     advice: str = "reduce it to one value, e.g. `(x > 0).all()` or `(x > 0).any()`."):
    """A traced condition as a scalar bool, the way `bool(x)` would read it eagerly."""
    shape = np.shape(pred)
    if int(np.prod(shape)) != 1:
        raise PredicateError(
            f"{what} is an array of shape {tuple(shape)}; its truth value is ambiguous.", origin, advice=advice)
    if shape != ():
        pred = jnp.reshape(pred, ())  # a (1,)-shaped condition, say: no op for a scalar
    return pred if pred.dtype == jnp.bool_ else pred != 0


@dataclasses.dataclass
class _Branch:
    """One traced side: per variable, its tree structure and leaves.

    A leaf is a static Python value, an Undefined marker, or a jax.core.ShapedArray standing
    for the next of the side's arrays.
    """

    structures: list
    leaves: list  # per variable, a list of leaves
    numbers: frozenset = frozenset()  # (variable, leaf) of the traced leaves that stand for Python numbers

    def copy(self) -> "_Branch":
        return _Branch(list(self.structures), [list(l) for l in self.leaves], self.numbers)


def tracing_staged_code() -> bool:
    """Whether a staged branch or loop body is being traced now: code may run more than once
    (both sides of an `if`, a loop body traced for its types) from the same state."""
    return bool(CONTEXT.sides)


@contextlib.contextmanager
def staged_tracing():
    """Trace a staged branch or loop body inside this (see `tracing_staged_code`)."""
    CONTEXT.sides.append(object())
    try:
        yield
    finally:
        CONTEXT.sides.pop()
        if not CONTEXT.sides:
            CONTEXT.grown_lists.clear()
            CONTEXT.watched_lists.clear()


@contextlib.contextmanager
def refusing_in_place(origin: OriginInfo, what: str):
    """Around a side of a staged ternary or `and`/`or` (`what`): a list's, dict's or set's
    method changing it in place there (`log.append(1) if c else log.append(2)`) would change it
    whichever side the data picks (such sides carry no state, as an `if` statement's do):
    `refused_in_place`."""
    CONTEXT.in_place_refusals.append((origin, what))
    try:
        yield
    finally:
        CONTEXT.in_place_refusals.pop()


def refused_in_place() -> tuple | None:
    """`(origin, what)` of the staged ternary or `and`/`or` around the code running now
    (`refusing_in_place`), or None."""
    stack = CONTEXT.in_place_refusals
    return stack[-1] if stack else None


def note_grown(grown: list, original: list) -> None:
    """`grown` stands for `original` after an in-place append made while tracing staged code
    (`list_append` gives a new list there; eagerly `original` itself would have grown)."""
    CONTEXT.grown_lists[id(grown)] = (grown, grown_from(original), writes.side_now())


def own_records():
    """The tuples this module keeps lists in (for `writes._own_references`)."""
    return [*CONTEXT.grown_lists.values(), *CONTEXT.watched_lists.values()]


writes.RECORD_SOURCES.append(own_records)


def watch_here(container) -> None:
    """`container` (a list an `if`'s variable holds before it) is put back after each side
    being traced now (see `control_flow._StateContents`): it may change in place there."""
    CONTEXT.watched_lists[id(container)] = (container, writes.side_now())


def may_grow_here(value) -> bool:
    """Whether an append while tracing may change `value` in place: a copy made in the side
    being traced now, or a list that side's `if` puts back after it (so every reference to it,
    a context manager's, sees the items in order, as eagerly)."""
    if grown_here(value):
        return True
    entry = CONTEXT.watched_lists.get(id(value))
    return entry is not None and entry[0] is value and entry[1] is not None and entry[1] is writes.side_now()


def grown_in_this_side() -> list:
    """`(copy, list it stands for)` of every copy an append made in the side traced now, held
    by a variable or not (eagerly each append grew the list itself)."""
    token = writes.side_now()
    return [(grown, root) for grown, root, side in CONTEXT.grown_lists.values() if side is token]


def grown_here(value) -> bool:
    """Whether `value` is a copy `note_grown` noted in the side being traced now: nothing
    outside the side holds it, so it may grow in place (as eagerly, every reference to it sees
    the item: a `Ctx` given the list, then an append through the variable)."""
    entry = CONTEXT.grown_lists.get(id(value))
    return entry is not None and entry[0] is value and entry[2] is not None and entry[2] is writes.side_now()


def grown_from(value):
    """The list eager code would hold in place of `value`: the list `value` was grown from by
    in-place appends while tracing, else `value` itself."""
    entry = CONTEXT.grown_lists.get(id(value))
    return entry[1] if entry is not None and entry[0] is value else value


def _run_branch(fn: Callable[[], Sequence]):
    """Run one side: its `_Branch` and its array leaves, in order."""
    structures, leaves, arrays, numbers = [], [], [], python_numbers()
    with staged_tracing():
        values = fn()
    key_order.observe_if_held(values)  # (the state machinery takes its dicts as plain ones)
    stand_ins = set()
    for i, value in enumerate(values):
        var_leaves, structure = flatten_state(value)
        structures.append(structure)
        leaves.append([jax.typeof(l) if is_array(l) else l for l in var_leaves])
        arrays += [l for l in var_leaves if is_array(l)]
        if numbers is not None:
            stand_ins.update((i, j) for j, l in enumerate(var_leaves) if numbers.holds(l))
    return _Branch(structures, leaves, frozenset(stand_ins)), arrays


class RaisedInTrialScan(Exception):
    """A staged side raised while the body of a static `range` loop tried as a scan was traced
    (`loops._try_stage_range`): its index is traced there and a Python int eagerly (`g[:, e:e+1]`
    raises only so), so the loop unrolls instead of deferring the raise to run time."""

    def __init__(self, error: BaseException):
        super().__init__(f"a branch raised {type(error).__name__} while the loop's index was traced")
        self.error = error


class _Failed:
    """A side whose trace raised a Python exception (a `raise`, an IndexError, a shape error):
    eager raises it only when the data takes that side, so the program does too (`_raise_when_run`),
    and the side's outputs are the other side's types, filled with zeros it never gives back.
    Leaves of such a side are `_FAILED`."""

    def __init__(self, error: BaseException):
        self.error = error

    def like(self, other: "_Branch") -> "_Branch":
        return _Branch(list(other.structures), [[_FAILED] * len(leaves) for leaves in other.leaves])


_FAILED = object()
_INT_RANGE = (-(2 ** 31), 2 ** 31 - 1)


def _run_branch_noting(fn, branch_name: str, origin: OriginInfo):
    """Run one side: `(its _Branch, its arrays)`, or `(_Failed, [])` when its trace raised an
    exception eager raises only when the data takes it (`deferrable`) and nothing between the
    program and here could catch it while tracing (`handler_around`): the program raises it
    when it runs that side. Otherwise a builtin exception becomes a StagedBranchError, which a
    user's handler does not catch as if it had happened (an `except ValueError` around the
    `if` would run whatever the data says); others keep their type and gain a note."""
    try:
        with guards.unchanged_by_side(origin, f"{branch_name} of the staged choice on this line"):
            return _run_branch(fn)
    except BaseException as err:
        if deferrable(err):
            if CONTEXT.trial_scans:  # the traced index of a range tried as a scan may be why
                raise RaisedInTrialScan(err) from err
            if CONTEXT.untyped_loops:  # a loop body traced again once typed: never staged so
                return _Failed(err), []
            if not writes.in_program():
                raise StagedBranchError.wrapping(err, branch_name, origin, inline=True).with_traceback(err.__traceback__) from err
            if not handler_around():
                guards.note_deferred_raise(origin)
                return _Failed(err), []
            refusal = StagedInTryError(
                f"tracing the {branch_name} of this staged `if` raised {type(err).__name__}: {str(err).rstrip('.')}. Code around "
                "it may catch that (an `except`, a `with` whose exit may suppress it, here or in a caller "
                "inside the converted function), but eager Python raises it only when the data takes that "
                "side: a compiled program cannot catch it then.",
                origin,
                advice="move the `try` (or `with`) inside the branch, or out of the converted function; to "
                "check values at run time, use `assert` or raise without catching.")
            raise refusal from err  # (noted as made: raised again after the trace if a handler swallows it)
        refuse_nnx_write(err, origin, f"the {branch_name} of this staged `if`")
        _note_branch_error(err, branch_name, origin)
        raise


# Builtin exceptions that say something about tracing itself, not about the data: a side
# recursing without end while traced (`_as_traced_recursion`), memory, the interpreter.
_NOT_DEFERRED = (RecursionError, MemoryError, SystemError, KeyboardInterrupt, GeneratorExit)


def deferrable(err: BaseException) -> bool:
    """A Python exception of the side's own code: of a builtin class (exactly that class: jax's
    own errors subclass TypeError; any of them, `raise FloatingPointError(...)`, `raise
    SystemExit(3)`), or of a class the user defined (a BaseException's too). Not dy2st's, not
    jax's, not an interrupt."""
    tp = type(err)
    if tp.__module__ == "builtins":
        return not issubclass(tp, _NOT_DEFERRED)
    return not isinstance(err, (Dy2StaticError, _Abandon)) and _users_class(tp)


def _users_class(tp) -> bool:
    """Whether an exception class is the user's: its module's file is not a library's, or its
    module is not imported by name (a script run by path, a file loaded with `importlib.util`)."""
    module = sys.modules.get(tp.__module__)
    return module is None or not is_library_file(getattr(module, "__file__", None) or "<builtin>")


def _raise_when_run(error: BaseException) -> None:
    """In the side being traced: raise `error` when the program runs it (`errors.at_boundary`
    gives it to the caller as it is). Its arguments and attributes made from traced values
    (`ValueError("bad", x.sum())`, an f-string of one, `self.code = code`) get their run-time
    values then: text, and host arrays that the boundary makes jax arrays again (the callback
    must not call jax)."""
    if debug_effects_dropped():
        return
    # its attributes too (`self.code = code` in a user's class): eager's hold the values
    traced, fill = bind_traced(list(error.args), dict(getattr(error, "__dict__", {})), wrap=HostArray)
    cause = error.__cause__  # `raise ... from e`: eager's error has it as its cause

    def fail(*values):
        if traced:
            args, attributes = fill(list(values))
            error.args = tuple(args)
            error.__dict__.update(attributes)
        error.__cause__ = cause
        record_runtime_failure(error)
        raise error

    jax.debug.callback(fail, *traced, ordered=True)
    RuntimeChecks.record_traced()


def handler_around(with_blocks: bool = True, converted_only: bool = False, frames=None) -> bool:
    """Whether user code between the program being traced and here is inside a `try` whose
    handler may catch (an `except`; with `with_blocks`, a `with` whose exit may suppress): an
    exception deferred to run time would escape it, where eager's handler catches it. With
    `converted_only`, the walk ends at the first frame of the user's that dy2st did not convert
    (inside the user's own `jax.jit`, no program boundary ends it). `frames`: `(code, offset)`
    of the frames to walk, innermost first, where they are not the live ones (an operation
    traced earlier: `_jax_compat.equation_code_offsets`)."""
    walk = ((code, offset, None) for code, offset in frames) if frames is not None else _live_frames(sys._getframe(1))
    for code, offset, frame_id in walk:
        if code in writes.PROGRAM_BOUNDARIES:
            break
        if not is_library_file(code.co_filename):
            if converted_only and code not in writes.CONVERTED_CODES:
                return False
            if _catching_at(code, offset, with_blocks, frame_id):
                return True
    return False


def _live_frames(frame):
    while frame is not None:
        yield frame.f_code, frame.f_lasti, id(frame)
        frame = frame.f_back


def _catching_at(code, offset: int, with_blocks: bool, frame_id=None) -> bool:
    """Whether the handler of a range around `offset` may catch: a `with` whose manager, entered
    in frame `frame_id` now, never suppresses (`calls.never_suppresses`) does not."""
    unsuppressing = CONTEXT.unsuppressing
    return any(start <= offset < end and (line is None or (frame_id, line) not in unsuppressing)
               for start, end, line in _catching_ranges(code, with_blocks))


def may_catch(code) -> bool:
    """Whether any handler in `code` may catch an exception (an `except`, a `with`)."""
    return bool(_catching_ranges(code, True))


@functools.lru_cache(maxsize=1024)
def _catching_ranges(code, with_blocks: bool) -> tuple:
    """`(start, end, line)` of the bytecode ranges of `code` whose handler may catch: it tests
    the exception (`except E`; line None), calls a `with`'s exit (if `with_blocks`; the `with`
    statement's line), or ends the exception (a bare `except`) before re-raising it. A `finally`
    re-raises: it catches nothing."""
    instructions = list(dis.get_instructions(code))
    at = {i.offset: n for n, i in enumerate(instructions)}
    ranges = []
    for entry in dis.Bytecode(code).exception_entries:
        n = at.get(entry.target)
        if n is None or instructions[n].opname != "PUSH_EXC_INFO":
            continue  # the cleanup of a handler itself
        for instruction in instructions[n + 1:]:
            if instruction.opname == "WITH_EXCEPT_START":
                if with_blocks:
                    ranges.append((entry.start, entry.end, instructions[n].positions.lineno))
                break
            if instruction.opname in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH", "POP_EXCEPT"):
                ranges.append((entry.start, entry.end, None))
                break
            if instruction.opname == "RERAISE":
                break
    return tuple(ranges)


def refuse_nnx_write(err: Exception, origin: OriginInfo, where: str) -> None:
    """Flax's TraceContextError, met tracing `where` (a staged side or loop body): an NNX
    Variable written there (Dropout's RNG count, a BatchNorm statistic, a counter), which NNX
    allows only at the trace level the module was made at; eagerly it happens only when the data
    takes that path. A PythonEffectError at the `if`/loop, saying what to write instead."""
    flax_errors = sys.modules.get("flax.errors")
    if flax_errors is None or not isinstance(err, flax_errors.TraceContextError):
        return
    raise PythonEffectError(
        f"tracing {where} writes a Flax NNX Variable (an RNG stream a Dropout advances, a BatchNorm "
        "statistic, a counter): the condition is traced, so whether the write happens is decided by the "
        "data, and NNX allows Variable writes only where the module was made, not inside a staged branch.",
        origin,
        advice="call the layer outside the `if` or loop and pick its result with `jnp.where(c, y, x)` (an RNG "
        "stream then advances on every call); compute a Variable's new value in the branches and write it after "
        "(`v = ...` in each, then `self.v[...] = v`); or make the condition a Python value.",
    ) from err


def _note_branch_error(err: Exception, branch_name: str, origin: OriginInfo) -> None:
    if not getattr(err, "_dy2st_noted", False) and not isinstance(err, (Dy2StaticError, _Abandon)):
        err._dy2st_noted = True
        err.add_note(
            f"(dy2st) raised while tracing the {branch_name} of a staged `if`:\n  {origin.as_header()}\n"
            "The condition is a traced array, so both sides are traced, whichever one runs. "
            "To raise only when a value is bad, use `assert` (checked at run time) instead of "
            "`raise` inside the branch."
        )


def _fill_undefined_returns(t: _Branch, f: _Branch) -> None:
    """A return value undefined on one side takes the other side's structure, to be zero-filled."""
    for i, (ts, fs) in enumerate(zip(t.structures, f.structures)):
        for this, other in ((t, f), (f, t)):
            leaves = this.leaves[i]
            if len(leaves) == 1 and isinstance(leaves[0], UndefinedReturn) and this.structures[i] != other.structures[i]:
                this.structures[i] = other.structures[i]
                this.leaves[i] = [leaves[0]] * len(other.leaves[i])


def _bind_maybe_unbound(t: _Branch, f: _Branch, labels) -> None:
    """A local one side leaves unbound (an `Undefined` marker) and the other binds becomes a
    `MaybeUnbound` on both: the bound side's value with a True flag, the other's filled (its
    arrays with zeros, its Python values the bound side's) with a False one. Also a side that
    binds a variable the other holds as a `MaybeUnbound` (from an earlier `if`) wraps its value."""
    for i, label in enumerate(labels):
        if not label.isidentifier():  # an item or attribute: refused as before
            continue
        for this, other in ((t, f), (f, t)):
            if _unbound(this, i) and not _unbound(other, i) and _FAILED not in other.leaves[i]:
                if not maybe_unbound_tree(other.structures[i]):
                    _wrap(other, i, label, True)
                this.structures[i] = other.structures[i]
                this.leaves[i] = [UNDEFINED_RETURN if _is_aval(l) else l for l in other.leaves[i][:-1]] + [False]
            elif maybe_unbound_tree(other.structures[i]) and not maybe_unbound_tree(this.structures[i]) \
                    and not _unbound(this, i) and _FAILED not in this.leaves[i]:
                _wrap(this, i, label, True)


def _unbound(branch: _Branch, i: int) -> bool:
    leaves = branch.leaves[i]
    return len(leaves) == 1 and type(leaves[0]) is Undefined


def _wrap(branch: _Branch, i: int, label: str, bound: bool) -> None:
    value = jax.tree_util.tree_unflatten(branch.structures[i], [0] * branch.structures[i].num_leaves)
    branch.structures[i] = jax.tree_util.tree_structure(MaybeUnbound(value, bound, label))
    branch.leaves[i] = branch.leaves[i] + [bound]


def weak_proxy(leaf):
    """Something `jnp.result_type` promotes like `leaf` (it ignores weak_type on avals)."""
    if is_python_number(leaf):
        return leaf
    if leaf.weak_type:
        return {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}.get(np.dtype(leaf.dtype).kind, np.zeros((), leaf.dtype))
    return np.zeros((), leaf.dtype)


@dataclasses.dataclass
class _Merged:
    """How one output leaf leaves the cond: a static value, or an array of this aval."""

    static: object = None
    aval: object = None  # ShapedArray when the leaf is staged
    fill_zeros: tuple = (False, False)  # per branch: an UndefinedReturn to fill with zeros
    python_number: bool = False  # a Python number on a side: the numbers rule's stand-in


def _is_aval(leaf) -> bool:
    return isinstance(leaf, jax.core.ShapedArray)


def _merge_leaf(a, b, label: str, origin: OriginInfo, branch_names, traced_number: bool) -> _Merged:
    """How leaf `a` of one side and `b` of the other leave the cond. `traced_number`: a side's
    leaf is a traced value that stands for a Python number (`PythonNumbers`)."""
    def mismatch(why: str, advice: str):
        return BranchOutputError(
            f"{label} is {describe(a)} in the {branch_names[0]} but {describe(b)} in the {branch_names[1]}: {why}",
            origin,
            advice=advice,
        )

    if a is _FAILED or b is _FAILED:  # a side that raises when it runs gives the other's types
        other, side = (b, 0) if a is _FAILED else (a, 1)
        if _is_aval(other):
            return _Merged(aval=other, fill_zeros=(side == 0, side == 1))
        return _Merged(static=other)
    a_undef, b_undef = isinstance(a, Undefined), isinstance(b, Undefined)
    if a_undef or b_undef:
        if a_undef and b_undef:
            return _Merged(static=a)
        undef, other = (a, b) if a_undef else (b, a)
        if isinstance(undef, UndefinedReturn) and (_is_aval(other) or is_python_number(other)):
            aval = other if _is_aval(other) else jax.typeof(jnp.asarray(other))
            return _Merged(aval=aval, fill_zeros=(a_undef, b_undef))
        which = branch_names[1] if a_undef else branch_names[0]
        where = "the `if`" if branch_names[0] == "if branch" else "them"  # (an earlier jump's paths)
        raise BranchOutputError(
            f"{label} is defined in the {which} only, and is used after {where}.",
            origin,
            advice=f"assign {label} before {'the `if` or in both branches' if where == 'the `if`' else 'the loop or on every path'}.",
        )
    if not _is_aval(a) and not _is_aval(b):
        if type(a) is type(b) and static_equal(a, b):
            return _Merged(static=a)
        if type(a) is type(b) and isinstance(a, enum.Enum):
            raise mismatch(
                f"each side gives another member of {type(a).__name__}, and the data decides which: a program "
                "gives back one Python value per trace.",
                f"pick the member's value instead (`{type(a).__name__}.X.value`, a number the program can carry) "
                f"and look the member up after the call (`{type(a).__name__}(v)`); or decide with a Python value.")
        if type(a) is type(b) and is_users_object(a):
            raise mismatch(
                f"each side gives its own {type(a).__name__} object, and the data decides which one: a program "
                "gives back one Python object per trace.",
                f"change the object's attributes in place in the branch (`obj.n = obj.n + 1`) instead of making a "
                f"new one, or register {type(a).__name__} as a pytree (`jax.tree_util.register_dataclass`, "
                "`flax.struct.dataclass`) so that its fields are carried.")
        if not (is_python_number(a) and is_python_number(b)):
            raise mismatch(f"the values differ ({_differing(a, b)}) and are not numbers: a program "
                           "gives back one Python value per trace, and the data decides between these.",
                           "make both branches give the same Python value, or make it an array.")
    if not _is_aval(a) and not is_python_number(a) or not _is_aval(b) and not is_python_number(b):
        raise mismatch("XLA needs an array on both sides.", f"give {label} an array value in both branches.")
    shape_a, shape_b = np.shape(a) if not _is_aval(a) else a.shape, np.shape(b) if not _is_aval(b) else b.shape
    if shape_a != shape_b:
        raise mismatch(
            "shapes differ, and XLA needs one shape.",
            f"make {label} the same shape in both branches (pad, slice or broadcast it explicitly).",
        )
    if any(_is_aval(l) and jax.dtypes.issubdtype(l.dtype, jax.dtypes.extended) for l in (a, b)):
        return _merge_extended(a, b, label, origin, branch_names)
    dtype, weak = _jax_compat.weak_result_type(weak_proxy(a), weak_proxy(b))
    if np.dtype(dtype) == np.int32:
        refuse_ints_beyond_int32((a, b), label, origin)
    # the numbers rule: a Python number the side taken decides is a weak 0-d array
    python_number = stands_for_python_number(dtype, (a, b))
    weak = weak or python_number
    strong = [l.dtype for l in (a, b) if _is_aval(l) and not l.weak_type]
    if len(strong) == 2 and strong[0] != strong[1]:  # (the data would decide the dtype: eager's differs by side)
        raise mismatch("dtypes differ.", f"cast {label} to one dtype in both branches, e.g. with .astype(...).")
    return _Merged(aval=jax.core.ShapedArray(shape_a, dtype, weak_type=weak),
                   python_number=(python_number or traced_number) and weak)


def _merge_extended(a, b, label, origin, branch_names) -> _Merged:
    """Typed PRNG keys (extended dtypes) promote with nothing: both sides must hold the same kind."""
    if not (_is_aval(a) and _is_aval(b) and a.dtype == b.dtype):
        raise BranchOutputError(
            f"{label} is {describe(a)} in the {branch_names[0]} but {describe(b)} in the {branch_names[1]}: "
            "a PRNG key cannot be merged with another type.",
            origin,
            advice=f"give {label} a key of the same kind in both branches.",
        )
    return _Merged(aval=a)


def refuse_ints_beyond_int32(values, label: str, origin: OriginInfo) -> None:
    """A Python int the data picks (a side of a staged `if`, a staged loop's start or step) is
    held as an int32 (the numbers rule): one beyond its range is refused, not wrapped."""
    big = next((v for v in values if type(v) is int and not _INT_RANGE[0] <= v <= _INT_RANGE[1]), None)
    if big is not None:
        raise IntOverflowError(
            f"{label} is the Python int {big} here, which the data decides: the program holds it as an "
            "int32, and this one is beyond int32's range.",
            origin,
            advice="keep the value within int32, compute it as a float (`1.0 * ...`), or decide the "
            "condition with a Python value.")


def _short(value) -> str:
    """A value as an error message shows it: its repr, cut short."""
    try:
        return reprlib.repr(value)
    except Exception:  # a repr of the user's that fails
        return f"a {type(value).__name__}"


def _is_list_node(treedef) -> bool:
    """Whether a variable's structure is a list at its top."""
    data = treedef.node_data()
    return data is not None and data[0] is list


def _differing(a, b) -> str:
    """`a` and `b` as an error message shows two values that differ: cut short, or, where the cut
    texts are the same, around where their full texts first differ."""
    short_a, short_b = _short(a), _short(b)
    if short_a != short_b:
        return f"{short_a} and {short_b}"
    try:
        full_a, full_b = repr(a), repr(b)
    except Exception:  # a repr of the user's that fails
        return f"{short_a} and {short_b}"
    at = next((i for i, (x, y) in enumerate(zip(full_a, full_b)) if x != y), min(len(full_a), len(full_b)))
    start = max(0, at - 20)
    return f"...{full_a[start:at + 20]}... and ...{full_b[start:at + 20]}..."


def static_equal(a, b) -> bool:
    """Whether two Python values a program would give back as one constant: equal, and floats
    by their bits too (`0.0` and `-0.0` are equal but print, divide and copysign differently; a
    NaN equals another NaN here)."""
    if isinstance(a, float) and isinstance(b, float):
        return a.hex() == b.hex()
    try:
        return bool(a == b)
    except Exception:  # objects whose == is not a plain truth value compare by identity
        return a is b


def _emit(branch: _Branch, arrays, merged: list, side: int) -> list:
    """A side's outputs of the cond: its staged leaves cast to the merged types."""
    arrays = iter(arrays)
    outs = []
    for leaf, m in zip(_leaves(branch), merged):
        if m.aval is None:
            continue
        if m.fill_zeros[side]:
            value = jnp.zeros(m.aval.shape, m.aval.dtype)
        elif _is_aval(leaf):
            value = next(arrays)
        else:
            value = jnp.asarray(leaf)
        outs.append(cast_to(value, m.aval))
    return outs


def _leaves(branch: _Branch):
    """Every leaf of a side, variable by variable, in order."""
    return (leaf for var in branch.leaves for leaf in var)


def _emitted_types(branch: _Branch, merged: list, side: int) -> list:
    """What `_emit` gives for the same side's leaves under `merged`: equal lists, equal outputs."""
    return [(_type_key(m.aval), m.fill_zeros[side], _is_aval(leaf)) for leaf, m in zip(_leaves(branch), merged)]


def _own_types(branch: _Branch) -> list:
    """`_emitted_types` of a side emitting its arrays as they are (what merging it with itself gives)."""
    return [(_type_key(l), False, True) if _is_aval(l) else (None, False, False) for l in _leaves(branch)]


def _type_key(aval):
    return None if aval is None else (aval.shape, aval.dtype, aval.weak_type)


def cast_to(value, aval):
    if value.dtype == aval.dtype and getattr(jax.typeof(value), "weak_type", False) == aval.weak_type:
        return value
    return _jax_compat.convert_element_type(value, aval.dtype, aval.weak_type)


@dataclasses.dataclass(frozen=True)
class _BothSides:
    """Both sides as traced, when the side traced first emitted other types than the merge
    needs: the cond is built again with these known."""

    first: _Branch
    second: _Branch


class _Abandon(Exception):
    """Raised by the second side to leave the `lax.cond` JAX is building (an exception is the
    only way out of a trace in progress; finishing it would leave a dead cond, with any prints or
    checks the branches made, in the program). Caught by `_build_cond`."""

    def __init__(self, both: _BothSides):
        super().__init__("the cond is built again with both sides' types known")
        self.both = both


EXPRESSION_SIDES = ("true side", "false side")  # the sides of a conditional expression, in messages


def stage_value(pred, true_fn, false_fn, label: str, what: str, origin: OriginInfo, branch_names):
    """`true_fn() if pred else false_fn()` for a traced `pred`: one value, named `label` in
    errors, of a ternary or an `and`/`or` (`what`). Its sides carry no state, as an `if`
    statement's do, so a list, dict or set they change in place is refused, by a method called
    there (`refusing_in_place`) or in code they call (`helper(log)`, a method setting an
    attribute: `_refuse_side_writes`)."""
    orders: dict = {}  # side -> `key_order.orders_of` its value (a cond gives dicts back sorted)

    def side(fn, which: int):
        def run():
            roots = reachable.snapshot((true_fn, false_fn))  # (each side's: `forget` releases them)
            with refusing_in_place(origin, what), writes.WriteTracker(roots, origin=origin) as tracker:
                value = fn()
            try:
                _refuse_side_writes(tracker, origin, f"side of this staged {what}")
            finally:
                tracker.forget()
            orders[which] = key_order.orders_of(value)
            return (value,)
        return run

    (value,) = stage_cond(pred, side(true_fn, 0), side(false_fn, 1), (label,), origin, branch_names=branch_names)
    found = set(orders.values())
    if len(found) > 1:
        raise BranchOutputError(
            f"{label} is a dict whose keys come in one order on one side and another order on the other: the "
            "data would decide the order, and a program gives back one.",
            origin, advice="build the dicts with their keys in one order on both sides.")
    return key_order.restore(value, found.pop()) if found else value


@contextlib.contextmanager
def run_whatever_the_data(origin: OriginInfo, what: str, roots: "reachable.Roots", advice: str):
    """Around code that runs while traced whatever the data says, where eager Python runs it
    only on some data (the items of a generator after a traced one that `all()` may stop at):
    it must change nothing the caller could see, nor print (`roots`: what it could reach
    before). Refused at `origin` otherwise, the changes put back."""
    prints = writes.staged_prints()
    with writes.WriteTracker(roots, origin=origin) as tracker, guards.unchanged_by_side(origin, what):
        yield
    try:
        _refuse_side_writes(tracker, origin, what, advice)
    finally:
        tracker.forget()
    if writes.staged_prints() != prints:
        raise PythonEffectError(
            f"the {what} prints: it runs whatever the data says, where eager Python may not run it.",
            origin, advice=advice)


_AS_AN_IF = ("write it as an `if` statement, whose branches carry what they change (`if c: ok = check(log)`), "
             "or make the change before the expression.")


def _refuse_side_writes(tracker: writes.WriteTracker, origin: OriginInfo, what: str, advice: str = _AS_AN_IF) -> None:
    changes = writes.changes_from_before(tracker)  # (put back)
    if changes:
        raise PythonEffectError(
            f"code run in the {what} changes {writes.changed_names(tracker, changes)} in place: it runs "
            "whatever the data says, where eager Python runs it only on some data (a traced condition's "
            "sides are both traced).",
            origin, advice=advice)


def stage_cond(
    pred,
    true_fn: Callable[[], Sequence],
    false_fn: Callable[[], Sequence],
    labels: Sequence[str],
    origin: OriginInfo,
    branch_names=("if branch", "else branch"),
) -> list:
    """`[true_fn() if pred else false_fn()]` for a traced `pred`, as one `lax.cond`.

    Each function returns a sequence of values, one per label; the result is a list of merged
    values (static where both sides agree on a Python value, arrays otherwise). A fixed point:
    the first build assumes the side traced first emits its own types; when the merge needs
    others, the cond is built again with both sides' types known (at most `_MAX_BUILDS` times).
    """
    pred = scalar_predicate(pred, origin)
    merge = lambda t, f: _merge(t, f, labels, origin, branch_names)
    known = None
    for _ in range(_MAX_BUILDS):
        attempt = events.Attempt()
        built = _build_cond(pred, (true_fn, false_fn), branch_names, origin, merge, known)
        if not isinstance(built, _BothSides):
            return built
        attempt.discard()  # what the branches noted belongs to a cond JAX drops
        known = built
    raise BranchOutputError(
        "the branches give different types each time they are traced.",
        origin,
        advice="make what each branch assigns depend only on the types of its inputs.",
    )


_MAX_BUILDS = 3


@dataclasses.dataclass
class _CondTrace:
    """What the branch functions of one build learn while `lax.cond` traces them, in order."""

    first: _Branch | None = None
    first_types: list | None = None  # the types the first side emitted (`_emitted_types`)
    structures: list | None = None  # per variable, once the second side has merged both
    merged: list | None = None


def _build_cond(pred, fns, branch_names, origin, merge, known: _BothSides | None) -> list | _BothSides:
    """The merged values of one `lax.cond`, or both sides' types when it must be built again."""
    trace = _CondTrace()

    def first():
        branch, arrays = _run_branch_noting(fns[0], branch_names[0], origin)
        trace.first = branch
        if type(branch) is _Failed:
            _raise_when_run(branch.error)
            if known is None:  # its outputs are the other side's types: known after it
                trace.first_types = None
                return []
            branch = trace.first = branch.like(known.second)
        elif known is None:  # until the other side is known, assume it has the same types
            trace.first_types = _own_types(branch)
            return arrays
        filled, _, merged = merge(branch, known.second)
        trace.first_types = _emitted_types(filled, _flat(merged), 0)
        return _emit(filled, arrays, _flat(merged), 0)

    def second():
        branch, arrays = _run_branch_noting(fns[1], branch_names[1], origin)
        first_side = trace.first
        if type(branch) is _Failed:
            if type(first_side) is _Failed:  # both sides raise: eager raises whichever is taken
                raise StagedBranchError.wrapping(branch.error, branch_names[1], origin) from branch.error
            _raise_when_run(branch.error)
            branch = branch.like(first_side)
        elif type(first_side) is _Failed:
            raise _Abandon(_BothSides(first_side, branch))  # built again, the first side's types known
        t, f, merged = merge(first_side, branch)
        if _emitted_types(t, _flat(merged), 0) != trace.first_types:
            raise _Abandon(_BothSides(trace.first, branch))
        trace.structures, trace.merged = t.structures, merged
        return _emit(f, arrays, _flat(merged), 1)

    try:
        arrays = iter(lax.cond(pred, first, second))
    except _Abandon as abandon:
        return abandon.both
    values, numbers = [], []
    for structure, var in zip(trace.structures, trace.merged):
        leaves = [m.static if m.aval is None else next(arrays) for m in var]
        numbers.extend(leaf for leaf, m in zip(leaves, var) if m.python_number)
        values.append(jax.tree_util.tree_unflatten(structure, leaves))
    note_python_numbers(numbers)
    return values


def _flat(merged) -> list:
    return [m for var in merged for m in var]


def _merge(t: _Branch, f: _Branch, labels, origin, branch_names):
    """Both sides with undefined return values filled in, and per variable a `_Merged` per leaf."""
    t, f = t.copy(), f.copy()
    _fill_undefined_returns(t, f)
    _bind_maybe_unbound(t, f, labels)
    merged = []
    for label, ts, fs, t_leaves, f_leaves in zip(labels, t.structures, f.structures, t.leaves, f.leaves):
        if ts != fs and (static_outputs.holds_callers(ts) or static_outputs.holds_callers(fs)):
            expression = branch_names == EXPRESSION_SIDES
            copy = "`dict(d) if c else new`" if expression else f"`{rebinding_hint(label, 'dict({})')}`"
            raise BranchOutputError(
                f"'{label}' holds an object from before the {'expression' if expression else '`if`'} (a list or dict "
                "the caller gave, an NNX module, a pytree object) in one branch, and another object in the other: "
                "which object it is afterwards (what changing it in place changes, what returning it gives back) is "
                "decided by the data, and a program gives back one.",
                origin,
                advice=f"copy it on the side that keeps it ({copy} for a dict; `jax.tree_util.tree_map(lambda v: v, "
                "...)` where the other side's comes from `optax.apply_updates` or a `tree_map`, which sort its keys; "
                "`list(...)` for a list, `nnx.clone(...)` for a module), so that both sides make a new one; or make "
                "both sides hold the same object; or decide the condition with a Python value.",
            )
        if ts != fs:
            # a list a loop grows per iteration, in its rest staged where a traced `break` may end it
            loop = branch_names[0] == "iteration" and all(_is_list_node(t) for t in (ts, fs))
            raise BranchOutputError(
                f"'{label}' is {_describe_var(ts, t_leaves)} in the {branch_names[0]} but "
                f"{_describe_var(fs, f_leaves)} in the {branch_names[1]}: XLA needs the same structure on both sides."
                + (" The data decides how many iterations run, so a list grown per iteration would end with as "
                   "many items as the data says." if loop else ""),
                origin,
                advice=(f"preallocate an array and write each iteration's value at its index "
                        f"(`{label} = jnp.zeros(n)` before the loop, `{label} = {label}.at[i].set(v)` in it) and count "
                        "the iterations; or make the `break` condition a Python value." if loop and _is_code(label) else
                        "make the `break` condition a Python value, or grow the list outside the loop (a `with` "
                        "whose manager appends to it around the loop rather than in it)." if loop else
                        f"give '{label}' the same structure (same containers, None in the same places) in both "
                        "branches; a function must return the same structure on every path."),
            )
        name = f"'{label}'" if len(t_leaves) == 1 else f"a part of '{label}'"
        i = len(merged)
        merged.append([_merge_leaf(a, b, name, origin, branch_names,
                                   (i, j) in t.numbers or (i, j) in f.numbers)
                       for j, (a, b) in enumerate(zip(t_leaves, f_leaves))])
        if maybe_unbound_tree(ts):  # its flag: a bool the data decides, not a Python number
            flags = (t_leaves[-1], f_leaves[-1])
            merged[-1][-1] = (_Merged(static=True) if flags == (True, True) else  # (a dead side's: zeros)
                              _Merged(aval=jax.core.ShapedArray((), np.dtype(bool)), fill_zeros=merged[-1][-1].fill_zeros))
    return t, f, merged


def _is_code(label: str) -> bool:
    """Whether a state label is code the user wrote (`xs`, `self.log`, `d['k']`), not a description."""
    return label.replace(".", "").replace("[", "").replace("]", "").replace("'", "").isidentifier()


def _describe_var(structure, leaves) -> str:
    if structure.num_leaves == 0 and structure.num_nodes == 1 and str(structure) == "PyTreeDef(None)":
        return "None"
    if structure.num_nodes == 1 and len(leaves) == 1:
        return describe(leaves[0])
    described = jax.tree_util.tree_unflatten(structure, [_Described(describe(l)) for l in leaves])
    return repr(described)


class _Described:
    """Prints as a type description inside a container's repr."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text
