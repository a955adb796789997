"""`list.append` as a value-returning operator, so loops and branches can carry lists."""

from __future__ import annotations

from dy2st.runtime.staging import may_grow_here, note_grown, tracing_staged_code
from dy2st.runtime.writes import adopt_reachable, watched_container


def list_append(target, value):
    """`target.append(value)`, returning the list to assign back.

    A Python list is appended to in place when the code runs as plain Python (other references
    to it see the item, as eagerly), and while a staged side is traced where that side puts it
    back afterwards (a list the staged `if` holds before it, or a copy made in the side: see
    `staging.may_grow_here`). Any other list gets a new one (`target + [value]`) the first
    time, noted as grown from it, so two branches or loop iterations traced from the same
    state never share one list object. Any other object has its own `append` called and is
    returned unchanged.
    """
    if type(target) is list:
        # Plain Python here, a copy made in the side being traced, or a list from before the
        # side reached through another name (`t = d["k"]`): append in place, as eagerly (other
        # references to the list, a context manager's, see the item; the side carries it).
        if not tracing_staged_code() or may_grow_here(target) or watched_container(target) or adopt_reachable(target):
            target.append(value)
            return target
        grown = target + [value]
        note_grown(grown, target)  # the staged `if` writes it back into `target` (see control_flow)
        return grown
    target.append(value)
    return target
