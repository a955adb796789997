"""Attributes that called methods change inside a staged branch or loop body.

`if x.sum() > 0: x = self.bump(x)` where `bump` does `self.total = self.total + x.sum()`:
the `if` statement itself writes nothing the transformer can see, but eagerly `self.total`
changes when the branch runs. While a side is traced, `convert_call` tells the active
`WriteTracker`s about every object whose method (or `__call__`) is called; the tracker
records that object's attributes the first time it sees it (before the call runs). After
the side is traced, `take()` gives the attributes that changed and puts the objects back as
they were, so the other side (and the caller, if anything fails) never sees the traced
values. The staged `if` then carries those attributes as extra outputs of its `lax.cond` and
writes the merged values back (see `dy2st.runtime.control_flow`); a staged loop refuses them
with a clear error.

A list or dict attribute changed in place (`self.cache.append(x)`) counts as changed; its
contents are carried and written back in place. So do the lists, dicts and objects given as
arguments to a user's function or class called there (`helper(log)`, `Ctx(log, 1)` whose
`__enter__` appends to `log`): the tracker records them the same way (a list or dict as the
attribute `ITSELF` of itself).
"""

from __future__ import annotations

import collections
import contextlib
import sys
import threading
import types
from typing import NamedTuple

import jax

from dy2st.errors import REFUSAL_LISTENERS, ConversionError, LoopVariableError, OriginInfo, PythonEffectError
from dy2st.runtime import reachable
from dy2st.runtime.values import PythonNumbers, is_nnx_object, is_traced, iterator_position, traced_inside
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.undefined import Undefined
from dy2st.user_code import is_users_object

_MISSING = object()
ITSELF = ""  # the "attribute" of a tracked list or dict that stands for its own contents


class AttributeKey(NamedTuple):
    """One attribute of one object (held by id: objects need not be hashable)."""

    object_id: int
    attr: str


class _Original(NamedTuple):
    obj: object
    value: object  # the attribute's value, or _MISSING
    contents: object  # a copy of a list's/dict's contents, or None


def _contents(value):
    if type(value) is list:
        return list(value)
    if type(value) is dict:
        return dict(value)
    return None


def _changed(original: _Original, current) -> bool:
    if current is not original.value:
        return True
    return original.contents is not None and changed_contents(current, original.contents)


def restore_items(saved) -> None:
    """Put back, in place, the items of each `(list or dict, copy of its items)` of `saved`
    that changed."""
    for container, items in saved:
        if changed_contents(container, items):
            refill(container, items)


def changed_contents(container, items) -> bool:
    """Whether a list or dict no longer holds `items` (a copy of what it held), item by item."""
    if len(container) != len(items):
        return True
    if isinstance(container, dict):
        return container.keys() != items.keys() or any(container[k] is not items[k] for k in items)
    return any(a is not b for a, b in zip(container, items))


def _put_back(original: _Original, attr: str) -> None:
    obj = original.obj
    if attr == ITSELF:
        refill(obj, original.contents)
        return
    if original.value is _MISSING:
        if attr in vars(obj):
            delattr(obj, attr)
        return
    if original.contents is not None:  # a list/dict changed in place: its contents go back
        refill(original.value, original.contents)
    setattr(obj, attr, original.value)


def refill(container, contents) -> None:
    """Put `contents` (a list's items; a dict's, as a dict or `(key, value)` pairs) into
    `container` in place, item by item with the type's own builtin methods: `update` of a
    subclass may mean something else (a Counter's adds counts), and a user's override
    (`__setitem__` that logs) ran as the function made the change, not again here. The items
    are taken before `container` is cleared: `contents` may be `container` itself, or hold it."""
    if contents is container:
        return
    items = list(contents.items() if isinstance(container, dict) and isinstance(contents, dict) else contents)
    _builtin_method(container, "clear")(container)
    if isinstance(container, dict):
        set_item = _builtin_method(container, "__setitem__")
        for key, value in items:
            set_item(container, key, value)
    else:
        _builtin_method(container, "extend")(container, items)


def _builtin_method(container, name: str):
    """`name` of the nearest class in `container`'s type that does not define it in Python (an
    OrderedDict's own, dict's for a Counter or a user's subclass)."""
    for klass in type(container).__mro__:
        method = klass.__dict__.get(name)
        if method is not None and not isinstance(method, types.FunctionType):
            return method
    raise TypeError(f"{type(container).__name__} has no builtin {name}")


def _current(obj, attr: str):
    """An attribute's value now (a tracked container: the container itself)."""
    return obj if attr == ITSELF else vars(obj).get(attr, _MISSING)


class WriteTracker:
    """Records objects whose methods run while one staged side is traced; see the module docstring."""

    def __init__(self, roots: "reachable.Roots", owned: frozenset = frozenset(), items: dict | None = None,
                 origin: OriginInfo | None = None):
        self.roots = roots  # what the side could read when it began: lists it did not make
        self.origin = origin  # the statement's or expression's line, for refusals
        self.owned = owned  # AttributeKeys the statement carries as its own variables (`self.h`)
        # the items the statement carries (`xs[-1]`: `StateAccess.items`), and their values when
        # a side begins: a container recorded later in the side holds the side's value there
        self._items = items or {}
        self._items_at_start: dict = {}
        # id of a list no root reaches, appended to in place in a side (one the side made, as
        # far as anything tells) -> `_Unseen` (see `append_unseen`)
        self.unseen: dict = {}
        self.appended: dict = {}  # id of a list from before, appended to in a side -> how the code reaches it
        self.originals: dict = {}  # AttributeKey -> _Original, kept across sides
        self._seen: dict = {}  # id -> object, of this side
        self._containers: dict = {}  # id -> list or dict given to a call, of this side
        self._objects: dict = {}  # id -> object, of every side
        self._given_to: dict = {}  # id of a tracked list/dict -> the name of the call it was given to
        self._born: dict = {}  # id -> object made by a user's class called in this side
        # id of a list or dict -> (it, its items when first recorded): one list reached both as
        # an attribute and as a container (`log = logger.log; log.append(x)`, then
        # `logger.note(...)`) has one set of items from before, whichever is recorded second
        self._first_items: dict = {}

    def __enter__(self):
        self._seen = {}
        self._containers = {}
        self._born = {}
        # dicts whose reads add missing keys (a defaultdict), and their keys as the side begins
        self._keys = [(d, set(dict.keys(d)), path) for d, path in self.roots.dicts_adding_missing_keys()]
        for obj in self.roots.users_objects():  # what code run as it is may change unannounced
            self.see(obj)
        for (container_id, key), container in self._items.items():
            try:
                self._items_at_start[(container_id, key)] = container[key]
            except (IndexError, KeyError):
                pass
        # Last: where recording raised, `with` runs no `__exit__`, and a tracker left on the
        # stack would record every later side of this thread.
        CONTEXT.trackers.append(self)
        return self

    def __exit__(self, exc_type, *exc):
        CONTEXT.trackers.pop()
        if exc_type is not None:  # the side failed half way: no object keeps what it wrote
            self.restore()
        return False

    def see(self, obj) -> None:
        if id(obj) in self._seen:
            return
        self._seen[id(obj)] = obj
        self._objects[id(obj)] = obj
        for attr, value in list(vars(obj).items()):
            if attr.startswith("__"):
                continue
            key = AttributeKey(id(obj), attr)
            if key not in self.originals:
                self.originals[key] = _Original(obj, value, self._items_before(value))

    def see_container(self, container, callee: str, label: str | None = None) -> None:
        """A list or dict given to a user's call (or held by a variable of the staged `if`,
        named by `label`): its contents as they were before the call."""
        label = label or f"the {type(container).__name__} given to {callee}() (which changes it)"
        self._given_to.setdefault(id(container), label)
        if id(container) in self._containers:
            return
        self._containers[id(container)] = container
        self._objects[id(container)] = container
        key = AttributeKey(id(container), ITSELF)
        if key not in self.originals:
            self.originals[key] = _Original(container, container, self._items_before(container))

    def _items_before(self, value):
        """A copy of a list's or dict's items as they were before the side changed them (None
        for other values)."""
        items = _contents(value)
        if items is None:
            return None
        for (container_id, key), before in self._items_at_start.items():
            if container_id == id(value):
                try:
                    items[key] = before  # (set by this side through the statement's own item)
                except IndexError:
                    pass
        entry = self._first_items.setdefault(id(value), (value, items))
        return entry[1] if entry[0] is value else items

    def existed_before(self, container) -> bool:
        """Whether a list or dict given to a call in this side existed before the side began
        (the code could reach it then), rather than being made in it (`tmp = []`)."""
        return self.roots.path_to(container) is not None

    def see_born(self, obj) -> None:
        """An object a user's class made while this side is traced (a `Ctx(log, 1)` of a `with`)."""
        self._born[id(obj)] = obj

    def is_born(self, key: AttributeKey) -> bool:
        """Whether `key` is an attribute of an object made in this side: each trace makes a new
        one, nothing outside the side held it before, so it is not carried (a staged `if` reads
        the lists it holds, see `control_flow._ListVersions`)."""
        return key.object_id in self._born

    def side_containers(self) -> dict:
        """`AttributeKey -> list or dict` of the containers given to calls in this side."""
        return {AttributeKey(i, ITSELF): c for i, c in self._containers.items()}

    def take(self) -> dict:
        """The attributes this side changed (AttributeKey -> new value, lists as their contents),
        with every seen object put back as it was before the side."""
        self._refuse_added_keys()
        changes = {}
        for obj_id, obj in self._seen.items():
            current = vars(obj)
            for attr in set(current) | {k.attr for k in self.originals if k.object_id == obj_id}:
                if attr.startswith("__"):
                    continue
                key = AttributeKey(obj_id, attr)
                if key in self.owned:
                    continue
                original = self.originals.get(key)
                if original is None:  # an attribute the side added
                    original = self.originals[key] = _Original(obj, _MISSING, None)
                value = current.get(attr, _MISSING)
                if value is _MISSING and original.value is _MISSING:
                    continue
                if original.value is _MISSING or value is _MISSING or self._changed_beside_items(original, value):
                    changes[key] = Undefined(self.label(key)) if value is _MISSING else (
                        _contents(value) if _contents(value) is not None and value is original.value else value)
        for container_id, container in self._containers.items():
            key = AttributeKey(container_id, ITSELF)
            if self._changed_beside_items(self.originals[key], container):
                changes[key] = _contents(container)
        self.restore()
        return changes

    def _changed_beside_items(self, original: _Original, current) -> bool:
        """`_changed`, but for the items the statement carries itself (`x.b[0] = v` in a
        branch or loop body that carries `x.b[0]`): those are its own variables, not a change
        made inside the list for the tracker to carry or refuse."""
        if not _changed(original, current):
            return False
        if current is not original.value or not self._items:
            return True
        carried = {key for (container_id, key) in self._items if container_id == id(current)}
        if not carried:
            return True
        before = _contents(current)
        for key in carried:
            try:
                before[key] = original.contents[key]
            except (IndexError, KeyError):
                return True  # the item was added or removed: the container itself changed
        return changed_contents(before, original.contents)

    def _refuse_added_keys(self) -> None:
        """A key a read added to a defaultdict (`dd[k].append(x)`, `n = dd[k]`) in this side,
        which is traced whatever the data says: eager adds it only where the data takes the
        side. (One the statement carries as a variable or item of its own, `dd[k] += 1`, is its.)"""
        for d, keys, path in self._keys:
            added = [k for k in dict.keys(d) if k not in keys and (id(d), k) not in self._items
                     and not self.roots.is_state(f"{path}[{k!r}]")]
            if not added:
                continue
            for key in added:
                dict.pop(d, key)
            raise PythonEffectError(
                f"reading {path}[{added[0]!r}] in a staged side adds the key ({type(d).__name__} fills in a "
                "missing key when it is read): the condition is traced, so every side is traced and "
                "would add it, where eager Python adds it only on the side the data takes.",
                self.origin,
                advice=f"add the key before the condition (`{path}.setdefault({added[0]!r}, ...)`), or read "
                "it with `.get()`, which adds nothing.")

    def restore(self) -> None:
        """Put every object seen on any side back as it was before the first side (touching
        only changed attributes: some objects, such as NNX modules, refuse writes here)."""
        for key, original in self.originals.items():
            current = _current(original.obj, key.attr)
            if current is _MISSING and original.value is _MISSING:
                continue
            if current is _MISSING or original.value is _MISSING or _changed(original, current):
                _put_back(original, key.attr)

    def forget(self) -> None:
        """Drop every record (the `if` is done with the tracker)."""
        for records in (self.originals, self._seen, self._containers, self._objects, self._born, self._first_items):
            records.clear()
        self.unseen = {}
        self.roots.release()

    def original_value(self, key: AttributeKey):
        original = self.originals[key]
        if original.value is _MISSING:
            return Undefined(self.label(key))
        return original.contents if original.contents is not None else original.value

    def write(self, key: AttributeKey, value) -> None:
        """Set the attribute to its value after the staged statement. A list or dict changed in
        place here is a change inside any staged side around the statement too (an alias, `t =
        xs`, appended to in a nested `if`): recorded by those sides' trackers, as `in_place` does."""
        original = self.originals[key]
        if key.attr == ITSELF:
            _record_from_before(original.obj)
            refill(original.obj, value)
        elif isinstance(value, Undefined):
            _put_back(_Original(original.obj, _MISSING, None), key.attr)
        elif original.contents is not None and type(value) is type(original.value):  # contents, in place
            _put_back(_Original(original.obj, original.value, value), key.attr)
        else:
            setattr(original.obj, key.attr, value)

    def label(self, key: AttributeKey) -> str:
        obj = self._objects.get(key.object_id)
        if obj is None:  # (not `or`: that would call the user's `__bool__`)
            obj = self.originals[key].obj
        if key.attr == ITSELF:
            return self._given_to[key.object_id]
        return f"{type(obj).__name__}.{key.attr} (set by code run here: a method, a property, an operator)"


def note_receiver(obj) -> None:
    """Called by `convert_call` for a method's object: the active trackers record it."""
    for tracker in CONTEXT.trackers:
        if hasattr(obj, "__dict__") and not isinstance(obj, type):
            tracker.see(obj)


def note_born(obj) -> None:
    """Called by `convert_call` for an object a user's class made: see `WriteTracker.is_born`."""
    for tracker in CONTEXT.trackers:
        tracker.see_born(obj)


def watched_container(target) -> bool:
    """Whether the innermost side being traced records `target` as a container given to a call
    (`helper(tmp)`, where `helper` appends to its parameter): it is put back after the side,
    its change carried, so it may change in place."""
    trackers = CONTEXT.trackers
    return bool(trackers) and trackers[-1]._containers.get(id(target)) is target


class _Unseen(NamedTuple):
    """A list no root of the side reaches, appended to in place there: its items before, and
    the line of the first append."""

    container: list
    before: list
    origin: OriginInfo


def append_unseen(target: list, name: str) -> bool:
    """Whether `target` (held by the variable `name`), appended to while a staged side or loop
    body is traced and reached by no root of it (not a variable's list, nor one the side could
    reach when it began), may grow in place: it is one the side made (`t = []; d = {"a": t}`,
    then `t.append(x)`), so every reference to it must see the item, as eagerly. A list held
    somewhere no root shows (one a cache returns) is told apart after the `if`
    (`refuse_unseen_held_outside`) and, after a loop, once the program's function returned
    (`leaked`: the loop's variables hold the body's lists until then)."""
    trackers = CONTEXT.trackers
    if not trackers:
        return False
    unseen = trackers[-1].unseen
    if id(target) not in unseen:
        unseen[id(target)] = _Unseen(target, list(target), OriginInfo.of_caller(2))
        _note_for_program(target, name)
    return True


def refuse_unseen_held_outside(tracker: WriteTracker, failed: bool = False) -> None:
    """After a staged `if` (or loop body) was traced: a list its sides appended to in place that something
    outside the trace still holds (a cache's list: `t = get_cache(); t.append(x)`) existed
    before the `if`, where no root showed it: both sides appended to it and no program can write
    it back. Its items are put back and the append refused at its line (`failed`: the `if`
    failed already; the items are put back, its error stands)."""
    unseen = tracker.unseen
    tracker.forget()  # its records (objects the sides made, the items they held) are no owners
    held = [entry for entry in unseen.values() if _held_outside(entry.container)]
    restore_items((entry.container, entry.before) for entry in held)
    if held and not failed:
        raise PythonEffectError(
            "this line appends to a list that existed before the staged `if` or loop, held where "
            "dy2st cannot see it (a list a call returned, such as a cache's): tracing runs the code "
            "whichever path the data picks, and no program can write the list back.",
            held[0].origin,
            advice="bind the list to a variable before the `if` or loop (`t = get_cache()` above it), "
            "or collect the values there and append them after it.",
        )


def _held_outside(container: list) -> bool:
    """Whether anything but dy2st's own records holds `container` once the `if` was traced and
    its frames are gone (what a side made went with its function's locals)."""
    # References: the records counted here, its `_Unseen` record, the caller's loop variable,
    # getrefcount's argument.
    return sys.getrefcount(container) > 3 + _own_references(container)


def _own_references(container: list) -> int:
    """How many references to `container` the staging's and the programs' records hold."""
    count = 0
    for records in (*(source() for source in RECORD_SOURCES), *(p.changed.values() for p in CONTEXT.programs)):
        for record in records:
            count += sum(1 for item in record if item is container)
    return count


def adopt_reachable(target: list) -> bool:
    """Whether `target`, appended to while a side is traced, is a list from before that side,
    reached through another name (`t = d["k"]`, then `t.append(x)`): the trackers of the sides
    it existed before then record it as a list changed in place, carried and written back like
    one a called function appends to. Called by `lists.list_append` for lists the side's `if`
    does not put back itself."""
    recorded = _record_from_before(target)
    for tracker, path in recorded:
        tracker.appended.setdefault(id(target), path)
    return bool(recorded)


class _Program:
    """What one program being traced keeps until its trace ends (one per trace, innermost last):
    `changed`, id -> (container, items before, path) of the lists and dicts from before a staged
    side that the side changed in place (for `leaked`); `refusals` made meanwhile; `undos` to run
    if the trace raises; `scratch` for runtime operators' own per-trace memory."""

    __slots__ = ("changed", "refusals", "undos", "scratch", "inputs", "guards", "streams")

    def __init__(self, guards=None):
        self.guards = guards  # the StaticFunction's GuardSet, which what the trace reads joins (guards.py)
        # sys.stdout and sys.stderr as the call found them: a print while the function has
        # redirected one (`contextlib.redirect_stdout(buf)`) writes to that file (`builtins._stream`)
        self.streams = (sys.stdout, sys.stderr)
        self.changed: dict = {}
        self.refusals: list = []
        self.undos: list = []
        self.scratch: dict = {}
        self.inputs: dict = {}  # id -> the lists and dicts the caller gave (`note_inputs`)


def _program_now() -> _Program | None:
    stack = CONTEXT.programs
    return stack[-1] if stack else None


@contextlib.contextmanager
def program_containers(guards=None):
    """While one program is traced: yields the dict of lists and dicts from before a staged side
    that the side changed in place (`_record_from_before`), for `leaked`; if the trace raises,
    what was noted to undo (`on_abandon`) is undone once all else unwound. `guards`: where what
    the trace reads from outside its arguments is guarded (`program_guards`)."""
    stack = CONTEXT.programs
    program = _Program(guards)
    stack.append(program)
    try:
        with converted_run():
            yield program.changed
    except BaseException:
        for undo in reversed(program.undos):
            undo()
        raise
    finally:
        stack.pop()


def program_guards():
    """The GuardSet of the program being traced (None outside one, or where none is kept); of
    a converted function run inline into the user's own trace outside any program, the one
    `guards.recorded_inline` keeps for that run."""
    program = _program_now()
    return program.guards if program is not None else CONTEXT.inline_guards


def note_inputs(nodes) -> None:
    """The lists, dicts and objects among the inputs of the program being traced: the caller's
    own, whose identity the caller sees (`input_by_id`), and whose changes are written back."""
    program = _program_now()
    if program is not None:
        program.inputs.update((id(c), c) for c in nodes)


def input_by_id(key: int):
    """The caller's list or dict of that id in the program being traced (`note_inputs`), or None."""
    program = _program_now()
    found = program.inputs.get(key) if program is not None else None
    return found if type(found) in (list, dict) else None


def refuse_changes_outside(tracker: WriteTracker, keys, origin: OriginInfo) -> None:
    """Before a staged `if` writes back `keys`, the attributes and containers its sides changed:
    an attribute of an object the program neither was given nor made, that a global or closure variable
    reaches (`C.reads` bumped by a method or property of a global `C`), would keep the program's
    traced value, where eagerly it changes only when the data takes that side: refused."""
    program = _program_now()
    if program is None or program.guards is None:
        return
    outside = None
    for key in keys:
        obj = tracker.originals[key].obj
        if key.attr == ITSELF or id(obj) in program.inputs:
            continue  # (a list or dict from outside is refused at the call, `leaked`)
        outside = outside or reachable.Roots(
            [reachable.Root(name, value) for name, value in program.guards.outside_values()], {})
        path = outside.path_to(vars(obj))
        if path is None:
            continue
        what = f"{path.removesuffix('.__dict__')}.{key.attr}"
        raise PythonEffectError(
            f"a branch of this staged `if` changes {what}, a Python value from outside the function's "
            "arguments, while it is traced: the condition is a traced value, so both sides are traced "
            "whatever the data says, and the program cannot write the change back where eager Python "
            "makes it only when the data takes that side.",
            origin,
            advice=f"pass the object as an argument (dy2st writes changes to arguments back), or change "
            f"{what} outside the `if` from values the branch returns, or decide the condition with a Python value.")


def streams_at_entry() -> tuple | None:
    """`(sys.stdout, sys.stderr)` as the program being traced found them (None outside one)."""
    program = _program_now()
    return program.streams if program is not None else None


def program_scratch() -> dict | None:
    """A dict that lives as long as the program being traced (None outside one): what a
    runtime operator remembers for the rest of this trace only."""
    program = _program_now()
    return program.scratch if program is not None else None


def on_abandon(undo) -> None:
    """`undo()` runs if the program being traced gives no program (its trace raised), after
    everything else unwound (`program_containers`)."""
    program = _program_now()
    if program is not None:
        program.undos.append(undo)


class IteratorPosition:
    """How many of a held iterator's items were taken: a Python int, or a traced int32 once the
    data decides it. An object of its own, so that the trackers of the staged `if`s around a
    `next()` record it and carry the change out of their cond, like any attribute a side changes."""

    def __init__(self, taken):
        self.taken = taken


class HeldPosition(NamedTuple):
    """An iterator the code holds (`it = iter(xs)`) whose position staged code decides or changes:
    a loop over it with a traced `break`, or a `next()` in a staged side. `position.taken` of
    `items` (what it could still give, in order) are taken. `next()` and loops read and move the
    record (`builtins.convert_next`, `loops`); the Python iterator stays where it was taken over
    (`python_position`), so that code reading it as Python (`list(it)`, a comprehension, a
    library function given it), which would read it from there, is seen and refused
    (`refuse_python_reads`)."""

    iterator: object
    items: tuple
    position: IteratorPosition
    side: object  # the staged side the iterator was made in (None: the program's own level)
    depth: int  # how many WriteTrackers were open then: those opened after carry its position out
    origin: OriginInfo  # the line that first made the position the program's
    source: tuple = ()  # (the list it iterates, its items then), for a list's iterator: eagerly it reads the list live
    python_position: object = None  # `values.iterator_position` of the Python iterator when taken over

    @property
    def taken(self):
        return self.position.taken

    def refuse_unusable(self, origin: OriginInfo) -> None:
        """Refuse a use at `origin` where the record cannot stand for the iterator: outside the
        staged side it was made in, or one that ended (its position is another trace's value;
        inside, the trackers carry it out of each side), or after the list it walks changed (an
        append, an item set: eagerly `next()` reads the list as it is now)."""
        if not _open(self.side):
            refuse_held_use(self, "this line, outside the staged `if` or loop body the iterator was made in,",
                            origin)
        if self.source and (len(self.source[0]) != len(self.source[1])
                            or any(a is not b for a, b in zip(*self.source))):
            refuse_held_use(self, "this line, after the list the iterator walks changed,", origin)

    def refuse_python_reads(self) -> None:
        """At the end of the run that took it over: code that runs as Python moved the Python
        iterator since (`list(it)`, `sum(it)`, a comprehension, a library function given it),
        reading it from where the program took it over, where eagerly it is wherever the data
        left it: refused (the run's result is not used)."""
        if iterator_position(self.iterator) != self.python_position:
            refuse_held_use(self, "code that runs as Python (`list(it)`, `sum(it)`, a comprehension, a library "
                            "function given the iterator) after this line", self.origin)

    def move(self, taken) -> None:
        """`next()` or a loop took items (or none, at the end): the new position, recorded first
        by the trackers of the staged sides opened since the iterator was made (they carry it
        out, or refuse it in a loop; one made inside a side goes with that side)."""
        for tracker in CONTEXT.trackers[self.depth:]:
            tracker.see(self.position)
        self.position.taken = taken


def note_iterator(iterator, new: bool) -> None:
    """`iter(...)` in converted code gave `iterator`: `new`, one it made over a list, tuple, range,
    string or dict (`iterables.SEQUENCE_ITERATORS`), which staged code may take over; else one
    from elsewhere (`iter` of an iterator gives it back)."""
    if CONTEXT.converted_runs:
        CONTEXT.new_iterators[id(iterator)] = (iterator, new, side_now(), len(CONTEXT.trackers))


def _made(iterator):
    """`(new, side made in, trackers open then)` of an iterator `iter()` gave in this scope, or None."""
    entry = CONTEXT.new_iterators.get(id(iterator))
    return entry[1:] if entry is not None and entry[0] is iterator else None


def is_new_iterator(iterator) -> bool:
    made = _made(iterator)
    return made is not None and made[0]


def hold(iterator, origin: OriginInfo, first: tuple = ()) -> HeldPosition:
    """Take over `iterator`'s position for the rest of the `converted_run` scope, none of its
    items (`first`, then what the Python iterator still gives) taken yet. The items are read
    from a copy (a list's, a tuple's, ... iterator pickles its position), which runs no code of
    the user's and leaves the Python iterator where it is."""
    _, side, depth = _made(iterator) or (True, side_now(), len(CONTEXT.trackers))
    rebuild, arguments, *state = iterator.__reduce__()  # (iter, (the sequence,), position) for a list's
    source = arguments[0] if arguments and type(arguments[0]) is list else None
    walked = (source, tuple(source)) if source is not None else ()
    copy = rebuild(*arguments)
    if state and state[0] is not None:
        copy.__setstate__(state[0])
    record = HeldPosition(iterator, (*first, *copy), IteratorPosition(0), side, depth, origin, walked,
                          iterator_position(iterator))
    CONTEXT.held_positions[id(iterator)] = record
    return record


def held_position(value, origin: OriginInfo) -> HeldPosition | None:
    """The record of `value`, an iterator whose position staged code decides, that a `next()` or
    a loop at `origin` is about to use (refused there where the record cannot stand for it), or
    None. A new iterator made outside the staged side being traced is taken over first: its
    Python position would move in every side traced."""
    held = CONTEXT.held_positions
    record = held.get(id(value)) if held else None
    if record is None and CONTEXT.sides:
        record = _taken_over(value, origin)
    if record is not None:
        record.refuse_unusable(origin)
    return record


def _taken_over(value, origin: OriginInfo) -> HeldPosition | None:
    """`value`'s new record where it is an iterator `iter()` made outside the side being traced
    (in one still open: the side itself owns one made in it), else None."""
    made = _made(value)
    if made is None:
        return None
    new, side, _ = made
    if side is side_now() or not _open(side):
        return None  # made in this side (its own), or in one that ended
    if not new:
        raise PythonEffectError(
            "this line takes items, inside a staged `if` or loop, from an iterator that `iter()` gave back "
            "as it was (an iterator from elsewhere): tracing runs both sides, so it would move whatever the "
            "data says.",
            origin,
            advice="make the iterator with `iter(xs)` over a list or tuple in this function, or take the items "
            "before the `if`.")
    return hold(value, origin)


@contextlib.contextmanager
def converted_run():
    """The life of what staged code records about the function's own Python values: held
    iterators (`hold`, `note_iterator`: the iterator is a local of the function, it goes with
    it) and the Python numbers the data decides (`values.PythonNumbers`). A program's trace, or a
    converted function's run inline into an enclosing trace."""
    records = (CONTEXT.held_positions, CONTEXT.new_iterators)
    before = [set(r) for r in records]
    outermost = CONTEXT.converted_runs == 0
    if outermost:
        CONTEXT.python_numbers = PythonNumbers()
        CONTEXT.inline_refusals = []
    CONTEXT.converted_runs += 1
    try:
        yield
        for key, record in list(records[0].items()):
            if key not in before[0]:
                record.refuse_python_reads()
        refused = swallowed_refusal() if outermost and _program_now() is None else None
        if refused is not None:  # (a program's trace raises its own: `ProgramBody`)
            raise refused
    finally:
        CONTEXT.converted_runs -= 1
        if outermost:
            CONTEXT.python_numbers = None
            CONTEXT.inline_refusals = []
        for record, kept in zip(records, before):
            for key in [k for k in record if k not in kept]:
                del record[key]


def side_now():
    """The staged side (or loop body) being traced now, or None at a program's own level."""
    sides = CONTEXT.sides
    return sides[-1] if sides else None


def refuse_held_use(record: HeldPosition, what: str, origin: OriginInfo) -> None:
    """`what` (a call, a loop) uses an iterator whose position staged code decides where it
    cannot: refused there."""
    raise PythonEffectError(
        f"{what} uses the iterator whose position line {record.origin.lineno} made a value the data "
        "decides (a loop there with a traced `break`, or a `next()` in a staged side), so how many "
        "items it has given is only known when the program runs.",
        origin,
        advice="take items from it with `next(it, default)` or a `for` loop only, not inside a staged side "
        "that ended before, or iterate a list and keep the position in a variable.")


def _open(side) -> bool:
    """Whether `side` (None: a program's own level) is still being traced: the side now, or one
    around it."""
    return side is None or any(s is side for s in CONTEXT.sides)


_prints = [0]  # prints staged (host callbacks) so far, by any program


def note_staged_print(file=None) -> None:
    """A print staged to run with the program, into `file` (None: stdout): what the program
    being traced reads back from that file now would miss it (`refuse_read_back`)."""
    _prints[0] += 1
    if file is not None:
        note_printed_file(file)


def note_printed_file(file) -> None:
    """A print staged to run with the program writes into `file` (see `refuse_read_back`)."""
    program = _program_now()
    if program is not None:
        program.scratch.setdefault(_PRINTED_FILES, set()).add(id(file))


_PRINTED_FILES = object()  # scratch key: ids of the files staged prints write to


def refuse_read_back(method) -> None:
    """`method` of a file (`buf.getvalue()`, `f.read()`) called while a program is traced: where
    a print staged to run with the program writes into that file, its text is not there yet."""
    program = _program_now()
    if program is None or id(method.__self__) not in program.scratch.get(_PRINTED_FILES, ()):
        return
    raise PythonEffectError(
        f"this line reads back a file ({type(method.__self__).__name__}.{method.__name__}()) that a print "
        "before it writes to: that print runs when the program runs, so its text is not in the file while "
        "the function is traced.",
        OriginInfo.of_caller(2),
        advice="build the text as a string (`text += f\"...\"`) and return it, or print to the file and read "
        "it after the call.")


def staged_prints() -> int:
    return _prints[0]


class WrittenLog:
    """What staged prints and writes put into each stream as programs ran (the last
    `WrittenLog.SIZE` writes, with a running count): a program that failed a run-time check
    printed up to its failure, and the eager run that replaces its call writes the same text
    again first (`errors.output_replayed` drops exactly that much). Written from jax's callback
    threads; the count is read once per call, on the general path."""

    SIZE = 4096

    def __init__(self):
        self.count = 0
        self._entries: collections.deque = collections.deque(maxlen=self.SIZE)  # (number, stream, text)
        self._lock = threading.Lock()

    def note(self, stream, text) -> None:
        with self._lock:
            self._entries.append((self.count, stream, text))
            self.count += 1

    def since(self, mark: int) -> dict | None:
        """`{stream: the text written into it}` by the writes numbered `mark` and after, in order;
        None where some of them left the log already."""
        with self._lock:
            entries = [e for e in self._entries if e[0] >= mark]
            if self.count - mark != len(entries):
                return None
        written: dict = {}
        for _, stream, text in entries:
            written[stream] = written[stream] + text if stream in written else text
        return written


WRITTEN = WrittenLog()


def _refusals() -> list | None:
    """The refusals of the program being traced, or of the converted run open inline in the
    user's own trace (their jit), or None outside both."""
    program = _program_now()
    if program is not None:
        return program.refusals
    return CONTEXT.inline_refusals if CONTEXT.converted_runs else None


def note_refusal(error: BaseException) -> None:
    """A refusal raised while a program is traced (or a converted function inline in the user's
    jit), where user code may catch it (`except Exception`, `contextlib.suppress`, an `except
    KeyError` around a staged side's deferred KeyError): `swallowed_refusal` finds it if the
    trace went on."""
    refusals = _refusals()
    if refusals is not None:
        refusals.append(error)


def handled_refusal(error: BaseException) -> None:
    """dy2st caught `error` itself and does something else (a range loop unrolled instead of
    staged): it is no refusal `swallowed_refusal` should raise again."""
    refusals = _refusals()
    if refusals is not None:
        refusals[:] = [r for r in refusals if r is not error]


def swallowed_refusal() -> BaseException | None:
    """The first refusal of the program being traced (or of the inline run) that user code
    caught (the trace ended normally after it), or None. A loop's refusal to stage
    (`LoopVariableError`) and a callee without source (`ConversionError`) are dy2st's own to
    catch: it unrolls, or calls as is."""
    # (a refusal made but never raised, such as a run-time check's prepared error, has no traceback)
    return next((r for r in _refusals() or () if r.__traceback__ is not None
                 and type(r) not in (LoopVariableError, ConversionError)), None)


REFUSAL_LISTENERS.append(note_refusal)


RECORD_SOURCES: list = []  # functions giving the tuples other modules keep lists in (staging registers one)
PROGRAM_BOUNDARIES: set = set()  # code objects whose frames trace a program (the caller's frames are outside)
CONVERTED_CODES: set = set()  # code objects dy2st compiled, nested ones included (`calls.register_converted`)


def in_program() -> bool:
    """Whether a program of dy2st's own is being traced on this thread (not a function run
    inline into a user's `jax.jit`): what Python does now is done once, while its calls run
    the program many times."""
    return bool(CONTEXT.programs)


def leaked(recorded: dict, out, inputs=()) -> list:
    """`(path, container, items before, the user's line that first changed it)` of the recorded lists and dicts that still hold a
    traced value once the program's function returned (themselves, or in a list or dict they
    hold), are not part of what it returns, and are held by something else (a global, a
    closure's or a class's list): no program can write them back. A list or dict among the
    program's `inputs` (an argument's, lifted as state) is the caller's to write back."""
    if not recorded:
        return []
    inside = {id(c) for c in containers_in(out)}
    own = {id(c) for c in containers_in(inputs)}
    found = []
    for key in list(recorded):
        container, before, path, origin = recorded[key]
        if key in inside or not _holds_tracer(container, own):
            continue
        # References: `recorded`, `container` here, getrefcount's argument; anything more is
        # an owner outside the trace (a local of the traced function is gone by now).
        if sys.getrefcount(container) > 3:
            found.append((path, container, before, origin))
        del container
    return found


def put_back_traced(recorded: dict) -> None:
    """After a trace that gives no program: the recorded lists and dicts still holding one of
    its values are put back (an argument's list, put back by the caller already, is left)."""
    restore_items((container, before) for container, before, _, _ in recorded.values()
                  if _holds_tracer(container, set()))


def containers_in(value, depth: int = 0):
    """The lists and dicts in `value`, through tuples and any registered pytree (a NamedTuple,
    a dataclass holding a list)."""
    if depth > 32:
        return
    for node in jax.tree_util.tree_leaves(value, is_leaf=_is_container):
        if _is_container(node):
            yield node
            for item in (node.values() if type(node) is dict else node):
                yield from containers_in(item, depth + 1)


def _is_container(value) -> bool:
    return type(value) in (list, dict)


def _holds_tracer(container, inputs: set, depth: int = 0) -> bool:
    """Whether an item of `container`, or of a list, dict or tuple it holds (not one of the
    `inputs`' ids), is a traced value."""
    items = container.values() if type(container) is dict else container
    for item in items:
        if traced_inside(item, depth=2 if type(item) is not tuple else 0):  # (a tuple is walked below)
            return True
        if type(item) in (list, dict, tuple) and id(item) not in inputs and depth < 32 \
                and _holds_tracer(item, inputs, depth + 1):
            return True
    return False


def _record_from_before(container) -> list:
    """`(tracker, path)` of the active trackers whose side `container` existed before, each now
    recording it. One that an outer side could reach existed before every side inside it too,
    so those record it even where their own roots miss it."""
    trackers = CONTEXT.trackers
    recorded, path = [], None
    for tracker in trackers:  # outermost first
        path = tracker.roots.path_to(container) or path
        if path is not None:
            tracker.see_container(container, "", label=path)
            recorded.append((tracker, path))
    if recorded:
        _note_for_program(container, recorded[0][1])
    return recorded


def _note_for_program(container, path: str) -> None:
    program = _program_now()
    if program is not None and id(container) not in program.changed:
        program.changed[id(container)] = (container, type(container)(container), path, OriginInfo.of_user_code())


def note_written_back(containers) -> None:
    """The lists and dicts among `containers` are the state a stateful program writes back into
    the caller's objects (a list the function made and stored in `self.cache`): not leaks."""
    program = _program_now()
    if program is not None:
        for container in containers:
            program.changed.pop(id(container), None)


def note_appended(target: list, name: str) -> None:
    """`target` (held by the variable `name`) appended to in code run as plain Python while a
    program is traced: if it turns out to be held outside the function (a list a cache returned)
    with a traced item, `leaked` refuses it."""
    _note_for_program(target, name)


def in_place(receiver, what: str, by_item: bool = False):
    """`receiver` of an in-place change (`log.extend(v)`, `d.update(...)`, `xs.pop()`; `by_item`:
    an item written or deleted with a computed key, `t[i] = v`) about to run in converted code;
    `what` shows it (`log.extend()`). While a staged side is traced, a list or dict from before
    the side is recorded by the trackers that could reach it, so the change is carried and
    written back, and put back after the side, as for one a called function changes; one the
    side made is changed as it is. An object of the user's class is recorded by `convert_call`
    when its method is called (an item's `__setitem__` runs unconverted: refused). Anything
    else (a set, a deque, an OrderedDict, a NumPy array, a library's object) cannot be put
    back: refused."""
    if type(receiver) in (list, dict):
        # Not from before a side being traced (none is, or it was made there, as far as the
        # roots tell): `leaked` refuses it after the trace if it was a global's list after all.
        if not _record_from_before(receiver):
            _note_for_program(receiver, _receiver_text(what, by_item))
        return receiver
    if not tracking() or is_traced(receiver):  # a traced array: jax raises its own error, when the data takes the side
        return receiver
    if is_users_object(receiver) and not by_item:
        return receiver
    if isinstance(receiver, type) and receiver in (list, dict):  # `list.append(xs, v)`: its object is an argument
        raise PythonEffectError(
            f"this line calls a {receiver.__name__} method through the class ({what}) while a staged branch or "
            "loop body is traced: dy2st records the object a change is made to from `obj.method(...)`.",
            OriginInfo.of_user_code(),
            advice=f"call it on the object: `xs.{what.rsplit('.', 1)[-1].rstrip('()')}(...)`, which dy2st carries.")
    kind = type(receiver).__name__
    raise PythonEffectError(
        f"this line changes {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} in place ({what}) while a "
        "staged branch or loop body "
        "is traced: tracing runs it whichever path the data picks, and dy2st can carry only lists, "
        "dicts and your objects' attributes.",
        OriginInfo.of_user_code(),  # (the line of the change, past `changing` and builtins)
        advice="read the item into a variable before the `if` or loop (`v = t[k]`), change the variable there, "
        "and write the item after it (`t[k] = v`); or make the condition a Python value." if by_item else
        "make the change on every path and pick values with `jnp.where` (an optimizer that should skip a "
        "non-finite step: `optax.apply_if_finite(tx, ...)` as its transformation), or make the condition a "
        "Python value." if is_nnx_object(receiver) else
        "build a new value instead and use it after the `if` or loop (`s = s | {v}`), or make "
        "the condition a Python value.",
    )


def changing(obj, what: str):
    """`obj`, about to be changed by `what` (`setattr(o, ...)`, `vars(o)`, a library object's
    `append`) in code run as it is: while a staged side is traced, an object of the user's is
    recorded (its attributes carried out of the `if` and put back after each side, as for
    `o.w = v`), anything else as `in_place` says."""
    if tracking():
        if is_users_object(obj):
            note_receiver(obj)
        else:
            in_place(obj, what)
    return obj


def _receiver_text(what: str, by_item: bool) -> str:
    """The receiver's expression in `what`: `log` of `log.extend()`, `t` of `del t[i]`."""
    return what.removeprefix("del ").split("[", 1)[0] if by_item else what.rsplit(".", 1)[0]


def tracking() -> bool:
    """Whether a staged side is being traced now (a `WriteTracker` is active)."""
    return bool(CONTEXT.trackers)


def note_container(container, callee: str) -> None:
    """Called by `convert_call` for a list or dict given to a user's function or class (named
    `callee`): the active trackers record its contents."""
    for tracker in CONTEXT.trackers:
        tracker.see_container(container, callee)


def changes_from_before(tracker: WriteTracker) -> dict:
    """What a traced side changed (`WriteTracker.take`, which puts it back) among what existed
    before it: attributes, and lists and dicts it did not make."""
    return {k: v for k, v in tracker.take().items()
            if k.attr != ITSELF or tracker.existed_before(tracker.originals[k].obj)}


def changed_names(tracker: WriteTracker, changes: dict) -> str:
    return ", ".join(sorted(tracker.label(k).split(" (")[0] for k in changes))


def refuse_loop_writes(tracker: WriteTracker, origin: OriginInfo, trips_known: bool) -> None:
    """After tracing a staged loop body: methods it called must not have changed attributes
    (the loop carries what the body assigns itself, not what callees change), nor may it have
    appended to a list from before the loop through a name it binds (`trips_known`: a scan,
    which can stack a variable's appended items)."""
    changes = changes_from_before(tracker)
    if not changes:
        return
    appended = [tracker.appended[k.object_id] for k in changes if k.attr == ITSELF and k.object_id in tracker.appended]
    if appended:
        path = appended[0]
        advice = (f"bind the list to a variable before the loop (`items = {path}`) and append to that "
                  "variable in the loop body." if trips_known else
                  "preallocate an array and write row i with .at[i].set(value), or loop over a Python "
                  "range / an array without `break`.")
        raise LoopVariableError(
            f"{path} is appended to in this staged loop through a name bound in its body; a staged loop "
            "carries the lists its own variables hold"
            + ("." if trips_known else ", and cannot grow one when its number of iterations is not known."),
            origin,
            advice=advice,
        )
    names = changed_names(tracker, changes)
    raise LoopVariableError(
        f"code run in this staged loop (a method, a property, an in-place operator) changes {names}; dy2st "
        "carries the attributes a loop body assigns itself, not those changed inside the code it calls.",
        origin,
        advice="return the new value from the method and assign it in the loop body "
        "(`out, h = self.step(x, self.h)` then `self.h = h`), or make the loop run in Python.",
    )
