"""Writes to a file or stream (`out.write(...)`, `sys.stdout.write(...)`, `f.flush()`) and
prints into `sys.stdout`/`sys.stderr` named as `file=` happen as eagerly on every call: when the
program runs, in order with its prints, into the stream as it is then (a caller may redirect
`sys.stdout` between calls), and in a staged branch only where the data takes it."""

import contextlib
import io
import sys

import jax
import jax.numpy as jnp
import pytest

import dy2st


def writes_into_an_argument(x, out):
    n = out.write("step\n")
    if x.sum() > 0:
        out.write(f"pos {x.sum()}\n")
    out.writelines(["a", "b\n"])
    return x + n


def writes_to_stdout(x):
    sys.stdout.write("w\n")
    print("p", x.sum(), file=sys.stdout)
    print("e", file=sys.stderr)
    return x


def _outputs(fn, make_out, calls=3):
    seen = []
    for i in range(calls):
        out = make_out()
        x = (1.0 if i % 2 else -1.0) * jnp.ones(2)
        result = fn(x, out)
        jax.effects_barrier()
        seen.append((out.getvalue(), result.tolist()))
    return seen


def test_writes_into_a_file_happen_on_every_call_where_the_data_takes_them():
    eager = _outputs(writes_into_an_argument, io.StringIO)
    assert _outputs(dy2st.to_static(writes_into_an_argument), io.StringIO) == eager, eager
    shared = io.StringIO()  # one file for every call
    for fn in (writes_into_an_argument, dy2st.to_static(writes_into_an_argument)):
        shared.seek(0)
        shared.truncate()
        _outputs(fn, lambda: shared)
        if fn is writes_into_an_argument:
            want = shared.getvalue()
    assert shared.getvalue() == want


def test_stdout_and_stderr_are_the_streams_of_each_call():
    seen = {}
    for name, fn in (("eager", writes_to_stdout), ("static", dy2st.to_static(writes_to_stdout))):
        calls = []
        for _ in range(3):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                fn(jnp.ones(2))
                jax.effects_barrier()
            calls.append((out.getvalue(), err.getvalue()))
        seen[name] = calls
    assert seen["static"] == seen["eager"] == [("w\np 2.0\n", "e\n")] * 3, seen


LOG = None


def logs_and_flushes(x):
    LOG.write("called\n")
    LOG.flush()
    return x + 1


def test_a_module_file_written_and_flushed_on_every_call(tmp_path):
    global LOG
    texts = []
    for fn in (logs_and_flushes, dy2st.to_static(logs_and_flushes)):
        path = tmp_path / f"log{len(texts)}.txt"
        with open(path, "w") as LOG:
            for _ in range(3):
                fn(jnp.ones(2))
                jax.effects_barrier()
                texts.append(path.read_text())  # flushed by the call
    assert texts[3:] == texts[:3] == ["called\n", "called\ncalled\n", "called\ncalled\ncalled\n"], texts


def test_reading_back_what_a_staged_write_wrote_is_refused():
    def writes_then_reads(x, out):
        out.write("a")
        return x, out.getvalue()

    with pytest.raises(dy2st.errors.PythonEffectError, match="reads back a file"):
        dy2st.to_static(writes_then_reads)(jnp.ones(2), io.StringIO())


class Announced:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        print("enter")
        self.log.append("enter")
        return self

    def __exit__(self, *exc_info):
        print("exit", exc_info[0])
        return False


def runs_in_a_context(x, log):
    with Announced(log) as manager:
        y = x * 2
        print("body", y)
    return y, manager is not None


def test_a_context_managers_prints_come_in_order_on_every_call():
    seen = {}
    for name, fn in (("eager", runs_in_a_context), ("static", dy2st.to_static(runs_in_a_context))):
        calls = []
        for _ in range(3):
            out, log = io.StringIO(), []
            with contextlib.redirect_stdout(out):
                fn(jnp.ones(2), log)
                jax.effects_barrier()
            calls.append((out.getvalue(), log))
        seen[name] = calls
    assert seen["static"] == seen["eager"], seen
    assert seen["eager"][0] == ("enter\nbody [2. 2.]\nexit None\n", ["enter"])


@contextlib.contextmanager
def counting(c):  # run as it is (a library's wrapper calls it): its print happens while tracing
    c["n"] += 1
    print("enter", c["n"])
    yield


def enters_a_counting_context(x, c):
    with counting(c):
        y = x + 1
    return y


def test_a_print_of_a_trace_given_up_for_another_route_is_not_made_twice():
    # the dict argument changed in place sends the call to the stateful route, which traces
    # again: the first trace's print was made too ("enter 1" twice for eager's once)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        dy2st.to_static(enters_a_counting_context)(jnp.ones(2), {"n": 0})
    assert out.getvalue() == "enter 1\n"


LOG = io.StringIO()


def prints_into_a_redirect_of_its_own(x):
    with contextlib.redirect_stdout(LOG):  # a redirect the function makes: the text goes to LOG
        print("inside", x.sum())
        if x.sum() > 0:
            print("pos")
    print("outside", x[0])
    return x


def reads_back_its_own_redirect(x):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print("hidden", x.sum())
    return buf.getvalue()


def test_a_redirect_the_function_makes_gets_its_prints_on_every_call():
    """A print while the function itself redirected `sys.stdout` went to the caller's stdout
    when the program ran, after the redirect had ended (probe of Python semantics)."""
    global LOG
    LOG = io.StringIO()  # (another test's capture may have closed the module's)
    static = dy2st.to_static(prints_into_a_redirect_of_its_own)
    for sign in (1.0, -1.0, 1.0):
        x = sign * jnp.ones(2)
        for fn in (prints_into_a_redirect_of_its_own, static):
            LOG.seek(0)
            LOG.truncate()
            caller = io.StringIO()
            with contextlib.redirect_stdout(caller):
                fn(x)
                jax.effects_barrier()
            if fn is prints_into_a_redirect_of_its_own:
                expected = LOG.getvalue(), caller.getvalue()
            else:
                assert (LOG.getvalue(), caller.getvalue()) == expected


def test_reading_back_a_redirect_the_function_makes_is_refused():
    with pytest.raises(dy2st.errors.PythonEffectError, match=r"reads back a file \(StringIO.getvalue\(\)\)"):
        dy2st.to_static(reads_back_its_own_redirect)(jnp.ones(2))
