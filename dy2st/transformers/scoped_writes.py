"""Follows writes to `global` (and the function's own `nonlocal`) names with a traced-ness check.

Before::

    def f(x):
        global total
        total = total + x.sum()

After::

    def f(x):
        global total
        jst.remember_global('total')
        total = total + x.sum()
        jst.check_scoped_write(total, 'total', 'global')

(`remember_global` keeps the value before the write, so that a refused write restores it.)
A traced value in such a variable would outlive the trace (a leaked tracer) and never be
updated by the compiled program; the check raises `ScopeWriteError` at the user's line. A
Python value passes. Whether a value is traced is only known at run time, so the fence cannot
do this. Branch functions made by the if/else step re-declare the names they carry; their
`set_state` assignments (from a generated name) are not user writes and are not checked;
the assignment of a staged `if`'s or loop's results is (a Python value that both branches
change becomes traced there).
"""

from __future__ import annotations

import ast

from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class ScopedWriteTransformer(StatementTransformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._guarded: list[dict] = []  # per function: name -> 'global' | 'nonlocal'

    def visit_FunctionDef(self, node):
        outer = self._guarded[-1] if self._guarded else {}
        top = not self._guarded
        guarded = {}
        for stmt in node.body:
            if isinstance(stmt, ast.Global):
                guarded.update(dict.fromkeys(stmt.names, "global"))
            elif isinstance(stmt, ast.Nonlocal):
                for name in stmt.names:
                    if top:
                        guarded[name] = "nonlocal"
                    elif name in outer and self.ctx.namer.is_generated(node.name):
                        guarded[name] = outer[name]
        self._guarded.append(guarded)
        self.generic_visit(node)
        self._guarded.pop()
        return node

    def visit_Lambda(self, node):
        return node

    def _checked(self, node, targets):
        guarded = self._guarded[-1] if self._guarded else {}
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and n.id in guarded]
        if not names:
            return node
        checks = [
            templates.replace(
                "jst.check_scoped_write(value, name, kind)",
                jst=self.ctx.runtime,
                value=name,
                name=templates.constant(name),
                kind=templates.constant(guarded[name]),
            )[0]
            for name in dict.fromkeys(names)
        ]
        # A global's value before the write, so a refused write can put it back.
        remembers = [
            templates.replace("jst.remember_global(name)", jst=self.ctx.runtime, name=templates.constant(name))[0]
            for name in dict.fromkeys(names) if guarded[name] == "global"
        ]
        return remembers + [node] + checks

    def visit_Assign(self, node):
        if isinstance(node.value, ast.Name) and self.ctx.namer.is_generated(node.value.id):
            return node  # set_state's `(y,) = state`
        return self._checked(node, node.targets)

    def visit_AugAssign(self, node):
        return self._checked(node, [node.target])

    def visit_AnnAssign(self, node):
        return self._checked(node, [node.target]) if node.value is not None else node


def transform(tree, ctx):
    return ScopedWriteTransformer(ctx).transform(tree)
