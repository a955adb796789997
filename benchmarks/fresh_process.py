"""A fresh process's first calls (what a script or a test pays): the time `import dy2st`
adds to `import jax`, and the first and second call of W1's tiny branch through `to_static`
against `jax.jit` of the hand-written `lax.cond`, each measured in processes of their own,
importing from bytecode as an installed package does.

    python benchmarks/fresh_process.py          # prints a JSON object
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

_PROBE = r"""
import sys, time, json
t0 = time.perf_counter()
import jax, jax.numpy as jnp
from jax import lax
t1 = time.perf_counter()
if {dy2st}:
    import dy2st
t2 = time.perf_counter()
x = jnp.linspace(-1.0, 2.0, 16, dtype=jnp.float32)
jax.block_until_ready(x)
if {dy2st}:
    @dy2st.to_static
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1
else:
    @jax.jit
    def f(x):
        return lax.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, x)
t3 = time.perf_counter(); jax.block_until_ready(f(x)); t4 = time.perf_counter()
jax.block_until_ready(f(x)); t5 = time.perf_counter()
print(json.dumps({{"import_jax": t1 - t0, "import_dy2st": t2 - t1, "first": t4 - t3, "second": t5 - t4}}))
"""


def _run(use_dy2st: bool, folder: str) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # As an installed package imports: from its bytecode (some CI images set this variable,
    # and then every import compiles dy2st's sources again: 170 ms of the import, not 50).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    script = os.path.join(folder, f"probe_{int(use_dy2st)}.py")  # a file: dy2st reads the source
    with open(script, "w") as f:
        f.write(_PROBE.format(dy2st=use_dy2st))
    out = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(rounds: int = 5) -> dict:
    """Medians over `rounds` processes of each kind, interleaved."""
    runs = {True: [], False: []}
    with tempfile.TemporaryDirectory() as folder:
        _run(True, folder)  # writes the bytecode a first import makes, as installing does
        for _ in range(rounds):
            for kind in (False, True):
                runs[kind].append(_run(kind, folder))

    def median(kind, field):
        return statistics.median(r[field] for r in runs[kind])

    return {
        "import_dy2st_s": median(True, "import_dy2st"),
        "first_hand_s": median(False, "first"), "first_to_static_s": median(True, "first"),
        "second_hand_s": median(False, "second"), "second_to_static_s": median(True, "second"),
        "first_ts_over_hand": median(True, "first") / median(False, "first"),
    }


if __name__ == "__main__":
    print(json.dumps(measure(), indent=2))
