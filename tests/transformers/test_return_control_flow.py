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
