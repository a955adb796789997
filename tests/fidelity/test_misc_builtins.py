"""issue 13, class 8: builtins keep Python's choice, values, dtypes and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.testing import check_equivalent
from dy2st.errors import BuiltinError


def _loss(fn):
    return lambda x: sum(jnp.sum(jnp.asarray(l, jnp.float32)) for l in jax.tree_util.tree_leaves(fn(x)))


def _check(fn, x, grad=True):
    expected = fn(x)
    static = dy2st.to_static(fn)
    for out in (static(x), jax.jit(static)(x)):
        e_leaves, a_leaves = jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(out)
        assert jax.tree_util.tree_structure(expected) == jax.tree_util.tree_structure(out)
        for e, a in zip(e_leaves, a_leaves):
            assert jnp.asarray(a).dtype == jnp.asarray(e).dtype
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), equal_nan=True)
    if grad:
        np.testing.assert_allclose(jax.grad(_loss(static))(x), jax.grad(_loss(fn))(x), equal_nan=True)


def cases_max_tie(x):
    return max(x[1], x[2])


def cases_max_tie_scaled(x):
    return max(x[1], x[2] * 1.0) * 3.0


def cases_min_tie(x):
    return min(x[1], x[2])


def cases_max_pair(x):
    return max(x[0], x[1])


def cases_max_three(x):
    return max(x[2], x[1], x[3])


def cases_max_list(x):
    return max([x[2], x[1], x[0]])


def cases_min_list(x):
    return min([x[3], x[0], x[0]])


def cases_max_array(x):
    return max(x)


def cases_min_array(x):
    return min(x)


def cases_max_python_float(x):
    return max(x[0], 2.0)


def cases_max_python_int_first(x):
    return max(0.0, x[0])


def cases_max_first_nan(x):
    return max(x[0] * jnp.nan, x[1])


def cases_sorted(x):
    return sorted(x)


def cases_sorted_reverse(x):
    return sorted(x, reverse=True)


def cases_sorted_list(x):
    return sorted([x[3], x[1], x[2]])


def cases_abs(x):
    return abs(x[0] - 1.0)


def cases_round_digits(x):
    return round(x[0] * 1.55, 1)


def cases_sum(x):
    return sum(x)


def cases_sum_start(x):
    return sum([x[0], x[1]], 10.0)


def cases_divmod(x):
    return divmod(x[1], 2.0)


def cases_pow(x):
    return pow(x[1], 2)


def cases_true_plus_array(x):
    return True + x


CASES = {
    "max tie": cases_max_tie,
    "max tie scaled": cases_max_tie_scaled,
    "min tie": cases_min_tie,
    "max pair": cases_max_pair,
    "max three": cases_max_three,
    "max list": cases_max_list,
    "min list": cases_min_list,
    "max array": cases_max_array,
    "min array": cases_min_array,
    "max python float": cases_max_python_float,
    "max python int first": cases_max_python_int_first,
    "max first nan": cases_max_first_nan,
    "sorted": cases_sorted,
    "sorted reverse": cases_sorted_reverse,
    "sorted list": cases_sorted_list,
    "abs": cases_abs,
    "round digits": cases_round_digits,
    "sum": cases_sum,
    "sum start": cases_sum_start,
    "divmod": cases_divmod,
    "pow": cases_pow,
    "true plus array": cases_true_plus_array,
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("values", [[1.0, 3.0, 3.0, 2.0], [-1.0, 0.0, 0.0, 5.0], [2.0, 2.0, 2.0, 2.0]])
def test_builtin_choices(name, values):
    _check(CASES[name], jnp.array(values))


def no_grad_any(x):
    return any(x > 2)


def no_grad_all(x):
    return all(x > 0)


def no_grad_any_list(x):
    return any([x[0] > 2, x[1] > 2])


def no_grad_all_list_with_python(x):
    return all([True, x[1] > 0])


def no_grad_any_python_decides(x):
    return any([x[0] > 2, True])


def no_grad_round(x):
    return round(x[0] * 1.5)


def no_grad_max_bools(x):
    return max(x[0] > 0, x[1] > 5)


def no_grad_max_int_array(x):
    return max(jnp.array([1, 3, 3], jnp.int32) * x.astype(jnp.int32)[:3])


def no_grad_one_times_bool(x):
    return 1 * (x > 1)


NO_GRAD = {
    "any": no_grad_any,
    "all": no_grad_all,
    "any list": no_grad_any_list,
    "all list with python": no_grad_all_list_with_python,
    "any python decides": no_grad_any_python_decides,
    "round": no_grad_round,
    "max bools": no_grad_max_bools,
    "max int array": no_grad_max_int_array,
    "one times bool": no_grad_one_times_bool,
}


@pytest.mark.parametrize("name", sorted(NO_GRAD))
@pytest.mark.parametrize("values", [[1.0, 3.0, 3.0, 2.0], [-1.0, 0.0, 0.0, 5.0]])
def test_builtin_truths(name, values):
    _check(NO_GRAD[name], jnp.array(values), grad=False)


def test_any_all_of_traced_values_used_in_if():
    def f(x):
        if any(x > 2) and all(x > -5):
            return x * 2
        return x

    for values in ([1.0, 3.0], [0.0, 1.0], [-6.0, 3.0]):
        _check(f, jnp.array(values))


def max_with_key(x):
    return max([x[0], x[1]], key=lambda v: -v)


def max_of_rows_with_key(x):
    return max(x, key=lambda v: (v - 1.5) ** 2), min(x, key=abs)


def min_of_vectors_with_key(x, y):
    return min(x, y, -x, key=lambda v: v.sum())


def max_of_numbers_with_traced_key(x):
    return max([1, 2, 3], key=lambda p: x[p - 1]), min((2, 1), key=lambda p: x[p])


def sorted_with_key(x, y):
    return sorted([x, y, x * 2, y], key=lambda v: v[0]), sorted([x, y], key=lambda v: v.sum(), reverse=True)


def sorted_numbers_by_traced_key(x):
    return sorted([3, 1, 2], key=lambda p: x[p - 1])


def max_with_key_of_two_shapes(x):
    return max(x, x[:2], key=lambda v: v.sum())  # E:key


@pytest.mark.parametrize("x", [jnp.array([1.0, -2.0, 3.0]), jnp.array([2.0, 2.0, -1.0]), jnp.array([0.0, 1.5, jnp.nan])])
def test_max_min_sorted_with_key_choose_as_python(x):
    """Python's choice by the keys (each computed once; a later item wins only on a strictly
    better key; NaN keys never win; sorted is stable), staged where a key is traced."""
    y = x[::-1] * 2
    check_equivalent(max_with_key, x)
    check_equivalent(max_of_rows_with_key, x)
    check_equivalent(min_of_vectors_with_key, x, y, grad_argnums=(0, 1))
    check_equivalent(max_of_numbers_with_traced_key, x)
    if not jnp.isnan(x).any():  # Python's sort by NaN keys depends on its algorithm's steps
        check_equivalent(sorted_with_key, x, y, grad_argnums=0)
        check_equivalent(sorted_numbers_by_traced_key, x)


def test_max_with_key_over_items_of_two_shapes_is_refused():
    with pytest.raises(BuiltinError) as info:
        dy2st.to_static(max_with_key_of_two_shapes)(jnp.ones(3))
    text = str(info.value)
    assert "max_with_key_of_two_shapes" in text and "key=" in text and "one shape" in text and "jnp.argmax" in text


def test_max_of_matrix_is_refused():
    def f(x):
        return max(x)

    with pytest.raises(BuiltinError, match="compares its rows"):
        dy2st.to_static(f)(jnp.ones((2, 2)))


def casts_mixed_with_small_dtypes(x, y):
    return x * int(y.sum()), x * float(y[0]), x + True, x * bool(y[0]), x * max(1, int(y[0])), x * sum([1, int(y[1])])


def test_python_scalar_casts_keep_eager_dtypes():
    x, y = jnp.array([1, 2], jnp.int8), jnp.array([1.5, 2.0], jnp.float16)
    expected = casts_mixed_with_small_dtypes(x, y)
    static = dy2st.to_static(casts_mixed_with_small_dtypes)
    for out in (static(x, y), jax.jit(static)(x, y)):
        for e, a in zip(expected, out):
            assert (a.dtype, a.weak_type) == (e.dtype, e.weak_type)
            np.testing.assert_array_equal(a, e)


def max_min_with_defaults_and_iterators(x):
    items = (v for v in [x[0], x[1]])
    return max([x[0], x[1]], default=0.0), min(x, default=5.0), max(items), max(iter([3, 1])) + x[0]


def test_max_min_defaults_and_iterators():
    _check(max_min_with_defaults_and_iterators, jnp.array([1.0, 2.0]))


def _sums_a_range(n, step):
    total = jnp.zeros(1)
    for i in range(10, n, step):
        total = total + i
    return total


@pytest.mark.parametrize("n, step", [(5, 0), (5, -2), (20, 3), (5, 2)])
def test_a_range_with_a_traced_step_raises_for_zero_as_eagerly(n, step):
    # (a zero step ran no iterations and returned zeros)
    static = dy2st.to_static(_sums_a_range)
    args = (jnp.array(n), jnp.array(step))
    for _ in range(2):
        if step == 0:
            with pytest.raises(ValueError, match="range\\(\\) arg 3 must not be zero"):
                _sums_a_range(*args)
            with pytest.raises(ValueError, match="range\\(\\) arg 3 must not be zero"):
                static(*args)
        else:
            np.testing.assert_array_equal(static(*args), _sums_a_range(*args))


def test_pow_of_an_array_with_a_modulus_is_a_type_error_as_eagerly():
    def f(x):
        return pow(x.sum().astype(int), 2, 5)

    with pytest.raises(TypeError) as eager:
        f(jnp.arange(3.0))
    with pytest.raises(TypeError) as static:
        dy2st.to_static(f)(jnp.arange(3.0))
    assert str(static.value) == str(eager.value)


def best_first(scores):
    cands = [(i, scores[i] * 2) for i in range(3)]  # (index, score) pairs, as a beam search keeps them
    return sorted(cands, key=lambda c: c[1], reverse=True)


def best_first_in_place(scores, cands):
    cands = [(i, scores[i], name) for i, name in cands]
    cands.sort(key=lambda c: c[1])
    return [(i, s) for i, s, _ in cands]


@pytest.mark.parametrize("scores", [[1.0, 3.0, 2.0], [3.0, 3.0, -1.0], [-2.0, 0.0, 5.0]])
def test_sorted_and_list_sort_with_a_key_over_tuples_of_numbers_and_arrays(scores):
    """Found by a model-code probe (refused with jax's __array__ error): each place of the items
    is stacked and put in the keys' order; an index the data now places is a 0-d array (the
    numbers rule)."""
    x = jnp.array(scores)
    for _ in range(2):
        check_equivalent(best_first, x)
    with pytest.raises(BuiltinError, match="not all one structure"):
        dy2st.to_static(best_first_in_place)(x, [(0, "a"), (1, "b"), (2, "c")])  # a string in each item
    plain = [(2, 0.5), (0, 2.0), (1, 1.0)]
    assert dy2st.to_static(lambda v: sorted(plain, key=lambda c: c[1]))(x) == sorted(plain, key=lambda c: c[1])


def sorts_in_place(x):
    cands = [(0, x[0]), (1, x[1]), (2, x[2])]
    cands.sort(key=lambda c: -c[1])
    return cands


def test_list_sort_with_a_traced_key_sorts_in_place_as_eagerly():
    for scores in ([1.0, 3.0, 2.0], [0.0, -1.0, 4.0]):
        check_equivalent(sorts_in_place, jnp.array(scores))


def sorted_by_a_flag_the_data_decides(x):
    rev = False
    if x.sum() > 0:
        rev = True
    return sorted([3, 1, 2], reverse=rev)  # E:reverse


def test_sorted_reverse_the_data_decides_is_refused_at_the_line():
    """It was jax's raw TypeError under jit, and ran eagerly otherwise (found by a stdlib probe)."""
    for run in (dy2st.to_static(sorted_by_a_flag_the_data_decides), jax.jit(dy2st.to_static(sorted_by_a_flag_the_data_decides))):
        with pytest.raises(BuiltinError) as info:
            run(jnp.ones(2))
        assert str(info.value).startswith(f'File "{__file__}"') and "reverse=rev" in str(info.value)


@pytest.mark.parametrize("fn", [lambda x: max(x.sum().astype(jnp.int32), x.max()),
                                lambda x: sorted([x.sum().astype(jnp.int32), x.max()]),
                                lambda x: min(x.sum() > 0, x.min())], ids=["max", "sorted", "min"])
def test_a_pick_among_arrays_of_two_dtypes_is_refused(fn):
    # eager gives back the item itself, of its own dtype; a staged pick promoted them
    from dy2st.errors import BuiltinError

    with pytest.raises(BuiltinError, match=r"(?s)dtypes.*To fix: cast"):
        dy2st.to_static(fn)(jnp.array([1.5, 2.5]))


def sorts_arrays_by_python_keys(t, xs):
    t.sort(key=lambda v: 0 if hasattr(v, "shape") else -1)
    return t, sorted(xs, key=len), sorted(xs, key=len, reverse=True)


def test_arrays_sorted_by_keys_python_values_decide():
    """Keys that are Python values (`key=len`) beside traced items were refused ("not all
    arrays of one shape"): Python decides the order, as eagerly (probe of Python semantics)."""
    def args():
        return [jnp.ones(2), 1, jnp.zeros(2), 4], [jnp.ones(3), jnp.ones(1), jnp.ones(2)]

    eager = sorts_arrays_by_python_keys(*args())
    static = dy2st.to_static(sorts_arrays_by_python_keys)
    for _ in range(2):
        got = static(*args())
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(eager)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(eager)):
            assert type(a) is type(b) or hasattr(b, "shape")
            assert jnp.array_equal(jnp.asarray(a), jnp.asarray(b))
