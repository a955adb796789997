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

import jax

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
    if isinstance(tree, jax.Array):
        return False
    unsorted = False
    for node in _dicts_and_leaves(tree):
        if type(node) not in _DICTS:
            continue
        keys, by_key = tuple(node), _sorted_keys(node)
        orders.append(keys)
        unsorted |= list(keys) != by_key
        for key in by_key:
            unsorted |= _collect(node[key], orders)
    return unsorted


_PLAIN_SEQUENCES = (tuple, list)


def _dicts_and_leaves(tree) -> list:
    """What `jax.tree_util.tree_leaves(tree, is_leaf=_is_dict)` gives, walking tuples and lists
    (the common containers of arguments and outputs) itself: this runs on calls."""
    if type(tree) in _PLAIN_SEQUENCES:
        found = []
        for item in tree:
            if type(item) in _DICTS:
                found.append(item)
            elif type(item) in _PLAIN_SEQUENCES:
                found.extend(_dicts_and_leaves(item))
            elif item is not None and not isinstance(item, jax.Array):  # an array holds no dict
                found.extend(jax.tree_util.tree_leaves(item, is_leaf=_is_dict))
        return found
    return jax.tree_util.tree_leaves(tree, is_leaf=_is_dict)


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
