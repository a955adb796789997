"""What the break and continue rewrites share: a jump becomes `flag = True`, and the rest of
every block after a statement that may jump moves under `if not flag:`.

Before (for `continue`)::

    for x in xs:
        if x < 0:
            continue
        total += x

After::

    for x in xs:
        continue_ = False
        if x < 0:
            continue_ = True
        if not continue_:
            total += x

Code after an `if` whose sides both always jump runs on no path: it stays, as `if False:`, for
the names it binds, where no flag guard would stage (and trace) it.

Subclasses say which statement jumps (`jump_type`), how the flag is named, and what happens
at the loop (`_visit_loop`).
"""

from __future__ import annotations

import ast

from dy2st.analysis import loop_bodies
from dy2st.transformers import templates
from dy2st.transformers.base import Transformer, copy_location_recursive


class LoopState:
    """Walk state of one loop body: its flag (made at the first jump) and jump count."""

    def __init__(self):
        self.flag = None
        self.jumps = 0
        self.in_finally = 0  # depth of `finally` blocks of this body being visited


class JumpFlagTransformer(Transformer):
    """Base of BreakTransformer and ContinueTransformer; see the module docstring."""

    jump_type: type = ast.Break
    flag_root = "break_"
    flag_display = "the break flag"

    def __init__(self, ctx):
        super().__init__(ctx)
        self._loops: list[LoopState | None] = []

    # -- scopes: a nested function's loops are its own ---------------------------------
    def visit_FunctionDef(self, node):
        self._loops.append(None)
        node.body = self._block(node.body)
        self._loops.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        return node

    # -- blocks --------------------------------------------------------------------------
    def _block(self, stmts):
        """Visit a block; the rest of it after a statement that may jump goes under a guard."""
        out = []
        loop = self._loops[-1] if self._loops else None
        for i, stmt in enumerate(stmts):
            before = loop.jumps if loop is not None else 0
            if loop is not None and type(stmt) is ast.If and i + 1 < len(stmts) and _never_completes([stmt]):
                # no path of the `if` reaches the rest: kept for the names it binds, where nothing runs
                # it (under the jumps' flags a staged `if` would trace it, and it may not trace at all)
                new = self.visit(stmt)
                out.extend(new if isinstance(new, list) else [new])
                dead = templates.replace("if False:\n    rest", rest=self._block(stmts[i + 1:]) or [ast.Pass()])
                copy_location_recursive(dead, stmts[i + 1])
                return out + dead
            if loop is not None and type(stmt) is ast.If and i + 1 < len(stmts) and self._lift(stmt, stmts[i + 1:]):
                new = self.visit(stmt)  # the rest is now in the side that does not jump
                out.extend(new if isinstance(new, list) else [new])
                return out
            new = self.visit(stmt)
            out.extend(new if isinstance(new, list) else [new] if new is not None else [])
            if loop is None or loop.jumps == before:
                continue
            if isinstance(stmt, self.jump_type):
                return out  # the rest of the block is unreachable
            rest = self._block(stmts[i + 1 :])
            if rest:
                guard = templates.replace("if not flag:\n    rest", flag=loop.flag, rest=rest)
                copy_location_recursive(guard, stmt)
                loop_bodies.mark_guard(guard[0], self.ctx.effect_scope)
                out.extend(guard)
            return out
        return out

    def _lift(self, stmt: ast.If, rest: list) -> bool:
        """Move `rest` (the block after `stmt`) into the side of `stmt` that completes, where the
        other never does (it breaks, continues, or raises): `if c: break` then `i += 1` becomes
        `if c: break / else: i += 1`, one cond as a person writes it, where a guard on the flag
        would stage a second. The same statements run on every path."""
        jump = _never_completes(stmt.body)
        if jump is not None and _never_completes(stmt.orelse) is None:
            stmt.dy2st_code_after = (1, jump) if not stmt.orelse else None
            stmt.orelse = stmt.orelse + rest
        elif stmt.orelse and (jump := _never_completes(stmt.orelse)) is not None and _never_completes(stmt.body) is None:
            stmt.body = stmt.body + rest
        else:
            return False
        loop_bodies.mark_if(stmt, self.ctx.effect_scope)  # its sides now hold the rest's effects too
        return True

    def generic_visit(self, node):
        if isinstance(node, ast.stmt):
            for field in ("body", "orelse"):
                if getattr(node, field, None):
                    setattr(node, field, self._block(getattr(node, field)))
            for part in getattr(node, "handlers", []) + getattr(node, "cases", []):
                part.body = self._block(part.body)
            if getattr(node, "finalbody", None):
                loop = self._loops[-1] if self._loops else None
                if loop is not None:
                    loop.in_finally += 1
                node.finalbody = self._block(node.finalbody)
                if loop is not None:
                    loop.in_finally -= 1
            return node
        return super().generic_visit(node)

    def _jump(self, node):
        """`flag = True` for a jump out of the innermost loop (an exit flag for the namer)."""
        loop = self._loops[-1]
        if loop.flag is None:
            loop.flag = self.ctx.namer.new_symbol(self.flag_root, display=self.flag_display, exit_flag=True)
        loop.jumps += 1
        return templates.replace("flag = True", flag=loop.flag)

    def _visit_body(self, node) -> LoopState:
        """Rewrite a loop's body with a fresh LoopState; return it."""
        loop = LoopState()
        self._loops.append(loop)
        node.body = self._block(node.body)
        self._loops.pop()
        return loop


_JUMP_WORDS = {ast.Break: "break", ast.Continue: "continue", ast.Raise: "raise", ast.Return: "return"}


def _never_completes(stmts) -> str | None:
    """How `stmts` leave the loop body on every path ("break", "continue", "raise"; "jump" for
    several), or None where some path completes (nested loops and `try` are not looked into)."""
    for node in stmts:
        word = _JUMP_WORDS.get(type(node))
        if word is not None:
            return word
        if type(node) is ast.If:
            first, second = _never_completes(node.body), _never_completes(node.orelse)
            if first is not None and second is not None:
                return first if first == second else "jump"
    return None
