"""Dict arguments take jit's own dispatch (the front) when the function never observes their key
order (`key_order.WatchedDict`): `d["w"]` does not; iterating, `d.items()`, `list(d)`, `repr(d)`,
returning `d`, or a staged branch taking it apart do, and then calls are keyed by the order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st

A, B = jnp.ones(2), jnp.arange(2.0)


def orders():
    return [{"a": A, "b": B}, {"b": B, "a": A}, {"a": A, "b": B}, {"b": B, "a": A}]


def looks_up(d, x):
    return x * d["a"] + d["b"]


def iterates(d, x):
    return [k for k in d], x * d["a"]


def stacks_values(d, x):
    return jnp.stack(list(d.values())) * x


def returns_it(d, x):
    return d


def branches_on_it(d, x):
    if x.sum() > 0:
        d = {k: v * 2 for k, v in d.items()}
    else:
        d = dict(d)  # (the caller's dict on one side only: which object returns would be the data's choice)
    return d


def test_lookups_only_take_the_front_for_every_order():
    static = dy2st.to_static(looks_up)
    for d in orders():
        np.testing.assert_array_equal(static(d, A), looks_up(d, A))
    assert not static.policy.orders_observed
    assert type(static.func).__name__ == "PjitFunction"


@pytest.mark.parametrize("fn", [iterates, stacks_values, returns_it, branches_on_it])
def test_observed_orders_key_the_programs(fn):
    static = dy2st.to_static(fn)
    for d in orders():
        for x in (A, -A):
            eager, got = fn(d, x), static(d, x)
            assert jax.tree.structure(eager) == jax.tree.structure(got)
            for e, g in zip(jax.tree.leaves(eager), jax.tree.leaves(got)):
                np.testing.assert_array_equal(e, g)
            if isinstance(eager, dict):
                assert list(eager) == list(got)
            if fn is iterates:
                assert got[0] == list(d)
    assert static.policy.orders_observed


def checks_its_type(d, x):
    if type(d) is dict:  # eager: True; the watched trace sees a dict too
        return x * d["a"]
    return x


def test_a_type_test_sees_a_dict():
    static = dy2st.to_static(checks_its_type)
    for d in orders():
        np.testing.assert_array_equal(static(d, A), checks_its_type(d, A))
