"""The benchmark script runs (a quick in-process subset); it makes no timing assertions."""

import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_runner():
    spec = importlib.util.spec_from_file_location("dy2st_benchmarks_run", os.path.join(ROOT, "benchmarks", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_benchmark_runs_and_writes_json(tmp_path, capsys):
    runner = _load_runner()
    out = tmp_path / "results.json"
    # W6 passes lists of arrays to the dispatcher: its per-part breakdown reads the call policy
    result = runner.main(["--quick", "--only", "W1", "W3", "W6", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "| W1 tiny branch" in printed and "| W3 MLP" in printed and "to_static / hand" in printed
    stored = json.loads(out.read_text())
    assert stored["workloads"].keys() == {"W1", "W3", "W6"} == result["workloads"].keys()
    for name in ("W1", "W3", "W6"):
        row = stored["workloads"][name]
        assert "to_static_error" not in row
        assert row["hand_s"] > 0 and row["to_static_s"] > 0 and row["eager_s"] > 0
    assert stored["workloads"]["W3"]["conversion_ms"] > 0
    assert stored["workloads"]["W3"]["first_to_static_s"] > 0
    assert {c["what"] for c in stored["targets"]} >= {"W1 to_static / hand-written"}
