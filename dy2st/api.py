"""The public entry points: to_static, StaticFunction, not_to_static, to_code."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import keyword
import os
import threading
import types
import weakref

import jax

from dy2st import _jax_compat, callables, conversion, input_spec, stateful
from dy2st.config import _switch_listeners, config, logger
from dy2st.errors import (ArgumentError, ConversionError, RuntimeChecks, at_boundary, at_eager_boundary, failed_when_run, innermost_user_frame, mark_noted,
                          output_replayed, rerun_eagerly, written_before_failing)
from dy2st.call_policy import ARRAY_IMPL, KEY_ARRAY, AmbiguousLeaf, CallPolicy, ContainerEffect, Declined, Route
from dy2st.program import _FAST_TYPES, DEFAULT_MAX_PROGRAMS, ConcreteProgram, ProgramCache
from dy2st.program_body import changes_lost_with, run_inline
from dy2st.input_spec import check_spec_list, user_origin
from dy2st.sharding import Shardings, check_shardings
from dy2st.runtime import guards, static_outputs
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.writes import WRITTEN
from dy2st.runtime.calls import NOT_TO_STATIC_ATTR, bound_like_a_method, python_function_of, runs_eagerly, top_level_target

def not_to_static(fn):
    """Mark `fn` so dy2st never converts it (calls into it run as they are)."""
    try:
        setattr(fn, NOT_TO_STATIC_ATTR, True)
    except AttributeError:
        pass
    return fn


def is_not_to_static(fn) -> bool:
    return getattr(fn, NOT_TO_STATIC_ATTR, False)


def _dispatcher(fn=None):
    """The call path of one StaticFunction: `(dispatch, bind, use_jit)`.

    While the hit path is armed (`use_jit` sets the jit shared by the array signatures; None
    disarms it) a call runs the front: a jit function object whose C++ dispatch runs every
    signature it has cached with no Python of dy2st's, and whose miss (`miss`) runs the shared
    jit as jit's own miss does for the calls the hit path takes (positional arrays, and the
    pytree route's tuples and lists), handing jit what it caches. The first other call
    (static values, keywords, models) hands the function back to the dispatcher for good, whose
    checks cost less than a miss. The front starts empty whenever the hit path changes.

    `dispatch(*args, **kwargs)` is the dispatcher: positional jax arrays go to the shared jit,
    everything else to `owner._call_general` (`bind` sets the owner). A closure, so its hit
    path reads cells rather than attributes. For a function of plain parameters it has those
    parameters instead (`_positional_dispatch`). The StaticFunction (a partial) calls whichever
    of the two `use_jit` chose.
    """
    owner = shared = pytrees = holds = statics_lookup = decode = None
    pytree_roots = _PYTREE_ROOTS  # the argument types the pytree route takes now

    def dispatch(*args, **kwargs):
        try:  # free when nothing is raised: the hit path pays nothing for the boundary
            jitted = shared
            if jitted is not None and not kwargs and (holds is None or holds()):  # None while enable_to_static(False)
                for a in args:
                    if type(a) is not ARRAY_IMPL:
                        break
                else:
                    out = jitted(*args)
                    if shared is None:  # this call traced a check or a choice, or the cache changed
                        return _finish_after_change(out, args)
                    return out if decode is None else decode(out, args)
                if pytrees is not None and pytree_roots.issuperset(map(type, args)):
                    try:
                        return pytrees(args)
                    except Declined:
                        pass
                if statics_lookup is not None:  # arrays, their trees and Python scalars seen before
                    found = statics_lookup(args)
                    if found is not None:
                        program, arrays = found
                        out = program(*arrays)
                        return out if decode is None else decode(out, args)
            elif kwargs and statics_lookup is not None and (holds is None or holds()):  # `f(x, *, lr=0.1)`
                found = statics_lookup(args, kwargs)
                if found is not None and found[1] is not args:  # (a program of the arrays alone)
                    out = found[0](*found[1])
                    return out if decode is None else decode(out, args, kwargs)
            return owner._call_general(args, kwargs)
        except Exception as exc:
            # Inline (not a helper): a bare `raise` here adds no frame of ours to the traceback.
            __tracebackhide__ = True  # noqa: F841  (pytest and IPython hide this frame)
            error = at_boundary(exc, config.traceback_filtering)
            if not rerun_eagerly(exc, error):
                if error is exc:
                    raise
                raise error from error.__cause__  # a JAX error behind a TracedValueError stays its cause
            failed = error
        try:  # (out of the `except`: eager's error has no context)
            return owner._eagerly_after(failed, args, kwargs)
        except Exception as exc:
            __tracebackhide__ = True  # noqa: F841
            at_eager_boundary(exc, config.traceback_filtering)
            raise

    specialized, namespace = _positional_dispatch(fn)
    entry = specialized or dispatch
    front = None  # the front (see `miss`), once bound
    front_off = False  # a call the front cannot cache came: this function keeps the dispatcher

    def miss(*args, **kwargs):
        """What the front runs for a signature it has not cached: a call the hit path takes
        runs the shared jit as jit's own miss does, and gives the front what to cache; any
        other call runs the dispatcher, and a concrete one hands the calls back to it."""
        nonlocal front_off
        try:
            jitted = shared
            if jitted is not None and _jax_compat.at_top_level():
                if not kwargs:
                    kinds = set(map(type, args))
                    if _FAST_TYPES.issuperset(kinds) or (pytrees is not None and pytree_roots.issuperset(kinds)):
                        result = owner._front_call(jitted, args, pytree=not _FAST_TYPES.issuperset(kinds))
                        if result is not None:
                            return _jax_compat.front_result(*result)
                if not front_off:
                    front_off = True  # static values, keywords, state: the dispatcher's checks cost less
                    use_jit(shared, pytrees, roots=pytree_roots, statics=statics_lookup)
            return _jax_compat.front_result(entry(*args, **kwargs), None)
        except Exception as exc:  # as in `dispatch`: the front calls this with no frame between
            __tracebackhide__ = True  # noqa: F841
            error = at_boundary(exc, config.traceback_filtering)
            if not rerun_eagerly(exc, error):
                if error is exc:
                    raise
                raise error from error.__cause__
            failed = error
        try:
            return _jax_compat.front_result(owner._eagerly_after(failed, args, kwargs), None)
        except Exception as exc:
            __tracebackhide__ = True  # noqa: F841
            at_eager_boundary(exc, config.traceback_filtering)
            raise

    def bind(static_function):
        nonlocal owner, front
        owner = static_function
        if namespace is not None:
            namespace["_dy2st_owner"] = static_function
        front = _jax_compat.jit_front(str(getattr(fn, "__name__", "dispatch")), entry, miss)

    def use_jit(jitted, pytree_route=None, guards_hold=None, roots=_PYTREE_ROOTS, statics=None, decoding=None):
        """Arm (or, with None, disarm) the hit path, and the pytree route beside it for
        arguments of the `roots` types; while armed, calls go to the front (unless it was
        handed back), which starts empty. With `guards_hold` (runtime/guards.py) the hit path
        first checks the guards, in the dispatcher: the front, which runs no Python, is not used.
        `statics`: the generated dispatcher's lookup of arrays and Python scalars seen before
        (`ProgramCache.program_for_statics`). `decoding`: what the programs' outputs go through
        (`_decoded`), for programs that return what the boundary decodes: the front, which
        gives back the program's outputs as they are, is not used."""
        nonlocal shared, pytrees, holds, pytree_roots, statics_lookup, decode
        shared, pytrees, holds, pytree_roots, statics_lookup, decode = (jitted, pytree_route, guards_hold, roots, statics,
                                                                        decoding)
        if namespace is not None:
            namespace["_dy2st_decode"] = decoding
            namespace["_dy2st_statics"] = statics  # (the generated dispatcher's: arrays, their trees, Python scalars)
            namespace["_dy2st_shared"] = jitted
            namespace["_dy2st_pytrees"] = pytree_route
            namespace["_dy2st_holds"] = guards_hold
            namespace["_dy2st_PYTREE_ROOTS"] = roots
        _jax_compat.clear_front(front)
        target = front if jitted is not None and not front_off and guards_hold is None and decoding is None else entry
        if owner.func is not target:
            functools.partial.__setstate__(owner, (target, (), None, owner.__dict__))

    return entry, bind, use_jit


_MISSING = object()  # a parameter the call did not pass (the generated dispatcher's default)
_PYTREE_ROOTS = frozenset({ARRAY_IMPL, KEY_ARRAY, tuple, list, dict, type(None)})  # argument types the pytree route takes
_PYTREE_ROOTS_LIFTED = frozenset({ARRAY_IMPL, KEY_ARRAY, tuple, type(None)})  # ... once lists and dicts are lifted as state
_MAX_SPECIALIZED = 8


def _plain_parameters(fn) -> list[str] | None:
    """`fn`'s parameter names when all are plain (positional or keyword, no `*args`/`**kwargs`,
    keyword-only or positional-only ones), else None."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    names = [p.name for p in parameters]
    if (not names or len(names) > _MAX_SPECIALIZED
            or any(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters)
            or any(n.startswith("_dy2st_") or not n.isidentifier() for n in names)):
        return None
    return names


def _positional_dispatch(fn):
    """A dispatcher taking `fn`'s own parameters: `(function, its globals)`, or `(None, None)`.

    Its hit path is one type test per argument and the jit's call, with no `*args` tuple or
    `**kwargs` dict to build (about 0.2 us of a 7 us call, measured on W1); a keyword call binds
    the names as `fn` would. Anything else (a non-array argument, an omitted one) goes to the
    owner's general path with the arguments as passed; one too many raises Python's TypeError
    from a function of `fn`'s signature (eager's text counts the parameters with defaults). Errors leave as from `dispatch`. Written
    as source because its parameters are `fn`'s (names checked as identifiers; nothing else of
    the user's reaches the text), under a file name in this package, so tracebacks hide it.
    """
    names = _plain_parameters(fn) if fn is not None and callable(fn) else None
    if names is None:
        return None, None
    required = {p.name for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty}
    arrays = " and ".join(f"_dy2st_type({n}) is _dy2st_ARRAY" for n in names)  # a parameter may be `type`
    values = ", ".join(names)
    pytree_types = " and ".join(f"_dy2st_type({n}) in _dy2st_PYTREE_ROOTS" for n in names)
    name = getattr(fn, "__name__", "")  # so that a bad call's TypeError names the function
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_dy2st_"):
        name = "dispatch"
    source = (
        f"def _dy2st_arity({', '.join(n if n in required else f'{n}=None' for n in names)}):\n"
        f"    pass\n"
        f"def {name}({', '.join(f'{n}=_dy2st_MISSING' for n in names)}, *_dy2st_more):\n"
        f"    if _dy2st_more:  # one too many: Python's TypeError, which counts `fn`'s defaults\n"
        f"        __tracebackhide__ = True\n"
        f"        _dy2st_arity({values}, *_dy2st_more)\n"
        f"    try:\n"
        f"{_default_filling(fn, names)}"
        f"        _dy2st_jit = _dy2st_shared\n"
        f"        if _dy2st_jit is not None and {arrays} and (_dy2st_holds is None or _dy2st_holds()):\n"
        f"            _dy2st_out = _dy2st_jit({values})\n"
        f"            if _dy2st_shared is None:\n"
        f"                return _dy2st_finish(_dy2st_out, ({values},))\n"
        f"            return _dy2st_out if _dy2st_decode is None else _dy2st_decode(_dy2st_out, ({values},))\n"
        f"        if _dy2st_pytrees is not None and (_dy2st_holds is None or _dy2st_holds()) and {pytree_types}:\n"
        f"            try:\n"
        f"                return _dy2st_pytrees(({values},))\n"
        f"            except _dy2st_Declined:\n"
        f"                pass\n"
        f"        if _dy2st_statics is not None and (_dy2st_holds is None or _dy2st_holds()):\n"
        f"            _dy2st_program = _dy2st_statics(({values},))\n"
        f"            if _dy2st_program is not None:\n"
        f"                _dy2st_out = _dy2st_program[0](*_dy2st_program[1])\n"
        f"                return _dy2st_out if _dy2st_decode is None else _dy2st_decode(_dy2st_out, ({values},))\n"
        f"        if {' or '.join(f'{n} is _dy2st_MISSING' for n in names)}:\n"
        f"            return _dy2st_owner._call_general(*_dy2st_passed(({values},), _dy2st_names))\n"
        f"        return _dy2st_owner._call_general(({values},), _dy2st_NO_KWARGS)\n"
        f"    except _dy2st_Exception as _dy2st_exc:\n"
        f"        __tracebackhide__ = True\n"
        f"        _dy2st_error = _dy2st_boundary(_dy2st_exc, _dy2st_config.traceback_filtering)\n"
        f"        if not _dy2st_rerun_eagerly(_dy2st_exc, _dy2st_error):\n"
        f"            if _dy2st_error is _dy2st_exc:\n"
        f"                raise\n"
        f"            raise _dy2st_error from _dy2st_error.__cause__\n"
        f"        _dy2st_failed = _dy2st_error\n"
        f"    try:\n"
        f"        return _dy2st_owner._eagerly_after(_dy2st_failed, *_dy2st_passed(({values},), _dy2st_names))\n"
        f"    except _dy2st_Exception as _dy2st_exc:\n"
        f"        __tracebackhide__ = True\n"
        f"        _dy2st_eager_boundary(_dy2st_exc, _dy2st_config.traceback_filtering)\n"
        f"        raise\n"
    )
    namespace = {"_dy2st_shared": None, "_dy2st_owner": None, "_dy2st_ARRAY": ARRAY_IMPL, "_dy2st_holds": None,
                 "_dy2st_statics": None, "_dy2st_decode": None,
                 "_dy2st_pytrees": None, "_dy2st_PYTREE_ROOTS": _PYTREE_ROOTS, "_dy2st_Declined": Declined,
                 "_dy2st_type": type, "_dy2st_Exception": Exception,
                 "_dy2st_MISSING": _MISSING, "_dy2st_finish": _finish_after_change, "_dy2st_boundary": at_boundary,
                 "_dy2st_rerun_eagerly": rerun_eagerly, "_dy2st_eager_boundary": at_eager_boundary,
                 "_dy2st_config": config, "_dy2st_passed": _passed, "_dy2st_names": tuple(names),
                 "_dy2st_NO_KWARGS": types.MappingProxyType({}), "_dy2st_fn": fn, "__name__": __name__}
    filename = os.path.join(os.path.dirname(__file__), f"<dispatch of {getattr(fn, '__qualname__', 'a function')}>")
    exec(compile(source, filename, "exec"), namespace)
    for made in (namespace[name], namespace["_dy2st_arity"]):  # as eager's TypeError for a bad call names it
        made.__qualname__ = getattr(fn, "__qualname__", name)
    return namespace[name], namespace


def _default_filling(fn, names: list) -> str:
    """Source that gives each omitted parameter with a default its default as `fn` holds it now
    (`f.__defaults__` may be set between calls), so that a call leaving `lr=0.1` out takes the
    hit paths as one passing it does; none where the defaults' count changed since."""
    defaults = getattr(fn, "__defaults__", None) if isinstance(fn, types.FunctionType) else None
    if not defaults:
        return ""
    first = len(names) - len(defaults)
    lines = [f"        if {' or '.join(f'{n} is _dy2st_MISSING' for n in names[first:])}:",
             "            _dy2st_d = _dy2st_fn.__defaults__",
             f"            if _dy2st_d is not None and len(_dy2st_d) == {len(defaults)}:"]
    for i, n in enumerate(names[first:]):
        lines += [f"                if {n} is _dy2st_MISSING:", f"                    {n} = _dy2st_d[{i}]"]
    return "\n".join(lines) + "\n"


def _passed(values: tuple, names: tuple) -> tuple:
    """`(args, kwargs)` as the call passed them: positional up to the first omitted parameter,
    by name after it."""
    args = []
    for i, value in enumerate(values):
        if value is _MISSING:
            return tuple(args), {n: v for n, v in zip(names[i:], values[i:]) if v is not _MISSING}
        args.append(value)
    return tuple(args), {}


def _decoded(out, args, kwargs=None):
    """A hit-path call's outputs where the programs return what the boundary decodes (a dict
    out of sorted order, a Python value): decoded as the general path decodes them."""
    return static_outputs.decode_result(out, static_outputs.ArgumentObjects(args, kwargs or {}))


def _finish_after_change(out, args=(), kwargs=None):
    """A hit-path call that traced a run-time check or returns what the boundary decodes, or found the cache
    changing mode: finish as the general path does."""
    _wait_for(out)  # (the encoded outputs: decoded, a list may hold itself)
    return static_outputs.decode_result(out, static_outputs.ArgumentObjects(args, kwargs or {}))


# Flax NNX's error for a module the trace reaches outside its arguments and changes
_OUTSIDE_MODULE_HINT = (
    " An NNX module (or optimizer) the function reaches outside its arguments (a closure's, a "
    "global) cannot be changed inside a compiled program: pass it as an argument, and dy2st lifts "
    "its state and writes the changes back.")
_LIVE: weakref.WeakSet = weakref.WeakSet()  # every StaticFunction, for the global switch


def _switch_changed() -> None:
    """enable_to_static was called: no StaticFunction may take its hit path until a general call
    (which checks the switch) has re-armed it."""
    for static_function in list(_LIVE):
        static_function._set_fast(None)


_switch_listeners.append(_switch_changed)


class StaticFunction(functools.partial):
    """A function converted to run as compiled XLA programs, one per input signature.

    Called with concrete arrays it looks up (or traces and compiles) the program for their
    shapes/dtypes and the values of its non-array arguments, and runs it as one op. Called inside
    `jax.jit`/`grad`/`vmap` (any traced argument) it runs its converted Python instead, so the
    enclosing transformation inlines it.

    A `functools.partial` subclass for speed only: calling a partial is C code that calls its
    `func`, here jit's C++ dispatch of the programs cached so far, or the dispatcher closure
    (`_dispatcher`), where a class `__call__` costs a Python-level method call more (measured:
    about 0.15 us of a 6 us call). A cached call of positional arrays or pytrees of them runs no
    Python at all (tests/api/test_front.py).
    """

    def __new__(cls, *args, **kwargs):
        dispatch, bind, use_jit = _dispatcher(args[0] if args else kwargs.get("fn"))
        self = super().__new__(cls, dispatch)
        bind(self)
        self._use_jit = use_jit
        _LIVE.add(self)
        return self

    def __reduce__(self):
        # As for functions: copies are the object itself, and pickle stores a reference to the
        # module-level name (a partial would otherwise try to pickle its dispatcher closure).
        return self.__qualname__

    def __init__(self, fn, input_spec=None, full_graph: bool = True, max_programs: int = DEFAULT_MAX_PROGRAMS,
                 shardings=None):
        if not callable(fn):
            raise ArgumentError(f"to_static expects a function, got {type(fn).__name__} {fn!r:.60}.",
                                user_origin(), advice="pass the function itself: dy2st.to_static(f).")
        self._fn = fn
        self._input_spec = input_spec
        self._full_graph = full_graph
        self._shardings = shardings  # dy2st.sharding.Shardings, or None
        self._converted_fn = None
        self._lock = threading.Lock()  # converts once when threads first call together
        name = getattr(fn, "__qualname__", repr(fn))
        # what the programs read from outside the arguments, checked per call (runtime/guards.py)
        self._guards = guards.GuardSet(on_first=self._guarded)
        # which route calls take, and why (dy2st/call_policy.py): shared with the plain programs' table
        self._policy = CallPolicy(eager_only=runs_eagerly(fn))
        self._cache = ProgramCache(None, name, max_programs, get_fn=lambda: self._converted, shardings=shardings,
                                   guards=self._guards, policy=self._policy, watch_containers=True)
        self._fast = None  # the cache's shared jit, once a call has shown it may be used directly
        self._cache.on_shared_change = self._drop_fast
        self._stateful = None  # programs for calls whose self/arguments carry state (dy2st/state.py)
        self._bound = weakref.WeakValueDictionary()  # id(instance) -> BoundStaticFunction
        self._checker = None
        functools.update_wrapper(self, fn)
        if input_spec is None and not self._policy.eager_only and config.enable_to_static:
            # Armed from the start, so that the first call of positional arrays is the front's
            # miss and the front caches its program: the second call is then a hit too (armed
            # after the first call, the second was a miss through jit's Python path: 0.27 ms).
            self._set_fast(self._cache.shared)

    # -- conversion ---------------------------------------------------------------------
    @property
    def _converted(self):
        """The converted function, made again (from the converted code, cached) on each use: a
        trace, an inline run. Its defaults are a copy of the original's, which the user may have
        set since (`f.__defaults__ = ...`, read by the guards)."""
        fn, bind = callables.convertible(self._fn)  # a partial: its function, rebound
        if self._converted_fn is None:
            with self._lock:
                if self._converted_fn is None:
                    _refuse_generator(fn)
                    self._converted_fn = bind(top_level_target(fn))
                    return self._converted_fn
        return bind(top_level_target(fn))

    # -- calling ------------------------------------------------------------------------
    def _call_general(self, args, kwargs):
        """Every call the dispatcher does not send straight to the shared jit: the route the
        policy gives it (`CallPolicy.route`), then what the policy says every call must do
        after (decode outputs, wait for run-time checks), and the hit path armed once nothing
        unusual was seen."""
        if self._guards and not self._guards.holds():
            self._guards_changed()
        policy = self._policy
        route = policy.route(args, kwargs)
        if route is Route.AS_IS:
            return self._fn(*args, **kwargs)
        if self._input_spec is not None:
            (self._checker or self._spec_checker).check(args, kwargs)
        checks_before, traced_before, written_before = RuntimeChecks.traced, CONTEXT.programs_traced, WRITTEN.count
        try:
            out = self._run(route, args, kwargs)
            if policy.decodes_outputs:
                out = static_outputs.decode_result(out, static_outputs.ArgumentObjects(args, kwargs))
            if policy.checks or RuntimeChecks.traced != checks_before:
                policy.checks = True  # this call traced a run-time check (an assert)
                self._set_fast(None)
                _wait_for(out)  # a failed check raises here, inside this call
        except jax.errors.JaxRuntimeError as exc:
            changes_lost_with(exc, traced_before, written_before)
            raise
        if policy.checks:
            return out
        if policy.staged_nothing:  # calls of Python values must reach the check above
            self._set_fast(None)
        elif self._input_spec is None and self._converted_fn is not None and config.enable_to_static:
            # arm the hit path (None once the cache retired it); a namedtuple argument's class,
            # or a frozen dataclass pytree's, joins the pytree route's from the next call
            noted = route is not Route.STATEFUL and policy.note_node_types(args)
            if self._fast is None or noted:
                self._set_fast(self._fast or self._cache.shared)
        return out

    def _run(self, route: Route, args, kwargs):
        """The call on its route: a program of the table, or of the stateful table."""
        if route is not Route.STATEFUL:
            try:
                return self._cache(args, kwargs, self._inline, containers=route is Route.PROGRAM_WITH_CONTAINERS)
            except ContainerEffect:
                self._lift_containers()  # lifted and written back from now on, and for this call
        return self._stateful_programs.call(args, kwargs, stateful.root_positions(args, kwargs))

    def _front_call(self, jitted, args, pytree: bool):
        """The front's miss for a call the hit path takes (positional arrays, or the pytree
        route's arguments): `(outputs, what the front caches)`, or None where the pytree route
        gave the call back. The front caches nothing for a call that changed the cache's mode
        (it traced a run-time check or returns what the boundary decodes: such calls decode their outputs)."""
        cached = []

        def run(*args):
            out, data = _jax_compat.jit_miss(jitted, args)
            cached.append(data)
            return out

        try:
            out = self._call_pytrees(args, run) if pytree else run(*args)  # the route finishes its own
        except Declined:
            return None
        if self._fast is not jitted:  # disarmed by this call
            return (out if pytree else _finish_after_change(out, args)), None
        return out, cached[0]

    def _call_pytrees(self, args, run=None):
        """The pytree route: tuples and lists of arrays go to the shared jit as they
        are, so that jit's C++ dispatch flattens them and finds the program, and dy2st adds no
        flatten or key of its own (on an optax step that was most of dy2st's cost per call).

        What dy2st's own flatten would have told apart is refused by jit or by the shared
        jit's trace instead, and the call goes the general way (`Declined`), the route closed
        for this function: a dict of two keys or more (jit's key has no order for it: the general
        way keys the program by its order too), a leaf jit cannot take (a string, an object:
        static to dy2st), a
        Python number (its jit signature is a weak-typed or bool scalar's, which the shared
        jit never traces in a pytree: `program.AmbiguousLeaf`), a list or dict the function
        changes or keeps (`ContainerEffect`: lifted from then on).
        """
        jitted = self._fast
        if jitted is None or not _jax_compat.at_top_level():  # traced arguments: inlined
            raise Declined("traced arguments")
        cache = self._cache
        traces_before = cache.traces_started()
        try:
            out = (run or jitted)(*args)
        except ContainerEffect:
            self._lift_containers()
            raise Declined("a list or dict argument is changed or kept") from None
        except AmbiguousLeaf:
            self._close_pytree_route()
            raise Declined("a signature the shared jit does not take") from None
        except Exception:
            if cache.traces_started() != traces_before:
                raise  # the function's own error, raised while tracing it
            # jit's argument check refused a leaf (a TypeError, an OverflowError for a Python int
            # beyond int32): the general way
            self._close_pytree_route()
            raise Declined("jit refused a leaf") from None
        if self._fast is None:
            return _finish_after_change(out, args)
        return _decoded(out, args) if self._policy.decodes_outputs else out

    def _lift_containers(self):
        """A trace showed the function changes or keeps a list/dict argument: such arguments
        are lifted as state from now on (not passed as plain inputs, nor cached by the front)."""
        self._policy.lists_lifted = True
        self._set_fast(self._fast)

    def _close_pytree_route(self):
        self._policy.pytree_route = False
        self._set_fast(self._fast)

    def _set_fast(self, jitted):
        self._fast = jitted
        policy = self._policy
        self._use_jit(jitted, self._call_pytrees if jitted is not None and policy.pytree_route else None,
                      self._guards.holds if self._guards else None,
                      (_PYTREE_ROOTS_LIFTED if policy.lists_lifted else _PYTREE_ROOTS) | policy.node_types,  # (lifted: the stateful path)
                      self._cache.program_for_statics if jitted is not None else None,
                      _decoded if policy.decodes_outputs else None)

    def _drop_fast(self):
        """The cache replaced or retired its shared jit, or it traced a run-time check (the
        policy says so): the next call takes the general path."""
        self._set_fast(None)

    def _inline(self, args, kwargs):
        """Called with traced arguments (inside jit/grad/vmap): run into the enclosing trace
        (whose program, where it is one of dy2st's, guards what this function reads)."""
        return run_inline(self._converted, args, kwargs, user_function=self._fn)

    def _eagerly_after(self, failed: BaseException, args, kwargs):
        """The call, run eagerly (`errors.rerun_eagerly`), from the state before it: its trace
        raised the function's own exception (what the trace changed outside the call put back),
        or its program failed a run-time check of eager's kind, losing the changes made before
        it (`program_body.changes_lost_with`; the program's prints up to the failure were made,
        so the eager run's are muted, and an error of the same type leaves as the program's,
        which says where it failed). Eager's run gives eager's prints, changes and exception.
        Where eager raises nothing, dy2st failed where eager does not, which the first such call
        says once."""
        ran = failed_when_run(failed)
        if not ran:
            out = self._fn(*args, **kwargs)
        else:
            with output_replayed(written_before_failing(failed)):
                try:
                    out = self._fn(*args, **kwargs)
                except Exception as eager_error:
                    if type(eager_error) is not type(failed):
                        raise
                    out = failed
            if out is failed:  # (out of the `except`: the error has no context)
                mark_noted(failed)
                raise failed
        self._policy.eager_fallbacks += 1
        if self._policy.eager_fallbacks == 1:
            origin = innermost_user_frame(failed.__traceback__)
            logger.warning(
                "dy2st: %s ran eagerly: %s %s: %s%s, where eager code raises nothing. "
                "Calls like this one run eagerly, not compiled (see dy2st.explain).%s",
                getattr(self._fn, "__qualname__", self._fn), "its program raised" if ran else "tracing it raised",
                type(failed).__name__, str(failed).splitlines()[0] if str(failed) else "",
                f" ({origin.filename}, line {origin.lineno})" if origin is not None else "",
                _OUTSIDE_MODULE_HINT if "different trace level" in str(failed) else "")
        return out

    def _guarded(self):
        """A trace read a Python value from outside the arguments: calls must check it, so
        the hit path is the dispatcher's, which checks them (jit's own dispatch runs no Python)."""
        self._set_fast(None)

    def _guards_changed(self):
        """A value the programs read from outside the arguments changed since they were
        traced: drop them, so this call traces again with the value of now."""
        self._guards.failures += 1
        if self._guards.failures == config.retrace_warning_threshold:
            key = self._guards.changed()
            logger.warning(
                "dy2st: %s has been traced again %d times because the %s it reads changed between "
                "calls (%s, line %s). Each change traces and compiles the function again: pass values "
                "that change as arguments (arrays for numbers that change every call).",
                getattr(self._fn, "__qualname__", self._fn), self._guards.failures, guards.describe(key),
                getattr(getattr(self._fn, "__code__", None), "co_filename", "?"),
                getattr(getattr(self._fn, "__code__", None), "co_firstlineno", "?"))
        if self._guards.reads_numpy_arrays():
            jax.clear_caches()  # (JAX's device copy of a numpy array a trace read is kept by its identity)
        self._guards.clear()
        self.clear_cache()

    @property
    def _spec_checker(self) -> input_spec.ArgumentChecker:
        # The specs of a method describe the arguments after `self`.
        skip = int(conversion.is_method(self._fn))
        self._checker = input_spec.ArgumentChecker(self._input_spec, list(inspect.signature(self._fn).parameters), skip)
        return self._checker

    @property
    def _stateful_programs(self) -> stateful.StatefulPrograms:
        if self._stateful is None:
            self._stateful = stateful.StatefulPrograms(
                lambda: self._converted, getattr(self._fn, "__qualname__", repr(self._fn)), self._cache.max_programs,
                self._guards)
        return self._stateful

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        # One bound object per live instance: keyed by id, valid while the bound object (which
        # holds the instance) is alive, so ids are never reused underneath it.
        bound = self._bound.get(id(instance))
        if bound is None:
            bound = self._bound[id(instance)] = BoundStaticFunction(self, instance)
        return bound

    # -- introspection ------------------------------------------------------------------
    @property
    def policy(self) -> CallPolicy:
        """Which route calls take, and why: what calls and traces have shown so far
        (`dy2st.call_policy`; `policy.reasons()` says it in words). Read it; dy2st writes it."""
        return self._policy

    @property
    def code(self) -> str:
        """The translated source, as Python text."""
        return conversion.source_of(self._converted)

    @property
    def programs(self) -> list[ConcreteProgram]:
        """The cached ConcretePrograms, one per input signature seen so far."""
        extra = self._stateful.programs if self._stateful is not None else []
        return self._cache.programs + extra

    def get_concrete_program(self, *args, **kwargs) -> ConcreteProgram:
        """Trace (without running) the program for these arguments, ShapeDtypeStructs or
        InputSpecs (default: the `input_spec` given to `to_static`).

        A `None` dim of an InputSpec traces as a `jax.export` symbolic dimension: `.jaxpr` and
        `.as_text()` then describe the program for every size (`.compiled` needs fixed sizes).
        """
        try:
            args, kwargs = input_spec.abstract((self._with_input_spec(args, kwargs), kwargs))
            positions = stateful.root_positions(args, kwargs)
            if positions:
                return self._stateful_programs.get_concrete_program(args, kwargs, positions)
            return self._cache.get_concrete_program(args, kwargs)
        except Exception as exc:
            __tracebackhide__ = True  # noqa: F841
            raise at_boundary(exc, config.traceback_filtering)

    def explain(self, *args, **kwargs):
        """Trace for these arguments and report what became of each line: which `if`s became a
        `lax.cond`, which loops a scan, a while loop or a Python unroll (and why), which calls
        were converted, which run-time checks and prints remain; plus the program's size and
        trace and compile times. Arguments as for a call, or ShapeDtypeStructs / InputSpecs
        (default: the `input_spec` given to `to_static`). See `dy2st.explain`.

        Example::

            print(f.explain(x))        # the source, annotated line by line
        """
        from dy2st.explain import explain

        return explain(self, *args, **kwargs)

    def trace_request(self, *args, **kwargs) -> "TraceRequest":
        """The call `explain` traces for these arguments (for dy2st's own tools)."""
        return TraceRequest(self, input_spec.abstract((self._with_input_spec(args, kwargs), kwargs)), bound=0)

    def _with_input_spec(self, args, kwargs) -> tuple:
        """`args`, or the `input_spec` given to `to_static` when a trace is asked for with no
        arguments (a method's `self` aside: its specs come after it)."""
        skip = int(conversion.is_method(self._fn))
        if len(args) == skip and not kwargs and self._input_spec is not None:
            return (*args, *self._input_spec)
        return args

    def rollback(self):
        """The original eager callable."""
        return self._fn

    def clear_cache(self) -> None:
        """Drop every cached program (the conversion itself is kept)."""
        self._cache.clear()
        if self._stateful is not None:
            self._stateful.clear()

    def __repr__(self):
        return f"<StaticFunction {getattr(self._fn, '__qualname__', self._fn)!r}>"


class BoundStaticFunction(StaticFunction):
    """A StaticFunction method bound to one object: calls `owner(instance, *args)`.

    The programs belong to the class-level StaticFunction and are shared by every instance:
    `self`'s arrays are program inputs (dy2st/state.py), so a new instance or new parameter
    values reuse the program, and only a new state structure (or shape) compiles another.
    """

    def __new__(cls, owner: StaticFunction, instance):
        # A partial of the owner with `instance` bound first: a call is C code into the owner's
        # dispatcher, which takes its general path (the instance is not an array).
        return functools.partial.__new__(cls, owner, instance)

    def __init__(self, owner: StaticFunction, instance):
        self._owner = owner
        self.__self__ = instance

    def __getattr__(self, name):  # __name__, __qualname__, __wrapped__, ... of the method
        if name == "_owner":  # not yet set (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._owner, name)

    @property
    def __signature__(self):  # the method's signature without `self`, as for a bound method
        signature = inspect.signature(self._owner._fn)
        return signature.replace(parameters=list(signature.parameters.values())[1:])

    def trace_request(self, *args, **kwargs) -> "TraceRequest":
        owner = self._owner
        call = input_spec.abstract((owner._with_input_spec((self.__self__, *args), kwargs), kwargs))
        return TraceRequest(owner, call, bound=1)

    @property
    def code(self) -> str:
        return self._owner.code

    @property
    def programs(self) -> list[ConcreteProgram]:
        return self._owner.programs

    def get_concrete_program(self, *args, **kwargs) -> ConcreteProgram:
        return self._owner.get_concrete_program(self.__self__, *args, **kwargs)

    def rollback(self):
        return types.MethodType(self._owner.rollback(), self.__self__)

    def clear_cache(self) -> None:
        self._owner.clear_cache()

    def __repr__(self):
        return f"<BoundStaticFunction {getattr(self._owner._fn, '__qualname__', '?')!r} of {type(self.__self__).__name__}>"


_LIBRARY_PACKAGES = ("flax", "equinox", "builtins", "jax", "jaxlib", "numpy")


@dataclasses.dataclass(frozen=True)
class TraceRequest:
    """A call as the call path would trace it, for `explain`: the abstract arguments (a bound
    method's `self` first: `bound` of them), the user's function, and `runner()`, which runs the
    arguments with a model's arrays lifted as inputs (dy2st/state.py), so tracing writes
    nothing on them."""

    owner: StaticFunction
    call: tuple  # (args, kwargs), arrays as ShapeDtypeStructs
    bound: int

    @property
    def user_function(self):
        return inspect.unwrap(python_function_of(self.owner) or self.owner._fn)

    def convert(self) -> None:
        """Convert the function now (once; a Dy2StaticError if it cannot be)."""
        self.owner._converted  # noqa: B018

    def runner(self) -> tuple:
        """`(run, args, kwargs)`: a call of `run(*args, **kwargs)` traces what the call would."""
        args, kwargs = self.call
        positions = stateful.root_positions(args, kwargs)
        if positions:
            return self.owner._stateful_programs.fresh_run(args, kwargs, positions)
        return self.owner, args, kwargs


def _refuse_generator(fn) -> None:
    """`to_static` of a generator function: a program returns its values once. (A generator the
    converted code calls, or nests, runs as Python with its calls converted.)"""
    function = inspect.unwrap(fn) if callable(fn) else None
    if isinstance(function, types.FunctionType) and function.__code__.co_flags & inspect.CO_GENERATOR:
        conversion.refuse_generator(function)


def _model_method(model):
    """The forward a model object runs: a user-defined `__call__`, else `forward`."""
    cls = type(model)
    for name in ("__call__", "forward"):
        for klass in cls.__mro__[:-1]:
            fn = klass.__dict__.get(name)
            if fn is not None and klass.__module__.split(".")[0] not in _LIBRARY_PACKAGES:
                return fn
    # A library module (nnx.Linear, eqx.nn.MLP): its own __call__ runs as is, with the module's
    # arrays lifted to program inputs like any model's.
    call = getattr(cls, "__call__", None)
    if isinstance(call, types.FunctionType) and call.__module__.split(".")[0] in ("flax", "equinox"):
        return call
    return None


def _wait_for(out) -> None:
    """Block on the concrete arrays in `out` (none when called inside an outer trace)."""
    for leaf in jax.tree_util.tree_leaves(out):
        if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
            leaf.block_until_ready()


def to_static(fn=None, *, input_spec=None, full_graph: bool = True, max_programs: int = DEFAULT_MAX_PROGRAMS,
              in_shardings=None, out_shardings=None):
    """Convert `fn` so its Python control flow runs as one compiled XLA program.

    Works as `@to_static`, `@to_static(...)` and `to_static(fn)`, on functions, nested
    functions and closures, lambdas, methods (in a class body, or a bound method), and model
    objects: `to_static(model)` converts its `__call__` (or `forward`). The arrays reachable from
    `self` and from object arguments (plain objects, Flax NNX and Equinox modules) are program
    inputs, and attributes the forward changes are written back (see dy2st/state.py).

    Args:
      fn: the function to convert.
      input_spec: optional list of `dy2st.InputSpec` describing the array arguments.
      full_graph: kept for API parity with paddle.jit.to_static; dy2st always converts the
        whole function and never falls back to eager execution silently.
      max_programs: how many compiled programs (input signatures) to keep. Up to it, calls with
        positional arrays share one `jax.jit` (the fastest dispatch); beyond it every program
        gets its own, the least recently used is dropped, and rebuilt if its signature comes
        back.
      in_shardings, out_shardings: as for `jax.jit`: pin where the array arguments (one entry
        per positional parameter, `self` included for methods) and the outputs live; see
        `dy2st.sharding`. Calls whose arguments carry model state do not take them.

    Returns:
      A `StaticFunction`.

    Example::

        @dy2st.to_static
        def f(x):
            if x.sum() > 0:
                return x * 2
            return x - 1
    """
    _check_options(fn, input_spec, max_programs, in_shardings, out_shardings)
    shardings = None
    if in_shardings is not None or out_shardings is not None:
        shardings = Shardings(in_shardings, out_shardings)
    if fn is None:
        return functools.partial(to_static, input_spec=input_spec, full_graph=full_graph, max_programs=max_programs,
                                 in_shardings=in_shardings, out_shardings=out_shardings)
    if isinstance(fn, StaticFunction):
        return fn
    fn, rewrap = callables.normalise(fn)  # staticmethod, classmethod, library wrappers
    if rewrap is not None:
        return rewrap(to_static(fn, input_spec=input_spec, full_graph=full_graph, max_programs=max_programs,
                                in_shardings=in_shardings, out_shardings=out_shardings))
    callables.check_input_spec_count(fn, input_spec)
    if isinstance(fn, types.MethodType) or bound_like_a_method(fn):  # (also an Equinox module's `m.method`)
        return BoundStaticFunction(StaticFunction(fn.__func__, input_spec, full_graph, max_programs, shardings), fn.__self__)
    if not isinstance(fn, (types.FunctionType, functools.partial)) and _model_method(fn) is not None:
        method = _model_method(fn)
        owner = (method if isinstance(method, StaticFunction)
                 else StaticFunction(method, input_spec, full_graph, max_programs, shardings))
        return BoundStaticFunction(owner, fn)
    return StaticFunction(fn, input_spec, full_graph, max_programs, shardings)


def _check_options(fn, input_spec, max_programs, in_shardings, out_shardings) -> None:
    """`to_static`'s arguments, refused at the user's line with what to pass (an ArgumentError,
    also the TypeError or ValueError Python would raise): before any conversion, and for the
    decorator form (`fn` None) where it is written."""
    if fn is not None and not isinstance(fn, StaticFunction) and not _convertible_object(fn):
        raise ArgumentError(f"to_static expects a function, a method or a model object, got "
                            f"{type(fn).__name__} {fn!r:.60}.", user_origin(),
                            advice="pass the function itself, dy2st.to_static(f), or write @dy2st.to_static above its def.")
    if isinstance(max_programs, bool) or not isinstance(max_programs, int) or max_programs < 1:
        raise ArgumentError(f"max_programs must be a positive integer, got {type(max_programs).__name__} "
                            f"{max_programs!r:.60}.", user_origin(),
                            advice=f"pass a count of programs to keep, e.g. max_programs={DEFAULT_MAX_PROGRAMS} (the default).")
    if input_spec is not None:
        check_spec_list(input_spec)
    check_shardings(fn, in_shardings, out_shardings)


def _convertible_object(fn) -> bool:
    """A callable, or an object whose `forward` to_static converts."""
    return callable(fn) or isinstance(fn, (staticmethod, classmethod)) or _model_method(fn) is not None


def explain(fn, *args, **kwargs):
    """Trace `fn` (a function, a StaticFunction, a method or a model) for these arguments and
    report what became of each line; see `dy2st.explain` (the module) and `StaticFunction.explain`."""
    if fn is None:
        raise ArgumentError("explain needs the function to explain as its first argument, got None.",
                            user_origin(), advice="call dy2st.explain(f, *args) with f's arguments.")
    reports = importlib.import_module("dy2st.explain")  # (when first used; `dy2st.explain` is this function)
    return reports.explain(fn if isinstance(fn, StaticFunction) else to_static(fn), *args, **kwargs)


def to_code(fn) -> str:
    """The translated source of `fn`, without running it."""
    if isinstance(fn, StaticFunction):
        return fn.code
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    if isinstance(fn, types.FunctionType):
        return conversion.source_of(conversion.convert(inspect.unwrap(fn)))
    if fn is None:
        raise ArgumentError("to_code needs the function whose translated source to show, got None.",
                            user_origin(), advice="call dy2st.to_code(f).")
    code = to_static(fn).code  # a partial, a staticmethod, a model: as to_static takes them
    if code is None:
        raise ConversionError(f"to_code: {fn!r:.60} has no Python source to translate (a builtin or numpy "
                              "function runs as it is).", user_origin(),
                              advice="pass a function defined in Python source.")
    return code
