"""A dict keeps its insertion order, as eagerly, though JAX gives dicts back with sorted keys.

Before, a dict that came out of a program (`return {"logits": y, "aux": z}`) or out of a staged
`if` (a dict the branches build, one from before they `update`, one an argument's) came back
with its keys sorted: `list(d)`, `list(d.values())[0]`, `jnp.stack(list(d.values()))` and a
loop over `d.items()` saw another order than eager code, with no error. Now the orders are
noted where the dict crosses a program's or a cond's boundary and put back (`runtime.key_order`);
where the order depends on the branch taken, the `if` is refused.
"""

import collections

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import BranchOutputError, LoopVariableError
from dy2st.testing import check_equivalent

X = jnp.array([1.0, 2.0, 3.0])


def _keys(value):
    """Every dict's keys in `value`, in order, with the leaves' values (to compare exactly)."""
    if type(value) is dict:
        return [(k, _keys(v)) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [_keys(v) for v in value]
    return value if isinstance(value, str) else jnp.asarray(value).tolist()


def _same_as_eager(fn, *args):
    eager = fn(*args)
    static = dy2st.to_static(fn)
    assert _keys(static(*args)) == _keys(eager)
    assert _keys(static(*args)) == _keys(eager)  # the cached call too
    check_equivalent(fn, *args, jit=False)  # outputs hold the keys: strings, which jit cannot give


def returns_a_dict(x):
    return {"logits": x * 2, "aux": x, "nested": {"z": x, "a": -x}}


def metrics_built_in_both_branches(x):
    metrics = {}
    if x.sum() > 0:
        metrics["loss"] = x * 2
        metrics["acc"] = x
    else:
        metrics["loss"] = -x
        metrics["acc"] = x * 3
    return list(metrics), jnp.stack(list(metrics.values()))


def a_dict_from_before_updated_in_a_branch(x):
    d = {"z": x, "a": x}
    if x.sum() > 0:
        d.update(a=x + 1)
    else:
        d.update(a=x - 1)
    return list(d), list(d.values())[0]


def a_dict_built_by_each_branch(x):
    if x.sum() > 0:
        d = {"w": x, "b": x * 2}
    else:
        d = {"w": -x, "b": x}
    return d, [k for k in d]


@pytest.mark.parametrize("x", [X, -X])
@pytest.mark.parametrize("fn", [returns_a_dict, metrics_built_in_both_branches,
                                a_dict_from_before_updated_in_a_branch, a_dict_built_by_each_branch])
def test_dicts_keep_their_insertion_order(fn, x):
    _same_as_eager(fn, x)


def updates_its_argument(x, d):
    if x.sum() > 0:
        d.update(a=x + 1)
    else:
        d.update(a=x - 1)
    return x


def test_an_argument_dict_keeps_its_order():
    eager, static = {"z": X, "a": X}, {"z": X, "a": X}
    updates_its_argument(X, eager)
    dy2st.to_static(updates_its_argument)(X, static)
    assert list(static) == list(eager) == ["z", "a"]


def orders_differ_by_branch(x):
    if x.sum() > 0:
        d = {"b": x, "a": x * 2}
    else:
        d = {"a": -x, "b": x * 3}
    return jnp.stack(list(d.values()))


def test_an_order_the_branch_decides_is_refused():
    with pytest.raises(BranchOutputError) as err:
        dy2st.to_static(orders_differ_by_branch)(X)
    text = str(err.value)
    assert "if x.sum() > 0:" in text.splitlines()[1]
    assert "'d' holds a dict whose keys are in one order after the if branch and in another" in text
    assert "add the keys in the same order in both branches" in text


def test_outputs_under_jax_jit_are_jax_s_own():
    """Under an outer `jax.jit` the outputs are that jit's: sorted, as for any jitted function."""
    assert list(jax.jit(dy2st.to_static(returns_a_dict))(X)) == ["aux", "logits", "nested"]


def keys_set_in_opposite_orders(x, keys_before: bool):
    d = {"z": x, "a": x, "b": x} if keys_before else {"z": x}
    if x.sum() > 0:
        d["b"] = x
        d["a"] = x * 2
    else:
        d["a"] = -x
        d["b"] = x * 3
    return list(d.values())[1], list(d)


def test_new_keys_added_in_opposite_orders_are_refused():
    """Keys a dict from before gains in each branch in opposite orders: its order would depend on
    the data (the write-back used to add them in one order, whatever the branch)."""
    with pytest.raises(BranchOutputError) as err:
        dy2st.to_static(keys_set_in_opposite_orders)(X, False)
    assert "the branches add d['b'] and d['a'] in opposite orders" in str(err.value)


@pytest.mark.parametrize("x", [X, -X])
def test_keys_from_before_set_in_opposite_orders_keep_their_places(x):
    _same_as_eager(keys_set_in_opposite_orders, x, True)


def a_dict_rebuilt_each_iteration(x, n):
    d = {"z": x, "a": x}
    for _ in range(n):
        d = {"z": d["z"] + 1, "a": d["a"] * 2}
    return list(d), list(d.values())[0]


def a_dict_rebuilt_in_a_traced_while(x):
    d = {"z": x, "a": x}
    while d["z"].sum() < 10:
        d = {"z": d["z"] + 1, "a": d["a"] * 2}
    return list(d), list(d.values())[0]


def a_dict_reordered_by_the_loop(x, n):
    d = {"z": x, "a": x}
    for _ in range(n):
        d = {"a": d["a"] * 2, "z": d["z"] + 1}
    return list(d.values())[0]


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_dict_a_loop_carries_keeps_its_order(n):
    _same_as_eager(a_dict_rebuilt_each_iteration, X, n)
    _same_as_eager(a_dict_rebuilt_each_iteration, X, jnp.int32(n))
    _same_as_eager(a_dict_rebuilt_in_a_traced_while, X + n)


def test_an_order_a_traced_trip_count_decides_is_refused():
    _same_as_eager(a_dict_reordered_by_the_loop, X, 2)  # a static trip count: the body's order
    with pytest.raises(LoopVariableError) as err:
        dy2st.to_static(a_dict_reordered_by_the_loop)(X, jnp.int32(2))
    assert "'d' holds a dict whose keys are in one order before the loop and in another" in str(err.value)


def folds_the_params_in_order(params, x):
    out = x
    for _, p in params.items():
        out = out * 2 + p
    return out


def first_keyword(x, **options):
    return list(options.values())[0] * x, list(options)


def folds_and_notes(params, x):
    out = folds_the_params_in_order(params, x)
    params["seen"] = out
    return out


def test_a_dict_argument_is_seen_in_the_callers_order():
    """Jit's flattening gives the traced function a dict argument with sorted keys: a loop over
    `params.items()` folded the values in another order than eager (a wrong value, no error).
    The program now sees the caller's order, and a call with the same keys in another order
    gets its own program (jit's key has no order, so such calls take dy2st's table)."""
    static = dy2st.to_static(folds_the_params_in_order)
    for params in ({"z": X, "a": -X}, {"a": -X, "z": X}, {"z": X, "a": -X}):
        assert jnp.array_equal(static(params, X), folds_the_params_in_order(params, X))
    check_equivalent(folds_the_params_in_order, {"z": X, "a": -X}, X)
    eager_out, eager_keys = first_keyword(X, z=X, a=-X)
    static_out, static_keys = dy2st.to_static(first_keyword)(X, z=X, a=-X)
    assert static_keys == eager_keys == ["z", "a"] and jnp.array_equal(static_out, eager_out)


def test_a_dict_argument_the_function_changes_keeps_the_callers_order():
    for make in (lambda: {"z": X, "a": -X}, lambda: {"a": -X, "z": X}):
        eager, static = make(), make()
        expected = folds_and_notes(eager, X)
        assert jnp.array_equal(dy2st.to_static(folds_and_notes)(static, X), expected)
        assert list(static) == list(eager)


def collects_by_kind(x):
    groups = collections.defaultdict(list)
    groups["z"].append(x)
    groups["a"].append(x * 2)
    return groups


def test_a_defaultdict_keeps_its_order_and_its_factory():
    """JAX flattens a defaultdict with sorted keys too."""
    eager, static = collects_by_kind(X), dy2st.to_static(collects_by_kind)(X)
    assert type(static) is collections.defaultdict and static.default_factory is list
    assert list(static) == list(eager) == ["z", "a"]
    params = collections.defaultdict(float, z=X, a=-X)
    assert jnp.array_equal(dy2st.to_static(folds_the_params_in_order)(params, X), folds_the_params_in_order(params, X))


def folds_the_first_params(pair, x):
    return folds_the_params_in_order(pair[0], x)


def test_a_concrete_program_is_traced_in_the_callers_order():
    """`get_concrete_program` keys and traces a dict argument (here inside a tuple: a dict of
    its own is lifted as state, which keeps its order) by its order, as a call does: the
    abstract arguments keep it, and the table's key holds it."""
    static = dy2st.to_static(folds_the_first_params)
    pair = ({"z": X, "a": -X},)
    program = static.get_concrete_program(pair, X)
    assert program.signature.orders is not None and ("z", "a") in program.signature.orders
    assert jnp.array_equal(static(pair, X), folds_the_first_params(pair, X))


def staged_if_beside_a_dict(p, x):
    y = x @ p["w"] + p["b"]
    if y.sum() > 0:  # its state is `y`: the dict's order is not observed
        y = y * 2
    return y


def staged_if_on_the_dict(p, x):
    if x.sum() > 0:  # its state holds the dict: the order counts as observed
        p = {**p, "b": p["b"] + 1}
    else:
        p = dict(p)
    return list(p), p["b"]


def test_a_staged_if_observes_a_dict_arguments_order_only_where_its_state_holds_it():
    """Every staged side counted as observing the dict arguments' order, so a function with any
    staged `if` keyed its programs by the order and left the shared jit (a model's parameters
    dict with an `if` on its output: 85 -> 60 us a call, this machine)."""
    p = {"w": jnp.ones((3, 3)), "b": jnp.zeros(3)}  # not in sorted order
    beside = dy2st.to_static(staged_if_beside_a_dict)
    for x in (jnp.ones(3), -jnp.ones(3)):
        for _ in range(2):
            check_equivalent(staged_if_beside_a_dict, p, x)
            beside(p, x)
    assert "dict arguments are keyed by their key order (a trace observed it)" not in beside.policy.reasons()
    on = dy2st.to_static(staged_if_on_the_dict)
    for x in (jnp.ones(3), -jnp.ones(3)):
        for order in (p, {"b": p["b"], "w": p["w"]}):
            want, got = staged_if_on_the_dict(order, x), on(order, x)
            assert got[0] == want[0]
