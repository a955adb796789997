"""Staging a loop: which state crosses iterations as arrays, and the lax loop carrying it.

A staged loop's body is traced with `jax.make_jaxpr` on abstract values of the carried state,
the way `staging.stage_cond` traces branches. Before the loop is built, that trace is repeated
until the state's types stop changing (a fixed point, usually reached in one or two traces):

* an array leaf is carried with its shape and dtype; a body that changes either is an error
  naming the variable (`LoopVariableError`), except that a Python scalar or weakly typed start
  value is promoted the way `jnp.where` would (`i = 0` then `i = i + 0.5` carries float32);
* a Python value the body leaves equal stays Python (later Python-only code keeps working);
  one it changes is carried as an array when it is a number, else it is an error;
* a variable undefined before the loop and assigned in it takes the type the body gives it and
  starts from zeros (abstract evaluation, no error);
* a Python list the body only appends to (`xs = list_append(xs, v)`) is not carried: each
  iteration's appended values become stacked scan outputs, split back into a list afterwards.

The last trace's jaxpr is then re-bound inside `lax.scan` (static trip count, or a bound from
`set_loop_options`) or `lax.while_loop`, so user code runs once per trace round, not once more.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dy2st.errors import LoopGradientError, LoopVariableError, OriginInfo
from dy2st.runtime.staging import _cast, _static_equal, _weak_proxy, describe, is_traced, scalar_predicate
from dy2st.runtime.undefined import Undefined

_PY_SCALARS = (bool, int, float, complex)
_MAX_ROUNDS = 4
_INDEX = jax.ShapeDtypeStruct((), jnp.int32)


def _is_array(value) -> bool:
    return is_traced(value) or isinstance(value, (jax.Array, np.ndarray, np.generic))


def _flatten(value):
    return jax.tree_util.tree_flatten(value, is_leaf=lambda x: isinstance(x, Undefined))


def scalar_aval(value):
    """The abstract value a Python number or an array becomes when carried."""
    return jax.typeof(value if is_traced(value) else jnp.asarray(value))


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf of a state variable: a Python value kept as is, or a carried array type."""

    static: object = None
    aval: object = None
    zeros: bool = False  # undefined before the loop: the carry starts from zeros

    @property
    def carried(self) -> bool:
        return self.aval is not None


@dataclasses.dataclass
class Var:
    """How one state variable crosses iterations: a pytree of leaves, or an appended list."""

    name: str
    treedef: object = None
    leaves: tuple = ()
    prefix: list | None = None  # an append-only list: its items before the loop
    items: tuple | None = None  # avals of the values one iteration appends (None: not known yet)

    @property
    def is_list(self) -> bool:
        return self.prefix is not None


def initial_spec(init, names) -> list:
    spec = []
    for name, value in zip(names, init):
        if type(value) is list:
            spec.append(Var(name, prefix=list(value)))
            continue
        leaves, treedef = _flatten(value)
        spec.append(Var(name, treedef, tuple(Leaf(aval=scalar_aval(l)) if _is_array(l) else Leaf(static=l) for l in leaves)))
    return spec


def assemble(spec, carried) -> list:
    """Per-variable values from the spec's static leaves and the `carried` arrays, in order."""
    carried = iter(carried)
    values = []
    for var in spec:
        if var.is_list:
            values.append(list(var.prefix))
        else:
            values.append(jax.tree_util.tree_unflatten(var.treedef, [next(carried) if l.carried else l.static for l in var.leaves]))
    return values


def carried_avals(spec) -> list:
    return [l.aval for var in spec if not var.is_list for l in var.leaves if l.carried]


def initial_carry(spec, init) -> list:
    """The first carry: the loop's start values cast to the carried types (zeros if undefined)."""
    out = []
    for var, value in zip(spec, init):
        if var.is_list:
            continue
        leaves, _ = _flatten(value)
        if isinstance(value, Undefined):  # undefined before the loop: any structure, all zeros
            leaves = [value] * len(var.leaves)
        for leaf, start in zip(var.leaves, leaves):
            if not leaf.carried:
                continue
            if leaf.zeros or isinstance(start, Undefined):
                out.append(jnp.zeros(leaf.aval.shape, leaf.aval.dtype))
                continue
            start = jnp.asarray(start) if not is_traced(start) else start
            out.append(_cast(jnp.broadcast_to(start, leaf.aval.shape), leaf.aval))
    return out


# -- tracing rounds --------------------------------------------------------------------------
@dataclasses.dataclass
class Trace:
    """One traced body: its jaxpr and, per variable, where each output comes from."""

    closed: object
    outputs: list  # per var: ("tree", treedef, [("a", aval, pos) | ("s", value)]) or ("list", [(aval, pos)]) or ("badlist", value-desc)


def trace_body(spec, run, origin: OriginInfo) -> Trace:
    """Trace `run(index, values) -> new values` on the spec's abstract carry."""
    record = {}

    def traced(index, carried):
        outs = run(index, assemble(spec, carried))
        arrays, described = [], []

        def output(value):
            arrays.append(value)
            return len(arrays) - 1

        for var, out in zip(spec, outs):
            if var.is_list and type(out) is list and len(out) >= len(var.prefix) and all(
                a is b for a, b in zip(out, var.prefix)
            ):
                new = out[len(var.prefix):]
                for item in new:
                    if not _is_array(item):
                        raise LoopVariableError(
                            f"'{var.name}' gets {describe(item)} appended in a staged loop; only arrays can be stacked.",
                            origin,
                            advice=f"append arrays to '{var.name}', or build it in a Python loop.",
                        )
                described.append(("list", [(scalar_aval(v), output(v)) for v in new]))
                continue
            leaves, treedef = _flatten(out)
            desc = [("a", scalar_aval(l), output(l)) if _is_array(l) else ("s", l) for l in leaves]
            described.append(("tree", treedef, desc))
        record["outputs"] = described
        return arrays

    closed = jax.make_jaxpr(traced)(_INDEX, [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in carried_avals(spec)])
    return Trace(closed, record["outputs"])


def trace_test(spec, run, origin: OriginInfo):
    """The loop condition `run(index, values)` as a closed jaxpr giving a scalar bool."""

    def traced(index, carried):
        pred = run(index, assemble(spec, carried))
        return scalar_predicate(pred, origin) if is_traced(pred) else jnp.asarray(bool(pred))

    return jax.make_jaxpr(traced)(_INDEX, [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in carried_avals(spec)])


def discover(spec, run, origin: OriginInfo):
    """Trace the body until the carried types stop changing; returns (spec, last trace)."""
    for _ in range(_MAX_ROUNDS):
        trace = trace_body(spec, run, origin)
        new = [_join_var(var, out, origin) for var, out in zip(spec, trace.outputs)]
        if all(_same_var(a, b) for a, b in zip(spec, new)):
            return spec, trace
        spec = new
    raise LoopVariableError(
        "the types of the loop's variables do not settle: each iteration changes them again.",
        origin,
        advice="give every variable the loop changes a fixed shape and dtype before the loop.",
    )


def _same_var(a: Var, b: Var) -> bool:
    if a.is_list or b.is_list:
        return a.is_list and b.is_list and a.items == b.items
    return a.treedef == b.treedef and len(a.leaves) == len(b.leaves) and all(
        x.carried == y.carried and (x.aval == y.aval if x.carried else _same_static(x.static, y.static)) and x.zeros == y.zeros
        for x, y in zip(a.leaves, b.leaves)
    )


def _same_static(a, b) -> bool:
    return a is b or (type(a) is type(b) and _static_equal(a, b))


def _join_var(var: Var, out, origin) -> Var:
    if out[0] == "list":
        items = tuple(aval for aval, _ in out[1])
        if var.items is not None and var.items != items:
            raise LoopVariableError(
                f"'{var.name}' gets {len(items)} value(s) appended per iteration here, {len(var.items)} elsewhere, "
                "or of other shapes; a staged loop stacks one fixed set per iteration.",
                origin,
                advice=f"append the same number of same-shaped arrays to '{var.name}' in every iteration.",
            )
        return Var(var.name, prefix=var.prefix, items=items)
    _, treedef, desc = out
    if var.is_list:  # not append-only after all: carry the list as a pytree of arrays
        return _join_var(initial_spec([var.prefix], [var.name])[0], out, origin)
    if treedef != var.treedef:
        if all(not l.carried and isinstance(l.static, Undefined) for l in var.leaves):
            var = Var(var.name, treedef, tuple(Leaf(static=var.leaves[0].static) for _ in desc))
        else:
            raise LoopVariableError(
                f"'{var.name}' changes structure in the loop, from {var.treedef} to {treedef}.",
                origin,
                advice=f"keep '{var.name}' the same kind of container in every iteration.",
            )
    label = f"'{var.name}'" if len(desc) == 1 else f"a part of '{var.name}'"
    return Var(var.name, treedef, tuple(_join_leaf(l, d, label, origin) for l, d in zip(var.leaves, desc)))


def _join_leaf(old: Leaf, out, label, origin) -> Leaf:
    out_static = out[1] if out[0] == "s" else None
    if out[0] == "s" and not old.carried and _same_static(old.static, out_static):
        return old
    if out[0] == "s" and isinstance(out_static, _PY_SCALARS):
        new = scalar_aval(out_static)
    elif out[0] == "s":
        if not old.carried and isinstance(old.static, Undefined):
            return Leaf(static=out_static)
        raise LoopVariableError(
            f"{label} is {describe(old.aval if old.carried else old.static)} before an iteration of the loop "
            f"but {describe(out_static)} after it; a staged loop can only carry arrays and numbers.",
            origin,
            advice=f"keep {label} the same Python value in every iteration, or make it an array.",
        )
    else:
        new = out[1]
    if not old.carried:
        if isinstance(old.static, Undefined):
            return Leaf(aval=new, zeros=True)
        if not isinstance(old.static, _PY_SCALARS):
            raise LoopVariableError(
                f"{label} is {describe(old.static)} before an iteration of the loop but {describe(new)} after it.",
                origin,
                advice=f"give {label} an array value before the loop.",
            )
        start = scalar_aval(old.static)
        start = jax.core.ShapedArray(new.shape, start.dtype, weak_type=start.weak_type)  # a scalar broadcasts
        return Leaf(aval=merge_types(start, new, label, origin))
    return Leaf(aval=merge_types(old.aval, new, label, origin), zeros=old.zeros)


def merge_types(before, after, label, origin):
    """The carried type once an iteration turns `before` into `after`, or a LoopVariableError."""

    def mismatch(why, advice):
        return LoopVariableError(
            f"{label} is {describe(before)} before an iteration of the loop but {describe(after)} after it: {why}",
            origin,
            advice=advice,
        )

    if before.shape != after.shape:
        raise mismatch(
            "a staged loop keeps each variable's shape.",
            f"keep {label} one shape in every iteration (preallocate it and write with .at[i].set(...)), "
            "or make the loop condition a Python value so the loop unrolls.",
        )
    if before.dtype == after.dtype:
        return jax.core.ShapedArray(before.shape, before.dtype, weak_type=before.weak_type and after.weak_type)
    if not after.weak_type:
        if before.weak_type:
            return jax.core.ShapedArray(before.shape, after.dtype)
    else:
        dtype, weak = jax._src.dtypes.result_type(_weak_proxy(before), _weak_proxy(after), return_weak_type_flag=True)
        if before.weak_type or dtype == before.dtype:
            return jax.core.ShapedArray(before.shape, dtype, weak_type=weak)
    raise mismatch("a staged loop keeps each variable's dtype.", f"cast {label} to one dtype, e.g. with .astype(...).")


# -- the lax loop ----------------------------------------------------------------------------
def _body_from_trace(spec, trace: Trace):
    """`(index, carry) -> (new carry, appended items)`, re-binding the traced body."""

    def body(i, carried):
        outs = jax.core.eval_jaxpr(trace.closed.jaxpr, trace.closed.consts, i, *carried)
        new, items = [], []
        for var, out in zip(spec, trace.outputs):
            if var.is_list:
                items += [outs[pos] for _, pos in out[1]]
                continue
            for leaf, d in zip(var.leaves, out[2]):
                if leaf.carried:
                    value = outs[d[2]] if d[0] == "a" else jnp.asarray(d[1])
                    new.append(_cast(jnp.broadcast_to(value, leaf.aval.shape), leaf.aval))
        return new, items

    return body


def _test_from_jaxpr(closed):
    return lambda i, carried: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, i, *carried)[0]


def run_staged(spec, init, trace: Trace, test_closed, length, max_iters, origin: OriginInfo) -> list:
    """Run the loop with lax and return the state's values after it.

    Args:
      length: the static trip count (an int), or None when only `test` ends the loop.
      test_closed: the jaxpr of the condition checked before each iteration, or None.
      max_iters: a static bound from `set_loop_options`, or None.
    """
    body = _body_from_trace(spec, trace)
    test = _test_from_jaxpr(test_closed) if test_closed is not None else None
    carry = (jnp.int32(0), initial_carry(spec, init))
    lists = [var.name for var in spec if var.is_list]
    if length is not None and test is None:
        def step(c, _):
            new, items = body(*c)
            return (c[0] + 1, new), items

        (_, final), ys = lax.scan(step, carry, None, length=length)
        return _final_values(spec, final, ys, length)
    if lists:
        raise LoopVariableError(
            f"'{lists[0]}' is appended to in a staged loop whose number of iterations is not known "
            "when it is traced (it may stop early), so the appended values cannot be stacked.",
            origin,
            advice="preallocate an array and write row i with .at[i].set(value), "
            "or loop over a Python range / an array without `break`.",
        )
    bound = length if length is not None else max_iters
    if bound is not None:
        def masked_step(c, _):
            i, carried = c
            return lax.cond(test(i, carried), lambda: (i + 1, body(i, carried)[0]), lambda: (i, list(carried))), None

        (_, final), _ = lax.scan(masked_step, carry, None, length=bound)
        return _final_values(spec, final, [], 0)
    if _reverse_mode(carry[1] + list(trace.closed.consts)):
        raise LoopGradientError(
            "reverse-mode differentiation (jax.grad/vjp) through this staged loop: its number of "
            "iterations is decided by traced values and has no bound, and XLA's while loop cannot run backwards.",
            origin,
            advice="call dy2st.set_loop_options(maximum_iterations=N) inside the loop body with an upper bound N; "
            "the loop then becomes a scan of N masked steps, which jax.grad supports.",
        )
    _, final = lax.while_loop(lambda c: test(*c), lambda c: (c[0] + 1, body(*c)[0]), carry)
    return _final_values(spec, final, [], 0)


def _final_values(spec, final, ys, length) -> list:
    carried, ys = iter(final), iter(ys)
    values = []
    for var in spec:
        if var.is_list:
            stacks = [next(ys) for _ in var.items]
            values.append(var.prefix + [s[t] for t in range(length) for s in stacks])
        else:
            values.append(jax.tree_util.tree_unflatten(var.treedef, [next(carried) if l.carried else l.static for l in var.leaves]))
    return values


def _reverse_mode(values) -> bool:
    """Whether reverse-mode AD (jax.grad/vjp/linearize) is tracing any floating value here."""
    linearize_tracer = getattr(jax._src.interpreters.ad, "LinearizeTracer", None)
    for value in values:
        while is_traced(value):
            if linearize_tracer is not None and isinstance(value, linearize_tracer):
                if jnp.issubdtype(jax.typeof(value).dtype, jnp.inexact):
                    return True
                break
            value = getattr(value, "val", None)  # a vmap tracer wraps the value it batches
    return False
