"""The one up-front check of syntax dy2st cannot convert, run before any rewrite.

Each rejected construct maps to one sentence of advice; the error points at its line.
"""

from __future__ import annotations

import gast

from dy2st.errors import OriginInfo, UnsupportedSyntaxError

_REJECTED = {
    gast.Yield: "generators (`yield`) cannot be converted: a staged program returns values once. "
    "Collect the values in a list and return it, or mark the function with dy2st.not_to_static.",
    gast.YieldFrom: "generators (`yield from`) cannot be converted. "
    "Return a list instead, or mark the function with dy2st.not_to_static.",
    gast.Await: "`await` cannot be converted: XLA programs are not coroutines. Call the function synchronously.",
    gast.AsyncFunctionDef: "`async def` cannot be converted: XLA programs are not coroutines. Use a plain `def`.",
    gast.AsyncFor: "`async for` cannot be converted. Use a plain `for` loop.",
    gast.AsyncWith: "`async with` cannot be converted. Use a plain `with` block.",
}


class _Fence(gast.NodeVisitor):
    def __init__(self, filename: str, function_name: str):
        self.filename = filename
        self.function_name = function_name

    def generic_visit(self, node):
        advice = _REJECTED.get(type(node))
        if advice is not None:
            origin = OriginInfo(self.filename, getattr(node, "lineno", 0), self.function_name)
            what, _, fix = advice.partition(". ")
            raise UnsupportedSyntaxError(f"Unsupported syntax: {what}.", origin, advice=fix)
        super().generic_visit(node)


def verify(tree, filename: str, function_name: str) -> None:
    """Raise UnsupportedSyntaxError at the first construct dy2st cannot convert."""
    _Fence(filename, function_name).visit(tree)
