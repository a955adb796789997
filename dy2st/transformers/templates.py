"""Code templates over ast nodes: generated code is written as Python, never pasted as text.

`replace("x = f(y)", x=node, y="name")` parses the template (our own fixed code, never user
source; parsed once, then copied per use), substitutes each placeholder with a deep copy of its
replacement and fixes Load/Store contexts. A placeholder may become:

* a `str`: a variable of that name;
* an ast expression: inserted as is (copied), its context set to the placeholder's;
* a list of ast statements: only where the placeholder stands alone as a statement;
* a `str` for a function's name or parameter in `def placeholder(param)`.

Unknown placeholders (keys that do not occur in the template) are refused, so a typo cannot
silently produce wrong code.
"""

from __future__ import annotations

import ast
import textwrap

from dy2st import ast_util

_CTX_NODES = (ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Starred)
_LOCATION_FIELDS = ("lineno", "col_offset", "end_lineno", "end_col_offset")


class TemplateError(ValueError):
    """A template was used wrongly (an internal bug in a transformer, not a user error)."""


def _strip_locations(tree):
    for node in ast_util.walk(tree):
        for field in _LOCATION_FIELDS:
            if hasattr(node, field):
                delattr(node, field)


def _set_ctx(node, ctx):
    if isinstance(node, _CTX_NODES):
        node.ctx = ctx
        if isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                _set_ctx(elt, ctx)
        elif isinstance(node, ast.Starred):
            _set_ctx(node.value, ctx)
    return node


def _name(identifier: str, ctx):
    return ast.Name(id=identifier, ctx=ctx)


class _Substitution:
    """Copies a parsed template with its placeholders substituted, in one pass."""

    def __init__(self, replacements):
        self.replacements = replacements
        self.used = set()

    def block(self, values: list) -> list:
        """A copy of a list field: a statement placeholder splices in, a dropped node leaves."""
        out = []
        for value in values:
            if not isinstance(value, ast.AST):
                out.append(value)
                continue
            new = self.node(value)
            if isinstance(new, list):
                out.extend(new)
            elif new is not None:
                out.append(new)
        return out

    def node(self, node):
        """A copy of `node` substituted: a node, a list of statements, or None (dropped)."""
        kind = type(node)
        if kind is ast.Name and node.id in self.replacements:
            return self._expression(node.id, type(node.ctx)())
        if kind is ast.Expr and type(node.value) is ast.Name:
            value = self.replacements.get(node.value.id)
            if isinstance(value, list):
                self.used.add(node.value.id)
                return [ast_util.copy_tree(s) for s in value]
        if kind is ast.Global or kind is ast.Nonlocal:
            return self._declaration(node)
        new = kind.__new__(kind)
        state = new.__dict__
        for key, value in node.__dict__.items():
            if isinstance(value, ast.AST):
                value = self.node(value)
            elif isinstance(value, list):
                value = self.block(value)
            state[key] = value
        if kind is ast.FunctionDef and node.name in self.replacements:
            self.used.add(node.name)
            new.name = self.replacements[node.name]
        elif kind is ast.arg and node.arg in self.replacements:
            self.used.add(node.arg)
            new.arg = self.replacements[node.arg]
        return new

    def _expression(self, placeholder: str, ctx):
        value = self.replacements[placeholder]
        self.used.add(placeholder)
        if isinstance(value, str):
            return _name(value, ctx)
        if isinstance(value, ast.expr):
            return _set_ctx(ast_util.copy_tree(value), ctx)
        raise TemplateError(f"placeholder {placeholder!r} is used as an expression; got {type(value).__name__}")

    def _declaration(self, node):
        names = []
        for name in node.names:
            value = self.replacements.get(name)
            if value is None:
                names.append(name)
                continue
            self.used.add(name)
            names.extend(value if isinstance(value, (list, tuple)) else [value])
        if not names:
            return None
        return type(node)(names=names)


# Template text -> its statements without locations. Templates are a few dozen fixed strings
# of dy2st's own: each is parsed once, and each use copies it (substituting as it goes),
# several times faster than parsing it again.
_parsed: dict[str, list] = {}


def _statements(template: str) -> list:
    """The parsed statements of `template` (shared: never to be changed)."""
    body = _parsed.get(template)
    if body is None:
        tree = ast.parse(textwrap.dedent(template))
        _strip_locations(tree)
        body = _parsed[template] = tree.body
    return body


def replace(template: str, **replacements) -> list:
    """Statements of `template` with placeholders substituted; see the module docstring."""
    substitution = _Substitution(replacements)
    body = substitution.block(_statements(template))
    unknown = set(replacements) - substitution.used
    if unknown:
        raise TemplateError(f"placeholders {sorted(unknown)} do not occur in template:\n{template}")
    return body


def replace_as_expression(template: str, **replacements):
    """The single expression `template` stands for, placeholders substituted."""
    body = replace(template, **replacements)
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        raise TemplateError(f"template is not a single expression:\n{template}")
    return body[0].value


def name(identifier: str, store: bool = False):
    """A Name node (hand-built nodes are kept to names and constants)."""
    return _name(identifier, ast.Store() if store else ast.Load())


def attribute(base: str, attr: str):
    """A node reading `base.attr` (for the hottest templates, built without parsing)."""
    return ast.Attribute(value=_name(base, ast.Load()), attr=attr, ctx=ast.Load())


def call(function, args: list, keywords: list | None = None):
    """`function(*args, **keywords)` as a node, `args` inserted as they are (not copied): for
    the hottest rewrites (one per `if` and loop), built without a template."""
    return ast.Call(func=function, args=args, keywords=keywords or [])


def arguments(params=()):
    """The parameter list `(<params>)` of a generated function or lambda, as a node."""
    return ast.arguments(args=[ast.arg(arg=p) for p in params], posonlyargs=[], vararg=None, kwonlyargs=[],
                         kw_defaults=[], kwarg=None, defaults=[])


def thunk(body, params=()):
    """`lambda <params>: body` as a node (used to delay evaluation of an operand)."""
    return ast.Lambda(args=arguments(params), body=body)


def constant(value):
    return ast.Constant(value=value, kind=None)


def tuple_of(elts, store: bool = False):
    ctx = ast.Store() if store else ast.Load()
    return ast.Tuple(elts=[_set_ctx(ast_util.copy_tree(e), ctx) for e in elts], ctx=ctx)
