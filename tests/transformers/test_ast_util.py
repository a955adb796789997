"""dy2st.ast_util does what the ast module does (only faster): same visits, same rewrites."""

import ast

from dy2st import ast_util

SOURCE = '''
def f(x, y=1):
    global g
    a = [x + 1 for x in y if x]
    if a:
        del a
        pass
    return g(a, *y, k=-x) if x else 3.0
'''


def _rewriters(base):
    class Rewriter(base):
        """Drops `pass`, splits `del` into two statements, negates constants, records names."""

        def __init__(self):
            self.seen = []

        def visit_Name(self, node):
            self.seen.append(node.id)
            return node

        def visit_Pass(self, node):
            return None

        def visit_Delete(self, node):
            return [node, ast.Expr(value=ast.Constant(value=0))]

        def visit_Constant(self, node):
            self.seen.append(node.value)
            return ast.UnaryOp(op=ast.USub(), operand=node)

    return Rewriter


def test_transformer_matches_ast():
    trees, seen = [], []
    for base in (ast.NodeTransformer, ast_util.NodeTransformer):
        tree = ast.parse(SOURCE)
        rewriter = _rewriters(base)()
        trees.append(ast.dump(rewriter.visit(tree), include_attributes=True))
        seen.append(rewriter.seen)
    assert trees[0] == trees[1]
    assert seen[0] == seen[1]


def test_visitor_matches_ast():
    orders = []
    for base in (ast.NodeVisitor, ast_util.NodeVisitor):
        class Recorder(base):
            def __init__(self):
                self.order = []

            def generic_visit(self, node):
                self.order.append(type(node).__name__)
                super().generic_visit(node)

        recorder = Recorder()
        recorder.visit(ast.parse(SOURCE))
        orders.append(recorder.order)
    # ours never enters the context and operator singletons (`Load()`, `Add()`): none is visited
    singletons = (ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop)
    expected = [name for name in orders[0] if not issubclass(getattr(ast, name), singletons)]
    assert expected != orders[0] and orders[1] == expected
