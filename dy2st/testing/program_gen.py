"""A hypothesis strategy for random, well-formed Python functions over small JAX arrays and ints.

`programs(features)` draws a `GeneratedProgram`: the source of a module defining
`f(x, y, m, n)` (and, with the `calls` feature, helper functions it calls), plus inputs.
`x` and `y` are float32[4], `m` is float32[3, 4], `n` a small int. Every program:

* defines each variable before any control flow (`a0`, `a1` arrays; `k0`, `k1` ints), so no
  branch leaves a variable undefined, and always returns `(a0, a1, k0, k1)` (early returns too);
* terminates eagerly: `while` loops carry a counter incremented first thing in the body and
  tested against a small bound, `for` loops run over `range` of a small bound or over `m`;
* keeps values exactly representable, so eager and XLA agree bit for bit whatever the fusion:
  inputs are small integers, array assignments are clipped to [-1000, 1000], int assignments
  that combine two variables are taken modulo 97, and only constants are added in place.

Predicates read array values (`a0.sum() > 2`, `(a1 < x).any()`), ints that may be Python or
traced (`k0 >= 1`), and combine them with `and`/`or`/`not` and chained comparisons, so each
program mixes Python and staged control flow.

The program is built as source text: it stands for *user* code, which dy2st reads from a file
with `inspect`, so the fuzzer writes it to a temporary module (see `dy2st.testing.fuzz`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

LIMIT = 1000.0
INT_MOD = 97
CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")


@dataclasses.dataclass(frozen=True)
class Features:
    """Which constructs the generator may use (kept in step with what dy2st supports)."""

    loops: bool = False  # for / while / break / continue
    loop_returns: bool = False  # `return` inside a loop body (needs loops)
    calls: bool = False  # calls to generated helper functions (recursive conversion)

    @classmethod
    def parse(cls, text: str) -> "Features":
        names = {t.strip() for t in text.split(",") if t.strip()}
        unknown = names - {f.name for f in dataclasses.fields(cls)} - {"none"}
        if unknown:
            raise ValueError(f"unknown features {sorted(unknown)}; choose from loops, loop_returns, calls, none")
        return cls(**{f.name: f.name in names for f in dataclasses.fields(cls)})


@dataclasses.dataclass
class GeneratedProgram:
    """A generated module's source and the inputs to call its `f` with."""

    source: str
    x: np.ndarray
    y: np.ndarray
    m: np.ndarray
    n: int
    n_as_array: bool  # pass `n` as an int32 array (so `range(n)` / `n > 1` are staged)
    has_loops: bool

    def __repr__(self):  # what hypothesis prints for a falsifying example
        return (
            f"GeneratedProgram(n={self.n}, n_as_array={self.n_as_array},\n"
            f"  x={self.x.tolist()}, y={self.y.tolist()}, m={self.m.tolist()})\n{self.source}"
        )


@dataclasses.dataclass
class _Scope:
    """The names a block may read and write."""

    arrays: list  # writable array variables
    ints: list  # writable int variables
    array_reads: list  # read-only array names (inputs, loop rows)
    int_reads: list  # read-only int names (inputs, loop counters)
    loop_depth: int = 0

    def child(self, **changes) -> "_Scope":
        return dataclasses.replace(self, **{k: v for k, v in changes.items()})


class _Generator:
    """Draws one program; `draw` is hypothesis' draw function."""

    MAX_DEPTH = 3

    def __init__(self, draw, features: Features):
        self.draw = draw
        self.features = features
        self.budget = draw(st.integers(4, 14))  # statements left to generate
        self.helpers: list[str] = []  # helpers defined so far: name(a, k, m) -> (a, k)
        self.fresh = 0
        self.has_loops = False

    # -- small draws --------------------------------------------------------------------
    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 99)) < p * 100

    def new_name(self, root: str) -> str:
        self.fresh += 1
        return f"{root}{self.fresh}"

    # -- expressions --------------------------------------------------------------------
    def arr_atom(self, s: _Scope) -> str:
        return self.pick(s.arrays + s.array_reads)

    def int_atom(self, s: _Scope) -> str:
        options = s.ints + s.int_reads
        if self.chance(0.25):
            return str(self.draw(st.integers(-2, 4)))
        return self.pick(options)

    def arr_expr(self, s: _Scope, depth: int = 0) -> str:
        if depth >= 2 or self.chance(0.3):
            return self.arr_atom(s)
        kind = self.draw(st.integers(0, 10))
        sub = lambda: self.arr_expr(s, depth + 1)  # noqa: E731
        if kind == 0:
            return f"({sub()} + {sub()})"
        if kind == 1:
            return f"({sub()} - {sub()})"
        if kind == 2:
            return f"({self.arr_atom(s)} * {self.arr_atom(s)})"
        if kind == 3:
            return f"({sub()} * {self.pick(['2', '-1', '3', '2.0'])})"
        if kind == 4:
            return f"({self.arr_atom(s)} * {self.int_atom(s)})"
        if kind == 5:
            return f"jnp.{self.pick(['abs', 'negative'])}({sub()})"
        if kind == 6:
            return f"jnp.{self.pick(['maximum', 'minimum'])}({sub()}, {sub()})"
        if kind == 7:
            return f"{self.arr_atom(s)}[::-1]"
        if kind == 8:
            return f"jnp.where({self.arr_atom(s)} > {self.small()}, {sub()}, {sub()})"
        if kind == 9:
            return f"({sub()} if {self.pred(s, depth + 1)} else {sub()})"
        return f"({sub()} + {self.int_atom(s)})"

    def int_expr(self, s: _Scope, depth: int = 0) -> str:
        if depth >= 2 or self.chance(0.3):
            return self.int_atom(s)
        kind = self.draw(st.integers(0, 6))
        if kind == 0:
            return f"({self.int_atom(s)} + {self.draw(st.integers(-3, 3))})"
        if kind == 1:
            return f"(({self.int_expr(s, depth + 1)} {self.pick(['+', '-'])} {self.int_expr(s, depth + 1)}) % {INT_MOD})"
        if kind == 2:
            return f"({self.int_atom(s)} // {self.pick(['2', '3'])})"
        if kind == 3:
            return f"({self.int_atom(s)} % {self.pick(['2', '3'])})"
        if kind == 4:
            return f"({self.int_expr(s, depth + 1)} if {self.pred(s, depth + 1)} else {self.int_expr(s, depth + 1)})"
        if kind == 5:
            return f"jnp.sum({self.arr_atom(s)} > {self.small()})"
        return f"(-{self.int_atom(s)})"

    def small(self) -> str:
        value = self.draw(st.integers(-4, 4))
        return str(value) if self.chance(0.5) else f"{value}.0"

    def scalar(self, s: _Scope, depth: int) -> str:
        """A scalar value read from arrays (traced under to_static) or from ints."""
        kind = self.draw(st.integers(0, 5))
        if kind == 0:
            return f"{self.arr_expr(s, depth + 1)}.sum()"
        if kind == 1:
            return f"{self.arr_atom(s)}[{self.draw(st.integers(-4, 3))}]"
        if kind == 2:
            return f"{self.arr_atom(s)}.{self.pick(['max', 'min'])}()"
        if kind == 3:
            return f"m[{self.draw(st.integers(0, 2))}, {self.draw(st.integers(0, 3))}]"
        if kind == 4 and self.chance(0.5):
            return f"{self.arr_atom(s)}[{self.int_atom(s)} % 4]"  # an index that may be traced
        return self.int_atom(s)

    def pred(self, s: _Scope, depth: int = 0) -> str:
        if depth < 2 and self.chance(0.3):
            kind = self.draw(st.integers(0, 2))
            if kind == 0:
                return f"not {self.pred(s, depth + 1)}"
            op = "and" if kind == 1 else "or"
            return f"({self.pred(s, depth + 1)} {op} {self.pred(s, depth + 1)})"
        kind = self.draw(st.integers(0, 9))
        if kind <= 3:
            return f"{self.scalar(s, depth)} {self.pick(CMP_OPS)} {self.small()}"
        if kind == 4:
            return f"{self.scalar(s, depth)} {self.pick(CMP_OPS)} {self.scalar(s, depth)}"
        if kind == 5:
            lo = self.draw(st.integers(-4, 2))
            return f"{lo} {self.pick(['<', '<='])} {self.scalar(s, depth)} {self.pick(['<', '<='])} {lo + self.draw(st.integers(1, 5))}"
        if kind == 6:
            return f"({self.arr_atom(s)} {self.pick(['<', '>', '<=', '>='])} {self.arr_atom(s)}).{self.pick(['any', 'all'])}()"
        if kind == 7:
            return f"{self.int_atom(s)}"  # truthiness of an int
        if kind == 8:
            return f"{self.int_expr(s, depth + 1)} {self.pick(CMP_OPS)} {self.int_atom(s)}"
        return f"{self.arr_expr(s, depth + 1)}.sum()"  # truthiness of a float scalar

    # -- statements ---------------------------------------------------------------------
    def clipped(self, expr: str) -> str:
        return expr if expr.isidentifier() else f"jnp.clip({expr}, -{LIMIT}, {LIMIT})"

    def assign_array(self, s: _Scope) -> str:
        return f"{self.pick(s.arrays)} = {self.clipped(self.arr_expr(s))}"

    def assign_int(self, s: _Scope) -> str:
        return f"{self.pick(s.ints)} = {self.int_expr(s)}"

    def statement(self, s: _Scope, depth: int, ind: str) -> tuple[list[str], bool]:
        """One statement as lines, and whether it ends the block (return/break/continue)."""
        self.budget -= 1
        weights = ["arr", "arr", "int", "int", "aug", "ternary", "if", "if", "if", "return", "temp", "set", "pass"]
        if self.features.loops:
            weights += ["for", "while", "for_rows"]
            if s.loop_depth:
                weights += ["break", "continue"]
        if self.features.calls and self.helpers:
            weights += ["call", "call"]
        if depth >= self.MAX_DEPTH or self.budget <= 0:
            weights = [w for w in weights if w not in ("if", "for", "while", "for_rows")]
        kind = self.pick(weights)
        if kind == "arr":
            return [ind + self.assign_array(s)], False
        if kind == "int":
            return [ind + self.assign_int(s)], False
        if kind == "temp":  # a block-local array, readable by the rest of the block only
            name = self.new_name("t")
            line = f"{name} = {self.clipped(self.arr_expr(s))}"
            s.array_reads.append(name)
            return [ind + line], False
        if kind == "set":
            target = self.pick(s.arrays)
            return [ind + f"{target} = {target}.at[{self.int_atom(s)} % 4].set({self.scalar(s, 1)})"], False
        if kind == "pass":
            return [ind + "pass"], False
        if kind == "aug":
            if self.chance(0.5):
                return [ind + f"{self.pick(s.arrays)} {self.pick(['+=', '-='])} {self.arr_atom(s)}"], False
            return [ind + f"{self.pick(s.ints)} {self.pick(['+=', '-='])} {self.draw(st.integers(1, 3))}"], False
        if kind == "ternary":
            if self.chance(0.5):
                return [ind + f"{self.pick(s.arrays)} = {self.arr_expr(s, 1)} if {self.pred(s)} else {self.arr_expr(s, 1)}"], False
            return [ind + f"{self.pick(s.ints)} = {self.int_atom(s)} if {self.pred(s)} else {self.int_atom(s)}"], False
        if kind == "return":
            if depth == 0 or (s.loop_depth and not self.features.loop_returns):
                # a top-level return would only make the rest dead code
                return [ind + self.assign_array(s)], False
            return [ind + "return " + self.return_value(s)], True
        if kind in ("break", "continue"):
            if self.chance(0.4):
                return [ind + kind], True
            return [ind + f"if {self.pred(s)}:", ind + "    " + kind], False
        if kind == "call":
            helper = self.pick(self.helpers)
            target = f"{self.pick(s.arrays)}, {self.pick(s.ints)}"
            return [ind + f"{target} = {helper}({self.arr_expr(s, 1)}, {self.int_atom(s)}, m)"], False
        if kind == "if":
            return self.if_statement(s, depth, ind), False
        return self.loop(kind, s, depth, ind), False

    def return_value(self, s: _Scope) -> str:
        if s.arrays == ["a"]:  # inside a helper
            return f"{self.clipped(self.arr_expr(s))}, {self.int_expr(s)}"
        arrays = [self.clipped(self.arr_expr(s)) if self.chance(0.3) else a for a in s.arrays]
        ints = [self.int_expr(s) if self.chance(0.3) else k for k in s.ints]
        return ", ".join(arrays + ints)

    def if_statement(self, s: _Scope, depth: int, ind: str) -> list[str]:
        # Sometimes every branch ends by defining a new variable that is read after the `if`
        # (a branch that returns, breaks or continues leaves it undefined, as Python allows).
        fresh = self.new_name("v") if self.chance(0.25) else None
        inner = ind + "    "

        def branch():
            lines = self.block(s, depth + 1, inner)
            if fresh and not self.ended:
                lines.append(inner + f"{fresh} = {self.clipped(self.arr_expr(s))}")
            return lines

        lines = [ind + f"if {self.pred(s)}:"] + branch()
        for _ in range(self.draw(st.integers(0, 2))):
            lines += [ind + f"elif {self.pred(s)}:"] + branch()
        if fresh or self.chance(0.5):
            lines += [ind + "else:"] + branch()
        if fresh:
            s.array_reads.append(fresh)
        return lines

    def loop(self, kind: str, s: _Scope, depth: int, ind: str) -> list[str]:
        self.has_loops = True
        inner = ind + "    "
        if kind == "for_rows":
            row = self.new_name("r")
            body_scope = s.child(array_reads=s.array_reads + [row], loop_depth=s.loop_depth + 1)
            header = [ind + f"for {row} in m:"]
        else:
            counter = self.new_name("i")
            bound = self.pick(["0", "1", "3", f"{self.pick(s.ints)} % 4"] + (["n"] if "n" in s.int_reads else []))
            body_scope = s.child(int_reads=s.int_reads + [counter], loop_depth=s.loop_depth + 1)
            if kind == "for":
                header = [ind + f"for {counter} in range({bound}):"]
            else:
                cond = f"{counter} < {bound}"
                if self.chance(0.6):
                    cond = f"{cond} and {self.pred(s)}"
                header = [ind + f"{counter} = 0", ind + f"while {cond}:", inner + f"{counter} += 1"]
        lines = header + self.block(body_scope, depth + 1, inner)
        if self.chance(0.15):
            lines += [ind + "else:"] + self.block(s, depth + 1, inner)
        return lines

    def block(self, s: _Scope, depth: int, ind: str) -> list[str]:
        s = s.child(array_reads=list(s.array_reads))  # temps stay local to the block
        lines = []
        self.ended = False
        for _ in range(self.draw(st.integers(1, 3))):
            stmt, ends = self.statement(s, depth, ind)
            lines += stmt
            if ends or self.budget <= 0:
                break
        self.ended = ends  # the block ends in return / break / continue
        return lines

    # -- whole program ------------------------------------------------------------------
    def helper(self) -> list[str]:
        name = f"h{len(self.helpers)}"
        scope = _Scope(arrays=["a"], ints=["k"], array_reads=[], int_reads=[])
        saved, self.budget = self.budget, self.draw(st.integers(1, 5))
        body = self.block(scope, 1, "    ")
        self.budget = saved
        self.helpers.append(name)
        return [f"def {name}(a, k, m):"] + body + ["    return a, k", "", ""]

    def module(self) -> str:
        lines = ["import jax.numpy as jnp", "", ""]
        if self.features.calls:
            for _ in range(self.draw(st.integers(0, 2))):
                lines += self.helper()
        scope = _Scope(arrays=["a0", "a1"], ints=["k0", "k1"], array_reads=["x", "y"], int_reads=["n"])
        lines += ["def f(x, y, m, n):", "    a0 = x", "    a1 = y", "    k0 = n", f"    k1 = {self.draw(st.integers(0, 3))}"]
        while self.budget > 0:
            stmt, _ = self.statement(scope, 0, "    ")
            lines += stmt
        lines.append("    return a0, a1, k0, k1")
        return "\n".join(lines) + "\n"


def _small_ints(shape):
    size = int(np.prod(shape))
    return st.lists(st.integers(-3, 3), min_size=size, max_size=size).map(
        lambda v: np.asarray(v, np.float32).reshape(shape)
    )


@st.composite
def programs(draw, features: Features = Features()) -> GeneratedProgram:
    """A random well-formed program and its inputs (see the module docstring)."""
    gen = _Generator(draw, features)
    source = gen.module()
    return GeneratedProgram(
        source=source,
        x=draw(_small_ints((4,))),
        y=draw(_small_ints((4,))),
        m=draw(_small_ints((3, 4))),
        n=draw(st.integers(0, 3)),
        n_as_array=draw(st.booleans()),
        has_loops=gen.has_loops,
    )
