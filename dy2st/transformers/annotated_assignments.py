"""Drops the annotations of the function's own annotated assignments.

Before::

    total: float = 0.0
    for v in xs:
        total: float = total + v
    count: int

After::

    total = 0.0
    for v in xs:
        total = total + v
    pass

Inside a function Python never evaluates these annotations (PEP 526), so the assignment is all
there is; left annotated, a name that an `if` or loop carries could not be declared `nonlocal`
in the functions later steps make ("annotated name 'total' can't be nonlocal"). A class body
defined in the function keeps its annotations: a dataclass reads them.
"""

from __future__ import annotations

import ast

from dy2st.transformers.base import Transformer


class AnnotationTransformer(Transformer):
    """See the module docstring."""

    def visit_ClassDef(self, node):
        return node  # (its annotations are fields)

    def visit_AnnAssign(self, node):
        if node.value is None:
            return ast.Pass()
        return ast.Assign(targets=[node.target], value=node.value, type_comment=None)


def transform(tree, ctx):
    return AnnotationTransformer(ctx).transform(tree)
