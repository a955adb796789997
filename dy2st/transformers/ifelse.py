"""Rewrites `if` statements into `convert_ifelse` over branch functions and the state's paths.

Before::

    if x.sum() > 0:
        y = x * 2
    else:
        y = -x

After::

    def if_body():
        nonlocal y
        y = x * 2
    def else_body():
        nonlocal y
        y = -x
    (y,) = jst.convert_ifelse(x.sum() > 0, if_body, else_body, ('y',), ('y',), 1)

The state is every symbol a branch writes that is live after the `if` (the first `nouts`,
whose two branch values must agree when staged) or read by a branch before it is written
(carried so `nonlocal` finds it). Attribute and item writes (`self.n`, `d['k']`) escape the
function and are always outputs; they are written back with `jst.write_composite(obj,
'attr', value)`, which removes an attribute/key that is unbound on the path taken instead of
leaving an `Undefined` marker on the user's object. A name a branch `del`s is carried so the
branch deletes the enclosing function's variable. The guard `if not do_return:` that the
return step adds gets an else branch where what the body would assign is dead (the function
has returned), so a variable first assigned after a nested early return is not refused.
The runtime reaches the state through the branches' closure cells (`state_access`: paths,
then display names). Facts come from `dy2st.analysis` (liveness, definitions); nested `if`s
are rewritten first.

An `if` whose only statement sets a jump's flag (a lone `break`, `continue` or `return` after
the jump steps) is no branch at all::

    if x.sum() > 0:                  ->    break_ = jst.convert_jump_if(x.sum() > 0, break_)
        break_ = True

(`break_ | c` where `c` is traced, as a person writes it: no cond with two empty branches.)
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.analysis import Fact, getanno
from dy2st.analysis.activity import activity_of, block_activity, composites_in_write_order
from dy2st.transformers import templates
from dy2st.transformers.base import copy_location_recursive, pass_python_body, stamp
from dy2st.transformers.state_access import StateTransformer

# How the return step names its flag (dy2st.transformers.return_statements).
RETURN_FLAG_DISPLAY = "the early-return flag"

def _negated_name(test):
    """`x` for a test `not x`, also once the logical rewrite made it `jst.convert_not(x)`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        operand = test.operand
    elif (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "convert_not"
          and len(test.args) == 1):
        operand = test.args[0]
    else:
        return None
    return operand.id if isinstance(operand, ast.Name) else None


_JUMP_OF_FLAG = {"the early-return flag": "`return`", "the break flag": "`break`", "the continue flag": "`continue`"}


class IfElseTransformer(StateTransformer):
    """See the module docstring."""

    def visit_If(self, node):
        if not node.orelse and len(node.body) == 1 and self._exits(node.body) and self._flag_read_after(node):
            # `if c: break_ = True` (a lone break, continue or return made a flag): `flag | c`
            flag = node.body[0].targets[0].id
            jump = templates.replace("flag = jst.convert_jump_if(test, flag)", flag=flag, test=node.test,
                                     jst=self.ctx.runtime)
            copy_location_recursive(jump, node)
            return jump
        live_out = getanno(node, Fact.LIVE_OUT)
        live_in = getanno(node, Fact.LIVE_IN)
        # What the branches write and kill, as the user wrote them (facts of the last resolve;
        # rewriting the inner ifs below adds only the names of their own functions).
        writes = block_activity(node.body).writes | block_activity(node.orelse).writes
        deleted = _deleted_names(node.body + node.orelse) if self.ctx.source_holds(ast.Delete) else set()
        first_written, conflicts = _write_orders(node) if any(s.is_composite for s in writes) else ({}, ())
        self.generic_visit(node)
        outputs, carried = self._state(writes, deleted, first_written, live_out, live_in)
        state = outputs + carried
        namer = self.ctx.namer
        stmts = []
        if_body = self._branch(node, namer.helper_symbol("if_body"), node.body, state, outputs)
        stmts.append(if_body)
        else_body = None
        if node.orelse:
            else_body = self._branch(node, namer.helper_symbol("else_body"), node.orelse, state, outputs)
            stmts.append(else_body)
        elif self._is_return_guard(node.test) and self._dead_loads([], outputs, returned=True):
            # `if not do_return: ...` (made by the return step): its missing else is the path
            # that has returned already, where nothing the body assigns is read again, and where
            # the flag is true: said so, so that where the body returns too, the flag after the
            # `if` is a Python True and the guards after it stay Python.
            flag = node.test.args[0].id
            else_body = self._branch(node, namer.helper_symbol("else_body"), [], state, outputs, returned=True,
                                     flag=flag)
            stmts.append(else_body)
        else_name = templates.name(else_body.name) if else_body else templates.constant(None)
        call = self.state_call("convert_ifelse", [node.test, templates.name(if_body.name), else_name], state)
        call.args.append(templates.constant(len(outputs)))
        guard = self._guard_branch_names(node)
        if guard:
            call.args.append(guard)
        pass_python_body(node, call)
        conflicts = tuple((state.index(a), state.index(b)) for a, b in conflicts if a in state and b in state)
        if conflicts:
            call.keywords.append(ast.keyword(arg="reordered_keys", value=templates.constant(conflicts)))
        stmts += self.assign_state(state, call)
        _locate(node, stmts, call)
        return stmts

    def _state(self, writes, deleted, first_written, live_out, live_in):
        """(outputs, carried): symbols live after the if, and those only read-before-written.
        `writes`: what the branches write; `deleted`: names they `del`; `first_written`: their
        attributes and items in the order they are first assigned."""
        plain = {s for s in writes if not s.is_composite}
        live_out = live_out | {s for s in plain if s.base in self._captured()}
        local_bases = {s.base for s in plain if s not in live_out and s not in live_in}
        composites = {s for s in writes if s.is_composite and s.base not in local_bases}
        # Attributes and items in the order the branches first assign them: a dict's new keys
        # are written back (so inserted) in that order, as eagerly.
        composites = sorted(composites, key=lambda s: (first_written.get(s, len(first_written)), str(s)))
        outputs = sorted((s for s in plain if s in live_out), key=str) + composites
        # A name a branch deletes (`del y`) must be the enclosing function's (nonlocal) even
        # when nothing reads it, or the branch function would delete a local of its own.
        carried = sorted((s for s in plain if (s in live_in or s.base in deleted) and s not in live_out), key=str)
        return outputs, carried

    def _guard_branch_names(self, node):
        """For a generated `if not <exit flag>:` guard, or an `if` the return, break or continue
        step gave the code after it (`return_statements._into_else`, `jump_flags._lift`), a
        tuple node naming its two paths truly."""
        lifted = getattr(node, "dy2st_code_after", None)  # the side that holds the code after it
        if lifted is not None:
            side, jump = lifted
            names = ["if branch", "else branch"]
            names[side] = f"code after the `if` (when it did not {jump})"
            if jump != "return":  # (a loop's jump: the other side is the path that took it)
                names[1 - side] = f"path that took the `{jump}`"
            return templates.constant(tuple(names))
        flag = _negated_name(node.test)
        if node.orelse or flag is None or not self.ctx.namer.is_exit_flag(flag):
            return None
        display = self.ctx.namer.display_name(flag)
        jump = _JUMP_OF_FLAG.get(display, f"jump ({display})")
        return templates.constant((f"code after an earlier {jump} (when it was not taken)",
                                   f"path that took the earlier {jump}"))

    @staticmethod
    def _flag_read_after(node) -> bool:
        """Whether the flag the `if` sets is read after it: `flag | c` reads the flag, which a
        branch function around only shares (`nonlocal`) when something reads it later (a last
        `if c: continue` sets a flag nothing reads: it stays an `if`)."""
        return bool(block_activity(node.body).writes & getanno(node, Fact.LIVE_OUT))

    def _exits(self, body) -> bool:
        """Does the branch set an early-return/break/continue flag (skipping the rest)?"""
        for stmt in body:
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and self.ctx.namer.is_exit_flag(stmt.targets[0].id)
                    and isinstance(stmt.value, ast.Constant) and stmt.value.value is True):
                return True
        return False

    def _is_return_guard(self, test) -> bool:
        """Is `test` `jst.convert_not(<early-return flag>)`?"""
        return (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)
                and test.func.attr == "convert_not" and isinstance(test.func.value, ast.Name)
                and test.func.value.id == self.ctx.runtime and len(test.args) == 1
                and isinstance(test.args[0], ast.Name) and self.ctx.namer.is_exit_flag(test.args[0].id)
                and self.ctx.namer.display_name(test.args[0].id) == RETURN_FLAG_DISPLAY)

    def _dead_loads(self, body, outputs, returned=False, flag=None):
        """In a branch that exits, outputs it leaves unbound are dead on its path: load them
        with `ldu_dead`, whose marker a staged merge fills with zeros instead of an error
        (`flag`: the exit flag, true on this path: set to True)."""
        if not returned and not self._exits(body):
            return []
        assigned = activity_of(body).kills
        return [
            templates.replace("target = True", target=s.to_node())[0] if s.base == flag else
            templates.replace(
                "target = jst.ldu_dead(lambda: value, name)",
                target=s.to_node(), value=s.to_node(), jst=self.ctx.runtime,
                name=templates.constant(self._display(s)),
            )[0]
            for s in outputs if not s.is_composite and s not in assigned
        ]

    def _branch(self, node, name, body, state, outputs=(), returned=False, flag=None):
        """The function running `body`, a branch of `node`."""
        dead = self._dead_loads(body, outputs, returned, flag)
        if dead:
            copy_location_recursive(dead, node)
            body = body + dead
        return ast.FunctionDef(
            name=name,
            args=templates.arguments(),
            body=self._declarations(state) + body,
            decorator_list=[],
            returns=None,
            type_comment=None,
            type_params=[],
        )

def _locate(origin, stmts: list, call: ast.Call) -> None:
    """Locate what `visit_If` made at the `if` (`stamp`), so the visit's location walk stops at
    once: the branch functions and their declarations, the call (its test is the user's, its
    dead loads were located when made) and the assignment of its result."""
    made = [call, call.func, call.func.value, *call.args[1:], *call.keywords]
    made += [keyword.value for keyword in call.keywords]
    for stmt in stmts:
        made.append(stmt)
        if isinstance(stmt, ast.FunctionDef):
            made += [decl for decl in stmt.body[:2] if isinstance(decl, (ast.Nonlocal, ast.Global))]
        elif isinstance(stmt, ast.Assign):
            made += [stmt.targets[0], *stmt.targets[0].elts]
    stamp(origin, made)


def _write_orders(node) -> tuple[dict, tuple]:
    """The attributes and items the branches assign, in the order of their first assignment
    (`symbol -> rank`, the if branch's first), and the `(a, b)` pairs of one object that the
    two branches assign first in opposite orders: were both new keys of a dict, its order
    after the `if` would depend on the branch taken (checked at run time:
    `convert_ifelse(reordered_keys=...)`)."""
    in_if, in_else = composites_in_write_order([node.body]), composites_in_write_order([node.orelse])
    first_written = dict(in_if)
    for symbol in in_else:
        first_written.setdefault(symbol, len(first_written))
    both = [symbol for symbol in first_written if symbol in in_if and symbol in in_else]
    conflicts = tuple(
        (a, b) for n, a in enumerate(both) for b in both[n + 1:]
        if a.parent == b.parent and (in_if[a] < in_if[b]) != (in_else[a] < in_else[b])
    )
    return first_written, conflicts


def _deleted_names(body) -> set:
    """Names a `del` statement anywhere in `body` deletes (statements only: no expression holds one)."""
    return {target.id for stmt in body for node in ast_util.walk_blocks(stmt) if isinstance(node, ast.Delete)
            for target in node.targets if isinstance(target, ast.Name)}


def transform(tree, ctx):
    return IfElseTransformer(ctx).transform(tree)
