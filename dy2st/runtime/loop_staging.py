"""Staging a loop: which state crosses iterations as arrays, and the lax loop carrying it.

A staged loop's body runs inside the `lax.scan` / `lax.while_loop` being built, on abstract
values of the carried state. When the body's outputs need other types than it was given, the
build is abandoned and repeated with the joined types until they stop changing (a fixed point;
a loop whose types are right from the start is traced once, most others twice):

* an array leaf is carried with its shape and dtype; a body that changes either is an error
  naming the variable (`LoopVariableError`), except that a Python scalar or weakly typed start
  value is promoted the way `jnp.where` would (`i = 0` then `i = i + 0.5` carries float32);
* a Python value the body leaves equal stays Python (later Python-only code keeps working);
  one it changes is carried as an array when it is a number, else it is an error;
* a variable undefined before the loop and assigned in it takes the type the body gives it and
  starts from zeros (abstract evaluation, no error);
* a Python list the body only appends to (`xs = list_append(xs, v)`) is not carried: each
  iteration's appended values become stacked scan outputs, split back into a list afterwards.

The loop is a `lax.scan` (static trip count, or a bound from `set_loop_options`) or a
`lax.while_loop`. Tracing the body where it is used, rather than to a jaxpr first that is then
re-bound inside the loop, costs one trace of user code per round and nothing more.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dy2st import _jax_compat
from dy2st.errors import MissingAfterLoopError, LoopGradientError, LoopVariableError, OriginInfo
from dy2st.runtime import ad_context, events, guards, key_order, loop_checks, reachable
from dy2st.runtime.asserts import check_numbers_so_far, check_when_run, numbers_checked
from dy2st.runtime.staging import (cast_to, refuse_ints_beyond_int32, static_equal, weak_proxy, describe, scalar_predicate, staged_tracing,
                                   grown_from, note_grown, tracing_staged_code)
from dy2st.runtime.values import is_traced
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.undefined import UNDEFINED_RETURN, MaybeUnbound, Undefined, UndefinedReturn, maybe_unbound_tree
from dy2st.runtime.values import flatten_state, is_array, is_python_number, note_python_numbers
from dy2st.runtime.writes import WriteTracker, refill, refuse_loop_writes
from dy2st.user_code import is_users_object

_MAX_ROUNDS = 4


def scalar_aval(value):
    """The abstract value a Python number or an array becomes when carried."""
    return jax.typeof(value if is_traced(value) else jnp.asarray(value))


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf of a state variable: a Python value kept as is, or a carried array type."""

    static: object = None
    aval: object = None
    zeros: bool = False  # undefined before the loop: the carry starts from zeros
    python_start: object = None  # a Python number before the loop that the carry reshaped
    # A user variable unbound before the loop (not dy2st's return value, read only when set).
    unbound_before: bool = False
    # The Python number the body sets this carried leaf to (the same in every iteration):
    # eagerly the value after a loop that ran (`k = x.min()` before, `k = 2` in the body: 2).
    python_after: object = None
    python_number: bool = False  # a Python number before or after an iteration (the numbers rule)

    @property
    def carried(self) -> bool:
        return self.aval is not None


@dataclasses.dataclass
class Var:
    """How one state variable crosses iterations: a pytree of leaves, or an appended list."""

    name: str
    treedef: object = None
    leaves: tuple = ()
    prefix: list | None = None  # an append-only list: its items before the loop
    items: tuple | None = None  # avals of the values one iteration appends (None: not known yet)
    # The body grows the list it was given (`xs.append(v)`), rather than binding a new list
    # with the old items (`xs = xs + [v]`): eagerly the list after the loop is the one before.
    in_place: bool = False

    @property
    def is_list(self) -> bool:
        return self.prefix is not None


def initial_spec(init, names) -> list:
    spec = []
    for name, value in zip(names, init):
        if _held(name, value, value):  # (the return value an earlier `return lst` set)
            spec.append(Var(name, jax.tree_util.tree_structure(0), (Leaf(static=_HeldObject(value)),)))
            continue
        if type(value) is list:
            spec.append(Var(name, prefix=list(value)))
            continue
        spec.append(_tree_var(name, value))
    return spec


def _tree_var(name: str, value) -> Var:
    """`value` carried as a pytree: its arrays carried, its other leaves kept as they are."""
    leaves, treedef = flatten_state(value)
    return Var(name, treedef, tuple(Leaf(aval=scalar_aval(l)) if is_array(l) else Leaf(static=l) for l in leaves))


def assemble(spec, carried) -> list:
    """Per-variable values from the spec's static leaves and the `carried` arrays, in order."""
    carried = iter(carried)
    values = []
    for var in spec:
        if var.is_list:
            values.append(list(var.prefix))
        else:
            values.append(jax.tree_util.tree_unflatten(var.treedef, [next(carried) if l.carried else _unheld(l.static)
                                                                     for l in var.leaves]))
    return values


def initial_carry(spec, init) -> list:
    """The first carry: the loop's start values cast to the carried types (zeros if undefined)."""
    out = []
    for var, value in zip(spec, init):
        if var.is_list:
            continue
        leaves, _ = flatten_state(value)
        if isinstance(value, Undefined):  # undefined before the loop: any structure, all zeros
            leaves = [value] * len(var.leaves)
        for leaf, start in zip(var.leaves, leaves):
            if not leaf.carried:
                continue
            if leaf.zeros or isinstance(start, Undefined):
                out.append(cast_to(jnp.zeros(leaf.aval.shape, leaf.aval.dtype), leaf.aval))  # weak as the body gives it
            else:
                out.append(_as_carried(start, leaf.aval))
    return out


# -- one iteration's outputs -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ArrayOut:
    """An output leaf that is an array: its type, and its index in the iteration's arrays."""

    aval: object
    pos: int


@dataclasses.dataclass(frozen=True)
class PythonOut:
    """An output leaf that is a Python value (kept as is when the body leaves it equal)."""

    value: object


@dataclasses.dataclass(frozen=True)
class TreeOut:
    """A variable's new value as a pytree: its structure and, per leaf, an ArrayOut or PythonOut."""

    treedef: object
    leaves: tuple
    in_place: bool = False  # a dict the body changed in place (`d |= {...}`), not a new one


@dataclasses.dataclass(frozen=True)
class AppendedOut:
    """An append-only list: the arrays this iteration appended, to be stacked as scan outputs."""

    items: tuple  # of ArrayOut
    in_place: bool  # appended to in place (see `Var.in_place`)


@dataclasses.dataclass(frozen=True)
class Iteration:
    """What one traced iteration gave: its arrays, and per variable a TreeOut or AppendedOut."""

    arrays: list
    outputs: list

    def appended(self) -> list:
        return [self.arrays[item.pos] for out in self.outputs if isinstance(out, AppendedOut) for item in out.items]


def describe_outputs(spec, given, outs, origin: OriginInfo) -> Iteration:
    """Split one iteration's new values into arrays and, per variable, where each leaf comes from
    (`given`: the values the iteration started from)."""
    arrays = []

    def array_out(value) -> ArrayOut:
        arrays.append(value)
        return ArrayOut(scalar_aval(value), len(arrays) - 1)

    outputs = []
    for var, start, out in zip(spec, given, outs):
        if var.is_list and type(out) is list and len(out) >= len(var.prefix) and all(
            a is b for a, b in zip(out, var.prefix)
        ):
            new = out[len(var.prefix):]
            for item in new:
                if not is_array(item):
                    raise LoopVariableError(
                        f"'{var.name}' gets {describe(item)} appended in a staged loop; only arrays can be stacked.",
                        origin,
                        advice=f"append arrays to '{var.name}', or build it in a Python loop.",
                    )
            in_place = out is start or grown_from(out) is start
            outputs.append(AppendedOut(tuple(array_out(v) for v in new), in_place))
            continue
        leaves, treedef = flatten_state(out)
        outputs.append(TreeOut(treedef, tuple(array_out(l) if is_array(l) else PythonOut(l) for l in leaves),
                               type(out) is dict and out is start))
    return Iteration(arrays, outputs)


def join(spec, iteration: Iteration, origin: OriginInfo) -> list:
    """The spec once one iteration gave `iteration`: each variable's types joined with its output's."""
    return [_join_var(var, out, origin) for var, out in zip(spec, iteration.outputs)]


def settled(spec, new) -> bool:
    """Whether `new` (joined after an iteration) carries what `spec` carried: no retrace needed.

    An append-only list whose items were not known yet is settled: the body always sees the
    list as it was before the loop, so knowing the items changes nothing it traced.
    """
    return all(
        _same_var(a, b) or (a.is_list and b.is_list and a.items is None) for a, b in zip(spec, new)
    )


def _same_var(a: Var, b: Var) -> bool:
    if a.is_list or b.is_list:
        return a.is_list and b.is_list and a.items == b.items
    return a.treedef == b.treedef and len(a.leaves) == len(b.leaves) and all(
        x.carried == y.carried and (x.aval == y.aval if x.carried else _same_static(x.static, y.static)) and x.zeros == y.zeros
        and _same_static(x.python_after, y.python_after) for x, y in zip(a.leaves, b.leaves)
    )


def _same_static(a, b) -> bool:
    return a is b or (type(a) is type(b) and static_equal(a, b))


def _join_var(var: Var, out: TreeOut | AppendedOut, origin) -> Var:
    if isinstance(out, AppendedOut):
        items = tuple(item.aval for item in out.items)
        if var.items is not None and var.items != items:
            raise LoopVariableError(
                f"'{var.name}' gets {len(items)} value(s) appended per iteration here, {len(var.items)} elsewhere, "
                "or of other shapes; a staged loop stacks one fixed set per iteration.",
                origin,
                advice=f"append the same number of same-shaped arrays to '{var.name}' in every iteration.",
            )
        return Var(var.name, prefix=var.prefix, items=items, in_place=out.in_place)
    treedef, desc = out.treedef, out.leaves
    if var.is_list:  # not append-only after all: carry the list as a pytree of arrays
        return _join_var(_tree_var(var.name, var.prefix), out, origin)
    if treedef != var.treedef:
        if var.leaves and all(not l.carried and isinstance(l.static, Undefined) for l in var.leaves):
            var = Var(var.name, treedef, tuple(Leaf(static=var.leaves[0].static) for _ in desc))
        else:
            raise loop_checks.structure_changed(var.name, var.treedef, treedef, origin)
    label = f"'{var.name}'" if len(desc) == 1 else f"a part of '{var.name}'"
    return Var(var.name, treedef, tuple(_join_leaf(l, d, label, origin) for l, d in zip(var.leaves, desc)),
               in_place=out.in_place)


def _join_leaf(old: Leaf, out: ArrayOut | PythonOut, label, origin) -> Leaf:
    is_python = isinstance(out, PythonOut)
    out_static = out.value if is_python else None
    if is_python and not old.carried and _same_static(old.static, out_static):
        return old
    refuse_ints_beyond_int32((out_static, old.static), label, origin)  # carried: held as an int32
    # a number the body gives though it was handed a carried value: the same in every iteration
    after = out_static if is_python and old.carried and is_python_number(out_static) else None
    if is_python and is_python_number(out_static):
        new = scalar_aval(out_static)
        if type(out_static) is bool:  # joins a number as the 0/1 Python arithmetic reads it
            new = jax.core.ShapedArray((), new.dtype, weak_type=True)
    elif is_python:
        if not old.carried and isinstance(old.static, Undefined):
            return Leaf(static=out_static)
        raise LoopVariableError(
            f"{label} is {describe(old.aval if old.carried else old.static)} before an iteration of the loop "
            f"but {describe(out_static)} after it; a staged loop can only carry arrays and numbers.",
            origin,
            advice=f"keep {label} the same Python value in every iteration, or make it an array.",
        )
    else:
        new = out.aval
    number = is_python and is_python_number(out_static)
    if not old.carried:
        if isinstance(old.static, Undefined):
            return Leaf(aval=new, zeros=True, unbound_before=not isinstance(old.static, UndefinedReturn),
                        python_number=number)
        if not is_python_number(old.static):
            raise LoopVariableError(
                f"{label} is {describe(old.static)} before an iteration of the loop but {describe(new)} after it.",
                origin,
                advice=f"give {label} an array value before the loop.",
            )
        start = scalar_aval(old.static)
        start = jax.core.ShapedArray(new.shape, start.dtype, weak_type=start.weak_type)  # a scalar broadcasts
        reshaped = old.static if new.shape != () else None
        return Leaf(aval=merge_types(start, new, label, origin), python_start=reshaped, python_after=after,
                    python_number=True)
    return Leaf(aval=merge_types(old.aval, new, label, origin), zeros=old.zeros, python_start=old.python_start,
                unbound_before=old.unbound_before, python_after=after, python_number=old.python_number or number)


def merge_types(before, after, label, origin):
    """The carried type once an iteration turns `before` into `after`, or a LoopVariableError."""

    def mismatch(why, advice):
        return LoopVariableError(
            f"{label} is {describe(before)} before an iteration of the loop but {describe(after)} after it: {why}",
            origin,
            advice=advice,
        )

    if before.shape != after.shape:
        raise mismatch(
            "a staged loop keeps each variable's shape.",
            f"keep {label} one shape in every iteration (preallocate it and write with .at[i].set(...)), "
            "or make the loop condition a Python value so the loop unrolls.",
        )
    if before.dtype == after.dtype:
        return jax.core.ShapedArray(before.shape, before.dtype, weak_type=before.weak_type and after.weak_type)
    if not after.weak_type:
        if before.weak_type:  # a Python number before, an array (or a Python bool) after: the
            # array's dtype, unless it cannot hold the number (3 then True: int32, not bool)
            dtype, _ = _jax_compat.weak_result_type(weak_proxy(before), weak_proxy(after))
            return jax.core.ShapedArray(before.shape, dtype)
    else:
        dtype, weak = _jax_compat.weak_result_type(weak_proxy(before), weak_proxy(after))
        if before.weak_type or dtype == before.dtype:
            return jax.core.ShapedArray(before.shape, dtype, weak_type=weak)
    raise mismatch("a staged loop keeps each variable's dtype.", f"cast {label} to one dtype, e.g. with .astype(...).")


# -- the lax loop ----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class StateFacts:
    """What the converted source says about a loop's state variables (display names).

    unread_after: read only by later iterations, never after the loop (no zero-trip check).
    observed: items/attributes whose container the loop looks into (`D.get('k')`, `len(D)`,
      `self.method()`): eagerly, the first iteration sees one missing that the loop first sets.
    """

    unread_after: frozenset = frozenset()
    observed: frozenset = frozenset()
    attributes: frozenset = frozenset()  # those that are attributes, resolved (`StateAccess.attributes`)
    held_iterator: bool = False  # a `for` over a name only `next()` reads otherwise (`Fact.HELD_ITERATOR`)
    items: dict = dataclasses.field(default_factory=dict, hash=False)  # those that are items (`StateAccess.items`)


@dataclasses.dataclass
class Loop:
    """The user code of a staged loop, as functions of the state variables' values.

    body: `(index, values) -> new values`; test: `(index, values) -> condition` checked before
    each iteration, or None when only `length` ends the loop; length: the static trip count,
    or None; indexed: whether `body`/`test` read the index (a `while` does not: no counter is
    carried); bound: `() -> int | None`, the `maximum_iterations` the body set last.
    """

    body: Callable
    test: Callable | None
    length: int | None
    indexed: bool
    bound: Callable = lambda: None
    facts: StateFacts = StateFacts()
    stop_at_bound: Callable = lambda: False  # the body chose `on_bound="stop"`: no check at the bound
    # the trips left by a counter in the condition (`while err > tol and it < 50:`, `it += 1` per
    # iteration), where both were Python ints at the loop's start: the bound of the masked scan
    # reverse-mode AD needs (checked when the program runs: the condition must be false there)
    counter_bound: int | None = None


class Refused(Exception):
    """A `check` of the settled spec refused staging; the message says why."""


@dataclasses.dataclass(frozen=True)
class _Retype:
    """A build abandoned because the body needs other carried types: the joined spec to build with."""

    spec: list
    provisional: bool = True  # the next build may still trace provisionally (`_typed_later`)


class _Abandon(Exception):
    """Raised by the body to leave the lax loop JAX is building (an exception is the only way out
    of a trace in progress; finishing it would leave a dead loop, with any prints or checks the
    body made, in the program). Caught by `_build`, which returns the `_Retype` it carries."""

    def __init__(self, retype: _Retype):
        super().__init__("the loop is traced again with the types its body gave")
        self.retype = retype


def stage(spec, init, loop: Loop, origin: OriginInfo, check=None) -> list:
    """Run `loop` with lax from the state values `init`; returns the values after it.

    The body runs inside the lax loop being built, on the carried types `spec` gives. When its
    outputs need other types (a Python number becoming an array, a weak type turning strong, a
    variable first defined in the loop), the build is abandoned and repeated with the joined
    types — a fixed point, so a loop whose types are right from the start traces its body once.

    Args:
      check: called with the settled spec before the loop is built; a reason (str) it returns
        is raised as `Refused`.
    """
    check_numbers_so_far()  # (a Python number divided by a data-decided 0 before the loop stops it)
    provisional = True
    for _ in range(_MAX_ROUNDS):
        attempt, guarded = events.Attempt(), guards.snapshot()
        built = _build(spec, init, loop, origin, check, provisional)
        if not isinstance(built, _Retype):
            return built
        attempt.discard()  # what the body noted belongs to a loop JAX drops
        guards.restore(guarded)  # (and what it changed: the next build's body does it again)
        spec, provisional = built.spec, built.provisional
    raise LoopVariableError(
        "the types of the loop's variables do not settle: each iteration changes them again.",
        origin,
        advice="give every variable the loop changes a fixed shape and dtype before the loop.",
    )


def _build(spec, init, loop: Loop, origin, check, provisional: bool = True) -> list | _Retype:
    """The values after the loop staged with the carried types `spec`, or the `_Retype` its body
    asked for. `provisional`: a body traced before a variable first set in it has a type may
    defer what a side raises (`_typed_later`); if it settles so, it is traced once more without."""
    untyped = provisional and _untyped(spec, init)
    bound = loop.length if loop.length is not None else loop.bound()
    final_spec = []  # the settled spec, once the body has been traced (it knows appended items)
    last = []  # the settled iteration's outputs: which leaves the body gives as Python numbers

    body_orders: list = []  # the key orders of the dicts each variable holds after an iteration

    def body(index, carried):
        """One iteration inside the lax loop: `(new carry, appended items)`."""
        given = assemble(spec, carried)
        key_order.observe_if_held(given)  # (the state machinery takes its dicts as plain ones)
        roots = reachable.snapshot((loop.body, loop.test), [v.name for v in spec], given)
        with WriteTracker(roots, loop.facts.attributes, loop.facts.items, origin) as tracker, staged_tracing(), \
                _typed_later(untyped), \
                guards.unchanged_by_side(origin, "body of this staged loop",  # a known trip count: unrolled instead
                                         Refused if loop.length is not None else None):
            with numbers_checked(origin):  # the numbers rule: what Python would raise computing on them
                outs = _first_set_as_maybe_unbound(spec, init, loop.body(index, given))
            outs = [_HeldObject(out) if _held(var.name, start, out) and tracker.existed_before(out) else out
                    for var, start, out in zip(spec, init, outs)]
            key_order.observe_if_held(outs)
            body_orders[:] = [key_order.orders_of(v) for v in outs]
            iteration = describe_outputs(spec, given, outs, origin)  # reads lists grown while tracing
        try:
            refuse_loop_writes(tracker, origin, trips_known=loop.length is not None and loop.test is None)
        finally:
            tracker.forget()  # (the body's function outlives the trace in jax's caches)
        new = join(spec, iteration, origin)
        if not settled(spec, new) or (loop.length is None and loop.bound() != bound):
            raise _Abandon(_Retype(new))
        if untyped:  # settled while still untyped: traced again, raising as any body does
            raise _Abandon(_Retype(new, provisional=False))
        _refuse_first_set_observed(new, loop.facts.observed, origin)
        reason = check(new) if check is not None else None
        if reason is not None:
            raise Refused(reason)
        if loop.test is not None:
            _refuse_lists(new, origin)
        final_spec[:] = new
        last[:] = iteration.outputs
        return _next_carry(spec, iteration), iteration.appended()

    def test(index, carried):
        pred = loop.test(index, assemble(spec, carried))
        return scalar_predicate(pred, origin) if is_traced(pred) else jnp.asarray(bool(pred))

    carried = initial_carry(spec, init)
    try:
        with ad_context.scope(carried):
            values = _run_lax_loop(spec, final_spec, carried, loop, body, test, bound, origin, last)
    except _Abandon as abandon:
        return abandon.retype
    values = _in_key_order(spec, init, values, body_orders, loop.test is None, origin)
    return _changed_in_place(final_spec, init, values)


def _untyped(spec, init) -> bool:
    """Whether a variable first set in the loop has no type yet in `spec`."""
    return any(type(start) is Undefined and not var.is_list and var.leaves
               and all(not l.carried and type(l.static) is Undefined for l in var.leaves)
               for var, start in zip(spec, init))


class _HeldObject:
    """dy2st's return value (or a value past an early exit, unbound before the loop) that an
    iteration binds to one list, dict or object from before the loop (`for ...: if c: return
    lst`): a constant of the trace, that object itself, so the loop gives it back, not a new one
    made of its items. An iteration binding it to anything else is refused (`_join_leaf`)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _HeldObject and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


def _held(name: str, start, out) -> bool:
    """Whether `out`, a state variable's value after an iteration (`start` before the loop), is
    one list, dict or object the loop gives back itself: the value of a variable unbound before
    it (`UndefinedReturn`: dy2st's return value, or one past an early exit), or dy2st's return
    value that an earlier `return lst` set to `out` (no code reads it but the function's end)."""
    if not (type(out) in (list, dict) or is_users_object(out)):
        return False
    return isinstance(start, UndefinedReturn) or (out is start and name == UNDEFINED_RETURN.name)


def _unheld(value):
    return value.obj if type(value) is _HeldObject else value


@contextlib.contextmanager
def _typed_later(untyped: bool):
    """While a body is traced provisionally (see `CONTEXT.untyped_loops`)."""
    CONTEXT.untyped_loops += untyped
    try:
        yield
    finally:
        CONTEXT.untyped_loops -= untyped


def _first_set_as_maybe_unbound(spec, init, outs) -> list:
    """A local unbound before the loop (or a `MaybeUnbound` already: an earlier loop's or `if`'s)
    that an iteration binds leaves the loop as a `MaybeUnbound` (bound once an iteration bound
    it: after zero iterations it is as before), which `jst.ld` checks where it is read (see
    `transformers.unbound_reads`)."""
    return [MaybeUnbound(out, True, var.name)
            if type(start) in (Undefined, MaybeUnbound) and var.name.isidentifier() and not var.is_list
            and type(out) not in (Undefined, MaybeUnbound) else out
            for var, start, out in zip(spec, init, outs)]


def _in_key_order(spec, init, values, body_orders, runs: bool, origin) -> list:
    """The loop's values with their dicts' keys in eager's order (the lax loop gives them
    sorted): an iteration's, where the loop surely `runs` or the start has the same order;
    where the order depends on whether the loop runs at all, refused."""
    for i, (var, start, after) in enumerate(zip(spec, init, body_orders)):
        before = key_order.orders_of(start)
        if after != before and not runs:
            raise LoopVariableError(
                f"'{var.name}' holds a dict whose keys are in one order before the loop and in another "
                "after an iteration: eagerly its order after the loop depends on whether the loop runs.",
                origin,
                advice="build the dict in the loop with the keys in the order it has before the loop.",
            )
        values[i] = key_order.restore(values[i], after)
    return values


def _changed_in_place(spec, init, values) -> list:
    """A list the body appended to in place, or a dict it changed in place (`d |= {...}`), is,
    eagerly, the one from before the loop: other references to it (the caller's, a context
    manager's) see the change. The items are written into it. Inside a staged branch or body
    being traced, a list is noted as grown from it instead (`staging.note_grown`, read by the
    `if`); a dict is written in place there too (the `if` watches its variables' dicts and puts
    them back after each side, see `control_flow._StateContents`)."""
    for i, var in enumerate(spec):
        if not var.in_place or type(init[i]) is not type(values[i]):
            continue
        if var.is_list and tracing_staged_code():
            note_grown(values[i], init[i])
            continue
        refill(init[i], values[i])
        values[i] = init[i]
    return values


# A scan of this many iterations or fewer is unrolled by XLA (the body is still traced once): a
# while loop's per-iteration cost on a CPU (~2 us) is most of a small step's, and `jax.jit` of the
# same Python loop unrolls it (W14: two steps of an MLP, 1.43x `jax.jit` as a rolled scan).
_UNROLLED_TRIPS = 8


def _run_lax_loop(spec, final_spec, carried, loop, body, test, bound, origin, last_outputs) -> list:
    index = _weak_int32(0) if loop.indexed else None
    if loop.test is None:  # a static trip count (never zero here): one scan
        (_, final), ys = lax.scan(lambda c, _: _step(body, *c), (index, carried), None, length=bound,
                                  unroll=bound <= _UNROLLED_TRIPS)
        return _final_values(final_spec, final, ys, bound, last_outputs)
    # A loop that may run zero times carries whether it ran, when that decides what eager gives.
    zero_trip_checks = _zero_trip_checks(spec, loop.facts.unread_after)
    ran = jnp.asarray(False) if zero_trip_checks else None

    def step_noting_ran(i, carried, ran):
        return (*_step(body, i, carried)[0], None if ran is None else jnp.asarray(True))

    if bound is None and loop.counter_bound is not None and ad_context.active(carried):
        bound = loop.counter_bound  # (under jax.grad: the counter's bound; else a while loop, as fast as it ends)
    if bound is not None:  # a condition and a bound: a scan of masked steps (reverse-mode AD works)
        def masked_step(c, _):
            i, carried, ran = c
            return lax.cond(test(i, carried), lambda: step_noting_ran(i, carried, ran), lambda: (i, list(carried), ran)), None

        (last, final, ran), _ = lax.scan(masked_step, (index, carried, ran), None, length=bound)
        if loop.length is None and not loop.stop_at_bound():  # a static length ends a `for` as eagerly
            loop_checks.check_not_truncated(test(last, final), origin, bound)
    else:
        _, final, ran = loop_checks.while_loop(lambda c: test(c[0], c[1]), lambda c: step_noting_ran(*c),
                                               (index, carried, ran), origin)
        if ad_context.active(carried + list(final)):
            raise LoopGradientError(
                "reverse-mode differentiation (jax.grad/vjp) through this staged loop: its number of "
                "iterations is decided by traced values, dy2st is given no bound for it (a counter in the condition, "
                "`it < 50` with `it += 1` once per iteration and no `continue`, would be one), and XLA's while loop "
                "cannot run backwards.",
                origin,
                advice="call dy2st.set_loop_options(maximum_iterations=N) inside the loop body with an upper bound N; "
                "the loop then becomes a scan of N masked steps, which jax.grad supports.",
            )
    if zero_trip_checks:
        _check_zero_trips(zero_trip_checks[0], ran, origin)
    return _final_values(final_spec, final, [], 0)


def _zero_trip_checks(spec, unread_after) -> list:
    """`(var, leaf)` pairs whose value after zero iterations eager Python would not give."""
    return [(var, leaf) for var in spec if not var.is_list and var.name not in unread_after
            and not maybe_unbound_tree(var.treedef)  # (its flag says whether an iteration bound it)
            for leaf in var.leaves if leaf.carried and (leaf.unbound_before or leaf.python_start is not None)]


def _check_zero_trips(check: tuple, ran, origin: OriginInfo) -> None:
    """At run time, when the loop ran zero times: what eager Python raises for the first
    `(var, leaf)` of `_zero_trip_checks` (or a refusal)."""
    var, leaf = check
    if leaf.unbound_before:
        check_when_run(ran, lambda: _unbound_after_loop(var.name, origin), origin,
                       f"if the loop runs zero times, reading '{var.name}' after it raises what eager Python raises")
    else:
        check_when_run(ran, lambda: LoopVariableError(
            f"the loop ran zero times, so eagerly '{var.name}' would still be the Python number "
            f"{leaf.python_start!r} it was before the loop; its staged value is {describe(leaf.aval)}, "
            "the type one iteration gives it.",
            origin,
            advice=f"give '{var.name}' its array shape before the loop (e.g. jnp.full(shape, {leaf.python_start!r})).",
        ), origin, f"if the loop runs zero times, '{var.name}' would be a Python number eagerly: refused then")


def _unbound_after_loop(name: str, origin: OriginInfo) -> Exception:
    """The error eager Python raises reading item or attribute `name` that a loop which never ran
    would have set (a local first set in the loop is a `MaybeUnbound`, checked where it is read)."""
    item = name.endswith("]")
    error = MissingAfterLoopError(
        f"{name} is first set inside this loop, which ran zero times: eagerly it does not exist after the "
        f"loop (reading it raises {'KeyError' if item else 'AttributeError'}, and what holds it has no such "
        f"{'key' if item else 'attribute'} when returned or iterated), where the program gives back one "
        "structure whether the loop runs or not (this check runs when the loop ends, before any read).",
        origin, advice=f"set {name} before the loop.")
    error.add_note(f"(dy2st) '{name}' is first set inside the loop at {origin.as_header()}\nwhich ran zero times.")
    return error


def _step(body, index, carried):
    """`((next index, new carry), appended items)`; a loop that reads no index carries None."""
    new, items = body(index, carried)
    return (None if index is None else lax.add(index, _weak_int32(1)), new), items


def _weak_int32(value):
    """The loop index is typed like a Python int (weak int32), as `range` items are, so the body
    needs no convert ops; `lax.add` keeps it int32 where `+ 1` would widen it under x64."""
    return _jax_compat.convert_element_type(value, np.dtype(np.int32), weak_type=True)


def _refuse_first_set_observed(spec, observed: frozenset, origin: OriginInfo) -> None:
    """An item or attribute missing before the loop, first set in it, whose container the loop
    looks into: eagerly the first iteration sees it missing (`D.get('k', default)` gives the
    default), a staged body would see the value it is carried with. A static loop unrolls on
    this error; a traced one reports it."""
    for var in spec:
        if var.name in observed and not var.is_list and any(leaf.unbound_before for leaf in var.leaves):
            raise LoopVariableError(
                f"{var.name} does not exist before this staged loop and is first set inside it, while the loop "
                "also looks into what holds it; eagerly the first iteration sees it missing, a staged loop "
                "would give it a value from the start.",
                origin,
                advice=f"set {var.name} before the loop (to the value its first iteration should see), "
                "or make the loop's condition or range a Python value so the loop unrolls.",
            )


def _refuse_lists(spec, origin):
    lists = [var.name for var in spec if var.is_list]
    if lists:
        raise LoopVariableError(
            f"'{lists[0]}' is appended to in a staged loop whose number of iterations is not known "
            "when it is traced (it may stop early), so the appended values cannot be stacked.",
            origin,
            advice="preallocate an array and write row i with .at[i].set(value), "
            "or loop over a Python range / an array without `break`.",
        )


def _next_carry(spec, iteration: Iteration) -> list:
    """The carried leaves one iteration gives, cast to the carried types."""
    new = []
    for var, out in zip(spec, iteration.outputs):
        if var.is_list:
            continue
        for leaf, out_leaf in zip(var.leaves, out.leaves):
            if leaf.carried:
                value = iteration.arrays[out_leaf.pos] if isinstance(out_leaf, ArrayOut) else out_leaf.value
                new.append(_as_carried(value, leaf.aval))
    return new


def _as_carried(value, aval):
    """`value` (an array or a Python number) as an array of type `aval`, with no op if it is one."""
    if is_traced(value) and jax.typeof(value) == aval:
        return value
    value = value if is_traced(value) else jnp.asarray(value)
    return cast_to(jnp.broadcast_to(value, aval.shape), aval)


def _final_values(spec, final, ys, length, last=None) -> list:
    """The state after the loop. `last`: the outputs of an iteration that surely ran last (a
    static trip count): a carried leaf it gives as a Python number is that number after the
    loop, as eagerly (`k = x.min()` before, `k = 2` in the body: the int 2, not 2.0), and one
    the carry promoted (`k = 0.5` before, an int in the body) has the body's type again."""
    carried, ys = iter(final), iter(ys)
    values, numbers = [], []
    for i, var in enumerate(spec):
        if var.is_list:
            stacks = [next(ys) for _ in var.items]
            values.append(var.prefix + [s[t] for t in range(length) for s in stacks])
            continue
        outs = last[i].leaves if last else (None,) * len(var.leaves)
        leaves = []
        for leaf, out in zip(var.leaves, outs):
            value = next(carried) if leaf.carried else _unheld(leaf.static)
            if leaf.carried and isinstance(out, PythonOut) and is_python_number(out.value):
                value = out.value  # the same number every iteration: the body read nothing carried for it
            elif leaf.carried and isinstance(out, ArrayOut) and out.aval != leaf.aval and out.aval.shape == leaf.aval.shape:
                value = cast_to(value, out.aval)
            elif leaf.python_number and leaf.aval.weak_type and leaf.aval.shape == ():
                numbers.append(value)
            leaves.append(value)
        values.append(jax.tree_util.tree_unflatten(var.treedef, leaves))
    note_python_numbers(numbers)
    return values
