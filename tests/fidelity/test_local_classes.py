"""A class defined inside a converted function: its methods are converted with the function
(their ifs and loops staged on traced values); its own body runs in the class's scope, where
the functions and lambdas the rewrites make could not see its names, so it runs as written.
(Control flow directly in such a class body used to crash conversion with a raw KeyError.)"""

import jax.numpy as jnp
import pytest

from dy2st.testing import check_equivalent

X = jnp.array([1.0, 2.0, 3.0])


def local_class(x, flag):
    class Layer:
        a = 1
        b = a and 2  # a class-scope name read by `and`
        y = 1
        if flag:
            y = 2
        for i in range(2):
            y = y + i
        scale = y + b

        def forward(self, v):
            if v.sum() > 0:  # traced: staged in the converted method
                v = v * self.scale
            for _ in range(2):
                v = v - 1.0
            return v

    return Layer().forward(x), Layer.scale


@pytest.mark.parametrize("x", [X, -X])
@pytest.mark.parametrize("flag", [True, False])
def test_a_class_defined_in_the_function(x, flag):
    check_equivalent(local_class, x, flag)
