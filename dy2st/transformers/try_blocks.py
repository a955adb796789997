"""Marks the conditions of `if`/`while` inside a `try` block as ones that must stay Python.

Before::

    try:
        if x.sum() > 0:
            y = risky(x)
    except ValueError:
        y = x

After::

    try:
        if jst.python_condition(x.sum() > 0, 'if'):
            y = risky(x)
    except ValueError:
        y = x

Only a `try` with `except` handlers is marked (a `try`/`finally` catches nothing). A traced
condition would stage both branches, so `except` would catch errors of the branch that never runs (and no error raised when the program runs); `python_condition` refuses it at
the user's line with `StagedInTryError`, and passes a Python condition through unchanged.
Runs first, before other steps add `if`s of their own (their flags are safe) and turn the
user's `if`s into branch functions.
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer, copy_location_recursive

_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class TryBlockTransformer(StatementTransformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._marked: set = set()

    def visit_Try(self, node):
        prefix = []
        if node.finalbody and ast_util.jumps_out(node.finalbody):
            prefix, node = self._discarding(node)
        if node.handlers:  # `try`/`finally` alone catches nothing: staging inside it is safe
            for stmt in node.body:
                self._mark(stmt)
        node = self.generic_visit(node)
        return [*prefix, node] if prefix else node

    def _discarding(self, node):
        """A `finally` that breaks, continues or returns discards the exception in flight (and
        its `return` overrides the `try`'s). The later steps make jumps flags that skip the code
        after them, so the exception is caught, held, and raised again after the `finally`'s
        own statements: a jump there skips the raise, as Python discards it.

            pending = None
            try:
                try:
                    <body, handlers, else>
                except BaseException as caught:
                    pending = caught
            finally:
                <finally>
                if pending is not None:
                    raise pending
        """
        pending = self.ctx.namer.new_symbol("pending_exception")
        caught = self.ctx.namer.new_symbol("caught")
        inner = node.body
        if node.handlers or node.orelse:
            inner = [ast.Try(body=node.body, handlers=node.handlers, orelse=node.orelse, finalbody=[])]
        handler = ast.ExceptHandler(type=ast.Name(id="BaseException", ctx=ast.Load()), name=caught,
                                    body=templates.replace("pending = caught", pending=pending, caught=caught))
        reraise = templates.replace("if pending is not None:\n    raise pending", pending=pending)
        outer = ast.Try(body=[ast.Try(body=inner, handlers=[handler], orelse=[], finalbody=[])], handlers=[],
                        orelse=[], finalbody=node.finalbody + reraise)
        copy_location_recursive(outer, node)
        start = templates.replace("pending = None", pending=pending)
        copy_location_recursive(start[0], node)
        return start, outer

    visit_TryStar = visit_Try

    def _mark(self, root):
        stack = [root]
        while stack:
            node = stack.pop()
            if isinstance(node, _NESTED_SCOPES):
                continue
            if isinstance(node, (ast.If, ast.While)) and id(node) not in self._marked:
                self._marked.add(id(node))
                test = templates.replace_as_expression(
                    "jst.python_condition(test, construct)",
                    jst=self.ctx.runtime,
                    test=node.test,
                    construct=templates.constant("if" if isinstance(node, ast.If) else "while loop"),
                )
                copy_location_recursive(test, node.test)
                node.test = test
            stack.extend(ast.iter_child_nodes(node))


def transform(tree, ctx):
    return TryBlockTransformer(ctx).transform(tree)
