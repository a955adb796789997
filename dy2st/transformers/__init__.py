"""The ordered transformer chain. The order lives here, one reason per step.

Each step is a module with `transform(tree, ctx)`. Steps that read analysis facts declare
`needs_analysis`; the pipeline re-runs `dy2st.analysis.resolve` right before them, because
every earlier rewrite makes facts stale.
"""

from __future__ import annotations

import ast
import dataclasses
from types import ModuleType

from dy2st import analysis, ast_util
from dy2st.analysis import loop_bodies
from dy2st.transformers import (
    annotated_assignments,
    asserts,
    break_statements,
    call_trees,
    conditional_expressions,
    continue_statements,
    dead_deletes,
    ifelse,
    lists,
    logical_expressions,
    loops,
    return_statements,
    scoped_writes,
    super_calls,
    try_blocks,
    unbound_reads,
    walrus_conditions,
)


@dataclasses.dataclass(frozen=True)
class Step:
    """One rewrite. `triggers`: node types (or attribute names, as strings) without which the
    step has nothing to do; the pipeline then skips it and its analysis (empty: always runs).
    `creates`: the triggers of any step that this one may add to the tree, so the pipeline
    knows what the tree holds without walking it again after each step (a test checks the
    list against every step's output)."""

    module: ModuleType
    needs_analysis: tuple  # the analyses to re-run right before it (`dy2st.analysis.SCOPES`, ...)
    why: str
    triggers: tuple = ()
    creates: tuple = ()
    source_only: bool = False  # only the user's code counts for `triggers`, not what steps add

    @property
    def enters_generators(self) -> bool:
        """Whether the step rewrites generators too (their control flow runs as Python)."""
        return any(getattr(v, "enters_generators", False) for v in vars(self.module).values() if isinstance(v, type))

    @property
    def name(self) -> str:
        return self.module.__name__.rsplit(".", 1)[-1]


PIPELINE: tuple[Step, ...] = (
    Step(super_calls, (),
         "First, on the user's code: a method's zero-argument `super()` is spelled out before any "
         "step moves it into a generated function (where it would find no arguments).",
         triggers=("super()",)),
    Step(annotated_assignments, (),
         "On the user's code, before any step makes functions of its blocks: `y: T = v` becomes "
         "`y = v` (Python does not evaluate a local's annotation), so later steps may declare `y` nonlocal.",
         triggers=(ast.AnnAssign,), creates=(ast.Assign, ast.Pass), source_only=True),
    Step(walrus_conditions, (),
         "Before break_statements and the loops step: a `while` condition that binds a name with "
         "`:=` moves into the body as `if not test: break`, so the name is the function's own.",
         triggers=(ast.NamedExpr,), creates=(ast.If, ast.UnaryOp, ast.Break), source_only=True),
    Step(dead_deletes, analysis.LIVENESS,
         "On the user's code, before any step adds reads: a `del name` in a loop that no path "
         "reads again is dropped (a staged loop leaves every variable defined); one still read is refused.",
         triggers=(ast.Delete,), creates=(ast.Pass,), source_only=True),
    Step(unbound_reads, analysis.DEFINITIONS,
         "On the user's code, before any step adds reads or makes functions of its blocks: each "
         "read of a local the analysis cannot show bound there becomes `jst.ld(name)`, which checks "
         "where a staged `if` or loop left it unbound (DEFINED_IN is of the user's statements).",
         triggers=(ast.If, ast.For, ast.While), creates=(ast.Assign,), source_only=True),
    Step(try_blocks, (),
         "Before anything adds `if`s of its own or turns the user's into branch functions: a `try` "
         "whose `finally` jumps holds the exception it discards in a flag.",
         triggers=(ast.Try,)),
    Step(return_statements, (),
         "First: early returns become flags and `break`s, so later steps see single-exit code.",
         creates=(ast.If, ast.UnaryOp, ast.Break)),
    Step(break_statements, (),
         "After return (whose returns in loops became breaks): every break becomes a flag the loop "
         "condition checks, and loop `else` blocks move after their loop, before ifs become functions.",
         triggers=(ast.Break, ast.For, ast.While),
         creates=(ast.If, ast.UnaryOp, ast.BoolOp)),
    Step(continue_statements, (),
         "Like break: a bare `continue` inside an `if` would not compile once the if is a function.",
         triggers=(ast.Continue,),
         creates=(ast.If, ast.UnaryOp)),
    Step(lists, analysis.SCOPES,
         "Before if/loops: `xs.append(v)` becomes an assignment, so branches and loops see `xs` "
         "written and carry it (reads SCOPE to rewrite only local lists).",
         triggers=("append", *loop_bodies.MUTATORS, *loop_bodies.RETURNING_MUTATORS, ast_util.ITEM_WRITE)),
    Step(logical_expressions, (),
         "Before if/else: the `not do_return` guards and user and/or/not become operators that "
         "short-circuit on Python values and stage on traced ones.",
         triggers=(ast.BoolOp, ast.UnaryOp, ast.Compare)),
    Step(conditional_expressions, (),
         "Ternaries are expressions; rewriting them before statements keeps if/else simple.",
         triggers=(ast.IfExp,)),
    Step(ifelse, analysis.LIVENESS,
         "After the flags exist: reads liveness to choose the variables each branch carries.",
         triggers=(ast.If,),
         creates=(ast.Nonlocal, ast.Global)),
    Step(loops, analysis.ALL,
         "After if/else, so a loop body's ifs are already functions and their state assignments "
         "count as writes; reads liveness to choose exactly the loop-carried variables.",
         triggers=(ast.For, ast.While),
         creates=(ast.Nonlocal, ast.Global)),
    # -- calls, asserts, print and builtins come last (DESIGN): they rewrite expressions only.
    Step(scoped_writes, (),
         "After if/else (and loops) re-declared global/nonlocal names in branch functions: "
         "checks each user write to them, wherever it now sits. Only the user's own `global` or "
         "`nonlocal` makes a name to check (the branch functions' re-declare the function's "
         "locals), so only they trigger it.",
         triggers=(ast.Global, ast.Nonlocal), source_only=True),
    Step(asserts, (),
         "After control flow, so an assert inside a branch is checked in that branch; before "
         "call_trees, so the calls in its test and message get converted.",
         triggers=(ast.Assert,)),
    Step(call_trees, (),
         "Last: sees every user call (including print and builtins) and none of the runtime "
         "operators earlier steps generated."),
)
