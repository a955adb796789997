"""Names definitely bound before each statement (a forward "must" analysis).

Fact attached: `Fact.DEFINED_IN` on every statement. The loop transformer uses it to tell
which names may still be unbound at a loop (a search loop's result, state only later
iterations read), where a staged loop must not let Python raise.
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.analysis.activity import activity_of
from dy2st.analysis.anno import Fact, getanno, setanno

# A block that always jumps away (return/raise/break/continue) leaves "everything" defined:
# it does not restrict what is defined where paths meet.
_ALL = None


def _meet(a, b):
    if a is _ALL:
        return b
    if b is _ALL:
        return a
    return a & b


class _Definitions:
    def block(self, stmts, defined):
        for stmt in stmts:
            if defined is _ALL:  # reached on no path: nothing known (the nested statements too)
                self.stmt(stmt, frozenset())
                continue
            defined = self.stmt(stmt, defined)
        return defined

    def stmt(self, node, defined):
        setanno(node, Fact.DEFINED_IN, defined)
        handler = getattr(self, f"_{type(node).__name__}", self._simple)
        return handler(node, defined)

    def _simple(self, node, defined):
        act = getanno(node, Fact.ACTIVITY)
        names = {s.base for s in act.kills}
        if isinstance(node, ast.Delete):
            return defined - {t.id for t in node.targets if isinstance(t, ast.Name)}
        return defined | names

    def _jump(self, node, defined):
        return _ALL

    _Return = _Raise = _Break = _Continue = _jump

    def _If(self, node, defined):
        return _meet(self.block(node.body, defined), self.block(node.orelse, defined))

    def _loop(self, node, defined):
        if isinstance(node, ast.For):
            target = {s.base for s in activity_of(node.target).kills}
            self.block(node.body, defined | target)
        else:
            self.block(node.body, defined)
        after_else = self.block(node.orelse, defined)
        has_break = any(isinstance(n, ast.Break) for n in _walk_loop_body(node.body))
        return defined if has_break or after_else is _ALL else after_else

    _While = _For = _loop

    def _With(self, node, defined):
        targets = {s.base for s in activity_of([i.optional_vars for i in node.items if i.optional_vars]).kills}
        after = self.block(node.body, defined | targets)
        # a body that raises may go on after the `with`, whose `__exit__` may suppress it
        return defined | targets if after is _ALL else after

    def _Try(self, node, defined):
        self.block(node.body, defined)
        for handler in node.handlers:
            self.block(handler.body, defined | ({handler.name} if handler.name is not None else set()))
        self.block(node.orelse, defined)
        after = self.block(node.finalbody, defined)
        return defined if after is _ALL else after

    _TryStar = _Try

    def _Match(self, node, defined):
        for case in node.cases:
            bound = {s.base for s in activity_of(case.pattern).kills}
            self.block(case.body, defined | bound)
        return defined


def _walk_loop_body(stmts):
    """Statements of a loop body, not descending into nested loops or functions."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.For, ast.While)):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(getattr(node, field, []) or [])


def resolve(tree) -> None:
    """Attach DEFINED_IN to the statements of every function in `tree` (needs activity)."""
    for func in ast_util.function_defs(tree):
        scope = getanno(func, Fact.SCOPE)
        _Definitions().block(func.body, frozenset(scope.params))
