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

(The names the `else` always assigns go on the loop as `Fact.SETTLED_BY_ELSE`, see the loops
transformer.)
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

import ast

from dy2st.analysis.anno import Fact, setanno
from dy2st.transformers import templates
from dy2st.transformers.base import copy_location_recursive
from dy2st.transformers.jump_flags import JumpFlagTransformer


class BreakTransformer(JumpFlagTransformer):
    """See the module docstring."""

    jump_type = ast.Break
    flag_root = "break_"
    flag_display = "the break flag"

    def visit_Break(self, node):
        return self._jump(node)

    def visit_Continue(self, node):
        """A `continue` in a `finally` discards a `break` of the `try` in flight, as Python does:
        the flag is cleared (`for ...: try: break / finally: continue` runs every item)."""
        loop = self._loops[-1] if self._loops else None
        if loop is None or not loop.in_finally or loop.flag is None:
            return node
        clear = templates.replace("flag = False", flag=loop.flag)
        copy_location_recursive(clear, node)
        return clear + [node]

    # -- loops ---------------------------------------------------------------------------
    def _visit_loop(self, node):
        orelse = self._block(node.orelse)  # an `else` belongs to the enclosing loop's body
        node.orelse = []
        loop = self._visit_body(node)
        if loop.flag is None:
            return [node] + orelse
        if isinstance(node, ast.While):
            node.test = templates.replace_as_expression("not flag and test", flag=loop.flag, test=node.test)
            copy_location_recursive(node.test, node)  # `node` stays: its rewrite locates nothing
        else:
            setanno(node, Fact.BREAK_FLAG, loop.flag)
        before = templates.replace("flag = False", flag=loop.flag)
        setanno(node, Fact.SETTLED_BY_ELSE, _assigned_by(orelse))
        after = templates.replace("if not flag:\n    orelse", flag=loop.flag, orelse=orelse) if orelse else []
        copy_location_recursive(before + after, node)
        return before + [node] + after

    visit_While = visit_For = _visit_loop


def _assigned_by(orelse: list) -> frozenset:
    """Names the statements of a loop's `else` block always assign (before anything that may
    skip the rest of it)."""
    names = set()
    for stmt in orelse:
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            break  # a later assignment may be skipped (return, raise, a nested block)
        if isinstance(stmt, ast.Assign):
            names.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return frozenset(names)


def transform(tree, ctx):
    return BreakTransformer(ctx).transform(tree)
