"""Loops whose bodies have Python effects: eager == to_static == jit(to_static), or a clear refusal.

A staged loop traces its body once; closures, iterators, lists read while growing and objects
changed in place need one run per iteration (a static trip count unrolls), and are refused
with a LoopVariableError when the trip count is traced.
"""

import contextlib

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import LoopVariableError, PythonEffectError
from dy2st.testing import check_equivalent

X = jnp.arange(3.0)


# -- lists read while the loop grows them (static trip counts unroll) --------------------------
def grow_from_last(x):
    seq = [x]
    for _ in range(3):
        seq.append(seq[-1] * 2)
    return seq


def grow_from_index_and_len(x):
    seq = [x]
    for i in range(4):
        seq.append(seq[i] + len(seq))
    return seq[-1]


def grow_from_slice(x):
    seq = [x]
    for i in range(3):
        seq.append(sum(seq[: i + 1]))
    return seq


def grow_read_in_traced_if(x):
    acc = []
    for i in range(3):
        acc.append(x * i)
        if x.sum() > 0:
            x = x + len(acc)
    return x, acc


def grow_over_rows(x):
    seq = [x[0]]
    for r in x:
        seq.append(seq[-1] + r)
    return seq


@pytest.mark.parametrize("fn", [grow_from_last, grow_from_index_and_len, grow_from_slice,
                                grow_read_in_traced_if, grow_over_rows])
@pytest.mark.parametrize("x", [X, -X - 1], ids=["pos", "neg"])
def test_list_read_while_growing(fn, x):
    check_equivalent(fn, x, grad_argnums=0)


def test_stacked_appends_still_scan():
    def f(x):
        out = []
        for i in range(4):
            x = jnp.tanh(x)
            out.append(x)
        return out

    jaxpr = str(dy2st.to_static(f).get_concrete_program(X).jaxpr)
    assert "scan" in jaxpr
    check_equivalent(f, X, grad_argnums=0)


# -- closures bind late ------------------------------------------------------------------------
def lambdas_of_index(x):
    fs = []
    for i in range(3):
        fs.append(lambda: x * i)
    return [f() for f in fs]


def lambdas_of_state(x):
    fs = []
    for i in range(3):
        x = x + 1
        fs.append(lambda: x)
    return [f() for f in fs]


def lambdas_of_rows(x):
    fs = []
    for r in x:
        fs.append(lambda: r * 2)
    return [f() for f in fs]


def nested_def_in_loop(x):
    total = x
    for k in range(3):
        def scale(v):
            return v * k
        total = total + scale(x)
    return total


@pytest.mark.parametrize("fn", [lambdas_of_index, lambdas_of_state, lambdas_of_rows, nested_def_in_loop])
def test_closures_bind_late(fn):
    check_equivalent(fn, X)


# -- iterators ---------------------------------------------------------------------------------
def next_in_static_loop(x):
    it = iter([1, 2, 3])
    for _ in range(3):
        x = x + next(it)
    return x


def next_of_range_after_loop(x):
    it = iter(range(5))
    for _ in range(3):
        x = x * next(it)
    return x, next(it)


def iterator_python_break(x):
    it = iter([x, x * 2, x * 3])
    for v in it:
        if v.shape[0] > 1:
            break
    return next(it)


@pytest.mark.parametrize("fn", [next_in_static_loop, next_of_range_after_loop, iterator_python_break])
def test_iterators_consume_what_python_consumes(fn):
    check_equivalent(fn, X)


def test_iterator_with_traced_break_is_refused():
    def f(x):
        it = iter([x, x * 2, x * 3, x * 4])
        for v in it:
            if v.sum() > 5:
                break
        return list(it)  # (`next(it)` converts: tests/fidelity/test_held_iterators.py)

    with pytest.raises(PythonEffectError, match=r"(?s)iterates an iterator.*list\(it\)") as info:
        dy2st.to_static(f)(X)
    assert str(info.value).startswith('File "')


class _Layer:
    def __init__(self, scale):
        self.scale, self.calls = scale, 0

    def __call__(self, x):
        self.calls += 1
        return jnp.tanh(x * self.scale)


def layers_until_large(x, layers):
    for i, layer in enumerate(layers):
        x = layer(x) + i
        if x.sum() > 4:
            break
    for a, b in zip(layers, layers[::-1]):
        x = x + a.scale - b.scale
        if x.sum() > 9:
            break
    return x


@pytest.mark.parametrize("x", [X, X * 4, -X])
def test_a_traced_break_over_a_header_made_iterator_stages_the_rest(x):
    """`for i, layer in enumerate(self.layers):` with a traced `break`: the iterator is the
    header's own (no code can read it after the loop) and walks a list, so the items left are
    staged one by one as for the list itself; it used to be refused as an iterator whose later
    reads would see another position. The layers' counters match eager's."""
    eager_layers, static_layers = [_Layer(s) for s in (1.0, 2.0, 3.0)], [_Layer(s) for s in (1.0, 2.0, 3.0)]
    expected = layers_until_large(x, eager_layers)
    assert jnp.allclose(dy2st.to_static(layers_until_large)(x, static_layers), expected)
    assert [layer.calls for layer in static_layers] == [layer.calls for layer in eager_layers]


def test_next_in_traced_loop_is_refused():
    def f(x, n):
        it = iter([1.0, 2.0, 3.0, 4.0])
        for _ in range(n):
            x = x + next(it)
        return x

    with pytest.raises(PythonEffectError, match=r"next\(\) on an iterator") as info:
        dy2st.to_static(f)(X, jnp.array(2))
    assert "for _ in range(n):" in str(info.value)


# -- objects from outside changed in place ------------------------------------------------------
def test_static_loop_mutating_an_argument_list_matches_eager():
    def f(xs, x):
        for i in range(3):
            xs.append(x * i)
            xs[0] = xs[0] + 1
        return x

    eager_list, static_list = [X], [X]
    f(eager_list, X)
    dy2st.to_static(f)(static_list, X)
    assert len(static_list) == len(eager_list) == 4
    for a, b in zip(eager_list, static_list):
        assert jnp.allclose(a, b)


def test_traced_loop_mutating_an_argument_list_is_refused():
    def f(xs, x):
        while x.sum() < 10:
            x = x + 1
            xs.append(x)
        return x

    with pytest.raises(LoopVariableError, match=r"'xs' is appended to in a staged loop whose number of iterations"):
        dy2st.to_static(f)([], X)


# -- zero-trip loops ---------------------------------------------------------------------------
def first_set_in_for(x, n):
    for i in range(n):
        y = x * i
    return y


def first_set_in_while(x):
    while x.sum() > 100:
        y = x
        x = x - 1
    return y


def key_first_set_in_loop(x, n):
    d = {}
    for i in range(n):
        d["k"] = x * i
    return d["k"]


@pytest.mark.parametrize("n", [1, 3])
def test_loop_created_variables_when_the_loop_runs(n):
    check_equivalent(first_set_in_for, X, jnp.array(n))
    check_equivalent(key_first_set_in_loop, X, jnp.array(n))


@pytest.mark.parametrize("fn,args,error", [
    (first_set_in_for, (X, jnp.array(0)), UnboundLocalError),
    (first_set_in_while, (X,), UnboundLocalError),
    (key_first_set_in_loop, (X, jnp.array(0)), KeyError),
])
def test_zero_trip_raises_what_eager_raises(fn, args, error):
    with pytest.raises(error):
        fn(*args)
    with pytest.raises(error) as info:
        dy2st.to_static(fn)(*args)
    if error is KeyError:  # checked when the loop ends
        assert any("which ran zero times" in note for note in info.value.__notes__)
    else:  # checked where the variable is read, as eager raises there (a note names the line)
        assert any("return y" in note for note in info.value.__notes__)


def test_state_read_only_by_later_iterations_needs_no_check():
    def f(x, n):
        i = 0
        while i < n:
            if i > 0:
                x = x - prev  # noqa: F821 - bound by the previous iteration
            prev = x
            i += 1
        return x

    for n in (0, 1, 3):
        check_equivalent(f, X, jnp.array(n))


def test_python_number_reshaped_by_a_zero_trip_loop_is_refused_at_run_time():
    def f(x, n):
        y = 5
        for i in range(n):
            y = y + x[:1]
        return y

    check_equivalent(f, X, jnp.array(2))
    with pytest.raises(LoopVariableError, match="ran zero times.*Python number 5"):
        dy2st.to_static(f)(X, jnp.array(0))


# -- search loops, aliases of range, rows, rebuilt lists -----------------------------------------
def search(xs, target):
    for i in range(4):
        if xs[i] > target:
            found = i
            break
    else:
        found = -1
    return found


@pytest.mark.parametrize("xs", [jnp.array([1.0, 5.0, 2.0, 7.0]), jnp.array([1.0, 0.0, 2.0, 0.0])])
def test_search_loop_with_else(xs):
    check_equivalent(search, xs, jnp.array(4.0))


@pytest.mark.parametrize("n", [0, 1, 3])
def test_range_under_another_name(n):
    def f(x, n):
        rng = range
        for i in rng(n):
            x = x + i
        return x

    check_equivalent(f, X, jnp.array(n))


def test_rows_changing_shape_unroll():
    def f(x):
        acc = x[:0]
        for r in x:
            acc = jnp.concatenate([acc, r[None] * 2])
        return acc

    check_equivalent(f, jnp.arange(6.0).reshape(3, 2), grad_argnums=0)


@pytest.mark.parametrize("n", [0, 2])
def test_list_of_pairs_rebuilt_in_traced_loop(n):
    def f(ps, n):
        for i in range(n):
            ps = [(w * 0.9, b * 0.9) for (w, b) in ps]
        return ps

    check_equivalent(f, [(X, X + 1)], jnp.array(n))


def test_list_rebuilt_in_traced_while():
    def f(ps, x):
        while x.sum() < 10:
            ps = [p * 0.9 for p in ps]
            x = x + 1
        return ps, x

    check_equivalent(f, [X, X], X)


# -- try / finally / with ------------------------------------------------------------------------
class Counter:
    def __init__(self):
        self.exits = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.exits += 1
        return False


def staged_if_in_try_finally(x):
    try:
        y = x * 2
        if y.sum() > 0:
            y = y + 1
    finally:
        z = 1
    return y, z


def finally_with_continue(x):
    for i in range(3):
        try:
            x = x + 1
            continue
        finally:
            x = x * 2
    return x


def staged_while_in_try_finally(x):
    n = 0
    while x.sum() < 10:
        try:
            x = x + 1
        finally:
            n = n + 1
    return x, n


def staged_if_in_with(x):
    c = Counter()
    with c:
        if x.sum() > 0:
            x = x * 2
    return x, c.exits


def staged_if_in_suppress(x):
    with contextlib.suppress(ZeroDivisionError):
        if x.sum() > 0:
            x = x + 1
    return x


@pytest.mark.parametrize("fn", [staged_if_in_try_finally, finally_with_continue, staged_while_in_try_finally,
                                staged_if_in_with, staged_if_in_suppress])
@pytest.mark.parametrize("x", [X, -X - 1], ids=["pos", "neg"])
def test_try_finally_and_with(fn, x):
    check_equivalent(fn, x)


# -- gradients through nested staged loops --------------------------------------------------------
def test_grad_through_while_nested_in_staged_for_is_the_loop_gradient_error():
    def f(x):
        for i in range(3):
            while x.sum() < 10 * (i + 1):
                x = x * 1.5
        return x.sum()

    assert jax.grad(dy2st.to_static(f))(jnp.ones(2)).tolist() == jax.grad(f)(jnp.ones(2)).tolist()
    with pytest.raises(dy2st.errors.LoopGradientError, match="maximum_iterations") as info:
        jax.jit(jax.grad(dy2st.to_static(f)))(jnp.ones(2))
    assert "while x.sum() < 10 * (i + 1):" in str(info.value)


def test_grad_through_while_nested_in_traced_for_is_the_loop_gradient_error():
    def f(x, n):
        for i in range(n):
            while x.sum() < 10 * (i + 1):
                x = x * 1.5
        return x.sum()

    with pytest.raises(dy2st.errors.LoopGradientError, match="maximum_iterations"):
        jax.jit(jax.grad(dy2st.to_static(f)))(jnp.ones(2), jnp.array(3))


# -- items of lists written in staged code ------------------------------------------------------
def negative_index_write_in_staged_if(x):
    L = [x, x + 1]
    if x.sum() > 0:
        L[-1] = x * 3
    return L


def negative_index_write_in_traced_loop(x, n):
    L = [x, x + 1]
    for i in range(n):
        L[-1] = L[-1] * 2
    return L


@pytest.mark.parametrize("x", [X, -X - 1], ids=["pos", "neg"])
def test_constant_index_writes_are_carried(x):
    check_equivalent(negative_index_write_in_staged_if, x, grad_argnums=0)
    for n in (0, 2):
        check_equivalent(negative_index_write_in_traced_loop, x, jnp.array(n))


def computed_index_write_in_staged_if(x, i):
    L = [x, x + 1]
    if x.sum() > 0:
        L[i] = x * 3
    return L


@pytest.mark.parametrize("x", [X, -X - 1], ids=["pos", "neg"])
def test_computed_index_writes_in_a_staged_if_are_carried(x):
    """The list is recorded as a method's receiver is (`jst.in_place(L, ..., True)`);
    tests/fidelity/test_item_writes_in_branches.py has the other shapes."""
    for i in (0, 1, -1):
        check_equivalent(computed_index_write_in_staged_if, x, i)


def test_a_traced_index_into_a_list_is_refused_at_its_line():
    with pytest.raises(dy2st.errors.TracedValueError) as err:
        dy2st.to_static(computed_index_write_in_staged_if)(X, jnp.array(1))
    assert "L[i] = x * 3" in str(err.value).splitlines()[1]


# -- nested functions that write nonlocal names ---------------------------------------------------
def counting_with_a_nested_writer(x, n):
    count = 0

    def bump():
        nonlocal count
        count += 1

    for i in range(n):
        bump()
        x = x + 1
    return x, count


def test_nested_nonlocal_writer_in_a_static_loop_runs_per_iteration():
    check_equivalent(counting_with_a_nested_writer, X, 3, jit=False)
    assert dy2st.to_static(counting_with_a_nested_writer)(X, 3)[1] == 3


def test_nested_nonlocal_writer_in_a_traced_loop_is_refused():
    with pytest.raises(PythonEffectError, match=r"bump\(\), which writes 'count' \(nonlocal/global\)"):
        dy2st.to_static(counting_with_a_nested_writer)(X, jnp.array(3))


# -- dicts given to functions called in a loop body -------------------------------------------
def scale_by(d, v):
    return d["a"] * v


def note_last(d, v):
    d["last"] = v
    return v


def dict_read_by_a_helper_in_a_traced_while(x):
    d = {"a": x}
    a = x
    while a.sum() < 100:
        a = a + scale_by(d, a)
    return a, d


def dict_read_by_a_helper_in_a_scan(x):
    d = {"a": x}
    a = x
    for _ in range(10):
        a = a + scale_by(d, a)
    return a


def dict_changed_by_a_helper_in_a_traced_while(x):
    d = {"a": x}
    a = x
    while a.sum() < 100:
        a = a + note_last(d, a)
    return a, d


def test_a_dict_a_called_function_only_reads_does_not_stop_a_loop_staging():
    """Every dict given to a call in a staged body counted as changed (its items were compared
    as fresh `(key, value)` pairs): a traced `while` was refused and a scan unrolled."""
    check_equivalent(dict_read_by_a_helper_in_a_traced_while, jnp.ones(3))
    check_equivalent(dict_read_by_a_helper_in_a_scan, X)
    jaxpr = str(dy2st.to_static(dict_read_by_a_helper_in_a_scan).get_concrete_program(X).jaxpr)
    assert "scan" in jaxpr


def test_a_dict_a_called_function_changes_in_a_traced_while_is_refused_by_name():
    with pytest.raises(LoopVariableError) as err:
        dy2st.to_static(dict_changed_by_a_helper_in_a_traced_while)(jnp.ones(3))
    text = str(err.value)
    assert "while a.sum() < 100:" in text
    assert "code run in this staged loop (a method, a property, an in-place operator) changes the dict given to note_last();" in text


def test_a_traced_break_over_reversed_header_items_stages_the_rest():
    def f(x, layers):
        for layer in reversed(layers):
            x = layer(x)
            if x.sum() > 1:
                break
        return x

    for x in (X, -X):
        eager_layers, static_layers = [_Layer(s) for s in (1.0, 2.0)], [_Layer(s) for s in (1.0, 2.0)]
        assert jnp.allclose(dy2st.to_static(f)(x, static_layers), f(x, eager_layers))
        assert [layer.calls for layer in static_layers] == [layer.calls for layer in eager_layers]
