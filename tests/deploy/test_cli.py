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
    assert '"format_version": 1' in out and "inputs:    x:float32[None,4]" in out
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
