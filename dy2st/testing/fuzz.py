"""Differential fuzzing: random programs run eagerly, through `to_static`, and through
`jax.jit(to_static(f))` must agree (and so must their gradients, for loop-free programs).

Programs come from `dy2st.testing.program_gen.programs`. Each is written to a module in a
temporary directory and imported, because dy2st reads a function's source from its file.

A long campaign::

    python -m dy2st.testing.fuzz --examples 10000 --seed 0 --out fuzz-failures

prints a summary (examples run, agreements, mismatches, crashes) and saves the source and
inputs of each failing program under `--out`.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import os
import sys
import tempfile
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np

import dy2st
from dy2st.testing.program_gen import Features, GeneratedProgram, programs

# What dy2st supports on this branch; the generator uses no construct outside this set.
DEFAULT_FEATURES = Features(loops=True, loop_returns=True, calls=True)

_TMPDIR = None


class Outcome:
    OK = "ok"
    MISMATCH = "mismatch"  # every path ran but results differ
    CRASH = "crash"  # eager ran, to_static or jit(to_static) raised
    INVALID = "invalid"  # the eager program itself raised: a generator bug


@dataclasses.dataclass
class Result:
    outcome: str
    stage: str = ""  # which path failed: to_static, jit, grad
    detail: str = ""


def load_function(source: str, name: str = "f"):
    """Import `source` as a module from a temporary file and return its function `name`."""
    global _TMPDIR
    if _TMPDIR is None:
        _TMPDIR = tempfile.mkdtemp(prefix="dy2st_fuzz_")
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    module_name = f"dy2st_fuzz_{digest}"
    path = os.path.join(_TMPDIR, module_name + ".py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _leaves_close(expected, actual, what: str):
    exp, act = jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(actual)
    if len(exp) != len(act):
        return f"{what}: {len(act)} outputs, eager gave {len(exp)}"
    for i, (e, a) in enumerate(zip(exp, act)):
        e, a = np.asarray(e), np.asarray(a)
        if e.shape != a.shape:
            return f"{what}: output {i} has shape {a.shape}, eager {e.shape}"
        if not np.allclose(a.astype(np.float64), e.astype(np.float64), rtol=1e-5, atol=1e-5, equal_nan=True):
            return f"{what}: output {i} is {a.tolist()}, eager {e.tolist()}"
    return None


def _array_loss(fn, n):
    def loss(x, y, m):
        outs = fn(x, y, m, n)
        return outs[0].sum() + outs[1].sum()

    return loss


def run_program(program: GeneratedProgram, check_grad: bool = True) -> Result:
    """Run one program eagerly, via to_static and via jit(to_static); compare."""
    f = load_function(program.source)
    x, y, m = (jnp.asarray(v) for v in (program.x, program.y, program.m))
    n = jnp.asarray(program.n, jnp.int32) if program.n_as_array else program.n
    try:
        expected = f(x, y, m, n)
    except Exception as e:  # noqa: BLE001 - a generated program must run eagerly
        return Result(Outcome.INVALID, "eager", _format(e))
    static = dy2st.to_static(f)
    stage = "to_static"
    try:
        got = static(x, y, m, n)
        problem = _leaves_close(expected, got, "to_static")
        if problem is None:
            stage = "jit"
            if program.n_as_array:
                got = jax.jit(static)(x, y, m, n)
            else:
                got = jax.jit(lambda x, y, m: static(x, y, m, n))(x, y, m)
            problem = _leaves_close(expected, got, "jit(to_static)")
        if problem is None and check_grad and not program.has_loops:
            stage = "grad"
            want = jax.grad(_array_loss(f, n), argnums=(0, 1, 2))(x, y, m)
            got = jax.grad(_array_loss(static, n), argnums=(0, 1, 2))(x, y, m)
            problem = _leaves_close(want, got, "grad(to_static)")
    except Exception as e:  # noqa: BLE001 - any exception is a finding
        return Result(Outcome.CRASH, stage, _format(e))
    if problem is not None:
        return Result(Outcome.MISMATCH, stage, problem)
    return Result(Outcome.OK)


def _format(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()


def _save_failure(out_dir: str, index: int, program: GeneratedProgram, result: Result) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"failure_{index:05d}_{result.outcome}.py")
    header = [
        f"# outcome: {result.outcome} ({result.stage})",
        *("# " + line for line in result.detail.splitlines()[:40]),
        f"# inputs: x={program.x.tolist()} y={program.y.tolist()}",
        f"#         m={program.m.tolist()} n={program.n} n_as_array={program.n_as_array}",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(header) + program.source)
    return path


def campaign(examples: int, seed: int, features: Features, out_dir: str, check_grad: bool = True,
             verbose: bool = False) -> dict:
    """Run `examples` random programs; return counts and the paths of saved failures."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed

    summary = {"examples": 0, "ok": 0, Outcome.MISMATCH: 0, Outcome.CRASH: 0, Outcome.INVALID: 0, "saved": [],
               "by_stage": {}}
    start = time.time()

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=["generate"])
    @given(programs(features))
    def one(program):
        index = summary["examples"]
        summary["examples"] += 1
        result = run_program(program, check_grad)
        summary[result.outcome] += 1
        if result.outcome != Outcome.OK:
            key = f"{result.outcome}/{result.stage}"
            summary["by_stage"][key] = summary["by_stage"].get(key, 0) + 1
            summary["saved"].append(_save_failure(out_dir, index, program, result))
            if verbose:
                print(f"[{index}] {result.outcome} in {result.stage}: {result.detail.splitlines()[0][:200]}",
                      flush=True)
        if summary["examples"] % 100 == 0:
            # Each example converts and compiles fresh functions: drop them to bound memory.
            dy2st.conversion.clear_cache()
            jax.clear_caches()
            print(f"... {summary['examples']} examples, {time.time() - start:.0f}s: {summary['ok']} ok, "
                  f"{summary[Outcome.MISMATCH]} mismatches, {summary[Outcome.CRASH]} crashes, "
                  f"{summary[Outcome.INVALID]} invalid", flush=True)

    one()
    summary["seconds"] = time.time() - start
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dy2st.testing.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--features", default=",".join(
        f.name for f in dataclasses.fields(DEFAULT_FEATURES) if getattr(DEFAULT_FEATURES, f.name)) or "none",
        help="comma-separated constructs to generate: loops, loop_returns, calls (or none)")
    parser.add_argument("--out", default="fuzz-failures", help="directory for failing programs")
    parser.add_argument("--no-grad", action="store_true", help="skip the gradient comparison")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    jax.config.update("jax_platforms", "cpu") if os.environ.get("JAX_PLATFORMS") is None else None
    features = Features.parse(args.features)
    summary = campaign(args.examples, args.seed, features, args.out, not args.no_grad, args.verbose)
    print(f"dy2st fuzz: seed {args.seed}, features {features}")
    print(f"  examples run: {summary['examples']} in {summary['seconds']:.0f}s")
    print(f"  agreements:   {summary['ok']}")
    print(f"  mismatches:   {summary[Outcome.MISMATCH]}")
    print(f"  crashes:      {summary[Outcome.CRASH]}")
    print(f"  invalid (generator bugs, eager raised): {summary[Outcome.INVALID]}")
    for key, count in sorted(summary["by_stage"].items()):
        print(f"    {key}: {count}")
    if summary["saved"]:
        print(f"  failing programs saved under {args.out}/ ({len(summary['saved'])} files)")
    return 0 if summary["ok"] == summary["examples"] else 1


if __name__ == "__main__":
    sys.exit(main())
