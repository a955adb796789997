"""`list.append` as a value-returning operator, so loops and branches can carry lists."""

from __future__ import annotations

from dy2st.runtime.staging import may_grow_here, note_grown, tracing_staged_code
from dy2st.runtime.writes import adopt_reachable, append_unseen, changing, note_appended, watched_container


def list_append(target, value, name: str = "the list"):
    """`target.append(value)`, returning the list to assign back (`name`: the variable's).

    A Python list is appended to in place, as eagerly, so every other reference to it sees the
    item: in code run as plain Python; while a staged side or loop body is traced, where that
    side puts it back afterwards (a list the staged `if` holds before it, one it could reach
    when it began, or a copy made in it: see `staging.may_grow_here`, `writes.adopt_reachable`),
    and a list nothing the side could reach shows (one it made: `writes.append_unseen`, which
    also finds one held outside after all). Only where no side is tracked does a list get a new
    one (`target + [value]`), noted as grown from it, so that two traces from the same state
    never share one list object. Any other object has its own `append` called and is returned
    unchanged.
    """
    if type(target) is list:
        if not tracing_staged_code():
            note_appended(target, name)  # a list held outside the function: refused after the trace
            target.append(value)
            return target
        if may_grow_here(target) or watched_container(target) or adopt_reachable(target) or append_unseen(target, name):
            target.append(value)
            return target
        grown = target + [value]
        note_grown(grown, target)  # the staged `if` writes it back into `target` (see control_flow)
        return grown
    changing(target, f"{name}.append()").append(value)  # (a UserList, a deque: refused in a staged side)
    return target
