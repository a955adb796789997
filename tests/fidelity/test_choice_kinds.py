"""issue 13: arithmetic on a value that eager makes an int on some inputs and a float array on
others (`k = max(0, x.sum()); k % 97`) is refused at the line that computes on it, on every
input (eager's result kind depends on the data; one compiled program has one dtype). Returned
or stored as it is, compared, cast with int()/float(), or made of one kind, such a value
computes exactly as eager's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import DataDependentKindError, LoopVariableError

POS = jnp.array([1.0, 2.0, 3.0])
NEG = jnp.array([-1.0, 0.0, -3.0])


def _refused(fn, line_text, *args):
    for x in (POS, NEG):
        fn(x, *args)  # eager runs on both
        with pytest.raises(DataDependentKindError) as info:
            dy2st.to_static(fn)(x, *args)
        message = str(info.value)
        assert message.startswith('File "' + __file__), message
        assert f", in {fn.__name__}\n    {line_text}\n" in message, message
        assert "To fix: give both sides one kind" in message


def _exact(fn, *args):
    static = dy2st.to_static(fn)
    for x in (POS, NEG):
        expected, got = fn(x, *args), static(x, *args)
        e_leaves, e_tree = jax.tree_util.tree_flatten(expected)
        g_leaves, g_tree = jax.tree_util.tree_flatten(got)
        assert e_tree == g_tree
        for e, g in zip(e_leaves, g_leaves):
            if isinstance(e, (bool, int, float)):
                assert type(g) is type(e) or (isinstance(g, jax.Array) and g.weak_type), (e, g)
            else:  # a same-kind choice computed on is weakly typed as its number (python_choice)
                assert g.dtype == e.dtype, (e, g)
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(e, np.float64))
        jax.jit(static)(x, *args)  # runs under an outer jit, where every output is an array


# -- refused: the result's kind is eager's choice by data ----------------------------------------
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


def choice_of_computed(x):
    k = max(0, x.sum())
    return max(k * 2, x[0])


def through_jnp_function(x):
    k = max(1, x.sum())
    return jnp.abs(k)


def accumulated_in_loop(x):
    total = 0
    for i in range(3):
        total = total + max(0, x[i])
    return total


def pick_of_computed_kept_by_a_staged_if(x):
    # Campaign seed 290201 (reduced): `k = k` on a staged `if`'s side merged the pick with
    # itself, and the merge's record replaced the pick's (which says what it was picked from:
    # `abs(k - 1)`, an int or a float by data), so the float32 2.0 left for eager's int 2.
    k = max(3, x[1] * 10)
    k = max(max(abs(k - 1), 2), x[1] * 10)
    if (x > 0).any():
        k = k
    return k


@pytest.mark.parametrize("fn, line", [
    (pick_of_computed_kept_by_a_staged_if, "k = max(max(abs(k - 1), 2), x[1] * 10)"),
    (max_then_rem, "return k % 97"),
    (if_sides_then_add, "return k + 1"),
    (computed_inside_a_branch, "y = m * 2"),
    (sorted_middle_into_dict, "out.update(k=k % 97)"),
    (choice_of_computed, "return max(k * 2, x[0])"),
    (through_jnp_function, "return jnp.abs(k)"),
    (accumulated_in_loop, "total = total + max(0, x[i])"),
])
def test_computing_on_a_mixed_kind_is_refused_at_its_line(fn, line):
    _refused(fn, line)


class Tracker:
    def __init__(self):
        self.best = 0

    @dy2st.to_static
    def step(self, x):
        self.best = max(self.best, x.sum()) * 1
        return x


def test_an_attribute_computed_from_a_mixed_kind_is_refused_and_left_alone():
    tracker = Tracker()
    with pytest.raises(DataDependentKindError, match=r"self.best = max\(self.best, x.sum\(\)\) \* 1"):
        tracker.step(POS)
    assert tracker.best == 0 and type(tracker.best) is int


# -- exact: as it is, compared, cast, or one kind --------------------------------------------------
def returned_as_is(x):
    k = max(0, x.sum())
    return k, x


def compared_only(x):
    k = max(0, x.sum())
    unused = k * 2  # computed, but it never leaves the function
    if k > 1:
        y = x * 2
    else:
        y = x - 1
    return y


def picked_again(x):
    k = max(0, x.sum())
    return max(k, x[0])


def cast_to_int(x):
    k = max(0, x.sum())
    return int(k) % 97


def cast_to_float(x):
    k = max(0, x.sum())
    return float(k) * 2


def one_kind(x):
    k = max(0.0, x.sum())
    return k * 2 + 1


def int_array_and_int(x):
    k = max(1, x.astype(jnp.int32).sum())
    return k % 5


def merged_again_after_a_cast(x):
    # Campaign seed 96768 (reduced): the second `if` merges `k` (an int or a bool) with a float
    # array, casting it inside the branch; the merge still carries its candidates.
    if x[1] > 1.5:
        k = 1
    else:
        k = True
    if max(k, x.min()) > 0.5:
        k = sorted([x[1], k, k])[-1]
    return k


def array_times_choice(x):
    a = x * 2
    return a * max(0, x.sum()), a + min(x.sum(), 3)


@pytest.mark.parametrize("fn", [returned_as_is, compared_only, picked_again, cast_to_int, cast_to_float,
                                one_kind, int_array_and_int, merged_again_after_a_cast, array_times_choice])
def test_a_mixed_kind_not_computed_on_is_exact(fn):
    _exact(fn)


def test_no_check_without_recorded_choices_and_none_under_an_outer_jit():
    # Under jax.jit of the converted function every output is an array: nothing to refuse.
    out = jax.jit(dy2st.to_static(max_then_rem))(POS)
    assert float(out) == 6.0


def chosen_before_a_scan_chosen_again_in_it(x):
    # Campaign seed 250318 (reduced): the start is an int or an array by data, the scan's carry
    # one type; the start's kind was lost (float32 2.0 for eager's int 2).
    k = sorted([2, x.sum()])[-1]
    a = x
    for _ in range(4):
        a = a + 1
        k = sorted([k, k, x.sum()])[-1]
    return a, k


def chosen_before_an_inner_scan(x, xs):
    # The same, reached as the seed did: the inner range loop runs in Python the first time
    # (`k` is a Python int) and is staged the second (`k` is the recorded choice).
    k = len(xs)
    for _ in range(2):
        for _ in range(3):
            for _ in xs:
                k = sorted([k, k, x.sum()])[-1]
    return k


def chosen_before_a_traced_while(x):
    k = sorted([2, x.sum()])[-1]
    a = x
    while a.sum() < 10:
        a = a + 1
        k = sorted([k, k, x.sum()])[-1]
    return a, k


def test_a_loop_starting_from_a_mixed_kind_keeps_it_or_refuses():
    """A scan unrolls when a carried start is a recorded int-or-array choice (each iteration's
    choice stays exact); a loop with a traced trip count, which cannot unroll, refuses at the
    loop on every input."""
    _exact(chosen_before_a_scan_chosen_again_in_it)
    _exact(chosen_before_an_inner_scan, [POS, POS])
    for x in (POS, NEG):
        with pytest.raises(LoopVariableError) as info:
            dy2st.to_static(chosen_before_a_traced_while)(x)
        message = str(info.value)
        assert ", in chosen_before_a_traced_while\n    while a.sum() < 10:\n" in message, message
        assert "'k' is set in this loop to a Python number or an array depending on the data" in message
