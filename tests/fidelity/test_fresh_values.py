"""Calls whose value is new on every call (Python's and numpy's random numbers, clocks) give a
new value on every call of a StaticFunction, as eagerly: the program that read one is traced
again per call (a trace given up puts the generator's state back, so nothing is drawn twice);
a draw in a staged branch, which eager makes only where the data takes it, is refused."""

import random
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import PythonEffectError

STATE = {}


def draws(x, log):
    log.append(STATE["numpy"].randint(100))  # a list argument: its first trace is given up and made again
    log.append(STATE["python"].random())
    return x + STATE["generator"].normal()


def _fresh_generators():
    STATE.update(numpy=np.random.RandomState(0), python=random.Random(1), generator=np.random.default_rng(2))


def _three_calls(fn) -> tuple[list, list]:
    """`(eager's, to_static's)` results and drawn values of three calls of `fn(x, log)`, each
    from freshly seeded generators."""
    seen = []
    for run in (fn, dy2st.to_static(fn)):
        _fresh_generators()
        calls = []
        for _ in range(3):
            log = []
            out = run(jnp.ones(1), log)
            calls.append((np.asarray(out).round(5).tolist(), [round(float(v), 6) for v in log]))
        seen.append(calls)
    return seen[0], seen[1]


def test_each_call_draws_anew_as_eagerly():
    eager, static = _three_calls(draws)
    assert static == eager, (static, eager)
    assert len({str(c) for c in eager}) == 3


def draws_in_a_branch(x):
    if x.sum() > 0:
        return x + random.random()
    return x


def test_a_draw_in_a_staged_branch_is_refused():
    with pytest.raises(PythonEffectError) as info:
        dy2st.to_static(draws_in_a_branch)(jnp.ones(1))
    text = str(info.value)
    assert text.startswith(f'File "{__file__}"') and "Random.random() (first at line" in text, text
    assert "draw before the `if`/loop and use the value inside it" in text


def draws_in_a_loop(x):
    k = 0
    for _ in range(3):
        if x.sum() > 0:
            x = x + 1
        k = (k + STATE["python"].randint(0, 9)) % 97
    return x, k


def test_under_the_callers_jit_a_loop_that_draws_unrolls_and_a_branch_that_draws_is_refused():
    """Campaign seed 5,100,477: inside the caller's jax.jit the loop over range(3) was staged, so
    its body drew once where eager draws three times. The draws are recorded there too: the loop
    unrolls (three draws at jit's trace, as eager code under jit makes them), a staged side that
    draws is refused."""
    _fresh_generators()
    expected = draws_in_a_loop(jnp.ones(1))
    _fresh_generators()
    got = jax.jit(dy2st.to_static(draws_in_a_loop))(jnp.ones(1))
    assert [np.asarray(v).tolist() for v in got] == [np.asarray(v).tolist() for v in expected]
    with pytest.raises(PythonEffectError, match=r"Random\.random\(\)"):
        jax.jit(dy2st.to_static(draws_in_a_branch))(jnp.ones(1))


def draws_twice(x, log):
    log.append(STATE["python"].randint(0, 9))  # two draws of one generator: one state to put back
    log.append(STATE["python"].random())
    if log[0] > 100:
        raise ValueError("never")
    return x


def test_two_draws_of_one_generator_in_a_trace_given_up_are_put_back_together():
    """Campaign seed 4,700,557: each draw's guard put the state back to its own first value, so the
    second left the generator after the first draw, and the call could not run again eagerly."""
    eager, static = _three_calls(draws_twice)
    assert static == eager, (static, eager)



def reads_the_clock(x):
    return x, time.perf_counter_ns()


def test_a_clock_is_read_on_every_call():
    static = dy2st.to_static(reads_the_clock)
    stamps = [static(jnp.ones(1))[1] for _ in range(3)]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3, stamps


DRAWS = random.Random(7)


def draws_in_a_loop_a_scan_cannot_carry(x, y, xs):
    a0, a1, log = x, y, []
    for v in xs:  # a Python loop
        for _ in y:  # rows of an array: tried as a scan, unrolled (the body appends Python ints)
            log.append(1)
            a1 = a1 + DRAWS.random()
            if a0[-2] < 3:
                for _ in range(2):
                    a0 = a0 + 0.5
    return a0, a1, log


def test_a_draw_in_a_trial_scan_given_up_is_not_made_twice():
    """Campaign seed 6,800,246: a scan tried over an array's rows drew once while traced, then
    was given up for an unroll (its body appends Python ints), which drew again: every later draw
    was shifted by one (a silent wrong answer). A trace left early puts back what it changed."""
    args = (jnp.array([-2.0, 0.0, 2.0]), jnp.array([-1.0, 4.0, 5.0]), [jnp.array([-2.0, 0.0, 3.0])])
    static = dy2st.to_static(draws_in_a_loop_a_scan_cannot_carry)
    for _ in range(2):
        DRAWS.seed(7)
        want, want_next = draws_in_a_loop_a_scan_cannot_carry(*args), DRAWS.random()
        DRAWS.seed(7)
        got, got_next = static(*args), DRAWS.random()
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
        assert got_next == want_next and got[2] == want[2]
