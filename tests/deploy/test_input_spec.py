"""dy2st.InputSpec: construction, parsing, per-call checks in to_static, abstract traces."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import Dy2StaticError, InputSpecError
from dy2st.testing import check_equivalent

X = dy2st.InputSpec((None, 4), "float32", name="x")


def branchy(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


# -- construction ----------------------------------------------------------------------------
def test_dims_are_normalized():
    spec = dy2st.InputSpec([-1, 784, "batch"], jnp.float32, name="x")
    assert spec.shape == (None, 784, "batch")
    assert spec.dtype == np.float32 and spec.name == "x"
    assert spec.is_dynamic and not dy2st.InputSpec((3,), "int32").is_dynamic
    assert dy2st.InputSpec((2,), "bfloat16").dtype == jnp.bfloat16


def test_from_array_and_with_dynamic():
    spec = dy2st.InputSpec.from_array(np.zeros((8, 3), np.int32), name="ids")
    assert spec == dy2st.InputSpec((8, 3), "int32", "ids")
    assert spec.with_dynamic().shape == (None, 3)
    assert spec.with_dynamic(1).shape == (8, None)
    assert dy2st.InputSpec.from_array(jnp.ones(())).shape == ()


@pytest.mark.parametrize("text, expected", [
    ("x:float32[None,784]", dy2st.InputSpec((None, 784), "float32", "x")),
    ("float32[-1, 3]", dy2st.InputSpec((None, 3), "float32")),
    ("ids:int32[batch,?]", dy2st.InputSpec(("batch", None), "int32", "ids")),
    ("n:int32[]", dy2st.InputSpec((), "int32", "n")),
])
def test_parse(text, expected):
    spec = dy2st.InputSpec.parse(text)
    assert spec == expected
    assert dy2st.InputSpec.parse(str(spec)) == spec


@pytest.mark.parametrize("make, words", [
    (lambda: dy2st.InputSpec((None, -2)), ["dimension -2", "None or -1"]),
    (lambda: dy2st.InputSpec((1.5,)), ["dimension 1.5"]),
    (lambda: dy2st.InputSpec(3), ["sequence of dimensions"]),
    (lambda: dy2st.InputSpec((3,), "not_a_dtype"), ["not an array dtype"]),
    (lambda: dy2st.InputSpec.parse("x=float32(3)"), ["Cannot read the input spec", "x:float32[None,784]"]),
    (lambda: dy2st.InputSpec.parse(None), ["InputSpec.parse takes a string, got NoneType", "x:float32[None,784]"]),
    (lambda: dy2st.InputSpec.parse(b"x:float32[3]"), ["InputSpec.parse takes a string, got bytes"]),
    # more digits than Python reads into an int (its 4300-digit limit raised a raw ValueError)
    (lambda: dy2st.InputSpec.parse("x:float32[" + "9" * 5000 + "]"), ["has 5000 digits", "at most 2**40"]),
    (lambda: dy2st.InputSpec.parse("x:float32[" + "9" * 30 + "]"), ["has 30 digits", "at most 2**40"]),
    (lambda: dy2st.InputSpec((2 ** 62, 4)), ["dimension 4611686018427387904", "from 0 to 2**40"]),
])
def test_malformed_specs_are_clear_errors(make, words):
    with pytest.raises(InputSpecError) as info:
        make()
    for word in words:
        assert word in str(info.value)


def test_json_round_trip_keeps_named_dims():
    spec = dy2st.InputSpec(("batch", None, 3), "int8", "x")
    data = spec.to_json()
    assert data["shape"] == [None, None, 3] and data["dims"] == ["batch", None, 3]
    assert dy2st.InputSpec.from_json(data) == spec


# -- per-call checks in to_static ------------------------------------------------------------
def test_matching_calls_run_and_agree_with_eager():
    f = dy2st.to_static(branchy, input_spec=[X])
    for batch in (1, 3):
        for sign in (1.0, -1.0):
            x = sign * jnp.ones((batch, 4))
            np.testing.assert_allclose(f(x), branchy(x))
    check_equivalent(dy2st.to_static(branchy, input_spec=[X]).rollback(), jnp.ones((2, 4)))


@pytest.mark.parametrize("value, problem", [
    (jnp.ones((2, 5)), "dimension 1 is 5, expected 4 (given float32[2, 5])"),
    (jnp.ones((2, 4), jnp.int32), "dtype is int32, expected float32"),
    (jnp.ones((4,)), "rank is 1, expected 2"),
    (np.ones((0, 4), np.float32), "a dynamic dimension must be at least 1"),
])
def test_mismatch_names_argument_expected_and_given(value, problem):
    f = dy2st.to_static(branchy, input_spec=[X])
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(InputSpecError) as info:
        f(value)
    message = str(info.value)
    assert isinstance(info.value, Dy2StaticError)
    assert "argument 'x' does not match its InputSpec x:float32[None,4]" in message
    assert problem in message
    assert f'File "{__file__}", line {line}' in message  # the caller's line
    assert "To fix: pass an array of dtype float32 and shape (None, 4)" in message


def test_keyword_arguments_and_methods_are_checked():
    class Model:
        @dy2st.to_static(input_spec=[dy2st.InputSpec((None, 2), "float32", "x")])
        def forward(self, x, scale=1.0):
            if x.sum() > 0:
                return x * scale
            return -x

    model = Model()
    np.testing.assert_allclose(model.forward(x=jnp.ones((3, 2))), jnp.ones((3, 2)))
    with pytest.raises(InputSpecError, match="argument 'x'.*dimension 1 is 3"):
        model.forward(x=jnp.ones((3, 3)))


def test_named_dims_must_agree_across_arguments():
    spec = dy2st.InputSpec(("batch", 2), "float32")
    f = dy2st.to_static(lambda a, b: a + b, input_spec=[spec, spec])
    np.testing.assert_allclose(f(jnp.ones((3, 2)), jnp.ones((3, 2))), 2 * jnp.ones((3, 2)))
    with pytest.raises(InputSpecError, match=r"argument 'b'.*dimension 0 \('batch'\) is 4, but another input has 'batch' = 3"):
        f(jnp.ones((3, 2)), jnp.ones((4, 2)))


def test_pytree_specs_and_static_entries():
    specs = [{"w": dy2st.InputSpec((2, 2)), "b": dy2st.InputSpec((2,))}, dy2st.InputSpec((None, 2)), None]

    @dy2st.to_static(input_spec=specs)
    def f(params, x, flag=True):
        y = x @ params["w"] + params["b"]
        return y if flag else -y

    params = {"w": jnp.eye(2), "b": jnp.zeros(2)}
    np.testing.assert_allclose(f(params, jnp.ones((1, 2)), False), -jnp.ones((1, 2)))
    with pytest.raises(InputSpecError, match=r"argument 'params\['b'\]'.*dimension 0 is 3"):
        f({"w": jnp.eye(2), "b": jnp.zeros(3)}, jnp.ones((1, 2)))
    with pytest.raises(InputSpecError, match="argument 'params' has structure"):
        f({"w": jnp.eye(2)}, jnp.ones((1, 2)))


def test_inside_jit_and_grad_the_check_sees_tracers():
    f = dy2st.to_static(branchy, input_spec=[X])
    np.testing.assert_allclose(jax.jit(f)(jnp.ones((2, 4))), 2 * jnp.ones((2, 4)))
    np.testing.assert_allclose(jax.grad(lambda x: f(x).sum())(-jnp.ones((2, 4))), jnp.ones((2, 4)))
    with pytest.raises(InputSpecError, match="dimension 1 is 3"):
        jax.jit(f)(jnp.ones((2, 3)))


def test_python_scalars_fit_specs_of_their_kind():
    f = dy2st.to_static(lambda x, n: x * n, input_spec=[X, dy2st.InputSpec((), "float32", "n")])
    np.testing.assert_allclose(f(jnp.ones((1, 4)), 3), 3 * jnp.ones((1, 4)))
    g = dy2st.to_static(lambda x, n: x * n, input_spec=[X, dy2st.InputSpec((), "int32", "n")])
    with pytest.raises(InputSpecError, match="argument 'n'.*dtype is float"):
        g(jnp.ones((1, 4)), 2.5)


def test_without_spec_nothing_is_checked():
    f = dy2st.to_static(branchy)
    f(jnp.ones((2, 5)))
    assert f._checker is None


# -- abstract traces -------------------------------------------------------------------------
def test_get_concrete_program_with_dynamic_dims_traces_without_data():
    f = dy2st.to_static(branchy)
    program = f.get_concrete_program(X)
    (aval,) = program.jaxpr.in_avals
    assert jax.export.is_symbolic_dim(aval.shape[0]) and aval.shape[1] == 4
    assert "cond" in str(program.jaxpr)
    assert "tensor<?x4xf32>" in program.as_text()
    assert jax.export.is_symbolic_dim(program.output_spec.shape[0])


def test_get_concrete_program_defaults_to_declared_specs_and_shares_named_dims():
    spec = dy2st.InputSpec(("batch", 3), "float32")
    f = dy2st.to_static(lambda a, b: a * b, input_spec=[spec, spec])
    program = f.get_concrete_program()
    a, b = program.jaxpr.in_avals
    assert a.shape == b.shape and str(a.shape[0]) == "batch"
    fixed = f.get_concrete_program(dy2st.InputSpec((2, 3)), dy2st.InputSpec((2, 3)))
    assert fixed.compiled is not None


class Model:
    def __init__(self):
        self.w = jnp.full((2, 2), 0.5)

    @dy2st.to_static(input_spec=[dy2st.InputSpec((None, 2), "float32", "x")])
    def forward(self, x):
        if x.sum() > 0:
            return x @ self.w
        return -x


def test_method_specs_skip_self_and_trace_with_lifted_state():
    model = Model()
    program = model.forward.get_concrete_program()
    w, x = program.jaxpr.in_avals
    assert w.shape == (2, 2) and jax.export.is_symbolic_dim(x.shape[0])  # self.w is an input
    np.testing.assert_allclose(model.forward(jnp.ones((3, 2))), jnp.ones((3, 2)))
    with pytest.raises(InputSpecError, match="argument 'x'.*dimension 1 is 3"):
        model.forward(jnp.ones((3, 3)))
