"""The code after a `break`/`continue`/`return` runs under a generated guard `if not <flag>:`.

When the flag is traced the guard is a staged `if` like the user's own: its Python effects are
refused (a nested function writing a `nonlocal`, an in-place change), and what context
managers and methods change on objects is carried (a `with Ctx(log)` in each iteration a
traced `break` may skip). A read of a variable no path assigned raises UnboundLocalError, as
eagerly (converted code reads it from a generated function, where Python says NameError).
"""

import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import BranchOutputError, PythonEffectError
from dy2st.testing import check_equivalent
from dy2st.testing.real_program_prelude import Ctx  # logs 'tag' on entry, '-tag' on exit

X = jnp.array([1.0, 2.0, 3.0])


def nonlocal_writer_after_continue(x):
    k = 0
    a = x
    for v in [x, x * 2, x * 3]:
        if v[2] >= 4:
            continue

        def bump():
            nonlocal k
            k = k + 1
            return k

        a = a + bump()
    return a, k


def nonlocal_writer_after_python_continue(x, skip):
    k = 0
    a = x
    for i, v in enumerate([x, x * 2, x * 3]):
        if i == skip:
            continue

        def bump():
            nonlocal k
            k = k + 1
            return k

        a = a + v * bump()
    return a, k


def update_after_return(x):
    D = {"k": 1}
    if x.sum() > 5:
        return x, D
    D.update(k=2)
    return x * 2, D


def logged_iterations_with_traced_break(x):
    log = []
    a = x
    for i in range(3):
        with Ctx(log, 7):
            a = a + i
        if a.sum() > 7:
            break
    return a, log


def reads_unbound(x, k):
    for i in range(2):
        if k > 1:
            t = x * 2
        else:
            x = x + t
    return x


def test_a_nonlocal_writer_under_a_traced_continue_is_refused():
    with pytest.raises(PythonEffectError, match=r"bump\(\), which writes 'k'"):
        dy2st.to_static(nonlocal_writer_after_continue)(X)


@pytest.mark.parametrize("skip", [0, 1, 5])
def test_the_same_with_a_python_condition_matches(skip):
    check_equivalent(nonlocal_writer_after_python_continue, X, skip)


@pytest.mark.parametrize("scale", [0.5, 1.0])
def test_an_in_place_update_after_a_traced_return_is_carried(scale):
    """`D.update(k=2)` after a traced `return` (refused when read, before in-place changes in
    staged branches were carried): the guard's side changes `D`, which the return value also
    holds; the value returned is taken before the change is put back (it returned `{'k': 1}`
    for eager's `{'k': 2}` until then)."""
    check_equivalent(update_after_return, X * scale)


def test_context_managers_in_iterations_a_traced_break_may_skip():
    # Each iteration after the break turned traced logs 7/-7 only if it runs: the log's length
    # depends on data, which a program cannot return: a clear refusal, never extra entries.
    with pytest.raises(BranchOutputError, match="the list given to Ctx"):
        dy2st.to_static(logged_iterations_with_traced_break)(X)


def reads_unbound_in_a_loop(x, k):
    FN = []
    for i in range(2):
        if k > 1:
            t = x * 2
        else:
            for v in [x]:
                FN.append(lambda w: w + v)
                x = x + t
    return x


def test_a_read_no_path_assigned_is_an_unbound_local_error():
    for fn in (reads_unbound, reads_unbound_in_a_loop):
        with pytest.raises(UnboundLocalError):
            fn(X, 1)
        with pytest.raises(UnboundLocalError, match="'t'"):
            dy2st.to_static(fn)(X, 1)
        check_equivalent(fn, X, 2)


def marker_given_to_jnp(x, k):
    for i in range(2):
        if k > 1:
            t = x * 2
        else:
            x = jnp.where(x > 0, x, t)
    return x


def live_after_a_zero_trip_loop(x, n):
    i = 0
    while x.sum() < 0 and i < 3:  # traced; runs zero times for a positive x
        t = x * 2
        i += 1
    for j in range(n):
        x = x + t
    return x


def test_an_unbound_variable_given_to_a_jax_function_is_an_unbound_local_error():
    with pytest.raises(UnboundLocalError):
        marker_given_to_jnp(X, 1)
    with pytest.raises(UnboundLocalError, match="'t'"):
        dy2st.to_static(marker_given_to_jnp)(X, 1)


def test_a_variable_a_zero_trip_loop_leaves_unbound_is_checked_where_it_is_read():
    """It was checked when the loop ended, refusing a call where eager never reads it."""
    static = dy2st.to_static(live_after_a_zero_trip_loop)
    for _ in range(2):
        np.testing.assert_array_equal(static(X, 0), live_after_a_zero_trip_loop(X, 0))  # `t` never read
        with pytest.raises(UnboundLocalError):  # where eager reads it, the same kind of error
            live_after_a_zero_trip_loop(X, 1)
        with pytest.raises(UnboundLocalError, match="'t'"):
            static(X, 1)


def read_in_the_other_branch(x, xs):
    if len(xs) >= 3:
        for e in x:
            t = e * 2
    else:
        x = x + t  # `t` is only assigned in a loop of the other branch
    return x


def test_a_variable_only_a_nested_loop_assigns_reads_as_unbound():
    with pytest.raises(UnboundLocalError):
        read_in_the_other_branch(X, [X])
    with pytest.raises(UnboundLocalError, match="'t'"):
        dy2st.to_static(read_in_the_other_branch)(X, [X])


def returns_on_every_path_inside_a_python_if(x):
    if x.shape[0] > 2:
        if x[0] > 0:
            return x[:2]
        return -x[:2]
    return x


def returns_on_some_paths_inside_a_python_if(x):
    if x.shape[0] > 2:
        if x[0] > 0:
            return x[:2] * 3
        x = x * 2
    return x[:2]


@pytest.mark.parametrize("x", [jnp.array([1.0, 2.0, 3.0]), jnp.array([-1.0, 2.0, 3.0]), jnp.array([1.0, 2.0])])
@pytest.mark.parametrize("fn", [returns_on_every_path_inside_a_python_if, returns_on_some_paths_inside_a_python_if])
def test_the_return_flag_is_true_where_every_path_returned(fn, x):
    """A traced `if` that returns, then a `return` after it, inside a Python `if`: every path
    returned, yet the flag after the guard was traced (the guard's other path kept the traced
    flag), so the code after the Python `if` (`return x`, of another shape) was staged and
    refused. On the path that took the earlier return the flag is true: it is now a Python True
    there, and the guards after it stay Python."""
    check_equivalent(fn, x, grad_argnums=0)
