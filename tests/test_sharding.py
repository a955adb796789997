"""Multi-device: StaticFunctions on arrays sharded over a Mesh of 8 host CPU devices.

The device count is fixed when jax starts, so the checks run in one subprocess
(`tests/sharding_script.py`) with XLA_FLAGS=--xla_force_host_platform_device_count=8; each
check reports PASS/FAIL on its own line and is one test here.
"""

import os
import subprocess
import sys

import pytest

import dy2st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "sharding_script.py")
CHECKS = [
    "check_sharded_matches_unsharded",
    "check_cache_keyed_by_sharding",
    "check_in_out_shardings",
    "check_in_shardings_with_static_args",
    "check_data_parallel_training",
    "check_nnx_partitioned_model",
]


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    lines = {}
    for line in proc.stdout.splitlines():
        if line.startswith(("PASS ", "FAIL ")):
            name = line[5:].split(":", 1)[0]
            lines[name] = line
    return proc, lines


@pytest.mark.parametrize("check", CHECKS)
def test_sharding(report, check):
    proc, lines = report
    assert check in lines, f"{check} did not report:\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
    status = lines[check]
    if status.startswith("FAIL"):
        detail = proc.stdout[proc.stdout.index(status):].split("\nPASS ")[0].split("\nFAIL ")[0]
        pytest.fail(detail)


def test_script_lists_every_check(report):
    proc, lines = report
    assert sorted(lines) == sorted(CHECKS), proc.stdout
    assert proc.returncode == (0 if all(l.startswith("PASS") for l in lines.values()) else 1)


def test_to_static_accepts_shardings_as_decorator_options():
    """`@to_static(in_shardings=..., out_shardings=...)` and binding to methods keep the options."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    device = SingleDeviceSharding(jax.devices()[0])

    @dy2st.to_static(in_shardings=device, out_shardings=device)
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    class M:
        @dy2st.to_static(in_shardings=(None, device))  # one entry per parameter, self too
        def g(self, x):
            return -x if x.sum() > 0 else x

    x = jnp.ones(3)
    assert f(x).sharding == device
    assert float(f(-x).sum()) == -6.0
    assert float(M().g(x).sum()) == -3.0
    assert M().g._shardings.in_shardings == (None, device)
