"""The differential fuzzer in CI: random programs agree eagerly, via to_static and via
jit(to_static), gradients included. A fixed (derandomized) set of examples keeps it
deterministic; `python -m dy2st.testing.fuzz --examples 10000` runs a long campaign.
"""

import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from dy2st.testing import fuzz
from dy2st.testing.program_gen import Features, GeneratedProgram, programs

CI_EXAMPLES = 40  # about 15 s on a 2-core machine
SLOW_EXAMPLES = 300  # `-m slow` or DY2ST_RUN_SLOW=1: a few minutes


def _agree(program):
    note(program.source)
    result = fuzz.run_program(program)
    assert result.outcome == fuzz.Outcome.OK, f"{result.outcome} in {result.stage}: {result.detail}\n{program!r}"


@settings(max_examples=CI_EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(programs(fuzz.DEFAULT_FEATURES))
def test_random_programs_agree(program):
    _agree(program)


def _slow_selected(config) -> bool:
    expr = config.getoption("markexpr") or ""
    return os.environ.get("DY2ST_RUN_SLOW") == "1" or ("slow" in expr and "not slow" not in expr)


@pytest.mark.slow
def test_random_programs_agree_slow(request):
    if not _slow_selected(request.config):
        pytest.skip("slow: run with -m slow or DY2ST_RUN_SLOW=1")

    @settings(max_examples=SLOW_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(programs(fuzz.DEFAULT_FEATURES))
    def agree(program):
        _agree(program)

    agree()


def _draw_sources(features, count=150):
    sources = []

    @settings(max_examples=count, derandomize=True, database=None, phases=["generate"],
              suppress_health_check=list(HealthCheck))
    @given(programs(features))
    def collect(program):
        compile(program.source, "<generated>", "exec")  # every program is valid Python
        sources.append(program.source)

    collect()
    return "\n".join(sources)


def test_generator_covers_the_constructs():
    text = _draw_sources(Features())
    for construct in (r"^\s+if .*:$", r"^\s+elif ", r"^\s+else:$", r" and ", r" or ", r"\bnot ",
                      r" if .* else ", r"\+= ", r"-= ", r"^\s{8,}return ", r"\d+ <=? .* <=? \d+",
                      r"\.any\(\)", r"\.all\(\)", r"\.at\[", r"jnp\.where"):
        assert re.search(construct, text, re.M), f"no generated program contains {construct!r}"
    assert "while " not in text and "def h0" not in text, "features off, constructs generated anyway"


def test_generator_emits_loops_and_calls_when_enabled():
    text = _draw_sources(Features(loops=True, calls=True), count=60)
    for construct in (r"^\s+for \w+ in range\(", r"^\s+for r\d+ in m:", r"^\s+while ", r"^\s+break$",
                      r"^\s+continue$", r"^def h0\(a, k, m\):", r"= h\d\("):
        assert re.search(construct, text, re.M), f"no generated program contains {construct!r}"


def _program(source, n=1):
    zeros = np.zeros(4, np.float32)
    return GeneratedProgram(source, zeros + 1, zeros - 1, np.ones((3, 4), np.float32), n, False, False)


SOURCE = """\
import jax.numpy as jnp


def f(x, y, m, n):
    a0 = x
    if (a0 + y).sum() >= 0:
        a0 = a0 * 2
    return a0, y, n, 0
"""


def test_runner_agrees_on_a_correct_program():
    assert fuzz.run_program(_program(SOURCE)).outcome == fuzz.Outcome.OK


def test_runner_reports_mismatch(monkeypatch):
    """A to_static that computes something else is caught, at the to_static stage."""
    wrong = _program(SOURCE)
    real = fuzz.dy2st.to_static

    def off_by_one(f):
        static = real(f)
        return lambda x, y, m, n: static(x, y, m, n + 1)

    monkeypatch.setattr(fuzz.dy2st, "to_static", off_by_one)
    result = fuzz.run_program(wrong)
    assert (result.outcome, result.stage) == (fuzz.Outcome.MISMATCH, "to_static")
    assert "output 2 is 2, eager 1" in result.detail


def test_runner_reports_crash_and_invalid():
    crash = _program(SOURCE.replace("a0 = a0 * 2", "a0 = a0 * 2\n        k = 1\n    else:\n        k = jnp.ones(2)\n    n = n + k"))
    assert fuzz.run_program(crash).outcome == fuzz.Outcome.CRASH  # k: int vs float32[2] in a staged if
    invalid = _program(SOURCE.replace("return a0", "return undefined_name"))
    assert fuzz.run_program(invalid).outcome == fuzz.Outcome.INVALID


def test_main_prints_summary(tmp_path, capsys):
    code = fuzz.main(["--examples", "3", "--seed", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"examples run: 3\b", out) and "agreements:   3" in out
    assert "mismatches:   0" in out and "crashes:      0" in out


def test_features_parse():
    assert Features.parse("loops,calls") == Features(loops=True, calls=True)
    assert Features.parse("none") == Features()
    with pytest.raises(ValueError, match="unknown features"):
        Features.parse("goto")
