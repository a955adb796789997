"""Input signatures, the per-function program cache, and ConcretePrograms.

A program is keyed by the pytree structure of the arguments, the shape/dtype/weak type (and
sharding) of every array leaf, and the value of every other leaf (Python scalars and other
hashables are static, as in AutoGraph and Paddle).

Dispatch is delegated to `jax.jit`, whose C++ fast path already keys compiled executables by
array shape/dtype/weak type/sharding. dy2st adds only what jit cannot do: for each distinct
pattern of static (non-array) leaves it keeps one jitted function of the array leaves. When all
arguments are positional jax arrays (the common case) a call costs one type check per
argument on top of jit's own dispatch. Each trace records a ConcreteProgram, which is how
`.programs` counts compiled signatures.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
from typing import Callable

import jax
import numpy as np

from dy2st.config import config, log, logger
from dy2st.errors import InputSignatureError
from dy2st.runtime.undefined import check_defined

_ARRAY_TYPES = (jax.Array, np.ndarray, np.generic)
_FAST_TYPES = frozenset({type(jax.numpy.zeros(()))})


def is_array_leaf(leaf) -> bool:
    return isinstance(leaf, _ARRAY_TYPES)


@dataclasses.dataclass(frozen=True)
class Signature:
    """The cache key of one program: static leaves and the abstract array leaves."""

    static_key: tuple
    avals: tuple
    positions: tuple = dataclasses.field(default=(), compare=False)  # of the arrays among the leaves

    def describe(self) -> str:
        arrays = ", ".join(f"{np.dtype(a.dtype).name}{list(a.shape)}" for a in self.avals)
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
        return self._jitted.trace(*self.input_spec)

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


class ProgramCache:
    """Programs of one converted function; see the module docstring."""

    def __init__(self, fn: Callable, name: str):
        self._fn = fn
        self._name = name
        self._lock = threading.Lock()
        self._by_static: dict[tuple, Callable] = {}
        self._programs: dict[Signature, ConcreteProgram] = {}
        self._warned = False
        self._fast = self._jit_for(((), None))

    def __call__(self, args):
        """Run the program for positional `args` (the hot path)."""
        for a in args:
            if type(a) not in _FAST_TYPES:
                return self.call_general(args, {})
        return self._fast(*args)

    def call_general(self, args, kwargs):
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        arrays, statics, positions = [], [], []
        for i, leaf in enumerate(leaves):
            if is_array_leaf(leaf):
                arrays.append(leaf)
                positions.append(i)
            else:
                statics.append(leaf)
        if not statics and not kwargs and len(arrays) == len(args) and all(map(is_array_leaf, args)):
            return self._fast(*arrays)  # positional arrays of another type (numpy, scalars)
        key = (treedef, tuple(statics), tuple(positions))
        try:
            jitted = self._by_static.get(key)
        except TypeError:
            raise InputSignatureError(
                f"{self._name}: an argument that is not an array must be hashable to be part of the "
                f"program's key, but got {[type(s).__name__ for s in statics]}.",
                advice="pass arrays for values that change, or make the static argument hashable "
                "(a tuple instead of a list, a frozen dataclass).",
            ) from None
        if jitted is None:
            with self._lock:
                jitted = self._by_static.get(key) or self._by_static.setdefault(key, self._jit_for(key))
        return jitted(*arrays)

    def _jit_for(self, key):
        treedef, statics, positions = key if key[1] is not None else (None, (), ())

        def traced(*arrays):
            self._record(key, arrays)
            if treedef is None:
                return check_defined(self._fn(*arrays))
            leaves = list(statics)
            for pos, array in zip(positions, arrays):
                leaves.insert(pos, array)
            args, kwargs = jax.tree_util.tree_unflatten(treedef, leaves)
            return check_defined(self._fn(*args, **kwargs))

        jitted = jax.jit(traced)
        return jitted

    def _record(self, key, arrays):
        signature = Signature((key[0], key[1]), tuple(jax.typeof(a) for a in arrays), key[2] if key[1] is not None else ())
        with self._lock:
            if signature in self._programs:
                return
            jitted = self._fast if key[1] is None else self._by_static.get(key)
            self._programs[signature] = ConcreteProgram(jitted or jax.jit(self._fn), signature)
            count = len(self._programs)
        log(1, "dy2st: %s: new program #%d for %s", self._name, count, signature.describe())
        if count > config.retrace_warning_threshold and not self._warned:
            self._warned = True
            logger.warning(
                "dy2st: %s has been traced %d times: %s. Arguments that keep changing shape or "
                "Python value cause a new program each; pass changing values as arrays, or fix "
                "shapes with dy2st.InputSpec.",
                self._name, count, _what_changes(list(self._programs), _parameter_names(self._fn)),
            )

    @property
    def programs(self) -> list:
        with self._lock:
            return list(self._programs.values())

    def get_concrete_program(self, args, kwargs) -> ConcreteProgram:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        specs = [l for l in leaves if is_array_leaf(l) or isinstance(l, jax.ShapeDtypeStruct)]
        statics = [l for l in leaves if not (is_array_leaf(l) or isinstance(l, jax.ShapeDtypeStruct))]
        positions = [i for i, l in enumerate(leaves) if is_array_leaf(l) or isinstance(l, jax.ShapeDtypeStruct)]
        all_positional_arrays = not kwargs and len(specs) == len(args) == len(leaves)
        key = ((), None) if all_positional_arrays else (treedef, tuple(statics), tuple(positions))
        jitted = self._fast if all_positional_arrays else self._by_static.setdefault(key, self._jit_for(key))
        avals = tuple(jax.core.ShapedArray(s.shape, s.dtype, weak_type=getattr(s, "weak_type", False)) for s in specs)
        jitted.trace(*specs)  # records the program
        signature = Signature((key[0], key[1]), avals, key[2] if key[1] is not None else ())
        with self._lock:
            return self._programs.setdefault(signature, ConcreteProgram(jitted, signature))

    def clear(self):
        with self._lock:
            self._programs.clear()
            self._by_static.clear()
            self._fast = self._jit_for(((), None))


def _parameter_names(fn) -> list:
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _leaves(signature: Signature, names: list) -> dict:
    """{"argument 'x'" (plus the leaf's path inside it): its description} for one signature."""
    treedef, statics = signature.static_key
    if statics is None:  # the all-positional-arrays fast path
        return {_argument_label(i, names): _describe_aval(a) for i, a in enumerate(signature.avals)}
    count = len(statics) + len(signature.avals)
    arrays, rest = dict(zip(signature.positions, signature.avals)), iter(statics)
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
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


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
