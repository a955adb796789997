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

import threading

import jax

from dy2st.program import _FAST_TYPES, ProgramCache
from dy2st.state import Layout, is_stateful, make_recipe

_Tracer = jax.core.Tracer


class _Delta:
    """Program output holding the changed state arrays; the recipe rides in the tree structure."""

    __slots__ = ("recipe", "outs")

    def __init__(self, recipe, outs):
        self.recipe = recipe
        self.outs = outs


jax.tree_util.register_pytree_node(_Delta, lambda d: (d.outs, d.recipe), lambda r, outs: _Delta(r, list(outs)))


def root_positions(args) -> tuple:
    """Positions of the arguments whose state is lifted (plain objects, NNX modules)."""
    positions = ()
    for i, a in enumerate(args):
        if type(a) not in _FAST_TYPES and is_stateful(a):
            positions += (i,)
    return positions


class _Entry:
    """The programs for one state structure: a ProgramCache over `(*state arrays, *args)`."""

    def __init__(self, fn, positions: tuple, n_state: int, name: str):
        self.local = threading.local()
        self.last_layout = None  # re-tracing for .jaxpr/.as_text() off the call path uses it

        def run(*flat, **kwargs):
            layout = getattr(self.local, "layout", None) or self.last_layout
            tracers, rest = flat[:n_state], iter(flat[n_state:])
            saved = layout.snapshot()
            try:
                layout.fill(tracers)
                roots = iter(layout.roots)
                full = [next(roots) if i in positions else next(rest)
                        for i in range(len(positions) + len(flat) - n_state)]
                out = fn(*full, **kwargs)
                recipe, outs = make_recipe(layout, Layout(layout.roots), tracers)
            finally:
                layout.restore(saved)
            return out, _Delta(recipe, outs)

        self.cache = ProgramCache(run, name)


class StatefulPrograms:
    """Every program of one converted function called with stateful arguments."""

    def __init__(self, fn, name: str):
        self._fn = fn
        self._name = name
        self._entries: dict = {}
        self._lock = threading.Lock()

    def _prepare(self, layout, args, positions):
        rest = tuple(a for i, a in enumerate(args) if i not in positions)
        key = (positions, layout.key)
        entry = self._entries.get(key)
        if entry is None:
            with self._lock:
                entry = self._entries.get(key) or self._entries.setdefault(
                    key, _Entry(self._fn, positions, len(layout.leaves), self._name))
        return rest, entry

    def call(self, args, kwargs, positions):
        """Run `fn(*args, **kwargs)` as a program, writing state changes back onto the roots."""
        layout = Layout([args[i] for i in positions])
        if layout.traced or _traced(args, positions, kwargs):
            # Inside jit/grad/vmap (traced arguments or traced attributes): run on the live
            # objects, so the enclosing transformation sees the mutations as in eager code.
            return self._fn(*args, **kwargs)
        rest, entry = self._prepare(layout, args, positions)
        entry.last_layout = layout
        previous, entry.local.layout = getattr(entry.local, "layout", None), layout
        try:
            flat = (*layout.leaves, *rest)
            out, delta = entry.cache.call_general(flat, kwargs) if kwargs else entry.cache(flat)
        finally:
            entry.local.layout = previous
        delta.recipe.apply(layout, delta.outs)
        return out

    def get_concrete_program(self, args, kwargs, positions):
        layout = Layout([args[i] for i in positions])
        rest, entry = self._prepare(layout, args, positions)
        entry.last_layout = layout
        previous, entry.local.layout = getattr(entry.local, "layout", None), layout
        try:
            return entry.cache.get_concrete_program((*layout.leaves, *rest), kwargs)
        finally:
            entry.local.layout = previous

    @property
    def programs(self) -> list:
        return [p for entry in list(self._entries.values()) for p in entry.cache.programs]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _traced(args, positions, kwargs) -> bool:
    """Whether a non-state argument holds a tracer (one type check per plain array argument)."""
    rest = [a for i, a in enumerate(args) if i not in positions and type(a) not in _FAST_TYPES]
    if not kwargs and not rest:
        return False
    return any(isinstance(leaf, _Tracer) for leaf in jax.tree_util.tree_leaves((rest, kwargs)))
