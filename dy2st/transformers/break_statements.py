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

(with `found = jst.ldu_dead(lambda: found, 'found')` before the loop, see `_settled_by_else`).
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
from dy2st.transformers.base import copy_location_recursive
from dy2st.transformers.jump_flags import JumpFlagTransformer


class BreakTransformer(JumpFlagTransformer):
    """See the module docstring."""

    jump_type = gast.Break
    flag_root = "break_"
    flag_display = "the break flag"

    def visit_Break(self, node):
        return self._jump(node)

    # -- loops ---------------------------------------------------------------------------
    def _visit_loop(self, node):
        orelse = self._block(node.orelse)  # an `else` belongs to the enclosing loop's body
        node.orelse = []
        loop = self._visit_body(node)
        if loop.flag is None:
            return [node] + orelse
        if isinstance(node, gast.While):
            node.test = templates.replace_as_expression("not flag and test", flag=loop.flag, test=node.test)
        else:
            setanno(node, Fact.BREAK_FLAG, loop.flag)
        before = templates.replace("flag = False", flag=loop.flag)
        before += self._settled_by_else(orelse)
        after = templates.replace("if not flag:\n    orelse", flag=loop.flag, orelse=orelse) if orelse else []
        copy_location_recursive(before + after, node)
        return before + [node] + after

    visit_While = visit_For = _visit_loop

    def _settled_by_else(self, orelse: list) -> list:
        """`found = jst.ldu_dead(lambda: found, 'found')` for each name the `else` block always
        assigns. A search loop sets such a name on its `break` path and in its `else`: on an
        iteration that does not break it may still be unbound, yet it is never read so (a later
        iteration breaks and sets it, or the `else` does). Bound before the loop, it keeps its
        value; unbound, it becomes a `DeadValue`, which a staged `if` may fill with zeros.
        """
        names = []
        for stmt in orelse:
            if not isinstance(stmt, (gast.Assign, gast.AnnAssign, gast.AugAssign)):
                break  # a later assignment may be skipped (return, raise, a nested block)
            targets = stmt.targets if isinstance(stmt, gast.Assign) else [stmt.target]
            names += [t.id for t in targets if isinstance(t, gast.Name) and isinstance(stmt, gast.Assign)]
        return [
            templates.replace("name = jst.ldu_dead(lambda: name, display)", name=name, jst=self.ctx.runtime,
                              display=templates.constant(name))[0]
            for name in dict.fromkeys(names)
        ]


def transform(tree, ctx):
    return BreakTransformer(ctx).transform(tree)
