"""Rewrites `if` statements into `convert_ifelse` over branch functions and a state accessor.

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
    def get_state():
        return (jst.ldu(lambda: y, 'y'),)
    def set_state(state):
        nonlocal y
        (y,) = state
    (y,) = jst.convert_ifelse(x.sum() > 0, if_body, else_body, get_state, set_state, ('y',), 1)

The state is every symbol a branch writes that is live after the `if` (the first `nouts`,
whose two branch values must agree when staged) or read by a branch before it is written
(carried so `nonlocal` finds it). Attribute and item writes (`self.n`, `d['k']`) escape the
function and are always outputs. Facts come from `dy2st.analysis` (liveness, definitions);
nested `if`s are rewritten first.
"""

from __future__ import annotations

import gast

from dy2st.analysis import Fact, QualifiedName, getanno
from dy2st.analysis.activity import activity_of
from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer

_IF_TEMPLATE = """
jst.convert_ifelse(test, if_body, else_body, get_state, set_state, names, nouts)
"""

# `if not do_return: rest` guards made by the return/break/continue rewrites: their branches
# are not the user's if/else, so errors name what they truly are.
_GUARD_TEMPLATE = """
jst.convert_ifelse(test, if_body, else_body, get_state, set_state, names, nouts, branch_names)
"""
def _negated_name(test):
    """`x` for a test `not x`, also once the logical rewrite made it `jst.convert_not(x)`."""
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        operand = test.operand
    elif (isinstance(test, gast.Call) and isinstance(test.func, gast.Attribute) and test.func.attr == "convert_not"
          and len(test.args) == 1):
        operand = test.args[0]
    else:
        return None
    return operand.id if isinstance(operand, gast.Name) else None


_JUMP_OF_FLAG = {"the early-return flag": "`return`", "the break flag": "`break`", "the continue flag": "`continue`"}


class IfElseTransformer(StatementTransformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._scopes = []

    def visit_FunctionDef(self, node):
        self._scopes.append(getanno(node, Fact.SCOPE))
        self.generic_visit(node)
        self._scopes.pop()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        return self.generic_visit(node)

    def visit_If(self, node):
        live_out = getanno(node, Fact.LIVE_OUT)
        live_in = getanno(node, Fact.LIVE_IN)
        defined = getanno(node, Fact.DEFINED_IN)
        self.generic_visit(node)
        outputs, carried = self._state(node, live_out, live_in)
        state = outputs + carried
        namer = self.ctx.namer
        stmts = []
        if_body = self._branch(namer.new_symbol("if_body"), node.body, state, outputs)
        stmts.append(if_body)
        else_body = None
        if node.orelse:
            else_body = self._branch(namer.new_symbol("else_body"), node.orelse, state, outputs)
            stmts.append(else_body)
        get_state = set_state = None
        if state:
            get_state, set_state = namer.new_symbol("get_state"), namer.new_symbol("set_state")
            stmts += self._state_functions(get_state, set_state, state, defined, live_in)
        guard = self._guard_branch_names(node)
        call = templates.replace_as_expression(
            _GUARD_TEMPLATE if guard else _IF_TEMPLATE,
            **({"branch_names": guard} if guard else {}),
            jst=self.ctx.runtime,
            test=node.test,
            if_body=if_body.name,
            else_body=else_body.name if else_body else templates.constant(None),
            get_state=get_state or templates.constant(None),
            set_state=set_state or templates.constant(None),
            names=templates.tuple_of([templates.constant(self._display(s)) for s in state]),
            nouts=templates.constant(len(outputs)),
        )
        if state:
            target = templates.tuple_of([s.to_node() for s in state], store=True)
            stmts.append(gast.Assign(targets=[target], value=call, type_comment=None))
        else:
            stmts.append(gast.Expr(value=call))
        return stmts

    def _state(self, node, live_out, live_in):
        """(outputs, carried): symbols live after the if, and those only read-before-written."""
        writes = activity_of(node.body).writes | activity_of(node.orelse).writes
        plain = {s for s in writes if not s.is_composite}
        local_bases = {s.base for s in plain if s not in live_out and s not in live_in}
        composites = {s for s in writes if s.is_composite and s.base not in local_bases}
        outputs = sorted((s for s in plain if s in live_out), key=str) + sorted(composites, key=str)
        carried = sorted((s for s in plain if s in live_in and s not in live_out), key=str)
        return outputs, carried

    def _display(self, symbol) -> str:
        return str(symbol) if symbol.is_composite else self.ctx.namer.display_name(symbol.base)

    def _declarations(self, symbols):
        scope = self._scopes[-1] if self._scopes else None
        globals_ = scope.globals if scope else frozenset()
        names = sorted({s.base for s in symbols if not s.is_composite})
        decls = []
        nonlocal_names = [n for n in names if n not in globals_]
        global_names = [n for n in names if n in globals_]
        if nonlocal_names:
            decls.append(gast.Nonlocal(names=nonlocal_names))
        if global_names:
            decls.append(gast.Global(names=global_names))
        return decls

    def _guard_branch_names(self, node):
        """For a generated `if not <exit flag>:` guard, a tuple node naming its two paths truly."""
        flag = _negated_name(node.test)
        if node.orelse or flag is None or not self.ctx.namer.is_exit_flag(flag):
            return None
        display = self.ctx.namer.display_name(flag)
        jump = _JUMP_OF_FLAG.get(display, f"jump ({display})")
        names = (f"code after an earlier {jump} (when it was not taken)", f"path that took the earlier {jump}")
        return templates.tuple_of([templates.constant(n) for n in names])

    def _exits(self, body) -> bool:
        """Does the branch set an early-return/break/continue flag (skipping the rest)?"""
        for stmt in body:
            if (isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Name)
                    and self.ctx.namer.is_exit_flag(stmt.targets[0].id)
                    and isinstance(stmt.value, gast.Constant) and stmt.value.value is True):
                return True
        return False

    def _dead_loads(self, body, outputs):
        """In a branch that exits, outputs it leaves unbound are dead on its path: load them
        with `ldu_dead`, whose marker a staged merge fills with zeros instead of an error."""
        if not self._exits(body):
            return []
        assigned = activity_of(body).kills
        return [
            templates.replace(
                "target = jst.ldu_dead(lambda: value, name)",
                target=s.to_node(), value=s.to_node(), jst=self.ctx.runtime,
                name=templates.constant(self._display(s)),
            )[0]
            for s in outputs if not s.is_composite and s not in assigned
        ]

    def _branch(self, name, body, state, outputs=()):
        body = body + self._dead_loads(body, outputs)
        written = activity_of(body).writes
        decls = self._declarations([s for s in state if s in written])
        return gast.FunctionDef(
            name=name,
            args=templates.thunk(templates.constant(None)).args,
            body=decls + body,
            decorator_list=[],
            returns=None,
            type_comment=None,
            type_params=[],
        )

    def _state_functions(self, get_name, set_name, state, defined, live_in):
        # A plain read is safe only for a name bound on every path here AND live on entry:
        # one that is not live may be bound in the user's function but not in the generated
        # function this statement now sits in (it is local there), so it is read with `ldu`.
        defined = {name for name in defined if QualifiedName(name) in live_in}
        reads = []
        for symbol in state:
            if symbol.is_composite or symbol.base not in defined:
                reads.append(
                    templates.replace_as_expression(
                        "jst.ldu(lambda: value, name)",
                        jst=self.ctx.runtime,
                        value=symbol.to_node(),
                        name=templates.constant(self._display(symbol)),
                    )
                )
            else:
                reads.append(symbol.to_node())
        get_state = templates.replace(
            "def get_state():\n    return values",
            get_state=get_name,
            values=templates.tuple_of(reads),
        )[0]
        state_param = self.ctx.namer.new_symbol("state")
        set_state = templates.replace(
            "def set_state(param):\n    decls\n    targets = param",
            set_state=set_name,
            param=state_param,
            decls=self._declarations(state),
            targets=templates.tuple_of([s.to_node() for s in state], store=True),
        )[0]
        return [get_state, set_state]


def transform(tree, ctx):
    return IfElseTransformer(ctx).transform(tree)
