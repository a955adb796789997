"""A traced value set into a list, dict or object the function reaches outside its arguments (a
global, a closure's, a default) by a plain assignment (`CFG["w"] = ...`, `trainer.w = ...`) would
keep a value of the trace: the caller's object would hold a tracer after the first call, and
later calls fail with jax's UnexpectedTracerError. It is refused at the call, naming what was
set, and what the trace set there is put back. (Found by a model-code probe: a notebook-style
global trainer whose step assigns its new weights.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import PythonEffectError


class Trainer:
    def __init__(self):
        self.w = jnp.ones(3)
        self.inner = Box()


class Box:
    def __init__(self):
        self.v = jnp.zeros(3)


TRAINER = Trainer()
CFG = {"w": jnp.ones(3), "nested": {"b": 1.0}}


def sets_an_attribute_of_a_global_object(x):
    TRAINER.w = TRAINER.w * 2 + x
    return x


def sets_a_nested_attribute(x):
    TRAINER.inner.v = x
    return x


def sets_an_item_of_a_global_dict(x):
    CFG["w"] = CFG["w"] + x
    return x


def sets_a_nested_item(x):
    CFG["nested"]["b"] = x.sum()
    return x


def make_closure():
    box = Box()

    def sets_an_attribute_of_a_closure_object(x):
        box.v = x * 3
        return x
    return sets_an_attribute_of_a_closure_object, box


@pytest.mark.parametrize("fn, path", [
    (sets_an_attribute_of_a_global_object, "TRAINER.w"),
    (sets_a_nested_attribute, "TRAINER.inner.v"),
    (sets_an_item_of_a_global_dict, "CFG['w']"),
    (sets_a_nested_item, "CFG['nested']['b']"),
])
def test_a_traced_value_set_outside_the_arguments_is_refused_and_put_back(fn, path):
    before = (TRAINER.w, TRAINER.inner.v, CFG["w"], CFG["nested"]["b"])
    static = dy2st.to_static(fn)
    for _ in range(2):
        with pytest.raises(PythonEffectError) as info:
            static(jnp.ones(3))
        text = str(info.value)
        assert text.startswith(f'File "{__file__}"'), text
        assert f"the call sets {path} to a traced value" in text and "To fix: pass " in text, text
        assert (TRAINER.w, TRAINER.inner.v, CFG["w"], CFG["nested"]["b"]) == before  # put back, no tracer


def test_a_closure_objects_attribute_set_to_a_traced_value_is_refused():
    fn, box = make_closure()
    with pytest.raises(PythonEffectError, match="the call sets box.v to a traced value"):
        dy2st.to_static(fn)(jnp.ones(3))
    assert not isinstance(box.v, jax.core.Tracer)


def steps(x, trainer):
    trainer.w = trainer.w + x
    return trainer.w.sum()


def test_the_same_object_passed_as_an_argument_is_written_back():
    """The global's object given as an argument is the caller's: lifted and written back."""
    static = dy2st.to_static(steps)
    eager_trainer, static_trainer = Trainer(), TRAINER
    start = TRAINER.w
    try:
        for _ in range(3):
            assert float(static(jnp.ones(3), static_trainer)) == float(steps(jnp.ones(3), eager_trainer))
            np.testing.assert_array_equal(static_trainer.w, eager_trainer.w)
    finally:
        TRAINER.w = start


TAPE: list = []
HOOKS: dict = {}


def records_a_closure_on_a_tape(x):
    y = x * 2
    TAPE.append(lambda: y + 1)  # a gradient tape's backward closure
    return y


def keeps_a_partial_in_a_dict(x):
    import functools
    HOOKS["scale"] = functools.partial(jnp.multiply, x.sum())
    return x


def sets_an_attribute_to_a_closure(x):
    TRAINER.hook = lambda v: v * x
    return x


@pytest.mark.parametrize("fn, line", [
    (records_a_closure_on_a_tape, "TAPE.append(lambda: y + 1)"),
    (keeps_a_partial_in_a_dict, None),
    (sets_an_attribute_to_a_closure, None),
])
def test_a_function_holding_a_traced_value_kept_outside_is_refused(fn, line):
    """A lambda or partial closing over the trace's values, kept in a global list, dict or
    object: the tracer escaped, and calling it later raised jax's UnexpectedTracerError (where
    eager's closure works)."""
    static = dy2st.to_static(fn)
    try:
        for _ in range(2):
            with pytest.raises(PythonEffectError) as info:
                static(jnp.ones(3))
            text = str(info.value)
            assert text.startswith(f'File "{__file__}"'), text
            if line is not None:
                assert line in text.splitlines()[1]
            assert "traced value" in text and "To fix:" in text
            assert not TAPE and "scale" not in HOOKS and "hook" not in vars(TRAINER)  # put back
    finally:
        TAPE.clear(), HOOKS.clear(), vars(TRAINER).pop("hook", None)
