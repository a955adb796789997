"""The front: a cached call is jit's own C++ dispatch, with no Python of dy2st's on the way
(api._dispatcher's `miss`, _jax_compat.jit_front); everything else keeps the dispatcher's
behaviour, whatever order the calls come in."""

import threading
import os
import sys
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st

X3, X4 = jnp.arange(3.0) - 1.0, jnp.arange(4.0) - 1.0
PACKAGE = os.path.dirname(dy2st.__file__)


def branchy(x, y):
    if x.sum() > 0:
        return x * y
    return x - y


def python_calls(fn, *args):
    """The Python functions a call runs (C functions aside)."""
    seen = []

    def profile(frame, event, arg):
        if event == "call":
            seen.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("args", [(X3, X3), ((X3, X3), [X3]), ({"a": X3}, (X3,))], ids=["arrays", "tuple-list", "dict"])
def test_a_cached_call_runs_no_python(args):
    def pairs(a, b):
        total = sum(jax.tree_util.tree_leaves(a)) + sum(jax.tree_util.tree_leaves(b))
        if total.sum() > 0:
            return total * 2
        return total

    static = dy2st.to_static(pairs)
    for _ in range(3):
        np.testing.assert_array_equal(static(*args), pairs(*args))
    assert python_calls(static, *args) == []


def test_calls_the_front_cannot_cache_match_eager_in_any_order():
    def scaled(x, n=2):
        if x.sum() > 0:
            return x * n
        return x - n

    static = dy2st.to_static(scaled)
    calls = [(X3,), (X3,), (X3, 3), (X3,), (X4,), (X3, jnp.float32(5)), (-X4,), (X3,)]
    for args in calls:
        expected, got = scaled(*args), static(*args)
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype
    np.testing.assert_array_equal(static(x=X3, n=4), scaled(X3, 4))
    np.testing.assert_array_equal(static(X4), scaled(X4))


def test_a_signature_cached_before_a_static_output_still_resolves():
    def length_or_sum(x):
        if x.shape[0] > 3:
            return x * 2, x.shape[0]
        return x * 2, x.sum()

    static = dy2st.to_static(length_or_sum)
    for x in (X3, X3, X3, X4, X3, X4):
        expected, got = length_or_sum(x), static(x)
        assert type(got[1]) is type(expected[1])
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])


def test_a_check_traced_for_a_later_signature_is_kept_by_every_call():
    def checked(x):
        if x.shape[0] > 3:
            assert x.sum() > 0, "the sum must be positive"
        return x + 1

    static = dy2st.to_static(checked)
    for _ in range(3):
        np.testing.assert_array_equal(static(X3), X3 + 1)
    np.testing.assert_array_equal(static(X4 + 1), X4 + 2)
    np.testing.assert_array_equal(static(X3), X3 + 1)
    with pytest.raises(AssertionError, match="must be positive"):
        static(-X4)


def test_an_error_of_a_new_signature_shows_only_the_users_frames():
    def five(x):
        if x.shape[0] == 5:
            raise ValueError("five")
        return x + 1

    static = dy2st.to_static(five)
    static(X3), static(X3)
    with pytest.raises(ValueError, match="five") as info:
        static(jnp.ones(5))
    files = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
    assert files and not any(f.startswith(PACKAGE) for f in files), files


def test_switching_to_eager_reaches_a_cached_signature():
    runs = threading.local()  # (machinery, not a value guards compare: counts the runs of the body)
    runs.n = 0

    def counted(x):
        runs.n += 1
        return x * 2

    static = dy2st.to_static(counted)
    for _ in range(3):
        static(X3)
    traced = static._cache.traced
    assert traced == 1
    dy2st.enable_to_static(False)
    try:
        static(X3)
        static(X3)
    finally:
        dy2st.enable_to_static(True)
    assert runs.n == traced + 2
    static(X3)
    assert static._cache.traced == traced


def test_transformations_and_disable_jit_after_the_front_cached():
    static = dy2st.to_static(branchy)
    for _ in range(3):
        static(X3, X3)
    for x in (X3, -X3):
        np.testing.assert_allclose(jax.jit(static)(x, X3), branchy(x, X3))
        np.testing.assert_allclose(jax.grad(lambda x: static(x, X3).sum())(x),
                                   jax.grad(lambda x: branchy(x, X3).sum())(x))
        np.testing.assert_allclose(jax.vmap(static)(jnp.stack([x, -x]), jnp.stack([X3, X3])),
                                   jnp.stack([branchy(x, X3), branchy(-x, X3)]))
        with jax.disable_jit():
            np.testing.assert_allclose(static(x, X3), branchy(x, X3))
    np.testing.assert_allclose(static(-X3, X3), branchy(-X3, X3))
    assert python_calls(static, X3, X3) == []


def test_clear_cache_and_the_program_bound_reach_cached_signatures():
    static = dy2st.to_static(branchy, max_programs=2)
    for _ in range(2):
        static(X3, X3)
    static.clear_cache()
    assert static.programs == []
    np.testing.assert_array_equal(static(X3, X3), branchy(X3, X3))
    assert len(static.programs) == 1
    for n in (2, 4, 5, 3, 2):
        x = jnp.arange(float(n))
        np.testing.assert_array_equal(static(x, x), branchy(x, x))
    assert len(static.programs) <= 2


def test_a_cached_function_inside_a_partial_or_another_converted_function():
    import functools

    static = dy2st.to_static(branchy)
    for _ in range(3):
        static(X3, X3)
    bound_first = dy2st.to_static(functools.partial(static, X3))
    for y in (X3, -X3, X3):
        np.testing.assert_array_equal(bound_first(y), branchy(X3, y))
    outer = dy2st.to_static(lambda a: static(a, a) * 2)
    for x in (X3, -X3, X3):
        np.testing.assert_array_equal(outer(x), branchy(x, x) * 2)
    assert dy2st.to_static(static) is static
