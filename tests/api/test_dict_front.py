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


# -- trees JAX builds from a dict argument's structure ---------------------------------------
# JAX compares node types of trees given together, so what it rebuilds from a watched dict is
# watched too (in sorted order, as eagerly: it watches nothing) and leaves the trace as a dict.


class State(tuple):  # a namedtuple-like state holding dicts (optax's ScaleByAdamState)
    pass


def sgd_like_step(p, s, x):
    g = jax.grad(lambda q: jnp.sum((x * q["a"] + q["b"]) ** 2))(p)
    mu = jax.tree.map(lambda m, t: 0.9 * m + t, s["mu"], g)       # a dict inside an argument
    new = jax.tree.map(lambda w, m: w - 0.1 * m, p, mu)             # an argument with a rebuilt tree
    if x.sum() > 0:                                                 # a staged if on derived dicts
        new = jax.tree.map(lambda w: w * 2, new)
    return new, {"mu": mu}, list(new), type(new) is dict


def scans_a_dict_carry(p, x):
    def body(c, _):
        return jax.tree.map(lambda v: v + x, c), None
    return jax.lax.scan(body, p, None, length=3)[0]


def mixes_a_literal(p, x):
    return jax.tree.map(lambda a, b: a + b, p, {"b": x, "a": x})   # a plain dict beside an argument's


@pytest.mark.parametrize("fn, state", [(sgd_like_step, True), (scans_a_dict_carry, False)])
def test_trees_rebuilt_from_dict_arguments_keep_the_front(fn, state):
    static = dy2st.to_static(fn)
    for d in orders():
        for x in (A, -A):
            args = (d, {"mu": {"b": B, "a": A}}, x) if state else (d, x)
            eager, got = fn(*args), static(*args)
            assert jax.tree.structure(eager) == jax.tree.structure(got)
            for e, g in zip(jax.tree.leaves(eager), jax.tree.leaves(got)):
                assert type(e) is type(g)
                np.testing.assert_allclose(e, g, rtol=1e-6) if isinstance(e, jax.Array) else assert_equal(e, g)
            outs = got if isinstance(got, tuple) else (got,)
            for e, g in zip(eager if isinstance(eager, tuple) else (eager,), outs):
                if isinstance(e, dict):
                    assert type(g) is dict and list(g) == list(e)
    assert not static.policy.orders_observed
    assert len(static.programs) == 1  # one program for both orders (outputs decoded: not the front)
    arrays_of = (lambda out: out[:2]) if state else (lambda out: out)  # (no str under jit)
    jitted = jax.jit(lambda *args: arrays_of(static(*args)))
    args = (orders()[1], {"mu": {"a": A, "b": B}}, A) if state else (orders()[1], A)
    for e, g in zip(jax.tree.leaves(arrays_of(fn(*args))), jax.tree.leaves(jitted(*args))):
        np.testing.assert_allclose(e, g, rtol=1e-6) if isinstance(e, jax.Array) else assert_equal(e, g)


def assert_equal(e, g):
    assert e == g


def test_a_literal_beside_a_dict_argument_gives_eagers_result():
    static = dy2st.to_static(mixes_a_literal)
    for d in orders():
        eager, got = mixes_a_literal(d, A), static(d, A)
        assert list(got) == list(eager) and type(got) is dict
        for k in eager:
            np.testing.assert_array_equal(eager[k], got[k])


def returns_metrics_beside_rebuilt_trees(d, x):
    g = jax.grad(lambda q: jnp.sum(x * q["a"] * q["b"]))(d)
    new = jax.tree.map(lambda w, t: w - 0.1 * t, d, g)
    return new, {"loss": jnp.sum(x), "grads": g, "acc": x[0]}  # a dict of its own order


def test_the_functions_own_dicts_keep_their_order_beside_rebuilt_ones():
    static = dy2st.to_static(returns_metrics_beside_rebuilt_trees)
    for d in orders():
        eager, got = returns_metrics_beside_rebuilt_trees(d, A), static(d, A)
        assert list(got[1]) == list(eager[1]) == ["loss", "grads", "acc"]
        assert type(got[1]["grads"]) is dict and list(got[1]["grads"]) == list(eager[1]["grads"])
        for e, g in zip(jax.tree.leaves(eager), jax.tree.leaves(got)):
            np.testing.assert_allclose(e, g, rtol=1e-6)
    assert not static.policy.orders_observed
