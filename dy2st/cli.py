"""The `dy2st` command: show translated code, save an artifact, inspect it, run it.

    dy2st code model.py:forward [--level N]
    dy2st save model:forward --input-spec 'x:float32[None,784]' [--params model:params] -o artifact
    dy2st inspect artifact [--source] [--json]
    dy2st run artifact --input x=x.npy [-o outputs.npz]

`code` and `save` import the module you name (your own code); `inspect` and `run` read only
the artifact, whose program is deserialized by jax and whose stored source is only printed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time

import numpy as np

from dy2st import conversion, transformers
from dy2st.errors import Dy2StaticError


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 a dy2st error, 2 bad usage)."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except Dy2StaticError as err:
        print(f"dy2st {args.command}: error: {err}", file=sys.stderr)
        return 1
    except (ImportError, AttributeError, FileNotFoundError) as err:
        print(f"dy2st {args.command}: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dy2st", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    code = sub.add_parser("code", help="print the translated code of a function",
                          description="Print the code dy2st generates for FILE.py:FUNC (imports FILE.py).")
    code.add_argument("target", metavar="FILE.py:FUNC", help="a Python file and a function (or Class.method) in it")
    code.add_argument("--level", type=int, default=None, metavar="N",
                      help=f"stop after the first N transformer steps (0 = the parsed source; "
                      f"{len(transformers.PIPELINE)} steps: {', '.join(s.name for s in transformers.PIPELINE)})")
    code.set_defaults(handler=_code)

    save = sub.add_parser("save", help="export a function or model to an artifact directory",
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
    save.set_defaults(handler=_save)

    inspect_ = sub.add_parser("inspect", help="print an artifact's manifest and a summary of its program",
                              description="Print the manifest of an artifact and a summary of its program.")
    inspect_.add_argument("artifact", metavar="DIR")
    inspect_.add_argument("--source", action="store_true", help="also print the translated source it was made from")
    inspect_.add_argument("--json", action="store_true", help="print the manifest and summary as one JSON object")
    inspect_.set_defaults(handler=_inspect)

    run = sub.add_parser("run", help="run an artifact on inputs stored as .npy files",
                         description="Load an artifact, run it on the given inputs and print or save the outputs.")
    run.add_argument("artifact", metavar="DIR")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="an input (repeatable); files are read with numpy, allow_pickle=False")
    run.add_argument("-o", "--output", metavar="FILE.npz", help="save the outputs here instead of printing them")
    run.set_defaults(handler=_run)
    return parser


# -- commands --------------------------------------------------------------------------------
def _code(args) -> int:
    path, _, name = args.target.rpartition(":")
    if not path or not name:
        raise _usage(f"expected FILE.py:FUNC, got {args.target!r}")
    fn = _unwrap(_attribute(_import(path), name, path))
    levels = len(transformers.PIPELINE)
    if args.level is not None and not 0 <= args.level <= levels:
        raise _usage(f"--level must be between 0 and {levels}")
    print(conversion.source_at_level(fn, args.level))
    return 0


def _save(args) -> int:
    from dy2st.export import DEFAULT_PLATFORMS, save
    from dy2st.input_spec import InputSpec

    module_name, _, name = args.target.rpartition(":")
    if not module_name or not name:
        raise _usage(f"expected MODULE:OBJECT, got {args.target!r}")
    module = _import(module_name)
    target = _attribute(module, name, module_name)
    params = None
    if args.params:
        params_module, _, params_name = args.params.rpartition(":")
        params = _attribute(_import(params_module) if params_module else module, params_name,
                            params_module or module_name)
    specs = [InputSpec.parse(text) for text in args.input_spec]
    start = time.perf_counter()
    path = save(target, args.output, specs, params=params, platforms=args.platforms or DEFAULT_PLATFORMS,
                weights_format=args.weights_format)
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    print(f"saved {args.target} to {path} ({size} bytes, {time.perf_counter() - start:.2f} s)")
    return 0


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

    loaded = load(args.artifact)
    inputs = {}
    for item in args.input:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise _usage(f"--input expects NAME=FILE.npy, got {item!r}")
        try:
            inputs[name] = np.load(file, allow_pickle=False)
        except ValueError as err:
            raise _usage(f"cannot read {file!r} for input {name!r}: {err}") from None
    outputs = loaded(**inputs)
    import jax

    leaves = jax.tree_util.tree_leaves(outputs)
    names = [o["name"] for o in loaded.manifest["outputs"]]
    if args.output:
        np.savez(args.output, **{n: np.asarray(v) for n, v in zip(names, leaves)})
        print(f"saved {len(leaves)} output(s) to {args.output}: {', '.join(names)}")
        return 0
    for name, value in zip(names, leaves):
        value = np.asarray(value)
        print(f"{name}: {value.dtype.name}{list(value.shape)}")
        print(np.array2string(value, threshold=64, edgeitems=3))
    return 0


# -- helpers ---------------------------------------------------------------------------------
class _UsageError(Dy2StaticError):
    """A command-line argument is malformed."""


def _usage(message: str) -> _UsageError:
    return _UsageError(message, advice="see `dy2st COMMAND --help`.")


def _import(module: str):
    """Import a module by file path (FILE.py) or dotted name; its directory / cwd go on sys.path."""
    if module.endswith(".py") or os.sep in module:
        path = os.path.abspath(module)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such file: {module}")
        name = os.path.splitext(os.path.basename(path))[0]
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(module)


def _attribute(module, dotted: str, where: str):
    obj = module
    for part in dotted.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"{where} has no attribute {dotted!r}")
        obj = getattr(obj, part)
    return obj


def _unwrap(obj):
    from dy2st.api import StaticFunction

    if isinstance(obj, StaticFunction):
        return obj._fn
    return getattr(obj, "__func__", obj)


if __name__ == "__main__":
    raise SystemExit(main())
