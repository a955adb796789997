"""dy2st deployment: save a model with data-dependent control flow, load it in a fresh process
that never imports this file, and run it at several batch sizes from one artifact.

    python examples/deploy.py [--keep DIR]

Prints the artifact's size, the time a fresh process needs to load it and run its first call,
and the largest difference from the eager model at each batch size.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import dy2st

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCHES = (1, 7, 64)

# Run by a fresh interpreter: only dy2st and numpy, never this file.
LOADER = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np, dy2st
t1 = time.perf_counter()
loaded = dy2st.load(sys.argv[1])
t_load = time.perf_counter()
inputs = np.load(sys.argv[2], allow_pickle=False)
first = np.asarray(loaded(inputs[inputs.files[0]])[0])
t2 = time.perf_counter()
outputs = {k: loaded(inputs[k]) for k in inputs.files}
np.savez(sys.argv[3], **{k: np.asarray(v[0]) for k, v in outputs.items()},
         **{k + "_steps": np.asarray(v[1]) for k, v in outputs.items()})
print(json.dumps({"import_s": t1 - t0, "load_s": t_load - t1, "load_and_first_call_s": t2 - t1,
                  "model_imported": "deploy" in sys.modules or hasattr(sys.modules["__main__"], "forward")}))
"""


def init_params(key, sizes=(784, 256, 128, 10)):
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        key, sub = jax.random.split(key)
        params[f"w{i}"] = jax.random.normal(sub, (n_in, n_out)) / np.sqrt(n_in)
        params[f"b{i}"] = jnp.zeros(n_out)
    return params


def forward(params, x):
    """An MLP whose depth and output depend on the data, written the way one debugs it."""
    h = jnp.tanh(x @ params["w0"] + params["b0"])
    if h.mean() > 0:                          # data-dependent: an extra layer for some batches
        h = jnp.tanh(h @ params["w1"] + params["b1"])
    else:
        h = jnp.tanh(h[:, :128] * 0.5)
    if jnp.abs(h).max() < 1e-6:               # data-dependent early return
        return jnp.zeros((x.shape[0], 10)), 0
    steps = 0
    while jnp.abs(h).mean() < 0.5 and steps < 8:   # data-dependent trip count
        h = jnp.tanh(h * 1.5)
        steps += 1
    return jax.nn.log_softmax(h @ params["w2"] + params["b2"]), steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIR", help="write the artifact here and keep it")
    args = parser.parse_args()
    params = init_params(jax.random.PRNGKey(0))
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or os.path.join(tmp, "mlp_artifact")
        start = time.perf_counter()
        dy2st.save(forward, path, [dy2st.InputSpec((None, 784), "float32", name="x")], params=params)
        save_s = time.perf_counter() - start
        size = {f: os.path.getsize(os.path.join(path, f)) for f in sorted(os.listdir(path))}

        rng = np.random.default_rng(0)
        # Each batch size gets a different input scale and sign, so the batches take both
        # branches and different numbers of while-loop steps (0 included).
        scales = {1: -3.0, 7: 0.1, 64: 0.001}
        inputs = {f"b{b}": (scales[b] * (rng.normal(size=(b, 784)) + 3.0)).astype(np.float32) for b in BATCHES}
        np.savez(os.path.join(tmp, "inputs.npz"), **inputs)
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        result = subprocess.run([sys.executable, "-c", LOADER, path, os.path.join(tmp, "inputs.npz"),
                                 os.path.join(tmp, "outputs.npz")], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"loading in a fresh process failed:\n{result.stderr}")
        timings = json.loads(result.stdout.strip().splitlines()[-1])
        outputs = np.load(os.path.join(tmp, "outputs.npz"))

        print(f"artifact: {path}")
        print(f"  size: {sum(size.values()) / 1024:.1f} KiB ({', '.join(f'{f} {n} B' for f, n in size.items())})")
        print(f"  save (trace + export for cpu and cuda): {save_s:.2f} s")
        print(f"fresh process (imports dy2st + numpy only; model code imported: {timings['model_imported']}):")
        print(f"  import: {timings['import_s']:.2f} s, load + first call: {timings['load_and_first_call_s']:.2f} s "
              f"(load {timings['load_s']:.3f} s; the rest: specializing the symbolic program to the first batch size and compiling it)")
        for key, x in inputs.items():
            eager, steps = forward(params, x)
            branch = "extra layer" if float(jnp.tanh(x @ params["w0"] + params["b0"]).mean()) > 0 else "shortcut"
            err = float(np.max(np.abs(outputs[key] - np.asarray(eager))))
            print(f"  batch {x.shape[0]:>3}: output {outputs[key].shape}, branch {branch:<11}, "
                  f"while steps {int(outputs[key + '_steps'])} (eager {steps}), max |loaded - eager| = {err:.2e}")
            assert err < 1e-4 and int(outputs[key + "_steps"]) == steps, key


if __name__ == "__main__":
    main()
