"""Rewrites `assert` into `convert_assert`, checked when the program runs if the test is traced.

Before::

    assert x.sum() > 0, 'x must be positive'

After::

    jst.convert_assert(x.sum() > 0, lambda: 'x must be positive')

The message is a thunk, so a Python condition evaluates it only on failure, as Python does.
Under `python -O` Python drops asserts; dy2st does too, so converted code matches.
"""

from __future__ import annotations

import ast
import sys

from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer


class AssertTransformer(StatementTransformer):
    """See the module docstring."""

    def visit_Assert(self, node):
        self.generic_visit(node)
        if sys.flags.optimize:
            return ast.Pass()
        message = templates.thunk(node.msg) if node.msg is not None else templates.constant(None)
        return templates.replace(
            "jst.convert_assert(test, message)", jst=self.ctx.runtime, test=node.test, message=message
        )


def transform(tree, ctx):
    return AssertTransformer(ctx).transform(tree)
