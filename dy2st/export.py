"""save / load: a converted function as a deployable artifact that never runs stored Python.

An artifact is a directory of three files:

    manifest.json          format version, dy2st/jax versions, platforms, inputs/outputs (null
                           for a dynamic dim), weight names and their program inputs, the
                           translated source (for reference only), the sha256 of each file
    program.jaxexport      `jax.export` serialization (StableHLO + calling convention), lowered
                           for every platform in the manifest (default cpu and cuda)
    weights.safetensors    the weights by name (or weights.npz, read with allow_pickle=False)

`save` traces the converted function once with `jax.export`; `None` dims of the InputSpecs
become symbolic, so one artifact serves every batch size. Weights are inputs of the program,
not constants baked into it. `load` checks every file against the manifest (present, size,
sha256), the format version and the platform, deserializes the program with jax (a flatbuffer:
no pickle, no exec), and returns a callable that checks its inputs against the manifest.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
from typing import Any, Sequence

import jax
import numpy as np

from dy2st import _lift
from dy2st.errors import ArtifactError, ExportError, InputSpecError
from dy2st.input_spec import InputSpec, abstract, as_spec, user_origin

FORMAT = "dy2st.artifact"
FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = (1,)
MANIFEST = "manifest.json"
PROGRAM = "program.jaxexport"
WEIGHT_FILES = {"safetensors": "weights.safetensors", "npz": "weights.npz"}
DEFAULT_PLATFORMS = ("cpu", "cuda")


def save(fn_or_model, path: str | os.PathLike, input_spec: Sequence | None = None, *, params: Any = None,
         platforms: Sequence[str] = DEFAULT_PLATFORMS, weights_format: str | None = None) -> str:
    """Export `fn_or_model` to the directory `path` (created if needed; its files replaced).

    Args:
      fn_or_model: a function or StaticFunction, a bound method, or a model object with a
        Python `__call__` (Equinox / Flax NNX modules, plain objects holding arrays). A model's
        arrays are stored as weights.
      path: the artifact directory.
      input_spec: one entry per positional input: an InputSpec (`None` dims: any size), a
        ShapeDtypeStruct or array (fixed shape), or any other value, which is passed as is
        and fixed in the program. Default: the `input_spec` given to `to_static`.
      params: a pytree of weights passed as the first argument: `fn(params, *inputs)`.
      platforms: lowering platforms; the default runs on CPU and CUDA GPUs.
      weights_format: "safetensors" (default when installed) or "npz".

    Returns:
      The artifact directory, as a string.

    Example::

        dy2st.save(forward, "artifact", [dy2st.InputSpec((None, 784), "float32", "x")], params=params)
        loaded = dy2st.load("artifact"); loaded(x)
    """
    lifted = _lift.lift(fn_or_model, params)
    input_spec = input_spec if input_spec is not None else lifted.declared_spec
    if input_spec is None:
        raise ExportError("dy2st.save needs input_spec: the shape and dtype of every input.",
                          advice="pass input_spec=[dy2st.InputSpec((None, 784), 'float32', name='x')].")
    entries = _input_entries(input_spec, lifted.input_names)
    specs = [e for e in entries if isinstance(e, InputSpec)]
    weights_format = weights_format or ("safetensors" if _has_safetensors() else "npz")
    if weights_format not in WEIGHT_FILES:
        raise ExportError(f"weights_format {weights_format!r} is not one of {sorted(WEIGHT_FILES)}.")

    def program(weights, *arrays):
        it = iter(arrays)
        return lifted.call(weights, *[next(it) if isinstance(e, InputSpec) else e for e in entries])

    weight_structs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in lifted.values]
    exported = _export(program, platforms, weight_structs, abstract(specs), lifted.static_fn)
    try:
        program_bytes = bytes(exported.serialize())
    except ValueError as err:
        raise ExportError(f"The outputs cannot be stored: {err}",
                          advice="return arrays in tuples, lists or dicts (not a custom class).") from None

    os.makedirs(path, exist_ok=True)
    for stale in (MANIFEST, *WEIGHT_FILES.values()):  # the manifest first: a half-written save never loads
        if os.path.isfile(os.path.join(path, stale)):
            os.remove(os.path.join(path, stale))
    _write(path, PROGRAM, program_bytes)
    weights_file = WEIGHT_FILES[weights_format]
    _write(path, weights_file, _weights_bytes(lifted.names, lifted.values, weights_format))
    manifest = _manifest(lifted, entries, specs, exported, weights_format)
    manifest["files"] = {name: _file_info(os.path.join(path, name)) for name in (PROGRAM, weights_file)}
    _write(path, MANIFEST, json.dumps(manifest, indent=2).encode())  # last: no manifest, no artifact
    return os.fspath(path)


def _input_entries(input_spec, param_names) -> list:
    entries = []
    for i, entry in enumerate(input_spec):
        name = param_names[i] if i < len(param_names) else f"input{i}"
        entry = as_spec(entry, name)
        if not isinstance(entry, InputSpec) and any(
                isinstance(l, (InputSpec, jax.ShapeDtypeStruct, jax.Array, np.ndarray))
                for l in jax.tree_util.tree_leaves(entry, is_leaf=lambda x: isinstance(x, InputSpec))):
            raise ExportError(f"input_spec entry {i} ({name!r}) is a container of arrays; dy2st.save takes "
                              "one InputSpec per array input.",
                              advice="pass the arrays as separate arguments, or as params= for weights.")
        entries.append(entry)
    names = [e.name for e in entries if isinstance(e, InputSpec)]
    duplicates = sorted(n for n, c in collections.Counter(names).items() if c > 1)
    if duplicates:
        raise ExportError(f"Several inputs are named {duplicates}.", advice="give each InputSpec its own name.")
    return entries


def _export(program, platforms, weight_structs, input_structs, static_fn):
    try:
        return jax.export.export(jax.jit(program), platforms=tuple(platforms))(weight_structs, *input_structs)
    except jax.errors.InconclusiveDimensionOperation as err:
        raise ExportError(f"Saving {static_fn.__qualname__!r} needs the value of a dynamic dimension: "
                          f"{str(err).splitlines()[0]}",
                          advice="give that dimension a fixed size in its InputSpec, or compute with it "
                          "only through array operations.") from err
    except TypeError as err:
        if "incompatible shapes" not in str(err):
            raise
        raise ExportError(f"Saving {static_fn.__qualname__!r}: {err}",
                          advice="dims that must be equal need the same name, e.g. "
                          "InputSpec(('batch', 784)) for each input (None gives each dim its own symbol).") from err


def _manifest(lifted, entries, specs, exported, weights_format) -> dict:
    n_weights = len(lifted.names)
    out_leaves = jax.tree_util.tree_flatten_with_path(
        jax.tree_util.tree_unflatten(exported.out_tree, range(len(exported.out_avals))))[0]
    outputs = []
    for (path, index), aval in zip(out_leaves, exported.out_avals):
        suffix = jax.tree_util.keystr(path)
        outputs.append({"name": "output" + suffix if suffix else "output", "shape": _json_shape(aval.shape),
                        "dims": [d if isinstance(d, int) else str(d) for d in aval.shape],
                        "dtype": np.dtype(aval.dtype).name})
    program_inputs = [{"kind": "weight", "name": n} for n in lifted.names] + \
                     [{"kind": "input", "name": s.name} for s in specs]
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dy2st_version": _dy2st_version(),
        "jax_version": jax.__version__,
        "calling_convention_version": exported.calling_convention_version,
        "platforms": list(exported.platforms),
        "function": lifted.static_fn.__qualname__,
        "inputs": [s.to_json() for s in specs],
        "static_arguments": [{"position": i, "repr": repr(e)} for i, e in enumerate(entries)
                             if not isinstance(e, InputSpec)],
        "outputs": outputs,
        "program": {"file": PROGRAM, "inputs": program_inputs, "num_weights": n_weights},
        "weights": {"file": WEIGHT_FILES[weights_format], "format": weights_format,
                    "tensors": [{"name": n, "shape": list(v.shape), "dtype": v.dtype.name}
                                for n, v in zip(lifted.names, lifted.values)]},
        "source": lifted.static_fn.code,
    }


def _json_shape(shape) -> list:
    return [int(d) if not jax.export.is_symbolic_dim(d) else None for d in shape]


def _dy2st_version() -> str:
    import dy2st  # the package is initialised before save/load can be called

    return dy2st.__version__


def _has_safetensors() -> bool:
    try:
        import safetensors.numpy  # noqa: F401
    except ImportError:
        return False
    return True


def _weights_bytes(names, values, weights_format) -> bytes:
    arrays = {n: np.asarray(v, order="C") for n, v in zip(names, values)}  # keeps 0-d shapes
    if weights_format == "safetensors":
        from safetensors.numpy import save

        return save(arrays)
    import io

    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _write(directory, name, data: bytes) -> None:
    target = os.path.join(directory, name)
    tmp = target + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)


def _file_info(path) -> dict:
    with open(path, "rb") as f:
        data = f.read()
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


# -- load ------------------------------------------------------------------------------------
def load(path: str | os.PathLike) -> "LoadedProgram":
    """Load an artifact written by `dy2st.save`; see `LoadedProgram`.

    Raises:
      ArtifactError: a file is missing, truncated or altered, or the artifact was written in
        a format, for a platform, or by a jax this installation cannot run.
    """
    return LoadedProgram(os.fspath(path))


class LoadedProgram:
    """A loaded artifact: call it like the saved function (inputs by position or by name).

    Attributes:
      manifest: the manifest (a dict).
      input_spec: the InputSpecs of the inputs, in order.
      code: the translated source the artifact was made from (for reading only; never run).
      exported: the `jax.export.Exported` program.
      weights: the weights by name.
    """

    def __init__(self, path: str):
        self.path = path
        self.manifest = _read_manifest(path)
        program_bytes = self._read_file("program")
        weights_bytes = self._read_file("weights")
        try:
            self.exported = jax.export.deserialize(bytearray(program_bytes))
        except Exception as err:  # jax raises struct.error, ValueError, ... for unreadable bytes
            raise self._error(PROGRAM, f"jax {jax.__version__} cannot deserialize it "
                              f"({type(err).__name__}: {err}); it was written by jax "
                              f"{self.manifest['jax_version']}.") from None
        self._check_platform()
        self.weights = _read_weights(self, weights_bytes)
        self.input_spec = [InputSpec.from_json(s) for s in self.manifest["inputs"]]
        expected = len(self.weights) + len(self.input_spec)
        if len(self.exported.in_avals) != expected:
            raise self._error(PROGRAM, f"it takes {len(self.exported.in_avals)} inputs but the manifest "
                              f"describes {expected} (weights and inputs).")
        self._weight_list = [jax.device_put(self.weights[t["name"]]) for t in self.manifest["weights"]["tensors"]]
        self._run = jax.jit(self.exported.call)

    @property
    def code(self) -> str:
        return self.manifest["source"]

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.input_spec]

    def __call__(self, *args, **kwargs):
        arrays = self._bind(args, kwargs)
        return self._run(self._weight_list, *arrays)

    def _bind(self, args, kwargs) -> list:
        names = self.input_names
        if len(args) > len(names):
            raise InputSpecError(f"The artifact takes {len(names)} inputs {names}, but {len(args)} were given.",
                                 user_origin())
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise InputSpecError(f"The artifact has no input named {unknown}; its inputs are {names}.",
                                 user_origin())
        values = list(args) + [kwargs.get(n, _MISSING) for n in names[len(args):]]
        bound: dict = {}
        arrays = []
        for spec, value in zip(self.input_spec, values):
            if value is _MISSING:
                raise InputSpecError(f"Input {spec.name!r} ({spec}) is missing; the artifact takes {names}.",
                                     user_origin())
            if isinstance(value, (bool, int, float, complex)):
                value = value if spec.mismatch(value) else np.asarray(value, spec.dtype)
            problem = spec.mismatch(value, bound)
            if problem is not None:
                raise spec.error(f"input {spec.name!r}", problem, user_origin())
            arrays.append(value)
        return arrays

    def _read_file(self, key) -> bytes:
        name = self.manifest[key]["file"]
        info = self.manifest["files"].get(name)
        if not isinstance(info, dict) or "sha256" not in info or "bytes" not in info:
            raise self._error(MANIFEST, f"it lists no size and sha256 for {name}.")
        full = os.path.join(self.path, name)
        if not os.path.isfile(full):
            raise self._error(name, "the file is missing.")
        with open(full, "rb") as f:
            data = f.read()
        if len(data) != info["bytes"]:
            raise self._error(name, f"the file is truncated or extended: {len(data)} bytes, the manifest says "
                              f"{info['bytes']}.")
        digest = hashlib.sha256(data).hexdigest()
        if digest != info["sha256"]:
            raise self._error(name, f"the file was altered or corrupted: its sha256 is {digest[:16]}..., the "
                              f"manifest says {info['sha256'][:16]}....")
        return data

    def _check_platform(self) -> None:
        backend = jax.default_backend()
        platforms = list(self.exported.platforms)
        runnable = backend in platforms or (backend == "gpu" and ({"cuda", "rocm"} & set(platforms)))
        if not runnable:
            raise self._error(PROGRAM, f"it was lowered for {platforms}, but jax runs on {backend!r} here.",
                              advice="save it again with dy2st.save(..., platforms=[...]) including this platform.")

    def _error(self, name, problem, advice=None) -> ArtifactError:
        return ArtifactError(f"Artifact {self.path!r}: {name}: {problem}",
                             advice=advice or "save the artifact again with dy2st.save (or `dy2st save`).")

    def summary(self) -> dict:
        """Inputs, outputs, weight count and size, and StableHLO op counts of the program."""
        tensors = self.manifest["weights"]["tensors"]
        return {
            "inputs": [str(s) for s in self.input_spec],
            "outputs": [f"{o['name']}:{o['dtype']}[{','.join(str(d) for d in o['dims'])}]"
                        for o in self.manifest["outputs"]],
            "weights": len(tensors),
            "weight_elements": int(sum(np.prod(t["shape"], dtype=np.int64) for t in tensors)),
            "weight_bytes": int(sum(v.nbytes for v in self.weights.values())),
            "platforms": list(self.exported.platforms),
            "ops": _op_counts(self.exported),
        }

    def __repr__(self):
        return f"<LoadedProgram {self.manifest['function']!r} from {self.path!r}: {self.input_spec}>"


_MISSING = object()


def _read_manifest(path: str) -> dict:
    def error(problem, advice="save the artifact again with dy2st.save (or `dy2st save`)."):
        return ArtifactError(f"Artifact {path!r}: {problem}", advice=advice)

    full = os.path.join(path, MANIFEST)
    if not os.path.isdir(path):
        raise error("no such directory.", advice="pass the directory written by dy2st.save.")
    if not os.path.isfile(full):
        raise error(f"{MANIFEST}: the file is missing (an unfinished save, or not an artifact).")
    try:
        with open(full, "rb") as f:
            manifest = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise error(f"{MANIFEST}: not valid JSON ({err}).") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise error(f"{MANIFEST}: not a dy2st artifact manifest (format is {found!r}, expected {FORMAT!r}).")
    version = manifest.get("format_version")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise error(f"{MANIFEST}: incompatible format version {version!r}; this dy2st ({_dy2st_version()}) "
                    f"reads versions {list(SUPPORTED_FORMAT_VERSIONS)}.",
                    advice=f"load it with the dy2st that saved it ({manifest.get('dy2st_version')}), "
                    "or save it again with this one.")
    for key in ("jax_version", "platforms", "function", "inputs", "outputs", "program", "weights", "files", "source"):
        if key not in manifest:
            raise error(f"{MANIFEST}: the key {key!r} is missing.")
    if not isinstance(manifest["weights"], dict) or manifest["weights"].get("format") not in WEIGHT_FILES:
        raise error(f"{MANIFEST}: unknown weights format in {manifest['weights']!r}.")
    return manifest


def _read_weights(loaded: LoadedProgram, data: bytes) -> dict:
    manifest = loaded.manifest["weights"]
    name = manifest["file"]
    try:
        if manifest["format"] == "safetensors":
            try:
                from safetensors.numpy import load as load_safetensors
            except ImportError:
                raise loaded._error(name, "reading it needs the safetensors package.",
                                    advice="pip install 'dy2st[deploy]' (or safetensors).") from None
            arrays = load_safetensors(data)
        else:
            import io

            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
    except ArtifactError:
        raise
    except Exception as err:  # both readers raise their own types for malformed files
        raise loaded._error(name, f"cannot be read ({type(err).__name__}: {err}).") from None
    weights = {}
    for tensor in manifest["tensors"]:
        array = arrays.get(tensor["name"])
        if array is None:
            raise loaded._error(name, f"the weight {tensor['name']!r} is missing.")
        dtype = np.dtype(jax.numpy.dtype(tensor["dtype"]))
        if array.dtype != dtype and array.dtype.kind == "V" and array.dtype.itemsize == dtype.itemsize:
            array = array.view(dtype)  # npz stores bfloat16 and friends as raw bytes
        if list(array.shape) != tensor["shape"] or array.dtype != dtype:
            raise loaded._error(name, f"the weight {tensor['name']!r} is {array.dtype.name}{list(array.shape)}, "
                                f"the manifest says {tensor['dtype']}{tensor['shape']}.")
        weights[tensor["name"]] = array
    return weights


def _op_counts(exported) -> dict:
    """StableHLO op name -> count, from the program's MLIR (walked, not pattern-matched);
    empty when this jax offers no MLIR context with its dialects."""
    try:
        from jax._src.interpreters import mlir  # the only place jax exposes a context with its dialects
        from jax.extend.mlir import ir
    except ImportError:
        return {}

    counts: collections.Counter = collections.Counter()

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    counts[child.operation.name] += 1
                    walk(child.operation)

    with mlir.make_ir_context() as ctx:
        walk(ir.Module.parse(exported.mlir_module(), context=ctx).operation)
    return dict(counts.most_common())
