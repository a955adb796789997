"""`while` and `for` loops: Python loops for Python conditions, lax loops for traced ones.

Generated code (see `dy2st.transformers.loops`) calls::

    (x, err) = convert_while(loop_test, loop_body, ('x', 'err'), ('x', 'err'))
    (h,) = convert_for(iterable, loop_body, ('h',), ('h',), extra_test)

(the state named by path, reached through the functions' closure cells: `state_cells`)

which for Python conditions and Python iterables is exactly::

    while loop_test(): loop_body()
    for item in iterable:
        if extra_test is not None and not extra_test(): break     # the `break` flag
        loop_body(item)

A loop is staged when its condition is traced (`lax.while_loop`), when it iterates a traced
array or `enumerate`/`zip` of one (`lax.scan` over the leading axis), or a `range` with traced
bounds (`lax.while_loop` carrying the index). A Python loop whose condition or break flag turns
traced part-way hands its current state to the staged form for the remaining iterations.
A `for` over a Python `range` is staged as one `lax.scan` when state is traced and the body
carries only arrays of fixed types (smaller programs, faster compiles); when the body needs the
index as a Python int, or carries Python values, it unrolls. Which one was chosen is logged
(`dy2st.set_verbosity(1)`). See `loop_staging` for how the carried state is found.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys

import jax

from dy2st.config import log
from dy2st.errors import Dy2StaticError, LoopVariableError, OriginInfo, PythonEffectError, StagedBranchError
from dy2st.runtime import events, guards, loop_checks, loop_staging, state_cells, writes
from dy2st.runtime.iterables import HeaderItems, StagedArray, StagedIterable, StagedRange
from dy2st.runtime.control_flow import stage_if
from dy2st.runtime.staging import RaisedInTrialScan, deferrable, refuse_nnx_write, scalar_predicate
from dy2st.runtime.values import is_traced
from dy2st.runtime.trace_context import CONTEXT
from dy2st.runtime.undefined import Undefined

# A static range shorter than this unrolls: one or no iteration gains nothing from a scan.
_MIN_STAGED_TRIPS = 2


@dataclasses.dataclass
class LoopOptions:
    """Options a loop body sets for its own loop with `set_loop_options`."""

    maximum_iterations: int | None = None
    on_bound: str = "error"  # what a staged loop does when the bound stops it: "error" or "stop"


@contextlib.contextmanager
def _options_scope(options: LoopOptions):
    stack = CONTEXT.loop_options
    stack.append(options)
    try:
        yield options
    finally:
        stack.pop()


def set_loop_options(maximum_iterations: int | None = None, on_bound: str = "error") -> None:
    """Called inside a loop body: options for that loop when it is staged (eagerly a no-op).

    Args:
      maximum_iterations: an upper bound on the loop's iterations. A staged `while` (or a
        `for` over a traced `range`) then runs as a `lax.scan` of that many steps, each doing
        nothing once the condition is false, so reverse-mode gradients (`jax.grad`) work
        through it.
      on_bound: what happens when the loop has run `maximum_iterations` times and its
        condition is still true. "error" (the default): the program raises, when it runs, an
        error at the loop's line saying the bound was reached; eagerly the loop would have gone
        on, so its result would be wrong. "stop": the loop stops there, like TensorFlow's
        `maximum_iterations` (use it when stopping early is what you want).

    Example::

        while err > tol:
            dy2st.set_loop_options(maximum_iterations=50)
            x = x - f(x) / df(x)
            err = abs(f(x))
    """
    if maximum_iterations is not None and (
        not isinstance(maximum_iterations, int) or isinstance(maximum_iterations, bool) or maximum_iterations < 0
    ):
        raise ValueError(f"maximum_iterations must be a non-negative Python int, got {maximum_iterations!r}")
    loop_checks.check_on_bound(on_bound)
    stack = CONTEXT.loop_options
    if stack:
        stack[-1].maximum_iterations = maximum_iterations
        stack[-1].on_bound = on_bound


# -- while -----------------------------------------------------------------------------------
def convert_while(test, body, state, names, python_reason=None, refuse_staged=False, loop_only=(), observed=(),
                  class_name=None, trips_left=None):
    """Runs a `while` loop; returns the values of the plain names among the state variables
    after it (attributes and items it writes back itself).

    Args:
      test: the loop condition as a function of no arguments.
      body: the loop body (writes state via `nonlocal`).
      state: the paths of the state variables (`dy2st.runtime.state_cells`), which the test
        and body reach through their closures.
      names: display names of the state variables, for errors.
      python_reason: why the body has Python effects a staged loop would run only once (see
        `dy2st.analysis.loop_bodies`), or None.
      refuse_staged: whether those effects make staging wrong: a traced condition is refused.
      loop_only: display names of state variables read only by later iterations, not after the
        loop: a loop that runs zero times leaves them unbound without eager noticing.
      observed: display names of items/attributes whose container the loop looks into
        (`D.get('k')`, `len(D)`): one first set inside the loop cannot be staged (see
        `loop_staging.first_set_observed`).
      class_name: the class whose private names (`__n`) the paths hold, mangled as compiled.
      trips_left: `() -> N - i` for a condition bounding a counter the body steps by one
        (`i < N`, `i += 1`; `transformers.loops.counter_bound`), or None.
    """
    with state_cells.StateAccess((test, body), state, names, sys._getframe(1), class_name) as access:
        facts = loop_staging.StateFacts(frozenset(loop_only), frozenset(observed), access.attributes(),
                                        items=access.items())
        values = _while(test, body, access.get, access.set, names, python_reason, refuse_staged, facts, trips_left)
    return state_cells.plain_values(values, access.paths)


def _while(test, body, get_state, set_state, names, python_reason, refuse_staged, facts, trips_left=None):
    options = LoopOptions()
    trips = 0
    # the counter's trips in all (read at the start: a traced `break` may make it a traced number)
    try:
        total = trips_left() if trips_left is not None else None
    except Exception:  # (a name not bound yet, or not a number: the condition says so itself)
        total = None
    while True:
        pred = test()
        if is_traced(pred):
            if refuse_staged:
                raise _python_body_error(python_reason, "its condition is traced", OriginInfo.of_caller(2))
            return _lax_while(test, body, get_state, set_state, names, OriginInfo.of_caller(2), facts,
                              max(total - trips, 0) if type(total) is int else None)
        if not pred:
            if events.active():
                events.note(OriginInfo.of_caller(2), "python_loop", f"Python while: {_iterations(trips)}",
                            "the condition is a Python value: Python ran the loop, tracing the body once per iteration")
            return get_state()
        with _options_scope(options):
            body()
        trips += 1


def _lax_while(test, body, get_state, set_state, names, origin, facts, counter_bound=None):
    def run_body(index, values):
        set_state(tuple(values))
        body()
        return get_state()

    def run_test(index, values):
        set_state(tuple(values))
        return test()

    return _stage(get_state, set_state, names, origin, run_body, run_test, None, "while", facts, indexed=False,
                  counter_bound=counter_bound)


def _stage(get_state, set_state, names, origin, run_body, run_test, length, kind, facts, indexed=True, check=None,
           counter_bound=None):
    """Stage a loop from the current state; on any error the state is restored first (`check`: as
    for `loop_staging.stage`)."""
    init = get_state()
    options = LoopOptions()
    loop = loop_staging.Loop(run_body, run_test, length, indexed, bound=lambda: options.maximum_iterations,
                             facts=facts, stop_at_bound=lambda: options.on_bound == "stop",
                             counter_bound=counter_bound)
    try:
        with _options_scope(options):
            values = loop_staging.stage(loop_staging.initial_spec(init, names), init, loop, origin, check=check)
    except Exception as err:
        set_state(init)
        if length is None and deferrable(err):  # (eagerly raised only if an iteration runs)
            raise StagedBranchError.wrapping_loop_body(err, origin).with_traceback(err.__traceback__) from err
        refuse_nnx_write(err, origin, "the body of this staged loop")
        raise
    except BaseException:
        set_state(init)
        raise
    bound = options.maximum_iterations if length is None else None
    log(1, "dy2st: %s loop at %s:%d staged (%s)", kind, origin.filename, origin.lineno,
        "lax.scan" if length is not None or bound is not None else "lax.while_loop")
    if events.active():
        _note_staged(origin, names, values, length, bound, masked=run_test is not None)
    set_state(tuple(values))
    return tuple(values)


def _note_staged(origin: OriginInfo, names, values, length: int | None, bound: int | None, masked: bool) -> None:
    carries = f"carries {events.describe_values(names, values)}" if names else "carries nothing"
    if length is not None and masked:
        events.note(origin, "scan", f"lax.scan of {length} masked steps",
                    f"a static trip count with a traced `break`: each step after it does nothing; {carries}")
    elif length is not None:
        events.note(origin, "scan", f"lax.scan, {_iterations(length)}", carries)
    elif bound is not None:
        events.note(origin, "scan", f"lax.scan of {bound} masked steps",
                    f"a traced condition bounded by maximum_iterations={bound}; {carries}")
    else:
        events.note(origin, "while_loop", "lax.while_loop", f"a traced condition; {carries}")


def _unrolled(origin: OriginInfo, length: int, reason: str, level: int = 1) -> None:
    """A loop runs as Python, once per iteration: logged at verbosity `level`, noted for explain."""
    log(level, "dy2st: loop at %s:%d unrolled (%s): %s%s", origin.filename, origin.lineno, _iterations(length), reason,
        events.EXPLAIN_HINT)
    if events.active():
        events.note(origin, "unrolled", f"unrolled, {_iterations(length)}", reason)


def _iterations(count: int) -> str:
    return f"{count} iteration{'s' if count != 1 else ''}"


# -- for -------------------------------------------------------------------------------------
def convert_for(iterable, body, state, names, extra_test, python_reason=None, refuse_staged=False, loop_only=(),
                observed=(), class_name=None, held_iterator=False):
    """Runs a `for` loop; returns the values of the plain names among the state variables
    after it (attributes and items it writes back itself).

    Args:
      iterable: what the loop iterates (`loop_iter` wraps range/enumerate/zip headers).
      body: the loop body as a function of the item (it assigns the loop target).
      state, names: as for `convert_while`.
      extra_test: None, or a function saying whether to go on (false once `break` ran).
      python_reason, refuse_staged, loop_only, observed, class_name: as for `convert_while`. A
        loop with a static trip count and a `python_reason` unrolls: its body runs once per
        item, as eagerly.
      held_iterator: `iterable` is a name the function reads otherwise only as `next()`'s
        iterator (`Fact.HELD_ITERATOR`): an iterator over a list, tuple, ... may be left at a
        position a traced `break` decides (`_stage_held`).
    """
    with state_cells.StateAccess((body, extra_test), state, names, sys._getframe(1), class_name) as access:
        facts = loop_staging.StateFacts(frozenset(loop_only), frozenset(observed), access.attributes(),
                                        held_iterator, access.items())
        values = _for(iterable, body, access.get, access.set, names, extra_test, python_reason, refuse_staged,
                      facts)
    return state_cells.plain_values(values, access.paths)


def _for(iterable, body, get_state, set_state, names, extra_test, python_reason, refuse_staged, facts):
    origin = OriginInfo.of_caller(2)
    held = writes.held_position(iterable, origin)
    if held is not None:  # (its items are the record's: the Python iterator stays where it was taken over)
        if refuse_staged and is_traced(held.taken):
            raise _python_body_error(python_reason, "the items it takes are known only at run time", origin)
        refuse = python_reason if refuse_staged else None
        return _stage_after_held(held, body, get_state, set_state, names, extra_test, origin, facts, refuse)
    if is_traced(iterable):
        iterable = StagedArray(iterable)
    if isinstance(iterable, StagedIterable):
        if iterable.static_length is not None and python_reason is not None:
            _unrolled(origin, iterable.static_length, python_reason)
            return _py_for(iterable.python_items(), body, get_state, set_state, names, extra_test, origin, facts,
                           python_reason, refuse_staged)
        if refuse_staged:
            raise _python_body_error(python_reason, "its number of iterations is traced", origin)
        return _lax_for(iterable, body, get_state, set_state, names, extra_test, origin, facts)
    if isinstance(iterable, range) and python_reason is not None:
        _unrolled(origin, len(iterable), python_reason, level=2)
    elif isinstance(iterable, range):
        staged = _try_stage_range(iterable, body, get_state, set_state, names, extra_test, origin, facts)
        if staged is not None:
            return staged
    elif events.active():
        kind = iterable.kind if isinstance(iterable, HeaderItems) else type(iterable).__name__
        events.note(origin, "python_loop", f"Python for over a {kind}",
                    "a Python iterable: Python ran the loop, tracing the body once per item")
    return _py_for(iterable, body, get_state, set_state, names, extra_test, origin, facts, python_reason, refuse_staged)


def _python_body_error(reason: str, why_staged: str, origin: OriginInfo) -> PythonEffectError:
    return PythonEffectError(
        f"this loop must be staged ({why_staged}), but {reason}: a staged loop runs its body once "
        "while tracing, so that Python effect would happen once instead of once per iteration.",
        origin,
        advice="keep such effects out of loops with traced conditions or lengths: read values by index "
        "(xs[i]) instead of next(), build new lists instead of changing outside objects in place, "
        "or make the loop's condition or range a Python value so the loop unrolls.",
    )


def _element_body(iterable, body, get_state, set_state):
    """One iteration of a staged for loop: state in, the body on element `index`, state out."""
    def run_body(index, values):
        set_state(tuple(values))
        body(iterable.element(index))
        return get_state()

    return run_body


def _lax_for(iterable, body, get_state, set_state, names, extra_test, origin, facts, break_traced: bool = False):
    """`break_traced`: the iterations left after the `break` flag turned traced (`_stage_rest`),
    where what the body changes is decided by the data already (where the loop stops)."""
    length = iterable.static_length
    if length == 0:  # nothing to trace: eagerly the body never runs
        return get_state()

    run_body = _element_body(iterable, body, get_state, set_state)
    if length is not None:  # rows of an array: unroll when a scan cannot carry what the body does
        init = get_state()
        attempt, guarded = events.Attempt(), guards.snapshot()
        try:
            return _stage_for(iterable, run_body, get_state, set_state, names, extra_test, origin, length, facts,
                              check=lambda spec: _python_values_needed(spec, init, break_traced))
        except (LoopVariableError, loop_staging.Refused) as why:
            set_state(init)
            attempt.discard()
            guards.restore(guarded)
            reason = str(why).splitlines()[0]
            _unrolled(origin, length, f"a scan cannot carry what the body does: {reason}")
            return _py_for(iterable.python_items(), body, get_state, set_state, names, extra_test, origin, facts)
    return _stage_for(iterable, run_body, get_state, set_state, names, extra_test, origin, length, facts)


def _stage_for(iterable, run_body, get_state, set_state, names, extra_test, origin, length, facts, check=None):
    def run_test(index, values):
        set_state(tuple(values))
        go = extra_test() if extra_test is not None else True
        if length is not None:
            return go
        within = iterable.within(index)
        return within if go is True else jax.numpy.logical_and(within, scalar_predicate(go, origin) if is_traced(go) else go)

    needs_test = extra_test is not None or length is None
    return _stage(get_state, set_state, names, origin, run_body, run_test if needs_test else None, length, "for", facts,
                  check=check)


def _py_for(iterable, body, get_state, set_state, names, extra_test, origin, facts, python_reason=None,
            refuse_staged=False):
    options = LoopOptions()
    items = iter(iterable)
    position = 0
    while True:
        # The break flag is checked before the next item is taken, as a Python `break` leaves
        # the rest of an iterator untouched.
        go = extra_test() if extra_test is not None else True
        if is_traced(go):
            held = items is iterable  # an iterator the code holds: later reads see where this loop stops
            # (a new iterator `iter()` made, which the analysis saw bound to one local name only)
            if held and not (facts.held_iterator and writes.is_new_iterator(iterable)):
                raise _iterator_break_error(origin)
            if refuse_staged:
                raise _python_body_error(python_reason, "a traced `break` decides where it stops", origin)
            if getattr(iterable, "endless", False):
                raise _endless_break_error(origin)
            item = next(items, _END)
            if item is _END:
                break
            if held:
                return _stage_held(iterable, item, body, get_state, set_state, names, extra_test, origin, facts)
            return _stage_rest(iterable, position, item, items, body, get_state, set_state, names, extra_test, origin,
                               facts)
        if not go:
            break
        item = next(items, _END)
        if item is _END:
            break
        with _options_scope(options):
            body(item)
        position += 1
    return get_state()


_END = object()  # no item left


def _endless_break_error(origin: OriginInfo) -> LoopVariableError:
    return LoopVariableError(
        "this loop's iterator never ends (`itertools.count()`, `cycle()`) and a traced `break` decides where "
        "it stops: its items would be staged one by one without end.",
        origin,
        advice="write it as a `while` loop with a counter (`i = 0`, `while not done: ...; i += 1`), which "
        "dy2st stages as one loop; or bound it (`for i in range(n):`).")


def _iterator_break_error(origin: OriginInfo) -> PythonEffectError:
    return PythonEffectError(
        "this loop iterates an iterator and its `break` depends on traced values, so how many items it "
        "takes from the iterator is only known when the program runs; later reads of the iterator "
        "(another loop, list(it), an object or caller holding it) could not see what eager Python sees.",
        origin,
        advice="make it a local iterator over a list or tuple (`it = iter(xs)`) that later code reads only "
        "with `next(it, default)`; or iterate the list and keep the position in a variable; or make the "
        "break condition a Python value.",
    )


def _stage_held(iterator, item, body, get_state, set_state, names, extra_test, origin, facts):
    """The `break` flag of a loop over a held iterator turned traced at `item`: the items left
    are staged one by one, as for a list, and how many the loop took (a traced count) is
    recorded as the iterator's position for later `next()` calls (`writes.HeldPosition`)."""
    held = writes.hold(iterator, origin, first=(item,))
    held.position.taken = _stage_items(held.items, body, get_state, set_state, names, extra_test, origin, facts,
                                       count=True)
    if events.active():
        events.note(origin, "unrolled", f"held iterator: {_iterations(len(held.items))} left, staged",
                    "the traced `break` decides how many items the loop takes: each runs under a staged if, "
                    "and the position it stops at is a traced count that next(it) reads")
    return get_state()


def _stage_after_held(held, body, get_state, set_state, names, extra_test, origin, facts, refuse=None):
    """A loop over a held iterator (`writes.HeldPosition`). At a Python position, its items from
    there, as a loop over a list (each under a staged `if` once the `break` flag is traced); at a
    traced one, each item it could still hold under a staged `if` on whether the iterator had
    not passed it yet (and the flag). The position moves on by the iterations that ran."""
    start = held.taken
    if not is_traced(start):
        taken = _stage_items(held.items[start:], body, get_state, set_state, names, extra_test, origin, facts,
                             count=True, refuse=refuse)
        held.move(start + taken)
        return get_state()
    ran = 0
    for index, item in enumerate(held.items):
        go = extra_test() if extra_test is not None else True
        if not is_traced(go) and not go:
            break
        run = start <= index
        if is_traced(go):
            run = jax.numpy.logical_and(run, scalar_predicate(go, origin))
        ran = ran + run.astype(jax.numpy.int32)
        stage_if(run, lambda item=item: body(item), None, get_state, set_state, names, len(names), origin,
                 ("iteration", "item the iterator had passed, or iteration skipped by `break`"), facts.attributes)
    held.move(start + ran)
    return get_state()


def _stage_rest(iterable, position, item, items, body, get_state, set_state, names, extra_test, origin, facts):
    """The break flag turned traced at `item`: stage the remaining iterations."""
    if isinstance(iterable, range):
        rest = iterable[position:]
        log(1, "dy2st: for loop at %s:%d: break flag traced, staging the last %d iterations",
            origin.filename, origin.lineno, len(rest))
        if events.active():
            events.note(origin, "unrolled", f"break turned traced after {_iterations(position)}",
                        f"Python ran the first {_iterations(position)}; the traced `break` decides the "
                        f"last {len(rest)}, staged")
        return _lax_for(StagedRange(rest.start, rest.stop, rest.step), body, get_state, set_state, names, extra_test, origin,
                        facts, break_traced=True)
    _stage_items([item, *items], body, get_state, set_state, names, extra_test, origin, facts)
    return get_state()


def _stage_items(items, body, get_state, set_state, names, extra_test, origin, facts, count=False, refuse=None):
    """Each item of a Python iterable under a staged `if` on the `break` flag once it is traced
    (`refuse`: the Python effect of the body that forbids that); with `count`, returns how many
    iterations ran (a traced int32 once the flag is traced)."""
    taken = 0
    for item in items:
        go = extra_test() if extra_test is not None else True
        if is_traced(go) and refuse is not None:
            raise _python_body_error(refuse, "a traced `break` decides where it stops", origin)
        if not is_traced(go):
            if not go:
                break
            body(item)
            taken += 1
            continue
        # A staged `if` as the user's are: what methods and context managers the body calls
        # change on objects (a log list, an attribute) is carried too, or refused.
        if count:
            taken = taken + scalar_predicate(go, origin).astype(jax.numpy.int32)
        stage_if(go, lambda item=item: body(item), None, get_state, set_state, names, len(names), origin,
                 ("iteration", "iteration skipped by `break`"), facts.attributes)
    return taken


def _try_stage_range(rng, body, get_state, set_state, names, extra_test, origin, facts):
    """Stage a Python `range` loop as one scan when the body allows; None means unroll."""
    where = f"{origin.filename}:{origin.lineno}"
    if len(rng) < _MIN_STAGED_TRIPS:
        _unrolled(origin, len(rng), "a static range too short for a scan to gain anything", level=2)
        return None
    init = get_state()
    leaves = jax.tree_util.tree_leaves(init, is_leaf=lambda x: isinstance(x, Undefined))
    if not any(is_traced(l) for l in leaves):
        _unrolled(origin, len(rng), "a static range whose variables hold no traced value: Python runs it", level=2)
        return None
    if extra_test is not None:
        go = extra_test()
        if is_traced(go) or not go:
            _unrolled(origin, len(rng), "a static range whose `break` is decided as it goes", level=2)
            return None
    iterable = StagedRange(rng.start, rng.stop, rng.step)
    length = len(rng)

    run_body = _element_body(iterable, body, get_state, set_state)

    def run_test(index, values):
        set_state(tuple(values))
        return extra_test()

    loop = loop_staging.Loop(run_body, run_test if extra_test is not None else None, length, indexed=True, facts=facts)
    reason = None
    attempt, guarded = events.Attempt(), guards.snapshot()
    CONTEXT.trial_scans += 1
    try:
        with _options_scope(LoopOptions()):
            values = loop_staging.stage(
                loop_staging.initial_spec(init, names), init, loop, origin, check=lambda spec: _python_values_needed(spec, init)
            )
    except (loop_staging.Refused, RaisedInTrialScan) as refused:
        reason = str(refused)
    except _NEEDS_PYTHON_VALUES as err:  # the body needs the index as a Python int, or Python state
        reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        writes.handled_refusal(err)  # (the loop unrolls: the user's code never saw it)
    except BaseException:
        set_state(init)  # no tracer of the abandoned scan stays in the caller's variables
        raise
    finally:
        CONTEXT.trial_scans -= 1
    if reason is not None:
        set_state(init)
        attempt.discard()
        guards.restore(guarded)
        _unrolled(origin, length, f"a scan cannot carry what the body does: {reason}")
        return None
    log(1, "dy2st: for-range loop at %s (%d iterations) staged as lax.scan", where, length)
    if events.active():
        _note_staged(origin, names, values, length, None, masked=extra_test is not None)
    set_state(tuple(values))
    return tuple(values)


# What a body raises when a scan gives it a traced index where it needs a Python one (`int(i)`,
# `xs[i]` of a list, `range(i)`, `d[i]`: jax's concretization errors are TypeErrors), or when
# its state cannot be carried (dy2st's own refusals): the static range then unrolls, as eagerly.
_NEEDS_PYTHON_VALUES = (TypeError, IndexError, KeyError, ValueError, Dy2StaticError)


def _python_values_needed(spec, init, break_traced: bool = False):
    """Why staging would change what eager code gives (a Python number becoming an array). Not
    where a traced `break` decides how many iterations run (`break_traced`): then a number the
    body changes is one the data decides, a 0-d array by the numbers rule, staged one way or
    the other."""
    for var, value in zip(spec, init):
        if var.is_list:
            if any(aval.weak_type for aval in var.items or ()):  # `xs.append(i)`, `xs.append(2 * i)`
                return f"'{var.name}' gets values appended that would be Python numbers eagerly"
            continue
        if break_traced:
            continue
        starts = jax.tree_util.tree_leaves(value, is_leaf=lambda x: isinstance(x, Undefined))
        if isinstance(value, Undefined):
            starts = [value] * len(var.leaves)
        for leaf, start in zip(var.leaves, starts):
            if not leaf.carried:
                continue
            if isinstance(start, Undefined):
                if leaf.aval.weak_type:
                    return f"'{var.name}' would be a Python number eagerly"
            elif not (is_traced(start) or isinstance(start, jax.Array)):
                return f"'{var.name}' starts as a Python value ({type(start).__name__})"
            elif loop_staging.scalar_aval(start) != leaf.aval:
                return f"'{var.name}' changes type in the loop"
    return None
