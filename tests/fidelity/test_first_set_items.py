"""Items and attributes first set inside a staged loop whose container the loop looks into.

Eagerly the first iteration sees `D['b']` missing (`D.get('b', y)` gives `y`, `'b' in D` is
False); a staged loop would carry it from zeros. Static trip counts unroll; traced ones are
refused at the loop with the fix. When the loop never looks into the container, staging stays.
"""

import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import LoopVariableError
from dy2st.testing import check_equivalent

X = jnp.array([1.0, -2.0, 3.0])
ROWS = jnp.arange(6.0).reshape(3, 2)


def get_with_default_over_rows(x, rows):
    D = {"a": x}
    for r in rows:
        D["b"] = D.get("b", x) * 2 + r.sum()
        if x.sum() > 100:
            continue
    return D


def membership_over_range(x):
    D = {}
    for i in range(3):
        if "b" in D:
            D["b"] = D["b"] + x
        else:
            D["b"] = x * 10
    return D


def attribute_checked_with_getattr(x):
    class Box:
        pass

    box = Box()
    for r in ROWS:
        box.h = getattr(box, "h", x[:2]) + r
    return box.h


def written_only(x, rows):
    D = {"a": x}
    for r in rows:
        D["b"] = r * 2  # never looks into D: staged as a scan
    return D


@pytest.mark.parametrize("fn,args", [
    (get_with_default_over_rows, (X, ROWS)),
    (membership_over_range, (X,)),
    (attribute_checked_with_getattr, (X,)),
    (written_only, (X, ROWS)),
])
def test_matches_eager(fn, args):
    check_equivalent(fn, *args, grad_argnums=0)


def get_with_default_traced_length(x, n):
    D = {}
    for i in range(n):
        D["b"] = D.get("b", x) + i
    return D


def test_traced_length_is_refused_at_the_loop():
    with pytest.raises(LoopVariableError) as info:
        dy2st.to_static(get_with_default_traced_length)(X, jnp.asarray(3))
    text = str(info.value)
    assert "test_first_set_items.py" in text.splitlines()[0]
    assert "for i in range(n):" in text
    assert "D['b'] does not exist before this staged loop" in text
    assert "set D['b'] before the loop" in text


def test_set_before_the_loop_stages():
    def f(x, n):
        D = {"b": x}
        for i in range(n):
            D["b"] = D.get("b", x) + i
        return D

    check_equivalent(f, X, jnp.asarray(3))
    check_equivalent(f, X, jnp.asarray(0))
