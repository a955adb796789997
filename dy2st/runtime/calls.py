"""Calls from converted code: which callees get converted too, and which run as they are.

Generated code writes every user call `f(a, b)` as::

    jst.convert_call(f)(a, b)

`convert_call` only chooses *what* to call; the call itself still happens on the user's line,
in the user's frame, so tracebacks show that line and the callee's own frames with nothing of
dy2st in between, and `super()`, `locals()` and keyword arguments behave as written.

The choice, in order:

* builtins with a staged meaning (`print`, `int`, `range`, `max`, ...) -> `dy2st.runtime.builtins`;
* already converted code (a StaticFunction, a function dy2st compiled, a nested `def` inside
  converted code) -> as is;
* functions from jax, numpy, flax, equinox, optax, dy2st or the standard library, C functions,
  classes, and anything marked `dy2st.not_to_static` -> as is;
* generators, coroutines and functions without source (REPL, `exec`) -> as is (logged);
* other Python functions, lambdas and nested functions -> converted once (cached per code by
  `dy2st.conversion`, per function object here);
* bound methods -> their function converted, then re-bound to the same object;
* callable objects -> their class's `__call__` converted and bound to the object;
* `functools.partial` -> its function converted, the same arguments bound.
"""

from __future__ import annotations

import collections
import datetime
import dis
import functools
import inspect
import io
import itertools
import random
import sys
import sysconfig
import types
import weakref

import jax
import numpy as np

from dy2st.config import log
from dy2st.errors import ConversionError, OriginInfo, PythonEffectError, UnsupportedSyntaxError, is_library_file
from dy2st.runtime.formatting import str_method_replacement
from dy2st.runtime import events, guards, higher_order, writes
from dy2st.runtime.staging import may_catch, refused_in_place
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.values import MUTATORS, RETURNING_MUTATORS
from dy2st.user_code import LIBRARY_PACKAGES, NOT_OBJECTS, is_library_module, is_users_class, top_package

NOT_TO_STATIC_ATTR = "__dy2st_not_to_static__"
_UNCONVERTIBLE_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR  # (a generator: its calls only)

# Code objects dy2st compiled (with every nested code object): calls to functions made from
# them are already converted. Filled by `register_converted`; kept by `writes`, whose frame walks
# read it too.
_converted_codes: set = writes.CONVERTED_CODES
_function_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_AS_IT_IS = object()  # `_function_cache`'s value for a function called unconverted
_replacements: dict = {}  # builtin -> its staged version; filled by dy2st.runtime.builtins
_converter = None  # dy2st.conversion.convert, installed by dy2st.conversion (runtime imports no upward)


def install_converter(convert) -> None:
    """Called once by `dy2st.conversion`: the function that converts a Python function."""
    global _converter
    _converter = convert


def register_converted(code: types.CodeType) -> None:
    """Remember `code` and every code object nested in it as produced by dy2st."""
    stack = [code]
    while stack:
        c = stack.pop()
        _converted_codes.add(c)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


def register_builtin(builtin, replacement) -> None:
    _replacements[builtin] = replacement


def convert_call(fn):
    """The callable to use in place of `fn` inside converted code (see the module docstring)."""
    if type(fn) is types.BuiltinMethodType:
        if type(fn.__self__) in _CONTAINERS and fn.__name__ in _IN_PLACE:
            _refuse_in_a_ternary(fn)
        elif fn.__name__ in _READS and isinstance(fn.__self__, io.IOBase):
            writes.refuse_read_back(fn)
    if guards.recording_any():
        fresh = _fresh_on_every_call(fn)
        if fresh is not None:
            guards.note_fresh(*fresh, OriginInfo.of_caller())
    slots = higher_order.callable_slots(fn)
    if slots is not None:  # jax.grad(loss), lax.scan(body, ...): the callables they get, converted
        return functools.partial(_call_converting, fn, slots, OriginInfo.of_caller() if events.active() else None)
    target = _call_target(fn)
    if events.active():
        _note_call(fn, target, OriginInfo.of_caller())
    if guards.recording_any() and _calls_what_it_is_given(fn):
        target = _noting_passed_functions(target)
    if writes.tracking():
        name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        if _is_users(fn, target):
            return _noting_arguments(target, name)
        if _may_change_its_arguments(fn):
            return _noting_containers(target, fn, name)
    return target


def _fresh_on_every_call(fn) -> tuple | None:
    """`(fn's name, its generator's `GeneratorState` or None)` where each call of `fn` gives
    another value, which a compiled program would keep from its trace: a method of Python's or
    numpy's random number generators (`random.random`, `np.random.randint`, `rng.normal`), a
    clock (`time.perf_counter`, `datetime.now`), the system's randomness (`os.urandom`,
    `uuid.uuid4`, `secrets.token_hex`). None for others."""
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "?")
    state = _generator_state(owner)
    if state is not None:
        return f"{type(owner).__name__}.{getattr(fn, '__name__', name)}()", state
    module = getattr(fn, "__module__", None)
    if module in _FRESH_MODULES or (module, name) in _FRESH_FUNCTIONS:
        return f"{module}.{name}()", None
    if isinstance(owner, type) and issubclass(owner, (datetime.date, datetime.time)) and fn.__name__ in _NOW:
        return f"{owner.__name__}.{fn.__name__}()", None
    return None


def _generator_state(generator) -> guards.GeneratorState | None:
    """How to read and set a random number generator's state, or None for what is not one."""
    if isinstance(generator, random.Random):
        return guards.GeneratorState(generator, generator.getstate, generator.setstate)
    if isinstance(generator, np.random.RandomState):
        return guards.GeneratorState(generator, generator.get_state, generator.set_state)
    if isinstance(generator, np.random.Generator):
        bits = generator.bit_generator
        return guards.GeneratorState(generator, functools.partial(getattr, bits, "state"),
                                     functools.partial(setattr, bits, "state"))
    return None


_FRESH_MODULES = frozenset({"time", "secrets"})
_FRESH_FUNCTIONS = frozenset({("posix", "urandom"), ("nt", "urandom"), ("os", "urandom"), ("uuid", "uuid1"),
                              ("uuid", "uuid4")})
_NOW = frozenset({"now", "today", "utcnow"})

_CONTAINERS = (list, dict, set, collections.deque, bytearray)
_IN_PLACE = MUTATORS | RETURNING_MUTATORS
_READS = frozenset({"getvalue", "read", "readline", "readlines", "seek", "tell"})  # of a file


def _refuse_in_a_ternary(method) -> None:
    around = refused_in_place()
    if around is None:
        return
    origin, what = around
    kind = type(method.__self__).__name__
    raise PythonEffectError(
        f"this line changes a {kind} in place ({kind}.{method.__name__}()) in a side of a staged {what} "
        f"(on line {origin.lineno}): its condition is traced, so both sides are traced, and the change "
        "would happen whichever side the data picks.",
        OriginInfo.of_caller(2),
        advice="write it as an `if` statement (its branches carry lists and dicts changed in place), or "
        "build a new value in the expression (`log + [1] if c else log + [2]`).",
    )


def _call_converting(fn, slots, origin, *args, **kwargs):
    """`fn(*args, **kwargs)` with its callable arguments converted (`higher_order`)."""

    def convert(callee):
        target = _call_target(callee)
        if origin is not None and target is not callee:  # (a def nested in converted code is noted when called)
            _note_call(callee, target, origin)
        return target

    args, kwargs = higher_order.convert_arguments(args, kwargs, slots, convert)
    return fn(*args, **kwargs)


def _note_call(fn, target, origin: OriginInfo) -> None:
    """For `dy2st.explain`: a call to the user's code, converted or run as it is (and why)."""
    function = python_function_of(fn)
    if function is None or is_library_module(function.__module__):
        return  # builtins, library code, classes: nothing of the user's to convert
    name = function.__qualname__
    staged_by_dy2st = _is_static_function(fn) or _is_static_function(getattr(type(fn), "__call__", None))
    if target is not fn or function.__code__ in _converted_codes or staged_by_dy2st:
        events.note(origin, "converted_call", f"converted call: {name}", callee=function)
        return
    wrapped = inspect.unwrap(function)
    if wrapped is not function and wrapped.__code__ in _converted_codes:  # jax.grad(f), functools.wraps
        events.note(origin, "python_call", f"call through a wrapper of {name}",
                    f"the wrapper (jax.grad, jax.vmap, functools.wraps, ...) runs as it is; {name} itself is converted")
        return
    reason = _reason_to_skip(function) or "it is called as it is"
    events.note(origin, "python_call", f"Python call: {name}", f"{name} runs as Python, unconverted: {reason}")


def python_function_of(fn) -> types.FunctionType | None:
    """The Python function a call of `fn` runs (a method's function, a callable object's
    `__call__`, a partial's function), or None."""
    for _ in range(5):  # a partial of a bound method of a StaticFunction of ...
        if _is_static_function(fn):
            fn = fn._fn
        if isinstance(fn, types.FunctionType):
            return fn
        if isinstance(fn, types.MethodType):
            fn = fn.__func__
        elif isinstance(fn, functools.partial):
            fn = fn.func
        elif isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType, type)):
            return None
        else:
            fn = getattr(type(fn), "__call__", None)
    return None


def _is_users(fn, target) -> bool:
    """Whether `fn` is the user's code (converted, or a class of theirs): what may change the
    arguments it is given in place, where library functions do not."""
    if isinstance(fn, type):
        return not is_library_module(fn.__module__)
    if isinstance(fn, types.FunctionType) and fn.__code__ in _converted_codes:
        return True  # a nested def of converted code
    if _replaced(fn):
        return False  # a builtin dy2st runs its own operator for (`next`): called from the user's line
    return target is not fn or (isinstance(fn, types.MethodType) and not is_library_module(type(fn.__self__).__module__))


def _replaced(fn) -> bool:
    try:
        return fn in _replacements or getattr(fn, "__func__", None) in _replacements
    except TypeError:  # unhashable callable object
        return False


def _call_target(fn):
    try:
        replacement = _replacements.get(fn)
    except TypeError:  # unhashable callable object
        replacement = None
    if replacement is not None:
        return replacement
    if isinstance(fn, types.FunctionType):
        return _convert_function(fn)
    if isinstance(fn, types.MethodType) or bound_like_a_method(fn):
        func = fn.__func__
        replacement = _replacements.get(func) if isinstance(func, types.FunctionType) else None
        if replacement is not None:  # `logger.info`: the function's replacement, given the object
            return functools.partial(replacement, fn.__self__)
        _note_user_receiver(fn.__self__)  # a staged branch being traced carries what it changes
        if not isinstance(func, types.FunctionType):
            return fn
        converted = _convert_function(func, fn.__self__)
        return fn if converted is func else types.MethodType(converted, fn.__self__)
    if isinstance(fn, functools.partial) and type(fn).__module__ != "dy2st.api":  # StaticFunction is one
        converted = _call_target(fn.func)
        return fn if converted is fn.func else functools.partial(converted, *fn.args, **fn.keywords)
    if type(fn) is types.MethodWrapperType:  # `o.__setattr__`: its class's slot, if replaced (`object.__setattr__`)
        replacement = _replacements.get(getattr(type(fn.__self__), fn.__name__, None))
        if replacement is not None:
            return functools.partial(replacement, fn.__self__)
    if type(fn) is types.BuiltinMethodType and not isinstance(fn.__self__, types.ModuleType):
        replacement = _replacements.get(getattr(type(fn.__self__), fn.__name__, None))
        if replacement is not None:  # `sys.stdout.write`: its type's method's replacement, given the object
            return functools.partial(replacement, fn.__self__)
    if isinstance(fn, type) and guards.recording_any() and is_users_class(fn):
        _note_class_code(fn)  # `MyError(...)`: Python calls its `__init__` as it is
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType, type)) or _is_static_function(fn):
        replacement = str_method_replacement(fn)  # 'v: {}'.format(x), ', '.join(...): made when the program runs
        if replacement is not None:
            return replacement
        return fn
    return _convert_callable_object(fn)


def bound_like_a_method(fn) -> bool:
    """A library's bound method that is not Python's (an Equinox module's method, read from the
    module: `eqx.Module`'s `BoundMethod`, a pytree of its own): a function and its receiver,
    converted as a method is."""
    return isinstance(vars(fn).get("__func__") if hasattr(fn, "__dict__") else None, types.FunctionType) \
        and "__self__" in vars(fn)


def top_level_target(fn):
    """What `to_static(fn)` runs: `fn` converted, or `fn` itself where nothing of it is the user's.

    Library code (jax, numpy, flax, equinox, ... functions, C functions and ufuncs, jax's
    `custom_jvp`/`custom_vjp` objects, whose derivative rule converting the primal would drop)
    runs as it is, exactly as eagerly. A `functools.partial` converts its function and keeps
    its arguments. Wrappers (`functools.wraps`, `jax.jit`) of a user function convert the
    wrapped function. A function whose source cannot be read is a ConversionError, as is a
    callable with no Python function to convert.
    """
    if _is_static_function(fn):  # a partial of one (its `func` is its call path): its function
        fn = fn._fn
    if isinstance(fn, types.FunctionType):
        return fn if _is_library_function(fn) else _converter(fn)
    if isinstance(fn, functools.partial):
        return functools.partial(top_level_target(fn.func), *fn.args, **fn.keywords)
    if _is_library_callable(fn):
        return fn
    unwrapped = inspect.unwrap(fn)
    if isinstance(unwrapped, types.FunctionType):
        return top_level_target(unwrapped)
    raise ConversionError(
        f"Cannot convert {fn!r}: it is not a Python function.",
        advice="decorate a plain function or method with dy2st.to_static.",
    )


_STDLIB_DIR = sysconfig.get_paths()["stdlib"]


def _is_library_function(fn: types.FunctionType) -> bool:
    """A function of jax, numpy, ... or of the standard library itself (by its file: a user's
    package may share a name with a standard module, such as `test`)."""
    package = top_package(fn.__module__)
    if (fn.__module__ or "").startswith("dy2st.testing."):  # reference models and fuzzers: user code
        return False
    if package in LIBRARY_PACKAGES - sys.stdlib_module_names:
        return True
    return package in sys.stdlib_module_names and fn.__code__.co_filename.startswith(_STDLIB_DIR)


def _is_library_callable(fn) -> bool:
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType, jax.custom_jvp, jax.custom_vjp)):
        return True
    if top_package(type(fn).__module__) not in LIBRARY_PACKAGES - {"builtins", "jaxlib"}:
        return False  # a user's class (or jax.jit's C wrapper, which unwraps to the user's function)
    wrapped = inspect.unwrap(fn)
    return not isinstance(wrapped, types.FunctionType) or _is_library_function(wrapped)


_JAX_AWARE_PACKAGES = frozenset({"jax", "jaxlib", "flax", "equinox", "optax", "chex", "dy2st"})


def runs_eagerly(fn) -> bool:
    """Whether `to_static(fn)` should just call `fn`: library code that cannot take traced
    arrays at all (numpy ufuncs, `math`, builtins such as `len`), so tracing it could only fail
    where the eager call works."""
    if _is_static_function(fn):
        return runs_eagerly(fn._fn)
    if isinstance(fn, functools.partial):  # converted as its function, with its arguments bound
        return runs_eagerly(fn.func)
    if not _is_library_callable(fn) and not (isinstance(fn, types.FunctionType) and _is_library_function(fn)):
        return False
    wrapped = inspect.unwrap(fn) if not isinstance(fn, types.BuiltinFunctionType) else fn
    module = getattr(wrapped, "__module__", None) or type(wrapped).__module__
    return top_package(module) not in _JAX_AWARE_PACKAGES and top_package(type(fn).__module__) not in _JAX_AWARE_PACKAGES


def _is_static_function(fn) -> bool:
    return type(fn).__name__ == "StaticFunction" and type(fn).__module__ == "dy2st.api"


def _note_user_receiver(obj) -> None:
    if not is_library_module(type(obj).__module__):
        writes.note_receiver(obj)


def _noting_arguments(fn, name: str):
    """`fn` (a user's function or class) called while a staged side is traced: the side's
    WriteTrackers first record the lists, dicts and objects it is given, which it may change in
    place (`helper(log)`, `Ctx(log, 1)` whose `__enter__` appends to `log`)."""

    function = python_function_of(fn)
    # the lists and dicts it closes over (`def inc(): state["n"] += 1`), as those it is given
    cells = function.__closure__ or () if function is not None else ()

    def call(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            if type(value) in (list, dict):
                writes.note_container(value, name)
            elif hasattr(value, "__dict__") and not isinstance(value, NOT_OBJECTS):
                _note_user_receiver(value)
        for cell in cells:
            try:
                value = cell.cell_contents
            except ValueError:  # not assigned yet
                continue
            if type(value) in (list, dict):
                writes.note_container(value, name)
        result = fn(*args, **kwargs)
        if isinstance(fn, type) and isinstance(result, fn):
            writes.note_born(result)
        return result

    return call


def _calls_what_it_is_given(fn) -> bool:
    """A builtin that calls the functions it is given (`map(scale, xs)`, `functools.reduce(add,
    xs)`, `itertools.accumulate(xs, step)`), and runs as it is: its wrapper's frame hides none of
    the user's (`max`, `sorted` and `list.sort` are dy2st's own operators: they note their `key`)."""
    try:
        return fn in _CALLING_BUILTINS
    except TypeError:  # (an unhashable callable)
        return False


_CALLING_BUILTINS = frozenset({map, filter, functools.reduce, itertools.starmap, itertools.accumulate,
                               itertools.groupby, itertools.takewhile, itertools.dropwhile, itertools.filterfalse})


def _noting_passed_functions(target):
    """A builtin of `_CALLING_BUILTINS` called while a program is traced: the user's code it is
    given, which it calls itself, is noted as a function converted code calls is (its reads from
    outside guarded: `guards.note_passed`)."""
    def call(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            guards.note_passed(value)
        return target(*args, **kwargs)

    return call


def _may_change_its_arguments(fn) -> bool:
    """Whether a library's callable may change a list or dict it is given or bound to: not
    Python's builtins (`len`, `sorted`, `zip`), nor jax's or numpy's, nor a list's or dict's
    method that does not change it (`d.get`)."""
    receiver = getattr(fn, "__self__", None)
    if type(receiver) in (list, dict):
        return getattr(fn, "__name__", None) in _IN_PLACE
    if fn is map or fn is filter:  # they call what they are given: `map(xs.append, vs)`
        return True
    module = getattr(fn, "__module__", None) or type(fn).__module__
    return module != "builtins" and top_package(module or "") not in _PURE_PACKAGES


_PURE_PACKAGES = frozenset({"jax", "jaxlib", "numpy", "math", "dy2st"})


def _noting_containers(target, fn, name: str):
    """A library's or builtin callable called while a staged side is traced, which may change a
    list or dict it is given or bound to (`heapq.heappush(h, v)`, `bisect.insort(xs, v)`,
    `getattr(xs, "append")(v)`, `operator.iadd(xs, ys)`, `map(xs.append, vs)`): each is handed
    to `writes.in_place` first, as `xs.extend(v)` written out is, so that the change is carried
    and written back (tracing runs both sides' changes otherwise)."""
    receiver = getattr(fn, "__self__", None)
    if type(receiver) in (list, dict):
        writes.in_place(receiver, f"{name}()")

    def call(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            if type(value) in (list, dict):
                writes.in_place(value, f"{name}()")
            elif type(getattr(value, "__self__", None)) in (list, dict):  # `xs.append` given as a value
                writes.in_place(value.__self__, f"{name}()")
        return target(*args, **kwargs)

    return call


def _convert_callable_object(obj):
    _note_user_receiver(obj)
    # flax wraps a Module's __call__ (the wrapper carries __wrapped__, so it is kept as is);
    # equinox and plain classes keep the user's function, which is converted and re-bound.
    call = getattr(type(obj), "__call__", None)
    if not isinstance(call, types.FunctionType):
        return obj
    converted = _convert_function(call, obj)
    return obj if converted is call else types.MethodType(converted, obj)


def _convert_function(fn: types.FunctionType, receiver=None):
    try:
        converted = _function_cache[fn]
    except KeyError:
        converted = _decide(fn)
        try:
            # (a value holding its key would keep it, and the cells it closes over, for good:
            # a trace's local `def loss_fn` and the caller's dicts in them)
            _function_cache[fn] = _AS_IT_IS if converted is fn else converted
        except TypeError:
            pass
    if converted is _AS_IT_IS:
        converted = fn
    if converted is not fn and (converted.__defaults__ is not fn.__defaults__
                                or converted.__kwdefaults__ is not fn.__kwdefaults__):
        # set on the original since it was converted (`helper.__defaults__ = ...`; guarded)
        converted.__defaults__, converted.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    if guards.recording_any() and fn.__code__ not in _converted_codes and not _is_library_function(fn):
        # what it reads from outside is the program's (a def nested in converted code: its
        # parent's), and the class attributes it may read through its `self` or `cls`
        guards.note(fn, receiver)
    return converted


def managed(manager):
    """`with manager:` in converted code (`call_trees`). Python calls the manager's `__enter__`
    and `__exit__` itself, not through `convert_call`: a user's class's are converted here (its
    prints are the program's, in order with the body's, on every call), through `_Managed`.
    While a program is traced, what they (or a `@contextmanager`'s generator, run as it is)
    read from outside is noted: what they change there (a log they append to, a counter) is
    guarded, and a later call that finds it changed traces again, making the effect again, as
    eager does on every call."""
    kind = type(manager)
    if guards.recording_any():
        if kind.__module__ == "contextlib" and isinstance(getattr(manager, "func", None), types.FunctionType):
            if not _is_library_function(manager.func):  # a `@contextmanager`'s generator function
                guards.note(manager.func, manager)
        elif is_users_class(kind):
            _note_class_code(kind, manager)
    if is_users_class(kind) and isinstance(getattr(kind, "__enter__", None), types.FunctionType):
        return _Managed(manager, _never_suppresses(manager))
    if _never_suppresses(manager):
        return _Managed(manager, True, converted=False)
    return manager


def _never_suppresses(manager) -> bool:
    """Whether `manager.__exit__` can never suppress an exception: Python code whose every
    `return` gives None or False (`jax.named_scope`'s), or a `@contextmanager` whose generator
    catches nothing. Such a `with` is no handler around a staged side's deferred raise."""
    func = getattr(manager, "func", None)
    if isinstance(func, types.FunctionType) and type(manager).__module__ == "contextlib":
        return not may_catch(func.__code__)
    code = getattr(getattr(type(manager), "__exit__", None), "__code__", None)
    return code is not None and _returns_only_none_or_false(code)


@functools.lru_cache(maxsize=1024)
def _returns_only_none_or_false(code) -> bool:
    """(Read once per `__exit__`: every `with` run in converted code asks.)"""
    instructions = list(dis.get_instructions(code))
    return all(i.opname != "RETURN_VALUE" or (n > 0 and instructions[n - 1].opname == "LOAD_CONST"
                                              and instructions[n - 1].argval in (None, False))
               for n, i in enumerate(instructions))


class _Managed:
    """A context manager of a `with` in converted code: a user's, whose `__enter__` and
    `__exit__` run converted (`converted`), or one that never suppresses an exception
    (`unsuppressing`), whose `with` is noted while it runs (`CONTEXT.unsuppressing`)."""

    __slots__ = ("manager", "at", "converted")

    def __init__(self, manager, unsuppressing: bool, converted: bool = True):
        self.manager, self.converted = manager, converted
        self.at = () if unsuppressing else None  # (id(frame), line) of the `with` once entered

    def __enter__(self):
        if self.at is not None:
            frame = sys._getframe(1)
            self.at = (id(frame), frame.f_lineno)
            CONTEXT.unsuppressing[self.at] = CONTEXT.unsuppressing.get(self.at, 0) + 1
        enter = self.manager.__enter__
        return _call_target(enter)() if self.converted else enter()

    def __exit__(self, *exc_info):
        if self.at:
            count = CONTEXT.unsuppressing.pop(self.at, 1) - 1
            if count:
                CONTEXT.unsuppressing[self.at] = count
        exit_ = self.manager.__exit__
        return _call_target(exit_)(*exc_info) if self.converted else exit_(*exc_info)


def _note_class_code(cls, instance=None) -> None:
    """While a program is traced: the methods of a user's class (and of its user bases) that
    Python calls as they are, not through `convert_call` (`__init__` when the class is called,
    `__enter__`/`__exit__`, operators' dunders) are noted, so that what they change outside the
    function (a registry they append to, a counter) is guarded as converted code's is."""
    for klass in cls.__mro__:
        if not is_users_class(klass):
            continue
        for method in vars(klass).values():
            if isinstance(method, types.FunctionType) and not _is_library_function(method):
                guards.note(method, instance)
    guards.note_implicit(cls)  # (its properties' and descriptors' code, its metaclass's `__call__`)


def _decide(fn: types.FunctionType):
    reason = _reason_to_skip(fn)
    if reason is not None:
        log(3, "dy2st: calling %s unconverted: %s", fn.__qualname__, reason)
        return fn
    try:
        converted = _converter(fn)
    except UnsupportedSyntaxError:
        raise
    except ConversionError as err:
        if _has_source(fn):
            raise
        log(1, "dy2st: calling %s unconverted: no source (%s)%s", fn.__qualname__, err.problem, events.EXPLAIN_HINT)
        return fn
    register_converted(converted.__code__)
    log(2, "dy2st: converted call target %s", fn.__qualname__)
    return converted


def _reason_to_skip(fn: types.FunctionType) -> str | None:
    code = fn.__code__
    if code in _converted_codes:
        return "already converted"
    if getattr(fn, NOT_TO_STATIC_ATTR, False):
        return "marked not_to_static"
    if is_library_module(fn.__module__):
        return f"it belongs to {top_package(fn.__module__)}"
    if code.co_flags & _UNCONVERTIBLE_FLAGS:
        return "coroutines run as Python"
    if hasattr(fn, "__wrapped__") and is_library_file(code.co_filename):
        # (a wrapper of the user's own decorator is the user's code: converted, and so is the
        # function it calls)
        return "a library decorator's wrapper; its wrapped function is not converted separately"
    if code.co_filename.startswith("<"):
        return "no source file"
    return None


def _has_source(fn) -> bool:
    try:
        inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return False
    return True
