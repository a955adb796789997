"""Builtins called on traced values: the staged meaning of `print`, `int`, `max`, `range`, ...

Generated code reaches these through `convert_call(print)(...)` (see `dy2st.runtime.calls`), so
a user's own function named `print` or `max` is never replaced. With no traced argument each
one is exactly the builtin. With a traced argument:

* `print(x, 'loss', sep=', ')` prints when the program runs (`jax.debug.callback`, so it also
  prints inside staged branches and loops), formatted by Python's own `print`;
* `int(x)`, `float(x)` cast a one-element array to a scalar of the default int/float dtype
  (`int` truncates toward zero, as Python does); `bool(x)` is `x != 0`;
* `min`/`max` of one-element arrays, or of a 1-D array, reduce with `jnp.minimum`/`jnp.min`;
* `range(n)` with a traced bound is refused: only a `for` header can run over it, and the
  loops step sends those to `loop_iter` without calling `range`.

`len`, `abs`, `isinstance`, `enumerate` and `zip` already behave on traced arrays as on eager
ones (their sizes are static), so they stay the builtins.
"""

from __future__ import annotations

import builtins
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jax._src.interpreters.batching import BatchTracer as _BatchTracer

from dy2st.errors import BuiltinError, OriginInfo
from dy2st.runtime.calls import register_builtin
from dy2st.runtime.debug_effects import debug_effects_dropped
from dy2st.runtime.staging import is_traced


def _default(kind):
    """The dtype a Python int/float becomes (int32/float32 unless jax_enable_x64)."""
    return jax.dtypes.canonicalize_dtype(kind)


def _any_traced(values) -> bool:
    return any(is_traced(leaf) for leaf in jax.tree_util.tree_leaves(values))


def _one_element(x, what: str, origin: OriginInfo):
    if int(np.prod(np.shape(x))) != 1:
        raise BuiltinError(
            f"{what} of an array of shape {tuple(np.shape(x))}: only one-element arrays have a "
            "single value.",
            origin,
            advice="reduce the array first (x.sum(), x[0], x.max()), or use jnp functions elementwise.",
        )
    return jnp.reshape(x, ())


# -- print -------------------------------------------------------------------------------------
class _JaxRepr:
    """A value that prints like a jax Array when it sits inside a container being printed."""

    def __init__(self, array):
        self.array = array

    def __repr__(self):
        return "Array" + repr(self.array)[len("array"):]

    __str__ = __repr__


def convert_print(*values, sep=" ", end="\n", file=None, flush=False):
    """`print(*values, ...)`; with traced values, prints when the program runs."""
    if not _any_traced(values):
        return builtins.print(*values, sep=sep, end=end, file=file, flush=flush)
    if debug_effects_dropped():  # dy2st.save(..., debug_effects="drop")
        return None
    leaves, treedef = jax.tree_util.tree_flatten(list(values))
    positions = [i for i, leaf in enumerate(leaves) if is_traced(leaf)]
    statics = [leaf for leaf in leaves if not is_traced(leaf)]
    top_level = {id(v) for v in values}

    def callback(*arrays):
        merged, arrays_it, statics_it = [], iter(arrays), iter(statics)
        for i, leaf in enumerate(leaves):
            if i in positions:
                array = np.asarray(next(arrays_it))
                merged.append(array if id(leaf) in top_level else _JaxRepr(array))
            else:
                merged.append(next(statics_it))
        builtins.print(*jax.tree_util.tree_unflatten(treedef, merged), sep=sep, end=end,
                       file=file if file is not None else sys.stdout, flush=flush)

    traced = [leaves[i] for i in positions]
    # Ordered, so prints come out in program order; jax cannot batch ordered effects, so
    # under vmap they are unordered (as jax.debug.print is by default).
    jax.debug.callback(callback, *traced, ordered=not any(isinstance(t, _BatchTracer) for t in traced))
    return None


# -- casts -------------------------------------------------------------------------------------
def convert_int(x=0, *args, **kwargs):
    """`int(x)`; a traced one-element array becomes a default-int scalar, truncated toward 0."""
    if not is_traced(x) or args or kwargs:
        return builtins.int(x, *args, **kwargs)
    value = _one_element(x, "int()", OriginInfo.of_caller())
    return jnp.trunc(value).astype(_default(int)) if jnp.issubdtype(value.dtype, jnp.inexact) else value.astype(_default(int))


def convert_float(x=0.0):
    """`float(x)`; a traced one-element array becomes a default-float scalar."""
    if not is_traced(x):
        return builtins.float(x)
    return _one_element(x, "float()", OriginInfo.of_caller()).astype(_default(float))


def convert_bool(x=False):
    """`bool(x)`; a traced one-element array becomes `x != 0`."""
    if not is_traced(x):
        return builtins.bool(x)
    value = _one_element(x, "bool()", OriginInfo.of_caller())
    return value if value.dtype == jnp.bool_ else value != 0


# -- min / max -------------------------------------------------------------------------------
def _reduce(builtin, pairwise, whole, name, args, kwargs, origin):
    if not _any_traced(args):
        return builtin(*args, **kwargs)
    if kwargs:
        raise BuiltinError(
            f"{name}() with {', '.join(sorted(kwargs))}= cannot compare traced values.",
            origin,
            advice=f"compute the {name} with jnp.{name}/jnp.arg{name} on an array instead.",
        )
    if len(args) == 1:
        (items,) = args
        if is_traced(items):
            if np.ndim(items) != 1:
                raise BuiltinError(
                    f"{name}() over an array of shape {tuple(np.shape(items))} compares its rows, "
                    "whose truth value is ambiguous.",
                    origin,
                    advice=f"use jnp.{name}(x, axis=...) for arrays of more than one dimension.",
                )
            if items.shape[0] == 0:
                raise ValueError(f"{name}() arg is an empty sequence")
            return whole(items)
        args = tuple(items)
        if not args:
            raise ValueError(f"{name}() arg is an empty sequence")
    values = [_one_element(a, f"{name}()", origin) if is_traced(a) else a for a in args]
    return functools.reduce(pairwise, values)


def convert_max(*args, **kwargs):
    """`max(...)`; traced one-element values reduce with `jnp.maximum`, a 1-D array with `jnp.max`."""
    return _reduce(builtins.max, jnp.maximum, jnp.max, "max", args, kwargs, OriginInfo.of_caller())


def convert_min(*args, **kwargs):
    """`min(...)`; traced one-element values reduce with `jnp.minimum`, a 1-D array with `jnp.min`."""
    return _reduce(builtins.min, jnp.minimum, jnp.min, "min", args, kwargs, OriginInfo.of_caller())


# -- range -----------------------------------------------------------------------------------
def convert_range(*args):
    """`range(...)`; a traced bound is refused outside a `for` loop's header.

    `for i in range(n)` never gets here: the loops step hands `range` and its bounds to
    `loop_iter`, which stages them. Anywhere else (`list(range(n))`) the number of items would
    only be known when the program runs, so a traced bound is an error naming the line.
    """
    if not any(is_traced(a) for a in args):
        return builtins.range(*args)
    origin = OriginInfo.of_caller()
    for a in args:
        if is_traced(a) and not jnp.issubdtype(a.dtype, jnp.integer):
            raise BuiltinError(
                f"range() needs integer bounds, got a traced {np.dtype(a.dtype).name} value.",
                origin,
                advice="cast the bound with int(...) or .astype(jnp.int32).",
            )
    raise BuiltinError(
        "range() with a traced bound has no length or items while the program is traced; only "
        "a `for` loop header can run over it.",
        origin,
        advice="use it directly as a `for` loop's iterable (`for i in range(n):`), or use "
        "jnp.arange with a static size.",
    )


for _builtin, _replacement in (
    (builtins.print, convert_print),
    (builtins.int, convert_int),
    (builtins.float, convert_float),
    (builtins.bool, convert_bool),
    (builtins.max, convert_max),
    (builtins.min, convert_min),
    (builtins.range, convert_range),
):
    register_builtin(_builtin, _replacement)
