"""Markers for variables that are not bound yet, so staging can name them instead of crashing."""

from __future__ import annotations

import sys

import jax

from dy2st.errors import OriginInfo, UndefinedVariableError, user_function_name


# Every use eager Python would reach with the variable unbound (comparisons for equality and
# hashing stay: staging compares and keys markers themselves; `__array__`: numpy and jnp
# functions given one, as jax refuses objects with `__jax_array__`).
_USES = ("__bool__ __call__ __iter__ __len__ __index__ __float__ __int__ __complex__ __add__ __radd__ __sub__ "
         "__rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ "
         "__divmod__ __rdivmod__ __pow__ __rpow__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __lshift__ "
         "__rshift__ __getitem__ __setitem__ __delitem__ __contains__ __lt__ __le__ __gt__ __ge__ __neg__ __pos__ "
         "__abs__ __invert__ __matmul__ __rmatmul__ __round__ __trunc__ __floor__ __ceil__ __format__ "
         "__array__").split()


def _failing_on_use(cls):
    """Give `cls` its `_fail` for every use in `_USES` and for any attribute but a dunder."""
    for name in _USES:
        setattr(cls, name, cls._fail)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()

    cls.__getattr__ = __getattr__
    return cls


@_failing_on_use
class Undefined:
    """Stands for a variable that is unbound on some path (eager Python would raise there).

    Any use of it raises `UndefinedVariableError` naming the variable.
    """

    __slots__ = ("name", "origin")
    is_undefined_marker = True  # what `errors` tests, importing nothing of the runtime

    def __init__(self, name: str, origin: OriginInfo | None = None):
        self.name = name
        self.origin = origin

    def __repr__(self):
        return f"Undefined({self.name!r})"

    def _fail(self, *args, **kwargs):
        raise self.error_at(_read_at(self.origin))

    def error_at(self, origin: OriginInfo | None) -> UndefinedVariableError:
        """Eager's UnboundLocalError reading the variable at `origin`, as dy2st's error."""
        error = UndefinedVariableError(
            f"cannot access local variable '{self.name}' where it is not associated with a value: it is "
            "not assigned on the path taken here.",
            origin,
            advice=f"assign '{self.name}' before the `if`/loop that may leave it unassigned, or in every branch of it.",
        )
        if self.origin is not None and origin != self.origin:
            error.add_note(f"(dy2st) '{self.name}' is left unassigned by the `if`/loop at {self.origin.as_header()}")
        return error


@_failing_on_use
class MaybeUnbound:
    """A local variable that a staged `if` or loop leaves unbound on some paths, where the data
    decides which: its value where the data bound it (zeros of that type where not) and `bound`,
    a traced bool saying whether it did (a Python True where every path did). A pytree node, so
    later conds and loops carry both. Converted code reads it through `jst.ld` (see
    `transformers.unbound_reads`), which checks `bound` when the program runs: eager Python raises
    UnboundLocalError at that read. Any other use (a nested function reading it as a free
    variable) is refused, as the `Undefined` marker's are; so is `str()` of it."""

    __slots__ = ("value", "bound", "name")

    def __init__(self, value, bound, name: str):
        self.value, self.bound, self.name = value, bound, name

    def __repr__(self):
        return f"MaybeUnbound({self.name!r})"

    def _fail(self, *args, **kwargs):
        raise UndefinedVariableError(
            f"'{self.name}' may be unbound here: a staged `if` or loop (whose condition is traced) leaves it "
            "unassigned on some paths, and it is read where dy2st cannot check which path the data took "
            "(a nested function or generator reading it).",
            OriginInfo.of_user_code(),
            advice=f"assign '{self.name}' before the `if`/loop that may leave it unassigned, or in every branch of it.",
        )

    # (compared as a value only through `jst.ld`: `==` here would compare the wrapper itself)
    __str__ = __eq__ = __ne__ = _fail
    __hash__ = object.__hash__


jax.tree_util.register_pytree_node(
    MaybeUnbound,
    lambda m: ((m.value, m.bound), m.name),
    lambda name, children: MaybeUnbound(children[0], children[1], name),
)


def maybe_unbound_tree(structure) -> bool:
    """Whether a state variable's tree structure is a `MaybeUnbound`'s."""
    return structure is not None and structure.num_nodes > 1 and structure.node_data()[0] is MaybeUnbound


def _read_at(origin: OriginInfo | None) -> OriginInfo | None:
    """The line of the user's code that reads the marker (the innermost frame of the converted
    function that left it, or of a branch function in it: converted code keeps the user's
    lines), as eager Python's error
    names it; `origin` where no such frame is running (a value returned)."""
    if origin is None:
        return None
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == origin.filename and user_function_name(frame) == origin.function_name:
            return OriginInfo(origin.filename, frame.f_lineno, origin.function_name)
        frame = frame.f_back
    return origin


class UndefinedReturn(Undefined):
    """The return value before any `return` ran. Staging may fill it with zeros on a path
    that has not returned yet: the early-return flag guarantees it is overwritten there."""

    def __init__(self):
        super().__init__("the return value")


UNDEFINED_RETURN = UndefinedReturn()


class DeadValue(UndefinedReturn):
    """A variable unbound on a path that has already returned/broken out: never read there,
    so staging may fill it with zeros like an undefined return value."""

    def __init__(self, name: str):
        Undefined.__init__(self, name)


def ldu_dead(thunk, name: str):
    """Load a variable on a path past an early return/break/continue: its value, or a
    `DeadValue` marker when it is unbound there (never read on that path)."""
    try:
        value = thunk()
    except (NameError, AttributeError, KeyError, IndexError):
        return DeadValue(name)
    # staging re-binds unbound variables to Undefined markers before running a branch
    return DeadValue(name) if type(value) is Undefined else value


def is_undefined(value) -> bool:
    return isinstance(value, Undefined)


def check_defined(outputs):
    """Raise for an Undefined value escaping the function (eager Python would have raised)."""
    for leaf in jax.tree_util.tree_leaves(outputs, is_leaf=is_undefined):
        if isinstance(leaf, Undefined) and not isinstance(leaf, UndefinedReturn):
            leaf._fail()
    return outputs


