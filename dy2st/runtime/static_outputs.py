"""Outputs that are not arrays, given back as eager code gives them.

A compiled program outputs arrays only: `jax.jit` turns a returned Python number into a
weak-typed array (eager returns the number) and refuses a string. A leaf of a program's
output that is not an array is a constant of its signature (it comes from static inputs and
Python code, which run once per trace), so the program outputs the arrays and carries the
other leaves in its output's tree structure; the call's boundary (`python_choice.resolve`)
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

import types

import jax
import numpy as np

from dy2st.errors import ProgramOutputError
from dy2st.input_spec import user_origin
from dy2st.runtime import key_order

# Immutable values the program can give back itself on every call.
_CONSTANTS = (bool, int, float, complex, str, bytes, np.generic, np.dtype, type, range, slice,
              type(Ellipsis), type(NotImplemented), types.BuiltinFunctionType)


class _Where:
    """The non-array leaves of one trace's outputs: `(tree structure, ((position, value), ...))`,
    and the key orders of its dicts (`key_order`; None: all sorted). Compared by identity (jax
    keeps it in the output's tree structure; values need no hash)."""

    __slots__ = ("treedef", "statics", "orders")

    def __init__(self, treedef, statics, orders=None):
        self.treedef = treedef
        self.statics = statics
        self.orders = orders


class StaticOutputs:
    """A program's array outputs, and where its other outputs go."""

    __slots__ = ("arrays", "where")

    def __init__(self, arrays, where: _Where):
        self.arrays = arrays
        self.where = where

    def join(self):
        """The outputs eager gives: the arrays with the constants back in place."""
        leaves = list(self.arrays)
        for position, value in self.where.statics:
            leaves.insert(position, value.copy() if type(value) is np.ndarray else value)
        return key_order.restore(jax.tree_util.tree_unflatten(self.where.treedef, leaves), self.where.orders)


jax.tree_util.register_pytree_node(
    StaticOutputs,
    lambda s: (s.arrays, s.where),
    lambda where, arrays: StaticOutputs(list(arrays), where),
)


def split(outputs):
    """`outputs`, or StaticOutputs when some leaves are not arrays or some dict's keys are not
    in sorted order (which the program's outputs would not keep) (called while tracing)."""
    leaves, treedef = jax.tree_util.tree_flatten(outputs)
    statics = tuple((i, leaf) for i, leaf in enumerate(leaves) if not isinstance(leaf, jax.Array))
    orders = key_order.orders_of(outputs)
    if not statics and orders is None:
        return outputs
    for _, value in statics:
        _check_constant(value)
    arrays = [leaf for leaf in leaves if isinstance(leaf, jax.Array)]
    return StaticOutputs(arrays, _Where(treedef, statics, orders))


def _check_constant(value) -> None:
    if isinstance(value, (*_CONSTANTS, np.ndarray)):
        return
    if isinstance(value, frozenset) and all(isinstance(v, _CONSTANTS) for v in value):
        return
    if isinstance(value, types.FunctionType) and not value.__closure__:
        return  # a function of no enclosing scope is the same object every call
    kind = type(value).__name__
    raise ProgramOutputError(
        f"the function returns a {kind}, which is not an array: a compiled program gives back "
        "arrays, and Python constants (numbers, strings, numpy values) made while tracing; "
        f"a {kind} made once there would be the same object on every call, where eager code "
        "makes a new one each time.",
        origin=user_origin(),
        advice=f"return arrays (or numbers, strings) and build the {kind} from them after the "
        "call; or leave this function unconverted with dy2st.not_to_static.",
    )
