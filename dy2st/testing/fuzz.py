"""Differential fuzzing: random programs run eagerly, through `to_static`, and through
`jax.jit(to_static(f))` must agree (and so must their gradients, for loop-free programs).

Programs come from `dy2st.testing.program_gen.programs`. Each is written to a module in a
temporary directory and imported, because dy2st reads a function's source from its file.

A long campaign::

    python -m dy2st.testing.fuzz --examples 10000 --seed 0 --out fuzz-failures

prints a summary (examples run, agreements, mismatches, crashes) and saves the source and
inputs of each failing program under `--out`.

`--generator real` fuzzes programs shaped like real code instead (lists, dicts, iterators,
closures, stateful objects, try/finally/with, builtins, zero-trip loops; see
`dy2st.testing.real_program_gen`)::

    python -m dy2st.testing.fuzz --generator real --examples 1000 --seed 0 --out fuzz-real

Each program runs eagerly, through `to_static`, through `jax.jit(to_static(f))` and through
`jax.grad` (w.r.t. `x`), and falls in one outcome class (`RealOutcome`): a match, a clear refusal
(a `Dy2StaticError` whose message starts with `File "`), a MISMATCH (a silent wrong answer), a
RAW ERROR (any other exception), or INVALID (a generator bug). Where eager raises on the
inputs, to_static must raise the same exception type, with the same `str(e)` where the class is
eager's own (a match), or refuse clearly. Each failing
program is saved as a standalone script that replays it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import hashlib
import importlib.util
import io
import os
import re
import signal
import sys
import tempfile
import time
import traceback
import types

import jax
import jax.numpy as jnp
import numpy as np

import dy2st
from dy2st.runtime import key_order
from dy2st.testing import holds_number, promoted_by_rule
from dy2st.testing.program_gen import Features, GeneratedProgram, programs

# What dy2st supports on this branch; the generator uses no construct outside this set.
DEFAULT_FEATURES = Features(loops=True, loop_returns=True, calls=True)

_TMPDIR = None


class Outcome:
    OK = "ok"
    MISMATCH = "mismatch"  # every path ran but results differ
    CRASH = "crash"  # eager ran, to_static or jit(to_static) raised
    INVALID = "invalid"  # the eager program itself raised: a generator bug


@dataclasses.dataclass
class Result:
    outcome: str
    stage: str = ""  # which path failed: to_static, jit, grad
    detail: str = ""


def load_function(source: str, name: str = "f"):
    """Import `source` as a module from a temporary file and return its function `name`."""
    return getattr(load_module(source), name)


def load_module(source: str):
    """Import `source` as a module from a temporary file."""
    global _TMPDIR
    if _TMPDIR is None:
        _TMPDIR = tempfile.mkdtemp(prefix="dy2st_fuzz_")
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    module_name = f"dy2st_fuzz_{digest}"
    path = os.path.join(_TMPDIR, module_name + ".py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _leaves_close(expected, actual, what: str):
    exp, act = jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(actual)
    if len(exp) != len(act):
        return f"{what}: {len(act)} outputs, eager gave {len(exp)}"
    for i, (e, a) in enumerate(zip(exp, act)):
        e, a = np.asarray(e), np.asarray(a)
        if e.shape != a.shape:
            return f"{what}: output {i} has shape {a.shape}, eager {e.shape}"
        if not np.allclose(a.astype(np.float64), e.astype(np.float64), rtol=1e-5, atol=1e-5, equal_nan=True):
            return f"{what}: output {i} is {a.tolist()}, eager {e.tolist()}"
    return None


def _array_loss(fn, n):
    def loss(x, y, m):
        outs = fn(x, y, m, n)
        return outs[0].sum() + outs[1].sum()

    return loss


def run_program(program: GeneratedProgram, check_grad: bool = True) -> Result:
    """Run one program eagerly, via to_static and via jit(to_static); compare."""
    f = load_function(program.source)
    x, y, m = (jnp.asarray(v) for v in (program.x, program.y, program.m))
    n = jnp.asarray(program.n, jnp.int32) if program.n_as_array else program.n
    try:
        expected = f(x, y, m, n)
    except Exception as e:  # noqa: BLE001 - a generated program must run eagerly
        return Result(Outcome.INVALID, "eager", _format(e))
    static = dy2st.to_static(f)
    stage = "to_static"
    try:
        got = static(x, y, m, n)
        problem = _leaves_close(expected, got, "to_static")
        if problem is None:
            stage = "cached"
            problem = _cached_calls(f, static, x, y, m, n)
        if problem is None:
            stage = "jit"
            if program.n_as_array:
                got = jax.jit(static)(x, y, m, n)
            else:
                got = jax.jit(lambda x, y, m: static(x, y, m, n))(x, y, m)
            problem = _leaves_close(expected, got, "jit(to_static)")
        if problem is None and check_grad and not program.has_loops:
            stage = "grad"
            want = jax.grad(_array_loss(f, n), argnums=(0, 1, 2))(x, y, m)
            got = jax.grad(_array_loss(static, n), argnums=(0, 1, 2))(x, y, m)
            problem = _leaves_close(want, got, "grad(to_static)")
    except Exception as e:  # noqa: BLE001 - any exception is a finding
        return Result(Outcome.CRASH, stage, _format(e))
    if problem is not None:
        return Result(Outcome.MISMATCH, stage, problem)
    return Result(Outcome.OK)


def _cached_calls(f, static, x, y, m, n) -> str | None:
    """Call `static` again with the first call's signature: the same values (the cached program,
    jit's own dispatch once the front has it) and values that take other branches; each must
    equal eager on the same values (values eager refuses are skipped)."""
    for args in ((x, y, m), (-x, y, m), (x, -y, m), (-x, -y, m), (x, y, m)):
        try:
            want = f(*args, n)
        except Exception:  # noqa: BLE001 - these values are outside what the program was made for
            continue
        problem = _leaves_close(want, static(*args, n), "to_static, a cached signature")
        if problem is not None:
            return problem
    return None


def _format(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()


def _save_failure(out_dir: str, index: int, program: GeneratedProgram, result: Result) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"failure_{index:05d}_{result.outcome}.py")
    header = [
        f"# outcome: {result.outcome} ({result.stage})",
        *("# " + line for line in result.detail.splitlines()[:40]),
        f"# inputs: x={program.x.tolist()} y={program.y.tolist()}",
        f"#         m={program.m.tolist()} n={program.n} n_as_array={program.n_as_array}",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(header) + program.source)
    return path


def campaign(examples: int, seed: int, features: Features, out_dir: str, check_grad: bool = True,
             verbose: bool = False) -> dict:
    """Run `examples` random programs; return counts and the paths of saved failures."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed

    summary = {"examples": 0, "ok": 0, Outcome.MISMATCH: 0, Outcome.CRASH: 0, Outcome.INVALID: 0, "saved": [],
               "by_stage": {}}
    start = time.time()

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=["generate"])
    @given(programs(features))
    def one(program):
        index = summary["examples"]
        summary["examples"] += 1
        result = run_program(program, check_grad)
        summary[result.outcome] += 1
        if result.outcome != Outcome.OK:
            key = f"{result.outcome}/{result.stage}"
            summary["by_stage"][key] = summary["by_stage"].get(key, 0) + 1
            summary["saved"].append(_save_failure(out_dir, index, program, result))
            if verbose:
                print(f"[{index}] {result.outcome} in {result.stage}: {result.detail.splitlines()[0][:200]}",
                      flush=True)
        if summary["examples"] % 100 == 0:
            # Each example converts and compiles fresh functions: drop them to bound memory.
            dy2st.conversion.clear_cache()
            jax.clear_caches()
            print(f"... {summary['examples']} examples, {time.time() - start:.0f}s: {summary['ok']} ok, "
                  f"{summary[Outcome.MISMATCH]} mismatches, {summary[Outcome.CRASH]} crashes, "
                  f"{summary[Outcome.INVALID]} invalid", flush=True)

    one()
    summary["seconds"] = time.time() - start
    return summary


# -- the second fuzzer: programs shaped like real code ----------------------------------------


class RealOutcome:
    MATCH = "match"
    REFUSAL = "refusal"  # a Dy2StaticError at the user's line: allowed
    MISMATCH = "MISMATCH"  # a silent wrong answer (values, dtypes, structure, side effects)
    RAW_ERROR = "RAW ERROR"  # any other exception (or a tracer left on a caller's object)
    INVALID = "INVALID"  # the generated program is broken: a generator bug

    ORDER = (MATCH, REFUSAL, MISMATCH, RAW_ERROR, INVALID)


# What a generated program may raise eagerly on its inputs (zero-trip loops, empty lists, ...);
# anything else from eager is a generator bug.
EXPECTED_EAGER_ERRORS = (UnboundLocalError, IndexError, KeyError, StopIteration, ValueError, ZeroDivisionError)

PROGRAM_TIMEOUT_S = 120


class ProgramTimeout(Exception):
    """One program ran past PROGRAM_TIMEOUT_S (a hang is reported as a raw error)."""


@dataclasses.dataclass
class RealInputs:
    """The inputs of one real-shaped program; each call gets fresh copies of `xs` and `obj`.

    `s_values`: f's keyword `s` for each call (a Python scalar whose type changes between calls);
    `n_values`: `n` for each call where it changes (a Python int, then `True`). Empty: the same
    inputs on every call.
    """

    x: np.ndarray
    y: np.ndarray
    n: int
    n_as_array: bool
    xs: list
    s_values: tuple = ()
    n_values: tuple = ()

    def arrays(self, call: int = 0):
        n = self.n_values[call] if self.n_values else self.n
        n = jnp.asarray(n, jnp.int32) if self.n_as_array else n
        return jnp.asarray(self.x), jnp.asarray(self.y), n

    def keywords(self, call: int = 0) -> dict:
        return {"s": self.s_values[call]} if self.s_values else {}

    def fresh_xs(self):
        return [jnp.asarray(v) for v in self.xs]


def _is_weak(value) -> bool:
    return bool(getattr(value, "weak_type", False))


_PY_DTYPES = {bool: np.dtype(bool), int: np.dtype(np.int32), float: np.dtype(np.float32)}


def _leaf_difference(expected, actual, under_jit: bool = False) -> str | None:
    """Why `actual` differs from eager's `expected` leaf (None when equal).

    The numbers rule (DESIGN.md): where eager gives a Python number the data decided (`max(loss,
    0)`, a counter a staged loop carried), dy2st gives a 0-d array of that value, of a kind that
    holds it (a float where one path makes an int and another a float); so an eager 0-d int
    array may come back as a float one. Under an outer `jax.jit` (`under_jit`) any array of its
    value is equal (jit's own rule for numbers; a weak or 0-d array of eager's may promote).
    """
    py_e, py_a = type(expected) in _PY_DTYPES, type(actual) in _PY_DTYPES
    numeric = lambda v: type(v) in _PY_DTYPES or hasattr(v, "dtype")  # noqa: E731
    if not (numeric(expected) and numeric(actual)):  # a string, None, an object: by type, then contents
        if type(expected).__qualname__ != type(actual).__qualname__:  # (each path has its module's classes)
            return f"{type(actual).__name__} {actual!r}, eager {type(expected).__name__} {expected!r}"
        if isinstance(expected, dict):  # a dict JAX does not flatten (a Counter): its items, in order
            return tree_difference(list(expected.items()), list(actual.items()), f"({type(expected).__name__} items)",
                                   under_jit)
        if hasattr(expected, "__dict__") and not isinstance(expected, type):
            return tree_difference(dict(sorted(vars(expected).items())), dict(sorted(vars(actual).items())),
                                   f"({type(expected).__name__} attributes)", under_jit)
        return None if expected == actual else f"{actual!r}, eager {expected!r}"
    if py_e and py_a:
        if type(expected) is not type(actual) or expected != actual:
            return f"{actual!r} ({type(actual).__name__}), eager {expected!r} ({type(expected).__name__})"
        return None
    if py_a:  # eager made an array where dy2st gave a Python number
        return f"{_describe(actual)}, eager {_describe(expected)}"
    if py_e:
        if np.shape(actual) != () or not under_jit and not holds_number(np.dtype(actual.dtype).kind, type(expected)):
            return f"{_describe(actual)}, eager {_describe(expected)}"
    else:
        e, a = np.asarray(expected), np.asarray(actual)
        if e.shape != a.shape or e.dtype != a.dtype and not promoted_by_rule(e, a) and not (
                under_jit and (_is_weak(expected) or e.shape == ())):
            return f"{_describe(actual)}, eager {_describe(expected)}"
    e, a = np.asarray(expected, np.float64), np.asarray(actual, np.float64)
    if not np.allclose(a, e, rtol=1e-6, atol=1e-6, equal_nan=True):
        return f"{a.tolist()}, eager {e.tolist()}"
    return None


def _describe(value) -> str:
    if type(value) in _PY_DTYPES:
        return f"Python {type(value).__name__} {value!r}"
    weak = " weak" if _is_weak(value) else ""
    return f"{value.dtype}{list(value.shape)}{weak} {np.asarray(value).tolist()}"


def tree_difference(expected, actual, what: str, under_jit: bool = False) -> str | None:
    """Why the pytree `actual` differs from eager's `expected`: structure, dtypes, values."""
    exp_leaves, exp_tree = jax.tree_util.tree_flatten(expected)
    act_leaves, act_tree = jax.tree_util.tree_flatten(actual)
    if exp_tree != act_tree:
        return f"{what}: structure {act_tree}, eager {exp_tree}"
    # JAX's tree structures ignore a dict's insertion order, which eager code shows (`list(d)`);
    # outputs of a `jax.jit` of the caller's are that jit's, sorted.
    if not under_jit and key_order.orders_of(expected) != key_order.orders_of(actual):
        return f"{what}: dict keys in order {key_order.orders_of(actual)}, eager {key_order.orders_of(expected)}"
    for path_and_leaf, a in zip(jax.tree_util.tree_leaves_with_path(expected), act_leaves):
        path, e = path_and_leaf
        problem = _leaf_difference(e, a, under_jit)
        if problem is not None:
            return f"{what}{jax.tree_util.keystr(path)}: {problem}"
    return None


def _visible_state(xs, obj):
    """What the caller can see after a call: its list and its object's attributes."""
    return {"xs": list(xs), "obj.count": obj.count, "obj.cache": list(obj.cache), "obj.h": obj.h,
            "obj.acc.w": obj.acc.w, "obj.acc is the first Acc": obj.acc_is_first()}


def _holds_tracer(tree) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(tree))


def _float_loss(outputs):
    leaves = [leaf for leaf in jax.tree_util.tree_leaves(outputs)
              if isinstance(leaf, float) or (hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.floating))]
    if not leaves:
        return None
    return sum(jnp.sum(leaf) for leaf in leaves)


# Refusals that say dy2st could not settle its own work, not that the user's code cannot be
# staged: findings, like raw errors (no program should get them).
_INTERNAL_REFUSALS = ("each time they are traced",)


def _classify_error(error: BaseException, stage: str) -> Result:
    if (isinstance(error, dy2st.errors.Dy2StaticError) and str(error).startswith('File "')
            and not any(text in str(error) for text in _INTERNAL_REFUSALS)):
        return Result(RealOutcome.REFUSAL, stage, _format(error))
    return Result(RealOutcome.RAW_ERROR, stage, _format(error))


def _is_object(value) -> bool:
    """A mutable object whose identity a caller can see: a list, a dict, an instance of a plain
    class (not an array, a number, a string, a function or a module)."""
    if isinstance(value, (list, dict)):
        return True
    if isinstance(value, (jax.Array, np.ndarray, np.generic, str, bytes, int, float, complex, tuple, type,
                          types.FunctionType, types.MethodType, types.ModuleType, types.BuiltinFunctionType)):
        return False
    return hasattr(value, "__dict__")


def identity_signature(root, owners) -> list:
    """Which objects `root` holds where, as the caller can tell by `is`: for each list, dict or
    plain object met in a walk (depth first, dicts in their order, attributes sorted), the name
    of the caller's object it is (`owners`: (name, object) pairs taken before the call; not
    walked into) or `#i`, the index of its first occurrence (a new object: `new #i`; one met
    before: `same as #i`). Eager's and to_static's must be equal (identity and aliasing)."""
    names = {id(obj): name for name, obj in owners}
    first: dict = {}
    keep = []  # the objects walked, alive until the walk ends (their ids stay theirs)
    out = []

    def walk(value, path):
        if isinstance(value, tuple):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")
            return
        if not _is_object(value):
            return
        keep.append(value)
        if id(value) in names:
            out.append((path, f"the caller's {names[id(value)]}"))
            return
        if id(value) in first:
            out.append((path, f"the same object as #{first[id(value)]}"))
            return
        first[id(value)] = len(first)
        out.append((path, f"new {type(value).__name__} #{first[id(value)]}"))
        if len(out) > 2000:
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}[{key!r}]")
        else:
            for key in sorted(vars(value)):
                walk(vars(value)[key], f"{path}.{key}")

    walk(root, "")
    return out


def _signature_difference(expected, actual, what: str) -> str | None:
    for (path, want), (got_path, got) in zip(expected, actual):
        if (path, want) != (got_path, got):
            return f"{what}{got_path or path}: {got}, eager {want}"
    if len(expected) != len(actual):
        return f"{what}: {len(actual)} objects, eager {len(expected)}"
    return None


def _global(module, name: str):
    """The module global `name` (`Stats.calls`: an attribute of one), or `_UNBOUND`."""
    value = module
    for part in name.split("."):
        value = getattr(value, part, _UNBOUND)
        if value is _UNBOUND:
            break
    return value


def _snapshot(value):
    """A copy of a global's value to compare: its pytree copied, a file (`io.StringIO`) as its text."""
    if isinstance(value, io.StringIO):
        return value.getvalue()
    return jax.tree_util.tree_map(lambda v: v, value)


def _module_state(module) -> dict:
    """The values of the module globals a program reads and writes (`_GLOBALS`; a dotted name
    is a class attribute) and its closure's (`_get()`), copied."""
    state = {name: _snapshot(_global(module, name)) for name in getattr(module, "_GLOBALS", ())}
    if hasattr(module, "_get"):
        state["_get()"] = module._get()
    return state


_UNBOUND = "<unbound: the module has no such global>"


def _module_owners(module) -> list:
    return [(f"global {name}", _global(module, name)) for name in getattr(module, "_GLOBALS", ())]


def _outside(module) -> list:
    """The objects outside f's arguments whose identity a program's result may show: `_OUTSIDE`
    names them by expressions over the module's globals (`ITEMS`, `REG["lst"]`, a helper's
    default list `_bag.__defaults__[0]`); each as (name, object), or `_UNBOUND` where it fails."""
    out = []
    for text in getattr(module, "_OUTSIDE", ()):
        try:
            out.append((f"outside {text}", eval(text, vars(module))))  # noqa: S307 - the program's own text
        except Exception:  # noqa: BLE001 - a name the module lacks (or lost)
            out.append((f"outside {text}", _UNBOUND))
    return out


_INVOKE = None


def _invoke(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` called from a user's file (a module in the temporary directory), as
    a user's code calls it: a refusal located at the call names that line (dy2st skips its own
    frames, this runner's included, when it looks for the caller)."""
    global _INVOKE
    if _INVOKE is None:
        _INVOKE = load_module("def invoke(fn, *args, **kwargs):\n    return fn(*args, **kwargs)\n").invoke
    return _INVOKE(fn, *args, **kwargs)


@dataclasses.dataclass
class _Call:
    """What one call gave and left: its result or exception, its stdout, the caller's objects."""

    result: object = None
    error: BaseException | None = None
    stdout: str = ""
    visible: dict = dataclasses.field(default_factory=dict)
    module_state: dict = dataclasses.field(default_factory=dict)
    identity: list = dataclasses.field(default_factory=list)
    tracer_left: bool = False
    # The result as it was when the call returned (a later call or `_change()` may change a module
    # list the result holds, `_OUTSIDE`), compared by value; its numbers and arrays, what a
    # `jax.jit` of it must give.
    snapshot: object = None
    numeric: object = None
    visible_functions: list | None = None


# The attribute `_returned_functions` sets on each function a call returns: a later call's
# function that has it is an earlier call's object (eager's `def` makes a new one per call).
_FUNCTION_MARK = "_dy2st_fuzz_returned"


def _returned_functions(result, inputs: RealInputs) -> list:
    """For each function the call's own code made (a nested def or lambda) that `result` holds:
    whether an earlier call returned that very object (it carries the mark this sets), which
    earlier one of this result it is (one made once and returned twice is one object), and what
    calling it on `x` gives (or the name of the exception it raises)."""
    out, first = [], {}
    for leaf in jax.tree_util.tree_leaves(result):
        if not (isinstance(leaf, types.FunctionType) and "<locals>" in leaf.__qualname__):
            continue
        seen_before = hasattr(leaf, _FUNCTION_MARK)
        same_as = first.setdefault(id(leaf), len(first))
        try:
            value = leaf(jnp.asarray(inputs.x))
        except Exception as e:  # noqa: BLE001 - compared by its type's name
            value = type(e).__name__
        out.append((seen_before, same_as, value))
        setattr(leaf, _FUNCTION_MARK, True)
    return out


def _calls(module, fn, inputs: RealInputs, count: int, eager: bool) -> list:
    """Call `fn` (the module's `f`, or `to_static` of it) `count` times, each with fresh
    containers and state; `module._change()` runs before each call after the first. An eager
    call may raise what `EXPECTED_EAGER_ERRORS` names; any other exception propagates."""
    calls = []
    for index in range(count):
        if index and hasattr(module, "_change"):
            module._change()
        x, y, n = inputs.arrays(index)
        xs, obj = inputs.fresh_xs(), module.State()
        # `_OUTSIDE`'s objects as they are before the call (after `_change()`): a result that holds
        # one must hold that very object, in eager's places
        owners = [("xs", xs), ("obj", obj), ("obj.cache", obj.cache), ("obj.acc", obj.acc), *_module_owners(module),
                  *_outside(module)]
        call = _Call()
        buffer = io.StringIO()
        try:
            with contextlib.redirect_stdout(buffer):
                call.result = _invoke(fn, x, y, n, xs, obj, **inputs.keywords(index))
        except (ProgramTimeout, KeyboardInterrupt):
            raise
        except EXPECTED_EAGER_ERRORS as e:
            call.error = e
        except Exception as e:  # noqa: BLE001 - classified by the caller
            if eager:
                raise
            call.error = e
        call.stdout = buffer.getvalue()
        if getattr(module, "_MQ_FUNCTIONS", False) and call.error is None:
            call.visible_functions = _returned_functions(call.result, inputs)
        call.snapshot = _copied(call.result)
        call.numeric = _numeric_part(call.snapshot)
        call.visible = _visible_state(xs, obj)
        if call.visible_functions is not None:
            call.visible["functions f returned"] = call.visible_functions
        call.module_state = _module_state(module)
        call.tracer_left = _holds_tracer((call.visible, call.module_state))
        # ... and after it: still the module's objects of before, or others, as eagerly
        call.identity = identity_signature((call.result, xs, obj.cache, obj.acc,
                                            *(_global(module, name) for name in getattr(module, "_GLOBALS", ())),
                                            *(value for _, value in _outside(module))),
                                           owners)
        calls.append(call)
        if call.error is not None and not eager and not isinstance(call.error, EXPECTED_EAGER_ERRORS):
            break  # a refusal or a raw error: the comparison stops here
    return calls


def _copied(result):
    """A deep copy of a call's result (its lists and dicts as they are now), or the result itself
    where it cannot be copied (a tracer leaked into it: reported as such)."""
    try:
        return copy.deepcopy(result)
    except Exception:  # noqa: BLE001
        return result


def _has_boundary(module, inputs: RealInputs) -> bool:
    """Whether the calls of a program differ (inputs, module state): then each may trace again."""
    return bool(inputs.s_values or inputs.n_values or hasattr(module, "_change") or getattr(module, "_GLOBALS", ()))


def _same_class(got: type, want: type) -> bool:
    """Eager's exception class, or the class of the same name in the module instance to_static ran
    (each path loads the program's module afresh: a class it defines is another object there)."""
    return got is want or (got.__qualname__, got.__module__) == (want.__qualname__, want.__module__)


# Python's ZeroDivisionError texts for an int and for a float divisor, per operation: the numbers
# rule (DESIGN.md) makes a number that the data leaves an int on some paths a float (a loop that
# may run zero times, adding 0.5 when it runs), so dividing by it when it is 0 says "float".
_ZERO_DIVISION_TEXTS = {"division by zero": "float division by zero",
                        "integer division or modulo by zero": "float floor division by zero",
                        "integer modulo by zero": "float modulo"}


def _float_by_numbers_rule(error, eager_error) -> bool:
    """Whether `error` is eager's ZeroDivisionError with a float's text where eager's number was an int."""
    return type(error) is ZeroDivisionError and _ZERO_DIVISION_TEXTS.get(str(eager_error)) == str(error)


def _compare_call(index: int, want: "_Call", got: "_Call", varies: bool) -> Result | None:
    """Call `index` of to_static against eager's call `index`: None where they agree."""
    stage = "to_static" if index == 0 else f"to_static, call {index + 1}"
    if got.error is not None:
        e = got.error
        if got.tracer_left:
            return Result(RealOutcome.RAW_ERROR, stage, "a tracer was left on the caller's objects after: " + _format(e))
        lost = [name for name, value in got.module_state.items()
                if value is _UNBOUND and want.module_state.get(name) is not _UNBOUND]
        if lost:  # whatever the call raised, it must not unbind the module's globals
            return Result(RealOutcome.MISMATCH, stage, f"the module lost its globals {lost} after: " + _format(e))
        same = want.error is not None and _same_class(type(e), type(want.error))
        if (type(want.error) is UnboundLocalError and isinstance(e, dy2st.errors.UndefinedVariableError)
                and _effects_difference(want, got) is None):
            # eager's UnboundLocalError (a read the data left unbound), raised by dy2st when the
            # program ran (its message names the line), having done what eager did before it
            return None
        if want.error is not None and (same or isinstance(e, type(want.error))):
            if (same and not isinstance(e, dy2st.errors.Dy2StaticError) and str(e) != str(want.error)
                    and not _float_by_numbers_rule(e, want.error)):
                return Result(RealOutcome.MISMATCH, stage,
                              f"{type(e).__name__}: message {str(e)!r}, eager {str(want.error)!r}")
            if isinstance(e, dy2st.errors.Dy2StaticError):
                # a refusal that is also eager's exception's type (a StagedBranchError is an
                # IndexError): what the call changed was put back, so later calls start from
                # another state than eager's: the program is refused here
                return _classify_error(e, stage)
            if same:
                # eager's exception: what the call did before it raised must be eager's too
                problem = _effects_difference(want, got, f" (both raised {type(e).__name__})")
                if problem is not None:
                    return Result(RealOutcome.MISMATCH, stage, problem)
            return None
        if index and not varies:  # the cached program of the same inputs and state
            return Result(RealOutcome.MISMATCH, stage, "the call raised " + _format(e))
        return _classify_error(e, stage)
    if want.error is not None:
        return Result(RealOutcome.MISMATCH, stage, f"eager raised {_format(want.error)}; to_static returned {got.result!r}")
    if got.tracer_left or _holds_tracer(got.result):
        return Result(RealOutcome.RAW_ERROR, stage, "a tracer leaked into the result, the caller's objects or globals")
    problem = tree_difference(want.snapshot, got.snapshot, "result") or _effects_difference(want, got)
    if problem is not None:
        return Result(RealOutcome.MISMATCH, stage, problem)
    return None


def _effects_difference(want: "_Call", got: "_Call", when: str = "") -> str | None:
    """Why what a call left (the caller's objects, the module's globals, the identities of the
    objects its result and those hold, its stdout) differs from eager's; None where they agree."""
    problem = (tree_difference(want.visible, got.visible, "side effect" + when)
               or tree_difference(want.module_state, got.module_state, "module state" + when)
               or _signature_difference(want.identity, got.identity,
                                        "identity (result, xs, obj.cache, obj.acc, globals, outside)" + when))
    if problem is None and want.stdout != got.stdout:
        problem = f"stdout{when} {got.stdout!r}, eager {want.stdout!r}"
    return problem


def _under_jit(load, inputs: RealInputs, convert):
    """The numeric part of `convert(f)`'s result, called inside a `jax.jit` of the caller's on
    a fresh module and state (stdout dropped)."""
    module = load()
    fn = convert(module.f)
    xs, obj = inputs.fresh_xs(), module.State()
    x, y, n = inputs.arrays()
    keywords = inputs.keywords()
    with contextlib.redirect_stdout(io.StringIO()):
        if inputs.n_as_array:
            got = _invoke(jax.jit(lambda x, y, n: _numeric_part(fn(x, y, n, xs, obj, **keywords))), x, y, n)
        else:
            got = _invoke(jax.jit(lambda x, y: _numeric_part(fn(x, y, n, xs, obj, **keywords))), x, y)
        jax.effects_barrier()
    return got


def _holds_big_int(tree) -> bool:
    """Whether `tree` holds a Python int outside int32 (jit makes a returned int an int32)."""
    return any(type(v) is int and not -2 ** 31 <= v < 2 ** 31 for v in jax.tree_util.tree_leaves(tree))


def _numeric_part(tree):
    """`tree` with each leaf that is not a number or an array (a string, an object) made None:
    what a `jax.jit` of the caller's can return."""
    return jax.tree_util.tree_map(lambda v: v if type(v) in _PY_DTYPES or hasattr(v, "dtype") else None, tree)


def run_real(f, make_state, inputs: RealInputs, check_grad: bool = True, load=None) -> Result:
    """Run `f(x, y, n, xs, obj)` eagerly, via to_static, jit(to_static) and grad; classify.

    `load()` gives a fresh instance of f's module (its globals as they were first), so that
    eager and each compiled path start from the same module state; without it, every path
    uses f's module. Each program is called at least twice (three times where its inputs or
    module change between calls): every call of to_static must give eager's result, stdout,
    caller-visible changes, module globals, and the identity and aliasing of the objects it
    returns (`identity_signature`; the module's objects that `_OUTSIDE` names, by expressions,
    are the caller's too: `ITEMS`, `REG["lst"]`, a helper's default list); where both raise
    eager's exception, its message and all that but the result."""
    if load is None:
        module = sys.modules.get(f.__module__) or types.SimpleNamespace(**f.__globals__)
        load = lambda: module  # noqa: E731
    eager_module = load()
    if make_state is not None and getattr(eager_module, "State", None) is None:
        eager_module.State = make_state
    fn = eager_module.f if hasattr(eager_module, "f") else f
    count = 3 if (inputs.s_values or inputs.n_values or hasattr(eager_module, "_change")) else 2
    try:
        want = _calls(eager_module, fn, inputs, count, eager=True)
    except (ProgramTimeout, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - any other eager error is a generator bug
        return Result(RealOutcome.INVALID, "eager", _format(e))
    varies = _has_boundary(eager_module, inputs)

    static_module = load()
    static = dy2st.to_static(static_module.f)
    got = _calls(static_module, static, inputs, count, eager=False)
    for index, (w, g) in enumerate(zip(want, got)):
        result = _compare_call(index, w, g, varies)
        if result is not None:
            return result
    if len(got) < len(want):  # a refusal or raw error the comparison did not classify: cannot happen
        return _classify_error(got[-1].error, f"to_static, call {len(got)}")
    if want[0].error is not None:
        return Result(RealOutcome.MATCH, "to_static", f"both raised {type(want[0].error).__name__}")
    expected = want[0].result

    try:
        got = _under_jit(load, inputs, dy2st.to_static)
    except (ProgramTimeout, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - every exception is classified
        if isinstance(e, OverflowError) and _holds_big_int(expected):
            # jit's own rule: a returned Python int becomes an int32 (eager's is beyond it)
            return Result(RealOutcome.MATCH, "jit", "jax.jit cannot return eager's Python int beyond int32")
        if not isinstance(e, dy2st.errors.Dy2StaticError):
            try:
                _under_jit(load, inputs, lambda f: f)
            except Exception as eager_error:  # noqa: BLE001
                if type(eager_error) is type(e):  # jax's own limit (a Python int beyond int32 returned)
                    return Result(RealOutcome.MATCH, "jit", f"jax.jit of f raises {type(e).__name__} too")
        return _classify_error(e, "jit")
    # Under jit every output is an array: compare values, and dtypes where eager's are arrays.
    problem = tree_difference(want[0].numeric, got, "jit(to_static) result", under_jit=True)
    if problem is not None:
        return Result(RealOutcome.MISMATCH, "jit", problem)

    if check_grad and _float_loss(expected) is not None:
        return _compare_grad(load, inputs)
    return Result(RealOutcome.MATCH)


def _compare_grad(load, inputs: RealInputs) -> Result:
    x, y, n = inputs.arrays()
    keywords = inputs.keywords()

    def loss(fn, module):
        return lambda x: _float_loss(fn(x, y, n, inputs.fresh_xs(), module.State(), **keywords))

    eager_module = load()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            want = jax.grad(loss(eager_module.f, eager_module))(x)
    except (ProgramTimeout, KeyboardInterrupt):
        raise
    except Exception:  # noqa: BLE001 - eager is not differentiable here: nothing to compare
        return Result(RealOutcome.MATCH, "grad", "eager grad undefined")
    static_module = load()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            got = _invoke(jax.grad(loss(dy2st.to_static(static_module.f), static_module)), x)
            jax.effects_barrier()
    except (ProgramTimeout, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - every exception is classified
        return _classify_error(e, "grad")
    problem = tree_difference(want, got, "grad(to_static)")
    if problem is not None:
        return Result(RealOutcome.MISMATCH, "grad", problem)
    return Result(RealOutcome.MATCH)


def run_real_program(program, check_grad: bool = True) -> Result:
    """Run one `real_program_gen.RealProgram`; classify its outcome."""
    try:
        compile(program.source, "<generated>", "exec")
    except SyntaxError as e:
        return Result(RealOutcome.INVALID, "compile", _format(e))
    module = load_module(program.source)
    # A fresh module instance per path where the program has module state; else one for all.
    load = (lambda: load_module(program.source)) if hasattr(module, "_GLOBALS") else (lambda: module)  # noqa: E731
    inputs = RealInputs(program.x, program.y, program.n, program.n_as_array, program.xs,
                        tuple(getattr(program, "s_values", ())), tuple(getattr(program, "n_values", ())))
    return run_real(module.f, module.State, inputs, check_grad, load=load)


def _load_path(path: str):
    """A fresh module instance of the file at `path` (its `__main__` block does not run)."""
    name = "dy2st_replay_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def replay_real(f, make_state, x, y, n, n_as_array, xs, s_values=(), n_values=()) -> Result:
    """Entry point of a saved repro: run it and print the outcome."""
    inputs = RealInputs(np.asarray(x, np.float32), np.asarray(y, np.float32), n, n_as_array,
                        [np.asarray(v, np.float32) for v in xs], tuple(s_values), tuple(n_values))
    path = f.__code__.co_filename
    load = (lambda: _load_path(path)) if os.path.exists(path) else None
    result = run_real(f, make_state, inputs, load=load)
    print(f"outcome: {result.outcome} ({result.stage})\n{result.detail}")
    return result


REPRO_FOOTER = '''

if __name__ == "__main__":
    from dy2st.testing.fuzz import replay_real

    replay_real(f, State, x={x}, y={y}, n={n}, n_as_array={n_as_array}, xs={xs}, s_values={s_values},
                n_values={n_values})
'''


def repro_source(program, result: Result) -> str:
    """A standalone script: the program, then a main block that replays it."""
    header = [f"# dy2st real-program fuzzer, seed {program.seed}: {result.outcome} ({result.stage})",
              *("# " + line for line in result.detail.splitlines()[:30]),
              f"# inputs: {program.inputs_text()}", ""]
    footer = REPRO_FOOTER.format(x=program.x.tolist(), y=program.y.tolist(), n=program.n,
                                 n_as_array=program.n_as_array, xs=[v.tolist() for v in program.xs],
                                 s_values=tuple(getattr(program, "s_values", ())),
                                 n_values=tuple(getattr(program, "n_values", ())))
    return "\n".join(header) + program.source + footer


def _on_alarm(signum, frame):
    raise ProgramTimeout(f"program ran longer than {PROGRAM_TIMEOUT_S}s")


def _drawn_programs(seed: int, stream: str | None):
    """The programs of seeds seed, seed+1, ...; with `stream` (`lazy`, `models`, `models_late`,
    `models_last`, `calls`), only those that stream draws something in (`draw_program(seed,
    <stream>_stream=False)` differs)."""
    from dy2st.testing.real_program_gen import draw_program

    while True:
        program = draw_program(seed)
        if stream is None or draw_program(seed, **{f"{stream}_stream": False}).source != program.source:
            yield program
        seed += 1


def real_campaign(examples: int, seed: int, out_dir: str, check_grad: bool = True, verbose: bool = False,
                  stream: str | None = None) -> dict:
    """Run programs for seeds seed, seed+1, ... (with `stream`: only those that stream draws in);
    return counts per outcome and saved repros."""
    summary = {"examples": 0, "saved": [], "by_stage": {}, "refusals": {}, **{o: 0 for o in RealOutcome.ORDER}}
    start = time.time()
    use_alarm = hasattr(signal, "SIGALRM")
    if use_alarm:
        signal.signal(signal.SIGALRM, _on_alarm)
    programs = _drawn_programs(seed, stream)
    for _ in range(examples):
        program = next(programs)
        summary["last_seed"] = program.seed
        if use_alarm:
            signal.alarm(PROGRAM_TIMEOUT_S)
        try:
            result = run_real_program(program, check_grad)
        except ProgramTimeout as e:
            result = Result(RealOutcome.RAW_ERROR, "timeout", str(e))
        finally:
            if use_alarm:
                signal.alarm(0)
        summary["examples"] += 1
        summary[result.outcome] += 1
        if result.outcome == RealOutcome.REFUSAL:
            group = summary["refusals"].setdefault(refusal_kind(result.detail), [0, program.seed])
            group[0] += 1
        if result.outcome not in (RealOutcome.MATCH, RealOutcome.REFUSAL) or verbose:
            key = f"{result.outcome}/{result.stage}"
            summary["by_stage"][key] = summary["by_stage"].get(key, 0) + 1
        if result.outcome not in (RealOutcome.MATCH, RealOutcome.REFUSAL):
            os.makedirs(out_dir, exist_ok=True)
            tag = result.outcome.lower().replace(" ", "_")
            path = os.path.join(out_dir, f"seed_{program.seed:06d}_{tag}.py")
            with open(path, "w") as fh:
                fh.write(repro_source(program, result))
            summary["saved"].append(path)
            if verbose:
                print(f"[seed {program.seed}] {result.outcome} in {result.stage}: "
                      f"{(result.detail.splitlines() or [''])[0][:200]}", flush=True)
        if summary["examples"] % 50 == 0:
            dy2st.conversion.clear_cache()
            jax.clear_caches()
            print(f"... {summary['examples']} programs, {time.time() - start:.0f}s: "
                  + ", ".join(f"{summary[o]} {o}" for o in RealOutcome.ORDER), flush=True)
    summary["seconds"] = time.time() - start
    return summary


def refusal_kind(detail: str) -> str:
    """A refusal's group: its error class and the head of its message, with names, quoted code
    and numbers blanked (`LoopVariableError: _ is appended to in a staged loop whose ...`), so
    a campaign's refusals can be counted by kind."""
    lines = detail.splitlines()
    error_class = lines[0].split(":")[0].rsplit(".", 1)[-1] if lines else "?"
    message = lines[2] if len(lines) > 2 else ""
    blanked = re.sub(r"'[^']*'|`[^`]*`|\d+", "_", message)
    return f"{error_class}: {blanked[:100]}"


def _print_real_summary(args, summary) -> None:
    stream = f" drawing the {args.stream}-<seed> stream" if args.stream else ""
    print(f"dy2st fuzz (real-shaped programs): seeds {args.seed}..{summary.get('last_seed', args.seed)}{stream}")
    print(f"  programs:   {summary['examples']} in {summary['seconds']:.0f}s")
    print(f"  match:      {summary[RealOutcome.MATCH]}")
    print(f"  refusal:    {summary[RealOutcome.REFUSAL]}")
    print(f"  MISMATCH:   {summary[RealOutcome.MISMATCH]}")
    print(f"  RAW ERROR:  {summary[RealOutcome.RAW_ERROR]}")
    print(f"  INVALID:    {summary[RealOutcome.INVALID]}")
    for key, count in sorted(summary["by_stage"].items()):
        print(f"    {key}: {count}")
    if summary["saved"]:
        print(f"  failing programs saved under {args.out}/ ({len(summary['saved'])} files)")
    if summary["refusals"]:
        print("  refusals by kind (count, first seed):")
        for kind, (count, first) in sorted(summary["refusals"].items(), key=lambda item: -item[1][0]):
            print(f"    {count:4d}  [{first}] {kind}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dy2st.testing.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--generator", choices=("default", "real"), default="default",
                        help="default: array/int programs (program_gen); real: programs shaped like real code")
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--features", default=",".join(
        f.name for f in dataclasses.fields(DEFAULT_FEATURES) if getattr(DEFAULT_FEATURES, f.name)) or "none",
        help="comma-separated constructs to generate: loops, loop_returns, calls (or none)")
    parser.add_argument("--out", default="fuzz-failures", help="directory for failing programs")
    parser.add_argument("--no-grad", action="store_true", help="skip the gradient comparison")
    parser.add_argument("--stream", choices=("calls", "lazy", "models", "models_late", "models_last"), default=None,
                        help="real generator: run only the seeds whose programs this stream draws in")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    jax.config.update("jax_platforms", "cpu") if os.environ.get("JAX_PLATFORMS") is None else None
    if args.generator == "real":
        summary = real_campaign(args.examples, args.seed, args.out, not args.no_grad, args.verbose, args.stream)
        _print_real_summary(args, summary)
        bad = sum(summary[o] for o in (RealOutcome.MISMATCH, RealOutcome.RAW_ERROR, RealOutcome.INVALID))
        return 0 if bad == 0 else 1
    features = Features.parse(args.features)
    summary = campaign(args.examples, args.seed, features, args.out, not args.no_grad, args.verbose)
    print(f"dy2st fuzz: seed {args.seed}, features {features}")
    print(f"  examples run: {summary['examples']} in {summary['seconds']:.0f}s")
    print(f"  agreements:   {summary['ok']}")
    print(f"  mismatches:   {summary[Outcome.MISMATCH]}")
    print(f"  crashes:      {summary[Outcome.CRASH]}")
    print(f"  invalid (generator bugs, eager raised): {summary[Outcome.INVALID]}")
    for key, count in sorted(summary["by_stage"].items()):
        print(f"    {key}: {count}")
    if summary["saved"]:
        print(f"  failing programs saved under {args.out}/ ({len(summary['saved'])} files)")
    return 0 if summary["ok"] == summary["examples"] else 1


if __name__ == "__main__":
    sys.exit(main())
