"""Lists changed in place around staged code: eager's list object, or a clear refusal.

* A list made before a loop and changed in place inside it (`L.pop()`, `D.update(...)`): a
  static trip count unrolls (exact); a traced one is refused (a staged body would change it
  once, while tracing) — it used to pop once and return a wrong result.
* A list appended to in a staged `if` while another object holds it (a context manager's log):
  after the `if` the name still refers to that same list, grown, as eagerly.
"""

import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import BranchOutputError, PythonEffectError
from dy2st.testing import check_equivalent
from dy2st.testing.real_program_prelude import Ctx  # logs 'tag' on entry, '-tag' on exit

X = jnp.array([1.0, 2.0, 3.0])


def pop_in_traced_while(x):
    L = [x, x * 2, x * 3]
    a = x
    while a.sum() < 30:
        a = a + L.pop()
    return a, L


def pop_in_static_range(x, n):
    L = [x, x * 2, x * 3]
    a = x
    for _ in range(n):
        if len(L) > 1:
            a = a + L.pop()
    return a, L


def update_in_traced_range(x, n):
    D = {"k": 1}
    for _ in range(n):
        D.update(k=5)
    return x, D


def pop_in_loop_turned_traced_by_break(x):
    L = [x, -x, x + 1]
    a = x
    w = 0
    while w < 3:
        w += 1
        if len(L) > 1:
            a = a + L.pop()
        if len(L) >= 2 and (x < a).any():
            break
    return a, L


def fresh_list_per_iteration(x, n):
    total = x
    for _ in range(n):
        tmp = [total, x]
        tmp.reverse()
        total = tmp[0] + tmp[1]
    return total


def logged_branch(x):
    log = [0]
    with Ctx(log, 2):
        if x.sum() > 0:
            log.append(x)
        else:
            log.append(-x)
    return log


def logged_branch_nested_python_if(x, xs):
    log = [len(xs)]
    with Ctx(log, 2):
        if x[0] > 0:
            y = x + 1
        else:
            y = x - 1
            if len(xs) < 2:
                log.append(x)
    return y, log


def logged_static_loop(x):
    log = [0]
    with Ctx(log, 2):
        for i in range(3):
            log.append(x * i)
    return log


def appended_here_replaced_there(x):
    log = [x]
    with Ctx(log, 2):
        if x.sum() > 0:
            log.append(x)
        else:
            log = [x, 2, -x]  # the same structure, a new list
    return log


def test_pop_in_a_traced_while_is_refused_at_the_loop():
    with pytest.raises(PythonEffectError, match=r"changes the list or dict 'L', made before the loop, in place"):
        dy2st.to_static(pop_in_traced_while)(X)


def test_update_in_a_traced_range_is_refused():
    with pytest.raises(PythonEffectError, match="'D', made before the loop"):
        dy2st.to_static(update_in_traced_range)(X, jnp.asarray(0))


def test_pop_when_a_break_turns_the_loop_traced_is_refused():
    with pytest.raises(PythonEffectError, match="its condition is traced"):
        dy2st.to_static(pop_in_loop_turned_traced_by_break)(X)


@pytest.mark.parametrize("n", [0, 1, 2, 4])
def test_pop_in_a_static_range_unrolls(n):
    check_equivalent(pop_in_static_range, X, n)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_list_made_in_each_iteration_still_stages(n):
    check_equivalent(fresh_list_per_iteration, X, n)
    check_equivalent(fresh_list_per_iteration, X, jnp.asarray(n), jit=False)


@pytest.mark.parametrize("x", [X, -X])
def test_the_context_managers_list_sees_the_branchs_item_and_its_exit(x):
    out = check_equivalent(logged_branch, x)
    assert len(out) == 4 and out[-1] == -2


@pytest.mark.parametrize("x", [X, -X])
def test_python_if_inside_a_staged_branch_keeps_the_list(x):
    y, log = check_equivalent(logged_branch_nested_python_if, x, [X, X, X], jit=False)
    assert log[-1] == -2


def test_an_append_in_one_branch_only_is_refused():
    with pytest.raises(BranchOutputError, match="'log' is"):
        dy2st.to_static(logged_branch_nested_python_if)(X, [X])


def test_appends_in_an_unrolled_loop_reach_the_context_managers_list():
    out = check_equivalent(logged_static_loop, X)
    assert out[-1] == -2 and len(out) == 6


def test_appended_in_one_branch_replaced_in_the_other_is_refused():
    with pytest.raises(BranchOutputError, match="appended to in place in one branch and replaced"):
        dy2st.to_static(appended_here_replaced_there)(X)
