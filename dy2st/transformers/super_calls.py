"""Spells out the zero-argument `super()` of a method, which would stop working once its
statement moves into a generated function.

Before::

    def forward(self, x):
        if self.training:
            x = super().forward(x)

After::

    def forward(self, x):
        if self.training:
            x = super(__class__, self).forward(x)

Zero-argument `super()` finds its class and instance in the frame it runs in: the function's
`__class__` cell and its first argument. The if/else and loop steps move statements into branch
and body functions (no arguments), and the and/or and ternary steps into lambdas, where it
raises "super(): no arguments". Written out, it reads the same two values by name, which the
generated functions close over (the method is compiled inside its class's body, so
`__class__` is the class's cell). Only the method's own calls are rewritten: a `super()` in a
function or lambda the user nested in it is that function's own, as eagerly. Runs first, on
the user's code, before any step moves it.
"""

from __future__ import annotations

import ast

from dy2st.transformers import templates
from dy2st.transformers.base import Transformer, stamp


class SuperCallTransformer(Transformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._method = None

    def visit_FunctionDef(self, node):
        if self._method is not None:
            return node  # a function the user nested in the method: its super() is its own
        args = node.args.posonlyargs + node.args.args
        if not args:
            return node  # no first argument: zero-argument super() fails eagerly too
        self._method = node
        self._instance = args[0].arg
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        return node  # its super() is the lambda's own

    def visit_Call(self, node):
        self.generic_visit(node)
        if type(node.func) is ast.Name and node.func.id == "super" and not node.args and not node.keywords:
            node.args = [templates.name("__class__"), templates.name(self._instance)]
            stamp(node, node.args, whole_span=True)
        return node


def transform(tree, ctx):
    if ctx.class_name is None:
        return tree  # not a method: a zero-argument super() has no class here, eagerly either
    return SuperCallTransformer(ctx).transform(tree)
