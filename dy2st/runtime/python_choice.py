"""Values whose Python type eager code picks by data: a Python number or an array.

Eagerly, `max(loss, 0.0)` is the Python float `0.0` when it wins and the array `loss` otherwise;
`n = 0 if flag else x.sum()` (with a traced `flag`) likewise. A compiled program can only
return an array there, so the staged choice (`jnp.where`, or a `lax.cond` merging the sides)
records which *candidate* it took: a `Choice` holds an int32 index, traced alongside the value,
into a static table of candidates, each a `PythonNumber` (eager's exact Python value) or an
`ArrayOf` (eager's dtype for that side: `max(int32 array, 0.5)` is an int32 array when the
array wins, though the staged value is a float32 one).

Choices are recorded only while a program of a StaticFunction is traced (`recording`); a value
that reaches the program's outputs as it is leaves with its index (`finish`: the output becomes
a `PythonChoices` node), and the call's boundary turns it back into what eager returns
(`resolve`): the Python number itself, or the array in the chosen side's dtype. A value that
is computed on (`max(loss, 0.0) * 2`) is an ordinary array from then on; where its sides are of
different kinds (an int and a float array), `choice_kinds` follows it through the program and
refuses a result whose eager type depends on the side taken (`DataDependentKindError`). Under
an enclosing `jax.jit`/`grad`/`vmap` nothing is recorded: every output is an array there anyway.

Before:                                   After, in the program and at the boundary:
    m = max(loss, 0.0)                        m = where(0.0 > loss, 0.0, loss); index = where(.., 0, 1)
    return m                                  return PythonChoices(m, index)  ->  0.0 or the array
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import jax
import jax.numpy as jnp
import numpy as np

from dy2st import _jax_compat
from dy2st.runtime import choice_kinds
from dy2st.runtime.static_outputs import Identities, StaticOutputs
from dy2st.runtime.values import PY_SCALARS


@dataclasses.dataclass(frozen=True)
class PythonNumber:
    """A candidate eager code returns as this exact Python number."""

    value: object

    def __eq__(self, other):  # 1 == 1.0 == True in Python; a candidate keeps its type
        return type(other) is PythonNumber and type(self.value) is type(other.value) and _same(self.value, other.value)

    def __hash__(self):
        return hash((type(self.value), self.value if self.value == self.value else "nan"))


def _same(a, b) -> bool:
    return a == b or a != a and b != b


@dataclasses.dataclass(frozen=True)
class ArrayOf:
    """A candidate eager code returns as an array of this dtype (and weak-type flag)."""

    dtype: object
    weak_type: bool


@dataclasses.dataclass(frozen=True)
class Choice:
    """Which candidate a staged value is: `candidates[index]` (index: an int32 scalar, traced)."""

    index: object
    candidates: tuple


@dataclasses.dataclass(frozen=True)
class Recorded:
    """A staged value noted while a program is traced, for `finish` and `choice_kinds`.

    choice: the candidates it stands for; None where eager's type is the staged one (a pick
      among arrays of that type, a `float(...)` cast).
    sources: the values it was picked from (`select`/`pick`: eagerly it *is* one of them, not
      a promotion of them); None for a `lax.cond` merge (`choice_kinds` follows its sides
      inside the cond) and a cast."""

    value: object
    choice: Choice | None
    sources: tuple | None


_local = threading.local()


def _table():
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def recording():
    """Record choices while a program is traced; yields the `Recording` whose `finish` wraps outputs."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    recorded = Recording()
    stack.append(recorded.table)
    try:
        yield recorded
    finally:
        stack.pop()


def is_recording() -> bool:
    return _table() is not None


def choice_of(value) -> Choice:
    """The candidates `value` stands for: its recorded Choice, or itself as the only candidate."""
    if isinstance(value, PY_SCALARS):
        return Choice(np.int32(0), (PythonNumber(value),))
    table = _table()
    choice = _recorded_choice(table, value) if table is not None else None
    if choice is not None:
        return choice
    aval = jax.typeof(value)
    return Choice(np.int32(0), (ArrayOf(aval.dtype, aval.weak_type),))


def needs_recording(choice: Choice, aval) -> bool:
    """Whether eager could give something other than a value of type `aval` as it is (a Python
    number, or another dtype)."""
    return any(not (type(c) is ArrayOf and c.dtype == aval.dtype and c.weak_type == aval.weak_type)
               for c in choice.candidates)


CARRY_REASON = ("a value the body makes is a Python number or an array depending on the data "
                "(eager's type is chosen by data), which a loop's carry cannot say")


def any_recorded(values) -> bool:
    """Whether a leaf of `values` is a recorded choice (what a staged loop cannot carry)."""
    table = _table()
    if not table:
        return False
    for leaf in jax.tree_util.tree_leaves(values):
        if _recorded_choice(table, leaf) is not None:
            return True
    return False


def recorded_choice(value) -> Choice | None:
    """The Choice recorded for the staged `value`, or None."""
    table = _table()
    return _recorded_choice(table, value) if table else None


def fits(candidate, aval) -> bool:
    """Whether a value of type `aval` gives eager's `candidate` as a weak scalar gives a Python
    number (same kind) or as an array of its dtype (the weak flag aside, as for `select`)."""
    if type(candidate) is PythonNumber:
        return np.dtype(aval.dtype).kind in _KINDS.get(type(candidate.value), "")
    return candidate.dtype == aval.dtype


def describe_candidates(choice: Choice) -> str:
    """What eager may give, in words: `Python int 0 or a float32 array`."""
    words = [f"Python {type(c.value).__name__} {c.value!r}" if type(c) is PythonNumber else f"a{'n' if str(c.dtype)[0] in 'aeiou' else ''} {c.dtype} array"
             for c in choice.candidates]
    return " or ".join(dict.fromkeys(words))


def _recorded_choice(table: dict, value) -> Choice | None:
    entry = table.get(id(value))
    return entry.choice if entry is not None and entry.value is value else None


def record(value, choice: Choice, sources: tuple | None = None) -> None:
    """Note that the staged `value` is `choice`, picked from `sources` (no-op unless a program
    is being traced)."""
    table = _table()
    if table is None:
        return
    known = table.get(id(value))
    if sources is None and known is not None and known.value is value and known.sources is not None:
        # A staged `if` whose sides both left this value as it was (`k = k`) merges it with
        # itself: it is still the pick it was, whose sources say what eager's value may be.
        return
    if needs_recording(choice, jax.typeof(value)):
        table[id(value)] = Recorded(value, choice, sources)
    elif sources is not None and any(isinstance(s, jax.core.Tracer) for s in sources):
        table[id(value)] = Recorded(value, None, sources)  # a pick whose sources may be computed


def cast_to_python_kind(value, result):
    """`result` of `float(value)`: a Python float whatever `value`'s kind, so arithmetic on it
    is eager's even where `value` was a choice between an int and a float array. jax gives
    `value` itself back for a float scalar; while choices are recorded it is then a copy,
    known (`choice_kinds`) to have one kind."""
    table = _table()
    if not table:
        return result
    if _jax_compat.tracer_var(result) is _jax_compat.tracer_var(value):
        result = jnp.copy(result)
    table[id(result)] = Recorded(result, None, None)
    return result


def combined(choices) -> tuple:
    """One candidate table for several sides: `(table, maps)`, side i's candidate j being
    `table[maps[i][j]]` (`index_in` maps an index). Equal candidates share one entry: a cond
    built again merges its sides' tables once more, and the table must not grow each time."""
    table, maps, where = [], [], {}
    for choice in choices:
        mapping = []
        for candidate in choice.candidates:
            key = _candidate_key(candidate)
            if key not in where:
                where[key] = len(table)
                table.append(candidate)
            mapping.append(where[key])
        maps.append(tuple(mapping))
    return tuple(table), maps


def _candidate_key(candidate):
    """Equal keys for candidates eager cannot tell apart (not 0.0 and -0.0, nor 1 and 1.0)."""
    if type(candidate) is PythonNumber:
        return type(candidate.value), repr(candidate.value)
    return candidate


def index_in(index, mapping: tuple):
    """A side's candidate index (an int32 scalar, maybe traced) as an index into the table
    `combined` made: a shift where the side's candidates stay in order, else a lookup."""
    start = mapping[0]
    if mapping == tuple(range(start, start + len(mapping))):
        index = jnp.asarray(index, jnp.int32)
        return index + start if start else index
    if isinstance(index, np.integer):
        return np.int32(mapping[int(index)])
    return jnp.asarray(mapping, jnp.int32)[index]


_KINDS = {bool: "b", int: "iu", float: "f", complex: "c"}


def stands_for_python_number(dtype, values) -> bool:
    """Whether a choice among `values` giving `dtype` should be weakly typed, as a Python number
    is: one of them is a Python number of `dtype`'s kind (`max(loss, 0.0)`; `y = 0.0` on one
    side of an `if`). Eager's value is that number or an array of the same kind, so later
    arithmetic promotes as it would with the number (`y * 2` stays a weak scalar)."""
    kind = np.dtype(dtype).kind
    return any(type(v) in _KINDS and kind in _KINDS[type(v)] for v in values)


def select(pred, on_true, on_false, result):
    """`result` (a `jnp.where` of `on_true` where `pred`, else `on_false`), weakly typed where
    it stands for a Python number, with the choice recorded while a program is traced."""
    if stands_for_python_number(result.dtype, (on_true, on_false)) and not result.weak_type:
        result = _jax_compat.convert_element_type(result, result.dtype, True)
    if not is_recording():
        return result
    a, b = choice_of(on_true), choice_of(on_false)
    table, (a_map, b_map) = combined((a, b))
    choice = Choice(jnp.where(pred, index_in(a.index, a_map), index_in(b.index, b_map)).astype(jnp.int32), table)
    record(result, choice, (on_true, on_false))
    return result


def pick(index, items, results) -> list:
    """`results` (`results[i]` is `items[index[i]]`: a sort's permutation), weakly typed where
    they stand for Python numbers, with the choices recorded while a program is traced."""
    if results and stands_for_python_number(results[0].dtype, items) and not results[0].weak_type:
        results = [_jax_compat.convert_element_type(r, r.dtype, True) for r in results]
    if not is_recording():
        return results
    choices = [choice_of(item) for item in items]
    table, maps = combined(choices)
    # Each item stands for one candidate (a recorded one may stand for several: its own index).
    item_index = jnp.stack([jnp.asarray(index_in(c.index, m), jnp.int32) for c, m in zip(choices, maps)])
    for i, result in enumerate(results):
        record(result, Choice(item_index[index[i]], table), tuple(items))
    return results


class Recording:
    """The choices recorded during one program's trace: `id(value) -> Recorded`."""

    def __init__(self):
        self.table: dict = {}

    def finish(self, outputs):
        """`outputs`, or `PythonChoices(outputs, indices)` when some leaves are recorded choices.
        Raises DataDependentKindError when an output was computed from a value whose kind
        (int or float) eager picks by data (`choice_kinds`)."""
        if not self.table:
            return outputs
        leaves = jax.tree_util.tree_leaves(outputs)
        chosen = []
        for position, leaf in enumerate(leaves):
            choice = _recorded_choice(self.table, leaf)
            if choice is not None:
                chosen.append((position, choice))
        entries = [_flow_entry(e) for e in self.table.values()]
        if any(mixed for *_, mixed in entries):
            choice_kinds.check_outputs(entries, leaves, {p for p, _ in chosen})
        if not chosen:
            return outputs
        indices = [jnp.asarray(c.index, jnp.int32) for _, c in chosen]
        return PythonChoices(outputs, indices, tuple((p, c.candidates) for p, c in chosen))


def _flow_entry(entry: Recorded) -> tuple:
    """`(value, candidate types, sources, mixed)` as `choice_kinds` reads them: a source is
    its jaxpr variable, or the types of a Python number or constant array."""
    sources = None if entry.sources is None else [_source(s) for s in entry.sources]
    if entry.choice is None:
        return entry.value, None, sources, False
    types = frozenset(_candidate_type(c) for c in entry.choice.candidates)
    mixed = not choice_kinds.covers(choice_kinds.type_of(jax.typeof(entry.value)), types)
    return entry.value, types, sources, mixed


def _candidate_type(candidate) -> tuple:
    """A Python number is weak (an array standing for it must be); an array is an array of
    its dtype, weak or not (arrays compute alike by dtype)."""
    if type(candidate) is PythonNumber:
        return choice_kinds.python_type(candidate.value)
    return candidate.dtype, False


def _source(value):
    var = _jax_compat.tracer_var(value)
    if var is not None:
        return var
    if isinstance(value, PY_SCALARS):
        return frozenset({choice_kinds.python_type(value)})
    return frozenset({choice_kinds.type_of(jax.typeof(value))})


class PythonChoices:
    """A program's outputs with, per recorded leaf, the index of the candidate it is."""

    __slots__ = ("outputs", "indices", "where")

    def __init__(self, outputs, indices, where):
        self.outputs = outputs
        self.indices = indices
        self.where = where  # ((leaf position, candidates), ...): static, in the tree structure


jax.tree_util.register_pytree_node(
    PythonChoices,
    lambda p: ((p.outputs, p.indices), p.where),
    lambda where, children: PythonChoices(children[0], children[1], where),
)


def resolve(result):
    """What eager returns, from a program's concrete outputs (anything else as it is): the
    chosen candidates, then the outputs that are not arrays (`static_outputs`)."""
    if type(result) is PythonChoices:
        leaves, treedef = jax.tree_util.tree_flatten(result.outputs)
        indices = jax.device_get(result.indices)
        for (position, candidates), index in zip(result.where, indices):
            leaves[position] = _as_candidate(leaves[position], candidates[int(index)])
        result = jax.tree_util.tree_unflatten(treedef, leaves)
    if type(result) is StaticOutputs:
        result = result.join()
    if type(result) is Identities:
        return result.decode()
    return result


def _as_candidate(leaf, candidate):
    if type(candidate) is PythonNumber:
        return candidate.value
    aval = jax.typeof(leaf)
    if aval.dtype == candidate.dtype and aval.weak_type == candidate.weak_type:
        return leaf
    return _jax_compat.convert_element_type(leaf, candidate.dtype, candidate.weak_type)
