"""`to_static(fn, in_shardings=..., out_shardings=...)`: where a program's inputs and outputs live.

With arrays sharded over a `jax.sharding.Mesh`, a StaticFunction already runs as one SPMD
program: its programs are `jax.jit` functions, and jit compiles one executable per input
sharding, partitioning the staged `lax.cond`s like any other op. These options only pin the
shardings, exactly as `jax.jit`'s arguments of the same names do::

    mesh = jax.make_mesh((8,), ("data",))
    step = dy2st.to_static(step, in_shardings=(NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))))

`in_shardings` is given per positional argument (a prefix of the arguments' pytree, one sharding
for all, or None for "as the argument is"); `out_shardings` is a prefix of the output pytree.
Keyword arguments and arguments that are not arrays get no constraint.

A program's input arrays are the array leaves of the arguments (non-array leaves are static and
part of the cache key), so for calls with static leaves the per-argument shardings are broadcast
to the array leaves here, once per static pattern, never on the call path.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types

import jax
from jax.sharding import PartitionSpec, Sharding

from dy2st.errors import ArgumentError
from dy2st.input_spec import user_origin


def _is_sharding_leaf(x) -> bool:
    return x is None or isinstance(x, Sharding)


@dataclasses.dataclass(frozen=True)
class Shardings:
    """The `in_shardings` / `out_shardings` given to `to_static` (None: not pinned)."""

    in_shardings: object = None
    out_shardings: object = None

    def jit_kwargs(self, treedef=None, positions=()) -> dict:
        """Keyword arguments for `jax.jit` of a program over the given array leaves.

        Args:
          treedef: tree structure of `(args, kwargs)`, or None when the program's inputs are
            exactly the positional arguments (the fast path).
          positions: indices, among the leaves of `treedef`, of the array leaves.
        """
        kwargs = {}
        if self.out_shardings is not None:
            kwargs["out_shardings"] = self.out_shardings
        if self.in_shardings is not None:
            kwargs["in_shardings"] = self._in_shardings_for(treedef, positions)
        return kwargs

    def _in_shardings_for(self, treedef, positions):
        if treedef is None:
            return self.in_shardings
        args, kwargs = jax.tree_util.tree_unflatten(treedef, list(range(treedef.num_leaves)))
        prefix = self.in_shardings
        if isinstance(prefix, list):
            prefix = tuple(prefix)
        if isinstance(prefix, tuple) and len(prefix) != len(args):
            raise ValueError(
                f"in_shardings has {len(prefix)} entries but the function was called with "
                f"{len(args)} positional arguments; give one sharding (or None) per positional argument."
            )
        full = jax.tree_util.tree_broadcast(prefix, args, is_leaf=_is_sharding_leaf)
        by_leaf = dict(zip(jax.tree_util.tree_leaves(args), jax.tree_util.tree_leaves(full, is_leaf=_is_sharding_leaf)))
        return tuple(by_leaf.get(pos) for pos in positions)


def check_shardings(fn, in_shardings, out_shardings) -> None:
    """Refuse, when `to_static` is called, shardings jit would refuse at every call: a leaf
    that is not a Sharding, PartitionSpec or None (a string, a number), or a list of
    `in_shardings` longer than `fn`'s positional parameters (or shorter than its required ones)."""
    for name, value in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
        if value is None:
            continue
        if isinstance(value, (str, bytes)):
            bad = [value]
        else:
            bad = [leaf for leaf in jax.tree_util.tree_leaves(value, is_leaf=_is_sharding_leaf)
                   if leaf is not None and not isinstance(leaf, (Sharding, PartitionSpec))]
        if bad:
            raise ArgumentError(f"{name} holds {type(bad[0]).__name__} {bad[0]!r:.60}, which is not a sharding.",
                                user_origin(), advice=f"give jax shardings, as for jax.jit: {name}=(NamedSharding(mesh, "
                                "P('data')), None), with None for an argument placed as it is.")
    if isinstance(in_shardings, (tuple, list)):
        counts = _positional_counts(fn)
        if counts is not None and not counts[0] <= len(in_shardings) <= counts[1]:
            required, positional = counts
            wanted = str(positional) if required == positional else f"{required} to {positional}"
            raise ArgumentError(f"in_shardings has {len(in_shardings)} entries, but the function takes {wanted} "
                                "positional arguments (self included for a method).", user_origin(),
                                advice="give one sharding (or None) per positional argument, in order.")


def _positional_counts(fn) -> tuple[int, int] | None:
    """(required, all) positional parameters of the function a program is called with; None
    where it takes *args or has no signature to read."""
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, (types.FunctionType, functools.partial)):
        return None
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return sum(p.default is p.empty for p in positional), len(positional)
