"""Run-time checks (asserts, loop bounds, zero-trip loops): their text, and a quiet stderr."""

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import LoopBoundError


def bounded_doubling(x, n):
    i = 0
    while i < n:
        dy2st.set_loop_options(maximum_iterations=5)
        x = x * 2.0
        i += 1
    return x


def bounded_doubling_that_stops(x, n):
    i = 0
    while i < n:
        dy2st.set_loop_options(maximum_iterations=5, on_bound="stop")
        x = x * 2.0
        i += 1
    return x


@pytest.mark.parametrize("n", [0, 3, 5])
def test_bound_not_reached_matches_eager_with_gradients(n):
    static = dy2st.to_static(bounded_doubling)
    x = jnp.ones(2)
    assert static(x, jnp.array(n)).tolist() == bounded_doubling(x, n).tolist()
    grad = jax.grad(lambda v: static(v, jnp.array(n)).sum())(x)
    assert grad.tolist() == [2.0 ** n] * 2


def test_bound_reached_with_condition_true_raises_at_the_while_line(capfd):
    with pytest.raises(LoopBoundError) as info:
        dy2st.to_static(bounded_doubling)(jnp.ones(2), jnp.array(7))
    text = str(info.value)
    assert text.startswith('File "') and "in bounded_doubling" in text
    assert "    while i < n:" in text
    assert "reached maximum_iterations=5 (from dy2st.set_loop_options) while its condition was still true" in text
    assert 'on_bound="stop"' in text
    assert capfd.readouterr().err == ""  # no callback traceback from jax on stderr


def test_on_bound_stop_stops_silently_as_asked():
    got = dy2st.to_static(bounded_doubling_that_stops)(jnp.ones(2), jnp.array(7))
    assert got.tolist() == [32.0, 32.0]


def test_bad_on_bound_is_refused():
    with pytest.raises(ValueError, match="on_bound must be one of"):
        dy2st.set_loop_options(maximum_iterations=3, on_bound="ignore")


def test_failing_assert_prints_nothing_on_stderr(capfd):
    @dy2st.to_static
    def f(x):
        assert x.sum() > 100, "too small"
        return x

    with pytest.raises(AssertionError, match="too small"):
        f(jnp.ones(2))
    assert capfd.readouterr().err == ""


def test_zero_trip_error_prints_nothing_on_stderr(capfd):
    def f(x, n):
        for i in range(n):
            y = x * i
        return y

    with pytest.raises(UnboundLocalError):
        dy2st.to_static(f)(jnp.ones(2), jnp.array(0))
    assert capfd.readouterr().err == ""


def _pops_in_a_traced_loop(x, n):
    items = []
    for _ in range(n):
        x = x + items[-1]  # eagerly raises only if an iteration runs
    return x


def test_an_error_tracing_the_body_of_a_traced_loop_says_eager_raises_it_only_when_it_runs():
    """The body of a loop with a traced trip count is traced whether or not it runs: an
    IndexError there was a raw error (fuzz seed 230149); it is a StagedBranchError at the loop,
    also an IndexError, saying when eager raises it."""
    from dy2st.errors import StagedBranchError

    x = jnp.ones(3)
    assert jnp.array_equal(_pops_in_a_traced_loop(x, 0), x)
    with pytest.raises(StagedBranchError) as err:
        dy2st.to_static(_pops_in_a_traced_loop)(x, jnp.int32(0))
    assert isinstance(err.value, IndexError)
    text = str(err.value)
    assert "for _ in range(n):" in text and "tracing the body of this staged loop raised IndexError" in text
    assert "eager Python raises this only when an iteration runs" in text and "To fix:" in text


def assert_caught_by_its_except(x):
    try:
        assert x.sum() > 0, "negative"
        y = x
    except AssertionError:
        y = -x
    return y


def assert_in_a_with_block(x):
    import contextlib

    with contextlib.nullcontext():
        assert x.sum() > 0, "negative"
    return x * 2


def test_an_assert_whose_except_would_catch_it_is_refused_at_its_line():
    # eagerly the handler runs on negative data; the program's check would raise past it
    with pytest.raises(dy2st.errors.StagedInTryError,
                       match=r"(?s)assert x.sum\(\) > 0.*raises AssertionError when the program runs.*`except`") as info:
        dy2st.to_static(assert_caught_by_its_except)(jnp.ones(2))
    assert str(info.value).startswith('File "')


def test_an_assert_in_a_with_block_stays_a_run_time_check():
    f = dy2st.to_static(assert_in_a_with_block)
    assert jnp.allclose(f(jnp.ones(2)), 2.0)
    with pytest.raises(AssertionError, match="negative"):
        f(-jnp.ones(2))
