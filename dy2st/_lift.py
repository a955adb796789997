"""What `dy2st.save` exports: a converted callable plus the named weights it reads.

The weights become inputs of the exported program (never baked-in constants), so a loaded
artifact runs with the weights stored beside it, and the manifest can map names to inputs.

    lifted = lift(model)                 # Equinox / Flax NNX module, plain object with arrays
    lifted = lift(fn, params=params)     # fn(params, *inputs) with a pytree of weights
    lifted = lift(fn)                    # no weights
    lifted.call(lifted.values, *inputs)  # == model(*inputs), traceable

The arrays are found by `dy2st.state.split_state` (the same walk `to_static` uses to lift a
model's state): plain objects attribute by attribute, Equinox / Flax NNX modules and other
pytrees leaf by leaf. While the program is traced the model holds the traced weights; its own
arrays are put back afterwards. Attributes the forward assigns are not exported (an artifact is
a pure function of its weights and inputs).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import Any, Callable

import jax
import numpy as np

from dy2st import api, state
from dy2st.api import BoundStaticFunction, StaticFunction, to_static
from dy2st.errors import ExportError
from dy2st.input_spec import user_origin
from dy2st.runtime.values import ARRAY_TYPES



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
    parts = [(prefix, obj, *state.split_state(obj)) for prefix, obj in (("self", owner), ("params", params))
             if obj is not None]
    if len(parts) == 1:
        parts = [("", *parts[0][1:])]
    names = [f"{prefix}.{n}" if prefix else n for prefix, _, arrays, _ in parts for n in arrays]
    arrays = [v for _, _, arrays, _ in parts for v in arrays.values()]
    for name, value in zip(names, arrays):
        refuse_key_array(value, f"the weight {name!r}")
    values = [np.asarray(v) for v in arrays]

    def call(weights, *inputs):
        leading, restore = [], []
        offset = 0
        try:
            for _, obj, arrays, merge in parts:
                chunk = weights[offset:offset + len(arrays)]
                offset += len(arrays)
                if state.node_kind(obj) is None:  # a pytree (Equinox, NNX, dict): rebuilt, never mutated
                    leading.append(_rebuild_pytree(obj, chunk))
                else:  # a plain object: updated in place, its arrays put back afterwards
                    restore.append((merge, arrays))
                    leading.append(merge(dict(zip(arrays, chunk))))
            return converted(*leading, *inputs)
        finally:
            for merge, arrays in restore:
                merge(arrays)

    return Lifted(call, names, values, sf, input_names, declared)


def refuse_key_array(value, what: str) -> None:
    """A typed PRNG key array (`jax.random.key`) has no numpy form for the weights file or the
    manifest: refused, saying how to store its data instead."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        raise ExportError(f"dy2st.save cannot store {what}, a PRNG key array ({dtype}): artifacts hold arrays of "
                          "numeric dtypes only.", user_origin(),
                          advice="pass its data instead, jax.random.key_data(key) (a uint32 array), and rebuild the "
                          "key in the function with jax.random.wrap_key_data(data).")


def _rebuild_pytree(obj, new_arrays):
    """`obj` with its array leaves replaced, in `split_state`'s order (NNX modules are not
    updated in place: under a trace flax refuses that)."""
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    it = iter(new_arrays)
    return jax.tree_util.tree_unflatten(treedef, [next(it) if isinstance(l, ARRAY_TYPES) else l for l in leaves])


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
    method = api._model_method(obj) if callable(obj) or hasattr(obj, "forward") else None
    if isinstance(method, StaticFunction):
        return method._fn, obj, method._input_spec
    method = inspect.unwrap(method) if method is not None else None
    if isinstance(method, types.FunctionType):
        return method, obj, None
    raise ExportError(f"Cannot save {obj!r}: expected a function, a method, or a model object with a "
                      f"Python __call__ or forward.",
                      advice="pass the forward function, e.g. dy2st.save(model.forward, ...), or "
                      "dy2st.save(fn, path, input_spec=..., params=params).")
