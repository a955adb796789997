"""Helpers for differential tests: eager == to_static == jax.jit(to_static), gradients too."""

from __future__ import annotations

import contextlib
import io

import jax
import numpy as np

import dy2st


_PY_NUMBERS = (bool, int, float, complex)


def holds_number(kind: str, python_type) -> bool:
    """Whether an array of dtype kind `kind` may stand for eager's Python number of
    `python_type`, by the numbers rule (DESIGN.md: a Python number the data decides is a 0-d
    array of its value): its own kind, a float for an int (where one path makes an int and
    another a float), any number for a bool."""
    return kind in {bool: "biuf", int: "iuf", float: "f", complex: "c"}[python_type]


def promoted_by_rule(expected, actual) -> bool:
    """Whether `actual` may stand for eager's 0-d int array `expected` by the numbers rule: a
    float, where one path makes an int and another a float (both numpy arrays)."""
    return expected.shape == () and expected.dtype.kind in "biu" and actual.dtype.kind == "f"


def _same_kind(python, other) -> bool:
    """A Python number is matched by one of its type, or by a 0-d array that holds it (the
    numbers rule: a staged value eager holds as a Python number, such as a loop's counter).
    dy2st never gives a Python number where eager gives an array."""
    if isinstance(other, _PY_NUMBERS):
        return isinstance(python, _PY_NUMBERS) and type(other) is type(python)
    return getattr(other, "shape", None) == () and holds_number(np.dtype(other.dtype).kind, type(python))


def _assert_tree_close(expected, actual, what: str, rtol=1e-5, atol=1e-6, kinds=True):
    """Values, structure and dtypes agree; with `kinds`, also whether each leaf is a Python
    number or an array, and its Python type (an enclosing `jax.jit` makes every output an array)."""
    exp_leaves, exp_tree = jax.tree_util.tree_flatten(expected)
    act_leaves, act_tree = jax.tree_util.tree_flatten(actual)
    assert exp_tree == act_tree, f"{what}: structure {act_tree} != eager {exp_tree}"
    for e, a in zip(exp_leaves, act_leaves):
        if kinds and (isinstance(e, _PY_NUMBERS) or isinstance(a, _PY_NUMBERS)):
            assert _same_kind(e, a), f"{what}: {a!r} ({type(a).__name__}) != eager {e!r} ({type(e).__name__})"
        if isinstance(e, (bool, int, float, complex, np.ndarray, np.generic, jax.Array)) or hasattr(e, "shape"):
            e_arr, a_arr = np.asarray(e), np.asarray(a)
            assert e_arr.shape == a_arr.shape, f"{what}: shape {a_arr.shape} != eager {e_arr.shape}"
            if (kinds and not isinstance(e, _PY_NUMBERS) or isinstance(e, jax.Array)) and not promoted_by_rule(e_arr, a_arr):
                assert a_arr.dtype == e_arr.dtype, f"{what}: dtype {a_arr.dtype} != eager {e_arr.dtype}"
            np.testing.assert_allclose(a_arr, e_arr, rtol=rtol, atol=atol, err_msg=what)
        else:
            assert e == a, f"{what}: {a!r} != eager {e!r}"


def check_equivalent(fn, *args, grad_argnums=None, jit=True, rtol=1e-5, atol=1e-6, **kwargs):
    """Run `fn` eagerly, through `dy2st.to_static`, and through `jax.jit(to_static(fn))`
    (array arguments only), and assert all results agree. With `grad_argnums`, also compare
    `jax.grad` of the sum of the output. Returns the eager result.
    """
    expected = fn(*args, **kwargs)
    static = dy2st.to_static(fn)
    _assert_tree_close(expected, static(*args, **kwargs), "to_static", rtol, atol)
    if jit:
        array_pos = [i for i, a in enumerate(args) if isinstance(a, (jax.Array, np.ndarray))]
        static_args = {i: a for i, a in enumerate(args) if i not in array_pos}

        def call(*arrays):
            full = list(args)
            for i, a in zip(array_pos, arrays):
                full[i] = a
            for i, a in static_args.items():
                full[i] = a
            return static(*full, **kwargs)

        jitted = jax.jit(call)(*[args[i] for i in array_pos])
        _assert_tree_close(expected, jitted, "jit(to_static)", rtol, atol, kinds=False)
    if grad_argnums is not None:
        def loss(f):
            return lambda *a: sum(jax.numpy.sum(l) for l in jax.tree_util.tree_leaves(f(*a, **kwargs)))

        eager_grad = jax.grad(loss(fn), argnums=grad_argnums)(*args)
        static_grad = jax.grad(loss(static), argnums=grad_argnums)(*args)
        _assert_tree_close(eager_grad, static_grad, "grad(to_static)", rtol, atol)
    return expected


def check_prints(fn, *args, calls: int = 2):
    """Assert that `to_static(fn)` prints what `fn` prints, on each of `calls` calls (the text
    made when the program runs, not while tracing). Captures stdout itself."""
    def printed(f):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            f(*args)
        return out.getvalue()

    expected = printed(fn)
    static = dy2st.to_static(fn)
    for call in range(calls):
        got = printed(static)
        assert got == expected, f"call {call + 1} printed {got!r}, eager {expected!r}"
    return expected
