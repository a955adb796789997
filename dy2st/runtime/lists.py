"""`list.append` as a value-returning operator, so loops and branches can carry lists."""

from __future__ import annotations


def list_append(target, value):
    """`target.append(value)`, returning the list to assign back.

    A Python list gives a new list (`target + [value]`): two branches or loop iterations traced
    from the same state never share one list object. Any other object has its own `append`
    called and is returned unchanged.
    """
    if type(target) is list:
        return target + [value]
    target.append(value)
    return target
