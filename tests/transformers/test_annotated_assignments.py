"""Annotated assignments in converted code (`total: float = total + v` in a loop, `y: T = v` in a
branch): Python never evaluates a local's annotation, so they are plain assignments; left
annotated, a carried name could not be declared nonlocal and conversion failed ("this is a dy2st
bug"). A class body keeps its annotations (a dataclass's fields)."""

import dataclasses
import textwrap

import jax.numpy as jnp
import pytest

from dy2st.testing import check_equivalent
from dy2st.transformers import annotated_assignments
from tests.transformers.test_call_trees import run_step


def in_a_branch(x):
    y = x
    if x.sum() > 0:
        y: jnp.ndarray = x * 2
    return y


def in_a_loop(x, n):
    total: float = 0.0
    count: int
    for i in range(n):
        total: float = total + x[i % 2]
    while jnp.abs(total).sum() < 10 if n else False:
        total: jnp.ndarray = total * 2
    return total


def with_a_local_dataclass(x):
    @dataclasses.dataclass
    class Point:
        a: jnp.ndarray
        b: float = 1.0

    scale: float = 3.0
    if x.sum() > 0:
        scale: float = 2.0
    p: Point = Point(x * scale)
    return p.a * p.b


@pytest.mark.parametrize("x", [jnp.array([1.0, 2.0]), jnp.array([-1.0, -2.0])])
def test_annotated_assignments_convert(x):
    check_equivalent(in_a_branch, x)
    check_equivalent(with_a_local_dataclass, x)
    for n in (0, 1, 3):
        check_equivalent(in_a_loop, x, n, jit=False)


def test_the_step_drops_annotations_but_not_a_class_bodys():
    before = """
        def f(x):
            y: int = x
            z: int
            class C:
                a: int = 1
            return y
    """
    after = """
        def f(x):
            y = x
            pass

            class C:
                a: int = 1
            return y
    """
    assert run_step(annotated_assignments, before) == textwrap.dedent(after).strip()
