"""`if` statements and ternaries: plain Python for Python conditions, `lax.cond` for traced ones.

Generated code calls these with the branches as functions and the carried variables named
by path, reached through the branches' closure cells (`state_cells`; see
`dy2st.transformers.ifelse`)::

    (y,) = convert_ifelse(pred, if_body, else_body, ('y',), ('y',), 1)

is, for a Python `pred`, exactly::

    if pred: if_body()
    else: else_body()

and for a traced `pred`, `y = lax.cond(pred, <if_body's y>, <else_body's y>)`. Attributes that
methods called inside a traced branch change (`self.total = ...` in `self.bump(x)`) are
found by `dy2st.runtime.writes` and carried through the same cond, then written back. Lists
and dicts keep eager's identity: a side starts from the items they held before the `if`, what
it appends or changes in place (through any reference) is carried, and the merged items are
written back into the list or dict from before (`_StateContents`, `_ListVersions`,
`_ListIdentity`).
"""

from __future__ import annotations

import contextlib
import dis
import functools
import sys

import jax.numpy as jnp

from dy2st.errors import BranchOutputError, OriginInfo, PythonEffectError, rebinding_hint
from dy2st.runtime import events, key_order, reachable, state_cells, static_outputs, writes
from dy2st.runtime.asserts import check_numbers_so_far, numbers_checked
from dy2st.runtime.staging import (EXPRESSION_SIDES, grown_from, grown_here, grown_in_this_side, scalar_predicate, stage_cond, stage_value,
                                   watch_here)
from dy2st.runtime.values import is_nnx_object, is_traced
from dy2st.runtime.undefined import Undefined, UndefinedReturn
from dy2st.runtime.writes import (ITSELF, AttributeKey, WriteTracker, changed_contents, refill,
                                  refuse_unseen_held_outside, restore_items)


def convert_ifelse(pred, if_body, else_body, state, names, nouts, branch_names=("if branch", "else branch"),
                   python_reason=None, reordered_keys=(), class_name=None):
    """Runs an `if` statement; returns the new values of the plain names among the state
    variables (attributes and items it writes back itself).

    Args:
      pred: the condition's value.
      if_body, else_body: functions running each branch (writing state via `nonlocal`);
        `else_body` is None when there is no `else`.
      state: the paths of the state variables (`dy2st.runtime.state_cells`), which the
        branches reach through their closures.
      names: display names of the state variables, for errors.
      nouts: the first `nouts` state variables are live after the `if`; the rest are only
        carried in (their values after the `if` do not matter).
      branch_names: how errors name the two paths (a guard made by the early-return rewrite
        is not the user's if/else).
      python_reason: why a branch has a Python effect that tracing both branches would run
        whichever side the data picks (see `dy2st.analysis.loop_bodies`), or None.
      reordered_keys: `(i, j)` of state items of one object the branches first assign in
        opposite orders (see `_refuse_reordered_keys`).
      class_name: the class whose private names (`__n`) the paths hold, mangled as compiled.
    """
    with state_cells.StateAccess((if_body, else_body), state, names, sys._getframe(1), class_name) as access:
        if not is_traced(pred):
            if pred:
                if_body()
                taken = branch_names[0]
            else:
                if else_body is not None:
                    else_body()
                taken = branch_names[1] if else_body is not None else "no branch (false, no else)"
            if events.active():
                events.note(OriginInfo.of_caller(), "python_if", "Python if",
                            f"a Python condition, so only the path it picks is traced: {taken}")
            return access.plain()
        if python_reason is not None:
            raise _python_effect_error(python_reason, OriginInfo.of_caller())
        origin = OriginInfo.of_caller()
        get_state, set_state = (access.get, access.set) if state else (None, None)
        if reordered_keys:
            _refuse_reordered_keys(reordered_keys, get_state(), names, origin)
        final = stage_if(pred, if_body, else_body, get_state, set_state, names, nouts, origin, branch_names,
                         access.attributes(), access.frame, access.items())
        return state_cells.plain_values(final, access.paths)


def convert_jump_if(pred, flag):
    """`if pred: flag = True` for a jump's flag (a `break`, `continue` or `return` as the only
    statement of its branch): `flag or pred`, a `logical_or` where `pred` is traced, as a person
    writes it (a cond would carry the flag through two branches that do no work)."""
    if not is_traced(pred):
        return True if pred else flag
    origin = OriginInfo.of_caller()
    if events.active():
        events.note(origin, "flag", "jump flag: flag | condition",
                    "a traced condition around a lone break/continue/return: the flag is or-ed with it, no cond")
    return jnp.logical_or(scalar_predicate(pred, origin), flag)


def _refuse_reordered_keys(pairs, initial, names, origin: OriginInfo) -> None:
    """Two keys the branches add to a dict in opposite orders, both new (unbound before the
    `if`): the dict's order after it would depend on the data."""
    for i, j in pairs:
        if isinstance(initial[i], Undefined) and isinstance(initial[j], Undefined):
            raise BranchOutputError(
                f"the branches add {names[i]} and {names[j]} in opposite orders: eagerly the dict's order "
                "(what `list(d)` or a loop over `d.items()` sees) depends on the branch taken.",
                origin,
                advice="assign the keys in the same order in both branches (or set them before the `if`).",
            )


class _CarryMore(Exception):
    """Raised by a side of a staged `if` to leave the `lax.cond` being built: a called method
    changed attributes the build does not carry (`_traced_if` builds it again carrying them)."""


def stage_if(pred, if_body, else_body, get_state, set_state, names, nouts, origin, branch_names,
             attributes: frozenset, frame=None, items: dict | None = None):
    """The `if` statement of `convert_ifelse` for a traced `pred`, as one `lax.cond` (also used
    for the iterations a traced `break` may skip, see `loops`); `attributes`: those among its
    variables (`StateAccess.attributes`), `items` the items (`StateAccess.items`); `frame`: the
    converted function's, whose other locals may hold what the sides' values hold
    (`_refuse_sharing_by_data`)."""
    check_numbers_so_far()  # (a Python number divided by a data-decided 0 before the `if` stops its prints)
    initial = get_state() if get_state is not None else ()
    tracker = WriteTracker(reachable.snapshot((if_body, else_body), names, initial), attributes, items, origin)
    try:
        final = _traced_if(pred, if_body, else_body, get_state, set_state, names, nouts, origin, branch_names,
                           initial, tracker, frame)
    except BaseException:
        refuse_unseen_held_outside(tracker, failed=True)
        raise
    # Checked once the frame that traced the sides is gone: only what outlives the `if` holds
    # the lists the sides made.
    refuse_unseen_held_outside(tracker)
    return final


def _traced_if(pred, if_body, else_body, get_state, set_state, names, nouts, origin, branch_names, initial,
               tracker: WriteTracker, frame):
    carried_writes: list = []  # attributes called methods change, carried as extra outputs
    contents = _StateContents(initial, names)
    lists = _ListIdentity(initial[:nouts], contents)

    cells = _Cells((if_body, else_body))

    def branch(body):
        def run():
            if set_state is not None:
                set_state(initial)
            with tracker, numbers_checked(origin), cells.unchanged():  # the numbers rule: what Python would raise computing on them
                contents.watch(tracker)
                if body is not None:
                    try:
                        body()
                    except Exception:
                        # this side raises when the data takes it: the other, run before it,
                        # may have changed what the build does not carry yet
                        sides_failed[0] += 1
                        if sides_run[0] and not set(found) <= set(carried_writes):
                            raise _CarryMore() from None
                        raise
            raw = side_states[body] = get_state() if get_state is not None else ()
            # a list or dict a value holds twice (`return d, d`) stays one object after the cond,
            # and one of the caller's that both sides hold (`return y, obj.cache`) stays the caller's
            state = tuple(static_outputs.encode(v, callers, aliases_only=True) if i < nouts else v
                          for i, v in enumerate(raw))
            side = _Side(state, nouts, tracker, contents, lists, origin, raw[:nouts])
            found.update(side.changes)
            sides_run[0] += 1
            if sides_run[0] + sides_failed[0] >= 2 and not set(found) <= set(carried_writes):
                # Both sides seen: the cond must carry more. Leaving its trace now emits no
                # cond (one built to the end would stay in the program with any print or check
                # its sides made, since jit keeps effects).
                raise _CarryMore()
            outs = side.outs + tuple(side.changes.get(k, side.versions.latest_of_original(tracker, k))
                                     for k in carried_writes)
            key_orders[body] = tuple(key_order.orders_of(v) for v in outs)
            return outs

        return run

    key_orders: dict = {}  # branch -> the key orders of the dicts in each output of its last trace
    side_states: dict = {}  # branch -> its state variables' values, for what they share (`_with_aliases`)
    callers = _CallersContainers(tracker.roots, initial[:nouts], names[:nouts], frame)

    try:
        for _ in range(_MAX_WRITE_ROUNDS):
            found: dict = {}
            sides_run, sides_failed = [0], [0]
            labels = tuple(names[:nouts]) + tuple(tracker.label(k) for k in carried_writes)
            attempt = events.Attempt()
            try:
                outputs = stage_cond(pred, branch(if_body), branch(else_body), labels, origin,
                                     branch_names=tuple(branch_names))
                break
            except _CarryMore:
                pass
            attempt.discard()
            # A called method changed attributes this build did not carry: build it again
            # carrying them.
            carried_writes += [k for k in found if k not in carried_writes]
        else:
            raise BranchOutputError(
                "the methods called in the branches change different attributes each time they are traced.",
                origin,
                advice="make what each method assigns depend only on the types of its inputs.",
            )
        if cells.changed:
            raise _python_effect_error(
                f"a function called there changes {', '.join(repr(n) for n in cells.changed)} through its `nonlocal`",
                origin)
        _refuse_sharing_by_data([state[:nouts] for state in side_states.values()], names, tracker.roots, origin, frame)
        writes.refuse_changes_outside(tracker, carried_writes, origin)
    except BaseException:
        # Tracing a side wrote its tracers into the state (attributes, items, nonlocals): put
        # back what was there, so no object the caller holds keeps a tracer after the error.
        tracker.restore()
        contents.put_back()
        if set_state is not None:
            set_state(initial)
        raise
    finally:
        callers.release()  # (the objects it found stay in `callers.objects`)
    outputs = _in_key_order(outputs, key_orders, labels, origin)
    outputs = [v.decode(callers.objects) if type(v) is static_outputs.Identities else v for v in outputs]
    for key, value in zip(carried_writes, outputs[nouts:]):
        tracker.write(key, value)
    final = _with_aliases(lists.kept(outputs[:nouts], names, origin) + tuple(initial[nouts:]), side_states, nouts)
    if set_state is not None:
        set_state(final)
    if events.active():
        events.note(origin, "cond", "lax.cond", _carries(labels, outputs))
    return final


class _Cells:
    """The cells of the function around a staged `if` that its sides can reach but do not carry
    (a nested function's `nonlocal` write: `def h(): nonlocal k; k += 1`, called in a side that
    is code after a staged `raise`, where the analysis saw no `if` around the call). Each side
    runs with them as they were, and puts them back after; a change is noted (`changed`), and
    refused after the `if` (it would happen whatever the data says, and once per trace)."""

    def __init__(self, functions):
        functions = [fn for fn in functions if fn is not None]
        # (the `if`'s state: a side assigns it itself)
        own = frozenset().union(*(_stored_cells(fn.__code__) for fn in functions))
        found = {}
        for fn in functions:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
                if name not in own:
                    found.setdefault(id(cell), (name, cell))
        self._cells = list(found.values())
        self.changed: list = []

    @contextlib.contextmanager
    def unchanged(self):
        before = [_contents(cell) for _, cell in self._cells]
        try:
            yield
        finally:
            for (name, cell), value in zip(self._cells, before):
                if _contents(cell) is not value:
                    if name not in self.changed:
                        self.changed.append(name)
                    if value is _EMPTY:
                        del cell.cell_contents
                    else:
                        cell.cell_contents = value


@functools.lru_cache(maxsize=1024)
def _stored_cells(code) -> frozenset:
    return frozenset(i.argval for i in dis.get_instructions(code) if i.opname in ("STORE_DEREF", "DELETE_DEREF"))


_EMPTY = object()  # an empty cell's contents


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


def _alias_pattern(values) -> tuple:
    """Per variable, the index of an earlier one holding the same list, dict or set, else -1
    (`q = ...; ema = q`): the cond gives each variable a new object of its own."""
    first: dict = {}
    pattern = []
    for i, value in enumerate(values):
        j = first.setdefault(id(value), i) if isinstance(value, (list, dict, set)) else i
        pattern.append(j if j != i else -1)
    return tuple(pattern)


def _refuse_sharing_by_data(sides: list, names, roots, origin: OriginInfo, frame=None) -> None:
    """What both sides' output variables share must not depend on the data (the cond gives each
    variable a new object): two variables holding one object after one side and two after the
    other (`ema = q` on one side), or a variable holding, after one side only, a list or dict
    from before the `if` that other code reaches too (`else: ema = q`, `buf = self.buf`)."""
    if len(sides) < 2:
        return
    first, second = sides[:2]
    a, b = _alias_pattern(first), _alias_pattern(second)
    if a != b:
        k = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        other = names[max(a[k], b[k])]
        raise BranchOutputError(
            f"'{names[k]}' is the same list or dict as '{other}' after one branch and another object after the "
            "other: whether changing one changes the other would be decided by the data, and a program gives "
            "back one layout.",
            origin,
            advice=f"make both branches agree: copy it where it is shared "
            f"(`{rebinding_hint(names[k], 'dict(' + _literal(other) + ')')}` or `list(...)`), or share it in both.",
        )
    others = None  # the roots but the `if`'s own variables (what they share is checked above)
    for k, (x, y) in enumerate(zip(first, second)):
        # (a return value not set yet on one side is never read there: `for ...: if c: return lst`)
        for value in (x, y) if x is not y and not isinstance(x, UndefinedReturn) and not isinstance(y, UndefinedReturn) else ():
            if type(value) not in (list, dict):
                continue
            # (walked only here: rare) with the function's other locals: `alias = d` before the
            # `if` is no root of the branch functions when they do not name `alias`
            others = others or roots.with_locals(frame).without(set(names[:len(first)]))
            path = others.path_to(value)
            if path is not None:
                raise BranchOutputError(
                    f"'{names[k]}' is the {type(value).__name__} {path} (from before the `if`) after one branch and "
                    "another object after the other: whether changing it changes "
                    f"{path} is decided by the data, and a program gives back one object.",
                    origin,
                    advice=f"copy it on the side that keeps it "
                    f"(`{rebinding_hint(names[k], type(value).__name__ + '(' + _literal(path) + ')')}`), "
                    f"so that both sides make a new one; or make both sides hold {path}.",
                )


def _literal(text: str) -> str:
    """`text` as literal text inside a `rebinding_hint` template."""
    return text.replace("{", "{{").replace("}", "}}")


def _with_aliases(values: tuple, side_states: dict, nouts: int) -> tuple:
    """`values` (of the state variables after the `if`; the first `nouts` its outputs) with
    each output variable that both sides made the same object as an earlier one (`ema = q`)
    holding that one object again, and each list or dict an output's value holds inside it that
    both sides made a state variable's own (`r = (x, log)`) that variable's object again (the
    cond gives each a new one: `r[1]` would be a copy, without what the side appended to `log`)."""
    sides = list(side_states.values())
    pattern = _alias_pattern(sides[0][:nouts] if sides else ())
    values = list(values)
    for k, j in enumerate(pattern):
        if j >= 0:
            values[k] = values[j]
    # (j past the outputs: a variable dead after the `if`, whose in-place change no one carried)
    nested = [[found for found in _nested_aliases(side) if found[0] < nouts and found[2] < nouts] for side in sides]
    for k, path, j in (nested[0] if nested and all(n == nested[0] for n in nested) else ()):
        values[k] = _replaced_at(values[k], path, values[j])
    return tuple(values)


def _nested_aliases(side: tuple) -> list:
    """`(variable k, path inside its value, variable j)` for each list or dict that variable
    k's value holds inside a tuple, list or dict and that is variable j's own value."""
    tops = {id(v): j for j, v in enumerate(side) if type(v) in (list, dict)}
    found = []
    for k, value in enumerate(side):
        stack = [(value, ())]
        while stack:
            item, path = stack.pop()
            if path and id(item) in tops:
                found.append((k, path, tops[id(item)]))
                continue
            if isinstance(item, (tuple, list)) and len(path) < 4:
                stack.extend((v, (*path, i)) for i, v in enumerate(item))
            elif type(item) is dict and len(path) < 4:
                stack.extend((v, (*path, key)) for key, v in item.items())
    return found


def _replaced_at(value, path: tuple, new):
    """`value` with the item at `path` (through tuples, lists, dicts) being `new`; tuples rebuilt."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, tuple):
        items = list(value)
        items[head] = _replaced_at(items[head], rest, new)
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    value[head] = _replaced_at(value[head], rest, new)
    return value


def _in_key_order(outputs, key_orders: dict, labels, origin: OriginInfo) -> list:
    """The merged outputs with their dicts' keys in the order both branches give them (the cond
    gives them sorted); a dict whose order depends on the branch taken is refused."""
    orders = list(key_orders.values())  # one side's only, where the other raises when run
    if_orders, else_orders = orders[0], orders[-1]
    for label, if_order, else_order in zip(labels, if_orders, else_orders):
        if if_order != else_order:
            sorted_on_one_side = (if_order is None) != (else_order is None)
            raise BranchOutputError(
                f"'{label}' holds a dict whose keys are in one order after the if branch and in another "
                "after the else branch: eagerly its order (what `list(d)` or a loop over `d.items()` "
                "sees) depends on the branch taken." + (
                    " One side gives its keys sorted, as `jax.tree_util.tree_map` and the updates of optax "
                    "(`optax.apply_updates`) and flax (`state.apply_gradients`) rebuild dicts." if sorted_on_one_side
                    else ""),
                origin,
                advice=("give the other side the sorted order too (`params = jax.tree_util.tree_map(lambda v: v, "
                        "params)` there), or build the dict with its keys sorted to begin with; or add the keys "
                        "in the same order in both branches." if sorted_on_one_side else
                        "add the keys in the same order in both branches (or set them all before the `if`)."),
            )
    return [key_order.restore(value, order) for value, order in zip(outputs, if_orders)]


def _carries(labels, values) -> str:
    return f"carries {events.describe_values(labels, values)}" if labels else "carries nothing (effects only)"


class _Side:
    """What one traced side of a staged `if` gives: `outs`, its live variables' values, and
    `changes`, the attributes and containers it changed that the cond carries. Lists and dicts
    are given as their items: the side's changes in place are put back here (by `take()` and
    `contents`), and the versions of one list references hold are unified (`_ListVersions`)."""

    def __init__(self, state, nouts: int, tracker: WriteTracker, contents: "_StateContents", lists: "_ListIdentity",
                 origin: OriginInfo, raw: tuple = ()):
        """raw: the output variables' values as the side left them, before their encoding (a
        list holding one of the caller's is encoded whole: which list the variable holds is
        seen on the list itself)."""
        # Lists and dicts inside other values (the return value's tuple holding `d`) as the
        # side leaves them, before the changes made in place are put back.
        outs = tuple(v if type(v) in (list, dict) else _with_container_copies(v) for v in state[:nouts])
        items = {id(v): type(v)(v) for v in state if type(v) in (list, dict)}  # before they are put back
        lists.see(raw or outs, tracker)
        changes = tracker.take()
        contents.put_back()
        self.versions = versions = _ListVersions(_side_lists(state, items, changes, tracker), origin)  # dead ones too
        self.outs = tuple(versions.latest(items[id(v)], grown_from(v)) if type(v) is list else items.get(id(v), v)
                          for v in outs)
        # A live variable still holding its list or dict carries its items itself (`lists`).
        held = {id(v) for v, before in zip(outs, lists.initial) if v is before and type(v) in (list, dict)}
        containers = tracker.side_containers()
        self.changes = {k: versions.latest(v, _root(tracker, k, v)) for k, v in changes.items()
                        if _carried(tracker, containers, k) and not (k.attr == ITSELF and k.object_id in held)}
        live = {id(v) for v in lists.initial if type(v) in (list, dict)}  # the live variables' from before
        for key, container in containers.items():
            if id(container) in live or not _carried(tracker, containers, key):
                continue  # a live variable's list reaches the one from before through `lists`
            if versions.latest(container) is not container:
                self.changes[key] = list(versions.latest(container))  # grown through another reference


def _with_container_copies(value):
    """`value` with the lists and dicts it holds (in tuples, lists and dicts) copied, to the
    leaves; other objects as they are."""
    if type(value) in (list, tuple):
        return type(value)(_with_container_copies(v) for v in value)
    if type(value) is dict:
        return {k: _with_container_copies(v) for k, v in value.items()}
    return value


class _StateContents:
    """The items of the lists and dicts the `if`'s variables hold before it. A side may change
    them in place (code run as it is: `log += [x]`, `d |= {...}`); each side starts from these
    items, and they are put back after it. Such a change is an effect whoever reads the list
    after the `if` (`other = log`, while `log` itself is dead there): the side's `WriteTracker`
    watches each one, so its items are carried out of the cond and written back in place."""

    def __init__(self, state, names):
        self.saved = {id(v): (v, type(v)(v)) for v in state if type(v) in (list, dict)}
        self.labels = {id(v): name for v, name in zip(state, names) if type(v) in (list, dict)}

    def watch(self, tracker: WriteTracker) -> None:
        for container, _ in self.saved.values():
            tracker.see_container(container, "", label=self.labels[id(container)])
            if type(container) is list:
                watch_here(container)  # appends may change it in place in this side (`lists.list_append`)

    def before(self, container):
        return self.saved[id(container)][1]

    def put_back(self) -> None:
        restore_items(self.saved.values())


class _CallersContainers:
    """The caller's lists and dicts (`writes.note_inputs`), and the lists, dicts, NNX modules
    and Variables from before the `if` that other code reaches (`roots`; not the `if`'s own
    variables' lists, which `_ListIdentity` keeps), that the sides' values hold, as the state nodes of their
    encoding (`static_outputs.encode`): the same one held by both sides at the same place is
    that object after the cond, as eagerly, not a new one built from its leaves (what a side
    changed in it is carried and written back as any attribute's); two different ones, the data
    deciding which, are refused by the merge. (Other pytrees, an `eqx.nn.State` or a dataclass
    updated functionally on one side, are values: merged leaf by leaf.)"""

    def __init__(self, roots: reachable.Roots, own: tuple = (), own_names=None, frame=None):
        self.objects: list = []
        self._index: dict = {}
        # What the `if`'s own variables alone reach is no one else's: after the `if` they hold
        # whatever the taken side left (`g = tree_map(clip, g)` on one side: `g`'s inner dicts).
        # The function's other locals may reach it too (`g = cache` before the `if`). (A walk of
        # its own, released with it: the tracker's roots outlive it. None: `roots` are its own.)
        self._roots = roots.with_locals(frame).without(set(own_names)) if own_names is not None else roots
        # the lists and dicts the `if`'s variables hold before it: `_ListIdentity` keeps those
        self._own = {id(v) for v in own if type(v) in (list, dict)}

    def __contains__(self, key: int) -> bool:
        return key in self._index or self._held(key) is not None

    def __getitem__(self, key: int) -> int:
        if key not in self._index:
            self._index[key] = len(self.objects)
            self.objects.append(self._held(key))
        return self._index[key]

    def release(self) -> None:
        """Drop the walk (see `reachable.Roots.release`)."""
        self._roots.release()

    def _held(self, key: int):
        found = writes.input_by_id(key)
        if found is None and key not in self._own:
            obj = self._roots.object_by_id(key)
            found = obj if obj is not None and is_nnx_object(obj) else self._roots.container_by_id(key)
        return found


class _ListIdentity:
    """How each branch left the carried lists and dicts: `same` (the one from before, as it
    was), `changed` (the one from before, changed in place by code run as it is), `grown` (a
    list appended to in place: `xs.append(v)` gives a new list while tracing, see
    `lists.list_append`) or `replaced` (another one). Where no branch replaced it, the list or
    dict eager code holds after the `if` is the one from before: other references to it (a
    context manager's, the caller's) must see the items, so the merged items are written back
    into it."""

    def __init__(self, initial, contents: _StateContents):
        self.initial = initial
        self.contents = contents
        self.seen = [set() for _ in initial]
        # A variable that held no list before and that every side run binds to one list or
        # dict from before the `if` (`t = d["k"]`, then `t.append(x)`; `retval = log` where the
        # other side raises when the data takes it): index -> that list, or None once a side
        # binds it to anything else.
        self.bound_to_tracked: dict = {}

    def see(self, outs, tracker: WriteTracker) -> None:
        for i, (before, after) in enumerate(zip(self.initial, outs)):
            if type(before) not in (list, dict):
                self._see_bound(i, after, tracker)
                continue
            if after is before:
                self.seen[i].add("changed" if changed_contents(after, self.contents.before(before)) else "same")
            else:
                self.seen[i].add("grown" if type(before) is list and grown_from(after) is before else "replaced")

    def _see_bound(self, i: int, after, tracker: WriteTracker) -> None:
        if isinstance(after, UndefinedReturn):  # (a return value not set on this side: never read there)
            return
        tracked = None
        if type(after) in (list, dict):  # one the side changed (recorded), or any the code reached before it
            original = tracker.originals.get(AttributeKey(id(after), ITSELF))
            if (original is not None and original.obj is after) or tracker.existed_before(after):
                tracked = after
        if i not in self.bound_to_tracked:
            self.bound_to_tracked[i] = tracked
        elif self.bound_to_tracked[i] is not tracked:
            self.bound_to_tracked[i] = None

    def kept(self, outputs, names, origin: OriginInfo) -> tuple:
        final = list(outputs)
        for i, held in self.bound_to_tracked.items():
            if held is not None and final[i] is not held and type(final[i]) is type(held):
                refill(held, final[i])  # eagerly the variable is that list: later appends reach it
                final[i] = held
        for i, (before, seen) in enumerate(zip(self.initial, self.seen)):
            if not seen or type(final[i]) is not type(before):
                continue
            if "replaced" not in seen:
                refill(before, final[i])
                final[i] = before
            elif seen & {"grown", "changed"}:
                kind, name = type(before).__name__, names[i]
                new = rebinding_hint(name, "{} + [v]" if kind == "list" else "{{**{}, 'k': v}}")
                raise BranchOutputError(
                    f"'{name}' is {'appended to or ' if kind == 'list' else ''}changed in place in one branch and "
                    f"replaced by another {kind} in the other: other references to the {kind} would see the "
                    "change on one side only.",
                    origin,
                    advice=f"change it in place in both branches, or build a new {kind} in both (`{new}`).",
                )
        return tuple(final)


class _ListVersions:
    """The lists one traced side leaves, by the list eager code would hold.

    While a side is traced an in-place append gives a new list (see `lists.list_append`), and
    code called as it is (a method's `self.log.append(v)`) changes a list in place, so two
    references to one list (a variable and a `Logger`'s or `Ctx`'s attribute) can each hold
    their own items. Eagerly they are one list holding every item. Where the versions form one
    chain (each a prefix of the longest) the longest is what eager holds, and every reference
    gets it; versions that grew apart (`a = log`, then `a.append(1)` and `log.append(2)`, or an
    append through a variable and one through a method) are refused: the order of their items
    is lost.
    """

    def __init__(self, versions, origin: OriginInfo):
        """versions: `(items, root, changed_in_place)`, `root` the list from before the side;
        `changed_in_place`: the items the root itself holds after the side changed it in place
        (`L.pop(0)`, `L.sort()` as well as appends), not a copy grown from it."""
        self._longest: dict = {}  # id of the list from before -> its longest version
        for items, root, changed_in_place in versions:
            if changed_in_place and id(root) not in self._longest:
                self._longest[id(root)] = items
                continue
            known = self._longest.get(id(root), root)
            if _extends(items, known):
                self._longest[id(root)] = items
            elif not _extends(known, items):
                raise _about_the_if(PythonEffectError(
                    "two references to one list are appended to separately in a branch of this staged if "
                    "(eagerly both see every item, in the order appended; traced, each holds its own copy).",
                    origin,
                    advice="append through one reference in the branch (a variable, or the object holding "
                    "the list), or build the list before the `if` and pick among whole lists in it.",
                ))

    def latest(self, value, root=None):
        """What eager holds where a reference holds `value` (a version of `root`)."""
        if type(value) is not list:
            return value
        return self._longest.get(id(grown_from(value) if root is None else root), value)

    def latest_of_original(self, tracker: WriteTracker, key):
        """An attribute a side did not change: its value from before, or the longest version of
        the list it holds, grown through another reference."""
        original = tracker.originals[key]
        if type(original.value) is list and id(original.value) in self._longest:
            return list(self._longest[id(original.value)])
        return tracker.original_value(key)


def _about_the_if(error: Exception) -> Exception:
    """`error`, raised by dy2st about the `if` itself while a side is traced: not noted as the
    side's own error (see `staging._note_branch_error`)."""
    error._dy2st_noted = True
    return error


def _side_lists(state, items: dict, changes: dict, tracker: WriteTracker) -> list:
    """`(items, root, changed_in_place)` (see `_ListVersions`) of every list a side leaves: its
    variables' (`items`: their contents before `take()` put back what called code changed in
    place), the copies its appends made, and the attributes and containers it changed."""
    # (a variable holding the list from before itself holds what the side did to it in place:
    # `hist[0] = v` replaced an item, which no other reference's version need extend)
    versions = [(items[id(v)], grown_from(v), grown_from(v) is v) for v in state if type(v) is list]
    versions += [(list(copy), root, False) for copy, root in grown_in_this_side()]  # held by no variable, too
    for key, value in changes.items():
        if type(value) is list:
            root = _root(tracker, key, value)
            # A list recorded itself (`L.pop(0)` through `writes.in_place`, a list given to a
            # call) holds these items now, whatever the change; others must only have grown.
            versions.insert(0, (value, root, key.attr == ITSELF and root is tracker.originals[key].obj))
    return versions


def _root(tracker: WriteTracker, key, value):
    """The list from before the side that a changed attribute's `value` is a version of: the
    list a grown copy was grown from, or the list it held that code changed in place (`take`
    gives its items as a new list)."""
    if grown_from(value) is not value:
        return grown_from(value)
    before = tracker.originals[key].value
    return grown_from(before) if type(before) is list else value


def _carried(tracker: WriteTracker, containers: dict, key) -> bool:
    """Whether a change a side made is carried out of the `if`: not one to an object made in
    the side (a new one each trace) nor to a list grown in it (a copy; its items reach eager's
    list through the references `_ListVersions` gives them to)."""
    if tracker.is_born(key):
        return False
    container = containers.get(key)
    if container is None:
        return True
    # A copy made in the side, or a list or dict the side made (`tmp = []; helper(tmp)`): no
    # one outside the side sees it. (A copy made before the `if` is carried.)
    return not grown_here(container) and tracker.existed_before(container)


def _extends(longer: list, shorter: list) -> bool:
    return len(longer) >= len(shorter) and all(a is b for a, b in zip(longer, shorter))


# Each round can only add attributes, and the second sees every one either side writes.
_MAX_WRITE_ROUNDS = 3


def convert_ifexp(pred, true_fn, false_fn, python_reason=None, assigned_to: str | None = None):
    """`true_fn() if pred else false_fn()`, staged with `lax.cond` when `pred` is traced;
    `assigned_to`: the name the value is assigned to (`y = [v] if c else y`)."""
    if not is_traced(pred):
        return true_fn() if pred else false_fn()
    if python_reason is not None:
        raise _python_effect_error(python_reason, OriginInfo.of_caller())
    origin = OriginInfo.of_caller()
    # a list or dict from before it that both sides give (`log if c else log`) is that object after
    # it, as eagerly; one on one side only is refused by the merge, as for an `if` statement, unless
    # only the name assigned to reaches it (its old list, which the assignment drops)
    roots = reachable.snapshot((true_fn, false_fn))
    if assigned_to is None:
        callers = _CallersContainers(roots, ())
    else:
        callers = _CallersContainers(roots, (), (assigned_to,), sys._getframe(1))
    value = stage_value(pred, _encoded(true_fn, callers), _encoded(false_fn, callers), "the conditional expression",
                        "conditional expression", origin, EXPRESSION_SIDES)
    value = value.decode(callers.objects) if type(value) is static_outputs.Identities else value
    callers.release()
    if events.active():
        events.note(origin, "cond", "lax.cond (conditional expression)", _carries(("value",), (value,)))
    return value


def _encoded(side, callers: "_CallersContainers"):
    """`side`, its value's objects from before the expression encoded as such (`callers`)."""
    return lambda: static_outputs.encode(side(), callers, aliases_only=True)


def _python_effect_error(reason: str, origin: OriginInfo) -> PythonEffectError:
    return PythonEffectError(
        f"this condition is traced, so both branches are traced, but {reason}: that change would "
        "happen whichever branch the data picks.",
        origin,
        advice="build a new value in the branch instead (`xs = xs + [v]`, `d = {**d, 'k': v}`; a helper's result "
        "assigned there, `acc = add(acc, v)`, rather than its `nonlocal` write) and use it after the `if`, or make "
        "the condition a Python value.",
    )
