"""Programs of a StaticFunction whose `self` or arguments carry state (see `dy2st/state.py`).

A call `forward(model, x)` where `model` is a plain object or a Flax NNX module runs the
program for `(key of model's state structure)` on `(model's arrays, x)`. The program returns
`(output, _Delta)`: the arrays the forward changed, plus, in the delta's static part, the
`Recipe` saying where they go. Carrying the recipe in the output's tree structure means each
`jax.jit` trace brings its own write-back instructions, however jit dispatches.

Cost of a cached call: one walk of the model's attributes (`Layout`), one dict lookup, jit's
dispatch, and writing back only what changed.
"""

from __future__ import annotations

import collections
import threading

import jax

from dy2st.config import config, logger
from dy2st.program import _FAST_TYPES, DEFAULT_MAX_PROGRAMS, ProgramCache
from dy2st.program_body import ContainerWatch, object_changed_error, run_inline
from dy2st.runtime import guards as guard_reads
from dy2st.runtime import static_outputs, writes
from dy2st.errors import PythonEffectError
from dy2st.input_spec import user_origin
from dy2st.state import (Layout, aliased_slots, changed_nnx_static, describe_difference, is_stateful, make_recipe,
                         caller_object, given_nnx_modules,
                         nnx_static_containers, restore_nnx_static)

_Tracer = jax.core.Tracer


class _Delta:
    """Program output holding the changed state arrays; the recipe rides in the tree structure,
    behind a `_RecipeHandle`."""

    __slots__ = ("handle", "outs")

    def __init__(self, handle, outs):
        self.handle = handle
        self.outs = outs


class _RecipeHandle:
    """One trace's recipe, as the program's output tree structure holds it. jax's own caches
    keep output tree structures (a bounded LRU, cleared by `jax.clear_caches`), and a recipe
    holds the state's whole key, which grows with a Python list the model appends to per call:
    the entry that made the recipe lets go of it when it is dropped (`_Entry.release`), so
    those caches keep an empty handle."""

    __slots__ = ("recipe",)

    def __init__(self, recipe):
        self.recipe = recipe


jax.tree_util.register_pytree_node(_Delta, lambda d: (d.outs, d.handle), lambda h, outs: _Delta(h, list(outs)))


def root_positions(args, kwargs) -> tuple:
    """Positions (ints) and keywords (strs) of the arguments whose state is lifted: plain
    objects and NNX modules. Empty for calls with arrays and pytrees only."""
    positions = ()
    for i, a in enumerate(args):
        if type(a) not in _FAST_TYPES and is_stateful(a):
            positions += (i,)
    if kwargs:
        positions += tuple(k for k, v in kwargs.items() if type(v) not in _FAST_TYPES and is_stateful(v))
    return positions


def _split(args, kwargs, positions):
    """(roots, the other positional arguments, the other keyword arguments)."""
    roots = [kwargs[p] if type(p) is str else args[p] for p in positions]
    rest = tuple(a for i, a in enumerate(args) if i not in positions)
    if kwargs:
        kwargs = {k: v for k, v in kwargs.items() if k not in positions}
    return roots, rest, kwargs


class _Entry:
    """The programs for one state structure: a ProgramCache over `(*state arrays, *args)`."""

    def __init__(self, get_fn, positions: tuple, n_state: int, name: str, max_programs: int = DEFAULT_MAX_PROGRAMS,
                 guards=None):
        self.local = threading.local()
        self.last_layout = None  # re-tracing for .jaxpr/.as_text() off the call path uses it
        self.handles: list = []  # the recipes of this entry's traces (`_RecipeHandle`)

        n_args = sum(type(p) is int for p in positions)

        def run(*flat, **kwargs):
            layout = getattr(self.local, "layout", None) or self.last_layout
            tracers, rest = flat[:n_state], iter(flat[n_state:])
            saved = layout.snapshot()
            static = nnx_static_containers(layout.roots)
            try:
                built = layout.fill(tracers)
                writes.note_inputs(layout.nodes[1:])  # (node 0: the list of roots, dy2st's own)
                roots = dict(zip(positions, layout.roots))
                others = list(rest)
                watch = ContainerWatch(others, kwargs, liftable=False)  # objects inside tuples, pytrees
                others = iter(others)
                args = [roots[i] if i in roots else next(others) for i in range(n_args + len(flat) - n_state)]
                kwargs.update((p, r) for p, r in roots.items() if type(p) is str)
                fn = get_fn()  # (made per trace: the defaults as they are now)
                guard_reads.note_program(fn, layout.nodes[1:])  # (self's and the arguments' classes)
                out = fn(*args, **kwargs)
                for obj, _ in watch.check(out):  # (no program arguments' objects to set them on here)
                    raise object_changed_error(obj, False)
                _refuse_nnx_static_changes(static)
                after = Layout(layout.roots)
                writes.note_written_back(after.nodes)  # what the write-back puts right
                recipe, outs = make_recipe(layout, after, tracers, built)
                _check_aliases(layout, saved, recipe)
                # the caller's containers and NNX modules the outputs hold come back as
                # themselves, updated
                modules = given_nnx_modules(layout, built)
                recipe.returned = tuple(modules.values())
                state_nodes = {id(n): j for j, n in enumerate(after.nodes) if j}
                state_nodes.update((key, len(after.nodes) + m) for m, key in enumerate(modules))
                out = static_outputs.encode(out, state_nodes, outside=guards.held_containers if guards else None)
            finally:
                layout.restore(saved)
                restore_nnx_static(static)
            handle = _RecipeHandle(recipe)
            self.handles.append(handle)
            return out, _Delta(handle, outs)

        self.run = run  # `(*state arrays, *args) -> (output, _Delta)`, for a trace of one's own (explain)
        self.cache = ProgramCache(run, name, max_programs, guards=guards)

    def release(self) -> None:
        """The entry is dropped: its recipes go (what jax's caches keep of its programs' output
        structures becomes empty handles)."""
        for handle in self.handles:
            handle.recipe = None
        self.handles.clear()


class StatefulPrograms:
    """Every program of one converted function called with stateful arguments."""

    def __init__(self, get_fn, name: str, max_programs: int = DEFAULT_MAX_PROGRAMS, guards=None):
        self._get_fn = get_fn  # () -> the converted function
        self._guards = guards
        self._name = name
        self._max_programs = max_programs
        self._entries: collections.OrderedDict = collections.OrderedDict()  # least recently used first
        self._built = 0  # state structures seen, evicted ones included (the retrace warning)
        self._lock = threading.Lock()
        self._warned = False
        self._last = None  # (positions, layout, entry) of the latest call: the hot path's guess

    def _entry(self, layout, positions):
        key = (positions, layout.key)
        entry = self._entries.get(key)
        if entry is None:
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:
                    previous = next(reversed(self._entries), None)
                    entry = self._entries[key] = _Entry(self._get_fn, positions, len(layout.leaves), self._name, self._max_programs,
                                                               self._guards)
                    self._evict()
                    self._built += 1
                    if self._built > config.retrace_warning_threshold and not self._warned:
                        self._warned = True
                        self._warn(previous, key)
        else:
            try:
                self._entries.move_to_end(key)
            except KeyError:  # evicted by another thread meanwhile; the entry still works
                pass
        return entry

    def _evict(self) -> None:
        """Keep the programs of all state structures within `max_programs` (under `_lock`): the
        least recently used structures' programs are dropped, with their executables."""
        while len(self._entries) > 1 and sum(len(e.cache.table) + len(e.cache._shared_keys)
                                             for e in self._entries.values()) >= self._max_programs:
            self._entries.popitem(last=False)[1].release()

    def _warn(self, previous, key):
        change = describe_difference(previous[1], key[1]) if previous and previous[0] == key[0] else "arguments"
        logger.warning(
            "dy2st: %s has compiled programs for %d different model states; the last change: %s. "
            "Python values on the model (ints, floats, strings) are part of the program's key: "
            "keep values that change every call, like step counters, in jax arrays "
            "(self.step = self.step + 1 with self.step = jnp.zeros((), jnp.int32)). "
            "f.explain(*args) shows what one program holds.",
            self._name, len(self._entries), change)

    def _run_inline(self, args, kwargs):
        """Inside jit/grad/vmap (traced arguments or traced attributes): run on the live objects,
        so the enclosing transformation sees the mutations as in eager code."""
        return run_inline(self._get_fn(), args, kwargs)

    def call(self, args, kwargs, positions):
        """Run `fn(*args, **kwargs)` as a program, writing state changes back onto the roots."""
        roots, rest, rest_kwargs = _split(args, kwargs, positions)
        last = self._last
        layout = Layout.like(last[1], roots) if last is not None and last[0] == positions else None
        if layout is None:
            layout = Layout(roots)
            if layout.traced or _traced(rest, rest_kwargs):
                return self._run_inline(args, kwargs)
            entry = self._entry(layout, positions)
            self._last = (positions, layout, entry)
        else:
            entry = last[2]  # a traced argument among `rest` is found by the cache's own scan below
        entry.last_layout = layout
        previous, entry.local.layout = getattr(entry.local, "layout", None), layout
        try:
            result = entry.cache((*layout.leaves, *rest), rest_kwargs or None, _inline)
        finally:
            entry.local.layout = previous
        if result is _INLINE:
            return self._run_inline(args, kwargs)
        if entry.cache.policy.decodes_outputs:
            result = static_outputs.decode_result(result)
        out, delta = result
        recipe = delta.handle.recipe
        if recipe is None:  # its entry was dropped by another thread meanwhile: as a new structure
            self._last = None
            return self.call(args, kwargs, positions)
        nodes = recipe.apply(layout, delta.outs)
        if type(out) is static_outputs.Identities:
            out = out.decode([*nodes, *(caller_object(layout, *where) for where in recipe.returned)])
        return out

    def fresh_run(self, args, kwargs, positions):
        """`(run, flat arguments, keyword arguments)`: the function a program of these
        arguments traces, over the state arrays and the other arguments, outside the cache."""
        roots, rest, rest_kwargs = _split(args, kwargs, positions)
        layout = Layout(roots)
        entry = _Entry(self._get_fn, positions, len(layout.leaves), self._name)
        entry.last_layout = layout
        return entry.run, (*layout.leaves, *rest), rest_kwargs

    def get_concrete_program(self, args, kwargs, positions):
        roots, rest, rest_kwargs = _split(args, kwargs, positions)
        layout = Layout(roots)
        entry = self._entry(layout, positions)
        entry.last_layout = layout
        previous, entry.local.layout = getattr(entry.local, "layout", None), layout
        try:
            return entry.cache.get_concrete_program((*layout.leaves, *rest), rest_kwargs)
        finally:
            entry.local.layout = previous

    @property
    def programs(self) -> list:
        return [p for entry in list(self._entries.values()) for p in entry.cache.programs]

    def clear(self) -> None:
        with self._lock:
            for entry in self._entries.values():
                entry.release()
            self._entries.clear()
            self._last = None


def _check_aliases(layout, saved: list, recipe) -> None:
    """Refuse a change to a slot holding a registered pytree object the state holds twice:
    eagerly every place sees the change, in the program each place is its own copy."""
    aliased = aliased_slots(layout, saved)
    if not aliased:
        return
    hit = next((slot for slot in recipe.touched if slot in aliased), None)
    if hit is None:
        return
    name = aliased[hit]
    raise PythonEffectError(
        f"an object of class {name} that the state holds in two places (two attributes, or twice "
        f"inside one) is changed by the function: {name} is a registered pytree, which dy2st passes "
        "to the program as values, one copy per place, so the places would not see each other's change.",
        origin=user_origin(),
        advice=f"hold the {name} in one place and reach it through that one; or make its class a plain "
        "class (not a registered pytree), whose objects dy2st keeps as one object; or give every place "
        "the new object (`self.p = self.q = new`).",
    )


def _refuse_nnx_static_changes(static: list) -> None:
    """A list or dict an NNX module holds as a plain attribute, changed in place by the call
    (`self.log.append(y)`): NNX keeps it as static data, so a program can neither carry the
    change nor make it again on a cached call."""
    where = changed_nnx_static(static)
    if where is None:
        return
    raise PythonEffectError(
        f"the call changes {where} in place, a list or dict that Flax NNX keeps as static data (a "
        "plain attribute, not an nnx.Variable): a compiled program can neither carry the change out "
        "nor make it again on the next call.",
        user_origin(),
        advice="keep arrays the forward changes in an nnx.Variable attribute (`self.total = "
        "nnx.Variable(jnp.zeros(()))`, updated with `self.total.value = ...`), or return the values "
        "from the call and collect them outside.",
    )


_INLINE = object()  # the cache saw a traced argument: run the function into the enclosing trace


def _inline(args, kwargs):
    return _INLINE


def _traced(rest, kwargs) -> bool:
    """Whether a non-state argument holds a tracer (one type check per plain array argument)."""
    rest = [a for a in rest if type(a) not in _FAST_TYPES]
    if not kwargs and not rest:
        return False
    return any(isinstance(leaf, _Tracer) for leaf in jax.tree_util.tree_leaves((rest, kwargs)))
