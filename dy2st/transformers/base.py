"""What every transformer shares: the conversion context and location-preserving visits."""

from __future__ import annotations

import ast
import dataclasses

from dy2st import ast_util
from dy2st.analysis.anno import Fact, getanno
from dy2st.transformers import templates
from dy2st.transformers.naming import Namer


@dataclasses.dataclass
class ConversionContext:
    """State of one conversion, shared by the transformers of the pipeline.

    Attributes:
      filename: the user's source file; every generated node gets a line in it.
      function_name: the converted function's name, for messages.
      namer: the one source of fresh names.
      runtime: the name through which generated code reaches `dy2st.runtime`.
      effect_scope: `analysis.loop_bodies.EffectScope` of the function (None: no control flow),
        for the guards the jump steps make.
      class_name: the class whose body the function is defined in (None: none), whose name the
        compiler mangles private names with (`self.__n` is `self._Model__n`): runtime operators
        that reach variables by name are told it (`state_access`).
      source_kinds: the node types (and attribute names) of the user's function, so that a
        step skips the searches for what it does not hold (`ast_util.scan`).
    """

    filename: str
    function_name: str
    namer: Namer
    runtime: str
    effect_scope: object = None
    class_name: str | None = None
    source_kinds: frozenset | None = None  # None: not known, anything may be there

    def source_holds(self, kind) -> bool:
        """Whether the user's function may hold `kind` (a node type or attribute name)."""
        return self.source_kinds is None or kind in self.source_kinds


_LOCATED = (ast.expr, ast.stmt, ast.excepthandler, ast.keyword, ast.arg, ast.alias, ast.pattern)


def copy_location_recursive(new, origin) -> None:
    """Give `origin`'s location to every node under `new` that has none of its own.

    Generated nodes thereby point at the user's line they replace, so tracebacks, jax source
    info and error messages name the user's code with no source map. A node with a location
    is the user's, or was given one when its own rewrite returned: nothing under it lacks one
    (a step that changes a located node in place locates what it adds), so the walk stops
    there: it walks what this rewrite made, not the user's code it holds again.
    """
    if origin is None or not hasattr(origin, "lineno"):
        return
    # One-line spans: a generated call spanning the whole replaced `if` would report its
    # *last* line (3.11 places a method call at its attribute's end).
    lineno, col_offset = origin.lineno, getattr(origin, "col_offset", 0)
    stack = list(new) if isinstance(new, list) else [new]
    while stack:
        node = stack.pop()
        kind = type(node)
        plan = _plans.get(kind) or _plan(kind)
        fields, located = plan
        if located:
            if getattr(node, "lineno", None) is not None:
                continue
            node.lineno = node.end_lineno = lineno
            node.col_offset = node.end_col_offset = col_offset
        for field in fields:
            value = getattr(node, field, None)
            if type(value) is list:
                stack.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)


def stamp(origin, nodes, whole_span: bool = False) -> None:
    """Give `origin`'s location to each of `nodes` (not to what is under them): for the
    hottest rewrites, which locate the few nodes they make as they make them, sparing
    `copy_location_recursive` the walk (it stops at located nodes). A one-line span at its
    start, as `copy_location_recursive` gives; `whole_span`: its whole span, for the parts of
    a call rewritten in place (`f(x)` -> `jst.convert_call(f)(x)`), which keep the call's."""
    lineno, col_offset = origin.lineno, origin.col_offset
    end_lineno, end_col_offset = (origin.end_lineno, origin.end_col_offset) if whole_span else (lineno, col_offset)
    for node in nodes:
        node.lineno, node.col_offset = lineno, col_offset
        node.end_lineno, node.end_col_offset = end_lineno, end_col_offset


_plans: dict = {}  # node type -> (its fields that may hold nodes, whether it has a location)


def _plan(kind) -> tuple:
    plan = _plans[kind] = (ast_util.child_fields(kind), issubclass(kind, _LOCATED))
    return plan


class Transformer(ast_util.NodeTransformer):
    """Base of the transformers: single use, locations copied onto replacements."""

    # Whether the step rewrites the body of a generator the user nested in the function (its
    # control flow runs as Python; only call_trees' calls, prints and f-strings enter it).
    enters_generators = False

    def __init__(self, ctx: ConversionContext):
        self.ctx = ctx
        self._used = False

    def visit(self, node):
        # ast_util.NodeTransformer.visit, inlined: this runs once per node visited.
        function = self._visit_functions[type(node)]
        if function is None or (type(node) is ast.FunctionDef and not self.enters_generators
                                and ast_util.is_generator(node)):
            return node  # (a generator the user nested in the function runs as Python: see the fence)
        result = function(self, node)
        if result is not node and result is not None:
            copy_location_recursive(result, node)
        return result

    def visit_ClassDef(self, node):
        """A class defined in the function: its methods are functions, rewritten as any; its
        own statements run in the class's scope, which the functions and lambdas the steps
        make could not see (`b = a and 2` would read a global `a`): left as written."""
        body = []
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                ast_util.add_visited(body, self.visit(stmt))
            else:
                body.append(stmt)
        node.body = body
        return node

    def transform(self, tree):
        if self._used:
            raise RuntimeError(f"{type(self).__name__} instances are single-use")
        self._used = True
        return self.visit(tree)


class StatementTransformer(Transformer):
    """A Transformer for steps whose rewrites are all of statements: its generic visit walks
    statement blocks only and never enters an expression (no statement can be inside one)."""

    generic_visit = ast_util.visit_blocks


def pass_python_body(node, call) -> None:
    """`python_reason='...'` (and `refuse_staged=True` for loops) on the runtime call replacing
    `node`, when its body or branches have Python effects (`Fact.PYTHON_BODY`, see
    `dy2st.analysis.loop_bodies`)."""
    found = getanno(node, Fact.PYTHON_BODY, None)
    if found is None:
        return
    call.keywords.append(ast.keyword(arg="python_reason", value=templates.constant(found.reason)))
    if found.refuse_staged and isinstance(node, (ast.For, ast.While)):
        call.keywords.append(ast.keyword(arg="refuse_staged", value=templates.constant(True)))
