"""Arguments of dict and list subclasses (Counter, OrderedDict, defaultdict) changed by the
call hold eager's items afterwards: dy2st writes them back item by item with the type's own
builtin methods, not with `update` (a Counter's adds counts instead of setting them)."""

import collections

import jax.numpy as jnp
import numpy as np
import pytest

import dy2st


def reads(x, c):
    return x + c["n"]


def bumps(x, c):
    c["n"] += 1
    return x


def bumps_where_the_data_says(x, c):
    if x.sum() > 0:
        c["pos"] += 1
    return x


def reorders(x, d):
    d.move_to_end("a")
    d["z"] = x.sum()
    return x


def fills(x, d):
    d["new"].append(1)
    d["k"] = x * 2
    return d


def _plain(value):
    if isinstance(value, dict):
        return type(value).__name__, [(k, _plain(v)) for k, v in value.items()], getattr(value, "default_factory", None)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return np.asarray(value).tolist()


@pytest.mark.parametrize("fn, make", [
    (reads, lambda: collections.Counter(n=0)),
    (bumps, lambda: collections.Counter(n=0, m=3)),
    (bumps_where_the_data_says, lambda: collections.Counter(n=0, pos=0)),
    (reorders, lambda: collections.OrderedDict(a=1, b=2)),
    (fills, lambda: collections.defaultdict(list, k=0)),
])
def test_a_subclass_argument_holds_eagers_items_after_every_call(fn, make):
    static = dy2st.to_static(fn)
    for sign in (1.0, -1.0, 1.0):
        eager_arg, static_arg = make(), make()
        for _ in range(2):
            eager_out = fn(sign * jnp.ones(2), eager_arg)
            static_out = static(sign * jnp.ones(2), static_arg)
        assert _plain(static_arg) == _plain(eager_arg), (static_arg, eager_arg)
        assert type(static_arg) is type(eager_arg)
        if eager_out is eager_arg:
            assert static_out is static_arg


@pytest.mark.parametrize("make", [collections.Counter, lambda: collections.defaultdict(int)])
def test_a_key_a_staged_side_adds_to_a_counter_is_refused_as_for_a_dict(make):
    """Reading the missing key to learn it was unbound must not call `__missing__` (a Counter's
    0 would pass for an item, a defaultdict would gain one)."""
    for sign in (1.0, -1.0):
        d = make()
        with pytest.raises(dy2st.errors.BranchOutputError, match="defined in the if branch only"):
            dy2st.to_static(bumps_where_the_data_says)(sign * jnp.ones(2), d)
        assert dict(d) == {}
