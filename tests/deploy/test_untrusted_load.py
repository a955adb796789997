"""dy2st.load treats an artifact as untrusted data: paths stay inside it, only regular files are
read (size by stat first), the manifest is validated field by field, and the weights and inputs
it describes must be the exported program's own. Hostile cases: symlinks, `..`, absolute paths,
FIFOs, reordered weights and inputs, a program that disagrees with its manifest."""

import hashlib
import json
import os
import shutil

import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import ArtifactError, Dy2StaticError

MANIFEST, PROGRAM, WEIGHTS = "manifest.json", "program.jaxexport", "weights.safetensors"


def forward(params, x, y):
    h = x @ params["a"] + params["b"]
    if h.sum() > 0:
        h = h * params["c"]
    return h + y


PARAMS = {"a": np.arange(6, dtype=np.float32).reshape(2, 3) / 7, "b": np.full(3, 0.5, np.float32),
          "c": np.full(3, 2.0, np.float32)}
SPECS = [dy2st.InputSpec(("n", 2), "float32", "x"), dy2st.InputSpec(("n", 3), "float32", "y")]
X, Y = np.ones((2, 2), np.float32), np.full((2, 3), 0.25, np.float32)


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    path = tmp_path_factory.mktemp("untrusted") / "artifact"
    dy2st.save(forward, path, SPECS, params=PARAMS, platforms=["cpu"])
    return path


@pytest.fixture
def art(original, tmp_path):
    """A fresh copy of the artifact, and an `outside` directory with copies of its files."""
    shutil.copytree(original, tmp_path / "art")
    shutil.copytree(original, tmp_path / "outside")
    return tmp_path / "art"


def _manifest(path):
    return json.loads((path / MANIFEST).read_text())


def _write_manifest(path, manifest):
    (path / MANIFEST).write_text(json.dumps(manifest))


def _rehash(path, name, manifest=None):
    manifest = manifest or _manifest(path)
    data = (path / name).read_bytes()
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    _write_manifest(path, manifest)


def _refused(path, *words):
    with pytest.raises(ArtifactError) as info:
        dy2st.load(path)
    message = str(info.value)
    for word in words:
        assert word in message, message
    return message


def test_the_original_loads_and_matches_eager(art):
    np.testing.assert_allclose(dy2st.load(art)(X, Y), forward(PARAMS, X, Y), rtol=1e-6)


# -- paths and file kinds --------------------------------------------------------------------
@pytest.mark.parametrize("name", [PROGRAM, WEIGHTS, MANIFEST])
def test_symlink_to_an_identical_copy_outside_is_refused(art, name):
    """The link's target has the right bytes (every checksum passes): refused for being a link."""
    (art / name).unlink()
    os.symlink(art.parent / "outside" / name, art / name)
    _refused(art, name, "a symbolic link")


def test_symlink_to_etc_passwd_is_refused_without_reading_it(art):
    (art / WEIGHTS).unlink()
    os.symlink("/etc/passwd", art / WEIGHTS)
    message = _refused(art, WEIGHTS, "a symbolic link")
    assert "root:" not in message and str(os.path.getsize("/etc/passwd")) not in message  # nothing leaks


@pytest.mark.parametrize("key, name", [
    ("weights", "../outside/weights.safetensors"),
    ("program", "../outside/program.jaxexport"),
    ("weights", "/etc/passwd"),
    ("program", "sub/../program.jaxexport"),
    ("program", "./program.jaxexport"),
])
def test_manifest_naming_a_path_outside_is_refused(art, key, name):
    manifest = _manifest(art)
    old = manifest[key]["file"]
    manifest[key]["file"] = name
    manifest["files"][name] = manifest["files"].pop(old)
    _write_manifest(art, manifest)
    message = _refused(art, MANIFEST, f"field '{key}.file'", "a plain file name inside the artifact")
    assert "root:" not in message


def test_files_entry_with_a_path_is_refused(art):
    manifest = _manifest(art)
    manifest["files"]["../escape"] = manifest["files"][PROGRAM]
    _write_manifest(art, manifest)
    _refused(art, "files['../escape']", "plain file name")


@pytest.mark.parametrize("make, words", [
    (os.mkdir, ["not a regular file (a directory)"]),
    (os.mkfifo, ["not a regular file (a FIFO)"]),  # opening a FIFO to read would block forever
])
def test_special_files_are_refused(art, make, words):
    (art / PROGRAM).unlink()
    make(art / PROGRAM)
    _refused(art, PROGRAM, *words)


def test_size_is_checked_by_stat_before_reading(art, monkeypatch):
    """A huge sparse file is refused without reading it: its size differs from the manifest's."""
    os.truncate(art / WEIGHTS, 1 << 40)
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    _refused(art, WEIGHTS, "1099511627776 bytes, the manifest says")
    assert sum(reads) < 1 << 20  # only the manifest was read


def test_a_manifest_claiming_a_huge_file_is_refused_before_reading(art):
    os.truncate(art / WEIGHTS, 1 << 40)
    manifest = _manifest(art)
    manifest["files"][WEIGHTS]["bytes"] = 1 << 40
    _write_manifest(art, manifest)
    _refused(art, WEIGHTS, "more than the", "it is not read")


def test_loading_writes_nothing(art):
    before = {p: p.stat().st_mtime_ns for p in art.parent.rglob("*")}
    dy2st.load(art)(X, Y)
    assert {p: p.stat().st_mtime_ns for p in art.parent.rglob("*")} == before


# -- the manifest's schema -------------------------------------------------------------------
def _set(manifest, path, value):
    target = manifest
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value


_DELETE = object()


@pytest.mark.parametrize("path, value, words", [
    (("format_version",), "1", ["field 'format_version'", "got a string '1'"]),
    (("format_version",), True, ["field 'format_version'", "got a boolean"]),
    (("platforms",), "cpu", ["field 'platforms'", "expected a list, got a string"]),
    (("platforms",), [], ["field 'platforms'", "non-empty list"]),
    (("inputs",), {"x": 1}, ["field 'inputs'", "expected a list, got a JSON object"]),
    (("inputs", 0, "dtype"), "float99", ["field 'inputs[0].dtype'", "a dtype name"]),
    (("inputs", 0, "shape"), [None, -2], ["field 'inputs[0].shape'", "integers >= 0"]),
    (("inputs", 1, "name"), "x", ["field 'inputs'", "'x' appears twice"]),
    (("inputs", 0, "name"), "", ["field 'inputs[0].name'", "1 to 200 printable characters"]),
    (("inputs", 0, "name"), "x\n", ["field 'inputs[0].name'", "1 to 200 printable characters"]),
    (("weights", "tensors", 1, "shape"), None, ["field 'weights.tensors[1].shape'", "got null"]),
    (("weights", "tensors", 0, "dtype"), 32, ["field 'weights.tensors[0].dtype'", "got an integer"]),
    (("weights", "tensors", 0), _DELETE, ["field 'program.inputs'"]),
    (("weights", "format"), "pickle", ["field 'weights.format'", "'safetensors' or 'npz'"]),
    (("files", PROGRAM, "sha256"), "abc", ["field 'files.program.jaxexport.sha256'", "64 lowercase hex"]),
    (("files", PROGRAM, "bytes"), -1, ["field 'files.program.jaxexport.bytes'", "an integer in [0,"]),
    (("files", PROGRAM), _DELETE, ["field 'files'", "exactly"]),
    (("program",), _DELETE, ["field 'program'", "the key 'program' is missing"]),
    (("program", "num_weights"), 2, ["field 'program.num_weights'", "3 (the length of weights.tensors)"]),
    (("outputs", 0, "dims"), "n", ["field 'outputs[0].dims'", "a list"]),
    (("source",), None, ["field 'source'", "expected a string, got null"]),
    (("static_arguments",), [{"position": "0"}], ["field 'static_arguments[0].position'"]),
])
def test_a_bad_manifest_field_is_named(art, path, value, words):
    manifest = _manifest(art)
    _set(manifest, path, value)
    _write_manifest(art, manifest)
    message = _refused(art, MANIFEST, *words)
    assert message.startswith('File "') and "dy2st.load(" in message.splitlines()[1]  # the user's load call
    assert f"\nArtifact {str(art)!r}: manifest.json: field" in message and "To fix:" in message


def test_manifest_that_is_not_an_object(art):
    (art / MANIFEST).write_text("[1, 2]")
    _refused(art, "field '(top level)'", "a JSON object, got a list")


def test_deeply_nested_manifest_is_refused(art):
    (art / MANIFEST).write_text("[" * 100000 + "]" * 100000)
    _refused(art, MANIFEST)


# -- the manifest against the program --------------------------------------------------------
def _swap(entries, i, j):
    entries[i], entries[j] = entries[j], entries[i]


def test_weight_order_swapped_in_the_manifest_is_refused(art):
    """b and c have the same shape: without the program's own names a swap would run."""
    manifest = _manifest(art)
    _swap(manifest["weights"]["tensors"], 1, 2)
    _write_manifest(art, manifest)
    _refused(art, "field 'program.inputs'", "weight 'a', weight 'c', weight 'b'")


def test_weight_order_swapped_consistently_still_binds_by_name(art):
    manifest = _manifest(art)
    _swap(manifest["weights"]["tensors"], 1, 2)
    _swap(manifest["program"]["inputs"], 1, 2)
    _write_manifest(art, manifest)
    np.testing.assert_allclose(dy2st.load(art)(X, Y), forward(PARAMS, X, Y), rtol=1e-6)


def test_weight_renamed_consistently_is_refused_by_the_program(art):
    """Manifest and weights file agree on a new name; the program's signature does not."""
    from safetensors.numpy import load_file, save_file

    arrays = load_file(art / WEIGHTS)
    arrays["z"] = arrays.pop("c")
    save_file(arrays, art / WEIGHTS)
    manifest = _manifest(art)
    manifest["weights"]["tensors"][2]["name"] = "z"
    manifest["program"]["inputs"][2]["name"] = "z"
    _rehash(art, WEIGHTS, manifest)
    _refused(art, PROGRAM, "the program disagrees with manifest.json", "its weights are named ['a', 'b', 'c']",
             "['a', 'b', 'z']")


def test_weight_reshaped_in_file_and_manifest_is_refused_by_the_program(art):
    from safetensors.numpy import load_file, save_file

    arrays = load_file(art / WEIGHTS)
    arrays["a"] = arrays["a"].T.copy()
    save_file(arrays, art / WEIGHTS)
    manifest = _manifest(art)
    manifest["weights"]["tensors"][0]["shape"] = [3, 2]
    _rehash(art, WEIGHTS, manifest)
    _refused(art, PROGRAM, "its weight 'a' is float32[2, 3], but weights.tensors[0] says float32[3, 2]")


def test_weight_file_disagreeing_with_manifest_is_refused(art):
    from safetensors.numpy import load_file, save_file

    arrays = load_file(art / WEIGHTS)
    arrays["b"] = arrays["b"].astype(np.float16)
    save_file(arrays, art / WEIGHTS)
    _rehash(art, WEIGHTS)
    _refused(art, WEIGHTS, "the weight 'b' is float16[3], the manifest says float32[3]")


def test_extra_weight_in_the_file_is_refused(art):
    from safetensors.numpy import load_file, save_file

    arrays = load_file(art / WEIGHTS)
    arrays["extra"] = np.zeros(2, np.float32)
    save_file(arrays, art / WEIGHTS)
    _rehash(art, WEIGHTS)
    _refused(art, WEIGHTS, "not listed ['extra']")


def test_input_list_disagreeing_with_the_program_is_refused(art):
    """Inputs x and y swapped consistently in the manifest: the program's signature has x first."""
    manifest = _manifest(art)
    _swap(manifest["inputs"], 0, 1)
    _swap(manifest["program"]["inputs"], 3, 4)
    _write_manifest(art, manifest)
    _refused(art, PROGRAM, "its inputs are ['x', 'y'] in this order", "the manifest's inputs are ['y', 'x']")


@pytest.mark.parametrize("change, words", [
    (lambda s: s.update(dtype="int32"), ["inputs[0] (x:int32[n,2])", "is float32[n, 2]"]),
    (lambda s: s.update(shape=[None, 5], dims=["n", 5]), ["dimension 1 of inputs[0]", "is 2 in the program"]),
    (lambda s: s.update(shape=[4, 2], dims=[4, 2]), ["dimension 0 of inputs[0]", "is n in the program"]),
    (lambda s: s.update(dims=[None, 2]), ["separate sizes share one size"]),
])
def test_input_spec_disagreeing_with_the_program_is_refused(art, change, words):
    manifest = _manifest(art)
    change(manifest["inputs"][0])
    _write_manifest(art, manifest)
    _refused(art, PROGRAM, "the program disagrees", *words)


def test_outputs_disagreeing_with_the_program_are_refused(art):
    manifest = _manifest(art)
    manifest["outputs"][0]["dtype"] = "float16"
    _write_manifest(art, manifest)
    _refused(art, PROGRAM, "output 'output' is float32[n, 3], outputs[0] says float16[")


def test_platforms_disagreeing_with_the_program_are_refused(art):
    manifest = _manifest(art)
    manifest["platforms"] = ["cpu", "cuda"]
    _write_manifest(art, manifest)
    _refused(art, PROGRAM, "lowered for ['cpu']", "platforms are ['cpu', 'cuda']")


def test_program_bytes_altered_with_checksum_updated_fail_at_load(art, tmp_path):
    """A hostile program (bytes altered, checksum updated) is read safely: refused by load, or
    (an alteration jax cannot see, such as in debug locations) runs as before; never a raw
    error at the first call."""
    original = (art / PROGRAM).read_bytes()
    rng = np.random.default_rng(0)
    refused = 0
    for case in range(8):  # 12 in earlier runs: each case compiles; the artifact fuzzer does many more
        data = bytearray(original)
        for position in rng.integers(0, len(data), size=4):
            data[position] ^= int(rng.integers(1, 256))
        (art / PROGRAM).write_bytes(bytes(data))
        _rehash(art, PROGRAM)
        try:
            loaded = dy2st.load(art)
        except Dy2StaticError:
            refused += 1
            continue
        np.testing.assert_array_equal(loaded(X, Y), dy2st.load(art)(X, Y))  # runs, deterministically
    assert refused >= 2


def test_a_module_without_main_is_an_artifact_error(art):
    """An empty StableHLO module (checksum updated): jax's lowering raised a raw KeyError
    ("Symbol 'main' not in the symbol table") out of load."""
    import dataclasses

    import jax

    exported = jax.export.deserialize(bytearray((art / PROGRAM).read_bytes()))
    (art / PROGRAM).write_bytes(bytes(dataclasses.replace(exported, mlir_module_serialized=b"").serialize()))
    _rehash(art, PROGRAM)
    _refused(art, PROGRAM, "cannot be read or verified", "KeyError", "Symbol 'main' not in the symbol table")


def test_a_symbol_missing_at_a_call_is_an_artifact_error(art):
    loaded = dy2st.load(art)

    def broken(*args):
        raise KeyError("Symbol 'main' not in the symbol table.")

    loaded._run = broken
    with pytest.raises(ArtifactError, match=r"jax cannot compile it for inputs .*\(KeyError: "):
        loaded(X, Y)


@pytest.mark.parametrize("path, words", [
    (None, ["dy2st.load: path must be a directory path (a str or os.PathLike), got NoneType None"]),
    (3, ["got int 3"]),
    (["art"], ["got list ['art']"]),
    ("a\0b", ["holds a NUL character"]),
    ("a" * 5000, ["cannot be opened (File name too long)"]),
])
def test_a_bad_path_is_refused(path, words):
    message = _refused(path, *words)
    assert message.startswith(f'File "{__file__}", line ') and "To fix:" in message


def test_a_symlink_loop_is_refused(tmp_path):
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    _refused(tmp_path / "loop", "cannot be opened (Too many levels of symbolic links)")


# -- symbolic dimensions: read before jax's parser sees them ----------------------------------
def squares(x):
    return jnp.outer(x, x).reshape(-1)  # a dim n^2: a power jax itself writes


@pytest.fixture(scope="module")
def dims_original(tmp_path_factory):
    path = tmp_path_factory.mktemp("dims") / "artifact"
    dy2st.save(squares, path, [dy2st.InputSpec((None,), "float32", "abcdefghij")], platforms=["cpu"])
    return path


def test_a_power_jax_writes_loads(dims_original):
    loaded = dy2st.load(dims_original)
    assert _manifest(dims_original)["outputs"][0]["dims"] == ["abcdefghij_0^2"]
    np.testing.assert_array_equal(loaded(np.arange(3, dtype=np.float32)), squares(np.arange(3, dtype=np.float32)))


@pytest.mark.parametrize("dim, words", [
    (b"x_0^20000000", ["raises a symbol to a power other than an integer up to 64", "'x_0^20000000'"]),
    (b"x_0^1_000000", ["'x_0^1_000000'"]),  # Python's int() reads 1_000000
    (b"x_0^65      ", ["'x_0^65      '"]),
])
def test_a_huge_symbolic_power_is_refused_before_jax_parses_it(dims_original, tmp_path, monkeypatch, dim, words):
    """`x_0^200000000` in a program's shape (checksum updated) made jax's symbolic-shape parser,
    run by jax.export.deserialize in the loading process before the child-process guard, build
    a list of 2*10**8 factors: 25 minutes and 1.6 GB. It must be refused without deserializing."""
    import jax

    art = tmp_path / "art"
    shutil.copytree(dims_original, art)
    data = (art / PROGRAM).read_bytes()
    assert b"abcdefghij_0" in data and len(dim) == len(b"abcdefghij_0")
    (art / PROGRAM).write_bytes(data.replace(b"abcdefghij_0", dim))  # same length: the flatbuffer stays valid
    _rehash(art, PROGRAM)

    def deserialize(_):
        raise AssertionError("the hostile program reached jax.export.deserialize")

    monkeypatch.setattr(jax.export, "deserialize", deserialize)  # would hang there: fails fast instead
    _refused(art, PROGRAM, "it was altered or made to attack the reader", *words)


# -- weights.npz: each member's .npy header against the manifest, before numpy reads it ------
@pytest.fixture(scope="module")
def npz_original(tmp_path_factory):
    path = tmp_path_factory.mktemp("npz") / "artifact"
    dy2st.save(forward, path, SPECS, params=PARAMS, platforms=["cpu"], weights_format="npz")
    return path


def _npz_with(art, members):
    """weights.npz rewritten with `members` ({name: .npy bytes}) and its checksum updated."""
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    (art / "weights.npz").write_bytes(buffer.getvalue())
    _rehash(art, "weights.npz")


def _npy(array):
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npy_lying(header: str, data: bytes) -> bytes:
    """A version 1.0 .npy whose header says what it likes."""
    import struct

    text = header.encode("latin1")
    text += b" " * (64 - (10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def test_an_npz_member_whose_header_claims_a_huge_shape_is_refused_before_allocating(npz_original, tmp_path):
    """A 48-byte member whose header claims 2**28 floats: numpy allocated the claimed 1 GiB
    (4 GiB for 2**30) before finding the data short."""
    import tracemalloc

    art = tmp_path / "art"
    shutil.copytree(npz_original, art)
    members = {f"{k}.npy": _npy(v) for k, v in PARAMS.items()}
    members["a.npy"] = _npy_lying("{'descr': '<f4', 'fortran_order': False, 'shape': (268435456,), }", b"\0" * 48)
    _npz_with(art, members)
    tracemalloc.start()
    try:
        _refused(art, "weights.npz", "the weight 'a' is float32[268435456], the manifest says float32[2, 3]")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20


@pytest.mark.parametrize("change, words", [
    (lambda m: m.update({"b.npy": _npy(np.zeros(3, np.int32))}), ["the weight 'b' is int32[3]", "says float32[3]"]),
    (lambda m: m.update({"extra.npy": _npy(np.zeros(2, np.float32))}), ["not listed ['extra']"]),
])
def test_an_npz_member_that_is_not_the_manifests_is_refused(npz_original, tmp_path, change, words):
    art = tmp_path / "art"
    shutil.copytree(npz_original, art)
    members = {f"{k}.npy": _npy(v) for k, v in PARAMS.items()}
    change(members)
    _npz_with(art, members)
    _refused(art, "weights.npz", *words)


def test_an_npz_artifact_loads(npz_original):
    np.testing.assert_allclose(dy2st.load(npz_original)(X, Y), forward(PARAMS, X, Y), rtol=1e-6)


# -- the command uses the same checks --------------------------------------------------------
@pytest.mark.parametrize("command", ["inspect", "run"])
def test_inspect_and_run_refuse_a_hostile_artifact(art, command, capsys):
    from dy2st import cli

    (art / WEIGHTS).unlink()
    os.symlink(art.parent / "outside" / WEIGHTS, art / WEIGHTS)
    code = cli.main([command, str(art)])
    err = capsys.readouterr().err
    assert code == 1 and f"dy2st {command}: error: Artifact" in err and "a symbolic link" in err
    assert "Traceback" not in err


def test_a_program_that_fails_to_compile_for_a_shape_is_an_artifact_error(art):
    """Some altered modules lower symbolically but fail once specialized to a call's shapes
    (found by the fuzzer: MLIR's 'invalid tensor dimension size'): reported at the call."""
    from jax.extend.mlir import ir

    loaded = dy2st.load(art)

    def broken(*args):
        raise ir.MLIRError("Unable to parse module assembly", [])

    loaded._run = broken
    with pytest.raises(ArtifactError, match=r"program.jaxexport: jax cannot compile it for inputs "
                                            r"\['float32\[2, 2\]', 'float32\[2, 3\]'\] \(MLIRError"):
        loaded(X, Y)


def test_a_version_1_artifact_is_refused_with_the_versions_read(art):
    manifest = _manifest(art)
    manifest["format_version"] = 1
    _write_manifest(art, manifest)
    _refused(art, "incompatible format version 1", "it reads versions [2]")


def test_a_program_that_crashes_the_reader_is_refused_not_fatal(art, monkeypatch):
    """A module that kills MLIR's native reader (a segmentation fault) is found in a child
    process: load refuses it and this process lives on."""
    from dy2st import export

    crash = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    monkeypatch.setattr(export, "_CHILD_CHECK", crash)
    monkeypatch.setattr(export, "_read_safely", set())
    message = _refused(art, PROGRAM, "crashed the reader (signal 11)")
    assert "separate process" in message


# -- output_key_orders: a dict's key order among the outputs ---------------------------------------
def ordered(x):
    y = x * 2
    if x.sum() > 0:
        y = y + 1
    return {"logits": y, "aux": [x, {"z": x, "b": y}]}


@pytest.fixture(scope="module")
def ordered_original(tmp_path_factory):
    path = tmp_path_factory.mktemp("ordered") / "artifact"
    dy2st.save(ordered, path, [dy2st.InputSpec((3,), "float32", "x")], platforms=["cpu"])
    return path


@pytest.fixture
def ordered_art(ordered_original, tmp_path):
    shutil.copytree(ordered_original, tmp_path / "art")
    return tmp_path / "art"


def test_outputs_keep_their_dicts_key_order(ordered_art):
    """JAX's output tree sorts dict keys; the manifest keeps eager's order and load puts it back."""
    assert _manifest(ordered_art)["output_key_orders"] == [["logits", "aux"], ["z", "b"]]
    out = dy2st.load(ordered_art)(np.ones(3, np.float32))
    eager = ordered(np.ones(3, np.float32))
    assert list(out) == list(eager) == ["logits", "aux"] and list(out["aux"][1]) == ["z", "b"]
    np.testing.assert_array_equal(out["aux"][1]["b"], eager["aux"][1]["b"])


def test_outputs_in_sorted_order_need_no_field(art):
    assert "output_key_orders" not in _manifest(art)


def test_an_artifact_without_the_field_gives_sorted_dicts(ordered_art):
    manifest = _manifest(ordered_art)
    del manifest["output_key_orders"]
    _write_manifest(ordered_art, manifest)
    out = dy2st.load(ordered_art)(np.ones(3, np.float32))
    assert list(out) == ["aux", "logits"]  # what the program's own tree gives (artifacts before the field)


@pytest.mark.parametrize("value, words", [
    ("logits", ["output_key_orders", "a list of lists of dict keys"]),
    ([["logits", "aux"], "z"], ["output_key_orders[1]", "got a string"]),
    ([["logits", "aux"], ["z", True]], ["output_key_orders[1]", "a key that is a boolean"]),
    ([["logits", "aux"], ["z", 1]], ["output_key_orders[1]", "a key that is an integer"]),
    ([["logits", "aux"], ["z", 1.5]], ["output_key_orders[1]", "a key that is a number"]),
    ([["logits", "aux"], ["z", {"b": 1}]], ["output_key_orders[1]", "a key that is a JSON object"]),
    ([["logits", "logits"], ["z", "b"]], ["output_key_orders[0]", "a key twice"]),
])
def test_a_malformed_key_order_is_named(ordered_art, value, words):
    manifest = _manifest(ordered_art)
    manifest["output_key_orders"] = value
    _write_manifest(ordered_art, manifest)
    _refused(ordered_art, "manifest.json: field", *words)


@pytest.mark.parametrize("value, words", [
    ([["logits", "aux"]], ["its outputs hold 2 dicts, output_key_orders orders 1"]),
    ([["logits", "aux"], ["z", "b"], ["q"]], ["its outputs hold 2 dicts, output_key_orders orders 3"]),
    ([["logits", "aux"], ["z", "c"]], ["output_key_orders[1] lists the keys ['z', 'c']"]),
    ([["logits"], ["z", "b"]], ["output_key_orders[0] lists the keys ['logits']"]),
    ([["logits", "aux", "extra"], ["z", "b"]], ["output_key_orders[0]"]),
])
def test_a_key_order_that_does_not_fit_the_program_is_refused(ordered_art, value, words):
    manifest = _manifest(ordered_art)
    manifest["output_key_orders"] = value
    _write_manifest(ordered_art, manifest)
    _refused(ordered_art, "the program disagrees with manifest.json", *words)


def test_a_dict_with_keys_that_are_not_strings_is_refused_at_save(tmp_path):
    """jax.export stores string keys only: an ExportError saying so, not jax's TypeError."""
    def int_keys(x):
        return {1: x, 0: x * 2}

    with pytest.raises(dy2st.errors.ExportError, match="cannot be stored.*string keys"):
        dy2st.save(int_keys, tmp_path / "art", [dy2st.InputSpec((3,), "float32", "x")], platforms=["cpu"])
