"""A loop body that reads a list it grows: eagerly each iteration sees the items so far.

A staged scan traces its body once, with the list as it was before the loop, and stacks the
items each iteration adds; a body that also reads the list (`len(log)`, `log[-1]`) would read
the same length every iteration. Such a loop runs in Python (unrolled) instead, for every way
of growing it: `log.append(v)`, `log += [v]`, `log = log + [v]` (the last two were staged, and
gave `len(log) == 0` on every iteration).
"""

import jax.numpy as jnp
import pytest

from dy2st.testing import check_equivalent, check_prints


def grows_by_append(x):
    log = []
    for i in range(3):
        x = x + 1
        n = len(log)
        log.append(x * n)
    return log


def grows_by_augmented_add(x):
    log = []
    for i in range(3):
        x = x + 1
        n = len(log)
        log += [x * n]
    return log


def grows_by_concatenation(x):
    log = []
    for i in range(3):
        x = x + 1
        n = len(log)
        log = log + [x * n]
    return log


def reads_the_last_item(x):
    log = [x]
    for i in range(4):
        log = log + [log[-1] * 2 + x]
    return log


@pytest.mark.parametrize("fn", [grows_by_append, grows_by_augmented_add, grows_by_concatenation, reads_the_last_item])
@pytest.mark.parametrize("x", [jnp.ones(2), jnp.array([-1.0, 0.5])])
def test_a_body_reading_the_list_it_grows_sees_each_iterations_items(fn, x):
    for _ in range(2):
        check_equivalent(fn, x, grad_argnums=0)


def prints_the_length_after_a_staged_if(x):
    log = []
    for i in range(3):
        if x.sum() > 0:
            x = x + 1
        print(f"q{len(log)}")
        log += [x * 2]
    return log


def test_printed_lengths_are_each_iterations():
    check_prints(prints_the_length_after_a_staged_if, jnp.ones(2))
    check_prints(prints_the_length_after_a_staged_if, -jnp.ones(2))


def stops_at_a_python_length(xs, length):
    h = jnp.zeros(3)
    outs = []
    for t in range(xs.shape[0]):
        if t >= length:  # Python ints eagerly: the loop index and the argument
            break
        h = jnp.tanh(h + xs[t])
        outs.append(h)
    return h, len(outs)


@pytest.mark.parametrize("length", [0, 2, 4, 9])
def test_a_static_range_that_a_python_break_ends_early(length):
    # a scan was tried (its index traced), its staged break refused the list's growth, and that
    # refusal, which dy2st itself had caught before unrolling the loop, was raised again after the
    # trace as if the user's code had swallowed it
    xs = jnp.arange(12.0).reshape(4, 3) / 10
    for _ in range(2):
        check_equivalent(stops_at_a_python_length, xs, length)
