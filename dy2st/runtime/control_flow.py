"""`if` statements and ternaries: plain Python for Python conditions, `lax.cond` for traced ones.

Generated code calls these with the branches as functions and the carried variables reached
through `get_state`/`set_state` closures (see `dy2st.transformers.ifelse`)::

    (y,) = convert_ifelse(pred, if_body, else_body, get_state, set_state, ('y',), 1)

is, for a Python `pred`, exactly::

    if pred: if_body()
    else: else_body()

and for a traced `pred`, `y = lax.cond(pred, <if_body's y>, <else_body's y>)`.
"""

from __future__ import annotations

from dy2st.errors import OriginInfo
from dy2st.runtime.staging import is_traced, stage_cond


def convert_ifelse(pred, if_body, else_body, get_state, set_state, names, nouts, branch_names=("if branch", "else branch")):
    """Runs an `if` statement; returns the new values of the state variables.

    Args:
      pred: the condition's value.
      if_body, else_body: functions running each branch (writing state via `nonlocal`);
        `else_body` is None when there is no `else`.
      get_state, set_state: read / write the state variables as a tuple (None if no state).
      names: display names of the state variables, for errors.
      nouts: the first `nouts` state variables are live after the `if`; the rest are only
        carried in (their values after the `if` do not matter).
      branch_names: how errors name the two paths (a guard made by the early-return rewrite
        is not the user's if/else).
    """
    if not is_traced(pred):
        if pred:
            if_body()
        elif else_body is not None:
            else_body()
        return get_state() if get_state is not None else ()
    return _lax_ifelse(pred, if_body, else_body, get_state, set_state, names, nouts, OriginInfo.of_caller(), branch_names)


def _lax_ifelse(pred, if_body, else_body, get_state, set_state, names, nouts, origin, branch_names):
    initial = get_state() if get_state is not None else ()

    def branch(body):
        def run():
            if set_state is not None:
                set_state(initial)
            if body is not None:
                body()
            return get_state()[:nouts] if get_state is not None else ()

        return run

    outputs = stage_cond(pred, branch(if_body), branch(else_body), names[:nouts], origin, branch_names=tuple(branch_names))
    final = tuple(outputs) + tuple(initial[nouts:])
    if set_state is not None:
        set_state(final)
    return final


def convert_ifexp(pred, true_fn, false_fn):
    """`true_fn() if pred else false_fn()`, staged with `lax.cond` when `pred` is traced."""
    if not is_traced(pred):
        return true_fn() if pred else false_fn()
    (value,) = stage_cond(
        pred,
        lambda: (true_fn(),),
        lambda: (false_fn(),),
        ("the conditional expression",),
        OriginInfo.of_caller(),
        branch_names=("true side", "false side"),
        promote=True,
    )
    return value

