"""What a call's arguments are keyed by: every difference eager code could see traces anew or is
carried, on every call (issue 29: "Static arguments are keyed by type and value")."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st


def starts_at(x, r):
    return x + r.start, len(r)


def test_ranges_equal_as_sequences_are_different_arguments():
    # (`range(0) == range(3, 3)`: the program of the first served the second, `.start` stale)
    static = dy2st.to_static(starts_at)
    x = jnp.zeros(2)
    for r in (range(0), range(3, 3), range(0), range(1, 5, 2), range(1, 4, 2)):
        for _ in range(2):
            got, want = static(x, r), starts_at(x, r)
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1] == want[1] and type(got[1]) is int


class Box:
    def __init__(self, k):
        self.k = k
        self.w = jnp.ones(2)


Pair = collections.namedtuple("Pair", "box scale")


def reads_the_box(x, t):
    return x * t[0].w + t[0].k * t[1]


def changes_the_box(x, t):
    box = t[0]
    box.k += 1
    box.w = box.w * 2
    if x.sum() > 0:  # a staged if changing it too
        box.w = box.w + 1
    return t[0], x * box.k * t[1]


@pytest.mark.parametrize("make", [lambda box: (box, 2.0), lambda box: Pair(box, 2.0), lambda box: (box, 2.0, (box, [box]))])
def test_an_object_inside_a_tuple_argument_is_read_anew_on_each_call(make):
    """A plain object inside a tuple (or namedtuple) argument was a static leaf keyed by its
    identity: its attributes, changed between calls, were the first call's."""
    static = dy2st.to_static(reads_the_box)
    box, x = Box(1), jnp.ones(2)
    for k in (1, 2, 2, 3):
        box.k, box.w = k, box.w * 2
        for _ in range(2):
            np.testing.assert_array_equal(static(x, make(box)), reads_the_box(x, make(box)))


@pytest.mark.parametrize("make", [lambda box: (box, 2.0), lambda box: Pair(box, 2.0)])
def test_an_object_inside_a_tuple_argument_changed_by_the_call_keeps_the_change(make):
    """(Its changes were made only while tracing: the second call's were lost.)"""
    static = dy2st.to_static(changes_the_box)
    eager_box, static_box = Box(1), Box(1)
    eager_args, static_args = make(eager_box), make(static_box)
    for x in (jnp.ones(2), -jnp.ones(2), jnp.ones(2), -jnp.ones(2)):
        want, got = changes_the_box(x, eager_args), static(x, static_args)
        assert got[0] is static_box and want[0] is eager_box
        np.testing.assert_array_equal(got[1], want[1])
        assert static_box.k == eager_box.k
        np.testing.assert_array_equal(static_box.w, eager_box.w)
    jitted = jax.jit(lambda x, k: dy2st.to_static(reads_the_box)(x, (Box(k), 2.0)), static_argnums=1)
    np.testing.assert_array_equal(jitted(jnp.ones(2), 3), reads_the_box(jnp.ones(2), (Box(3), 2.0)))


import dataclasses  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Cfg:
    n_layers: int = 2
    scale: float = 0.5
    act: object = jnp.tanh


@dataclasses.dataclass(frozen=True)
class Plain:  # (numbers only: a config by itself, where `Cfg`'s jax function field once made it state)
    n_layers: int = 2
    scale: float = 0.5
    act: object = None


def configured(params, x, cfg):
    for w in params[:cfg.n_layers]:
        x = (cfg.act or jnp.tanh)(x @ w)
    if x.sum() > 0:
        x = x * cfg.scale
    return x, cfg


def test_a_frozen_config_is_a_static_argument_keyed_by_its_fields_and_returned_as_itself():
    """A frozen dataclass of Python values was lifted as state and walked on every call (1.8x
    jax.jit), and returning it was refused; it is a static argument now, keyed by its fields."""
    params, x = [jnp.eye(3) * 0.5, -jnp.eye(3), jnp.eye(3)], jnp.ones((2, 3))
    static = dy2st.to_static(configured)
    for cfg in (Cfg(), Cfg(), Cfg(3, 1.0), Cfg(1, 0.25, jnp.sin), Cfg(), Plain(), Plain(), Plain(1)):
        want = configured(params, x, cfg)
        for _ in range(2):
            got = static(params, x, cfg)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
            assert got[1] is cfg
    assert len(static.programs) == 5
    assert not static.policy.lists_lifted  # (the config is no state: the list stays a plain input)


def applies(model, variables, x):
    y = model.apply(variables, x)
    if y.sum() > 0:
        y = y * 2
    return y, model


def test_unbound_linen_models_are_static_arguments_keyed_by_their_fields():
    """An unbound linen Module (frozen by flax) was lifted as state and walked on every call
    (`to_static(model.apply)`: 2.5x jax.jit); it is keyed by its fields now: an equal model shares
    the program, one with other fields gets its own, and each comes back as itself."""
    nn = pytest.importorskip("flax.linen")

    class MLP(nn.Module):
        features: int = 4

        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(nn.relu(nn.Dense(self.features)(x)))

    x = jnp.ones((3, 5))
    static = dy2st.to_static(applies)
    for model in (MLP(), MLP(), MLP(8), MLP()):
        variables = model.init(jax.random.PRNGKey(0), x)
        for sign in (1.0, -1.0):
            got, want = static(model, variables, sign * x), applies(model, variables, sign * x)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
            assert got[1] is model
        bound = dy2st.to_static(model.apply)
        np.testing.assert_allclose(bound(variables, x), model.apply(variables, x), rtol=1e-5)
    assert len(static.programs) == 2


class Scaler:
    def __init__(self):
        self.k = 1

    def apply(self, x):
        return x * self.k


SCALER = Scaler()
HANDLERS = {"scale": SCALER.apply}


def calls_what_it_is_given(x, fn):
    return fn(x)


def calls_a_global_handler(x):
    return HANDLERS["scale"](x)


def test_a_bound_method_given_or_held_by_a_global_reads_its_receiver_anew():
    """(A bound method was a static value keyed by its receiver's identity: `self.k`, changed
    between calls, was the first call's.)"""
    given, held = dy2st.to_static(calls_what_it_is_given), dy2st.to_static(calls_a_global_handler)
    x = jnp.ones(2)
    for k in (1, 2, 2, 3):
        SCALER.k = k
        for _ in range(2):
            np.testing.assert_array_equal(given(x, SCALER.apply), x * k)
            np.testing.assert_array_equal(held(x), x * k)


class First:
    def __init__(self):
        self.w = jnp.ones(2)

    def value(self):
        return 1.0


class Second:
    def value(self):
        return 2.0


def uses_its_class(x, o):
    return x * o.value() + o.w


def test_an_argument_whose_class_is_changed_between_calls_runs_its_new_class():
    static = dy2st.to_static(uses_its_class)
    o, x = First(), jnp.ones(2)
    for kind in (First, Second, First, Second):
        o.__class__ = kind
        for _ in range(2):
            np.testing.assert_array_equal(static(x, o), uses_its_class(x, o))


def keyword_only(x, *, scale=1.0, train=True, w=None):
    if train:
        x = x * scale
    if w is not None:
        x = x + w
    return x, scale, w  # (Python values and an argument returned: decoded)


def keywords_in_order(x, **options):
    return x * len(options), list(options), [type(v).__name__ for v in options.values()]


def test_keyword_arguments_find_their_program_by_name_order_type_and_value():
    """Keyword-only parameters took dy2st's general path on every call (34 us against 4.6 us
    for `jax.jit`); such calls now find their program as positional ones do, keyed by the
    keywords' names in order, and their values' types and values."""
    x = jnp.ones(2)
    static = dy2st.to_static(keyword_only)
    calls = [dict(scale=2.0), dict(scale=2), dict(scale=True), dict(train=False, scale=2.0), dict(scale=2.0, train=False),
             dict(scale=-0.0), dict(scale=0.0), dict(w=jnp.ones(2), scale=3.0), dict(scale=3.0, w=jnp.ones(2)), dict()]
    for _ in range(3):
        for kwargs in calls:
            got, want = static(x, **kwargs), keyword_only(x, **kwargs)
            np.testing.assert_array_equal(got[0], want[0])
            assert type(got[1]) is type(want[1]) and str(got[1]) == str(want[1])
            assert got[0].dtype == want[0].dtype
            assert (got[2] is None) == (want[2] is None) and (want[2] is None or bool((got[2] == want[2]).all()))
    general, seen = static._call_general, []
    static._call_general = lambda *a: seen.append(a) or general(*a)  # (the general path, per call)
    for kwargs in calls:
        static(x, **kwargs)
    assert seen == []  # every signature's program found without the general path
    ordered = dy2st.to_static(keywords_in_order)
    for _ in range(3):
        for kwargs in (dict(a=1, b=2.0), dict(b=2.0, a=1), dict(a=True, b=2.0)):
            got, want = ordered(x, **kwargs), keywords_in_order(x, **kwargs)
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1:] == want[1:]
