"""Markers for variables that are not bound yet, so staging can name them instead of crashing."""

from __future__ import annotations

from dy2st.errors import UndefinedVariableError


class Undefined:
    """Stands for a variable that is unbound on some path (eager Python would raise there).

    Any use of it raises `UndefinedVariableError` naming the variable.
    """

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"Undefined({self.name!r})"

    def _fail(self, *args, **kwargs):
        raise UndefinedVariableError(
            f"'{self.name}' is used before it is assigned on this path.",
            advice=f"assign '{self.name}' before the `if`/loop that may skip its definition.",
        )

    __bool__ = __call__ = __iter__ = __len__ = __index__ = __float__ = __int__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _fail
    __getitem__ = __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __matmul__ = __rmatmul__ = _fail

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()


class UndefinedReturn(Undefined):
    """The return value before any `return` ran. Staging may fill it with zeros on a path
    that has not returned yet: the early-return flag guarantees it is overwritten there."""

    def __init__(self):
        super().__init__("the return value")


UNDEFINED_RETURN = UndefinedReturn()


def ldu(thunk, name: str):
    """Load a possibly-unbound variable: its value, or `Undefined(name)` when unbound."""
    try:
        return thunk()
    except (NameError, AttributeError, KeyError, IndexError):
        return Undefined(name)


def is_undefined(value) -> bool:
    return isinstance(value, Undefined)
