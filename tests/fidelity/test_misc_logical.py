"""issue 13, class 10 (d, g) and class 9: and/or with shape-(1,) conditions, early returns,
and the false refusals of nested returns, tuple arguments and `del`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.testing import check_equivalent

INPUTS = [jnp.array([2.0, 1.0]), jnp.array([0.5, 1.0]), jnp.array([-2.0, 1.0]), jnp.array([-2.0, -1.0])]


def one_elem_and_flag(x, flag):
    if x[:1] > 0 and flag:
        return x
    return -x


def flag_or_one_elem(x, flag):
    if flag or x[:1] > 0:
        return x * 2
    return x


def not_of_and(x, flag):
    if not (x[:1] > 0 and flag):
        x = x + 1
    return x


def ternary_with_and(x, flag):
    return x * 2 if x.sum(keepdims=True) > 0 and flag else x


@pytest.mark.parametrize("fn", [one_elem_and_flag, flag_or_one_elem, not_of_and, ternary_with_and])
@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("x", INPUTS)
def test_shape_one_conditions_beside_python_bools(fn, flag, x):
    check_equivalent(fn, x, flag, grad_argnums=0)


def return_in_while_with_shape_one_test(x):
    while x[:1] > 0:
        x = x - 1
        if x[:1] < 0.5:
            return x
    return x


def break_in_for_with_shape_one_test(x):
    for _ in range(4):
        if x[:1] > 3:
            break
        x = x + 1
    return x


@pytest.mark.parametrize("fn", [return_in_while_with_shape_one_test, break_in_for_with_shape_one_test])
@pytest.mark.parametrize("x", [jnp.array([3.0, 1.0]), jnp.array([-1.0, 1.0]), jnp.array([1.2, 0.0])])
def test_generated_and_for_break_and_return(fn, x):
    check_equivalent(fn, x)


def test_and_value_keeps_eager_value():
    def f(x, flag):
        return flag or x[:1] > 0

    check_equivalent(f, jnp.ones(2), False)


def assigned_after_nested_return(x):
    if x.sum() > 0:
        if x[0] > 1:
            return x
        y = x * 2
    else:
        y = x
    return y + 1


def nested_mixed_returns(x):
    if x.sum() > 0:
        if x[0] > 1:
            return 1
        else:
            return x.sum()
    else:
        if x[1] > 0:
            return 2.0
        return 0


def nested_mixed_tuple_returns(x):
    if x.sum() > 0:
        if x[0] > 1:
            return 1, x
        return 2.5, x * 2
    return x.sum(), x


@pytest.mark.parametrize("fn", [assigned_after_nested_return, nested_mixed_returns, nested_mixed_tuple_returns])
@pytest.mark.parametrize("x", INPUTS)
def test_nested_returns(fn, x):
    expected = fn(x)
    static = dy2st.to_static(fn)
    for out in (static(x), jax.jit(static)(x)):
        for e, a in zip(jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(out)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-6)


def unpacks_one_element_tuple(t):
    (a,) = t
    if a.sum() > 0:
        return a
    return -a


@pytest.mark.parametrize("x", [jnp.ones(2), -jnp.ones(2)])
def test_one_element_tuple_argument(x):
    for arg in ((x,), [x]):
        np.testing.assert_allclose(dy2st.to_static(unpacks_one_element_tuple)(arg), unpacks_one_element_tuple(arg))


def deletes_in_staged_if(x):
    y = x * 2
    if x.sum() > 0:
        del y
        z = x
    else:
        z = -x
    return z


def deletes_then_rebinds(x, flag):
    y = x * 2
    if flag:
        del y
        y = x
    return y


@pytest.mark.parametrize("x", [jnp.ones(2), -jnp.ones(2)])
def test_del_in_if(x):
    check_equivalent(deletes_in_staged_if, x)
    for flag in (True, False):
        check_equivalent(deletes_then_rebinds, x, flag)


def deeper_nested_return(x):
    if x.sum() > 0:
        if x[0] > 5:
            if x[1] > 5:
                return x
            z = x - 1
        else:
            z = x + 1
        y = z * 2
    else:
        y = x
    return y + 1


def two_nested_returns(x):
    if x.sum() > 0:
        if x[0] > 5:
            return x
        y = x * 2
        if y[1] > 3:
            return y
        q = y + 1
    else:
        q = x
    return q * 3


@pytest.mark.parametrize("fn", [deeper_nested_return, two_nested_returns])
@pytest.mark.parametrize("values", [[6.0, 6.0], [6.0, 1.0], [1.0, 2.0], [1.0, 1.0], [-3.0, 1.0]])
def test_assigned_after_deeper_returns(fn, values):
    check_equivalent(fn, jnp.array(values), grad_argnums=0)


def _appends_in_a_lazy_operand(x):
    calls = []

    def side(v):
        calls.append(v)
        return v > 0

    r = (x > 1) and side(x) or side(-x)
    return r, len(calls)


def test_a_list_changed_in_a_staged_operand_is_refused_also_inside_a_users_jit():
    # under jax.jit both operands were traced and the list got both items (len 2, eager 1)
    from dy2st.errors import PythonEffectError

    for fn in (dy2st.to_static(_appends_in_a_lazy_operand), jax.jit(dy2st.to_static(_appends_in_a_lazy_operand))):
        with pytest.raises(PythonEffectError, match=r"(?s)calls.append\(v\).*in a side of a staged `and`"):
            fn(jnp.array(3))


# -- effects in lazy operands: the right side of a staged `and`/`or`, a chain's later operand,
# a ternary's sides and the items of a generator after a traced one run whatever the data says
# while traced, where eager Python runs them only on some data: refused at the line, what
# they changed put back


def appends_to(log):
    log.append("called")
    return 10.0


def chain_with_an_effect(x, log):
    if 0 < x.sum() < appends_to(log):
        return x + 1
    return x - 1


def and_with_an_effect(x, log):
    ok = x.sum() > 0 and appends_to(log) > 5
    return jnp.where(ok, x, -x)


def or_with_an_effect(x, log):  # the effect on the second side traced
    ok = x.sum() > 0 or appends_to(log) > 5
    return jnp.where(ok, x, -x)


def bumps(d):
    d["n"] += 1
    return True


def and_bumping_a_counter(x, d):
    return jnp.where(x.sum() > 0 and bumps(d), x, -x)


class Marker:
    last = None

    def mark(self, tag, value):
        self.last = tag
        return value


def ternary_setting_an_attribute(x, log):
    m = Marker()
    log.append(m)
    return m.mark("p", x) if x.sum() > 0 else m.mark("n", -x)


def all_over_a_generator_with_effects(x, log):
    return jnp.where(all(log.append(i) or v > 0 for i, v in enumerate(x)), x, -x)


@pytest.mark.parametrize("fn", [chain_with_an_effect, and_with_an_effect, or_with_an_effect, and_bumping_a_counter,
                                ternary_setting_an_attribute, all_over_a_generator_with_effects])
def test_an_effect_in_a_lazy_operand_is_refused_at_its_line(fn):
    import inspect

    from dy2st.errors import PythonEffectError

    arg = {"n": 0} if fn is and_bumping_a_counter else []
    with pytest.raises(PythonEffectError, match=r"(?s)whatever the data says.*To fix") as info:
        dy2st.to_static(fn)(jnp.array([-1.0, 2.0]), arg)
    lines, first = inspect.getsourcelines(fn)
    assert info.value.origin.lineno == first + next(i for i, l in enumerate(lines) if "x.sum()" in l or "all(" in l)
    assert arg in ({"n": 0}, []) or all(type(m) is Marker and m.last is None for m in arg)  # put back


def all_of_plain_items(x):
    return jnp.where(all(v > 0 for v in x), x, -x), any(v > 1 for v in x)


@pytest.mark.parametrize("x", [jnp.array([1.0, 2.0]), jnp.array([-1.0, 2.0]), jnp.zeros(0)])
def test_all_and_any_over_a_generator_without_effects(x):
    check_equivalent(all_of_plain_items, x)


# -- a staged `and`/`or`/ternary whose sides are arrays of two dtypes: eager gives back the
# side the data takes, of its own dtype (a bool `False`, an int32 array), where a program has one


def and_of_a_bool_and_a_float(x):
    return x.sum() > 0 and x.sum()


def ternary_of_an_int_and_a_float(x):
    return x.astype(jnp.int32) if x.sum() > 0 else x


def ternary_of_dicts_in_two_orders(x):
    return {"a": x, "b": x} if x.sum() > 0 else {"b": x, "a": x}


def ternary_of_dicts_in_one_order(x):
    return {"b": x, "a": x + 1} if x.sum() > 0 else {"b": -x, "a": x}


@pytest.mark.parametrize("fn", [and_of_a_bool_and_a_float, ternary_of_an_int_and_a_float,
                                ternary_of_dicts_in_two_orders])
def test_sides_of_two_dtypes_or_key_orders_are_refused(fn):
    from dy2st.errors import BranchOutputError

    with pytest.raises(BranchOutputError, match=r"(?s)(dtypes differ|one order on one side).*To fix"):
        dy2st.to_static(fn)(jnp.array([1.0, 2.0]))


def test_a_ternary_keeps_its_dicts_order():
    static = dy2st.to_static(ternary_of_dicts_in_one_order)
    for x in (jnp.ones(2), -jnp.ones(2)):
        got, want = static(x), ternary_of_dicts_in_one_order(x)
        assert list(got) == list(want) == ["b", "a"]
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
