"""The variables an `if` or loop carries, read and written through its functions' closure cells.

Generated code names the state of an `if` or loop by path, as data::

    (y,) = jst.convert_ifelse(test, if_body, else_body, ('y', ('self', 'n')), ...)

and the branch or body functions close over those variables (a branch that writes `y` declares
it `nonlocal`; one that reads `self` has it free). The runtime reaches each variable through
the cell those functions share with the enclosing function, so no reader/writer function is
generated per `if` (each nested function costs the conversion about as much as the rest of a
short `if`). A path is a name (`'y'`) or a name followed by attribute names and `(key,)` items
(`('d', ('k',))` for `d['k']`), spelled as in the source: private names (`__n`) are mangled
here with the class the function is defined in, as the compiler did.

Reading a variable that is unbound gives an `Undefined` marker naming it (eager Python would
raise only if it were used); writing one back assigns the marker to a name, and removes an
attribute or key (`write_composite`). The operators give back the values of the plain names
only (`plain_values`): attributes and items are written back by the runtime itself.
"""

from __future__ import annotations

import builtins
import collections
import types

from dy2st.ast_util import is_private_name
from dy2st.errors import OriginInfo, PythonEffectError
from dy2st.runtime.undefined import Undefined
from dy2st.user_code import is_users_class

_UNBOUND_READS = (NameError, AttributeError, KeyError, IndexError)  # an unbound attribute or item: a marker


class _Global:
    """A variable the functions reach as a global: declared `global` in the enclosing function,
    or the module-level object whose attribute or item a branch sets (`CONFIG.n = 1`). Read as
    Python reads a global (the module's, else a builtin); unbound reads as a cell's do."""

    __slots__ = ("namespace", "name")

    def __init__(self, namespace: dict, name: str):
        self.namespace, self.name = namespace, name

    @property
    def cell_contents(self):
        try:
            return self.namespace[self.name]
        except KeyError:
            try:
                return getattr(builtins, self.name)
            except AttributeError:
                raise ValueError(self.name) from None

    @cell_contents.setter
    def cell_contents(self, value):
        self.namespace[self.name] = value


class StateAccess:
    """The state of one `if` or loop: `get()` and `set(values)` in the order of `paths`
    (display names `names`), through the cells of `functions` (None entries skipped);
    `plain()` reads the plain names only. `frame` is the converted function's, whose current
    line (the `if` or loop) an unbound variable's marker names; `class_name` the class whose
    private names the paths hold (None: they hold none)."""

    __slots__ = ("paths", "names", "frame", "holders")

    def __init__(self, functions, paths: tuple, names: tuple, frame: types.FrameType, class_name: str | None = None):
        if class_name is not None:
            paths = tuple(_mangled(path, class_name) for path in paths)
        self.paths, self.names, self.frame = paths, names, frame
        self.holders = [_holder(_base(path), functions) for path in paths]

    def __enter__(self) -> "StateAccess":
        return self

    def __exit__(self, *exc_info) -> None:
        self.frame = None  # the frame holds the caller's locals (and its callers'): not kept past the operator

    def get(self) -> tuple:
        frame = self.frame
        return tuple(_read(holder, path, name, frame) for holder, path, name in zip(self.holders, self.paths, self.names))

    def set(self, values) -> None:
        for holder, path, value in zip(self.holders, self.paths, values):
            if type(path) is str:
                holder.cell_contents = value
            else:
                _write_composite(holder, path, value)

    def attributes(self) -> frozenset:
        """`(id of the object, name)` of each attribute among the paths (`self.h`), resolved
        now: the statement carries these itself, so a `WriteTracker` leaves them to it."""
        return frozenset((id(parent), step) for parent, step in self._last_steps() if type(step) is str)

    def items(self) -> dict:
        """`(id of the container, key) -> container` of each item among the paths (`xs[-1]`),
        resolved now: a side that also changes the container in place (`xs.reverse()` after
        `xs[-1] = v`) must record its items as they were before the side (`WriteTracker`)."""
        return {(id(parent), step[0]): parent for parent, step in self._last_steps()
                if type(step) is tuple and type(parent) in (list, dict)}

    def _last_steps(self):
        """`(the object or container holding it, its last step)` of each attribute or item
        among the paths whose holder is bound now."""
        for holder, path in zip(self.holders, self.paths):
            if type(path) is tuple:
                try:
                    yield _follow(holder.cell_contents, path[1:-1]), path[-1]
                except (*_UNBOUND_READS, ValueError):
                    pass  # unbound before the statement: nothing of it to leave

    def plain(self) -> tuple:
        """The values of the plain names (what the generated code assigns after the operator)."""
        frame = self.frame
        return tuple(_read(holder, path, name, frame)
                     for holder, path, name in zip(self.holders, self.paths, self.names) if type(path) is str)


def plain_values(values: tuple, paths: tuple) -> tuple:
    """The values of the plain names among `paths`: what the generated code assigns."""
    return tuple(value for value, path in zip(values, paths) if type(path) is str)


def _mangled(path, class_name: str):
    """`path` with its private names as compiled in class `class_name` (`__n` -> `_Model__n`)."""
    if type(path) is str:
        return mangle(path, class_name)
    return tuple(mangle(step, class_name) if type(step) is str else step for step in path)


def mangle(name: str, class_name: str) -> str:
    """`name` as the compiler spells it inside class `class_name` (private names only)."""
    if not is_private_name(name):
        return name
    owner = class_name.lstrip("_")
    return f"_{owner}{name}" if owner else name


def _base(path) -> str:
    return path if type(path) is str else path[0]


def _holder(base: str, functions):
    """The cell of `base` in the closure of one of `functions`, or its global binding (a
    name their code reaches as a global). Generated functions always reach their state; were
    one not to, guessing (a global of that name) could give a wrong value: refused."""
    for fn in functions:
        if fn is None:
            continue
        code = fn.__code__
        if base in code.co_freevars:
            return fn.__closure__[code.co_freevars.index(base)]
    for fn in functions:
        if fn is not None and _names_global(fn.__code__, base):
            return _Global(fn.__globals__, base)
    raise AssertionError(f"dy2st internal error: no function of this statement reaches its state variable {base!r}")


def _names_global(code: types.CodeType, name: str) -> bool:
    """Whether `code` or code nested in it names `name` other than as a local or a cell."""
    if name in code.co_names:
        return True
    return any(isinstance(const, types.CodeType) and _names_global(const, name) for const in code.co_consts)


def _read(holder, path, name: str, frame):
    try:
        value = holder.cell_contents
    except ValueError:
        return _unbound(name, frame)
    if type(path) is str:
        return value
    try:
        parent = _follow(value, path[1:-1])
    except _UNBOUND_READS:
        return _unbound(name, frame)
    if type(path[-1]) is tuple:
        _refuse_users_items(parent, name, frame)
    else:
        _refuse_users_setter(parent, path[-1], name, frame)
    try:
        return _follow(parent, path[-1:])
    except _UNBOUND_READS:
        return _unbound(name, frame)


_PLAIN_ITEMS = (list, dict, collections.UserDict, collections.UserList)


def _users_setter(kind: type, attr: str):
    """The user's code that `obj.attr = v` runs for an object of `kind`: a property's setter
    (or a data descriptor's `__set__`), or a `__setattr__`, defined in a class of the user's
    (None where Python's own sets it: a library's class, NNX's, sets it its way)."""
    for klass in kind.__mro__:
        if not is_users_class(klass):
            continue
        found = vars(klass).get(attr)
        if found is not None and hasattr(type(found), "__set__"):
            return f"the setter of {klass.__name__}.{attr}"
        if "__setattr__" in vars(klass):
            return f"{klass.__name__}.__setattr__"
    return None


def _refuse_users_setter(parent, attr: str, name: str, frame) -> None:
    """An attribute a staged `if` or loop carries (`s.lr`) is written back by setting it, and
    set by each side traced: where the user's code runs for that (a property's setter counting
    writes, a `__setattr__` that logs), it would run once per side and again after, where eager
    runs it once."""
    if isinstance(parent, type):
        return  # (a class attribute: set on the class, whose metaclass is Python's)
    setter = _users_setter(type(parent), attr)
    if setter is None:
        return
    raise PythonEffectError(
        f"this staged `if` or loop carries {name}, set through {setter}: that code would run once per "
        "side traced and again to write the result back, where eager runs it once.",
        OriginInfo.from_frame(frame) if frame is not None else None,
        advice=f"compute the new value into a variable in the `if` or loop (`v = ...`) and set `{name} = v` "
        "after it; or make the condition a Python value.",
    )


def _refuse_users_items(container, name: str, frame) -> None:
    """An item a staged `if` or loop carries (`s['a']`) is read and written through the
    container's own `__getitem__`/`__setitem__`: for a list or dict, Python's; for anything else
    (a user's class, a NumPy array), code that the staging would run once per side traced and
    again to write the result back, where eager runs it once."""
    if isinstance(container, _PLAIN_ITEMS) and not is_users_class(type(container)):
        return  # (a UserDict's item methods are its `data` dict's: running them again is harmless)
    kind = type(container).__name__
    raise PythonEffectError(
        f"this staged `if` or loop carries {name}, an item of a {kind}: reading and writing it runs the "
        f"{kind}'s own item methods once per side traced and again to write the result back, where eager "
        "runs them once.",
        OriginInfo.from_frame(frame) if frame is not None else None,
        advice=f"read the item into a variable before the `if` or loop (`v = {name}`), assign `v` there, and "
        f"write `{name} = v` after it; or make the condition a Python value.",
    )


def _unbound(name: str, frame) -> Undefined:
    return Undefined(name, OriginInfo.from_frame(frame) if frame is not None else None)


def _follow(value, steps):
    for step in steps:
        value = getattr(value, step) if type(step) is str else _item(value, step[0])
    return value


def _item(container, key):
    """`container[key]`, where it holds one: a dict's missing key is a KeyError, not what its
    `__missing__` makes (a Counter's 0, a defaultdict's new item, which would stay)."""
    if isinstance(container, dict) and key not in container:
        raise KeyError(key)
    return container[key]


def _write_composite(holder, path: tuple, value) -> None:
    try:
        base = holder.cell_contents
    except ValueError:
        raise NameError(f"cannot access variable {path[0]!r} where it is not associated with a value") from None
    try:
        parent = _follow(base, path[1:-1])
    except (KeyError, IndexError, AttributeError, TypeError):
        if isinstance(value, Undefined):
            return  # unbound, and so is what would hold it (`d["b"]["c"]` where `d` has no "b"): nothing to remove
        raise
    write_composite(parent, path[-1], value)


def write_composite(parent, step, value) -> None:
    """`parent.step = value` (`step` a str) or `parent[key] = value` (`step` is `(key,)`).

    An `Undefined` value means the attribute or key was unbound before the `if`/loop and is
    unbound on the path taken: it is removed (a staged branch may have set it while being
    traced), never left holding the marker.
    """
    if isinstance(step, str):
        if not isinstance(value, Undefined):
            setattr(parent, step, value)
        elif hasattr(parent, step):
            delattr(parent, step)
        return
    (key,) = step
    if not isinstance(value, Undefined):
        parent[key] = value
    elif _has_key(parent, key):
        del parent[key]


def _has_key(container, key) -> bool:
    try:
        _item(container, key)
    except (KeyError, IndexError, TypeError):
        return False
    return True
