"""What runs while a program is traced: the user's function on the program's inputs, and what the
trace shows.

`ProgramBody` is the function every program of a table (`program.ProgramCache`) traces, in the
shared jit and in each table entry alike: it restores the arguments' dict orders, runs the
function inside the heap model's record of the trace (`runtime.writes.program_containers`),
checks the lists, dicts and pytree objects given as plain inputs (`ContainerWatch`), refuses a
change to an outside list that would keep a tracer, and encodes what jit's boundary loses
(`runtime.static_outputs`). What a trace shows about the route calls must take (dict orders
observed, outputs to decode, nothing staged) goes into the table's `call_policy.CallPolicy`; a
trace that must be given up leaves with a `call_policy.RouteChange`.

A model's programs (`stateful.py`) run their state's lift and write-back inside this body: their
table's function is the stateful entry's `run`.

Before (one jitted function of the user's code, which sees and may change the caller's objects):
    jax.jit(fn)(x)
After:
    jax.jit(lambda *a: body(fn, a, {}))(x)     # the same outputs, encoded; refused changes put back
"""

from __future__ import annotations

import contextlib
import functools
import io
import inspect
import sys
from typing import Callable

import jax

from dy2st.call_policy import (ARRAY_IMPL, LIFTED_ROOTS, CallPolicy, ContainerEffect, OrderObserved, RouteChange,
                               plain_python)
from dy2st.errors import (Dy2StaticError, can_rewind, OriginInfo, PythonEffectError, RuntimeChecks, StagedBranchError, is_library_file,
                          note_failed_when_run, note_raised_while_tracing, rerun_eagerly, runtime_failure_of)
from dy2st.input_spec import user_origin
from dy2st.runtime import guards, key_order, static_outputs, writes
from dy2st.runtime.asserts import numbers_checked_of
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.undefined import check_defined
from dy2st.runtime.values import ARRAY_TYPES, is_nnx_object

_flatten = jax.tree_util.tree_flatten


def _mutables(tree) -> tuple[list, list]:
    """`(lists and dicts, other objects)` in a pytree, at any depth, parents first: the other
    objects are the nodes of registered pytree classes that are not tuples (a dataclass
    pytree, a Flax NNX module or Variable), which code can change in place."""
    containers, objects = [], []

    def note(x):
        tp = type(x)
        if tp in _IMMUTABLE_NODES:
            return False
        if isinstance(x, (list, dict)):
            containers.append(x)
        elif not isinstance(x, (tuple, *ARRAY_TYPES)) and hasattr(x, "__dict__"):
            objects.append(x)  # a leaf (an opaque object) too: the flatten below tells them apart
        return False

    _flatten(tree, is_leaf=note)
    return containers, objects


_IMMUTABLE_NODES = frozenset({ARRAY_IMPL, tuple, type(None), int, float, bool, complex, str, bytes})


def _callers_own(args, kwargs) -> list:
    """The argument lists and dicts whose identity the caller sees (a staged `if` keeps them, see
    `writes.note_inputs`): the arguments themselves and what lists and dicts hold, not those inside
    a tuple or another pytree node (an optax state's `mu`), which come back as equal new ones, as
    under `jax.jit` (`ContainerWatch.check`): a side that replaces one merges with it as a value."""
    found, stack = [], [a for a in (*args, *kwargs.values()) if type(a) in (list, dict)]
    seen = set()
    while stack:
        container = stack.pop()
        if id(container) in seen:
            continue
        seen.add(id(container))
        found.append(container)
        stack.extend(v for v in (container.values() if type(container) is dict else container) if type(v) in (list, dict))
    return found


def _contents(container) -> tuple:
    """`(keys, values)`: a list's keys are its length."""
    if isinstance(container, list):
        return len(container), list(container)
    return list(container), list(container.values())


def _watched(args, kwargs) -> tuple[list, list]:
    """`(lists and dicts with their contents, (argument, object, flattened object) of the
    other mutable objects)` among the arguments."""
    snapshot, objects = [], []
    for argument in (*args, *kwargs.values()):
        if type(argument) is not ARRAY_IMPL:
            containers, others = _mutables(argument)
            snapshot += [(c, _contents(c)) for c in containers]
            objects += [(argument, o, _flatten(o), dict(vars(o))) for o in others]
    return snapshot, objects


class ContainerWatch:
    """Whether a trace left its input lists, dicts and pytree objects as eager code would see
    them: lists and dicts with the same contents (by identity) and no new references to them
    (kept in a global, an attribute, a closure); objects of registered pytree classes (a
    dataclass pytree, an NNX module inside a list) with the same leaves and structure. The
    program gets such arguments as values, so a change made in place would not reach the
    caller's objects. (A returned input list is an equal new list, as on the stateful path.)

    `liftable`: whether lists and dicts among the arguments may be lifted as state instead
    (a list or dict argument of its own is a root the stateful path lifts; the call took the
    plain way only because it has no other kind of root: api.StaticFunction._run).
    """

    def __init__(self, args, kwargs, liftable: bool = True):
        self.liftable = liftable and any(type(a) in LIFTED_ROOTS for a in (*args, *kwargs.values()))
        self.snapshot, self.objects = _watched(args, kwargs)  # (a call: its locals are gone below)
        self.recount()

    def recount(self) -> None:
        """Take the references to the watched lists and dicts as they are now (dy2st's own
        records of them made, `writes.note_inputs`)."""
        self.counts = [sys.getrefcount(c) for c, _ in self.snapshot]

    def check(self, out=None) -> None:
        """Raise ContainerEffect (the caller lifts the arguments as state instead) where the
        stateful path writes the change back as eager code makes it, else a PythonEffectError.
        A list or dict inside a pytree argument that the function returns unchanged (the
        params of `state.replace(step=...)`, a Flax TrainState) is no effect: the result
        holds an equal one (`out`: the function's outputs)."""
        returned = None
        for (c, (keys, values)), count in zip(self.snapshot, self.counts):
            keys_after, values_after = _contents(c)
            changed = keys_after != keys or any(a is not b for a, b in zip(values_after, values))
            if changed or sys.getrefcount(c) > count:
                if not changed and not self.liftable:
                    if returned is None:
                        returned = {id(r) for r in writes.containers_in(out)}
                    if id(c) in returned:
                        continue
                if self.liftable:
                    raise ContainerEffect("an input list or dict was changed or kept")
                raise PythonEffectError(
                    f"a {type(c).__name__} inside an argument (a tuple or another pytree) is changed in "
                    "place or kept by the function: dy2st passes such contents to the program as "
                    "values, so the caller's object would not see the change.",
                    origin=user_origin(),
                    advice="pass the list or dict as an argument of its own (dy2st then writes changes "
                    "back to it), or return the new contents instead of changing them in place.",
                )
        replayed = []
        for argument, obj, (leaves, treedef), attributes in self.objects:
            changed = _python_writes(obj, attributes)
            if changed:  # Python values only (an `eqx.nn.State` that `set` marked used): replayed
                replayed.append((obj, changed))
                continue
            leaves_after, treedef_after = _flatten(obj)
            if treedef_after == treedef and all(a is b for a, b in zip(leaves_after, leaves)):
                continue
            # An NNX module in a list or dict argument: the stateful path lifts the list and
            # updates the module in place (nnx.update), as the eager call changes it.
            if self.liftable and type(argument) in LIFTED_ROOTS and is_nnx_object(obj):
                raise ContainerEffect("an NNX object inside an input list or dict was changed")
            raise object_changed_error(obj, obj is argument)
        return replayed


def _python_writes(obj, before: dict) -> dict | None:
    """The attributes the call set on `obj` (a pytree object among the arguments) to values the
    program gives the same on every call: no array, nothing traced (`self._state = _sentinel`
    of an `eqx.nn.State` its `set` used up). None where nothing changed, or not only such
    values (no attribute deleted)."""
    after = vars(obj)
    if after.keys() < before.keys():
        return None
    changed = {k: v for k, v in after.items() if before.get(k, _NOT_SET) is not v}
    if not changed or any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(list(changed.values()))):
        return None
    return changed


_NOT_SET = object()


def _refuse_leaked(changed: dict, out, inputs) -> None:
    """A list or dict outside the function's arguments (a global, a closure's, a class's)
    changed in place in a staged branch keeps the trace's values: put it back, and refuse."""
    found = writes.leaked(changed, out, inputs)
    if not found:
        return
    writes.restore_items((container, before) for _, container, before, _ in found)
    path, origin = found[0][0], found[0][3]
    raise PythonEffectError(
        f"the call changes {path} in place with traced values, a list or dict the function reaches outside its "
        "arguments (a global, a closure's or a class's): a compiled program cannot write the change "
        "back, so it would keep a value of the trace.",
        origin=origin or user_origin(),
        advice=f"pass {path.split('.')[0].split('[')[0]} to the function as an argument (dy2st writes changes "
        "to arguments back), or return the new values and update it after the call.",
    )


def _refuse_traced_outside(guards_of_program, before, inputs) -> None:
    """A list, dict or object the function reaches outside its arguments (a global, a
    closure's, a class's, a default) given a traced value (`CFG["w"] = ...`, `trainer.w = ...`,
    not through a tracked method: `_refuse_leaked`) would keep a value of the trace: put back,
    and refused."""
    path = guards_of_program.holding_traced(inputs)
    if path is None:
        return
    guards_of_program.put_back(before)
    raise PythonEffectError(
        f"the call sets {path} to a traced value, in a list, dict or object the function reaches outside its "
        "arguments (a global, a closure's or a class's): a compiled program cannot write it back, so it "
        "would keep a value of the trace.",
        origin=user_origin(),
        advice=f"pass {path.split('.')[0].split('[')[0]} to the function as an argument (dy2st writes changes "
        "to arguments back), or return the new value and set it after the call.",
    )


def object_changed_error(obj, is_argument: bool) -> PythonEffectError:
    name = type(obj).__name__
    where = f"an argument of type {name}" if is_argument else f"a {name} inside an argument"
    return PythonEffectError(
        f"{where} is changed in place by the function (an attribute set, a "
        f"Variable written): {name} is a registered pytree, which dy2st passes to the program as "
        "values (its leaves), so the caller's object would not see the change.",
        origin=user_origin(),
        advice=f"return the new {name} (or the new values) instead of changing it in place "
        "(`dataclasses.replace(obj, w=...)`); or pass a Flax NNX module or an object of a plain "
        "class (not a registered pytree) as an argument of its own, whose changes dy2st writes back.",
    )


class _HeldOutput:
    """While a program is traced: what code run as it is prints to `sys.stdout` then (a helper
    left unconverted, a `@contextmanager` generator, a library) is held, and written once the
    trace is done, unless the trace is given up for another route (`drop`), whose trace prints
    it again: eager prints it once. (A StringIO, so that the converted code's own writes to
    `sys.stdout` are staged as writes to the stream of each call, as for the real one.)"""

    def __init__(self):
        self.stream = None
        self.held = None
        self.dropped = False

    def __enter__(self):
        self.stream = sys.stdout
        self.held = sys.stdout = _Held()
        return self

    def drop(self) -> None:
        self.dropped = True

    def __exit__(self, *exc_info):
        if sys.stdout is self.held:
            sys.stdout = self.stream
        text = self.held.getvalue()
        if text and not self.dropped:
            self.stream.write(text)
        return False


class _Held(io.StringIO):
    """`sys.stdout` while a trace holds its text (`_HeldOutput`)."""


class ProgramBody:
    """The traced function of one table's programs (see the module docstring).

    `guards`: the GuardSet its traces note reads into (runtime/guards.py), or None; `policy`:
    where what traces show is recorded; `encode`: encode outputs jit's boundary loses (not with
    `out_shardings`, which fix the outputs' structure); `watch_containers`: check the lists,
    dicts and pytree objects among the arguments; `on_policy_change`: called when a trace first
    shows calls must decode outputs."""

    def __init__(self, policy: CallPolicy, guards=None, encode: bool = True, watch_containers: bool = False):
        self.policy = policy
        self.guards = guards
        self.encode = encode
        self.watch_containers = watch_containers
        self.on_policy_change: Callable[[], None] | None = None
        self.traced = 0  # traces begun so far (each program's, a retrace's, an abandoned one's)

    def __call__(self, fn, args, kwargs, orders=None, watcher=None):
        """What a program returns: `fn`'s outputs, with the outputs that are not arrays and the
        identities jit's boundary loses encoded (`static_outputs`); the call's boundary decodes them. Not with `out_shardings` (they
        fix the outputs' structure): such values stay arrays there. `orders`: the key orders
        of the arguments' dicts, which jit's flattening sorted (`key_order`)."""
        if orders is not None:
            args, kwargs = key_order.restore((args, kwargs), orders)
        self.traced += 1
        python_only = plain_python((args, kwargs))
        effects_before = (RuntimeChecks.traced, writes.staged_prints())
        watch = ContainerWatch(args, kwargs) if self.watch_containers else None
        encode = self.encode
        outside_before = self.guards.state_now() if self.guards is not None else None
        with _HeldOutput() as held, writes.program_containers(self.guards) as changed:
            if watch is not None and watch.snapshot:
                writes.note_inputs(_callers_own(args, kwargs))
                watch.recount()
            try:
                out, encoded = self._traced(fn, args, kwargs, watcher, watch, encode)
                if self.guards:
                    self.guards.note_trace_end()
            except BaseException as error:
                if isinstance(error, RouteChange):
                    held.drop()  # traced again on another route, which prints it again
                # No program comes of this trace (the caller may trace again, lifting the
                # arguments, or run the call eagerly): what it changed is put back, the lists and
                # dicts outside it, and the values from outside the arguments the guards read (a
                # global counter it bumped would count twice)
                writes.put_back_traced(changed)
                restored = outside_before is None or self.guards.put_back(outside_before)
                note_raised_while_tracing(error, restored)
                raised_before = guards.deferred_raise_origin()
                if (raised_before is not None and type(error) in StagedBranchError.KEPT_TYPES + (StopIteration,)
                        and not isinstance(error, Dy2StaticError) and not rerun_eagerly(error, error)):
                    # a staged raise before it may come first on some data: eager decides (when
                    # the call can run eagerly instead), else refused there
                    raise StagedBranchError.wrapping_after_raise(error, raised_before).with_traceback(
                        error.__traceback__) from error
                if watcher is not None and isinstance(error, Exception) and not isinstance(error, (OrderObserved, ContainerEffect)):
                    # a trace with watched dicts failed: traced again with plain ones (keyed by
                    # their order), where the function's own error, if it is one, comes again
                    self.policy.orders_observed = True
                    raise OrderObserved("a trace with watched dict arguments failed") from error
                raise
        _refuse_leaked(changed, out, (args, kwargs))
        if self.guards is not None:
            _refuse_traced_outside(self.guards, outside_before, (args, kwargs))
        CONTEXT.programs_traced += 1
        CONTEXT.put_back_last_trace = (functools.partial(self.guards.put_back, outside_before)
                                       if outside_before is not None else None)
        if (python_only and (RuntimeChecks.traced, writes.staged_prints()) == effects_before
                and not any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(encoded))):
            self.policy.staged_nothing = True
        if not encode:
            return out
        result = static_outputs.split(encoded, _return_line(fn))
        if result is not out and not self.policy.decodes_outputs:
            self.policy.decodes_outputs = True  # calls must resolve outputs: not the direct jit path
            if self.on_policy_change is not None:
                self.on_policy_change()
        return result

    def _traced(self, fn, args, kwargs, watcher, watch, encode: bool) -> tuple:
        """`(fn's outputs, encoded)`, traced, once they are known to make a program; raises
        where they do not (the caller puts back what the trace changed)."""
        # the arguments' objects: pytree ones (an Equinox module), and static ones of the user's classes
        objects, leaves = static_outputs.walk_arguments((args, kwargs))
        guards.note_program(fn, objects + [leaf for leaf in leaves if not isinstance(leaf, jax.Array)])
        with watcher.watching() if watcher is not None else contextlib.nullcontext(), numbers_checked_of(fn):
            out = fn(*args, **kwargs)  # (the numbers rule outside a staged `if` or loop too)
        if watcher is not None:
            if watcher.observed or key_order.holds_watched(out):
                self.policy.orders_observed = True  # this program would serve other orders: given up
                raise OrderObserved("the function observes a dict argument's key order")
            out = key_order.plain(out)
        refused = writes.swallowed_refusal()
        if refused is not None:  # the user's own handler caught it while tracing
            raise refused
        # An argument's list changed: the caller lifts it and writes it back. An argument's object
        # given Python values: each call sets them on the caller's (`writes`). An argument's object
        # returned as it is (`return model, y`): eagerly the caller's own (`arguments`).
        arguments = {id(o): i for i, o in enumerate(objects)}
        set_on = watch.check(out) if watch is not None else []
        set_on = [(arguments[id(obj)], changed) for obj, changed in set_on if id(obj) in arguments]
        # identities and kinds jit's boundary loses, noted (`static_outputs.encode`) before the
        # walk for undefined values, which a self-holding list would not end
        outside = self.guards.held_containers if self.guards else None
        encoded = check_defined(static_outputs.encode(out, arguments, writes=set_on, outside=outside) if encode else out)
        return out, encoded


def changes_lost_with(wrapper: BaseException, traced_before: int, written_before: int) -> None:
    """A program raised `wrapper` when it ran: where that is a failed run-time check of eager's
    own exception (an assert, a Python number divided by 0), what the call did before the check
    and after it (its changes to lists, dicts, objects and globals, a `finally`'s or `__exit__`'s
    print) is lost with the program's outputs. The call then runs eagerly
    (`errors.note_failed_when_run`), from the state before it: a trace made by this call (since
    `traced_before`, `CONTEXT.programs_traced`) has what it changed outside the call put back,
    and what the program wrote (since `written_before`, `writes.WRITTEN.count`) is dropped from
    the eager run's output. Not where that text cannot be taken back (a pipe written into, or
    more writes than the log keeps): the program's error stands."""
    failure = runtime_failure_of(wrapper)
    if failure is None or isinstance(failure, Dy2StaticError):
        return
    jax.effects_barrier()  # (the prints before the failure logged)
    written = writes.WRITTEN.since(written_before)
    if written is None or not all(can_rewind(f) for f in written if f is not sys.stdout and f is not sys.stderr):
        return
    if CONTEXT.programs_traced != traced_before and CONTEXT.put_back_last_trace is not None:
        CONTEXT.put_back_last_trace()
    note_failed_when_run(wrapper, failure, written)


def _return_line(fn):
    """Where `fn` returns (its code's last line: converted code returns once, at its end), or
    None for a callable without Python code of its own."""
    code = getattr(inspect.unwrap(fn.func if isinstance(fn, functools.partial) else fn), "__code__", None)
    if code is None or is_library_file(code.co_filename):  # (a model's program: the stateful entry's run)
        return None
    lines = [line for _, _, line in code.co_lines() if line is not None]
    return OriginInfo(code.co_filename, max(lines), code.co_name) if lines else None


writes.PROGRAM_BOUNDARIES.add(ProgramBody.__call__.__code__)


def run_inline(fn, args, kwargs, user_function=None):
    """`fn(*args, **kwargs)` (converted code) run into the user's own trace (their jit, grad or
    vmap) rather than as a program: with what a converted run records (held iterators, Python
    numbers the data decides, what it reads from outside: `guards.recorded_inline`) and the
    numbers rule's checks at its own level, named after `user_function` (default `fn`)."""
    with writes.converted_run(), guards.recorded_inline(), numbers_checked_of(user_function or fn):
        guards.note(fn)
        return check_defined(fn(*args, **kwargs))
