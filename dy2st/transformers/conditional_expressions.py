"""Rewrites ternary expressions into `convert_ifexp` with thunks for each side.

Before::

    y = x * 2 if x.sum() > 0 else x - 1

After::

    y = jst.convert_ifexp(x.sum() > 0, lambda: x * 2, lambda: x - 1, assigned_to='y')

A Python condition evaluates only the chosen side; a traced one stages both with `lax.cond`.
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.transformers import templates
from dy2st.transformers.base import Transformer, copy_location_recursive, pass_python_body


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
        call.dy2st_ifexp = True
        return call

    def visit_Assign(self, node):
        """`y = a if c else y`: the name the value is assigned to is passed (`assigned_to`), so
        that the list or dict it held before, which the assignment drops, is no one else's
        object to keep (as an `if` statement's own variables are)."""
        self.generic_visit(node)
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and getattr(node.value, "dy2st_ifexp", False)):
            name = ast.keyword(arg="assigned_to", value=ast.Constant(node.targets[0].id))
            copy_location_recursive(name, node.value)
            node.value.keywords.append(name)
        return node


def transform(tree, ctx):
    return IfExpTransformer(ctx).transform(tree)
