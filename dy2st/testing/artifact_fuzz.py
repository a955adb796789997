"""A fuzzer for `dy2st.load`: corrupt a valid artifact at random and check what loading does.

Every case copies a valid artifact (safetensors or npz weights) into a fresh sandbox beside a
directory of "outside" files (copies of the artifact's own files, so that a link to one of them
passes every checksum), applies one random corruption, then loads the artifact and runs it on
fixed inputs. Each case must end in one of two ways:

    identical   the artifact loads and its outputs are bit-identical to the original's
    refused     `dy2st.load` (or the call) raises a `Dy2StaticError`

(one kind, `flip_program_rehashed`, alters the program's bytes and updates their checksum: a
hostile program jax must read safely; it may also load as a different valid program,
"valid-different"),

and never in one of these (each a failure of the loader):

    raw-exception   any other exception
    wrong-output    outputs that differ in structure, dtype, shape or any bit
    hang            no answer within the time limit
    wrote           a file in the sandbox (inside or outside the artifact) appeared, vanished
                    or changed while loading

Corruptions (`KINDS`): byte flips, truncation, extension, deleted and renamed files, weights
swapped, reshaped or retyped inside the weights file (with and without the manifest's sha256
updated to match), manifest fields edited, deleted or given another type, manifest list entries
swapped, files replaced by symlinks (to the outside copies, to /etc/passwd, to a sibling), by a
directory or a FIFO, `..` and absolute paths in the manifest, and a huge sparse file.

A corruption that rewrites content and updates the checksums to match is a legitimately
different artifact; the fuzzer never does that for content whose change would go unseen by
design (e.g. equal-shaped weights swapped with their checksums updated), only for structure
(shapes, dtypes, names) that the program's own signature pins down.

    python -m dy2st.testing.artifact_fuzz --cases 1000 --seed 0
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

import dy2st
from dy2st.errors import Dy2StaticError

MANIFEST, PROGRAM = "manifest.json", "program.jaxexport"
OUTCOMES_OK = ("identical", "refused")
# Kinds that rewrite content and update its checksum, making a different but valid artifact:
# for these, loading and giving other outputs ("valid-different") is right too.
CONTENT_CHANGING = ("flip_program_rehashed",)


# -- the reference artifact ------------------------------------------------------------------
def reference_forward(params, x, y):
    """The function every fuzzed artifact starts from: a data-dependent branch, a named batch
    dimension shared by two inputs, weights of equal and of different shapes, a dict output."""
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    if h.sum() > 0:
        h = h * params["scale"]
    else:
        h = h - params["shift"]
    return {"out": h @ params["w2"] + y.sum(axis=1, keepdims=True), "count": jnp.sum(h > 0) + params["k"]}


def reference_params() -> dict:
    rng = np.random.default_rng(0)
    return {"w1": rng.normal(size=(3, 4)).astype(np.float32), "b1": rng.normal(size=(4,)).astype(np.float32),
            "scale": rng.normal(size=(4,)).astype(np.float32), "shift": rng.normal(size=(4,)).astype(np.float32),
            "w2": rng.normal(size=(4, 2)).astype(np.float32), "k": np.int32(7)}


def reference_inputs() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [(rng.normal(size=(b, 3)).astype(np.float32) * s, rng.normal(size=(b, 2)).astype(np.float32))
            for b, s in ((1, 1.0), (4, -2.0), (2, 0.5))]


@dataclasses.dataclass
class Reference:
    """A saved artifact and its outputs on `reference_inputs()` (as numpy trees)."""

    path: str
    expected: list


def make_reference(root: str, weights_format: str) -> Reference:
    path = os.path.join(root, f"reference_{weights_format}")
    batch = "batch"
    dy2st.save(reference_forward, path, [dy2st.InputSpec((batch, 3), "float32", "x"),
                                         dy2st.InputSpec((batch, 2), "float32", "y")],
               params=reference_params(), platforms=["cpu"], weights_format=weights_format)
    loaded = dy2st.load(path)
    return Reference(path, [_numpy_tree(loaded(x, y)) for x, y in reference_inputs()])


def _numpy_tree(tree):
    return jax.tree_util.tree_map(np.asarray, tree)


# -- corruptions -----------------------------------------------------------------------------
@dataclasses.dataclass
class Sandbox:
    """One case's directory: `artifact/` (the copy to corrupt) and `outside/` (copies of its
    files, which links and `..` paths point at)."""

    root: str
    rng: random.Random

    @property
    def artifact(self) -> str:
        return os.path.join(self.root, "artifact")

    @property
    def outside(self) -> str:
        return os.path.join(self.root, "outside")

    def files(self) -> list[str]:
        return sorted(os.listdir(self.artifact))

    def file(self, name: str) -> str:
        return os.path.join(self.artifact, name)

    def manifest(self) -> dict:
        with open(self.file(MANIFEST)) as f:
            return json.load(f)

    def write_manifest(self, manifest: Any) -> None:
        with open(self.file(MANIFEST), "w") as f:
            json.dump(manifest, f)

    def weights_file(self) -> str:
        return next(n for n in self.files() if n.startswith("weights."))

    def rehash(self, name: str) -> None:
        manifest = self.manifest()
        with open(self.file(name), "rb") as f:
            data = f.read()
        manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        self.write_manifest(manifest)

    def read_weights(self) -> dict:
        name = self.weights_file()
        if name.endswith(".npz"):
            with np.load(self.file(name), allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        from safetensors.numpy import load_file

        return load_file(self.file(name))

    def write_weights(self, arrays: dict) -> None:
        name = self.weights_file()
        if name.endswith(".npz"):
            np.savez(self.file(name), **arrays)
        else:
            from safetensors.numpy import save_file

            save_file(arrays, self.file(name))


def _pick_file(box: Sandbox) -> str:
    return box.rng.choice(box.files())


def flip_bytes(box: Sandbox) -> str:
    name = _pick_file(box)
    data = bytearray(open(box.file(name), "rb").read())
    positions = [box.rng.randrange(len(data)) for _ in range(box.rng.randint(1, 8))]
    for p in positions:
        data[p] ^= box.rng.randint(1, 255)
    open(box.file(name), "wb").write(bytes(data))
    return f"{name} at {positions[:3]}"


def truncate(box: Sandbox) -> str:
    name = _pick_file(box)
    size = os.path.getsize(box.file(name))
    keep = box.rng.randrange(size)
    os.truncate(box.file(name), keep)
    return f"{name} to {keep} of {size} bytes"


def extend(box: Sandbox) -> str:
    name = _pick_file(box)
    with open(box.file(name), "ab") as f:
        f.write(bytes(box.rng.randrange(256) for _ in range(box.rng.randint(1, 64))))
    return name


def delete_file(box: Sandbox) -> str:
    name = _pick_file(box)
    os.unlink(box.file(name))
    return name


def rename_file(box: Sandbox) -> str:
    name = _pick_file(box)
    others = [n for n in box.files() if n != name]
    new = box.rng.choice([name + ".bak", name.upper(), "." + name, box.rng.choice(others)])
    os.replace(box.file(name), box.file(new))
    return f"{name} -> {new}"


def swap_weights(box: Sandbox) -> str:
    """Two weights' data swapped in the weights file (their names kept). Equal shapes: the
    checksum must catch it; different shapes: checksums updated half the time (the program's
    shapes must catch it)."""
    arrays = box.read_weights()
    a, b = box.rng.sample(sorted(arrays), 2)
    arrays[a], arrays[b] = arrays[b], arrays[a]
    box.write_weights(arrays)
    same = arrays[a].shape == arrays[b].shape and arrays[a].dtype == arrays[b].dtype
    rehashed = not same and box.rng.random() < 0.5
    if rehashed:
        box.rehash(box.weights_file())
    return f"{a}<->{b}{' (rehashed)' if rehashed else ''}"


def flip_program_rehashed(box: Sandbox) -> str:
    """Program bytes altered and their size and sha256 updated in the manifest: what a hostile
    artifact can do. jax must read it safely: refused, or a valid (different) program."""
    data = bytearray(open(box.file(PROGRAM), "rb").read())
    positions = [box.rng.randrange(len(data)) for _ in range(box.rng.randint(1, 4))]
    for p in positions:
        data[p] ^= box.rng.randint(1, 255)
    open(box.file(PROGRAM), "wb").write(bytes(data))
    box.rehash(PROGRAM)
    return f"at {positions}"


def _another_shape(rng: random.Random, array: np.ndarray) -> np.ndarray:
    options = [array.reshape(-1), array.reshape(1, *array.shape), np.concatenate([array.reshape(-1)] * 2)]
    if array.ndim == 2:
        options.append(array.T.copy())
    if array.ndim == 0:
        options = [array.reshape(1), np.stack([array, array])]
    candidates = [o for o in options if o.shape != array.shape]
    return np.ascontiguousarray(rng.choice(candidates))


def reshape_weight(box: Sandbox) -> str:
    arrays = box.read_weights()
    name = box.rng.choice(sorted(arrays))
    arrays[name] = _another_shape(box.rng, arrays[name])
    box.write_weights(arrays)
    box.rehash(box.weights_file())
    also_manifest = box.rng.random() < 0.5
    if also_manifest:
        _set_tensor(box, name, shape=list(arrays[name].shape))
    return f"{name} -> {list(arrays[name].shape)}{' (manifest too)' if also_manifest else ''}"


def retype_weight(box: Sandbox) -> str:
    arrays = box.read_weights()
    name = box.rng.choice(sorted(arrays))
    dtype = box.rng.choice([d for d in ("float16", "int32", "float32", "int8", "uint32") if d != arrays[name].dtype.name])
    arrays[name] = arrays[name].astype(dtype)
    box.write_weights(arrays)
    box.rehash(box.weights_file())
    also_manifest = box.rng.random() < 0.5
    if also_manifest:
        _set_tensor(box, name, dtype=dtype)
    return f"{name} -> {dtype}{' (manifest too)' if also_manifest else ''}"


def _set_tensor(box: Sandbox, name: str, **fields) -> None:
    manifest = box.manifest()
    for tensor in manifest["weights"]["tensors"]:
        if tensor["name"] == name:
            tensor.update(fields)
    box.write_manifest(manifest)


def _paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every path (tuple of keys/indices) into a JSON value."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _get(value, path):
    for key in path:
        value = value[key]
    return value


def _random_value(rng: random.Random, like: Any) -> Any:
    options = [None, True, 0, -1, 1, 2 ** 62, 3.5, float("nan"), "", "float64", "../weights.safetensors",
               "/etc/passwd", [], [None], [1, 2], {}, {"a": 1}, "x" * 300]
    if isinstance(like, bool):
        options += [not like]
    elif isinstance(like, int):
        options += [like + 1, like - 1, like * 2, str(like)]
    elif isinstance(like, str):
        options += [like + "x", like.upper(), like[:-1], like[::-1], "bfloat16", "int32", "input", "weight"]
    elif isinstance(like, list):
        options += [like[:-1], like + like[-1:], list(reversed(like))] if like else [[0]]
    return rng.choice(options)


def edit_manifest_field(box: Sandbox) -> str:
    manifest = box.manifest()
    path = box.rng.choice([p for p in _paths(manifest) if p])
    parent, key = _get(manifest, path[:-1]), path[-1]
    action = box.rng.choice(["set", "set", "set", "delete", "add"])
    if action == "delete":
        del parent[key]
    elif action == "add" and isinstance(parent, dict):
        parent["unexpected_" + str(box.rng.randrange(100))] = _random_value(box.rng, None)
    else:
        parent[key] = _random_value(box.rng, parent[key])
    box.write_manifest(manifest)
    return f"{action} {'.'.join(map(str, path))}"


def retype_manifest_field(box: Sandbox) -> str:
    manifest = box.manifest()
    path = box.rng.choice([p for p in _paths(manifest) if p])
    parent, key = _get(manifest, path[:-1]), path[-1]
    value = parent[key]
    converters: list[Callable] = [str, lambda v: [v], lambda v: {"value": v}, lambda v: None]
    if isinstance(value, str) and value.lstrip("-").isdigit():
        converters.append(int)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        converters += [float, bool]
    parent[key] = box.rng.choice(converters)(value)
    box.write_manifest(manifest)
    return f"{'.'.join(map(str, path))}: {type(value).__name__} -> {type(parent[key]).__name__}"


_LISTS = [("weights", "tensors"), ("inputs",), ("outputs",), ("program", "inputs"), ("platforms",),
          ("output_key_orders", 0)]  # the reference's dict output, {"out", "count"}: not in sorted order


def swap_manifest_entries(box: Sandbox) -> str:
    """Two entries of a manifest list swapped; for weights and inputs half the time in both
    their list and program.inputs (a consistent reordering, which must load identically)."""
    manifest = box.manifest()
    path = box.rng.choice([p for p in _LISTS if len(_get(manifest, p)) >= 2])
    entries = _get(manifest, path)
    i, j = box.rng.sample(range(len(entries)), 2)
    entries[i], entries[j] = entries[j], entries[i]
    detail = f"{'.'.join(map(str, path))}[{i}]<->[{j}]"
    if path in (("weights", "tensors"), ("inputs",)) and box.rng.random() < 0.5:
        offset = 0 if path == ("weights", "tensors") else len(manifest["weights"]["tensors"])
        program_inputs = manifest["program"]["inputs"]
        program_inputs[offset + i], program_inputs[offset + j] = program_inputs[offset + j], program_inputs[offset + i]
        detail += " (program.inputs too)"
    box.write_manifest(manifest)
    return detail


def symlink(box: Sandbox) -> str:
    """A file replaced by a symlink: to its identical copy outside (passes every checksum), to
    /etc/passwd, or to a sibling inside the artifact."""
    name = _pick_file(box)
    target = box.rng.choice([os.path.join(box.outside, name), "/etc/passwd", f"../outside/{name}",
                             box.rng.choice(box.files())])
    os.unlink(box.file(name))
    os.symlink(target, box.file(name))
    return f"{name} -> {target}"


def special_file(box: Sandbox) -> str:
    name = _pick_file(box)
    os.unlink(box.file(name))
    kind = box.rng.choice(["directory", "fifo"])
    if kind == "directory":
        os.mkdir(box.file(name))
    else:
        os.mkfifo(box.file(name))
    return f"{name} is a {kind}"


def hostile_path(box: Sandbox) -> str:
    """The manifest names a file outside the artifact (`..`, an absolute path, a nested path)
    that holds the right bytes, with its files entry updated to match."""
    manifest = box.manifest()
    key = box.rng.choice(["program", "weights"])
    name = manifest[key]["file"]
    new = box.rng.choice([f"../outside/{name}", os.path.join(box.outside, name), f"./{name}", f"sub/../{name}",
                          "/etc/passwd", f"{name}/."])
    manifest[key]["file"] = new
    manifest["files"][new] = manifest["files"].pop(name)
    box.write_manifest(manifest)
    return f"{key}.file = {new}"


def huge_file(box: Sandbox) -> str:
    """A file made sparse and huge, with the manifest claiming that size: loading must not
    read it (the size limit or checksum refuses it without reading 1 TiB)."""
    name = box.rng.choice([n for n in box.files() if n != MANIFEST] + [MANIFEST])
    size = 1 << 40
    os.truncate(box.file(name), size)
    if name != MANIFEST and box.rng.random() < 0.5:
        manifest = box.manifest()
        manifest["files"][name]["bytes"] = size
        box.write_manifest(manifest)
    return f"{name} is {size} bytes"


KINDS: dict[str, Callable[[Sandbox], str]] = {f.__name__: f for f in (
    flip_bytes, truncate, extend, delete_file, rename_file, swap_weights, reshape_weight, retype_weight,
    edit_manifest_field, retype_manifest_field, swap_manifest_entries, symlink, special_file, hostile_path,
    huge_file, flip_program_rehashed)}


# -- running one case ------------------------------------------------------------------------
class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so that no `except Exception` can swallow it."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def alarm(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _snapshot(root: str) -> dict:
    """Every entry under `root` (links not followed): kind, size and content hash."""
    state = {}
    for directory, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if os.path.islink(path):
                state[path] = ("link", os.readlink(path))
            elif os.path.isfile(path) and info.st_size < (1 << 30):
                with open(path, "rb") as f:
                    state[path] = ("file", hashlib.sha256(f.read()).hexdigest())
            else:
                state[path] = ("other", info.st_mode, info.st_size)
    return state


def _identical(a, b) -> bool:
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    return tree_a == tree_b and all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                                    for x, y in zip(leaves_a, leaves_b))


@dataclasses.dataclass(frozen=True)
class CaseResult:
    index: int
    kind: str
    detail: str
    outcome: str  # one of OUTCOMES_OK or a failure: raw-exception, wrong-output, hang, wrote
    message: str


def run_case(index: int, kind: str, reference: Reference, workdir: str, seed: int, timeout: float) -> CaseResult:
    box = Sandbox(os.path.join(workdir, f"case{index}"), random.Random(f"{seed}/{index}"))
    shutil.copytree(reference.path, box.artifact)
    shutil.copytree(reference.path, box.outside)
    try:
        detail = KINDS[kind](box)
        before = _snapshot(box.root)
        outcome, message = _load_and_compare(box.artifact, reference, timeout)
        if outcome == "wrong-output" and kind in CONTENT_CHANGING:
            outcome = "valid-different"
        if _snapshot(box.root) != before:
            outcome, message = "wrote", "the sandbox changed while loading"
        return CaseResult(index, kind, detail, outcome, message)
    finally:
        shutil.rmtree(box.root, ignore_errors=True)


def _load_and_compare(path: str, reference: Reference, timeout: float) -> tuple[str, str]:
    try:
        with _time_limit(timeout):
            loaded = dy2st.load(path)
            outputs = [_numpy_tree(loaded(x, y)) for x, y in reference_inputs()]
    except _Timeout:
        return "hang", f"no answer in {timeout} s"
    except Dy2StaticError as err:
        return "refused", str(err).splitlines()[0][:300]
    except Exception as err:  # noqa: BLE001 (what the fuzzer is looking for)
        return "raw-exception", f"{type(err).__name__}: {str(err)[:300]}"
    if all(_identical(a, b) for a, b in zip(outputs, reference.expected)):
        return "identical", ""
    return "wrong-output", "outputs differ from the original artifact's"


# -- the campaign ----------------------------------------------------------------------------
@dataclasses.dataclass
class Report:
    results: list[CaseResult]
    seconds: float

    def counts(self) -> dict[str, collections.Counter]:
        table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for r in self.results:
            table[r.kind][r.outcome] += 1
        return dict(table)

    def failures(self) -> list[CaseResult]:
        return [r for r in self.results if r.outcome not in OUTCOMES_OK and r.outcome != "valid-different"]

    def text(self) -> str:
        outcomes = ["identical", "refused", "valid-different", "raw-exception", "wrong-output", "hang", "wrote"]
        lines = [f"{len(self.results)} cases in {self.seconds:.1f} s", f"{'kind':24}" +
                 "".join(f"{o:>17}" for o in outcomes)]
        for kind, counter in sorted(self.counts().items()):
            lines.append(f"{kind:24}" + "".join(f"{counter[o]:>17}" for o in outcomes))
        total = collections.Counter(r.outcome for r in self.results)
        lines.append(f"{'total':24}" + "".join(f"{total[o]:>17}" for o in outcomes))
        for r in self.failures()[:20]:
            lines.append(f"FAIL case {r.index} {r.kind} ({r.detail}): {r.outcome}: {r.message}")
        return "\n".join(lines)


def campaign(cases: int, seed: int, timeout: float = 60.0, workdir: str | None = None,
             kinds: list[str] | None = None) -> Report:
    """Run `cases` corruptions (kinds in turn, details drawn from `seed`) on two reference
    artifacts (safetensors and npz weights)."""
    start = time.perf_counter()
    kinds = kinds or list(KINDS)
    with tempfile.TemporaryDirectory(prefix="dy2st-artifact-fuzz-", dir=workdir) as root:
        references = [make_reference(root, fmt) for fmt in ("safetensors", "npz")]
        results = [run_case(i, kinds[i % len(kinds)], references[(i // len(kinds)) % 2], root, seed, timeout)
                   for i in range(cases)]
    return Report(results, time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dy2st.testing.artifact_fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--json", metavar="FILE", help="also write every case's result to FILE")
    args = parser.parse_args(argv)
    report = campaign(args.cases, args.seed, args.timeout)
    print(report.text())
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dataclasses.asdict(r) for r in report.results], f, indent=1)
    return 1 if report.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
