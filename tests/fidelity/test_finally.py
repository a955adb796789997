"""`finally` as Python has it: a `break`, `continue` or `return` there discards the exception in
flight, and its `return` overrides the `try`'s; a `return` that its `finally` would cancel is
refused at the `try`. A `try`'s `else` runs only where its body ran to the end: not after the
body returned, broke or continued."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import UnsupportedSyntaxError


def break_discards(n):
    i = -1
    for i in range(n):
        try:
            if i == 1:
                raise ValueError("dropped")
        finally:
            if i >= 1:
                break
    return i


def continue_discards(n):
    out = []
    for i in range(n):
        try:
            if i % 2:
                raise KeyError(i)
            out.append(i)
        finally:
            continue
    return out


def return_overrides(n):
    try:
        if n > 1:
            raise ValueError("dropped")
        return n
    finally:
        n = n + 1
        return n * 10


def raises_through(n):
    for i in range(n):
        try:
            raise IndexError(i)
        finally:
            if i > 5:
                break
    return n


def traced_loop_with_finally_break(x):
    while x.sum() < 10:
        try:
            x = x + 1
        finally:
            if x.sum() > 5:
                break
    return x


@pytest.mark.parametrize("fn, args", [
    (break_discards, (0,)), (break_discards, (1,)), (break_discards, (3,)),
    (continue_discards, (0,)), (continue_discards, (4,)),
    (return_overrides, (1,)), (return_overrides, (3,)),
    (traced_loop_with_finally_break, (jnp.zeros(2),)), (traced_loop_with_finally_break, (jnp.ones(2) * 7,)),
])
def test_finally_jumps_as_python(fn, args):
    static = dy2st.to_static(fn)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(static(*args)), np.asarray(fn(*args)))
    if any(isinstance(a, jax.Array) for a in args):
        np.testing.assert_array_equal(jax.jit(dy2st.to_static(fn))(*args), fn(*args))


def test_an_exception_not_discarded_still_raises():
    with pytest.raises(IndexError):
        raises_through(2)
    with pytest.raises(IndexError):
        dy2st.to_static(raises_through)(2)


def cancelled_return(x):
    for i in range(3):
        try:
            return x + i
        finally:
            if i < 2:
                continue
    return x


def test_a_return_its_finally_cancels_is_refused_at_the_try():
    with pytest.raises(UnsupportedSyntaxError, match=r"(?s)return.*finally.*cancels the return.*To fix") as info:
        dy2st.to_static(cancelled_return)(jnp.ones(1))
    assert info.value.origin.lineno == cancelled_return.__code__.co_firstlineno + 2


def returns_a_list_an_outer_finally_appends_to(x, y):
    log = [0]
    try:
        try:
            raise ValueError("v")
        finally:
            if (y < x).any():
                return log  # the ValueError is discarded; the outer `finally` still appends
        log.append(5)
    finally:
        log.append(13)
    return log


def test_a_returned_list_an_outer_finally_changes_is_the_same_list():
    # the cond gave back a copy of `log` as the return value (the other side raises when the
    # data takes it), so the outer `finally`'s append missed it: [0] for eager's [0, 13]
    static = dy2st.to_static(returns_a_list_an_outer_finally_appends_to)
    for _ in range(2):
        out = static(jnp.ones(2), jnp.zeros(2))
        assert len(out) == 2 and out[0] == 0 and out[1] == 13
    with pytest.raises(ValueError):
        static(-jnp.ones(2), jnp.zeros(2))


def else_after_return(x, k):
    mark = 0
    try:
        if k > 1:
            return x + 1, mark
        if x.sum() > 2:  # (the data decides this one)
            return x + 2, mark
        mark = k + 1
    except ValueError:
        return x + 3, mark
    else:
        mark = mark * 10
        x = x * 10
    finally:
        mark = -1  # (after the value to return was taken)
    return x, mark


def else_after_jumps(x, ks):
    seen, caught = 0, 0
    for k in ks:
        try:
            if k == 2:
                break
            if k == 0:
                continue
            if k == 5:
                raise KeyError(k)
            if x.sum() > 3:  # traced: the `else` is staged under the loop's flags
                continue
        except KeyError:
            caught += 1
        else:
            x = x + 100
            seen = seen * 10 + k
    return x, seen, caught


def raises_in_else(x, k):
    try:
        if k:
            return x
    except ZeroDivisionError:
        return x - 1
    else:
        return x / 0 if isinstance(k, str) else 1 // k  # raises out of the `try`: not caught


@pytest.mark.parametrize("fn, args", [
    (else_after_return, (jnp.ones(2), 2)), (else_after_return, (jnp.ones(2), 0)),
    (else_after_return, (jnp.zeros(2), 0)),
    (else_after_jumps, (jnp.zeros(2), [])), (else_after_jumps, (jnp.zeros(2), [1, 0, 5, 2, 1])),
    (else_after_jumps, (jnp.zeros(2), [3, 1])), (else_after_jumps, (jnp.ones(2) * 2, [1, 3])),
])
def test_try_else_runs_only_where_the_body_ran_to_its_end(fn, args):
    static = dy2st.to_static(fn)
    for _ in range(2):
        jax.tree_util.tree_map(np.testing.assert_array_equal, static(*args), fn(*args))
    if fn is else_after_return:
        jitted = jax.jit(static, static_argnums=1)
        for _ in range(2):
            jax.tree_util.tree_map(np.testing.assert_array_equal, jitted(*args), fn(*args))


def test_an_exception_in_else_is_not_caught_by_the_try():
    static = dy2st.to_static(raises_in_else)
    for k in (0, 0):
        with pytest.raises(ZeroDivisionError):
            static(jnp.ones(2), k)
    np.testing.assert_array_equal(static(jnp.ones(2), 1), raises_in_else(jnp.ones(2), 1))


# -- a `continue` in `finally` discards the `try`'s `break`; a `raise` in a `try` leads to its
# handlers (liveness), as Python has them


def continue_in_finally_cancels_break(x, k):
    out = []
    for i in range(k):
        try:
            if i == 1:
                break
            out.append(i)
        finally:
            continue
    return out, x


def continue_in_finally_cancels_a_traced_break(x):
    i = 0
    while i < 3:
        i += 1
        try:
            if x.sum() > i:
                break
        finally:
            continue
    return x * i


def assigned_before_a_caught_raise(x):
    y = x
    try:
        if x.sum() > 0:  # staged: `y` leaves the cond though the next line raises
            y = x * 2
        raise ValueError
    except ValueError:
        pass
    return y


class Suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


def assigned_before_a_suppressed_raise(x):
    y = x
    with Suppress():
        if x.sum() > 0:
            y = x * 2
        raise RuntimeError("suppressed")
    return y


def read_by_finally_after_a_return(x):
    y = x
    try:
        if x.sum() > 0:
            y = x * 3
        return x
    finally:
        x = y + 1  # (eager returns x as it was: the finally's assignment comes after)


@pytest.mark.parametrize("fn, args", [
    (continue_in_finally_cancels_break, (jnp.ones(2), 0)), (continue_in_finally_cancels_break, (jnp.ones(2), 3)),
    (continue_in_finally_cancels_a_traced_break, (jnp.ones(2),)),
    (continue_in_finally_cancels_a_traced_break, (-jnp.ones(2),)),
    (assigned_before_a_caught_raise, (jnp.ones(2),)), (assigned_before_a_caught_raise, (-jnp.ones(2),)),
    (assigned_before_a_suppressed_raise, (jnp.ones(2),)), (assigned_before_a_suppressed_raise, (-jnp.ones(2),)),
    (read_by_finally_after_a_return, (jnp.ones(2),)), (read_by_finally_after_a_return, (-jnp.ones(2),)),
])
def test_jumps_and_raises_in_try_as_python(fn, args):
    static = dy2st.to_static(fn)
    for _ in range(2):
        jax.tree_util.tree_map(np.testing.assert_array_equal, static(*args), fn(*args))
    if len(args) == 1:
        jax.tree_util.tree_map(np.testing.assert_array_equal, jax.jit(static)(*args), fn(*args))


def loops_after_a_suppressed_raise(x):
    total = x
    with Suppress():
        raise RuntimeError("suppressed")
    try:
        for i in range(3):  # nested after the `with`: analysed as reached
            if total.sum() > 10:
                break
            total = total + i
    finally:
        total = total * 2
    return total


def test_code_after_a_with_whose_body_raises_converts():
    for x in (jnp.ones(2), jnp.ones(2) * 8):
        static = dy2st.to_static(loops_after_a_suppressed_raise)
        for _ in range(2):
            np.testing.assert_array_equal(static(x), loops_after_a_suppressed_raise(x))
        np.testing.assert_array_equal(jax.jit(static)(x), loops_after_a_suppressed_raise(x))
