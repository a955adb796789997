"""dy2st.ast_util does what gast does (only faster): same visits, same rewrites, same translations."""

import ast

import gast

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
            return [node, gast.Expr(value=gast.Constant(value=0, kind=None))]

        def visit_Constant(self, node):
            self.seen.append(node.value)
            return gast.UnaryOp(op=gast.USub(), operand=node)

    return Rewriter


def test_transformer_matches_gast():
    trees, seen = [], []
    for base in (gast.NodeTransformer, ast_util.NodeTransformer):
        tree = gast.parse(SOURCE)
        rewriter = _rewriters(base)()
        trees.append(gast.dump(rewriter.visit(tree), include_attributes=True))
        seen.append(rewriter.seen)
    assert trees[0] == trees[1]
    assert seen[0] == seen[1]


def test_visitor_matches_gast():
    orders = []
    for base in (gast.NodeVisitor, ast_util.NodeVisitor):
        class Recorder(base):
            def __init__(self):
                self.order = []

            def generic_visit(self, node):
                self.order.append(type(node).__name__)
                super().generic_visit(node)

        recorder = Recorder()
        recorder.visit(gast.parse(SOURCE))
        orders.append(recorder.order)
    assert orders[0] == orders[1]



TRICKY = '''
import os.path as osp, sys
from . import thing as other
@decorator(arg)
async def g(a, /, b: int = 1, *args, c, d=2, **kw) -> "T":
    global counter
    async with ctx() as (x, y), other:
        async for i in aiter():
            await i
    try:
        pass
    except (ValueError, TypeError) as err:
        raise RuntimeError("x") from err
    except Exception:
        pass
    else:
        x = [i for i in range(3) if i if not i]
    finally:
        del x
    match a:
        case {"k": [1, *rest]} | Point(x=0, y=_) if rest:
            y = f"{a!r:>{b}}"
        case _:
            y = {k: v for k, v in kw.items()}, {*args}, (v for v in args)
    return (y := lambda p, *q, r=1, **s: p[1:2, ::3]) @ b ** -c


class K(Base, metaclass=Meta):
    """doc"""
    x: int = 3
    def method(self):
        nonlocal_value = yield from self
        return super().method(*self, **{})
'''


def _same(a, b, path="tree"):
    """Same node types, same fields and locations (as sets of keys), same values."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, gast.AST):
        assert a.__dict__.keys() == b.__dict__.keys(), path
        for key in a.__dict__:
            _same(a.__dict__[key], b.__dict__[key], f"{path}.{key}")
        for key in a._attributes:
            assert getattr(a, key, "missing") == getattr(b, key, "missing"), f"{path}.{key}"
    else:
        assert a == b, path


def _sources():
    import pathlib

    import dy2st

    yield TRICKY
    for path in sorted(pathlib.Path(dy2st.__file__).parent.rglob("*.py")):
        yield path.read_text()


def test_translation_matches_gast():
    for source in _sources():
        tree = ast.parse(source)
        gast_tree = gast.ast_to_gast(tree)
        _same(ast_util.to_gast(tree), gast_tree)
        # generated nodes lack locations: drop some before translating back
        for i, node in enumerate(gast.walk(gast_tree)):
            if i % 3 == 0:
                for key in ("lineno", "col_offset", "end_lineno", "end_col_offset")[i % 4:]:
                    node.__dict__.pop(key, None)
        _same(ast_util.to_ast(gast_tree), gast.gast_to_ast(gast_tree))
