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

    def __init__(self, fn: Callable, name: str, shardings=None):
        self._fn = fn
        self._name = name
        self._shardings = shardings  # dy2st.sharding.Shardings, or None
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
        if not statics and not kwargs and len(arrays) == len(args):
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

        options = self._shardings.jit_kwargs(treedef, positions) if self._shardings is not None else {}
        return jax.jit(traced, **options)

    def _record(self, key, arrays):
        signature = Signature((key[0], key[1]), tuple(jax.typeof(a) for a in arrays))
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
                self._name, count, _what_changes(list(self._programs)),
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
        signature = Signature((key[0], key[1]), avals)
        with self._lock:
            return self._programs.setdefault(signature, ConcreteProgram(jitted, signature))

    def clear(self):
        with self._lock:
            self._programs.clear()
            self._by_static.clear()
            self._fast = self._jit_for(((), None))


def _what_changes(signatures: list) -> str:
    statics = {s.static_key for s in signatures}
    shapes = {tuple(a.shape for a in s.avals) for s in signatures}
    dtypes = {tuple(a.dtype for a in s.avals) for s in signatures}
    parts = []
    if len(statics) > 1:
        parts.append(f"{len(statics)} different static (non-array) argument values")
    if len(shapes) > 1:
        parts.append(f"{len(shapes)} different array shapes")
    if len(dtypes) > 1:
        parts.append(f"{len(dtypes)} different array dtypes")
    return ", ".join(parts) or "signatures differ"
