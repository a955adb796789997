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

What each program traces, and what its traces show about the route calls take, are not this
module's: `program_body.ProgramBody` and `call_policy.CallPolicy`.

Before (jit's own cache, unbounded, no per-signature entry to drop):
    jax.jit(fn)(x)
After:
    shared(x)                # up to max_programs signatures: jax.jit(fn) recording its traces
    table[(x.aval,)](x)      # beyond: OrderedDict key -> jax.jit(fn) for that key only, LRU
"""

from __future__ import annotations

import collections
import dataclasses
import decimal
import functools
import inspect
import threading
import weakref
from typing import Callable

import jax
import numpy as np

from dy2st.call_policy import (ARRAY_IMPL, KEY_ARRAY, PLAIN_STATICS, PYTHON_SCALARS, AmbiguousLeaf, CallPolicy, ContainerEffect,
                               OrderObserved)
from dy2st.config import config, log, logger
from dy2st.errors import InputSignatureError, RuntimeChecks
from dy2st.input_spec import user_origin
from dy2st.program_body import ProgramBody
from dy2st.runtime import key_order
from dy2st.runtime.values import ARRAY_TYPES, is_frozen_config, iterator_position
from dy2st.state import refuse_slotted

_FAST_TYPES = frozenset({ARRAY_IMPL})
DEFAULT_MAX_PROGRAMS = 64
_GENERAL = object()  # first element of the keys of programs with static leaves
_ORDERED = object()  # first element of `(_ORDERED, key orders, key)`: dict arguments out of sorted order
_flatten = jax.tree_util.tree_flatten
_NO_KWARGS: dict = {}  # never written: `(args, {})`'s structure without a new dict per call


def _ambiguous(avals) -> bool:
    """Whether a leaf has the jit signature of a Python scalar (a weak-typed or bool 0-d
    array); a weak-typed array with dims (`jnp.where(c, 2.0, 0.0)`) has not."""
    return any(not a.shape and (a.weak_type or a.dtype == bool) for a in avals)




_ARRAY_ONLY = frozenset({ARRAY_IMPL, KEY_ARRAY})  # (the shared jit takes typed PRNG keys as jit does)


def _arrays_key(args, kwargs, leaves=None, treedef=None) -> tuple:
    """The key of a call whose leaves are all arrays: their avals for positional arrays, else
    `(treedef, *avals)` (a one-leaf container, `((x,),)`, has as many leaves as arguments but
    more nodes). Concrete arrays or tracers (inside the shared jit's trace)."""
    if leaves is None:
        leaves, treedef = _flatten((args, kwargs))
    avals = tuple(map(_aval, leaves))
    if not kwargs and len(leaves) == len(args) and treedef.num_nodes == len(args) + 3:
        return avals
    return (treedef, *avals)


def _statics_key(args) -> tuple | None:
    """`(key, array leaves)` of positional arguments that are each a concrete array, a Python
    int, float, bool or string (its type and value: `_static_token`) or None, or a tuple, list
    or dict of arrays (nested, with None): a key that tells apart whatever `ProgramCache._key`
    does (the structure, each dict's key order, the avals), built at a fraction of the cost,
    and the arrays in jit's flatten order. None for any other argument.
    On the hit path of such calls (`ProgramCache.program_for_statics`): each step inline."""
    key, arrays = [], []
    for a in args:
        kind = type(a)
        if kind is ARRAY_IMPL:
            key.append(a.aval)
            arrays.append(a)
        elif kind is int or kind is bool or kind is str:
            key.append((kind, a))  # (`_static_token`'s, without the call)
        elif kind is float:
            key.append((kind, a.hex()))  # (`_static_token`'s)
        elif not _array_tree(a, key, arrays):  # a typed key, None (`mask=None`), a tree of arrays
            token = _config_token(a)
            if token is None:
                return None
            key.append(token)
    return tuple(key), arrays


def _statics_key_of(args, kwargs) -> tuple | None:
    """`_statics_key` of a call with keyword arguments too: their names in the call's order
    (a program is keyed by it: `**kwargs` may observe it), their values after the positional
    ones in jit's flatten order (by sorted name), as the table's program takes its arrays."""
    if not kwargs:
        return _statics_key(args)
    found = _statics_key((*args, *(kwargs[name] for name in sorted(kwargs))))
    return None if found is None else ((tuple(kwargs), found[0]), found[1])


_CONFIG_TOKENS: dict = {}  # id -> (a frozen config, its `_static_token`), for `_config_token`


def _config_token(value):
    """The `_static_token` of a frozen config (`values.is_frozen_config`), or None for anything
    else. It cannot change, so its fields are read once per object (weakly referenced: an id
    whose object is gone is not taken for it)."""
    found = _CONFIG_TOKENS.get(id(value))
    if found is not None and found[0]() is value:
        return found[1]
    if not is_frozen_config(value):
        return None
    token = _static_token(value)
    try:  # (a weak reference: a config the call returns is held by nothing of dy2st's)
        held = weakref.ref(value)
    except TypeError:  # (slotted, without `__weakref__`: not remembered)
        return token
    if len(_CONFIG_TOKENS) >= 256:
        _CONFIG_TOKENS.clear()
    _CONFIG_TOKENS[id(value)] = (held, token)
    return token


def _array_tree(tree, key: list, arrays: list, depth: int = 0) -> bool:
    """Note a tuple, list or dict of concrete arrays (nested, with None) into `key` (each node's
    kind and size, a dict's keys in their order, each array's aval) and its arrays into
    `arrays`, in jit's flatten order (a dict's by sorted key); False for anything else in it."""
    kind = type(tree)
    if kind is ARRAY_IMPL or kind is KEY_ARRAY:
        key.append(jax.typeof(tree))
        arrays.append(tree)
        return True
    if tree is None:
        key.append(None)
        return True
    if depth > 8:
        return False
    if kind is dict:
        order = tuple(tree)
        key.append((dict, order))
        try:
            tree = [tree[k] for k in sorted(order)]
        except TypeError:  # keys of several types
            return False
    elif kind is list or kind is tuple:
        key.append((kind, len(tree)))
    else:
        return False
    for item in tree:  # (a loop, not `all()` of a generator: this runs per call)
        if type(item) is ARRAY_IMPL:
            key.append(item.aval)
            arrays.append(item)
        elif not _array_tree(item, key, arrays, depth + 1):
            return False
    return True


def _aval(leaf):
    """`jax.typeof(leaf)`, read off a concrete array directly (a twentieth of the cost)."""
    return leaf.aval if type(leaf) is ARRAY_IMPL else jax.typeof(leaf)


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
    and `-0.0` are equal, a NaN equals nothing, not even itself), and so the items of a tuple
    or frozenset and the fields of a frozen dataclass; a Decimal by its text (`2` and `2.0`)."""
    kind = type(value)
    if kind in PLAIN_STATICS:  # the common case, on the per-call path: no iterator test
        return kind, value
    if kind is float:
        return kind, value.hex()
    if kind is complex:
        return kind, value.real.hex(), value.imag.hex()
    if kind is range:  # (`range(0) == range(3, 3)`: equal as sequences, not to code reading `.start`)
        return kind, value.start, value.stop, value.step
    if kind in (tuple, frozenset) or kind is decimal.Decimal:  # (`Decimal("2") == Decimal("2.0")`)
        return kind, (str(value) if kind is decimal.Decimal else kind(map(_static_token, value)))
    if dataclasses.is_dataclass(kind) and kind.__hash__ is not None:  # a frozen config: by its fields
        return kind, tuple(_static_token(getattr(value, f.name)) for f in dataclasses.fields(value))
    position = iterator_position(value)  # an iterator the last call advanced: another program
    return (kind, value) if position is None else (kind, value, position)




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


def is_array_leaf(leaf) -> bool:
    """A leaf the program takes as an array: not a numpy string or bytes scalar (`np.str_`),
    which jit refuses and eager code uses as the string it is: a static leaf."""
    return isinstance(leaf, ARRAY_TYPES) and not isinstance(leaf, _TEXT_SCALARS)


_TEXT_SCALARS = (np.str_, np.bytes_, np.void)


def _takes(array) -> bool:
    """Whether jax takes `array` (an argument's leaf) as a program input."""
    try:
        _aval(array)
    except (TypeError, ValueError):
        return False
    return not isinstance(array, np.ma.MaskedArray)


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
        self.max_programs = int(max_programs)
        self.table: collections.OrderedDict = collections.OrderedDict()
        self._programs: dict = {}
        self._pending: dict = {}
        self._lock = threading.Lock()
        self._warned = False
        self._builds = 0  # programs built so far, evicted ones included
        self.policy = policy if policy is not None else CallPolicy()
        # what each program traces (program_body.py): it tells the policy what traces show
        self.body = ProgramBody(self.policy, guards, encode=shardings is None, watch_containers=watch_containers)
        self.body.on_policy_change = self._policy_changed
        self._shared_keys: set = set()  # keys of the programs that live in `shared`
        # `_statics_key` of positional arrays and Python scalars -> (the table's key, its program,
        # whether it takes the arguments as they are): such calls find their program without
        # building the table's key (`program_for_statics`)
        self._by_statics: dict = {}
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
            key = _ordered(key, args, kwargs) if holds_dict else key
            out = self._run(key, args, kwargs)
            if not kwargs:  # (a dict whose order the function observes, a weak-typed scalar leaf)
                self._remember_statics(args, key, takes_arguments=True)
            return out
        if on_traced is not None:
            for leaf in leaves:
                if isinstance(leaf, jax.core.Tracer):
                    return on_traced(args, kwargs)
        key, arrays, statics = self._key(leaves, treedef, args, kwargs, is_array_leaf)
        if statics is None:  # array leaves only (numpy's among them): the program takes the pytrees
            return self._run(key, args, kwargs)
        if containers and not all(type(s) in PYTHON_SCALARS or is_frozen_config(s) for s in statics):
            raise ContainerEffect("a list or dict holds an object")
        out = self._run(key, arrays, {})
        self._remember_statics(args, key, takes_arguments=False, kwargs=kwargs)
        return out

    def _remember_statics(self, args, key, takes_arguments: bool, kwargs=None) -> None:
        """Note the program of `key` under the `_statics_key` of `args` (and keyword arguments,
        for a program that takes the array leaves) that have one, so that such calls find it
        without building the table's key (`program_for_statics`). `takes_arguments`: it takes
        the arguments as they are, not their array leaves."""
        fast = _statics_key_of(args, kwargs)
        fast = fast[0] if fast is not None else None
        if fast is not None and fast not in self._by_statics:
            program = self.table.get(key)
            if program is not None:
                self._by_statics[fast] = (key, program, takes_arguments)

    def program_for_statics(self, args, kwargs=None):
        """`(program, its arguments)` for arguments that are concrete arrays, Python ints,
        floats, bools or strings, frozen configs, and tuples, lists and dicts of arrays
        (`_statics_key`), where a call with the same types, values, structure and shapes (and
        the same keywords, in the same order) built it: a call of it with the arrays is a call
        of the table's (kept recently used). None otherwise."""
        found = _statics_key_of(args, kwargs)
        if found is None:
            return None
        key, arrays = found
        found = self._by_statics.get(key)
        if found is None:
            return None
        try:
            self.table.move_to_end(found[0])
        except KeyError:  # evicted meanwhile
            self._by_statics.pop(key, None)
            return None
        return found[1], (args if found[2] else arrays)

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
        key, specs, _ = self._key(leaves, treedef, args, kwargs, _is_spec_leaf)
        signature = self._signature(key)
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

    def _key(self, leaves, treedef, args, kwargs, leaf_is_array) -> tuple:
        """`(key, array leaves, static leaves or None)` for leaves of any kind (`_ordered`); the
        Signature is derived from the key where a program is built (`_signature`), not per call."""
        arrays, statics, positions = [], [], []
        for i, leaf in enumerate(leaves):
            if leaf_is_array(leaf):
                arrays.append(leaf)
                positions.append(i)
            else:
                statics.append(leaf)
        try:
            avals = tuple(map(_aval, arrays))
        except (TypeError, ValueError):  # a numpy array jax holds no array like: of objects, masked, ...
            raise self._not_an_input(arrays) from None
        if statics:
            statics = tuple(statics)
            key = (_GENERAL, StaticKey((treedef, statics, tuple(positions))), avals)
        else:
            statics = None
            key = avals if not kwargs and len(arrays) == len(args) else (treedef, *avals)
        return (_ordered(key, args, kwargs) if _holds_dict(treedef) else key), arrays, statics

    @staticmethod
    def _signature(key) -> Signature:
        if key and key[0] is _ORDERED:
            return dataclasses.replace(ProgramCache._signature(key[2]), orders=key[1])
        if not key or isinstance(key[0], jax.core.ShapedArray):
            return Signature(((), None), key)
        if key[0] is _GENERAL:
            return Signature(key[1].static_key, key[2])
        return Signature(((), None), key[1:], key[0])

    def _not_an_input(self, arrays) -> InputSignatureError:
        """The error for an argument's numpy array that jax cannot take as an input."""
        bad = next(a for a in arrays if not _takes(a))
        what = ("a masked array (jax would drop its mask)" if isinstance(bad, np.ma.MaskedArray)
                else f"a numpy array of dtype {bad.dtype}")
        return InputSignatureError(
            f"{self._name}: an argument is {what}, which a compiled program cannot take as an input.",
            advice="convert it before the call (`np.asarray(x, dtype=np.float32)`; a masked array's "
            "`x.filled(0)`, with its mask as a second argument), or leave the function unconverted "
            "with dy2st.not_to_static.",
            origin=user_origin(),  # the call that passed it
        )

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
                return self.body(fn, args, kwargs, orders)
        else:
            treedef, statics, positions = signature.static_key
            for value in statics:  # (once per program: a slotted object's identity keys its own)
                refuse_slotted(value)

            def program(*arrays):
                leaves = list(statics)
                for pos, array in zip(positions, arrays):
                    leaves.insert(pos, array)
                args, kwargs = jax.tree_util.tree_unflatten(treedef, leaves)
                return self.body(fn, args, kwargs, orders)

        program.__name__ = program.__qualname__ = getattr(fn, "__name__", "program")
        return jax.jit(program, **self._jit_options(signature))

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
            self._by_statics.clear()  # (it may hold the evicted program)
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
            out = self.body(self._get_fn(), args, kwargs, watcher=watcher)
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

    @property
    def traced(self) -> int:
        """Traces begun so far (each program's, a retrace's, an abandoned one's)."""
        return self.body.traced

    def _policy_changed(self):
        if self.on_shared_change is not None:
            self.on_shared_change()

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
            self._by_statics.clear()
            self._programs.clear()
            self._shared_keys.clear()
            self.shared = self._new_shared()
            if self.on_shared_change is not None:
                self.on_shared_change()


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
