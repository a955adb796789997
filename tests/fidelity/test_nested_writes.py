"""Item and attribute writes nested in staged code, seen by every enclosing if and loop.

An inner `if` is rewritten first; the `L[-1] = v` in its branch becomes a path in the state of
the generated `convert_ifelse(..., ('L', (-1,)), ...)`, which the runtime writes back. Enclosing
ifs and loops must still carry `L[-1]`
(they used to miss it and leave an inner trace's value in `L`: an UnexpectedTracerError, or a
leaked tracer). And a loop body that fails half way through tracing must leave no object
holding what the methods it called wrote.
"""

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.testing import check_equivalent

X = jnp.array([1.0, 2.0, 3.0])


def item_in_nested_if(x, y):
    L = [x, y]
    a = y
    if x[0] >= 0:
        if not x[1] > 4:
            a = x
        else:
            L[-1] = x + 1
    return a, L


def attribute_in_nested_if(x):
    class Box:
        pass

    box = Box()
    box.v = x
    if x.sum() > 0:
        if x[0] > 2:
            box.v = x * 2
        else:
            box.v = x * 3
    return box.v


def item_in_if_in_for(x, n):
    L = [x, x]
    for i in range(n):
        if x.sum() > i:
            L[-1] = L[-1] + 1
    return L


def key_in_if_in_while(x, n):
    D = {"a": x}
    i = 0
    while i < n:
        if x.sum() > i:
            D["a"] = D["a"] * 2
        i += 1
    return D


class State:
    def __init__(self):
        self.h = jnp.zeros(3)
        self.count = 0

    def bump(self, v):
        self.count += 1
        self.h = self.h + v
        return self.count


def method_then_python_index(x, n):
    obj = State()
    weights = [1.0, 2.0, 3.0]
    k = x
    for i in range(n):  # a scan is tried first: after bump() wrote obj.h, weights[i] needs a Python i
        obj.bump(x)
        k = k * weights[i]
    return obj.h, k


@pytest.mark.parametrize("x", [X, -X, X * 2])
def test_item_written_in_a_nested_if(x):
    check_equivalent(item_in_nested_if, x, X)


@pytest.mark.parametrize("x", [X, -X, X * 0.5])
def test_attribute_written_in_a_nested_if(x):
    check_equivalent(attribute_in_nested_if, x, grad_argnums=0)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_item_written_in_an_if_in_a_loop(n):
    check_equivalent(item_in_if_in_for, X, n)
    check_equivalent(item_in_if_in_for, X, jnp.asarray(n), jit=False)
    check_equivalent(key_in_if_in_while, X, n)
    check_equivalent(key_in_if_in_while, X, jnp.asarray(n), jit=False)


def test_a_loop_body_that_fails_while_tracing_leaves_no_tracer_on_objects():
    check_equivalent(method_then_python_index, X, 3)
    grad = jax.grad(lambda x: dy2st.to_static(method_then_python_index)(x, 3)[0].sum())(X)
    assert jnp.allclose(grad, 3.0)


def closure_reads_a_write_in_a_guarded_loop(x, a):
    k = 1
    fns = [lambda v: v + k]  # reads `k` when called, whenever that is
    for e in x:
        if e > 5:
            continue
        w = 0
        while w < 2:
            w += 1
            for fn in fns:
                a = fn(a)
            k = 6
    return a


def closure_reads_a_write_in_a_staged_if(x):
    scale = 1.0
    f = lambda v: v * scale
    if x.sum() > 0:
        scale = 3.0
    else:
        scale = 2.0
    return f(x)


@pytest.mark.parametrize("x", [X, X * 3])
def test_closures_see_writes_made_inside_staged_code(x):
    check_equivalent(closure_reads_a_write_in_a_guarded_loop, x, jnp.zeros(3))
    check_equivalent(closure_reads_a_write_in_a_staged_if, x)
    check_equivalent(closure_reads_a_write_in_a_staged_if, -x)


# -- private names, which the compiler mangles in a class body ----------------------------------
class Private:
    """`self.__n` is `self._Private__n` once compiled; a local `__t` is `_Private__t`."""

    def __init__(self):
        self.__n = jnp.zeros(3)

    def staged_if(self, x):
        __t = x
        if x.sum() > 0:
            self.__n = self.__n + x
            __t = __t * 2
        return self.__n, __t

    def staged_loop(self, x, n):
        __t = x
        for i in range(n):
            if __t.sum() > 4:
                self.__n = self.__n + __t
            __t = __t + 1.0
        return self.__n, __t

    def state(self):
        return sorted(vars(self))


@pytest.mark.parametrize("x", [X, -X])
def test_private_attributes_and_locals_in_a_staged_if(x):
    eager, static = Private(), Private()
    expected = eager.staged_if(x)
    got = dy2st.to_static(static.staged_if)(x)
    for a, b in zip(jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(got)):
        assert jnp.allclose(a, b)
    assert static.state() == eager.state() == ["_Private__n"]  # no unmangled `__n` attribute made


@pytest.mark.parametrize("n", [0, 1, 3])
def test_private_attributes_and_locals_in_a_staged_loop(n):
    eager, static = Private(), Private()
    expected = eager.staged_loop(X, n)
    got = dy2st.to_static(static.staged_loop)(X, jnp.int32(n))
    for a, b in zip(jax.tree_util.tree_leaves(expected), jax.tree_util.tree_leaves(got)):
        assert jnp.allclose(a, b)
    assert static.state() == ["_Private__n"]
