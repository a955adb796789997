"""What a `for` loop iterates when the loop must be staged: traced ranges and arrays.

Generated code calls `loop_iter(range, a, b)` (likewise `enumerate`, `zip`, `reversed`, the
calls in their arguments, and any other function called in a `for` header, which may be
`range` under another name) instead of the builtin, so a traced bound or a traced array
reaches `convert_for` before Python would try to iterate it. Each staged iterable gives its
`static_length` (a Python int, or None when traced), `within(i)` (whether a traced index is
before the end) and `element(i)`, its item at a traced index. Python arguments give the
builtin's own result, and the loop stays Python.
"""

from __future__ import annotations

import abc
import collections.abc
import builtins
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dy2st import _jax_compat
from dy2st.errors import OriginInfo
from dy2st.user_code import is_users_object
from dy2st.runtime.asserts import check_when_run
from dy2st.runtime.calls import convert_call
from dy2st.runtime.values import is_traced


def weak_int(i):
    """A traced index typed like a Python int (weakly typed int32), as eager code would see it."""
    if is_traced(i) and i.dtype == np.int32 and i.weak_type:  # a staged loop's index already is
        return i
    return _jax_compat.convert_element_type(jnp.asarray(i, jnp.int32), np.dtype(np.int32), weak_type=True)


def _affine(start, i, step=1):
    """`start + i * step`, without the ops a Python 0 start or 1 step would add to the program."""
    if not (type(step) is int and step == 1):
        i = i * step
    if not (type(start) is int and start == 0):
        i = start + i
    return i


class StagedIterable(abc.ABC):
    """Base of iterables a staged loop walks by index; each subclass sets `count`.

    `count` is the number of items as a Python int when it is static; else a traced int32
    that may be negative for none (a traced `range(5, n)` with n < 5): the loop only asks
    `within(i)`, and clamping the count would put one more op outside the loop, which XLA
    compiles as a kernel of its own.
    """

    count = 0

    @property
    def static_length(self):
        return self.count if isinstance(self.count, int) else None

    @property
    def length(self):
        """The number of items: a Python int, or a traced int32 >= 0."""
        return self.count if isinstance(self.count, int) else lax.max(self.count, np.int32(0))

    def within(self, i):
        """Whether the traced index `i` is before the end (`i < length`)."""
        return lax.lt(i, self.count)  # both int32: no convert of the weak index

    @abc.abstractmethod
    def element(self, i):
        """The item at traced index `i` (0 <= i < length)."""

    def __iter__(self):
        """Python iteration (another header call, `zip` with a Python iterable): a static length's
        items as eager gives them; a traced one has none while the program is traced."""
        if self.static_length is None:
            raise TypeError(f"{type(self).__name__[len('Staged'):].lower()}() of a traced length can only be "
                            "iterated by a `for` loop header")
        return iter(self.python_items())

    def python_items(self) -> list:
        """The items as eager iteration gives them, for a static length (an unrolled loop)."""
        return [self.python_item(i) for i in range(self.count)]

    def python_item(self, i: int):
        return self.element(i)


class StagedRange(StagedIterable):
    """`range(start, stop, step)`; any of them may be traced (a zero `step` raises eagerly)."""

    def __init__(self, start, stop, step=1):
        if not is_traced(step) and step == 0:
            raise ValueError("range() arg 3 must not be zero")
        self.start, self.stop, self.step = start, stop, step
        if not any(is_traced(v) for v in (start, stop, step)):
            self.count = len(builtins.range(start, stop, step))
        elif type(step) is int:  # the usual `range(n)` / `range(a, b)`: no sign or division ops
            span = stop if type(start) is int and start == 0 else stop - start
            if step != 1:
                span = (span + step - (1 if step > 0 else -1)) // step
            self.count = span.astype(jnp.int32)
        else:  # a traced step: eagerly a zero step raises, so the program does when it runs
            check_when_run(step != 0, lambda: ValueError("range() arg 3 must not be zero"), OriginInfo.of_user_code(),
                           "a range's step is not zero", raises="ValueError")
            nonzero = jnp.where(step == 0, 1, step)  # (no iterations, rather than a division by zero)
            sign = jnp.sign(nonzero)
            self.count = jnp.where(step == 0, 0, (stop - start + nonzero - sign) // nonzero).astype(jnp.int32)

    def element(self, i):
        return weak_int(_affine(self.start, i, self.step))

    def python_item(self, i: int):
        return self.start + i * self.step  # a static count: start and step are Python ints


class StagedArray(StagedIterable):
    """The rows of an array (its leading axis)."""

    def __init__(self, array):
        if not getattr(array, "shape", ()):
            raise TypeError("iteration over a 0-d array")
        self.array = array
        self.count = int(array.shape[0])

    def element(self, i):
        return lax.dynamic_index_in_dim(self.array, i, keepdims=False)

    def python_item(self, i: int):
        return self.array[i]


class StagedEnumerate(StagedIterable):
    def __init__(self, inner: StagedIterable, start=0):
        self.inner, self.start = inner, start
        self.count = inner.count

    def element(self, i):
        return (weak_int(_affine(self.start, i)), self.inner.element(i))

    def python_item(self, i: int):
        return (self.start + i, self.inner.python_item(i))


class StagedZip(StagedIterable):
    def __init__(self, parts):
        self.parts = parts
        counts = [p.count for p in parts]
        if all(isinstance(n, int) for n in counts):
            self.count = min(counts)
        else:  # the shortest part; a negative count (none) stays the smallest
            self.count = jnp.min(jnp.stack([jnp.asarray(n, jnp.int32) for n in counts]))

    def element(self, i):
        return tuple(p.element(i) for p in self.parts)

    def python_item(self, i: int):
        return tuple(p.python_item(i) if isinstance(p, StagedIterable) else p[i] for p in self.parts)


class StagedReversed(StagedIterable):
    """`reversed(...)` of a staged iterable: its items from the last."""

    def __init__(self, inner: StagedIterable):
        self.inner = inner
        self.count = inner.count

    def element(self, i):
        return self.inner.element(self.inner.length - 1 - i)

    def python_item(self, i: int):
        return self.inner.python_item(self.count - 1 - i)


def _stageable(value) -> bool:
    return isinstance(value, StagedIterable) or is_traced(value)


def _as_staged(value) -> StagedIterable:
    return value if isinstance(value, StagedIterable) else StagedArray(value)


def is_symbolic_dim(value) -> bool:
    """A `None` dimension of an InputSpec while `dy2st.save` exports: known only at run time."""
    return jax.export.is_symbolic_dim(value)


def _dimension_as_value(value):
    return jnp.asarray(value) if is_symbolic_dim(value) else value


def loop_iter(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` for a `for` header, staged when a bound or an iterated array is traced."""
    if fn is builtins.range and not kwargs and any(is_traced(a) or is_symbolic_dim(a) for a in args):
        args = [_dimension_as_value(a) for a in args]
        return StagedRange(*args) if len(args) > 1 else StagedRange(0, args[0])
    if fn is builtins.enumerate and args and _stageable(args[0]):
        start = args[1] if len(args) > 1 else kwargs.get("start", 0)
        return StagedEnumerate(_as_staged(args[0]), start)
    if fn is builtins.reversed and len(args) == 1 and not kwargs and _stageable(args[0]):
        return StagedReversed(_as_staged(args[0]))
    if fn is builtins.zip and args and not kwargs and any(_stageable(a) for a in args):
        if all(_stageable(a) or hasattr(a, "shape") for a in args):
            return StagedZip([_as_staged(a) for a in args])
    if fn in _LOOP_BUILTINS:
        items = fn(*args, **kwargs)
        sources = args[:1] if fn is builtins.enumerate else args
        if fn is not builtins.range and all(_plain_sequence(a) for a in sources):
            return HeaderItems(items)
        return items
    if fn in _FRESH_ITERATORS and all(_plain_sequence(a) or type(a) in (int, float, bool) for a in args) \
            and all(type(v) in (int, float, bool) or v is None for v in kwargs.values()):
        # `for p in itertools.product(xs, ys):`, which nothing else holds
        return HeaderItems(fn(*args, **kwargs), endless=fn in (itertools.count, itertools.cycle))
    return convert_call(fn)(*args, **kwargs)  # any other header call, converted as call_trees would


# Iterators over a list, tuple, range, string, bytes, set or dict: taking their items runs no code
# of the user's, and changes nothing but their position.
SEQUENCE_ITERATORS = frozenset(map(type, (iter([]), iter(()), iter(range(0)), iter(range(2 ** 64)), iter(""),
                                          iter("\u00e9"), iter(b""), reversed([]), reversed(range(0)), iter(set()),
                                          iter({}), iter({}.values()), iter({}.items()))))
_LOOP_BUILTINS = (builtins.range, builtins.enumerate, builtins.zip, builtins.reversed)
_PLAIN_SEQUENCES = (list, tuple, range, str)
# itertools' iterators over numbers and plain sequences: made in a `for` header, only the loop holds one
_FRESH_ITERATORS = frozenset({itertools.count, itertools.cycle, itertools.chain, itertools.islice, itertools.product,
                              itertools.permutations, itertools.combinations, itertools.pairwise,
                              itertools.combinations_with_replacement, itertools.zip_longest})


def _plain_sequence(value) -> bool:
    """A list, tuple, range or string, or a library's sequence (`nnx.List`): taking its items
    runs nothing of the user's."""
    return type(value) in _PLAIN_SEQUENCES or (isinstance(value, collections.abc.Sequence)
                                               and not is_users_object(value))


class HeaderItems:
    """The iterator a `for` header made over lists, tuples, ranges or strings (`for i, layer in
    enumerate(self.layers):`): no other code holds it, and taking its items runs nothing, so
    the loop may treat it as the sequence it walks: where a traced `break` decides how far the
    loop goes, the items left are staged one by one, as for a list (an iterator the code holds
    elsewhere, `it = iter(xs)`, is refused there instead: later reads would see another
    position)."""

    __slots__ = ("_items", "endless")

    def __init__(self, items, endless: bool = False):
        self._items = items
        self.endless = endless  # `itertools.count()`, `cycle()`: no item left to stage is the last

    def __iter__(self):
        return self._items

    @property
    def kind(self) -> str:
        return type(self._items).__name__
