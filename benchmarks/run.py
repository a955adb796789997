"""Time dy2st against eager JAX and hand-written `jax.jit` + `lax` (the reference).

    python benchmarks/run.py            # full run, about 2 minutes on a 2-core CPU VM
    python benchmarks/run.py --quick    # smoke run, well under a minute

Everything runs in one process. Steady state: after warm-up, rounds of timed batches, the
variants of a workload interleaved (the order rotating each round), every call followed by
`block_until_ready` so execution is included; the reported time is the median over rounds of
the per-call mean of a batch. First call (W5): a fresh function each round (the conversion
cache cleared for dy2st), time to the first result, conversion + trace + compile + run, median.
Conversion alone: source to code object, median. Prints a table and writes it as JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

import dy2st  # noqa: E402
from dy2st import conversion  # noqa: E402

import workloads as wl  # noqa: E402

# (what, workload, ratio name, target, "max" = ratio must be at most target, "min" = at least)
TARGETS = [
    ("W1 to_static / hand-written", "W1", "ts_over_hand", 1.15, "max"),
    ("W2 to_static / hand-written", "W2", "ts_over_hand", 1.05, "max"),
    ("W3 to_static / hand-written", "W3", "ts_over_hand", 1.05, "max"),
    ("W4 to_static / hand-written", "W4", "ts_over_hand", 1.05, "max"),
    ("W4n to_static / hand-written", "W4n", "ts_over_hand", 1.05, "max"),
    ("W5 conversion alone, W3 (ms)", "W3", "conversion_ms", 5.0, "max"),
    ("W5 conversion alone, W4 (ms)", "W4", "conversion_ms", 5.0, "max"),
    ("W5 conversion alone, W4n (ms)", "W4n", "conversion_ms", 5.0, "max"),
    ("W5 conversion alone CPU time, W3 (ms)", "W3", "conversion_cpu_ms", 5.0, "max"),
    ("W5 conversion alone CPU time, W4 (ms)", "W4", "conversion_cpu_ms", 5.0, "max"),
    ("W5 conversion alone CPU time, W4n (ms)", "W4n", "conversion_cpu_ms", 5.0, "max"),
    ("W5 first call W3, to_static / hand", "W3", "first_ts_over_hand", 1.15, "max"),
    ("W5 first call W4, to_static / hand", "W4", "first_ts_over_hand", 1.15, "max"),
    ("W5 first call W4n, to_static / hand", "W4n", "first_ts_over_hand", 1.15, "max"),
    ("W2 eager / to_static (speed-up)", "W2", "eager_over_ts", 10.0, "min"),
    ("W4 eager / to_static (speed-up)", "W4", "eager_over_ts", 10.0, "min"),
    ("W4n eager / to_static (speed-up)", "W4n", "eager_over_ts", 10.0, "min"),
]


def _block(out):
    if hasattr(out, "block_until_ready"):
        out.block_until_ready()
    else:
        jax.block_until_ready(out)
    return out


def _batch(fn, args, n: int) -> float:
    """Mean seconds per call over `n` calls, each waited for."""
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(n):
            out = fn(*args)
            if type(out) is _ARRAY:
                out.block_until_ready()
            else:
                jax.block_until_ready(out)
        return (time.perf_counter() - start) / n
    finally:
        gc.enable()


_ARRAY = type(jax.numpy.zeros(()))


def steady_state(variants: dict, args, rounds: int, batch_s: float) -> dict:
    """Median per-call seconds of each variant, interleaved after warm-up."""
    sizes = {}
    for name, fn in variants.items():
        for _ in range(3):
            _block(fn(*args))
        once = min(_batch(fn, args, 1) for _ in range(3))
        sizes[name] = max(1, min(20000, int(batch_s / max(once, 1e-7))))
    times = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            times[name].append(_batch(variants[name], args, sizes[name]))
        gc.collect()
    return {name: statistics.median(ts) for name, ts in times.items()}


def first_call(work: wl.Workload, args, rounds: int) -> dict:
    """Median seconds to the first result of a fresh function: hand-written and to_static."""
    hand, static = [], []
    for _ in range(rounds):
        fresh = work.fresh_hand()
        start = time.perf_counter()
        _block(fresh(*args))
        hand.append(time.perf_counter() - start)
        conversion.clear_cache()
        start = time.perf_counter()
        _block(dy2st.to_static(work.eager)(*args))
        static.append(time.perf_counter() - start)
    return {"hand": statistics.median(hand), "to_static": statistics.median(static)}


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


def run(quick: bool = False, only=None) -> dict:
    rounds, batch_s, first_rounds, conv_rounds = (3, 0.005, 1, 5) if quick else (31, 0.1, 7, 51)
    rows = {}
    for work in wl.workloads():
        if only and work.name not in only:
            continue
        args = work.args()
        row = {"title": work.title}
        variants = {"eager": work.eager, "hand": work.hand, "to_static": dy2st.to_static(work.eager)}
        try:
            _block(variants["to_static"](*args))
        except Exception as e:  # reported in the table, not hidden: e.g. a construct not yet supported
            row["to_static_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
            del variants["to_static"]
        row.update({f"{k}_s": v for k, v in steady_state(variants, args, rounds, batch_s).items()})
        if "to_static_s" in row:
            row["ts_over_hand"] = row["to_static_s"] / row["hand_s"]
            row["eager_over_ts"] = row["eager_s"] / row["to_static_s"]
            if work.first_call:
                wall, cpu = conversion_time(work.eager, conv_rounds)
                row["conversion_ms"], row["conversion_cpu_ms"] = wall * 1e3, cpu * 1e3
                first = first_call(work, args, first_rounds)
                row["first_hand_s"], row["first_to_static_s"] = first["hand"], first["to_static"]
                row["first_ts_over_hand"] = first["to_static"] / first["hand"]
        rows[work.name] = row
        print(f"  {work.name} done", file=sys.stderr, flush=True)
    checks = []
    for what, name, field, target, sense in TARGETS:
        value = rows.get(name, {}).get(field)
        met = None if value is None else (value <= target if sense == "max" else value >= target)
        checks.append({"what": what, "value": value, "target": target, "sense": sense, "met": met})
    return {
        "machine": machine(),
        "command": "python benchmarks/run.py" + (" --quick" if quick else ""),
        "workloads": rows,
        "targets": checks,
    }


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "dy2st": dy2st.__version__,
    }


def _fmt_time(s):
    if s is None:
        return "-"
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def table(result: dict) -> str:
    lines = [
        "| workload | eager | jit + lax (hand) | to_static | to_static / hand | eager / to_static |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["workloads"].items():
        ratio = f"{row['ts_over_hand']:.3f}" if "ts_over_hand" in row else "-"
        speedup = f"{row['eager_over_ts']:.1f}x" if "eager_over_ts" in row else "-"
        ts = _fmt_time(row.get("to_static_s")) if "to_static_error" not in row else "error: " + row["to_static_error"]
        lines.append(f"| {name} {row['title']} | {_fmt_time(row.get('eager_s'))} | {_fmt_time(row.get('hand_s'))} "
                     f"| {ts} | {ratio} | {speedup} |")
    first = [(n, r) for n, r in result["workloads"].items() if "first_to_static_s" in r]
    if first:
        lines += ["", "| W5 first call | conversion alone (wall / CPU) | jit + lax (hand) | to_static | to_static / hand |",
                  "|---|---|---|---|---|"]
        for name, row in first:
            lines.append(f"| {name} | {row['conversion_ms']:.2f} / {row['conversion_cpu_ms']:.2f} ms | {_fmt_time(row['first_hand_s'])} "
                         f"| {_fmt_time(row['first_to_static_s'])} | {row['first_ts_over_hand']:.3f} |")
    lines += ["", "| target | value | goal | met |", "|---|---|---|---|"]
    for c in result["targets"]:
        value = "-" if c["value"] is None else f"{c['value']:.3f}"
        goal = ("<= " if c["sense"] == "max" else ">= ") + f"{c['target']:g}"
        met = {True: "yes", False: "NO", None: "not run"}[c["met"]]
        lines.append(f"| {c['what']} | {value} | {goal} | {met} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few rounds, short batches")
    parser.add_argument("--only", nargs="*", help="workload names to run (W1 W2 W3 W4 W4n)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json"),
                        help="where to write the JSON (default benchmarks/results.json)")
    opts = parser.parse_args(argv)
    result = run(quick=opts.quick, only=opts.only)
    m = result["machine"]
    print(f"dy2st {m['dy2st']}, jax {m['jax']} ({m['jax_backend']}), Python {m['python']}, "
          f"{m['cpus']} CPUs, {m['platform']}")
    print(table(result))
    with open(opts.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {opts.out}")
    return result


if __name__ == "__main__":
    main()
