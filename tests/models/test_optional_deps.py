"""dy2st works without flax, equinox and optax installed: they are imported lazily."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("flax", "equinox", "optax"):
                raise ImportError(f"{name} is blocked for this test")
            return None

    sys.meta_path.insert(0, Block())
    import jax, jax.numpy as jnp
    import dy2st

    class Model:
        def __init__(self):
            self.w = jnp.array([1.0, -2.0])
            self.calls = jnp.zeros((), jnp.int32)

        @dy2st.to_static
        def __call__(self, x):
            if (x * self.w).sum() > 0:
                y = x * self.w
            else:
                y = -x
            self.calls = self.calls + 1
            return y

    m = Model()
    assert m(jnp.array([1.0, 0.0])).tolist() == [1.0, 0.0]
    assert m(jnp.array([0.0, 1.0])).tolist() == [0.0, -1.0]
    assert int(m.calls) == 2 and len(Model.__call__.programs) == 1
    assert not any(k.split(".")[0] in ("flax", "equinox", "optax") for k in sys.modules)
    print("ok")
""")


def test_dy2st_runs_models_without_the_models_extra(tmp_path):
    script = tmp_path / "no_extras.py"  # a file, so dy2st can read the forward's source
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
