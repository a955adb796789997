"""Input signatures, the per-function program cache, and ConcretePrograms.

A program is keyed by the pytree structure of the arguments, the abstract value of every array
leaf (shape, dtype, weak type; jax interns these, so a key compares by identity) and the value
of every other leaf (Python scalars and other hashables are static, as in AutoGraph and Paddle).

Calls with positional jax arrays only (the common case) go to one `jax.jit` shared by all
their signatures, so jit's C++ dispatch finds the program and dy2st adds no key of its own:
a cached call is jit's own C++ dispatch (`api._dispatcher`'s front) with no Python of dy2st's. The
shared function records each signature it traces (a ConcreteProgram for `programs`, the
retrace warning). jit cannot drop one signature, so when a function has seen more than
`max_programs` signatures it moves for good to the table below, which can.

The table maps a key to one `jax.jit` of the converted function that only ever sees that
signature, kept in least-recently-used order and bounded by `max_programs`: evicting an entry
drops its jitted function, and with it jit's executables, traces and lowerings. It serves the
other calls (pytrees, keywords, static Python values) from the start, and every call once the
shared function is retired. A miss traces and compiles once per signature even when several
threads miss the same key together: the first thread builds the program, the others wait
(jit does the same for the shared function).

Before (jit's own cache, unbounded, no per-signature entry to drop):
    jax.jit(fn)(x)
After:
    shared(x)                # up to max_programs signatures: jax.jit(fn) recording its traces
    table[(x.aval,)](x)      # beyond: OrderedDict key -> jax.jit(fn) for that key only, LRU
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import inspect
import sys
import threading
from typing import Callable

import jax

from dy2st import _jax_compat
from dy2st.call_policy import AmbiguousLeaf, CallPolicy, ContainerEffect, OrderObserved
from dy2st.config import config, log, logger
from dy2st.errors import (Dy2StaticError, InputSignatureError, OriginInfo, PythonEffectError, RuntimeChecks,
                          StagedBranchError)
from dy2st.input_spec import user_origin
from dy2st.runtime import guards, key_order, static_outputs, writes
from dy2st.runtime.asserts import check_python_ints
from dy2st.runtime.undefined import check_defined
from dy2st.runtime.values import ARRAY_TYPES, is_nnx_object, iterator_position
from dy2st.state import refuse_slotted

ARRAY_IMPL = _jax_compat.array_type()
_FAST_TYPES = frozenset({ARRAY_IMPL})
DEFAULT_MAX_PROGRAMS = 64
_GENERAL = object()  # first element of the keys of programs with static leaves
_ORDERED = object()  # first element of `(_ORDERED, key orders, key)`: dict arguments out of sorted order
_flatten = jax.tree_util.tree_flatten
_NO_KWARGS: dict = {}  # never written: `(args, {})`'s structure without a new dict per call


def _ambiguous(avals) -> bool:
    return any(a.weak_type or (a.dtype == bool and not a.shape) for a in avals)


_PLAIN_STATICS = frozenset({int, float, bool, complex, str, bytes, type(None)})
LIFTED_ROOTS = (list, dict)  # argument types tried as plain inputs before being lifted as state


def _mutables(tree) -> tuple[list, list]:
    """`(lists and dicts, other objects)` in a pytree, at any depth, parents first: the other
    objects are the nodes of registered pytree classes that are not tuples (a dataclass
    pytree, a Flax NNX module or Variable), which code can change in place."""
    containers, objects = [], []

    def note(x):
        tp = type(x)
        if tp in _IMMUTABLE_NODES:
            return False
        if isinstance(x, (list, dict)):
            containers.append(x)
        elif not isinstance(x, (tuple, *ARRAY_TYPES)) and hasattr(x, "__dict__"):
            objects.append(x)  # a leaf (an opaque object) too: the flatten below tells them apart
        return False

    _flatten(tree, is_leaf=note)
    return containers, objects


_IMMUTABLE_NODES = frozenset({ARRAY_IMPL, tuple, type(None), *_PLAIN_STATICS})


def _contents(container) -> tuple:
    """`(keys, values)`: a list's keys are its length."""
    if isinstance(container, list):
        return len(container), list(container)
    return list(container), list(container.values())


def _watched(args, kwargs) -> tuple[list, list]:
    """`(lists and dicts with their contents, (argument, object, flattened object) of the
    other mutable objects)` among the arguments."""
    snapshot, objects = [], []
    for argument in (*args, *kwargs.values()):
        if type(argument) is not ARRAY_IMPL:
            containers, others = _mutables(argument)
            snapshot += [(c, _contents(c)) for c in containers]
            objects += [(argument, o, _flatten(o), dict(vars(o))) for o in others]
    return snapshot, objects


class _ContainerWatch:
    """Whether a trace left its input lists, dicts and pytree objects as eager code would see
    them: lists and dicts with the same contents (by identity) and no new references to them
    (kept in a global, an attribute, a closure); objects of registered pytree classes (a
    dataclass pytree, an NNX module inside a list) with the same leaves and structure. The
    program gets such arguments as values, so a change made in place would not reach the
    caller's objects. (A returned input list is an equal new list, as on the stateful path.)

    `liftable`: whether lists and dicts among the arguments may be lifted as state instead
    (a list or dict argument of its own is a root the stateful path lifts; the call took the
    plain way only because it has no other kind of root: api.StaticFunction._run).
    """

    def __init__(self, args, kwargs, liftable: bool = True):
        self.liftable = liftable and any(type(a) in LIFTED_ROOTS for a in (*args, *kwargs.values()))
        self.snapshot, self.objects = _watched(args, kwargs)  # (a call: its locals are gone below)
        self.recount()

    def recount(self) -> None:
        """Take the references to the watched lists and dicts as they are now (dy2st's own
        records of them made, `writes.note_inputs`)."""
        self.counts = [sys.getrefcount(c) for c, _ in self.snapshot]

    def check(self) -> None:
        """Raise ContainerEffect (the caller lifts the arguments as state instead) where the
        stateful path writes the change back as eager code makes it, else a PythonEffectError."""
        for (c, (keys, values)), count in zip(self.snapshot, self.counts):
            keys_after, values_after = _contents(c)
            if (sys.getrefcount(c) > count or keys_after != keys
                    or any(a is not b for a, b in zip(values_after, values))):
                if self.liftable:
                    raise ContainerEffect("an input list or dict was changed or kept")
                raise PythonEffectError(
                    f"a {type(c).__name__} inside an argument (a tuple or another pytree) is changed in "
                    "place or kept by the function: dy2st passes such contents to the program as "
                    "values, so the caller's object would not see the change.",
                    origin=user_origin(),
                    advice="pass the list or dict as an argument of its own (dy2st then writes changes "
                    "back to it), or return the new contents instead of changing them in place.",
                )
        writes = []
        for argument, obj, (leaves, treedef), attributes in self.objects:
            changed = _python_writes(obj, attributes)
            if changed:  # Python values only (an `eqx.nn.State` that `set` marked used): replayed
                writes.append((obj, changed))
                continue
            leaves_after, treedef_after = _flatten(obj)
            if treedef_after == treedef and all(a is b for a, b in zip(leaves_after, leaves)):
                continue
            # An NNX module in a list or dict argument: the stateful path lifts the list and
            # updates the module in place (nnx.update), as the eager call changes it.
            if self.liftable and type(argument) in LIFTED_ROOTS and is_nnx_object(obj):
                raise ContainerEffect("an NNX object inside an input list or dict was changed")
            raise _object_changed_error(obj, obj is argument)
        return writes


def _python_writes(obj, before: dict) -> dict | None:
    """The attributes the call set on `obj` (a pytree object among the arguments) to values the
    program gives the same on every call: no array, nothing traced (`self._state = _sentinel`
    of an `eqx.nn.State` its `set` used up). None where nothing changed, or not only such
    values (no attribute deleted)."""
    after = vars(obj)
    if after.keys() < before.keys():
        return None
    changed = {k: v for k, v in after.items() if before.get(k, _NOT_SET) is not v}
    if not changed or any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(list(changed.values()))):
        return None
    return changed


_NOT_SET = object()


def _refuse_leaked(changed: dict, out, inputs) -> None:
    """A list or dict outside the function's arguments (a global, a closure's, a class's)
    changed in place in a staged branch keeps the trace's values: put it back, and refuse."""
    found = writes.leaked(changed, out, inputs)
    if not found:
        return
    writes.restore_items((container, before) for _, container, before, _ in found)
    path, origin = found[0][0], found[0][3]
    raise PythonEffectError(
        f"the call changes {path} in place with traced values, a list or dict the function reaches outside its "
        "arguments (a global, a closure's or a class's): a compiled program cannot write the change "
        "back, so it would keep a value of the trace.",
        origin=origin or user_origin(),
        advice=f"pass {path.split('.')[0].split('[')[0]} to the function as an argument (dy2st writes changes "
        "to arguments back), or return the new values and update it after the call.",
    )


def _object_changed_error(obj, is_argument: bool) -> PythonEffectError:
    name = type(obj).__name__
    where = f"an argument of type {name}" if is_argument else f"a {name} inside an argument"
    return PythonEffectError(
        f"{where} is changed in place by the function (an attribute set, a "
        f"Variable written): {name} is a registered pytree, which dy2st passes to the program as "
        "values (its leaves), so the caller's object would not see the change.",
        origin=user_origin(),
        advice=f"return the new {name} (or the new values) instead of changing it in place "
        "(`dataclasses.replace(obj, w=...)`); or pass a Flax NNX module or an object of a plain "
        "class (not a registered pytree) as an argument of its own, whose changes dy2st writes back.",
    )


_ARRAY_ONLY = frozenset({ARRAY_IMPL})


def _arrays_key(args, kwargs, leaves=None, treedef=None) -> tuple:
    """The key of a call whose leaves are all arrays: their avals for positional arrays, else
    `(treedef, *avals)` (a one-leaf container, `((x,),)`, has as many leaves as arguments but
    more nodes). Concrete arrays or tracers (inside the shared jit's trace)."""
    if leaves is None:
        leaves, treedef = _flatten((args, kwargs))
    avals = tuple(map(jax.typeof, leaves))
    if not kwargs and len(leaves) == len(args) and treedef.num_nodes == len(args) + 3:
        return avals
    return (treedef, *avals)


_HOLDS_DICT: dict = {}  # tree structure -> whether it has a dict node


def _holds_dict(treedef) -> bool:
    """Whether the arguments' structure has a dict of two keys or more, whose insertion order
    jit's flattening drops (its keys sorted): the program must see the caller's order
    (`_ordered`). Known per structure after its first call."""
    found = _HOLDS_DICT.get(treedef)
    if found is None:
        if len(_HOLDS_DICT) > 4096:
            _HOLDS_DICT.clear()
        found = _HOLDS_DICT[treedef] = _has_ordered_dict(treedef)
    return found


def _has_ordered_dict(treedef) -> bool:
    data = treedef.node_data()
    if data is not None and ((data[0] is dict and len(data[1]) > 1)
                             or (data[0] is collections.defaultdict and len(data[1][1]) > 1)):
        return True
    return any(_has_ordered_dict(child) for child in treedef.children())


def _ordered(key, args, kwargs):
    """`key`, with the arguments' dicts' key orders when some are not sorted (a program traced
    for one order must not serve another: `list(d)`, a loop over `d.items()`)."""
    orders = key_order.orders_of((args, kwargs))
    return key if orders is None else (_ORDERED, orders, key)


def _static_token(value):
    """What a static leaf is keyed by: its type and value (`1`, `1.0` and `True` are equal in
    Python but three programs: eager's results differ in type), a float by its bits (`0.0`
    and `-0.0` are equal, a NaN equals nothing, not even itself)."""
    kind = type(value)
    if kind in _PLAIN_STATICS:  # the common case, on the per-call path: no iterator test
        return kind, value
    if kind is float:
        return kind, value.hex()
    if kind is complex:
        return kind, value.real.hex(), value.imag.hex()
    position = iterator_position(value)  # an iterator the last call advanced: another program
    return (kind, value) if position is None else (kind, value, position)


_PLAIN_STATICS = frozenset({int, bool, str, bytes, type(None)})


class StaticKey:
    """`(treedef, static leaves, array positions)` as a key: compared by the leaves' tokens
    (`_static_token`), so a program is never reused for a value of another Python type."""

    __slots__ = ("static_key", "_tokens")

    def __init__(self, static_key):
        self.static_key = static_key
        treedef, statics, positions = static_key
        self._tokens = (treedef, tuple(map(_static_token, statics)), positions)

    def __hash__(self):
        return hash(self._tokens)

    def __eq__(self, other):
        return type(other) is StaticKey and self._tokens == other._tokens


def plain_python(tree) -> bool:
    """Whether every leaf of `tree` is a Python number, string, bytes or None (no array, no
    object that may hold one)."""
    return _PLAIN_STATICS.issuperset(map(type, jax.tree_util.tree_leaves(tree)))


def is_array_leaf(leaf) -> bool:
    return isinstance(leaf, ARRAY_TYPES)


def _is_spec_leaf(leaf) -> bool:
    return isinstance(leaf, ARRAY_TYPES) or isinstance(leaf, jax.ShapeDtypeStruct)


@dataclasses.dataclass(frozen=True)
class Signature:
    """The readable form of one program's key.

    `static_key` is `(treedef, static leaves, array positions)` when some leaves are static
    (the program is then a function of the array leaves only), else `((), None)`; `tree` is the
    pytree structure of `(args, kwargs)` when the program takes the arguments' own pytrees.
    """

    static_key: tuple
    avals: tuple
    tree: object = None
    orders: tuple | None = None  # `key_order.orders_of` of the arguments: their dicts' key orders

    def describe(self) -> str:
        arrays = ", ".join(f"{a.dtype.name}{list(a.shape)}" for a in self.avals)
        return f"arrays=({arrays}) static={self.static_key[1]!r}"


class ConcreteProgram:
    """One traced and compilable program: a function of its array inputs.

    Attributes are computed on first access (tracing/lowering/compiling again, off the call path).
    """

    def __init__(self, jitted, signature: Signature):
        self._jitted = jitted
        self.signature = signature

    @property
    def input_spec(self) -> list:
        return [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in self.signature.avals]

    @functools.cached_property
    def _traced(self):
        return _trace(self._jitted, self.signature, self.input_spec)

    @property
    def jaxpr(self):
        return self._traced.jaxpr

    @property
    def output_spec(self):
        return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), self._traced.out_info)

    @functools.cached_property
    def _lowered(self):
        return self._traced.lower()

    def as_text(self) -> str:
        """The program as StableHLO text."""
        return self._lowered.as_text()

    @functools.cached_property
    def compiled(self):
        return self._lowered.compile()

    def cost_analysis(self):
        return self.compiled.cost_analysis()

    def __repr__(self):
        return f"ConcreteProgram({self.signature.describe()})"


def _trace(jitted, signature: Signature, arrays):
    if signature.tree is None:
        return jitted.trace(*arrays)
    args, kwargs = jax.tree_util.tree_unflatten(signature.tree, list(arrays))
    return jitted.trace(*args, **kwargs)


class ProgramCache:
    """Programs of one converted function; see the module docstring.

    `table` maps a key to the jitted function running that signature's program;
    `shared` is the jit for positional arrays (None once retired; see the module docstring).
    Keys come in three kinds, which never
    compare equal: a tuple of avals (positional arrays only; the program takes them as they
    are), `(treedef, *avals)` (pytrees or keywords of arrays; the program takes the arguments
    as they are), `(_GENERAL, StaticKey(static_key), avals)` (some static leaves; the program takes the
    array leaves). Every write to `table` happens under `_lock`; the hit path only reads and
    reorders it (single C-level dict operations, atomic under the GIL).
    """

    def __init__(self, fn: Callable | None, name: str, max_programs: int = DEFAULT_MAX_PROGRAMS,
                 *, get_fn: Callable[[], Callable] | None = None, shardings=None, guards=None,
                 policy: CallPolicy | None = None, watch_containers: bool = False):
        """Programs of `fn`, or of `get_fn()` (called at the first trace: conversion stays lazy).
        `policy`: the record its traces tell what they show (`call_policy`), shared with the
        StaticFunction choosing routes; `watch_containers`: check, while tracing, the lists and
        dicts among the arguments (given as plain inputs: `ContainerEffect` where they need more)."""
        if max_programs is None or int(max_programs) < 1:
            raise ValueError(f"max_programs must be a positive integer, got {max_programs!r}")
        self._get_fn = get_fn if get_fn is not None else (lambda: fn)
        self._name = name
        self._shardings = shardings  # dy2st.sharding.Shardings, or None
        self.guards = guards  # runtime.guards.GuardSet its traces note reads into, or None
        self.max_programs = int(max_programs)
        self.table: collections.OrderedDict = collections.OrderedDict()
        self._programs: dict = {}
        self._pending: dict = {}
        self._lock = threading.Lock()
        self._warned = False
        self._builds = 0  # programs built so far, evicted ones included
        self.traced = 0  # traces begun so far (each program's, a retrace's, an abandoned one's)
        self.policy = policy if policy is not None else CallPolicy()
        self.watch_containers = watch_containers
        self._shared_keys: set = set()  # keys of the programs that live in `shared`
        self.on_shared_change: Callable[[], None] | None = None  # told when `shared` changes role
        self._local = threading.local()  # traces of the shared jit begun by this thread
        self.shared = self._new_shared()

    # -- calling ------------------------------------------------------------------------------
    def __call__(self, args, kwargs=None, on_traced=None, containers=False):
        """Run the program for these arguments, building it on a miss; with any traced leaf
        and an `on_traced`, return `on_traced(args, kwargs)` instead. `containers`: the
        arguments hold lists or dicts as plain inputs; raises ContainerEffect where they need
        lifting as state instead."""
        kwargs = kwargs or _NO_KWARGS
        leaves, treedef = _flatten((args, kwargs))
        if _ARRAY_ONLY.issuperset(map(type, leaves)):  # the program takes the arguments as they are
            # jit's key has no order for a dict: a function that observes it is keyed by it (ours)
            holds_dict = _holds_dict(treedef)
            shared = self.shared
            if (shared is not None and not (holds_dict and (self.policy.orders_observed or kwargs))
                    and not (self.policy.ambiguous_seen and self._ambiguous(args, kwargs, leaves, treedef))):
                try:  # (no `**{}`: each step of the common case shows)
                    return shared(*args, **kwargs) if kwargs else shared(*args)
                except OrderObserved:
                    pass  # this trace observed a dict's order: keyed by it below
                except AmbiguousLeaf:
                    self.policy.ambiguous_seen = True
            key = _arrays_key(args, kwargs, leaves, treedef)
            return self._run(_ordered(key, args, kwargs) if holds_dict else key, args, kwargs)
        if on_traced is not None:
            for leaf in leaves:
                if isinstance(leaf, jax.core.Tracer):
                    return on_traced(args, kwargs)
        key, arrays, signature = self._key(leaves, treedef, args, kwargs, is_array_leaf)
        statics = signature.static_key[1]
        if containers and statics is not None and not _PLAIN_STATICS.issuperset(map(type, statics)):
            raise ContainerEffect("a list or dict holds an object")
        if signature.tree is not None:
            return self._run(key, args, kwargs)
        return self._run(key, arrays, {})

    def call_general(self, args, kwargs):
        return self(args, kwargs)

    @staticmethod
    def _ambiguous(args, kwargs, leaves, treedef) -> bool:
        """Whether the shared jit refuses this signature (`AmbiguousLeaf`); asked only once it
        has refused one, so that such calls go to the table without a failed trace each."""
        key = _arrays_key(args, kwargs, leaves, treedef)
        return not isinstance(key[0], jax.core.ShapedArray) and _ambiguous(key[1:])

    def traces_started(self) -> int:
        """How many traces of the shared jit this thread has begun: a call that raised without
        beginning one was refused by jit's argument check, not by the function."""
        return getattr(self._local, "traces", 0)

    def _run(self, key, args, kwargs):
        table = self.table
        try:
            fn = table.get(key)
        except TypeError:
            raise self._unhashable(key) from None
        if fn is None:
            return self._build(key, self._signature(key), lambda jitted: jitted(*args, **kwargs))
        try:
            table.move_to_end(key)
        except KeyError:  # evicted by another thread meanwhile; fn still works
            pass
        return fn(*args, **kwargs)

    def get_concrete_program(self, args, kwargs) -> ConcreteProgram:
        """The program for these arguments or ShapeDtypeStructs, traced but not run."""
        leaves, treedef = _flatten((args, kwargs))
        key, specs, signature = self._key(leaves, treedef, args, kwargs, _is_spec_leaf)
        shared = self.shared
        if shared is not None and signature.static_key[1] is None and signature.orders is None:
            try:
                _trace(shared, signature, specs)  # records the program (or finds it traced already)
            except AmbiguousLeaf:
                pass  # built in the table below
            with self._lock:
                program = self._programs.get(key)
            if program is not None:
                return program
        try:
            with self._lock:
                program = self._programs.get(key)
        except TypeError:
            raise self._unhashable(key) from None
        if program is None:
            self._build(key, signature, lambda jitted: _trace(jitted, signature, specs))
            with self._lock:
                program = self._programs.get(key) or ConcreteProgram(self._jit_for(signature), signature)
        return program

    def _key(self, leaves, treedef, args, kwargs, leaf_is_array):
        """The key, the array leaves and the Signature, for leaves of any kind (`_ordered`)."""
        key, arrays, signature = self._plain_key(leaves, treedef, args, kwargs, leaf_is_array)
        if _holds_dict(treedef):
            ordered = _ordered(key, args, kwargs)
            if ordered is not key:
                return ordered, arrays, dataclasses.replace(signature, orders=ordered[1])
        return key, arrays, signature

    def _plain_key(self, leaves, treedef, args, kwargs, leaf_is_array):
        arrays, statics, positions = [], [], []
        for i, leaf in enumerate(leaves):
            if leaf_is_array(leaf):
                arrays.append(leaf)
                positions.append(i)
            else:
                statics.append(leaf)
        avals = tuple(map(jax.typeof, arrays))
        if statics:
            static_key = (treedef, tuple(statics), tuple(positions))
            return (_GENERAL, StaticKey(static_key), avals), arrays, Signature(static_key, avals)
        if not kwargs and len(arrays) == len(args):
            return avals, arrays, Signature(((), None), avals)
        return (treedef, *avals), arrays, Signature(((), None), avals, treedef)

    @staticmethod
    def _signature(key) -> Signature:
        if key and key[0] is _ORDERED:
            return dataclasses.replace(ProgramCache._signature(key[2]), orders=key[1])
        if not key or isinstance(key[0], jax.core.ShapedArray):
            return Signature(((), None), key)
        if key[0] is _GENERAL:
            return Signature(key[1].static_key, key[2])
        return Signature(((), None), key[1:], key[0])

    def _unhashable(self, key):
        key = key[2] if key and key[0] is _ORDERED else key
        statics = key[1].static_key[1] if key and key[0] is _GENERAL else ()
        kinds = [type(s).__name__ for s in statics]
        containers = [k for k in kinds if k in ("deque", "bytearray", "OrderedDict", "Counter")]
        return InputSignatureError(
            f"{self._name}: an argument that is not an array must be hashable to be part of the "
            f"program's key, but got {kinds}.",
            advice=(f"pass a list or dict instead of the {containers[0]} (dy2st lifts those and writes the "
                    "function's changes back to them), or pass its items as a tuple of arrays." if containers else
                    "pass arrays for values that change, or make the static argument hashable "
                    "(a tuple instead of a list, a frozenset instead of a set, a frozen dataclass)."),
            origin=user_origin(),  # the call that passed it
        )

    # -- building -----------------------------------------------------------------------------
    def _build(self, key, signature: Signature, use):
        """Build the program for `key` once across threads; return `use(jitted)`.

        The first thread to miss builds (its `use` traces and compiles); others missing the same
        key wait for it, then use the stored program. If building raises, a waiter tries itself.
        """
        me = threading.get_ident()
        while True:
            with self._lock:
                program = self._programs.get(key)
                pending = self._pending.get(key)
                if program is None and (pending is None or pending[1] == me):
                    event = threading.Event()
                    self._pending[key] = (event, me)
                    break
            if program is not None:
                return use(program._jitted)
            pending[0].wait()
        try:
            jitted = self._jit_for(signature)
            result = use(jitted)
        except BaseException:
            with self._lock:
                self._pending.pop(key, None)
            event.set()
            raise
        with self._lock:
            self._insert(key, jitted, signature)
            self._pending.pop(key, None)
        event.set()
        return result

    def _jit_for(self, signature: Signature):
        """A fresh `jax.jit` for one signature (fresh, so dropping it frees its executables)."""
        fn = self._get_fn()
        orders = signature.orders
        if signature.static_key[1] is None:
            def program(*args, **kwargs):
                return self._outputs(fn, args, kwargs, orders)
        else:
            treedef, statics, positions = signature.static_key
            for value in statics:  # (once per program: a slotted object's identity keys its own)
                refuse_slotted(value)

            def program(*arrays):
                leaves = list(statics)
                for pos, array in zip(positions, arrays):
                    leaves.insert(pos, array)
                args, kwargs = jax.tree_util.tree_unflatten(treedef, leaves)
                return self._outputs(fn, args, kwargs, orders)

        program.__name__ = program.__qualname__ = getattr(fn, "__name__", "program")
        return jax.jit(program, **self._jit_options(signature))

    def _outputs(self, fn, args, kwargs, orders=None, watcher=None):
        """What a program returns: `fn`'s outputs, with the outputs that are not arrays and the
        identities jit's boundary loses encoded (`static_outputs`); the call's boundary decodes them. Not with `out_shardings` (they
        fix the outputs' structure): such values stay arrays there. `orders`: the key orders
        of the arguments' dicts, which jit's flattening sorted (`key_order`)."""
        if orders is not None:
            args, kwargs = key_order.restore((args, kwargs), orders)
        self.traced += 1
        python_only = plain_python((args, kwargs))
        effects_before = (RuntimeChecks.traced, writes.staged_prints())
        watch = _ContainerWatch(args, kwargs) if self.watch_containers else None
        encode = self._shardings is None
        with writes.program_containers(self.guards) as changed:
            if watch is not None and watch.snapshot:
                writes.note_inputs(c for c, _ in watch.snapshot)
                watch.recount()
            try:
                out, encoded = self._traced(fn, args, kwargs, watcher, watch, encode)
                if self.guards:
                    self.guards.note_trace_end()
            except BaseException as error:
                # No program comes of this trace (the caller may trace again, lifting the
                # arguments): the lists and dicts outside it that it changed are put back.
                writes.put_back_traced(changed)
                raised_before = guards.deferred_raise_origin()
                if (raised_before is not None and type(error) in StagedBranchError.KEPT_TYPES + (StopIteration,)
                        and not isinstance(error, Dy2StaticError)):
                    raise StagedBranchError.wrapping_after_raise(error, raised_before).with_traceback(
                        error.__traceback__) from error
                if watcher is not None and isinstance(error, Exception) and not isinstance(error, (OrderObserved, ContainerEffect)):
                    # a trace with watched dicts failed: traced again with plain ones (keyed by
                    # their order), where the function's own error, if it is one, comes again
                    self.policy.orders_observed = True
                    raise OrderObserved("a trace with watched dict arguments failed") from error
                raise
        _refuse_leaked(changed, out, (args, kwargs))
        if (python_only and (RuntimeChecks.traced, writes.staged_prints()) == effects_before
                and not any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(encoded))):
            self.policy.staged_nothing = True
        if not encode:
            return out
        result = static_outputs.split(encoded)
        if result is not out and not self.policy.decodes_outputs:
            self.policy.decodes_outputs = True  # calls must resolve outputs: not the direct jit path
            if self.on_shared_change is not None:
                self.on_shared_change()
        return result

    def _traced(self, fn, args, kwargs, watcher, watch, encode: bool) -> tuple:
        """`(fn's outputs, encoded)`, traced, once they are known to make a program; raises
        where they do not (the caller puts back what the trace changed)."""
        # the arguments' objects: pytree ones (an Equinox module), and static ones of the user's classes
        objects, leaves = static_outputs.walk_arguments((args, kwargs))
        guards.note_program(fn, objects + [leaf for leaf in leaves if not isinstance(leaf, jax.Array)])
        mark = _jax_compat.trace_mark()
        with watcher.watching() if watcher is not None else contextlib.nullcontext():
            out = fn(*args, **kwargs)
        code = getattr(inspect.unwrap(fn), "__code__", None)
        if code is not None:  # the numbers rule: a Python int computed on outside a staged `if` or loop too
            check_python_ints(mark, OriginInfo(code.co_filename, code.co_firstlineno, code.co_name))
        if watcher is not None and (watcher.observed or key_order.holds_watched(out)):
            self.policy.orders_observed = True  # this program would serve other orders: given up
            raise OrderObserved("the function observes a dict argument's key order")
        refused = writes.swallowed_refusal()
        if refused is not None:  # the user's own handler caught it while tracing
            raise refused
        # An argument's list changed: the caller lifts it and writes it back. An argument's object
        # given Python values: each call sets them on the caller's (`writes`). An argument's object
        # returned as it is (`return model, y`): eagerly the caller's own (`arguments`).
        arguments = {id(o): i for i, o in enumerate(objects)}
        set_on = watch.check() if watch is not None else []
        set_on = [(arguments[id(obj)], changed) for obj, changed in set_on if id(obj) in arguments]
        # identities and kinds jit's boundary loses, noted (`static_outputs.encode`) before the
        # walk for undefined values, which a self-holding list would not end
        encoded = check_defined(static_outputs.encode(out, arguments, writes=set_on) if encode else out)
        return out, encoded

    def _jit_options(self, signature: Signature) -> dict:
        """`in_shardings`/`out_shardings` for one program (the program takes the array leaves
        when some leaves are static, else the arguments as they are)."""
        if self._shardings is None:
            return {}
        if signature.static_key[1] is None:
            return self._shardings.jit_kwargs()
        treedef, _, positions = signature.static_key
        return self._shardings.jit_kwargs(treedef, positions)

    def _insert(self, key, jitted, signature: Signature):
        """Add a built program (under `_lock`), evicting the least recently used beyond the bound."""
        self.table[key] = jitted
        self._programs[key] = ConcreteProgram(jitted, signature)
        self._built(signature)

    def _built(self, signature: Signature):
        """Count a new program (under `_lock`): keep the bound, log, warn about retracing."""
        self._builds += 1
        count = self._builds
        if len(self._programs) > self.max_programs and self.shared is not None:
            self._retire_shared()
        while len(self.table) > self.max_programs:
            old, _ = self.table.popitem(last=False)
            evicted = self._programs.pop(old, None)
            log(1, "dy2st: %s: evicted the least recently used program (%s)", self._name,
                evicted.signature.describe() if evicted else old)
        log(1, "dy2st: %s: new program #%d for %s", self._name, count, signature.describe())
        if count > config.retrace_warning_threshold and not self._warned:
            self._warned = True
            logger.warning(
                "dy2st: %s has been traced %d times: %s. Arguments that keep changing shape or "
                "Python value cause a new program each; pass changing values as arrays, or fix "
                "shapes with dy2st.InputSpec. f.explain(*args) shows what one signature's program holds.",
                self._name, count, _what_changes([p.signature for p in self._programs.values()], _parameter_names(self._get_fn())),
            )

    # -- the shared jit -----------------------------------------------------------------------
    def _new_shared(self):
        """One `jax.jit` for every signature whose leaves are all arrays (positional arrays, or
        pytrees and keywords of them), recording each one it traces: jax's own dispatch checks
        the shapes, so a call builds no key of ours.

        A fresh Python function each time, so jax's trace caches (keyed by function) start empty.
        """
        jitted = None

        def program(*args, **kwargs):
            self._local.traces = self.traces_started() + 1
            key = _arrays_key(args, kwargs)
            if key and not isinstance(key[0], jax.core.ShapedArray) and _ambiguous(key[1:]):
                raise AmbiguousLeaf("a pytree signature with a weak-typed or bool scalar leaf")
            watcher = None
            if _holds_dict(jax.tree_util.tree_structure((args, kwargs))):
                # Jit's own dispatch reuses this program for a dict with the same keys in another
                # order (its key has none): right only where the function does not observe it.
                if self.policy.orders_observed or kwargs:
                    raise OrderObserved("a dict argument")
                watcher = key_order.Watcher()
                args = key_order.watched(args, watcher)
            checks_before = RuntimeChecks.traced
            out = self._outputs(self._get_fn(), args, kwargs, watcher=watcher)
            if RuntimeChecks.traced != checks_before:
                self._traced_checks()
            self._record_shared(key, jitted)  # after the trace succeeded
            return out

        program.__name__ = program.__qualname__ = self._name.rsplit(".", 1)[-1]
        jitted = jax.jit(program, **self._jit_options(Signature(((), None), ())))
        return jitted

    def _record_shared(self, key, jitted):
        """Called while `jitted` traces a signature: a new program (and maybe the bound reached)."""
        with self._lock:
            if jitted is not self.shared or key in self._programs:  # a retired jit, or known
                return
            signature = self._signature(key)
            self._programs[key] = ConcreteProgram(jitted, signature)
            self._shared_keys.add(key)
            self._built(signature)

    def _traced_checks(self):
        """A trace of the shared jit met a run-time check: its caller must wait for results."""
        self.policy.checks = True
        if self.on_shared_change is not None:
            self.on_shared_change()

    def _retire_shared(self):
        """Move the shared jit's programs into the table (under `_lock`); no new ones go to it.

        They enter in the order they were traced, as the least recently used (jit does not tell
        which it ran last), each an entry pointing at the retired jit, which still holds their
        executables: nothing is traced again, and the retired jit is freed with its last entry.
        """
        retired = self.shared
        moved = [key for key in self._programs if key in self._shared_keys]
        for key in moved:
            self.table[key] = retired
        for key in reversed(moved):
            self.table.move_to_end(key, last=False)
        self._shared_keys.clear()
        self.shared = None
        log(1, "dy2st: %s: more than %d signatures: one jit per signature from now on, least recently used dropped",
            self._name, self.max_programs)
        if self.on_shared_change is not None:
            self.on_shared_change()

    # -- introspection ------------------------------------------------------------------------
    @property
    def programs(self) -> list:
        with self._lock:
            return list(self._programs.values())

    def clear(self):
        """Drop every program (in place: `StaticFunction` holds `table`); calls with positional
        arrays share one jit again."""
        with self._lock:
            self.table.clear()
            self._programs.clear()
            self._shared_keys.clear()
            self.shared = self._new_shared()
            if self.on_shared_change is not None:
                self.on_shared_change()


writes.PROGRAM_BOUNDARIES.add(ProgramCache._outputs.__code__)


def _parameter_names(fn) -> list:
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _leaves(signature: Signature, names: list) -> dict:
    """{"argument 'x'" (plus the leaf's path inside it): its description} for one signature."""
    if signature.static_key[1] is None:
        if signature.tree is None:  # positional arrays only
            return {_argument_label(i, names): _describe_aval(a) for i, a in enumerate(signature.avals)}
        treedef, statics, positions = signature.tree, (), range(len(signature.avals))
    else:
        treedef, statics, positions = signature.static_key
    count = len(statics) + len(signature.avals)
    arrays, rest = dict(zip(positions, signature.avals)), iter(statics)
    values = [_describe_aval(arrays[i]) if i in arrays else f"{next(rest)!r}" for i in range(count)]
    paths, _ = jax.tree_util.tree_flatten_with_path(jax.tree_util.tree_unflatten(treedef, list(range(count))))
    described = {}
    for path, index in paths:
        where, arg, inner = path[0].idx, path[1], path[2:]
        label = _argument_label(arg.idx, names) if where == 0 else f"argument '{arg.key}'"
        kind = "array" if index in arrays else "Python value"
        described[f"{label}{jax.tree_util.keystr(tuple(inner))} ({kind})"] = values[index]
    return described


def _argument_label(position: int, names: list) -> str:
    return f"argument '{names[position]}'" if position < len(names) else f"argument {position}"


def _describe_aval(aval) -> str:
    return f"{aval.dtype.name}{list(aval.shape)}"


def _what_changes(signatures: list, names: list = ()) -> str:
    """Which arguments (and which leaf inside each) differ between the programs' signatures."""
    if len({s.static_key[0] for s in signatures}) > 1:
        return "the structure of the arguments (containers, keyword names, None) keeps changing"
    per_leaf: dict = {}
    for signature in signatures:
        for label, value in _leaves(signature, list(names)).items():
            per_leaf.setdefault(label, []).append(value)
    parts = []
    for label, values in per_leaf.items():
        distinct = list(dict.fromkeys(values))
        if len(distinct) > 1:
            shown = ", ".join(distinct[:4]) + (" and more" if len(distinct) > 4 else "")
            parts.append(f"{label} keeps changing: {shown}")
    return "; ".join(parts) or "signatures differ"
