"""Rewrites `and`, `or`, `not` and chained comparisons into runtime operators.

Before::

    if x is not None and x.sum() > 0 and not done:
        ...
    ok = 0 < i < n

After::

    if jst.convert_and(lambda: x is not None,
                       lambda: jst.convert_and(lambda: x.sum() > 0,
                                               lambda: jst.convert_not(done))):
        ...
    ok = jst.convert_compare_chain(lambda: 0, (lambda l, r: l < r, lambda: i),
                                   (lambda l, r: l < r, lambda: n))

Operands become thunks so the runtime can keep Python's short-circuit: a Python left operand
decides in Python and the right one is evaluated only when needed; a traced left operand is
staged lazily with `lax.cond`, giving the value eager Python would.
"""

from __future__ import annotations

import gast

from dy2st.transformers import templates
from dy2st.transformers.base import Transformer


class LogicalTransformer(Transformer):
    """See the module docstring."""

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        operator = "convert_and" if isinstance(node.op, gast.And) else "convert_or"
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            result = templates.replace_as_expression(
                f"jst.{operator}(left, right)", jst=self.ctx.runtime, left=templates.thunk(value), right=templates.thunk(result)
            )
        return result

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, gast.Not):
            return node
        return templates.replace_as_expression("jst.convert_not(x)", jst=self.ctx.runtime, x=node.operand)

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        call = templates.replace_as_expression(
            "jst.convert_compare_chain(first)", jst=self.ctx.runtime, first=templates.thunk(node.left)
        )
        for op, comparator in zip(node.ops, node.comparators):
            compare = gast.Compare(
                left=templates.name("l"), ops=[op], comparators=[templates.name("r")]
            )
            operator = templates.thunk(compare, params=("l", "r"))
            call.args.append(gast.Tuple(elts=[operator, templates.thunk(comparator)], ctx=gast.Load()))
        return call


def transform(tree, ctx):
    return LogicalTransformer(ctx).transform(tree)
