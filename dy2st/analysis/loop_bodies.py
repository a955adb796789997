"""Which loop bodies only Python can run faithfully, and why: read on the user's own code.

A staged loop (`lax.scan` / `lax.while_loop`) runs its body ONCE while tracing, on abstract
values. Python effects in the body would then happen once instead of once per iteration::

    for i in range(3):
        fs.append(lambda: x * i)     # closures: each must see the last `i`, as in Python
        v = next(it)                 # an iterator advanced once, not three times
        seq.append(seq[-1] * 2)      # a list read while the loop grows it
        cache.pop()                  # an object the caller sees, changed in place

`mark(function_def)` runs before any rewrite (generated code adds lambdas and functions of its
own) and sets `Fact.PYTHON_BODY` on each such `for`/`while`: a `PythonBody` saying why. The loop
transformer passes it to the runtime, which unrolls a loop with a static trip count (the body
then runs once per iteration, exactly as eager) and refuses to stage one whose trip count is
traced when the effect would be lost (`PythonBody.refuse_staged`).
"""

from __future__ import annotations

import dataclasses

import gast

from dy2st import ast_util
from dy2st.analysis.anno import Fact, setanno

# Methods that change their receiver in place (lists, dicts, sets, deques).
MUTATORS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem",
    "sort", "reverse", "add", "discard", "appendleft", "extendleft", "popleft", "rotate",
})
_NESTED_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)
_ITERATOR_BUILTINS = frozenset({"next"})


@dataclasses.dataclass(frozen=True)
class PythonBody:
    """Why a loop body must run once per iteration in Python.

    reason: a phrase for logs and errors ("the body calls next()").
    refuse_staged: whether staging the loop (a traced trip count) would lose a Python effect
      the caller or later code sees, so it must be refused rather than staged.
    makes_closures: whether the body defines functions or lambdas. They must see the loop's
      variables late, as in Python (the value after the last iteration), so the loop carries
      every variable its body writes in the enclosing function, not in the body's own scope.
    """

    reason: str
    refuse_staged: bool
    makes_closures: bool = False


def mark(function_def) -> None:
    """Set `Fact.PYTHON_BODY` on every loop of `function_def` whose body needs Python."""
    local_names = _assigned_names(function_def) - _declared_outside(function_def)
    for node in ast_util.walk(function_def):
        if isinstance(node, (gast.For, gast.While)):
            found = python_body(node.body, local_names)
            if found is not None:
                setanno(node, Fact.PYTHON_BODY, found)


def python_body(body: list, local_names: frozenset) -> PythonBody | None:
    """The first reason (most serious first) why `body` must run per iteration, or None."""
    appended, mutated_outside, closures, iterators = set(), [], [], []
    for node in _walk_statements(body):
        if isinstance(node, _NESTED_SCOPES):
            closures.append(node)
        elif isinstance(node, gast.Call):
            func = node.func
            if isinstance(func, gast.Name) and func.id in _ITERATOR_BUILTINS:
                iterators.append(func.id)
            elif isinstance(func, gast.Attribute) and func.attr in MUTATORS:
                root = _root_name(func.value)
                if isinstance(func.value, gast.Name) and func.attr == "append" and root in local_names:
                    appended.add(root)
                elif root is None or root not in local_names:
                    mutated_outside.append(f"{_describe(func.value)}.{func.attr}()")
    makes_closures = bool(closures)
    if iterators:
        return PythonBody("the body calls next() on an iterator", True, makes_closures)
    if mutated_outside:
        return PythonBody(f"the body changes an object from outside the loop in place ({mutated_outside[0]})",
                          True, makes_closures)
    read_while_growing = sorted(appended & _reads_besides_append(body, appended))
    if read_while_growing:
        return PythonBody(f"the body reads the list '{read_while_growing[0]}' while appending to it",
                          False, makes_closures)
    if closures:
        return PythonBody("the body defines a function or lambda (closures see each iteration's values)",
                          False, makes_closures)
    return None


def _walk_statements(body: list):
    """Every node of `body`, entering nested functions (their calls run in the loop too)."""
    for stmt in body:
        yield from ast_util.walk(stmt)


def _reads_besides_append(body: list, names: set) -> set:
    """Names of `names` loaded in `body` anywhere but as the receiver of `.append(...)`."""
    receivers = set()
    for node in _walk_statements(body):
        if (isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and node.func.attr == "append"
                and isinstance(node.func.value, gast.Name)):
            receivers.add(id(node.func.value))
    return {n.id for n in _walk_statements(body)
            if isinstance(n, gast.Name) and n.id in names and isinstance(n.ctx, gast.Load) and id(n) not in receivers}


def _root_name(expr) -> str | None:
    while isinstance(expr, (gast.Attribute, gast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, gast.Name) else None


def _describe(expr) -> str:
    return gast.unparse(expr).strip()


def _assigned_names(function_def) -> frozenset:
    """Names the function itself binds (not its parameters): its own local variables."""
    names = set()
    for node in _walk_own_scope(function_def.body):
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Del)):
            names.add(node.id)
    return frozenset(names)


def _declared_outside(function_def) -> frozenset:
    names = set()
    for node in _walk_own_scope(function_def.body):
        if isinstance(node, (gast.Global, gast.Nonlocal)):
            names.update(node.names)
    return frozenset(names)


def _walk_own_scope(body: list):
    """Nodes of `body` without entering nested functions, lambdas or classes."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _NESTED_SCOPES):
            continue
        for child in gast.iter_child_nodes(node):
            stack.append(child)
