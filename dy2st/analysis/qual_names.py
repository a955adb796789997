"""Symbols: plain names (`x`) and composite names (`self.w`, `cache['k']`).

A composite is something a branch or loop may write that is not a local variable: an
attribute of an object or an item of a container with a constant key. Transformers carry
composites through staged control flow exactly like variables.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from dy2st.ast_util import is_private_name


class QualifiedName(NamedTuple):
    """`base` followed by a path of attribute names (str) or constant keys (wrapped in a tuple).

    A named tuple: symbols fill the sets the analyses build for every statement, and a tuple's
    hash and equality run in C (a frozen dataclass's ran in Python, a tenth of the analysis)."""

    base: str
    path: tuple = ()

    @property
    def is_composite(self) -> bool:
        return bool(self.path)

    @property
    def parent(self) -> "QualifiedName | None":
        return QualifiedName(self.base, self.path[:-1]) if self.path else None

    def __str__(self) -> str:
        text = self.base
        for step in self.path:
            text += f".{step}" if isinstance(step, str) else f"[{step[0]!r}]"
        return text

    def path_constant(self):
        """As the runtime names state (`dy2st.runtime.state_cells`): `'y'`, `('o', 'w')`,
        `('d', ('k',))`."""
        return (self.base, *self.path) if self.path else self.base

    def has_private_name(self) -> bool:
        """Whether a name on the path is one the compiler mangles in a class (`__n`)."""
        return any(isinstance(step, str) and is_private_name(step) for step in (self.base, *self.path))

    def to_node(self, ctx=None):
        """A fresh expression reading (or, with ctx=ast.Store(), writing) this symbol."""
        ctx = ctx or ast.Load()
        node = ast.Name(id=self.base, ctx=ast.Load() if self.path else ctx, )
        for i, step in enumerate(self.path):
            step_ctx = ctx if i == len(self.path) - 1 else ast.Load()
            if isinstance(step, str):
                node = ast.Attribute(value=node, attr=step, ctx=step_ctx)
            else:
                node = ast.Subscript(value=node, slice=ast.Constant(value=step[0], kind=None), ctx=step_ctx)
        return node


def from_path(path) -> QualifiedName:
    """The symbol of a runtime state path (`QualifiedName.path_constant`)."""
    return QualifiedName(path) if isinstance(path, str) else QualifiedName(path[0], tuple(path[1:]))


def from_node(node) -> QualifiedName | None:
    """The symbol an expression names, or None when it is not a (composite) name."""
    if isinstance(node, ast.Name):
        return QualifiedName(node.id)
    if isinstance(node, ast.Attribute):
        parent = from_node(node.value)
        return QualifiedName(parent.base, parent.path + (node.attr,)) if parent else None
    if isinstance(node, ast.Subscript) and _constant_key(node.slice) is not None:
        parent = from_node(node.value)
        key = _constant_key(node.slice)
        if parent is not None and isinstance(key, (str, int)):
            return QualifiedName(parent.base, parent.path + ((key,),))
    return None


def _constant_key(node):
    """The key of `x['k']`, `x[1]` or `x[-1]` (a negative index parses as `-` applied to 1)."""
    if isinstance(node, ast.Constant):
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int):
        return -node.operand.value
    return None
