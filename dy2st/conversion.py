"""Source -> ast -> transformer pipeline -> code object, cached once per function code.

The converted function is compiled from the AST with the user's file name and line numbers
on every node, so tracebacks and error messages point at the user's lines with no source map.
It shares the original's globals and closure cells: the transformed `def` is compiled inside a
factory whose locals stand for the original free variables plus one more, the runtime module;
the inner code object is then bound to the original cells and a cell holding `dy2st.runtime`.
Nothing is written into the user's globals.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import dis
import functools
import gc
import inspect
import linecache
import operator
import re
import textwrap
import threading
import types
import weakref


from dy2st import analysis, ast_util, runtime, transformers
from dy2st.analysis import fence, loop_bodies
from dy2st.config import config, log, logger
from dy2st.errors import ConversionError, OriginInfo, register_converted_code
from dy2st.transformers.base import ConversionContext, copy_location_recursive
from dy2st.transformers.naming import Namer

_RUNTIME_CELL = types.CellType(runtime)
_LOCATION_FIELDS = ("lineno", "end_lineno")


class ConvertedCode:
    """The result of converting one code object; `instantiate` binds it to a function's cells.

    `source`, the translated code as text, is made on first use by translating the source
    text read for the conversion again (deterministic): most conversions are never shown, and
    keeping every translated tree alive would hold megabytes for long functions and cost each
    conversion a garbage-collector pass over it (about 6% of converting).
    """

    def __init__(self, code: types.CodeType, runtime_name: str, retranslate):
        self.code = code
        self.runtime_name = runtime_name
        self._retranslate = retranslate  # () -> the translated FunctionDef

    @functools.cached_property
    def source(self) -> str:
        return ast.unparse(self._retranslate())

    def instantiate(self, fn: types.FunctionType) -> types.FunctionType:
        original = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        cells = []
        for name in self.code.co_freevars:
            if name == self.runtime_name:
                cells.append(_RUNTIME_CELL)
            elif name in original:
                cells.append(original[name])
            else:
                cells.append(types.CellType())
        new = types.FunctionType(self.code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(cells) or None)
        new.__kwdefaults__ = fn.__kwdefaults__
        new.__qualname__ = fn.__qualname__
        new.__module__ = fn.__module__
        new.__doc__ = fn.__doc__
        new.__dict__.update(fn.__dict__)
        new.__dy2st_converted__ = self
        # its defaults are the original's, read again per trace (guards); weakly: the converted
        # copy is the value of `calls`' weak-keyed cache whose key is the original
        new.__dy2st_original__ = weakref.ref(fn)
        return new


# Keyed by the code and its file: code objects compare equal across files (their file name is
# not compared), and two modules holding the same function at the same line (a copied helper)
# would otherwise share one converted code, which names the first one's file in every origin,
# check and message, and reads its source.
_cache: dict[tuple[types.CodeType, str], ConvertedCode] = {}
_cache_lock = threading.Lock()


def convert(fn: types.FunctionType) -> types.FunctionType:
    """The converted version of `fn`, sharing its globals and closure (cached per code)."""
    key = (fn.__code__, fn.__code__.co_filename)
    converted = _cache.get(key)
    if converted is None:
        with _gc_paused():
            converted = convert_code(fn)
        with _cache_lock:
            converted = _cache.setdefault(key, converted)
    return converted.instantiate(fn)


@contextlib.contextmanager
def _gc_paused():
    """Converting makes many short-lived AST nodes while the module's tree is alive: the
    collector's passes over them cost about a quarter of a long function's conversion (and grow
    with its size), and find nothing to free. Paused for the conversion, as compilers do."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


runtime.calls.install_converter(convert)


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def _origin_of(fn) -> OriginInfo:
    code = fn.__code__
    return OriginInfo(code.co_filename, code.co_firstlineno, code.co_name)


def fetch_source(fn) -> tuple[str, int, str]:
    """(dedented source, first line number, file name) of `fn`, or a ConversionError."""
    # inspect follows `__wrapped__` (functools.wraps) to the inner function's source; the code
    # object is the function actually run, so a wrapper's own source is read from it.
    source_of = fn.__code__ if isinstance(fn, types.FunctionType) and hasattr(fn, "__wrapped__") else fn
    try:
        lines, first = inspect.getsourcelines(source_of)
    except (OSError, TypeError) as err:
        raise ConversionError(
            f"Cannot read the source of {fn.__qualname__!r} ({err}).",
            _origin_of(fn),
            advice="define the function in a .py file (not an interactive prompt or exec'd string), "
            "or leave it unconverted with dy2st.not_to_static.",
        ) from None
    filename = inspect.getsourcefile(source_of) or fn.__code__.co_filename
    return textwrap.dedent("".join(lines)), max(first, 1), filename


# inspect.findsource's test for the line a function's source starts on.
_DEF_LINE = re.compile(r"^(\s*def\s)|(\s*async\s+def\s)|(.*(?<!\w)lambda(:|\s))|^(\s*@)")


def _quick_source(fn) -> tuple[str, int, str, ast.Module] | None:
    """What fetch_source gives for a `def`, with its parse, or None where unsure.

    inspect.getsourcelines tokenizes the function in Python to find where it ends (most of
    the fetch's time). The code object already says where the body reaches; after that line
    the block goes on while lines are indented deeper than the `def` (or are blank/comments).
    A cut inside a bracket or string cannot parse, so a block that parses is the one inspect
    finds; anything else (lambdas, wrappers, tabs, no file) takes the inspect path.
    """
    if not isinstance(fn, types.FunctionType) or fn.__name__ == "<lambda>" or hasattr(fn, "__wrapped__"):
        return None
    filename = inspect.getsourcefile(fn)
    if not filename:
        return None
    linecache.checkcache(filename)
    lines = linecache.getlines(filename)
    first = fn.__code__.co_firstlineno
    if not 1 <= first <= len(lines) or not _DEF_LINE.match(lines[first - 1]):
        return None
    block = _block_lines(lines, first, _last_code_line(fn.__code__))
    if block is None:
        return None
    source = "".join(block)
    if block[0][:1].isspace():  # a def at column 0 has nothing to take off
        source = textwrap.dedent(source)
    try:
        # Leading newlines number the lines as in the file, sparing a walk to shift them.
        tree = ast.parse("\n" * (first - 1) + source)
    except SyntaxError:
        return None
    if not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return source, first, filename, tree


_LINE = operator.itemgetter(2)  # of a `co_lines()` entry


def _last_code_line(code: types.CodeType) -> int:
    """The last line any instruction of `code` or of the code nested in it starts on (a
    construct whose later lines are no deeper than the `def`, a string's say, leaves a block
    that does not parse: `_quick_source` then gives way to inspect)."""
    last = max(filter(None, map(_LINE, code.co_lines())), default=code.co_firstlineno)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            last = max(last, _last_code_line(const))
    return last


def _block_lines(lines: list[str], first: int, last_code_line: int) -> list[str] | None:
    """Lines `first`.. of a def whose body reaches at least `last_code_line` (1-based)."""
    indent = _indentation(lines[first - 1])
    end = max(first, min(last_code_line, len(lines)))
    for index in range(end, len(lines)):
        text = lines[index].lstrip()
        if not text or text.startswith("#"):
            continue
        depth = _indentation(lines[index])
        if depth is None or indent is None:
            return None
        if depth <= indent:
            break
        end = index + 1
    return lines[first - 1 : end]


def _indentation(line: str) -> int | None:
    """Leading spaces of `line`; None for tabs or form feeds (left to the tokenizer)."""
    rest = line.lstrip(" ")
    return None if rest[:1] in ("\t", "\f") else len(line) - len(rest)


@dataclasses.dataclass(frozen=True)
class _SourceRead:
    """The source text of a function as read for its conversion: enough to parse it again."""

    text: str
    first_line: int
    filename: str
    quick: bool  # found by `_quick_source` (parsed with its lines numbered by leading newlines)

    def parse(self, fn) -> ast.FunctionDef:
        if not self.quick:
            return _parse_function(fn, self.text, self.first_line, self.filename)
        tree = ast.parse("\n" * (self.first_line - 1) + self.text)
        return _parse_function(fn, self.text, self.first_line, self.filename, tree)


def _read_function(fn) -> tuple[ast.FunctionDef, _SourceRead]:
    """`fn`'s FunctionDef (user line numbers) and the source it was parsed from."""
    quick = _quick_source(fn)
    if quick is not None:
        source, first_line, filename, tree = quick
        return _parse_function(fn, source, first_line, filename, tree), _SourceRead(source, first_line, filename, True)
    source, first_line, filename = fetch_source(fn)
    read = _SourceRead(source, first_line, filename, False)
    return _parse_function(fn, source, first_line, filename), read


def _parse_function(fn, source: str, first_line: int, filename: str, tree: ast.Module | None = None):
    """The FunctionDef for `fn` (lambdas become a FunctionDef returning their body);
    `tree`, when given, is `source` already parsed by `ast`, its lines numbered from
    `first_line`."""
    try:
        module = tree if tree is not None else ast.parse(source)
    except SyntaxError:
        module = None
    if fn.__name__ != "<lambda>":
        if module is None or not module.body or not isinstance(module.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise ConversionError(f"Cannot parse the source of {fn.__qualname__!r}.", _origin_of(fn))
        node = module.body[0]
        node.decorator_list = []
        in_file = False
    else:
        node, in_file = _lambda_as_function(fn, module)
    if tree is None and not in_file:
        _shift_lines(node, first_line - 1)
    return node


def _lambda_as_function(fn, module):
    """`(FunctionDef of the lambda fn, whether its lines are the file's already)`. Found in
    `module`, the parse of its source lines, where they parse and hold one lambda of its
    parameters; else in the parse of its whole file, by the position of its first instruction
    (a lambda on a compound statement's header, `for f in (lambda x: x * 2, lambda x: x + 1):`,
    on a continuation line, or beside another of the same parameters)."""
    params = list(fn.__code__.co_varnames[: fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount])
    lam, in_file = None, False
    if module is not None:
        candidates = [n for n in ast.walk(module) if _is_lambda_of(n, params)]
        lam = candidates[0] if len(candidates) == 1 else None
    if lam is None:
        lam, in_file = _lambda_in_file(fn, params), True
    if lam is None:
        raise ConversionError(
            "Cannot find this lambda in its file's source.",
            _origin_of(fn),
            advice="define it with `def` instead (its file may have changed since it was loaded).",
        )
    ret = ast.Return(value=lam.body)
    ast.copy_location(ret, lam.body)
    func = ast.FunctionDef(
        name="lambda_", args=lam.args, body=[ret], decorator_list=[], returns=None, type_comment=None, type_params=[]
    )
    ast.copy_location(func, lam)
    return func, in_file


def _is_lambda_of(node, params: list) -> bool:
    return isinstance(node, ast.Lambda) and [a.arg for a in node.args.args + node.args.kwonlyargs] == params


def _lambda_in_file(fn, params: list):
    """The Lambda node of `fn` in its file's parse: the smallest whose span holds the positions
    of all of `fn`'s instructions (a lambda inside another holds only its own); None where the
    file does not parse or holds none."""
    code = fn.__code__
    positions = {(p.lineno, p.col_offset) for i in dis.get_instructions(code)  # (a bare RETURN: 0 to 0)
                 if (p := i.positions) is not None and None not in (p.lineno, p.col_offset, p.end_lineno, p.end_col_offset)
                 and (p.lineno, p.col_offset) < (p.end_lineno, p.end_col_offset)}
    lines = linecache.getlines(code.co_filename)
    if not positions or not lines:
        return None
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return None
    first, last = min(positions), max(positions)
    found = [node for node in ast.walk(tree) if _is_lambda_of(node, params)
             and (node.lineno, node.col_offset) <= first and last < (node.end_lineno, node.end_col_offset)]
    return min(found, key=lambda n: (n.end_lineno - n.lineno, n.end_col_offset - n.col_offset), default=None)


def _shift_lines(tree, offset: int) -> None:
    for node in ast_util.walk(tree):
        for field in _LOCATION_FIELDS:
            if getattr(node, field, None) is not None:
                setattr(node, field, getattr(node, field) + offset)


def is_method(fn) -> bool:
    """Whether `fn` is defined in a class body, so its first parameter is `self`."""
    fn = inspect.unwrap(fn)
    return _enclosing_class(fn) is not None and getattr(fn, "__code__", None) is not None \
        and fn.__code__.co_argcount > 0 and not isinstance(fn, staticmethod) \
        and not getattr(fn, "__dy2st_staticmethod__", False)  # set by callables.normalise


def _enclosing_class(fn) -> str | None:
    parts = fn.__qualname__.split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return parts[-2]
    return None


def transform(node, filename: str, function_name: str, stages: int | None = None,
              class_name: str | None = None, log_stages: bool = True) -> tuple[ast.FunctionDef, ConversionContext]:
    """Run the fence and the transformer pipeline (its first `stages` steps) over one FunctionDef
    (`log_stages`: log each stage's code at `config.code_level`; not when translating again)."""
    module = ast.Module(body=[node], type_ignores=[])
    scan = ast_util.scan(module)
    kinds = _TreeKinds(module, scan.kinds)
    # A generator (one the converted code calls) runs as Python: only the steps that enter
    # generators rewrite it (its calls, prints and f-strings), and the fence, which guards the
    # control-flow rewrites, does not apply. `to_static` of one is refused (`calls.top_level_target`).
    generator = ast_util.is_generator(node)
    if not generator and kinds.holds_any(fence.SCREENED):  # most functions hold none: no walk needed to pass them
        fence.verify(node, filename, function_name)
    effect_scope = None
    if kinds.holds_any((ast.For, ast.While, ast.If, ast.IfExp)):
        effect_scope = loop_bodies.mark(node)  # on the user's code, before rewrites add lambdas of their own
    namer = Namer(scan.names)
    ctx = ConversionContext(filename, function_name, namer, namer.new_symbol("jst"), effect_scope, class_name,
                            kinds.source)
    for index, step in enumerate(transformers.PIPELINE[:stages], start=1):
        if generator and not step.enters_generators:
            continue
        if step.triggers and not kinds.holds_any(step.triggers, step.source_only):  # nothing to rewrite: skip it
            if log_stages and config.code_level >= index:
                logger.info("dy2st: %s after %s: unchanged (nothing to rewrite)", function_name, step.name)
            continue
        if step.needs_analysis:
            analysis.resolve(module, step.needs_analysis)
        module = step.module.transform(module, ctx)
        kinds.step_ran(step, module)
        if log_stages and config.code_level >= index:
            logger.info("dy2st: %s after %s:\n%s", function_name, step.name, to_source(module.body[0]))
    return module.body[0], ctx


class _TreeKinds:
    """Which node types and attribute names a tree holds, for skipping steps by `triggers`.

    The tree is walked once. A step that runs may add the kinds in its `Step.creates`; when a
    later step's check hinges on one of those, the tree is searched for just those kinds,
    stopping at the first found, and through statement blocks alone when they are statements.
    """

    def __init__(self, tree, kinds: set):
        self._tree = tree
        self.source = frozenset(kinds)  # the user's function's own
        self._kinds = set(kinds)
        self._maybe_added: set = set()  # kinds steps that ran may have added, not yet looked for

    def holds_any(self, triggers, source_only: bool = False) -> bool:
        """Whether the tree holds any of `triggers` (`source_only`: the user's code did)."""
        if source_only:
            return not self.source.isdisjoint(triggers)
        if not self._kinds.isdisjoint(triggers):
            return True
        doubtful = self._maybe_added.intersection(triggers)
        if not doubtful:
            return False
        found = _find_kind(self._tree, doubtful)
        if found is None:
            self._maybe_added -= doubtful
            return False
        self._maybe_added.discard(found)
        self._kinds.add(found)
        return True

    def step_ran(self, step, tree) -> None:
        self._tree = tree
        self._maybe_added.update(step.creates)


def _find_kind(tree, kinds: set):
    """One of `kinds` (node types or attribute names) that `tree` holds, or None."""
    statements_only = all(isinstance(k, type) and issubclass(k, ast.stmt) for k in kinds)
    for node in ast_util.walk_blocks(tree) if statements_only else ast_util.walk(tree):
        if type(node) in kinds or (type(node) is ast.Attribute and node.attr in kinds):
            return type(node) if type(node) in kinds else node.attr
    return None


def to_source(node) -> str:
    return ast.unparse(ast.fix_missing_locations(node))


def source_at_level(fn: types.FunctionType, level: int | None = None) -> str:
    """The source of `fn` after the first `level` transformer steps (all of them when None)."""
    node, read = _read_function(fn)
    node, _ = transform(node, read.filename, fn.__name__, stages=level, class_name=_enclosing_class(fn))
    return to_source(node)


def refuse_generator(fn: types.FunctionType) -> None:
    """`to_static` of a generator function: the fence's refusal at its first `yield` (a program
    returns its values once). A generator the converted code calls, or nests, is converted for
    its calls only (see `transform`)."""
    node, read = _read_function(fn)
    fence.verify(node, read.filename, fn.__name__)


def convert_code(fn: types.FunctionType) -> ConvertedCode:
    node, read = _read_function(fn)
    node, ctx = transform(node, read.filename, fn.__name__, class_name=_enclosing_class(fn))
    code = _compile(node, fn, ctx.runtime, read.filename)
    if fn.__name__ == "<lambda>":
        code = code.replace(co_name="<lambda>", co_qualname=fn.__qualname__)
    register_converted_code(code)
    runtime.calls.register_converted(code)  # calls to its nested functions need no conversion
    log(1, "dy2st: converted %s (%s:%d)", fn.__qualname__, read.filename, read.first_line)
    return ConvertedCode(code, ctx.runtime, functools.partial(_translate_again, _identity(fn), read))


def _identity(fn) -> types.SimpleNamespace:
    """What translating `fn` again needs of it (names and code), without holding the function:
    its closure may hold large arrays."""
    return types.SimpleNamespace(__name__=fn.__name__, __qualname__=fn.__qualname__, __code__=fn.__code__)


def _translate_again(fn, read: _SourceRead) -> ast.FunctionDef:
    """The translation `convert_code` compiled, made again from the same source text."""
    node, _ = transform(read.parse(fn), read.filename, fn.__name__, class_name=_enclosing_class(fn), log_stages=False)
    return node


def source_of(converted_fn) -> str | None:
    """The translated source of a function `convert` returned (or a partial of one), or None."""
    converted = getattr(converted_fn, "__dy2st_converted__", None)
    if converted is None and isinstance(converted_fn, functools.partial):
        converted = getattr(converted_fn.func, "__dy2st_converted__", None)
    return converted.source if converted is not None else None


def _compile(inner: ast.FunctionDef, fn, runtime_name: str, filename: str) -> types.CodeType:
    """Compile `inner` (changed in place) inside a factory declaring the free variables;
    return its code object."""
    freevars = [n for n in fn.__code__.co_freevars if n != "__class__"] + [runtime_name]
    declarations = [
        ast.Assign(targets=[ast.Name(id=n, ctx=ast.Store())], value=ast.Constant(value=None)) for n in freevars
    ]
    # Compiled under another name: were the def bound to its own name inside the factory, a
    # recursive call (a global name) would become a free variable of the factory, left empty.
    inner.name = f"dy2st_converted_{inner.name}"
    class_name = _enclosing_class(fn)
    body = [inner]
    if class_name is not None:
        # A class around the def makes the compiler mangle private names as in the user's class
        # (by the name without leading underscores). Named with more leading underscores than
        # any name the code uses, so the method's own class name (`return Node(v, self)`,
        # `super(Node, self)`) stays the global it is instead of the factory's local.
        body = [ast.ClassDef(name=_mangling_alias(class_name, fn.__code__), bases=[], keywords=[], body=[inner],
                             decorator_list=[], type_params=[])]
    factory = ast.FunctionDef(
        name="dy2st_factory",
        args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=declarations + body,
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    module = ast.Module(body=[factory], type_ignores=[])
    copy_location_recursive(factory, inner)  # the factory's own nodes: `inner` has its locations
    try:
        module_code = _compile_located(module, filename)
    except SyntaxError as err:
        raise ConversionError(
            f"The converted code does not compile: {err.msg}.",
            OriginInfo(filename, err.lineno or inner.lineno, fn.__name__),
            advice="this is a dy2st bug or an unsupported construct; please report it with this function.",
        ) from None
    code = _find_code(module_code, inner.name)
    return _renamed(code, code.co_qualname, fn.__qualname__).replace(co_name=fn.__name__)


def _mangling_alias(class_name: str, code: types.CodeType) -> str:
    """A class name that mangles private names as `class_name` does and that `code` (or a
    function nested in it) does not use."""
    used: set = set()
    stack = [code]
    while stack:
        c = stack.pop()
        used.update(c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    stripped = class_name.lstrip("_") or class_name
    alias = "_" + class_name
    while alias in used:
        alias = "_" + alias
    return alias if stripped != class_name or alias.lstrip("_") == stripped else class_name


def _compile_located(module: ast.Module, filename: str) -> types.CodeType:
    """`compile(module)`. Every node the transformers make gets a location (`Transformer.visit`,
    `copy_location_recursive`), so the walk that fills in missing ones (the parent's, as
    `ast.fix_missing_locations`) runs only where one was missed: compile refuses the tree then."""
    try:
        return compile(module, filename, "exec", dont_inherit=True)
    except TypeError as err:
        if "missing" not in str(err):
            raise
    return compile(ast_util.fix_missing_locations(module), filename, "exec", dont_inherit=True)


def _renamed(code: types.CodeType, old: str, new: str) -> types.CodeType:
    """`code` and its nested code objects with qualname prefix `old` written as `new` (also a
    class body's `__qualname__`, a string constant equal to its code's qualname: a class the
    function defines shows as `f.<locals>.Local`, as eagerly)."""
    qualname = new + code.co_qualname[len(old):] if code.co_qualname.startswith(old) else code.co_qualname
    consts = tuple(_renamed(c, old, new) if isinstance(c, types.CodeType)
                   else qualname if type(c) is str and c == code.co_qualname else c for c in code.co_consts)
    return code.replace(co_consts=consts, co_qualname=qualname)


def _find_code(code: types.CodeType, name: str) -> types.CodeType:
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name == name and const.co_name != "dy2st_factory":
                return const
            found = _find_code(const, name) if const.co_name != name else None
            if found is not None:
                return found
    return None
