"""Drops a `del name` inside a loop when no path reads the name again.

Before::

    for i in range(n):
        t = x * i
        x = x + t
        del t          # frees t: nothing reads it before assigning it again

After::

    for i in range(n):
        t = x * i
        x = x + t
        pass

A staged loop carries the variables its body changes and must leave each one defined; eagerly,
after `del t` any read of `t` raises. Where liveness says no path reads `t` before assigning it
again (in this iteration, the next, or after the loop), dropping the `del` changes nothing the
function can see, only when the memory is freed. A name still read there (eagerly an
UnboundLocalError on that path), a name a nested function or lambda reads (its cell is emptied,
so a later call raises), and a `global`/`nonlocal` name are refused at the `del`. `del xs[k]`
and `del obj.a` are mutations of a container, which the loop carries as such. Runs on the
user's code, before any step adds reads of its own.
"""

from __future__ import annotations

import ast

from dy2st.analysis.anno import Fact, getanno
from dy2st.errors import OriginInfo, UnsupportedSyntaxError
from dy2st.transformers.base import Transformer

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


class DeadDeleteTransformer(Transformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._loops = 0
        self._kept: set = set()  # names nested functions read, or declared global/nonlocal

    def visit_FunctionDef(self, node):
        loops, kept = self._loops, self._kept
        self._loops, self._kept = 0, _outliving_names(node)
        self.generic_visit(node)
        self._loops, self._kept = loops, kept
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def _visit_loop(self, node):
        self._loops += 1
        node.body = [self.visit(statement) for statement in node.body]
        self._loops -= 1
        node.orelse = [self.visit(statement) for statement in node.orelse]
        if isinstance(node, ast.For):
            node.iter = self.visit(node.iter)
        else:
            node.test = self.visit(node.test)
        return node

    visit_For = visit_While = _visit_loop

    def visit_Delete(self, node):
        if not self._loops:
            return node  # (an `if` of its own leaves the name unbound, as eagerly)
        live = {str(name) for name in getanno(node, Fact.LIVE_OUT, frozenset())}
        targets = []
        for target in node.targets:
            if not isinstance(target, ast.Name):
                targets.append(target)
            elif target.id in live or target.id in self._kept:
                raise UnsupportedSyntaxError(
                    f"`del {target.id}` inside a loop, where '{target.id}' is read again (or by a nested "
                    "function) before it is assigned: a staged loop must leave every variable it carries defined.",
                    OriginInfo(self.ctx.filename, node.lineno, self.ctx.function_name),
                    advice=f"assign '{target.id}' a placeholder (`{target.id} = None`) instead, or move the `del` "
                    "after the loop.",
                )
        if targets:
            node.targets = targets
            return node
        return ast.copy_location(ast.Pass(), node)


def _outliving_names(function) -> set:
    """Names of `function` whose binding outlives a `del` in it: read by a nested function or
    lambda (a cell), or declared global or nonlocal."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, _NESTED) and node is not function:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    return names


def transform(tree, ctx):
    return DeadDeleteTransformer(ctx).transform(tree)
