"""Run-time checks of staged loops: a bound reached too early, a loop that never ends.

A staged `while` with `set_loop_options(maximum_iterations=N)` is a scan of N masked steps.
Eagerly the loop would go on while its condition is true, so stopping at N with the condition
still true gives a wrong result. After the scan the condition is evaluated once more on the
final state; if it is still true, the program raises `LoopBoundError` at the `while` line when
it runs, the way a failed `assert` does. `set_loop_options(..., on_bound="stop")` opts out
(TensorFlow's `maximum_iterations`: stop at N on purpose)::

    final = scan(masked_step, init, length=N)
    if cond(final): raise LoopBoundError(...)        # at run time, through jax.debug.callback

A staged `while` with no bound runs until its condition is false, which may be never; XLA
cannot be interrupted (Ctrl-C waits for it). With the debug bound `DY2ST_MAX_WHILE_TRIPS=N`
(or `dy2st.config.config.max_while_trips = N`), every unbounded staged `while` also carries a
trip counter and stops after N trips; if its condition is still true then, the program raises
`LoopBoundError` at the loop's line. The counter changes the program, so it is off by default.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from dy2st import _jax_compat
from dy2st.config import config
from dy2st.runtime.asserts import check_when_run
from dy2st.errors import (
    LoopBoundError,
    LoopGradientError,
    LoopVariableError,
    OriginInfo,
    is_library_file,
)

ON_BOUND_CHOICES = ("error", "stop")


def check_on_bound(on_bound: str) -> str:
    if on_bound not in ON_BOUND_CHOICES:
        raise ValueError(f"on_bound must be one of {ON_BOUND_CHOICES}, got {on_bound!r}")
    return on_bound


def raise_if(still_running, error: LoopBoundError) -> None:
    """When the program runs: raise `error` if the traced bool `still_running` is true."""
    check_when_run(jnp.logical_not(still_running), lambda: error, error.origin, error.problem.split(";")[0])


def check_not_truncated(still_running, origin: OriginInfo, bound: int) -> None:
    """After a masked scan of `bound` steps: the loop's condition must be false by now."""
    raise_if(still_running, LoopBoundError(
        f"this loop reached maximum_iterations={bound} (from dy2st.set_loop_options) while its "
        "condition was still true; eager Python would have gone on, so its result would be wrong.",
        origin,
        advice=f"raise maximum_iterations above {bound} to a true upper bound of the trip count, or, "
        "to stop at the bound on purpose, call dy2st.set_loop_options(maximum_iterations=N, on_bound=\"stop\").",
    ))


def while_loop(cond_fun, body_fun, init, origin: OriginInfo):
    """`lax.while_loop(cond_fun, body_fun, init)`, with the opt-in debug trip bound."""
    trips = config.max_while_trips
    if not trips:
        return lax.while_loop(cond_fun, body_fun, init)
    count0 = jnp.zeros((), jnp.int32)
    count, final = lax.while_loop(
        lambda c: jnp.logical_and(c[0] < trips, cond_fun(c[1])),
        lambda c: (c[0] + 1, body_fun(c[1])),
        (count0, init),
    )
    raise_if(jnp.logical_and(count >= trips, cond_fun(final)), LoopBoundError(
        f"this loop ran {trips} times and its condition is still true: the debug bound "
        f"DY2ST_MAX_WHILE_TRIPS={trips} stopped it (it may never end).",
        origin,
        advice="check that the loop's condition becomes false (e.g. a tolerance it can reach, a counter it "
        "increments); if it needs more trips, raise DY2ST_MAX_WHILE_TRIPS, or unset it.",
    ))
    return final


def structure_changed(name: str, before, after, origin: OriginInfo) -> LoopVariableError:
    """The error for a carried variable whose pytree structure an iteration changes."""
    if before == jax.tree_util.tree_structure(None):  # `y = None` before a loop that sets an array
        return LoopVariableError(
            f"'{name}' is None before the loop but {_shown(after)} after an iteration; a staged loop carries "
            "one type, and None is not an array.",
            origin,
            advice=f"give '{name}' an array of the type the loop gives it before the loop (e.g. "
            f"`{name} = jnp.zeros(shape, dtype)`), with a separate flag if you need to know whether it was set.",
        )
    return LoopVariableError(
        f"'{name}' changes structure in the loop, from {before} to {after}.",
        origin,
        advice=f"keep '{name}' the same kind of container in every iteration.",
    )


def _shown(treedef) -> str:
    return "an array" if treedef.num_nodes == 1 and treedef.num_leaves == 1 else f"a {treedef}"


# -- reverse mode through an unbounded staged while, found only when JAX transposes it --------
# `jax.grad(jax.jit(to_static(f)))` traces the loop under jit, where no AD is visible (the check
# in loop_staging cannot fire), and JAX then fails to transpose the while_loop with its own
# message naming no loop. JAX transposes each equation inside a context holding the
# equation's creation traceback, so the rule can tell a while staged by dy2st and name the
# user's `while`. Private JAX API, behind dy2st/_jax_compat.py: there is no public hook for this
# error; the wrapper only re-raises what JAX's rule raised.


def _staged_while_origin() -> OriginInfo | None:
    """The user's `while` that the while_loop being transposed was staged for, if dy2st's."""
    ours = False
    for code, line in _jax_compat.current_equation_frames():  # innermost frame first
        if code is while_loop.__code__:
            ours = True
        elif ours and not is_library_file(code.co_filename):
            return OriginInfo(code.co_filename, line, code.co_name)
    return None


def _naming_the_while(jax_rule):
    def rule(*args, **kwargs):
        try:
            return jax_rule(*args, **kwargs)
        except ValueError:
            origin = _staged_while_origin()
            if origin is None:
                raise
            raise LoopGradientError(
                "reverse-mode differentiation (jax.grad/vjp) through this staged loop, traced earlier "
                "(e.g. inside jax.jit): its number of iterations is decided by traced values and has no "
                "bound, and XLA's while loop cannot run backwards.",
                origin,
                advice="call dy2st.set_loop_options(maximum_iterations=N) inside the loop body with an upper bound N; "
                "the loop then becomes a scan of N masked steps, which jax.grad supports.",
            ) from None

    return rule


_jax_compat.wrap_while_transpose(_naming_the_while)
