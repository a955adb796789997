"""Which symbols each statement reads and writes, and the scope of each function.

Facts attached: `Fact.ACTIVITY` on every statement, `Fact.SCOPE` on every FunctionDef and
Lambda. Nested functions, lambdas and comprehensions are their own scopes: what they bind stays
inside; the free names they read count as reads of the statement that defines them.
"""

from __future__ import annotations

import ast
import dataclasses

from dy2st import ast_util
from dy2st.analysis import qual_names
from dy2st.analysis.anno import Fact, getanno, setanno
from dy2st.analysis.qual_names import QualifiedName

_FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclasses.dataclass(frozen=True)
class Activity:
    """Symbols a statement reads and writes. `kills` are plain names it surely rebinds."""

    reads: frozenset = frozenset()
    writes: frozenset = frozenset()
    kills: frozenset = frozenset()

    @property
    def written_names(self) -> frozenset:
        return frozenset(s for s in self.writes if not s.is_composite)


@dataclasses.dataclass(frozen=True)
class FunctionScope:
    """The scope of one function: parameters, locals, and declared globals/nonlocals."""

    params: frozenset
    bound: frozenset
    globals: frozenset
    nonlocals: frozenset

    @property
    def locals(self) -> frozenset:
        return (self.params | self.bound) - self.globals - self.nonlocals


class _ActivityVisitor(ast_util.NodeVisitor):
    """Collects reads/writes of one statement or expression without entering nested scopes."""

    def __init__(self):
        self.reads: set = set()
        self.writes: set = set()
        self.kills: set = set()
        self.declared_globals: set = set()
        self.declared_nonlocals: set = set()

    def _inner(self) -> "_ActivityVisitor":
        """A fresh visitor of the same kind, for a nested scope or a comprehension."""
        return _ActivityVisitor()

    def _write(self, target, kill=True):
        symbol = qual_names.from_node(target)
        if symbol is None:
            self.visit(target)  # e.g. a[i] = v: reads a and i
            return
        self.writes.add(symbol)
        if symbol.is_composite:
            self._read_parents(symbol)
        elif kill:
            self.kills.add(symbol)

    def _read_parents(self, symbol: QualifiedName):
        parent = symbol.parent
        while parent is not None:
            self.reads.add(parent)
            parent = parent.parent

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Del):  # `del x` needs x bound: it reads the binding it removes
            self.reads.add(QualifiedName(node.id))
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._write(node)
        else:
            self.reads.add(QualifiedName(node.id))

    def visit_Attribute(self, node):
        self._visit_composite(node)

    def visit_Subscript(self, node):
        self._visit_composite(node)

    def _visit_composite(self, node):
        symbol = qual_names.from_node(node)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            if symbol is not None:
                if isinstance(node.ctx, ast.Del):  # (`del d['k']` needs the key: a read, as for a name)
                    self.reads.add(symbol)
                self._write(node)
            else:
                self.visit(node.value)
                if isinstance(node, ast.Subscript):
                    self.visit(node.slice)
            return
        if symbol is not None:
            self.reads.add(symbol)
            self._read_parents(symbol)
        else:
            self.generic_visit(node)

    def visit_Call(self, node):
        # An inner if/loop already rewritten (`jst.convert_ifelse(..., ('y', ('L', (-1,))), ...)`)
        # reads its state, and writes back the attributes and items in it (`L[-1] = v`):
        # enclosing ifs and loops must carry them too.
        for symbol in state_of_call(node):
            self.reads.add(symbol)
            self._read_parents(symbol)
            if symbol.is_composite:
                self.writes.add(symbol)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self.visit(node.value)
        symbol = qual_names.from_node(node.target)
        if symbol is not None:
            self.reads.add(symbol)
        self._write(node.target, kill=False)

    def visit_Global(self, node):
        self.declared_globals.update(node.names)

    def visit_Nonlocal(self, node):
        self.declared_nonlocals.update(node.names)

    def visit_Import(self, node):
        for alias in node.names:
            name = alias.asname or alias.name.split(".")[0]
            self.writes.add(QualifiedName(name))
            self.kills.add(QualifiedName(name))

    visit_ImportFrom = visit_Import

    def visit_FunctionDef(self, node):
        for expr in node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]:
            self.visit(expr)
        self.reads.update(free_reads(node, self._inner()))
        self._write(ast.Name(id=node.name, ctx=ast.Store()))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        for expr in node.bases + node.decorator_list + [k.value for k in node.keywords]:
            self.visit(expr)
        inner = self._inner()
        for stmt in node.body:
            inner.visit(stmt)
        self.reads.update(inner.reads - inner.writes)
        self._write(ast.Name(id=node.name, ctx=ast.Store()))

    def visit_Lambda(self, node):
        for expr in node.args.defaults:
            self.visit(expr)
        self.reads.update(free_reads(node, self._inner()))

    def _visit_comprehension(self, node):
        inner = self._inner()
        for gen in node.generators:
            inner.visit(gen)
        for field in ("elt", "key", "value"):
            if hasattr(node, field):
                inner.visit(getattr(node, field))
        bound = {s for s in inner.writes if not s.is_composite}
        self.reads.update(s for s in inner.reads if QualifiedName(s.base) not in bound)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self._write(node.target)

    def visit_ExceptHandler(self, node):
        if node.type is not None:
            self.visit(node.type)
        if node.name is not None:
            self._write(ast.Name(id=node.name, ctx=ast.Store()))
        for stmt in node.body:
            self.visit(stmt)


class _ReusingVisitor(_ActivityVisitor):
    """An _ActivityVisitor that, for a statement already summarised in this resolve, adds its
    summary instead of walking it again (resolve goes bottom up, so each subtree is walked
    once rather than once per enclosing statement)."""

    def __init__(self, summaries: dict, lambdas: list):
        super().__init__()
        self._summaries = summaries
        self._lambdas = lambdas  # every lambda met, for resolve to give its scope

    def _inner(self) -> "_ActivityVisitor":
        return _ReusingVisitor(self._summaries, self._lambdas)

    def visit_Lambda(self, node):
        self._lambdas.append(node)
        super().visit_Lambda(node)

    def visit(self, node):
        summary = self._summaries.get(id(node))
        if summary is None:  # NodeVisitor.visit, inlined (it runs once per node visited)
            function = self._visit_functions[type(node)]
            return None if function is None else function(self, node)
        activity, declared_globals, declared_nonlocals = summary
        self.reads |= activity.reads
        self.writes |= activity.writes
        self.kills |= activity.kills
        self.declared_globals |= declared_globals
        self.declared_nonlocals |= declared_nonlocals
        return None


def _activity(visitor: _ActivityVisitor) -> Activity:
    return Activity(frozenset(visitor.reads), frozenset(visitor.writes), frozenset(visitor.kills))


# Where the runtime's control-flow operators take the paths of their state (`state_access`).
_STATE_ARGUMENT = {"convert_ifelse": 3, "convert_while": 2, "convert_for": 2}


def state_of_call(call) -> tuple:
    """The state symbols a generated `<runtime>.convert_ifelse/while/for(...)` call names."""
    func = call.func
    if type(func) is not ast.Attribute or type(func.value) is not ast.Name:
        return ()
    index = _STATE_ARGUMENT.get(func.attr)
    if index is None or len(call.args) <= index:
        return ()
    paths = call.args[index]
    if type(paths) is not ast.Constant or type(paths.value) is not tuple:
        return ()
    return tuple(qual_names.from_path(path) for path in paths.value)


def composites_in_write_order(blocks) -> dict:
    """`symbol -> rank` of the attributes and items (`d['k']`, `self.n`) the statements of
    `blocks` assign, in the order of their first assignment in the source (a rewritten inner
    `if` or loop counts as assigning its state's, in its order): a dict's new keys are inserted
    in that order."""
    order: dict = {}
    for block in blocks:
        for stmt in block:
            for node in ast_util.walk_blocks(stmt):
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                    targets = [node.target]
                elif isinstance(node, ast.Expr):
                    targets = []
                else:
                    continue
                written = [qual_names.from_node(part) for target in targets for part in _unpacked(target)]
                if isinstance(node.value, ast.Call):
                    written += state_of_call(node.value)
                for symbol in written:
                    if symbol is not None and symbol.is_composite:
                        order.setdefault(symbol, len(order))
    return order


def _unpacked(target):
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _unpacked(element)
    elif isinstance(target, ast.Starred):
        yield from _unpacked(target.value)
    else:
        yield target


def block_activity(statements: list) -> Activity:
    """What the statements of a block read, write and kill, from their `Fact.ACTIVITY` (walked
    only where a statement has none: one made after the last resolve)."""
    reads, writes, kills = set(), set(), set()
    for stmt in statements:
        activity = getanno(stmt, Fact.ACTIVITY, None) or activity_of(stmt)
        reads |= activity.reads
        writes |= activity.writes
        kills |= activity.kills
    return Activity(frozenset(reads), frozenset(writes), frozenset(kills))


def activity_of(nodes) -> Activity:
    visitor = _ActivityVisitor()
    for node in nodes if isinstance(nodes, list) else [nodes]:
        visitor.visit(node)
    return _activity(visitor)


def free_reads(func, visitor: _ActivityVisitor | None = None) -> set:
    """Names a nested function or lambda reads from its enclosing scopes (`visitor`: a fresh
    one to collect its body with)."""
    visitor = visitor if visitor is not None else _ActivityVisitor()
    body = func.body if isinstance(func.body, list) else [func.body]
    for stmt in body:
        visitor.visit(stmt)
    bound = {s.base for s in visitor.writes if not s.is_composite} | _param_names(func.args)
    bound -= visitor.declared_nonlocals | visitor.declared_globals
    return {s for s in visitor.reads if s.base not in bound}


def _param_names(args) -> set:
    params = args.posonlyargs + args.args + args.kwonlyargs
    params += [a for a in (args.vararg, args.kwarg) if a is not None]
    return {p.arg for p in params}


def function_scope(func, visitor: _ActivityVisitor | None = None) -> FunctionScope:
    visitor = visitor if visitor is not None else _ActivityVisitor()
    body = func.body if isinstance(func.body, list) else [func.body]
    for stmt in body:
        visitor.visit(stmt)
    bound = frozenset(s.base for s in visitor.writes if not s.is_composite)
    return FunctionScope(
        params=frozenset(_param_names(func.args)),
        bound=bound,
        globals=frozenset(visitor.declared_globals),
        nonlocals=frozenset(visitor.declared_nonlocals),
    )


def resolve(tree) -> None:
    """Attach ACTIVITY to every statement and SCOPE to every function in `tree`.

    Bottom up: statements (found through statement blocks alone) come inner first, and each
    statement's visitor adds the summaries of the statements inside it instead of walking
    them again. Lambdas sit in expressions: the visitors note each they meet (every
    expression of a statement is visited once, with its statement).
    """
    summaries: dict = {}  # id(statement) -> (Activity, declared globals, declared nonlocals)
    lambdas: list = []
    for node in reversed(list(ast_util.walk_blocks(tree))):
        if isinstance(node, ast.stmt):
            visitor = _ReusingVisitor(summaries, lambdas)
            visitor.visit(node)
            activity = _activity(visitor)
            summaries[id(node)] = (activity, visitor.declared_globals, visitor.declared_nonlocals)
            setanno(node, Fact.ACTIVITY, activity)
        if isinstance(node, _FUNCTION_NODES):
            setanno(node, Fact.SCOPE, function_scope(node, _ReusingVisitor(summaries, lambdas)))
    for node in lambdas:
        setanno(node, Fact.SCOPE, function_scope(node, _ReusingVisitor(summaries, [])))


def observed_containers(nodes, composites) -> frozenset:
    """The containers of `composites` (`D` of `D['b']`, `self` of `self.h`) that `nodes` use in a
    way that can tell whether the item or attribute exists: anything but reading or writing one
    of `composites` itself (`D.get('b', v)`, `'b' in D`, `len(D)`, `f(D)`, `self.step()`).

    A staged loop gives an item or attribute first set inside it a value from the first
    iteration on; eagerly, the first iteration sees it missing. Only a body that observes its
    container can tell the difference.
    """
    containers = {s.parent for s in composites if s.is_composite}
    if not containers:
        return frozenset()
    observed = set()

    def visit(node, part_of_composite: bool) -> None:
        symbol = qual_names.from_node(node) if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) else None
        if symbol is not None and not part_of_composite:
            if symbol in composites:
                _visit_keys(node)  # D['b'] itself: not an observation of D
                return
            for container in containers:
                if _within(symbol, container):
                    observed.add(container)
        for child in ast.iter_child_nodes(node):
            inner = symbol is not None and child is getattr(node, "value", None)
            visit(child, part_of_composite or inner)

    def _visit_keys(node) -> None:
        if isinstance(node, ast.Subscript):
            visit(node.slice, False)

    for node in nodes if isinstance(nodes, list) else [nodes]:
        visit(node, False)
    return frozenset(observed)


def _within(symbol: QualifiedName, container: QualifiedName) -> bool:
    """`symbol` is `container` or reaches into it (`D.get` of `D`, `self.w.x` of `self.w`)."""
    return symbol.base == container.base and symbol.path[:len(container.path)] == container.path
