"""Which route a StaticFunction's calls take, and why: one record of what its calls and traces showed.

A call goes one of these ways (`api.StaticFunction`):

* the front: jit's C++ dispatch of the shared jit, no Python of dy2st's (positional arrays, and
  pytrees of them on the pytree route);
* the dispatcher's general path: the program table keyed by dy2st (static values, keywords,
  dicts whose order a trace observed, weak-typed scalar leaves), decoding outputs, waiting for
  run-time checks;
* the stateful path (`stateful.py`): arguments that carry state (objects, models; lists and dicts
  once a trace changed or kept one), lifted and written back;
* the function as it is: a numpy/builtin callable, or calls of Python values whose trace staged
  nothing.

Everything that moves calls from one way to another is a field of `CallPolicy`, set once and
read where the route is chosen: the hit paths (the front, the dispatcher's jit and pytree
route: `api._dispatcher`, armed and disarmed by the StaticFunction from these fields) and
`CallPolicy.route`, which says where every other call goes. A trace that finds the route it
runs on wrong leaves with a `RouteChange`; where it is caught, the policy records what it
showed, and the call takes the route the policy now gives.
"""

from __future__ import annotations

import dataclasses
import enum

import jax

from dy2st import _jax_compat
from dy2st.config import config
from dy2st.state import is_stateful

ARRAY_IMPL = _jax_compat.array_type()
KEY_ARRAY = _jax_compat.key_array_type()  # a typed PRNG key array (`jax.random.key`): an array to jit
LIFTED_ROOTS = (list, dict)  # argument types tried as plain inputs before being lifted as state
PLAIN_STATICS = frozenset({int, bool, str, bytes, type(None)})  # keyed by type and value as they are
PYTHON_SCALARS = PLAIN_STATICS | {float, complex}  # (a float keyed by its bits)


def plain_python(tree) -> bool:
    """Whether every leaf of `tree` is a Python number, string, bytes or None (no array, no
    object that may hold one)."""
    return PYTHON_SCALARS.issuperset(map(type, jax.tree_util.tree_leaves(tree)))


class Route(enum.Enum):
    """Where a call the hit path did not take goes (`CallPolicy.route`)."""

    AS_IS = "the function as it is"
    PROGRAM = "a program of the table"
    # list and dict arguments as plain inputs, watched: a trace that changes or keeps one
    # leaves with ContainerEffect, and the call goes STATEFUL (the policy lifts them from then on)
    PROGRAM_WITH_CONTAINERS = "a program of the table, list and dict arguments as plain inputs"
    STATEFUL = "a stateful program: objects (and lifted lists and dicts) lifted as state, written back"


@dataclasses.dataclass
class CallPolicy:
    """What a StaticFunction's calls so far showed (see the module docstring)."""

    # a numpy/builtin callable: nothing to convert or trace, calls run it as it is
    eager_only: bool = False
    # a trace changed or kept a list/dict argument: such arguments are lifted as state from now on
    lists_lifted: bool = False
    # pytrees of arrays may go to the shared jit as they are (closed once jit refused a leaf)
    pytree_route: bool = True
    # a program holds a run-time check (an assert): calls wait for its result, off the front
    checks: bool = False
    # programs return what the boundary decodes (`static_outputs`): calls decode, off the front
    decodes_outputs: bool = False
    # a trace of Python values only staged nothing: calls of Python values run the function as it is
    staged_nothing: bool = False
    # the shared jit refused a pytree signature with a weak-typed or bool scalar leaf: such calls
    # go to the table without a failed trace each
    ambiguous_seen: bool = False
    # a trace observed a dict argument's key order: calls with dicts are keyed by their order
    orders_observed: bool = False
    # calls whose trace raised where the eager run that replaced it did not (`errors.rerun_eagerly`)
    eager_fallbacks: int = 0
    # classes of arguments seen that the pytree route takes as it takes tuples: namedtuples, and
    # frozen dataclasses registered as pytrees of arrays (a Flax `TrainState`)
    node_types: frozenset = frozenset()
    # the classes of arguments asked about so far, taken or not: each is looked into once (a
    # dataclass's leaves are walked; an Equinox module holding functions would be on every call)
    node_types_asked: frozenset = frozenset()

    def note_node_types(self, args) -> bool:
        """Whether `args` hold such classes not asked about before (now noted)."""
        new = {type(a) for a in args} - self.node_types_asked
        if not new:
            return False
        self.node_types_asked = self.node_types_asked | new
        found = {type(a) for a in args if type(a) in new and _record_node(a)}
        self.node_types = self.node_types | found
        return bool(found)

    def route(self, args, kwargs) -> Route:
        """Where this call goes (one pass over the arguments: the common case shows each step)."""
        if not config.enable_to_static or self.eager_only:
            return Route.AS_IS
        if self.staged_nothing and plain_python((args, dict(kwargs))):
            # A trace of Python values only staged nothing: a program per value would compile
            # and keep an executable of no work. Such calls run the function as it is (eager's
            # meaning, by definition); a call with arrays traces as ever.
            return Route.AS_IS
        containers = False
        for a in (*args, *kwargs.values()) if kwargs else args:
            if type(a) is not ARRAY_IMPL and is_stateful(a):
                if type(a) not in LIFTED_ROOTS or self.lists_lifted:
                    return Route.STATEFUL
                containers = True
        return Route.PROGRAM_WITH_CONTAINERS if containers else Route.PROGRAM

    def reasons(self) -> list[str]:
        """What this policy holds, as sentences (for `explain`)."""
        said = []
        if self.eager_only:
            said.append("runs as it is (a numpy or builtin callable: nothing to convert)")
        if self.lists_lifted:
            said.append("list and dict arguments are lifted as state and written back (a trace changed or kept one)")
        if not self.pytree_route:
            said.append("pytree arguments take the dispatcher's path (jit refused one of their leaves)")
        if self.checks:
            said.append("calls wait for run-time checks (a program holds an assert or another check)")
        if self.decodes_outputs:
            said.append("calls decode outputs the program cannot return as arrays (Python values, identities)")
        if self.staged_nothing:
            said.append("calls of Python values only run the function as it is (their trace staged nothing)")
        if self.orders_observed:
            said.append("dict arguments are keyed by their key order (a trace observed it)")
        if self.eager_fallbacks:
            said.append(f"{self.eager_fallbacks} call(s) ran eagerly: their trace raised where eager code does not")
        if self.ambiguous_seen:
            said.append("pytrees with weak-typed or bool scalar leaves are keyed by dy2st, not jit")
        return said


def _record_node(value) -> bool:
    """A namedtuple, or a frozen dataclass registered as a pytree whose leaves are arrays (it
    cannot be changed in place; a later call's Python number or string among its leaves is
    refused by the route as any pytree's is: `AmbiguousLeaf`, `Declined`)."""
    kind = type(value)
    if isinstance(value, tuple):
        return kind is not tuple and hasattr(kind, "_fields")
    params = getattr(kind, "__dataclass_params__", None)
    if params is None or not params.frozen:
        return False
    leaves, treedef = jax.tree_util.tree_flatten(value)
    return not jax.tree_util.treedef_is_leaf(treedef) and all(type(leaf) in (ARRAY_IMPL, KEY_ARRAY) for leaf in leaves)


class RouteChange(Exception):
    """A trace (or jit's argument check) found that its call must take another route: it leaves
    the trace, and where it is caught the policy records what it showed."""


class Declined(RouteChange):
    """The pytree route gave a call back (a leaf jit refuses, a list the function changes, a
    signature the shared jit does not take): the dispatcher's general path runs it."""


class ContainerEffect(RouteChange):
    """A program given lists or dicts as plain inputs found them needing more: the function
    changes one in place or keeps one (a global, an attribute would hold the caller's object),
    or one holds an object with state. The call goes the way of objects with state instead
    (`dy2st/stateful.py`), which lifts and writes back."""


class AmbiguousLeaf(RouteChange):
    """The shared jit was asked to trace a pytree or keyword signature with a leaf whose jit
    signature a Python scalar shares (a weak-typed array, a bool scalar): such programs live in
    the table instead. Then jit's own dispatch (the pytree route, which passes pytrees to the
    shared jit without flattening them first) never runs a program of dy2st's for a call passing
    a Python number (static to dy2st) where an array was, nor traces one."""


class OrderObserved(AmbiguousLeaf):
    """The shared jit was given dicts whose key order the function observes (or may: keyword
    arguments): such programs live in the table, keyed by the order too (`key_order.WatchedDict`)."""
