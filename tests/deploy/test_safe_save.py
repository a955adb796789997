"""dy2st.save: written beside the target and renamed into place, never following a symlink,
refusing to replace what is not an artifact, naming print/assert lines (and saving without
them on request), and clear errors for InputSpec mistakes at save time."""

import inspect
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st import artifact_files
from dy2st.errors import ExportError, InputSpecError

X_SPEC = dy2st.InputSpec((None, 3), "float32", "x")
XS = np.arange(6, dtype=np.float32).reshape(2, 3) - 2


def double(x):
    return x * 2


def triple(x):
    return x * 3


def _line_of(fn, text):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _leftovers(parent):
    return [n for n in os.listdir(parent) if ".dy2st-" in n]


# -- writing into place ----------------------------------------------------------------------
def test_save_replaces_an_earlier_artifact_as_a_whole(tmp_path):
    target = tmp_path / "art"
    dy2st.save(double, target, [X_SPEC], weights_format="npz")
    dy2st.save(triple, target, [X_SPEC])
    assert sorted(os.listdir(target)) == ["manifest.json", "program.jaxexport", "weights.safetensors"]
    np.testing.assert_array_equal(dy2st.load(target)(XS), XS * 3)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("failing_file", [0, 1, 2])
def test_an_error_mid_save_leaves_the_earlier_artifact_intact(tmp_path, monkeypatch, failing_file):
    target = tmp_path / "art"
    dy2st.save(double, target, [X_SPEC])
    before = {n: (target / n).read_bytes() for n in os.listdir(target)}
    real_write = artifact_files._write_new_file
    written = []

    def crash(directory, name, data):
        if len(written) == failing_file:
            raise KeyboardInterrupt  # a crash: not even an Exception
        written.append(name)
        real_write(directory, name, data)

    monkeypatch.setattr(artifact_files, "_write_new_file", crash)
    with pytest.raises(KeyboardInterrupt):
        dy2st.save(triple, target, [X_SPEC])
    assert {n: (target / n).read_bytes() for n in os.listdir(target)} == before
    assert _leftovers(tmp_path) == []  # the temporary directory is removed
    np.testing.assert_array_equal(dy2st.load(target)(XS), XS * 2)


def test_a_failed_rename_puts_the_earlier_artifact_back(tmp_path, monkeypatch):
    target = tmp_path / "art"
    dy2st.save(double, target, [X_SPEC])
    real_rename = os.rename

    def rename(src, dst):
        if ".dy2st-" in os.path.basename(src) and "-old-" not in os.path.basename(src):
            raise OSError("disk full")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="disk full"):
        dy2st.save(triple, target, [X_SPEC])
    monkeypatch.undo()
    np.testing.assert_array_equal(dy2st.load(target)(XS), XS * 2)
    assert _leftovers(tmp_path) == []


def test_a_tracing_error_writes_nothing(tmp_path):
    target = tmp_path / "art"
    dy2st.save(double, target, [X_SPEC])
    with pytest.raises(ExportError):
        dy2st.save(lambda x: x @ jnp.ones((4, 4)), target, [X_SPEC])
    np.testing.assert_array_equal(dy2st.load(target)(XS), XS * 2)


def test_symlink_planted_inside_the_target_is_never_followed(tmp_path):
    """An artifact whose weights file is a link to a file outside: saving again replaces the
    directory; the file outside is untouched."""
    target, victim = tmp_path / "art", tmp_path / "victim.txt"
    victim.write_text("precious")
    dy2st.save(double, target, [X_SPEC], weights_format="npz")
    (target / "weights.npz").unlink()
    os.symlink(victim, target / "weights.npz")
    os.symlink(victim, target / "weights.safetensors")  # the name the next save writes
    dy2st.save(triple, target, [X_SPEC])
    assert victim.read_text() == "precious"
    assert not any(os.path.islink(target / n) for n in os.listdir(target))
    np.testing.assert_array_equal(dy2st.load(target)(XS), XS * 3)


def test_planted_manifest_symlink_makes_the_target_not_an_artifact(tmp_path):
    target, victim = tmp_path / "art", tmp_path / "victim.json"
    victim.write_text(json.dumps({"format": "dy2st.artifact"}))
    target.mkdir()
    os.symlink(victim, target / "manifest.json")
    with pytest.raises(ExportError, match="not a dy2st artifact"):
        dy2st.save(double, target, [X_SPEC])
    assert victim.read_text() == json.dumps({"format": "dy2st.artifact"})


def test_target_that_is_a_symlink_is_refused_and_replaced_only_with_overwrite(tmp_path):
    elsewhere, link = tmp_path / "elsewhere", tmp_path / "art"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    os.symlink(elsewhere, link)
    with pytest.raises(ExportError, match="is a symbolic link; dy2st.save does not follow links"):
        dy2st.save(double, link, [X_SPEC])
    dy2st.save(double, link, [X_SPEC], overwrite=True)
    assert not os.path.islink(link) and (elsewhere / "keep.txt").read_text() == "keep"
    np.testing.assert_array_equal(dy2st.load(link)(XS), XS * 2)


def test_directory_that_is_not_an_artifact_is_replaced_only_with_overwrite(tmp_path):
    target = tmp_path / "project"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(ExportError) as info:
        dy2st.save(double, target, [X_SPEC])
    assert "is a directory that is not a dy2st artifact" in str(info.value) and "overwrite=True" in str(info.value)
    assert (target / "notes.txt").read_text() == "mine"
    dy2st.save(double, target, [X_SPEC], overwrite=True)
    assert not (target / "notes.txt").exists()


def test_a_file_at_the_target_is_refused(tmp_path):
    (tmp_path / "art").write_text("x")
    with pytest.raises(ExportError, match="exists and is not a directory"):
        dy2st.save(double, tmp_path / "art", [X_SPEC])


def test_an_empty_directory_and_missing_parents_are_fine(tmp_path):
    (tmp_path / "empty").mkdir()
    dy2st.save(double, tmp_path / "empty", [X_SPEC])
    dy2st.save(double, tmp_path / "a" / "b" / "art", [X_SPEC])
    assert dy2st.load(tmp_path / "a" / "b" / "art").input_names == ["x"]


# -- print / assert --------------------------------------------------------------------------
def noisy(x):
    print("x is", x)
    if x.sum() > 0:
        assert x.max() < 100, "too big"
    return x * 2


def test_print_and_assert_are_named_when_saving(tmp_path):
    with pytest.raises(ExportError) as info:
        dy2st.save(noisy, tmp_path / "art", [X_SPEC])
    message = str(info.value)
    assert message.startswith(f'File "{__file__}", line {_line_of(noisy, "print(")}')
    assert f"line {_line_of(noisy, 'assert x.max()')}" in message and 'assert x.max() < 100, "too big"' in message
    assert "jax.export cannot store" in message and "debug_effects='drop'" in message
    assert not (tmp_path / "art").exists()


def test_debug_effects_drop_saves_without_them(tmp_path, capfd):
    dy2st.save(noisy, tmp_path / "art", [X_SPEC], debug_effects="drop")
    loaded = dy2st.load(tmp_path / "art")
    for xs in (XS, -XS, XS + 200):  # 200: the dropped assert would have failed
        np.testing.assert_array_equal(loaded(xs), xs * 2)
    assert "x is" not in capfd.readouterr().out
    np.testing.assert_array_equal(dy2st.to_static(noisy)(XS), XS * 2)  # eager/to_static still print
    assert "x is" in capfd.readouterr().out


def test_raw_jax_debug_print_is_named_even_with_drop(tmp_path):
    def f(x):
        jax.debug.print("x={x}", x=x)
        return x

    with pytest.raises(ExportError) as info:
        dy2st.save(f, tmp_path / "art", [X_SPEC], debug_effects="drop")
    assert f"line {_line_of(f, 'jax.debug.print')}" in str(info.value)
    assert "does not remove" in str(info.value)


def test_bad_debug_effects_value(tmp_path):
    with pytest.raises(ExportError, match=r"debug_effects='keep' is not one of \['error', 'drop'\]"):
        dy2st.save(double, tmp_path, [X_SPEC], debug_effects="keep")


# -- InputSpec mistakes at save time ---------------------------------------------------------
def two_inputs(x, y, scale=1.0):
    return (x + y) * scale


@pytest.mark.parametrize("specs, words", [
    ([X_SPEC], ["input_spec has 1 entries", "two_inputs(x, y, scale) needs 2 inputs", "no InputSpec for ['y']"]),
    ([X_SPEC, X_SPEC, 1.0, X_SPEC], ["input_spec has 4 entries", "takes only 3 inputs", "entries [3]"]),
    (X_SPEC, ["input_spec must be a list with one entry per input"]),
    ([dy2st.InputSpec((None, 3), "float32", "a"), dy2st.InputSpec((None, 3), "float32", "a")],
     ["Several InputSpecs are named ['a']"]),
])
def test_wrong_number_of_specs(tmp_path, specs, words):
    with pytest.raises(InputSpecError) as info:
        dy2st.save(two_inputs, tmp_path / "art", specs)
    for word in words:
        assert word in str(info.value)


def test_float64_spec_with_x64_off_names_the_spec(tmp_path):
    assert not jax.config.jax_enable_x64
    with pytest.raises(InputSpecError) as info:
        dy2st.save(two_inputs, tmp_path / "art", [X_SPEC, dy2st.InputSpec((None, 3), "float64", "y")])
    message = str(info.value)
    assert "InputSpec 1 (y:float64[None,3]) has dtype float64" in message and "64-bit mode" in message
    assert "use 'float32'" in message and "jax_enable_x64" in message


def test_float64_weights_with_x64_off_are_stored_as_jax_computes_with_them(tmp_path):
    params = {"w": np.full(3, 0.1, np.float64)}

    def f(params, x):
        return x * params["w"]

    dy2st.save(f, tmp_path / "art", [X_SPEC], params=params)
    loaded = dy2st.load(tmp_path / "art")
    assert loaded.weights["w"].dtype == np.float32
    np.testing.assert_array_equal(loaded(XS), f(params, jnp.asarray(XS)))


def test_bad_dtype_name_names_the_spec():
    with pytest.raises(InputSpecError, match=r"(?s)InputSpec 'x': dtype 'flaot32' is not an array dtype.*'float32'"):
        dy2st.InputSpec((None, 3), "flaot32", "x")


def test_shape_that_cannot_match_names_the_specs_and_the_line(tmp_path):
    def f(x):
        return x @ jnp.ones((4, 2))

    with pytest.raises(ExportError) as info:
        dy2st.save(f, tmp_path / "art", [X_SPEC])
    message = str(info.value)
    assert message.startswith(f'File "{__file__}", line {_line_of(f, "x @ jnp.ones")}')
    assert "with input_spec [x:float32[None,3]] failed while tracing: TypeError" in message
    assert "make the InputSpecs' shapes and dtypes those the function works with" in message


def test_any_input_name_save_writes_loads(tmp_path):
    dy2st.save(double, tmp_path / "art", [dy2st.InputSpec((None, 3), "float32", "my input-1")])
    loaded = dy2st.load(tmp_path / "art")
    assert loaded.input_names == ["my input-1"]
    np.testing.assert_array_equal(loaded(**{"my input-1": XS}), XS * 2)


# -- arguments save refuses before tracing, and what load would refuse --------------------
def _refused_at_this_line(error_type, call, *words):
    with pytest.raises(error_type) as info:
        call()
    message = str(info.value)
    assert message.startswith(f'File "{__file__}", line ') and "To fix:" in message, message
    for word in words:
        assert word in message, message
    return message


@pytest.mark.parametrize("platforms, words", [
    ("cpu", ["platforms must be a list of platform names, got the string 'cpu'", "platforms=['cpu']"]),
    (("gameboy",), ["str 'gameboy', which is not a platform", "['cpu', 'cuda', 'rocm', 'tpu']"]),
    ((1,), ["platforms holds int 1", "['cpu', 'cuda', 'rocm', 'tpu']"]),
    (None, ["platforms must be a non-empty list of platform names, got NoneType None"]),
    ([], ["platforms must be a non-empty list"]),
    (["cpu", "cpu"], ["names a platform twice"]),
])
def test_bad_platforms_are_refused_before_tracing(tmp_path, platforms, words):
    """A string was exported for ['c', 'p', 'u'] and an unknown name for itself (artifacts no
    dy2st loads); (1,) and None failed with messages about outputs and InputSpecs."""
    _refused_at_this_line(ExportError, lambda: dy2st.save(double, tmp_path / "art", [X_SPEC], platforms=platforms),
                          *words)
    assert not os.path.exists(tmp_path / "art")


@pytest.mark.parametrize("path, words", [
    (None, ["dy2st.save: path must be a directory path (a str or os.PathLike), got NoneType None"]),
    (3, ["got int 3"]),
    ("a\0b", ["holds a NUL character"]),
])
def test_a_bad_path_is_refused(path, words):
    _refused_at_this_line(ExportError, lambda: dy2st.save(double, path, [X_SPEC], platforms=["cpu"]), *words)


@pytest.mark.parametrize("make_path, words", [
    (lambda tmp: tmp / "a_file" / "art", ["Cannot write the artifact", "a_file' is a file, not a directory"]),
    (lambda tmp: tmp / "a_file" / "sub" / "art", ["Cannot write the artifact", "Not a directory"]),
    (lambda tmp: tmp / ("a" * 300), ["Cannot write the artifact", "File name too long"]),
])
def test_a_path_that_cannot_be_written_is_an_export_error(tmp_path, make_path, words):
    (tmp_path / "a_file").write_text("")
    _refused_at_this_line(ExportError, lambda: dy2st.save(double, make_path(tmp_path), [X_SPEC], platforms=["cpu"]),
                          *words, "a directory you can write to")
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("name, words", [
    ("a\nb", ["InputSpec 0 ('a\\nb') cannot be saved", "field 'inputs[0].name'", "1 to 200 printable"]),
    ("n" * 201, ["InputSpec 0 ('nnnn", "field 'inputs[0].name'", "1 to 200 printable"]),
])
def test_save_refuses_an_input_name_load_refuses(tmp_path, name, words):
    """Saved, then refused by load: save reads its manifest back through load's schema."""
    _refused_at_this_line(InputSpecError, lambda: dy2st.save(double, tmp_path / "art",
                                                             [dy2st.InputSpec((None, 3), "float32", name)],
                                                             platforms=["cpu"]), *words)
    assert not os.path.exists(tmp_path / "art")


def test_save_refuses_weight_names_too_long_for_load(tmp_path):
    name = "k" * 100_000

    def f(params, x):
        return x + params[name]

    _refused_at_this_line(ExportError, lambda: dy2st.save(f, tmp_path / "art", [X_SPEC], params={name: np.ones(3, np.float32)},
                                                          platforms=["cpu"]),
                          "weights.safetensors would be", "more than the", "has 100000 characters", "shorter names")
    assert not os.path.exists(tmp_path / "art")


def keyed_noise(key, x):
    return x + jax.random.normal(key, x.shape)


def keyed_noise_params(params, x):
    return x + jax.random.normal(params["k"], x.shape)


@pytest.mark.parametrize("save, words", [
    (lambda path: dy2st.save(keyed_noise, path, [jax.random.key(0), X_SPEC], platforms=["cpu"]),
     ["input_spec entry 0 ('key')", "a PRNG key array (key<fry>)"]),
    (lambda path: dy2st.save(keyed_noise_params, path, [X_SPEC], params={"k": jax.random.key(0)}, platforms=["cpu"]),
     ["the weight 'k'", "a PRNG key array (key<fry>)"]),
])
def test_a_prng_key_array_is_refused_saying_how_to_store_it(tmp_path, save, words):
    """numpy and jax raised raw TypeErrors ('Cannot interpret key<fry> as a data type')."""
    _refused_at_this_line(ExportError, lambda: save(tmp_path / "art"), *words, "jax.random.key_data(key)",
                          "jax.random.wrap_key_data(data)")


def test_a_key_stored_as_its_data_round_trips(tmp_path):
    """What the refusal advises works: the key's uint32 data saved, the key rebuilt inside."""
    def noisy_data(data, x):
        return keyed_noise(jax.random.wrap_key_data(data), x)

    data = jax.random.key_data(jax.random.key(0))
    dy2st.save(noisy_data, tmp_path / "art", [dy2st.InputSpec(data.shape, "uint32", "key"), X_SPEC], platforms=["cpu"])
    np.testing.assert_allclose(dy2st.load(tmp_path / "art")(data, XS), keyed_noise(jax.random.key(0), jnp.asarray(XS)), rtol=1e-6)
