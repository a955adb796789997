"""Differential checks for models: the eager forward and the to_static forward, run on two
identical models, must give the same outputs and leave the same state behind."""

from __future__ import annotations

import numpy as np

import dy2st
from dy2st.state import split_state
from dy2st.testing import _assert_tree_close


def run_eagerly(fn, *args, **kwargs):
    """Call `fn` with every StaticFunction running its original Python."""
    dy2st.enable_to_static(False)
    try:
        return fn(*args, **kwargs)
    finally:
        dy2st.enable_to_static(True)


def assert_same_state(expected_model, actual_model, rtol=1e-5, atol=1e-6) -> None:
    """The arrays reachable from both models agree by name, shape and value."""
    expected, _ = split_state(expected_model)
    actual, _ = split_state(actual_model)
    assert list(actual) == list(expected), f"state names {list(actual)} != eager {list(expected)}"
    for name, e in expected.items():
        a = actual[name]
        assert np.shape(a) == np.shape(e), f"state {name!r}: shape {np.shape(a)} != eager {np.shape(e)}"
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=rtol, atol=atol, err_msg=f"state {name!r}")


def check_model_equivalent(make_model, call, *args, rtol=1e-5, atol=1e-6):
    """Build two models with `make_model()`, run `call(model, *args)` eagerly on one and through
    dy2st on the other, and assert equal outputs and equal state afterwards.

    Returns `(eager model, static model, eager output)`.
    """
    eager_model, static_model = make_model(), make_model()
    expected = run_eagerly(call, eager_model, *args)
    actual = call(static_model, *args)
    _assert_tree_close(expected, actual, "to_static model output", rtol, atol)
    assert_same_state(eager_model, static_model, rtol, atol)
    return eager_model, static_model, expected
