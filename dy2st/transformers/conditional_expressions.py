"""Rewrites ternary expressions into `convert_ifexp` with thunks for each side.

Before::

    y = x * 2 if x.sum() > 0 else x - 1

After::

    y = jst.convert_ifexp(x.sum() > 0, lambda: x * 2, lambda: x - 1)

A Python condition evaluates only the chosen side; a traced one stages both with `lax.cond`.
"""

from __future__ import annotations

from dy2st import ast_util
from dy2st.transformers import templates
from dy2st.transformers.base import Transformer, pass_python_body


class IfExpTransformer(Transformer):
    """See the module docstring."""

    def visit_IfExp(self, node):
        self.generic_visit(node)
        if ast_util.binds_a_name(node.body) or ast_util.binds_a_name(node.orelse):  # thunks would make it a lambda's name
            node.test = templates.replace_as_expression("jst.python_operand(t)", jst=self.ctx.runtime, t=node.test)
            return node
        call = templates.replace_as_expression(
            "jst.convert_ifexp(test, body, orelse)",
            jst=self.ctx.runtime,
            test=node.test,
            body=templates.thunk(node.body),
            orelse=templates.thunk(node.orelse),
        )
        pass_python_body(node, call)
        return call


def transform(tree, ctx):
    return IfExpTransformer(ctx).transform(tree)
