"""Rewrites `break` into a flag, and moves every loop's `else` block after the loop.

Before::

    while i < n:
        if x[i] > 0:
            break
        i += 1
    else:
        found = False

After::

    break_ = False
    while not break_ and i < n:
        if x[i] > 0:
            break_ = True
        if not break_:
            i += 1
    if not break_:
        found = False

A `for` loop cannot take the flag into its header, so the flag's name is attached to the loop
as `Fact.BREAK_FLAG`; the loops transformer makes the runtime check it before each item. The
statements after a `break` (in its block and in every enclosing block of the same loop body)
move under `if not break_:`. The flag is needed because the `if` around a `break` becomes a
nested function, where a bare `break` is a SyntaxError, and because a staged loop can only stop
through its condition. A loop's `else` runs when the loop ends without `break`; with no `break`
it simply follows the loop. Runs after return_statements (whose `return`s in loops become
`break`s) and before the if/loop transformers.
"""

from __future__ import annotations

import gast

from dy2st.analysis.anno import Fact, setanno
from dy2st.transformers import templates
from dy2st.transformers.base import Transformer, copy_location_recursive

_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef, gast.Lambda)


class _Loop:
    """Walk state of one loop body: its flag (made on first `break`) and break count."""

    def __init__(self):
        self.flag = None
        self.breaks = 0


class BreakTransformer(Transformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._loops: list[_Loop | None] = []

    # -- scopes: a nested function's loops are its own ---------------------------------
    def visit_FunctionDef(self, node):
        self._loops.append(None)
        node.body = self._block(node.body)
        self._loops.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        return node

    # -- blocks --------------------------------------------------------------------------
    def _block(self, stmts):
        """Visit a block; the rest of it after a statement that may break goes under a guard."""
        out = []
        loop = self._loops[-1] if self._loops else None
        for i, stmt in enumerate(stmts):
            before = loop.breaks if loop is not None else 0
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new] if new is not None else [])
            if loop is None or loop.breaks == before:
                continue
            if isinstance(stmt, gast.Break):
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

    def visit_Break(self, node):
        loop = self._loops[-1]
        if loop.flag is None:
            loop.flag = self.ctx.namer.new_symbol("break_", display="the break flag", exit_flag=True)
        loop.breaks += 1
        return templates.replace("flag = True", flag=loop.flag)

    # -- loops ---------------------------------------------------------------------------
    def _visit_loop(self, node):
        orelse = self._block(node.orelse)  # an `else` belongs to the enclosing loop's body
        node.orelse = []
        loop = _Loop()
        self._loops.append(loop)
        node.body = self._block(node.body)
        self._loops.pop()
        if loop.flag is None:
            return [node] + orelse
        if isinstance(node, gast.While):
            node.test = templates.replace_as_expression("not flag and test", flag=loop.flag, test=node.test)
        else:
            setanno(node, Fact.BREAK_FLAG, loop.flag)
        before = templates.replace("flag = False", flag=loop.flag)
        after = templates.replace("if not flag:\n    orelse", flag=loop.flag, orelse=orelse) if orelse else []
        copy_location_recursive(before + after, node)
        return before + [node] + after

    visit_While = visit_For = _visit_loop


def transform(tree, ctx):
    return BreakTransformer(ctx).transform(tree)
