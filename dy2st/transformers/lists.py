"""Rewrites `xs.append(v)` statements into assignments, so loops can carry the list.

Before::

    outs.append(h)

After::

    outs = jst.list_append(outs, v)

As an assignment, the list becomes a variable the if/loop transformers see written: a staged
loop with a static trip count turns the appended values into one stacked scan output, and a
staged `if` that appends on one side only is an error naming the list instead of a silent
unconditional append. `list_append` builds a new Python list (other objects get their own
`append` called), so two branches traced from the same state never share one list. Only
statements of the form `name.append(value)` are rewritten, and only where `name` is a local
the function assigns or one of its parameters (not a global or closure variable: rebinding
those would change what other code sees). A parameter's list grown in staged code is written
back into the caller's list object, as a local's is into the list from before.
"""

from __future__ import annotations

import gast

from dy2st.analysis import Fact, getanno
from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer


class ListAppendTransformer(StatementTransformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._locals: list[frozenset] = []

    def visit_FunctionDef(self, node):
        scope = getanno(node, Fact.SCOPE)
        self._locals.append((scope.bound | scope.params) - scope.globals - scope.nonlocals)
        self.generic_visit(node)
        self._locals.pop()
        return node

    def visit_Lambda(self, node):
        return node

    def visit_Expr(self, node):
        call = node.value
        if not (
            isinstance(call, gast.Call)
            and isinstance(call.func, gast.Attribute)
            and call.func.attr == "append"
            and isinstance(call.func.value, gast.Name)
            and len(call.args) == 1
            and not call.keywords
            and not isinstance(call.args[0], gast.Starred)
            and self._locals
            and call.func.value.id in self._locals[-1]
        ):
            return self.generic_visit(node)
        target = call.func.value.id
        return templates.replace(
            "target = jst.list_append(target, value)", target=target, jst=self.ctx.runtime, value=call.args[0]
        )


def transform(tree, ctx):
    return ListAppendTransformer(ctx).transform(tree)
