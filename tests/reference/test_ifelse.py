"""Differential tests of if/elif/else, ternaries, and/or/not, chained comparisons and early
return: eager == to_static == jit(to_static), gradients where defined."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.testing import check_equivalent

POS = jnp.array([1.0, 2.0, 3.0])
NEG = jnp.array([-1.0, -2.0, -3.0])
MIX = jnp.array([-3.0, 1.0, 1.0])


def simple_if(x):
    if x.sum() > 0:
        y = x * 2
    else:
        y = x - 1
    return y


def if_no_else(x):
    y = x + 1
    if x.sum() > 0:
        y = y * 3
    return y


def elif_chain(x):
    s = x.sum()
    if s > 3:
        y = x * 3
    elif s > 0:
        y = x * 2
    elif s > -3:
        y = x - 1
    else:
        y = -x
    return y


def nested_if(x):
    if x[0] > 0:
        if x[1] > 0:
            y = x + 10
        else:
            y = x + 20
    else:
        if x.sum() > -10:
            y = x - 10
        else:
            y = x - 20
    return y


def early_return(x):
    if x.sum() > 0:
        return x * 2
    x = x - 1
    return x


def return_in_both(x):
    if x.sum() > 0:
        return x * 2
    else:
        return x * 3


def nested_early_return(x):
    if x[0] > 0:
        if x[1] > 1:
            return x * 10
        x = x + 1
    y = x * 2
    if y.sum() < -5:
        return y - 100
    return y


def ternary(x):
    y = x * 2 if x.sum() > 0 else x - 1
    return y + (1.0 if x[0] > 0 else 2.0)


def and_or_not(x):
    if x.sum() > 0 and x[0] > 0:
        y = x + 1
    elif x.sum() < 0 or x[0] < -2:
        y = x - 1
    else:
        y = x
    if not x[1] > 0:
        y = y * 2
    return y


def and_value(x):
    # the value of `and`/`or` itself (not just its truth) must match eager Python
    a = (x.sum() > 0) and (x[0] > 0)
    b = (x.sum() > 0) or (x[0] > 0)
    return jnp.where(a, 1.0, 0.0) + jnp.where(b, 10.0, 0.0)


def chained_compare(x):
    if -1.0 < x.sum() < 7.0:
        return x * 2
    return x


def tuple_and_attr_assign(x):
    class Box:
        pass

    box = Box()
    box.v = x
    d = {"k": x}
    if x.sum() > 0:
        a, b = x + 1, x + 2
        box.v = x * 5
        d["k"] = x * 7
    else:
        a, b = x - 1, x - 2
        box.v = x * 6
    return a, b, box.v, d["k"]


def python_scalar_merge(x):
    n = 0
    if x.sum() > 0:
        n = 1
    return x * n


def unchanged_python_value(x):
    k = 3
    if x.sum() > 0:
        y = x * 2
    else:
        y = x
    return y * k, k


def weak_type_promotion(x):
    if x.sum() > 0:
        y = 1.0
    else:
        y = x.sum()
    return y


@pytest.mark.parametrize(
    "fn",
    [simple_if, if_no_else, elif_chain, nested_if, early_return, return_in_both, nested_early_return,
     ternary, and_or_not, chained_compare, python_scalar_merge, unchanged_python_value, weak_type_promotion],
)
@pytest.mark.parametrize("x", [POS, NEG, MIX, jnp.array([5.0, 0.5, 0.0]), jnp.array([0.5, 3.0, -0.5])])
def test_branches_differential_with_grad(fn, x):
    check_equivalent(fn, x, grad_argnums=0)


@pytest.mark.parametrize("x", [POS, NEG, MIX])
def test_and_or_values(x):
    check_equivalent(and_value, x)


@pytest.mark.parametrize("x", [POS, NEG])
def test_tuple_attribute_subscript_assignments(x):
    check_equivalent(tuple_and_attr_assign, x)


def test_python_predicate_runs_only_taken_branch():
    calls = []

    def f(x, flag):
        if flag:
            calls.append("if")
            y = x + 1
        else:
            calls.append("else")
            y = x.undefined_attribute  # never evaluated: flag is a Python value
        return y

    out = dy2st.to_static(f)(POS, True)
    np.testing.assert_allclose(out, POS + 1)
    assert calls == ["if"]


def test_short_circuit_python_left_operand():
    def f(x):
        if x is not None and x.sum() > 0:
            return x * 2
        return jnp.zeros(3)

    check_equivalent(f, POS)
    check_equivalent(f, NEG)
    assert dy2st.to_static(f)(None).shape == (3,)


def test_python_branch_keeps_python_values_for_later_python_code():
    def f(x, n):
        if n > 2:
            k = 2
        else:
            k = 1
        # k stays a Python int: usable as a shape
        return jnp.zeros((k,)) + x.sum()

    check_equivalent(f, POS, 3)
    check_equivalent(f, POS, 1)


def test_same_shape_new_values_compiles_once():
    f = dy2st.to_static(simple_if)
    f(POS)
    f(NEG)
    f(MIX)
    assert len(f.programs) == 1
    f(jnp.ones(5))
    assert len(f.programs) == 2


def test_python_scalar_arguments_are_static():
    def f(x, n):
        return x * n

    g = dy2st.to_static(f)
    g(POS, 2)
    g(NEG, 2)
    assert len(g.programs) == 1
    np.testing.assert_allclose(g(POS, 3), POS * 3)
    assert len(g.programs) == 2


def test_keyword_arguments_and_pytrees():
    def f(d, scale=1.0):
        if d["a"].sum() > 0:
            return {"out": d["a"] * scale + d["b"]}
        return {"out": d["b"]}

    check_equivalent(f, {"a": POS, "b": NEG}, scale=2.0, jit=False)
    check_equivalent(f, {"a": NEG, "b": NEG}, scale=2.0, jit=False)


def test_vmap_of_static_function():
    f = dy2st.to_static(simple_if)
    xs = jnp.stack([POS, NEG, MIX])
    expected = jnp.stack([simple_if(x) for x in xs])
    np.testing.assert_allclose(jax.vmap(f)(xs), expected)
