"""Rewrites `and`, `or`, `not`, chained comparisons and `is True`/`is False` into runtime operators.

Before::

    if x is not None and x.sum() > 0 and not done:
        ...
    ok = 0 < i < n
    if flag is True:
        ...

After::

    if jst.convert_and(lambda: x is not None,
                       lambda: jst.convert_and(lambda: x.sum() > 0,
                                               lambda: jst.convert_not(done))):
        ...
    ok = jst.convert_compare_chain(lambda: 0, (lambda l, r: l < r, lambda: i),
                                   (lambda l, r: l < r, lambda: n))
    if jst.convert_is(flag, True, False):   # `if flag is True:`
        ...

`x is True` (`is not`, `False`) becomes `jst.convert_is`: a Python bool the data decides is a
0-d array, never `True` itself; it is compared by value. `-x`, `+x` and `~x` become
`jst.convert_unary`: on such a bool Python computes with an int (`-True == -1`, `~True == -2`).

Operands become thunks so the runtime can keep Python's short-circuit: a Python left operand
decides in Python and the right one is evaluated only when needed; a traced left operand is
staged lazily with `lax.cond`, giving the value eager Python would.

An `and`/`or` whose value is only tested for truth (the test of an `if`, `while`, ternary,
`assert` or comprehension filter, an operand of `not`, or an operand of such an `and`/`or`)
gets `as_test=True`: the runtime then combines truth values, so a shape-(1,) array beside a
Python bool or a scalar flag (`not break_ and x[:1] > 0`) works as it does eagerly, although
the two values `and` could give have different shapes.

Where the right side of such an `and`/`or` is names and constants under comparisons and
arithmetic (`not break_ and i < n`, the test a `break` gives a `while`), it gets `pure=True`: a
traced left side is then combined with `logical_and`/`logical_or` instead of a cond, as a person
writes it, since evaluating the right side has no effect to keep lazy.

An `and`/`or` or chained comparison holding a `:=` (`a and (m := f(x))`) stays Python's own, so
`m` is the function's name (a thunk would make it the lambda's, and lose it): its deciding
operands must then be Python values (`jst.python_operand` refuses a traced one at its line).
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.transformers import templates
from dy2st.transformers.base import Transformer


class LogicalTransformer(Transformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._tested = set()  # ids of expressions whose value is only tested for truth

    def _mark_tested(self, node) -> None:
        if node is not None:
            self._tested.add(id(node))

    def visit_If(self, node):
        self._mark_tested(node.test)
        return self.generic_visit(node)

    visit_While = visit_IfExp = visit_If

    def visit_Assert(self, node):
        self._mark_tested(node.test)
        return self.generic_visit(node)

    def visit_comprehension(self, node):
        for test in node.ifs:
            self._mark_tested(test)
        return self.generic_visit(node)

    def visit_BoolOp(self, node):
        as_test = id(node) in self._tested
        if as_test:
            for value in node.values:
                self._mark_tested(value)
        simple = [_without_effects(value) for value in node.values]  # (before the visit makes calls of them)
        self.generic_visit(node)
        if any(ast_util.binds_a_name(value) for value in node.values):
            # Thunks would make the name a lambda's own: Python's operator keeps it the
            # function's, each deciding operand checked to be a Python value.
            for i, value in enumerate(node.values[:-1]):
                node.values[i] = templates.replace_as_expression("jst.python_operand(v)", jst=self.ctx.runtime, v=value)
            return node
        operator = "convert_and" if isinstance(node.op, ast.And) else "convert_or"
        template = f"jst.{operator}(left, right, as_test=True)" if as_test else f"jst.{operator}(left, right)"
        result = node.values[-1]
        for i in reversed(range(len(node.values) - 1)):
            result = templates.replace_as_expression(
                template, jst=self.ctx.runtime, left=templates.thunk(node.values[i]), right=templates.thunk(result)
            )
            if as_test and all(simple[i + 1:]):  # the right side computes without effects: no cond needed
                result.keywords.append(ast.keyword(arg="pure", value=templates.constant(True)))
        return result

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            self._mark_tested(node.operand)
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            if isinstance(node.operand, ast.Constant):  # `-1`: a constant, as Python folds it
                return node
            sign = {ast.UAdd: "+", ast.USub: "-", ast.Invert: "~"}[type(node.op)]
            return templates.replace_as_expression(f"jst.convert_unary('{sign}', x)", jst=self.ctx.runtime, x=node.operand)
        return templates.replace_as_expression("jst.convert_not(x)", jst=self.ctx.runtime, x=node.operand)

    def visit_Compare(self, node):
        self.generic_visit(node)
        identity = _identity_with_a_bool(node)
        if identity is not None:
            value, constant, negated = identity
            return templates.replace_as_expression(
                f"jst.convert_is(value, {constant}, {negated})", jst=self.ctx.runtime, value=value)
        if len(node.ops) == 1 or ast_util.binds_a_name(node):  # Python's own chain keeps a `:=` the function's
            return node
        call = templates.replace_as_expression(
            "jst.convert_compare_chain(first)", jst=self.ctx.runtime, first=templates.thunk(node.left)
        )
        for op, comparator in zip(node.ops, node.comparators):
            compare = ast.Compare(
                left=templates.name("l"), ops=[op], comparators=[templates.name("r")]
            )
            operator = templates.thunk(compare, params=("l", "r"))
            call.args.append(ast.Tuple(elts=[operator, templates.thunk(comparator)], ctx=ast.Load()))
        return call


def _identity_with_a_bool(node: ast.Compare):
    """`(the other operand, True or False, negated)` for `x is True`, `x is not False`, `True is
    x`: a Python bool the data decides is a 0-d array, which is never `True` itself."""
    if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Is, ast.IsNot)):
        return None
    left, right = node.left, node.comparators[0]
    for constant, other in ((right, left), (left, right)):
        if isinstance(constant, ast.Constant) and type(constant.value) is bool:
            return other, constant.value, isinstance(node.ops[0], ast.IsNot)
    return None


def transform(tree, ctx):
    return LogicalTransformer(ctx).transform(tree)


_PURE_NODES = (ast.Name, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.cmpop, ast.boolop,
               ast.unaryop, ast.operator, ast.expr_context)


def _without_effects(expr) -> bool:
    """Whether `expr` is names and constants under comparisons and arithmetic (`i < n`, `not
    done`): evaluating it has no effect to keep lazy, and can fail only as its operands' types
    make it (`runtime.logical` falls back to a cond where it does)."""
    return all(isinstance(node, _PURE_NODES) for node in ast.walk(expr))
