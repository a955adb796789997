"""`and`, `or`, `not` and chained comparisons with Python's short-circuit semantics.

`convert_and(lambda: a, lambda: b)` is `a and b`: a Python `a` decides in Python and `b` is
evaluated only when needed. A traced `a` gives the value eager Python would (`b` where `a` is
true, else `a`), staged lazily with `lax.cond` so `b` runs only on the path that needs it.
"""

from __future__ import annotations

import operator

import jax.numpy as jnp


from dy2st.errors import OriginInfo, TracedValueError
from dy2st.runtime import events, writes
from dy2st.runtime.staging import scalar_predicate, stage_value
from dy2st.runtime.values import bool_as_python_int, is_traced, python_numbers


def convert_and(left_fn, right_fn, as_test: bool = False, pure: bool = False, origin: OriginInfo | None = None):
    """`left and right` with `left` and `right` given as thunks.

    With `as_test` (the value is only tested for truth, e.g. an `if` test) a traced `left`
    gives a scalar bool: the truth of `right` where `left` is true, else False. With `pure`
    (`right` is names and constants under comparisons and arithmetic, see the transformer) that
    is `logical_and` of both truths, with no cond. `origin`: the user's line (default: the caller's).
    """
    left = left_fn()
    if not is_traced(left):
        return right_fn() if left else left
    origin = origin or OriginInfo.of_caller()
    if as_test:
        both = _both_truths(left, right_fn, origin) if pure else None
        if both is not None:
            return jnp.logical_and(*both)
        return _lax_choose(_truth(left, origin), lambda: _truth(right_fn(), origin), lambda: False, "`and`", origin)
    return _lax_choose(left, right_fn, lambda: left, "`and`", origin)


def convert_or(left_fn, right_fn, as_test: bool = False, pure: bool = False):
    """`left or right` with `left` and `right` given as thunks (`as_test`, `pure`: see `convert_and`)."""
    left = left_fn()
    if not is_traced(left):
        return left if left else right_fn()
    origin = OriginInfo.of_caller()
    if as_test:
        both = _both_truths(left, right_fn, origin) if pure else None
        if both is not None:
            return jnp.logical_or(*both)
        return _lax_choose(_truth(left, origin), lambda: True, lambda: _truth(right_fn(), origin), "`or`", origin)
    return _lax_choose(left, lambda: left, right_fn, "`or`", origin)


def _both_truths(left, right_fn, origin: OriginInfo):
    """`(truth of left, truth of right)`, or None where computing the right side fails (an
    operand of a type the operation refuses, unbound): the cond, whose side defers the error to
    the data that takes it, as eagerly."""
    try:
        return scalar_predicate(left, origin), _truth(right_fn(), origin)
    except Exception as error:
        writes.handled_refusal(error)  # (a refusal made there is the cond's to raise again)
        return None


def _truth(value, origin: OriginInfo):
    """What `bool(value)` would be: a scalar bool array for a traced value, else a Python bool."""
    if is_traced(value):
        return scalar_predicate(value, origin)
    return bool(value)


def _lax_choose(pred, true_fn, false_fn, what: str, origin: OriginInfo):
    value = stage_value(pred, true_fn, false_fn, f"the value of {what}", what, origin,
                        ("left-true case", "left-false case"))
    if events.active():
        events.note(origin, "cond", f"lax.cond ({what})", f"the right side of {what} runs only when the left "
                    "side does not decide: a cond keeps Python's short circuit")
    return value


def convert_not(value):
    """`not value`; for a traced value, its logical negation as a bool array."""
    if not is_traced(value):
        return not value
    return jnp.logical_not(scalar_predicate(value, OriginInfo.of_caller()))


def convert_is(value, constant: bool, negated: bool = False):
    """`value is constant` (`is not` where `negated`), `constant` True or False. An array is
    never either; a Python bool the data decides (a 0-d bool array standing for one) is compared
    by value, staged, as eagerly it is one of the two. A Python number the data decides that is
    not a bool may have been a bool on the path taken (`flag = True` on one side, `flag = 1` on
    the other): refused."""
    if not is_traced(value):
        return (value is not constant) if negated else (value is constant)
    numbers = python_numbers()
    if numbers is None or jnp.shape(value) != () or not numbers.holds(value):
        return negated
    if value.dtype != jnp.bool_:
        raise TracedValueError(
            f"`is {constant}` of a Python number the data decides: the path taken may have made it a bool "
            "or an int, which the compiled program's value (a 0-d array) does not tell apart.",
            OriginInfo.of_caller(),
            advice=f"compare by value (`== {constant}`), or give the variable bools on every path.")
    return value != constant if negated else value == constant


_UNARY = {"+": operator.pos, "-": operator.neg, "~": operator.invert}


def convert_unary(sign: str, value):
    """`+value`, `-value`, `~value`. A Python bool the data decides (a 0-d bool array standing
    for one) is an int to these, as in Python (`-True == -1`, `~True == -2`), where jnp keeps a
    bool (`+`), computes `not` (`~`) or refuses (`-`)."""
    return _UNARY[sign](bool_as_python_int(value))


def convert_compare_chain(first_fn, *links):
    """`a < b < c` with each operand evaluated at most once, left to right, lazily.

    Args:
      first_fn: thunk of the leftmost operand.
      links: pairs `(compare, operand_fn)`, `compare(left, right)` applying one operator.
    """
    left = first_fn()
    origin = OriginInfo.of_caller()

    def rest(left, links):
        compare, operand_fn = links[0]
        right = operand_fn()
        result = compare(left, right)
        if len(links) == 1:
            return result
        return convert_and(lambda: result, lambda: rest(right, links[1:]), origin=origin)

    return rest(left, links)


def python_operand(value):
    """An operand of an `and`/`or` that binds a name with `:=` (`a and (m := f(x))`), which
    converted code keeps as Python's own operator so the name is the function's: it must
    decide in Python. A traced one would need the binding staged (eagerly `m` is set only
    when `a` is true): refused at the user's line."""
    if is_traced(value):
        raise TracedValueError(
            "this `and`/`or` binds a name with `:=` and one of its operands is a traced value: the "
            "binding happens eagerly only on the path the data takes, which dy2st cannot stage inside "
            "an expression.",
            OriginInfo.of_caller(),
            advice="bind the name on its own line before the condition (`m = f(x)`), then test it "
            "(`if a and m > 1:`).",
        )
    return value
