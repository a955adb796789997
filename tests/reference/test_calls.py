"""Differential tests of recursive conversion: calls from converted code into user helpers
(with staged `if`s), lambdas, closures, nested functions, methods, callable objects,
partials and recursion are converted; jax/numpy/library calls and not_to_static run as is."""

import functools
import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st import conversion
from dy2st.runtime import calls
from dy2st.testing import check_equivalent

POS = jnp.array([1.0, 2.0, 3.0])
NEG = jnp.array([-1.0, -2.0, -3.0])
MIX = jnp.array([-3.0, 1.0, 1.0])
INPUTS = [POS, NEG, MIX]


def relu_sum(x):
    if x.sum() > 0:
        y = x
    else:
        y = jnp.zeros_like(x)
    return y


def clip_helper(x, limit=1.0):
    if x.max() > limit:
        return x / x.max() * limit
    return x


def two_level_helper(x):
    return relu_sum(x) * 2 + clip_helper(x, limit=2.0)


def calls_helper(x):
    return relu_sum(x) + 1


def calls_helper_kwargs(x):
    return clip_helper(x, limit=0.5) - clip_helper(x)


def calls_two_levels(x):
    return two_level_helper(x)


def calls_star_args(x):
    args = (x,)
    kwargs = {"limit": 2.0}
    return clip_helper(*args, **kwargs)


def calls_lambda(x):
    pick = lambda v: v * 2 if v.sum() > 0 else v - 1
    return pick(x) + pick(-x)


def calls_nested(x):
    def inner(v):
        if v[0] > 0:
            return v * 3
        return v

    return inner(x) + inner(x[::-1])


def calls_closure(x):
    scale = 3.0

    def scaled(v):
        if v.sum() > 0:
            return v * scale
        return v / scale

    return scaled(x)


def make_helper(threshold):
    def helper(v):
        if v.sum() > threshold:
            return v + 1
        return v - 1

    return helper


outer_helper = make_helper(0.0)


def calls_closure_from_outside(x):
    return outer_helper(x)


class Layer:
    def __init__(self, w):
        self.w = w

    def forward(self, x):
        if (x * self.w).sum() > 0:
            return x * self.w
        return x

    def __call__(self, x):
        if x.sum() > 0:
            return self.forward(x) + 1
        return self.forward(x) - 1


class Child(Layer):
    def forward(self, x):
        y = super().forward(x)
        if y[0] > 0:
            y = y * 2
        return y


layer = Layer(2.0)
child = Child(-1.0)


def calls_method(x):
    return layer.forward(x)


def calls_callable_object(x):
    return layer(x)


def calls_super(x):
    return child(x)


def calls_partial(x):
    half = functools.partial(clip_helper, limit=0.5)
    return half(x)


def countdown(x, n):
    if n > 0:
        return countdown(x * 2, n - 1)
    return x


def calls_recursion(x):
    return countdown(x, 3)


def tree_depth(x, depth):
    if depth == 0:
        return relu_sum(x)
    return tree_depth(x, depth - 1) + tree_depth(-x, depth - 1)


def calls_branching_recursion(x):
    return tree_depth(x, 2)


def calls_library(x):
    return jnp.sum(jnp.tanh(x)) + np.float32(2.0) * jax.nn.relu(x).sum() + jax.lax.cumsum(x)[-1]


@dy2st.to_static
def static_helper(x):
    if x.sum() > 0:
        return x * 5
    return x


def calls_static_function(x):
    return static_helper(x) + 1


class Mlp(eqx.Module):
    w: jax.Array

    def __call__(self, x):
        if x.sum() > 0:
            return x * self.w
        return x - self.w


mlp = Mlp(jnp.array([1.0, 2.0, 3.0]))


def calls_equinox_module(x):
    return mlp(x)


CASES = [
    calls_helper,
    calls_helper_kwargs,
    calls_two_levels,
    calls_star_args,
    calls_lambda,
    calls_nested,
    calls_closure,
    calls_closure_from_outside,
    calls_method,
    calls_callable_object,
    calls_super,
    calls_partial,
    calls_recursion,
    calls_branching_recursion,
    calls_library,
    calls_static_function,
    calls_equinox_module,
]


@pytest.mark.parametrize("x", INPUTS, ids=["pos", "neg", "mix"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_calls_differential(fn, x):
    check_equivalent(fn, x, grad_argnums=0)


def test_static_recursion_argument():
    for n in (0, 1, 4):
        check_equivalent(countdown, POS, n)


def test_helper_is_staged_not_evaluated_in_python():
    program = dy2st.to_static(calls_helper).get_concrete_program(POS)
    assert "cond" in str(program.jaxpr)


def test_helpers_are_converted_once(monkeypatch):
    seen = []
    original = conversion.convert_code
    monkeypatch.setattr(conversion, "convert_code", lambda fn: seen.append(fn.__qualname__) or original(fn))
    conversion.clear_cache()
    calls._function_cache.clear()
    f = dy2st.to_static(calls_two_levels)
    f(POS)
    f(jnp.ones(4))  # a second program: conversion is not repeated
    assert sorted(seen) == ["calls_two_levels", "clip_helper", "relu_sum", "two_level_helper"]


def test_what_is_not_converted():
    assert calls.convert_call(jnp.sum) is jnp.sum
    assert calls.convert_call(np.mean) is np.mean
    assert calls.convert_call(functools.reduce) is functools.reduce
    assert calls.convert_call(jax.nn.relu) is jax.nn.relu
    assert calls.convert_call(len) is len
    assert calls.convert_call(static_helper) is static_helper
    assert calls.convert_call(dict) is dict

    @dy2st.not_to_static
    def marked(v):
        return v

    assert calls.convert_call(marked) is marked

    def generator(v):
        yield v

    # a generator is converted for its calls only (prints, f-strings): still a generator, run as Python
    converted = calls.convert_call(generator)
    assert inspect.isgeneratorfunction(converted) and list(converted(3)) == [3]

    # a library decorator's wrapper (its code in an installed package): run as it is
    cached = functools.lru_cache(maxsize=None)(relu_sum)
    assert calls.convert_call(cached) is cached


def test_a_wrapper_of_the_users_own_decorator_is_converted():
    def wrapped(v):
        return v

    @functools.wraps(wrapped)
    def wrapper(v):
        return wrapped(v)

    converted = calls.convert_call(wrapper)
    assert converted is not wrapper and hasattr(converted, "__dy2st_converted__")


def test_what_is_converted():
    assert calls.convert_call(relu_sum) is not relu_sum
    assert hasattr(calls.convert_call(relu_sum), "__dy2st_converted__")
    assert calls.convert_call(relu_sum) is calls.convert_call(relu_sum)  # cached
    method = calls.convert_call(layer.forward)
    assert method.__self__ is layer and method.__func__ is not Layer.forward
    assert calls.convert_call(layer).__func__.__name__ == "__call__"
    assert calls.convert_call(print) is not print


def test_not_to_static_helper_with_python_condition_runs_as_is():
    @dy2st.not_to_static
    def shape_helper(v):
        if v.shape[0] > 2:  # a Python condition: fine unconverted
            return v[:2]
        return v

    def f(x):
        return shape_helper(x).sum()

    check_equivalent(f, POS)
    check_equivalent(f, POS[:2])


def test_nested_function_inside_converted_code_is_not_converted_again(monkeypatch):
    seen = []
    original = conversion.convert_code
    monkeypatch.setattr(conversion, "convert_code", lambda fn: seen.append(fn.__qualname__) or original(fn))
    conversion.clear_cache()
    dy2st.to_static(calls_nested)(POS)
    assert seen == ["calls_nested"]


# -- helpers with staged loops ------------------------------------------------------------------
def doubling_helper(v):
    while jnp.abs(v).sum() < 10.0:
        v = v * 2
    return v


def counting_helper(v, n):
    total = jnp.zeros(())
    for i in range(n):
        if v[0] > 0:
            total = total + v.sum() * i
        else:
            total = total - i
    return total


def calls_while_helper(x):
    return doubling_helper(x) + 1


def calls_for_helper(x):
    n = (jnp.abs(x).sum() // 2).astype(jnp.int32)  # traced trip count
    return counting_helper(x, n)


def calls_helper_in_loop(x):
    acc = x
    for _ in range(3):
        acc = relu_sum(acc) + clip_helper(acc, limit=2.0)
    return acc


@pytest.mark.parametrize(
    "x",
    [jnp.array([20.0, 1.0]), jnp.array([3.0, 2.0]), jnp.array([0.1, 0.2]), jnp.array([-1.0, 0.5])],
    ids=["zero_trips", "one_trip", "many_trips", "negative"],
)
@pytest.mark.parametrize("fn", [calls_while_helper, calls_for_helper, calls_helper_in_loop], ids=lambda f: f.__name__)
def test_helpers_with_loops_differential(fn, x):
    check_equivalent(fn, x)


# -- constructs the docs promise work -------------------------------------------------------------
def star_assignment(x):
    first, *rest = x
    if first > 0:
        y = first + sum(rest)
    else:
        y = first - rest[0]
    return y


def staged_if_in_with(x):
    with jax.named_scope("block"):
        if x.sum() > 0:
            y = relu_sum(x)
        else:
            y = -x
    return y


@pytest.mark.parametrize("x", INPUTS, ids=["pos", "neg", "mix"])
@pytest.mark.parametrize("fn", [star_assignment, staged_if_in_with], ids=lambda f: f.__name__)
def test_star_assignment_and_with(fn, x):
    check_equivalent(fn, x, grad_argnums=0)
