"""Rewrites `xs.append(v)` statements into assignments, so loops can carry the list, and
marks the receivers of other in-place changes for the runtime.

Before::

    outs.append(h)
    cache.update(k=v)
    t[i] = h

After::

    outs = jst.list_append(outs, v, 'outs')
    jst.in_place(cache, 'cache.update()').update(k=v)
    jst.in_place(t, 't[i] = ...', True)[i] = h

As an assignment, the list becomes a variable the if/loop transformers see written: a staged
loop with a static trip count turns the appended values into one stacked scan output, and a
staged `if` that appends on one side only is an error naming the list instead of a silent
unconditional append. `list_append` builds a new Python list (other objects get their own
`append` called), so two branches traced from the same state never share one list. Only
statements of the form `name.append(value)` are rewritten, and only where `name` is a local
the function assigns or one of its parameters (not a global or closure variable: rebinding
those would change what other code sees). A parameter's list grown in staged code is written
back into the caller's list object, as a local's is into the list from before.

Other methods that change their receiver in place (`extend`, `update`, `pop`, ...: see
`analysis.loop_bodies.MUTATORS`) run as they are on a receiver `jst.in_place` hands back:
while a staged side is traced, it records a list or dict from before the side so the change
is carried out of the `if` and written back, and refuses what cannot be put back (a set).
So does the container of an item written with a computed key (`t[i] = h`, `del d[k]`).
"""

from __future__ import annotations

import ast

from dy2st import ast_util
from dy2st.analysis import Fact, getanno
from dy2st.analysis import qual_names
from dy2st.analysis.loop_bodies import changes_receiver, item_targets
from dy2st.transformers import templates
from dy2st.transformers.base import StatementTransformer, copy_location_recursive


class ListAppendTransformer(StatementTransformer):
    """See the module docstring."""

    def __init__(self, ctx):
        super().__init__(ctx)
        self._locals: list[frozenset] = []

    def visit_FunctionDef(self, node):
        scope = getanno(node, Fact.SCOPE)
        self._locals.append((scope.bound | scope.params) - scope.globals - scope.nonlocals)
        self.generic_visit(node)
        self._locals.pop()
        return node

    def visit_Lambda(self, node):
        return node

    def visit_Expr(self, node):
        call = node.value
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "append"
            and isinstance(call.func.value, ast.Name)
            and len(call.args) == 1
            and not call.keywords
            and not isinstance(call.args[0], ast.Starred)
            and self._locals
            and call.func.value.id in self._locals[-1]
        ):
            return self.generic_visit(node)
        target = call.func.value.id
        return templates.replace(
            "target = jst.list_append(target, value, name)", target=target, jst=self.ctx.runtime, value=call.args[0],
            name=templates.constant(self.ctx.namer.display_name(target)),
        )


def _wrap_in_place_receivers(tree, runtime: str) -> None:
    """`recv.extend(v)` -> `jst.in_place(recv, 'recv.extend()').extend(v)`, for the methods that
    change their receiver in place (`loop_bodies.MUTATORS` as statements, `pop`-like ones
    anywhere): while a staged side is traced, the runtime records a list or dict from before
    it, so the change is carried and put back (see `runtime.writes.in_place`)."""
    statement_calls = set()
    calls = []
    for node in ast_util.walk(tree):
        if isinstance(node, ast.Expr):  # a node comes before its children
            statement_calls.add(id(node.value))
        elif isinstance(node, ast.Call) and changes_receiver(node, statement_calls):
            calls.append(node)
    for call in calls:
        receiver = call.func.value
        if isinstance(receiver, ast.Name) and receiver.id == runtime:
            continue
        what = templates.constant(f"{ast.unparse(receiver).strip()}.{call.func.attr}()")
        wrapped = templates.replace_as_expression("jst.in_place(receiver, what)", jst=runtime,
                                                  receiver=receiver, what=what)
        copy_location_recursive(wrapped, call)  # an error it raises names the user's line
        call.func.value = wrapped


def _wrap_item_containers(tree, runtime: str) -> None:
    """`t[i] = v` -> `jst.in_place(t, 't[i] = ...', True)[i] = v`, for an item written with a
    computed key or a slice (in a tuple target too) or deleted (`del d[k]`): no symbol names it
    for the if/loop transformers to carry, so the runtime records its container as for a
    method's receiver. (A constant key, `d['k'] = v`, is carried as a composite name.)"""
    items = []
    for node in ast_util.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            items += [t for t in item_targets(node) if qual_names.from_node(t) is None]
        elif isinstance(node, ast.Delete):
            items += [t for t in node.targets if isinstance(t, ast.Subscript)]
    for item in items:
        is_delete = isinstance(item.ctx, ast.Del)
        text = f"{'del ' if is_delete else ''}{ast.unparse(item).strip()}{'' if is_delete else ' = ...'}"
        wrapped = templates.replace_as_expression("jst.in_place(container, what, True)", jst=runtime,
                                                  container=item.value, what=templates.constant(text))
        copy_location_recursive(wrapped, item)
        item.value = wrapped


def transform(tree, ctx):
    tree = ListAppendTransformer(ctx).transform(tree)
    _wrap_in_place_receivers(tree, ctx.runtime)
    _wrap_item_containers(tree, ctx.runtime)
    return tree
