"""Rewrites `continue` into a flag that skips the rest of the loop body.

Before::

    for x in xs:
        if x.sum() < 0:
            continue
        total += x

After::

    for x in xs:
        continue_ = False
        if x.sum() < 0:
            continue_ = True
        if not continue_:
            total += x

The flag is reset at the top of every iteration, so it is never carried between iterations.
The statements after a `continue` (in its block and in every enclosing block of the same loop
body) move under `if not continue_:`, which the if transformer stages when the flag is traced.
Needed because the `if` around a `continue` becomes a nested function, where a bare `continue`
is a SyntaxError. Runs after break_statements, before the if/loop transformers.
"""

from __future__ import annotations

import gast

from dy2st.transformers import templates
from dy2st.transformers.base import Transformer, copy_location_recursive


class _Loop:
    """Walk state of one loop body: its flag (made on first `continue`) and count."""

    def __init__(self):
        self.flag = None
        self.continues = 0


class ContinueTransformer(Transformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._loops: list[_Loop | None] = []

    def visit_FunctionDef(self, node):
        self._loops.append(None)
        node.body = self._block(node.body)
        self._loops.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        return node

    def _block(self, stmts):
        """Visit a block; the rest of it after a statement that may continue goes under a guard."""
        out = []
        loop = self._loops[-1] if self._loops else None
        for i, stmt in enumerate(stmts):
            before = loop.continues if loop is not None else 0
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new] if new is not None else [])
            if loop is None or loop.continues == before:
                continue
            if isinstance(stmt, gast.Continue):
                return out  # the rest of the block is unreachable
            rest = self._block(stmts[i + 1 :])
            if rest:
                guard = templates.replace("if not flag:\n    rest", flag=loop.flag, rest=rest)
                copy_location_recursive(guard, stmt)
                out.extend(guard)
            return out
        return out

    def generic_visit(self, node):
        if isinstance(node, gast.stmt):
            for field in ("body", "orelse", "finalbody"):
                if getattr(node, field, None):
                    setattr(node, field, self._block(getattr(node, field)))
            for part in getattr(node, "handlers", []) + getattr(node, "cases", []):
                part.body = self._block(part.body)
            return node
        return super().generic_visit(node)

    def visit_Continue(self, node):
        loop = self._loops[-1]
        if loop.flag is None:
            loop.flag = self.ctx.namer.new_symbol("continue_", display="the continue flag", exit_flag=True)
        loop.continues += 1
        return templates.replace("flag = True", flag=loop.flag)

    def _visit_loop(self, node):
        node.orelse = self._block(node.orelse)  # an `else` belongs to the enclosing loop's body
        loop = _Loop()
        self._loops.append(loop)
        node.body = self._block(node.body)
        self._loops.pop()
        if loop.flag is not None:
            reset = templates.replace("flag = False", flag=loop.flag)
            copy_location_recursive(reset, node.body[0] if node.body else node)
            node.body = reset + node.body
        return node

    visit_While = visit_For = _visit_loop


def transform(tree, ctx):
    return ContinueTransformer(ctx).transform(tree)
