"""`max`, `min`, `sorted`, `any` and `all` on traced values, making Python's own choice.

Python's `max(a, b)` is `a` unless `b > a`: at a tie it returns the first operand, a NaN first
operand wins, a NaN later one never does. `jnp.maximum` would split a tie's gradient 0.5/0.5
and propagate every NaN. So each choice here is a `jnp.where` on Python's own comparison
(the gradient goes to the chosen operand only), and over a 1-D array the first position
Python's left-to-right scan would keep. `sorted` is stable, as Python's is. `any`/`all` read
each item's truth as `bool()` would, giving a scalar bool array.

With no traced argument each is exactly the builtin. `key=`/`default=` with traced values
are refused (the comparison could not be staged faithfully in general).
"""

from __future__ import annotations

import builtins

import jax.numpy as jnp
import numpy as np

from dy2st.errors import BuiltinError, OriginInfo
from dy2st.runtime import python_choice
from dy2st.runtime.staging import scalar_predicate
from dy2st.runtime.values import is_traced


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
    # Eager returns the item itself: a Python number, say (see python_choice).
    return python_choice.select(pred, later, kept, jnp.where(pred, later, kept))


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
    if len(args) == 1 and is_traced(args[0]):
        kwargs = dict(kwargs)
        default = kwargs.pop("default", _NO_DEFAULT)
        _refuse_keywords(name, kwargs, origin)
        items = _rows_of(args[0], name, origin)
        if items.shape[0] == 0:
            if default is not _NO_DEFAULT:
                return default
            raise ValueError(f"{name}() arg is an empty sequence")
        return _scan_choice(items, larger)
    values = tuple(args[0]) if len(args) == 1 else args
    if not _any_traced(values):
        return builtin(values, **kwargs) if len(args) == 1 else builtin(*args, **kwargs)
    kwargs = dict(kwargs)
    kwargs.pop("default", None)  # only used when there are no items, and there are traced ones
    _refuse_keywords(name, kwargs, origin)
    compare = (lambda b, a: b > a) if larger else (lambda b, a: b < a)
    kept = values[0]
    for later in values[1:]:
        kept = _later_wins(later, kept, compare, origin)
    return kept


def convert_max(*args, **kwargs):
    """`max(...)`: the first of the largest items, as Python chooses (gradient to that item)."""
    return _choose(builtins.max, True, "max", args, kwargs, OriginInfo.of_caller())


def convert_min(*args, **kwargs):
    """`min(...)`: the first of the smallest items, as Python chooses (gradient to that item)."""
    return _choose(builtins.min, False, "min", args, kwargs, OriginInfo.of_caller())


def convert_sorted(iterable, *, key=None, reverse=False):
    """`sorted(...)`: a stable sort, giving a list as Python does."""
    originals = None  # the items of a list, which eager's result holds as they are
    if is_traced(iterable):
        origin = OriginInfo.of_caller()
        items = _rows_of(iterable, "sorted", origin)
    else:
        items = list(iterable)
        if not _any_traced(items):
            return builtins.sorted(items, key=key, reverse=reverse)
        origin = OriginInfo.of_caller()
        shapes = {np.shape(i) for i in items}
        if len(shapes) != 1 or int(np.prod(next(iter(shapes)))) != 1:
            raise BuiltinError(
                "sorted() of traced values that are not all one-element arrays of one shape.",
                origin, advice="stack them into one array and use jnp.sort / jnp.argsort.")
        originals, items = items, jnp.stack([jnp.asarray(i) for i in items])
    if key is not None:
        raise BuiltinError("sorted() with key= cannot compare traced values.", origin,
                           advice="sort with jnp.argsort on the keys, then index the values.")
    keys = items.reshape(items.shape[0], -1)[:, 0] if items.ndim > 1 else items
    order = jnp.argsort(keys, stable=True, descending=bool(reverse))
    result = list(items[order])
    if originals is not None:  # eager's list holds the items themselves: Python numbers, say
        result = python_choice.pick(order, originals, result)
    return result


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
    for item in iterable:  # lazily, as Python: a deciding Python item stops the scan
        if not is_traced(item):
            if bool(item) == found:
                return found
            continue
        truth = scalar_predicate(item, origin, what=f"An item of {name}()")
        result = truth if isinstance(result, bool) else (result | truth if found else result & truth)
    return result


def convert_any(iterable):
    """`any(iterable)`; traced items give a scalar bool array."""
    return _any_all(builtins.any, "any", iterable, OriginInfo.of_caller())


def convert_all(iterable):
    """`all(iterable)`; traced items give a scalar bool array."""
    return _any_all(builtins.all, "all", iterable, OriginInfo.of_caller())
