"""The insertion order of dicts, which JAX's tree functions do not keep.

A dict is a pytree node whose children JAX orders by sorted key: a dict that passes through a
program's outputs or a `lax.cond` comes back with its keys sorted. Eager code keeps insertion
order, and it shows: `list(d)`, `list(d.values())[0]`, `jnp.stack(list(d.values()))`, a loop
over `d.items()`. Where a value crosses such a boundary, the orders of its dicts are noted
(`orders_of`, None when every dict's keys are in sorted order already, the common case) and
put back on the other side (`restore`).

Before::

    return {"logits": y, "aux": z}       # jax.jit gives {"aux": ..., "logits": ...}

After (the call's boundary, `static_outputs`)::

    {"logits": y, "aux": z}

Dicts are found in the order JAX flattens the tree, and inside a dict by sorted key, so the
orders of two values with one tree structure line up one for one.
"""

from __future__ import annotations

import collections
import contextlib

import jax

from dy2st import _jax_compat
from dy2st.runtime import writes

_DICTS = (dict, collections.defaultdict)  # what JAX flattens with sorted keys (OrderedDict keeps its order)


def _is_dict(value) -> bool:
    return type(value) in _DICTS


def _sorted_keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:  # keys of several types: JAX refuses such a dict too; keep them as they are
        return list(d)


def orders_of(tree) -> tuple | None:
    """The key order of each dict in `tree` (see the module docstring), or None when all of
    them are in sorted order."""
    orders: list = []
    unsorted = _collect(tree, orders)
    return tuple(orders) if unsorted else None


def dict_keys(tree) -> list:
    """The keys of each dict in `tree`, in the order `orders_of` notes them (a key order for
    each must be a permutation of them)."""
    keys: list = []
    _collect(tree, keys)
    return keys


def _collect(tree, orders: list) -> bool:
    """Note the key order of each dict in `tree` into `orders` (see the module docstring);
    whether some are out of sorted order. This runs on calls: tuples, lists and dicts are
    walked here, other nodes by jax's flatten (their dicts in its order)."""
    kind = type(tree)
    if kind in _DICTS:
        keys, by_key = tuple(tree), _sorted_keys(tree)
        orders.append(keys)
        unsorted = list(keys) != by_key
        for key in by_key:
            value = tree[key]
            if type(value) not in _NO_DICTS:  # (an array, a number: nothing to note)
                unsorted = _collect(value, orders) or unsorted
        return unsorted
    if kind is tuple or kind is list:
        unsorted = False
        for item in tree:
            if type(item) not in _NO_DICTS:
                unsorted = _collect(item, orders) or unsorted
        return unsorted
    if kind in _NO_DICTS or isinstance(tree, jax.Array):
        return False
    unsorted = False
    for node in jax.tree_util.tree_leaves(tree, is_leaf=_is_dict):
        if type(node) in _DICTS:
            unsorted = _collect(node, orders) or unsorted
    return unsorted


_NO_DICTS = frozenset({_jax_compat.array_type(), int, float, bool, complex, str, bytes, type(None)})


def restore(tree, orders: tuple | None):
    """`tree` with its dicts rebuilt in the key orders `orders_of` noted for a tree of the same
    structure (as it is when `orders` is None)."""
    if orders is None:
        return tree
    return _rebuild(tree, iter(orders))


def _rebuild(tree, orders):
    leaves, treedef = jax.tree_util.tree_flatten(tree, is_leaf=_is_dict)
    if not any(type(node) in _DICTS for node in leaves):
        return tree
    rebuilt = []
    for node in leaves:
        if type(node) in _DICTS:
            order = next(orders)
            values = {key: _rebuild(node[key], orders) for key in _sorted_keys(node)}
            items = ((key, values[key]) for key in order)
            node = dict(items) if type(node) is dict else collections.defaultdict(node.default_factory, items)
        rebuilt.append(node)
    return jax.tree_util.tree_unflatten(treedef, rebuilt)


class Restorer:
    """`restore(tree, orders)` for trees of one structure, called per call (a program's outputs):
    the first tree gives the route to its dicts out of sorted order (`_route_to`), and each call
    rebuilds only the tuples, lists and dicts on it; where a dict sits inside another kind of
    pytree node, `restore` itself."""

    __slots__ = ("orders", "_route")

    def __init__(self, orders: tuple):
        self.orders = orders
        self._route = _UNKNOWN

    def __call__(self, tree):
        if self._route is _UNKNOWN:
            try:
                self._route = _route_to(tree, iter(self.orders))
            except _OtherNode:
                self._route = _OTHER_NODE
        if self._route is _OTHER_NODE:
            return restore(tree, self.orders)
        return tree if self._route is None else _follow(tree, self._route)


_UNKNOWN, _OTHER_NODE = object(), object()  # a Restorer's route before its first tree; none of tuples, lists, dicts


class _OtherNode(Exception):
    """A dict inside a pytree node other than a tuple, list or dict: `restore` rebuilds it."""


_SEQUENCES = (tuple, list)


def _route_to(node, orders):
    """`("s", {index: route})` through a tuple or list (a namedtuple too), `("d", order or None,
    {key: route})` through a dict, to the dicts out of sorted order, in `orders_of`'s walk; None
    where `node` holds none. A call then rebuilds only the containers on the way (an optimizer
    step's `(params, state, {"loss": ..., "acc": ...})`: the tuple and the metrics dict)."""
    kind = type(node)
    if kind in _DICTS:
        order, by_key = next(orders), _sorted_keys(node)
        inner = {key: route for key in by_key if (route := _route_to(node[key], orders)) is not None}
        unsorted = list(order) != by_key
        return ("d", order if unsorted else None, inner) if unsorted or inner else None
    if isinstance(node, _SEQUENCES):
        inner = {i: route for i, item in enumerate(node) if (route := _route_to(item, orders)) is not None}
        return ("s", inner) if inner else None
    if node is None or isinstance(node, jax.Array):
        return None
    if any(type(leaf) in _DICTS for leaf in jax.tree_util.tree_leaves(node, is_leaf=_is_dict)):
        raise _OtherNode
    return None


def _follow(node, route):
    if route[0] == "s":
        items = list(node)
        for i, inner in route[1].items():
            items[i] = _follow(items[i], inner)
        kind = type(node)
        return kind(items) if kind is list or kind is tuple else kind(*items)
    _, order, inner = route
    values = {key: _follow(node[key], sub) for key, sub in inner.items()}
    items = ((key, values[key] if key in values else node[key]) for key in (order or node))
    return dict(items) if type(node) is dict else collections.defaultdict(node.default_factory, items)


# -- dicts whose order a trace may not observe -------------------------------------------------
# A program traced for dict arguments in one key order serves every order jit's dispatch gives
# it (its key sorts the keys), which is right exactly when the function never observes the
# order: `d["w"]` does not, `for k in d`, `d.items()`, `list(d)`, `repr(d)`, returning `d` do.
# While the shared jit traces, the arguments' dicts are `WatchedDict`s noting any such use
# (`watched`); a trace that observed one is given up, and the function's dict arguments are
# keyed by their order from then on (the table).
#
# JAX compares the node types of trees given together (`tree_map(f, params, updates)`, a
# scan's carry), so every dict made from a watched one's structure is a WatchedDict too: JAX
# rebuilds them in sorted key order, as eagerly, so they watch nothing (`derived`), and the
# trace's outputs hold them as plain dicts again (`plain`).


class Watcher:
    """Whether a trace observed the key order of a watched dict (while `active`)."""

    __slots__ = ("active", "observed")

    def __init__(self):
        self.active = False
        self.observed = False

    @contextlib.contextmanager
    def watching(self):
        """While the function runs (inside its program's trace): its uses of the dicts count
        (dy2st's own before and after do not); `observe_all` reaches it through the program."""
        self.active = True
        scratch = writes.program_scratch()
        scratch["order_watcher"] = self
        try:
            yield
        finally:
            self.active = False
            scratch.pop("order_watcher", None)


def observe_if_held(tree) -> None:
    """A staged side's or loop body's state `tree`, which dy2st's machinery takes apart as
    plain dicts: where it holds a watched dict, that counts as observing its order (the trace's
    program is then keyed by it). A side whose state holds none (`l` of `if l > 10:` in a loss
    given the parameters dict) leaves the order unobserved; its code's own reads of a dict
    note themselves."""
    scratch = writes.program_scratch()
    watcher = scratch.get("order_watcher") if scratch is not None else None
    if watcher is not None and watcher.active and not watcher.observed and holds_watched(tree):
        watcher.observed = True


def _observing(name: str):
    """`dict`'s method `name`, noting first that the order was observed."""
    method = getattr(dict, name)

    def observing(self, *args):
        self._observed()
        return method(self, *args)

    observing.__name__ = name
    return observing


class WatchedDict(dict):
    """A dict argument of a trace: reading its order notes it on its watcher. JAX flattens it
    as a dict (sorted keys, no note) and rebuilds a `derived` one, whose watcher is None."""

    __slots__ = ("_dy2st_watcher",)

    def _observed(self):
        watcher = self._dy2st_watcher
        if watcher is not None and watcher.active:
            watcher.observed = True

    __iter__ = _observing("__iter__")
    __reversed__ = _observing("__reversed__")
    keys = _observing("keys")
    values = _observing("values")
    items = _observing("items")
    popitem = _observing("popitem")

    def copy(self):
        self._observed()
        return dict(dict.items(self))

    __repr__ = __str__ = _observing("__repr__")

    def __or__(self, other):
        self._observed()
        return dict.__or__(dict(dict.items(self)), other)

    def __ror__(self, other):
        self._observed()
        return dict.__or__(dict(other), dict(dict.items(self)))

    __ior__ = _observing("__ior__")

    def __reduce_ex__(self, protocol):
        self._observed()
        return dict, (dict(dict.items(self)),)


def _flatten_watched(d):
    """As JAX flattens a dict (sorted keys), without noting an observation of the order."""
    keys = tuple(sorted(dict.keys(d)))
    return [dict.__getitem__(d, k) for k in keys], keys


def _flatten_watched_with_keys(d):
    values, keys = _flatten_watched(d)
    return [(jax.tree_util.DictKey(k), v) for k, v in zip(keys, values)], keys


def derived(items) -> WatchedDict:
    """A dict JAX rebuilt from a watched one's structure: in sorted key order, as eagerly."""
    d = WatchedDict(items)
    d._dy2st_watcher = None
    return d


jax.tree_util.register_pytree_with_keys(
    WatchedDict, _flatten_watched_with_keys, lambda keys, values: derived(zip(keys, values)), _flatten_watched)


def _is_plain_dict(value) -> bool:
    return type(value) is dict


def watched(tree, watcher: Watcher):
    """`tree` with each plain dict in it (at any depth of any pytree) a WatchedDict of
    `watcher`, in the same order."""
    def watch(node):
        if type(node) is not dict:
            return node
        d = WatchedDict((k, watched(v, watcher)) for k, v in node.items())
        d._dy2st_watcher = watcher
        return d

    return jax.tree_util.tree_map(watch, tree, is_leaf=_is_plain_dict)


def _is_derived(value) -> bool:
    return type(value) is WatchedDict and value._dy2st_watcher is None


def _is_derived_or_dict(value) -> bool:
    return type(value) in _DICTS or _is_derived(value)


def plain(tree):
    """`tree` with each `derived` dict in it a plain dict (an argument's stays watched), every
    other dict in its own order (jax would rebuild them sorted: they are not rebuilt by jax)."""
    leaves, treedef = jax.tree_util.tree_flatten(tree, is_leaf=_is_derived_or_dict)
    if not any(_is_derived_or_dict(leaf) for leaf in leaves):
        return tree
    rebuilt = []
    for leaf in leaves:
        if _is_derived(leaf):
            leaf = {k: plain(v) for k, v in dict.items(leaf)}
        elif type(leaf) in _DICTS:
            items = [(k, plain(v)) for k, v in leaf.items()]
            if any(new is not old for (_, new), old in zip(items, leaf.values())):
                leaf = dict(items) if type(leaf) is dict else collections.defaultdict(leaf.default_factory, items)
        rebuilt.append(leaf)
    if all(new is old for new, old in zip(rebuilt, leaves)):
        return tree
    return jax.tree_util.tree_unflatten(treedef, rebuilt)


def holds_watched(tree) -> bool:
    """Whether a dict argument's WatchedDict is among `tree`'s nodes (returned as it is, its
    order would show)."""
    found = []
    jax.tree_util.tree_flatten(
        tree, is_leaf=lambda x: type(x) is WatchedDict and x._dy2st_watcher is not None and not found.append(x))
    return bool(found)
