"""The return rewrite makes no more control flow than a person writes (`_into_else`): an `if`
that returns followed by a return is one `lax.cond`, like hand-written `lax.cond`; the answers
stay eager's on every path."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import dy2st


def _conds(jaxpr) -> int:
    count = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "cond":
            count += 1
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    count += _conds(inner)
    return count


def early(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def hand_early(x):
    return lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, x)


def chain(x):
    if x.sum() > 0:
        return x * 2
    elif x.sum() < -5:
        return x * 3
    y = x - 1
    return y


def hand_chain(x):
    return lax.cond(x.sum() > 0, lambda v: v * 2,
                    lambda v: lax.cond(v.sum() < -5, lambda w: w * 3, lambda w: w - 1, v), x)


def raises_first(x):
    if x.sum() > 100:
        raise ValueError("too big")
    y = x + 1
    return y


def else_returns(x):
    if x.sum() > 0:
        y = x * 2
    else:
        return x
    y = y + 1
    return y


def hand_else_returns(x):
    return lax.cond(x.sum() > 0, lambda v: v * 2 + 1, lambda v: v, x)


@pytest.mark.parametrize("fn, hand", [(early, hand_early), (chain, hand_chain), (else_returns, hand_else_returns)])
def test_as_many_conds_as_hand_written(fn, hand):
    x = jnp.ones(3)
    ours = dy2st.to_static(fn).get_concrete_program(x).jaxpr.jaxpr
    theirs = jax.make_jaxpr(hand)(x).jaxpr
    assert _conds(ours) == _conds(theirs)


@pytest.mark.parametrize("fn", [early, chain, raises_first, else_returns])
@pytest.mark.parametrize("v", [1.0, -1.0, -10.0])
def test_every_path_is_eagers(fn, v):
    x = jnp.ones(3) * v
    static, jitted = dy2st.to_static(fn), jax.jit(dy2st.to_static(fn))
    for _ in range(2):
        np.testing.assert_array_equal(static(x), fn(x))
    if fn is not raises_first:
        np.testing.assert_array_equal(jitted(x), fn(x))
        g = jax.grad(lambda x: static(x).sum())(x)
        np.testing.assert_array_equal(g, jax.grad(lambda x: fn(x).sum())(x))


def doubles_until_big(x, limit):
    while True:
        x = x * 2
        if x.sum() > limit:
            return x


def searches_with_a_python_exit(x, n):
    i = 0
    while 1:
        if i == n:
            return x, i
        if x.sum() > 100:
            return x * 0, i
        x = x + 1
        i += 1


def breaks_from_a_nested_loop_only(x):
    while True:
        for _ in range(3):
            if x.sum() > 0:
                break
            x = x + 1
        if x.sum() > 10:
            return x
        x = x * 2


def finds_by_for_else(x):
    for i in range(x.shape[0]):
        if x[i] < 0:
            return i, x[i]
    else:
        return -1, jnp.float32(0)


def finds_by_while_else(x):
    i = 0
    while x[i] >= 0:
        i += 1
        if i == x.shape[0]:
            return -1, jnp.float32(0)
    else:
        return i, x[i]


@pytest.mark.parametrize("fn, args", [
    (doubles_until_big, (jnp.ones(3), 20.0)),  # several trips
    (doubles_until_big, (jnp.ones(3), 0.0)),  # returns in the first
    (searches_with_a_python_exit, (jnp.ones(2), 0)),
    (searches_with_a_python_exit, (jnp.ones(2), 3)),
    (searches_with_a_python_exit, (jnp.ones(2) * 99, 5)),
    (breaks_from_a_nested_loop_only, (-jnp.ones(2),)),
    # a loop no `break` ends, whose `else:` returns (probe of peers' tests: refused, "the return
    # value is None in the code after an earlier return")
    (finds_by_for_else, (jnp.array([1.0, -2.0, 3.0]),)),
    (finds_by_for_else, (jnp.array([1.0, 2.0]),)),
    (finds_by_while_else, (jnp.array([1.0, -2.0, 3.0]),)),
    (finds_by_while_else, (jnp.array([1.0, 2.0]),)),
])
def test_a_while_true_left_only_by_return_has_no_path_after_it(fn, args):
    # the code after the loop cannot run: it was given a `return None`, whose None then did not
    # match the loop's returned array (BranchOutputError)
    static = dy2st.to_static(fn)
    expected = fn(*args)
    for _ in range(2):
        jax.tree_util.tree_map(np.testing.assert_array_equal, static(*args), expected)
    if len(args) == 2 and fn is doubles_until_big:
        np.testing.assert_array_equal(jax.jit(static)(*args), expected)


def _raises():
    raise ValueError("no value")


def returns_what_raises_then_falls_through(x, c):
    if c > 0:
        return x * 2
    try:
        return _raises()
    except ValueError:
        pass
    try:
        return x // 0 if isinstance(x, int) else _raises()
    except (ZeroDivisionError, ValueError):
        pass
    return x * 3


@pytest.mark.parametrize("x, c", [(1, 0), (1, 1), (jnp.ones(2), 0), (jnp.ones(2), jnp.array(0)), (jnp.ones(2), jnp.array(1))])
def test_a_return_whose_value_raises_returns_nothing(x, c):
    # `return expr` set the early-return flag before computing `expr`: when it raised and a
    # handler caught it, the code after the `try` was skipped and the return value was a
    # placeholder (a refusal, or a zero with a staged `if` before it)
    static = dy2st.to_static(returns_what_raises_then_falls_through)
    expected = returns_what_raises_then_falls_through(x, c)
    for _ in range(2):
        np.testing.assert_array_equal(static(x, c), expected)
