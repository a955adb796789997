"""`del name` inside a loop (issue 30): dropped where no path reads the name again (it was
refused by the fence whatever followed), refused at the `del` where something still reads it."""

import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import UnsupportedSyntaxError
from dy2st.testing import check_equivalent

ONES = jnp.ones(3)


def frees_a_temporary(x, n):
    for i in range(n):
        t = x * i
        x = x + t
        del t
    return x


def frees_in_a_staged_while_and_branch(x):
    while x.sum() < 20:
        t = x * 2
        if t.sum() > 8:
            x = x + t
            del t
        else:
            x = x + 1
    return x


def frees_two_and_keeps_an_item_delete(x, n):
    d = {"a": x, "b": x}
    for i in range(n):
        a, b = x * i, x + i
        x = x + a - b
        del a, b
    del d["b"]
    return x, d


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_del_nothing_reads_again_is_dropped(n):
    check_equivalent(frees_a_temporary, ONES, n)
    check_equivalent(frees_a_temporary, ONES, jnp.int32(n))
    check_equivalent(frees_two_and_keeps_an_item_delete, ONES, n)


@pytest.mark.parametrize("scale", [0.5, 3.0, 30.0])
def test_a_del_in_a_branch_of_a_staged_loop(scale):
    check_equivalent(frees_in_a_staged_while_and_branch, ONES * scale)


def read_after_the_loop(x, n):
    t = x
    for i in range(n):
        t = x * i
        del t
    return t


def read_by_the_next_iteration(x, n):
    t = x
    for i in range(n):
        x = x + t
        del t
    return x


def read_by_a_closure(x, n):
    fns = []
    for i in range(n):
        t = x * i
        fns.append(lambda: t)
        del t
    return x


@pytest.mark.parametrize("fn, line", [
    (read_after_the_loop, "del t"), (read_by_the_next_iteration, "del t"), (read_by_a_closure, "del t"),
])
def test_a_del_of_a_name_read_again_is_refused_at_the_del(fn, line):
    with pytest.raises(UnsupportedSyntaxError) as info:
        dy2st.to_static(fn)(ONES, 2)
    text = str(info.value)
    assert text.startswith(f'File "{__file__}"') and f", in {fn.__name__}\n    {line}\n" in text, text
    assert "`del t` inside a loop, where 't' is read again" in text
    assert "To fix: assign 't' a placeholder (`t = None`) instead" in text
