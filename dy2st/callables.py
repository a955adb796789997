"""What `to_static` accepts besides plain functions, brought to a function it can convert.

`to_static` converts Python functions. Decorator stacks and class bodies hand it other callables;
each is either taken apart into a function plus how to rebuild the object around the converted
one, or refused with an error that says what to decorate instead::

    staticmethod(f)        -> staticmethod(to_static(f))
    classmethod(f)         -> classmethod(to_static(f))
    functools.partial(f,a) -> to_static(f) called with `a` bound (its arrays become constants)
    functools.wraps(f)(w)  -> w is converted (its call of f is converted in turn)
    jax.named_call(f) and other library wrappers of a user function -> ConversionError: apply
        to_static to the inner function, then the library's decorator.
"""

from __future__ import annotations

import functools
import os
import inspect
import types
from typing import Callable, NamedTuple

from dy2st import conversion
from dy2st.errors import ConversionError, InputSpecError, OriginInfo, is_library_file
from dy2st.input_spec import check_spec_list


STATIC_METHOD_ATTR = "__dy2st_staticmethod__"


class Normalised(NamedTuple):
    """`fn` to convert, and `rewrap(static_function)` giving what `to_static` returns (None:
    the StaticFunction itself)."""

    fn: object
    rewrap: Callable | None = None


def _same(converted):
    return converted


def normalise(fn) -> Normalised:
    """Bring a staticmethod, classmethod or library wrapper to the function inside it."""
    if isinstance(fn, staticmethod):
        # Defined in a class body, yet its first parameter is no `self` (see conversion.is_method).
        setattr(fn.__func__, STATIC_METHOD_ATTR, True)
        return Normalised(fn.__func__, staticmethod)
    if isinstance(fn, classmethod):
        return Normalised(fn.__func__, classmethod)
    if isinstance(fn, types.FunctionType) and is_library_file(fn.__code__.co_filename):
        inner = inspect.unwrap(fn)
        if inner is not fn and isinstance(inner, types.FunctionType) and not is_library_file(inner.__code__.co_filename):
            origin = OriginInfo(inner.__code__.co_filename, inner.__code__.co_firstlineno, inner.__name__)
            library_file = os.path.basename(fn.__code__.co_filename)
            raise ConversionError(
                f"to_static got {inner.__name__!r} wrapped by a decorator from library code ({library_file}, "
                "e.g. jax.named_call); "
                "dy2st converts Python source, and the wrapper's is not the user's code.",
                origin,
                advice=f"apply dy2st.to_static to {inner.__name__!r} itself and the other decorator on top of it, "
                f"e.g. jax.named_call(dy2st.to_static({inner.__name__}), name=...).",
            )
    return Normalised(fn)


def convertible(fn):
    """`(function, bind)`: the Python function whose source is converted, and `bind(converted)`
    giving the callable a StaticFunction runs (a partial's arguments bound again)."""
    if isinstance(fn, functools.partial) and isinstance(inspect.unwrap(fn.func), types.FunctionType):
        args, keywords = fn.args, fn.keywords

        def bind(converted):
            return functools.partial(converted, *args, **keywords)  # `.code` shows the function's

        return fn.func, bind
    return fn, _same


def check_input_spec_count(fn, specs) -> None:
    """Refuse, when `to_static` is called, an `input_spec` list longer than `fn`'s positional
    parameters (after `self` for a method in a class body): the extra specs describe nothing;
    and one that is not a list at all (a string would count one entry per character)."""
    if specs is not None:
        check_spec_list(specs)
    if specs is None or not isinstance(fn, (types.FunctionType, types.MethodType, functools.partial)):
        return
    skip = int(isinstance(fn, types.FunctionType) and conversion.is_method(fn))
    inner = inspect.unwrap(fn.func if isinstance(fn, functools.partial) else fn)
    code = getattr(inner, "__code__", None)
    if code is None or code.co_flags & inspect.CO_VARARGS:
        return
    try:
        positional = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][skip:]
    except (TypeError, ValueError):  # no signature to read: the call will tell
        return
    if len(specs) > len(positional):
        names = ", ".join(p.name for p in positional) or "none"
        raise InputSpecError(
            f"input_spec has {len(specs)} entries but {inner.__name__!r} takes {len(positional)} positional "
            f"parameter(s) ({names}); spec i describes parameter i.",
            OriginInfo(code.co_filename, code.co_firstlineno, inner.__name__),
            advice=f"pass one InputSpec per parameter ({len(positional)}), in order; use None in the list "
            "for a parameter that is not an array.",
        )
