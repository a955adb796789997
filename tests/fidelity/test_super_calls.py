"""A method's zero-argument `super()` inside an `if`, a loop, a ternary or `and`/`or`: the
statement moves into a generated function or lambda, where `super()` found no arguments
(RuntimeError: super(): no arguments); it is spelled out as `super(__class__, self)` first."""

import jax.numpy as jnp
import pytest

import dy2st
from dy2st.testing import check_equivalent

X = jnp.array([1.0, 2.0, 3.0])


class Base:
    def forward(self, x):
        return x + 1.0

    @classmethod
    def scale(cls):
        return 2.0


class Child(Base):
    def forward(self, x):
        y = x
        if x.sum() > 0:
            y = super().forward(x) * 2
        for _ in range(2):
            y = super().forward(y)
        z = super().forward(y) if y.sum() > 10 else y - 1.0
        far = z.sum() > 100 or super().forward(z).sum() > 0
        return z * self.scale(), far

    @classmethod
    def scale(cls):
        total = 0.0
        for _ in range(2):
            total = total + super().scale()
        return total


@pytest.mark.parametrize("x", [X, -X])
def test_zero_argument_super_in_staged_code(x):
    check_equivalent(Child().forward, x)


def test_a_function_nested_in_the_method_keeps_its_own_super():
    class Inner(Base):
        def forward(self, x):
            def helper():
                return super().forward(x)  # noqa: the nested function's own (no arguments): raises eagerly

            if x.sum() > 0:
                return helper()
            return x

    with pytest.raises(RuntimeError, match="no arguments"):
        Inner().forward(X)
    with pytest.raises(RuntimeError, match="no arguments"):
        dy2st.to_static(Inner().forward)(X)
