"""A generator defined inside a converted function (issue 30) is left as written and runs as
Python, as a called generator function does (it was refused: the fence rejected any `yield`).
The converted function's own `yield` is still refused."""

import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import UnsupportedSyntaxError
from dy2st.testing import check_equivalent, check_prints


def sums_a_nested_generator(x):
    def scaled(v):
        for i in range(3):
            yield v * i
    return sum(scaled(x))


def nested_generator_in_staged_branches(x):
    def rows(v):
        for i in range(v.shape[0]):
            if i % 2 == 0:
                yield v[i] * 2
            else:
                yield v[i]
    total = 0.0
    if x.sum() > 0:
        total = sum(rows(x))
    else:
        for r in rows(-x):
            total = total + r
    return total


def yields_itself(x):
    def helper(v):
        return v * 2
    yield helper(x)


@pytest.mark.parametrize("fn", [sums_a_nested_generator, nested_generator_in_staged_branches])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_nested_generator_runs_as_python(fn, sign):
    check_equivalent(fn, jnp.arange(4.0) * sign)


def test_the_functions_own_yield_is_still_refused():
    with pytest.raises(UnsupportedSyntaxError, match="generators"):
        dy2st.to_static(yields_itself)(jnp.ones(2))


def prints_in_a_nested_generator(x):
    def gen(n):
        for i in range(n):
            print("producing", i, f"{x.sum() * i:.1f}")
            yield x * i
    return sum(gen(2))


def test_a_print_in_a_nested_generator_prints_on_every_call():
    """Its body runs as Python, but its calls are converted (call_trees enters it): the print ran
    while tracing, once, and showed tracers."""
    check_prints(prints_in_a_nested_generator, jnp.array([1.0, 2.0]))


def batches(x):
    for i in range(2):
        v = x * i
        print("batch", i, v)
        yield v


def sums_a_generator_helper(x):
    return sum(batches(x))


def test_a_generator_the_function_calls_has_its_calls_converted():
    """A generator helper runs as Python, its prints when the program runs (they ran while
    tracing, once, showing tracers); `to_static` of a generator itself stays refused."""
    check_prints(sums_a_generator_helper, jnp.array([1.0, 2.0]))
    with pytest.raises(UnsupportedSyntaxError, match="generators"):
        dy2st.to_static(batches)(jnp.array([1.0, 2.0]))
