"""What kind of value is this: the one definition of each test the runtime and the call path use.

* `ARRAY_TYPES`: concrete arrays (jax, numpy arrays and numpy scalars) — program inputs, weights.
* `PY_SCALARS`: Python numbers (bool, int, float, complex) — static, or promoted like `jnp.where`.
* `is_traced`: only exists inside a trace (a jax Tracer).
* `is_array`: an array, concrete or traced — what staged control flow carries.
* `flatten_state`: a variable's leaves, with dy2st's `Undefined` markers kept as leaves.
* `as_number_where_chosen`: the numbers rule for a value the data picks among Python numbers.
"""

from __future__ import annotations

import ctypes
import dataclasses
import enum
import functools
import io
import itertools
import sys
import types
import warnings
from typing import NamedTuple

import jax
import numpy as np

from dy2st import _jax_compat
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.undefined import MaybeUnbound, Undefined

ARRAY_TYPES = (jax.Array, np.ndarray, np.generic)
PY_SCALARS = (bool, int, float, complex)


def is_python_number(value) -> bool:
    """A Python number the numbers rule may carry as a 0-d array: not an `IntEnum`/`IntFlag`
    member, an int whose name and kind an array would lose (`lv.name`)."""
    return isinstance(value, PY_SCALARS) and not isinstance(value, enum.Enum)


def is_traced(value) -> bool:
    """The one test for "this value only exists inside a trace": a jax Tracer."""
    return isinstance(value, jax.core.Tracer)


def traced_inside(value, depth: int = 2) -> bool:
    """Whether `value`, an item or attribute kept past a trace, is a traced value, or a tuple or a
    function (a lambda, a `functools.partial`: a gradient tape's closure) holding one, to
    `depth` functions deep (lists and dicts in a function's cells are looked into: no one else
    walks those)."""
    if is_traced(value):
        return True
    if type(value) is tuple:
        return any(traced_inside(v, depth) for v in value)
    if depth and isinstance(value, types.FunctionType):
        held = [*(v for _, v in closure_values(value)), *(value.__defaults__ or ())]
    elif depth and isinstance(value, functools.partial):
        held = [value.func, *value.args, *value.keywords.values()]
    else:
        return False
    held = [v for h in held for v in (h.values() if type(h) is dict else h if type(h) is list else (h,))]
    return any(traced_inside(v, depth - 1) for v in held)


def closure_values(fn: types.FunctionType) -> list:
    """`(name, value)` of each variable `fn` closes over that is bound now."""
    found = []
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            found.append((name, cell.cell_contents))
        except ValueError:  # a variable not yet assigned
            pass
    return found


def is_array(value) -> bool:
    """An array, concrete or traced (a Tracer is a jax.Array too, but say it)."""
    return isinstance(value, ARRAY_TYPES) or is_traced(value)


def _is_undefined(value) -> bool:
    return isinstance(value, Undefined)


def flatten_state(value):
    """`(leaves, treedef)` of a state variable; an `Undefined` marker is one leaf."""
    return jax.tree_util.tree_flatten(value, is_leaf=_is_undefined)


def describe(value) -> str:
    """Short type description used in error messages: `float32[3]`, `Python int 3`, `None`."""
    if isinstance(value, Undefined):
        return "undefined"
    if type(value) is MaybeUnbound:
        return f"{describe(value.value)}, unbound where the data decides"
    if value is None:
        return "None"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        shape = ",".join(str(d) for d in value.shape)
        weak = " (weak)" if getattr(value, "weak_type", False) else ""
        return f"{value.dtype.name}[{shape}]{weak}"
    if isinstance(value, PY_SCALARS):
        return f"Python {type(value).__name__} {value!r}"
    return type(value).__name__


# -- what the state walk and the output codec take apart ----------------------------------------
# Not walked as state either: code, and files (a static value keyed by its identity, so that
# `print(..., file=buf)` writes to each call's own `buf`).
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           functools.partial, property, staticmethod, classmethod, io.IOBase)
# Objects of these libraries are never walked into: they are configuration or machinery, not
# model state (a logger, a mesh, a jax/numpy helper object).
OPAQUE_MODULES = frozenset({"jax", "jaxlib", "numpy", "dy2st", "logging", "threading", "_thread", "builtins",
                            "functools", "typing", "abc", "optax", "flax", "equinox", "ml_dtypes"})
NODE_KINDS: dict[type, str | None] = {}  # type -> node_kind (a cache the state walk reads inline)


def _kind_of_type(tp, value) -> str | None:
    """'l' list, 'd' dict, 'o' plain object walked by attribute, None: not a node."""
    if issubclass(tp, list):
        return "l"
    if issubclass(tp, dict):
        return "d"
    if (issubclass(tp, _OPAQUE + ARRAY_TYPES) or not hasattr(value, "__dict__")
            or (tp.__module__ or "").split(".")[0] in OPAQUE_MODULES):
        return None
    if not jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(value)):
        return None  # a registered pytree (Equinox, NNX, a user's dataclass pytree)
    return "o"


# Methods that change their receiver in place (a list's, a dict's, a set's, a deque's): the
# analysis counts them as Python effects, and a staged ternary's side refuses them.
MUTATORS = frozenset({
    "append", "extend", "insert", "remove", "clear", "update", "sort", "reverse", "add", "discard",
    "appendleft", "extendleft", "rotate",
    # the same changes spelled as the operators' methods (`d.__setitem__(k, v)`, `xs.__iadd__(ys)`)
    "__setitem__", "__delitem__", "__iadd__", "__imul__", "__ior__", "__iand__", "__isub__", "__ixor__",
})
RETURNING_MUTATORS = frozenset({"pop", "popitem", "setdefault", "popleft"})

_fresh_positions = itertools.count()


class IteratorAt(NamedTuple):
    """Where a builtin iterator over a list, tuple or string stood: its index, and the sequence,
    which the iterator drops once it runs out (`rewind`)."""

    index: int
    sequence: object


def iterator_at(iterator) -> IteratorAt | None:
    """Where `iterator` stands, if it is a builtin one over a list, tuple or string that has not
    run out, or an `itertools.count` (its next value; None otherwise)."""
    try:
        state = iterator.__reduce__()
    except Exception:
        return None
    if type(iterator) is itertools.count:
        return IteratorAt(state[1][0], itertools.count) if type(state[1][0]) is int else None
    if len(state) > 2 and type(state[2]) is int and hasattr(iterator, "__setstate__") and len(state[1]) == 1:
        return IteratorAt(state[2], state[1][0])
    return None


def rewind(iterator, at: IteratorAt) -> bool:
    """Put `iterator` back at `at`, also where it ran out since (a trace given up took its last
    item: `list(IT)`, a `for` over it). Whether it could be: an iterator that ran out has dropped
    its sequence, which only CPython's own layout of list, tuple and string iterators (an index,
    then the sequence, after the object header: checked once on a probe of each) can give back;
    an `itertools.count` has no way to be set but through that layout either (`_set_count`)."""
    if at.sequence is itertools.count:
        return _set_count(iterator, at.index)
    if iterator_at(iterator) is None:
        if type(at.sequence) not in (list, tuple, str) or not _layout_known():
            return False
        slot = ctypes.c_void_p.from_address(id(iterator) + _SEQUENCE_OFFSET)
        if slot.value is not None:
            return False
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(at.sequence))  # the reference the iterator held
        slot.value = id(at.sequence)
    iterator.__setstate__(at.index)
    return True


_SEQUENCE_OFFSET = 3 * ctypes.sizeof(ctypes.c_void_p)  # reference count, type, index, then the sequence
_COUNT_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p)  # an itertools.count's: its next value, then its big-int form


def _set_count(counter, value: int) -> bool:
    """Give an `itertools.count` the next value `value`, in CPython's layout: a machine integer,
    or (another step than 1, or past its range) a Python int it holds instead (checked once on a
    probe)."""
    if not _layout_known():
        return False
    big = ctypes.c_void_p.from_address(id(counter) + _COUNT_OFFSET + ctypes.sizeof(ctypes.c_void_p))
    if big.value is None:  # counting in a machine integer
        if not -(2 ** 62) < value < 2 ** 62:
            return False
        ctypes.c_ssize_t.from_address(id(counter) + _COUNT_OFFSET).value = value
    else:  # counting in Python ints: the one it holds replaced, its reference moved over
        old = ctypes.cast(big.value, ctypes.py_object).value
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(value))
        big.value = id(value)
        ctypes.pythonapi.Py_DecRef(ctypes.py_object(old))
    return counter.__reduce__()[1][0] == value


@functools.cache
def _layout_known() -> bool:
    """Whether CPython lays out list, tuple and string iterators (their sequence after the
    index) and `itertools.count` (its machine integer, then its unused big-int form) as
    `rewind` writes them: checked once, on probes."""
    if sys.implementation.name != "cpython":
        return False
    probes = ([0], (0,), "probe")
    counter = itertools.count(123457)
    return (all(ctypes.c_void_p.from_address(id(iterator) + _SEQUENCE_OFFSET).value == id(probe)
                for probe, iterator in [(p, iter(p)) for p in probes])
            and ctypes.c_ssize_t.from_address(id(counter) + _COUNT_OFFSET).value == 123457
            and ctypes.c_void_p.from_address(id(counter) + _COUNT_OFFSET + ctypes.sizeof(ctypes.c_void_p)).value is None)


def iterator_position(value):
    """Where an iterator without attributes of its own stands (None for other values): what a
    program's key and a guard's token compare, so that a call finding an iterator advanced
    (by the trace itself: `next(data)`) traces again, and reads the next item as eager does.
    A builtin iterator's position as pickling states it (a list's index, the count of
    `itertools.count`, the items a dict's iterator has left); where none can be read (a
    generator: its frame offset repeats at each `yield` of a loop) a new token each time, so
    every call traces again."""
    kind = type(value)
    if hasattr(value, "__dict__") or not hasattr(kind, "__next__") or not hasattr(kind, "__iter__"):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # (pickling itertools, Python 3.12+)
            state = value.__reduce__()
    except Exception:
        return next(_fresh_positions)
    if len(state) > 2 and type(state[2]) is int:  # (iter, (list,), index)
        return state[2]
    args = state[1] if len(state) > 1 and type(state[1]) is tuple else ()
    if len(args) == 1 and type(args[0]) in (list, tuple, str):  # (iter, (items left,)): a dict's, or one that ran out
        return "left", len(args[0])
    if args and all(type(a) in (int, float) for a in args):  # itertools.count(n)
        return args
    return next(_fresh_positions)


def node_kind(value) -> str | None:
    tp = type(value)
    try:
        return NODE_KINDS[tp]
    except KeyError:
        return NODE_KINDS.setdefault(tp, _kind_of_type(tp, value))


_KINDS = {bool: "b", int: "iu", float: "f", complex: "c"}


def stands_for_python_number(dtype, values) -> bool:
    """Whether a value the data picks among `values`, staged with `dtype`, stands for a Python
    number: one of them is a Python number of `dtype`'s kind (`max(loss, 0.0)`; `y = 0.0` on
    one side of an `if`)."""
    kind = np.dtype(dtype).kind
    return any(type(v) in _KINDS and kind in _KINDS[type(v)] for v in values)


def as_number_where_chosen(result, values):
    """The numbers rule (DESIGN.md): a Python number whose value the data decides is a 0-d
    array of jnp's dtype for it, weakly typed as jnp makes Python numbers, with eager's value.
    `result` is the staged pick among `values`; where one of them is such a number it is made
    weak, so later arithmetic promotes as it would with the number (`y * 2` stays weak)."""
    if stands_for_python_number(result.dtype, values) and not jax.typeof(result).weak_type:
        return _jax_compat.convert_element_type(result, result.dtype, True)
    return result


def is_nnx_object(x) -> bool:
    """A Flax NNX module or Variable (flax is not imported for it): an object whose identity and
    in-place changes the code sees, where other pytrees are values."""
    nnx = sys.modules.get("flax.nnx")
    return nnx is not None and isinstance(x, (nnx.Pytree, nnx.Variable))


def is_frozen_config(value, depth: int = 0) -> bool:
    """A frozen dataclass, or a Flax linen Module not bound to variables (frozen by flax outside
    `setup`: `to_static(model.apply)`'s receiver), whose fields are Python numbers, strings,
    None, functions, or tuples and such configs of them (`Cfg(n_layers=2, scale=0.5)`,
    `MLP(features=64, act=nn.relu)`): it cannot change in place and holds no array, so it is a
    static argument keyed by its fields' values (`program._static_token`), not state walked and
    lifted on every call."""
    params = getattr(type(value), "__dataclass_params__", None)
    if params is None or depth > 4 or not (params.frozen or _unbound_linen_module(value)):
        return False
    return all(_static_data(getattr(value, field.name, None), depth) for field in dataclasses.fields(value))


def _unbound_linen_module(value) -> bool:
    linen = sys.modules.get("flax.linen")
    return linen is not None and isinstance(value, linen.Module) and value.scope is None


def _static_data(value, depth: int) -> bool:
    kind = type(value)
    if kind in _CONFIG_SCALARS or kind in _FUNCTIONS:
        return True
    if callable(value) and (kind.__module__ or "").split(".")[0] in _FUNCTION_PACKAGES:
        return True  # (`act=jnp.tanh`, a jit-wrapped or custom_jvp function, a numpy ufunc: keyed by identity)
    if kind is tuple:
        return all(_static_data(item, depth + 1) for item in value)
    return is_frozen_config(value, depth + 1)


_FUNCTIONS = frozenset({types.FunctionType, types.BuiltinFunctionType})
_FUNCTION_PACKAGES = frozenset({"jax", "jaxlib", "numpy"})
_CONFIG_SCALARS = frozenset({int, float, bool, complex, str, bytes, type(None)})


def python_numbers() -> PythonNumbers | None:
    """The `PythonNumbers` of the converted code being traced now (None outside any:
    `writes.converted_run`)."""
    return CONTEXT.python_numbers


def bool_as_python_int(value):
    """`value`, or where it is a Python bool the data decides (a 0-d bool array `PythonNumbers`
    says stands for one) the int Python computes with for `-b`, `~b`, `abs(b)`: jnp keeps a bool,
    computes `not`, or refuses `neg`. Weakly typed, as the numbers rule's ints are."""
    if is_traced(value) and value.dtype == np.bool_ and np.shape(value) == ():
        numbers = python_numbers()
        if numbers is not None and numbers.holds(value):
            return _jax_compat.convert_element_type(value, np.dtype(np.int32), True)
    return value


def note_python_numbers(values) -> None:
    """`values` (traced) stand for Python numbers the data decides: a staged `if` picked them,
    or a staged loop carried them, where eagerly each is an int or a float."""
    numbers = CONTEXT.python_numbers
    if numbers is not None:
        numbers.note(values)


class PythonNumbers:
    """Which traced values of a program stand for Python numbers: the stand-ins noted where the
    numbers rule makes them, and what Python arithmetic on them and on constants computes (`n - 1`,
    `10 / n`: 0-d and weakly typed, as jnp keeps Python numbers), found by walking each jaxpr's
    operations once, as far as it is traced when asked; each with its Python kind, "i" (an int or
    bool) or "f" (a float), which jnp's promotion to float for `/` does not change. A weakly typed
    0-d array that is no such value (an argument `jnp.array(0.0)`) divides by 0 as XLA does, as it
    does eagerly."""

    def __init__(self):
        self.kinds: dict = {}  # `_jax_compat.value_key` of a value that stands for a Python number -> "i" or "f"
        self.kept: list = []  # the tracers and jaxprs walked (their keys and ids stay theirs)
        self.walked: dict = {}  # id(a jaxpr being traced) -> how many of its operations were walked

    def note(self, values) -> None:
        for value in values:
            key = _jax_compat.value_key(value)
            if key is not None and np.shape(value) == ():
                self.kinds[key] = _kind(value.dtype)
                self.kept.append(value)

    def kind(self, value) -> str | None:
        """"i" or "f" where `value` (traced) stands for a Python int or float, else None; a
        constant of the jaxpr (`k + 1`'s 1) by its value."""
        if not isinstance(value, jax.core.Tracer):  # (an Undefined marker raises on any attribute)
            return None
        constant = _jax_compat.literal_value(value)
        if constant is not None:
            return "i" if np.isfinite(constant) and float(constant) == int(constant) else "f"
        key = _jax_compat.value_key(value)
        if key is None:
            return None
        self._walk(value)
        kind = self.kinds.get(key)
        if kind is not None:
            return kind
        outer = _jax_compat.lifted_from(value)  # read by a side or a loop body from before it
        return self.kind(outer) if is_traced(outer) else None

    def holds(self, value) -> bool:
        """Whether the traced `value` stands for a Python number (not a constant)."""
        return self.kind(value) is not None and not _constant(value)

    def zero_divisor(self, operation):
        """For a division of a Python number by one (or by the constant 0): `(a traced bool, whether
        the divisor is 0; the text of Python's ZeroDivisionError)`, else None."""
        if operation.name in ("integer_pow", "pow"):
            return self._zero_to_a_negative_power(operation)
        division = _division_kind(operation)
        if division is None or len(operation.inputs) != 2:
            return None
        dividend, divisor = operation.inputs
        constant = _jax_compat.literal_value(divisor)
        if not (self.holds(divisor) or (constant is not None and constant == 0)):
            return None
        kinds = (self.kind(dividend), self.kind(divisor))
        if kinds[0] is None:
            return None  # an array divided by a number: XLA's inf, as eagerly
        floats = "f" in kinds if division == "div" else _kind(operation.outputs[0].dtype) == "f"
        return divisor == 0, _ZERO_DIVISION[division, floats]

    def _zero_to_a_negative_power(self, operation):
        """`zero_divisor` of a power of a Python number: Python raises where the base is 0 and
        the exponent negative (`k ** -1`), XLA gives inf."""
        base = operation.inputs[0]
        if not self.holds(base):
            return None
        if operation.name == "integer_pow":
            negative = bool(operation.params["y"] < 0)
        else:
            exponent = operation.inputs[1]
            constant = _jax_compat.literal_value(exponent)
            negative = bool(constant < 0) if constant is not None else (exponent < 0 if self.holds(exponent) else None)
        if negative is None or negative is False:
            return None
        return (base == 0) & negative, "0.0 cannot be raised to a negative power"

    def _walk(self, value) -> None:
        frame = _jax_compat.frame_of(value)
        if frame is None:
            return
        start = self.walked.get(id(frame), 0)
        count, operations = _jax_compat.frame_operations(frame, start)
        if count <= start:
            return
        self.walked[id(frame)] = count
        self.kept.append(frame)
        for operation in operations:
            out = operation.outputs
            # (a bool of Python numbers is one too: `k > 0`, a stand-in made a strong bool for `or`)
            if len(out) != 1 or out[0].shape != () or not (out[0].weak_type or out[0].dtype == np.bool_):
                continue
            kinds = [self.kind(i) for i in operation.inputs]
            if None in kinds or all(_constant(i) for i in operation.inputs):
                continue  # (something not a number, or constants only: array arithmetic, `w * 2` of a `jnp.array(2.5)`)
            # jnp makes an int a float for `/`: the number is still the int Python divides
            kind = kinds[0] if operation.name == "convert_element_type" else _kind(out[0].dtype)
            self.kinds.update(dict.fromkeys(operation.output_keys, kind))


def _constant(value) -> bool:
    """Whether traced `value` is a constant of its jaxpr, or a side's or loop body's read of one
    from before it (`w = jnp.array(2.5)`, then `w * 2` in a staged branch)."""
    while is_traced(value):
        if _jax_compat.literal_value(value) is not None:
            return True
        value = _jax_compat.lifted_from(value)
    return False


def _kind(dtype) -> str:
    return "f" if np.dtype(dtype).kind in "fc" else "i"


_ZERO_DIVISION = {  # Python's texts
    ("div", False): "division by zero", ("div", True): "float division by zero",
    ("floordiv", False): "integer division or modulo by zero", ("floordiv", True): "float floor division by zero",
    ("rem", False): "integer modulo by zero", ("rem", True): "float modulo",
    ("divmod", False): "integer division or modulo by zero", ("divmod", True): "float divmod()"}
_DIVISIONS = {"div": "div", "rem": "rem", "floor_divide": "floordiv", "remainder": "rem", "divmod": "divmod",
              "true_divide": "div", "divide": "div"}


def _division_kind(operation) -> str | None:
    """"div", "floordiv", "rem" or "divmod" for a traced division (a primitive, or jnp's jitted
    `floor_divide`/`remainder`), else None."""
    if operation.name in ("div", "rem"):
        return operation.name
    if operation.name in ("jit", "pjit"):
        return _DIVISIONS.get(str(operation.params.get("name")))
    return None
