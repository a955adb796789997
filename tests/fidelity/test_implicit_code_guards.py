"""Code of the user's that Python calls itself, not through a call converted code makes (a
property's getter, `__len__`, `__bool__`, `__eq__`, `__getattr__`, a descriptor's `__get__`, a
metaclass's `__call__`, a key function handed to `sorted`): what it reads from outside the
arguments is guarded, and what it changes there is seen, as a called function's is (issue 29,
"Guards"). Before, the program replayed the first call's values."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import dy2st

SCALE = {"v": 1}
SIGN = 1


class Scaled:
    @property
    def scale(self):
        return SCALE["v"]

    def __len__(self):
        return SCALE["v"]

    def __bool__(self):
        return SCALE["v"] > 1

    def __eq__(self, other):
        return other == SCALE["v"]

    __hash__ = object.__hash__


def through_dunders(x, m):
    y = x * m.scale + len(m)
    if m:  # __bool__
        y = y + 100
    if m == 3:  # __eq__
        y = y - 1000
    return y


class Desc:
    def __get__(self, obj, owner):
        return SIGN * 10


class HasDesc:
    d = Desc()


class Meta(type):
    def __call__(cls):
        return SIGN * 100


class Made(metaclass=Meta):
    pass


def through_a_descriptor_and_a_metaclass(x):
    return x * HasDesc().d + Made()


def keyed(v):
    return v * SIGN


class Adder:
    def __call__(self, a, b):
        return a + b * SIGN


ADD = Adder()


def through_a_key_function(x):
    return x + sorted([3, 1, 2], key=keyed)[0] + sum(map(keyed, [10])) + functools.reduce(ADD, [1, 2], 0)


def _calls(static, fn, make_args, values, set_value):
    for value in values:
        set_value(value)
        want = fn(*make_args())
        for _ in range(2):
            np.testing.assert_array_equal(static(*make_args()), want)
        arrays = [a for a in make_args() if isinstance(a, jax.Array)]
        others = [a for a in make_args() if not isinstance(a, jax.Array)]
        # (a new function: jax's own cache keeps a trace per function, and rules there)
        np.testing.assert_array_equal(jax.jit(lambda *a: static(*a, *others))(*arrays), want)


def _set_scale(v):
    SCALE["v"] = v


def _set_sign(v):
    global SIGN
    SIGN = v


def test_a_property_and_dunders_reading_a_global_are_read_on_every_call():
    m, x = Scaled(), jnp.ones(2)
    static = dy2st.to_static(through_dunders)
    _calls(static, through_dunders, lambda: (x, m), (1, 2, 3, 1), _set_scale)


def test_a_descriptor_and_a_metaclass_reading_a_global_are_read_on_every_call():
    static = dy2st.to_static(through_a_descriptor_and_a_metaclass)
    _calls(static, through_a_descriptor_and_a_metaclass, lambda: (jnp.ones(2),), (1, 2, -1), _set_sign)


def test_functions_handed_to_builtins_reading_a_global_are_read_on_every_call():
    static = dy2st.to_static(through_a_key_function)
    _calls(static, through_a_key_function, lambda: (jnp.zeros(2),), (1, -1, 1, 2), _set_sign)


def _counting_class():
    class Counted:
        n = 0

        def __getattr__(self, name):
            Counted.n += 1
            return Counted.n

    return Counted


def reads_a_missing_attribute(x, d):
    return x + d.anything


def test_an_effect_of_getattr_happens_on_every_call():
    eager_kind, static_kind = _counting_class(), _counting_class()
    static = dy2st.to_static(reads_a_missing_attribute)
    x = jnp.zeros(2)
    for _ in range(3):
        want = reads_a_missing_attribute(x, eager_kind())
        got = static(x, static_kind())
        np.testing.assert_array_equal(got, want)
        assert static_kind.n == eager_kind.n
