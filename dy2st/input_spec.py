"""InputSpec: the shape and dtype an argument must have, with `None` for any size.

    spec = dy2st.InputSpec((None, 784), "float32", name="x")   # any batch size
    spec = dy2st.InputSpec.from_array(x)                      # exactly x's shape and dtype
    spec = dy2st.InputSpec.parse("x:float32[None,784]")       # the command line's form

A dimension is an int (exact size), `None` or -1 (any size, its own symbol), or a name such as
"batch" (any size, but every dimension with that name must have the same size; use it when
two inputs must agree, e.g. `x + y` with both batch dimensions dynamic).

Specs serve three places: `to_static(input_spec=[...])` checks every call against them,
`get_concrete_program(*specs)` and `dy2st.save` trace with them (dynamic dimensions become
`jax.export` symbolic dimensions, so one program serves every size), and a loaded artifact
checks its inputs with them.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dy2st.errors import InputSpecError, OriginInfo
from dy2st.runtime import key_order

Dim = int | str | None
_LIBRARY_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (jax, np)) + \
    (os.path.dirname(os.path.abspath(__file__)) + os.sep,)
_CLI_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli.py")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The largest fixed dimension: no array has more elements (an artifact's manifest holds the same
# bound, `dy2st.manifest`, so a spec `dy2st.save` takes is one `dy2st.load` reads).
MAX_DIM = 1 << 40
_PARSE_RE = re.compile(r"^\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*:)?\s*(?P<dtype>[A-Za-z0-9_]+)\s*\[(?P<dims>[^\]]*)\]\s*$")


@dataclasses.dataclass(frozen=True, init=False)
class InputSpec:
    """The shape and dtype of one array argument; `None` (or -1) in `shape` means any size.

    Args:
      shape: a sequence of dims: int (exact), None / -1 (any size), or a name (any size, equal
        wherever the same name appears).
      dtype: anything `jax.numpy.dtype` accepts ("float32", jnp.int32, np.float64, ...).
      name: the argument's name; in errors, artifacts and the command line.

    Example::

        @dy2st.to_static(input_spec=[dy2st.InputSpec((None, 784), "float32", name="x")])
        def forward(x): ...
    """

    shape: tuple[Dim, ...]
    dtype: np.dtype
    name: str | None

    def __init__(self, shape: Sequence[Dim] = (), dtype: Any = "float32", name: str | None = None):
        if isinstance(shape, (int, str)) or shape is None:
            raise InputSpecError(f"InputSpec shape must be a sequence of dimensions, got {shape!r}.",
                                 advice="write e.g. InputSpec((None, 784)) or InputSpec(()) for a scalar.")
        if name is not None and not isinstance(name, str):
            raise InputSpecError(f"InputSpec name must be a string, got {name!r}.")
        object.__setattr__(self, "shape", tuple(_normalize_dim(d, shape) for d in shape))
        object.__setattr__(self, "dtype", _array_dtype(dtype, name))
        object.__setattr__(self, "name", name)

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_array(cls, x, name: str | None = None) -> "InputSpec":
        """The spec of exactly `x`'s shape and dtype (mark dims dynamic with `.with_dynamic`)."""
        return cls(tuple(int(d) for d in np.shape(x)), _dtype_of(x), name)

    @classmethod
    def parse(cls, text: str) -> "InputSpec":
        """`'x:float32[None,784]'` -> InputSpec((None, 784), float32, 'x'); the name is optional."""
        if not isinstance(text, str):
            raise InputSpecError(f"InputSpec.parse takes a string, got {type(text).__name__} {text!r:.60}.",
                                 advice="write NAME:DTYPE[DIMS], e.g. 'x:float32[None,784]', or build "
                                 "dy2st.InputSpec(shape, dtype, name) directly.")
        match = _PARSE_RE.match(text)
        if match is None:
            raise InputSpecError(f"Cannot read the input spec {_short_repr(text)}.",
                                 advice="write NAME:DTYPE[DIMS], e.g. 'x:float32[None,784]' or 'n:int32[]'.")
        dims = [d.strip() for d in match["dims"].split(",")] if match["dims"].strip() else []
        shape = [None if d in ("None", "?", "-1") else _parsed_int(d, text) if d.lstrip("-").isdigit() else d
                 for d in dims]
        return cls(shape, match["dtype"], match["name"])

    @classmethod
    def from_json(cls, data: dict) -> "InputSpec":
        return cls(data["dims"] if "dims" in data else data["shape"], data["dtype"], data.get("name"))

    def to_json(self) -> dict:
        """{"name", "shape" (null for any size), "dims" (the names of named dims), "dtype"}."""
        return {"name": self.name, "shape": [d if isinstance(d, int) else None for d in self.shape],
                "dims": list(self.shape), "dtype": self.dtype.name}

    def with_dynamic(self, *axes: int) -> "InputSpec":
        """A copy with the given axes (default: axis 0, the batch) of any size."""
        axes = axes or (0,)
        return InputSpec(tuple(None if i in axes or i - len(self.shape) in axes else d
                               for i, d in enumerate(self.shape)), self.dtype, self.name)

    # -- queries --------------------------------------------------------------------------
    @property
    def is_dynamic(self) -> bool:
        return any(not isinstance(d, int) for d in self.shape)

    def __str__(self) -> str:
        dims = ",".join("None" if d is None else str(d) for d in self.shape)
        return f"{self.name + ':' if self.name else ''}{self.dtype.name}[{dims}]"

    def __repr__(self) -> str:
        return f"InputSpec(shape={self.shape!r}, dtype={self.dtype.name!r}, name={self.name!r})"

    def mismatch(self, value, bound: dict[str, int] | None = None) -> str | None:
        """Why `value` does not fit this spec (None when it fits).

        `bound` maps dim names to the sizes seen so far (updated in place), so that a named dim
        must have one size across all the inputs checked with the same dict.
        """
        shape = value.shape if hasattr(value, "shape") else np.shape(value)
        dtype = value.dtype if hasattr(value, "dtype") else _dtype_of(value)
        if dtype is None:
            return f"got a {type(value).__name__}, not an array"
        problem = None
        if dtype != self.dtype and not (_is_python_scalar(value) and _scalar_fits(value, self.dtype)):
            problem = f"dtype is {np.dtype(dtype).name}, expected {self.dtype.name}"
        elif len(shape) != len(self.shape):
            problem = f"rank is {len(shape)}, expected {len(self.shape)}"
        else:
            problem = self._dims_mismatch(shape, bound)
        return None if problem is None else f"{problem} (given {np.dtype(dtype).name}{list(shape)})"

    def _dims_mismatch(self, shape, bound) -> str | None:
        for axis, (want, got) in enumerate(zip(self.shape, shape)):
            symbolic = type(got) is not int and jax.export.is_symbolic_dim(got)
            if isinstance(want, int):
                if symbolic or got != want:
                    return f"dimension {axis} is {got}, expected {want}"
            elif not symbolic and got < 1:
                return f"dimension {axis} is {got}; a dynamic dimension must be at least 1"
            elif isinstance(want, str) and bound is not None:
                seen = bound.setdefault(want, got)
                if not (seen is got or (not symbolic and not jax.export.is_symbolic_dim(seen) and seen == got)):
                    return f"dimension {axis} ('{want}') is {got}, but another input has '{want}' = {seen}"
        return None

    def check(self, value, what: str, bound: dict | None = None, origin: OriginInfo | None = None) -> None:
        """Raise InputSpecError naming `what` (e.g. "argument 'x'") when `value` does not fit."""
        problem = self.mismatch(value, bound)
        if problem is not None:
            raise self.error(what, problem, origin)

    def error(self, what: str, problem: str, origin: OriginInfo | None = None) -> InputSpecError:
        return InputSpecError(f"{what} does not match its InputSpec {self}: {problem}.", origin,
                              advice=f"pass an array of dtype {self.dtype.name} and shape "
                              f"{_shape_text(self.shape)} (None = any size), or change the input_spec.")


def user_origin() -> OriginInfo | None:
    """The innermost frame outside dy2st and jax: the user's line that made the call."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename == _CLI_FILE:  # the `dy2st` command made the call: no line of the user's
            return None
        if not filename.startswith(_LIBRARY_DIRS) and not filename.startswith("<"):  # not <frozen runpy>
            return OriginInfo.from_frame(frame)
        frame = frame.f_back
    return None


_DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                "bfloat16", "float32", "float64", "complex64", "complex128")


def _array_dtype(dtype, name: str | None) -> np.dtype:
    """`dtype` as a numpy dtype jax arrays can have; an InputSpecError naming the spec if not."""
    which = f"InputSpec {name!r}" if name else "InputSpec"
    try:
        result = np.dtype(jnp.dtype(dtype))
    except (TypeError, ValueError):
        result = None
    if result is None or result.kind not in "biufcV" or (result.kind == "V" and result.name.startswith("void")):
        close = difflib.get_close_matches(str(dtype), _DTYPE_NAMES, n=1)
        hint = f"write {close[0]!r} if that was meant, or " if close else ""
        raise InputSpecError(f"{which}: dtype {dtype!r} is not an array dtype jax supports.",
                             advice=f"{hint}use a name such as 'float32' or 'int32', or a numpy/jax dtype.")
    return result


def _normalize_dim(d, shape) -> Dim:
    if d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d == -1):
        return None
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 0 <= d <= MAX_DIM:
        return int(d)
    if isinstance(d, str) and _NAME_RE.fullmatch(d):
        return d
    raise InputSpecError(f"InputSpec dimension {_short_repr(d)} in shape {_short_repr(tuple(shape))} is not valid.",
                         advice=f"use an int from 0 to 2**40 ({MAX_DIM}), None or -1 for any size, or a name "
                         "such as 'batch'.")


def _parsed_int(digits: str, text: str) -> int:
    """A dimension of `InputSpec.parse`'s text; more digits than any dimension has is refused
    (Python refuses to read an int of over 4300 digits at all)."""
    if len(digits.lstrip("-")) > len(str(MAX_DIM)):
        raise InputSpecError(f"Cannot read the input spec {_short_repr(text)}: the dimension {digits[:20]}... "
                             f"has {len(digits)} digits; a dimension is at most 2**40 ({MAX_DIM}).",
                             advice="write NAME:DTYPE[DIMS], e.g. 'x:float32[None,784]' or 'n:int32[]'.")
    return int(digits)


def _short_repr(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_spec_list(input_spec) -> None:
    """Refuse an `input_spec` that is not a list (or tuple) of entries, one per parameter: a
    single InputSpec, or a string (which would count as one entry per character)."""
    if isinstance(input_spec, (InputSpec, str, bytes)) or not isinstance(input_spec, Sequence):
        raise InputSpecError(f"input_spec must be a list with one entry per input, got "
                             f"{type(input_spec).__name__} {_short_repr(input_spec)}.", user_origin(),
                             advice="wrap it in a list: input_spec=[dy2st.InputSpec(...)] (InputSpec.parse "
                             "reads a spec written as text).")


def _shape_text(shape) -> str:
    return "(" + ", ".join("None" if d is None else repr(d) if isinstance(d, str) else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def _dtype_of(value):
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return np.dtype(dtype)
    if _is_python_scalar(value):
        return np.asarray(value).dtype
    return None


def _is_python_scalar(value) -> bool:
    return isinstance(value, (bool, int, float, complex))


def _scalar_fits(value, dtype: np.dtype) -> bool:
    """A Python scalar is weakly typed: it fits any dtype of its kind or a wider kind."""
    kinds = "b" if isinstance(value, bool) else "iufc" if isinstance(value, int) else "fc" if isinstance(value, float) else "c"
    return dtype.kind in kinds


# -- abstract tracing ---------------------------------------------------------------------
def abstract(tree):
    """Replace every InputSpec leaf of `tree` by a `jax.ShapeDtypeStruct`.

    Dynamic dims become `jax.export` symbolic dims from one scope: a named dim is one symbol
    wherever it appears; each None is its own symbol, called `<spec name>_<axis>` (or `_d<n>`
    for an unnamed spec). Other leaves are returned unchanged.
    """
    scope = jax.export.SymbolicScope()
    specs = [l for l in jax.tree_util.tree_leaves(tree, is_leaf=is_spec) if isinstance(l, InputSpec)]
    taken = {d for s in specs for d in s.shape if isinstance(d, str)}
    counter = iter(range(1 << 30))

    def fresh(spec, axis):
        symbol = f"{spec.name}_{axis}" if spec.name and _NAME_RE.fullmatch(spec.name) else f"_d{next(counter)}"
        while symbol in taken:
            symbol = f"_d{next(counter)}"
        taken.add(symbol)
        return symbol

    def convert(leaf):
        if not isinstance(leaf, InputSpec):
            return leaf
        dims = [str(d) if isinstance(d, int) else d if isinstance(d, str) else fresh(leaf, axis)
                for axis, d in enumerate(leaf.shape)]
        shape = jax.export.symbolic_shape(", ".join(dims), scope=scope) if dims else ()
        return jax.ShapeDtypeStruct(shape, leaf.dtype)

    # tree_map gives dicts back with sorted keys: the function must see the caller's order.
    return key_order.restore(jax.tree_util.tree_map(convert, tree, is_leaf=is_spec), key_order.orders_of(tree))


def as_spec(leaf, name: str | None = None):
    """An InputSpec for an InputSpec, ShapeDtypeStruct or array leaf; other leaves unchanged."""
    if isinstance(leaf, InputSpec):
        return leaf if leaf.name or name is None else InputSpec(leaf.shape, leaf.dtype, name)
    if isinstance(leaf, jax.ShapeDtypeStruct):
        dims = [None if jax.export.is_symbolic_dim(d) else int(d) for d in leaf.shape]
        return InputSpec(dims, leaf.dtype, name)
    if isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
        return InputSpec.from_array(leaf, name)
    return leaf


def is_spec(leaf) -> bool:
    return isinstance(leaf, InputSpec)


class ArgumentChecker:
    """Checks the arguments of one function against its `input_spec` list, per call.

    Spec i describes positional parameter i (after `self`); an entry may be an InputSpec, a
    pytree of InputSpecs (checked leaf by leaf), or anything else (not checked: a static value).
    """

    def __init__(self, specs: Sequence, param_names: Sequence[str], skip: int = 0):
        self._specs = [jax.tree_util.tree_map(as_spec, s, is_leaf=is_spec) for s in specs]
        self._names = list(param_names)[skip:]
        self._skip = skip  # leading arguments no spec describes (`self`)

    def check(self, args: tuple, kwargs: dict) -> None:
        bound: dict = {}
        for i, spec in enumerate(self._specs):
            name = self._names[i] if i < len(self._names) else None
            if i + self._skip < len(args):
                value = args[i + self._skip]
            elif name is not None and name in kwargs:
                value = kwargs[name]
            else:
                continue  # not passed: the function's own defaults/TypeError apply
            what = f"argument {name!r}" if name else f"argument #{i}"
            if isinstance(spec, InputSpec):
                problem = spec.mismatch(value, bound)
                if problem is not None:
                    raise spec.error(what, problem, user_origin())
                continue
            spec_leaves, spec_tree = jax.tree_util.tree_flatten_with_path(spec, is_leaf=is_spec)
            if not any(isinstance(l, InputSpec) for _, l in spec_leaves):
                continue
            value_leaves, value_tree = jax.tree_util.tree_flatten(value)
            if value_tree != spec_tree:
                raise InputSpecError(f"{what} has structure {value_tree}, but its input_spec has {spec_tree}.",
                                     user_origin(),
                                     advice="pass the same nesting of arrays as the input_spec describes.")
            for (path, leaf_spec), leaf in zip(spec_leaves, value_leaves):
                if isinstance(leaf_spec, InputSpec):
                    leaf_what = f"argument '{name or i}{jax.tree_util.keystr(path)}'"
                    problem = leaf_spec.mismatch(leaf, bound)
                    if problem is not None:
                        raise leaf_spec.error(leaf_what, problem, user_origin())
