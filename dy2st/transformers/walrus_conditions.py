"""Moves a `while` condition that binds a name with `:=` into the loop's body.

Before::

    while (s := x.sum()) < 10:
        x = x + 1
    else:
        done = True

After::

    exhausted = False
    while True:
        if not ((s := x.sum()) < 10):
            exhausted = True
            break
        x = x + 1
    if exhausted:
        done = True

The loops step turns a `while` condition into a function of its own, where `s` would be that
function's local: the body and the code after the loop could not read it. In the body, the
condition runs in the user's function, as eagerly: every time before an iteration, and once
more when it fails (`s` then holds the value that ended the loop), with Python's short-circuit
(`while n > 0 and (s := f(n))`). The `break` becomes a flag like any other (break_statements),
so a condition on traced values still stages as one `lax.while_loop`. The `else` runs only when
the condition ends the loop; it stays outside the loop, where its own `break` or `continue`
belong to an enclosing loop as eagerly. Runs before return_statements and break_statements,
which rewrite the `break` this adds.
"""

from __future__ import annotations

import ast

from dy2st.transformers import templates
from dy2st.transformers.base import Transformer, copy_location_recursive


class WalrusConditionTransformer(Transformer):
    """See the module docstring."""

    def visit_While(self, node):
        self.generic_visit(node)
        if not any(isinstance(n, ast.NamedExpr) for n in ast.walk(node.test)):
            return node
        if not node.orelse:
            check = templates.replace("if not test:\n    break", test=node.test)
            loop = templates.replace("while True:\n    check\n    body", check=check, body=node.body)
            copy_location_recursive(loop, node)
            return loop
        flag = self.ctx.namer.new_symbol("exhausted")
        check = templates.replace("if not test:\n    flag = True\n    break", test=node.test, flag=flag)
        statements = templates.replace(
            "flag = False\nwhile True:\n    check\n    body\nif flag:\n    orelse",
            flag=flag, check=check, body=node.body, orelse=node.orelse)
        copy_location_recursive(statements, node)
        return statements


def transform(tree, ctx):
    return WalrusConditionTransformer(ctx).transform(tree)
