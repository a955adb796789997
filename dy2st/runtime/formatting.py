"""Strings formatted from traced values: f-strings, `str.format`, `%`, `str()` and `repr()`.

Eagerly, `print(f"loss: {loss:.3f}")` prints the loss. While a program is traced the loss is
a tracer, and formatting it would print `JitTracer(float32[])` (or fail on a format spec).
Generated code therefore formats through these operators::

    f"v: {x!r:.2f}"      ->  jst.convert_format('v: {!r:.2f}', x)
    '{} {}'.format(a, b) ->  jst.convert_call('{} {}'.format)(a, b)   # -> convert_format
    '%s' % x             ->  jst.convert_percent('%s', x)

With no traced value they return exactly the Python string. With one, they return a
`TracedString`: the text as it will be once the program runs. `print` (see
`dy2st.runtime.builtins`) prints it at run time, with the arrays formatted as eager jax arrays
would be; `+` with other strings keeps it deferred. Any other use (comparing it, hashing it,
passing it to code that needs a real `str`) raises a `BuiltinError` naming the line, since the
text does not exist while the program is traced.
"""

from __future__ import annotations

from typing import Callable

import copy
import functools

import jax
import numpy as np

from dy2st.errors import BuiltinError, OriginInfo
from dy2st.runtime.values import is_traced, python_numbers

_ADVICE = ("print it (print and f-strings in print run when the program runs), use "
           "jax.debug.print, or format the value after the converted function returns.")


class _ArrayText:
    """A run-time array value that formats like the jax Array eager code would hold."""

    __slots__ = ("value", "weak")

    def __init__(self, value, weak: bool = False):
        self.value = np.asarray(value)
        self.weak = weak  # the traced value was weakly typed (`jnp.asarray(1.0)`): its repr says so

    def __str__(self):
        return str(self.value)

    def __repr__(self):
        # as jax.Array's repr lays it out (numpy's array2string, then the dtype), for a host array
        prefix, value = "Array(", self.value
        dtype = f"dtype={value.dtype.name}" + (", weak_type=True" if self.weak else "")
        line_width = np.get_printoptions()["linewidth"]
        text = (f"[], shape={value.shape}" if value.size == 0 else
                np.array2string(value, prefix=prefix, suffix=",", separator=", ", max_line_width=line_width))
        last_line = len(text) - text.rfind("\n") + 1
        sep = " " * len(prefix) if last_line + len(dtype) + 2 > line_width else " "
        return f"{prefix}{text},{sep}{dtype})"

    def __float__(self):  # '%.3f' % x
        return float(self.value)

    def __int__(self):
        return int(self.value)

    def __index__(self):  # '%d' % x, as jax.Array allows for integer scalars
        return self.value.__index__()

    def __format__(self, spec):
        # as jax.Array.__format__: a scalar formats as its Python value, others as numpy does
        return format(self.value[()] if self.value.ndim == 0 else self.value, spec)


class TracedString:
    """Text made from traced values; it exists once the program runs (see the module docstring).

    Attributes:
      arrays: the traced arrays the text is made from, in order.
      render: builds the text from the run-time values of `arrays` (numpy arrays).
      origin: the line that formatted it, for errors.
    """

    __slots__ = ("arrays", "render", "origin")

    def __init__(self, arrays: list, render: Callable[[list], str], origin: OriginInfo):
        self.arrays = arrays
        self.render = render
        self.origin = origin

    def _refuse(self, *args, **kwargs):
        raise BuiltinError(
            "this string is formatted from a traced value, so its text only exists when the "
            "program runs; it can be printed, not used as a Python str while tracing.",
            self.origin,
            advice=_ADVICE,
        )

    __str__ = __repr__ = __format__ = __len__ = __iter__ = __getitem__ = __contains__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __bool__ = __mul__ = _refuse

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._refuse()

    def __add__(self, other):
        return _concat(self, other, self.origin)

    def __radd__(self, other):
        return _concat(other, self, self.origin)

    def __mod__(self, values):  # f"{x} and %s" % y
        return _deferred(lambda text, v: text % v, (self, values), {}, self.origin)


def _concat(left, right, origin):
    if not isinstance(left, (str, TracedString)) or not isinstance(right, (str, TracedString)):
        return NotImplemented
    return _deferred(lambda a, b: a + b, (left, right), {}, origin)


def _has_traced(values, depth: int = 0) -> bool:
    leaves = jax.tree_util.tree_leaves(_viewed(values, depth), is_leaf=lambda v: isinstance(v, TracedString))
    return any(isinstance(l, TracedString) or is_traced(l) for l in leaves)


class _ObjectView:
    """A plain object (a `@dataclass`, a class of the user's) holding traced arrays, seen as the
    pytree of its attributes when it is formatted: at run time a copy of it holds their values,
    so its `__str__`/`__repr__` show what eager's would (not `JitTracer(...)`)."""

    __slots__ = ("obj", "depth")

    def __init__(self, obj, depth: int):
        self.obj, self.depth = obj, depth


def _with_values(aux, values):
    template, names = aux
    copy_ = copy.copy(template)
    vars(copy_).update(zip(names, values))
    return copy_


def _template(obj):
    """A copy of `obj` with no attributes, which the run-time copies start from: what the print
    keeps holds neither the user's object (a trace's check for objects held outside the call
    would count it) nor its tracers."""
    template = copy.copy(obj)
    vars(template).clear()
    return template


jax.tree_util.register_pytree_node(
    _ObjectView,
    lambda view: ([_viewed(v, view.depth + 1) for v in vars(view.obj).values()],
                  (_template(view.obj), tuple(vars(view.obj)))),
    _with_values)


def _viewed(values, depth: int = 0):
    """`values` with each plain object that holds traced arrays as an `_ObjectView` (objects
    within objects to a depth of 3: a cycle ends there)."""
    def view(value):
        if (depth < 3 and type(getattr(value, "__dict__", None)) is dict and not isinstance(value, type)
                and not callable(value) and _has_traced(vars(value), depth + 1)):
            return _ObjectView(value, depth)
        return value

    return jax.tree_util.tree_map(view, values, is_leaf=lambda v: isinstance(v, TracedString))


def bind_traced(args, kwargs, wrap=None):
    """(the traced arrays in `args`/`kwargs`, a function giving `(args, kwargs)` back from their
    run-time values): arrays then format like eager jax arrays (or are `wrap(value)`),
    TracedStrings become text."""
    wrap = wrap or _ArrayText
    leaves, treedef = jax.tree_util.tree_flatten(_viewed((args, kwargs)), is_leaf=lambda v: isinstance(v, TracedString))
    arrays, counts, numbers, weak = [], [], {}, set()
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, TracedString):
            arrays += leaf.arrays
            counts.append(len(leaf.arrays))
        elif is_traced(leaf):
            arrays.append(leaf)
            counts.append(1)
            kind = _python_kind(leaf)
            if kind is not None:
                numbers[i] = kind
            elif jax.typeof(leaf).weak_type and wrap is _ArrayText:
                weak.add(i)
        else:
            counts.append(0)

    def fill(values: list):
        values, filled = iter(values), []
        for i, (leaf, count) in enumerate(zip(leaves, counts)):
            mine = [next(values) for _ in range(count)]
            if isinstance(leaf, TracedString):
                filled.append(leaf.render(mine))
            elif i in numbers:  # the numbers rule: eager holds a Python number here, and shows it so
                filled.append(_as_python(mine[0], numbers[i]))
            elif i in weak:
                filled.append(_ArrayText(mine[0], weak=True))
            elif count:
                filled.append(wrap(mine[0]))
            else:
                filled.append(leaf)
        return jax.tree_util.tree_unflatten(treedef, filled)

    return arrays, fill


def _python_kind(leaf) -> str | None:
    """"i" for a weakly typed 0-d int or bool (what a Python int the data decides is: the numbers
    rule), "f" for a 0-d float the numbers rule says stands for a Python float (a weakly typed
    float may be an array: `jnp.asarray(0.5)`), else None."""
    aval = jax.typeof(leaf)
    if not aval.weak_type or aval.shape != ():
        return None
    kind = np.dtype(aval.dtype).kind
    if kind in "iub":
        return "i"
    numbers = python_numbers()
    return "f" if kind == "f" and numbers is not None and numbers.holds(leaf) else None


def _as_python(value, kind: str):
    """The Python number a run-time value of `_python_kind` stands for, shown as eager shows it: a
    float by the shortest text that gives its value back (`0.1`, not float32's 0.10000000149...)."""
    value = np.asarray(value)
    return value.item() if kind == "i" else float(str(value))


def _deferred(format_fn, args, kwargs, origin: OriginInfo) -> TracedString:
    """`format_fn(*args, **kwargs)` once the traced leaves of the arguments have values."""
    arrays, fill = bind_traced(args, kwargs)

    def render(values: list) -> str:
        args_, kwargs_ = fill(values)
        return format_fn(*args_, **kwargs_)

    return TracedString(arrays, render, origin)


def has_traced(values) -> bool:
    """Whether `values` hold a tracer or a TracedString."""
    return _has_traced(values)


def convert_format(template: str, *args, **kwargs):
    """`template.format(*args, **kwargs)`; deferred to run time when an argument is traced."""
    if not _has_traced((args, kwargs)):
        return template.format(*args, **kwargs)
    return _deferred(template.format, args, kwargs, OriginInfo.of_caller())


def convert_percent(template, values):
    """`template % values` (printf-style); deferred to run time when a value is traced."""
    if not isinstance(template, str) or not _has_traced(values):
        return template % values
    return _deferred(lambda v: template % v, (values,), {}, OriginInfo.of_caller())


def convert_str(*args, **kwargs):
    """`str(x)`; a traced `x` gives its text at run time."""
    if len(args) == 1 and not kwargs and _has_traced(args[0]):
        return _deferred(str, args, {}, OriginInfo.of_caller())
    return str(*args, **kwargs)


def _text_when_run(text_of):
    """The replacement of the builtin `text_of` (`repr`, `ascii`): of a traced `x`, its text
    at run time."""

    def convert(value):
        if _has_traced(value):
            return _deferred(text_of, (value,), {}, OriginInfo.of_caller())
        return text_of(value)

    convert.__name__ = convert.__qualname__ = f"convert_{text_of.__name__}"
    return convert


convert_repr = _text_when_run(repr)
convert_ascii = _text_when_run(ascii)


def convert_format_builtin(value, format_spec=""):
    """`format(x, spec)`; a traced `x` (or spec) gives its text at run time."""
    if _has_traced((value, format_spec)):
        return _deferred(format, (value, format_spec), {}, OriginInfo.of_caller())
    return format(value, format_spec)


def str_method_replacement(fn):
    """`convert_format` / `convert_join` bound to the string, for `fn` a string's `format` or
    `join` (`", ".join(f"{v:.2f}" for v in x)`), else None."""
    if type(getattr(fn, "__self__", None)) is not str:
        return None
    name = getattr(fn, "__name__", None)
    if name == "format":
        return functools.partial(convert_format, fn.__self__)
    if name == "join":
        return functools.partial(convert_join, fn.__self__)
    return None


def convert_join(separator: str, items):
    """`separator.join(items)`; text made when the program runs where an item is formatted
    from a traced value (a TracedString)."""
    items = list(items)
    if not any(isinstance(item, TracedString) for item in items):
        return separator.join(items)
    joined = items[0]
    for item in items[1:]:
        joined = joined + separator + item
    return joined
