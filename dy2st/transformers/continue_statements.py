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

import ast

from dy2st.transformers import templates
from dy2st.transformers.base import copy_location_recursive
from dy2st.transformers.jump_flags import JumpFlagTransformer


class ContinueTransformer(JumpFlagTransformer):
    """See the module docstring."""

    jump_type = ast.Continue
    flag_root = "continue_"
    flag_display = "the continue flag"

    def visit_Continue(self, node):
        return self._jump(node)

    def _visit_loop(self, node):
        node.orelse = self._block(node.orelse)  # an `else` belongs to the enclosing loop's body
        loop = self._visit_body(node)
        if loop.flag is not None:
            reset = templates.replace("flag = False", flag=loop.flag)
            copy_location_recursive(reset, node.body[0] if node.body else node)
            node.body = reset + node.body
        return node

    visit_While = visit_For = _visit_loop


def transform(tree, ctx):
    return ContinueTransformer(ctx).transform(tree)
