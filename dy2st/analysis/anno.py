"""Analysis facts attached to ast nodes, keyed by an enum whose values document them.

Facts live in one dict under the field `___dy2st_anno`, so they never clash with a node's own
attributes. They are computed by `dy2st.analysis` and read by transformers through `getanno`;
no transformer derives read/write sets itself.
"""

from __future__ import annotations

import enum
from typing import Any

_FIELD = "___dy2st_anno"
_MISSING = object()


class Fact(enum.Enum):
    """Keys of the facts the analysis attaches. Each value says what the fact holds."""

    SCOPE = "FunctionScope of a FunctionDef/Lambda: params, locals, declared globals/nonlocals."
    ACTIVITY = "Activity of a statement: the symbols it reads and writes (nested functions excluded)."
    LIVE_IN = "frozenset of symbols live on entry to a statement."
    LIVE_OUT = "frozenset of symbols live right after a statement."
    DEFINED_IN = "frozenset of names definitely bound on every path reaching a statement."
    BODY_LIVE_IN = "frozenset of symbols live at the start of a loop body (for loop-carried state)."
    ORIGIN = "OriginInfo of the user's code this node comes from."
    PYTHON_BODY = (
        "PythonBody on a user's `for`/`while` whose body has Python effects a staged loop would run "
        "only once (set by analysis.loop_bodies before any rewrite)."
    )
    SETTLED_BY_ELSE = (
        "frozenset of names a loop's `else` block always assigns (set by transformers.break_statements)."
    )
    BREAK_FLAG = (
        "str: on a `for` loop, the flag its `break`s set (set by transformers.break_statements); "
        "the loop stops before the next item once the flag is true."
    )

    COUNTER_BOUND = (
        "ast expr on a user's `while` whose condition bounds a counter its body steps by one (`i < n`, "
        "`i += 1`): the iterations left, `n - i` (set by analysis.loop_bodies before any rewrite)."
    )
    HELD_ITERATOR = (
        "True on a user's `for` over a local name that the function reads only as `next()`'s iterator "
        "(or another loop's): a traced `break` may leave it at a traced position (analysis.loop_bodies)."
    )

    # Members are singletons compared by identity: hashed so too, not by name in Python code
    # (a conversion looks facts up tens of thousands of times).
    __hash__ = object.__hash__


def setanno(node, key: Fact, value: Any) -> None:
    annos = getattr(node, _FIELD, None)
    if annos is None:
        annos = {}
        setattr(node, _FIELD, annos)
    annos[key] = value


def getanno(node, key: Fact, default: Any = _MISSING) -> Any:
    annos = getattr(node, _FIELD, None) or {}
    if key in annos:
        return annos[key]
    if default is _MISSING:
        raise KeyError(f"{type(node).__name__} at line {getattr(node, 'lineno', '?')} has no {key.name} fact")
    return default


def hasanno(node, key: Fact) -> bool:
    return key in (getattr(node, _FIELD, None) or {})
