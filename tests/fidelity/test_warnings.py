"""`warnings.warn` in converted code warns as eagerly, on every call: in a staged `if` only
where the data takes that side, with the message's traced values at their run-time values,
through the user's module registry (so `default` shows it once per line, `always` on every
call, and `error` raises the warning at the call). It ran while tracing: once, on the first
call only, whatever the data said."""

import warnings

import jax.numpy as jnp
import pytest

import dy2st

POS, NEG = jnp.ones(3), -jnp.ones(3)


def warns_in_a_branch(x):
    if x.sum() > 0:
        warnings.warn(f"positive input {x.sum():.1f}", RuntimeWarning)
        x = x + 1
    return x


def warns_at_the_top(x):
    warnings.warn("called")
    return x * 2


def _caught(fn, x, mode="always"):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(mode)
        fn(x)
    return [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("fn", [warns_in_a_branch, warns_at_the_top])
def test_warnings_as_eagerly_on_every_call(fn):
    static = dy2st.to_static(fn)
    for x in (POS, NEG, POS, NEG):
        assert _caught(static, x) == _caught(fn, x)  # message, category, the user's line


def test_the_default_filter_shows_a_warning_once_per_line():
    static = dy2st.to_static(warns_at_the_top)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for x in (POS, NEG, POS):
            static(x)
    assert [str(w.message) for w in caught] == ["called"]


def test_an_error_filter_raises_the_warning_at_the_call():
    static = dy2st.to_static(warns_in_a_branch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        static(NEG)  # the data does not take the side: nothing raised
        with pytest.raises(RuntimeWarning, match="positive input 3.0"):
            static(POS)
