"""Rewrites early `return`s into a single exit guarded by a `do_return` flag.

Before::

    def f(x):
        if x.sum() > 0:
            return x * 2
        x = x - 1
        return x

After::

    def f(x):
        do_return = False
        retval = jst.UNDEFINED_RETURN
        if x.sum() > 0:
            retval = x * 2
            do_return = True
        if not do_return:
            x = x - 1
            retval = x
            do_return = True
        return retval

A `return` inside a loop also `break`s (the break transformer, which runs next, turns that into
a flag), and an enclosing loop checks `if do_return: break` after a nested loop that may have
returned. Paths that fall off the end set `retval = None`, so a staged `if` whose sides return
an array and None is an error rather than a silent zero. Functions whose only `return` is the
last statement are left unchanged. First, the code after an `if` one of whose sides always
returns moves into its other side (`_into_else`), so the common shape makes one `if`:

    if x.sum() > 0:                     if x.sum() > 0:
        return x * 2           ->           return x * 2
    return x - 1                        else:
                                            return x - 1
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.analysis import loop_bodies
from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer, copy_location_recursive

_LOOPS = (ast.For, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _contains_return(stmts, only_in_loops=False, in_loop=False) -> bool:
    for node in stmts:
        if isinstance(node, ast.Return) and (in_loop or not only_in_loops):
            return True
        if isinstance(node, _SCOPES):
            continue
        nested_in_loop = in_loop or isinstance(node, _LOOPS)
        if isinstance(node, _LOOPS):
            if _contains_return(node.body, only_in_loops, True) or _contains_return(node.orelse, only_in_loops, in_loop):
                return True
            continue
        for block in ast_util.child_blocks(node):
            if _contains_return(block, only_in_loops, nested_in_loop):
                return True
    return False


def _always_returns(stmts) -> bool:
    """Whether `stmts` never complete normally: every path returns or raises, or stays in a
    `while True:` that no `break` ends (its only ways out are `return` and `raise`), or leaves
    a loop no `break` ends through its `else:` that returns."""
    for node in stmts:
        if isinstance(node, (ast.Return, ast.Raise)):
            return True
        if (isinstance(node, ast.While) and isinstance(node.test, ast.Constant) and node.test.value
                and not ast_util.jumps_out(node.body, returns=False, jump_kinds=(ast.Break,))):
            return True
        if isinstance(node, ast.If) and _always_returns(node.body) and _always_returns(node.orelse):
            return True
        if isinstance(node, _LOOPS) and _always_returns(node.orelse) and not ast_util.jumps_out(node.body, returns=False, jump_kinds=(ast.Break,)):
            return True  # (no `break`: a loop that ends runs its `else:`, which returns)
    return False


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _needs_rewrite(func) -> bool:
    body = func.body
    return any(_contains_return([s]) for s in body[:-1] if not isinstance(s, ast.Return)) or (
        bool(body) and not isinstance(body[-1], ast.Return) and _contains_return(body[-1:])
    )


def _into_else(stmts: list) -> list:
    """`stmts` with the code after an `if` whose one side always returns (or raises) moved into
    the other side, in every block (not nested functions): `if c: return a` then `return b`
    becomes `if c: return a / else: return b`, one staged cond as a person writes it, where a
    flag guarding the rest would make a second cond. The same statements run on every path."""
    out = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, _SCOPES):
            out.append(stmt)
            continue
        rest = stmts[i + 1:]
        if isinstance(stmt, ast.If) and rest:
            if _always_returns(stmt.body) and not _always_returns(stmt.orelse):
                stmt.body = _into_else(stmt.body)
                stmt.orelse = _into_else(stmt.orelse + rest)
                if len(stmt.orelse) == len(rest):
                    stmt.dy2st_code_after = (1, "return")  # errors name the else side as what it is
                return out + [stmt]
            if stmt.orelse and _always_returns(stmt.orelse) and not _always_returns(stmt.body):
                stmt.orelse = _into_else(stmt.orelse)
                stmt.body = _into_else(stmt.body + rest)
                return out + [stmt]
        for block in ast_util.child_blocks(stmt):
            block[:] = _into_else(block)
        out.append(stmt)
    return out


class ReturnTransformer(StatementTransformer):
    """Rewrites each function with an early return; see the module docstring."""

    def visit_FunctionDef(self, node):
        self.generic_visit(node)  # nested functions first: each has its own flags
        if not _needs_rewrite(node):
            return node
        if not _always_returns(node.body):  # falling off the end returns None: say so, as a return
            end = ast.Return(value=None)
            copy_location_recursive(end, node.body[-1])
            node.body.append(end)
        node.body = _into_else(node.body)
        if not _needs_rewrite(node):
            return node
        namer = self.ctx.namer
        self.do_return = namer.new_symbol("do_return", display="the early-return flag", exit_flag=True)
        self.retval = namer.new_symbol("retval", display="the return value")
        prologue = templates.replace(
            "do_return = False\nretval = jst.UNDEFINED_RETURN",
            do_return=self.do_return,
            retval=self.retval,
            jst=self.ctx.runtime,
        )
        docstring = node.body[:1] if _is_docstring(node.body[0]) else []
        body = self._block(node.body[len(docstring):], in_loop=False, top=True)
        epilogue = templates.replace("return retval", retval=self.retval)
        copy_location_recursive(prologue, node.body[0])
        copy_location_recursive(epilogue, node.body[-1])
        node.body = docstring + prologue + body + epilogue
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def _set_return(self, node: ast.Return, in_loop: bool):
        value = node.value if node.value is not None else templates.constant(None)
        # the value first: where computing it raises (and a handler catches it), eager returns
        # nothing here, so the flag must not be set
        stmts = templates.replace(
            "retval = value\ndo_return = True", do_return=self.do_return, retval=self.retval, value=value
        )
        if in_loop:
            stmts.append(ast.Break())
        copy_location_recursive(stmts, node)
        return stmts

    def _block(self, stmts, in_loop: bool, top: bool = False):
        out = []
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Return):
                return out + self._set_return(stmt, in_loop)
            may_return = _contains_return([stmt])
            always_returns = _always_returns([stmt])
            through_loop = _contains_return([stmt], only_in_loops=True)
            out.append(self._statement(stmt, in_loop))
            if not may_return:
                continue
            rest = stmts[i + 1 :]
            if always_returns:
                return out
            if in_loop:
                if through_loop:
                    guard = templates.replace("if do_return:\n    break", do_return=self.do_return)
                    copy_location_recursive(guard, stmt)
                    out.extend(guard)
                return out + self._block(rest, in_loop, top)
            rest = self._block(rest, in_loop, top)
            if rest:
                guard = templates.replace("if not do_return:\n    rest", do_return=self.do_return, rest=rest)
                copy_location_recursive(guard, stmt)
                loop_bodies.mark_guard(guard[0], self.ctx.effect_scope)
                out.extend(guard)
            return out
        if top and not _always_returns(stmts):
            fall_through = templates.replace("retval = None", retval=self.retval)
            copy_location_recursive(fall_through, stmts[-1] if stmts else None)
            out.extend(fall_through)
        return out

    def _statement(self, stmt, in_loop: bool):
        if isinstance(stmt, _SCOPES) or not _contains_return([stmt]):
            return stmt
        if isinstance(stmt, _LOOPS):
            stmt.body = self._block(stmt.body, in_loop=True)
            stmt.orelse = self._block(stmt.orelse, in_loop)
            return stmt
        for field in ("body", "orelse", "finalbody"):
            if getattr(stmt, field, None):
                setattr(stmt, field, self._block(getattr(stmt, field), in_loop))
        for part in getattr(stmt, "handlers", []) + getattr(stmt, "cases", []):
            part.body = self._block(part.body, in_loop)
        return stmt


def transform(tree, ctx):
    return ReturnTransformer(ctx).transform(tree)
