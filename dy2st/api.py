"""The public entry points: to_static, StaticFunction, not_to_static, to_code."""

from __future__ import annotations

import functools
import inspect
import threading
import types
import weakref

import jax

from dy2st import conversion
from dy2st.config import config
from dy2st.errors import ConversionError, OriginInfo
from dy2st.program import ARRAY_IMPL, DEFAULT_MAX_PROGRAMS, ConcreteProgram, ProgramCache
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

    def __init__(self, fn, input_spec=None, full_graph: bool = True, _bound_to=None,
                 max_programs: int = DEFAULT_MAX_PROGRAMS):
        if not callable(fn):
            raise TypeError(f"to_static expects a function, got {type(fn).__name__}")
        self._fn = fn
        self._input_spec = input_spec
        self._full_graph = full_graph
        self._bound_to = _bound_to
        self._max_programs = max_programs
        self._converted_fn = None
        self._lock = threading.Lock()  # conversion, and bound copies for methods
        self._cache = ProgramCache(lambda: self._converted, getattr(fn, "__qualname__", repr(fn)), max_programs)
        self._table = self._cache.table  # read directly by the hit path in __call__
        self._bound_cache = weakref.WeakKeyDictionary()
        functools.update_wrapper(self, fn)

    # -- conversion ---------------------------------------------------------------------
    @property
    def _converted(self):
        if self._converted_fn is None:
            with self._lock:
                if self._converted_fn is None:
                    self._converted_fn = self._convert()
        return self._converted_fn

    def _convert(self):
        fn = inspect.unwrap(self._fn) if not isinstance(self._fn, types.FunctionType) else self._fn
        if not isinstance(fn, types.FunctionType):
            raise ConversionError(
                f"Cannot convert {fn!r}: it is not a Python function.",
                advice="decorate a plain function or method with dy2st.to_static.",
            )
        converted = conversion.convert(fn)
        if self._bound_to is not None:
            converted = types.MethodType(converted, self._bound_to)
        return converted

    # -- calling ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        # The hit path, kept to a few bytecodes: positional jax arrays whose program exists.
        # Its key (a tuple of interned avals) is the one ProgramCache._key builds for them.
        # (Measured: building the key with `+=` beats tuple(map(...)) and a list comprehension.)
        if not kwargs and config.enable_to_static:
            key = ()
            for a in args:
                if type(a) is not ARRAY_IMPL:
                    break
                key += (a.aval,)
            else:
                table = self._table
                fn = table.get(key)
                if fn is not None:
                    if len(table) > 1:  # least-recently-used order; one entry needs none
                        try:
                            table.move_to_end(key)
                        except KeyError:  # evicted meanwhile by another thread; fn still works
                            pass
                    return fn(*args)
        return self._call_slow(args, kwargs)

    def _call_slow(self, args, kwargs):
        if not config.enable_to_static:
            return self.rollback()(*args, **kwargs)
        return self._cache(args, kwargs, self._inline)

    def _inline(self, args, kwargs):
        """Called with traced arguments (inside jit/grad/vmap): run into the enclosing trace."""
        return check_defined(self._converted(*args, **kwargs))

    def __get__(self, instance, owner=None):
        if instance is None or self._bound_to is not None:
            return self
        try:
            bound = self._bound_cache.get(instance)
        except TypeError:  # unhashable instance: keep the bound function on the instance
            return self._bound_on_instance(instance)
        if bound is None:
            with self._lock:
                bound = self._bound_cache.get(instance)
                if bound is None:
                    bound = self._bind(instance)
                    self._bound_cache[instance] = bound
        return bound

    def _bind(self, instance):
        return StaticFunction(self._fn, self._input_spec, self._full_graph, _bound_to=instance,
                              max_programs=self._max_programs)

    def _bound_on_instance(self, instance):
        attr = f"__dy2st_bound_{self._fn.__name__}"
        bound = instance.__dict__.get(attr)
        if bound is None:
            with self._lock:
                bound = instance.__dict__.setdefault(attr, self._bind(instance))
        return bound

    # -- introspection ------------------------------------------------------------------
    @property
    def code(self) -> str:
        """The translated source, as Python text."""
        return self._converted.__dy2st_source__ if self._bound_to is None else self._converted.__func__.__dy2st_source__

    @property
    def programs(self) -> list[ConcreteProgram]:
        """The cached ConcretePrograms, one per input signature seen so far."""
        return self._cache.programs

    def get_concrete_program(self, *args, **kwargs) -> ConcreteProgram:
        """Trace (without running) the program for these arguments or ShapeDtypeStructs."""
        return self._cache.get_concrete_program(args, kwargs)

    def rollback(self):
        """The original eager callable."""
        if self._bound_to is not None:
            return types.MethodType(self._fn, self._bound_to)
        return self._fn

    def clear_cache(self) -> None:
        """Drop every cached program (the conversion itself is kept)."""
        self._cache.clear()

    def __repr__(self):
        return f"<StaticFunction {getattr(self._fn, '__qualname__', self._fn)!r}>"


def to_static(fn=None, *, input_spec=None, full_graph: bool = True, max_programs: int = DEFAULT_MAX_PROGRAMS):
    """Convert `fn` so its Python control flow runs as one compiled XLA program.

    Works as `@to_static`, `@to_static(...)` and `to_static(fn)`, on functions, nested
    functions and closures, lambdas, and methods (inside a class body it binds per instance).

    Args:
      fn: the function to convert.
      input_spec: optional list of `dy2st.InputSpec` describing the array arguments.
      full_graph: kept for API parity with paddle.jit.to_static; dy2st always converts the
        whole function and never falls back to eager execution silently.
      max_programs: how many compiled programs (input signatures) to keep; beyond it the least
        recently used is dropped and rebuilt if its signature comes back.

    Returns:
      A `StaticFunction`.

    Example::

        @dy2st.to_static
        def f(x):
            if x.sum() > 0:
                return x * 2
            return x - 1
    """
    if fn is None:
        return functools.partial(to_static, input_spec=input_spec, full_graph=full_graph, max_programs=max_programs)
    if isinstance(fn, StaticFunction):
        return fn
    if isinstance(fn, types.MethodType):
        return StaticFunction(fn.__func__, input_spec, full_graph, _bound_to=fn.__self__, max_programs=max_programs)
    return StaticFunction(fn, input_spec, full_graph, max_programs=max_programs)


def to_code(fn) -> str:
    """The translated source of `fn`, without running it."""
    if isinstance(fn, StaticFunction):
        return fn.code
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    return conversion.convert(inspect.unwrap(fn)).__dy2st_source__
