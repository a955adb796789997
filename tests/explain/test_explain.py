"""`explain`: every annotation is checked against the traced program (a line reported as a scan
holds a scan equation, and every cond/scan/while of the program is reported at its line)."""

import collections
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st import cli
from dy2st.runtime import events

import explain_programs as P
from explain_programs import line_of

FILE = P.__file__


def kinds(report, marker):
    return [n.event.kind for n in report.at(line_of(marker), FILE)]


def notes(report, marker):
    return report.at(line_of(marker), FILE)


def assert_true_to_program(report):
    """The staged events of each line are exactly the control-flow equations the jaxpr holds
    there (a bounded while's masked scan holds one cond per step function, which is its own)."""
    reported = collections.Counter()
    for note in report.notes:
        primitive = events.KINDS.get(note.event.kind)
        if primitive is not None:
            reported[(note.event.filename, note.event.lineno, primitive)] += note.count
        if "masked steps" in note.event.summary:
            reported[(note.event.filename, note.event.lineno, "cond")] += note.count
    in_program = collections.Counter()
    for (filename, lineno), primitives in report.jaxpr_lines.items():
        for primitive in ("cond", "scan", "while"):
            if primitives.get(primitive):
                in_program[(filename, lineno, primitive)] += primitives[primitive]
    assert reported == in_program
    total = sum(v for k, v in report.primitives.items() if k in ("cond", "scan", "while"))
    assert total == sum(in_program.values())  # every control-flow equation sits on a user line


@pytest.fixture(scope="module")
def everything():
    return dy2st.explain(P.everything, jnp.ones(3), 3)


def test_each_construct_is_annotated_with_what_it_became(everything):
    assert kinds(everything, "traced if") == ["cond"]
    assert kinds(everything, "python if") == ["python_if"]
    assert kinds(everything, "static range scan") == ["scan"]
    assert kinds(everything, "range that grows a list") == ["unrolled"]
    assert kinds(everything, "traced while") == ["while_loop"]
    assert kinds(everything, "python while") == ["python_loop"]
    assert kinds(everything, "converted call") == ["converted_call"]
    assert kinds(everything, "python call") == ["python_call"]
    assert kinds(everything, "traced print") == ["print"]
    assert kinds(everything, "traced assert") == ["check"]
    assert kinds(everything, "traced ternary") == ["cond"]
    assert kinds(everything, "helper's if") == ["cond"]  # the converted callee's own lines
    assert_true_to_program(everything)


def test_details_say_what_is_carried_and_why(everything):
    (scan,) = notes(everything, "static range scan")
    assert scan.event.summary == "lax.scan, 3 iterations"
    assert "y: float32[3]" in scan.event.detail
    (unrolled,) = notes(everything, "range that grows a list")
    assert unrolled.event.summary == "unrolled, 3 iterations"
    (python_while,) = notes(everything, "python while")
    assert python_while.event.summary == "Python while: 2 iterations"
    (python_call,) = notes(everything, "python call")
    assert "marked not_to_static" in python_call.event.detail
    (if_note,) = notes(everything, "python if")
    assert "if branch" in if_note.event.detail


def test_program_summary(everything):
    assert everything.signature == "x: float32[3], n: 3"
    assert everything.host_callbacks == 2  # the print and the assert
    assert everything.primitives["while"] == 1 and everything.primitives["scan"] == 1
    assert everything.equations == sum(_count_equations(everything.jaxpr.jaxpr))
    assert everything.compile_seconds is not None and everything.trace_seconds > 0
    assert everything.error is None


def _count_equations(jaxpr):
    for eqn in jaxpr.eqns:
        yield 1
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            yield from _count_equations(sub)


def test_text_report_is_the_source_with_a_margin(everything):
    text = str(everything)
    line = line_of("traced if")
    row = next(r for r in text.splitlines() if r.lstrip().startswith(f"{line} |"))
    assert "if x.sum() > 0:" in row and "lax.cond" in row
    assert "in helper:" in text  # the converted callee's source follows
    assert "def helper(v):" in text
    assert "signature (the program's cache key): x: float32[3], n: 3" in text


def test_as_dict_is_json_and_html_escapes_the_source(everything):
    data = json.loads(json.dumps(everything.as_dict()))
    assert {e["kind"] for e in data["events"]} >= {"cond", "scan", "while_loop", "unrolled", "check", "print"}
    assert data["host_callbacks"] == 2
    page = everything._repr_html_()
    assert "x.sum() &gt; 0" in page and "x.sum() > 0" not in page
    assert "lax.cond" in page and "color:" in page


def test_early_return_inside_a_loop():
    report = dy2st.explain(P.search, jnp.arange(4.0))
    assert "cond" in kinds(report, "search test")
    assert "scan" in kinds(report, "search loop")  # the iterations after the break turned traced
    assert_true_to_program(report)


def test_nested_loops_count_each_unrolled_copy():
    report = dy2st.explain(P.nested, jnp.zeros(3))
    (outer,) = notes(report, "outer loop")
    assert outer.event.kind == "unrolled" and "'total' starts as a Python value" in outer.event.detail
    (inner,) = notes(report, "inner while")
    assert inner.event.kind == "while_loop" and inner.count == 3  # one while per unrolled iteration
    assert_true_to_program(report)


def test_static_ranges_that_scan_and_that_unroll():
    report = dy2st.explain(P.scan_or_unroll, jnp.ones(3))
    assert kinds(report, "scanned range") == ["scan"]
    (unrolled,) = notes(report, "unrolled range")
    assert unrolled.event.kind == "unrolled" and "scan cannot carry" in unrolled.event.detail
    assert_true_to_program(report)


def test_bounded_while_and_its_run_time_check():
    report = dy2st.explain(P.bounded, jnp.zeros(2))
    assert sorted(kinds(report, "bounded while")) == ["check", "scan"]
    assert any("20 masked steps" in n.event.summary for n in notes(report, "bounded while"))
    assert_true_to_program(report)


def test_zero_trip_check_is_reported():
    # the check is made where the variable first set in the loop is read (eager raises there)
    report = dy2st.explain(P.zero_trip, jnp.ones(2), jnp.asarray(3))
    assert kinds(report, "zero-trip loop") == ["while_loop"]
    (check,) = notes(report, "read after the loop")
    assert check.event.kind == "check"
    assert "'last' is bound" in check.event.detail and "UnboundLocalError" in check.event.detail
    assert report.host_callbacks == 1
    assert_true_to_program(report)


def test_recursion_is_converted_calls_and_python_ifs():
    report = dy2st.explain(P.fact, 3, jnp.ones(2))
    (call,) = notes(report, "recursive call")
    assert call.event.kind == "converted_call" and call.count == 3
    assert set(kinds(report, "base case")) == {"python_if"}
    assert report.primitives == {} and report.signature == "n: 3, x: float32[2]"


def test_model_with_state_carries_its_attribute():
    model = P.Counter()
    forward = dy2st.to_static(model)
    report = forward.explain(jnp.ones(3))
    (loop,) = notes(report, "model loop")
    assert loop.event.kind == "scan" and "self.steps: int32[]" in loop.event.detail
    assert kinds(report, "model if") == ["cond"]
    assert_true_to_program(report)
    assert int(model.steps) == 0  # explaining traces; it never runs the model or writes to it
    assert not isinstance(model.steps, jax.core.Tracer)


def test_a_refusal_is_reported_at_its_line_not_raised():
    report = dy2st.explain(P.refused, jnp.ones(2))
    assert isinstance(report.error, dy2st.errors.BranchOutputError)
    assert kinds(report, "refused if") == ["error"]
    assert "no program" in str(report) and "✗ error: BranchOutputError" in str(report)
    assert report.as_dict()["error"].startswith('File "')


def test_input_specs_with_symbolic_dims_trace_without_compiling():
    report = dy2st.explain(P.helper, dy2st.InputSpec([None], "float32", name="v"))
    assert report.signature == "v: float32[v_0]"
    assert report.compile_seconds is None and "symbolic" in report.compile_note
    assert kinds(report, "helper's if") == ["cond"]


def test_explain_leaves_the_program_cache_alone():
    f = dy2st.to_static(P.search)
    x = jnp.arange(4.0)
    f(x)
    before = len(f.programs)
    report = f.explain(x)
    assert report.programs_cached == before == len(f.programs)
    np.testing.assert_allclose(f(x), P.search(x))


def test_a_normal_call_records_nothing(monkeypatch):
    noted = []
    monkeypatch.setattr(events, "note", lambda *a, **k: noted.append(a))
    f = dy2st.to_static(P.everything)
    f(jnp.ones(3), 3)  # traces: the operators only look whether a recording is open
    f(jnp.ones(3), 3)
    assert noted == [] and not events.active()


def test_explain_uses_the_functions_input_spec_by_default():
    f = dy2st.to_static(P.helper, input_spec=[dy2st.InputSpec([4], "float32")])
    report = f.explain()
    assert report.signature == "v: float32[4]" and report.compile_seconds is not None


def test_command_line(capsys, tmp_path):
    status = cli.main(["explain", f"{FILE}:helper", "--input-spec", "v:float32[3]"])
    out = capsys.readouterr().out
    assert status == 0 and "lax.cond" in out and "def helper(v):" in out
    status = cli.main(["explain", f"{FILE}:helper", "--input-spec", "v:float32[3]", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert status == 0 and data["function"] == "helper"
    page = tmp_path / "report.html"
    assert cli.main(["explain", f"{FILE}:Counter.__call__", "--input-spec", "x:float32[3]", "--html", str(page)]) == 0
    assert "lax.scan" in page.read_text()
    assert cli.main(["explain", f"{FILE}:refused", "--input-spec", "x:float32[2]"]) == 1  # the refusal, shown
    assert "BranchOutputError" in capsys.readouterr().out


def test_a_call_through_jax_grad_of_a_nested_function():
    report = dy2st.explain(P.grad_of_nested, jnp.ones(3))
    (call,) = notes(report, "grad call")
    assert call.event.kind == "python_call" and "loss itself is converted" in call.event.detail
    (cond,) = [n for n in notes(report, "nested if") if n.event.kind == "cond"]
    # jax.grad adds the backward pass of each cond: the program holds the forward ones and more.
    in_program = report.jaxpr_lines[(FILE, line_of("nested if"))]["cond"]
    assert cond.count == 1 and in_program > cond.count  # the early return and the return after it: one cond


def test_a_model_whose_call_is_a_static_function_shows_its_source():
    report = dy2st.explain(P.calls_decorated, jnp.ones(3), P.Decorated())
    (call,) = notes(report, "decorated call")
    assert call.event.kind == "converted_call"
    assert "cond" in kinds(report, "decorated if")
    assert "in Decorated.__call__:" in str(report)
    assert_true_to_program(report)


def _example(name):
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"dy2st_example_{name}", os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_examples_are_explained_truly():
    quickstart = _example("quickstart")
    params = {"w1": jnp.ones((16, 32)), "b1": jnp.zeros(32), "w2": jnp.ones((32, 32)), "w_out": jnp.ones(32)}
    report = dy2st.explain(quickstart.forward, params, jnp.ones((8, 16)))
    assert report.primitives == {"cond": 2} and report.error is None  # the early return: one cond
    assert_true_to_program(report)
    loops = _example("loops")
    report = dy2st.explain(loops.newton_sqrt, jnp.linspace(1.0, 10.0, 8))
    assert [n.event.kind for n in report.notes] == ["while_loop"]
    assert_true_to_program(report)


def test_errors_while_explaining_are_mapped_as_a_call_maps_them():
    def index_of_array(x, model):
        xs = [1.0, x.sum()]
        return x * model.w * xs.index(x.sum())  # Python compares arrays: jax's bool conversion error

    report = dy2st.explain(index_of_array, jnp.ones(3), P.Counter())  # the model takes the stateful path
    assert isinstance(report.error, dy2st.errors.TracedValueError)
    assert isinstance(report.error.__cause__, jax.errors.ConcretizationTypeError)


def test_the_report_says_what_earlier_calls_showed_about_the_route():
    @dy2st.to_static
    def counts(x, d):
        d["n"] = d["n"] + 1
        assert x.sum() > -100
        return x * 2

    x = jnp.ones(2)
    assert counts.explain(x, {"n": 1}).route == []  # nothing called yet
    counts(x, {"n": 1})
    report = counts.explain(x, {"n": 1})
    assert counts.policy.lists_lifted and counts.policy.checks
    assert "list and dict arguments are lifted as state and written back (a trace changed or kept one)" in report.route
    assert "  calls: calls wait for run-time checks (a program holds an assert or another check)" in str(report)
    assert report.as_dict()["route"] == report.route
