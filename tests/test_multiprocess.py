"""Scale-out across processes: two processes on this machine, two CPU devices each, joined by
`jax.distributed.initialize` on localhost with gloo CPU collectives, run one `to_static`
data-parallel train step (a data-dependent `if` and `while`) on a batch sharded across all four
devices; the losses and parameters equal a one-process run's (`tests/multiprocess_script.py`)."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "multiprocess_script.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    return env


def _gloo_available() -> bool:
    probe = "import jax; jax.config.update('jax_cpu_collectives_implementation', 'gloo')"
    return subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True, timeout=120).returncode == 0


@pytest.mark.skipif(sys.platform != "linux", reason="gloo CPU collectives are tested on Linux")
def test_two_processes_train_as_one(tmp_path):
    if not _gloo_available():
        pytest.skip("this jaxlib has no gloo CPU collectives (jax_cpu_collectives_implementation)")
    port, two, one = str(_free_port()), tmp_path / "two.npz", tmp_path / "one.npz"
    procs = [subprocess.Popen([sys.executable, SCRIPT, str(i), "2", port, str(two)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    try:
        outs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    for i, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"process {i}:\n{out[-3000:]}"
        assert f"process {i}: ok, 4 devices" in out
    alone = subprocess.run([sys.executable, SCRIPT, "0", "1", "0", str(one)], env=_env(), capture_output=True,
                           text=True, timeout=240)
    assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]
    a, b = np.load(two), np.load(one)
    assert int(a["devices"]) == 4 and int(b["devices"]) == 2
    for name in ("losses", "w1", "w2"):
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6)
