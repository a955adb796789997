"""Guards: the Python values a program read from outside its arguments, checked on each call.

A program is traced once per signature, and the Python values its code read while tracing (a
global flag, a closure's config dict, a default argument, a global array) are frozen into it.
Eager code reads them again on every call. So while a program is traced, each user function
that runs (the converted function itself, the functions it calls, StaticFunctions run inline)
is noted (`note`): the globals its code names, its closure cells and its defaults, with a
token of their value then (`_freeze`). A call first checks that every token still holds
(`GuardSet.holds`); where one does not, the function's programs are dropped and it traces
again, so the program is eager's for the values of now.

The user's functions and classes are guarded by identity (a notebook cell that defines a helper
again, a method patched onto a class between calls: `_users_code`), and the data attributes the
code names of a user's module or class (`config.DEBUG`), and those `hasattr`/`getattr` asked
for (`note_lookup`). Not guarded: modules, a library's functions and classes, and the objects
of jax, numpy and the other libraries whose objects are machinery (dtypes, a mesh, a logger): a
name bound to one is assumed to stay. Arrays are guarded by identity (a jax array never changes
in place), numpy arrays by identity and contents, lists, dicts, tuples, sets and plain objects
by their contents, walked to a bounded size.

A function that reads no such value gets no guard and keeps jit's own dispatch (the front).

Before:
    FLAG = True; f(x); FLAG = False; f(x)     # the second call ran the program of FLAG = True
After:
    the second call finds FLAG's token changed, drops the programs and traces again
"""

from __future__ import annotations

import contextlib
import dis
import functools
import inspect
import itertools
import sys
import types
from typing import Callable, NamedTuple

import jax
import numpy as np

from dy2st.errors import PythonEffectError, is_library_file
from dy2st.runtime import writes
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.values import (OPAQUE_MODULES, IteratorAt, is_frozen_config, iterator_at, iterator_position, node_kind,
                                  rewind, traced_inside)
from dy2st.user_code import is_library_module, is_users_class, is_users_object

_MISSING = object()
_CODE = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
         types.BuiltinMethodType, type, functools.partial, property, staticmethod, classmethod)
_SCALARS = frozenset({int, bool, str, bytes, type(None), complex})
_DATA = _SCALARS | {float}
_WALK_LIMIT = 10_000  # container items and attributes one value's token walks at most
_NUMPY_LIMIT = 1 << 16  # elements of a numpy array compared by contents; larger: by identity


class GeneratorState(NamedTuple):
    """A random number generator (`owner`) and how to read and set its state."""

    owner: object
    get: Callable
    set: Callable


class GuardSet:
    """The guards of one StaticFunction's programs: `(reader, token)` per value read."""

    def __init__(self, on_first=None):
        self.entries: dict = {}  # reader key -> (reader, token)
        self.kept: list = []  # objects whose identity a token holds (kept alive: ids stay theirs)
        self.on_first = on_first  # told when the first guard is added (the front must stop)
        # keys of the globals and cells a noted function's own code assigns (`global n; n = ...`):
        # its staged ifs and loops carry those as state (and refuse traced values there)
        self.own_writes: set = set()
        self.failures = 0
        self.checks: dict = {}  # reader key -> the cheapest test that its guard holds (`_fast_check`)
        self.first_items: dict = {}  # reader key -> `_contents_of` the value when noted
        self.first_values: dict = {}  # reader key -> the value when noted (`put_back`)
        self.classes_noted: set = set()  # the user's classes whose implicitly called code is noted

    def __bool__(self):
        return bool(self.entries)

    def note(self, fn, receiver=None) -> None:
        """Guard what `fn`'s code reads from outside its arguments, as it is now (and, for a
        method, the data attributes of its `receiver`'s class the code names: `cls.calls`)."""
        if not isinstance(fn, types.FunctionType):
            return
        if is_library_module(fn.__module__) or is_library_file(fn.__code__.co_filename):
            return  # dy2st's own program function, a library's (also one `functools.wraps` renamed)
        written = _written(fn.__code__)
        readers = list(_readers(fn, receiver))
        self.own_writes.update(key for key, _ in readers if key[0] != "d" and key[2] in written)
        self._guard(readers)
        for kind in _classes_reached(fn, receiver):
            self.note_implicit(kind)

    def note_implicit(self, kind: type) -> None:
        """The code of a user's class that Python calls itself, not through a call converted
        code makes (`_implicit_code`: `len(m)`, `if m:`, `m == 3`, `m.scale` of a property):
        guarded as if called, so that what it reads from outside (a global its getter reads) and
        changes there (a counter its `__getattr__` bumps) is seen on every call. Once per class."""
        if kind in self.classes_noted:
            return
        self.classes_noted.add(kind)
        for function in _implicit_code(kind):
            self.note(function, kind)

    def note_receiver(self, method: types.MethodType) -> None:
        """A bound method given as a value (a static argument, keyed by its receiver's identity):
        the receiver's attributes, which it reads when it runs, are read again on every call."""
        self._guard([(("m", id(method), f"{method.__qualname__}.__self__"),
                      functools.partial(getattr, method, "__self__"))])

    def note_lookup(self, obj, name: str) -> None:
        """The trace asked whether `obj` has `name` (`hasattr`, `getattr` with a default): the
        user's classes it would be found on are guarded for it, there or not, so a call after
        one gains or loses it (a method or constant set on the class between calls) traces again;
        for a module of the user's, the module (`getattr(config, "DEBUG", False)`)."""
        if isinstance(obj, types.ModuleType):
            holders = [obj] if _users_module(obj) else []
        elif isinstance(obj, types.FunctionType):  # `getattr(f, "calls", 0)`: its own attributes
            holders = [obj] if _users_code(obj) else []
        else:
            kind = obj if isinstance(obj, type) else type(obj)
            holders = [k for k in kind.__mro__ if is_users_class(k)]
        self._guard([(("a", id(h), f"{getattr(h, '__qualname__', h.__name__)}.{name}"),
                      _owned(functools.partial(vars(h).get, name, _MISSING), h)) for h in holders])

    def note_fresh(self, what: str, state, origin) -> None:
        """The trace called `what` at `origin`, which gives another value on each call (a draw of
        Python's or numpy's random numbers, a clock): a guard that never holds, so every later
        call traces again and draws anew, as eagerly. It reads the generator's `state`
        (`GeneratorState`; a trace given up puts it back), or a new count each time: either way a
        staged side or a code path eager may not run that draws is refused as a change."""
        # One guard per generator (two draws of one read and put back its one state), or per
        # line for a clock.
        key = ("r", id(state.owner) if state else id(origin.filename),
               f"{what} (line {origin.lineno})" if not state else f"{what} (first at line {origin.lineno})")
        if state and any(k[:2] == key[:2] for k in self.entries):
            return
        if key not in self.entries:
            reader = functools.partial(_read_state, state.get, state.set) if state else itertools.count().__next__
            self._guard([(key, reader)])
            self.checks[key] = _never

    def _guard(self, readers) -> None:
        """Guard each `(key, reader)` not guarded yet, by its value now."""
        added = False
        for key, reader in readers:
            if key in self.entries:
                continue
            value = reader()
            if value is not _MISSING and iterator_position(value) is None and (
                    isinstance(value, jax.core.Tracer) or (_is_code(value) and not _users_code(value))):
                continue  # machinery; or a value of the trace itself (a cell of a function it made)
            token = _freeze(value, self.kept)
            self.entries[key] = (reader, token)
            self.first_values[key] = value
            contents = _contents_of(value)
            if contents:  # as first read: put back if a refused side, a trace given up, changes it
                self.first_items[key] = contents
            self.checks[key] = _fast_check(reader, value, token)
            added = True
        if added and self.on_first is not None:
            self.on_first()

    def held_containers(self) -> dict:
        """`id -> (reader, path)` of each list, dict, set and plain object the guarded values
        hold (walked to the tokens' bound; `path`: `("i", index)`, `("k", key)`, `("a", name)`
        steps from what `reader` reads): an output that is one of them is eager's same object,
        reached again along `path` per call (`static_outputs.Outside`). The guards held when
        the call began, so the path reaches an object equal to the one the trace returned."""
        found: dict = {}
        for reader, _ in list(self.entries.values()):
            for item, kind, path in _held(reader()):
                if kind != "i":
                    found.setdefault(id(item), (reader, path))
        return found

    def holding_traced(self, inputs) -> str | None:
        """How the code names the first item or attribute of a list, dict or object of the
        user's the guarded values hold (`CFG["w"]`, `trainer.w`) that holds a traced value once a
        trace ended: the function assigned it there, out of the program's reach. None where
        there is none; what the arguments `inputs` hold is the caller's, written back (not looked in)."""
        inputs = {id(item) for item, _, _ in _held(inputs)}
        for key, (reader, _) in list(self.entries.items()):
            if key[0] not in ("g", "c", "d", "a"):
                continue
            for item, kind, path in _held(reader()):
                if kind == "i" or id(item) in inputs:
                    continue
                pairs = (enumerate(item) if kind == "l" else item.items() if kind == "d"
                         else vars(item).items() if kind == "o" else ())
                for name, value in list(pairs):
                    if traced_inside(value):
                        step = ("a", name) if kind == "o" else ("k" if kind == "d" else "i", name)
                        return key[2] + "".join(_step_text(s) for s in (*path, step))
        return None

    def state_now(self) -> "GuardedState":
        """What the guarded values are now (`put_back` restores it)."""
        values = {key: reader() for key, (reader, _) in self.entries.items()}
        return GuardedState(self.tokens_now(), values, self.items_now())

    def put_back(self, before: "GuardedState") -> bool:
        """After a trace given up: the guarded values as they were at `before` (`state_now`),
        those first read since as first read: names rebound, list and dict items refilled.
        Whether all of them now are as they were (a change deeper inside, an object's attribute,
        is not undone)."""
        for key, (reader, _) in list(self.entries.items()):
            then = before.values[key] if key in before.values else self.first_values[key]
            if reader() is not then or key[0] == "n":
                _rebind(key, reader, then)
        for key, contents in [*before.items.items(), *((k, v) for k, v in self.first_items.items() if k not in before.items)]:
            _refill(contents)
        return self.changed(before.tokens, own_writes=True) is None

    def outside_values(self) -> list:
        """`(how the code names it, value)` of each guarded value as it is now (`global FLAG`)."""
        return [(key[2], reader()) for key, (reader, _) in list(self.entries.items())]

    def reads_numpy_arrays(self) -> bool:
        """Whether a guarded value is or holds a numpy array (compared by contents: one changed
        in place is seen). JAX keeps, across traces, the device array it made of a numpy array
        a trace read (by the array's identity), so a trace made again after the contents changed
        would get the old values: `jax.clear_caches()` must go first (see `_guards_changed`)."""
        return any(isinstance(value, np.ndarray) for value in self.kept)

    def holds(self) -> bool:
        """Whether every guard holds (the dispatcher's check before the shared jit, per call)."""
        for check in self.checks.values():
            if not check():
                return False
        return True

    def tokens_now(self) -> dict:
        """`key -> token` of every guarded value as it is now."""
        scratch: list = []
        return {key: _freeze(reader(), scratch) for key, (reader, _) in self.entries.items()}

    def changed(self, snapshot: dict | None = None, own_writes: bool = False):
        """The key of the first guard that no longer holds (its per-call test), or None. With
        `snapshot` (`tokens_now()` taken earlier): the first value that changed since then, one
        added since compared with its own first token, the function's own writes left out unless
        `own_writes` (they are its ifs' and loops' state)."""
        if snapshot is None:
            return next((key for key, check in self.checks.items() if not check()), None)
        scratch: list = []
        for key, (reader, token) in list(self.entries.items()):
            if (own_writes or key not in self.own_writes) and _freeze(reader(), scratch) != snapshot.get(key, token):
                return key
        return None

    def note_trace_end(self) -> None:
        """A program's trace ended: a guarded value the trace itself changed (a counter it bumps,
        a log a context manager appends to) is an effect the program cannot make, so every later
        call traces again, whatever value it finds there (a caller that resets the counter to
        what it was would otherwise get the program, and no effect)."""
        scratch: list = []
        for key, (reader, token) in list(self.entries.items()):
            if self.checks.get(key) is not _never and _freeze(reader(), scratch) != token:
                self.checks[key] = _never
        scratch = writes.program_scratch()
        for first, what, where in ((_AT_FIRST_RAISE, "this staged `if`, whose side raises when the data takes it",
                                    "the `if`"),
                                   (_AT_FIRST_CHECK, "this line, which raises when the data fails its check "
                                    "(an assert, `next()` past the end)", "this line")):
            raised = scratch.get(first)
            key = self.changed(raised[0].tokens, own_writes=True) if raised is not None else None
            if key is not None:
                self.put_back(raised[0])  # (they would keep what the trace put there)
                raise PythonEffectError(
                    f"the function changes the {describe(key)} (a Python value from outside its arguments) after "
                    f"{what}: tracing runs the code after it whatever the data says, where eager Python raises "
                    "first and changes nothing.",
                    raised[1],
                    advice=f"change {key[2]} before {where}, or after the call; or raise with a Python condition.")

    def note_deferred_raise(self, origin, check: bool = False) -> None:
        """A staged side will raise when the data takes it, or a run-time check when the data
        fails it (`check`), at `origin`: what the trace changes after this (guarded values only)
        eager would not change then (`note_trace_end`)."""
        scratch = writes.program_scratch()
        first = _AT_FIRST_CHECK if check else _AT_FIRST_RAISE
        if scratch is not None and first not in scratch:  # (None: an inline run, no program)
            scratch[first] = (self.state_now(), origin)

    def items_now(self) -> dict:
        """`key -> _contents_of(value)` of each guarded value holding lists, dicts or objects."""
        found = {}
        for key, (reader, _) in self.entries.items():
            contents = _contents_of(reader())
            if contents:
                found[key] = contents
        return found

    def clear(self) -> None:
        self.classes_noted.clear()
        self.first_items.clear()
        self.first_values.clear()
        self.checks.clear()
        self.own_writes.clear()
        self.entries.clear()
        self.kept.clear()


class GuardedState(NamedTuple):
    """The guarded values at one moment (`GuardSet.state_now`)."""

    tokens: dict  # reader key -> token
    values: dict  # reader key -> the value read
    items: dict  # reader key -> `_contents_of` its value


_AT_FIRST_RAISE = object()  # program scratch key: (`GuardedState` then, origin) at the first deferred raise
_AT_FIRST_CHECK = object()  # the same at the first run-time check that may fail


def _never() -> bool:
    """The check of a guard whose value the program's own trace changes: it never holds."""
    return False


def describe(key) -> str:
    """A guard's reader key in words: `global FLAG`, `closure variable scale`,
    `defaults step.__defaults__`."""
    kind, _, name = key
    return {"g": "global", "c": "closure variable", "d": "defaults", "a": "attribute",
            "n": "attributes not there when traced:", "r": "random draw or clock read anew on each call,"}[kind] + f" {name}"


def recording_any() -> bool:
    """Whether a program being traced records guards (`writes.program_containers`)."""
    return writes.program_guards() is not None


def snapshot():
    """The guarded values now, before a trace that may be given up (`restore`); None where no
    program is traced or it has no guards."""
    guards = writes.program_guards()
    return (guards, guards.state_now()) if guards else None


def restore(snap) -> None:
    """A trace given up (a scan tried, then unrolled; a loop built again with other types): the
    guarded values it changed are put back, so that the trace replacing it starts from eager's
    state (a random draw the given-up trace made is not made twice: campaign seed 6,800,246)."""
    if snap is not None:
        guards, before = snap
        if guards.changed(before.tokens) is not None:
            guards.put_back(before)


@contextlib.contextmanager
def unchanged_by_side(origin, what: str, unroll=None):
    """Around a staged side or loop body being traced: eager runs it only when the data takes
    it (or once per iteration), so a Python value it changes that the program reads from outside
    (a global list appended to, an object's counter bumped by a property, a closure's dict) would
    change once, whatever the data says: refused at `origin`, what it changed put back (they
    would keep the trace's values; `GuardSet.put_back`). `unroll`: for a loop of a known trip count, the
    exception (made from the reason) that makes it run as Python instead."""
    guards = writes.program_guards()
    before = guards.state_now() if guards is not None else None
    yield
    if guards is None:
        return
    key = guards.changed(before.tokens)
    if key is not None:
        guards.put_back(before)
        if unroll is not None:
            raise unroll(f"the body changes the {describe(key)}, a Python value from outside the function")
        if inspect.isgenerator(guards.entries[key][0]()):
            raise PythonEffectError(
                f"the function reads the generator {key[2]} (from outside its arguments), whose position dy2st "
                f"cannot read, so it cannot tell whether the {what} advances it: the condition is traced, so the "
                "side is traced whatever the data says, where eager Python advances it only when the data takes "
                "that side.",
                origin,
                advice=f"take the items you need from {key[2]} into a list before the call (or before the `if`), or "
                "iterate a list, a tuple or `iter()` of one, whose position dy2st reads; or decide the condition "
                "with a Python value.")
        raise PythonEffectError(
            f"the {what} changes the {describe(key)} (a Python value from outside the function's "
            "arguments) while it is traced: the condition is a traced value, so the side is traced "
            "whatever the data says (and a loop body once for every iteration), where eager Python "
            "changes it only when the data takes that side (once per iteration).",
            origin,
            advice=("draw before the `if`/loop and use the value inside it, or draw with `jax.random` and a key "
                    "argument (staged, new on every call)" if key[0] == "r" else
                    f"change {key[2]} outside the `if`/loop, from values the branch returns; or pass it as an "
                    "argument (dy2st writes changes to arguments back)") + "; or decide the condition with a Python value.")


def note_deferred_raise(origin, check: bool = False) -> None:
    """See `GuardSet.note_deferred_raise`."""
    guards = writes.program_guards()
    if guards is not None:
        guards.note_deferred_raise(origin, check)


def deferred_raise_origin():
    """The line of the first staged `if` of the program being traced whose side raises when the
    data takes it (`note_deferred_raise`), or None."""
    scratch = writes.program_scratch()
    raised = scratch.get(_AT_FIRST_RAISE) if scratch is not None else None
    return raised[1] if raised is not None else None


@contextlib.contextmanager
def recorded_inline():
    """Around a converted function run inline into the user's own trace (their `jax.jit`),
    outside any program of dy2st's: what its code reads from outside is recorded for this run
    only, so that a staged loop whose body changes such a value (a context manager appending
    to a module list) unrolls, as eager code under jit runs it, and a staged side that changes
    one is refused, as in a program. (Nothing is checked per call: the user's jit caches what
    the trace read, as it does for eager code.)"""
    if writes.program_guards() is not None:
        yield
        return
    CONTEXT.inline_guards = GuardSet()
    try:
        yield
    finally:
        CONTEXT.inline_guards = None


def note_lookup(obj, name) -> None:
    """See `GuardSet.note_lookup`."""
    guards = writes.program_guards()
    if guards is not None and isinstance(name, str):
        guards.note_lookup(obj, name)


def note_fresh(what: str, state, origin) -> None:
    """`GuardSet.note_fresh` of the program being traced, or of the converted function run
    inline into the user's own jit (`recorded_inline`: no later trace there to make, but a staged
    loop whose body draws unrolls, drawing once per iteration as eagerly, and a staged side that
    draws is refused)."""
    guards = writes.program_guards()
    if guards is not None:
        guards.note_fresh(what, state, origin)


def note(fn, receiver=None) -> None:
    """A user function (a method of `receiver`) runs while a program is traced: guard what it reads."""
    guards = writes.program_guards()
    if guards is not None:
        guards.note(fn, receiver)


def note_implicit(kind: type) -> None:
    """A user's class is called, or its object used, while a program is traced: the code of it
    that Python calls itself is noted (`GuardSet.note_implicit`)."""
    guards = writes.program_guards()
    if guards is not None:
        guards.note_implicit(kind)


def note_passed(value, depth: int = 0) -> None:
    """A value handed to code that calls it itself (a `key=` of `sorted`, `max`, `list.sort`; a
    function given to `map` or `functools.reduce`) while a program is traced: the user's function,
    method, `functools.partial` of one, or callable object, noted as called code is."""
    if isinstance(value, types.FunctionType):
        note(value)
    elif isinstance(value, types.MethodType):
        note(value.__func__, value.__self__)
    elif isinstance(value, functools.partial) and depth < 4:
        for part in (value.func, *value.args, *value.keywords.values()):
            note_passed(part, depth + 1)
    elif callable(value) and is_users_object(value):
        note_implicit(type(value))


def note_program(fn, objects) -> None:
    """A program's function starts while it is traced, given `objects` (its arguments' objects,
    `self` among them): guard what it reads, and the data attributes of those objects' classes
    that its code names (`self.lr`, `t.lr` where `lr` is the class's: a schedule sets
    `Trainer.lr` between calls), as for a method's receiver. One per class."""
    guards = writes.program_guards()
    if guards is None:
        return
    guards.note(fn)
    classes = set()
    for obj in objects:
        kind = obj if isinstance(obj, type) else type(obj)  # (a class given as an argument: its own)
        if kind not in classes and is_users_class(kind):
            classes.add(kind)
            guards.note(fn, obj)
        if isinstance(obj, types.MethodType) and is_users_object(obj.__self__):
            guards.note_receiver(obj)


# -- what a function reads ------------------------------------------------------------------------

# What reads, writes or deletes a global (a class body nested in the function: by name)
_GLOBAL_ACCESS = frozenset({"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME", "STORE_NAME", "DELETE_NAME",
                            "LOAD_FROM_DICT_OR_GLOBALS"})


@functools.lru_cache(maxsize=4096)
def _names(code: types.CodeType) -> tuple:
    """`(global names, cell names, every name)` `code` and its nested code use: the names the
    compiler resolved as global (read, written or deleted), the free ones, and all of
    `co_names` (globals and attribute names: those a module's or class's attributes are
    looked up by, `_attribute_readers`). An attribute's name is no global read: `state.params`
    guarded a global `params` of the module, walked on every call (a flax TrainState step
    beside a global params dict: 140 against 40 us)."""
    names: set = set()
    global_names: set = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        global_names.update(i.argval for i in dis.get_instructions(c) if i.opname in _GLOBAL_ACCESS)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return tuple(sorted(global_names)), code.co_freevars, tuple(sorted(names))


@functools.lru_cache(maxsize=4096)
def _written(code: types.CodeType) -> frozenset:
    """Names `code` (or a function nested in it) assigns as a global or a cell of an enclosing
    function (`global`/`nonlocal`)."""
    names: set = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(i.argval for i in dis.get_instructions(c)
                     if i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL", "STORE_DEREF", "DELETE_DEREF"))
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return frozenset(names)


def _readers(fn: types.FunctionType, receiver=None):
    """`(key, reader)` for each value `fn` may read from outside its arguments: the globals its
    code reads (a name that is no global of `fn` is skipped: a builtin; one bound later is seen
    as a change of the function's globals by no guard).
    A method's `receiver`: the data attributes its class (and the user's classes it derives
    from) hold that the code names, which `self.x` or `cls.x` reads where no instance
    attribute shadows them."""
    global_names, cell_names, all_names = _names(fn.__code__)
    namespace = fn.__globals__
    for name in global_names:
        if name in namespace:
            yield ("g", id(namespace), name), functools.partial(namespace.get, name, _MISSING)
            yield from _attribute_readers(name, namespace[name], all_names)
    if receiver is not None:
        kind = receiver if isinstance(receiver, type) else type(receiver)
        yield from _attribute_readers(kind.__qualname__, kind, all_names)
    for name, cell in zip(cell_names, fn.__closure__ or ()):
        if name != "__class__" and not name.startswith("dy2st_"):
            yield ("c", id(cell), name), functools.partial(_cell_value, cell)
            value = _cell_value(cell)
            if isinstance(value, (types.ModuleType, types.FunctionType, type)):  # (`cfg.K` of a closure's module)
                yield from _attribute_readers(name, value, all_names)
    # a converted copy's defaults are a copy of its original's: `f.__defaults__ = ...` sets the
    # original's, which the next trace's copy takes (the tuple as a whole: one that grows or
    # shrinks moves which parameter each value is the default of)
    original = getattr(fn, "__dy2st_original__", None)
    original = (original() if original is not None else None) or fn
    for attribute in ("__defaults__", "__kwdefaults__"):
        if getattr(original, attribute):
            yield ("d", id(original), f"{fn.__qualname__}.{attribute}"), \
                functools.partial(getattr, original, attribute)


def _classes_reached(fn: types.FunctionType, receiver=None) -> list:
    """The user's classes whose objects `fn` works on that Python may call code of by itself:
    its receiver's, those of the user's objects its globals and cells hold, and the user's
    classes they hold (a descriptor read through its class: `Holder.scale`)."""
    kinds = []
    if receiver is not None:
        kinds.append(receiver if isinstance(receiver, type) else type(receiver))
    global_names, cell_names, _ = _names(fn.__code__)
    values = [fn.__globals__.get(name) for name in global_names]
    values += [_cell_value(cell) for name, cell in zip(cell_names, fn.__closure__ or ()) if name != "__class__"]
    kinds += [type(value) for value in values if is_users_object(value)]
    kinds += [value for value in values if isinstance(value, type)]  # (`Holder.scale` of a descriptor)
    return [kind for kind in kinds if is_users_class(kind)]


# The methods Python calls itself on an object: operators, protocols and attribute access
_IMPLICIT_METHODS = frozenset({
    "__len__", "__bool__", "__iter__", "__next__", "__reversed__", "__contains__", "__getitem__", "__setitem__",
    "__delitem__", "__missing__", "__getattr__", "__getattribute__", "__setattr__", "__delattr__", "__eq__", "__ne__",
    "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__index__", "__int__", "__float__", "__complex__", "__str__",
    "__repr__", "__format__", "__call__", "__get__", "__set__", "__delete__", "__add__", "__radd__", "__iadd__",
    "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__", "__matmul__", "__rmatmul__",
    "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
    "__neg__", "__pos__", "__abs__", "__invert__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
    "__enter__", "__exit__", "__jax_array__", "__array__",
})


def _implicit_code(kind: type) -> list:
    """The functions of the user's class `kind` (and its user bases, and its user metaclass)
    that Python calls itself: its dunders of `_IMPLICIT_METHODS`, the getters, setters and
    deleters of its properties, and the `__get__`/`__set__` of the user's descriptors it holds."""
    found = []
    for klass in (*kind.__mro__, *type(kind).__mro__):
        if not is_users_class(klass):
            continue
        for name, value in vars(klass).items():
            if isinstance(value, property):
                found += [f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType)]
            elif isinstance(value, types.FunctionType) and name in _IMPLICIT_METHODS:
                found.append(value)
            elif is_users_object(value) and not isinstance(value, type):  # a descriptor of the user's
                found += [getattr(type(value), m) for m in ("__get__", "__set__", "__delete__")
                          if isinstance(getattr(type(value), m, None), types.FunctionType)]
    return [f for f in found if not is_library_file(f.__code__.co_filename)]


def _attribute_readers(label: str, holder, names: tuple):
    """`(key, reader)` for the attributes of a user's module or class the code names
    (`config.DEBUG`, `Defaults.lr`): the module or class itself is code, not guarded, but its
    data attributes are read on every call eagerly. (`co_names` mixes globals and attribute
    names: an attribute the code never reads through this holder is guarded needlessly, which
    costs a check, never a wrong answer.) A library's module or class is machinery: not read."""
    if isinstance(holder, types.ModuleType):
        if not _users_module(holder):
            return
        holders = [holder]
    elif isinstance(holder, types.FunctionType) and _users_code(holder):
        # a function's own attributes (`f.scale`, `helper.calls += 1`): read where it holds them
        # (one gaining a name is not looked for: every helper named would be guarded)
        if not holder.__dict__:
            return
        holders = [holder]
    elif isinstance(holder, type) and is_users_class(holder):
        # a class's attribute resolves through its bases: each of the user's classes on the way is
        # read, where it holds the name and where it does not yet (`cls.calls += 1` in a method
        # inherited from a base sets the attribute on the subclass, which then shadows the base's)
        holders = [k for k in holder.__mro__ if is_users_class(k)]
    elif is_users_object(holder):
        # an instance (`model.step(x)` of a global `model`): its own attributes are its token's;
        # what its class holds (a method patched between calls, a class constant) is read here
        holders = [k for k in type(holder).__mro__ if is_users_class(k)]
    else:
        return
    names = [n for n in names if not n.startswith("__")]
    found = [n for n in names if any(n in vars(h) for h in holders)]
    # the names it does not hold: one it gains between calls is read where the trace found
    # none (`try: s = cfg.scale` / `except AttributeError: s = 1.0`); one test per holder
    absent = frozenset(names).difference(found) if not isinstance(holder, types.FunctionType) else ()
    if isinstance(holder, types.FunctionType) and not found:
        return
    for klass in holders:
        attributes = vars(klass)
        shown = klass.__qualname__ if klass is not holder else label
        for name in found:
            yield ("a", id(klass), f"{shown}.{name}"), _owned(functools.partial(attributes.get, name, _MISSING), klass)
        if absent:
            yield ("n", id(klass), f"{shown}.{{{', '.join(sorted(absent))}}}"), \
                _owned(functools.partial(attributes.keys().isdisjoint, absent), klass)


def _users_module(module: types.ModuleType) -> bool:
    """A module of the user's: from a file of theirs, or made at run time (`types.ModuleType("cfg")`,
    no file) under a name no library has."""
    filename = getattr(module, "__file__", None)
    if filename is not None:
        return not is_library_file(filename)
    return not is_library_module(getattr(module, "__name__", None)) and module.__name__ not in sys.builtin_module_names


def _held(value):
    """`(item, kind, path)` for each list ('l'), dict ('d'), set ('s'), plain object ('o') and
    builtin iterator ('i') `value` is or holds, walked through tuples, lists, dicts, objects and
    the defaults of the user's functions, to the tokens' bound; `path`: the `("i", index)`,
    `("k", key)`, `("a", name)` steps from `value` (what `static_outputs.Outside` follows)."""
    seen, stack, budget = set(), [(value, ())], _WALK_LIMIT
    while stack and budget > 0:
        item, path = stack.pop()
        if type(item) is types.FunctionType and _users_code(item):  # its defaults (`f.__defaults__[0]`)
            stack.extend((getattr(item, a), (*path, ("a", a))) for a in ("__defaults__", "__kwdefaults__"))
            continue
        if isinstance(item, tuple):
            stack.extend((v, (*path, ("i", i))) for i, v in enumerate(item))
            continue
        if iterator_position(item) is not None and not hasattr(item, "__dict__"):
            yield item, "i", path
            continue
        kind = "s" if type(item) in (set, frozenset) else node_kind(item)
        if kind is None and is_users_object(item) and hasattr(item, "__dict__"):
            kind = "o"  # (a registered pytree of the user's: its attributes put back too)
        if kind is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item, kind, path
        steps = (enumerate(item) if kind == "l" else item.items() if kind == "d"
                 else vars(item).items() if kind == "o" else ())
        step = {"l": "i", "d": "k", "o": "a"}.get(kind)
        for key, v in steps:
            budget -= 1
            stack.append((v, (*path, (step, key))))


def _step_text(step) -> str:
    """A `_held` path step as code: `.name`, `["key"]`, `[0]`."""
    kind, name = step
    return f".{name}" if kind == "a" else f"[{name!r}]"


def _contents_of(value) -> list:
    """`(list, dict or object of the user's, a copy of its items or attributes)` and `(builtin
    iterator, its index)` for each one `value` is or holds (`_held`): what `GuardSet.put_back`
    refills (`_refill`), a list nested in a global dict or a default's list as much as a global
    list."""
    found = []
    for item, kind, _ in _held(value):
        if kind == "i":
            at = iterator_at(item)  # (a list's, a tuple's, a string's iterator: its index)
            if at is not None:
                found.append((item, at))
        elif type(item) in (list, dict):  # (a subclass: not refilled)
            found.append((item, type(item)(item)))
        elif kind == "o" and is_users_object(item):
            found.append((item, dict(vars(item))))
    return found


def _refill(contents: list) -> None:
    """Put back what `_contents_of` copied, where it changed."""
    writes.restore_items((c, items) for c, items in contents if type(c) in (list, dict))
    for obj, saved in contents:
        if type(saved) is IteratorAt:
            now = iterator_at(obj)
            if now is None or now.index != saved.index or now.sequence is not saved.sequence:
                rewind(obj, saved)
        elif type(obj) not in (list, dict) and _changed_attributes(vars(obj), saved):
            vars(obj).clear()
            vars(obj).update(saved)


def _changed_attributes(now: dict, saved: dict) -> bool:
    """Whether an object's attributes are other than `saved`, by identity (`!=` of two dicts
    would compare arrays by value)."""
    return now.keys() != saved.keys() or any(now[k] is not v for k, v in saved.items())


def _owned(reader: functools.partial, holder) -> functools.partial:
    """`reader` of a class's (or module's) attribute, knowing its holder (`_rebind` sets it)."""
    reader.holder = holder
    return reader


def _read_state(get, put):
    """A generator's state (`get()`); `put` puts it back (`_rebind`)."""
    return get()


def _rebind(key, reader, value) -> None:
    """Give the name `key` guards the `value` it read before (`_MISSING`: unbound, absent):
    what `reader` reads, written back (`GuardSet.put_back`)."""
    kind = key[0]
    if kind == "r":  # a generator's state, or a clock's count (nothing to put back)
        if isinstance(reader, functools.partial):
            reader.args[1](value)
        return
    if kind == "n":  # names absent then: those the holder gained since are removed
        (absent,) = reader.args
        for gained in absent & set(vars(reader.holder)):
            delattr(reader.holder, gained)
        return
    if kind == "c":
        (cell,) = reader.args
        if value is _MISSING:
            del cell.cell_contents
        else:
            cell.cell_contents = value
        return
    if kind == "d":
        function, attribute = reader.args
        setattr(function, attribute, value)
        return
    name = reader.args[0]  # a global, or an attribute of a class or module of the user's
    holder = getattr(reader, "holder", None)
    if holder is None or isinstance(holder, types.ModuleType):
        namespace = reader.func.__self__ if holder is None else vars(holder)
        if value is _MISSING:
            namespace.pop(name, None)
        else:
            namespace[name] = value
    elif value is _MISSING:
        if name in vars(holder):
            delattr(holder, name)
    else:
        setattr(holder, name, value)


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # empty: not bound yet
        return _MISSING


def _package(tp) -> str:
    return (getattr(tp, "__module__", None) or "").split(".")[0]


def _users_code(value) -> bool:
    """A function or class of the user's (also one wrapped: a method, a partial, a decorator's
    wrapper, a StaticFunction, a class's staticmethod): guarded by identity, as a notebook cell
    that defines `helper` again or a test that patches `Model.step` rebinds it between calls.
    Modules and a library's code are machinery, assumed to stay."""
    for _ in range(4):
        if isinstance(value, type):
            return is_users_class(value)
        if isinstance(value, types.FunctionType):
            return not (is_library_module(value.__module__) or is_library_file(value.__code__.co_filename))
        inner = getattr(value, "__wrapped__", None) or getattr(value, "__func__", None)
        if inner is None and isinstance(value, functools.partial):
            inner = value.func
        if inner is None:
            return False
        value = inner
    return False


def _is_code(value) -> bool:
    """Modules, functions, classes, and library callables: guarded by identity where they are
    the user's (`_users_code`), else not at all."""
    if isinstance(value, _CODE):
        return True
    tp = type(value)
    if tp in _DATA or isinstance(value, (jax.Array, np.ndarray, np.generic, list, dict, tuple, set, frozenset)):
        return False
    return _package(tp) in OPAQUE_MODULES or (callable(value) and not hasattr(value, "__dict__"))


# -- tokens ---------------------------------------------------------------------------------------

def _fast_check(reader, value, token):
    """A test of one guard as cheap as its value allows: the same object, for a value whose
    token is its identity all the way down (code, a jax array, a tuple of those and of numbers:
    nothing in it can change in place); equal type and value for a number or string; else the
    token walk."""
    if value is _MISSING:  # (not there yet: a global, a class attribute)
        return lambda: reader() is _MISSING
    if type(value) in _SCALARS:
        kind = type(value)

        def same_scalar():
            now = reader()
            return type(now) is kind and now == value

        return same_scalar
    if type(value) is float:  # by its bits: -0.0 is not 0.0, and a nan is itself
        bits = value.hex()

        def same_float():
            now = reader()
            return now is value or (type(now) is float and now.hex() == bits)

        return same_float
    if _identity_safe(token) or is_frozen_config(value):  # (a config cannot change: rebinding it can)
        return lambda: reader() is value
    if type(value) is dict and len(value) <= 16 and all(type(v) in _DATA for v in value.values()):
        # a dict of numbers and strings (`f.__kwdefaults__`, a small config): the same dict, holding
        # the same objects (one set again, equal or not, traces again), without a walk per call
        items = tuple(value.items())

        def same_items():
            now = reader()
            return now is value and len(now) == len(items) and all(now.get(k, _MISSING) is v for k, v in items)

        return same_items
    return lambda: _freeze(reader(), []) == token


def _identity_safe(token) -> bool:
    if not isinstance(token, tuple) or not token:
        return False
    head = token[0]
    if head in ("object", "array"):
        return True
    if isinstance(head, type) and issubclass(head, (tuple, frozenset)):  # (a namedtuple too)
        return all(_identity_safe(t) or (isinstance(t, tuple) and t and t[0] in _DATA) for t in token[1])
    return False

def _freeze(value, kept: list):
    """A token equal to another value's exactly when eager code reading them could not tell
    them apart (to the walk's bound)."""
    budget = [_WALK_LIMIT]
    return _token(value, kept, budget, set())


def _token(value, kept, budget, visiting):
    tp = type(value)
    if tp in _SCALARS:
        return tp, value
    if tp is float:
        return tp, value.hex()
    if value is _MISSING:
        return _MISSING
    if isinstance(value, jax.Array):
        kept.append(value)
        return "array", id(value)
    if isinstance(value, np.generic):  # a numpy scalar (`LR = np.float32(1e-3)`): by type and bits
        return tp, value.tobytes() if value.dtype != object else id(value)
    if isinstance(value, np.ndarray):
        kept.append(value)
        if value.size <= _NUMPY_LIMIT and value.dtype != object:
            return "numpy", id(value), value.shape, value.dtype.str, value.tobytes()
        return "numpy", id(value)
    position = iterator_position(value)
    if position is not None:  # (`_is_code` would take a builtin iterator for machinery)
        kept.append(value)
        return "iterator", id(value), position
    if type(value) is functools.partial:  # (its arguments can change in place: `p.keywords["c"] = 2`)
        kept.append(value)
        return "partial", id(value), _token((value.args, value.keywords), kept, budget, visiting)
    if type(value) is types.MethodType and is_users_object(value.__self__) and budget[0] > 0:
        kept.append(value)  # (a bound method runs on its receiver's attributes: they are its token's)
        return "method", id(value), _token(value.__self__, kept, budget, visiting)
    if _is_code(value) or budget[0] <= 0:
        kept.append(value)
        return "object", id(value)
    key = id(value)
    if key in visiting:
        return "cycle", key
    visiting.add(key)
    try:
        if isinstance(value, (list, tuple)):
            budget[0] -= len(value)
            return tp, tuple(_token(v, kept, budget, visiting) for v in value)
        if isinstance(value, dict):
            budget[0] -= len(value)
            return tp, tuple((_token(k, kept, budget, visiting), _token(v, kept, budget, visiting))
                             for k, v in value.items())
        if isinstance(value, (set, frozenset)):
            budget[0] -= len(value)
            return tp, frozenset(_token(v, kept, budget, visiting) for v in value)
        attributes = getattr(value, "__dict__", None)
        kept.append(value)
        if attributes is None:
            return "object", id(value)
        budget[0] -= len(attributes)
        return tp, id(value), tuple((k, _token(v, kept, budget, visiting)) for k, v in attributes.items())
    finally:
        visiting.discard(key)
