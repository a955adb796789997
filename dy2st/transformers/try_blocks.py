"""A `try` whose `finally` breaks, continues or returns: the exception it discards, held in a
flag; a `try` whose body does: its `else` under a flag set where the body ran to its end
(`_else_after_body`).

Before::

    for x in xs:
        try:
            y = risky(x)
        finally:
            break

After::

    for x in xs:
        pending = None
        try:
            try:
                y = risky(x)
            except BaseException as caught:
                pending = caught
        finally:
            break
            if pending is not None:
                raise pending

(the later steps make the `break` a flag that skips the re-raise, as Python discards the
exception). Staged `if`s and loops inside a `try` need nothing here: a side whose trace raises
is refused at its `if` where a handler around could catch it (`runtime.staging`), and a run-time
check whose exception an `except` would catch is refused at its line (`runtime.asserts`); what
the sides trace without raising, eager raises on no data either. Runs before other steps add
`if`s of their own or turn the user's into branch functions.
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer, copy_location_recursive


class TryBlockTransformer(StatementTransformer):
    """See the module docstring."""

    def visit_Try(self, node):
        if node.orelse and ast_util.jumps_out(node.body):
            return [new for stmt in self._else_after_body(node) for new in _as_list(self.visit(stmt))]
        prefix = []
        if node.finalbody and ast_util.jumps_out(node.finalbody):
            prefix, node = self._discarding(node)
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

    def _else_after_body(self, node) -> list:
        """A `try` body that returns, breaks or continues skips the `else`, which runs only where
        the body ran to its end. The later steps make those jumps flags that skip the code after
        them, so the `else` runs under a flag set at the body's end (and outside the handlers,
        as Python runs it):

            completed = False
            try:
                try:
                    <body>
                    completed = True
                except ...:
                    <handlers>
                if completed:
                    <else>
            finally:            (where the `try` has one; else the inner `try` stands alone)
                <finally>
        """
        completed = self.ctx.namer.new_symbol("try_completed")
        start = templates.replace("completed = False", completed=completed)
        mark = templates.replace("completed = True", completed=completed)
        inner = type(node)(body=node.body + mark, handlers=node.handlers, orelse=[], finalbody=[])
        guarded = ast.If(test=ast.Name(id=completed, ctx=ast.Load()), body=node.orelse, orelse=[])
        statements = [inner, guarded]
        if node.finalbody:
            statements = [type(node)(body=statements, handlers=[], orelse=[], finalbody=node.finalbody)]
        for stmt in start + statements:
            copy_location_recursive(stmt, node)
        return start + statements

    visit_TryStar = visit_Try


def _as_list(visited) -> list:
    return visited if isinstance(visited, list) else [visited]


def transform(tree, ctx):
    return TryBlockTransformer(ctx).transform(tree)
