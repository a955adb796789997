"""The public entry points: to_static, StaticFunction, not_to_static, to_code."""

from __future__ import annotations

import functools
import inspect
import types
import weakref

import jax

from dy2st import conversion
from dy2st.config import config
from dy2st.errors import ConversionError, OriginInfo
from dy2st.program import ConcreteProgram, ProgramCache
from dy2st.sharding import Shardings
from dy2st.runtime.undefined import check_defined

_NOT_TO_STATIC_ATTR = "__dy2st_not_to_static__"


def not_to_static(fn):
    """Mark `fn` so dy2st never converts it (calls into it run as they are)."""
    try:
        setattr(fn, _NOT_TO_STATIC_ATTR, True)
    except AttributeError:
        pass
    return fn


def is_not_to_static(fn) -> bool:
    return getattr(fn, _NOT_TO_STATIC_ATTR, False)


class StaticFunction:
    """A function converted to run as compiled XLA programs, one per input signature.

    Called with concrete arrays it looks up (or traces and compiles) the program for their
    shapes/dtypes and the values of its non-array arguments, and runs it as one op. Called inside
    `jax.jit`/`grad`/`vmap` (any traced argument) it runs its converted Python instead, so the
    enclosing transformation inlines it.
    """

    def __init__(self, fn, input_spec=None, full_graph: bool = True, _bound_to=None, shardings=None):
        if not callable(fn):
            raise TypeError(f"to_static expects a function, got {type(fn).__name__}")
        self._fn = fn
        self._input_spec = input_spec
        self._full_graph = full_graph
        self._bound_to = _bound_to
        self._shardings = shardings  # dy2st.sharding.Shardings, or None
        self._converted_fn = None
        self._cache = None
        self._bound_cache = weakref.WeakKeyDictionary()
        functools.update_wrapper(self, fn)

    # -- conversion ---------------------------------------------------------------------
    @property
    def _converted(self):
        if self._converted_fn is None:
            fn = inspect.unwrap(self._fn) if not isinstance(self._fn, types.FunctionType) else self._fn
            if not isinstance(fn, types.FunctionType):
                raise ConversionError(
                    f"Cannot convert {fn!r}: it is not a Python function.",
                    advice="decorate a plain function or method with dy2st.to_static.",
                )
            converted = conversion.convert(fn)
            if self._bound_to is not None:
                converted = types.MethodType(converted, self._bound_to)
            self._converted_fn = converted
        return self._converted_fn

    @property
    def _programs_cache(self) -> ProgramCache:
        if self._cache is None:
            self._cache = ProgramCache(
                self._converted, getattr(self._fn, "__qualname__", repr(self._fn)), self._shardings
            )
        return self._cache

    # -- calling ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not config.enable_to_static:
            return self.rollback()(*args, **kwargs)
        cache = self._cache or self._programs_cache
        if kwargs:
            return self._call_general(cache, args, kwargs)
        return cache(args) if not _any_traced(args) else check_defined(self._converted(*args))

    def _call_general(self, cache, args, kwargs):
        if any(isinstance(l, jax.core.Tracer) for l in jax.tree_util.tree_leaves((args, kwargs))):
            return check_defined(self._converted(*args, **kwargs))
        return cache.call_general(args, kwargs)

    def __get__(self, instance, owner=None):
        if instance is None or self._bound_to is not None:
            return self
        try:
            bound = self._bound_cache.get(instance)
        except TypeError:  # unhashable instance: keep the bound function on the instance
            return self._bound_on_instance(instance)
        if bound is None:
            bound = StaticFunction(self._fn, self._input_spec, self._full_graph, instance, self._shardings)
            self._bound_cache[instance] = bound
        return bound

    def _bound_on_instance(self, instance):
        attr = f"__dy2st_bound_{self._fn.__name__}"
        bound = instance.__dict__.get(attr)
        if bound is None:
            bound = StaticFunction(self._fn, self._input_spec, self._full_graph, instance, self._shardings)
            instance.__dict__[attr] = bound
        return bound

    # -- introspection ------------------------------------------------------------------
    @property
    def code(self) -> str:
        """The translated source, as Python text."""
        return self._converted.__dy2st_source__ if self._bound_to is None else self._converted.__func__.__dy2st_source__

    @property
    def programs(self) -> list[ConcreteProgram]:
        """The cached ConcretePrograms, one per input signature seen so far."""
        return self._programs_cache.programs

    def get_concrete_program(self, *args, **kwargs) -> ConcreteProgram:
        """Trace (without running) the program for these arguments or ShapeDtypeStructs."""
        return self._programs_cache.get_concrete_program(args, kwargs)

    def rollback(self):
        """The original eager callable."""
        if self._bound_to is not None:
            return types.MethodType(self._fn, self._bound_to)
        return self._fn

    def clear_cache(self) -> None:
        """Drop every cached program (the conversion itself is kept)."""
        if self._cache is not None:
            self._cache.clear()

    def __repr__(self):
        return f"<StaticFunction {getattr(self._fn, '__qualname__', self._fn)!r}>"


def _any_traced(args) -> bool:
    for a in args:
        if isinstance(a, jax.core.Tracer):
            return True
    return False


def to_static(fn=None, *, input_spec=None, full_graph: bool = True, in_shardings=None, out_shardings=None):
    """Convert `fn` so its Python control flow runs as one compiled XLA program.

    Works as `@to_static`, `@to_static(...)` and `to_static(fn)`, on functions, nested
    functions and closures, lambdas, and methods (inside a class body it binds per instance).

    Args:
      fn: the function to convert.
      input_spec: optional list of `dy2st.InputSpec` describing the array arguments.
      full_graph: kept for API parity with paddle.jit.to_static; dy2st always converts the
        whole function and never falls back to eager execution silently.
      in_shardings, out_shardings: as for `jax.jit`: pin where the array arguments (one entry
        per positional argument) and the outputs live; see `dy2st.sharding`.

    Returns:
      A `StaticFunction`.

    Example::

        @dy2st.to_static
        def f(x):
            if x.sum() > 0:
                return x * 2
            return x - 1
    """
    shardings = None
    if in_shardings is not None or out_shardings is not None:
        shardings = Shardings(in_shardings, out_shardings)
    if fn is None:
        return functools.partial(to_static, input_spec=input_spec, full_graph=full_graph,
                                 in_shardings=in_shardings, out_shardings=out_shardings)
    if isinstance(fn, StaticFunction):
        return fn
    if isinstance(fn, types.MethodType):
        return StaticFunction(fn.__func__, input_spec, full_graph, fn.__self__, shardings)
    return StaticFunction(fn, input_spec, full_graph, shardings=shardings)


def to_code(fn) -> str:
    """The translated source of `fn`, without running it."""
    if isinstance(fn, StaticFunction):
        return fn.code
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    return conversion.convert(inspect.unwrap(fn)).__dy2st_source__
