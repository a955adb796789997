"""Time dy2st against eager JAX and hand-written `jax.jit` + `lax` (the reference).

    python benchmarks/run.py            # full run, a few minutes on a 2-core CPU VM
    python benchmarks/run.py --quick    # smoke run, well under a minute
    python benchmarks/run.py --scaling  # also conversion vs length, and a 1,000-step loop (slow: the
                                        # unrolled reference alone compiles for tens of seconds)
    python benchmarks/run.py --check    # exit 1 when a goal is missed by more than the run's noise

Everything runs in one process. Steady state: after warm-up, rounds of timed batches, the
variants of a workload interleaved (the order rotating each round), every call followed by
`block_until_ready` so execution is included; the reported time is the median over rounds of
the per-call mean of a batch. First call (W5): a fresh function each round (the conversion
cache cleared for dy2st), time to the first result, conversion + trace + compile + run, median.
Conversion alone: source to code object, median. Each workload's cached call is broken down
into JAX's dispatch of the compiled program (the hand-written call: the floor), dy2st's key
(flattening the arguments; none where the call is jit's own dispatch, dy2st's front), its state
handling (walking models and list/dict arguments) and the rest. Prints a table and writes it as JSON.
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
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

import dy2st  # noqa: E402
from dy2st import _jax_compat, conversion  # noqa: E402

import fresh_process  # noqa: E402
import workloads as wl  # noqa: E402
from scaling import conversion_time  # noqa: E402

from dy2st import state as dy2st_state, stateful  # noqa: E402

# (what, workload, ratio name, target, "max" = ratio must be at most target, "min" = at least)
TARGETS = [
    ("W1 to_static / hand-written", "W1", "ts_over_hand", 1.03, "max"),
    ("W2 to_static / hand-written", "W2", "ts_over_hand", 1.03, "max"),
    ("W3 to_static / hand-written", "W3", "ts_over_hand", 1.03, "max"),
    ("W4 to_static / hand-written", "W4", "ts_over_hand", 1.03, "max"),
    ("W4n to_static / hand-written", "W4n", "ts_over_hand", 1.03, "max"),
    ("W6 optax step, to_static / jax.jit", "W6", "ts_over_hand", 1.05, "max"),
    ("W7 NNX step, to_static / nnx.jit", "W7", "ts_over_hand", 1.05, "max"),
    ("W8 NNX forward, to_static(model) / nnx.jit", "W8", "ts_over_hand", 1.05, "max"),
    ("W9 sampler step (dict cache, key), to_static / jax.jit", "W9", "ts_over_hand", 1.05, "max"),
    ("W10 EM step (list of arrays), to_static / jax.jit", "W10", "ts_over_hand", 1.05, "max"),
    ("W11 masked attention, to_static / jax.jit", "W11", "ts_over_hand", 1.05, "max"),
    ("W12 Equinox forward, to_static(model) / eqx.filter_jit", "W12", "ts_over_hand", 1.05, "max"),
    ("W13 CG solver returning its count, to_static / jax.jit of lax.while_loop", "W13", "ts_over_hand", 1.05, "max"),
    ("W14 Python scalar arguments, to_static / jax.jit with them static", "W14", "ts_over_hand", 1.05, "max"),
    ("W5 conversion alone, W3 (ms)", "W3", "conversion_ms", 2.0, "max"),
    ("W5 conversion alone, W4 (ms)", "W4", "conversion_ms", 5.0, "max"),
    ("W5 conversion alone, W4n (ms)", "W4n", "conversion_ms", 5.0, "max"),
    ("W5 conversion alone CPU time, W3 (ms)", "W3", "conversion_cpu_ms", 5.0, "max"),
    ("W5 conversion alone CPU time, W4 (ms)", "W4", "conversion_cpu_ms", 5.0, "max"),
    ("W5 conversion alone CPU time, W4n (ms)", "W4n", "conversion_cpu_ms", 5.0, "max"),
    ("W5 first call W3, to_static / hand", "W3", "first_ts_over_hand", 1.05, "max"),
    ("W5 first call W4, to_static / hand", "W4", "first_ts_over_hand", 1.05, "max"),
    ("W5 first call W4n, to_static / hand", "W4n", "first_ts_over_hand", 1.05, "max"),
    ("fresh process: import dy2st beyond import jax (ms)", "fresh", "import_ms", 100.0, "max"),
    ("fresh process: W1's first call, to_static / hand", "fresh", "first_ts_over_hand", 1.1, "max"),
    ("fresh process: W1's second call, to_static / hand", "fresh", "second_ts_over_hand", 1.5, "max"),
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
_PYTREE_ROOTS = frozenset({_ARRAY, tuple, list, dict})


def steady_state(variants: dict, args, rounds: int, batch_s: float) -> tuple[dict, dict]:
    """Median per-call seconds of each variant, interleaved after warm-up, and each one's noise:
    the interquartile range of its rounds over their median."""
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
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    return medians, {name: _spread(ts) for name, ts in times.items()}


def _spread(values) -> float:
    if len(values) < 4:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4)
    return (q3 - q1) / statistics.median(values)


def breakdown(static, args, rounds: int) -> dict:
    """Seconds per call of dy2st's own steps on the call path: the key (flattening the arguments
    into the program's signature) and the state (finding model / list / dict arguments and
    walking them). The remainder of a call beyond the hand-written one is dispatch glue."""
    positions = stateful.root_positions(args, {})
    parts = {"key_s": lambda: static._cache._key(*_flat(args), args, {}, lambda l: isinstance(l, jax.Array))}
    if isinstance(static, dy2st.api.BoundStaticFunction) and static._owner._stateful is None:
        # a model that is a registered pytree (Equinox): flattened with the arguments, as a pytree
        parts = {"key_s": lambda: _flat((static.__self__, *args))}
    elif isinstance(static, dy2st.api.BoundStaticFunction):
        # a model object or bound method: the model's arrays are found and checked each call
        _, template, _ = static._owner._stateful._last
        roots = [static.__self__]
        parts = {"state_s": lambda: dy2st_state.Layout.like(template, roots)}
    elif not isinstance(static.func, types.FunctionType):
        # the front: jit's own C++ dispatch, no step of dy2st's (dy2st key 0)
        parts = {"key_s": lambda: None}
    elif all(type(a) is _ARRAY for a in args):
        parts = {"key_s": lambda: [type(a) is _ARRAY for a in args]}  # the hit path's only check
    elif all(type(a) is _ARRAY or type(a) in (int, float, bool, str) for a in args):
        # arrays and Python scalars: the generated dispatcher's lookup of the program
        parts = {"key_s": lambda: static._cache.program_for_statics(args)}
    elif static.policy.pytree_route and static._stateful is None and {type(a) for a in args} <= {_ARRAY, tuple, list, dict}:
        # pytrees of arrays: the pytree route's checks (argument types, no transformation
        # tracing the call), then the shared jit flattens them itself
        parts = {"key_s": lambda: ([type(a) in _PYTREE_ROOTS for a in args], _jax_compat.at_top_level())}
    elif all(type(leaf) is _ARRAY for leaf in jax.tree_util.tree_leaves(args)) and static._stateful is None:
        # lists/dicts as plain inputs, or pytrees of arrays: one flatten, then the shared jit
        parts = {"key_s": lambda: (stateful.root_positions(args, {}),
                                   {_ARRAY}.issuperset(map(type, _flat(args)[0])))}
    elif positions:
        roots = [args[p] for p in positions]
        template = dy2st_state.Layout(roots)
        parts = {"state_s": lambda: (stateful.root_positions(args, {}), dy2st_state.Layout.like(template, roots)),
                 "key_s": lambda: _flat((*template.leaves, *(a for i, a in enumerate(args) if i not in positions)))}
    out = {}
    for name, step in parts.items():
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(200):
                step()
            times.append((time.perf_counter() - start) / 200)
        out[name] = statistics.median(times)
    return out


def _flat(args):
    return jax.tree_util.tree_flatten((args, {}))


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
    return {"hand": statistics.median(hand), "to_static": statistics.median(static),
            "noise": (_spread(hand) ** 2 + _spread(static) ** 2) ** 0.5}


def run(quick: bool = False, only=None) -> dict:
    rounds, batch_s, first_rounds, conv_rounds = (3, 0.005, 1, 5) if quick else (31, 0.1, 11, 51)
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
        medians, spreads = steady_state(variants, args, rounds, batch_s)
        row.update({f"{k}_s": v for k, v in medians.items()})
        row.update({f"{k}_spread": v for k, v in spreads.items()})
        if "to_static_s" in row:
            row["ts_over_hand"] = row["to_static_s"] / row["hand_s"]
            row["eager_over_ts"] = row["eager_s"] / row["to_static_s"]
            # The ratio's own noise: both medians' spreads combined.
            row["ts_over_hand_noise"] = (spreads["to_static"] ** 2 + spreads["hand"] ** 2) ** 0.5
            parts = breakdown(variants["to_static"], args, 3 if quick else 9)
            row["breakdown"] = {"dispatch_s": row["hand_s"], **parts,
                                "other_s": row["to_static_s"] - row["hand_s"] - sum(parts.values())}
            if work.first_call:
                wall, cpu = conversion_time(work.eager, conv_rounds)
                row["conversion_ms"], row["conversion_cpu_ms"] = wall * 1e3, cpu * 1e3
                first = first_call(work, args, first_rounds)
                row["first_hand_s"], row["first_to_static_s"] = first["hand"], first["to_static"]
                row["first_ts_over_hand"] = first["to_static"] / first["hand"]
                row["first_ts_over_hand_noise"] = first["noise"]
        rows[work.name] = row
        print(f"  {work.name} done", file=sys.stderr, flush=True)
    if not only or "fresh" in only:
        fresh = fresh_process.measure(rounds=3 if quick else 5)
        rows["fresh"] = {"title": "fresh process: import, W1's first and second call", **fresh,
                         "import_ms": fresh["import_dy2st_s"] * 1e3,
                         "second_ts_over_hand": fresh["second_to_static_s"] / fresh["second_hand_s"]}
        print("  fresh process done", file=sys.stderr, flush=True)
    checks = []
    for what, name, field, target, sense in TARGETS:
        value = rows.get(name, {}).get(field)
        met = None if value is None else (value <= target if sense == "max" else value >= target)
        noise = rows.get(name, {}).get(f"{field}_noise", 0.0)
        beyond_noise = None if value is None else (value > target * (1 + noise) if sense == "max"
                                                   else value < target * (1 - noise))
        checks.append({"what": what, "value": value, "target": target, "sense": sense, "met": met,
                       "noise": noise, "missed_beyond_noise": beyond_noise})
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
        if name == "fresh":
            continue
        ratio = f"{row['ts_over_hand']:.3f}" if "ts_over_hand" in row else "-"
        speedup = f"{row['eager_over_ts']:.1f}x" if "eager_over_ts" in row else "-"
        ts = _fmt_time(row.get("to_static_s")) if "to_static_error" not in row else "error: " + row["to_static_error"]
        lines.append(f"| {name} {row['title']} | {_fmt_time(row.get('eager_s'))} | {_fmt_time(row.get('hand_s'))} "
                     f"| {ts} | {ratio} | {speedup} |")
    broken = [(n, r["breakdown"]) for n, r in result["workloads"].items() if "breakdown" in r]
    if broken:
        lines += ["", "| cached call, per part | dispatch (= hand) | dy2st key | dy2st state | other |",
                  "|---|---|---|---|---|"]
        for name, b in broken:
            lines.append(f"| {name} | {_fmt_time(b['dispatch_s'])} | {_fmt_time(b.get('key_s'))} "
                         f"| {_fmt_time(b.get('state_s'))} | {_fmt_time(b['other_s'])} |")
    first = [(n, r) for n, r in result["workloads"].items() if "conversion_ms" in r]
    if first:
        lines += ["", "| W5 first call | conversion alone (wall / CPU) | jit + lax (hand) | to_static | to_static / hand |",
                  "|---|---|---|---|---|"]
        for name, row in first:
            lines.append(f"| {name} | {row['conversion_ms']:.2f} / {row['conversion_cpu_ms']:.2f} ms | {_fmt_time(row['first_hand_s'])} "
                         f"| {_fmt_time(row['first_to_static_s'])} | {row['first_ts_over_hand']:.3f} |")
    fresh = result["workloads"].get("fresh")
    if fresh:
        lines += ["", "| fresh process (medians) | import dy2st beyond jax | first call: hand / to_static "
                  "| second call: hand / to_static |", "|---|---|---|---|",
                  f"| W1 | {fresh['import_ms']:.1f} ms | {_fmt_time(fresh['first_hand_s'])} / "
                  f"{_fmt_time(fresh['first_to_static_s'])} | {_fmt_time(fresh['second_hand_s'])} / "
                  f"{_fmt_time(fresh['second_to_static_s'])} |"]
    lines += ["", "| target | value | goal | met | noise |", "|---|---|---|---|---|"]
    for c in result["targets"]:
        value = "-" if c["value"] is None else f"{c['value']:.3f}"
        goal = ("<= " if c["sense"] == "max" else ">= ") + f"{c['target']:g}"
        met = {True: "yes", False: "NO", None: "not run"}[c["met"]]
        if c["met"] is False and not c.get("missed_beyond_noise"):
            met = "no (within noise)"
        lines.append(f"| {c['what']} | {value} | {goal} | {met} | {c.get('noise', 0.0):.1%} |")
    if "scaling" in result:
        import scaling

        lines += ["", scaling.table(result["scaling"])]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few rounds, short batches")
    parser.add_argument("--only", nargs="*", help="workload names to run (W1 W2 W3 W4 W4n W6 W7 W8 W9 W10 W11 W12 W13 W14 fresh; none for none)")
    parser.add_argument("--scaling", action="store_true",
                        help="also time conversion against function length and a 1,000-step loop's compile")
    parser.add_argument("--check", action="store_true",
                        help="exit with status 1 when a goal is missed by more than the run's measured noise")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json"),
                        help="where to write the JSON (default benchmarks/results.json)")
    opts = parser.parse_args(argv)
    result = run(quick=opts.quick, only=opts.only)
    if opts.scaling:
        import scaling

        result["scaling"] = scaling.run(quick=opts.quick)
    m = result["machine"]
    print(f"dy2st {m['dy2st']}, jax {m['jax']} ({m['jax_backend']}), Python {m['python']}, "
          f"{m['cpus']} CPUs, {m['platform']}")
    print(table(result))
    with open(opts.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {opts.out}")
    if opts.check:
        failed = [c["what"] for c in result["targets"] if c.get("missed_beyond_noise")]
        result["check_failed"] = failed
        print("check: " + ("every goal met, or missed by less than the run's noise" if not failed
                           else "missed beyond the run's noise: " + "; ".join(failed)))
    return result


if __name__ == "__main__":
    raise SystemExit(1 if main().get("check_failed") else 0)
