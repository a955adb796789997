"""The loop operators called directly, with Python and traced values."""

import builtins

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st

from dy2st import runtime
from dy2st.errors import LoopVariableError
from dy2st.runtime import convert_for, convert_while, list_append, loop_iter, set_loop_options
from dy2st.runtime.iterables import StagedArray, StagedEnumerate, StagedRange, StagedZip
from dy2st.runtime.loop_staging import merge_types


class Box:
    """Loop state as attributes of a box the functions close over, always named `s`: the
    runtime reaches it through their cells (`state_cells`) and writes the attributes back."""

    def __init__(self, **values):
        self.__dict__.update(values)
        self.names = tuple(values)
        self.paths = tuple(("s", n) for n in values)

    def values(self):
        return tuple(getattr(self, n) for n in self.names)


def test_runtime_imports_alone():
    assert runtime.convert_while is convert_while and runtime.convert_for is convert_for


def test_python_while_runs_in_python():
    s = Box(i=0, x=1.0)

    def body():
        s.i, s.x = s.i + 1, s.x * 2

    assert convert_while(lambda: s.i < 4, body, s.paths, s.names) == ()
    assert s.values() == (4, 16.0)
    assert type(s.i) is int


def test_traced_while_is_one_while_loop():
    def f(x):
        s = Box(x=x, n=0)

        def body():
            s.x, s.n = s.x * 2, s.n + 1

        convert_while(lambda: s.x.sum() < 50, body, s.paths, s.names)
        return s.values()

    jaxpr = jax.make_jaxpr(f)(jnp.ones(2))
    assert "while" in str(jaxpr)
    x, n = jax.jit(f)(jnp.ones(2))
    np.testing.assert_allclose(x, [32.0, 32.0])
    assert n == 5


def test_bounded_while_is_a_scan():
    def f(x):
        s = Box(x=x)

        def body():
            set_loop_options(maximum_iterations=10)
            s.x = s.x * 2

        convert_while(lambda: s.x.sum() < 50, body, s.paths, s.names)
        return s.values()[0]

    assert "scan" in str(jax.make_jaxpr(f)(jnp.ones(2)))
    np.testing.assert_allclose(jax.jit(f)(jnp.ones(2)), [32.0, 32.0])
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: f(x).sum()))(jnp.ones(2)), [32.0, 32.0])


def test_for_over_python_iterable_with_break_flag():
    s = Box(total=0, stop=False)

    def body(item):
        s.total += item
        if item == 3:
            s.stop = True

    convert_for([1, 2, 3, 4, 5], body, s.paths, s.names, lambda: not s.stop)
    assert s.values() == (6, True)


def test_for_over_traced_array_scans_rows():
    def f(xs):
        s = Box(h=jnp.zeros(3))

        def body(row):
            s.h = s.h + row

        convert_for(xs, body, s.paths, s.names, None)
        return s.values()[0]

    xs = jnp.arange(6.0).reshape(2, 3)
    assert "scan" in str(jax.make_jaxpr(f)(xs))
    np.testing.assert_allclose(jax.jit(f)(xs), xs.sum(0))


def test_loop_iter_dispatch():
    assert loop_iter(builtins.range, 3) == range(3)
    assert list(loop_iter(builtins.enumerate, [5, 6], 1)) == [(1, 5), (2, 6)]
    assert list(loop_iter(builtins.zip, [1], [2])) == [(1, 2)]
    assert loop_iter(lambda n: [n], 3) == [3]  # a shadowed name is called as is

    def check(n, xs):
        assert isinstance(loop_iter(builtins.range, n), StagedRange)
        assert isinstance(loop_iter(builtins.enumerate, xs), StagedEnumerate)
        zipped = loop_iter(builtins.zip, xs, xs)
        assert isinstance(zipped, StagedZip) and zipped.static_length == 4
        return n

    jax.jit(check)(jnp.array(3), jnp.zeros((4, 2)))


@pytest.mark.parametrize("args", [(0, 5), (5, 0), (1, 8, 3), (8, 1, -3), (3, 3)])
def test_staged_range_length_and_elements(args):
    expected = list(range(*args))

    def f(*bounds):
        staged = StagedRange(*bounds)
        return staged.length, jnp.stack([staged.element(jnp.int32(i)) for i in range(max(len(expected), 1))])

    length, elements = jax.jit(f)(*map(jnp.array, args))
    assert int(length) == len(expected)
    np.testing.assert_array_equal(np.asarray(elements)[: len(expected)], expected)
    assert StagedArray(jnp.zeros((4, 2))).static_length == 4


def test_list_append_in_place_as_python_new_list_while_tracing_staged_code():
    from dy2st.runtime.staging import staged_tracing

    xs = [1]
    assert list_append(xs, 2) is xs and xs == [1, 2]  # plain Python: other references see it
    with staged_tracing():  # a staged branch or loop body: never share one list between traces
        ys = list_append(xs, 3)
    assert ys == [1, 2, 3] and xs == [1, 2]

    class Log:
        def __init__(self):
            self.items = []

        def append(self, v):
            self.items.append(v)

    log = Log()
    assert list_append(log, 3) is log and log.items == [3]


def test_merge_types_rules():
    f32, i32 = jnp.float32, jnp.int32
    a = jax.core.ShapedArray
    assert merge_types(a((), i32, weak_type=True), a((), f32), "'x'", None) == a((), f32)
    assert merge_types(a((), i32, weak_type=True), a((), f32, weak_type=True), "'x'", None) == a((), f32, weak_type=True)
    with pytest.raises(LoopVariableError, match="'x' is int32\\[\\] before .* float32\\[\\] after"):
        merge_types(a((), i32), a((), f32), "'x'", None)
    with pytest.raises(LoopVariableError, match="shape"):
        merge_types(a((2,), f32), a((3,), f32), "'x'", None)


def test_set_loop_options_outside_loops_is_a_no_op():
    set_loop_options(maximum_iterations=3)
    with pytest.raises(ValueError, match="non-negative"):
        set_loop_options(maximum_iterations=2.5)


# -- how often user code is traced --------------------------------------------------------------
def _traced_while(x, start, bounded=False):
    """A staged `while` whose body counts its Python-side executions in `runs`."""
    runs = []
    s = Box(x=x, n=start)

    def body():
        runs.append(1)
        if bounded:
            set_loop_options(maximum_iterations=8)
        s.x, s.n = s.x * 2, s.n + 1

    convert_while(lambda: s.x.sum() < 50, body, s.paths, s.names)
    return runs


def test_loop_with_settled_types_traces_its_body_once():
    def f(x):
        assert len(_traced_while(x, jnp.int32(0))) == 1
        return x

    jax.make_jaxpr(f)(jnp.ones(2))


def test_loop_whose_types_change_is_traced_again():
    def f(x):
        assert len(_traced_while(x, 0)) == 2  # `n = 0` (Python) becomes a carried int32
        assert len(_traced_while(x, jnp.int32(0), bounded=True)) == 2  # rebuilt as a masked scan
        return x

    jax.make_jaxpr(f)(jnp.ones(2))


def test_traced_while_carries_no_iteration_counter():
    def f(x):
        s = Box(x=x)

        def body():
            s.x = s.x * 2

        convert_while(lambda: s.x.sum() < 50, body, s.paths, s.names)
        return s.values()[0]

    (eqn,) = [e for e in jax.make_jaxpr(f)(jnp.ones(2)).eqns if e.primitive.name == "while"]
    assert [str(v.aval) for v in eqn.outvars] == ["float32[2]"]


def test_for_over_rows_traces_its_body_once():
    runs = []

    def f(xs):
        s = Box(h=jnp.zeros(3))

        def body(row):
            runs.append(1)
            s.h = s.h + row

        convert_for(xs, body, s.paths, s.names, None)
        return s.values()[0]

    jax.make_jaxpr(f)(jnp.ones((4, 3)))
    assert len(runs) == 1


# -- what the staged loops add to the program -----------------------------------------------------
def _range_sum(xs, n):
    s = Box(h=jnp.zeros(xs.shape[1], xs.dtype))

    def body(t):
        assert t.dtype == jnp.int32 and t.weak_type  # like the Python int eager code gets
        s.h = s.h + xs[t]

    convert_for(loop_iter(builtins.range, n), body, s.paths, s.names, None)
    return s.values()[0]


def test_range_index_needs_no_arithmetic_or_converts():
    """`for t in range(n)`: t is the loop index itself, typed like a Python int (weak int32)."""
    xs = jnp.arange(12.0).reshape(4, 3)
    jaxpr = jax.make_jaxpr(_range_sum)(xs, jnp.int32(4))
    (loop,) = [e for e in jaxpr.eqns if e.primitive.name == "while"]
    assert "sign" not in str(jaxpr) and "floor_divide" not in str(jaxpr)
    # no clamping of n at 0 outside the loop either (XLA compiles such an op as a kernel of its own)
    assert [e.primitive.name for e in jaxpr.eqns if e.primitive.name != "broadcast_in_dim"] == ["while"]
    assert "convert_element_type" not in str(loop.params["cond_jaxpr"])
    body_ops = [e.primitive.name for e in loop.params["body_jaxpr"].eqns]
    assert "mul" not in body_ops and body_ops.count("convert_element_type") == 1  # the one xs[t] makes
    np.testing.assert_allclose(jax.jit(_range_sum)(xs, jnp.int32(3)), xs[:3].sum(0))


def test_staged_loops_under_x64_keep_an_int32_index():
    xs = jnp.arange(12.0).reshape(4, 3)
    with jax.enable_x64(True):
        out = jax.jit(_range_sum)(jnp.asarray(xs, jnp.float64), jnp.asarray(4))
    np.testing.assert_allclose(out, xs.sum(0))


@pytest.mark.parametrize("args", [(0, 5, 1), (5, 0, 1), (1, 8, 3), (8, 1, -3), (3, 3, 2), (2, 9, -1), (9, 2, -2)])
def test_staged_range_with_a_python_step(args):
    expected = list(range(*args))
    start, stop, step = args

    def f(start, stop):
        staged = StagedRange(start, stop, step)
        return staged.length, jnp.stack([staged.element(jnp.int32(i)) for i in range(max(len(expected), 1))])

    for bounds in [(jnp.array(start), jnp.array(stop)), (start, jnp.array(stop))]:
        length, elements = jax.jit(f, static_argnums=[0] if type(bounds[0]) is int else [])(*bounds)
        assert int(length) == len(expected)
        np.testing.assert_array_equal(np.asarray(elements)[: len(expected)], expected)


def fits_until_converged(w, x, y, lr=0.1, tol=1e-4):
    def loss_fn(w):
        return jnp.mean((x @ w - y) ** 2)

    prev = loss_fn(w)
    steps = 0
    for i in range(40):
        w = w - lr * jax.grad(loss_fn)(w)
        loss = loss_fn(w)
        steps = i + 1
        if prev - loss < tol:  # traced: the iterations after the first run as one loop
            break
        prev = loss
    return w, steps, loss


@pytest.mark.parametrize("tol", [1e-4, 10.0, -1.0], ids=["some", "one", "all"])
def test_a_static_range_with_a_traced_break_stages_its_rest_as_one_loop(tol):
    x = jnp.linspace(-1.0, 1.0, 24).reshape(8, 3)
    y = x @ jnp.array([1.0, -2.0, 0.5])
    static = dy2st.to_static(fits_until_converged)
    want = fits_until_converged(jnp.zeros(3), x, y, tol=tol)
    for _ in range(2):
        got = static(jnp.zeros(3), x, y, tol=tol)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-7)
        assert int(got[1]) == want[1]  # the numbers rule: the count the data decides, a 0-d array
        np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-9)
    jaxpr = jax.make_jaxpr(lambda w: static(w, x, y, tol=tol))(jnp.zeros(3))
    primitives = [e.primitive.name for e in jaxpr.eqns]
    # one loop (a masked scan, which jax.grad differentiates) for the iterations after the first,
    # not a cond per iteration
    assert primitives.count("scan") + primitives.count("while") == 1 and primitives.count("cond") <= 2


def _python_steps(w, x, steps):
    for _ in range(steps):  # a static range: a scan
        w = w - 0.1 * x.T @ jnp.tanh(x @ w)
    return w


@pytest.mark.parametrize("steps, rolled", [(2, False), (8, False), (9, True)])
def test_a_short_static_range_is_unrolled_by_xla_a_long_one_stays_a_loop(steps, rolled):
    """W14: two steps of an MLP as a rolled scan cost 1.43x `jax.jit` of the same Python loop
    (which unrolls it): XLA's while loop costs ~2 us per iteration on a CPU. A scan of up to 8
    iterations is unrolled by XLA (its body still traced once); a longer one stays a loop."""
    w, x = jnp.eye(3) * 0.5, jnp.ones((2, 3))
    static = dy2st.to_static(_python_steps)
    for _ in range(2):
        np.testing.assert_allclose(static(w, x, steps), _python_steps(w, x, steps), rtol=1e-6)
    (scan,) = [e for e in jax.make_jaxpr(lambda w: static(w, x, steps))(w).eqns if e.primitive.name == "scan"]
    assert scan.params["length"] == steps
    hlo = jax.jit(lambda w: static(w, x, steps)).lower(w).as_text()
    assert ("while" in hlo) == rolled
