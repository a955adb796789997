"""What the if/else and loop transformers share: reading and writing the state a branch or loop
body carries, from inside the generated functions.

For state `(y, o.w)` they generate::

    def get_state():
        return (jst.ldu(lambda: y, 'y'), o.w)     # `ldu`: y may be unbound here
    def set_state(state):
        nonlocal y
        (y, new_value) = state
        jst.write_composite(o, 'w', new_value)

and declare written names `nonlocal` (or `global`) in each body function.
"""

from __future__ import annotations

import ast

from dy2st.analysis import Fact, getanno
from dy2st.analysis.qual_names import QualifiedName
from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer


class StateTransformer(StatementTransformer):
    """A statement transformer that keeps the scope stack and builds state accessors."""

    def _captured(self) -> frozenset:
        """Locals the user's closures read (`EffectScope.captured`): writes to them are live."""
        scope = self.ctx.effect_scope
        return scope.captured if scope is not None else frozenset()

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
            decls.append(ast.Nonlocal(names=nonlocal_names))
        if global_names:
            decls.append(ast.Global(names=global_names))
        return decls

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
        state_param = self.ctx.namer.helper_symbol("state")
        set_state = templates.replace(
            "def set_state(param):\n    decls\n    assignments",
            set_state=set_name,
            param=state_param,
            decls=self._declarations(state),
            assignments=self.assign_state(state, templates.name(state_param)),
        )[0]
        return [get_state, set_state]

    def assign_state(self, state, value) -> list:
        """`(a, o.y) = value` as statements: plain names directly; attributes and items through
        `jst.write_composite`, which deletes instead of writing an `Undefined` marker (the
        attribute or key was unbound before the statement and stays so on this path)."""
        targets, writes = [], []
        for symbol in state:
            if not symbol.is_composite:
                targets.append(symbol.to_node())
                continue
            temp = self.ctx.namer.new_symbol("new_value")
            targets.append(templates.name(temp))
            step = symbol.path[-1]
            writes += templates.replace(
                "jst.write_composite(parent, step, temp)",
                jst=self.ctx.runtime,
                parent=symbol.parent.to_node(),
                step=templates.constant(step) if isinstance(step, str) else templates.tuple_of([templates.constant(step[0])]),
                temp=temp,
            )
        target = templates.tuple_of(targets, store=True)
        return [ast.Assign(targets=[target], value=value, type_comment=None)] + writes
