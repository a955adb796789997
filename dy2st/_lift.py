"""What `dy2st.save` exports: a converted callable plus the named weights it reads.

The weights become inputs of the exported program (never baked-in constants), so a loaded
artifact runs with the weights stored beside it, and the manifest can map names to inputs.

    lifted = lift(model)                 # Equinox / Flax NNX module, plain object with arrays
    lifted = lift(fn, params=params)     # fn(params, *inputs) with a pytree of weights
    lifted = lift(fn)                    # no weights
    lifted.call(lifted.values, *inputs)  # == model(*inputs), traceable

Arrays are found with `jax.tree_util` when the owner is a pytree (Equinox modules, Flax NNX
modules, dicts, ...): array leaves are weights, other leaves stay static. A plain object's
array attributes (directly, in lists/dicts, or in nested plain objects) are swapped for the
traced values while the program is traced and restored afterwards.

TODO(issue 5): once `dy2st/state.py` lifts model state for `to_static`, build on it here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import types
from typing import Any, Callable

import jax
import numpy as np

from dy2st.api import BoundStaticFunction, StaticFunction, to_static
from dy2st.errors import ExportError

_ARRAYS = (jax.Array, np.ndarray)
_MAX_DEPTH = 4


@dataclasses.dataclass
class Lifted:
    """A traceable `call(weights, *inputs)` and the weights' names and current values."""

    call: Callable
    names: list[str]
    values: list[np.ndarray]
    static_fn: StaticFunction
    input_names: list[str]
    declared_spec: Any  # the input_spec given to to_static, if any


def lift(fn_or_model, params: Any = None) -> Lifted:
    """Split `fn_or_model` (and `params`, passed as the first argument) into weights + code."""
    function, owner, declared = _function_and_owner(fn_or_model)
    sf = to_static(function)
    converted = sf._converted
    input_names = list(inspect.signature(function).parameters)[(owner is not None) + (params is not None):]
    owner_part = _Part.of(owner, "self") if owner is not None else None
    params_part = _Part.of(params, "params") if params is not None else None
    parts = [p for p in (owner_part, params_part) if p is not None]
    if len(parts) == 1:
        parts[0].prefix = ""
    names = [n for p in parts for n in p.full_names]
    if len(set(names)) != len(names):
        raise ExportError(f"Two weights have the same name in {sorted(names)}.",
                          advice="give the arrays distinct attribute or dict-key names.")
    values = [np.asarray(v) for p in parts for v in p.values]

    def call(weights, *inputs):
        offset = 0
        leading = []
        with contextlib.ExitStack() as stack:
            for part in parts:
                chunk = weights[offset:offset + len(part.names)]
                offset += len(part.names)
                leading.append(stack.enter_context(part.substituted(chunk)))
            return converted(*leading, *inputs)

    return Lifted(call, names, values, sf, input_names, declared)


def _function_and_owner(obj):
    """(plain Python function, object it is bound to or None, input_spec given to to_static)."""
    if isinstance(obj, BoundStaticFunction):
        return obj._owner._fn, obj.__self__, obj._owner._input_spec
    if isinstance(obj, StaticFunction):
        return obj._fn, None, obj._input_spec
    if isinstance(obj, types.MethodType):
        func = obj.__func__
        if isinstance(func, StaticFunction):
            return func._fn, obj.__self__, func._input_spec
        return func, obj.__self__, None
    if isinstance(obj, types.FunctionType):
        return obj, None, None
    if callable(obj):
        call = inspect.getattr_static(type(obj), "__call__", None)
        if isinstance(call, StaticFunction):
            return call._fn, obj, call._input_spec
        call = inspect.unwrap(call) if call is not None else None
        if isinstance(call, types.FunctionType):
            return call, obj, None
    raise ExportError(f"Cannot save {obj!r}: expected a function, a method, or a model object with a "
                      f"Python __call__.",
                      advice="pass the forward function, e.g. dy2st.save(model.forward, ...), or "
                      "dy2st.save(fn, path, input_spec=..., params=params).")


@dataclasses.dataclass
class _Part:
    """The weights of one owner (the model object or the params pytree)."""

    owner: Any
    prefix: str
    names: list[str]
    values: list
    substituted: Callable  # (new values) -> context manager yielding the owner with them

    @classmethod
    def of(cls, owner, prefix: str) -> "_Part":
        leaves, treedef = jax.tree_util.tree_flatten_with_path(owner)
        if not (len(leaves) == 1 and leaves[0][1] is owner and not isinstance(owner, _ARRAYS)):
            return cls._of_pytree(owner, prefix, leaves, treedef)
        return cls._of_object(owner, prefix)

    @property
    def full_names(self) -> list[str]:
        return [f"{self.prefix}.{n}" if self.prefix else n for n in self.names]

    @classmethod
    def _of_pytree(cls, owner, prefix, leaves, treedef):
        is_weight = [isinstance(leaf, _ARRAYS) for _, leaf in leaves]
        names = _unique_names([path for (path, _), w in zip(leaves, is_weight) if w])
        values = [leaf for (_, leaf), w in zip(leaves, is_weight) if w]

        @contextlib.contextmanager
        def substituted(new_values):
            it = iter(new_values)
            merged = [next(it) if w else leaf for (_, leaf), w in zip(leaves, is_weight)]
            yield jax.tree_util.tree_unflatten(treedef, merged)

        return cls(owner, prefix, names, values, substituted)

    @classmethod
    def _of_object(cls, owner, prefix):
        slots = []  # (holder object, attribute, treedef, leaf mask, leaves)
        names, values = [], []
        _collect(owner, (), slots, names, values, set(), 0)

        @contextlib.contextmanager
        def substituted(new_values):
            it = iter(new_values)
            saved = []
            try:
                for holder, attr, treedef, mask, leaves in slots:
                    merged = [next(it) if w else leaf for leaf, w in zip(leaves, mask)]
                    saved.append((holder, attr, getattr(holder, attr)))
                    object.__setattr__(holder, attr, jax.tree_util.tree_unflatten(treedef, merged))
                yield owner
            finally:
                for holder, attr, old in reversed(saved):
                    object.__setattr__(holder, attr, old)

        return cls(owner, prefix, names, values, substituted)


def _collect(obj, path, slots, names, values, seen, depth):
    if id(obj) in seen or depth > _MAX_DEPTH:
        return
    seen.add(id(obj))
    for attr, value in sorted(getattr(obj, "__dict__", {}).items()):
        if attr.startswith("__dy2st") or isinstance(value, (StaticFunction, types.FunctionType, type)):
            continue
        leaves, treedef = jax.tree_util.tree_flatten_with_path(value)
        mask = [isinstance(leaf, _ARRAYS) for _, leaf in leaves]
        if any(mask):
            slots.append((obj, attr, treedef, mask, [leaf for _, leaf in leaves]))
            leaf_paths = [(jax.tree_util.GetAttrKey(attr), *p) for (p, _), w in zip(leaves, mask) if w]
            names.extend(_unique_names([path + lp for lp in leaf_paths]))
            values.extend(leaf for (_, leaf), w in zip(leaves, mask) if w)
        elif hasattr(value, "__dict__") and not isinstance(value, types.ModuleType):
            _collect(value, path + (jax.tree_util.GetAttrKey(attr),), slots, names, values, seen, depth + 1)


def _unique_names(paths) -> list[str]:
    simple = [jax.tree_util.keystr(tuple(p), simple=True, separator=".") for p in paths]
    if len(set(simple)) == len(simple):
        return simple
    return [jax.tree_util.keystr(tuple(p)) for p in paths]
