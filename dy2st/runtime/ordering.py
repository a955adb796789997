"""`max`, `min`, `sorted`, `any` and `all` on traced values, making Python's own choice.

Python's `max(a, b)` is `a` unless `b > a`: at a tie it returns the first operand, a NaN first
operand wins, a NaN later one never does. `jnp.maximum` would split a tie's gradient 0.5/0.5
and propagate every NaN. So each choice here is a `jnp.where` on Python's own comparison
(the gradient goes to the chosen operand only), and over a 1-D array the first position
Python's left-to-right scan would keep. `sorted` is stable, as Python's is. `any`/`all` read
each item's truth as `bool()` would, giving a scalar bool array.

With no traced argument each is exactly the builtin. `key=` calls the key once per item, left
to right, as Python does, and compares the keys as above (staged where a key is traced); the
items must then be arrays (or numbers) of one shape, since the data picks which one is the
result. `sorted(..., key=)` sorts by the keys (one-element each), stably.
"""

from __future__ import annotations

import builtins
import sys

import jax
import jax.numpy as jnp
import numpy as np

from dy2st.errors import BuiltinError, OriginInfo
from dy2st.runtime import guards, reachable
from dy2st.runtime.staging import run_whatever_the_data, scalar_predicate
from dy2st.runtime.values import as_number_where_chosen, is_traced


def _any_traced(values) -> bool:
    return any(is_traced(v) for v in values)


def _refuse_keywords(name: str, kwargs, origin: OriginInfo) -> None:
    if kwargs:
        raise BuiltinError(
            f"{name}() with {', '.join(sorted(kwargs))}= cannot compare traced values.",
            origin,
            advice=f"compute it with jnp.{name if name in ('max', 'min') else 'sort'}/jnp.arg{name if name in ('max', 'min') else 'sort'} on an array instead.",
        )


def _rows_of(items, name: str, origin: OriginInfo):
    """A traced array iterated as Python would (its rows); only 1-D arrays compare as scalars."""
    if np.ndim(items) != 1:
        raise BuiltinError(
            f"{name}() over an array of shape {tuple(np.shape(items))} compares its rows, "
            "whose truth value is ambiguous.",
            origin,
            advice=f"use jnp.{name}(x, axis=...) for arrays of more than one dimension.",
        )
    return items


def _later_wins(later, kept, compare, origin: OriginInfo):
    """`later if compare(later, kept) else kept`, staged when either is traced."""
    if not is_traced(later) and not is_traced(kept):
        return later if compare(later, kept) else kept
    pred = scalar_predicate(compare(later, kept), origin, what="The comparison of two items")
    # Eager returns the item itself: a Python number, say (the numbers rule: a weak 0-d array).
    return as_number_where_chosen(jnp.where(pred, later, kept), (later, kept))


def _scan_choice(items, larger: bool):
    """The item Python's left-to-right `max`/`min` keeps from a traced 1-D array."""
    if not jnp.issubdtype(items.dtype, jnp.inexact):
        return items[jnp.argmax(items) if larger else jnp.argmin(items)]  # the first extreme
    # A NaN first item is kept (nothing compares greater); a later NaN is never chosen.
    fill = -jnp.inf if larger else jnp.inf
    masked = jnp.where(jnp.isnan(items), fill, items)
    index = jnp.argmax(masked) if larger else jnp.argmin(masked)
    return items[jnp.where(jnp.isnan(items[0]), 0, index)]


_NO_DEFAULT = object()


def _choose(builtin, larger: bool, name: str, args, kwargs, origin: OriginInfo):
    kwargs = dict(kwargs)
    key = kwargs.pop("key", None)
    if len(args) == 1 and is_traced(args[0]):
        default = kwargs.pop("default", _NO_DEFAULT)
        _refuse_keywords(name, kwargs, origin)
        items = _rows_of(args[0], name, origin)
        if items.shape[0] == 0:
            if default is not _NO_DEFAULT:
                return default
            raise ValueError(f"{name}() arg is an empty sequence")
        if key is None:
            return _scan_choice(items, larger)
        values = tuple(items[i] for i in range(items.shape[0]))
    else:
        values = tuple(args[0]) if len(args) == 1 else args
        if not values or key is None and not _any_traced(values):
            if key is not None:
                kwargs["key"] = key
            return builtin(values, **kwargs) if len(args) == 1 else builtin(*args, **kwargs)
        kwargs.pop("default", None)  # only used when there are no items
        _refuse_keywords(name, kwargs, origin)
    compare = (lambda b, a: b > a) if larger else (lambda b, a: b < a)
    _refuse_mixed_dtypes(values, name, origin)
    if key is not None:
        return _choose_by_key(values, key, compare, name, origin)
    kept = values[0]
    for later in values[1:]:
        kept = _later_wins(later, kept, compare, origin)
    return kept


def _choose_by_key(values, key, compare, name: str, origin: OriginInfo):
    """Python's `max`/`min` with `key=`: each key computed once, left to right; a later item
    wins only where its key compares strictly better than the kept one's."""
    keys = [key(v) for v in values]
    if not _any_traced(keys):  # Python's own choice, by the keys
        kept = 0
        for i in range(1, len(values)):
            if compare(keys[i], keys[kept]):
                kept = i
        return values[kept]
    _refuse_mixed_items(values, name, origin)
    kept, kept_key = values[0], keys[0]
    for later, later_key in zip(values[1:], keys[1:]):
        pred = compare(later_key, kept_key)
        if not is_traced(pred):
            kept, kept_key = (later, later_key) if pred else (kept, kept_key)
            continue
        pred = scalar_predicate(pred, origin, what="The comparison of two keys")
        kept = as_number_where_chosen(jnp.where(pred, later, kept), (later, kept))
        kept_key = jnp.where(pred, later_key, kept_key)
    return kept


def _refuse_mixed_dtypes(values, name: str, origin: OriginInfo) -> None:
    """Arrays the data picks among (not Python numbers, which the numbers rule makes a 0-d array
    of the sides' dtype together) must be of one dtype: eager gives back the item itself, of
    its own dtype, where a staged pick has one."""
    dtypes = {jnp.result_type(v) for v in values
              if isinstance(v, (jax.Array, np.ndarray, np.generic)) and not (isinstance(v, jax.Array) and jax.typeof(v).weak_type)}
    if len(dtypes) > 1:
        raise BuiltinError(
            f"{name}() picks one of arrays of the dtypes {', '.join(sorted(str(d) for d in dtypes))} by data: eager "
            "gives back the item itself, of its own dtype, where a compiled program has one dtype.",
            origin, advice="cast the items to one dtype first (`.astype(jnp.float32)`).")


def _refuse_mixed_items(values, name: str, origin: OriginInfo) -> None:
    """Items the data picks among must be one array type (or numbers): the result's shape."""
    if all(is_traced(v) or isinstance(v, (int, float, bool, jnp.ndarray, np.ndarray, np.generic)) for v in values) \
            and len({np.shape(v) for v in values}) == 1:
        return
    raise BuiltinError(
        f"{name}() with key= over traced keys picks one of its items by data, but the items are not "
        "arrays of one shape (the result would have a shape, or a structure, chosen by data).",
        origin,
        advice="give the items one shape, or pick an index with jnp.argmax/jnp.argmin over the stacked keys "
        "and use it on arrays of one shape.",
    )


def convert_max(*args, **kwargs):
    """`max(...)`: the first of the largest items, as Python chooses (gradient to that item)."""
    guards.note_passed(kwargs.get("key"))  # (a key function reading a global: guarded)
    return _choose(builtins.max, True, "max", args, kwargs, OriginInfo.of_caller())


def convert_min(*args, **kwargs):
    """`min(...)`: the first of the smallest items, as Python chooses (gradient to that item)."""
    guards.note_passed(kwargs.get("key"))
    return _choose(builtins.min, False, "min", args, kwargs, OriginInfo.of_caller())


def convert_sorted(iterable, *, key=None, reverse=False):
    """`sorted(...)`: a stable sort, giving a list as Python does (`key=` called once per item)."""
    guards.note_passed(key)  # (a key function reading a global: guarded)
    originals = None  # the items of a list, which eager's result holds as they are
    if is_traced(reverse):
        raise BuiltinError("sorted() with `reverse=` the data decides: which order the list has would be "
                           "decided when the program runs.", OriginInfo.of_user_code(),
                           advice="decide `reverse` with a Python value, or sort both ways and pick with "
                           "`jnp.where` (arrays of one shape: `jnp.sort`, then `x[::-1]`).")
    if is_traced(iterable):
        origin = OriginInfo.of_user_code()  # (the user's line: `xs.sort()` calls this from `convert_list_sort`)
        items = _rows_of(iterable, "sorted", origin)
        keys = None if key is None else [key(items[i]) for i in range(items.shape[0])]
    else:
        originals = list(iterable)
        keys = None if key is None else [key(item) for item in originals]
        if (keys is not None and not _any_traced(keys)) or (keys is None and not _any_traced(originals)):
            # Python values decide the order (keys Python values beside traced items: `key=len`)
            order = builtins.sorted(range(len(originals)), key=(originals if keys is None else keys).__getitem__,
                                    reverse=reverse)
            return [originals[i] for i in order]
        origin = OriginInfo.of_user_code()
        if keys is not None and originals and not any(is_traced(i) or isinstance(i, np.ndarray) for i in originals):
            return _sorted_pytrees(originals, _sort_keys(keys, origin), reverse, origin)
        shapes = {np.shape(i) for i in originals}
        if len(shapes) != 1 or (key is None and int(np.prod(next(iter(shapes)))) != 1):
            raise BuiltinError(
                f"sorted() of traced values that are not all {'arrays' if key else 'one-element arrays'} of one shape.",
                origin, advice="stack them into one array and use jnp.sort / jnp.argsort.")
        _refuse_mixed_dtypes(originals, "sorted", origin)
        items = jnp.stack([jnp.asarray(i) for i in originals])
    if keys is not None:
        keys = _sort_keys(keys, origin)
    else:
        keys = items.reshape(items.shape[0], -1)[:, 0] if items.ndim > 1 else items
    order = jnp.argsort(keys, stable=True, descending=bool(reverse))
    result = list(items[order])
    if originals is not None:  # eager's list holds the items themselves: Python numbers, say
        result = [as_number_where_chosen(r, originals) for r in result]
    return result


def convert_list_sort(items: list, *, key=None, reverse=False) -> None:
    """`items.sort(...)`: in place, as `convert_sorted` orders them (a list of Python values only
    sorts as Python's does)."""
    items[:] = convert_sorted(items, key=key, reverse=reverse)


def _sorted_pytrees(items: list, keys, reverse: bool, origin: OriginInfo) -> list:
    """`sorted(items, key=...)` of items of one pytree structure (`(index, score)` tuples) whose
    leaves at each place are arrays of one shape or Python numbers: each place stacked and put
    in the order the traced keys give (a Python number the data now places is a 0-d array: the
    numbers rule)."""
    flat = [jax.tree_util.tree_flatten(item) for item in items]
    treedef = flat[0][1]
    columns = list(zip(*(leaves for leaves, _ in flat))) if treedef.num_leaves else []
    if (any(d != treedef for _, d in flat) or not columns
            or any(len({np.shape(v) for v in column}) != 1 or not all(_sortable_leaf(v) for v in column)
                   for column in columns)):
        raise BuiltinError(
            "sorted() with key= of items that are not all one structure of arrays of one shape (or numbers) "
            "in each place.",
            origin, advice="give the items one structure (tuples of one length, arrays of one shape in each "
            "place), or stack the keys and use jnp.argsort.")
    order = jnp.argsort(keys, stable=True, descending=bool(reverse))
    stacked = [jnp.stack([jnp.asarray(v) for v in column])[order] for column in columns]
    return [jax.tree_util.tree_unflatten(
        treedef, [as_number_where_chosen(s[k], column) for s, column in zip(stacked, columns)])
        for k in range(len(items))]


def _sortable_leaf(value) -> bool:
    return is_traced(value) or isinstance(value, (jax.Array, np.ndarray, bool, int, float))


def _sort_keys(keys: list, origin: OriginInfo):
    """The keys `sorted(..., key=)` computed, one per item, as one 1-D array to sort by."""
    if any(np.size(k) != 1 for k in keys):
        raise BuiltinError(
            "sorted() with key= over traced values needs one-element keys: these compare as arrays.",
            origin, advice="make the key a scalar (`key=lambda v: v.sum()`), or sort with jnp.argsort.")
    return jnp.stack([jnp.asarray(k).reshape(()) for k in keys])


def _truths(iterable, name: str, origin: OriginInfo):
    """The truth of each item, as `bool(item)` would read it, as a 1-D bool array or a list."""
    if is_traced(iterable):
        rows = iterable.reshape(iterable.shape[0], -1) if iterable.ndim > 1 else iterable[:, None]
        if rows.shape[0] and rows.shape[1] != 1:
            raise BuiltinError(
                f"{name}() over an array of shape {tuple(iterable.shape)} reads each row's truth "
                "value, which is ambiguous for rows of more than one element.",
                origin, advice=f"use jnp.{name}(x) (or x.{name}(axis=...)) instead.")
        return rows[:, 0] != 0 if rows.dtype != jnp.bool_ else rows[:, 0]
    return None


def _any_all(builtin, name: str, iterable, origin: OriginInfo):
    truths = _truths(iterable, name, origin)
    if truths is not None:
        return jnp.any(truths) if name == "any" else jnp.all(truths)
    found = builtin is builtins.any
    result = not found
    items = iter(iterable)
    for item in items:  # lazily, as Python: a deciding Python item stops the scan
        if not is_traced(item):
            if bool(item) == found:
                return found
            continue
        truth = scalar_predicate(item, origin, what=f"An item of {name}()")
        result = truth if isinstance(result, bool) else (result | truth if found else result & truth)
        if items is iterable:  # a generator: eager may stop here, so what the rest runs must not show
            roots = reachable.snapshot(()).with_locals(sys._getframe(2))
            with run_whatever_the_data(origin, f"rest of the iterable of {name}() after a traced item", roots,
                                       "keep effects out of the items (print or log them before the call, "
                                       "`items = [...]`): the program checks every item."):
                rest = _any_all(builtin, name, items, origin)
            return rest if isinstance(rest, bool) and rest == found else (result | rest if found else result & rest)
    return result


def convert_any(iterable):
    """`any(iterable)`; traced items give a scalar bool array."""
    return _any_all(builtins.any, "any", iterable, OriginInfo.of_caller())


def convert_all(iterable):
    """`all(iterable)`; traced items give a scalar bool array."""
    return _any_all(builtins.all, "all", iterable, OriginInfo.of_caller())
