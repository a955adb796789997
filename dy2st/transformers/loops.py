"""Rewrites `while` and `for` loops into `convert_while` / `convert_for` over a body function.

Before::

    while err > tol:
        x = x - f(x) / df(x)
        err = abs(f(x))

After::

    def loop_test():
        return err > tol
    def loop_body():
        nonlocal err, x
        x = x - f(x) / df(x)
        err = abs(f(x))
    (err, x) = jst.convert_while(loop_test, loop_body, ('err', 'x'), ('err', 'x'))

and `for i, row in enumerate(xs): body` becomes::

    def loop_body(itr):
        nonlocal ...
        i, row = itr
        body
    (...) = jst.convert_for(jst.loop_iter(enumerate, xs), loop_body, (...), (...), None)

The state is exactly the symbols the body writes that are live after the loop or at the head
of the next iteration (`Fact.LIVE_OUT`/`LIVE_IN` of the loop), plus attribute/item writes; a `for`
loop's break flag (`Fact.BREAK_FLAG`, which liveness counts as read at the loop head) is checked
through the last argument. Calls of
`range`, `enumerate` and `zip` in a `for` header go through `loop_iter`, so the runtime sees
traced bounds and arrays before Python would iterate them. Runs after break_statements (no loop
has an `else` or a `break` left) and after ifelse (both name their state with `transformers.state_access`).
"""

from __future__ import annotations

import ast

from dy2st.analysis import Fact, getanno, hasanno
from dy2st.analysis.activity import activity_of, observed_containers
from dy2st.transformers import templates
from dy2st.transformers.base import pass_python_body
from dy2st.transformers.state_access import StateTransformer


class LoopTransformer(StateTransformer):
    """See the module docstring. The scope stack and the state's paths are shared with the
    if/else transformer (`state_access`)."""

    def _loop_state(self, node):
        writes = activity_of(node.body).writes
        if isinstance(node, ast.For):
            writes |= activity_of(node.target).writes
        live = getanno(node, Fact.LIVE_OUT) | getanno(node, Fact.LIVE_IN)  # LIVE_IN has the break flag
        live = live | {s for s in writes if not s.is_composite and s.base in self._captured()}
        # (names closures read, made in the body or anywhere in the function, are among the
        # captured ones above: they see the enclosing function's cells, the last iteration's
        # values; a closure that reads nothing the body writes, `f = lambda v: v + 1`, is carried
        # only where it is live after the loop)
        plain = {s for s in writes if not s.is_composite and s in live}
        local_bases = {s.base for s in writes if not s.is_composite and s not in live}
        composites = {s for s in writes if s.is_composite and s.base not in local_bases}
        return sorted(plain, key=str) + sorted(composites, key=str)

    def _function(self, name, params, body, state):
        func = templates.replace("def name():\n    pass", name=name)[0]
        func.args = templates.arguments(params)
        func.body = self._declarations(state) + body
        return func

    def _settled_by_else(self, node) -> list:
        """`found = jst.ldu_dead(lambda: found, 'found')` before a search loop, for each name its
        `else` always assigns that may be unbound before the loop. Such a name is set on the
        `break` path; on an iteration that does not break it is still unbound, yet never read
        so (a later iteration breaks and sets it, or the `else` does). As a `DeadValue` a staged
        `if` may fill it with zeros there instead of refusing a branch that leaves it unbound.
        """
        settled = getanno(node, Fact.SETTLED_BY_ELSE, frozenset())
        defined = getanno(node, Fact.DEFINED_IN)
        return [
            templates.replace("name = jst.ldu_dead(lambda: name, display)", name=name, jst=self.ctx.runtime,
                              display=templates.constant(name))[0]
            for name in sorted(settled - set(defined))
        ]

    def _finish(self, stmts, call, state):
        # Located by the visit (`copy_location_recursive`): the header's line only, so Python
        # reports no call at a body line (runtime errors point at the loop's line).
        return stmts + self.assign_state(state, call)

    def visit_While(self, node):
        state = self._loop_state(node)
        observed = self._observed(node, state)
        trips_left = getanno(node, Fact.COUNTER_BOUND, None)
        self.generic_visit(node)
        namer = self.ctx.namer
        test = templates.replace("def loop_test():\n    return test", loop_test=namer.new_symbol("loop_test"), test=node.test)[0]
        body = self._function(namer.new_symbol("loop_body"), (), node.body, state)
        call = self.state_call("convert_while", [templates.name(test.name), templates.name(body.name)], state)
        if trips_left is not None:
            call.keywords.append(ast.keyword(arg="trips_left", value=templates.thunk(trips_left)))
        pass_python_body(node, call)
        self._pass_loop_only(node, call, state)
        self._pass_observed(call, observed)
        return self._finish(self._settled_by_else(node) + [test, body], call, state)

    def visit_For(self, node):
        flag = getanno(node, Fact.BREAK_FLAG) if hasanno(node, Fact.BREAK_FLAG) else None
        state = self._loop_state(node)
        observed = self._observed(node, state)
        self.generic_visit(node)
        namer = self.ctx.namer
        item = namer.new_symbol("itr")
        unpack = templates.replace("target = item", target=node.target, item=item)
        body = self._function(namer.new_symbol("loop_body"), (item,), unpack + node.body, state)
        extra_test = templates.constant(None)
        if flag:
            extra_test = templates.thunk(
                templates.replace_as_expression("jst.convert_not(flag)", jst=self.ctx.runtime, flag=flag)
            )
        call = self.state_call("convert_for", [self._iterable(node.iter), templates.name(body.name)], state)
        call.args.append(extra_test)
        pass_python_body(node, call)
        if getanno(node, Fact.HELD_ITERATOR, False):
            call.keywords.append(ast.keyword(arg="held_iterator", value=templates.constant(True)))
        self._pass_loop_only(node, call, state)
        self._pass_observed(call, observed)
        return self._finish(self._settled_by_else(node) + [body], call, state)

    def _observed(self, node, state) -> list:
        """The item/attribute state whose container the loop (body or test) can look into, so
        that it would notice, eagerly, that the item is missing before its first assignment."""
        composites = {s for s in state if s.is_composite}
        containers = observed_containers(node.body + [getattr(node, "test", None) or node.iter], composites)
        return [s for s in state if s.is_composite and s.parent in containers]

    def _pass_observed(self, call, observed) -> None:
        """`observed=(...)`: the runtime must not give these a value before the body sets them
        (a staged loop would) when they do not exist before the loop."""
        if observed:
            call.keywords.append(ast.keyword(arg="observed", value=self._state_names(observed)))

    def _pass_loop_only(self, node, call, state) -> None:
        """`loop_only=(...)`: state that only later iterations read (never after the loop), so
        the runtime's zero-trip check does not raise for it as eager Python would not."""
        after, defined = getanno(node, Fact.LIVE_OUT), getanno(node, Fact.DEFINED_IN)
        loop_only = [s for s in state if not s.is_composite and s not in after and s.base not in defined
                     and not self.ctx.namer.is_generated(s.base)]
        if loop_only:
            call.keywords.append(ast.keyword(arg="loop_only", value=self._state_names(loop_only)))

    def _iterable(self, expr):
        """`range(a, b)` -> `jst.loop_iter(range, a, b)`, likewise any call of a plain name (it may
        be `range` by another name, `rng = range`) or of an itertools name (`itertools.count()`),
        and the calls in the arguments of `enumerate`, `zip` and `reversed` (`reversed(range(n))`);
        else as is."""
        if (
            isinstance(expr, ast.Call)
            and (isinstance(expr.func, ast.Name)
                 or isinstance(expr.func, ast.Attribute) and expr.func.attr in _ITERTOOLS_NAMES)
            and not any(isinstance(a, ast.Starred) for a in expr.args)
        ):
            call = templates.replace_as_expression("jst.loop_iter(fn)", jst=self.ctx.runtime, fn=expr.func)
            wraps = isinstance(expr.func, ast.Name) and expr.func.id in _ITERABLE_WRAPPERS
            call.args.extend(self._iterable(a) if wraps else a for a in expr.args)
            call.keywords = list(expr.keywords)
            return call
        return expr


# Builtins of a `for` header that take iterables `loop_iter` may stage (a traced `range`).
_ITERABLE_WRAPPERS = frozenset({"enumerate", "zip", "reversed"})
# `itertools.<name>(...)` in a `for` header: `loop_iter` knows a new one only the loop holds
_ITERTOOLS_NAMES = frozenset({"count", "cycle", "chain", "islice", "product", "permutations", "combinations",
                              "combinations_with_replacement", "pairwise", "zip_longest"})


def transform(tree, ctx):
    return LoopTransformer(ctx).transform(tree)

