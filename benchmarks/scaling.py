"""How dy2st's costs grow with the program: conversion time against the function's length, and
compile time and memory of a 1,000-step static `range` loop (a scan) against the hand-written
scan and the same loop unrolled by `jax.jit`.

    python benchmarks/run.py --scaling     # with the workloads, or alone with --only none
"""

from __future__ import annotations

import gc
import importlib.util
import os
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
from jax import lax

import dy2st
from dy2st import conversion

SWEEP_IFS = (50, 200, 800)
LOOP_STEPS = 1000


# -- conversion against length ----------------------------------------------------------------
def _generated_source(n_ifs: int) -> str:
    """A function of `n_ifs` staged ifs (4 lines each), as a long model forward has."""
    lines = ["def f(x):", "    y = x"]
    for i in range(n_ifs):
        lines += [f"    if y.sum() > {i}:", f"        y = y * 2 + {i}", "    else:", f"        y = y - {i}"]
    lines.append("    return y")
    return "\n".join(lines) + "\n"


def _load(source: str, folder: str, name: str):
    path = os.path.join(folder, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


def conversion_time(fn, rounds: int) -> tuple[float, float]:
    """Median seconds to convert `fn` (source to code object, and the function bound to it):
    wall-clock, and CPU time of this thread (what a busy machine does not inflate)."""
    wall, cpu = [], []
    for _ in range(rounds):
        conversion.clear_cache()
        start, start_cpu = time.perf_counter(), time.thread_time()
        conversion.convert(fn)
        cpu.append(time.thread_time() - start_cpu)
        wall.append(time.perf_counter() - start)
    return statistics.median(wall), statistics.median(cpu)


def conversion_sweep(rounds: int = 3) -> list[dict]:
    """Per size: source lines, median conversion ms (wall and CPU), ms per line."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="dy2st_bench_") as folder:
        for n in SWEEP_IFS:
            source = _generated_source(n)
            wall, cpu = conversion_time(_load(source, folder, f"sweep_{n}"), rounds)
            lines = source.count("\n")
            rows.append({"ifs": n, "lines": lines, "ms": wall * 1e3, "cpu_ms": cpu * 1e3,
                         "ms_per_line": cpu * 1e3 / lines})
    conversion.clear_cache()
    return rows


# -- a 1,000-step static loop -------------------------------------------------------------------
def long_loop(w, h):
    for i in range(LOOP_STEPS):
        h = jnp.tanh(h @ w + 0.001 * i)
    return h


def _long_loop_scan(w, h):
    def step(h, i):
        return jnp.tanh(h @ w + 0.001 * i), None

    return lax.scan(step, h, jnp.arange(LOOP_STEPS))[0]


def _memory_bytes(compiled) -> int | None:
    """Peak bytes XLA plans for the program: arguments, outputs and temporaries."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        return None
    return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes + analysis.temp_size_in_bytes
               + getattr(analysis, "generated_code_size_in_bytes", 0))


def _compile_stats(jitted, args) -> dict:
    gc.collect()
    start = time.perf_counter()
    traced = jitted.trace(*args)
    lowered = traced.lower()
    compiled = lowered.compile()
    seconds = time.perf_counter() - start
    equations = len(traced.jaxpr.jaxpr.eqns)
    return {"compile_s": seconds, "memory_bytes": _memory_bytes(compiled), "top_level_equations": equations}


def long_loop_costs() -> dict:
    """Trace + compile time, XLA's planned memory and top-level jaxpr size of the loop three ways."""
    w = jax.random.normal(jax.random.PRNGKey(0), (64, 64), jnp.float32) / 8
    h = jnp.ones((8, 64), jnp.float32)
    static = dy2st.to_static(long_loop)
    results = {
        "to_static": _compile_stats(jax.jit(lambda w, h: static(w, h)), (w, h)),
        "hand scan": _compile_stats(jax.jit(lambda w, h: _long_loop_scan(w, h)), (w, h)),
        "unrolled (jax.jit of the Python loop)": _compile_stats(jax.jit(lambda w, h: long_loop(w, h)), (w, h)),
    }
    return results


def run(quick: bool = False) -> dict:
    return {"conversion_sweep": conversion_sweep(rounds=1 if quick else 3), "long_loop": long_loop_costs()}


def table(result: dict) -> str:
    lines = ["| conversion sweep | source lines | wall | CPU | CPU per line |", "|---|---|---|---|---|"]
    for row in result["conversion_sweep"]:
        lines.append(f"| {row['ifs']} staged ifs | {row['lines']} | {row['ms']:.1f} ms | {row['cpu_ms']:.1f} ms "
                     f"| {row['ms_per_line']:.3f} ms |")
    lines += ["", f"| {LOOP_STEPS}-step static loop | trace + compile | XLA memory | top-level equations |",
              "|---|---|---|---|"]
    for name, row in result["long_loop"].items():
        memory = "-" if row["memory_bytes"] is None else f"{row['memory_bytes'] / 1024:.0f} KiB"
        lines.append(f"| {name} | {row['compile_s'] * 1e3:.0f} ms | {memory} | {row['top_level_equations']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    print(table(run(quick="--quick" in sys.argv)))
