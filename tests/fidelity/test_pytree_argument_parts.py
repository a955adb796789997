"""A list or dict inside a pytree argument (a Flax TrainState's params, a registered dataclass's
dict field) that the function returns as it is, in a new pytree (`state.replace(step=...)`): the
result holds an equal one, as under `jax.jit` (eagerly the argument's own object; its identity
is the one difference, limitations.md). Refused before as "changed in place or kept". Changed
in place, or kept where the caller would see it, it is still refused."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import PythonEffectError


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainState:
    step: jax.Array
    params: dict


def _state():
    return TrainState(jnp.asarray(0), {"dense": {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)}})


def bump(state, x):
    if x.sum() > 0:
        x = x * 2
    return dataclasses.replace(state, step=state.step + 1), x.sum()


def returns_its_params(state, x):
    return state.params, state.params["dense"]["w"] @ x


def sets_a_param_in_place(state, x):
    state.params["dense"]["b"] = state.params["dense"]["b"] + x.sum()
    return state.step


KEPT: list = []


def keeps_its_params(state, x):
    KEPT.append(state.params)
    return x


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_part_returned_as_it_is_in_a_new_pytree(sign):
    x = sign * jnp.ones(3)
    static = dy2st.to_static(bump)
    eager_state = static_state = _state()
    for _ in range(3):
        eager_state, want = bump(eager_state, x)
        static_state, got = static(static_state, x)
        assert int(static_state.step) == int(eager_state.step) and float(got) == float(want)
        assert jax.tree_util.tree_structure(static_state) == jax.tree_util.tree_structure(eager_state)
        for a, b in zip(jax.tree_util.tree_leaves(static_state), jax.tree_util.tree_leaves(eager_state)):
            np.testing.assert_array_equal(a, b)
    params, y = dy2st.to_static(returns_its_params)(_state(), jnp.ones(3))
    np.testing.assert_array_equal(y, returns_its_params(_state(), jnp.ones(3))[1])
    assert list(params) == ["dense"] and sorted(params["dense"]) == ["b", "w"]


def test_a_part_changed_in_place_or_kept_outside_is_still_refused():
    with pytest.raises(PythonEffectError, match="inside an argument"):
        dy2st.to_static(sets_a_param_in_place)(_state(), jnp.ones(3))
    try:
        with pytest.raises(PythonEffectError):
            dy2st.to_static(keeps_its_params)(_state(), jnp.ones(3))
        assert not KEPT  # put back
    finally:
        KEPT.clear()


def skips_the_update_when_the_loss_is_not_finite(grads, opt_state, params, loss):
    import optax

    updates = jax.tree_util.tree_map(jnp.zeros_like, grads)
    if jnp.isfinite(loss):
        updates, opt_state = optax.adam(1e-2).update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


@pytest.mark.parametrize("loss", [1.0, float("nan")])
def test_an_optimizer_state_replaced_on_one_side_merges_as_a_value(loss):
    """The optax state (a tuple holding the caller's dicts) kept on one side and replaced on the
    other was refused ('holds an object from before the `if` in one branch'), though dicts inside
    a pytree argument come back as equal new ones anyway (models probe: skipping a non-finite
    update, a common training step)."""
    optax = pytest.importorskip("optax")
    params = {"w": jnp.ones(3), "b": jnp.zeros(2)}
    grads = {"w": jnp.full(3, 0.5), "b": jnp.ones(2)}
    static = dy2st.to_static(skips_the_update_when_the_loss_is_not_finite)
    eager_state = static_state = optax.adam(1e-2).init(params)
    eager_params = static_params = params
    for _ in range(3):
        eager_params, eager_state = skips_the_update_when_the_loss_is_not_finite(grads, eager_state, eager_params,
                                                                                  jnp.asarray(loss))
        static_params, static_state = static(grads, static_state, static_params, jnp.asarray(loss))
        assert jax.tree_util.tree_structure(static_state) == jax.tree_util.tree_structure(eager_state)
        for a, b in zip(jax.tree_util.tree_leaves((static_params, static_state)),
                        jax.tree_util.tree_leaves((eager_params, eager_state))):
            np.testing.assert_allclose(a, b, rtol=1e-6)
