"""Differential tests of while/for/break/continue/return-in-loop/loop-else/list append:
eager == to_static == jit(to_static), gradients where defined, trip counts 0, 1 and many."""

import itertools
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import LoopGradientError, LoopVariableError
from dy2st.testing import check_equivalent

def check_jit_grad(fn, *args, argnums=0, rtol=1e-5):
    """Gradient of the staged program (under jax.jit every loop with a traced condition is
    staged; plain jax.grad would see concrete conditions and run Python loops)."""

    def loss(f):
        return lambda *a: sum(jnp.sum(l) for l in jax.tree_util.tree_leaves(f(*a)))

    expected = jax.grad(loss(fn), argnums=argnums)(*args)
    actual = jax.jit(jax.grad(loss(dy2st.to_static(fn)), argnums=argnums))(*args)
    for e, a in zip(jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(actual)):
        np.testing.assert_allclose(a, e, rtol=rtol, atol=1e-6)


X = jnp.arange(12.0).reshape(4, 3) - 4.0  # rows with sums -9, 0, 9, 18
ROWS = {"many": X, "first_negative": -X, "one_row": X[2:3], "mixed": X[::-1]}


# -- while ---------------------------------------------------------------------------------
def newton_sqrt(x):
    y = x
    err = jnp.abs(y * y - x).max()
    while err > 1e-5:
        y = 0.5 * (y + x / y)
        err = jnp.abs(y * y - x).max()
    return y


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def doubling(x):
    i = 0
    while x.sum() < 100.0:
        x = x * 2.0
        i += 1
    return x, i


def while_else(x):
    while x.sum() < 50.0:
        if x.max() > 20.0:
            break
        x = x * 3.0
    else:
        x = x + 1000.0
    return x


def nested_while(x, n):
    total = jnp.zeros(())
    i = jnp.array(0)
    while i < n:
        j = jnp.array(0)
        while j < i:
            total = total + x[i] * x[j]
            j = j + 1
        i = i + 1
    return total


@pytest.mark.parametrize("x", [jnp.array([1.0, 1.0]), jnp.array([2.0, 9.0]), jnp.array([0.25, 100.0])])
def test_newton_to_tolerance(x):
    check_equivalent(newton_sqrt, x)


@pytest.mark.parametrize("n", [1, 2, 6, 27])
def test_collatz(n):
    check_equivalent(collatz_steps, jnp.array(n))


@pytest.mark.parametrize("x", [jnp.full(3, 50.0), jnp.full(3, 20.0), jnp.ones(3)])  # 0, 1, many trips
def test_while_traced_condition_trip_counts(x):
    check_equivalent(doubling, x)


@pytest.mark.parametrize("x", [jnp.full(2, 30.0), jnp.full(2, 4.0), jnp.full(2, 21.0), jnp.ones(2)])
def test_while_else_and_break(x):
    check_equivalent(while_else, x)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_nested_while(n):
    check_equivalent(nested_while, jnp.arange(1.0, 5.0), jnp.array(n))


def while_return(x):
    i = 0
    while x.sum() < 100.0:
        x = x * 2.0
        if x.max() > 30.0:
            return x, i
        i += 1
    return -x, i


@pytest.mark.parametrize("x", [jnp.ones(2), jnp.array([1.0, 20.0]), jnp.full(2, 60.0)])
def test_return_tuple_from_traced_while(x):
    check_equivalent(while_return, x, grad_argnums=0)


def test_python_condition_runs_python_loop():
    def f(x, n):
        i = 0
        while i < n:
            x = x + i
            i += 1
        return x, i

    jaxpr = str(dy2st.to_static(f).get_concrete_program(jnp.zeros(2), 3).jaxpr)
    assert "while" not in jaxpr and "scan" not in jaxpr  # unrolled in Python
    check_equivalent(f, jnp.zeros(2), 0)
    check_equivalent(f, jnp.zeros(2), 4)


def test_while_condition_traced_part_way():
    # `i < 10` is Python; the break flag turns traced in the first iteration.
    def f(x):
        i = 0
        while i < 10:
            x = x * 2.0
            if x.sum() > 40.0:
                break
            i += 1
        return x, i

    for x in [jnp.ones(2), jnp.full(2, 30.0), jnp.full(2, 1e-6)]:
        check_equivalent(f, x)


# -- for ------------------------------------------------------------------------------------
def for_range(x, n):
    acc = jnp.zeros_like(x)
    for i in range(n):
        acc = acc + x * i
    return acc


def for_range_args(x, a, b, c):
    acc = x
    for i in range(a, b, c):
        acc = acc * 0.5 + i
    return acc


def for_rows(xs):
    h = jnp.zeros(xs.shape[1])
    for x in xs:
        h = jnp.tanh(h + x)
    return h


def for_enumerate_zip(xs, ys):
    acc = jnp.zeros(xs.shape[1])
    for t, (x, y) in enumerate(zip(xs, ys), 1):
        acc = acc + t * x * y
    return acc


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_for_python_range(n):
    check_equivalent(for_range, jnp.arange(3.0), n, grad_argnums=0)
    check_jit_grad(lambda x: for_range(x, n), jnp.arange(3.0))


@pytest.mark.parametrize("args", [(0, 5, 2), (5, 0, -1), (3, 3, 1), (2, 9, 3)])
def test_for_range_start_stop_step(args):
    check_equivalent(for_range_args, jnp.ones(2), *args, grad_argnums=0)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_for_traced_range(n):
    check_equivalent(for_range, jnp.arange(3.0), jnp.array(n))


@pytest.mark.parametrize("b", [0, 1, 6])
def test_for_traced_range_start_stop_step(b):
    check_equivalent(for_range_args, jnp.ones(2), jnp.array(1), jnp.array(b), jnp.array(2))
    check_equivalent(for_range_args, jnp.ones(2), jnp.array(b), jnp.array(0), jnp.array(-2))


@pytest.mark.parametrize("rows", [0, 1, 4])
def test_for_over_array_rows(rows):
    check_equivalent(for_rows, X[:rows], grad_argnums=0)
    check_jit_grad(for_rows, X[:rows])


@pytest.mark.parametrize("rows", [0, 1, 4])
def test_for_enumerate_zip_tuple_targets(rows):
    check_equivalent(for_enumerate_zip, X[:rows], X[:rows] + 1.0, grad_argnums=(0, 1))
    check_jit_grad(for_enumerate_zip, X[:rows], X[:rows] + 1.0, argnums=(0, 1))


def test_for_over_python_containers_stays_python():
    def f(x, scales):
        for s in scales:
            x = x * s
        for k, v in {"a": 1.0, "b": 2.0}.items():
            x = x + v
        for i, s in enumerate((3, 4)):
            x = x + i * s
        return x

    check_equivalent(f, jnp.ones(2), [1.0, 2.0, 3.0], jit=False, grad_argnums=0)


def test_for_target_live_after_loop():
    def f(xs):
        x = jnp.zeros(xs.shape[1])
        for x in xs:
            pass
        return x

    check_equivalent(f, X)
    check_equivalent(f, X[:1])


# -- static ranges: staged when the body allows, unrolled otherwise ---------------------------
def test_static_range_with_array_body_is_staged(caplog):
    def f(x):
        h = x
        for i in range(10):
            h = jnp.tanh(h * 1.5 + i)
        return h

    dy2st.set_verbosity(1)
    try:
        with caplog.at_level(logging.INFO, logger="dy2st"):
            out = check_equivalent(f, jnp.arange(3.0), grad_argnums=0)
    finally:
        dy2st.set_verbosity(0)
    program = dy2st.to_static(f).get_concrete_program(jnp.arange(3.0))
    assert "scan" in str(program.jaxpr)
    assert "staged as lax.scan" in caplog.text
    assert dy2st.to_static(f)(jnp.arange(3.0)).dtype == out.dtype


def test_static_range_needing_python_index_unrolls(caplog):
    def f(x):
        acc = jnp.zeros(())
        for i in range(1, 4):
            acc = acc + x[:i].sum()  # a slice needs a Python int
        return acc

    dy2st.set_verbosity(1)
    try:
        with caplog.at_level(logging.INFO, logger="dy2st"):
            check_equivalent(f, jnp.arange(5.0), grad_argnums=0)
    finally:
        dy2st.set_verbosity(0)
    assert "unrolled" in caplog.text
    assert "scan" not in str(dy2st.to_static(f).get_concrete_program(jnp.arange(5.0)).jaxpr)


def test_static_range_with_python_counter_unrolls_exactly():
    def f(x):
        count = 0
        for i in range(4):
            x = x + 1.0
            count += i
        return x, count

    check_equivalent(f, jnp.zeros(2))
    jaxpr = dy2st.to_static(f).get_concrete_program(jnp.zeros(2)).jaxpr
    assert "scan" not in str(jaxpr)


# -- break / continue / return -------------------------------------------------------------
def break_continue_return(xs):
    total = jnp.zeros(())
    for x in xs:
        s = x.sum()
        if s > 15.0:
            return total * 100.0
        if s < 0.0:
            continue
        if s == 0.0:
            break
        total = total + s
    else:
        total = total - 1.0
    return total


def for_else(xs):
    total = jnp.zeros(())
    for x in xs:
        if x.sum() > 100.0:
            break
        total = total + x.sum()
    else:
        total = total + 0.5
    return total


def nested_break(xs):
    total = jnp.zeros(())
    for x in xs:
        for v in x:
            if v > 2.0:
                break
            total = total + v
        if total > 5.0:
            break
    return total


def nested_return(xs):
    for x in xs:
        for v in x:
            if v > 4.0:
                return v * 10.0
    return jnp.zeros(())


@pytest.mark.parametrize("name", list(ROWS))
@pytest.mark.parametrize("fn", [break_continue_return, for_else, nested_break, nested_return])
def test_break_continue_return(fn, name):
    check_equivalent(fn, ROWS[name], grad_argnums=0)
    if name == "mixed":  # one staged gradient per function keeps the file fast
        check_jit_grad(fn, ROWS[name])


def test_break_in_python_list_loop_traced_part_way():
    def f(x, scales):
        for s in scales:
            x = x * s
            if x.sum() > 10.0:
                break
        return x

    for x in [jnp.ones(2), jnp.full(2, 6.0), jnp.full(2, 0.01)]:
        check_equivalent(f, x, [2.0, 3.0, 4.0], jit=False, grad_argnums=0)


def test_break_in_static_range_traced_part_way():
    def f(x):
        for i in range(6):
            x = x * 2.0
            if x.sum() > 20.0:
                break
        return x

    for x in [jnp.ones(2), jnp.full(2, 11.0), jnp.full(2, 1e-3)]:
        check_equivalent(f, x, grad_argnums=0)
        check_jit_grad(f, x)


class Counter:
    def __init__(self):
        self.count = jnp.zeros(())


def loop_in_if(xs):
    h = jnp.zeros(3)
    if xs.sum() > 0:
        for r in xs:
            h = h + r
    else:
        h = h - 1
    return h


def attribute_item_and_tuple_state(xs):
    c = Counter()
    d = {"a": jnp.zeros(3)}
    hc = (jnp.zeros(3), jnp.ones(3))
    for r in xs:
        c.count = c.count + r.sum()
        d["a"] = d["a"] + r
        h, g = hc
        hc = (h + r, g * 2)
    return c.count, d["a"], hc


def while_with_inner_static_for(x):
    while x.sum() < 100:
        for k in range(3):
            x = x + k
    return x


def index_in_python_if(x):
    h = x
    for i in range(4):
        if i == 0:
            h = h * 2
        else:
            h = h + i
    return h


@pytest.mark.parametrize("fn", [loop_in_if, attribute_item_and_tuple_state])
def test_loops_in_branches_and_composite_state(fn):
    check_equivalent(fn, X, grad_argnums=0)
    check_equivalent(fn, -X, grad_argnums=0)


def test_static_for_inside_traced_while_and_vmap():
    check_equivalent(while_with_inner_static_for, jnp.ones(2))
    g = dy2st.to_static(while_with_inner_static_for)
    xs = jnp.stack([jnp.ones(2), jnp.full(2, 30.0)])
    np.testing.assert_allclose(jax.vmap(g)(xs), jnp.stack([while_with_inner_static_for(x) for x in xs]))


def test_index_compared_in_body_still_stages():
    check_equivalent(index_in_python_if, jnp.ones(2), grad_argnums=0)
    assert "scan" in str(dy2st.to_static(index_in_python_if).get_concrete_program(jnp.ones(2)).jaxpr)


def continue_in_static_range(x):
    for i in range(5):
        if x[i % 2] > i:
            continue
        x = x + i
    return x


def return_in_static_range(x):
    for i in range(5):
        x = x * 1.5
        if x.sum() > 10:
            return x, i
    return x, -1


def nested_static_ranges(x):
    for i in range(3):
        for j in range(4):
            x = x * 0.9 + j
    return x


def while_in_for(xs):
    out = jnp.zeros(())
    for r in xs:
        k = 0
        while r.sum() < 50.0:
            r = r * 2
            k += 1
        out = out + k
    return out


@pytest.mark.parametrize("fn", [continue_in_static_range, return_in_static_range, nested_static_ranges])
@pytest.mark.parametrize("x", [jnp.array([3.0, 0.5]), jnp.array([-1.0, 9.0])])
def test_static_ranges_with_continue_return_nesting(fn, x):
    check_equivalent(fn, x, grad_argnums=0)


def test_while_nested_in_array_loop():
    check_equivalent(while_in_for, jnp.arange(1.0, 7.0).reshape(3, 2))


# -- carried state -----------------------------------------------------------------------------
def test_variable_first_assigned_in_staged_loop():
    def f(xs):
        for x in xs:
            y = x * 2.0
        return y

    check_equivalent(f, X, grad_argnums=0)

    def g(x):
        while x.sum() < 10.0:
            x = x + 1.0
            last = x.max()
        return last

    check_equivalent(g, jnp.ones(2))


def test_python_scalar_start_promoted():
    def f(x):
        s = 0
        while x.sum() < 10.0:
            x = x + 1.0
            s = s + x.sum()
        return s

    check_equivalent(f, jnp.ones(2))


def test_shape_change_is_an_error_naming_variable_and_line():
    def f(x):
        while x.sum() < 100.0:
            x = jnp.concatenate([x, x])
        return x

    with pytest.raises(LoopVariableError) as err:
        dy2st.to_static(f)(jnp.ones(2))
    text = str(err.value)
    assert "test_loops.py" in text and "while x.sum() < 100.0:" in text
    assert "'x'" in text and "float32[2]" in text and "float32[4]" in text


def test_dtype_change_is_an_error():
    def f(x, n):
        for i in range(n):
            n = n.astype(jnp.float32)
        return n

    with pytest.raises(LoopVariableError) as err:
        dy2st.to_static(f)(jnp.ones(2), jnp.array(3, dtype=jnp.int32))
    assert "'n'" in str(err.value) and "int32[]" in str(err.value) and "float32[]" in str(err.value)


# -- gradients --------------------------------------------------------------------------------
def bounded_newton(x):
    y = x
    err = jnp.abs(y * y - x).max()
    while err > 1e-5:
        dy2st.set_loop_options(maximum_iterations=30)
        y = 0.5 * (y + x / y)
        err = jnp.abs(y * y - x).max()
    return y


def test_gradient_through_bounded_while():
    x = jnp.array([2.0, 9.0])
    check_equivalent(bounded_newton, x, grad_argnums=0, rtol=1e-4)
    check_jit_grad(bounded_newton, x, rtol=1e-4)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda v: dy2st.to_static(bounded_newton)(v).sum()))(x), 0.5 / jnp.sqrt(x), rtol=1e-4)


def test_gradient_through_unbounded_while_is_a_clear_error():
    with pytest.raises(LoopGradientError) as err:
        jax.jit(jax.grad(lambda v: dy2st.to_static(newton_sqrt)(v).sum()))(jnp.array([2.0]))
    text = str(err.value)
    assert "test_loops.py" in text and "while err > 1e-5:" in text
    assert "set_loop_options(maximum_iterations=" in text


def newton_with_an_iteration_cap(x, tol=1e-5, max_iter=30):
    y, it = x, 0
    err = jnp.abs(y * y - x).max()
    while err > tol and it < max_iter:  # the counter bounds the loop: jax.grad needs no options
        y = 0.5 * (y + x / y)
        err = jnp.abs(y * y - x).max()
        it += 1
    return y, it


def doubles_until_big_or_three_times(w, x):
    p = x * w
    i = 0
    while i < 3:  # (a Python condition, until the traced `break` flag makes the rest staged)
        if p.sum() > 5:
            break
        p = p * 2
        i += 1
    return (p ** 2).sum()


def counts_with_a_continue(x):
    i, s = 0, x
    while s.sum() < 100 and i < 5:  # a `continue` may skip the step: no bound read from it
        s = s * 2
        if s.sum() > 50:
            continue
        i += 1
    return s.sum()


@pytest.mark.parametrize("max_iter", [0, 1, 3, 30])
def test_gradient_through_a_while_bounded_by_its_counter(max_iter):
    """`while err > tol and it < max_iter:` with `it += 1` per iteration: the counter bounds the
    loop, so under jax.grad it is a scan of that many masked steps (it was a LoopGradientError
    asking for set_loop_options)."""
    x = jnp.array([2.0, 9.0])
    loss = lambda f: (lambda v: f(v, max_iter=max_iter)[0].sum())
    static = dy2st.to_static(newton_with_an_iteration_cap)
    want = jax.grad(loss(newton_with_an_iteration_cap))(x)
    for _ in range(2):
        np.testing.assert_allclose(jax.grad(loss(static))(x), want, rtol=1e-4)
    np.testing.assert_allclose(jax.jit(jax.grad(loss(static)))(x), want, rtol=1e-4)
    got, want = static(x, max_iter=max_iter), newton_with_an_iteration_cap(x, max_iter=max_iter)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    assert int(got[1]) == want[1]


@pytest.mark.parametrize("x", [jnp.array([1.0, 1.0]), jnp.array([3.0, 3.0])])
def test_gradient_through_a_counted_while_a_traced_break_stages(x):
    """(Probe of peers' tests: the gradient of such a loss inside a converted function was a
    LoopGradientError, though the loop runs at most three times.)"""
    outer = lambda x: jax.grad(doubles_until_big_or_three_times)(jnp.float32(1.0), x)
    for _ in range(2):
        np.testing.assert_allclose(dy2st.to_static(outer)(x), outer(x), rtol=1e-6)


def test_a_counter_a_continue_may_skip_is_no_bound():
    with pytest.raises(LoopGradientError):
        jax.jit(jax.grad(dy2st.to_static(counts_with_a_continue)))(jnp.ones(2))


def test_set_loop_options_is_a_no_op_eagerly():
    np.testing.assert_allclose(bounded_newton(jnp.array([4.0])), [2.0], rtol=1e-5)
    with pytest.raises(ValueError):
        dy2st.set_loop_options(maximum_iterations=-1)


# -- list.append ------------------------------------------------------------------------------
def append_rows(xs):
    outs = []
    h = jnp.zeros(xs.shape[1])
    for x in xs:
        h = jnp.tanh(h + x)
        outs.append(h)
    return jnp.stack(outs), outs[-1]


def append_range(x):
    outs = [x]
    for i in range(5):
        x = x * 0.5 + i
        outs.append(x)
        outs.append(-x)
    return jnp.stack(outs)


def test_list_append_in_staged_loops():
    check_equivalent(append_rows, X, grad_argnums=0)
    check_equivalent(append_rows, X[:1])
    check_equivalent(append_range, jnp.ones(3), grad_argnums=0)
    check_jit_grad(append_rows, X)
    assert "scan" in str(dy2st.to_static(append_range).get_concrete_program(jnp.ones(3)).jaxpr)


def test_list_append_in_unbounded_loop_is_a_clear_error():
    def f(x):
        outs = []
        while x.sum() < 10.0:
            x = x + 1.0
            outs.append(x)
        return jnp.stack(outs)

    with pytest.raises(LoopVariableError) as err:
        dy2st.to_static(f)(jnp.ones(2))
    assert "'outs'" in str(err.value) and ".at[i].set" in str(err.value)


# -- examples ------------------------------------------------------------------------------------
W = jax.random.normal(jax.random.PRNGKey(0), (4, 4)) * 0.5


def rnn_data_dependent_length(xs, n):
    h = jnp.zeros(xs.shape[1])
    t = 0
    while t < n:
        dy2st.set_loop_options(maximum_iterations=xs.shape[0])
        h = jnp.tanh(W @ h + xs[t])
        t = t + 1
    return h


@pytest.mark.parametrize("n", [0, 1, 5])
def test_rnn_over_data_dependent_length(n):
    xs = jax.random.normal(jax.random.PRNGKey(1), (6, 4))
    check_equivalent(rnn_data_dependent_length, xs, jnp.array(n), grad_argnums=0)
    check_jit_grad(rnn_data_dependent_length, xs, jnp.array(n))


EOS = 0
TABLE = jnp.array([[5.0, 0, 0, 0], [0, 0, 3, 1], [0, 0, 0, 4], [2, 0, 0, 1]])  # next-token logits


def greedy_decode(tok):
    out = jnp.full(6, -1)
    for i in range(6):
        tok = jnp.argmax(TABLE[tok])
        out = out.at[i].set(tok)
        if tok == EOS:
            break
    return out


@pytest.mark.parametrize("start", [0, 1, 2, 3])
def test_greedy_decoding_with_early_stop(start):
    check_equivalent(greedy_decode, jnp.array(start))


def reversed_traced_range(x, n):
    acc = x
    for i in reversed(range(n)):
        acc = acc * 2 + i
    return acc


def enumerate_reversed_stepped_range(x, n):
    acc = x
    for j, i in enumerate(reversed(range(1, n, 2))):
        acc = acc - i * j
    return acc


def zip_reversed_range_and_rows(x, n):
    acc = x[0] * 0
    for i, v in zip(reversed(range(n)), reversed(x)):
        acc = acc + v * i
    return acc


@pytest.mark.parametrize("fn", [reversed_traced_range, enumerate_reversed_stepped_range, zip_reversed_range_and_rows])
@pytest.mark.parametrize("n", [0, 1, 3, 4])
def test_reversed_range_of_a_traced_bound_is_staged(fn, n):
    """`reversed(range(n))` in a `for` header (also inside enumerate/zip) with a traced `n` is a
    staged loop from the last item (it was refused: a traced range has no items)."""
    x = jnp.array([1.0, 2.0, 3.0])
    check_equivalent(fn, x, jnp.int32(n), jit=False, grad_argnums=0)
    check_equivalent(fn, x, n)


def _applies_a_lambda_made_per_iteration(x, n):
    for i in range(n):
        add = lambda v: v + 1  # noqa: E731 (made and used in the iteration only)
        x = add(x)
    return x


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_lambda_made_and_used_in_a_staged_iteration_is_not_carried(n):
    # (a body making a closure carried every name it writes: the lambda itself was refused)
    static = dy2st.to_static(_applies_a_lambda_made_per_iteration)
    for _ in range(2):
        np.testing.assert_array_equal(static(jnp.ones(2), jnp.array(n)), _applies_a_lambda_made_per_iteration(jnp.ones(2), n))


def breaks_in_a_product(x):
    acc = x
    for a, b in itertools.product([1, 2], [3, 4]):
        if acc.sum() > a * b:
            break
        acc = acc + a
    return acc


def breaks_in_a_count(x):
    acc = x
    for i in itertools.count():
        if acc.sum() > 20 or i > 5:
            break
        acc = acc + 1
    return acc


@pytest.mark.parametrize("scale", [0.0, 1.0, 3.0])
def test_a_traced_break_in_a_loop_over_an_itertools_iterator_made_in_its_header(scale):
    """Found by a stdlib probe: refused as an iterator other code may read, though only the loop
    holds one made in its header. An endless one (`count()`) is refused saying to write a while."""
    check_equivalent(breaks_in_a_product, jnp.ones(3) * scale)
    with pytest.raises(dy2st.errors.LoopVariableError, match="never ends"):
        dy2st.to_static(breaks_in_a_count)(jnp.ones(3) * scale)


def routes_by_slicing_with_the_index(gate, x):
    idx = gate.argmax(-1)
    out = jnp.zeros_like(x)
    for e in range(gate.shape[1]):
        if (idx == e).any():
            out = out + x * gate[:, e:e + 1]  # a slice by the index: Python ints eagerly
    return out


def test_a_range_whose_staged_branch_slices_by_the_index_unrolls():
    """Tried as a scan, the index is traced and the branch's slice raised IndexError, which was
    deferred to run time: the call raised jax's raw IndexError (under jax.grad, every call ran
    eagerly). A branch raising while a range is tried as a scan now unrolls it (models probe:
    a mixture-of-experts router)."""
    gate = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(0), (4, 3)))
    x = jnp.ones((4, 5))
    check_equivalent(routes_by_slicing_with_the_index, gate, x, grad_argnums=0)
    static = dy2st.to_static(routes_by_slicing_with_the_index)
    for _ in range(2):
        np.testing.assert_allclose(static(gate, x), routes_by_slicing_with_the_index(gate, x), rtol=1e-6)
