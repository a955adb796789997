"""Refuse a result whose type eager picks by data, when it comes from a mixed choice.

`python_choice` gives back eager's exact value for `k = max(k, x.sum())` with an int `k`: the
Python int when it wins, the float array otherwise. Computed on, though, it may give a result
whose *type* depends on which side won: `k % 97` is an int or a float array eagerly, and the
program computed one dtype. (`a + k` with a float32 array `a` is a float32 array either way:
that is fine.) So, at the end of each program's trace, the equations JAX recorded are followed
forward from every *mixed* choice (one whose candidates compute as different types), carrying
the set of types eager's value could have. A result whose possible types are not exactly its
staged type, reaching the program's outputs (returned, or in an attribute, list or dict the
caller sees), makes the call raise `DataDependentKindError` at the line that computed it.
Comparisons (`k > 3`) and `int(k)` / `float(k)` give one type on every path; a mixed choice
returned as it is, or picked again by another choice (`max(k, y)`), stays exact.

Before (user code):                     At the end of the trace:
    k = 0 if c else x.sum()                 k: an int or a float32 array (a recorded choice)
    y = a + k                               y: float32 on both paths - nothing to refuse
    return k % 97, y                        rem(k, 97): an int or a float32 - DataDependentKindError

Types are `(dtype, weak)` pairs; a Python int is `(int32, True)`. Primitives dy2st cannot
follow give an unknown type set (refused where it reaches an output).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import jax
import numpy as np

from dy2st import _jax_compat
from dy2st.errors import DataDependentKindError, OriginInfo
from dy2st.input_spec import user_origin


@functools.cache
def _core():
    """`jax.extend.core`, imported when first needed (a trace): importing `jax.extend` brings
    in Pallas and MLIR's dialects, about a tenth of a second `import dy2st` need not pay."""
    import jax.extend.core

    return jax.extend.core

_COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne", "is_finite"})
_PROMOTING = frozenset({"add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter",
                        "and", "or", "xor", "not", "neg", "abs", "sign", "floor", "ceil", "round",
                        "integer_pow", "square", "clamp", "select_n", "concatenate", "copy", "copy_p",
                        "reshape", "broadcast_in_dim", "squeeze", "expand_dims", "transpose", "slice",
                        "dynamic_slice", "gather", "pad", "rev", "stop_gradient", "optimization_barrier"})
_TO_FLOAT = frozenset({"exp", "exp2", "log", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos", "atan",
                       "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "logistic", "sqrt", "rsqrt",
                       "cbrt", "erf", "erfc", "erf_inv", "lgamma", "digamma"})
_REDUCING = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "cumsum", "cumprod",
                       "cummax", "cummin", "reduce_and", "reduce_or"})
_INDICES = frozenset({"argmax", "argmin"})  # positions: the same whatever the values' type
_CALLS = ("jaxpr", "call_jaxpr", "fun_jaxpr")  # pjit, closed_call, remat, custom_jvp/vjp_call
_MAX_ROUNDS = 6


@dataclasses.dataclass(frozen=True)
class Taint:
    """A value derived from a mixed choice: the types eager's value could have (None: unknown)."""

    types: frozenset | None
    choice: bool = False  # a recorded choice as it is: exact where it leaves the program as one
    origin: object = None  # the equation that first computed it from a mixed choice


def check_outputs(entries: list, leaves: list, chosen: set) -> None:
    """Raise if an output leaf's eager type depends on which side of a mixed choice was taken.

    `entries`: `(value, choice, sources, mixed)` of every value recorded while tracing
    (`python_choice.Recorded`); `chosen`: the positions of `leaves` that leave the program as
    recorded choices (exact when their taint is a choice as it is)."""
    flow = _Flow(entries)
    flow.run(_jax_compat.traced_equations())
    for position, leaf in enumerate(leaves):
        var = _jax_compat.tracer_var(leaf)
        taint = flow.taint_of(var)
        if taint is None or taint.choice and position in chosen or covers(type_of(var.aval), taint.types):
            continue
        raise _error(taint.origin, flow.origins())


def covers(staged: tuple, types: frozenset | None) -> bool:
    """Whether a value staged as `staged` stands for eager's of any of `types`: all of one
    dtype, the staged one. (Weak or not may differ, as for every choice between a Python number
    and an array of its kind: python_choice stages those weakly; see docs/limitations.md.)"""
    return types is not None and all(dtype == staged[0] for dtype, _ in types)


def type_of(aval) -> tuple:
    return aval.dtype, bool(getattr(aval, "weak_type", False))  # (a key's dtype is no np.dtype)


def _kind(dtype) -> str:
    return getattr(dtype, "kind", "V")


def python_type(value) -> tuple:
    """The `(dtype, weak)` a Python number computes as."""
    dtype, weak = jax.dtypes.result_type(value, return_weak_type_flag=True)
    return np.dtype(dtype), bool(weak)


class _Flow:
    """Taints of the jaxpr variables of one program's trace (sub-jaxprs included), and the
    types clean operands had before jnp promoted them (to know what eager combines)."""

    def __init__(self, entries: list):
        self.taints: dict = {}
        self.before_promotion: dict = {}
        self.recorded: dict = {}  # var -> (candidate types or None, source vars or None, mixed)
        for value, types, sources, mixed in entries:
            var = _jax_compat.tracer_var(value)
            if var is not None:
                self.recorded[var] = (types, sources, mixed)

    def origins(self) -> list:
        """The equations that computed tainted values, in order (where to report, failing the
        first's traceback: jax keeps a bounded one)."""
        return [t.origin for t in self.taints.values() if t.origin is not None]

    def taint_of(self, var) -> Taint | None:
        return self.taints.get(var) if isinstance(var, _core().Var) else None

    def eager_types(self, atom) -> frozenset | None:
        """The types eager's value of this operand could have."""
        if isinstance(atom, _core().Literal):
            return _literal_types(atom)
        taint = self.taints.get(atom)
        if taint is not None:
            return taint.types
        return self.before_promotion.get(atom) or frozenset({type_of(atom.aval)})

    def _set(self, var, taint: Taint | None, eqn=None) -> None:
        if not isinstance(var, _core().Var):
            return
        if var in self.recorded:
            taint = self._recorded_taint(var, taint)
        if taint is not None and taint.origin is None and eqn is not None:  # where to report it
            taint = dataclasses.replace(taint, origin=eqn)
        if taint is not None and taint.types is not None and taint.types == {type_of(var.aval)} and not taint.choice:
            taint = None  # eager's type is the staged one on every path
        if taint is not None:
            self.taints[var] = _join(self.taints.get(var), taint)

    def _recorded_taint(self, var, made: Taint | None) -> Taint | None:
        """A value python_choice noted. A pick (`max`, `sorted`) is eagerly one of its sources
        as it is: exact as a choice of their candidates, unless a source was computed from a
        mixed choice - then it may be any type a source could have. A cond's merge carries what
        its sides gave (`made`); a `float(...)` cast has one type."""
        types, sources, mixed = self.recorded[var]
        if sources is not None:
            computed = [t for t in map(self.taint_of, sources) if t is not None and not t.choice]
            if computed:
                return Taint(_union(self.source_types(s) for s in sources), origin=computed[0].origin)
            made = None
        elif types is None:  # float(...): a Python float whatever its argument was
            return None
        if made is not None and not made.choice:
            return made
        return Taint(types, choice=True) if mixed else None

    def source_types(self, source) -> frozenset | None:
        return source if isinstance(source, frozenset) else self.eager_types(source)

    def run(self, eqns) -> None:
        for eqn in eqns:
            for var, taint in zip(eqn.outvars, self._through(eqn)):
                self._set(var, taint, eqn)

    def run_jaxpr(self, jaxpr, ins: list) -> list:
        """The taints of `jaxpr`'s outputs given its inputs' (constants are clean)."""
        if isinstance(jaxpr, _core().ClosedJaxpr):
            jaxpr = jaxpr.jaxpr
        # One jaxpr may be run for several calls (jax caches a jitted function's): forget what
        # an earlier one left in its variables.
        for var in itertools.chain(jaxpr.invars, *(eqn.outvars for eqn in jaxpr.eqns)):
            self.taints.pop(var, None)
            self.before_promotion.pop(var, None)
        for var, taint in zip(jaxpr.invars, ins):
            self._set(var, taint)
        self.run(jaxpr.eqns)
        return [self.taint_of(v) for v in jaxpr.outvars]

    def _through(self, eqn) -> list:
        """The taints of `eqn`'s outputs."""
        name, n = eqn.primitive.name, len(eqn.outvars)
        ins = [self.taint_of(v) for v in eqn.invars]
        if name == "cond":
            return self._cond(eqn, ins)
        if name == "while":
            return self._while(eqn, ins)
        if name == "scan":
            return self._scan(eqn, ins)
        called = next((eqn.params[k] for k in _CALLS if isinstance(eqn.params.get(k), (_core().Jaxpr, _core().ClosedJaxpr))), None)
        if called is not None and len(_invars(called)) == len(ins):
            return [_called(t, ins, eqn) for t in self.run_jaxpr(called, ins)]
        if name == "convert_element_type":
            if _casts_to_python_int(eqn):
                return [None] * n  # `int(k)`: a Python int whatever `k` was
            # A cast jnp's promotion or a staged merge makes: the operation using it combines
            # eager's types, and a merge records the choice's own candidates.
            self._note_promotion(eqn)
            return ins
        tainted = [t for t in ins if t is not None]
        if not tainted or name in _COMPARISONS or name in _INDICES:
            return [None] * n
        origin = next((t.origin for t in tainted if not t.choice), eqn)
        types = self._result_types(eqn)
        return [Taint(types, origin=origin)] * n

    def _note_promotion(self, eqn) -> None:
        """What jnp converted (a weak int scalar to float, to combine it with a float) computes
        eagerly as what it was: remember the type before the cast."""
        (atom,), (out,) = eqn.invars, eqn.outvars
        if isinstance(out, _core().Var) and self.taint_of(atom) is None:
            self.before_promotion[out] = self.eager_types(atom)

    def _result_types(self, eqn) -> frozenset | None:
        """The types eager's result could have, from its operands' possible types."""
        name = eqn.primitive.name
        operands = [self.eager_types(v) for v in eqn.invars]
        if name == "select_n":
            operands = operands[1:]
        if any(types is None for types in operands):
            return None
        if name in _PROMOTING:
            try:
                return frozenset(_promote(combo) for combo in itertools.product(*operands))
            except TypeError:  # a key or other extended dtype: not followed
                return None
        if name in _TO_FLOAT:
            return frozenset(_as_float(t) for t in operands[0])
        if name in _REDUCING:
            return frozenset((dtype, False) for dtype, _ in operands[0])
        return None

    def _cond(self, eqn, ins: list) -> list:
        index, operands = ins[0], ins[1:]
        sides = [self.run_jaxpr(branch, operands) for branch in eqn.params["branches"]]
        outs = [_merged(out, taints) for out, taints in zip(eqn.outvars, zip(*sides))]
        if index is not None:
            outs = [Taint(None, origin=index.origin or eqn)] * len(outs)
        return outs

    def _while(self, eqn, ins: list) -> list:
        cond_n, body_n = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
        cond_consts, body_consts, carry = ins[:cond_n], ins[cond_n:cond_n + body_n], ins[cond_n + body_n:]
        body = eqn.params["body_jaxpr"]
        carry = self._fixed_point(lambda c: self.run_jaxpr(body, body_consts + c), carry, eqn)
        (stop,) = self.run_jaxpr(eqn.params["cond_jaxpr"], cond_consts + carry)
        if stop is not None:
            return [Taint(None, origin=stop.origin or eqn)] * len(carry)
        outs = self.run_jaxpr(body, body_consts + carry)
        # Zero or more iterations: the value before, or the body's last.
        return [self._after_loop(i, t, out, body.jaxpr, body_n, eqn, before=t) for i, (t, out) in enumerate(zip(carry, outs))]

    def _scan(self, eqn, ins: list) -> list:
        consts_n, carry_n = eqn.params["num_consts"], eqn.params["num_carry"]
        consts, carry, xs = ins[:consts_n], ins[consts_n:consts_n + carry_n], ins[consts_n + carry_n:]
        body = eqn.params["jaxpr"]
        carry = self._fixed_point(lambda c: self.run_jaxpr(body, consts + c + xs)[:carry_n], carry, eqn)
        outs = self.run_jaxpr(body, consts + carry + xs)
        # At least one iteration (a scan's length is never zero here): the body's last value.
        finals = [self._after_loop(i, t, out, body.jaxpr, consts_n, eqn, before=None) for i, (t, out) in enumerate(zip(carry, outs))]
        return finals + [_carried(t, eqn) for t in outs[carry_n:]]

    def _after_loop(self, position: int, fixed: Taint | None, out: Taint | None, body, offset: int, eqn, before) -> Taint | None:
        """A carried value after the loop: `before` (the start's taint; None for a scan, which
        runs) or the body's last output `out`. A body output made clean, or the carry passed on
        as it is, keeps a choice a choice (the call records it when its eager type depends on
        whether the loop ran); one the body computed from a choice is no longer one: the loop
        carries it with one dtype."""
        passed = body.outvars[position] is body.invars[offset + position]
        if out is not None and not passed:
            return _carried(fixed, eqn)
        # a clean body value is eagerly of its own type
        made = out if out is not None else Taint(self.eager_types(body.outvars[position]), choice=True)
        merged = made if before is None else _join(made, before)
        if merged is not None and merged.types == {type_of(eqn.outvars[position].aval)}:
            return None  # eager's type is the staged one either way
        return merged

    @staticmethod
    def _fixed_point(step, carry: list, eqn) -> list:
        """Carry taints after any number of iterations (type sets only grow)."""
        for _ in range(_MAX_ROUNDS):
            after = [_join(a, b) for a, b in zip(carry, step(carry))]
            if after == carry:
                return after
            carry = after
        return [None if t is None else Taint(None, origin=t.origin or eqn) for t in carry]


def _union(type_sets) -> frozenset | None:
    union = frozenset()
    for types in type_sets:
        if types is None:
            return None
        union |= types
    return union


def _merged(out, taints) -> Taint | None:
    """A cond's output: what any of its sides could be (a clean side: its own staged type)."""
    if all(t is None for t in taints):
        return None
    merged = Taint(frozenset({type_of(out.aval)}), choice=True)
    for t in taints:
        merged = merged if t is None else _join(merged, t)
    return merged


def _join(a: Taint | None, b: Taint | None) -> Taint | None:
    if a is None or b is None:
        return b if a is None else a
    types = None if a.types is None or b.types is None else a.types | b.types
    return Taint(types, a.choice and b.choice, a.origin or b.origin)


def _promote(types) -> tuple:
    """What jnp's promotion gives for operands of these eager types."""
    dtype, weak = _jax_compat.weak_result_type(*[_representative(t) for t in types])
    return dtype, bool(weak)


def _representative(t):
    """A value jnp promotes as type `t`: a Python number for a weak default type (jnp treats
    Python numbers as weak), else the dtype."""
    dtype, weak = t
    if weak:
        for number in (0, 0.0, 0j):
            if python_type(number) == (dtype, True):
                return number
    return dtype


def _as_float(t) -> tuple:
    dtype, weak = t
    return (python_type(0.0)[0], weak) if _kind(dtype) in "biu" else t


def _literal_types(literal) -> frozenset:
    """A constant may be a Python number that jnp promoted to the other operand's type
    (`k % 97`, `k + 0.5` with a float32 `k`): eagerly it is that number where `k` is one.
    Its possible types: its own, a Python float's if a float, a Python int's if whole."""
    own = type_of(literal.aval)
    value = np.asarray(literal.val)
    if value.shape != () or _kind(own[0]) not in "iuf":
        return frozenset({own})
    types = {own, python_type(0.0)} if _kind(own[0]) == "f" else {own}
    if float(value).is_integer():
        types.add(python_type(0))
    return frozenset(types)


def _invars(jaxpr) -> list:
    return (jaxpr.jaxpr if isinstance(jaxpr, _core().ClosedJaxpr) else jaxpr).invars


def _carried(taint: Taint | None, eqn) -> Taint | None:
    """A mixed choice a loop carries (or stacks) is an array of one dtype there: no longer a
    choice, reported at the loop."""
    if taint is None or not taint.choice:
        return taint
    return Taint(taint.types, origin=eqn)


def _called(taint: Taint | None, ins: list, eqn) -> Taint | None:
    """An output's taint as the call `eqn` (a jitted jnp function, say) gives it. First
    computed inside, it is reported at the call: a call's equations may carry the traceback of
    an earlier trace (jax caches them). A mixed choice passed through it as it is is no longer
    a recorded choice."""
    if taint is None:
        return None
    computed = next((t for t in ins if t is not None and not t.choice), None)
    return Taint(taint.types, origin=computed.origin if computed is not None else eqn)


def _casts_to_python_int(eqn) -> bool:
    """`int(k)` of a float: a Python int whichever type eager's `k` had, staged as a weak int.
    (A strong int is an array's cast: `round(k)` of an array is an int32 array in eager, of a
    Python float a Python int.)"""
    if eqn.primitive.name != "convert_element_type" or not eqn.params.get("weak_type", False):
        return False
    return _kind(eqn.invars[0].aval.dtype) in "fc" and _kind(eqn.params["new_dtype"]) in "biu"



def _user_origin(eqns) -> OriginInfo | None:
    for eqn in eqns:
        origin = OriginInfo.from_code_frames(_jax_compat.equation_code_frames(eqn))
        if origin is not None:
            return origin
    return None


def _error(eqn, others: list) -> DataDependentKindError:
    does = "This loop carries" if eqn is not None and eqn.primitive.name in ("while", "scan") else "This computes"
    return DataDependentKindError(
        f"{does} a value whose type eager Python picks by data: it comes from a value that is a "
        "Python int on some inputs and a float array on others (a `max`/`min`/`sorted`, or an `if` "
        "whose sides give an int and a float), and eager's result here is an int on one path and "
        "a float on the other; a compiled program has one dtype.",
        # jax keeps a bounded traceback per equation: failing every one, the user's call
        _user_origin([eqn, *others] if eqn is not None else others) or user_origin(),
        advice="give both sides one kind: a float literal (`0.0`, not `0`) or `float(...)` where "
        "the int side is made, or convert the result with `int(...)` where an int is meant.",
    )
