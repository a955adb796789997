"""`and`, `or`, `not` and chained comparisons with Python's short-circuit semantics.

`convert_and(lambda: a, lambda: b)` is `a and b`: a Python `a` decides in Python and `b` is
evaluated only when needed. A traced `a` gives the value eager Python would (`b` where `a` is
true, else `a`), staged lazily with `lax.cond` so `b` runs only on the path that needs it.
"""

from __future__ import annotations

import jax.numpy as jnp

from dy2st.errors import OriginInfo
from dy2st.runtime.staging import is_traced, scalar_predicate, stage_cond


def convert_and(left_fn, right_fn):
    """`left and right` with `left` and `right` given as thunks."""
    left = left_fn()
    if not is_traced(left):
        return right_fn() if left else left
    return _lax_choose(left, right_fn, lambda: left, "`and`")


def convert_or(left_fn, right_fn):
    """`left or right` with `left` and `right` given as thunks."""
    left = left_fn()
    if not is_traced(left):
        return left if left else right_fn()
    return _lax_choose(left, lambda: left, right_fn, "`or`")


def _lax_choose(pred, true_fn, false_fn, what: str):
    origin = OriginInfo.of_caller(2)
    (value,) = stage_cond(
        pred,
        lambda: (true_fn(),),
        lambda: (false_fn(),),
        (f"the value of {what}",),
        origin,
        branch_names=("left-true case", "left-false case"),
        promote=True,
    )
    return value


def convert_not(value):
    """`not value`; for a traced value, its logical negation as a bool array."""
    if not is_traced(value):
        return not value
    return jnp.logical_not(scalar_predicate(value, OriginInfo.of_caller()))


def convert_compare_chain(first_fn, *links):
    """`a < b < c` with each operand evaluated at most once, left to right, lazily.

    Args:
      first_fn: thunk of the leftmost operand.
      links: pairs `(compare, operand_fn)`, `compare(left, right)` applying one operator.
    """
    left = first_fn()

    def rest(left, links):
        compare, operand_fn = links[0]
        right = operand_fn()
        result = compare(left, right)
        if len(links) == 1:
            return result
        return convert_and(lambda: result, lambda: rest(right, links[1:]))

    return rest(left, links)
