"""Lists and dicts as arguments: plain pytree inputs while the function leaves them alone (the
fast path, issue 17), lifted and written back as eager code would see them as soon as it
changes, keeps or returns one (issue 13, class 2)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st

X = jnp.arange(3.0)
KEPT = []


def _params():
    return [(jnp.ones((3, 3)), jnp.zeros(3)), (jnp.ones((3, 2)), jnp.zeros(2))]


def forward(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return x


def test_untouched_list_takes_the_plain_path():
    static = dy2st.to_static(forward)
    params = _params()
    np.testing.assert_allclose(static(params, X), forward(params, X))
    np.testing.assert_allclose(static(params, X), forward(params, X))
    assert static._stateful is None and not static.policy.lists_lifted
    assert len(static.programs) == 1


def test_untouched_dict_and_keywords():
    def f(state, x, scale):
        return {"y": state["w"] * x * scale, "n": state["n"] + 1}

    static = dy2st.to_static(f)
    state = {"w": jnp.ones(3), "n": jnp.zeros((), jnp.int32)}
    for _ in range(2):
        got = static(state, x=X, scale=jnp.float32(2))
        expected = f(state, X, jnp.float32(2))
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
        np.testing.assert_allclose(got["y"], expected["y"])
    assert static._stateful is None


def _mutates(xs, x):
    xs.append(x * 2)
    return x.sum()


def _sorts(xs, x):
    xs.reverse()
    return xs[0] + x


def _sets_item(d, x):
    d["b"] = d["a"] + x
    return x


def test_in_place_changes_reach_the_caller():
    for fn, make in ((_mutates, lambda: [X]), (_sorts, lambda: [X, X + 1]), (_sets_item, lambda: {"a": X})):
        static = dy2st.to_static(fn)
        for _ in range(2):
            eager_arg, static_arg = make(), make()
            np.testing.assert_allclose(static(static_arg, X), fn(eager_arg, X))
            assert jax.tree_util.tree_structure(static_arg) == jax.tree_util.tree_structure(eager_arg)
            for a, b in zip(jax.tree_util.tree_leaves(static_arg), jax.tree_util.tree_leaves(eager_arg)):
                np.testing.assert_allclose(a, b)
        assert static.policy.lists_lifted


def test_returned_list_is_an_equal_list():
    static = dy2st.to_static(lambda xs, x: (xs, x * 2))
    xs = [X]
    out, _ = static(xs, X)
    assert type(out) is list and len(out) == 1 and not isinstance(out[0], jax.core.Tracer)
    np.testing.assert_allclose(out[0], X)


def test_a_kept_list_holds_no_tracer():
    def keep(xs, x):
        KEPT.append(xs)
        return x + 1

    static = dy2st.to_static(keep)
    xs = [X]
    static(xs, X)
    # One item, as eagerly: the first trace (before the list was lifted) put KEPT back.
    assert len(KEPT) == 1 and KEPT[-1] is xs and not isinstance(xs[0], jax.core.Tracer)
    KEPT.clear()


class Box:
    def __init__(self):
        self.w = jnp.ones(3)


def test_objects_inside_a_list_are_state():
    def use(boxes, x):
        boxes[0].w = boxes[0].w + x
        return boxes[0].w.sum()

    static = dy2st.to_static(use)
    eager_boxes, static_boxes = [Box()], [Box()]
    np.testing.assert_allclose(static(static_boxes, X), use(eager_boxes, X))
    np.testing.assert_allclose(static_boxes[0].w, eager_boxes[0].w)


def test_traced_containers_inline_under_jit():
    static = dy2st.to_static(_mutates)
    xs = [X]
    out = jax.jit(lambda x: (static(xs, x), xs[-1]))(X)
    np.testing.assert_allclose(out[1], X * 2)


def test_a_list_inside_a_tuple_changed_in_place_is_refused():
    def grow(pair, x):
        pair[0].append(x)
        return x * 2

    static = dy2st.to_static(grow)
    try:
        static(([X], X), X)
    except dy2st.errors.PythonEffectError as e:
        assert str(e).startswith('File "') and "argument of its own" in str(e)
    else:
        raise AssertionError("no error")


def test_a_list_inside_a_tuple_read_only_works():
    static = dy2st.to_static(lambda pair, x: pair[0][0] + x)
    np.testing.assert_allclose(static(([X], X), X), X * 2)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Pair:
    w: jax.Array
    b: jax.Array


def _moves(pair, x):
    pair.w = pair.w + x
    return x * 2


def _reads(pair, x):
    return pair.w * x + pair.b


@pytest.mark.parametrize("wrap", [lambda p: p, lambda p: (p,), lambda p: {"p": p}],
                         ids=["argument", "in tuple", "in dict"])
def test_a_registered_pytree_changed_in_place_is_refused(wrap):
    # A registered pytree reaches the program as its leaves; eager code would change the
    # caller's object, which nothing writes back: refused, not a silent no-op.
    def fn(arg, x):
        pair = arg if isinstance(arg, Pair) else (arg[0] if isinstance(arg, tuple) else arg["p"])
        return _moves(pair, x)

    pair = Pair(jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(dy2st.errors.PythonEffectError, match=r"(?s)Pair.* is changed in place.*return the new Pair") as info:
        dy2st.to_static(fn)(wrap(pair), X)
    assert info.value.origin.filename == __file__
    np.testing.assert_array_equal(pair.w, jnp.zeros(3))


def test_a_registered_pytree_only_read_is_a_plain_input():
    static = dy2st.to_static(_reads)
    pair = Pair(jnp.ones(3), jnp.arange(3.0))
    for _ in range(2):
        np.testing.assert_allclose(static(pair, X), _reads(pair, X))
        np.testing.assert_allclose(jax.jit(static)(pair, X), _reads(pair, X))
    assert static._stateful is None


class _Model:
    def __init__(self):
        self.scale = jnp.float32(2)

    @dy2st.to_static
    def forward(self, pair, x):
        pair.b = pair.b + self.scale
        return x * self.scale


def test_a_registered_pytree_changed_beside_a_model_is_refused():
    pair = Pair(jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(dy2st.errors.PythonEffectError, match=r"an argument of type Pair is changed in place"):
        _Model().forward(pair, X)
    np.testing.assert_array_equal(pair.b, jnp.zeros(3))


def steps_with_a_local_loss(params, batch, lr):
    def loss_fn(p):  # closes over the caller's dict
        return jnp.sum((batch["x"] * p["w"] + p["b"]) ** 2)

    g = jax.grad(loss_fn)(params)
    if batch["x"].sum() > 0:
        g = {k: v * 0.5 for k, v in g.items()}
    return {k: params[k] - lr * g[k] for k in params}


def test_a_local_function_over_a_dict_argument_does_not_keep_it():
    # dy2st's cache of converted callees kept every traced local def (a value holding its own
    # key), so the caller's dict stayed referenced after the call: a leak, and the plain path
    # took it for a dict the function keeps (lifted as state on every later call); a Python
    # float beside a dict lifted it too
    import gc
    import weakref

    from dy2st.runtime import calls

    static = dy2st.to_static(steps_with_a_local_loss)
    params = {"w": jnp.ones(3), "b": jnp.zeros(3)}
    batch = {"x": jnp.arange(3.0), "y": jnp.zeros(3)}
    for lr in (0.1, 0.1, 0.2):
        got = static(params, batch, lr)
        want = steps_with_a_local_loss(params, batch, lr)
        assert list(got) == list(want)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6)
    assert not static.policy.lists_lifted
    probe = {"x": jnp.ones(3), "y": jnp.zeros(3)}
    alive = weakref.ref(probe["x"])
    static(params, probe, 0.1)
    del probe
    gc.collect()
    assert alive() is None
    assert not any(getattr(k, "__qualname__", "").endswith("loss_fn") for k in list(calls._function_cache.keys()))
