"""A class defined inside a converted function: its methods are converted with the function
(their ifs and loops staged on traced values); its own body runs in the class's scope, where
the functions and lambdas the rewrites make could not see its names, so it runs as written.
(Control flow directly in such a class body used to crash conversion with a raw KeyError.)"""

import jax.numpy as jnp
import pytest

import dy2st

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


def names_its_classes(x):
    class Local:
        def method(self):
            def inner():
                return 1
            return inner

    return x, repr(Local), Local.__qualname__, Local().method().__qualname__, Local.method.__qualname__


def test_a_local_class_and_its_functions_are_named_as_eagerly():
    static = dy2st.to_static(names_its_classes)
    for _ in range(2):
        assert static(X)[1:] == names_its_classes(X)[1:]
    assert names_its_classes(X)[2] == "names_its_classes.<locals>.Local"
