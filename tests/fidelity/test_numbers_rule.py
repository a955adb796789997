"""The numbers rule (DESIGN.md, issue 29): a Python number whose value traced data decides
(`max(loss, 0.0)`, an `if` giving `0` on one side and an array on the other, a counter a staged
loop carries) comes back as a 0-d array of jnp's dtype for it, with eager's value, on every
call, with no host synchronisation per call: weakly typed as jnp makes a Python number, and a
float where one path makes an int and another a float. A Python number the data does not decide
stays a Python number. Computing on such a value is never refused: its value is eager's.

(Before: the program carried which candidate the data took and the call's boundary fetched it
to give back the exact Python number, a device_get per call; computing on an int-or-float
choice was refused with DataDependentKindError, and loops refused such starts.)"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.testing.fuzz import tree_difference

POS = jnp.array([1.0, 2.0, 3.0])
NEG = jnp.array([-1.0, 0.0, -3.0])
TIE = jnp.array([0.0, 0.0, 0.0])


def _check(fn, *args, inputs=(POS, NEG, TIE)):
    """eager == to_static (twice: the cached call too) == jax.jit(to_static), by the rule."""
    static = dy2st.to_static(fn)
    for x in inputs:
        expected = fn(x, *args)
        for _ in range(2):
            assert tree_difference(expected, static(x, *args), "to_static") is None
        assert tree_difference(expected, jax.jit(static)(x, *args), "jit", under_jit=True) is None
    return static


def max_with_float(x):
    return max(x.sum(), 0.5)


def min_int_first(x):
    return min(2, x.sum())


def max_three_mixed(x):
    return max(0, x[0], 1.5)


def max_int_array_float(x):
    return max(x.astype(jnp.int32).sum(), 0.5)


def nested_max_min(x):
    return min(max(x.sum(), 0.0), 4)


def max_in_tuple_and_dict(x):
    m = max(x[0], -0.5)
    return (m, {"m": m, "s": x.sum()})


def if_python_or_array(x):
    if x.sum() > 0:
        n = x.sum()
    else:
        n = 0
    return n


def if_two_python_numbers(x):
    if x.sum() > 0:
        n = 1
    else:
        n = 2.5
    return n


def nested_early_returns(x):
    if x.sum() > 0:
        if x[0] > 1.5:
            return 1
        return x.sum()
    if x.sum() < -1:
        return 0.25
    return x[0]


def if_int_array_or_float(x):
    if x.sum() > 0:
        n = x.astype(jnp.int32).sum()
    else:
        n = 0.5
    return n


def written_in_one_branch(x):
    n = 3
    if x.sum() > 0:
        n = x.sum()
    return n, n


def sorted_mixed(x):
    return sorted([x.sum(), 0.5, x[0]])


def max_then_arithmetic_is_an_array(x):
    return max(x.sum(), 0.5) + jnp.float32(1)


@pytest.mark.parametrize("fn", [
    max_with_float, min_int_first, max_three_mixed, max_int_array_float, nested_max_min, max_in_tuple_and_dict,
    if_python_or_array, if_two_python_numbers, nested_early_returns, if_int_array_or_float, written_in_one_branch,
    sorted_mixed, max_then_arithmetic_is_an_array,
])
def test_a_number_the_data_decides_is_a_0d_array_of_eager_value(fn):
    static = _check(fn)
    for leaf in jax.tree_util.tree_leaves(static(POS)) + jax.tree_util.tree_leaves(static(NEG)):
        assert isinstance(leaf, jax.Array) and leaf.shape in ((), (3,)), leaf  # never a Python number


def test_two_python_numbers_by_data_are_a_weak_float():
    """`1` or `2.5` by data: a float (paths disagree), weak as jnp makes Python numbers."""
    for x in (POS, NEG):
        out = dy2st.to_static(if_two_python_numbers)(x)
        assert out.dtype == jnp.float32 and out.weak_type and float(out) == if_two_python_numbers(x)


def test_a_number_the_data_does_not_decide_stays_a_python_number():
    def f(x, n):
        k = n * 2
        count = 0
        for row in x:  # a scan over the rows; the counter is Python's
            count += 1
        if x.sum() > 0:
            y = x * k
        else:
            y = x - k
        return y, k, count, x.shape[0]

    static = _check(f, 3, inputs=(POS, NEG))
    _, k, count, rows = static(POS, 3)
    assert (type(k), type(count), type(rows)) == (int, int, int) and (k, count, rows) == (6, 3, 3)


def test_grad_goes_to_the_chosen_side():
    static = dy2st.to_static(lambda x: max(x.sum(), 0.5) * 2.0)
    for x in (POS, NEG):
        np.testing.assert_allclose(jax.grad(static)(x), jax.grad(lambda x: jnp.maximum(x.sum(), 0.5) * 2.0)(x))


class Tracker:
    def __init__(self):
        self.best = 0.0

    @dy2st.to_static
    def update(self, x):
        self.best = max(self.best, x.sum())
        return self.best


def test_attribute_written_back_with_eager_value():
    eager, static = Tracker(), Tracker()
    for x in (NEG, POS, NEG):
        expected = Tracker.update.__wrapped__(eager, x)
        assert tree_difference(expected, static.update(x), "to_static") is None
        assert tree_difference(eager.best, static.best, "attribute") is None


def test_calls_take_the_direct_path_with_no_host_synchronisation():
    """Nothing is resolved at the boundary: the function's calls take jit's C++ dispatch."""
    for fn in (max_with_float, if_python_or_array, max_then_arithmetic_is_an_array):
        static = dy2st.to_static(fn)
        static(POS)
        static(NEG)
        assert not static.policy.decodes_outputs and static._fast is not None


def test_nothing_extra_under_an_outer_trace():
    jaxpr = jax.make_jaxpr(dy2st.to_static(max_with_float))(POS)
    assert len(jaxpr.jaxpr.outvars) == 1


@pytest.mark.parametrize("fn", [
    lambda x: max(x.sum(), 0.5) * 2,
    lambda x: sorted([x.sum(), 0.5])[0] + 1,
    lambda x: (x.sum() if x[0] > 0 else 0.5) * 2,
])
def test_computed_on_it_promotes_as_the_python_number_would(fn):
    """Same kind (a Python float or a float32 array): the value is weakly typed, as the Python
    number is, so arithmetic on it keeps eager's dtype either way."""
    static = dy2st.to_static(fn)
    for x in (POS, NEG):
        out, expected = static(x), fn(x)
        assert out.dtype == jnp.float32 and out.weak_type
        np.testing.assert_allclose(np.asarray(out), np.asarray(expected))
        if not isinstance(expected, jax.Array):  # eager's Python float: bfloat16 stays bfloat16
            half = jnp.ones(2, jnp.bfloat16)
            assert (out * half).dtype == (expected * half).dtype == jnp.bfloat16


# -- computing on a value of two kinds: eager's value, never refused ----------------------------
def max_then_rem(x):
    k = max(0, x.sum())
    return k % 97


def if_sides_then_add(x):
    if x.sum() > 0:
        k = x.sum()
    else:
        k = 3
    return k + 1


def computed_inside_a_branch(x):
    if x[0] > 0:
        m = min(x.sum(), 2)
        y = m * 2
    else:
        y = x.sum()
    return y


def sorted_middle_into_dict(x):
    out = {"k": 1}
    k = sorted([1, x.min(), 4])[1]
    out.update(k=k % 97)
    return out


def through_jnp_function(x):
    k = max(1, x.sum())
    return jnp.abs(k)


def accumulated_in_loop(x):
    total = 0
    for i in range(3):
        total = total + max(0, x[i])
    return total


def cast_to_int(x):
    k = max(0, x.sum())
    return int(k) % 97, float(k) * 2


def merged_again_after_a_cast(x):
    # Campaign seed 96768 (reduced): the second `if` merges `k` (an int or a bool) with a float array.
    if x[1] > 1.5:
        k = 1
    else:
        k = True
    if max(k, x.min()) > 0.5:
        k = sorted([x[1], k, k])[-1]
    return k


def chosen_before_a_scan_chosen_again_in_it(x):
    # Campaign seed 250318 (reduced): the start is an int or an array by data.
    k = sorted([2, x.sum()])[-1]
    a = x
    for _ in range(4):
        a = a + 1
        k = sorted([k, k, x.sum()])[-1]
    return a, k


def chosen_before_a_traced_while(x):
    k = sorted([2, x.sum()])[-1]
    a = x
    while a.sum() < 10:
        a = a + 1
        k = sorted([k, k, x.sum()])[-1]
    return a, k


@pytest.mark.parametrize("fn", [max_then_rem, if_sides_then_add, computed_inside_a_branch, sorted_middle_into_dict,
                                through_jnp_function, accumulated_in_loop, cast_to_int, merged_again_after_a_cast,
                                chosen_before_a_scan_chosen_again_in_it, chosen_before_a_traced_while])
def test_computing_on_a_value_of_two_kinds_gives_eager_value(fn):
    _check(fn)


# -- loops with a traced trip count ---------------------------------------------------------------
def _int_then_bool(x, n):
    k = 3
    w = 0
    while w < n:
        w += 1
        k = True
    return k


def _kind_by_data_in_a_traced_loop(x, n):
    k = x.sum()
    for i in range(n):
        if x.sum() > 0:
            k = 0
        else:
            k = i
    return k


def _same_kind_by_data_in_a_traced_loop(x, n):
    best = x.sum()
    for i in range(n):
        best = max(best, 0.5 * i)
    return best


def _python_start_kept_on_one_side(x, n):
    k = 1
    w = 0
    while w < n and x.sum() < 6:
        w += 1
        if x.sum() > 100:
            k = x.sum()
        else:
            k = k  # eagerly still the Python int 1
    return k


def _python_start_always_replaced(x, n):
    k = 0
    w = 0
    while w < n:
        w += 1
        k = x.sum()
    return k


def _python_start_picked_by_max(x, n):
    k = 1
    for _ in range(n):
        k = max(k, x[1])
    return k


def _counter_of_two_kinds(x, n):
    # issue 29: `acc += 1` on some rows, `acc -= 0.5` on others, over a traced number of rows
    acc = 0
    for i in range(n):
        if x[i % 3] > 0:
            acc += 1
        else:
            acc -= 0.5
    return acc


def _step_size_halved(x, n):
    # a line search from a real JAX example: `alpha = 1`, then halved while the data says so
    alpha = 1
    w = 0
    while (x * alpha).sum() > 1.0 and w < n:
        alpha = alpha * 0.5
        w += 1
    return alpha, w


@pytest.mark.parametrize("fn", [_int_then_bool, _kind_by_data_in_a_traced_loop, _same_kind_by_data_in_a_traced_loop,
                                _python_start_kept_on_one_side, _python_start_always_replaced,
                                _python_start_picked_by_max, _counter_of_two_kinds, _step_size_halved])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_traced_loop_carries_a_number_of_either_kind(fn, n):
    """Each was refused (LoopVariableError, DataDependentKindError) or resolved per call; the
    carry now holds the joined type (a float where paths disagree) and the value is eager's."""
    _check(fn, jnp.int32(n), inputs=(POS, NEG))


def test_a_counter_of_two_kinds_is_a_weak_float():
    out = dy2st.to_static(_counter_of_two_kinds)(NEG, jnp.int32(3))
    assert out.dtype == jnp.float32 and out.weak_type and float(out) == _counter_of_two_kinds(NEG, 3) == -1.5


def test_an_int_carried_stays_int32_not_a_truncating_bool():
    """A Python int before a staged loop and a Python bool after an iteration are carried as
    int32 (as Python's arithmetic reads a bool), never as a bool that turns 3 into True."""
    static = dy2st.to_static(_int_then_bool)
    assert int(static(POS, jnp.int32(0))) == 3 and int(static(POS, jnp.int32(2))) == 1
    assert jax.jit(static)(POS, jnp.int32(2)).dtype == jnp.int32


# -- a Python int leaving int32 raises when the program runs, at its line ------------------------
def _powers_of_seven(x, n):
    acc = 1
    i = 0
    while i < n:
        acc = acc * 7
        i += 1
    return acc


def _fibonacci(x, n):
    a, b = 0, 1
    for i in range(n):
        if x.sum() > 0:
            a, b = b, a + b
        else:
            a, b = b, b - a
    return a


def _cubes(x, n):
    acc = 2
    i = 0
    while i < n and x.sum() > 0:
        acc = acc ** 3
        i += 1
    return acc


def _counts(x, n):
    k = 0
    while k < n and x.sum() > 0:
        k += 1
    return k


def _big_steps(x, n):
    k = 1
    i = 0
    while i < n and x.sum() > 0:
        k = k + 2 ** 29
        i += 1
    return k


def _doublings(x, n):
    k = 1
    i = 0
    while i < n and x.sum() > 0:
        k = k << 1
        i += 1
    return k


def _int_of_scaled(x, n):
    v = 1.5
    i = 0
    while i < n and x.sum() > 0:
        v = v * 10.0
        i += 1
    return int(v)


@pytest.mark.parametrize("fn, line, ok_n, wrap_n", [
    (_powers_of_seven, "acc = acc * 7", 11, 12),
    (_doublings, "k = k << 1", 30, 31),
    (_int_of_scaled, "return int(v)", 9, 10),  # int() of a float: 1.5e9 fits, 1.5e10 would saturate
    (_big_steps, "k = k + 2 ** 29", 3, 4),  # a constant of 2**10 or more is checked
    (_fibonacci, "a, b = b, a + b", 45, 47),  # (b runs one term ahead of a)
    (_cubes, "acc = acc ** 3", 3, 4),  # 2 ** 27, then 2 ** 81
])
def test_a_python_int_leaving_int32_raises_at_its_line(fn, line, ok_n, wrap_n):
    from dy2st.errors import IntOverflowError

    static = dy2st.to_static(fn)
    for _ in range(2):
        assert int(static(POS, jnp.int32(ok_n))) == fn(POS, ok_n)  # eager's value, within int32
        with pytest.raises(IntOverflowError) as info:
            static(POS, jnp.int32(wrap_n))
        text = str(info.value)
        assert text.startswith(f'File "{__file__}"') and f"\n    {line}\n" in text, text
        assert "left int32's range when the program ran" in text and "To fix: keep the value within int32" in text
        assert isinstance(info.value, OverflowError)


@pytest.mark.parametrize("value, error, text", [
    (float("nan"), ValueError, "cannot convert float NaN to integer"),
    (float("inf"), OverflowError, "cannot convert float infinity to integer"),
])
def test_int_of_a_traced_nan_or_infinity_raises_as_eagerly(value, error, text):
    def f(x):
        return int(x[0])

    static = dy2st.to_static(f)
    for _ in range(2):
        with pytest.raises(error, match=text):
            f(jnp.array([value]))
        with pytest.raises(error, match=text):
            static(jnp.array([value]))
        assert int(static(jnp.array([-7.5]))) == -7


def test_a_counter_adding_a_constant_costs_no_check():
    """`k += 1` is not checked (about 2**31 iterations to wrap): the calls keep jit's dispatch."""
    static = dy2st.to_static(_counts)
    for n in (0, 3):
        assert int(static(POS, jnp.int32(n))) == _counts(POS, n)
    assert not static.policy.checks and static._fast is not None


def _doubles_in_a_side(x):
    k = 2 ** 30
    if x.sum() > 0:
        k = k + k
    return k


def _starts_beyond_int32(x):
    k = 2 ** 31
    while x.sum() > 0:
        x = x - 1
        k = k - 1
    return k


@pytest.mark.parametrize("fn", [_doubles_in_a_side, _starts_beyond_int32])
def test_a_python_int_beyond_int32_that_the_data_picks_is_refused(fn):
    # (it was Python's OverflowError from jnp.asarray, raised inside dy2st)
    from dy2st.errors import IntOverflowError

    with pytest.raises(IntOverflowError, match=r"(?s)'k' is the Python int 2147483648 here.*To fix") as info:
        dy2st.to_static(fn)(POS)
    assert str(info.value).startswith(f'File "{__file__}"')


def _modular_power(x, e, m):
    k = 5
    if x.sum() > 0:
        k = 6
    return pow(k, e, m), pow(k, 2)


@pytest.mark.parametrize("e, m", [(2, 7), (0, 1), (13, -11), (30, 46341)])
def test_pow_with_a_modulus_of_a_number_the_data_decides(e, m):
    static = dy2st.to_static(_modular_power)
    jitted = jax.jit(static, static_argnums=(1, 2))
    for x in (POS, NEG):
        expected = _modular_power(x, e, m)
        for _ in range(2):
            assert tree_difference(expected, static(x, e, m), "to_static") is None
            assert tree_difference(expected, jitted(x, e, m), "jit", under_jit=True) is None


def _slices_by_a_decided_int(x):
    k = 3
    if x.sum() > 0:
        k = 1
    return x[:k]


def test_a_slice_bound_the_data_decides_is_refused_at_its_line():
    # (jax's IndexError, raised raw)
    from dy2st.errors import TracedValueError

    with pytest.raises(TracedValueError, match=r"(?s)a slice bound here is a traced value.*dynamic_slice") as info:
        dy2st.to_static(_slices_by_a_decided_int)(POS)
    assert "return x[:k]" in str(info.value)


def _prints_a_decided_int(x):
    k = 10
    if x.sum() > 0:
        k = 3
    print(f"k={k:>4} {k!r} {k}", k, [k])
    return x


def test_a_python_int_the_data_decides_prints_as_eager(capsys):
    # (its repr was jax's: `Array(3, dtype=int32)` where eager prints 3)
    static = dy2st.to_static(_prints_a_decided_int)
    for x in (POS, NEG):
        _prints_a_decided_int(x)
        eager = capsys.readouterr().out
        static(x)
        static(x)
        assert capsys.readouterr().out == eager * 2


def item_of_each_dtype(x):
    loss = (x ** 2).mean()
    count = (x > 0).sum()
    n = count.item()
    print(f"loss {loss.item():.3f} n={n}")
    if loss.item() > 1:
        return loss.item() * 2, n + 1, (x > 0).any().item()
    return loss.item(), n, (x > 0).all().item()


def test_item_of_a_traced_array_is_the_number_eager_gives(capsys):
    """`.item()` (how training code logs a loss) was a TracedValueError; it is `float(x)` /
    `int(x)` / `bool(x)` of a one-element array, by the rule."""
    _check(item_of_each_dtype)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ["loss 4.667 n=3"] * 4 and len(set(lines)) == 3


def test_item_of_an_array_of_several_elements_says_so_at_its_line():
    def f(x):
        return x.item() if x.sum() > 0 else 0.0

    with pytest.raises(dy2st.errors.BuiltinError) as err:
        dy2st.to_static(f)(POS)
    assert "return x.item() if x.sum() > 0 else 0.0" in str(err.value).splitlines()[1]
    assert ".item() of an array of shape (3,)" in str(err.value)


def product_after_the_if(x):
    k = 10
    if x.sum() > 0:
        k = 2 ** 30
    return k * 4, k * 2


def test_a_product_outside_the_staged_if_that_leaves_int32_raises_when_run():
    """Checked only inside staged sides and loop bodies before: `k * 4` after the `if` wrapped
    to 0 (eager: 4294967296), silently."""
    static = dy2st.to_static(product_after_the_if)
    for _ in range(2):
        assert tree_difference(product_after_the_if(NEG), static(NEG), "to_static") is None
        with pytest.raises(dy2st.errors.IntOverflowError) as err:
            static(POS)
        assert "return k * 4, k * 2" in str(err.value).splitlines()[1]


def math_rounding(x):
    import math

    k = 0.5
    if x.sum() > 0:
        k = -2.5
    return math.floor(k), math.ceil(k), math.trunc(k), math.floor(x.sum() / 3), math.ceil(x[0])


def test_math_floor_ceil_trunc_of_a_number_the_data_decides():
    """They were a TracedValueError while round(), int(), // and % of the same value worked."""
    _check(math_rounding)


def picks_an_int_enum_member(x):
    import enum

    class Level(enum.IntEnum):
        LOW = 1
        HIGH = 2

    level = Level.LOW
    if x.sum() > 0:
        level = Level.HIGH
    return level.name


def test_an_int_enum_member_the_data_picks_is_refused_not_made_an_array():
    """An IntEnum is an int, so the numbers rule made it a 0-d array and `level.name` raised a
    raw AttributeError; its name and kind are what eager's value is."""
    with pytest.raises(dy2st.errors.BranchOutputError) as err:
        dy2st.to_static(picks_an_int_enum_member)(POS)
    assert "'level' is Python Level <Level.HIGH: 2> in the if branch" in str(err.value)


def casts_a_one_element_vector(x):
    if x.sum() > 0:
        return int(x[:1])
    return float(x[:1])


def test_int_of_a_one_element_vector_is_a_type_error_as_eagerly():
    # eager jax converts only 0-d arrays: TypeError (dy2st cast it: 1 where eager raised)
    with pytest.raises(TypeError):
        casts_a_one_element_vector(POS)
    with pytest.raises(dy2st.errors.BuiltinError) as err:
        dy2st.to_static(casts_a_one_element_vector)(POS)
    assert isinstance(err.value, TypeError)
    assert "int() of an array of shape (1,)" in str(err.value) and "return int(x[:1])" in str(err.value)


def counted_to_a_negative_power(x):
    s = 1
    while x.sum() > s:  # staged: `s` is a number the data decides
        s *= 3
    return s ** -1, s ** -2 * 9, x ** -1


def test_an_int_the_data_decides_to_a_negative_power_is_a_float_as_eagerly():
    # jnp refuses an integer to a negative power (a raw TypeError); Python's int gives a float
    _check(counted_to_a_negative_power, inputs=(POS, NEG, POS * 5))


# -- a Python number the data decides, divided by 0: eager's ZeroDivisionError, at run time ------

def _picks(x):
    n = 0
    if x.sum() > 0:
        n = 2
    return n


def true_division_of_numbers(x):
    return 10 / _picks(x)


def floor_division_and_modulo(x):
    n = _picks(x)
    return 10 // n, 7 % n


def float_modulo(x):
    d = 0.0
    if x.sum() > 0:
        d = 4.0
    return 9.5 % d


def derived_divisor(x):
    m = _picks(x) - 2  # 0 where the data picked 2
    return 3 / m, 1.5 / (m * 1.0)


def divides_in_a_later_branch(x):
    n = _picks(x)
    y = x
    if x[0] > -5:
        y = x * (1 / n)
    return y


def divides_by_a_loop_counter(x):
    k = 0
    while x.sum() > k:
        k += 1
    return 12 // k


def divides_by_int_of_an_array(x):
    return 10 // int(x[0] + 0.5), 3 % round(x[2].item())


def counts_in_an_unrolled_loop(x):
    s = 0
    for i in range(3):
        if x[i] > 0:
            s += 1
    return 6 / s


@pytest.mark.parametrize("fn", [true_division_of_numbers, floor_division_and_modulo, float_modulo, derived_divisor,
                                divides_in_a_later_branch, divides_by_a_loop_counter, counts_in_an_unrolled_loop,
                                divides_by_int_of_an_array])
def test_a_python_number_divided_by_a_data_decided_zero_raises_as_eagerly(fn):
    static = dy2st.to_static(fn)
    for x in (POS, NEG, TIE, jnp.array([2.0, -1.0, 0.5])):
        try:
            expected = fn(x)
        except ZeroDivisionError as error:
            for _ in range(2):
                with pytest.raises(ZeroDivisionError) as info:
                    static(x)
                assert str(info.value) == str(error)
                assert f'File "{__file__}"' in "\n".join(getattr(info.value, "__notes__", []))
            with pytest.raises(Exception, match="by zero|float modulo"):  # under the user's jit: JAX's error
                jax.jit(static)(x)
            continue
        for _ in range(2):
            assert tree_difference(expected, static(x), "to_static") is None
        assert tree_difference(expected, jax.jit(static)(x), "jit", under_jit=True) is None


def array_divided_by_a_number(x):
    n = 0.0
    if x.sum() > 0:
        n = 1.0
    return x / n, x % n, jnp.float32(1.0) * x.sum() / n


def weak_array_through_an_if(a, x):
    if x.sum() > 0:
        a = a + 1.0
    return 1.0 / a


def test_an_array_divided_by_a_data_decided_zero_stays_xlas_as_eagerly():
    # jnp's inf and nan, eagerly and compiled: only Python numbers on both sides raise
    _check(array_divided_by_a_number, inputs=(POS, NEG))
    weak = jnp.asarray(-1.0)  # a weakly typed 0-d array argument is no Python number
    static = dy2st.to_static(weak_array_through_an_if)
    for x in (POS, NEG):
        for _ in range(2):
            assert tree_difference(weak_array_through_an_if(weak, x), static(weak, x), "to_static") is None


def divides_inside_try(x):
    n = _picks(x)
    try:
        return 10 / n
    except ZeroDivisionError:
        return -1.0


def test_a_division_an_except_would_catch_is_refused_at_its_line():
    from dy2st.errors import StagedInTryError

    with pytest.raises(StagedInTryError) as info:
        dy2st.to_static(divides_inside_try)(POS)
    text = str(info.value)
    assert text.startswith(f'File "{__file__}"') and "\n    return 10 / n\n" in text, text
    assert "raises ZeroDivisionError when the program runs" in text and "jnp.where(d == 0" in text


def number_or_strong_array(x, n):
    k = 0
    if x.sum() > 0:
        k = 4  # a Python number the data decides
    m = n
    if x[0] > 0:
        m = k  # the other side keeps an int32 array
    return m


def test_a_traced_number_met_by_a_strong_array_takes_its_dtype():
    # The side's value stands for a Python number, and the merge keeps jnp's type for both sides
    # (strong int32): marking it a number must not make it weak.
    static = dy2st.to_static(number_or_strong_array)
    for x in (POS, NEG, jnp.array([1.0, -5.0, 0.0])):
        for _ in range(2):
            got = static(x, jnp.int32(7))
            assert not jax.typeof(got).weak_type and got.dtype == jnp.int32
            assert int(got) == int(number_or_strong_array(x, jnp.int32(7)))


def divides_then_prints(x, log):
    acc = 0
    if x.sum() > 0:
        acc = 2
    y = x + 7 / acc  # eagerly ZeroDivisionError here where the data leaves acc 0
    print("after", y.max())
    log.append(1)
    assert y.sum() > -100, "never fails"
    return y


def _divided_by_a_loop_count(x):
    acc = 0
    while acc < 2 and x.sum() > 0:  # (a counter a staged loop carries)
        acc += 1
    return x + 7 / acc


def divides_then_prints_in_an_if(x, log):
    y = _divided_by_a_loop_count(x)
    if x.max() > 0:  # a staged side: its own level of the numbers rule
        print("after", x.max())
    return y


def divides_then_prints_in_a_loop(x, log):
    y = _divided_by_a_loop_count(x)
    i = 0
    while i < 1 and x.max() > 0:  # a staged loop
        print("after", x.max())
        i += 1
    return y


@pytest.mark.parametrize("function", [divides_then_prints, divides_then_prints_in_an_if,
                                      divides_then_prints_in_a_loop])
def test_what_comes_after_a_python_number_divided_by_a_zero_the_data_decides_is_not_done(capsys, function):
    """Campaign seed 4,700,429: the numbers rule's check ran at the end of the function, after a
    print that follows the division (eager raises before it). Seed 6,300,169: a print in a staged
    `if` after the division still showed (the side is checked on its own; the division was not,
    before the `if`)."""
    static = dy2st.to_static(function)
    for fn in (function, static, static):
        for x, raised in ((jnp.ones(2), None), (jnp.array([-2.0, 0.5]), ZeroDivisionError)):
            log = []
            if raised is None:
                fn(x, log)
            else:
                with pytest.raises(raised):
                    fn(x, log)  # (its max is positive: the `if` and the loop print eagerly after it)
            jax.effects_barrier()
            printed = ("after 4.5\n" if function is divides_then_prints else "after 1.0\n") if raised is None else ""
            assert (capsys.readouterr().out, log) == (printed, [1] if raised is None and function is divides_then_prints
                                                      else []), fn


# -- Python bools the data decides, powers of 0, and their text (found porting peers' tests) --------
def _flag(x):
    flag = False
    if x.sum() > 0:
        flag = True
    return flag


def bool_operators_meant_as_bools(x):
    b, n = _flag(x), 3 if x.sum() > 1 else 0
    return b | b, b & (n > 1), not b, b ^ True, n + b, b * 2, (n > 1) | b, int(b) + int(b)


def identity_with_true(x):
    flag = _flag(x)
    if flag is True:
        return 1.0, flag is not False, True is flag
    return 0.0, flag is not False, True is flag


def identity_of_an_array_with_true(x):
    return (x.sum() > 0) is True, x is not False


def zero_to_a_negative_power(x):
    k = 0
    for v in x:
        if v > 0:
            k += 1
    return k ** -1


def float_to_a_negative_power(x):
    f = 0.0
    if x.sum() > 0:
        f = 2.0
    return f ** -2


def shown_by_repr(x):
    v, k = 0.5, 1
    if x.sum() > 0:
        v, k = 1.25, 2
    print(repr(v), v, f"{v!r} {repr(k)} {str(v)} {v:.3f}", ascii(v), format(v, ".2f"), format(k, "03d"))
    return v


def zero_of_either_sign(x):
    v = 0.0
    if x.sum() > 0:
        v = -0.0
    return v, x * v  # (the sign shows in the product too: -0.0 * 1 is -0.0)


def test_a_choice_between_zero_and_minus_zero_keeps_the_sign():
    """`0.0 == -0.0`, so the merge took one constant for both sides (found by a stdlib probe)."""
    static = dy2st.to_static(zero_of_either_sign)
    for x in (POS, NEG, POS):
        expected = zero_of_either_sign(x)
        for _ in range(2):
            got = static(x)
            assert np.copysign(1.0, float(got[0])) == np.copysign(1.0, expected[0])
            np.testing.assert_array_equal(np.copysign(1.0, got[1]), np.copysign(1.0, expected[1]))


@pytest.mark.parametrize("fn", [bool_operators_meant_as_bools, identity_with_true, identity_of_an_array_with_true])
def test_a_python_bool_the_data_decides_keeps_pythons_meaning(fn):
    _check(fn)


@pytest.mark.parametrize("fn", [zero_to_a_negative_power, float_to_a_negative_power])
def test_zero_to_a_negative_power_raises_as_eagerly(fn):
    static = dy2st.to_static(fn)
    assert np.isclose(static(POS), fn(POS))
    for _ in range(2):
        with pytest.raises(ZeroDivisionError, match="0.0 cannot be raised to a negative power"):
            fn(NEG)
        with pytest.raises(ZeroDivisionError, match="0.0 cannot be raised to a negative power"):
            static(NEG)


def test_a_python_float_the_data_decides_is_shown_as_eager_shows_it(capsys):
    static = dy2st.to_static(shown_by_repr)
    for x in (POS, NEG, POS):
        shown_by_repr(x)
        printed = capsys.readouterr().out
        for _ in range(2):
            static(x)
            jax.effects_barrier()
            assert capsys.readouterr().out == printed


def bool_arithmetic(x):
    flag = _flag(x)
    return flag + flag


def bool_inverted(x):
    n = 3 if x.sum() > 1 else 0
    return ~(n > 1)


def bool_signs(x):
    flag = _flag(x)
    return -flag, +flag, ~flag, abs(flag), ~(x > 0)  # (the last: an array, jnp's meaning)


@pytest.mark.parametrize("fn", [bool_inverted, bool_signs])
def test_signs_and_abs_of_a_python_bool_the_data_decides_are_pythons_ints(fn):
    """Eagerly `~True == -2`, `-True == -1`, `+True == 1` and `abs(True) == 1`; jnp's bools give
    `not`, a bool, or refuse `neg` (found by a stdlib probe)."""
    _check(fn)


@pytest.mark.parametrize("fn, line", [(bool_arithmetic, "return flag + flag")])
def test_arithmetic_on_a_python_bool_the_data_decides_is_refused_at_its_line(fn, line):
    """Eagerly `True + True == 2`; jnp's bools give `or`."""
    with pytest.raises(dy2st.errors.BuiltinError) as info:
        dy2st.to_static(fn)(POS)
    text = str(info.value)
    assert text.startswith(f'File "{__file__}"') and f"\n    {line}" in text, text
    assert "on a Python bool the data decides" in text and "To fix: convert first: `int(flag)" in text


def rounds_to_tens(x, k):
    n = -7
    if x.sum() > 0:
        n = int(x[0])
    return round(n, k)


@pytest.mark.parametrize("first", [15.0, 25.0, -15.0, 149.0])
@pytest.mark.parametrize("k", [-1, -2, 0, -12])
def test_round_of_an_int_the_data_decides_to_negative_digits_is_pythons(first, k):
    """Found by a stdlib probe: `round(n, -1)` gave `n` back (the int case ignored ndigits)."""
    static = dy2st.to_static(rounds_to_tens)
    for x in (jnp.array([first, 1.0, 1.0]), jnp.array([first, -9.0, 0.0])):
        expected = rounds_to_tens(x, k)
        for run in (static, jax.jit(static, static_argnums=1)):
            for _ in range(2):
                assert tree_difference(expected, run(x, k), "to_static", under_jit=run is not static) is None


def test_round_to_a_number_of_digits_the_data_decides_is_refused():
    with pytest.raises(dy2st.errors.BuiltinError, match="number of digits the data decides"):
        jax.jit(dy2st.to_static(rounds_to_tens))(POS, -1)



def signs_and_magnitudes(x):
    s = 0.0
    if x[0] > 0:
        s = -2.5
    return math.copysign(1.0, s), math.fabs(s), math.copysign(x.sum(), -1.0), math.fabs(x[1])


def test_copysign_and_fabs_of_a_number_the_data_decides_are_eagers_floats():
    """(Probe of peers' tests: `math.copysign(1.0, s)` of a float the data decides raised a
    TracedValueError, where `math.floor` works.)"""
    static = dy2st.to_static(signs_and_magnitudes)
    for x in (POS, NEG, jnp.array([-0.0, -3.0, 1.0])):
        want = signs_and_magnitudes(x)
        for _ in range(2):
            got = static(x)
            assert [float(g) for g in got] == [float(w) for w in want]
            assert all(jax.typeof(g).weak_type and g.dtype == jnp.float32 for g in got)
