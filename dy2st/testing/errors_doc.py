"""docs/errors.md, generated: each error class, the smallest program raising it, its message, the fix.

Each entry is a small program run for real; the page shows the message it printed, so the page
cannot drift from the code. `tests/errors/test_error_catalogue.py` regenerates the text and
compares it with docs/errors.md. To rewrite the page after changing a message::

    python -m dy2st.testing.errors_doc            # writes docs/errors.md
    python -m dy2st.testing.errors_doc --check    # exit 1 if docs/errors.md is stale
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import importlib.util
import os
import shutil
import sys
import tempfile
import textwrap

import dy2st.errors as errors

EXAMPLE_FILE = "example.py"  # the name the page shows for each program's file
DOC_PATH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs", "errors.md")


@dataclasses.dataclass(frozen=True)
class Example:
    """One error class: a program whose last line raises it, and how to fix that program."""

    error: type
    program: str
    fix: str


_HEAD = "import json\nimport os\n\nimport jax\nimport jax.numpy as jnp\nimport dy2st\n\n"

EXAMPLES = [
    Example(errors.ConversionError, """
@jax.named_call
def f(x):
    return x * 2

dy2st.to_static(f)(jnp.ones(3))
""", "Apply `dy2st.to_static` to the inner function and the library's decorator on top: "
        "`jax.named_call(dy2st.to_static(f))`."),
    Example(errors.UnsupportedSyntaxError, """
def f(x):
    for row in x:
        yield row * 2

dy2st.to_static(f)(jnp.ones((2, 3)))
""", "Collect the values in a list and return it."),
    Example(errors.StagedInTryError, """
def f(x, table):
    try:
        if x.sum() > 0:
            x = x * table["scale"]
        else:
            x = x * table["shift"]
    except KeyError:
        pass
    return x

dy2st.to_static(f)(jnp.ones(3), {"scale": 2.0})
""", "Make each side valid for every input (`table.get(\"shift\", 1.0)`), or move the `try` into the "
        "branches or out of the converted function."),
    Example(errors.BranchOutputError, """
def f(x):
    if x.sum() > 0:
        y = x.astype(jnp.int32)
    else:
        y = x
    return y

dy2st.to_static(f)(jnp.ones(3))
""", "Give the variable one dtype and shape in both branches (`y = x.astype(jnp.int32)` in both, or neither)."),
    Example(errors.PredicateError, """
def f(x):
    if x > 0:
        x = x * 2
    return x

dy2st.to_static(f)(jnp.ones(3))
""", "Reduce the condition to one value: `if (x > 0).all():`."),
    Example(errors.LoopVariableError, """
def f(x):
    while x.sum() < 10:
        x = jnp.concatenate([x, x])
    return x

dy2st.to_static(f)(jnp.ones(3))
""", "Keep every carried variable one shape and dtype: preallocate and write with `.at[i].set(...)`."),
    Example(errors.LoopGradientError, """
def f(x):
    while x.sum() < 10:
        x = x * 2
    return x.sum()

jax.jit(jax.grad(dy2st.to_static(f)))(jnp.ones(3))
""", "Bound the loop: `dy2st.set_loop_options(maximum_iterations=N)` inside its body."),
    Example(errors.LoopBoundError, """
def f(x):
    while x.sum() < 100:
        dy2st.set_loop_options(maximum_iterations=2)
        x = x * 2
    return x

dy2st.to_static(f)(jnp.ones(3))
""", 'Raise `maximum_iterations` to a true upper bound, or pass `on_bound="stop"` to stop there on purpose.'),
    Example(errors.PythonEffectError, """
def f(x):
    seen = set()
    if x.sum() > 0:
        seen.add("positive")
    return x, len(seen)

dy2st.to_static(f)(jnp.ones(3))
""", "Build a new value instead (`seen = seen | {v}`) and use it after the `if`, or make the condition a Python value."),
    Example(errors.UndefinedVariableError, """
def f(x, n):
    for i in range(n):
        y = x * i
    return y

dy2st.to_static(f)(jnp.ones(3), 0)
""", "Assign the variable before the loop (`y = jnp.zeros_like(x)`)."),
    Example(errors.InputSignatureError, """
def f(x, scales):
    return x * scales[0]

dy2st.to_static(f)(jnp.ones(3), {2.0})
""", "Pass static Python values that are hashable (a tuple, a frozen dataclass), or arrays."),
    Example(errors.BuiltinError, """
def f(x):
    return int(x)

dy2st.to_static(f)(jnp.ones(3))
""", "Reduce the array to one value first (`int(x.sum())`), or keep it an array (`x.astype(jnp.int32)`)."),
    Example(errors.StagedBranchError, """
def f(x, xs):
    if x.sum() > 0:
        y = x
    else:
        y = xs[5]
    return y

jax.jit(dy2st.to_static(f))(jnp.ones(3), [jnp.ones(3)])   # inside a jax.jit of the user's
""", "Make the side valid for every input (`xs[min(5, len(xs) - 1)]`), or call the converted function itself "
        "(a program of dy2st's raises such an error when the data takes that side, as eager does)."),
    Example(errors.MissingAfterLoopError, """
def f(x, n):
    d = {}
    while n > 0:
        d["k"] = x * n
        n = n - 1
    return d["k"]

dy2st.to_static(f)(jnp.ones(3), jnp.asarray(0))
""", 'Set the item before the loop (`d["k"] = jnp.zeros_like(x)`), so it exists when the loop runs zero times.'),
    Example(errors.TracedValueError, """
def f(x):
    return [v for v in x if v > 0]

dy2st.to_static(f)(jnp.ones(3))
""", "Select with jnp instead of a comprehension's `if`: `x[x > 0]` has a data-dependent shape, so "
        "keep the shape: `jnp.where(x > 0, x, 0)`."),
    Example(errors.IntOverflowError, """
def f(x, n):
    acc = 1
    i = 0
    while i < n:          # a traced trip count: a staged loop
        acc = acc * 7     # eagerly a Python int that grows; here a weakly typed int32
        i += 1
    return acc

dy2st.to_static(f)(jnp.ones(3), jnp.int32(12))
""", "Keep the value within int32, or make it a float: `acc = 1.0`."),
    Example(errors.TracedRecursionError, """
def count_down(n):
    if n <= 0:          # a traced n: both sides are traced, so the recursion never stops
        return n
    return count_down(n - 1)

dy2st.to_static(count_down)(jnp.asarray(3))
""", "Make the base case a Python value (`count_down(3)` with an int), or write the recursion as a "
        "`while n > 0:` loop."),
    Example(errors.ProgramOutputError, """
def f(x):
    return f"loss {x.sum():.3f}"   # the text exists only once the program has run

dy2st.to_static(f)(jnp.ones(3))
""", "Return `x.sum()` and format it after the call (or `print` it inside: prints run when the program runs)."),
    Example(errors.ScopeWriteError, """
total = 0.0

def f(x):
    global total
    total = total + x.sum()
    return x

dy2st.to_static(f)(jnp.ones(3))
""", "Return the value instead of writing it to a global: `return x, total + x.sum()`."),
    Example(errors.ExportError, """
def f(x):
    print(x)
    return x * 2

dy2st.save(dy2st.to_static(f), os.path.join(os.path.dirname(__file__), "artifact"),
           input_spec=[dy2st.InputSpec((3,), "float32", "x")])
""", 'Remove the `print`/`assert` before saving, or save without them: `dy2st.save(..., debug_effects="drop")`.'),
    Example(errors.ArtifactError, """
def f(x):
    return x * 2

artifact = os.path.join(os.path.dirname(__file__), "artifact")
dy2st.save(dy2st.to_static(f), artifact, input_spec=[dy2st.InputSpec((3,), "float32", "x")])
manifest = json.load(open(os.path.join(artifact, "manifest.json")))
manifest["weights"]["file"] = "../secrets.safetensors"
json.dump(manifest, open(os.path.join(artifact, "manifest.json"), "w"))
dy2st.load(artifact)
""", "Load only artifacts written by `dy2st.save`, unchanged: every file an artifact names must be a "
        "plain file inside its directory; save the artifact again if it was edited."),
    Example(errors.ArgumentError, """
def f(x):
    return x * 2

dy2st.to_static(f, max_programs=0)
""", "Pass a positive count of programs to keep, such as `max_programs=8`, or leave the default."),
    Example(errors.InputSpecError, """
def f(x):
    return x * 2

dy2st.to_static(f, input_spec=[dy2st.InputSpec((None, 3), "float32"), dy2st.InputSpec((3,), "float32")])
""", "Pass one InputSpec per positional parameter, in order."),
]


_folders: dict = {}  # example class name -> its folder, one per process


def _run(example: Example) -> BaseException:
    # One folder per example for the whole process: dy2st caches conversions by code object,
    # which compares equal for equal code in another file, so a path must not change.
    name = example.error.__name__
    folder = _folders.get(name)
    if folder is None:
        folder = _folders[name] = tempfile.mkdtemp(prefix="dy2st_errors_doc_")
        atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, EXAMPLE_FILE)
    with open(path, "w") as f:
        f.write(_HEAD + textwrap.dedent(example.program).lstrip())
    spec = importlib.util.spec_from_file_location(f"dy2st_errors_doc_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except example.error as err:
        err.__dy2st_text__ = str(err).replace(path, EXAMPLE_FILE).replace(folder + os.sep, "")
        return err
    raise AssertionError(f"the example for {name} raised nothing")


def message_of(example: Example) -> str:
    """The message the example's program prints, with its file shown as example.py."""
    err = _run(example)
    if not isinstance(err, example.error):  # StagedBranchError is also the raised type: a subclass per type
        raise AssertionError(f"the example for {example.error.__name__} raised {type(err).__name__}: {err}")
    return err.__dy2st_text__


def _doc_of(cls) -> str:
    return textwrap.dedent(cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")


def render() -> str:
    """The text of docs/errors.md."""
    out = [
        "# dy2st errors",
        "",
        "<!-- Generated by `python -m dy2st.testing.errors_doc` from dy2st/testing/errors_doc.py;",
        "     tests/errors/test_error_catalogue.py checks it is current. Do not edit by hand. -->",
        "",
        "Every error dy2st raises is a `dy2st.errors.Dy2StaticError`. Its message starts with the",
        "file and line of your code, then the line itself, then what went wrong and what to do.",
        "Each section below shows the smallest program that raises one class, the message it",
        "prints (the program's file is shown as `example.py`), and the fix.",
        "",
    ]
    for example in EXAMPLES:
        cls = example.error
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        out += [
            f"## {cls.__name__}",
            "",
            f"*Subclass of {bases}.* {_doc_of(cls)}",
            "",
            "```python",
            (_HEAD + textwrap.dedent(example.program).lstrip()).rstrip(),
            "```",
            "",
            "prints:",
            "",
            "```text",
            f"dy2st.errors.{cls.__name__}: {message_of(example)}",
            "```",
            "",
            f"**Fix.** {example.fix}",
            "",
        ]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/errors.md differs")
    parser.add_argument("--path", default=os.path.normpath(DOC_PATH))
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        with open(args.path) as f:
            current = f.read()
        if current != text:
            print(f"{args.path} is stale: run python -m dy2st.testing.errors_doc", file=sys.stderr)
            return 1
        return 0
    with open(args.path, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
