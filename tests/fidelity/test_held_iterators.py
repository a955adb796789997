"""An iterator the code holds (`it = iter(xs)`) and a loop over it whose `break` is traced.

How many items such a loop takes is known only when the program runs. The items left are
staged one by one, as for a list, and the count the loop took is kept as the iterator's
position: a later `next(it[, default])` picks the item at that position from the items stacked,
and a later loop over `it` runs each item the iterator could still hold under a staged `if`.
Any other use of the iterator (list(it), an alias, a closure, a staged `if` around the loop) is
refused at the user's line.
"""

import itertools

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import PythonEffectError, StagedInTryError
from dy2st.testing import check_equivalent

# inputs that break at the first, a middle and no item (and a zero start)
INPUTS = [jnp.ones(2), jnp.array([-5.0, -5.0]), jnp.zeros(2), jnp.full((2,), 3.0)]


def next_with_default(x, y):
    a = x
    it = iter([x, y, x * 2])
    for v in it:
        a = a + v
        if a.sum() > 3:
            break
    a = a + next(it, y)
    return a + next(it, y * 3)


def next_without_default(x, y):
    a = x
    it = iter([x, y, x * 3])
    for v in it:
        a = a + v
        if a.sum() > 3:
            break
    return a * next(it)


def python_numbers(x):
    it = iter([1, 2, 3, 4])
    s = x
    for k in it:
        s = s + k
        if s.sum() > 5:
            break
    return s, next(it, 0)


def continue_and_else(x):
    it = iter([1.0, 2.0, 3.0, 4.0])
    s = x
    for k in it:
        if k == 2.0:
            continue
        s = s + k
        if s.sum() > 5:
            break
    else:
        s = s * 10
    return s, next(it, -1.0)


def next_in_an_unrolled_loop(x):
    it = iter([1.0, 2.0, 3.0, 4.0])
    s = x
    for k in it:
        s = s + k
        if s.sum() > 3:
            break
    taken = []
    for _ in range(3):
        taken.append(next(it, 0.0))
    return s, taken


def second_loop_over_the_rest(x):
    it = iter([1.0, 2.0, 3.0, 4.0])
    s = x
    for k in it:
        s = s + k
        if s.sum() > 3:
            break
    t = x * 0
    for k in it:
        t = t * 2 + k
        if t.sum() > 10:
            break
    return s, t, next(it, 9.0)


def over_an_argument_list(xs, x):
    it = iter(xs)
    s = x
    for v in it:
        s = s + v
        if s.sum() > 3:
            break
    return s, next(it, x)


@pytest.mark.parametrize("x", INPUTS)
@pytest.mark.parametrize("fn", [next_with_default, python_numbers, continue_and_else, next_in_an_unrolled_loop,
                                second_loop_over_the_rest])
def test_later_reads_see_where_the_traced_break_stopped(fn, x):
    args = (x, x * 2) if fn is next_with_default else (x,)
    for _ in range(2):
        check_equivalent(fn, *args, grad_argnums=0)


@pytest.mark.parametrize("xs", [[jnp.ones(2), jnp.ones(2) * 2], [jnp.full((2,), -3.0)], []])
def test_an_iterator_over_an_argument_list(xs):
    for x in INPUTS[:2]:
        check_equivalent(over_an_argument_list, xs, x)


def test_next_past_the_last_item_raises_stop_iteration_when_run():
    f = dy2st.to_static(next_without_default)
    x = jnp.ones(2)
    assert jnp.allclose(f(x, x * 2), next_without_default(x, x * 2))  # breaks at the first item
    small = jnp.full((2,), 0.1)
    for _ in range(2):  # runs out: eagerly next() raises
        with pytest.raises(StopIteration):
            next_without_default(small, small)
        with pytest.raises(StopIteration):
            f(small, small)
    assert jnp.allclose(f(x, x * 2), next_without_default(x, x * 2))


def test_explain_and_the_program_hold_one_loop_of_conds():
    f = dy2st.to_static(next_with_default)
    x = jnp.ones(2)
    jaxpr = f.get_concrete_program(x, x).jaxpr
    conds = sum(1 for e in jaxpr.eqns if e.primitive.name == "cond")
    # one per item after the first (whose `break` only or-s the flag), no scan or host callback
    assert conds == 2
    assert not any("callback" in e.primitive.name for e in jaxpr.eqns)


def aliased(x):
    it = iter([1.0, 2.0, 3.0])
    alias = it
    s = x
    for k in it:
        s = s + k
        if s.sum() > 2:
            break
    return s, list(alias)


def listed_after(x):
    it = iter([1.0, 2.0, 3.0])
    s = x
    for k in it:
        s = s + k
        if s.sum() > 2:
            break
    return s, list(it)


def read_by_a_closure(x):
    it = iter([1.0, 2.0, 3.0])

    def take():
        return next(it, 0.0)

    s = x
    for k in it:
        s = s + k
        if s.sum() > 2:
            break
    return s + take()


class Holder:
    def __init__(self):
        self.it = iter([1.0, 2.0, 3.0])


def held_by_an_object(x, holder):
    it = iter(holder.it)  # the object's own iterator: iter() gives it back
    s = x
    for k in it:
        s = s + k
        if s.sum() > 2:
            break
    return s + next(it, 0.0)


@pytest.mark.parametrize("fn", [aliased, listed_after, read_by_a_closure])
def test_other_uses_of_the_iterator_are_refused_at_the_loop(fn):
    with pytest.raises(PythonEffectError, match=r"(?s)iterates an iterator.*next\(it, default\)") as info:
        dy2st.to_static(fn)(jnp.ones(2))
    assert str(info.value).startswith('File "')
    assert "for k in it:" in str(info.value)


@pytest.mark.filterwarnings("ignore:Python iterable type:DeprecationWarning")
def test_an_objects_iterator_is_refused():
    holder = Holder()
    with pytest.raises(PythonEffectError, match="iterates an iterator"):
        dy2st.to_static(held_by_an_object)(jnp.ones(2), holder)


def loop_in_a_staged_if(x):
    it = iter([1.0, 2.0, 3.0])
    s = x
    if x.sum() > 0:
        for k in it:
            s = s + k
            if s.sum() > 3:
                break
    return s + next(it, 0.0)


@pytest.mark.parametrize("x", [jnp.ones(2), -jnp.ones(2), jnp.full((2,), 5.0)])
def test_a_loop_with_a_traced_break_in_a_staged_if_carries_the_position_out(x):
    for _ in range(2):
        check_equivalent(loop_in_a_staged_if, x, grad_argnums=0)


def items_of_two_shapes(x):
    it = iter([x, x[:1]])
    s = x
    for v in it:
        s = s + v.sum()
        if s.sum() > 3:
            break
    return next(it, x)


def test_items_next_cannot_stack_are_refused_at_the_next():
    with pytest.raises(PythonEffectError, match=r"(?s)return next\(it, x\).*not arrays of one shape and type"):
        dy2st.to_static(items_of_two_shapes)(jnp.ones(2))


def test_under_grad_and_vmap():
    def loss(x):
        return next_with_default(x, x * 2).sum()

    x = jnp.array([0.5, 1.5])
    assert jnp.allclose(jax.grad(dy2st.to_static(loss))(x), jax.grad(loss)(x))
    batch = jnp.stack(INPUTS)
    expected = jnp.stack([next_with_default(v, v * 2) for v in INPUTS])
    assert jnp.allclose(jax.vmap(dy2st.to_static(lambda v: next_with_default(v, v * 2)))(batch), expected)


def test_a_python_break_leaves_the_iterator_as_python_does():
    def f(x):
        it = iter([x, x * 2, x * 3])
        for v in it:
            if v.shape[0] > 1:
                break
        return next(it), list(it)

    check_equivalent(f, jnp.ones(2))


def next_caught_by_its_except(x):
    it = iter([x, x * 2])
    for v in it:
        if v.sum() > 3:
            break
    try:
        y = next(it)
    except StopIteration:
        y = x * 100
    return y


def test_a_next_whose_except_would_catch_stop_iteration_is_refused_at_its_line():
    with pytest.raises(StagedInTryError, match=r"(?s)y = next\(it\).*raises StopIteration when the program runs"):
        dy2st.to_static(next_caught_by_its_except)(jnp.ones(2))


def list_changed_after_the_loop(x):
    xs = [x, x * 2, x * 3]
    it = iter(xs)
    for v in it:
        if v.sum() > 3:
            break
    xs.append(x * 10)  # eagerly a list's iterator reads the list as it is at each next()
    return next(it, x)


def test_a_next_after_the_walked_list_changed_is_refused_at_its_line():
    with pytest.raises(PythonEffectError, match=r"(?s)return next\(it, x\).*after the list the iterator walks changed"):
        dy2st.to_static(list_changed_after_the_loop)(jnp.ones(2))


# -- a next() or a loop in a staged side, over an iterator made outside it ------------------------
# Tracing runs both sides, so the Python iterator would move in both, whatever the data says (a
# silent wrong answer before: the position after the `if` was the traced side's). Staged code
# takes the iterator over, and its position is carried out of the cond like an attribute.
def next_in_a_branch(x):
    it = iter([1.0, 2.0, 3.0])
    y = x
    if x.sum() > 0:
        y = x + next(it)
    return y, next(it, 0.0)


def loop_in_a_branch(x):
    it = iter([1.0, 2.0, 3.0])
    if x.sum() > 0:
        for v in it:
            x = x + v
            break
    return x, next(it, 0.0)


def _take(it):
    return next(it)


def next_in_a_helper_in_a_branch(x):
    it = iter([1.0, 2.0, 3.0])
    y = x
    if x.sum() > 0:
        y = x + _take(it)
    return y, next(it, 0.0)


def nested_branches(x):
    it = iter([x, x * 2, x * 3, x * 4])
    y = next(it)
    if x.sum() > 0:
        y = y + next(it)
        if x.sum() > 4:
            y = y + next(it)
    else:
        y = y - next(it, x)
    return y + next(it, x * 0)


@pytest.mark.parametrize("fn", [next_in_a_branch, loop_in_a_branch, next_in_a_helper_in_a_branch, nested_branches])
@pytest.mark.parametrize("x", [jnp.ones(2), -jnp.ones(2), jnp.full((2,), 3.0)])
def test_a_side_moves_the_iterator_only_where_the_data_takes_it(fn, x):
    for _ in range(2):
        check_equivalent(fn, x, grad_argnums=0)


def next_in_a_staged_loop(x):
    it = iter([1.0, 2.0, 3.0])
    while x.sum() < 10:
        x = x * 2 + next(it, 0.0)
    return x


def test_a_next_in_a_loop_whose_trip_count_is_traced_is_refused():
    with pytest.raises(PythonEffectError, match=r"(?s)while x.sum\(\) < 10:.*calls next\(\)"):
        dy2st.to_static(next_in_a_staged_loop)(jnp.ones(2))


def made_in_a_side_used_in_a_nested_one(x):
    y = x
    if x.sum() > -10:
        it = iter([x, x * 2, x * 3])
        if x.sum() >= 2:
            for v in it:
                y = y + v
                break
        y = y + next(it)  # made in the outer side: carried out of the inner one, not the outer
    return y


@pytest.mark.parametrize("x", [jnp.ones(2), jnp.full((2,), -1.0), jnp.full((2,), -20.0)])
def test_an_iterator_made_in_a_side_is_that_sides_own(x):
    # (each trace of the outer side makes a new iterator: carrying its position out of the
    # outer side never settled, and was refused as attributes changing between traces)
    for _ in range(2):
        check_equivalent(made_in_a_side_used_in_a_nested_one, x, grad_argnums=0)


# -- a Python read of an iterator a staged side took over ---------------------------------------
# The side takes the iterator over whatever the analysis saw; code that runs as Python after it
# (`list(it)`, a comprehension, a library function) read it exhausted before (a silent wrong
# answer: `[]` where eager gives the items left). The Python iterator now stays where it was
# taken over, and such a read is seen moving it and refused at the line that took it over.
def listed_after_a_branch(x):
    it = iter([1.0, 2.0, 3.0])
    if x.sum() > 0:
        for v in it:
            x = x + v
            break
    return x, list(it)


def alias_listed_after_a_branch(x):
    it = iter([1.0, 2.0, 3.0])
    alias = it
    if x.sum() > 0:
        for v in it:
            x = x + v
            break
    return x, [v * 2 for v in alias]


def summed_by_a_helper_after_a_branch(x):
    it = iter([1.0, 2.0, 3.0])
    y = x
    if x.sum() > 0:
        y = x + _take(it)
    return y + sum(it)


@pytest.mark.parametrize("fn", [listed_after_a_branch, alias_listed_after_a_branch, summed_by_a_helper_after_a_branch])
def test_a_python_read_after_a_side_took_the_iterator_over_is_refused(fn):
    for x in (jnp.ones(2), -jnp.ones(2)):
        with pytest.raises(PythonEffectError, match=r"(?s)code that runs as Python.*uses the iterator") as info:
            dy2st.to_static(fn)(x)
        assert str(info.value).startswith(f'File "{__file__}"')


def aliased_next_after_a_branch(x):
    it = iter([1.0, 2.0, 3.0])
    alias = it
    if x.sum() > 0:
        for v in it:
            x = x + v
            break
    return x, next(alias, 0.0)


@pytest.mark.parametrize("x", [jnp.ones(2), -jnp.ones(2)])
def test_a_next_through_another_name_reads_the_held_position(x):
    for _ in range(2):
        check_equivalent(aliased_next_after_a_branch, x, grad_argnums=0)


# -- a module's iterator a trace given up ran out of is put back --------------------------------

def _calls(fn, make_iterator, sign=1.0, calls=4):
    """What each call of `fn` gives (its outcome and the list it changed), for a module iterator
    `IT` made afresh by `make_iterator`."""
    globals()["IT"] = make_iterator()
    seen = []
    for _ in range(calls):
        log = []
        try:
            fn(sign * jnp.ones(2), log)
            outcome = "returned"
        except Exception as error:
            outcome = type(error).__name__
        seen.append((outcome, [v.tolist() if isinstance(v, jax.Array) else v for v in log]))
    return seen


def takes_every_item(x, log):
    log.append(list(IT))  # a list argument changed: its first trace is given up and made again
    if not log[0]:
        raise KeyError("no items left")
    return x


def loops_over_it_then_raises_by_data(x, log):
    log.append(0)
    for v in IT:
        log.append(v)
    if x.sum() > 0:
        raise ValueError("raised when the program runs")
    return x


def takes_one_past_the_end(x, log):
    log.append(len(log))
    log.append(next(IT))
    return x * 2


def counts_then_raises(x, log):
    log.append(len(log))
    log.append(next(IT))  # an itertools.count: advanced by the trace, which the raise gives up
    if log[-1] in (4, 3):
        raise ValueError("raised by Python on the second call")
    return x


@pytest.mark.parametrize("fn, make", [
    (takes_every_item, lambda: iter([1, 2, 3])),
    (loops_over_it_then_raises_by_data, lambda: iter((1, 2))),
    (takes_one_past_the_end, lambda: iter("ab")),
    (takes_one_past_the_end, lambda: iter(range(2))),
    (counts_then_raises, lambda: itertools.count(3)),
    (counts_then_raises, lambda: itertools.count(5, -1)),
])
def test_an_iterator_a_given_up_trace_ran_out_of_is_put_back(fn, make):
    eager = _calls(fn, make)
    assert _calls(dy2st.to_static(fn), make) == eager, eager


def test_rewind_gives_an_iterator_that_ran_out_its_sequence_back():
    from dy2st.runtime.values import iterator_at, rewind

    for sequence in ([1, 2, 3], (1, 2, 3), "abc"):
        it = iter(sequence)
        next(it)
        at = iterator_at(it)
        assert at.index == 1 and at.sequence is sequence
        assert list(it) and iterator_at(it) is None  # ran out: its sequence dropped
        assert rewind(it, at) and list(it) == list(sequence[1:])
    assert iterator_at(iter({1: 2})) is None and iterator_at(x for x in ()) is None
    for counter in (itertools.count(3), itertools.count(5, -1), itertools.count(2 ** 70)):
        at = iterator_at(counter)
        first = next(counter)
        next(counter)
        assert rewind(counter, at) and next(counter) == first
