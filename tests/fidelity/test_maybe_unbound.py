"""Locals a traced condition leaves unbound on some paths: read checked where eager reads them.

A staged `if` that assigns `y` on one side only, or a staged loop that first sets `y` and may
run zero times, gives `y` back with a traced flag saying whether the data bound it
(`runtime.undefined.MaybeUnbound`). Each read (`jst.ld`, see `transformers.unbound_reads`)
raises UnboundLocalError when the program runs on data that left it unbound, at that read, as
eagerly; on data that bound it, the value. Reads on paths the data does not take raise nothing.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import UndefinedVariableError
from dy2st.testing import _assert_tree_close

POS, NEG = jnp.array([1.0, 2.0, 3.0]), jnp.array([-1.0, -2.0, -3.0])


def set_and_read_under_one_condition(x):
    if x.sum() > 0:
        y = x * 2
    z = x + 1
    if x.sum() > 0:
        z = z + y
    return z


def set_in_one_branch_read_after(x):
    if x.sum() > 0:
        y = x * 2
    return y  # READ-after-if


def set_in_else_only(x, k):
    if x.sum() > 0:
        pass
    else:
        y = x * k
    w = x - 1
    if x.sum() > 0:
        return w
    return y + w


def first_set_in_loop_read_when_ran(x, n):
    for i in range(n):
        y = x * i
    if n > 0:
        return y
    return x


def first_set_in_loop_read_after(x, n):
    for i in range(n):
        y = x * i
    return y  # READ-after-loop


def last_positive(xs):
    for v in xs:
        if v > 0:
            last = v
    return last  # READ-last


def read_in_a_later_iteration(x, n):
    s = 0.0
    for i in range(n):
        if x[i] > 0:
            s = s + prev  # READ-prev
        prev = x[i]
    return s


def paddle_for_loop_dyfunc2(max_len):
    # Paddle's dygraph_to_static test_loop.py: a variable read in the loop before it is set
    x = jnp.full((1, 2), 1, dtype="int32")
    for i in range(max_len):
        if i > 1:
            s = a
        a = 1
        q, _ = x.shape
    return jnp.full((1,), s + q, dtype="int32")  # READ-paddle


def augmented_after_if(x):
    if x.sum() > 0:
        acc = x
    if x[0] > 0:
        acc += 1.0
        return acc
    return x


def python_value_in_one_branch(x):
    if x.sum() > 0:
        label = "pos"
        k = 3
    if x.sum() > 0:
        return x * k, label
    return x, "pos"


def read_in_a_lambda(x):
    if x.sum() > 0:
        y = x * 2
    f = lambda: y + 1  # a lambda's free read goes through jst.ld too
    if x.sum() > 0:
        return f()
    return x


def _marker_line(fn, marker: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except Exception as err:  # noqa: BLE001 - the test compares what each raises
        return None, err


def check_each_call(fn, inputs, marker=None):
    """Eager, to_static and jit(to_static), each called on every input twice: the same values,
    or an UnboundLocalError from all three (to_static's at the user's read, `marker`)."""
    static = dy2st.to_static(fn)
    jitted = jax.jit(static)
    for _ in range(2):
        for args in inputs:
            expected, eager_error = _outcome(fn, *args)
            got, error = _outcome(static, *args)
            if eager_error is None:
                assert error is None, f"{fn.__name__}{args}: eager gave {expected}, to_static raised {error!r}"
                _assert_tree_close(expected, got, f"to_static {fn.__name__}")
                if all(isinstance(a, jax.Array) for a in (*args, *jax.tree_util.tree_leaves(expected))):
                    _assert_tree_close(expected, jitted(*args), f"jit {fn.__name__}", kinds=False)
                continue
            assert isinstance(eager_error, UnboundLocalError), eager_error
            # eager's own error: the call ran eagerly after the program's check failed, keeping
            # what it changed before the read (an UndefinedVariableError where it fails while traced)
            assert isinstance(error, UnboundLocalError), repr(error)
            assert str(eager_error) in str(error), error
            if marker is not None:  # the note names the read (eager's traceback ends there)
                notes = "\n".join(getattr(error, "__notes__", []))
                assert f'File "{__file__}", line {_marker_line(fn, marker)}, in {fn.__name__}' in notes, notes
            if all(isinstance(a, jax.Array) for a in args):
                with pytest.raises(Exception, match="cannot access local variable"):
                    jax.block_until_ready(jitted(*args))


def test_one_branch_read_under_the_same_condition():
    check_each_call(set_and_read_under_one_condition, [(POS,), (NEG,)])


def test_one_branch_read_after_raises_at_the_read():
    check_each_call(set_in_one_branch_read_after, [(POS,), (NEG,)], "READ-after-if")


def test_else_only_with_a_python_argument():
    check_each_call(set_in_else_only, [(POS, 2.0), (NEG, 2.0), (NEG, 3.0)])


@pytest.mark.parametrize("n", [0, 1, 3])
def test_first_set_in_a_traced_loop(n):
    check_each_call(first_set_in_loop_read_when_ran, [(POS, jnp.asarray(n))])
    check_each_call(first_set_in_loop_read_after, [(POS, jnp.asarray(n))], "READ-after-loop")


def test_last_positive_item():
    check_each_call(last_positive, [(POS,), (NEG,), (jnp.array([-1.0, 2.0, -3.0]),)], "READ-last")


def test_read_in_a_later_iteration():
    x_first_neg, x_first_pos = jnp.array([-1.0, 2.0, 1.0]), jnp.array([1.0, 2.0, -1.0])
    check_each_call(read_in_a_later_iteration,
                    [(x_first_neg, jnp.asarray(3)), (x_first_neg, jnp.asarray(0)), (x_first_pos, jnp.asarray(1)),
                     (x_first_pos, jnp.asarray(3))], "READ-prev")


def test_paddle_read_before_set_in_loop():
    check_each_call(paddle_for_loop_dyfunc2, [(jnp.asarray(4),), (jnp.asarray(2),), (jnp.asarray(0),)], "READ-paddle")


def test_augmented_assignment_and_python_values():
    check_each_call(augmented_after_if, [(POS,), (NEG,), (jnp.array([1.0, -5.0, 1.0]),)])
    check_each_call(python_value_in_one_branch, [(POS,), (NEG,)])
    check_each_call(read_in_a_lambda, [(POS,), (NEG,)])


def test_gradient_through_a_one_branch_variable():
    def loss(f):
        return lambda x: jnp.sum(f(x))

    # (under jax.jit the condition is traced: the staged if's MaybeUnbound is differentiated)
    staged = jax.jit(jax.grad(loss(dy2st.to_static(set_and_read_under_one_condition))))
    for x in (POS, NEG):
        expected = jax.grad(loss(set_and_read_under_one_condition))(x)
        np.testing.assert_allclose(staged(x), expected)


def test_reads_are_wrapped_only_where_unbound_is_possible():
    code = dy2st.to_static(set_and_read_under_one_condition).code
    assert "jst.ld(y)" in code
    assert "jst.ld(x)" not in code and "jst.ld(z)" not in code


def read_in_a_nested_function(x):
    if x.sum() > 0:
        y = x * 2
        mode = 1

    def g():  # reads the enclosing function's cells when called: through jst.ld too
        return y + 1, mode == 1

    if x.sum() > 0:
        return g()
    return x, False


def test_a_nested_function_reading_it_checks_it_too():
    check_each_call(read_in_a_nested_function, [(POS,), (NEG,)])


def test_a_nested_generator_using_it_is_refused():
    def f(x):
        if x.sum() > 0:
            y = x * 2

        def gen():  # a generator nested in the function runs as Python, unrewritten
            yield y == 1

        return next(gen())

    with pytest.raises(UndefinedVariableError, match="may be unbound here"):
        dy2st.to_static(f)(POS)


def read_before_set_in_a_loop_run_twice(x, n):
    a = x
    for _ in range(2):  # the second run of the inner loop starts from the first's MaybeUnbound
        for i in range(n):
            if a[i % 3] > 1:
                a = a + prev  # READ-prev-twice
            prev = x[i % 3]
    return a


def test_a_loop_run_again_starts_from_its_maybe_unbound():
    """The inner loop's second run found `prev` a MaybeUnbound before it and a plain value
    after an iteration: refused as a change of structure (fuzzer, models stream)."""
    check_each_call(read_before_set_in_a_loop_run_twice,
                    [(jnp.array([0.5, 3.0, 2.0]), jnp.asarray(3)), (jnp.array([2.0, 3.0, 0.5]), jnp.asarray(3)),
                     (jnp.array([2.0, 3.0, 0.5]), jnp.asarray(0))], "READ-prev-twice")


def appends_then_reads_what_the_data_left_unbound(x, xs):
    if x.sum() > 0:
        y = x
    xs.append(x)
    return y


def test_changes_before_the_failed_read_are_kept():
    """The program's check failed and what the call appended before the read was lost with the
    program's outputs (fuzzer, models stream): eager's append stays."""
    static = dy2st.to_static(appends_then_reads_what_the_data_left_unbound)
    for _ in range(2):
        eager_list, static_list = [], []
        with pytest.raises(UnboundLocalError):
            appends_then_reads_what_the_data_left_unbound(NEG, eager_list)
        with pytest.raises(UnboundLocalError):
            static(NEG, static_list)
        assert len(static_list) == len(eager_list) == 1


def appends_to_a_list_first_set_in_a_loop(x, n):
    for i in range(n):
        acc = [x * i]
    acc.append(x)  # a change in place of a name that may be unbound: read just before
    return acc


def sets_an_item_of_a_dict_set_in_one_branch(x):
    if x.sum() > 0:
        d = {"a": x}
    d["b"] = x * 2
    return d


def test_changes_in_place_of_a_local_that_may_be_unbound():
    """`acc.append(x)` on a name that may be unbound was refused naming internal code ("the
    call changes jst.ld(acc) in place"): the read now goes before the statement."""
    check_each_call(appends_to_a_list_first_set_in_a_loop, [(POS, jnp.asarray(2)), (POS, jnp.asarray(0))])
    check_each_call(sets_an_item_of_a_dict_set_in_one_branch, [(POS,), (NEG,)])
    assert "acc = jst.ld(acc)" in dy2st.to_static(appends_to_a_list_first_set_in_a_loop).code
