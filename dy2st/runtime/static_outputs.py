"""Outputs that are not arrays, given back as eager code gives them.

A compiled program outputs arrays only: `jax.jit` turns a returned Python number into a
weak-typed array (eager returns the number) and refuses a string. A leaf of a program's
output that is not an array is a constant of its signature (it comes from static inputs and
Python code, which run once per trace), so the program outputs the arrays and carries the
other leaves in its output's tree structure; the call's boundary (`decode_result`)
puts them back. A numpy array is given back as a copy per call, as eager makes a new one.

Before (jit's view of `return x * 2, n, "done"` with `n` a Python int argument):
    (f32[3], weak i32[], <error: str is not a valid JAX type>)
After:
    program -> StaticOutputs([x * 2], where=((1, n), (2, "done")))
    the call returns (array, n, "done")

Values that could not be handed back the same each call (a set, an object, a closure over
traced values) raise ProgramOutputError at the call, instead of jit's error or a wrong value.
"""

from __future__ import annotations

import collections
import collections.abc
import enum
import fractions
import gc
import decimal
import types

import jax
import numpy as np

from dy2st.errors import ProgramOutputError
from dy2st.input_spec import user_origin
from dy2st.runtime import key_order
from dy2st.runtime.writes import CONVERTED_CODES
from dy2st.runtime.formatting import TracedString
from dy2st.runtime.undefined import Undefined
from dy2st.runtime.values import is_frozen_config, node_kind

# Immutable values the program can give back itself on every call.
_CONSTANTS = (bool, int, float, complex, str, bytes, np.generic, np.dtype, type, range, slice,
              type(Ellipsis), type(NotImplemented), types.BuiltinFunctionType,
              fractions.Fraction, decimal.Decimal, enum.Enum)


class _Where:
    """The non-array leaves of one trace's outputs: `(tree structure, ((position, value), ...))`,
    and the key orders of its dicts (`key_order`; None: all sorted). Compared by identity (jax
    keeps it in the output's tree structure; values need no hash)."""

    __slots__ = ("treedef", "statics", "orders", "restore")

    def __init__(self, treedef, statics, orders=None):
        self.treedef = treedef
        self.statics = statics
        self.orders = orders
        self.restore = key_order.Restorer(orders) if orders is not None else _as_it_is


def _as_it_is(tree):
    return tree


class StaticOutputs:
    """A program's array outputs, and where its other outputs go."""

    __slots__ = ("arrays", "where")

    def __init__(self, arrays, where: _Where):
        self.arrays = arrays
        self.where = where

    def join(self):
        """The outputs eager gives: the arrays with the constants back in place (a numpy array
        and a function the call defines are new ones per call, as eagerly; one returned twice
        is one object twice)."""
        leaves = list(self.arrays)
        made: dict = {}
        for position, value in self.where.statics:
            if type(value) in (np.ndarray, _NewFunction):
                key = id(value.fn if type(value) is _NewFunction else value)
                if key not in made:
                    made[key] = value.copy()
                value = made[key]
            leaves.insert(position, value)
        return self.where.restore(jax.tree_util.tree_unflatten(self.where.treedef, leaves))


class _NewFunction:
    """A function the call's own code defines (a nested `def` or lambda of a converted function)
    returned: eager's `def` makes a new function object on every call, so `copy` makes one per
    call, from the same code, defaults and attributes, with new cells holding the same values
    (only constants and functions from outside the call: see `_new_function`)."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def copy(self):
        fn = self.fn
        cells = tuple(types.CellType(c.cell_contents) for c in fn.__closure__ or ())
        new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, cells or None)
        new.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else fn.__kwdefaults__
        new.__qualname__, new.__doc__, new.__module__ = fn.__qualname__, fn.__doc__, fn.__module__
        new.__annotations__ = dict(fn.__annotations__)
        new.__dict__.update(fn.__dict__)
        return new


jax.tree_util.register_pytree_node(
    StaticOutputs,
    lambda s: (s.arrays, s.where),
    lambda where, arrays: StaticOutputs(list(arrays), where),
)


def decode_result(result, arguments=()):
    """What eager returns, from a program's concrete outputs (anything else as it is): the
    outputs that are not arrays put back, then the identities (`Identities`); `arguments`: the
    call's `ArgumentObjects`, which an argument's object the function returns is."""
    if type(result) is StaticOutputs:
        result = result.join()
    if type(result) is Identities:
        return result.decode(arguments)
    return result


def argument_objects(tree) -> list:
    """The objects of registered pytree classes among `tree`'s nodes (a dataclass pytree, an
    Equinox module; not tuples, lists, dicts or None), and its frozen configs (static leaves:
    `values.is_frozen_config`), in jax's flatten order: the same order for
    a call's arguments as for those a program traced with (one tree structure). (A tuple
    argument returned comes back as an equal new tuple: keeping its identity would send every
    optax step, whose state passes empty namedtuples through, to the decoding path, 70 us a call.)"""
    return walk_arguments(tree)[0]


def walk_arguments(tree) -> tuple[list, list]:
    """`(argument_objects(tree), its leaves)`, in one walk."""
    found = []

    def note(node):
        if _is_iterator(node):
            return True
        # (lists and dicts, their subclasses among them, are the caller's by other means: lifted)
        if node is not None and not isinstance(node, (tuple, list, dict, jax.Array)) \
                and (not jax.tree_util.all_leaves([node]) or is_frozen_config(node)):
            found.append(node)  # (a frozen config: a static leaf keyed by its fields, the caller's as it is)
        return False

    leaves, _ = jax.tree_util.tree_flatten(tree, is_leaf=note)
    return found, leaves


def _is_iterator(value) -> bool:
    """An iterator or generator: a leaf of the arguments' walks (jax warns that it will stop
    treating Python iterables it cannot flatten as leaves)."""
    return isinstance(value, collections.abc.Iterator)


class ArgumentObjects:
    """A call's `argument_objects`, walked when a decode first needs one (a program that returns
    an argument's object as it is: eagerly that same object)."""

    __slots__ = ("tree", "_found")

    def __init__(self, *tree):
        self.tree, self._found = tree, None

    def __getitem__(self, index: int):
        if self._found is None:
            self._found = argument_objects(self.tree)
        return self._found[index]


def split(outputs, origin=None):
    """`outputs`, or StaticOutputs when some leaves are not arrays or some dict's keys are not
    in sorted order (which the program's outputs would not keep) (called while tracing; a value
    no program can give back is refused at `origin`, the function's return)."""
    leaves, treedef = jax.tree_util.tree_flatten(outputs)
    statics = tuple((i, leaf) for i, leaf in enumerate(leaves) if not isinstance(leaf, jax.Array))
    orders = key_order.orders_of(outputs)
    if not statics and orders is None:
        return outputs
    statics = tuple((i, _new_function(value) or _check_constant(value, origin) or value) for i, value in statics)
    arrays = [leaf for leaf in leaves if isinstance(leaf, jax.Array)]
    return StaticOutputs(arrays, _Where(treedef, statics, orders))


def _new_function(value) -> _NewFunction | None:
    """A `_NewFunction` for a function the call's code defined whose defaults, attributes and
    cells hold only constants, modules (the runtime's, which converted code reads through a
    cell) or functions from outside the call (a closure over a Python
    number argument: `def add(v): return v + k`); None for any other value. (A mutable default,
    or a cell holding a list, would be one object shared by every call's function.)"""
    if not (isinstance(value, types.FunctionType) and value.__code__ in CONVERTED_CODES):
        return None
    held = [*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values(), *value.__dict__.values(),
            *(c.cell_contents for c in value.__closure__ or () if _bound(c))]
    if all(isinstance(v, (*_CONSTANTS, types.ModuleType)) or v is None
           or (isinstance(v, types.FunctionType) and v.__code__ not in CONVERTED_CODES)
           for v in held) and all(_bound(c) for c in value.__closure__ or ()):
        return _NewFunction(value)
    return None


def _bound(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _check_constant(value, origin=None) -> None:
    if isinstance(value, (*_CONSTANTS, np.ndarray)):
        return
    if isinstance(value, TracedString):
        raise ProgramOutputError(
            "the function returns a string formatted from a traced value: its text exists only when "
            "the program runs, and a compiled program gives back arrays and the constants of its trace.",
            origin=value.origin,
            advice="return the value itself and format it after the call (or print it here: prints "
            "run when the program runs).")
    if isinstance(value, Undefined):  # (its class's name, `DeadValue`, means nothing to the user)
        raise ProgramOutputError(
            f"the function returns {'a variable' if ' ' in value.name else repr(value.name)} that no statement "
            "assigned on the path taken: eager Python "
            "raises UnboundLocalError where such a variable is read (an `except` may have caught it there), "
            "while dy2st notices an unbound variable only where it is used.",
            origin=value.origin or user_origin(),
            advice="assign the variable before the `if` or loop that may leave it unassigned (a default such as "
            "`None`), rather than catching UnboundLocalError.",
        )
    if isinstance(value, frozenset) and all(isinstance(v, _CONSTANTS) for v in value):
        return
    if isinstance(value, types.FunctionType) and not value.__closure__ and value.__code__ not in CONVERTED_CODES:
        return  # a function from outside the call (a module's): the same object every call
    if isinstance(value, (jax.custom_jvp, jax.custom_vjp)):
        return  # a module's decorated function (`jax.nn.relu`, an Equinox MLP's activation): one object
    kind = type(value).__name__
    raise ProgramOutputError(
        f"the function returns a {kind}, which is not an array: a compiled program gives back "
        "arrays, and Python constants (numbers, strings, numpy values) made while tracing; "
        f"a {kind} made once there would be the same object on every call, where eager code "
        "makes a new one each time.",
        origin=origin or user_origin(),
        advice=f"return arrays (or numbers, strings) and build the {kind} from them after the "
        "call; or leave this function unconverted with dy2st.not_to_static.",
    )


# -- identities ----------------------------------------------------------------------------------
# A program's outputs cross jit's boundary as a pytree, which loses what Python's objects have
# beyond their values: the same list returned twice comes back as two lists, an argument the
# function returns comes back as a copy (stale, where the call changed the caller's object), and
# a set or an object of a plain class cannot cross at all. `encode` notes these while tracing and
# `Identities.decode` rebuilds them after each call, as eager makes them:
#
# Before (jit's view of `t = [x]; return t, t, {1, 2}, cache` with `cache` a dict argument):
#     ([x], [x], <error: set>, {copy of cache})
# After:
#     Identities(tree=(Ref(0), Ref(0), Ref(1), StateNode(3)), entries=[Entry(list, [x]), Entry(set, [1, 2])])
#     the call returns (t, t, {1, 2}, cache) with t one new list and cache the caller's dict.


class _Ref:
    """A shared, self-containing or special container of the outputs: entry `index`."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class _StateNode:
    """A list, dict or object of the caller's state (an argument lifted as state, or one reached
    from it): node `index` of the state's walk after the call (`dy2st.state.Layout`)."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class Outside:
    """A list, dict, set or object the function reached outside its arguments (a global, a
    closure's, a default, a class attribute: what the guards read) and returned: eager's
    same object, found again per call along `path` from what `reader` reads then."""

    __slots__ = ("reader", "path")

    def __init__(self, reader, path: tuple):
        self.reader, self.path = reader, path

    def resolve(self):
        value = self.reader()
        for step, key in self.path:
            value = getattr(value, key) if step == "a" else value[key]
        return value


class _Entry:
    """One container rebuilt per call: its kind ('l', 'd', 'o', 's'), type, keys (a dict's or
    an object's attribute names) and contents (the program's outputs, encoded)."""

    __slots__ = ("kind", "type", "keys", "values")

    def __init__(self, kind, tp, keys, values):
        self.kind, self.type, self.keys, self.values = kind, tp, keys, values

    def shell(self):
        tp = self.type
        if self.kind == "d" and tp is collections.defaultdict:
            return collections.defaultdict(self.keys[0])
        if self.kind in ("l", "d", "s"):
            return tp() if tp in (list, dict, set) else tp.__new__(tp)
        return tp.__new__(tp)

    def fill(self, shell, values) -> None:
        kind = self.kind
        if kind == "l":
            list.extend(shell, values)
        elif kind == "s":
            set.update(shell, values)
        elif kind == "d":  # item by item: an OrderedDict keeps its order in its own links, not dict's
            setitem = dict.__setitem__ if type(shell) in (dict, collections.defaultdict) else type(shell).__setitem__
            for key, value in zip(self.keys[1], values):
                setitem(shell, key, value)
        else:
            vars(shell).update(zip(self.keys[1], values))


class _Writes:
    """An Identities' `writes`, as the static part of its tree structure: equal where the same
    attributes get the same values (by identity: values need no hash), as two sides of a
    staged `if` with none are."""

    __slots__ = ("writes",)

    def __init__(self, writes):
        self.writes = writes

    def _shape(self) -> tuple:
        return tuple((index, tuple(attributes)) for index, attributes in self.writes)

    def __eq__(self, other):
        return type(other) is _Writes and self._shape() == other._shape() and all(
            a[name] is b[name] for (_, a), (_, b) in zip(self.writes, other.writes) for name in a)

    def __hash__(self):
        return hash(self._shape())


class Identities:
    """Outputs whose containers' identities (and kinds jit cannot carry) are rebuilt per call;
    `writes`: `(argument object index, {attribute: value})` set on the call's arguments' objects
    (`ArgumentObjects`) as the traced call set them, Python values the same on every call."""

    __slots__ = ("tree", "entries", "writes")

    def __init__(self, tree, entries, writes=()):
        self.tree, self.entries, self.writes = tree, entries, tuple(writes)

    def __repr__(self):  # as the value it stands for (an error message describes its leaves)
        try:
            return repr(self.decode())
        except Exception:  # a node of the caller's state, which only a call supplies
            return "a value holding an object from before the `if`"

    def decode(self, state_nodes=()):
        """The outputs eager gives: each entry a new container (shared where eager shares it),
        each state node the caller's live object."""
        shells = [entry.shell() for entry in self.entries]

        def resolve(value):
            tp = type(value)
            if tp is _Ref:
                return shells[value.index]
            if tp is _StateNode:
                return state_nodes[value.index]
            if tp is Outside:
                return value.resolve()
            if tp is list:
                return [resolve(v) for v in value]
            if tp is dict:
                return {k: resolve(v) for k, v in value.items()}
            if tp is collections.defaultdict:
                return collections.defaultdict(value.default_factory, {k: resolve(v) for k, v in value.items()})
            if isinstance(value, tuple):
                items = [resolve(v) for v in value]
                return tp(*items) if hasattr(tp, "_fields") else tp(items)
            return value

        for shell, entry in zip(shells, self.entries):
            entry.fill(shell, [resolve(v) for v in entry.values])
        for index, attributes in self.writes:
            target = state_nodes[index]
            for name, value in attributes.items():
                object.__setattr__(target, name, value)
        return resolve(self.tree)


def holds_callers(structure) -> bool:
    """Whether a value of this tree structure holds a state node: a list or dict of the caller's,
    or an object from before a staged `if` (`control_flow._CallersContainers`)."""
    value = jax.tree_util.tree_unflatten(structure, [None] * structure.num_leaves)
    if type(value) is not Identities:
        return False
    stack = [value.tree, *(entry.values for entry in value.entries)]
    while stack:
        node = stack.pop()
        if type(node) is _StateNode:
            return True
        if isinstance(node, (list, tuple)):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
    return False


_register = jax.tree_util.register_pytree_node
_register(_Ref, lambda r: ((), r.index), lambda index, _: _Ref(index))
_register(_StateNode, lambda r: ((), r.index), lambda index, _: _StateNode(index))
_register(Outside, lambda o: ((), o), lambda o, _: o)
_register(_Entry, lambda e: (e.values, (e.kind, e.type, e.keys)),
          lambda aux, values: _Entry(*aux, list(values)))
_register(Identities, lambda i: ((i.tree, i.entries), _Writes(i.writes)),
          lambda writes, children: Identities(*children, writes.writes))


_PLAIN_CONTAINERS = (list, dict, collections.defaultdict)  # rebuilt as they are when held once


def _kind(value, aliases_only: bool) -> str | None:
    """'l', 'd', 'o' (a plain object), 's' (a set), or None: a value the walk leaves to jit
    (with `aliases_only`, anything but a list or dict)."""
    if isinstance(value, (jax.Array, enum.Enum)) or type(value) in _CONSTANT_TYPES:
        return None  # (an enum's member, a Flag's combination too, is a constant the program gives back)
    kind = "s" if isinstance(value, set) else node_kind(value)
    return None if aliases_only and kind not in ("l", "d") else kind


def encode(outputs, state_nodes: dict | None = None, aliases_only: bool = False, writes=(), outside=None):
    """`outputs`, or Identities when some container of them is held twice (or holds itself),
    is a set or a plain object, or is the caller's (`state_nodes`: id -> node index; a list,
    dict or object of the state, or an NNX module of it, rebuilt for the trace), or one from
    outside the arguments (`outside()`: id -> `(reader, path)`, `GuardSet.held_containers`,
    asked only where the outputs hold a container). Called while tracing; the common case
    (arrays in tuples, lists and dicts held once) walks once. `aliases_only`: only lists and
    dicts held twice are noted (a staged `if`'s outputs, whose objects and sets its merge
    keeps as they are)."""
    state_nodes = state_nodes or {}
    counts: dict = {}
    inside: set = set()  # ids of the outputs' containers (for `_check_fresh`)
    special = False

    def count(value):
        nonlocal special
        key = id(value)
        if key in state_nodes:  # (also an NNX module of the caller's, a pytree to `_kind`)
            special = True
            return
        tp = type(value)
        if tp is tuple or isinstance(value, tuple):
            inside.add(key)
            for v in value:
                count(v)
            return
        kind = _kind(value, aliases_only)
        if kind is None:
            return
        seen = counts.get(key)
        counts[key] = (seen or 0) + 1
        inside.add(key)
        if kind == "o":
            inside.add(id(vars(value)))
        if seen:
            special = True
            return
        if not aliases_only and tp not in _PLAIN_CONTAINERS:  # a set, an object, a subclass
            special = True
        for v in _contents(value, kind)[1]:
            count(v)

    count(outputs)
    if counts and outside is not None:
        held = outside()
        outside_nodes = {key: Outside(*held[key]) for key in counts if key in held}
        if outside_nodes:
            state_nodes = {**state_nodes, **outside_nodes}
            special = True
    if not special and not writes:
        return outputs
    entries: list = []
    index: dict = {}
    objects: list = []
    held = {key for key, n in counts.items() if n > 1}

    def build(value):
        key = id(value)
        if key in state_nodes:
            node = state_nodes[key]
            return node if type(node) is Outside else _StateNode(node)
        tp = type(value)
        if isinstance(value, tuple):
            items = [build(v) for v in value]
            return tp(*items) if hasattr(tp, "_fields") else tp(items)
        kind = _kind(value, aliases_only)
        if kind is None:
            return value
        if key in index:
            return _Ref(index[key])
        if key not in held and tp not in _PLAIN_CONTAINERS and aliases_only:
            return value  # (a subclass held once: the merge keeps it as it is)
        keys, values = _contents(value, kind)
        if key not in held and tp in _PLAIN_CONTAINERS:
            built = [build(v) for v in values]
            if kind == "l":
                return built
            made = dict(zip(keys, built))
            return made if tp is dict else collections.defaultdict(value.default_factory, made)
        if kind == "o":
            objects.append(value)
        slot = index[key] = len(entries)
        entry = _Entry(kind, tp, None, None)
        entries.append(entry)
        if kind in ("d", "o"):
            entry.keys = (getattr(value, "default_factory", None), tuple(keys))
        entry.values = [build(v) for v in values]
        return _Ref(slot)

    encoded = Identities(build(outputs), entries, writes)
    if objects:
        _check_fresh(objects, inside)
    return encoded


_CONSTANT_TYPES = frozenset({bool, int, float, complex, str, bytes, type(None)})


def _contents(value, kind) -> tuple:
    """`(keys, values)` of a container the outputs hold."""
    if kind in ("l", "s"):
        return None, list(value)
    if kind == "d":
        return list(value), list(value.values())
    attributes = vars(value)
    return list(attributes), list(attributes.values())


def _check_fresh(objects: list, inside: set) -> None:
    """Objects given back as new ones per call must be ones this call made: an object that
    something besides the outputs holds (a global, a class attribute, the caller) is eager's same
    object on every call, which a program cannot give back. (`inside`: ids of the outputs'
    containers, objects and their attribute dicts.) One scan of the heap, while tracing."""
    for referrer in gc.get_referrers(*objects):
        if not isinstance(referrer, types.FrameType) and id(referrer) not in inside and referrer is not objects:
            held = next((o for o in objects if any(v is o for v in _held_by(referrer))), objects[0])
            kind = type(held).__name__
            raise ProgramOutputError(
                f"the function returns a {kind} that something outside the call holds too (a global, "
                f"a class attribute, an argument's object): eager gives back that same {kind} on "
                "every call, with its attributes as they are then, while a compiled program gives "
                "back new values.",
                origin=user_origin(),
                advice=f"return arrays, numbers or strings (or objects the call makes), and reach the "
                f"{kind} itself after the call; or pass it as an argument (dy2st gives an argument "
                "returned back as the caller's object).",
            )


def _held_by(referrer) -> list:
    if isinstance(referrer, dict):
        return list(referrer.values())
    if isinstance(referrer, (list, tuple, set, frozenset)):
        return list(referrer)
    return list(getattr(referrer, "__dict__", {}).values())
