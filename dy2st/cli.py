"""The `dy2st` command: show translated code, save an artifact, inspect it, run it.

    dy2st code model.py:forward [--level N]
    dy2st explain model.py:forward --input-spec 'x:float32[None,784]' [--json | --html FILE]
    dy2st save model:forward --input-spec 'x:float32[None,784]' [--params model:params] -o artifact
    dy2st inspect artifact [--source] [--json]
    dy2st run artifact --input x=x.npy [-o outputs.npz]

`code`, `explain` and `save` import the module you name (your own code); `inspect` and `run` read only
the artifact, whose program is deserialized by jax and whose stored source is only printed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time

import numpy as np

from dy2st import conversion, transformers
from dy2st.errors import Dy2StaticError


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status: 0 ok, 1 a failure, 2 a usage mistake.

    Usage mistakes print the command's usage and say which argument is wrong (as argparse
    does). Every other failure prints one message, never a traceback (`--traceback` shows it).
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except _UsageError as err:
        args.command_parser.print_usage(sys.stderr)
        print(f"dy2st {args.command}: error: {err.problem}", file=sys.stderr)
        return 2
    except Dy2StaticError as err:
        if args.traceback:
            raise
        print(f"dy2st {args.command}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"dy2st {args.command}: interrupted", file=sys.stderr)
        return 130
    # The command's boundary: the user's module (imported by `code` and `save`) may raise
    # anything; it is reported in one message at the user's line, not as a traceback.
    except Exception as err:  # noqa: BLE001
        if args.traceback:
            raise
        print(f"dy2st {args.command}: error: {_describe(err)}", file=sys.stderr)
        return 1


def _describe(err: BaseException) -> str:
    """`File "...", line N` (the innermost user frame) and `Type: message`, without a traceback."""
    from dy2st.errors import innermost_user_frame

    origin = innermost_user_frame(err.__traceback__)
    if isinstance(err, SyntaxError) and err.filename:
        origin_text = f'File "{err.filename}", line {err.lineno}\n    {(err.text or "").strip()}\n'
        return f"{origin_text}SyntaxError: {err.msg}"
    header = f"{origin.as_header()}\n" if origin is not None else ""
    return f"{header}{type(err).__name__}: {err}\nTo see the traceback, run the command again with --traceback."


_EXAMPLES = {
    "code": """examples:
  dy2st code model.py:forward              the code dy2st runs for forward
  dy2st code model.py:Net.__call__ --level 0   the parsed source, before any rewrite""",
    "explain": """examples:
  dy2st explain model.py:forward --input-spec 'x:float32[8,784]'        each line's fate, in the terminal
  dy2st explain model.py:loss --input-spec 'x:float32[None,4]' --input-spec 'n:int32[]' --json
  dy2st explain model.py:Net.forward --input-spec 'x:float32[2,3]' --html report.html

SPEC is NAME:DTYPE[DIMS] as for `dy2st save`; a None dim traces symbolically (the program is then
not compiled, so no compile time is shown). A method Class.method is explained on a new object
Class() (its constructor must take no arguments).""",
    "save": """examples:
  dy2st save model:forward --params params --input-spec 'x:float32[None,784]' -o artifact
  dy2st save model.py:net --input-spec 'ids:int32[batch,128]' --input-spec 'mask:bool[batch,128]' -o art
  dy2st save model:forward --input-spec 'x:float32[None,4]' -o art --drop-debug-effects --overwrite

SPEC is NAME:DTYPE[DIMS]; a dim is an int, None (any size) or a name (any size, equal wherever
the name appears). --drop-debug-effects saves a function that prints or asserts on traced values
without those prints and checks (they cannot be stored).""",
    "inspect": """examples:
  dy2st inspect artifact                   manifest, inputs, outputs, weights, op counts
  dy2st inspect artifact --json --source   all of it as JSON, with the translated source""",
    "run": """examples:
  dy2st run artifact --input x=x.npy                 print the outputs
  dy2st run artifact --input x=x.npy -o out.npz      save them (one array per output)""",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dy2st", description=__doc__.split("\n\n")[0],
                                     epilog="examples:\n  dy2st save model:forward --input-spec 'x:float32[None,784]' "
                                     "-o artifact\n  dy2st run artifact --input x=x.npy\n\n"
                                     "`dy2st COMMAND --help` shows each command's options and examples.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        command_parser = sub.add_parser(name, epilog=_EXAMPLES.get(name),
                                        formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)
        command_parser.add_argument("--traceback", action="store_true",
                                    help="on a failure, show the Python traceback instead of one message")
        command_parser.set_defaults(command_parser=command_parser)
        return command_parser

    code = command("code", help="print the translated code of a function",
                   description="Print the code dy2st generates for FILE.py:FUNC (imports FILE.py).")
    code.add_argument("target", metavar="FILE.py:FUNC", help="a Python file and a function (or Class.method) in it")
    code.add_argument("--level", type=int, default=None, metavar="N",
                      help=f"stop after the first N transformer steps (0 = the parsed source; "
                      f"{len(transformers.PIPELINE)} steps: {', '.join(s.name for s in transformers.PIPELINE)})")
    code.set_defaults(handler=_code)

    explain = command("explain", help="show what became of each line of a function, for one input signature",
                      description="Trace FILE.py:FUNC for the given input specs and print its source, each line "
                      "annotated with what dy2st made of it (imports FILE.py).")
    explain.add_argument("target", metavar="FILE.py:FUNC", help="a Python file and a function (or Class.method) in it")
    explain.add_argument("--input-spec", action="append", default=[], metavar="SPEC", dest="input_spec",
                         help="one per argument, in order: NAME:DTYPE[DIMS], e.g. 'x:float32[None,784]'")
    output = explain.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the report as one JSON object")
    output.add_argument("--html", metavar="FILE", help="write the report as HTML to FILE")
    explain.set_defaults(handler=_explain)

    save = command("save", help="export a function or model to an artifact directory",
                   description="Trace MODULE:OBJECT with jax.export and write a deployable artifact.")
    save.add_argument("target", metavar="MODULE:OBJECT",
                      help="a module (dotted name or path to a .py file) and a function, method or model in it")
    save.add_argument("--input-spec", action="append", required=True, metavar="SPEC", dest="input_spec",
                      help="one per input, in order: NAME:DTYPE[DIMS], e.g. 'x:float32[None,784]' (None = any size)")
    save.add_argument("--params", metavar="[MODULE:]OBJECT",
                      help="a pytree of weights passed as the first argument (default module: the target's)")
    save.add_argument("-o", "--output", required=True, metavar="DIR", help="the artifact directory to write")
    save.add_argument("--platform", action="append", dest="platforms", metavar="NAME",
                      help="a lowering platform, repeatable (default: cpu and cuda)")
    save.add_argument("--weights-format", choices=["safetensors", "npz"], default=None,
                      help="how to store the weights (default: safetensors when installed)")
    save.add_argument("--overwrite", action="store_true",
                      help="replace DIR even when it is not a dy2st artifact (an earlier artifact is always replaced)")
    save.add_argument("--drop-debug-effects", action="store_true",
                      help="save without the prints and asserts of traced values (host callbacks cannot be stored)")
    save.set_defaults(handler=_save)

    inspect_ = command("inspect", help="print an artifact's manifest and a summary of its program",
                       description="Print the manifest of an artifact and a summary of its program.")
    inspect_.add_argument("artifact", metavar="DIR")
    inspect_.add_argument("--source", action="store_true", help="also print the translated source it was made from")
    inspect_.add_argument("--json", action="store_true", help="print the manifest and summary as one JSON object")
    inspect_.set_defaults(handler=_inspect)

    run = command("run", help="run an artifact on inputs stored as .npy files",
                  description="Load an artifact, run it on the given inputs and print or save the outputs.")
    run.add_argument("artifact", metavar="DIR")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="an input (repeatable); files are read with numpy, allow_pickle=False")
    run.add_argument("-o", "--output", metavar="FILE.npz", help="save the outputs here instead of printing them")
    run.set_defaults(handler=_run)
    return parser


# -- commands --------------------------------------------------------------------------------
def _code(args) -> int:
    path, name = _split_target(args.target, "FILE.py:FUNC", "the target")
    fn = _unwrap(_attribute(_import(path, "the target"), name, path, "the target"))
    levels = len(transformers.PIPELINE)
    if args.level is not None and not 0 <= args.level <= levels:
        raise _usage(f"--level must be between 0 and {levels}")
    print(conversion.source_at_level(fn, args.level))
    return 0


def _explain(args) -> int:
    from dy2st.api import StaticFunction, to_static
    from dy2st.api import explain

    path, name = _split_target(args.target, "FILE.py:FUNC", "the target")
    module = _import(path, "the target")
    target = _attribute(module, name, path, "the target")
    if "." in name and inspect.isfunction(target):  # Class.method: bound to a new object
        owner = _attribute(module, name.rsplit(".", 1)[0], path, "the target")
        if inspect.isclass(owner):
            target = getattr(owner(), name.rsplit(".", 1)[1])
    specs = [_parse_spec(text, i) for i, text in enumerate(args.input_spec)]
    function = target if isinstance(target, StaticFunction) else to_static(target)
    report = explain(function, *specs)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    elif args.html:
        with open(args.html, "w", encoding="utf-8") as file:
            file.write(report.to_html())
        print(f"wrote {args.html}")
    else:
        print(report)
    return 1 if report.error is not None else 0


def _save(args) -> int:
    from dy2st.export import DEFAULT_PLATFORMS, save

    module_name, name = _split_target(args.target, "MODULE:OBJECT", "the target")
    module = _import(module_name, "the target")
    target = _attribute(module, name, module_name, "the target")
    params = None
    if args.params:
        params_module, _, params_name = args.params.rpartition(":")
        if not params_name:
            raise _usage(f"--params expects [MODULE:]OBJECT, got {args.params!r}")
        params = _attribute(_import(params_module, "--params") if params_module else module, params_name,
                            params_module or module_name, "--params")
    specs = [_parse_spec(text, i) for i, text in enumerate(args.input_spec)]
    start = time.perf_counter()
    path = save(target, args.output, specs, params=params, platforms=args.platforms or DEFAULT_PLATFORMS,
                weights_format=args.weights_format, overwrite=args.overwrite,
                debug_effects="drop" if args.drop_debug_effects else "error")
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    print(f"saved {args.target} to {path} ({size} bytes, {time.perf_counter() - start:.2f} s)")
    return 0


def _parse_spec(text: str, index: int):
    from dy2st.errors import InputSpecError
    from dy2st.input_spec import InputSpec

    try:
        return InputSpec.parse(text)
    except InputSpecError as err:
        raise _usage(f"argument --input-spec #{index + 1} {text!r}: {err.problem} Write NAME:DTYPE[DIMS], "
                     "e.g. 'x:float32[None,784]' or 'n:int32[]'.") from None


def _split_target(text: str, form: str, what: str) -> tuple[str, str]:
    module, _, name = text.rpartition(":")
    if not module or not name:
        raise _usage(f"{what} must be {form}, got {text!r}")
    return module, name


def _inspect(args) -> int:
    from dy2st.export import load

    loaded = load(args.artifact)
    manifest = dict(loaded.manifest)
    source = manifest.pop("source")
    summary = loaded.summary()
    if args.json:
        print(json.dumps({"manifest": loaded.manifest if args.source else manifest, "summary": summary}, indent=2))
        return 0
    print(f"artifact: {args.artifact}")
    print(json.dumps(manifest, indent=2))
    print("summary:")
    print(f"  function:  {manifest['function']}")
    print(f"  inputs:    {', '.join(summary['inputs']) or '(none)'}")
    print(f"  outputs:   {', '.join(summary['outputs'])}")
    print(f"  weights:   {summary['weights']} tensors, {summary['weight_elements']} elements, "
          f"{summary['weight_bytes']} bytes")
    print(f"  platforms: {', '.join(summary['platforms'])}")
    ops = summary["ops"]
    print(f"  ops:       {sum(ops.values())} in total: " + ", ".join(f"{name} {count}" for name, count in ops.items())
          if ops else "  ops:       (this jax cannot parse the program's MLIR)")
    if args.source:
        print("source (for reading only; never executed):")
        print(source)
    return 0


def _run(args) -> int:
    from dy2st.export import load

    requested = _input_files(args.input)
    loaded = load(args.artifact)
    inputs = {name: _read_npy(file, name) for name, file in requested.items()}
    outputs = loaded(**inputs)
    import jax

    leaves = jax.tree_util.tree_leaves(outputs)
    names = [o.name for o in loaded.checked_manifest.outputs]
    if args.output:
        np.savez(args.output, **{n: np.asarray(v) for n, v in zip(names, leaves)})
        print(f"saved {len(leaves)} output(s) to {args.output}: {', '.join(names)}")
        return 0
    for name, value in zip(names, leaves):
        value = np.asarray(value)
        print(f"{name}: {value.dtype.name}{list(value.shape)}")
        print(np.array2string(value, threshold=64, edgeitems=3))
    return 0


def _input_files(items: list[str]) -> dict[str, str]:
    files: dict[str, str] = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise _usage(f"--input expects NAME=FILE.npy, got {item!r}")
        if name in files:
            raise _usage(f"--input {name}= is given twice")
        files[name] = file
    return files


def _read_npy(file: str, name: str) -> np.ndarray:
    try:
        return np.load(file, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:  # missing, unreadable, not .npy, or pickled objects
        raise _CommandError(f"cannot read {file!r} for input {name!r}: {err}",
                            advice="pass a .npy file written by numpy.save (no object arrays).") from None


# -- helpers ---------------------------------------------------------------------------------
class _UsageError(Dy2StaticError):
    """A command-line argument is malformed: exit status 2, with the command's usage."""


class _CommandError(Dy2StaticError):
    """The command cannot do what it was asked (a module or file that is not there): status 1."""


def _usage(message: str) -> _UsageError:
    return _UsageError(message, advice="see `dy2st COMMAND --help`.")


def _import(module: str, what: str):
    """Import a module by file path (FILE.py) or dotted name; its directory / cwd go on sys.path."""
    if module.endswith(".py") or os.sep in module:
        return _import_file(module, what)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is None or not (module == err.name or module.startswith(err.name + ".")):
            raise  # the module was found; an import inside it failed (reported at its line)
        raise _CommandError(f"{what}: cannot import {module!r}: no module named {err.name!r} (looked in the "
                            "current directory and on sys.path).",
                            advice="run the command in the module's directory, or give the path: FILE.py:NAME.") from None


def _import_file(module: str, what: str):
    path = os.path.abspath(module)
    if not os.path.isfile(path):
        raise _CommandError(f"{what}: no such file: {module!r}.", advice="give the path of a Python file, FILE.py:NAME.")
    name = os.path.splitext(os.path.basename(path))[0]
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def _attribute(module, dotted: str, where: str, what: str):
    obj = module
    for part in dotted.split("."):
        if not hasattr(obj, part):
            raise _CommandError(f"{what}: {where} has no attribute {dotted!r}.",
                                advice=f"name a function, method or model defined in {where}.")
        obj = getattr(obj, part)
    return obj


def _unwrap(obj):
    from dy2st.api import StaticFunction

    if isinstance(obj, StaticFunction):
        return obj._fn
    return getattr(obj, "__func__", obj)


if __name__ == "__main__":
    raise SystemExit(main())
