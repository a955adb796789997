"""Tree plumbing shared by `analysis` and `transformers`: visitors with cached dispatch,
walks and copies.

A conversion walks the function's tree a dozen times (fence, analysis, each transformer), so
`ast.NodeVisitor`'s per-node costs add up to a large part of it: building the method name
and looking it up for every node, a generator over the fields, and a visit of every
field-less node (`Load`, `Add`, ...). The classes here behave like `ast.NodeVisitor` /
`ast.NodeTransformer`, faster, and do not enter fields that hold no node to visit: names,
numbers, and the context and operator singletons (no visitor of ours visits those).
"""

from __future__ import annotations

import ast
from typing import NamedTuple


_AST = ast.AST
# ast.NodeVisitor.visit_Constant only re-dispatches to the deprecated visit_Num/visit_Str/...
_DEPRECATED_CONSTANT_VISITS = ("visit_Num", "visit_Str", "visit_Bytes", "visit_NameConstant", "visit_Ellipsis")


# Fields that never hold a node a visitor needs: names and numbers, and the context and
# operator singletons (`Load()`, `Add()`: no visitor here visits them; a `Compare` is visited
# whole). Skipping them spares most of a visit's lookups: `Name` and `Constant` have no other.
_LEAF_FIELDS = frozenset({"ctx", "op", "ops", "id", "attr", "arg", "name", "kind", "type_comment", "level",
                          "module", "asname", "conversion", "is_async", "simple"})
_child_fields: dict = {}  # node type -> its fields that may hold nodes, in _fields order


def is_private_name(name: str) -> bool:
    """Whether the compiler mangles `name` in a class body (`__n` -> `_Model__n`): two leading
    underscores, not two trailing ones, not dotted."""
    return name.startswith("__") and not name.endswith("__") and "." not in name


def child_fields(kind) -> tuple:
    """The fields of node type `kind` that may hold nodes (or lists of them) to visit."""
    fields = _child_fields.get(kind)
    if fields is None:
        fields = () if kind is ast.Constant else tuple(f for f in kind._fields if f not in _LEAF_FIELDS)
        _child_fields[kind] = fields
    return fields


class _DispatchTable(dict):
    """node type -> the function of one visitor class that visits it (None: nothing to do),
    filled on first lookup: `table[kind]` is one C-level dict lookup once the type is known."""

    def __init__(self, visitor_class):
        super().__init__()
        self._visitor_class = visitor_class

    def __missing__(self, node_type):
        return self._visitor_class._visit_function(node_type)


class _Dispatch:
    """Per visitor class: its `_DispatchTable` (`_visit_functions`)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._visit_functions = _DispatchTable(cls)

    @classmethod
    def _visit_function(cls, node_type):
        function = getattr(cls, "visit_" + node_type.__name__, None)
        if function is ast.NodeVisitor.visit_Constant and not any(hasattr(cls, n) for n in _DEPRECATED_CONSTANT_VISITS):
            function = None
        if function is None:
            function = cls.generic_visit
            if not child_fields(node_type) and function in _PLAIN_GENERIC_VISITS:
                function = None  # no node in it (Name, Constant, Load, ...): the generic visit is a no-op
            elif function is visit_blocks and not _block_fields_of(node_type):
                function = None  # a statement transformer at a simple statement (`x = ...`): nothing to enter
        cls._visit_functions[node_type] = function
        return function


class NodeVisitor(_Dispatch, ast.NodeVisitor):
    """`ast.NodeVisitor` with cached dispatch and a loop-based generic visit."""

    def visit(self, node):
        function = self._visit_functions[type(node)]
        return None if function is None else function(self, node)

    def generic_visit(self, node):
        kind = type(node)
        for field in _child_fields.get(kind) or child_fields(kind):
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, _AST):
                        self.visit(item)
            elif isinstance(value, _AST):
                self.visit(value)


class NodeTransformer(_Dispatch, ast.NodeTransformer):
    """`ast.NodeTransformer` with cached dispatch; lists are rebuilt only when changed."""

    def visit(self, node):
        function = self._visit_functions[type(node)]
        return node if function is None else function(self, node)

    def generic_visit(self, node):
        kind = type(node)
        for field in _child_fields.get(kind) or child_fields(kind):
            try:
                old = getattr(node, field)
            except AttributeError:
                continue
            if type(old) is list:
                _visit_list(self, old)
            elif isinstance(old, _AST):
                new = self.visit(old)
                if new is None:
                    delattr(node, field)
                elif new is not old:
                    setattr(node, field, new)
        return node


def _visit_list(visitor, values: list) -> None:
    """Visit the nodes of a list field in place, as ast.NodeTransformer does."""
    for index, value in enumerate(values):
        if isinstance(value, _AST):
            new = visitor.visit(value)
            if new is not value:
                break
    else:
        return  # nothing replaced (the common case): no new list
    rebuilt = values[:index]
    add_visited(rebuilt, new)
    for value in values[index + 1 :]:
        if isinstance(value, _AST):
            add_visited(rebuilt, visitor.visit(value))
        else:
            rebuilt.append(value)
    values[:] = rebuilt


def add_visited(values: list, new) -> None:
    """Add a visit's result: None drops the node, a node replaces it, a list splices in."""
    if new is None:
        return
    if isinstance(new, _AST):
        values.append(new)
    else:
        values.extend(new)


_PLAIN_GENERIC_VISITS = (NodeVisitor.generic_visit, NodeTransformer.generic_visit)
_BLOCK_FIELD_NAMES = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
_block_fields: dict = {}  # node type -> its statement-block fields, in _fields (source) order


def _block_fields_of(kind) -> tuple:
    """The fields of `kind` that hold statement blocks: bodies, `else`s, handlers, cases."""
    fields = _block_fields.get(kind)
    if fields is None:
        fields = _block_fields[kind] = tuple(f for f in kind._fields if f in _BLOCK_FIELD_NAMES)
    return fields


def visit_blocks(transformer, node):
    """A NodeTransformer's generic visit restricted to statement blocks, in field order. For
    steps that rewrite statements: expressions hold no statements, and are most of a tree."""
    for field in _block_fields_of(type(node)):
        block = getattr(node, field, None)
        if isinstance(block, list):
            _visit_list(transformer, block)
    return node


def copy_tree(node):
    """A deep copy of an ast tree, as `copy.deepcopy` makes but several times faster.

    Nodes and lists are new; other values are shared, being immutable (identifiers,
    constants, locations, and the analysis facts, whose dict is copied per node).
    """
    cls = type(node)
    new = cls.__new__(cls)
    state = new.__dict__
    for key, value in node.__dict__.items():
        if isinstance(value, _AST):
            value = copy_tree(value)
        elif isinstance(value, list):
            value = [copy_tree(item) if isinstance(item, _AST) else item for item in value]
        elif isinstance(value, dict):
            value = dict(value)
        state[key] = value
    return new


def walk(root):
    """Every node under `root`, itself included, like `ast.walk` but faster (depth first,
    not breadth first: for callers that do not depend on the order)."""
    return walk_scope([root], ())


def walk_scope(nodes: list, closed: tuple):
    """Every node of `nodes` and under them, not entering the nodes of the types `closed`
    (yielded, their children not): a function's own scope without its nested ones, say."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, closed):
            continue
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                stack.extend([item for item in value if isinstance(item, _AST)])
            elif isinstance(value, _AST):
                stack.append(value)


_FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def binds_a_name(expression) -> bool:
    """Whether `expression` holds a `:=` binding a name of the enclosing function (not one in a
    lambda of its own; a comprehension's `:=` binds the function's name too)."""
    return any(isinstance(n, ast.NamedExpr) for n in walk_scope([expression], (ast.Lambda,)))


def is_generator(function) -> bool:
    """Whether the `def` is a generator: a `yield` of its own (not of a function or lambda
    nested in it). Cached on the node: the transformers ask of every nested `def`."""
    known = getattr(function, "_dy2st_generator", None)
    if known is None:
        known = any(isinstance(n, (ast.Yield, ast.YieldFrom))
                    for n in walk_scope(list(function.body), _SCOPES))
        function._dy2st_generator = known
    return known


def walk_blocks(tree):
    """`tree` and every statement in it (with handlers and match cases), outer before inner,
    in source order: statement blocks only, never expressions, a fraction of a full walk."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for field in reversed(_block_fields_of(type(node))):
            block = getattr(node, field, None)
            if isinstance(block, list):
                stack.extend(reversed(block))


def function_defs(tree):
    """Every `def` and `async def` in `tree`, outer before inner, in source order (defs are
    statements, so only statement blocks are searched)."""
    return (node for node in walk_blocks(tree) if isinstance(node, _FUNCTION_DEFS))


def fix_missing_locations(tree):
    """`ast.fix_missing_locations(tree)`: each node lacking a location takes its parent's.

    The same rules (a missing lineno/col_offset, or a None end_lineno/end_col_offset, is filled
    in; a present one is handed down), with a stack instead of a recursive call and a
    generator per node: the generated function is a few hundred nodes.
    """
    stack = [(tree, 1, 0, 1, 0)]
    while stack:
        node, lineno, col_offset, end_lineno, end_col_offset = stack.pop()
        attributes = node._attributes
        if attributes:
            if "lineno" in attributes:
                if hasattr(node, "lineno"):
                    lineno = node.lineno
                else:
                    node.lineno = lineno
            if "end_lineno" in attributes:
                if getattr(node, "end_lineno", None) is None:
                    node.end_lineno = end_lineno
                else:
                    end_lineno = node.end_lineno
            if "col_offset" in attributes:
                if hasattr(node, "col_offset"):
                    col_offset = node.col_offset
                else:
                    node.col_offset = col_offset
            if "end_col_offset" in attributes:
                if getattr(node, "end_col_offset", None) is None:
                    node.end_col_offset = end_col_offset
                else:
                    end_col_offset = node.end_col_offset
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        stack.append((item, lineno, col_offset, end_lineno, end_col_offset))
            elif isinstance(value, _AST):
                stack.append((value, lineno, col_offset, end_lineno, end_col_offset))
    return tree


class TreeScan(NamedTuple):
    """What one walk of a tree finds: its node types and attribute names (`kinds`: not the
    context and operator singletons, which no step looks for), and every
    identifier it binds or reads (`names`: variables, parameters, functions, classes, imports,
    declarations, exception names)."""

    kinds: set
    names: set


ITEM_WRITE = "xs[k] = v"  # the kind `scan` adds for an item written or deleted


def scan(tree) -> TreeScan:
    """`TreeScan` of `tree`, in one plain stack walk (a conversion needs both before any step)."""
    kinds, names, stack, AST = set(), set(), [tree], ast.AST
    while stack:
        node = stack.pop()
        kind = type(node)
        kinds.add(kind)
        if kind is ast.Name:
            names.add(node.id)
        elif kind is ast.Call and type(node.func) is ast.Name and node.func.id == "super":
            kinds.add("super()")  # for the step that spells it out (`transformers.super_calls`)
        elif kind is ast.Attribute:
            kinds.add(node.attr)
        elif kind is ast.Subscript and type(node.ctx) is not ast.Load:
            kinds.add(ITEM_WRITE)  # for the step that marks their containers (`transformers.lists`)
        elif kind is ast.arg:
            names.add(node.arg)
        elif kind in _NAMED_NODES:
            names.add(node.name)
        elif kind is ast.Global or kind is ast.Nonlocal:
            names.update(node.names)
        elif kind is ast.alias:
            names.add(node.asname or node.name.split(".")[0])
        elif kind is ast.ExceptHandler and node.name:
            names.add(node.name)
        for field in _child_fields.get(kind) or child_fields(kind):
            value = getattr(node, field, None)
            if type(value) is list:
                stack.extend(v for v in value if isinstance(v, AST))
            elif isinstance(value, AST):
                stack.append(value)
    return TreeScan(kinds, names)


_NAMED_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def jumps_out(body: list, returns: bool = True, loop_jumps: bool = True,
              jump_kinds: tuple = (ast.Break, ast.Continue)) -> bool:
    """Whether `body` has a `return` (with `returns`), or a `break`/`continue` (of `jump_kinds`)
    of a loop around it (with `loop_jumps`; not one of a loop or function inside it)."""
    stack = [(stmt, False) for stmt in body]
    while stack:
        node, in_loop = stack.pop()
        if isinstance(node, _SCOPES):
            continue
        if returns and isinstance(node, ast.Return):
            return True
        if loop_jumps and isinstance(node, jump_kinds) and not in_loop:
            return True
        for child in ast.iter_child_nodes(node):
            # a loop's `else` is outside the loop: its break/continue are the enclosing loop's
            inside = isinstance(node, _LOOPS) and child not in node.orelse
            stack.append((child, in_loop or inside))
    return False


def child_blocks(node) -> list:
    """The statement lists directly under a compound statement: bodies, `else`, `finally`, the
    `except` handlers' and the `match` cases' bodies."""
    blocks = [getattr(node, f) for f in ("body", "orelse", "finalbody") if getattr(node, f, None)]
    blocks += [h.body for h in getattr(node, "handlers", [])]
    blocks += [c.body for c in getattr(node, "cases", [])]
    return blocks
