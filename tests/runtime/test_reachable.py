"""`runtime.reachable`: which lists and dicts a staged side could reach when it began."""

from dy2st.runtime import reachable


class Holder:
    shared = []  # a class attribute, reached as `holder.shared`

    def __init__(self):
        self.buf = [1]
        self.cfg = {"k": [2]}


def test_a_state_variable_is_walked_as_it_was_before_the_side():
    """`m.buf = []` in a branch makes a new list: the walk takes the value `m.buf` held when
    the side began (its display name among the state variables), not the side's own list."""
    holder = Holder()
    old = holder.buf

    def branch():
        return holder

    roots = reachable.snapshot((branch,), ["holder.buf"], [old])
    holder.buf = made_in_the_side = []
    assert roots.path_to(old) == "holder.buf"
    assert roots.path_to(made_in_the_side) is None
    assert roots.path_to(holder.cfg["k"]) == "holder.cfg['k']"


def test_class_attributes_are_read_for_each_walk():
    holder = Holder()

    def branch():
        return holder

    assert reachable.snapshot((branch,)).path_to(Holder.shared) == "holder.shared"
    before, Holder.shared = Holder.shared, []
    try:
        roots = reachable.snapshot((branch,))
        assert roots.path_to(Holder.shared) == "holder.shared" and roots.path_to(before) is None
    finally:
        Holder.shared = before
