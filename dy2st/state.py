"""Arrays reachable from `self` or a model object, lifted to program inputs; mutations written back.

A compiled program is a pure function of arrays, but a model's forward reads its parameters from
`self` and may write to it (a step counter, running statistics, a cache). dy2st therefore
compiles, for `forward(self, x)`, the program::

    (state arrays, x) -> (output, changed state arrays)

and writes the changed arrays back onto the live objects after the call, so the model ends in
the state the eager run would have left. Parameters are inputs, never baked constants: after an
optimizer step the same program runs on the new values.

What counts as state (`capture`):

- *Nodes* are mutable containers walked attribute by attribute: plain Python objects (their
  `__dict__`), lists and dicts. A node reached twice (shared sub-module, cycles) is visited once.
- Every other value hanging off a node is a pytree (`jax.tree_util`): tuples, namedtuples,
  optax states, Equinox modules and Flax NNX modules (registered pytrees). Their array leaves are
  state; their other leaves are static.
- Python scalars, strings, functions and other non-arrays are static: their values are part of
  the program key (a changed value compiles a new program), as are the object structure and the
  pytree structures. Array shapes and dtypes are keyed by `jax.jit` itself.

`Layout` is one walk: `nodes` (visit order; node 0 is the list of roots), `key` (hashable,
one `(kind, type, slots)` entry per node, each slot `(name, ref)`), `leaves` (the arrays).
A ref says where a slot's value comes from: `ArrayRef(i)` array leaf i, `StaticRef(value, type)`
a static value, `NodeRef(j)` node j, `TreeRef(treedef, refs, sharing)` a pytree rebuilt from refs
(`sharing`: the NNX objects it holds that the call reaches twice); a
`Recipe` also uses `InputRef(i)`, an input array the call left unchanged.

Under a trace, `Layout.fill` swaps tracers into the live nodes, the forward runs on them, a
second walk sees what changed, and `Layout.restore` puts the original contents back
(`make_recipe`); the `Recipe` then replays the change on concrete arrays after each call.
Flax NNX modules are updated in place (`nnx.update`), so their identity is kept.

`split_state(obj)` is the public face of this for other features (saving weights).
"""

from __future__ import annotations

import dataclasses
import sys

import jax

from dy2st import _jax_compat
from dy2st.errors import InputSignatureError
from dy2st.input_spec import user_origin
from dy2st.runtime.values import ARRAY_TYPES, NODE_KINDS, is_frozen_config, is_nnx_object, node_kind
from dy2st.runtime.writes import refill
from dy2st.user_code import is_users_class

_Tracer = jax.core.Tracer
_ArrayImpl = _jax_compat.array_type()
_SCALARS = frozenset({int, float, bool, complex, str, bytes, type(None)})


def _same_static(a, b) -> bool:
    """Whether eager code could not tell two static values apart: equal, and a float by its
    bits (`0.0 == -0.0`, a NaN equals nothing)."""
    if type(a) is float and type(b) is float:
        return a.hex() == b.hex()
    return a is b or a == b


# -- refs: where the value of one slot comes from ---------------------------------------------------
# Slotted dataclasses: equal only to a ref of the same class (ArrayRef(1) != NodeRef(1)), and
# hashable, since layout keys made of them key the program cache.
@dataclasses.dataclass(slots=True, unsafe_hash=True)
class ArrayRef:
    index: int  # into the layout's leaves (or, in a Recipe, into the program's outputs)


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class InputRef:
    index: int  # an input array the call left unchanged


@dataclasses.dataclass(slots=True, eq=False)
class StaticRef:
    value: object  # hashable, or wrapped in _ById
    type: type | None  # the value's type for Python scalars (so 1 and 1.0 and True differ), else None

    def __eq__(self, other):
        return type(other) is StaticRef and self.type is other.type and _same_static(self.value, other.value)

    def __hash__(self):
        return hash((self.type, self.value))

    @property
    def python_value(self):
        return self.value.value if type(self.value) is _ById else self.value


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class NodeRef:
    index: int  # into the layout's nodes


@dataclasses.dataclass(slots=True, unsafe_hash=True)
class TreeRef:
    treedef: object
    refs: tuple
    # the NNX objects it holds that the call reaches twice (`_nnx_sharing`; None: it holds no
    # NNX object): a pytree's structure has no identities, and a program traced with one
    # module given twice (or tied weights) is not the program of two modules
    sharing: tuple | None = None


class _ById:
    """A static value that is not hashable: keyed by identity."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __hash__(self):
        return id(self.value)

    def __eq__(self, other):
        return type(other) is _ById and other.value is self.value


def is_nnx(value) -> bool:
    nnx = sys.modules.get("flax.nnx")
    return nnx is not None and isinstance(value, nnx.Pytree)


def is_stateful(value) -> bool:
    """Whether `value`, passed as an argument (or as `self`), carries state to lift and write back:
    a list, dict, plain object or NNX module, or a tuple (a namedtuple) holding a plain object
    among its leaves (`(cfg, w)`): lifted as the tuple's, where as a static leaf it would be keyed
    by identity, and its attributes, changed between calls or by the call, not seen."""
    if is_nnx(value):
        return True
    if node_kind(value) is not None:
        return not is_frozen_config(value)
    return isinstance(value, tuple) and any(type(leaf) is not _ArrayImpl and node_kind(leaf) == "o"
                                            and not is_frozen_config(leaf) for leaf in jax.tree_util.tree_leaves(value))




class Layout:
    """One walk of the state reachable from some roots; see the module docstring."""

    __slots__ = ("nodes", "key", "leaves", "traced")

    def __init__(self, roots: list):
        self.nodes = [roots]
        self.leaves = []
        self.traced = False
        index = {id(roots): 0}
        key = [None]
        nodes, leaves = self.nodes, self.leaves
        nnx_seen: dict = {}  # the NNX objects of the whole call, for `_nnx_sharing`

        def ref(v):
            tv = type(v)
            if tv is _ArrayImpl:  # the common case first: a concrete jax array
                leaves.append(v)
                return ArrayRef(len(leaves) - 1)
            if tv in _SCALARS:
                return StaticRef(v, tv)
            if isinstance(v, ARRAY_TYPES):
                if isinstance(v, _Tracer):
                    self.traced = True
                leaves.append(v)
                return ArrayRef(len(leaves) - 1)
            kind = NODE_KINDS[tv] if tv in NODE_KINDS else node_kind(v)
            if kind is not None:
                j = index.get(id(v))
                if j is None:
                    j = index[id(v)] = len(nodes)
                    nodes.append(v)
                    key.append(None)
                    visit(j, v, kind)
                return NodeRef(j)
            sub, treedef = jax.tree_util.tree_flatten(v, is_leaf=_is_node)
            if jax.tree_util.treedef_is_leaf(treedef) and (not sub or sub[0] is v):
                refuse_slotted(v)
                try:
                    hash(v)
                except TypeError:
                    v = _ById(v)
                return StaticRef(v, None)
            return TreeRef(treedef, tuple(ref(x) for x in sub), _nnx_sharing(v, nnx_seen))

        def visit(j, node, kind):  # depth first, so leaves come in attribute order
            items = enumerate(node) if kind == "l" else (node.items() if kind == "d" else vars(node).items())
            key[j] = (kind, type(node), tuple((k, ref(v)) for k, v in items))

        visit(0, roots, "l")
        self.key = tuple(key)

    @classmethod
    def like(cls, template: "Layout", roots: list) -> "Layout | None":
        """The layout of `roots` if it has `template`'s key, else None (the hot path).

        Checks every slot against the template's refs (the same sub-objects, static values and
        pytree structures; concrete jax arrays where arrays were) instead of building and
        hashing a new key: about a third of the cost of a fresh walk.
        """
        nodes = template.nodes
        leaves = [None] * len(template.leaves)
        arrays_seen: set = set()  # the array leaves of NNX pytrees so far (`_matches`)
        for j, (kind, node_type, slots) in enumerate(template.key):
            node = roots if j == 0 else nodes[j]
            if kind == "o":
                if type(node) is not node_type:  # (`o.__class__ = Other` between calls: other methods)
                    return None
                node = vars(node)
            if len(node) != len(slots):
                return None
            if kind == "l":
                for v, (_, r) in zip(node, slots):
                    if not _matches(v, r, nodes, leaves, arrays_seen):
                        return None
            else:
                for (k, v), (slot, r) in zip(node.items(), slots):
                    if k != slot or not _matches(v, r, nodes, leaves, arrays_seen):
                        return None
        layout = cls.__new__(cls)
        layout.nodes = [roots, *nodes[1:]]
        layout.key = template.key
        layout.leaves = leaves
        layout.traced = False
        return layout

    @property
    def roots(self) -> list:
        return self.nodes[0]

    def snapshot(self) -> list:
        return [list(n) if k[0] == "l" else dict(n if k[0] == "d" else vars(n)) for n, k in zip(self.nodes, self.key)]

    def restore(self, saved: list) -> None:
        for node, (kind, _, _), contents in zip(self.nodes, self.key, saved):
            _replace_contents(node, kind, contents.items() if kind != "l" else contents)

    def fill(self, leaves) -> dict:
        """Put `leaves` (tracers) where this layout's arrays were, rebuilding pytrees around them;
        returns the objects and tuples rebuilt (`id -> object`), for `make_recipe` to tell
        which of them the call changed in place rather than replaced."""
        built: dict = {}
        rebuilt_nnx: dict = {}  # id of a caller's NNX module or Variable -> its one rebuilt object
        for j, (node, (kind, _, slots)) in enumerate(zip(self.nodes, self.key)):
            given = node if kind != "o" else vars(node)
            values = [(k, _build(r, leaves, self.nodes)) for k, r in slots]
            for i, ((_, r), (k, value)) in enumerate(zip(slots, values)):
                if type(r) is TreeRef:
                    if is_nnx(given[k]):
                        value = _shared_as_given(given[k], value, rebuilt_nnx)
                        values[i] = (k, value)
                    _note_built(value, (j, k), (), built)
            _replace_contents(node, kind, [v for _, v in values] if kind == "l" else values)
        return built


def _shared_as_given(given, rebuilt, seen: dict):
    """`rebuilt` (an NNX module rebuilt from `given` as a pytree, one copy per place) with each
    module or Variable that `given`'s graph reaches from two places (tied weights, `self.dec =
    self.enc`; one module given twice: `seen` spans the call's arguments) made one object
    again, as NNX's own split and merge keep it: a write or a gradient through one place then
    reaches the other, as eagerly."""
    if id(given) in seen:
        return seen[id(given)]
    if is_nnx_object(given):
        seen[id(given)] = rebuilt
        if _is_variable(given):
            return rebuilt
    if isinstance(given, tuple):
        items = [_shared_as_given(g, r, seen) if _graph_part(g) else r for g, r in zip(given, rebuilt)]
        if all(a is b for a, b in zip(items, rebuilt)):
            return rebuilt
        return type(rebuilt)._make(items) if hasattr(type(rebuilt), "_make") else type(rebuilt)(items)
    if isinstance(given, (list, dict)):
        keys = range(len(given)) if isinstance(given, list) else list(given)
        holder = rebuilt
    elif hasattr(given, "__dict__"):
        keys, holder = list(vars(given)), vars(rebuilt)
        given = vars(given)
    else:
        return rebuilt
    for key in keys:
        part = given[key]
        if _graph_part(part) and key in (holder if isinstance(holder, dict) else range(len(holder))):
            one = _shared_as_given(part, holder[key], seen)
            if one is not holder[key]:
                holder[key] = one  # (the rebuilt module is this trace's own: NNX lets it change)
    return rebuilt


def _graph_part(value) -> bool:
    return is_nnx_object(value) or type(value) in (list, dict, tuple)


def refuse_slotted(value) -> None:
    """An object of a user's class with `__slots__` (no `__dict__`), hashed by identity, as a
    static value (an argument, or reached from one): dy2st can neither lift its attributes as
    inputs nor write changes back, so the trace would leave tracers in its slots and a cached
    call would keep what the first call read."""
    kind = type(value)
    if kind.__hash__ is not object.__hash__ or hasattr(value, "__dict__") or not is_users_class(kind):
        return
    raise InputSignatureError(
        f"an argument of class {kind.__name__} (a class with __slots__, no __dict__), or one an argument "
        "holds, would be a static value keyed by its identity: dy2st lifts and writes back the attributes "
        "of objects with a __dict__, so the trace would leave traced values in its slots, and a cached call "
        "would keep what the first call read and skip what it changes.",
        origin=user_origin(),
        advice="drop __slots__ from the class (its objects are then lifted and written back), make it a frozen "
        "dataclass (keyed by value), or pass its arrays as arguments.",
    )


def _matches(v, ref, nodes, leaves, arrays_seen: set) -> bool:
    """Whether `v` would get `ref` in a fresh walk; records its array leaves. Where NNX objects
    are concerned it answers only for the common case, nothing held twice (shared NNX objects
    hold their arrays twice: `arrays_seen`, the ids of those met so far in this call); anything
    else is left to the fresh walk, whose `_nnx_sharing` is exact."""
    kind = type(ref)
    if kind is ArrayRef:
        if type(v) is not _ArrayImpl:
            return False  # numpy arrays, tracers: the fresh walk decides
        leaves[ref.index] = v
        return True
    if kind is StaticRef:
        value = ref.value
        if type(value) is _ById:
            return v is value.value
        return v is value or (type(v) is type(value) and _same_static(v, value))
    if kind is NodeRef:
        return v is nodes[ref.index]
    sub, treedef = jax.tree_util.tree_flatten(v, is_leaf=_is_node)
    if treedef != ref.treedef:
        return False
    if ref.sharing is not None:  # NNX objects: the template shares none (else the fresh walk)
        if ref.sharing:
            return False
        for x in sub:
            if id(x) in arrays_seen:
                return False
            arrays_seen.add(id(x))
    return all(_matches(x, r, nodes, leaves, arrays_seen) for x, r in zip(sub, ref.refs))


def _nnx_sharing(value, seen: dict) -> tuple | None:
    """`(objects met before it, its first position)` of each NNX module or Variable that
    `value`'s graph (its tuples, lists, dicts and modules' attributes) reaches a second time in
    one call's walk (`seen`: id -> position among the distinct ones, across the call's
    arguments): tied weights (`self.dec = self.enc`), one module given twice. None where the
    graph holds no NNX object."""
    nnx = sys.modules.get("flax.nnx")  # (`is_nnx_object`'s test, its classes looked up once per walk)
    if nnx is None:
        return None
    graph, variable = (nnx.Pytree, nnx.Variable), nnx.Variable
    repeats, found = [], False
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, graph):
            found = True
            first = seen.get(id(v))
            if first is not None:
                repeats.append((len(seen), first))  # (after how many distinct ones, which one)
                continue
            seen[id(v)] = len(seen)
            if not isinstance(v, variable):
                stack.extend(part for part in vars(v).values() if isinstance(part, (*graph, list, dict, tuple)))
        elif type(v) is dict:
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return tuple(repeats) if found else None


def _is_node(x) -> bool:
    return node_kind(x) is not None


def _replace_contents(node, kind, contents) -> None:
    if kind == "o":
        vars(node).clear()
        vars(node).update(contents)
    else:
        refill(node, contents)


def _build(ref, leaves, nodes):
    """The value `ref` describes, with array leaves from `leaves`."""
    return _build_out(ref, (), leaves, nodes)


def _merge_value(old, new):
    """The value a slot holds after write-back: an NNX module is updated in place, its
    Variables and the Python attributes the call changed (`self.calls += 1`)."""
    if new is not old and is_nnx(old) and type(new) is type(old):
        from flax import nnx

        nnx.update(old, nnx.state(new))
        _copy_python_attributes(old, new)
        return old
    return new


def _copy_python_attributes(old, new, depth: int = 0) -> None:
    """Set on the NNX module `old` the Python numbers, strings and None of `new` (the module
    the call left, rebuilt) that differ (a step counter); nested modules are matched attribute
    by attribute. NNX keeps them as static data, which `nnx.update` does not write."""
    if depth > 32:
        return
    current = vars(old)
    for name, value in list(vars(new).items()):
        if name.startswith("_"):
            continue  # NNX's own bookkeeping
        before = current.get(name)
        if is_nnx(value) and is_nnx(before) and type(before) is type(value) and before is not value:
            _copy_python_attributes(before, value, depth + 1)
        elif type(value) in _SCALARS and (name not in current or type(before) is not type(value) or before != value):
            setattr(old, name, value)


def nnx_static_containers(roots) -> list:
    """`(path, container, copy of its items)` of every list or dict an NNX module reachable from
    `roots` holds as a plain attribute (static data for NNX, not an `nnx.Variable`)."""
    found, seen = [], set()

    def visit(value, path, depth):
        if depth > 16 or id(value) in seen:
            return
        if type(value) in (list, tuple, dict):
            seen.add(id(value))
            items = value.items() if type(value) is dict else enumerate(value)
            for k, v in list(items):
                visit(v, f"{path}[{k!r}]", depth + 1)
        elif is_nnx(value):
            seen.add(id(value))
            for name, v in list(vars(value).items()):
                if name.startswith("_") or _is_variable(v):
                    continue
                if type(v) in (list, dict):
                    found.append((f"{path}.{name}", v, type(v)(v)))
                visit(v, f"{path}.{name}", depth + 1)
        elif node_kind(value) == "o":
            seen.add(id(value))
            for name, v in list(vars(value).items()):
                visit(v, f"{path}.{name}", depth + 1)

    for i, root in enumerate(roots):
        visit(root, type(root).__name__ if is_nnx(root) else f"argument {i}", 0)
    return found


def changed_nnx_static(saved: list) -> str | None:
    """The path of the first container of `nnx_static_containers` whose items changed."""
    from dy2st.runtime.writes import changed_contents

    for path, container, items in saved:
        if changed_contents(container, items):
            return path
    return None


def restore_nnx_static(saved: list) -> None:
    from dy2st.runtime.writes import restore_items

    restore_items((container, items) for _, container, items in saved)


# -- objects of registered pytree classes changed in place ------------------------------------
# A registered pytree (a `register_dataclass` object, say) is carried as its arrays and rebuilt
# around them, so write-back gives a slot new objects. Where the call kept an object it was
# given (changed it in place, `self.p.w = ...`, or put it in a new container), eager's object is
# the caller's own, seen through every reference to it: the trace notes, per changed slot, which
# objects of the new value it kept and where they were in the slot's old value (a "kept plan"),
# and write-back uses the caller's objects there, their fields set from the new value's.

def _children(value) -> list:
    """`(name, child)` a kept plan follows: a tuple's items, an object's dataclass fields (or
    attributes)."""
    if isinstance(value, tuple):
        return list(enumerate(value))
    if dataclasses.is_dataclass(value):
        return [(f.name, vars(value)[f.name]) for f in dataclasses.fields(value) if f.name in vars(value)]
    return list(vars(value).items())


def _can_hold_kept(value) -> bool:
    return isinstance(value, tuple) or (hasattr(value, "__dict__") and not isinstance(value, ARRAY_TYPES + (type,)))


def _note_built(value, origin, path: tuple, built: dict) -> None:
    """Record `value` (rebuilt for slot `origin`, at `path` in it) and what it holds."""
    if _can_hold_kept(value) and id(value) not in built:
        built[id(value)] = (value, origin, path)
        for name, child in _children(value):
            _note_built(child, origin, (*path, name), built)


def _kept_plan(value, built: dict, origin, seen=None):
    """How slot `origin`'s new `value` reuses what the call was given there: None (nothing),
    `("kept", old path, children's plans)` for an object the call kept, `("new", children's
    plans)` for a new container holding some."""
    if not _can_hold_kept(value):
        return None
    seen = set() if seen is None else seen
    if id(value) in seen:
        return None
    seen.add(id(value))
    kids = tuple((name, plan) for name, child in _children(value)
                 if (plan := _kept_plan(child, built, origin, seen)) is not None)
    entry = built.get(id(value))
    if entry is not None and entry[0] is value and entry[1] == origin:
        return ("kept", entry[2], kids)
    return ("new", kids) if kids else None


def aliased_slots(layout: "Layout", contents: list) -> dict:
    """`(node index, slot) -> class name` of the slots holding an object of a registered
    pytree class (at any depth) that is held twice (by another slot, or twice in this one):
    `contents` is `layout.snapshot()` of the caller's state. Each slot's value is rebuilt on
    its own in a program, so such an object would not stay one object there."""
    first: dict = {}
    aliased: dict = {}
    for j, ((_, _, slots), values) in enumerate(zip(layout.key, contents)):
        for k, r in slots:
            if type(r) is not TreeRef:
                continue
            here: set = set()
            for obj in _occurrences(values[k], 0):
                origin = first.setdefault(id(obj), (j, k))
                if origin != (j, k) or id(obj) in here:
                    aliased[origin] = aliased[(j, k)] = type(obj).__name__
                here.add(id(obj))
    return aliased


def _occurrences(value, depth: int):
    """Every place a mutable object of a registered pytree class sits in a slot's value (not
    tuples; not frozen dataclasses, which only a new object changes; not NNX modules and
    Variables, which are written back into their own Variables)."""
    if not _can_hold_kept(value) or depth > 32 or is_nnx_object(value):
        return
    if not isinstance(value, tuple) and not (dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen):
        yield value
    for _, child in _children(value):
        yield from _occurrences(child, depth + 1)


def given_nnx_modules(layout: Layout, built: dict) -> dict:
    """While tracing, after the call: id of each NNX module the trace was given (rebuilt for it:
    `built`, from `Layout.fill`) that is still where it was given -> `(node, slot, path)`, so an
    output holding it can be given back as the caller's own module (`caller_object`), which
    write-back updates in place."""
    found = {}
    for key, (value, (j, slot), path) in built.items():
        if is_nnx(value) and caller_object(layout, j, slot, path) is value:
            found[key] = (j, slot, path)
    return found


def caller_object(layout: Layout, j: int, slot, path: tuple):
    """The object at `path` in slot `slot` of node `j` of `layout`'s live objects, or None."""
    node, kind = layout.nodes[j], layout.key[j][0]
    container = vars(node) if kind == "o" else node
    try:
        root = container[slot]
    except (IndexError, KeyError):
        return None
    found = _follow(root, path)
    return None if found is _GONE else found


def _follow(root, path: tuple):
    for step in path:
        if isinstance(root, tuple):
            root = root[step] if type(step) is int and step < len(root) else _GONE
        else:
            root = vars(root).get(step, _GONE) if hasattr(root, "__dict__") else _GONE
        if root is _GONE:
            break
    return root


_GONE = object()


def _merge_kept(old_root, new, plan):
    """`new` (write-back's value of a slot) with the objects the call kept being the caller's
    own ones from the slot's old value `old_root`, their fields set from `new`'s. Every kept
    object is found in `old_root` before any field is set (the call may have swapped them)."""
    if plan is None:
        return new
    targets: dict = {}
    _find_targets(old_root, plan, targets)
    return _merge(targets, new, plan)


def _find_targets(old_root, plan, targets: dict) -> None:
    if plan[0] == "kept":
        targets[plan[1]] = _follow(old_root, plan[1])
    for _, kid in plan[-1]:
        _find_targets(old_root, kid, targets)


def _merge(targets: dict, new, plan):
    if plan is None:
        return new
    kids = dict(plan[-1])
    target = targets[plan[1]] if plan[0] == "kept" else _GONE
    if type(target) is not type(new):
        return _with_kept_children(targets, new, kids)
    if isinstance(new, tuple):
        merged = _with_kept_children(targets, new, kids)
        return target if len(merged) == len(target) and all(a is b for a, b in zip(merged, target)) else merged
    merged_fields = [(name, _merge(targets, child, kids.get(name))) for name, child in _children(new)]
    vars(target).update(merged_fields)
    return target


def _with_kept_children(targets: dict, new, kids: dict):
    """`new` with its children merged (`_merge`): a tuple rebuilt, an object changed."""
    if isinstance(new, tuple):
        items = [_merge(targets, child, kids.get(i)) for i, child in enumerate(new)]
        if type(new) is tuple:
            return tuple(items)
        return type(new)._make(items) if hasattr(type(new), "_make") else new  # a namedtuple
    fields = vars(new)
    for name, child in _children(new):
        if name in kids:
            fields[name] = _merge(targets, child, kids[name])
    return new


def _write_variables(module, ref: TreeRef, inputs, outs, nodes) -> bool:
    """Write the arrays `ref` gives into an NNX module's (or Variable's) own Variables, in
    place; False (nothing written) unless its parts pair one to one with `ref`'s: each Variable
    with one array, each walked node (an `nnx.State` dict, say) with the same node.

    What `nnx.update(module, nnx.state(new_module))` does, without building the new module and
    walking both graphs: on an NNX train step that was most of a call's write-back cost.
    """
    if not is_nnx_object(module):
        return False
    parts = jax.tree_util.tree_leaves(module, is_leaf=_variable_or_node)
    if len(parts) != len(ref.refs):
        return False
    for part, r in zip(parts, ref.refs):
        if type(r) is NodeRef:
            if part is not nodes[r.index]:
                return False
        elif type(r) not in (ArrayRef, InputRef) or not _is_variable(part) or _variable_leaves(part) != 1:
            return False
    for part, r in zip(parts, ref.refs):
        if type(r) is ArrayRef:  # an input left as it was needs no write
            part.set_value(outs[r.index])
    return True


def _is_variable(x) -> bool:
    nnx = sys.modules.get("flax.nnx")
    return nnx is not None and isinstance(x, nnx.Variable)


def _variable_or_node(x) -> bool:
    return _is_variable(x) or node_kind(x) is not None


def _variable_leaves(variable) -> int:
    """1 for a Variable holding one array (the common case, read without a flatten)."""
    if isinstance(variable.get_raw_value(), jax.Array):
        return 1
    return len(jax.tree_util.tree_leaves(variable))


class Recipe:
    """How to replay, on concrete arrays, the state change one trace of a forward made.

    `changes` lists `(node index, slot, ref)` when the forward kept the node structure (the
    common case: only those slots are written); otherwise `full` holds, for every node after the
    call, where it comes from (`int`: an existing node, `type`: a new one) and its contents.
    Refs use `InputRef(i)` for an unchanged input array and `ArrayRef(k)` for the k-th output.
    """

    __slots__ = ("changes", "full", "kept", "touched", "restructured", "returned")

    def __init__(self, changes, full=None, kept=None, touched=None, restructured=frozenset()):
        self.changes = changes
        self.returned = ()  # `(node, slot, path)` of the NNX modules the outputs hold (`given_nnx_modules`)
        self.full = full
        # (node index, slot) of the changes whose pytree structure changed (an NNX module's
        # Python attribute, `self.calls += 1`): written whole, not only their Variables
        self.restructured = restructured
        self.kept = kept or {}  # (node index, slot) -> kept plan (`_kept_plan`) of a changed slot
        # (node index before the call, slot) of every slot the call changed, added or removed
        self.touched = frozenset((j, k) for j, k, _ in changes) if touched is None else touched

    def apply(self, layout: Layout, outs) -> list:
        """Write the change back onto the live objects; returns the nodes after the call (the
        order of the walk after the traced call: outputs refer to them by index)."""
        if self.full is None:
            for j, slot, r in self.changes:
                node, kind = layout.nodes[j], layout.key[j][0]
                container = node if kind != "o" else vars(node)
                old = container[slot]
                if (type(r) is TreeRef and (j, slot) not in self.restructured
                        and _write_variables(old, r, layout.leaves, outs, layout.nodes)):
                    continue
                new = _build_out(r, layout.leaves, outs, layout.nodes)
                plan = self.kept.get((j, slot))
                container[slot] = _merge_kept(old, new, plan) if plan is not None else _merge_value(old, new)
            return layout.nodes
        sources, descs = self.full
        nodes = [layout.nodes[s] if type(s) is int else _new_node(s) for s in sources]
        for j, (node, (kind, _, slots)) in enumerate(zip(nodes, descs)):
            old = node if kind != "o" else vars(node)
            values = []
            for k, r in slots:
                value, plan = _build_out(r, layout.leaves, outs, nodes), self.kept.get((j, k))
                if plan is not None:  # the node was there before, and so was this slot
                    value = _merge_kept(old[k], value, plan)
                elif kind != "l":
                    value = _merge_value(old.get(k), value)
                values.append((k, value))
            _replace_contents(node, kind, [v for _, v in values] if kind == "l" else values)
        return nodes

    def __repr__(self):
        return f"Recipe(changes={self.changes!r})" if self.full is None else "Recipe(full)"


def _new_node(tp):
    return tp() if issubclass(tp, (list, dict)) else tp.__new__(tp)


def _build_out(ref, inputs, outs, nodes):
    """The value `ref` describes: unchanged inputs from `inputs`, arrays from `outs`."""
    kind = type(ref)
    if kind is ArrayRef:
        return outs[ref.index]
    if kind is InputRef:
        return inputs[ref.index]
    if kind is StaticRef:
        return ref.python_value
    if kind is NodeRef:
        return nodes[ref.index]
    return jax.tree_util.tree_unflatten(ref.treedef, [_build_out(r, inputs, outs, nodes) for r in ref.refs])


def make_recipe(before: Layout, after: Layout, inputs, built: dict | None = None) -> tuple[Recipe, list]:
    """Compare the walk after a traced call with the one before; returns the recipe and the
    arrays (tracers) the program must output. `built`: what `before.fill` rebuilt."""
    position = {id(t): i for i, t in enumerate(inputs)}
    outs, leaf_refs = [], []
    for leaf in after.leaves:
        i = position.get(id(leaf))
        if i is None:
            leaf_refs.append(ArrayRef(len(outs)))
            outs.append(leaf)
        else:
            leaf_refs.append(InputRef(i))

    def translate(r, table):
        if type(r) is ArrayRef:
            return table[r.index]
        if type(r) is TreeRef:
            return TreeRef(r.treedef, tuple(translate(x, table) for x in r.refs), r.sharing)
        return r

    before_refs = [InputRef(i) for i in range(len(before.leaves))]
    same_nodes = len(after.nodes) == len(before.nodes) and all(
        a is b for a, b in zip(after.nodes, before.nodes))
    descs = [(kind, tp, tuple((k, translate(r, leaf_refs)) for k, r in slots)) for kind, tp, slots in after.key]
    if same_nodes:
        changes, restructured = [], set()
        for j, ((kind, _, new), (_, _, old)) in enumerate(zip(descs, before.key)):
            old = {k: translate(r, before_refs) for k, r in old}
            if [k for k, _ in new] != list(old):
                break  # attributes added or removed: replay the whole node structure
            changes.extend((j, k, r) for k, r in new if r != old[k])
            restructured.update((j, k) for k, r in new if type(r) is TreeRef and type(old[k]) is TreeRef
                                and r.treedef != old[k].treedef)
        else:
            return Recipe(tuple(changes), kept=_kept_plans(after, changes, built or {}),
                          restructured=frozenset(restructured)), outs
    index = {id(n): i for i, n in enumerate(before.nodes)}
    sources = [index.get(id(n), type(n)) for n in after.nodes]
    kept, touched = {}, set()
    for j, (source, (kind, _, slots)) in enumerate(zip(sources, after.key)):
        if type(source) is int:
            container = vars(after.nodes[j]) if kind == "o" else after.nodes[j]
            old = {k: translate(r, before_refs) for k, r in before.key[source][2]}
            new = dict(descs[j][2])
            touched.update((source, k) for k in old.keys() | new.keys() if old.get(k) != new.get(k))
            for k, r in slots:
                plan = _kept_plan(container[k], built or {}, (source, k)) if type(r) is TreeRef else None
                if plan is not None:
                    kept[(j, k)] = plan
    return Recipe((), (sources, descs), kept, frozenset(touched)), outs


def _kept_plans(after: Layout, changes, built: dict) -> dict:
    """The kept plan of each changed slot holding a rebuilt pytree the call changed in place."""
    plans = {}
    for j, slot, r in changes:
        if type(r) is TreeRef:
            node = after.nodes[j]
            plan = _kept_plan((vars(node) if after.key[j][0] == "o" else node)[slot], built, (j, slot))
            if plan is not None:
                plans[(j, slot)] = plan
    return plans


# -- public helper -------------------------------------------------------------------------------

def split_state(obj):
    """The arrays reachable from `obj`, by readable name, and a function that puts arrays back.

    Works for plain objects (attributes, nested lists/dicts/tuples/sub-objects), Flax NNX
    modules and Equinox modules (or any pytree).

    Args:
      obj: a model object.

    Returns:
      `(arrays, merge)`: `arrays` is a dict from a dotted path (`"layers.0.w"`, `"opt.mu.w"`) to
      the array there, in a stable order; `merge(new_arrays)` takes a dict with the same keys and
      returns the model holding them: plain objects and NNX modules are updated in place (and
      returned), an Equinox module or other immutable pytree is rebuilt and the new one returned.

    Example::

        arrays, merge = dy2st.state.split_state(model)
        model = merge({k: v * 0.5 for k, v in arrays.items()})
    """
    if node_kind(obj) is None:
        leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(obj)
        names = _unique([_path_name(p) for p, _ in leaves_with_path])
        arrays = {n: v for n, (_, v) in zip(names, leaves_with_path) if isinstance(v, ARRAY_TYPES)}

        def merge(new):
            leaves = [new.get(n, v) if isinstance(v, ARRAY_TYPES) else v for n, (_, v) in zip(names, leaves_with_path)]
            rebuilt = jax.tree_util.tree_unflatten(treedef, leaves)
            return _merge_value(obj, rebuilt)

        return arrays, merge
    layout = Layout([obj])
    names = _unique(_leaf_names(layout))
    arrays = dict(zip(names, layout.leaves))

    def merge(new):
        leaves = [new.get(n, v) for n, v in zip(names, layout.leaves)]
        changes = tuple((j, k, r) for j, (_, _, slots) in enumerate(layout.key) if j
                        for k, r in slots if _has_leaf(r))
        Recipe(changes).apply(layout, leaves)  # ArrayRef(i) reads the new leaves
        return obj

    return arrays, merge


def describe_difference(before: tuple, after: tuple, limit: int = 3) -> str:
    """Name the attributes whose static value or structure differs between two layout keys,
    e.g. "calls: 3 -> 4" (for the retracing warning)."""
    paths, found = _node_paths(after), []
    for j, (new, old) in enumerate(zip(after, before)):
        new_slots, old_slots = dict(new[2]), dict(old[2])
        for k in list(new_slots) + [k for k in old_slots if k not in new_slots]:
            a, b = old_slots.get(k), new_slots.get(k)
            if a == b:
                continue
            name = f"{paths.get(j, '')}.{k}".lstrip(".") if j else f"argument {k}"
            if type(a) is StaticRef and type(b) is StaticRef:
                found.append(f"{name}: {a.python_value!r} -> {b.python_value!r}")
            else:
                found.append(f"{name}: structure changed")
    if len(after) != len(before):
        found.append("the object graph changed")
    return "; ".join(found[:limit]) or "the state structure changed"


def _node_paths(key) -> dict:
    paths = {0: ""}
    for j, (_, _, slots) in enumerate(key):
        for k, r in slots:
            if type(r) is NodeRef:
                paths.setdefault(r.index, f"{paths.get(j, '')}.{k}" if j else "")
    return paths


def _has_leaf(ref) -> bool:
    return type(ref) is ArrayRef or (type(ref) is TreeRef and any(_has_leaf(r) for r in ref.refs))


def _unique(names: list[str]) -> list[str]:
    """`names` with each repeat of an earlier one suffixed `#2`, `#3`, ... (skipping those
    taken): dotted paths can collide (`{"a.b": w1, "a": {"b": w2}}` both read `a.b`), and one
    name for two arrays would lose one of them."""
    taken = set(names)
    if len(taken) == len(names):
        return names
    seen: set = set()
    unique = []
    for name in names:
        if name in seen:
            n = 2
            while f"{name}#{n}" in taken:
                n += 1
            name = f"{name}#{n}"
            taken.add(name)
        seen.add(name)
        unique.append(name)
    return unique


def _leaf_names(layout: Layout) -> list[str]:
    names = [""] * len(layout.leaves)
    paths = {0: ""}
    for j, (_, _, slots) in enumerate(layout.key):
        prefix = paths.get(j, f"<node{j}>")
        for k, r in slots:
            _name_ref(r, f"{prefix}.{k}" if j else "", names, paths)
    return names


def _name_ref(ref, path, names, paths):
    if type(ref) is ArrayRef:
        names[ref.index] = path.lstrip(".")
    elif type(ref) is NodeRef:
        paths.setdefault(ref.index, path)
    elif type(ref) is TreeRef:
        subpaths = [_path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(
            jax.tree_util.tree_unflatten(ref.treedef, list(range(len(ref.refs)))))[0]]
        for sub, r in zip(subpaths, ref.refs):
            _name_ref(r, f"{path}.{sub}" if sub else path, names, paths)


def _path_name(path) -> str:
    parts = []
    for entry in path:
        for attr in ("name", "key", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return ".".join(parts)
