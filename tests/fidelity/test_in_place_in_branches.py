"""In-place changes of lists and dicts in a staged `if` (`d.update(...)`, `log.extend(v)`,
`xs.pop()`, `self.history.append(x)`): eager == to_static == jit(to_static). They were refused
when the code was read ("a branch changes a list or dict in place"); the receiver is now
recorded while each side is traced (`runtime.writes.in_place`), put back after it, and the
change carried out of the cond and written back into the same object. What cannot be put back
(a set) is refused at its own line."""

import collections
import types

import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import PythonEffectError
from dy2st.testing import check_equivalent

XS = [jnp.array([1.0, 2.0, 3.0]), jnp.array([-1.0, 0.5, 0.2]), jnp.array([-3.0, -4.0, 0.5])]


class History:
    def __init__(self):
        self.history = [jnp.zeros(3)]
        self.cfg = {"a": jnp.zeros(3)}


def dict_updated_in_both(x):
    d = {"a": x, "k": 1}
    other = d
    if x.sum() > 0:
        d.update(a=x * 2)
    else:
        d.update(a=-x)
    return other


def dict_updated_in_one(x):
    d = {"a": x}
    if x.sum() > 0:
        d.update(a=x * 2)
    return d


def attribute_list_appended(x):
    h = History()
    if x.sum() > 0:
        h.history.append(x)
    else:
        h.history.append(-x)
    return h.history


def attribute_dict_setdefault_and_pop(x):
    h = History()
    if x.sum() > 0:
        v = h.cfg.setdefault("a", x)
    else:
        v = h.cfg.pop("a") * 2
        h.cfg["a"] = v
    return v, h.cfg


def popped_from_either_end(x):
    xs = [x, x * 2, x * 3]
    if x.sum() > 0:
        v = xs.pop()
    else:
        v = xs.pop(0)
    return v, xs


def extended(x):
    log = [x]
    if x[0] > 0:
        log.extend([x, x * 2])
    else:
        log.extend([-x, x])
    return log


def updated_in_nested_ifs(x):
    d = {"a": x}
    if x.sum() > 0:
        if x[0] > 1:
            d.update(a=x * 5)
        else:
            d.update(a=x * 7)
    else:
        d.update(a=-x)
    return d


def sorted_or_reversed(x):
    xs = [3, 1, 2]
    if x.sum() > 0:
        xs.sort()
    else:
        xs.reverse()
    return xs, x


def dict_made_in_the_branch(x):
    if x.sum() > 0:
        d = {}
        d.update(a=x)
    else:
        d = {}
        d.update(a=-x)
    return d


@pytest.mark.parametrize("x", XS)
@pytest.mark.parametrize("fn", [dict_updated_in_both, dict_updated_in_one, attribute_list_appended,
                                attribute_dict_setdefault_and_pop, popped_from_either_end, extended,
                                updated_in_nested_ifs, sorted_or_reversed, dict_made_in_the_branch])
def test_an_in_place_change_in_a_staged_branch_is_carried(fn, x):
    check_equivalent(fn, x)


def updated_in_one_branch_with_a_new_key(x):
    d = {"a": x}
    if x.sum() > 0:
        d.update(b=x)
    return d


def set_added_to(x):
    seen = set()
    if x.sum() > 0:
        seen.add("positive")
    return x, len(seen)


def ordered_dict_updated(x):
    od = collections.OrderedDict(a=x)
    if x.sum() > 0:
        od.update(a=x * 2)
    else:
        od.update(a=-x)
    return x, od["a"]


def test_an_ordered_dict_changed_in_a_staged_branch_is_refused():
    """Only plain lists and dicts are recorded and put back: a subclass, changed in place while
    both sides are traced, would keep both sides' changes."""
    with pytest.raises(PythonEffectError) as err:
        dy2st.to_static(ordered_dict_updated)(XS[0])
    assert "od.update(a=x * 2)" in str(err.value)
    assert "this line changes an OrderedDict in place (od.update())" in str(err.value)


def test_a_change_only_one_branch_makes_to_the_structure_is_refused():
    with pytest.raises(dy2st.errors.BranchOutputError) as err:
        dy2st.to_static(updated_in_one_branch_with_a_new_key)(XS[0])
    assert "if x.sum() > 0:" in str(err.value)


def test_a_set_changed_in_a_staged_branch_is_refused_at_its_line():
    with pytest.raises(PythonEffectError) as err:
        dy2st.to_static(set_added_to)(XS[0])
    text = str(err.value)
    assert text.startswith('File "' + __file__)
    assert 'seen.add("positive")' in text.splitlines()[1]
    assert "this line changes a set in place (seen.add())" in text
    assert "`s = s | {v}`" in text


GLOBAL_LOG = []


def extends_a_global_list(x):
    if x.sum() > 0:
        GLOBAL_LOG.extend([x])
    else:
        GLOBAL_LOG.extend([-x])
    return x


def closing_over_a_list():
    outer = [1.0]

    def appends(x):
        if x.sum() > 0:
            outer.append(x)
        else:
            outer.append(-x)
        return x

    return appends, outer


class Registry:
    items = []


def appends_to_a_class_list(x, registry):
    if x.sum() > 0:
        registry.items.append(x)
    else:
        registry.items.append(-x)
    return x


_HIDDEN = []
HIDDEN_ACCESS = types.SimpleNamespace(get=lambda: _HIDDEN)  # the list is reached only through a call


def extends_a_list_a_call_returns(x):
    if x.sum() > 0:
        HIDDEN_ACCESS.get().extend([x])
    else:
        HIDDEN_ACCESS.get().extend([-x])
    return x


def test_a_list_outside_the_arguments_changed_in_a_staged_branch_is_refused_and_put_back():
    """A global's, an enclosing function's or a class's list: nothing carries it out of the
    program, so the trace's value stayed in it (a tracer in the user's list). Refused at the
    call, naming it, with its items put back."""
    appends, outer = closing_over_a_list()
    cases = [(extends_a_global_list, (XS[0],), GLOBAL_LOG, "GLOBAL_LOG", []),
             (appends, (XS[0],), outer, "outer", [1.0]),
             (appends_to_a_class_list, (XS[0], Registry()), Registry.items, "registry.items", []),
             (extends_a_list_a_call_returns, (XS[0],), _HIDDEN, "HIDDEN_ACCESS.get()", [])]
    for fn, args, container, name, before in cases:
        with pytest.raises(PythonEffectError) as err:
            dy2st.to_static(fn)(*args)
        text = str(err.value)
        assert text.startswith('File "' + __file__)
        # a list the call reaches through a global (a name, or a function it calls) is a guarded
        # value: refused where the branch changes it; otherwise at the call
        assert (f"the call changes {name} in place with traced values, a list or dict the function reaches outside" in text
                or "changes the global _HIDDEN" in text)
        assert container == before


def extends_a_global_list_outside_any_branch(x):
    GLOBAL_LOG.extend([x])
    return x * 2


def extends_its_own_list(x):
    t = []
    t.extend([x, x * 2])
    return t


def test_a_global_list_changed_by_the_call_outside_a_branch_is_refused_too():
    """`GLOBAL_LOG.extend([x])` in straight-line code left a tracer in the global list (as
    `jax.jit` would); a list the call makes and returns is fine."""
    with pytest.raises(PythonEffectError) as err:
        dy2st.to_static(extends_a_global_list_outside_any_branch)(XS[0])
    assert "the call changes GLOBAL_LOG in place with traced values" in str(err.value)
    assert GLOBAL_LOG == []
    check_equivalent(extends_its_own_list, XS[0])


# -- writes spelled as calls: setattr, vars, operator, dunders -------------------------------------
import collections as _collections  # noqa: E402
import operator as _operator  # noqa: E402


class Bag:
    pass


def _bag():
    bag = Bag()
    bag.w = jnp.zeros(3)
    return bag


def by_setattr(x, o):
    if x.sum() > 0:
        setattr(o, "w", x * 10)
    else:
        setattr(o, "w", x)
    return o.w


def by_setattr_in_one_branch(x, o):
    if x.sum() > 0:
        setattr(o, "w", x + 10)
    return o.w


def by_object_setattr(x, o):
    if x.sum() > 0:
        object.__setattr__(o, "w", x * 10)
    return o.w


def by_dunder_setattr(x, o):
    if x.sum() > 0:
        o.__setattr__("w", x * 10)
    return o.w


def by_vars_update(x, o):
    if x.sum() > 0:
        vars(o).update(w=x * 10)
    return o.w


def by_dict_of_the_object(x, o):
    name = "w"
    if x.sum() > 0:
        o.__dict__[name] = x * 10
    return o.w


def by_operator_setitem(x, d):
    if x.sum() > 0:
        _operator.setitem(d, "w", x * 10)
    else:
        d.__setitem__("w", x)
    return d["w"]


def by_dunder_iadd(x, xs):
    if x.sum() > 0:
        xs.__iadd__([x])
    else:
        xs.__iadd__([-x])
    return xs[-1]


@pytest.mark.parametrize("x", XS[:2])
@pytest.mark.parametrize("fn, make", [
    (by_setattr, _bag), (by_setattr_in_one_branch, _bag), (by_object_setattr, _bag), (by_dunder_setattr, _bag),
    (by_vars_update, _bag), (by_dict_of_the_object, _bag), (by_operator_setitem, lambda: {"w": jnp.zeros(3)}),
    (by_dunder_iadd, lambda: [jnp.zeros(3)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_write_spelled_as_a_call_in_a_staged_branch_is_carried(fn, make, x):
    """Both sides' writes happened while tracing, so the else side's value won whatever the data
    said, silently: `setattr`, `object.__setattr__`, `vars(o).update`, `o.__dict__[k]`,
    `operator.setitem`, `d.__setitem__`, `xs.__iadd__`."""
    static = dy2st.to_static(fn)
    for _ in range(2):
        eager_arg, static_arg = make(), make()
        expected, got = fn(x, eager_arg), static(x, static_arg)
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected))
        after = (lambda a: a.w) if isinstance(eager_arg, Bag) else (lambda a: a["w"] if isinstance(a, dict) else a[-1])
        np.testing.assert_allclose(np.asarray(after(static_arg)), np.asarray(after(eager_arg)))


def appends_to_a_user_list(x, ul):
    if x.sum() > 0:
        ul.append(x)
    else:
        ul.append(-x)
    return ul[0]


def test_a_library_containers_append_in_a_staged_branch_is_refused_at_its_line():
    """A UserList's `append` ran for both sides (a raw UnexpectedTracerError)."""
    with pytest.raises(PythonEffectError) as err:
        dy2st.to_static(appends_to_a_user_list)(XS[0], _collections.UserList())
    assert "ul.append(x)" in str(err.value).splitlines()[1]
    assert "UserList in place (ul.append())" in str(err.value)


import bisect as _bisect  # noqa: E402
import heapq as _heapq  # noqa: E402


def by_heappush(x, h):
    if x.sum() > 0:
        _heapq.heappush(h, 0)
    else:
        _heapq.heappush(h, 99)
    return h


def by_insort(x, xs):
    if x.sum() > 0:
        _bisect.insort(xs, 2)
    else:
        _bisect.insort(xs, 7)
    return xs


def by_a_bound_method_value(x, xs):
    add = xs.append
    if x.sum() > 0:
        getattr(xs, "append")(1)
    else:
        add(2)
    return xs


def by_map_of_a_bound_method(x, xs):
    if x.sum() > 0:
        list(map(xs.append, [3, 4]))
    else:
        _operator.iadd(xs, [5, 6])
    return xs


def by_setdefault_then_append(x, d):
    if x.sum() > 0:
        d.setdefault("k", []).append(1)
    else:
        d.setdefault("k", []).append(2)
    return d


@pytest.mark.parametrize("x", XS[:2])
@pytest.mark.parametrize("fn", [by_heappush, by_insort, by_a_bound_method_value, by_map_of_a_bound_method])
def test_a_list_changed_by_a_library_call_in_a_staged_branch_is_carried(fn, x):
    """Found by a stdlib probe: a library function given a list (`heapq.heappush`,
    `bisect.insort`, `operator.iadd`, `map(xs.append, ...)`) or a list's method reached as a value
    changed it while each side was traced: the list got both sides' items, silently."""
    static = dy2st.to_static(fn)
    for _ in range(2):
        eager_arg, static_arg = [1, 5], [1, 5]
        expected, got = fn(x, eager_arg), static(x, static_arg)
        assert [int(v) for v in got] == expected and [int(v) for v in static_arg] == eager_arg, (got, static_arg)


@pytest.mark.parametrize("x", XS[:2])
def test_a_dict_items_list_made_by_setdefault_and_appended_to_is_carried(x):
    static = dy2st.to_static(by_setdefault_then_append)
    for _ in range(2):
        expected, got = by_setdefault_then_append(x, {}), static(x, {})
        assert {k: [int(v) for v in vs] for k, vs in got.items()} == expected


def appends_through_the_class(x, xs):
    if x.sum() > 0:
        list.append(xs, 1)
    return xs


def test_a_list_method_called_through_the_class_in_a_staged_branch_is_refused_saying_so():
    """It said the line "changes a type in place" (found by a stdlib probe)."""
    with pytest.raises(PythonEffectError) as err:
        dy2st.to_static(appends_through_the_class)(XS[0], [])
    text = str(err.value)
    assert "list.append(xs, 1)" in text.splitlines()[1] and "calls a list method through the class" in text


# -- a defaultdict fills in a missing key when it is read: a staged side that reads one would
# add it whatever the data says (eager adds it only on the side the data takes)


def appends_through_a_missing_key(x, dd):
    if x.sum() > 0:
        dd["p"].append(x)
    else:
        dd["n"].append(x)
    return dd


def reads_a_missing_key(x, dd):
    n = 0
    if x.sum() > 0:
        n = len(dd["p"])
    return x + n


@pytest.mark.parametrize("fn", [appends_through_a_missing_key, reads_a_missing_key])
def test_a_missing_key_read_in_a_staged_side_is_refused(fn):
    import collections

    from dy2st.errors import PythonEffectError

    dd = collections.defaultdict(list)
    with pytest.raises(PythonEffectError, match=r"(?s)adds the key.*To fix: add the key before") as info:
        dy2st.to_static(fn)(jnp.ones(2), dd)
    assert info.value.origin.lineno == fn.__code__.co_firstlineno + (1 if fn is appends_through_a_missing_key else 2)
    assert dict(dd) == {}  # put back


def counts_by_sign(x, counts):
    if x.sum() > 0:
        counts["pos"] += 1
    else:
        counts["pos"] += 0
    return counts


def test_a_defaultdict_key_present_before_the_if_is_carried():
    import collections

    for x in (jnp.ones(2), -jnp.ones(2)):
        eager, got = collections.defaultdict(int, pos=1), collections.defaultdict(int, pos=1)
        out = dy2st.to_static(counts_by_sign)(x, got)
        counts_by_sign(x, eager)
        assert out is got and dict(got) == dict(eager)


# -- a dict or list made in the function and changed in place by a nested function it calls
# (its closure's): as one it is given


def bumps_through_a_closure_in_a_branch(x):
    state = {"n": 0}

    def inc():
        state["n"] += 1

    if x.sum() > 0:
        inc()
    return state["n"]


def bumps_through_a_closure_in_a_loop(x):
    state = {"n": 0}

    def inc():
        state["n"] += 1

    while x.sum() < 5:
        x = x + 1
        inc()
    return state["n"], x


def bumps_through_a_closure_in_an_and(x):
    state = {"n": 0}

    def inc():
        state["n"] += 1
        return True

    ok = x.sum() > 0 and inc()
    return jnp.where(ok, x, -x), state["n"]


@pytest.mark.parametrize("x", [jnp.ones(2), -jnp.ones(2)])
def test_a_closures_dict_changed_in_a_staged_branch_is_carried(x):
    static = dy2st.to_static(bumps_through_a_closure_in_a_branch)
    for _ in range(2):
        assert int(static(x)) == bumps_through_a_closure_in_a_branch(x)


@pytest.mark.parametrize("fn", [bumps_through_a_closure_in_a_loop, bumps_through_a_closure_in_an_and])
def test_a_closures_dict_changed_in_a_staged_loop_or_lazy_operand_is_refused(fn):
    from dy2st.errors import Dy2StaticError

    with pytest.raises(Dy2StaticError, match=r"(?s)changes the dict.*To fix"):
        dy2st.to_static(fn)(jnp.zeros(2))
