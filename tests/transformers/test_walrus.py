"""`:=` in converted code (issue 30): a `while` condition that binds a name converts (it was
refused by the fence), and an `and`/`or`, chained comparison or ternary holding one keeps the
binding the function's (a thunk made it a lambda's: `m` kept its old value, silently), deciding
in Python, or is refused at its line where a traced operand decides."""

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import TracedValueError
from dy2st.testing import check_equivalent

ONES = jnp.ones(3)


def while_binds_the_sum(x):
    total = 0.0
    while (s := x.sum()) < 10:
        x = x + 1
        total = total + s
    return x, total, s


def while_else_continue_break(x, n):
    k = 0
    while (m := x.max()) < 8:
        k += 1
        x = x + 1
        if x[0] > 3:
            continue
        if k > n:
            break
        x = x * 1.5
    else:
        k = k + 100
    return x, k, m


def while_on_python_values(xs):
    out = []
    i = 0
    while (v := len(xs) - i) > 0:
        out.append(v)
        i += 1
    return out, v


@pytest.mark.parametrize("scale", [0.5, 1.0, 20.0])  # several trip counts, zero included
def test_a_while_condition_that_binds_a_name(scale):
    check_equivalent(while_binds_the_sum, ONES * scale)


@pytest.mark.parametrize("n", [0, 2, 30])
@pytest.mark.parametrize("scale", [1.0, 9.0])
def test_a_binding_while_with_else_continue_and_break(n, scale):
    check_equivalent(while_else_continue_break, ONES * scale, n)
    check_equivalent(while_else_continue_break, ONES * scale, jnp.int32(n))


def test_a_binding_while_on_python_values():
    static = dy2st.to_static(while_on_python_values)
    for xs in ([], [1, 2, 3]):
        for _ in range(2):
            assert static(xs) == while_on_python_values(xs)


def binds_in_and(x, flag):
    m = 0.0
    if flag and (m := x.max()) > 0.5:
        x = x + m
    return x, m


def binds_in_ternary(x, flag):
    y = (m := x.sum()) * 2 if flag else x.min()
    return y, (m if flag else None)


def binds_in_chain(x, lo):
    if lo < (m := x.shape[0]) < 10:
        x = x * m
    return x


@pytest.mark.parametrize("flag", [True, False])
def test_a_binding_in_and_or_ternary_decided_in_python(flag):
    for x in (ONES, -ONES):
        check_equivalent(binds_in_and, x, flag)
        check_equivalent(binds_in_ternary, x, flag)
        check_equivalent(binds_in_chain, x, 0 if flag else 5)


def binds_after_traced_test(x):
    m = 0.0
    if x.sum() > 0 and (m := x.max()) > 1:
        x = x + m
    return x, m


def test_a_binding_behind_a_traced_operand_is_refused_at_its_line():
    for x in (ONES, -ONES):
        with pytest.raises(TracedValueError) as info:
            dy2st.to_static(binds_after_traced_test)(x)
        text = str(info.value)
        assert text.startswith(f'File "{__file__}"'), text
        assert "    if x.sum() > 0 and (m := x.max()) > 1:\n" in text
        assert "binds a name with `:=` and one of its operands is a traced value" in text
        assert "To fix: bind the name on its own line before the condition" in text
    with pytest.raises(TracedValueError):
        jax.jit(dy2st.to_static(binds_after_traced_test))(ONES)
