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

import ast
import copy
import dataclasses

from dy2st import ast_util
from dy2st.analysis import qual_names
from dy2st.analysis.activity import free_reads
from dy2st.analysis.anno import Fact, setanno
# Methods that change their receiver in place and return None (lists, dicts, sets, deques):
# a call of one is a mutation only as a statement (`tx.update(g, s)` of optax returns a value
# and changes nothing). `pop`, `popitem` and `setdefault` change it and return a value.
from dy2st.runtime.values import MUTATORS, RETURNING_MUTATORS

_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_ITERATOR_BUILTINS = frozenset({"next"})


def changes_receiver(call, statement_calls: set) -> bool:
    """Whether `call` is a method call that changes its receiver in place: a `MUTATORS` method
    whose value is dropped (`id(call)` in `statement_calls`, the values of `Expr` statements),
    or a `RETURNING_MUTATORS` one anywhere."""
    func = call.func
    return isinstance(func, ast.Attribute) and (
        func.attr in RETURNING_MUTATORS or (func.attr in MUTATORS and id(call) in statement_calls))


@dataclasses.dataclass(frozen=True)
class PythonBody:
    """Why a loop body (or the branches of an `if`) must run in Python to keep eager's meaning.

    reason: a phrase for logs and errors ("the body calls next()").
    refuse_staged: whether staging the loop (a traced trip count) would lose a Python effect
      the caller or later code sees, so it must be refused rather than staged. A staged `if`
      with such an effect is always refused: tracing runs both branches.
    makes_closures: whether the body defines functions or lambdas. They must see the loop's
      variables late, as in Python (the value after the last iteration), so the loop carries
      every variable its body writes in the enclosing function, not in the body's own scope.
    """

    reason: str
    refuse_staged: bool
    makes_closures: bool = False


@dataclasses.dataclass(frozen=True)
class EffectScope:
    """What `branch_effects` needs to know of the converted function: its local names and its
    nested functions that write `nonlocal`/`global` names (name -> the names written)."""

    local_names: frozenset
    writers: dict
    # Locals that the user's own nested functions and lambdas read: a closure made anywhere may
    # be called after any statement, so a write to one of them is always live (it must reach
    # the function's cell even inside a generated branch or loop body).
    captured: frozenset = frozenset()
    # Local iterators staged code may take over (`_FunctionWalk.held_iterators`): a `next()` of
    # one in a staged `if` is left to the runtime, which carries its position out of the cond.
    held_iterators: frozenset = frozenset()


def mark(function_def) -> EffectScope:
    """Set `Fact.PYTHON_BODY` on every loop, `if` and ternary of `function_def` whose body or
    branches need Python; returns the scope facts, for the guards later steps make
    (`mark_guard`)."""
    walk = _FunctionWalk(function_def)
    local_names = walk.own_locals() | _param_names(function_def)
    writers = _scope_writers(walk.nested)
    held = walk.held_iterators()
    suspects = walk.suspects(writers)
    for node in walk.decisions:
        if id(node) not in suspects:
            continue  # nothing in it could be an effect: the search below would find none
        if isinstance(node, (ast.For, ast.While)):
            found = python_body(node.body, local_names, writers)
        elif isinstance(node, ast.If):
            found = branch_effects(node.body + node.orelse, local_names, rewritten_appends=True, writers=writers,
                                   held=held)
        else:
            found = branch_effects([node.body, node.orelse], local_names, rewritten_appends=False, writers=writers)
        if found is not None:
            setanno(node, Fact.PYTHON_BODY, found)
    for loop in walk.held_iterator_loops(held):
        setanno(loop, Fact.HELD_ITERATOR, True)
    for node in walk.decisions:
        if isinstance(node, ast.While):
            bound = counter_bound(node)
            if bound is not None:
                setanno(node, Fact.COUNTER_BOUND, bound)
    return EffectScope(local_names, writers, _captured(walk.nested, local_names), held)


_DECISIONS = (ast.For, ast.While, ast.If, ast.IfExp)
_EFFECT_METHODS = MUTATORS | RETURNING_MUTATORS


class _FunctionWalk:
    """One walk of a function for `mark`: its loops, ifs and ternaries (`decisions`), its nested
    functions and lambdas, the names its own scope binds, and which decisions hold a node that
    could be a Python effect (`_effects` looks for the same kinds: a call of `next`, of a
    mutating method or of a name, a closure, an item assignment, a list grown by `+`), so that the search for effects
    runs only on those; most functions have ifs and loops but no such node in them."""

    def __init__(self, function_def):
        self.decisions: list = []
        self.nested: list = []
        self._parameters = _param_names(function_def)
        self._bound: set = set()
        self._declared: set = set()
        self._suspects: set = set()  # ids of decisions holding a possible effect
        self._named_calls: list = []  # (name, decisions around the call): effects if the name writes
        self._names: dict = {}  # name -> its Name nodes in the function's own scope
        self._nested_names: set = set()  # names that nested functions, lambdas and classes use
        self._next_arguments: set = set()  # ids of the Names that are `next(name, ...)`'s iterator
        self._iterator_targets: set = set()  # ids of the Names that are the one target of `name = iter(...)`
        self._loops_over_names: list = []  # the `for` loops whose iterable is a Name
        stack = [(stmt, (), True) for stmt in reversed(function_def.body)]
        while stack:
            node, around, own = stack.pop()
            kind = type(node)
            if kind in _DECISIONS:
                self.decisions.append(node)
                around = around + (node,)
                if kind is ast.For and type(node.iter) is ast.Name:
                    self._loops_over_names.append(node)
            elif kind in _NESTED_SCOPES:
                if kind is ast.FunctionDef or kind is ast.Lambda:
                    self.nested.append(node)
                self._suspect(around)
                own = False
            elif kind is ast.Call:
                self._call(node.func, around)
                if type(node.func) is ast.Name and node.func.id in _ITERATOR_BUILTINS and node.args:
                    self._next_arguments.add(id(node.args[0]))
            elif kind is ast.Assign or kind is ast.AugAssign or kind is ast.AnnAssign:
                if kind is ast.Assign and len(node.targets) == 1 and _makes_iterator(node.value):
                    self._iterator_targets.add(id(node.targets[0]))
                if any(True for _ in item_targets(node)) or _grown_by_concatenation(node) is not None:
                    self._suspect(around)
            elif kind is ast.Delete:
                if any(type(t) is not ast.Name for t in node.targets):
                    self._suspect(around)
            elif kind is ast.Name:
                if not own:
                    self._nested_names.add(node.id)
                    continue
                self._names.setdefault(node.id, []).append(node)
                if type(node.ctx) is not ast.Load:
                    self._bound.add(node.id)
                continue
            elif own and (kind is ast.Global or kind is ast.Nonlocal):
                self._declared.update(node.names)
            for field in reversed(node._fields):
                value = getattr(node, field, None)
                if type(value) is list:
                    stack.extend((item, around, own) for item in reversed(value) if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append((value, around, own))

    def _call(self, func, around: tuple) -> None:
        if not around:
            return
        if type(func) is ast.Name:
            if func.id in _ITERATOR_BUILTINS:
                self._suspect(around)
            else:
                self._named_calls.append((func.id, around))
        elif type(func) is ast.Attribute and func.attr in _EFFECT_METHODS:
            self._suspect(around)

    def _suspect(self, around: tuple) -> None:
        self._suspects.update(map(id, around))

    def suspects(self, writers: dict) -> set:
        """Ids of the decisions that may hold a Python effect, given the nested functions that
        write `nonlocal`/`global` names (`writers`)."""
        for name, around in self._named_calls:
            if name in writers:
                self._suspect(around)
        return self._suspects

    def held_iterators(self) -> frozenset:
        """The local names the function binds only as `it = iter(...)` and uses only as
        `next(it, ...)`'s iterator or a `for` loop's: where `iter` made a new iterator
        (`runtime.writes.note_iterator`), no other name, object or caller can see it, so staged
        code may take over its position (`runtime.writes.HeldPosition`): a loop over it whose
        `break` is traced, a `next()` in a staged `if`."""
        local = self.own_locals() - self._parameters
        if "next" in local or "iter" in local:
            return frozenset()
        return frozenset(name for name in local - self._nested_names
                         if any(type(n.ctx) is ast.Store for n in self._names.get(name, ()))
                         and all(self._held_use(n) for n in self._names[name]))

    def held_iterator_loops(self, held: frozenset) -> list:
        """The `for` loops over one of the `held` names (`held_iterators`)."""
        return [loop for loop in self._loops_over_names if loop.iter.id in held]

    def _held_use(self, node) -> bool:
        if type(node.ctx) is ast.Store:
            return id(node) in self._iterator_targets
        if type(node.ctx) is ast.Del:
            return True
        return id(node) in self._next_arguments or any(node is other.iter for other in self._loops_over_names)

    def own_locals(self) -> frozenset:
        """Names the function itself binds (not its parameters, nor names it declares `global`
        or `nonlocal`): its own local variables."""
        return frozenset(self._bound - self._declared)


def _makes_iterator(value) -> bool:
    """`iter(xs)`: a call of the builtin by name with one argument."""
    return (type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "iter"
            and len(value.args) == 1 and not value.keywords and type(value.args[0]) is not ast.Starred)


def _captured(nested: list, local_names: frozenset) -> frozenset:
    names = set()
    for node in nested:
        names.update(s.base for s in free_reads(node))
    return frozenset(names) & local_names


def mark_if(node, scope: EffectScope | None) -> None:
    """Set `Fact.PYTHON_BODY` anew on an `if` whose sides a rewrite gave the code after it
    (`jump_flags._lift`): staged, it traces that code too."""
    if scope is None:
        return
    found = branch_effects(node.body + node.orelse, scope.local_names, rewritten_appends=True, writers=scope.writers,
                           held=scope.held_iterators)
    if found is not None:
        setanno(node, Fact.PYTHON_BODY, found)


def mark_guard(guard, scope: EffectScope | None) -> None:
    """Set `Fact.PYTHON_BODY` on a guard `if not <flag>: <rest>` made by the return, break and
    continue steps: staged (a traced flag), it traces the rest of the block whether or not the
    jump happened, so the rest's Python effects must be refused as a user's `if` would be."""
    if scope is None:
        return
    found = branch_effects(guard.body, scope.local_names, rewritten_appends=True, writers=scope.writers,
                           held=scope.held_iterators)
    if found is not None:
        setanno(guard, Fact.PYTHON_BODY, found)


@dataclasses.dataclass
class _Effects:
    """The Python effects found in some code."""

    appended: set = dataclasses.field(default_factory=set)  # local lists `name.append(...)`ed
    mutated: list = dataclasses.field(default_factory=list)  # other in-place changes, as text
    # those the runtime records in a staged `if` (`jst.in_place`): by a method (`d.update()`), by item (`d[k] = v`)
    recorded: list = dataclasses.field(default_factory=list)
    mutated_roots: set = dataclasses.field(default_factory=set)  # the local names those change
    mutated_outside: list = dataclasses.field(default_factory=list)  # of objects not local
    writer_calls: list = dataclasses.field(default_factory=list)  # calls of nested functions that write nonlocals
    closures: int = 0
    iterators: int = 0


def _scope_writers(nested: list) -> dict:
    """The nested functions (of those in `nested`) that declare `nonlocal`/`global` names:
    calling one writes those names, an effect a staged loop or branch would run the wrong number
    of times."""
    writers = {}
    for node in nested:
        if isinstance(node, ast.FunctionDef):
            declared = [n for stmt in _walk_own_scope(node.body) if isinstance(stmt, (ast.Nonlocal, ast.Global))
                        for n in stmt.names]
            if declared:
                writers[node.name] = declared
    return writers


def _effects(nodes: list, local_names: frozenset, rewritten_appends: bool, writers=None,
             held: frozenset = frozenset()) -> _Effects:
    """`rewritten_appends`: statements `name.append(v)` on a local list are rewritten into
    assignments by transformers.lists (not in-place changes): count them in `appended`.
    `held`: local iterators whose `next()` the runtime carries (not counted)."""
    found = _Effects()
    statement_calls = set()  # calls whose value is dropped (`xs.sort()`), filled as their statement is passed
    for node in _walk_statements(nodes):
        if isinstance(node, ast.Expr):  # a node comes before its children
            statement_calls.add(id(node.value))
        grown = _grown_by_concatenation(node)
        if grown is not None and grown in local_names:
            found.appended.add(grown)  # `log += [v]`, `log = log + [v]`: grows as an append does
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for target in item_targets(node):
                if qual_names.from_node(target) is None:
                    # `xs[i] = v` with a computed key (or a slice): no symbol to carry. A staged
                    # `if` leaves it to the runtime (`jst.in_place` records the container, see
                    # transformers.lists); a loop body changing it runs as Python.
                    text = f"{ast.unparse(target).strip()} = ..."
                    found.mutated.append(text)
                    found.recorded.append(text)
                    found.mutated_outside.append(text)  # cannot be carried by a loop, whoever owns it
        if isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, (ast.Subscript, ast.Attribute)):
                    # `del xs[0]`, `del d[k]`, `del obj.a`: an in-place change of the receiver, as `xs.pop(0)`
                    root = _root_name(target.value)
                    text = f"del {ast.unparse(target).strip()}"
                    found.mutated.append(text)
                    if isinstance(target, ast.Subscript):
                        found.recorded.append(text)  # its container recorded by `jst.in_place`, as above
                    if root is not None and root in local_names:
                        found.mutated_roots.add(root)
                    else:
                        found.mutated_outside.append(text)
        if isinstance(node, _NESTED_SCOPES):
            found.closures += 1
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _ITERATOR_BUILTINS:
                if not (node.args and type(node.args[0]) is ast.Name and node.args[0].id in held):
                    found.iterators += 1
            elif isinstance(func, ast.Name) and writers and func.id in writers:
                text = f"{func.id}(), which writes {', '.join(repr(n) for n in writers[func.id])} (nonlocal/global)"
                found.writer_calls.append(text)
                found.mutated.append(text)
                found.mutated_outside.append(text)
            elif changes_receiver(node, statement_calls):
                root = _root_name(func.value)
                local = root is not None and root in local_names
                if rewritten_appends and local and func.attr == "append" and isinstance(func.value, ast.Name):
                    found.appended.add(root)
                    continue
                text = f"{_describe(func.value)}.{func.attr}()"
                found.mutated.append(text)
                found.recorded.append(text)
                if not local:
                    found.mutated_outside.append(text)
                else:
                    found.mutated_roots.add(root)
    return found


def python_body(body: list, local_names: frozenset, writers=None) -> PythonBody | None:
    """The first reason (most serious first) why a loop body must run per iteration, or None."""
    found = _effects(body, local_names, rewritten_appends=True, writers=writers)
    makes_closures = found.closures > 0
    if found.iterators:
        return PythonBody("the body calls next() on an iterator", True, makes_closures)
    if found.mutated_outside:
        return PythonBody(f"the body changes an object from outside the loop in place ({found.mutated_outside[0]})",
                          True, makes_closures)
    if found.mutated:
        # A list the body rebinds is loop state: its value after each iteration, changes
        # included, is carried. One made before the loop and only changed in place is not
        # carried, so a staged body would change it once, while tracing.
        kept = sorted(found.mutated_roots - _stored_names(body))
        reason = f"the body changes a value in place ({found.mutated[0]})"
        if kept:  # (a list, a dict or an object: the analysis cannot tell which)
            reason = f"the body changes '{kept[0]}', made before the loop, in place ({found.mutated[0]})"
        return PythonBody(reason, bool(kept), makes_closures)
    read_while_growing = sorted(found.appended & _reads_besides_append(body, found.appended))
    if read_while_growing:
        return PythonBody(f"the body reads the list '{read_while_growing[0]}' while appending to it",
                          False, makes_closures)
    if makes_closures:
        return PythonBody("the body defines a function or lambda (closures see each iteration's values)",
                          False, makes_closures)
    return None


def branch_effects(branches: list, local_names: frozenset, rewritten_appends: bool, writers=None,
                   held: frozenset = frozenset()) -> PythonBody | None:
    """Why the branches of an `if` (or a ternary) cannot both be traced, or None.

    A staged `if` traces both branches, so an in-place change or a `next()` in either would
    happen whichever branch the data picks. A method changing its receiver (`log.extend(v)`,
    `d.update(...)`, `xs.pop()`) or an item written with a computed key (`t[i] = v`, `del d[k]`)
    is left to the runtime in an `if` statement: the container is recorded and put back after
    each side, the change carried (`runtime.writes.in_place`)."""
    found = _effects(branches, local_names, rewritten_appends, writers, held)
    if found.iterators:
        return PythonBody("a branch calls next() on an iterator", True)
    others = [m for m in found.mutated if m not in found.recorded] if rewritten_appends else found.mutated
    if others:
        if others[0] in found.writer_calls:
            return PythonBody(f"a branch calls {others[0]}", True)
        return PythonBody(f"a branch changes a list or dict in place ({others[0]})", True)
    return None


def item_targets(assignment):
    """The items an assignment (or augmented / annotated one) writes: each `xs[k]` among its
    targets, also inside tuple and starred targets (`xs[i], xs[j] = xs[j], xs[i]`)."""
    targets = assignment.targets if isinstance(assignment, ast.Assign) else [assignment.target]
    stack = list(targets)
    while stack:
        target = stack.pop()
        if isinstance(target, ast.Subscript):
            yield target
        elif isinstance(target, (ast.Tuple, ast.List)):
            stack.extend(target.elts)
        elif isinstance(target, ast.Starred):
            stack.append(target.value)


def _walk_statements(body: list):
    """Every node of `body` (statements or expressions), entering nested functions: their
    calls run in the loop too."""
    for stmt in body:
        yield from ast_util.walk(stmt)


def _stored_names(body: list) -> set:
    """Names (re)bound anywhere in `body`."""
    return {n.id for n in _walk_statements(body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _grown_by_concatenation(node) -> str | None:
    """The list variable a statement grows by a list display (`log += [v]`, `log = log + [v]`),
    or None. (A staged loop carries it as it carries `log.append(v)`: its items are stacked.)"""
    if (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name)
            and isinstance(node.value, ast.List)):
        return node.target.id
    if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add)
            and isinstance(node.value.left, ast.Name) and node.value.left.id == node.targets[0].id
            and isinstance(node.value.right, ast.List)):
        return node.targets[0].id
    return None


def _reads_besides_append(body: list, names: set) -> set:
    """Names of `names` loaded in `body` anywhere but as the receiver of `.append(...)` or the
    list a concatenation grows (`log = log + [v]`)."""
    receivers = set()
    for node in _walk_statements(body):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                and isinstance(node.func.value, ast.Name)):
            receivers.add(id(node.func.value))
        elif _grown_by_concatenation(node) is not None and isinstance(node, ast.Assign):
            receivers.add(id(node.value.left))
    return {n.id for n in _walk_statements(body)
            if isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load) and id(n) not in receivers}


def _root_name(expr) -> str | None:
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _describe(expr) -> str:
    return ast.unparse(expr).strip()


def _param_names(function_def) -> frozenset:
    """The function's parameters: its locals too (a list argument appended to is rewritten as
    a local's is; the call writes its items back to the caller's list)."""
    args = function_def.args
    params = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a is not None]
    return frozenset(p.arg for p in params)


def _walk_own_scope(body: list):
    """Nodes of `body` without entering nested functions, lambdas or classes (in no set order)."""
    return ast_util.walk_scope(body, _NESTED_SCOPES)


def counter_bound(node: ast.While):
    """`N - i` (`N - i + 1` for `<=`) where the loop's condition is `i < N`, alone or a conjunct
    of an `and` (`err > tol and i < max_iter`), its body steps `i += 1` once at its top level
    and assigns neither name anywhere else, and `N` is a name or a number: the iterations left,
    a bound reverse-mode AD can scan (`loop_staging.Loop.counter_bound`). None otherwise. Read on the user's code,
    before rewrites (a `break` becomes a flag guarding the rest; a `continue`, which would skip the
    step, is not allowed)."""
    for test in _conjuncts(node.test):
        found = _counter_test(test)
        if found is None:
            continue
        counter, limit, inclusive = found
        steps = [s for s in node.body if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name)
                 and s.target.id == counter and isinstance(s.op, ast.Add)
                 and isinstance(s.value, ast.Constant) and s.value.value == 1 and type(s.value.value) is int]
        names = {counter} | ({limit.id} if isinstance(limit, ast.Name) else set())
        if len(steps) != 1 or _assigned(node.body, names, steps[0]) or ast_util.jumps_out(node.body, returns=False, jump_kinds=(ast.Continue,)):
            continue
        left = ast.BinOp(left=copy.deepcopy(limit), op=ast.Sub(), right=ast.Name(id=counter, ctx=ast.Load()))
        if inclusive:
            left = ast.BinOp(left=left, op=ast.Add(), right=ast.Constant(1))
        for sub in ast.walk(left):  # (each at the loop's line: generated code is located)
            ast.copy_location(sub, node)
        return left
    return None


def _conjuncts(test) -> list:
    """The operands of an `and`, as written or as `logical_expressions` made it
    (`jst.convert_and(lambda: a, lambda: b)`)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [c for value in test.values for c in _conjuncts(value)]
    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "convert_and"
            and all(isinstance(a, ast.Lambda) for a in test.args)):
        return [c for thunk in test.args for c in _conjuncts(thunk.body)]
    return [test]


def _counter_test(test):
    """`(counter, limit, inclusive)` for `i < N`, `i <= N`, `N > i`, `N >= i` of a name and a name
    or an int; None otherwise."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Gt, ast.GtE)):
        left, right, op = right, left, ast.Lt() if isinstance(op, ast.Gt) else ast.LtE()
    if not isinstance(op, (ast.Lt, ast.LtE)) or not isinstance(left, ast.Name):
        return None
    if not (isinstance(right, ast.Name) or (isinstance(right, ast.Constant) and type(right.value) is int)):
        return None
    if isinstance(right, ast.Name) and right.id == left.id:
        return None
    return left.id, right, isinstance(op, ast.LtE)


def _assigned(body, names: set, step) -> bool:
    """Whether a statement of `body` other than `step` assigns (or declares global/nonlocal) one
    of `names`, anywhere in it."""
    for stmt in body:
        for sub in ast.walk(stmt):
            if sub is step:
                continue
            if isinstance(sub, ast.Name) and sub.id in names and not isinstance(sub.ctx, ast.Load) \
                    and not (isinstance(stmt, ast.AugAssign) and stmt is step):
                return True
            if isinstance(sub, (ast.Global, ast.Nonlocal)) and names.intersection(sub.names):
                return True
    return False

