"""What a call's arguments are keyed by: every difference eager code could see traces anew or is
carried, on every call (issue 29: "Static arguments are keyed by type and value")."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st


def starts_at(x, r):
    return x + r.start, len(r)


def test_ranges_equal_as_sequences_are_different_arguments():
    # (`range(0) == range(3, 3)`: the program of the first served the second, `.start` stale)
    static = dy2st.to_static(starts_at)
    x = jnp.zeros(2)
    for r in (range(0), range(3, 3), range(0), range(1, 5, 2), range(1, 4, 2)):
        for _ in range(2):
            got, want = static(x, r), starts_at(x, r)
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1] == want[1] and type(got[1]) is int


class Box:
    def __init__(self, k):
        self.k = k
        self.w = jnp.ones(2)


Pair = collections.namedtuple("Pair", "box scale")


def reads_the_box(x, t):
    return x * t[0].w + t[0].k * t[1]


def changes_the_box(x, t):
    box = t[0]
    box.k += 1
    box.w = box.w * 2
    if x.sum() > 0:  # a staged if changing it too
        box.w = box.w + 1
    return t[0], x * box.k * t[1]


@pytest.mark.parametrize("make", [lambda box: (box, 2.0), lambda box: Pair(box, 2.0), lambda box: (box, 2.0, (box, [box]))])
def test_an_object_inside_a_tuple_argument_is_read_anew_on_each_call(make):
    """A plain object inside a tuple (or namedtuple) argument was a static leaf keyed by its
    identity: its attributes, changed between calls, were the first call's."""
    static = dy2st.to_static(reads_the_box)
    box, x = Box(1), jnp.ones(2)
    for k in (1, 2, 2, 3):
        box.k, box.w = k, box.w * 2
        for _ in range(2):
            np.testing.assert_array_equal(static(x, make(box)), reads_the_box(x, make(box)))


@pytest.mark.parametrize("make", [lambda box: (box, 2.0), lambda box: Pair(box, 2.0)])
def test_an_object_inside_a_tuple_argument_changed_by_the_call_keeps_the_change(make):
    """(Its changes were made only while tracing: the second call's were lost.)"""
    static = dy2st.to_static(changes_the_box)
    eager_box, static_box = Box(1), Box(1)
    eager_args, static_args = make(eager_box), make(static_box)
    for x in (jnp.ones(2), -jnp.ones(2), jnp.ones(2), -jnp.ones(2)):
        want, got = changes_the_box(x, eager_args), static(x, static_args)
        assert got[0] is static_box and want[0] is eager_box
        np.testing.assert_array_equal(got[1], want[1])
        assert static_box.k == eager_box.k
        np.testing.assert_array_equal(static_box.w, eager_box.w)
    jitted = jax.jit(lambda x, k: dy2st.to_static(reads_the_box)(x, (Box(k), 2.0)), static_argnums=1)
    np.testing.assert_array_equal(jitted(jnp.ones(2), 3), reads_the_box(jnp.ones(2), (Box(3), 2.0)))
