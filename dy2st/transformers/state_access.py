"""What the if/else and loop transformers share: naming the state a branch or loop body
carries, and declaring it in the generated functions.

The state is passed to the runtime as data: for state `(y, o.w, d['k'])`::

    (y,) = jst.convert_ifelse(..., ('y', ('o', 'w'), ('d', ('k',))), ('y', 'o.w', "d['k']"), ...)

paths as spelled in the source, which the runtime reaches through the closure cells of the
branch or body functions (`dy2st.runtime.state_cells`), then display names for errors. The
runtime writes attributes and items back itself and gives back the plain names' values. Each
branch or body function declares the state's names `nonlocal` (or `global`), which puts their
cells in its closure. The analysis reads the paths as what the statement reads, and
its attributes and items as what it writes (`analysis.activity`).
"""

from __future__ import annotations

import ast

from dy2st.analysis import Fact, getanno
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
        """`nonlocal`/`global` of the plain names among `symbols`, for a branch or body
        function: every plain state variable, written there or not, so that each function the
        runtime gets holds the cells of the whole state (a variable the rewrite of an inner
        loop made local to its own body is not free in the outer body otherwise)."""
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

    def _state_paths(self, state) -> ast.Constant:
        """The runtime's paths of `state` (see the module docstring), as one constant."""
        return templates.constant(tuple(s.path_constant() for s in state))

    def _state_names(self, symbols) -> ast.Constant:
        """The display names of `symbols`, for errors, as one constant."""
        return templates.constant(tuple(self._display(s) for s in symbols))

    def state_call(self, operator: str, args: list, state) -> ast.Call:
        """`jst.<operator>(*args, <paths of state>, <names of state>)`, telling the runtime the
        class to mangle private names with where a path holds one."""
        call = templates.call(templates.attribute(self.ctx.runtime, operator),
                              args + [self._state_paths(state), self._state_names(state)])
        if self.ctx.class_name is not None and any(s.has_private_name() for s in state):
            call.keywords.append(ast.keyword(arg="class_name", value=templates.constant(self.ctx.class_name)))
        return call

    @staticmethod
    def assign_state(state, call) -> list:
        """`(a, b) = call` for the plain names of `state` (the runtime writes attributes and
        items back itself), or the call alone."""
        targets = [s.to_node(ast.Store()) for s in state if not s.is_composite]
        if not targets:
            return [ast.Expr(value=call)]
        target = ast.Tuple(elts=targets, ctx=ast.Store())
        return [ast.Assign(targets=[target], value=call, type_comment=None)]
