"""save / load: a converted function as a deployable artifact that never runs stored Python.

An artifact is a directory of three files:

    manifest.json          format version, dy2st/jax versions, platforms, inputs/outputs (null
                           for a dynamic dim), weight names and their program inputs, the
                           translated source (for reference only), the size and sha256 of each file
    program.jaxexport      `jax.export` serialization (StableHLO + calling convention), lowered
                           for every platform in the manifest (default cpu and cuda)
    weights.safetensors    the weights by name (or weights.npz, read with allow_pickle=False)

`save` traces the converted function once with `jax.export`; `None` dims of the InputSpecs
become symbolic, so one artifact serves every batch size. Weights are inputs of the program,
not constants baked into it. The files are written to a temporary directory beside the target
and renamed into place (`dy2st.artifact_files`).

An artifact is untrusted data. `load` validates the manifest against its schema
(`dy2st.manifest`), opens only plain regular files inside the directory whose `stat` size is
the manifest's, checks their sha256, deserializes the program with jax (a flatbuffer: no
pickle, no exec), checks the program's signature against the manifest (every weight's name
position, shape and dtype; every input; every output), and returns a callable that checks its
inputs. Every failure is an `ArtifactError` naming the file or manifest field.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import inspect
import io
import json
import math
import os
import re
import subprocess
import sys
import zipfile
from typing import Any, Iterator, Sequence

import jax
import numpy as np

from dy2st import _jax_compat
from dy2st import _lift, config
from dy2st.artifact_files import MAX_MANIFEST_BYTES, ArtifactDir, path_argument, write_artifact
from dy2st.errors import ArtifactError, Dy2StaticError, ExportError, InputSpecError, OriginInfo, \
    innermost_user_frame
from dy2st.input_spec import InputSpec, abstract, as_spec, check_spec_list, user_origin
from dy2st.manifest import FORMAT, FORMAT_VERSION, MANIFEST, PROGRAM, SUPPORTED_FORMAT_VERSIONS, WEIGHT_FILES, \
    Manifest, parse_manifest
from dy2st.runtime import debug_effects, key_order

__all__ = ["save", "load", "LoadedProgram", "FORMAT", "FORMAT_VERSION", "SUPPORTED_FORMAT_VERSIONS", "MANIFEST",
           "PROGRAM", "WEIGHT_FILES", "DEFAULT_PLATFORMS", "DEBUG_EFFECTS"]

DEFAULT_PLATFORMS = ("cpu", "cuda")
DEBUG_EFFECTS = ("error", "drop")


def save(fn_or_model, path: str | os.PathLike, input_spec: Sequence | None = None, *, params: Any = None,
         platforms: Sequence[str] = DEFAULT_PLATFORMS, weights_format: str | None = None,
         overwrite: bool = False, debug_effects: str = "error") -> str:
    """Export `fn_or_model` to the directory `path`, replacing it as a whole.

    Args:
      fn_or_model: a function or StaticFunction, a bound method, or a model object with a
        Python `__call__` (Equinox / Flax NNX modules, plain objects holding arrays). A model's
        arrays are stored as weights.
      path: the artifact directory. It is written beside itself and renamed into place, so an
        earlier artifact there survives a failed save. A symlink is never followed.
      input_spec: one entry per positional input: an InputSpec (`None` dims: any size), a
        ShapeDtypeStruct or array (fixed shape), or any other value, which is passed as is
        and fixed in the program. Default: the `input_spec` given to `to_static`.
      params: a pytree of weights passed as the first argument: `fn(params, *inputs)`.
      platforms: lowering platforms; the default runs on CPU and CUDA GPUs.
      weights_format: "safetensors" (default when installed) or "npz".
      overwrite: replace `path` even when it is not a dy2st artifact (a non-empty directory of
        other files, a file, a symlink). An existing artifact is always replaced.
      debug_effects: what to do with `print` and `assert` of traced values, which run on the
        host and cannot be stored: "error" (default) refuses and names their lines; "drop"
        saves the program without them (the saved program prints nothing and checks nothing).

    Returns:
      The artifact directory, as a string.

    Example::

        dy2st.save(forward, "artifact", [dy2st.InputSpec((None, 784), "float32", "x")], params=params)
        loaded = dy2st.load("artifact"); loaded(x)
    """
    path = path_argument(path, "dy2st.save", ExportError)  # checked before the function is traced
    platforms = _platforms_argument(platforms)
    if debug_effects not in DEBUG_EFFECTS:
        raise ExportError(f"debug_effects={debug_effects!r} is not one of {list(DEBUG_EFFECTS)}.")
    lifted = _lift.lift(fn_or_model, params)
    input_spec = input_spec if input_spec is not None else lifted.declared_spec
    if input_spec is None:
        raise ExportError("dy2st.save needs input_spec: the shape and dtype of every input.",
                          advice="pass input_spec=[dy2st.InputSpec((None, 784), 'float32', name='x')].")
    entries = _input_entries(input_spec, lifted)
    specs = [e for e in entries if isinstance(e, InputSpec)]
    weights_format = weights_format or ("safetensors" if _has_safetensors() else "npz")
    if weights_format not in WEIGHT_FILES:
        raise ExportError(f"weights_format {weights_format!r} is not one of {sorted(WEIGHT_FILES)}.")
    values = [_canonical(v) for v in lifted.values]

    _check_weight_names(lifted.names)

    key_orders: list = []  # per trace, the key orders of the outputs' dicts

    def program(weights: dict, inputs: list):
        # Weights go in by name and inputs as a list of one-entry dicts ({name: array}, in
        # order): the program's own signature (its in_tree) then holds every name and the
        # inputs' order, and `load` checks the manifest against it.
        it = (value for (value,) in (d.values() for d in inputs))
        outputs = lifted.call([weights[n] for n in lifted.names],
                              *[next(it) if isinstance(e, InputSpec) else e for e in entries])
        key_orders.append(key_order.orders_of(outputs))  # the program's out_tree sorts them
        return outputs

    weight_structs = {n: jax.ShapeDtypeStruct(v.shape, v.dtype) for n, v in zip(lifted.names, values)}
    traced = _Traced(program, weight_structs, _by_name([s.name for s in specs], abstract(specs)),
                     lifted.static_fn.__qualname__, specs)
    with _debug_effects_mode(debug_effects):
        _refuse_host_callbacks(traced, debug_effects)
        exported = _export(traced, platforms)
    try:
        program_bytes = bytes(exported.serialize())
    except (ValueError, TypeError) as err:  # TypeError: a dict key that is not a string
        raise ExportError(f"The outputs cannot be stored: {err}",
                          advice="return arrays in tuples, lists or dicts with string keys (not a custom class).") from None
    weights_file = WEIGHT_FILES[weights_format]
    files = {PROGRAM: program_bytes, weights_file: _weights_bytes(lifted.names, values, weights_format)}
    manifest = _manifest(lifted, values, entries, specs, exported, weights_format)
    if key_orders[-1] is not None:
        manifest["output_key_orders"] = [list(order) for order in key_orders[-1]]  # string keys: serialized
    manifest["files"] = {name: _file_info(data) for name, data in files.items()}
    files[MANIFEST] = json.dumps(manifest, indent=2).encode()
    _check_loadable(files, specs)
    write_artifact(path, files, overwrite, _is_artifact)
    return path


@dataclasses.dataclass(frozen=True)
class _Traced:
    """What `save` traces: `program(weights, *inputs)` on these abstract values."""

    program: Any
    weight_structs: dict
    input_structs: list
    qualname: str
    specs: list[InputSpec]

    def args(self) -> tuple:
        return (self.weight_structs, self.input_structs)


# The platforms jax.export lowers for (jax accepts any other name, for a program nothing runs).
KNOWN_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def _platforms_argument(platforms) -> tuple[str, ...]:
    """`platforms` as a tuple of known platform names, each once; anything else refused."""
    known = list(KNOWN_PLATFORMS)
    if isinstance(platforms, (str, bytes)):
        raise ExportError(f"platforms must be a list of platform names, got the string {platforms!r:.40} "
                          "(it would be read one letter at a time).", user_origin(),
                          advice=f"wrap it in a list: platforms=[{platforms!r:.40}].")
    if not isinstance(platforms, (list, tuple)) or not platforms:
        raise ExportError(f"platforms must be a non-empty list of platform names, got {type(platforms).__name__} "
                          f"{platforms!r:.60}.", user_origin(),
                          advice=f"pass some of {known}, e.g. platforms=['cpu'] (the default is {list(DEFAULT_PLATFORMS)}).")
    for name in platforms:
        if not isinstance(name, str) or name not in KNOWN_PLATFORMS:
            raise ExportError(f"platforms holds {type(name).__name__} {name!r:.40}, which is not a platform "
                              f"jax.export lowers for; the known ones are {known}.", user_origin(),
                              advice=f"pass names from {known}, e.g. platforms=['cpu', 'cuda'].")
    if len(set(platforms)) != len(platforms):
        raise ExportError(f"platforms names a platform twice: {list(platforms)}.", user_origin(),
                          advice="name each platform once.")
    return tuple(platforms)


def _by_name(names: list[str], values: list) -> list[dict]:
    """The program's input argument: `[{name: value}, ...]` in input order."""
    return [{name: value} for name, value in zip(names, values)]


def _debug_effects_mode(mode: str) -> contextlib.AbstractContextManager:
    return debug_effects.dropped() if mode == "drop" else contextlib.nullcontext()


# -- input specs -----------------------------------------------------------------------------
def _input_entries(input_spec, lifted) -> list:
    check_spec_list(input_spec)
    _check_spec_count(len(input_spec), lifted)
    entries = []
    for i, entry in enumerate(input_spec):
        name = lifted.input_names[i] if i < len(lifted.input_names) else f"input{i}"
        _lift.refuse_key_array(entry, f"input_spec entry {i} ({name!r})")
        entry = as_spec(entry, name)
        if not isinstance(entry, InputSpec) and any(
                isinstance(l, (InputSpec, jax.ShapeDtypeStruct, jax.Array, np.ndarray))
                for l in jax.tree_util.tree_leaves(entry, is_leaf=lambda x: isinstance(x, InputSpec))):
            raise ExportError(f"input_spec entry {i} ({name!r}) is a container of arrays; dy2st.save takes "
                              "one InputSpec per array input.",
                              advice="pass the arrays as separate arguments, or as params= for weights.")
        if isinstance(entry, InputSpec):
            _check_dtype_is_enabled(entry, i)
        entries.append(entry)
    names = [e.name for e in entries if isinstance(e, InputSpec)]
    duplicates = sorted(n for n, c in collections.Counter(names).items() if c > 1)
    if duplicates:
        raise InputSpecError(f"Several InputSpecs are named {duplicates}.", advice="give each InputSpec its own name.")
    return entries


def _check_spec_count(count: int, lifted) -> None:
    """As many entries as the function takes inputs: all required ones, at most all of them."""
    params = list(inspect.signature(lifted.static_fn._fn).parameters.values())
    params = params[len(params) - len(lifted.input_names):]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    keyword_required = [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    signature = f"{lifted.static_fn.__qualname__}({', '.join(p.name for p in positional)})"
    if keyword_required:
        raise InputSpecError(f"{signature} has keyword-only inputs without defaults {keyword_required}; "
                             "dy2st.save passes inputs by position.", advice="give them defaults or make them positional.")
    if count < len(required):
        missing = [p.name for p in required[count:]]
        raise InputSpecError(f"input_spec has {count} entries, but {signature} needs {len(required)} inputs: "
                             f"no InputSpec for {missing}.",
                             advice="give one InputSpec (or a fixed value) per input, in order.")
    if count > len(positional) and not varargs:
        raise InputSpecError(f"input_spec has {count} entries, but {signature} takes only {len(positional)} "
                             f"inputs: entries {list(range(len(positional), count))} have no parameter.",
                             advice="remove the extra InputSpecs, or add the parameters.")


def _check_dtype_is_enabled(spec: InputSpec, index: int) -> None:
    canonical = np.dtype(jax.dtypes.canonicalize_dtype(spec.dtype))
    if canonical != spec.dtype:
        raise InputSpecError(f"InputSpec {index} ({spec}) has dtype {spec.dtype.name}, which jax computes only with "
                             f"64-bit mode on; it is off, so the program would take {canonical.name} instead.",
                             advice=f"use {canonical.name!r} in the InputSpec, or turn 64-bit mode on before "
                             "saving: jax.config.update('jax_enable_x64', True).")


def _check_weight_names(names: list[str]) -> None:
    duplicates = sorted(n for n, c in collections.Counter(names).items() if c > 1)
    if duplicates:
        raise ExportError(f"Several weights are named {duplicates}.", advice="give each array of the model its own name.")


def _canonical(value: np.ndarray) -> np.ndarray:
    """A weight as jax computes with it (float64 is float32 unless 64-bit mode is on), as eager
    use of the model would."""
    dtype = np.dtype(jax.dtypes.canonicalize_dtype(value.dtype))
    return value if dtype == value.dtype else value.astype(dtype)


# -- tracing -----------------------------------------------------------------------------------
@contextlib.contextmanager
def _trace_errors(traced: _Traced) -> Iterator[None]:
    """Tracing failures as ExportErrors that name the specs and the user's line."""
    specs = ", ".join(str(s) for s in traced.specs)
    try:
        yield
    except Dy2StaticError:
        raise
    except jax.errors.InconclusiveDimensionOperation as err:
        raise ExportError(f"Saving {traced.qualname!r} needs the value of a dynamic dimension: "
                          f"{str(err).splitlines()[0]}", innermost_user_frame(err.__traceback__),
                          advice="give that dimension a fixed size in its InputSpec, or compute with it "
                          "only through array operations.") from err
    except (TypeError, ValueError) as err:
        advice = ("dims that must be equal need the same name, e.g. InputSpec(('batch', 784)) for each input "
                  "(None gives each dim its own symbol)." if "incompatible shapes" in str(err) else
                  "make the InputSpecs' shapes and dtypes those the function works with.")
        raise ExportError(f"Saving {traced.qualname!r} with input_spec [{specs}] failed while tracing: "
                          f"{type(err).__name__}: {_first_lines(err)}", innermost_user_frame(err.__traceback__),
                          advice=advice) from err


def _first_lines(err: BaseException, count: int = 3) -> str:
    return "\n".join(str(err).strip().splitlines()[:count])


def _export(traced: _Traced, platforms):
    with _trace_errors(traced):
        return jax.export.export(jax.jit(traced.program), platforms=platforms)(*traced.args())


@dataclasses.dataclass(frozen=True)
class _HostCallback:
    primitive: str
    origin: OriginInfo | None


def _refuse_host_callbacks(traced: _Traced, mode: str) -> None:
    """`jax.export` cannot store a host callback (a traced `print`/`assert`, `jax.debug.*`):
    name each one's line before export fails with jax's own error."""
    with _trace_errors(traced):
        closed = jax.make_jaxpr(traced.program)(*traced.args())
    found = list(_host_callbacks(closed.jaxpr))
    if not found:
        return
    lines = "\n".join(f"  {c.origin.as_header() if c.origin else '(line unknown)'}  [{c.primitive}]"
                      for c in found[:10])
    if mode == "drop":
        advice = "remove those calls (jax.debug.print, jax.debug.callback, pure_callback), or save a function without them."
        problem = "calls the host in ways that debug_effects='drop' does not remove"
    else:
        advice = ("remove the print/assert from the function, or pass debug_effects='drop' to save without "
                  "them (`dy2st save --drop-debug-effects`): the saved program then prints and checks nothing.")
        problem = "prints or asserts on traced values (host callbacks), which jax.export cannot store"
    raise ExportError(f"Saving {traced.qualname!r}: the function {problem}:\n{lines}", found[0].origin,
                      advice=advice)


_HOST_PRIMITIVES = ("debug_print",)  # jax.debug.print; the others are named *callback


def _host_callbacks(jaxpr, enclosing: OriginInfo | None = None) -> Iterator[_HostCallback]:
    """The host callbacks of `jaxpr` and the jaxprs in it; one whose own traceback shows no
    user line (a check's callback inside a `lax.cond` dy2st made) takes its enclosing one's."""
    for eqn in jaxpr.eqns:
        origin = _user_origin_of(eqn) or enclosing
        if "callback" in eqn.primitive.name or eqn.primitive.name in _HOST_PRIMITIVES:
            yield _HostCallback(eqn.primitive.name, origin)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else (param,):
                inner = getattr(sub, "jaxpr", sub)  # ClosedJaxpr -> Jaxpr
                if hasattr(inner, "eqns"):
                    yield from _host_callbacks(inner, origin)


def _user_origin_of(eqn) -> OriginInfo | None:
    """The user's line that made `eqn`: the innermost traceback frame outside the libraries."""
    from dy2st.errors import is_library_file  # the one test of "library file" every error message uses

    traceback = getattr(eqn.source_info, "traceback", None)
    for frame in getattr(traceback, "frames", ()):  # innermost first
        if not is_library_file(frame.file_name):
            return OriginInfo(frame.file_name, frame.line_num, frame.function_name)
    return None


# -- manifest and files ------------------------------------------------------------------------
def _manifest(lifted, values, entries, specs, exported, weights_format) -> dict:
    n_weights = len(lifted.names)
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
        "outputs": [{"name": name, "shape": _json_shape(aval.shape), "dims": _dims(aval.shape),
                     "dtype": np.dtype(aval.dtype).name} for name, aval in zip(_output_names(exported),
                                                                                exported.out_avals)],
        "program": {"file": PROGRAM, "inputs": program_inputs, "num_weights": n_weights},
        "weights": {"file": WEIGHT_FILES[weights_format], "format": weights_format,
                    "tensors": [{"name": n, "shape": list(v.shape), "dtype": v.dtype.name}
                                for n, v in zip(lifted.names, values)]},
        "source": lifted.static_fn.code,
    }


def _check_loadable(files: dict[str, bytes], specs: list[InputSpec]) -> None:
    """Refuse to write what `load` would refuse: the manifest is read back through load's own
    schema (`parse_manifest`) and the files held to load's size limits, so an input name with
    a newline or a weight name of 100,000 characters fails here, naming what to change."""
    def field_error(field: str, expected: str) -> Dy2StaticError:
        index = re.match(r"inputs\[(\d+)\]", field)
        if index is not None and int(index[1]) < len(specs):
            spec = specs[int(index[1])]
            return InputSpecError(f"InputSpec {index[1]} ({spec.name!r:.60}) cannot be saved: dy2st.load would refuse "
                                  f"the artifact (manifest field {field!r}: expected {expected}).", user_origin(),
                                  advice="give the InputSpec a name of 1 to 200 printable characters (no newline "
                                  "or other control character).")
        return ExportError(f"dy2st.load would refuse this artifact (manifest field {field!r}: expected {expected}).",
                           user_origin(), advice="change what that field describes (the function's inputs, outputs "
                           "or weights) as it says.")

    if len(files[MANIFEST]) > MAX_MANIFEST_BYTES:
        raise ExportError(f"The manifest would be {len(files[MANIFEST])} bytes, more than the {MAX_MANIFEST_BYTES} "
                          "dy2st.load reads (the translated source and the names take that room).", user_origin(),
                          advice="save a smaller function, or give its inputs and weights shorter names.")
    manifest = parse_manifest(json.loads(files[MANIFEST]), field_error)
    limits = {manifest.program_file: MAX_PROGRAM_BYTES, manifest.weights_file: _weights_size_limit(manifest)}
    for name, limit in limits.items():
        if len(files[name]) > limit:
            longest = max((t.name for t in manifest.tensors), key=len, default="")
            raise ExportError(f"{name} would be {len(files[name])} bytes, more than the {limit} dy2st.load reads for "
                              f"it (the data, plus 65536 bytes and 1024 per weight for names and headers); the "
                              f"longest weight name has {len(longest)} characters.", user_origin(),
                              advice="give the weights shorter names (the keys of params, the model's attribute "
                              "names).")


def _output_names(exported) -> list[str]:
    leaves = jax.tree_util.tree_flatten_with_path(
        jax.tree_util.tree_unflatten(exported.out_tree, range(len(exported.out_avals))))[0]
    names = []
    for path, _ in leaves:
        suffix = jax.tree_util.keystr(path)
        names.append("output" + suffix if suffix else "output")
    return names


def _dims(shape) -> list:
    return [d if isinstance(d, int) else str(d) for d in shape]


def _json_shape(shape) -> list:
    return [int(d) if not jax.export.is_symbolic_dim(d) else None for d in shape]


def _dy2st_version() -> str:
    return config.VERSION


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


def _file_info(data: bytes) -> dict:
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _is_artifact(path: str) -> bool:
    """Whether `path` holds only a dy2st artifact's files, with a dy2st manifest."""
    known = {MANIFEST, PROGRAM, *WEIGHT_FILES.values()}
    if not set(os.listdir(path)) <= known:
        return False
    try:
        with ArtifactDir(path, lambda name, problem: ArtifactError(problem)) as directory:
            data = json.loads(directory.read(MANIFEST, None, MAX_MANIFEST_BYTES))
    except (ArtifactError, ValueError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


# -- load ------------------------------------------------------------------------------------
def load(path: str | os.PathLike) -> "LoadedProgram":
    """Load an artifact written by `dy2st.save`; see `LoadedProgram`.

    The artifact is treated as untrusted data: nothing outside its directory is read, nothing
    stored is executed as Python, and every check listed in this module's docstring is made
    before the program can run.

    Raises:
      ArtifactError: a file is missing, not a regular file, truncated or altered; a manifest
        field is malformed or disagrees with the program; or the artifact was written in a
        format, for a platform, or by a jax this installation cannot run.
    """
    return LoadedProgram(path_argument(path, "dy2st.load", ArtifactError))


class LoadedProgram:
    """A loaded artifact: call it like the saved function (inputs by position or by name).

    Attributes:
      manifest: the manifest as read (a dict), after validation.
      checked_manifest: the same, typed (`dy2st.manifest.Manifest`).
      input_spec: the InputSpecs of the inputs, in order.
      code: the translated source the artifact was made from (for reading only; never run).
      exported: the `jax.export.Exported` program.
      weights: the weights by name.
    """

    def __init__(self, path: str):
        self.path = path
        with ArtifactDir(path, self._error) as directory:
            self.checked_manifest = _read_manifest(directory, self._field_error)
            manifest = self.checked_manifest
            program_bytes = _read_checked(directory, manifest, manifest.program_file, MAX_PROGRAM_BYTES)
            weights_bytes = _read_checked(directory, manifest, manifest.weights_file, _weights_size_limit(manifest))
        self.manifest = self.checked_manifest.raw
        self._program_bytes = program_bytes
        self.exported = self._deserialize(program_bytes)
        self._check_platform()
        _ProgramCheck(self.exported, self.checked_manifest, self._error).run()
        self._check_lowers()
        self.weights = _read_weights(self.checked_manifest, weights_bytes, self._error)
        self.input_spec = list(self.checked_manifest.inputs)
        self._device_weights = {name: jax.device_put(array) for name, array in self.weights.items()}
        self._run = jax.jit(self.exported.call)

    @property
    def code(self) -> str:
        return self.checked_manifest.source

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.input_spec]

    def __call__(self, *args, **kwargs):
        arrays = self._bind(args, kwargs)
        try:
            outputs = self._run(self._device_weights, _by_name(self.input_names, arrays))
        # The program is specialized to these inputs' shapes and compiled on a call's first use
        # of them; a module that is malformed only then (bytes altered with the checksums
        # updated) fails in MLIR's parser or jax's lowering (a KeyError for a symbol the module
        # lacks). Errors while it runs are XLA's.
        except (ValueError, KeyError, _mlir_error()) as err:
            raise self._error(PROGRAM, f"jax cannot compile it for inputs "
                              f"{[f'{np.dtype(a.dtype).name}{list(np.shape(a))}' for a in arrays]} "
                              f"({type(err).__name__}: {_first_lines(err, 2)[:300]}).") from None
        return key_order.restore(outputs, self.checked_manifest.output_key_orders)

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

    def _deserialize(self, program_bytes: bytes):
        try:
            problem = _symbolic_dims_problem(program_bytes)
        except Exception:  # noqa: BLE001 (bytes the flatbuffer reader cannot follow: jax's reader says why below)
            problem = None
        if problem is not None:
            raise self._error(PROGRAM, f"{problem}; it was altered or made to attack the reader, and is not read.")
        try:
            return jax.export.deserialize(bytearray(program_bytes))
        # An untrusted flatbuffer: jax's reader raises struct.error, ValueError, IndexError, ...
        # for bytes it cannot read; each is a property of the file, reported as such.
        except Exception as err:  # noqa: BLE001 (the boundary around a parser of untrusted bytes)
            raise self._error(PROGRAM, f"jax {jax.__version__} cannot deserialize it "
                              f"({type(err).__name__}: {str(err)[:200]}); it was written by jax "
                              f"{self.checked_manifest.jax_version}.") from None

    def _check_lowers(self) -> None:
        """Lower the program once, for its own symbolic shapes, so that a module jax cannot
        read or verify (bytes altered with the checksums updated) fails here, not at a call."""
        crashed = _crash_in_child(self._program_bytes)
        if crashed is not None:
            raise self._error(PROGRAM, f"its StableHLO module {crashed} when jax {jax.__version__} read it in a "
                              "separate process; it was altered or made to attack the reader.")
        structs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
                                         jax.tree_util.tree_unflatten(self.exported.in_tree, self.exported.in_avals))
        args, kwargs = structs
        try:
            jax.export.export(jax.jit(self.exported.call), platforms=self.exported.platforms)(*args, **kwargs)
        # MLIR's reader and verifier report malformed modules as ValueError or JaxRuntimeError;
        # an altered string in the module (a location, a name) that is not UTF-8 reaches Python
        # as nanobind's RuntimeError; a module without `main` as a KeyError of jax's lowering.
        # Any exception is a property of the untrusted module (the child process read it
        # without dying), reported as such.
        except Exception as err:  # noqa: BLE001 (the boundary around lowering an untrusted module)
            raise self._error(PROGRAM, f"its StableHLO module cannot be read or verified by jax {jax.__version__} "
                              f"({type(err).__name__}: {_first_lines(err, 2)[:300]}); it was written by jax "
                              f"{self.checked_manifest.jax_version}.") from None

    def _check_platform(self) -> None:
        backend = jax.default_backend()
        platforms = list(self.exported.platforms)
        runnable = backend in platforms or (backend == "gpu" and ({"cuda", "rocm"} & set(platforms)))
        if not runnable:
            raise self._error(PROGRAM, f"it was lowered for {platforms}, but jax runs on {backend!r} here.",
                              advice="save it again with dy2st.save(..., platforms=[...]) including this platform.")

    def _error(self, name: str, problem: str, advice: str | None = None) -> ArtifactError:
        where = f"{name}: " if name else ""
        return ArtifactError(f"Artifact {self.path!r:.200}: {where}{problem}", user_origin(),  # the load call
                             advice=advice or "save the artifact again with dy2st.save (or `dy2st save`).")

    def _field_error(self, field: str, expected: str) -> ArtifactError:
        return self._error(MANIFEST, f"field {field!r}: expected {expected}.")

    def summary(self) -> dict:
        """Inputs, outputs, weight count and size, and StableHLO op counts of the program."""
        tensors = self.checked_manifest.tensors
        return {
            "inputs": [str(s) for s in self.input_spec],
            "outputs": [f"{o.name}:{o.dtype.name}[{','.join(str(d) for d in o.dims)}]"
                        for o in self.checked_manifest.outputs],
            "weights": len(tensors),
            "weight_elements": sum(math.prod(t.shape) for t in tensors),
            "weight_bytes": int(sum(v.nbytes for v in self.weights.values())),
            "platforms": list(self.exported.platforms),
            "ops": _op_counts(self.exported),
        }

    def __repr__(self):
        return f"<LoadedProgram {self.checked_manifest.function!r} from {self.path!r}: {self.input_spec}>"


_MISSING = object()


def _mlir_error() -> type:
    """MLIR's parse/verify error type (jax.extend.mlir is imported only when needed)."""
    try:
        from jax.extend.mlir import ir
    except ImportError:
        return ValueError
    return ir.MLIRError


def _read_manifest(directory: ArtifactDir, field_error) -> Manifest:
    data = directory.read(MANIFEST, None, MAX_MANIFEST_BYTES)
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise directory.error(MANIFEST, f"not valid JSON ({str(err)[:200]}).") from None
    return parse_manifest(raw, field_error)


def _read_checked(directory: ArtifactDir, manifest: Manifest, name: str, limit: int) -> bytes:
    """The bytes of `name`: a regular file of the manifest's size (checked by stat before
    reading), at most `limit` bytes, with the manifest's sha256."""
    entry = manifest.files[name]
    if entry.size > limit:
        raise directory.error(name, f"the manifest says it has {entry.size} bytes, more than the {limit} a file "
                              "of its kind can need; it is not read.")
    data = directory.read(name, entry.size, limit)
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256:
        raise directory.error(name, f"the file was altered or corrupted: its sha256 is {digest[:16]}..., the "
                               f"manifest says {entry.sha256[:16]}....")
    return data


# A jax.export program is one flatbuffer, which cannot exceed 2 GiB.
MAX_PROGRAM_BYTES = 1 << 31

# The dimension strings of a program are parsed by jax's symbolic-shape parser when it is
# deserialized, in this process and before the child-process guard can run: `x_0^200000000`
# (13 bytes) makes it build a list of 2*10**8 factors (25 minutes, 1.6 GB). Reading the strings
# first costs microseconds, where deserializing under the guard would still let the child run
# out its timeout and memory. A real dimension is short, and a power above 64 of a size >= 2 is
# beyond any array (MAX_DIM is 2**40), so these bounds refuse nothing jax writes for one.
MAX_DIM_TEXT = 4096
MAX_DIM_POWER = 64
_POWER_RE = re.compile(r"\^\s*(\d{1,2})(?![\w.])")


def _symbolic_dims_problem(program_bytes: bytes) -> str | None:
    """Why the program's dimension strings are unsafe to hand to jax's parser (None: they are not)."""
    for raw in _jax_compat.exported_shape_strings(program_bytes):
        text = raw.decode("utf-8", "replace")
        if len(text) > MAX_DIM_TEXT:
            return f"a dimension of its inputs or outputs is {len(text)} characters long (at most {MAX_DIM_TEXT})"
        powers = _POWER_RE.findall(text)
        if text.count("^") != len(powers) or any(int(p) > MAX_DIM_POWER for p in powers):
            return (f"its dimension {text[:80]!r} raises a symbol to a power other than an integer up to "
                    f"{MAX_DIM_POWER}")
    return None


def _weights_size_limit(manifest: Manifest) -> int:
    """The most bytes a weights file holding the manifest's tensors can need (data + headers)."""
    return sum(t.nbytes for t in manifest.tensors) + 65536 + 1024 * len(manifest.tensors)


class _ProgramCheck:
    """The deserialized program against the manifest: platforms, the calling structure, every
    weight (position, shape, dtype), every input (rank, dtype, fixed and named dims) and every
    output. A disagreement means the manifest describes another program: refused."""

    def __init__(self, exported, manifest: Manifest, error):
        self.exported, self.manifest, self._error = exported, manifest, error

    def fail(self, problem: str) -> ArtifactError:
        return self._error(PROGRAM, f"the program disagrees with {MANIFEST}: {problem}")

    def run(self) -> None:
        if tuple(self.exported.platforms) != self.manifest.platforms:
            raise self.fail(f"it is lowered for {list(self.exported.platforms)}, the manifest's platforms are "
                            f"{list(self.manifest.platforms)}.")
        weights, inputs = self._signature()
        for i, tensor in enumerate(self.manifest.tensors):
            self._check_weight(i, tensor, weights[tensor.name])
        self._check_inputs(inputs)
        self._check_outputs()
        self._check_key_orders()

    def _signature(self) -> tuple[dict, list]:
        """The program's weights by name and its inputs in order, from its own calling
        structure; the names (and the inputs' order) must be exactly the manifest's."""
        tensors, inputs = self.manifest.tensors, self.manifest.inputs
        expected = jax.tree_util.tree_structure((({t.name: 0 for t in tensors}, _by_name([s.name for s in inputs],
                                                                                          [0] * len(inputs))), {}))
        avals, tree = self.exported.in_avals, self.exported.in_tree
        if tree == expected:
            (weights, named_inputs), _ = jax.tree_util.tree_unflatten(tree, avals)
            return weights, [aval for d in named_inputs for aval in d.values()]
        found = jax.tree_util.tree_unflatten(tree, [0] * tree.num_leaves)
        if not (isinstance(found, tuple) and len(found) == 2 and isinstance(found[0], tuple) and len(found[0]) == 2
                and isinstance(found[0][0], dict) and isinstance(found[0][1], list)
                and all(isinstance(d, dict) and len(d) == 1 for d in found[0][1])):
            raise self.fail(f"it takes its arguments as {str(tree)[:200]}, not as (weights by name, inputs in order).")
        (program_weights, program_inputs), _ = found
        if sorted(program_weights) != sorted(t.name for t in tensors):
            raise self.fail(f"its weights are named {_short(sorted(program_weights))}, weights.tensors lists "
                            f"{_short([t.name for t in tensors])}.")
        raise self.fail(f"its inputs are {_short([name for d in program_inputs for name in d])} in this order, the "
                        f"manifest's inputs are {_short([s.name for s in inputs])}.")

    def _check_weight(self, i: int, tensor, aval) -> None:
        shape = tuple(aval.shape)
        if not all(isinstance(d, int) for d in shape) or shape != tensor.shape or aval.dtype != tensor.dtype:
            raise self.fail(f"its weight {tensor.name!r} is {_aval_text(aval)}, but weights.tensors[{i}] says "
                            f"{tensor.dtype.name}{list(tensor.shape)}.")

    def _check_inputs(self, avals) -> None:
        symbols: dict[object, str] = {}
        for j, (spec, aval) in enumerate(zip(self.manifest.inputs, avals)):
            where = f"inputs[{j}] ({spec})"
            if aval.dtype != spec.dtype or len(aval.shape) != len(spec.shape):
                raise self.fail(f"its input for {where} is {_aval_text(aval)}.")
            for axis, (want, got) in enumerate(zip(spec.shape, aval.shape)):
                fixed = isinstance(got, int)
                if isinstance(want, int) != fixed or (fixed and want != got):
                    raise self.fail(f"dimension {axis} of {where} is {got} in the program.")
                if not fixed:
                    key = want if isinstance(want, str) else (j, axis)  # None: a symbol of its own
                    symbols.setdefault(key, str(got))
                    if symbols[key] != str(got):
                        raise self.fail(f"dimension {axis} of {where} is {got} in the program, but the same "
                                        f"named dimension is {symbols[key]} elsewhere.")
        if len(set(symbols.values())) != len(symbols):
            raise self.fail("dimensions the manifest gives separate sizes share one size in the program "
                            f"({symbols}).")

    def _check_outputs(self) -> None:
        outputs, avals = self.manifest.outputs, self.exported.out_avals
        names = _output_names(self.exported)
        if len(outputs) != len(avals) or [o.name for o in outputs] != names:
            raise self.fail(f"its outputs are {names}, the manifest lists {[o.name for o in outputs]}.")
        for k, (output, aval) in enumerate(zip(outputs, avals)):
            if aval.dtype != output.dtype or tuple(_dims(aval.shape)) != tuple(output.dims):
                raise self.fail(f"output {output.name!r} is {_aval_text(aval)}, outputs[{k}] says "
                                f"{output.dtype.name}{_shape_text(output.dims)}.")


    def _check_key_orders(self) -> None:
        """`output_key_orders` (optional) gives each dict among the outputs an order of its keys."""
        orders = self.manifest.output_key_orders
        if orders is None:
            return
        outputs = jax.tree_util.tree_unflatten(self.exported.out_tree, [0] * self.exported.out_tree.num_leaves)
        found = key_order.dict_keys(outputs)
        if len(orders) != len(found):
            raise self.fail(f"its outputs hold {len(found)} dicts, output_key_orders orders {len(orders)}.")
        for i, (order, keys) in enumerate(zip(orders, found)):
            if len(order) != len(keys) or set(order) != set(keys):
                raise self.fail(f"output_key_orders[{i}] lists the keys {_short(list(order))}, the program's dict has "
                                f"{_short(list(keys))}.")


def _short(names: list[str]) -> str:
    text = repr(names)
    return text if len(text) <= 200 else text[:200] + "...]"


def _aval_text(aval) -> str:
    return f"{np.dtype(aval.dtype).name}{_shape_text(aval.shape)}"


def _shape_text(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _read_weights(manifest: Manifest, data: bytes, error) -> dict:
    """The weights by name, exactly the manifest's tensors (names, shapes, dtypes)."""
    name = manifest.weights_file
    if manifest.weights_format == "safetensors":
        arrays = _load_safetensors(data, name, error)
    else:
        arrays = _load_npz(data, manifest, error)
    expected = {t.name for t in manifest.tensors}
    if set(arrays) != expected:
        extra, missing = sorted(set(arrays) - expected), sorted(expected - set(arrays))
        raise error(name, f"its weights do not match weights.tensors: missing {missing[:10]}, not listed "
                    f"{extra[:10]}.")
    weights = {}
    for tensor in manifest.tensors:
        array = arrays[tensor.name]
        if array.dtype != tensor.dtype and array.dtype.kind == "V" and array.dtype.itemsize == tensor.dtype.itemsize:
            array = array.view(tensor.dtype)  # npz stores bfloat16 and friends as raw bytes
        if array.shape != tensor.shape or array.dtype != tensor.dtype:
            raise error(name, f"the weight {tensor.name!r} is {array.dtype.name}{list(array.shape)}, the manifest "
                        f"says {tensor.dtype.name}{list(tensor.shape)}.")
        weights[tensor.name] = array
    return weights


def _load_safetensors(data: bytes, name: str, error) -> dict:
    try:
        from safetensors.numpy import load as load_safetensors
    except ImportError:
        raise error(name, "reading it needs the safetensors package.",
                    advice="pip install 'dy2st[deploy]' (or safetensors).") from None
    try:
        return load_safetensors(data)
    except Exception as err:  # noqa: BLE001 (safetensors raises its own SafetensorError, and numpy errors)
        raise error(name, f"cannot be read ({type(err).__name__}: {str(err)[:200]}).") from None


def _load_npz(data: bytes, manifest: Manifest, error) -> dict:
    """The arrays of an .npz, without pickle; each member's size, and its .npy header's shape
    and dtype, are checked against the manifest before it is read (a small compressed member
    could unpack to any size; numpy allocates the header's shape before reading the data)."""
    name = manifest.weights_file
    tensors = {f"{t.name}.npy": t for t in manifest.tensors}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                tensor = tensors.get(info.filename)
                if tensor is None:
                    raise error(name, f"its weights do not match weights.tensors: not listed "
                                f"[{info.filename.removesuffix('.npy')[:80]!r}].")
                if info.file_size > tensor.nbytes + 65536:
                    raise error(name, f"its member {info.filename[:80]!r} unpacks to {info.file_size} bytes, more "
                                "than the manifest's shape allows.")
                with archive.open(info) as member:
                    _check_npy_header(member, tensor, name, error)
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except ArtifactError:
        raise
    except Exception as err:  # noqa: BLE001 (zipfile and numpy raise many types for malformed files)
        raise error(name, f"cannot be read ({type(err).__name__}: {str(err)[:200]}).") from None


def _check_npy_header(member, tensor, name: str, error) -> None:
    """The .npy header of `member` (read with numpy's header readers: a bounded literal, no
    pickle) must give the manifest's shape and dtype (or raw bytes of its size: bfloat16)."""
    version = np.lib.format.read_magic(member)
    if version not in ((1, 0), (2, 0)):
        raise error(name, f"the weight {tensor.name!r} is stored in .npy format version {version}, which dy2st "
                    "does not read.")
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(member)
    same_dtype = dtype == tensor.dtype or (dtype.kind == "V" and dtype.fields is None
                                           and dtype.itemsize == tensor.dtype.itemsize)
    if tuple(shape) != tensor.shape or not same_dtype:
        raise error(name, f"the weight {tensor.name!r} is {dtype}{list(shape)}"[:300] + f", the manifest says "
                    f"{tensor.dtype.name}{list(tensor.shape)}.")


def _op_counts(exported) -> dict:
    """StableHLO op name -> count, from the program's MLIR (walked, not pattern-matched);
    empty when this jax offers no MLIR context with its dialects."""
    from jax.extend.mlir import ir

    counts: collections.Counter = collections.Counter()

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    counts[child.operation.name] += 1
                    walk(child.operation)

    with _jax_compat.make_ir_context() as ctx:
        walk(ir.Module.parse(exported.mlir_module(), context=ctx).operation)
    return dict(counts.most_common())


# -- reading an untrusted program module in a separate process ----------------------------------
# MLIR's bytecode reader is native code: some altered modules (checksums updated to match) crash
# it with a segmentation fault instead of an error, which would kill the loading process. A
# fresh Python process reads and lowers each program first, from bytes on its stdin (nothing is
# written anywhere); only a program that passed there is read in this process. Verified
# programs are remembered by digest, so loading the same program again costs nothing.
_CHILD_CHECK = """
import sys
import jax
exported = jax.export.deserialize(bytearray(sys.stdin.buffer.read()))
args, kwargs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
                                      jax.tree_util.tree_unflatten(exported.in_tree, exported.in_avals))
jax.export.export(jax.jit(exported.call), platforms=exported.platforms)(*args, **kwargs)
"""
_CHILD_TIMEOUT_S = 300
_read_safely: set = set()  # sha256 digests of programs a child process read without crashing


def _crash_in_child(program_bytes: bytes) -> str | None:
    """None when a child process read and lowered the program without dying; else what happened.

    A child that raised an ordinary exception also gives None: the same read in this process
    then raises it, reported as an ArtifactError with jax's own words."""
    digest = hashlib.sha256(program_bytes).hexdigest()
    if digest in _read_safely:
        return None
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    try:
        child = subprocess.run([sys.executable, "-c", _CHILD_CHECK], input=program_bytes, capture_output=True,
                               timeout=_CHILD_TIMEOUT_S, env=env, check=False)
    except subprocess.TimeoutExpired:
        return f"took more than {_CHILD_TIMEOUT_S} s to read"
    if child.returncode < 0:
        return f"crashed the reader (signal {-child.returncode})"
    if child.returncode == 0:
        _read_safely.add(digest)
    return None
