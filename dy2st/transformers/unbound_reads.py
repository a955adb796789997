"""Reads of a local that may be unbound there go through `jst.ld`.

Before::

    if x.sum() > 0:
        y = x * 2
    return y

After::

    if x.sum() > 0:
        y = x * 2
    return jst.ld(y)

Where a traced condition decides whether `y` is assigned, a staged `if` (or a staged loop that
may run zero times) gives `y` back as a `MaybeUnbound`: its value where the data bound it, and a
traced flag saying whether it did. `jst.ld` gives the value and, when the program runs, raises
UnboundLocalError where the flag is false: at the read, as eager Python does, and only on the
paths that read it. Any other value passes through (a name Python never bound raises at the read
as before). `xs.append(v)`, `d[k] = v` and `obj.a = v` (a change in place of a name that may be
unbound) get `xs = jst.ld(xs)` before them instead, so later steps see the name they carry.
Wrapped: loads of the function's own locals (not its parameters, globals or
nonlocals) in a statement the analysis (`Fact.DEFINED_IN`) cannot show each is bound before,
lambdas and comprehensions in it included (a name they bind themselves may be wrapped too:
`ld` of a bound value is that value). `y += v` reads `y` first: `y = jst.ld(y)` goes before it.
A nested `def` is a function of its own; its reads of the enclosing function's locals that may be
unbound at the `def` are wrapped too (a generator nested in the function is not rewritten: a
`MaybeUnbound` it uses is refused). Runs on the user's code, before any step adds reads of its own.
"""

from __future__ import annotations

import ast

from dy2st.analysis.anno import Fact, getanno, hasanno
from dy2st.transformers import templates
from dy2st.transformers.base import Transformer, copy_location_recursive


class UnboundReadTransformer(Transformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._locals = frozenset()  # the current function's locals that are not parameters
        self._free = frozenset()  # enclosing functions' locals it reads that may be unbound at its `def`
        self._maybe = frozenset()  # the names the current statement may read unbound
        self._skip = frozenset()  # ids of Name nodes read by a `name = jst.ld(name)` put before

    def visit(self, node):
        if not isinstance(node, ast.stmt) or not hasanno(node, Fact.DEFINED_IN):
            return super().visit(node)
        outer = self._maybe
        self._maybe = (self._locals - getanno(node, Fact.DEFINED_IN)) | self._free
        try:
            receivers = self._receivers(node)
            if not receivers:
                return super().visit(node)
            # `xs.append(v)`, `d[k] = v`, `obj.a = v` on a name that may be unbound: read it just
            # before (the statement's first read), so that the steps after see the name itself
            self._skip = {id(r) for r in receivers}
            visited = super().visit(node)
            reads = [s for name in dict.fromkeys(r.id for r in receivers)
                     for s in templates.replace(f"{name} = jst.ld({name})", jst=self.ctx.runtime)]
            copy_location_recursive(reads, node)
            return reads + _as_list(visited)
        finally:
            self._maybe = outer
            self._skip = frozenset()

    def _receivers(self, stmt) -> list:
        """The names that may be unbound which `stmt` changes in place as its first act: the
        object of a method call that is the whole statement, the container of an item or
        attribute it assigns."""
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            bases = [stmt.value.func.value] if isinstance(stmt.value.func, ast.Attribute) else []
        elif isinstance(stmt, (ast.Assign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            bases = [t.value for t in targets if isinstance(t, (ast.Subscript, ast.Attribute))]
        else:
            return []
        return [b for b in bases if isinstance(b, ast.Name) and b.id in self._maybe]

    def visit_FunctionDef(self, node):
        # decorators, defaults and annotations run in the enclosing statement
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)
        scope = getanno(node, Fact.SCOPE)
        outer = self._locals, self._free, self._maybe
        # a nested function reads the enclosing function's cells when it runs: those that may be
        # unbound at its `def` are read through `jst.ld` too (it binds none of them itself)
        self._locals, self._free = scope.locals - scope.params, self._maybe - scope.locals
        self._maybe = self._free
        node.body = [new for stmt in node.body for new in _as_list(self.visit(stmt))]
        self._locals, self._free, self._maybe = outer
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Name(self, node):
        if type(node.ctx) is ast.Load and node.id in self._maybe and id(node) not in self._skip:
            return templates.replace_as_expression("jst.ld(name)", jst=self.ctx.runtime, name=node)
        return node

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        target = node.target
        if isinstance(target, ast.Name) and target.id in self._maybe:
            read = templates.replace(f"{target.id} = jst.ld({target.id})", jst=self.ctx.runtime)
            copy_location_recursive(read, node)
            return read + [node]
        return node


def _as_list(result) -> list:
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


def transform(tree, ctx):
    return UnboundReadTransformer(ctx).transform(tree)
