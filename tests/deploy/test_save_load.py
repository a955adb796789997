"""dy2st.save / dy2st.load: round trips (in a fresh process without the model's code), weights
as program inputs, input validation, and a clear ArtifactError for every corrupted artifact."""

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import ArtifactError, ExportError, InputSpecError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The model lives in a file written at test time and deleted after saving, so the process
# that loads the artifact cannot import it even by accident.
MODEL_SOURCE = textwrap.dedent('''
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    params = {
        "w1": np.abs(rng.normal(size=(4, 8))).astype(np.float32),
        "b1": 0.1 * rng.normal(size=(8,)).astype(np.float32),
        "w2": rng.normal(size=(8, 3)).astype(np.float32),
    }

    def forward(params, x):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        if h.mean() > 0:                 # data-dependent branch
            h = h * 0.5
        else:
            h = h - 3.0
        if jnp.abs(h).sum() > 1e6:       # data-dependent early return
            return jnp.zeros((x.shape[0], 3)), 0
        steps = 0
        while jnp.abs(h).mean() < 2.0:   # data-dependent trip count, batch size symbolic
            h = h * 1.5 + 0.1
            steps += 1
        return h @ params["w2"], steps
''')

PROGRAM, WEIGHTS, MANIFEST = "program.jaxexport", "weights.safetensors", "manifest.json"
X_SPEC = dy2st.InputSpec((None, 4), "float32", name="x")


def _import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(artifact dir, inputs by batch size, eager outputs by batch size); model file deleted."""
    root = tmp_path_factory.mktemp("deploy")
    model_file = root / "deploy_test_model.py"
    model_file.write_text(MODEL_SOURCE)
    model = _import_file(model_file, "deploy_test_model")
    artifact = root / "artifact"
    dy2st.save(model.forward, artifact, [X_SPEC], params=model.params)
    rng = np.random.default_rng(1)
    inputs = {b: (np.abs(rng.normal(size=(b, 4))) * s).astype(np.float32) for b, s in ((1, 1.0), (3, -3.0), (8, 0.02))}
    expected = {b: model.forward(model.params, x) for b, x in inputs.items()}
    branches = {b: bool(jnp.tanh(x @ model.params["w1"] + model.params["b1"]).mean() > 0) for b, x in inputs.items()}
    assert set(branches.values()) == {True, False}, "the inputs must take both branches"
    assert [expected[b][1] for b in (1, 3, 8)] == [3, 0, 6], "while trip counts: 0, a few, many"
    model_file.unlink()
    return artifact, inputs, expected, model


def _copy(saved, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(saved[0], target)
    return target


# -- round trips -----------------------------------------------------------------------------
def test_round_trip_in_fresh_process_at_three_batch_sizes(saved, tmp_path):
    artifact, inputs, expected, _ = saved
    np.savez(tmp_path / "inputs.npz", **{f"b{b}": x for b, x in inputs.items()})
    script = textwrap.dedent(f'''
        import sys, numpy as np, dy2st
        loaded = dy2st.load({str(artifact)!r})
        inputs = np.load({str(tmp_path / "inputs.npz")!r}, allow_pickle=False)
        outputs = {{k: loaded(inputs[k]) for k in inputs.files}}
        np.savez({str(tmp_path / "outputs.npz")!r}, **{{k + "_" + str(i): np.asarray(v[i]) for k, v in outputs.items() for i in (0, 1)}})
        assert "deploy_test_model" not in sys.modules
        print("modules:", sorted(m for m in sys.modules if m.startswith(("flax", "equinox", "deploy_test"))))
    ''')
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "modules: []" in result.stdout
    outputs = np.load(tmp_path / "outputs.npz")
    for b in (1, 3, 8):
        assert outputs[f"b{b}_0"].shape == (b, 3)
        np.testing.assert_allclose(outputs[f"b{b}_0"], expected[b][0], rtol=1e-5, atol=1e-5)
        assert outputs[f"b{b}_1"] == expected[b][1]


def test_weights_are_program_inputs_not_constants(saved):
    artifact, inputs, expected, model = saved
    loaded = dy2st.load(artifact)
    manifest = loaded.manifest
    assert [p["kind"] for p in manifest["program"]["inputs"]] == ["weight"] * 3 + ["input"]
    assert sorted(loaded.weights) == ["b1", "w1", "w2"]
    for name, value in model.params.items():
        np.testing.assert_array_equal(loaded.weights[name], value)
    assert len(loaded.exported.in_avals) == 4
    assert manifest["platforms"] == ["cpu", "cuda"] == list(loaded.exported.platforms)
    assert manifest["inputs"] == [{"name": "x", "shape": [None, 4], "dims": [None, 4], "dtype": "float32"}]
    assert [(o["name"], o["shape"]) for o in manifest["outputs"]] == [("output[0]", [None, 3]), ("output[1]", [])]
    assert "jst.convert_ifelse" in loaded.code and "jst.convert_while" in loaded.code
    assert manifest["jax_version"] == jax.__version__
    # Changed weights in the file (checksums updated) change the result: they are not baked in.
    altered = {k: np.asarray(v) * 0 for k, v in model.params.items()}
    copy = os.path.join(os.path.dirname(artifact), "zero_weights")
    shutil.copytree(artifact, copy)
    from safetensors.numpy import save_file

    save_file(altered, os.path.join(copy, WEIGHTS))
    _rehash(copy, WEIGHTS)
    np.testing.assert_allclose(dy2st.load(copy)(inputs[3])[0], np.zeros((3, 3)))


def test_function_without_parameters_named_dims_and_tuple_outputs(tmp_path):
    def f(x, y, scale):
        if (x * y).sum() > 0:
            z = x * y * scale
        else:
            z = x - y
        return {"z": z, "stats": (z.sum(), z.shape[0] * 1.0)}

    batch = dy2st.InputSpec(("batch", 2), "float32")
    dy2st.save(f, tmp_path, [batch, batch, 2.0])
    loaded = dy2st.load(tmp_path)
    assert loaded.input_names == ["x", "y"] and loaded.weights == {}
    assert loaded.manifest["static_arguments"] == [{"position": 2, "repr": "2.0"}]
    for b, sign in ((1, 1.0), (5, -1.0), (2, 1.0)):
        x, y = np.ones((b, 2), np.float32), sign * np.full((b, 2), 3, np.float32)
        got, want = loaded(x, y=y), f(x, y, 2.0)
        jax.tree_util.tree_map(lambda a, e: np.testing.assert_allclose(a, e), got, want)
    with pytest.raises(InputSpecError, match=r"input 'y'.*'batch'\) is 2, but another input has 'batch' = 3"):
        loaded(np.ones((3, 2), np.float32), np.ones((2, 2), np.float32))


class Plain:
    """A model as a plain object: arrays in attributes, a list and a nested object."""

    def __init__(self):
        self.layers = [np.eye(3, dtype=np.float32), 2 * np.eye(3, dtype=np.float32)]
        self.head = type("Head", (), {})()
        self.head.bias = np.ones(3, np.float32)
        self.name = "plain"

    @dy2st.to_static(input_spec=[dy2st.InputSpec((None, 3), "float32", "x")])
    def __call__(self, x):
        for w in self.layers:
            x = x @ w
        if x.mean() > 0:
            return x + self.head.bias
        return x


XS = np.arange(6, dtype=np.float32).reshape(2, 3) - 2


def test_plain_object_model_uses_its_declared_input_spec(tmp_path):
    model = Plain()
    dy2st.save(model, tmp_path)  # the input_spec comes from to_static on __call__
    loaded = dy2st.load(tmp_path)
    assert sorted(loaded.weights) == ["head.bias", "layers.0", "layers.1"]
    for xs in (XS, -XS, XS[:1]):
        np.testing.assert_allclose(loaded(xs), model(xs), rtol=1e-6)
    assert isinstance(model.layers[0], np.ndarray) and model.head.bias.shape == (3,)  # restored


def test_static_function_with_declared_input_spec(tmp_path):
    f = dy2st.to_static(lambda x: x * 2 if x.sum() > 0 else -x, input_spec=[X_SPEC])
    dy2st.save(f, tmp_path)
    loaded = dy2st.load(tmp_path)
    assert loaded.input_spec == [X_SPEC]
    np.testing.assert_allclose(loaded(-np.ones((2, 4), np.float32)), np.ones((2, 4)))


def test_bound_method_of_a_plain_object(tmp_path):
    class Scaler:
        def __init__(self):
            self.scale = {"a": np.float32(2.0) * np.ones(3, np.float32)}

        def forward(self, x, shift):
            return x * self.scale["a"] + shift

    model = Scaler()
    dy2st.save(model.forward, tmp_path, [dy2st.InputSpec((None, 3), "float32"), 1.0])
    loaded = dy2st.load(tmp_path)
    assert list(loaded.weights) == ["scale.a"] and loaded.input_names == ["x"]
    np.testing.assert_allclose(loaded(XS), model.forward(XS, 1.0))


@pytest.mark.models
def test_equinox_module(tmp_path):
    eqx = pytest.importorskip("equinox")

    class Net(eqx.Module):
        lin: eqx.nn.Linear

        def __call__(self, x):
            y = jax.vmap(self.lin)(x)
            if y.sum() > 0:
                y = jax.nn.relu(y)
            return y

    model = Net(eqx.nn.Linear(3, 3, key=jax.random.PRNGKey(0)))
    dy2st.save(model, tmp_path, [dy2st.InputSpec((None, 3), "float32", "x")])
    loaded = dy2st.load(tmp_path)
    assert sorted(loaded.weights) == ["lin.bias", "lin.weight"]
    for xs in (XS, -XS, XS[:1]):
        np.testing.assert_allclose(loaded(xs), model(xs), rtol=1e-6)


def test_npz_weights_with_bfloat16(tmp_path):
    params = {"w": jnp.arange(6, dtype=jnp.bfloat16).reshape(2, 3), "s": np.float32(2.0)}

    def f(params, x):
        return (x.astype(jnp.bfloat16) @ params["w"]).astype(jnp.float32) * params["s"]

    dy2st.save(f, tmp_path, [dy2st.InputSpec((None, 2), "float32", "x")], params=params)
    assert sorted(os.listdir(tmp_path)) == [MANIFEST, PROGRAM, WEIGHTS]
    dy2st.save(f, tmp_path, [dy2st.InputSpec((None, 2), "float32", "x")], params=params, weights_format="npz")
    assert sorted(os.listdir(tmp_path)) == [MANIFEST, PROGRAM, "weights.npz"]  # saving again replaces
    loaded = dy2st.load(tmp_path)
    assert loaded.weights["w"].dtype == jnp.bfloat16
    np.testing.assert_allclose(loaded(np.ones((4, 2), np.float32)), f(params, np.ones((4, 2), np.float32)))


def test_cuda_only_artifact_lowers_on_cpu_and_refuses_to_load_here(tmp_path):
    dy2st.save(lambda x: x * 2, tmp_path, [X_SPEC], platforms=["cuda"])
    assert json.loads((tmp_path / MANIFEST).read_text())["platforms"] == ["cuda"]
    with pytest.raises(ArtifactError, match=r"program.jaxexport: it was lowered for \['cuda'\], but jax runs on 'cpu'"):
        dy2st.load(tmp_path)


# -- inputs of a loaded artifact -------------------------------------------------------------
@pytest.mark.parametrize("call, words", [
    (lambda m: m(np.ones((2, 5), np.float32)), ["input 'x'", "x:float32[None,4]", "dimension 1 is 5, expected 4"]),
    (lambda m: m(np.ones((2, 4))), ["input 'x'", "dtype is float64, expected float32", "float64[2, 4]"]),
    (lambda m: m(np.ones(4, np.float32)), ["rank is 1, expected 2"]),
    (lambda m: m(np.ones((0, 4), np.float32)), ["dynamic dimension must be at least 1"]),
    (lambda m: m(), ["Input 'x'", "is missing"]),
    (lambda m: m(x=np.ones((1, 4), np.float32), y=1), ["no input named ['y']", "inputs are ['x']"]),
    (lambda m: m(np.ones((1, 4), np.float32), np.ones(1)), ["takes 1 inputs ['x'], but 2 were given"]),
])
def test_loaded_inputs_are_validated(saved, call, words):
    loaded = dy2st.load(saved[0])
    with pytest.raises(InputSpecError) as info:
        call(loaded)
    for word in words:
        assert word in str(info.value)
    assert str(info.value).startswith(f'File "{__file__}"')  # the line that called the artifact


# -- corrupted artifacts ---------------------------------------------------------------------
def _rehash(path, name):
    manifest_path = os.path.join(path, MANIFEST)
    manifest = json.loads(open(manifest_path).read())
    data = open(os.path.join(path, name), "rb").read()
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    open(manifest_path, "w").write(json.dumps(manifest))


def _edit_manifest(path, **changes):
    manifest = json.loads((path / MANIFEST).read_text())
    manifest.update(changes)
    (path / MANIFEST).write_text(json.dumps(manifest))


def _truncate(path, name):
    data = (path / name).read_bytes()
    (path / name).write_bytes(data[: len(data) // 2])


def _flip_byte(path, name):
    data = bytearray((path / name).read_bytes())
    data[-1] ^= 0xFF
    (path / name).write_bytes(bytes(data))


def _garbage_program(path):
    (path / PROGRAM).write_bytes(b"\x00\x01not a jax export" * 40)
    _rehash(path, PROGRAM)


def _pickled_weights(path):
    """A consistent npz artifact whose weight w1 is an object array: reading it needs pickle."""
    manifest = json.loads((path / MANIFEST).read_text())
    (path / WEIGHTS).unlink()
    del manifest["files"][WEIGHTS]
    manifest["weights"].update(file="weights.npz", format="npz")
    (path / MANIFEST).write_text(json.dumps(manifest))
    np.savez(path / "weights.npz", w1=np.array([{"evil": 1}], dtype=object), b1=np.zeros(8, np.float32),
             w2=np.zeros((8, 3), np.float32))
    _rehash(path, "weights.npz")


@pytest.mark.parametrize("corrupt, words", [
    (lambda p: (p / PROGRAM).unlink(), [PROGRAM, "the file is missing"]),
    (lambda p: (p / WEIGHTS).unlink(), [WEIGHTS, "the file is missing"]),
    (lambda p: (p / MANIFEST).unlink(), [MANIFEST, "the file is missing"]),
    (lambda p: _truncate(p, PROGRAM), [PROGRAM, "truncated", "the manifest says"]),
    (lambda p: _truncate(p, WEIGHTS), [WEIGHTS, "truncated"]),
    (lambda p: _flip_byte(p, WEIGHTS), [WEIGHTS, "altered or corrupted", "sha256"]),
    (lambda p: _flip_byte(p, PROGRAM), [PROGRAM, "altered or corrupted", "sha256"]),
    (lambda p: _edit_manifest(p, format_version=99), [MANIFEST, "incompatible format version 99", "reads versions [2]"]),
    (lambda p: _edit_manifest(p, format="something.else"), [MANIFEST, "not a dy2st artifact manifest"]),
    (lambda p: (p / MANIFEST).write_text("{not json"), [MANIFEST, "not valid JSON"]),
    (lambda p: _edit_manifest(p, outputs=None) or _drop_key(p, "inputs"), [MANIFEST, "the key 'inputs' is missing"]),
    (_garbage_program, [PROGRAM, "cannot deserialize", "written by jax"]),
    (_pickled_weights, ["weights.npz", "the weight 'w1' is object[1], the manifest says float32[4, 8]"]),  # never read
])
def test_corrupted_artifacts_raise_artifact_error(saved, tmp_path, corrupt, words):
    path = _copy(saved, tmp_path)
    corrupt(path)
    with pytest.raises(ArtifactError) as info:
        dy2st.load(path)
    message = str(info.value)
    assert str(path) in message and "To fix:" in message
    for word in words:
        assert word in message


def _drop_key(path, key):
    manifest = json.loads((path / MANIFEST).read_text())
    del manifest[key]
    (path / MANIFEST).write_text(json.dumps(manifest))


def test_missing_directory(tmp_path):
    with pytest.raises(ArtifactError, match="no such directory"):
        dy2st.load(tmp_path / "nope")


# -- save errors -----------------------------------------------------------------------------
def test_branching_on_a_dynamic_dimension_is_an_export_error(tmp_path):
    def f(x):
        if x.shape[0] > 3:
            return x
        return x * 2

    with pytest.raises(ExportError, match="needs the value of a dynamic dimension.*'x_0' > '3'"):
        dy2st.save(f, tmp_path, [X_SPEC])
    dy2st.save(f, tmp_path, [dy2st.InputSpec((5, 4), "float32", "x")])  # a fixed size is fine


def test_unnamed_dynamic_dims_that_must_agree_suggest_naming_them(tmp_path):
    with pytest.raises(ExportError, match=r"(?s)incompatible shapes.*InputSpec\(\('batch', 784\)\)"):
        dy2st.save(lambda a, b: a + b, tmp_path, [X_SPEC, dy2st.InputSpec((None, 4), "float32", "y")])


def test_save_needs_input_spec(tmp_path):
    with pytest.raises(ExportError, match="needs input_spec"):
        dy2st.save(lambda x: x, tmp_path)


@pytest.mark.models
def test_flax_nnx_module(tmp_path):
    nnx = pytest.importorskip("flax.nnx")

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.lin = nnx.Linear(3, 3, rngs=rngs)

        def __call__(self, x):
            y = self.lin(x)
            if y.sum() > 0:
                y = jax.nn.relu(y)
            return y

    model = Net(nnx.Rngs(0))
    dy2st.save(model, tmp_path, [dy2st.InputSpec((None, 3), "float32", "x")])
    loaded = dy2st.load(tmp_path)
    assert sorted(loaded.weights) == ["lin.bias.value", "lin.kernel.value"]
    for xs in (XS, -XS, XS[:1]):
        np.testing.assert_allclose(loaded(xs), model(xs), rtol=1e-6)


def test_bound_static_function_and_to_static_model(tmp_path):
    class Model:
        def __init__(self):
            self.w = np.full((2, 2), 0.5, np.float32)

        @dy2st.to_static(input_spec=[dy2st.InputSpec((None, 2), "float32", "x")])
        def forward(self, x):
            if x.sum() > 0:
                return x @ self.w
            return -x

    model = Model()
    for i, target in enumerate((model.forward, dy2st.to_static(model))):
        dy2st.save(target, tmp_path / str(i))
        loaded = dy2st.load(tmp_path / str(i))
        assert list(loaded.weights) == ["w"] and loaded.input_names == ["x"]
        for xs in (np.ones((3, 2), np.float32), -np.ones((1, 2), np.float32)):
            np.testing.assert_allclose(loaded(xs), model.forward(xs))
    assert type(model.w) is np.ndarray  # the model's own arrays are back after tracing
