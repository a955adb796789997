"""Live symbols before and after each statement, by a backward pass over structured code.

Facts attached: `Fact.LIVE_IN` and `Fact.LIVE_OUT` on every statement, `Fact.BODY_LIVE_IN` on
loops. Each function is analysed on its own; a composite symbol (`self.w`) written anywhere
escapes the function, so transformers treat composite writes as live regardless.

Any statement inside a `try` body or a `with` body may raise, and the exception leads to what
the handlers, the `finally` or the code after a `with` (whose `__exit__` may suppress it) read:
those are live before each such statement too. So in

    try:
        if x.sum() > 0:
            y = x * 2
        raise ValueError
    except ValueError:
        pass
    return y

`y` is live after the `if` (its staged form gives it as an output).
"""

from __future__ import annotations

from dy2st import ast_util
from dy2st.analysis.anno import Fact, getanno, setanno
from dy2st.analysis.qual_names import QualifiedName

_EMPTY = frozenset()


class _LoopContext:
    def __init__(self, exit_live, head_live):
        self.exit_live = exit_live
        self.head_live = head_live


class _Liveness:
    def __init__(self, escaping=_EMPTY):
        self.loops: list[_LoopContext] = []
        # Declared globals/nonlocals outlive the function: live at every exit.
        self.escaping = escaping
        # What is live where an exception raised here leads (innermost `try` or `with` last)
        self.raised_to: list[frozenset] = []

    def block(self, stmts, live_after):
        live = live_after
        for stmt in reversed(stmts):
            live = self.stmt(stmt, live)
        return live

    def stmt(self, node, live_after):
        setanno(node, Fact.LIVE_OUT, live_after)
        kind = type(node)
        handler = _HANDLERS.get(kind)
        if handler is None:
            handler = _HANDLERS[kind] = getattr(_Liveness, f"_{kind.__name__}", _Liveness._simple)
        live_in = frozenset(handler(self, node, live_after))
        if self.raised_to:
            live_in |= self.raised_to[-1]
        setanno(node, Fact.LIVE_IN, live_in)
        return live_in

    @staticmethod
    def _reads(*exprs):
        from dy2st.analysis.activity import activity_of

        nodes = [e for e in exprs if e is not None]
        return activity_of(nodes).reads if nodes else _EMPTY

    def _simple(self, node, live_after):
        act = getanno(node, Fact.ACTIVITY)
        return (live_after - act.kills) | act.reads

    def _Return(self, node, live_after):
        return self._reads(node.value) | self.escaping

    def _Raise(self, node, live_after):
        return self._reads(node.exc, node.cause) | self.escaping

    def _Break(self, node, live_after):
        return self.loops[-1].exit_live if self.loops else _EMPTY

    def _Continue(self, node, live_after):
        return self.loops[-1].head_live if self.loops else _EMPTY

    def _If(self, node, live_after):
        return self._reads(node.test) | self.block(node.body, live_after) | self.block(node.orelse, live_after)

    def _loop_fixpoint(self, node, live_after, head_of):
        """Iterates head liveness to a fixed point; `head_of(head)` gives the new head set."""
        exit_live = self.block(node.orelse, live_after)
        head = exit_live
        while True:
            self.loops.append(_LoopContext(live_after, head))
            body_in = self.block(node.body, head)
            self.loops.pop()
            new_head = head_of(body_in, exit_live)
            if new_head <= head:
                break
            head = head | new_head
        setanno(node, Fact.BODY_LIVE_IN, body_in)
        return head

    def _While(self, node, live_after):
        test_reads = self._reads(node.test)
        return self._loop_fixpoint(node, live_after, lambda body_in, exit_live: test_reads | body_in | exit_live)

    def _For(self, node, live_after):
        from dy2st.analysis.activity import activity_of

        target = activity_of(node.target)
        target_kills = target.kills
        # A break flag (set by transformers.break_statements) is read before each iteration.
        flag = getanno(node, Fact.BREAK_FLAG, None)
        flag_reads = frozenset({QualifiedName(flag)}) if flag else _EMPTY

        def head_of(body_in, exit_live):
            return ((body_in - target_kills) | target.reads) | exit_live | flag_reads

        return self._reads(node.iter) | self._loop_fixpoint(node, live_after, head_of)

    def _With(self, node, live_after):
        from dy2st.analysis.activity import activity_of

        targets = activity_of([i.optional_vars for i in node.items if i.optional_vars is not None])
        items = self._reads(*[i.context_expr for i in node.items])
        body = self._raising_to(live_after | self._outer_raise(), node.body, live_after)
        return items | (body - targets.kills) | targets.reads

    def _outer_raise(self) -> frozenset:
        return self.raised_to[-1] if self.raised_to else self.escaping

    def _raising_to(self, live, stmts, live_after) -> frozenset:
        """`block(stmts, live_after)` where an exception leads to `live`."""
        self.raised_to.append(frozenset(live))
        try:
            return self.block(stmts, live_after)
        finally:
            self.raised_to.pop()

    def _Try(self, node, live_after):
        # the `finally` runs on the way out of a return, break or exception too
        after_final = self.block(node.finalbody, live_after | self._outer_raise() if node.finalbody else live_after)
        unhandled = after_final if node.finalbody else self._outer_raise()
        handlers = _EMPTY
        for handler in node.handlers:
            names = {QualifiedName(handler.name)} if handler.name is not None else set()
            body = self._raising_to(unhandled, handler.body, after_final)
            handlers |= (body - names) | self._reads(handler.type)
        after_body = self._raising_to(unhandled, node.orelse, after_final) | handlers
        return self._raising_to(handlers | unhandled, node.body, after_body) | handlers | after_final

    _TryStar = _Try

    def _Match(self, node, live_after):
        from dy2st.analysis.activity import activity_of

        live = self._reads(node.subject) | live_after
        for case in node.cases:
            bound = activity_of(case.pattern).kills
            live |= (self.block(case.body, live_after) - bound) | self._reads(case.guard)
        return live

    def _FunctionDef(self, node, live_after):
        return self._simple(node, live_after)


_HANDLERS: dict = {}  # statement type -> the _Liveness method for it (`_simple` by default)


def resolve(tree) -> None:
    """Attach LIVE_IN/LIVE_OUT to the statements of every function in `tree`.

    Needs `activity.resolve` to have run on the same tree.
    """
    for func in ast_util.function_defs(tree):
        scope = getanno(func, Fact.SCOPE)
        escaping = frozenset(QualifiedName(n) for n in scope.globals | scope.nonlocals)
        _Liveness(escaping).block(func.body, escaping)
