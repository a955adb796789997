"""Builtins called on traced values: the staged meaning of `print`, `int`, `max`, `range`, ...

Generated code reaches these through `convert_call(print)(...)` (see `dy2st.runtime.calls`), so
a user's own function named `print` or `max` is never replaced. With no traced argument each
one is exactly the builtin. With a traced argument:

* `print(x, 'loss', sep=', ')` prints when the program runs (`jax.debug.callback`, so it also
  prints inside staged branches and loops), formatted by Python's own `print`;
* `int(x)`, `float(x)` cast a 0-d array to a scalar of the default int/float dtype
  (`int` truncates toward zero, as Python does); `bool(x)` is `x != 0`; `round(x)` of a weakly
  typed scalar (a Python number carried by a staged loop or branch) is a weak int, as
  Python's `round` of a number is an int;
* `min`/`max`/`sorted`/`any`/`all` make Python's own choice (`dy2st.runtime.ordering`);
* f-strings, `str()`, `repr()` of traced values format at run time (`dy2st.runtime.formatting`);
* `range(n)` with a traced bound is refused: only a `for` header can run over it, and the
  loops step sends those to `loop_iter` without calling `range`.

`len`, `abs`, `isinstance`, `enumerate` and `zip` already behave on traced arrays as on eager
ones (their sizes are static), so they stay the builtins.
"""

from __future__ import annotations

import builtins
import functools
import io
import logging
import math
import operator
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np


from dy2st import _jax_compat
from dy2st.errors import BuiltinError, IntOverflowError, OriginInfo, record_runtime_failure
from dy2st.runtime import events, guards, key_order, writes
from dy2st.runtime.asserts import check_numbers_so_far, check_when_run
from dy2st.runtime.calls import register_builtin
from dy2st.runtime.ordering import (convert_all, convert_any, convert_list_sort, convert_max, convert_min,
                                    convert_sorted)
from dy2st.runtime.iterables import SEQUENCE_ITERATORS
from dy2st.runtime.formatting import (TracedString, bind_traced, convert_ascii, convert_format_builtin, convert_repr,
                                      convert_str, has_traced)
from dy2st.runtime.debug_effects import debug_effects_dropped
from dy2st.runtime.values import bool_as_python_int, is_traced, note_python_numbers


def _default(kind):
    """The dtype a Python int/float becomes (int32/float32 unless jax_enable_x64)."""
    return jax.dtypes.canonicalize_dtype(kind)


def _any_traced(values) -> bool:
    return any(is_traced(leaf) for leaf in jax.tree_util.tree_leaves(values))


def _one_element(x, what: str, origin: OriginInfo, scalar_only: bool = False):
    """`x` as a 0-d array, where it has one element (`scalar_only`: where it is 0-d, as a jax
    array must be for `int()`/`float()` eagerly; `bool()` and `.item()` take one element)."""
    if int(np.prod(np.shape(x))) != 1:
        raise BuiltinError(
            f"{what} of an array of shape {tuple(np.shape(x))}: only one-element arrays have a "
            "single value.",
            origin,
            advice="reduce the array first (x.sum(), x[0], x.max()), or use jnp functions elementwise.",
        )
    if scalar_only and np.ndim(x) != 0:
        raise BuiltinError(
            f"{what} of an array of shape {tuple(np.shape(x))}: eagerly jax converts only 0-d arrays to "
            "Python scalars (TypeError).",
            origin,
            advice="index or reshape it first (`x[0]`, `x.reshape(())`), or use `.item()`.",
        )
    return jnp.reshape(x, ())


# -- print -------------------------------------------------------------------------------------
def convert_print(*values, sep=" ", end="\n", file=None, flush=False):
    """`print(*values, ...)`; with traced values (or strings formatted from them, see
    `dy2st.runtime.formatting`), prints when the program runs. Python values only: printed now
    when the code runs eagerly; while anything is traced (a program of dy2st's, or the function
    inline in a user's `jax.jit`), on every run of the program (the text made now, as eager
    makes it at this point), in order with the program's other prints. Printed while a user's
    jit traces, a print would show once, and a print in each side of a staged `if` both,
    whatever the data says."""
    if not has_traced(values):
        if _jax_compat.at_top_level():
            return builtins.print(*values, sep=sep, end=end, file=file, flush=flush)
        text = io.StringIO()
        builtins.print(*values, sep=sep, end=end, file=text)  # str() of each value, now
        text = text.getvalue()
        if events.active():
            events.note(OriginInfo.of_caller(), "print", "print at run time",
                        "Python values: the text is made while tracing and printed on every call")
        if debug_effects_dropped():
            return None
        writes.note_staged_print(file)
        _when_run(functools.partial(_write, text, _stream(file), flush), [])
        return None
    if debug_effects_dropped():  # dy2st.save(..., debug_effects="drop")
        return None
    if events.active():
        events.note(OriginInfo.of_caller(), "print", "print at run time",
                    "traced values: a host callback (jax.debug.callback) prints on every call")
    traced, fill = bind_traced(values, {})
    top_level = [is_traced(v) for v in values]
    writes.note_staged_print(file)
    stream = _stream(file)

    def callback(*arrays):
        printed, _ = fill(list(arrays))
        # a top-level array prints as str() does; inside a container it shows as jax's repr
        printed = [str(v) if top else v for v, top in zip(printed, top_level)]
        text = io.StringIO()
        builtins.print(*printed, sep=sep, end=end, file=text)
        _write(text.getvalue(), stream, flush)

    _when_run(callback, traced)
    return None


def convert_write(stream, text):
    """`stream.write(text)` of a builtin file or stream (`sys.stdout.write`, a StringIO's, an
    open file's): made now at the top level; while anything is traced, when the program runs,
    on every run and in order with its prints, as `print(..., file=stream)` is. Gives what
    eager's gives: the length written."""
    if _jax_compat.at_top_level() or debug_effects_dropped():
        return stream.write(text)
    if not isinstance(text, (str, bytes, bytearray, TracedString)):
        return stream.write(text)  # (its own TypeError, now)
    writes.note_staged_print(stream)
    target = _stream(stream)
    if not isinstance(text, TracedString):
        _when_run(functools.partial(_write, text, target, False), [])
        return len(text)
    traced, fill = bind_traced((text,), {})
    _when_run(lambda *arrays: _write(fill(list(arrays))[0][0], target, False), traced)
    return None  # (its length is only known when the program runs)


def convert_writelines(stream, lines):
    """`stream.writelines(lines)`, as `convert_write` of their concatenation."""
    lines = list(lines)
    if _jax_compat.at_top_level() or not all(isinstance(line, (str, bytes, bytearray)) for line in lines):
        return stream.writelines(lines)
    convert_write(stream, lines[0][:0].join(lines) if lines else "")
    return None


def convert_flush(stream):
    """`stream.flush()`: when the program runs, after the writes staged before it."""
    if _jax_compat.at_top_level() or debug_effects_dropped():
        return stream.flush()
    target = _stream(stream)
    _when_run(lambda: target().flush(), [])
    return None


def _when_run(effect, traced: list) -> None:
    """`effect(*run-time values of traced)` each time the program runs (a print, a log record,
    a warning). Ordered, so they come out in program order; jax cannot batch ordered effects, so
    under vmap they are unordered (as jax.debug.print is by default). After the numbers rule's
    checks of what was computed before it (`asserts.check_numbers_so_far`)."""
    check_numbers_so_far()
    jax.debug.callback(effect, *traced, ordered=not any(_jax_compat.is_batch_tracer(t) for t in traced))


def convert_debug_print(fmt, *args, ordered=None, **kwargs):
    """`jax.debug.print(...)`: ordered, so that it prints in program order with the program's
    prints (eagerly it prints where it stands; jax's default leaves the order to XLA), unless
    under vmap (jax cannot batch ordered effects) or the call says otherwise."""
    return _debug_effect(jax.debug.print, (fmt, *args), kwargs, ordered)


def convert_debug_callback(callback, *args, ordered=None, **kwargs):
    """`jax.debug.callback(...)`, ordered as `convert_debug_print` is."""
    return _debug_effect(jax.debug.callback, (callback, *args), kwargs, ordered)


def _debug_effect(effect, args, kwargs, ordered):
    if ordered is None:
        leaves = jax.tree_util.tree_leaves((args[1:], kwargs))
        ordered = not any(_jax_compat.is_batch_tracer(leaf) for leaf in leaves)
    if ordered:
        check_numbers_so_far()  # (a failed number check stops the program before it prints)
    return effect(*args, ordered=ordered, **kwargs)


def _write(text: str, stream, flush: bool) -> None:
    """A staged print's or write's text, written when the program runs, to `stream()` (and
    logged: `writes.WrittenLog`)."""
    target = stream()
    target.write(text)
    writes.WRITTEN.note(target, text)
    if flush:
        target.flush()


def _stream(file):
    """Where a print into `file` writes when the program runs: `sys.stdout` (no file, or
    `file=sys.stdout`) or `sys.stderr` as they are then, as eager's print and `sys.stdout`
    look them up on each call (a caller may redirect them between calls); else that file. One
    the function itself redirected (`contextlib.redirect_stdout(buf)` in it) is that file: its
    text read back in the call (`buf.getvalue()`) is refused, as for `print(..., file=buf)`."""
    entry = writes.streams_at_entry() or (sys.stdout, sys.stderr)
    if file is None:
        file = sys.stdout
    if file is sys.stdout and file is entry[0]:
        return lambda: sys.stdout
    if file is sys.stderr and file is entry[1]:
        return lambda: sys.stderr
    writes.note_printed_file(file)
    return lambda: file


# -- logging -------------------------------------------------------------------------------------
_LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
               "error": logging.ERROR, "exception": logging.ERROR, "critical": logging.CRITICAL,
               "fatal": logging.CRITICAL, "log": None}


def _logging_call(method: str, module_level: bool = False):
    """`logger.info(msg, *args)` (or `logging.info(...)`, the root logger's): as `print`, made on
    every run of the program, in order with its other prints and logs, with traced arguments'
    run-time values; the record names the user's line. Run while tracing, it logged once, with
    tracers, whatever a staged `if` around it decided."""

    def call(*args, **kwargs):
        logger = logging.root if module_level else args[0]
        args = args if module_level else args[1:]
        if _jax_compat.at_top_level() and not has_traced((args, kwargs)):
            stacklevel = kwargs.pop("stacklevel", 1) + 1  # this frame is not the caller
            target = getattr(logging, method) if module_level else getattr(logger, method)
            return target(*args, stacklevel=stacklevel, **kwargs)
        if debug_effects_dropped():
            return None
        level = _LOG_LEVELS[method]
        if level is None:  # logger.log(level, msg, ...)
            level, *args = args
        if isinstance(logger, logging.LoggerAdapter):  # its `process` adds what it adds, now
            msg, kwargs = logger.process(args[0], kwargs)
            args, logger = [msg, *args[1:]], logger.logger
        origin = OriginInfo.of_user_code()
        traced, fill = bind_traced(list(args), {"extra": kwargs.get("extra")})

        def emit(*arrays):
            (msg, *values), named = fill(list(arrays))
            if module_level and not logging.root.handlers:
                logging.basicConfig()  # as `logging.info` does
            if not logger.isEnabledFor(level):
                return
            where = (origin.filename, origin.lineno, origin.function_name) if origin else ("(unknown file)", 0, None)
            logger.handle(logger.makeRecord(logger.name, level, where[0], where[1], msg, tuple(values), None, where[2],
                                            named["extra"]))

        _when_run(emit, traced)
        return None

    return call


# -- warnings --------------------------------------------------------------------------------------
def convert_warn(message, category=None, stacklevel=1, source=None, **kwargs):
    """`warnings.warn(...)`: as `print`, issued on every run of the program while one is traced
    (in a staged `if`, only where the data takes that side), with traced values in the message
    at their run-time values; the warning names the user's line and goes through their module's
    registry, so the filters (`default`: once per line; `always`; `error`) act as eagerly. Run
    while tracing, it warned once, whatever a staged `if` around it decided."""
    if _jax_compat.at_top_level() and not has_traced(message):
        return warnings.warn(message, category, stacklevel + 1, source, **kwargs)
    if debug_effects_dropped():
        return None
    origin = OriginInfo.of_user_code()
    frame = sys._getframe(1)  # the converted function's: the user's module globals
    module = frame.f_globals.get("__name__", "__main__")
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    traced, fill = bind_traced([message], {})

    def issue(*arrays):
        (text,), _ = fill(list(arrays))
        kind = type(text) if isinstance(text, Warning) else category or UserWarning
        where = (origin.filename, origin.lineno) if origin else ("(unknown file)", 0)
        try:
            warnings.warn_explicit(text if isinstance(text, Warning) else str(text), kind, *where, module, registry,
                                   source=source)
        except Exception as error:  # an `error` filter: the warning is the call's exception
            record_runtime_failure(error)
            raise

    _when_run(issue, traced)
    return None


# -- writes by name ------------------------------------------------------------------------------
def convert_setattr(obj, name, value):
    """`setattr(obj, name, value)` (also `object.__setattr__`): see `writes.changing`."""
    return builtins.setattr(writes.changing(obj, f"setattr(..., {name!r}, ...)"), name, value)


def convert_delattr(obj, name):
    return builtins.delattr(writes.changing(obj, f"delattr(..., {name!r})"), name)


def convert_vars(*args):
    """`vars(obj)`: what the caller changes through it (`vars(o).update(...)`) is `obj`'s."""
    return builtins.vars(*(writes.changing(a, "vars(...)") for a in args))


def convert_setitem(container, key, value):
    """`operator.setitem(container, key, value)`, as `container[key] = value`."""
    writes.in_place(container, "operator.setitem()", True)[key] = value


def convert_delitem(container, key):
    del writes.in_place(container, "operator.delitem()", True)[key]


# -- casts -------------------------------------------------------------------------------------
def convert_int(x=0, *args, **kwargs):
    """`int(x)`; a traced one-element array becomes a default-int scalar, truncated toward 0."""
    if not is_traced(x) or args or kwargs:
        return builtins.int(x, *args, **kwargs)
    value = _one_element(x, "int()", OriginInfo.of_caller(), scalar_only=True)
    return _python_scalar(jnp.trunc(value) if jnp.issubdtype(value.dtype, jnp.inexact) else value, int)


def convert_float(x=0.0):
    """`float(x)`; a traced one-element array becomes a default-float scalar."""
    if not is_traced(x):
        return builtins.float(x)
    return _python_scalar(_one_element(x, "float()", OriginInfo.of_caller(), scalar_only=True), float)


def convert_item(x, *args):
    """`x.item()` of a traced one-element array: the numbers rule's 0-d array for the Python
    number eager gives (an int for an int array, a float for a float one, a bool for a bool one),
    as `int(x)`/`float(x)` give; eagerly `.item()` is how training code logs a loss."""
    if args:
        return x.item(*args)  # (an index: jax's own error, as for any traced value)
    value = _one_element(x, ".item()", OriginInfo.of_caller())
    if value.dtype == jnp.bool_:
        return value
    if jnp.issubdtype(value.dtype, jnp.integer):
        return _python_scalar(value, int)
    if jnp.issubdtype(value.dtype, jnp.floating):
        return _python_scalar(value, float)
    return value


def _rounding(name: str, op):
    """`math.floor`/`ceil`/`trunc` of a traced one-element array: the Python int eager gives, as
    the numbers rule's 0-d int (an int array as it is)."""
    python = getattr(math, name)

    def convert(x):
        if not is_traced(x):
            return python(x)
        value = _one_element(x, f"math.{name}()", OriginInfo.of_caller())
        return _python_scalar(op(value) if jnp.issubdtype(value.dtype, jnp.inexact) else value, int)

    return convert


def _float_function(name: str, op):
    """`math.copysign`/`math.fabs` where an argument is a traced one-element array (a Python
    float the data decides): the float eager gives, as the numbers rule's 0-d float. (They raise
    for no float, so no run-time check is needed; `math.sqrt`'s domain error would need one.)"""
    python = getattr(math, name)

    def convert(*args):
        if not any(is_traced(a) for a in args):
            return python(*args)
        origin = OriginInfo.of_caller()
        values = [_one_element(a, f"math.{name}()", origin) if is_traced(a) else a for a in args]
        return _python_scalar(op(*(jnp.asarray(v, _default(float)) for v in values)), float)

    return convert


def _python_scalar(value, kind):
    """`value` as the default int/float dtype, weakly typed as a Python number is, so that
    `x_int8 * int(y)` stays int8 as it does eagerly. (jax has no public way to make a weak
    type: this is the conversion jnp uses for Python scalars.) It stands for that Python number
    from here on (`values.PythonNumbers`: `10 // int(x[0])` raises where it is 0, as eagerly)."""
    if kind is int and jnp.issubdtype(value.dtype, jnp.inexact):
        _check_int_range(value)
    number = _jax_compat.convert_element_type(value, _default(kind), weak_type=True)
    note_python_numbers([number])
    return number


def _check_int_range(value) -> None:
    """`int()` or `round()` of a traced float: where it is outside int32 the conversion would
    saturate (eagerly the int grows) and a nan or an infinity would give garbage (eagerly
    ValueError, OverflowError): each raises when the program runs, at the user's line."""
    origin = OriginInfo.of_user_code()
    fits = jnp.isfinite(value) & (value >= -2.0 ** 31) & (value < 2.0 ** 31)

    def error(number):
        if np.isnan(number):
            return ValueError("cannot convert float NaN to integer")
        if np.isinf(number):
            return OverflowError("cannot convert float infinity to integer")
        return IntOverflowError(
            f"int() of {float(number)!r} left int32's range when the program ran: eagerly the Python int "
            "would hold it, the compiled program's (an int32) would saturate.", origin,
            advice="keep the value within int32, or keep it a float (`math.floor` of a float array stays one "
            "with `jnp.floor`).")

    check_when_run(fits, error, origin, "int() of a float stays within int32", detail=value)


def _stands_for_number(value) -> bool:
    """A weakly typed traced scalar: what a Python number a staged loop or branch carries is."""
    return is_traced(value) and getattr(value, "weak_type", False) is True and np.shape(value) == ()


def convert_negative_power(base, exponent):
    """`base ** exponent` for a negative int literal `exponent`: a Python int there is a float
    eagerly (`3 ** -1 == 0.333...`); a weakly typed int scalar (a Python int the data decides)
    is raised in float, weakly typed as that float would be, where jnp refuses an integer to a
    negative power."""
    if _stands_for_number(base) and jnp.issubdtype(base.dtype, jnp.integer):
        return _python_scalar(base, float) ** exponent
    return base ** exponent


def convert_round(number, ndigits=None):
    """`round(x)`. A weakly typed traced scalar stands for a Python number (a loop carried it,
    say), whose `round` is a Python int (a float with `ndigits`): a weak scalar here too, where
    jax's own `round` of an array gives a strong int32 array."""
    if not _stands_for_number(number):
        return builtins.round(number, ndigits)
    if is_traced(ndigits):
        raise BuiltinError("round() with a number of digits the data decides: the rounding is made when the "
                           "program is traced.", OriginInfo.of_caller(),
                           advice="pass the number of digits as a Python int.")
    if not jnp.issubdtype(number.dtype, jnp.inexact):
        if ndigits is None or ndigits >= 0:
            return number  # Python's round of an int is the int (ndigits >= 0)
        return _round_int_to(number, 10 ** -ndigits)
    if ndigits is None:
        return _python_scalar(jnp.round(number), int)  # half to even, as Python rounds
    return _python_scalar(jnp.round(number, ndigits), float)


def _round_int_to(number, multiple: int):
    """Python's `round(n, -k)` of an int the data decides: the nearest multiple of `multiple`
    (10**k), a tie to the even multiple."""
    if multiple > 2 ** 31:  # every int32 is nearer 0 than half of it
        return number * 0
    quotient, remainder = jnp.divmod(number, multiple)
    up = (2 * remainder > multiple) | ((2 * remainder == multiple) & (quotient % 2 == 1))
    return (quotient + up.astype(quotient.dtype)) * multiple


def convert_abs(x):
    """`abs(x)`; of a Python bool the data decides, an int as Python's (jnp keeps a bool)."""
    return builtins.abs(bool_as_python_int(x))


def convert_bool(x=False):
    """`bool(x)`; a traced one-element array becomes `x != 0`."""
    if not is_traced(x):
        return builtins.bool(x)
    value = _one_element(x, "bool()", OriginInfo.of_caller())
    return value if value.dtype == jnp.bool_ else value != 0


def convert_pow(base, exp, mod=None):
    """`pow(base, exp, mod)`; with a traced int base and a Python int exponent and modulus,
    square-and-multiply with the remainder taken at each step (Python's sign: the modulus's),
    exact while products stay in int32 (a modulus up to 46341). Two arguments: `base ** exp`."""
    if mod is None or not _any_traced((base, exp, mod)):
        return builtins.pow(base, exp, mod)
    if not all(_stands_for_number(v) or not is_traced(v) for v in (base, exp, mod)):
        # an array (not a Python number the data decides): eagerly jax's `__pow__` takes no modulus
        return builtins.pow(base, exp, mod)
    origin = OriginInfo.of_caller()
    if not all(jnp.issubdtype(jnp.result_type(v), jnp.integer) for v in (base, exp, mod)):
        raise TypeError("pow() 3rd argument not allowed unless all arguments are integers")
    if is_traced(exp) or is_traced(mod) or exp < 0 or abs(mod) > 46341:
        raise BuiltinError(
            "pow(base, exp, mod) of a traced int needs a Python int exponent of 0 or more and a Python "
            "int modulus of at most 46341 in size (so that products stay in int32).",
            origin,
            advice="compute the power with a static exponent and the modulus as a Python value, or "
            "use jnp.power and jnp.remainder on a wider dtype.")
    if mod == 0:
        raise ValueError("pow() 3rd argument cannot be 0")
    result, square = jnp.remainder(jnp.ones_like(base), mod), jnp.remainder(base, mod)
    while exp:
        if exp & 1:
            result = jnp.remainder(result * square, mod)
        square, exp = jnp.remainder(square * square, mod), exp >> 1
    return result


# -- range -----------------------------------------------------------------------------------
# -- iter and next ---------------------------------------------------------------------------------
def convert_iter(*args):
    """`iter(...)`; the iterator is noted (`writes.note_iterator`): a new one over a list, tuple,
    ... may be taken over by staged code that decides or changes its position."""
    made = builtins.iter(*args)
    if len(args) == 1:
        writes.note_iterator(made, made is not args[0] and type(made) in SEQUENCE_ITERATORS)
    return made


def convert_next(iterator, *default):
    """`next(it[, default])`; for an iterator whose position staged code decides or changes
    (`writes.HeldPosition`: a loop with a traced `break` left it, or this is a staged side and
    it was made outside it), the item at its position: read by index at a Python position,
    picked from the items stacked at a traced one; the position moves on (carried out of the
    staged sides around). Without a default, past the last item, StopIteration, as a run-time
    check at a traced position."""
    origin = OriginInfo.of_caller()
    held = writes.held_position(iterator, origin)
    if held is None:
        return builtins.next(iterator, *default)
    count, taken = len(held.items), held.taken
    if not is_traced(taken):
        if taken < count:
            held.move(taken + 1)
            return held.items[taken]
        if default:
            return default[0]
        raise StopIteration
    stacked = _stacked([*held.items, *default], held, origin)
    if not default:
        check_when_run(taken < count, StopIteration, origin, "next() past an iterator's last item",
                       raises="StopIteration")
    position = jnp.minimum(taken, len(stacked) - 1)
    held.move(jnp.minimum(taken + 1, count))
    return jax.lax.dynamic_index_in_dim(stacked, position, keepdims=False)


def _stacked(values: list, held, origin: OriginInfo):
    """`values` (the items next() may give, then its default) as one array, where they are arrays
    of one shape and dtype, or Python numbers (which come back as the numbers rule's weak scalar)."""
    numbers = [v for v in values if type(v) in (bool, int, float)]
    arrays = [v for v in values if isinstance(v, (jax.Array, np.ndarray, np.generic))]
    if (len(numbers) + len(arrays) != len(values) or len({np.shape(v) for v in values}) != 1
            or len({a.dtype for a in arrays}) > 1):
        writes.refuse_held_use(held, "next() (the items it may give are not arrays of one shape and type)", origin)
    stacked = jnp.stack([jnp.asarray(v) for v in values])
    if arrays or all(type(v) is bool for v in values):
        return stacked
    return _python_scalar(stacked, float if any(type(v) is float for v in values) else int)


def convert_range(*args):
    """`range(...)`; a traced bound is refused outside a `for` loop's header.

    `for i in range(n)` never gets here: the loops step hands `range` and its bounds to
    `loop_iter`, which stages them. Anywhere else (`list(range(n))`) the number of items would
    only be known when the program runs, so a traced bound is an error naming the line.
    """
    if not any(is_traced(a) for a in args):
        return builtins.range(*args)
    origin = OriginInfo.of_caller()
    for a in args:
        if is_traced(a) and not jnp.issubdtype(a.dtype, jnp.integer):
            raise BuiltinError(
                f"range() needs integer bounds, got a traced {np.dtype(a.dtype).name} value.",
                origin,
                advice="cast the bound with int(...) or .astype(jnp.int32).",
            )
    raise BuiltinError(
        "range() with a traced bound has no length or items while the program is traced; only "
        "a `for` loop header can run over it.",
        origin,
        advice="use it directly as a `for` loop's iterable (`for i in range(n):`), or use "
        "jnp.arange with a static size.",
    )


def convert_type(*args):
    """`type(obj)`: a dict argument being watched for its order (`key_order.WatchedDict`) is a
    `dict`, as eagerly; `type(name, bases, namespace)` makes a class as ever."""
    if len(args) == 1 and builtins.type(args[0]) is key_order.WatchedDict:
        return dict
    return builtins.type(*args)


def convert_hasattr(obj, name):
    """`hasattr(obj, name)`; while a program is traced, the user's classes of `obj` are guarded
    for `name`, so a class that gains or loses it between calls traces again."""
    guards.note_lookup(obj, name)
    return builtins.hasattr(obj, name)


def convert_getattr(obj, name, *default):
    """`getattr(obj, name[, default])`, guarded as `hasattr` is (without a default too: an
    `except AttributeError` may catch its failure)."""
    guards.note_lookup(obj, name)
    return builtins.getattr(obj, name, *default)


for _builtin, _replacement in (
    (builtins.hasattr, convert_hasattr),
    (builtins.getattr, convert_getattr),
    (builtins.type, convert_type),
    (builtins.print, convert_print),
    (builtins.int, convert_int),
    (builtins.float, convert_float),
    (builtins.bool, convert_bool),
    (builtins.round, convert_round),
    (builtins.pow, convert_pow),
    (builtins.max, convert_max),
    (builtins.min, convert_min),
    (builtins.sorted, convert_sorted),
    (builtins.any, convert_any),
    (builtins.all, convert_all),
    (builtins.range, convert_range),
    (builtins.iter, convert_iter),
    (builtins.next, convert_next),
    (builtins.str, convert_str),
    (builtins.repr, convert_repr),
    (builtins.ascii, convert_ascii),
    (builtins.format, convert_format_builtin),
    (builtins.abs, convert_abs),
):
    register_builtin(_builtin, _replacement)
for _builtin, _replacement in ((builtins.setattr, convert_setattr), (object.__setattr__, convert_setattr),
                               (builtins.delattr, convert_delattr), (object.__delattr__, convert_delattr),
                               (builtins.vars, convert_vars), (operator.setitem, convert_setitem),
                               (operator.delitem, convert_delitem)):
    register_builtin(_builtin, _replacement)
register_builtin(jax.core.Tracer.item, convert_item)  # (a traced array's bound method's function)
register_builtin(warnings.warn, convert_warn)
register_builtin(list.sort, convert_list_sort)
register_builtin(jax.debug.print, convert_debug_print)
register_builtin(jax.debug.callback, convert_debug_callback)
for _stream_type in (io.TextIOWrapper, io.StringIO, io.BytesIO, io.BufferedWriter, io.BufferedRandom, io.FileIO):
    register_builtin(_stream_type.write, convert_write)
    register_builtin(_stream_type.writelines, convert_writelines)
    register_builtin(_stream_type.flush, convert_flush)
for _name, _op in (("floor", jnp.floor), ("ceil", jnp.ceil), ("trunc", jnp.trunc)):
    register_builtin(getattr(math, _name), _rounding(_name, _op))
for _name, _op in (("copysign", jnp.copysign), ("fabs", jnp.abs)):
    register_builtin(getattr(math, _name), _float_function(_name, _op))
for _method in _LOG_LEVELS:
    register_builtin(getattr(logging, _method), _logging_call(_method, module_level=True))
    for _class in (logging.Logger, logging.LoggerAdapter):  # (a bound method's function)
        if hasattr(_class, _method):
            register_builtin(getattr(_class, _method), _logging_call(_method))
