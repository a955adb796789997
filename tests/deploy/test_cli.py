"""The `dy2st` command through its entry points: `python -m dy2st` and `dy2st.cli:main`
(the console script declared in pyproject.toml)."""

import importlib
import json
import os
import subprocess
import sys
import textwrap
import tomllib

import numpy as np
import pytest

from dy2st import cli, transformers

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODULE_SOURCE = textwrap.dedent('''
    import numpy as np

    params = {"w": np.full((4, 3), 0.5, np.float32)}

    def forward(params, x):
        h = x @ params["w"]
        if h.sum() > 0:
            h = h * 2
        else:
            h = -h
        return h

    def double(x):
        return x * 2 if x.sum() > 0 else x
''')


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    (root / "cli_model.py").write_text(MODULE_SOURCE)
    np.save(root / "x.npy", np.ones((2, 4), np.float32))
    np.save(root / "x_bad.npy", np.ones((2, 5), np.float32))
    return root


def _python_m(args, cwd):
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
    return subprocess.run([sys.executable, "-m", "dy2st", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _main(args, cwd, capsys, monkeypatch):
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command may add the module's directory
    code = cli.main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_console_script_is_cli_main():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        target = tomllib.load(f)["project"]["scripts"]["dy2st"]
    module, _, attr = target.partition(":")
    assert getattr(importlib.import_module(module), attr) is cli.main


@pytest.mark.parametrize("command", [[], ["code"], ["save"], ["inspect"], ["run"]])
def test_help_on_each_command(command, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([*command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: dy2st")
    expected = {(): "COMMAND", ("code",): "--level N", ("save",): "--input-spec SPEC",
                ("inspect",): "--source", ("run",): "NAME=FILE.npy"}[tuple(command)]
    assert expected in out


def test_full_workflow_through_python_m(workdir):
    saved = _python_m(["save", "cli_model:forward", "--params", "params", "--input-spec", "x:float32[None,4]",
                       "-o", "art"], workdir)
    assert saved.returncode == 0, saved.stderr
    assert "saved cli_model:forward to art" in saved.stdout
    run = _python_m(["run", "art", "--input", "x=x.npy"], workdir)
    assert run.returncode == 0, run.stderr
    assert "output: float32[2, 3]" in run.stdout and "[[4. 4. 4.]" in run.stdout


def test_code_prints_translated_source_and_levels(workdir, capsys, monkeypatch):
    code, out, _ = _main(["code", "cli_model.py:forward"], workdir, capsys, monkeypatch)
    assert code == 0 and "jst.convert_ifelse(" in out and "if_body, else_body" in out
    code, out, _ = _main(["code", "cli_model.py:double", "--level", "0"], workdir, capsys, monkeypatch)
    assert code == 0 and "return x * 2 if x.sum() > 0 else x" in out and "jst" not in out
    ternary = [s.name for s in transformers.PIPELINE].index("conditional_expressions") + 1
    code, out, _ = _main(["code", "cli_model.py:double", "--level", str(ternary)], workdir, capsys, monkeypatch)
    assert code == 0 and "jst.convert_ifexp" in out
    code, _, err = _main(["code", "cli_model.py:double", "--level", "99"], workdir, capsys, monkeypatch)
    assert code == 2 and "--level must be between 0 and" in err and err.startswith("usage: dy2st code")
    code, _, err = _main(["code", "cli_model.py:nope"], workdir, capsys, monkeypatch)
    assert code == 1 and "has no attribute 'nope'" in err


def test_save_inspect_run_through_main(workdir, tmp_path, capsys, monkeypatch):
    art = str(tmp_path / "art")
    code, out, err = _main(["save", "cli_model.py:forward", "--params", "cli_model:params",
                            "--input-spec", "x:float32[None,4]", "-o", art, "--weights-format", "npz"],
                           workdir, capsys, monkeypatch)
    assert code == 0, err
    code, out, _ = _main(["inspect", art], workdir, capsys, monkeypatch)
    assert code == 0
    assert '"format_version": 2' in out and "inputs:    x:float32[None,4]" in out
    assert "outputs:   output:float32[x_0,3]" in out and "weights:   1 tensors, 12 elements, 48 bytes" in out
    assert "platforms: cpu, cuda" in out and "stablehlo.dot_general" in out and "stablehlo.case" in out
    assert "def forward" not in out
    code, out, _ = _main(["inspect", art, "--json", "--source"], workdir, capsys, monkeypatch)
    data = json.loads(out)
    assert data["summary"]["ops"]["stablehlo.dot_general"] >= 1 and "def forward" in data["manifest"]["source"]
    outputs = tmp_path / "out.npz"
    code, out, _ = _main(["run", art, "--input", "x=x.npy", "-o", str(outputs)], workdir, capsys, monkeypatch)
    assert code == 0 and "saved 1 output(s)" in out
    np.testing.assert_allclose(np.load(outputs)["output"], np.full((2, 3), 4.0))


def test_errors_are_reported_not_raised(workdir, tmp_path, capsys, monkeypatch):
    code, _, err = _main(["run", str(tmp_path / "missing")], workdir, capsys, monkeypatch)
    assert code == 1 and "dy2st run: error:" in err and "no such directory" in err
    code, _, err = _main(["save", "cli_model:double", "--input-spec", "x=float32", "-o", str(tmp_path / "a")],
                         workdir, capsys, monkeypatch)
    assert code == 2 and "Cannot read the input spec 'x=float32'" in err and "--input-spec #1" in err
    _main(["save", "cli_model:double", "--input-spec", "x:float32[None,4]", "-o", str(tmp_path / "a")],
          workdir, capsys, monkeypatch)
    code, _, err = _main(["run", str(tmp_path / "a"), "--input", "x=x_bad.npy"], workdir, capsys, monkeypatch)
    assert code == 1 and "input 'x' does not match its InputSpec x:float32[None,4]: dimension 1 is 5" in err
    code, _, err = _main(["run", str(tmp_path / "a"), "--input", "x"], workdir, capsys, monkeypatch)
    assert code == 2 and "--input expects NAME=FILE.npy" in err and err.startswith("usage: dy2st run")


# -- failing well ----------------------------------------------------------------------------
BROKEN_SOURCE = textwrap.dedent('''
    import numpy as np

    def noisy(x):
        print("x", x)
        return x * 2

    SETTINGS = {"scale": 2}
    value = SETTINGS["missing"]
''')


@pytest.fixture(scope="module")
def broken_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_broken")
    (root / "broken_model.py").write_text(BROKEN_SOURCE)
    (root / "noisy_model.py").write_text(BROKEN_SOURCE.split("SETTINGS")[0])
    return root


@pytest.mark.parametrize("command", ["code", "save", "inspect", "run"])
def test_help_of_every_command_shows_an_example(command, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and "examples:" in out and f"  dy2st {command} " in out.split("examples:")[1]


@pytest.mark.parametrize("args, words", [
    (["save"], ["the following arguments are required: MODULE:OBJECT, --input-spec, -o/--output"]),
    (["save", "cli_model:double", "-o", "art"], ["the following arguments are required: --input-spec"]),
    (["save", "cli_model:double", "--input-spec", "x:float32[None,4]"], ["required: -o/--output"]),
    (["save", "cli_model", "--input-spec", "x:float32[4]", "-o", "art"], ["the target must be MODULE:OBJECT",
                                                                          "got 'cli_model'"]),
    (["save", "cli_model:double", "--input-spec", "x:float32[4]", "--input-spec", "y:flaot32[4]", "-o", "a"],
     ["argument --input-spec #2 'y:flaot32[4]'", "not an array dtype"]),
    (["save", "cli_model:forward", "--params", "cli_model:", "--input-spec", "x:float32[4]", "-o", "a"],
     ["--params expects [MODULE:]OBJECT"]),
    (["save", "cli_model:double", "--input-spec", "x:float32[4]", "-o", "a", "--weights-format", "pickle"],
     ["argument --weights-format: invalid choice: 'pickle'"]),
    (["run", "art", "--input", "x=a.npy", "--input", "x=b.npy"], ["--input x= is given twice"]),
    (["code", "nocolon"], ["the target must be FILE.py:FUNC"]),
    ([], ["the following arguments are required: COMMAND"]),
    (["frobnicate"], ["invalid choice: 'frobnicate'"]),
])
def test_usage_mistakes_exit_2_with_the_usage(workdir, capsys, monkeypatch, args, words):
    monkeypatch.chdir(workdir)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        code = cli.main(args)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("usage: dy2st"), err
    for word in words:
        assert word in err


@pytest.mark.parametrize("args, words", [
    (["save", "no_such_module:f", "--input-spec", "x:float32[4]", "-o", "a"],
     ["the target: cannot import 'no_such_module': no module named 'no_such_module'"]),
    (["save", "cli_model:nope", "--input-spec", "x:float32[4]", "-o", "a"],
     ["the target: cli_model has no attribute 'nope'"]),
    (["save", "cli_model:forward", "--params", "nope", "--input-spec", "x:float32[None,4]", "-o", "a"],
     ["--params: cli_model has no attribute 'nope'"]),
    (["save", "missing.py:f", "--input-spec", "x:float32[4]", "-o", "a"], ["the target: no such file: 'missing.py'"]),
    (["save", "cli_model:double", "--input-spec", "x:float32[4]", "--input-spec", "y:float32[4]", "-o", "a"],
     ["input_spec has 2 entries", "takes only 1 inputs"]),
    (["run", "art_missing", "--input", "x=x.npy"], ["no such directory"]),
])
def test_failures_exit_1_with_one_message(workdir, capsys, monkeypatch, args, words):
    code, out, err = _main(args, workdir, capsys, monkeypatch)
    assert code == 1 and err.startswith(f"dy2st {args[0]}: error: "), err
    assert "Traceback" not in err and "\n\n" not in err.strip()
    for word in words:
        assert word in err


def test_run_with_an_unreadable_input_file(workdir, tmp_path, capsys, monkeypatch):
    art = str(tmp_path / "art")
    _main(["save", "cli_model:double", "--input-spec", "x:float32[None,4]", "-o", art], workdir, capsys, monkeypatch)
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    for file, word in (("nope.npy", "No such file"), (str(tmp_path / "bad.npy"), "cannot read")):
        code, _, err = _main(["run", art, "--input", f"x={file}"], workdir, capsys, monkeypatch)
        assert code == 1 and f"cannot read {file!r} for input 'x'" in err and word in err


def test_an_error_in_the_users_module_is_one_message_at_its_line(broken_dir):
    result = _python_m(["save", "broken_model:noisy", "--input-spec", "x:float32[4]", "-o", "art"], broken_dir)
    assert result.returncode == 1
    err = result.stderr
    assert err.startswith("dy2st save: error: File \"")
    assert f'{broken_dir / "broken_model.py"}", line 9' in err and "KeyError: 'missing'" in err
    assert "<frozen runpy>" not in err and "Traceback" not in err and "--traceback" in err
    shown = _python_m(["save", "broken_model:noisy", "--input-spec", "x:float32[4]", "-o", "art", "--traceback"],
                      broken_dir)
    assert shown.returncode == 1 and "Traceback" in shown.stderr and "KeyError" in shown.stderr


def test_save_of_a_function_that_prints_names_the_line_and_can_drop_it(broken_dir):
    result = _python_m(["save", "noisy_model:noisy", "--input-spec", "x:float32[4]", "-o", "art"], broken_dir)
    assert result.returncode == 1 and "<frozen runpy>" not in result.stderr
    assert f'noisy_model.py", line 5' in result.stderr and "--drop-debug-effects" in result.stderr
    result = _python_m(["save", "noisy_model:noisy", "--input-spec", "x:float32[4]", "-o", "art",
                        "--drop-debug-effects"], broken_dir)
    assert result.returncode == 0, result.stderr


def test_save_refuses_a_directory_that_is_not_an_artifact(workdir, tmp_path, capsys, monkeypatch):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    args = ["save", "cli_model:double", "--input-spec", "x:float32[None,4]", "-o", str(target)]
    code, _, err = _main(args, workdir, capsys, monkeypatch)
    assert code == 1 and "not a dy2st artifact" in err and (target / "notes.txt").exists()
    code, _, err = _main(args + ["--overwrite"], workdir, capsys, monkeypatch)
    assert code == 0 and not (target / "notes.txt").exists()
