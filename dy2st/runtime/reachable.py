"""What a staged side can reach that existed before it: lists, dicts and objects.

While a side of a staged `if` (or a loop body) is traced, `xs.append(v)` on a list the side
did not make must change that list for every reference to it, as eagerly: `t = d["k"]` then
`t.append(x)` in a branch grows `d["k"]`. The runtime cannot see where a list was made, so
the side's `WriteTracker` keeps `Roots`: the values the side's code could read when it began
(the `if`'s variables, the cells its branch functions close over, the globals they name), and
looks for the list among what those reach. A list found there existed before the side; one
not found was made in it (`t = []`), and no one outside the side can see it. The same walk
gives the user's objects the side can reach, which the tracker records before the side runs
(code run as it is, a property or an `__iadd__`, may change them unannounced), and the objects
and lists a cond keeps as they are (`control_flow._CallersContainers`).

The walk runs once per staged statement while it is traced (never on a cached call), and is
released with it (`release`).
"""

from __future__ import annotations

import types
import collections
from collections import deque
from typing import Iterable, NamedTuple

import jax
import numpy as np

from dy2st.runtime.undefined import MaybeUnbound
from dy2st.runtime.values import closure_values
from dy2st.user_code import is_users_class, is_users_object

_MAX_OBJECTS = 200_000  # far more than a large model holds; a bound keeps a hostile graph finite
_FUNCTION_DEPTH = 3  # a loop's runner -> the user's body -> a helper it calls
_LEAVES = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic, type, types.ModuleType,
           types.BuiltinFunctionType, types.CodeType)


class Root(NamedTuple):
    label: str  # how the user's code names it: a variable's name
    value: object


class Roots:
    """What a side could read when it began (see the module docstring)."""

    def __init__(self, roots: Iterable[Root], before: dict):
        """before: the values the side's state variables held when it began, by display name
        (`d['k']`, `m.buf`): where the walk reaches one of them it takes that value, not what
        the side has put there since (`m.buf = []` in the branch)."""
        self._roots = [r for r in roots if not _is_leaf(r.value)]
        self._before = before
        self._paths: dict | None = None  # id of a reachable list or dict -> (it, how the code reaches it)
        self._objects: dict | None = None  # id -> each object with attributes reachable, in walk order

    def without(self, labels) -> "Roots":
        """These roots less those named in `labels` (variables' own cells)."""
        return Roots([r for r in self._roots if r.label not in labels], self._before)

    def with_locals(self, frame) -> "Roots":
        """These roots and the local variables of `frame` (None: these alone)."""
        if frame is None:
            return self
        named = {r.label for r in self._roots}
        snapshot = frame.f_locals
        extra = [Root(name, value) for name, value in snapshot.items() if name not in named and not _is_leaf(value)]
        if type(snapshot) is dict:
            # Python before 3.13: a dict the frame keeps, with references to the locals, until it
            # ends; emptied, so that reference counts of the locals' lists read as before. (From
            # 3.13 it is a write-through view of the frame: clearing it would delete the locals.)
            snapshot.clear()
        return Roots(self._roots + extra, self._before)

    def is_state(self, display: str) -> bool:
        """Whether the statement carries `display` (`d['k']`) as a variable of its own."""
        return display in self._before

    def dicts_adding_missing_keys(self) -> list:
        """`(dict, path)` of the reachable dicts whose reads add a missing key (a defaultdict)."""
        self._walk()
        return self._adding

    def path_to(self, target) -> str | None:
        """How the side's code reaches the list or dict `target` from a root (`d['k']`), or
        None if it cannot."""
        self._walk()
        entry = self._paths.get(id(target))
        return entry[1] if entry is not None and entry[0] is target else None

    def users_objects(self) -> list:
        """The objects of the user's classes the side's code can reach: code run as it is (a
        property's getter, a `functools.cached_property`, an `__iadd__` that `acc += x` calls)
        may change their attributes with no call of theirs for `convert_call` to see."""
        self._walk()
        return [obj for obj in self._objects.values() if is_users_object(obj)]

    def container_by_id(self, key: int):
        """The list or dict of that id the side's code can reach, or None."""
        self._walk()
        entry = self._paths.get(key)
        return entry[0] if entry is not None and type(entry[0]) in (list, dict) else None

    def object_by_id(self, key: int):
        """The object (with attributes, not a list or dict) of that id the side's code can
        reach, or None."""
        self._walk()
        return self._objects.get(key)

    def release(self) -> None:
        """Drop the roots and what the walk found, once the statement is done with them: they
        hold the function's lists and dicts, and jax's caches may keep the side's functions
        (which hold this) alive, where `writes.leaked` counts the references to a list."""
        self._roots, self._before = [], {}
        self._paths = self._objects = None
        self._adding = []

    def _walk(self) -> None:
        if self._paths is None:
            self._paths, self._objects, self._adding = _reachable(self._roots, self._before)


def snapshot(functions, state_names=(), state_values=()) -> Roots:
    """The roots of a side about to run `functions` (a branch, a loop body): the cells the
    functions close over and those of the functions held there (read now: the side rebinds
    them), and the globals their code names. Where the walk reaches a state variable by its
    display name (`m.buf`) it takes its value in `state_values`: an `if`'s value from before
    it, or what a loop gives its body (its own lists, not lists from before)."""
    before = dict(zip(state_names, state_values))
    roots: list = []
    seen: set = set()
    for fn in functions:
        roots += _function_roots(fn, seen, depth=0)
    return Roots(roots, before)


def _function_roots(fn, seen: set, depth: int) -> list:
    fn = getattr(fn, "__func__", fn)
    if not isinstance(fn, types.FunctionType) or id(fn) in seen or depth > _FUNCTION_DEPTH:
        return []
    seen.add(id(fn))
    roots = []
    for name, value in closure_values(fn):
        roots.append(Root(name, value))
        for held in _functions_in(value):  # a loop's body, a helper closing over a list
            roots += _function_roots(held, seen, depth + 1)
    names: set = set()
    _global_names(fn.__code__, names)
    for name in sorted(names):
        if name in fn.__globals__:
            value = fn.__globals__[name]
            roots.append(Root(name, value))
            roots += _named_attributes(name, value, names)
            roots += _defaults(name, value)
            roots += _function_roots(value, seen, depth + 1)  # a helper closing over a cache
    return roots


def _functions_in(value, depth: int = 2):
    """`value` where it is a function, or the functions in it where it is a tuple (the
    operands' thunks of a comparison chain, `((compare, operand), ...)`)."""
    if isinstance(value, (types.FunctionType, types.MethodType)):
        yield value
    elif type(value) is tuple and depth:
        for item in value:
            yield from _functions_in(item, depth - 1)


def _defaults(label: str, fn) -> list:
    """A function's default values (`_bag.__defaults__[0]`, a list it appends to): reached as
    `fn.__defaults__` where the code names the function (the walk does not enter functions)."""
    if not isinstance(fn, types.FunctionType):
        return []
    return [Root(f"{label}.{attribute}", getattr(fn, attribute)) for attribute in ("__defaults__", "__kwdefaults__")
            if getattr(fn, attribute)]


def _named_attributes(label: str, holder, names: set) -> list:
    """A module's or class's attributes the code names (`registry.LOG`, `Model.cache`): the
    walk does not enter modules and classes (too many objects), but the code may reach these."""
    if not isinstance(holder, (types.ModuleType, type)):
        return []
    return [Root(f"{label}.{n}", vars(holder)[n]) for n in sorted(names) if n in vars(holder)]


def _global_names(code: types.CodeType, into: set) -> None:
    into.update(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _global_names(const, into)


def _is_leaf(value) -> bool:
    return isinstance(value, _LEAVES) or isinstance(value, (jax.Array, types.FunctionType))


def _reachable(roots: list, before: dict) -> tuple[dict, dict, list]:
    """`id -> (list or dict, path)` of the lists and dicts reachable from `roots`, breadth first
    (shortest paths), `id -> object` of the objects with attributes among what they reach, and
    `(dict, path)` of the defaultdicts among them (`Roots.dicts_adding_missing_keys`)."""
    found: dict = {}
    objects: dict = {}
    adding: list = []
    classes: dict = {}  # class -> its containers (`_class_containers`), for this walk
    seen = {id(r.value) for r in roots}
    queue = deque((r.value, r.label) for r in roots)
    while queue and len(seen) < _MAX_OBJECTS:
        value, path = queue.popleft()
        if type(value) in (list, dict):
            found.setdefault(id(value), (value, path))
        elif type(value) is collections.defaultdict and value.default_factory is not None:
            adding.append((value, path))
        elif type(getattr(value, "__dict__", None)) is dict and not isinstance(value, type):
            attributes = value.__dict__  # an object's attributes, changed as a dict (`o.__dict__[k] = v`)
            found.setdefault(id(attributes), (attributes, f"{path}.__dict__"))
            objects[id(value)] = value
        for child_path, child in _children(value, path, classes):
            if child_path != path:  # (a MaybeUnbound's value is read by the variable's own name)
                child = before.get(child_path, child)
            if id(child) not in seen and not _is_leaf(child):
                seen.add(id(child))
                queue.append((child, child_path))
    return found, objects, adding


def _children(value, path: str, classes: dict):
    if type(value) is MaybeUnbound:  # a local a staged `if` may have left unbound: `jst.ld` reads its value
        return ((path, value.value),)
    if isinstance(value, (list, tuple)):
        return ((f"{path}[{i}]", v) for i, v in enumerate(value))
    if isinstance(value, dict):  # (`dict.items`: the runtime's walk is no reading of a watched dict's order)
        return ((f"{path}[{k!r}]", v) for k, v in list(dict.items(value)))
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict):
        own = [(f"{path}.{k}", v) for k, v in list(attrs.items()) if not k.startswith("__")]
        # Lists and dicts of its class (`registry = []` in the class body), reached as `obj.registry`
        cls = type(value)
        if cls not in classes:
            classes[cls] = _class_containers(cls)
        return own + [(f"{path}.{k}", v) for k, v in classes[cls] if k not in attrs]
    return ()


def _class_containers(cls) -> tuple:
    """`(name, list or dict)` of the class attributes of a user's class and its bases (read for
    each walk: a class attribute may be given a new list between calls)."""
    found = {}
    for klass in reversed(cls.__mro__):
        if is_users_class(klass):
            found.update((k, v) for k, v in vars(klass).items() if type(v) in (list, dict) and not k.startswith("__"))
    return tuple(found.items())
