"""The artifact manifest: its schema, read from untrusted JSON into a typed `Manifest`.

`dy2st.save` writes `manifest.json`; `dy2st.load` reads it through `parse_manifest`, which checks
every field's presence and type (a bad one is an `ArtifactError` naming the field, e.g.
`weights.tensors[1].shape`, and what was expected) and the manifest's own consistency: file
names are plain names inside the artifact, weight and input names are unique, and the program's
input list is exactly the weights (in order) followed by the inputs (in order). Checks against
the deserialized program itself live in `dy2st.export`.

    manifest = parse_manifest(json_data, error)   # error(field, expected) -> ArtifactError
    manifest.tensors[0].shape, manifest.inputs[0].dtype, manifest.files["program.jaxexport"].size
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable

import jax
import numpy as np

from dy2st.errors import ArtifactError, InputSpecError
from dy2st.input_spec import MAX_DIM, InputSpec

FORMAT = "dy2st.artifact"
# Version 2: the program takes (weights by name, [{input name: array}, ...]), so its signature
# records names and order; version 1 programs took positional arrays and are not read.
FORMAT_VERSION = 2
SUPPORTED_FORMAT_VERSIONS = (2,)
MANIFEST = "manifest.json"
PROGRAM = "program.jaxexport"
WEIGHT_FILES = {"safetensors": "weights.safetensors", "npz": "weights.npz"}
# A member of an artifact is one plain file name: no separator, no `..`, no leading dot.
_FILE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INPUT_NAME_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")
MAX_RANK = 64

FieldError = Callable[[str, str], ArtifactError]  # (field path, what was expected) -> the error


@dataclasses.dataclass(frozen=True)
class FileEntry:
    """One file of the artifact: a plain name, its size in bytes and its sha256 (hex)."""

    name: str
    size: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class TensorEntry:
    """One weight: its name, shape and dtype, in the program's input order."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return self.dtype.itemsize * math.prod(self.shape)  # Python ints: no overflow


@dataclasses.dataclass(frozen=True)
class OutputEntry:
    """One output leaf: its name (`output[0]`...), dims (int, or a symbol's text) and dtype."""

    name: str
    dims: tuple[int | str, ...]
    dtype: np.dtype


@dataclasses.dataclass(frozen=True)
class ProgramInput:
    """One input of the exported program: a weight or an input, by name."""

    kind: str  # "weight" or "input"
    name: str


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A validated manifest. `raw` is the JSON as read (for `dy2st inspect`)."""

    format_version: int
    dy2st_version: str
    jax_version: str
    platforms: tuple[str, ...]
    function: str
    inputs: tuple[InputSpec, ...]
    outputs: tuple[OutputEntry, ...]
    program_file: str
    program_inputs: tuple[ProgramInput, ...]
    weights_file: str
    weights_format: str
    tensors: tuple[TensorEntry, ...]
    files: dict[str, FileEntry]
    source: str
    raw: dict
    # The key order of each dict among the outputs, in the order JAX flattens them (see
    # `dy2st.runtime.key_order`); None where the manifest has none (every dict sorted, or an
    # artifact from before the field existed): the outputs come back with sorted keys.
    output_key_orders: tuple[tuple[str, ...], ...] | None = None


class _Fields:
    """Typed access to one JSON object; every failure names the field's full path."""

    def __init__(self, data: Any, path: str, error: FieldError):
        if not isinstance(data, dict):
            raise error(path or "(top level)", f"a JSON object, got {_kind(data)}")
        self.data, self.path, self.error = data, path, error

    def field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, types: type | tuple, expected: str) -> Any:
        if key not in self.data:
            raise self.error(self.field(key), f"{expected}; the key {key!r} is missing")
        value = self.data[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
            raise self.error(self.field(key), f"{expected}, got {_kind(value)}")
        return value

    def text(self, key: str, pattern: re.Pattern | None = None, expected: str = "a string") -> str:
        value = self.get(key, str, expected)
        if pattern is not None and not pattern.fullmatch(value):
            raise self.error(self.field(key), f"{expected}, got {value[:80]!r}")
        return value

    def integer(self, key: str, low: int = 0, high: int = MAX_DIM) -> int:
        expected = f"an integer in [{low}, {high}]"
        value = self.get(key, int, expected)
        if not low <= value <= high:
            raise self.error(self.field(key), f"{expected}, got {value}")
        return value

    def items(self, key: str) -> list:
        return self.get(key, list, "a list")

    def child(self, key: str) -> "_Fields":
        return _Fields(self.get(key, dict, "a JSON object"), self.field(key), self.error)

    def element(self, key: str, index: int) -> "_Fields":
        return _Fields(self.data[key][index], f"{self.field(key)}[{index}]", self.error)


def _as_tuple(types) -> tuple:
    return types if isinstance(types, tuple) else (types,)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a JSON object"}
    shown = repr(value) if not isinstance(value, (list, dict)) else ""
    return names.get(type(value), type(value).__name__) + (f" {shown[:60]}" if shown else "")


# -- the schema ------------------------------------------------------------------------------
def parse_manifest(data: Any, error: FieldError) -> Manifest:
    """Validate the JSON of `manifest.json`; raises `error(field, expected)` at the first bad field."""
    top = _Fields(data, "", error)
    fmt = top.get("format", str, f"the string {FORMAT!r}")
    if fmt != FORMAT:
        raise error("format", f"{FORMAT!r} (this is not a dy2st artifact manifest), got {fmt[:80]!r}")
    version = top.get("format_version", int, f"one of the format versions {list(SUPPORTED_FORMAT_VERSIONS)}")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise error("format_version", f"a format version this dy2st reads (it reads versions "
                    f"{list(SUPPORTED_FORMAT_VERSIONS)}); incompatible format version {version}, written by dy2st "
                    f"{str(data.get('dy2st_version'))[:40]}: load it with that dy2st, or save it again with this one")
    program, weights = top.child("program"), top.child("weights")
    tensors = tuple(_tensor(weights.element("tensors", i)) for i in range(len(weights.items("tensors"))))
    inputs = tuple(_input_spec(top.element("inputs", i)) for i in range(len(top.items("inputs"))))
    weights_format = weights.text("format", re.compile("^(safetensors|npz)$"), "'safetensors' or 'npz'")
    manifest = Manifest(
        format_version=version,
        dy2st_version=top.text("dy2st_version"),
        jax_version=top.text("jax_version"),
        platforms=_platforms(top),
        function=top.text("function"),
        inputs=inputs,
        outputs=tuple(_output(top.element("outputs", i)) for i in range(len(top.items("outputs")))),
        program_file=_member_name(program, "file", PROGRAM),
        program_inputs=tuple(_program_input(program.element("inputs", i))
                             for i in range(len(program.items("inputs")))),
        weights_file=_member_name(weights, "file", WEIGHT_FILES[weights_format]),
        weights_format=weights_format,
        tensors=tensors,
        files=_files(top.child("files")),
        source=top.text("source"),
        raw=data,
        output_key_orders=_output_key_orders(top),
    )
    top.integer("calling_convention_version", 0, 1 << 20)
    _static_arguments(top)
    _check_consistency(manifest, program, error)
    return manifest


MAX_KEY_ORDER_KEYS = 1 << 16  # keys of all output dicts together


def _output_key_orders(top: _Fields) -> tuple | None:
    """The optional `output_key_orders`: a list of lists of dict keys (strings: what an exported
    program's dicts have), each key once in its list. Whether they fit the program's outputs
    is `load`'s check."""
    if "output_key_orders" not in top.data:
        return None
    expected = "a list of lists of dict keys (strings), each key once in its list"
    orders = top.get("output_key_orders", list, expected)
    if sum(len(o) for o in orders if isinstance(o, list)) > MAX_KEY_ORDER_KEYS:
        raise top.error("output_key_orders", f"at most {MAX_KEY_ORDER_KEYS} keys in all")
    for i, order in enumerate(orders):
        field = f"output_key_orders[{i}]"
        if not isinstance(order, list):
            raise top.error(field, f"{expected}, got {_kind(order)}")
        for key in order:
            if type(key) is not str:
                raise top.error(field, f"{expected}, got a key that is {_kind(key)}")
        if len(set(order)) != len(order):
            raise top.error(field, f"{expected}, got a key twice")
    return tuple(tuple(order) for order in orders)


def _static_arguments(top: _Fields) -> None:
    """Informational (the values fixed in the program), but still of the schema's types."""
    for i in range(len(top.items("static_arguments"))):
        entry = top.element("static_arguments", i)
        entry.integer("position", 0, 1 << 20)
        entry.text("repr")


def _platforms(top: _Fields) -> tuple[str, ...]:
    platforms = top.items("platforms")
    if not platforms or not all(isinstance(p, str) and _IDENTIFIER_RE.fullmatch(p) for p in platforms):
        raise top.error("platforms", f"a non-empty list of platform names such as 'cpu', got {platforms!r:.80}")
    return tuple(platforms)


def _member_name(fields: _Fields, key: str, expected_name: str) -> str:
    name = fields.get(key, str, f"the file name {expected_name!r}")
    if not _FILE_NAME_RE.fullmatch(name):
        raise fields.error(fields.field(key), f"a plain file name inside the artifact ({expected_name!r}); "
                           f"{name[:80]!r} would reach outside it or is not a plain name")
    if name != expected_name:
        raise fields.error(fields.field(key), f"the file name {expected_name!r}, got {name[:80]!r}")
    return name


def _files(files: _Fields) -> dict[str, FileEntry]:
    entries = {}
    for name in files.data:
        if not _FILE_NAME_RE.fullmatch(name):
            raise files.error(f"files[{name[:80]!r}]", "a plain file name inside the artifact; this one would "
                              "reach outside it or is not a plain name")
        entry = files.child(name)
        entries[name] = FileEntry(name, entry.integer("bytes", 0, 1 << 50),
                                  entry.text("sha256", _SHA256_RE, "64 lowercase hex digits"))
    return entries


def _dtype(fields: _Fields, key: str = "dtype") -> np.dtype:
    name = fields.text(key, expected="a dtype name such as 'float32'")
    try:
        dtype = np.dtype(jax.numpy.dtype(name))
    except TypeError:
        raise fields.error(fields.field(key), f"a dtype name such as 'float32', got {name[:40]!r}") from None
    if dtype.name != name or dtype.kind not in "biufcV":
        raise fields.error(fields.field(key), f"the canonical name of an array dtype such as 'float32', got {name[:40]!r}")
    return dtype


def _shape(fields: _Fields, key: str, allow: tuple, expected: str) -> tuple:
    dims = fields.items(key)
    ok = len(dims) <= MAX_RANK and all(
        (isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_DIM) or
        (d is None and type(None) in allow) or (isinstance(d, str) and str in allow and 0 < len(d) <= 200)
        for d in dims)
    if not ok:
        raise fields.error(fields.field(key), f"{expected} (at most {MAX_RANK} dims), got {dims!r:.80}")
    return tuple(dims)


def _tensor(fields: _Fields) -> TensorEntry:
    return TensorEntry(fields.text("name", expected="a weight name"),
                       _shape(fields, "shape", (), "a list of integers >= 0"), _dtype(fields))


def _input_spec(fields: _Fields) -> InputSpec:
    name = fields.text("name", _INPUT_NAME_RE, "an input name (1 to 200 printable characters)")
    shape = _shape(fields, "shape", (type(None),), "a list of integers >= 0 and nulls")
    dims = _shape(fields, "dims", (type(None), str), "a list of integers >= 0, nulls and dim names")
    if len(dims) != len(shape) or any(s != d for s, d in zip(shape, dims) if isinstance(d, int) or d is None) or \
            any(s is not None for s, d in zip(shape, dims) if isinstance(d, str)):
        raise fields.error(fields.field("dims"), f"the dims of shape {list(shape)} (a name or null where the "
                           f"shape has null), got {list(dims)!r:.80}")
    try:
        return InputSpec(dims, _dtype(fields), name)
    except InputSpecError as err:
        raise fields.error(fields.field("dims"), f"valid dims ({err.problem})") from None


def _output(fields: _Fields) -> OutputEntry:
    name = fields.text("name", expected="an output name")
    dims = _shape(fields, "dims", (str,), "a list of integers >= 0 and dimension expressions")
    shape = _shape(fields, "shape", (type(None),), "a list of integers >= 0 and nulls")
    if len(shape) != len(dims) or any(s != d for s, d in zip(shape, dims) if isinstance(d, int)):
        raise fields.error(fields.field("shape"), f"the shape of dims {list(dims)!r:.80}, got {list(shape)!r:.80}")
    return OutputEntry(name, dims, _dtype(fields))


def _program_input(fields: _Fields) -> ProgramInput:
    kind = fields.text("kind", re.compile("^(weight|input)$"), "'weight' or 'input'")
    return ProgramInput(kind, fields.text("name", expected="a weight or input name"))


def _check_consistency(manifest: Manifest, program: _Fields, error: FieldError) -> None:
    _unique([t.name for t in manifest.tensors], "weights.tensors", "weight", error)
    _unique([s.name for s in manifest.inputs], "inputs", "input", error)
    expected = [ProgramInput("weight", t.name) for t in manifest.tensors] + \
               [ProgramInput("input", s.name) for s in manifest.inputs]
    if list(manifest.program_inputs) != expected:
        raise error("program.inputs", "the weights of weights.tensors then the inputs of inputs, in that order "
                    f"({_names(expected)}), got {_names(manifest.program_inputs)}")
    num_weights = program.integer("num_weights", 0, 1 << 31)
    if num_weights != len(manifest.tensors):
        raise error("program.num_weights", f"{len(manifest.tensors)} (the length of weights.tensors), got {num_weights}")
    wanted = {manifest.program_file, manifest.weights_file}
    if set(manifest.files) != wanted:
        raise error("files", f"an entry for exactly {sorted(wanted)}, got {sorted(manifest.files)!r:.120}")


def _unique(names: list[str], field: str, what: str, error: FieldError) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise error(field, f"each {what} name once; {name[:80]!r} appears twice")
        seen.add(name)


def _names(entries) -> str:
    text = ", ".join(f"{e.kind} {e.name!r}" for e in entries)
    return f"[{text[:200]}{'...' if len(text) > 200 else ''}]"
