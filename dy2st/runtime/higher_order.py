"""Higher-order functions of JAX, Flax NNX and Equinox: which of their arguments are callables.

Converted code that hands a function to `jax.grad`, `jax.vmap`, `lax.scan`, `nnx.grad`,
`eqx.filter_vmap`, `jax.tree.map`, ... hands it over converted (`calls.convert_call` reads this
table), so a Python `if` on the traced arguments inside it becomes a `lax.cond` there too, as
it would if the user had decorated it. Under the transform the converted callable runs inline:
it is a Python function that JAX traces.

Before (`loss` is the user's, with `if pred.sum() > 0:` inside):
    jax.grad(loss)(w, x)                  # TracerBoolConversionError inside jax.grad
After:
    jst.convert_call(jax.grad)(loss)      # jax.grad(<loss converted>)

One table, in one place: `(module, name, slots)`; a slot is `(position, keyword, many)` where
`many` marks a sequence of callables (`lax.switch`'s branches). Modules are looked up in
`sys.modules` only (flax and equinox stay optional and are not imported here).
"""

from __future__ import annotations

import sys

_FUN = ((0, "fun", False),)
_F = ((0, "f", False),)
_SPEC = (
    ("jax", ("grad", "value_and_grad", "vmap", "jit", "checkpoint", "remat", "vjp", "jvp", "linearize",
             "hessian", "jacfwd", "jacrev", "named_call", "pmap", "eval_shape", "make_jaxpr"), _FUN),
    ("jax.lax", ("scan", "map"), _F),
    ("jax.lax", ("associative_scan",), ((0, "fn", False),)),
    ("jax.lax", ("fori_loop",), ((2, "body_fun", False),)),
    ("jax.lax", ("while_loop",), ((0, "cond_fun", False), (1, "body_fun", False))),
    ("jax.lax", ("cond",), ((1, "true_fun", False), (2, "false_fun", False))),
    ("jax.lax", ("switch",), ((1, "branches", True),)),
    ("jax.tree", ("map",), _F),
    ("jax.tree_util", ("tree_map",), _F),
    ("flax.nnx", ("grad", "value_and_grad", "vmap", "scan", "remat", "pmap", "eval_shape"), _F),
    ("flax.nnx", ("jit",), _FUN),
    ("flax.nnx", ("cond",), ((1, "true_fun", False), (2, "false_fun", False))),
    ("flax.nnx", ("fori_loop",), ((2, "body_fun", False),)),
    ("flax.nnx", ("while_loop",), ((0, "cond_fun", False), (1, "body_fun", False))),
    ("flax.nnx", ("switch",), ((1, "branches", True),)),
    ("equinox", ("filter_grad", "filter_value_and_grad", "filter_vmap", "filter_jit", "filter_checkpoint",
                 "filter_pmap", "filter_eval_shape"), _FUN),
)

_table: dict = {}  # id(function) -> (function, slots)
_pending = {module for module, _, _ in _SPEC}  # modules not imported when the table was last filled


def callable_slots(fn) -> tuple | None:
    """The slots of `fn`'s callable arguments when `fn` is one of the table's functions."""
    if _pending and any(module in sys.modules for module in _pending):
        _fill()
    entry = _table.get(id(fn))
    return entry[1] if entry is not None and entry[0] is fn else None


def _fill() -> None:
    for module_name, names, slots in _SPEC:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        _pending.discard(module_name)
        for name in names:
            fn = getattr(module, name, None)
            if fn is not None:
                _table[id(fn)] = (fn, slots)


def convert_arguments(args: tuple, kwargs: dict, slots, convert) -> tuple[tuple, dict]:
    """`(args, kwargs)` with the callables in `slots` replaced by `convert(callable)`."""
    args = list(args)
    for position, keyword, many in slots:
        if position < len(args):
            args[position] = _converted(args[position], many, convert)
        elif keyword in kwargs:
            kwargs = {**kwargs, keyword: _converted(kwargs[keyword], many, convert)}
    return tuple(args), kwargs


def _converted(value, many: bool, convert):
    if many:
        return type(value)(_converted(v, False, convert) for v in value) if isinstance(value, (list, tuple)) else value
    return convert(value) if callable(value) else value
