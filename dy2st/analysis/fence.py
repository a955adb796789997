"""The one up-front check of syntax dy2st cannot convert, run before any rewrite.

Each rejected construct maps to one sentence of advice; the error points at its line.
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.errors import OriginInfo, UnsupportedSyntaxError

_REJECTED = {
    ast.Yield: "generators (`yield`) cannot be converted: a staged program returns values once. "
    "Collect the values in a list and return it, or mark the function with dy2st.not_to_static.",
    ast.YieldFrom: "generators (`yield from`) cannot be converted. "
    "Return a list instead, or mark the function with dy2st.not_to_static.",
    ast.Await: "`await` cannot be converted: XLA programs are not coroutines. Call the function synchronously.",
    ast.AsyncFunctionDef: "`async def` cannot be converted: XLA programs are not coroutines. Use a plain `def`.",
    ast.AsyncFor: "`async for` cannot be converted. Use a plain `for` loop.",
    ast.AsyncWith: "`async with` cannot be converted. Use a plain `with` block.",
}


# (`del name` in a loop: transformers/dead_deletes.py drops it where nothing reads the name
# again, and refuses it where something does.)
# The node types the fence can reject: a tree holding none of them passes without a walk.
SCREENED = frozenset(_REJECTED) | {ast.Try, ast.TryStar}

# Python cancels a `return` when the `finally` after it breaks or continues the loop around.
_RETURN_CANCELLED = (
    "a `return` in a `try` whose `finally` may `break` or `continue` (which cancels the return) "
    "cannot be converted. Set a result variable and `break` in the `try` instead, and return "
    "after the loop"
)


class _Fence(ast_util.NodeVisitor):
    def __init__(self, filename: str, function_name: str, tree=None):
        self.tree = tree
        self.filename = filename
        self.function_name = function_name

    def _reject(self, node, advice: str):
        raise _unsupported(advice, OriginInfo(self.filename, getattr(node, "lineno", 0), self.function_name))

    def generic_visit(self, node):
        if type(node) is ast.FunctionDef and node is not self.tree and ast_util.is_generator(node):
            return  # a generator nested in the function is left as written, and runs as Python
        advice = _REJECTED.get(type(node))
        if advice is not None:
            self._reject(node, advice)
        if isinstance(node, (ast.Try, ast.TryStar)) and node.finalbody:
            self._check_finally(node)
        super().generic_visit(node)

    def _check_finally(self, node):
        guarded = node.body + [s for h in node.handlers for s in h.body] + node.orelse
        if ast_util.jumps_out(node.finalbody, returns=False) and ast_util.jumps_out(guarded, loop_jumps=False):
            self._reject(node, _RETURN_CANCELLED)


def verify(tree, filename: str, function_name: str) -> None:
    """Raise UnsupportedSyntaxError at the first construct dy2st cannot convert."""
    _Fence(filename, function_name, tree).visit(tree)


def _unsupported(advice: str, origin: OriginInfo) -> UnsupportedSyntaxError:
    what, _, fix = advice.partition(". ")
    return UnsupportedSyntaxError(f"Unsupported syntax: {what}.", origin, advice=fix)

