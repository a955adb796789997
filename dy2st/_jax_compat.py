"""The one place dy2st reaches into JAX's private modules (`jax._src`), each behind a function.

JAX has no public API for these few needs; everything else dy2st does goes through `jax`,
`jax.lax`, `jax.dtypes`, `jax.core` and `jax.extend`. When a JAX upgrade moves one of these,
`tests/test_jax_compat.py` fails with the name of what moved, and only this file changes.
The tested JAX range is pinned in `pyproject.toml`.

    from dy2st import _jax_compat
    _jax_compat.convert_element_type(x, np.dtype("int32"), weak_type=True)
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, NamedTuple

import jax


class JaxInternalsMoved(ImportError):
    """A private JAX name dy2st relies on is gone: this JAX is outside the tested range."""


def array_type() -> type:
    """The class of a concrete jax array. Named, not made: `type(jnp.zeros(()))` would start the
    backend (a tenth of a second and more) while `import dy2st` runs."""
    return _private("jax._src.array", "ArrayImpl")


def key_array_type() -> type:
    """The class of a typed PRNG key array (`jax.random.key(0)`), named as `array_type`'s."""
    return _private("jax._src.random.prng", "PRNGKeyArray")


def _private(module: str, name: str) -> Any:
    """`module.name`, or an error that says which private name moved and where to fix it."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise JaxInternalsMoved(
            f"dy2st needs `{module}.{name}`, which jax {jax.__version__} does not have; this jax "
            "is outside the range dy2st is tested with (see pyproject.toml). Install a jax in that "
            "range, or update dy2st/_jax_compat.py for this one."
        ) from err


# -- dtypes ------------------------------------------------------------------------------------
# `jax.lax.convert_element_type` always gives a strong type; staged branches and loop carries must
# keep a weak-typed Python scalar weak, as eager's promotion does.
_convert_element_type = _private("jax._src.lax.lax", "_convert_element_type")


def convert_element_type(value, dtype, weak_type: bool):
    """`value` cast to `dtype`, with JAX's weak-type flag set to `weak_type`."""
    return _convert_element_type(value, dtype, weak_type=weak_type)


def weak_result_type(*values) -> tuple:
    """`(dtype, weak)`: what JAX's promotion gives for `values` (public since jax 0.4)."""
    return jax.dtypes.result_type(*values, return_weak_type_flag=True)


# -- tracers -----------------------------------------------------------------------------------
# Print callbacks must be unordered under vmap (jax cannot batch ordered effects), and loop
# staging must know whether reverse-mode AD is tracing a value; jax exposes neither tracer type.
_BatchTracer = _private("jax._src.interpreters.batching", "BatchTracer")
_ad = importlib.import_module("jax._src.interpreters.ad")


def is_batch_tracer(value) -> bool:
    """Whether `value` is being batched by `jax.vmap`."""
    return isinstance(value, _BatchTracer)


def is_linearize_tracer(value) -> bool:
    """Whether `value` is traced by reverse-mode AD (jax.grad/vjp/linearize) in this jax.

    Older jax versions linearize through JVP tracers and have no such class: then False."""
    linearize_tracer = getattr(_ad, "LinearizeTracer", None)
    return linearize_tracer is not None and isinstance(value, linearize_tracer)


# -- the trace a call runs under ---------------------------------------------------------------
# A StaticFunction passes pytree arguments straight to its jit (no flatten of its own) only when
# no transformation is tracing the call: the leaves are then concrete, never an outer tracer.
_trace_ctx = _private("jax._src.core", "trace_ctx")


def at_top_level() -> bool:
    """Whether no jax transformation (jit, grad, vmap, ...) is tracing the current call."""
    return _trace_ctx.is_top_level()


# -- the call front ----------------------------------------------------------------------------
# A StaticFunction's cached call is jit's own C++ dispatch with no Python frame of dy2st's: a
# jit function object (`_jax.pjit`, what `jax.jit` builds) whose cache miss is dy2st's Python.
# jax has no public constructor with a custom miss, and a jit's own miss (`_cache_miss`, which
# returns the outputs with the data jit's C++ caches for the signature) is a private attribute.
_jaxlib_jax = _private("jax._src.lib", "_jax")
_pjit_function = _jaxlib_jax.pjit
_pjit_cache = _jaxlib_jax.PjitFunctionCache
_cpp_cache_keys = _private("jax._src.interpreters.pxla", "JitGlobalCppCacheKeys")
_shard_arg = _private("jax._src.interpreters.pxla", "cc_shard_arg")
_dispatch_registry = _private("jax._src.tree_util", "dispatch_registry")


def jit_front(name: str, fun, miss):
    """A jit function object named `name`: a call whose signature it has cached runs that
    program in C++; any other call runs `miss(*args, **kwargs)`, which returns
    `front_result(outputs, cached)`, `cached` from `jit_miss` (the front caches the signature)
    or None (it does not). Under `jax.disable_jit()` a call runs `fun(*args, **kwargs)`.
    `clear_front` empties the cache. `miss` is called with no frame of ours around it, so that
    an error it lets out has only the frames it leaves."""
    return _pjit_function(name, fun, miss, (), (), _cpp_cache_keys(), _dispatch_registry, _shard_arg, _pjit_cache(1))


def front_result(out, cached) -> tuple:
    """What a front's miss returns: the outputs, what to cache, and no profile-guided rebuild."""
    return out, cached, False


def jit_miss(jitted, args: tuple) -> tuple:
    """Run `jax.jit` object `jitted` on positional `args` as its own cache miss does:
    `(outputs, what jit's C++ caches for this signature)` (the second None where jit caches
    nothing, e.g. a program with effects)."""
    out, cached, _ = jitted._cache_miss(*args)
    return out, cached


def clear_front(front) -> None:
    """Forget every signature `front` has cached: each next call runs its miss."""
    front._clear_cache()


# -- tracebacks --------------------------------------------------------------------------------
# JAX hides registered files' frames from tracebacks leaving its API boundaries, and reads
# JAX_TRACEBACK_FILTERING; dy2st's error formatter follows the same switch.
_register_exclusion = _private("jax._src.traceback_util", "register_exclusion")
_filtering_mode = _private("jax._src.traceback_util", "_filtering_mode")
_include_filename = _private("jax._src.traceback_util", "include_filename")


def register_traceback_exclusion(path_prefix: str) -> None:
    """Hide frames of files under `path_prefix` from the tracebacks jax filters."""
    _register_exclusion(path_prefix)


def traceback_filtering_mode() -> str:
    """JAX_TRACEBACK_FILTERING's value as jax reads it ("off", "tracebackhide", ...)."""
    return _filtering_mode()


def traceback_shows(filename: str) -> bool:
    """Whether jax's traceback filtering keeps frames of `filename`."""
    return _include_filename(filename)


# -- while-loop transposition -------------------------------------------------------------------
# `jax.grad(jax.jit(to_static(f)))` through an unbounded staged while fails only when JAX
# transposes the loop, with a message naming no loop; dy2st wraps JAX's transpose rule of
# while_p to name the user's `while` (see runtime/loop_checks.py). No public hook exists.
def wrap_while_transpose(make_rule) -> None:
    """Replace JAX's transpose rule of `while_p` by `make_rule(original_rule)`."""
    ad = importlib.import_module("jax._src.interpreters.ad")
    while_p = _private("jax._src.lax.control_flow.loops", "while_p")
    ad.primitive_transposes[while_p] = make_rule(ad.primitive_transposes[while_p])


def current_equation_frames() -> list:
    """`(code, line)` of the Python frames that created the equation JAX is transforming now,
    innermost first (empty when jax keeps no traceback)."""
    return _code_frames(importlib.import_module("jax._src.source_info_util").current().traceback)


def equation_code_frames(eqn) -> list:
    """`(code, line)` of the Python frames that created a jaxpr equation, innermost first."""
    return _code_frames(getattr(getattr(eqn, "source_info", None), "traceback", None))


def _code_frames(traceback) -> list:
    source_info = importlib.import_module("jax._src.source_info_util")
    return [(code, source_info.raw_frame_to_frame(code, last).start_line) for code, last in _raw_frames(traceback)]


def equation_code_offsets(eqn) -> list:
    """`(code, bytecode offset)` of the Python frames that created a jaxpr equation, innermost
    first (where each frame was, as `frame.f_lasti` says it)."""
    return _raw_frames(getattr(getattr(eqn, "source_info", None), "traceback", None))


def _raw_frames(traceback) -> list:
    if traceback is None:
        return []
    codes, lasti = traceback.raw_frames()
    return list(zip(codes, lasti))



def equation_lines(eqn) -> list:
    """`(filename, line)` of `equation_code_frames(eqn)`."""
    return [(code.co_filename, line) for code, line in equation_code_frames(eqn)]


# -- the operations of the jaxpr being traced --------------------------------------------------
# The numbers rule checks, at run time, that a Python int a staged loop or branch computes on
# stays in int32 (runtime/asserts.check_python_numbers). jax keeps the operations traced so far, with their
# input tracers, only on its private trace frame.
_core = importlib.import_module("jax._src.core")


def _frame():
    return getattr(_core.trace_ctx.trace, "frame", None)


def trace_mark() -> int | None:
    """How many operations the jaxpr being traced holds now (None: no jaxpr is being traced)."""
    frame = _frame()
    return None if frame is None else len(frame.tracing_eqns)


def tracing_frame():
    """The jaxpr being traced now (an opaque token, compared by identity), or None."""
    return _frame()


class TracedOperation(NamedTuple):
    """One operation of the jaxpr being traced; `equation` for `equation_lines`."""

    name: str  # the primitive's
    inputs: list  # tracers (a literal is one too: `literal_value`)
    outputs: list  # avals
    params: dict
    equation: object
    output_keys: list  # what `value_key` gives for the operation's results


def traced_operations_since(mark: int | None):
    """The `TracedOperation`s traced into the current jaxpr after `trace_mark()` gave `mark`
    (none where it gave None)."""
    frame = _frame()
    if frame is None or mark is None:
        return
    for eqn in frame.tracing_eqns[mark:]:
        yield _operation(eqn)


def _operation(eqn) -> TracedOperation:
    return TracedOperation(eqn.primitive.name, list(eqn.in_tracers), [v.aval for v in eqn.outvars], eqn.params, eqn,
                           list(eqn.outvars))


def frame_of(tracer):
    """The jaxpr being traced that `tracer` belongs to, or None (a grad's, a vmap's tracer)."""
    return getattr(getattr(tracer, "_trace", None), "frame", None)


def frame_operations(frame, start: int):
    """`(how many operations `frame` (`frame_of`) holds, its TracedOperations from `start`)`."""
    eqns = frame.tracing_eqns
    return len(eqns), [_operation(e) for e in eqns[start:]]


def value_key(tracer):
    """A hashable key for the value a tracer of the jaxpr being traced stands for (its jaxpr
    variable: the same for every tracer of it), or None."""
    key = getattr(tracer, "val", None)
    return key if isinstance(key, _core.Var) else None


def lifted_from(tracer):
    """The value of an enclosing trace that `tracer` stands for in a nested jaxpr (a cond's
    side, a loop's body reads a value from before it), or None."""
    frame = frame_of(tracer)
    key = value_key(tracer)
    return frame.constvar_to_val.get(key) if frame is not None and key is not None else None


def literal_value(value):
    """The constant a traced value stands for when it is a literal of the jaxpr (`k + 1`'s 1), else None."""
    literal = getattr(value, "val", None)
    return literal.val if isinstance(literal, _core.Literal) else None


# -- logging ---------------------------------------------------------------------------------
def debug_callback_logger():
    """The logger jax reports a failing `jax.debug.callback` on (with its traceback)."""
    return logging.getLogger("jax._src.debugging")


# -- MLIR ----------------------------------------------------------------------------------------
def make_ir_context():
    """An MLIR context with JAX's dialects registered, to parse an exported module.

    `jax.extend.mlir.ir.Context()` has no dialects; only jax's interpreter module builds one."""
    return _private("jax._src.interpreters.mlir", "make_ir_context")()


# -- serialized programs -----------------------------------------------------------------------
def exported_shape_strings(data: bytes):
    """The dimension strings of every abstract value of a serialized `jax.export` program, read
    with jax's generated flatbuffer accessors (offsets only: nothing is parsed), so that their
    text can be checked before `jax.export.deserialize` hands it to jax's symbolic-shape parser.
    Malformed bytes raise what the accessors raise (struct.error, IndexError, ...)."""
    root = _private("jax._src.export.serialization_generated", "Exported").GetRootAsExported(data, 0)
    for count, get in ((root.UniqueAvalsLength, root.UniqueAvals), (root.InAvalsLength, root.InAvals),
                       (root.OutAvalsLength, root.OutAvals)):
        for i in range(count()):
            aval = get(i)
            for j in range(aval.ShapeLength()):
                yield aval.Shape(j)
