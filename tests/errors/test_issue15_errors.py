"""Issue 15: every mistake gets dy2st's error, at the user's line, with the fix.

Each shape of the issue has a test of its text: the file and marked line (via `# <marker>`),
the source line, the advice; the branch-label tests check both orders.
"""

import functools
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.config import config
from dy2st.errors import (
    BranchOutputError,
    ConversionError,
    Dy2StaticError,
    InputSpecError,
    LoopBoundError,
    LoopVariableError,
    ScopeWriteError,
)

from catalogue_helpers import assert_points_at, full_text, line_of

POS = jnp.array([1.0, 2.0, 3.0])
NEG = -POS
leaked = "before"


def _starts_at(exc, fn, marker):
    text = str(exc)
    assert text.startswith(f'File "{__file__}", line {line_of(fn, marker)}'), text


# -- labels name the paths truly, in both orders ---------------------------------------------
def return_float_first(x):
    if x.sum() > 0:
        return x
    return x.astype(jnp.int32)  # E:ret_int_after


def return_int_first(x):
    if x.sum() > 0:
        return x.astype(jnp.int32)
    return x  # E:ret_float_after


def if_int_else_float(x):
    if x.sum() > 0:  # E:if_int
        y = x.astype(jnp.int32)
    else:
        y = x
    return y


def if_float_else_int(x):
    if x.sum() > 0:  # E:if_float
        y = x
    else:
        y = x.astype(jnp.int32)
    return y


def test_early_return_labels_name_the_true_paths():
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(return_float_first)(POS)
    text = str(info.value)
    assert "float32[3] in the if branch but int32[3] in the code after the `if` (when it did not return)" in text, text
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(return_int_first)(POS)
    text = str(info.value)
    assert "int32[3] in the if branch but float32[3] in the code after the `if` (when it did not return)" in text, text
    assert "else branch" not in text


@pytest.mark.parametrize("fn, marker, first, second", [
    (if_int_else_float, "E:if_int", "int32", "float32"),
    (if_float_else_int, "E:if_float", "float32", "int32"),
])
def test_if_else_labels_both_orders(fn, marker, first, second):
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(fn)(POS)
    assert f"is {first}[3] in the if branch but {second}[3] in the else branch" in str(info.value)
    assert_points_at(info.value, fn, marker)
    _starts_at(info.value, fn, marker)


def break_then_int(xs):
    total = jnp.zeros((), jnp.float32)
    for x in xs:
        if x.sum() > 100:
            break
        total = (total + x.sum()).astype(jnp.int32)  # E:break_int
    return total


def test_loop_labels_are_not_if_else():
    with pytest.raises(Dy2StaticError) as info:
        dy2st.to_static(break_then_int)(jnp.ones((3, 2)))
    assert "if branch" not in str(info.value) and "else branch" not in str(info.value)


# -- raw errors from dy2st's own code become dy2st's -----------------------------------------
def walrus_used_after(x):
    i = 0
    while (n := x.sum() * i) < 10:  # E:walrus
        i += 1
    return n


def walrus_only_in_test(x):
    while (s := x.sum()) < 10:
        x = x * 2
    return x


def test_walrus_in_while_condition_used_after_converts():
    """(This was an UnsupportedSyntaxError; the condition now moves into the body,
    transformers/walrus_conditions.py, tests/transformers/test_walrus.py.)"""
    for x in (POS, POS * 20):  # several trips, and none
        for _ in range(2):
            np.testing.assert_allclose(dy2st.to_static(walrus_used_after)(x), walrus_used_after(x))


def test_walrus_used_only_in_condition_still_converts():
    np.testing.assert_allclose(dy2st.to_static(walrus_only_in_test)(POS), walrus_only_in_test(POS))


def none_then_array(x):
    y = None
    i = 0
    while x.sum() > i:  # E:none_loop
        y = x * i
        i += 1
    return y


def test_loop_variable_none_then_array():
    with pytest.raises(LoopVariableError) as info:
        dy2st.to_static(none_then_array)(POS)
    assert_points_at(info.value, none_then_array, "E:none_loop", "'y' is None before the loop", "jnp.zeros")
    _starts_at(info.value, none_then_array, "E:none_loop")


def one_param(x):  # E:one_param
    return x * 2


def test_too_many_input_specs():
    spec = dy2st.InputSpec((3,), "float32")
    with pytest.raises(InputSpecError) as info:
        dy2st.to_static(one_param, input_spec=[spec, spec])
    assert_points_at(info.value, one_param, "E:one_param", "2 entries", "1 positional", "one InputSpec per parameter")
    dy2st.to_static(one_param, input_spec=[spec])  # the right count is taken


# -- silent truncation becomes a run-time check ----------------------------------------------
def bounded(x):
    while x.sum() < 100:  # E:bounded
        dy2st.set_loop_options(maximum_iterations=3)
        x = x * 2
    return x


def bounded_stop(x):
    while x.sum() < 100:
        dy2st.set_loop_options(maximum_iterations=3, on_bound="stop")
        x = x * 2
    return x


def test_bound_reached_raises_at_the_while_line():
    with pytest.raises(LoopBoundError) as info:
        dy2st.to_static(bounded)(POS)
    assert_points_at(info.value, bounded, "E:bounded", "maximum_iterations=3", 'on_bound="stop"')
    _starts_at(info.value, bounded, "E:bounded")


@pytest.mark.parametrize("scale", [0.0, 20.0, 40.0])  # 0 and fewer trips than the bound
def test_bound_not_reached_gives_eager_result(scale):
    x = POS * scale + (scale == 0.0) * 50.0
    np.testing.assert_allclose(dy2st.to_static(bounded)(x), bounded(x))
    np.testing.assert_allclose(jax.jit(dy2st.to_static(bounded))(x), bounded(x))


def test_bound_reached_inside_jit_raises_with_the_message():
    with pytest.raises(Exception) as info:
        jax.jit(dy2st.to_static(bounded))(POS)
    assert "maximum_iterations=3" in full_text(info.value)


def test_on_bound_stop_opts_out():
    np.testing.assert_allclose(dy2st.to_static(bounded_stop)(POS), POS * 8)


def test_on_bound_is_validated():
    with pytest.raises(ValueError, match="'error', 'stop'"):
        dy2st.set_loop_options(maximum_iterations=3, on_bound="wrap")


def bounded_grad(x):
    while x.sum() < 100:
        dy2st.set_loop_options(maximum_iterations=8)
        x = x * 2
    return x.sum()


def test_bound_check_keeps_gradients():
    g = jax.jit(jax.grad(dy2st.to_static(bounded_grad)))(POS)
    np.testing.assert_allclose(g, jax.grad(bounded_grad)(POS))


# -- a loop that never ends can be stopped ---------------------------------------------------
def forever(x):
    while x.sum() > 0:  # E:forever
        x = x + 1
    return x


@pytest.fixture
def max_trips():
    old = config.max_while_trips
    config.max_while_trips = 50
    yield
    config.max_while_trips = old


def test_debug_trip_bound_stops_an_endless_loop(max_trips):
    with pytest.raises(LoopBoundError) as info:
        dy2st.to_static(forever)(POS)
    assert_points_at(info.value, forever, "E:forever", "50 times", "DY2ST_MAX_WHILE_TRIPS")
    _starts_at(info.value, forever, "E:forever")


def test_debug_trip_bound_leaves_finishing_loops_alone(max_trips):
    np.testing.assert_allclose(dy2st.to_static(forever)(NEG), NEG)


def test_debug_trip_bound_from_the_environment(tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(textwrap.dedent("""
        import jax.numpy as jnp, dy2st
        def forever(x):
            while x.sum() > 0:
                x = x + 1
            return x
        try:
            dy2st.to_static(forever)(jnp.ones(3))
        except dy2st.errors.LoopBoundError as e:
            print("STOPPED", str(e).splitlines()[0])
    """))
    env = dict(os.environ, DY2ST_MAX_WHILE_TRIPS="20", JAX_PLATFORMS="cpu")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert f'STOPPED File "{script}", line 4' in out.stdout, out.stdout + out.stderr


# -- Python objects to_static takes ----------------------------------------------------------
class Holder:
    scale = 3.0

    @dy2st.to_static
    @staticmethod
    def static(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    @dy2st.to_static
    @classmethod
    def klass(cls, x):
        if x.sum() > 0:
            return x * cls.scale
        return x


def branchy(x, k):
    if x.sum() > 0:
        return x * k
    return x - k


@pytest.mark.parametrize("x", [POS, NEG])
def test_staticmethod_and_classmethod(x):
    for call in (Holder.static, Holder().static):
        np.testing.assert_allclose(call(x), x + 1 if x.sum() > 0 else x - 1)
    for call in (Holder.klass, Holder().klass):
        np.testing.assert_allclose(call(x), x * 3.0 if x.sum() > 0 else x)


@pytest.mark.parametrize("x", [POS, NEG])
def test_partial(x):
    f = dy2st.to_static(functools.partial(branchy, k=2.0))
    np.testing.assert_allclose(f(x), branchy(x, 2.0))
    np.testing.assert_allclose(jax.jit(f)(x), branchy(x, 2.0))
    np.testing.assert_allclose(jax.grad(lambda v: f(v).sum())(x), jax.grad(lambda v: branchy(v, 2.0).sum())(x))
    assert "def branchy" in f.code
    g = dy2st.to_static(functools.partial(branchy, x))  # an array bound positionally
    np.testing.assert_allclose(g(k=jnp.float32(3.0)), branchy(x, 3.0))


def scaling(f):
    @functools.wraps(f)
    def wrapper(x):
        return f(x) * 10.0
    return wrapper


@scaling
def wrapped(x):
    if x.sum() > 0:
        return x
    return -x


@pytest.mark.parametrize("x", [POS, NEG])
def test_functools_wraps_keeps_the_wrapper(x):
    np.testing.assert_allclose(dy2st.to_static(wrapped)(x), wrapped(x))


def named(x):  # E:named
    if x.sum() > 0:
        return x
    return -x


def test_library_wrapper_says_to_decorate_the_inner_function():
    with pytest.raises(ConversionError) as info:
        dy2st.to_static(jax.named_call(named, name="n"))
    assert_points_at(info.value, named, "E:named", "jax.named_call(dy2st.to_static(named)")
    _starts_at(info.value, named, "E:named")
    np.testing.assert_allclose(jax.named_call(dy2st.to_static(named), name="n")(NEG), POS)


# -- noise -----------------------------------------------------------------------------------
def asserts_positive(x):
    assert x.sum() > 100, "too small"  # E:assert
    return x


def test_failed_assert_prints_nothing_to_stderr(capfd):
    with pytest.raises(AssertionError) as info:
        dy2st.to_static(asserts_positive)(POS)
    assert_points_at(info.value, asserts_positive, "E:assert", "too small")
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err and "callback failed" not in captured.err, captured.err
    assert captured.err.strip() == ""


def test_failed_loop_bound_prints_nothing_to_stderr(capfd):
    with pytest.raises(LoopBoundError):
        dy2st.to_static(bounded)(POS)
    assert capfd.readouterr().err.strip() == ""


def writes_global(x):
    global leaked
    leaked = x * 2  # E:leak
    return x


def writes_new_global(x):
    global never_set
    never_set = x * 2
    return x


def test_refused_global_write_restores_the_global():
    with pytest.raises(ScopeWriteError) as info:
        dy2st.to_static(writes_global)(POS)
    _starts_at(info.value, writes_global, "E:leak")
    assert leaked == "before"
    with pytest.raises(ScopeWriteError):
        dy2st.to_static(writes_new_global)(POS)
    assert "never_set" not in globals()


class WithSpecs:
    @dy2st.to_static(input_spec=[dy2st.InputSpec((3,), "float32")])
    @staticmethod
    def static(x):  # E:static_spec
        return x * 2


def test_staticmethod_input_spec_describes_its_first_parameter():
    np.testing.assert_allclose(WithSpecs.static(POS), POS * 2)
    with pytest.raises(InputSpecError):
        WithSpecs.static(jnp.ones(4))


def unbounded(x):
    while x.sum() < 10:  # E:unbounded
        x = x * 2
    return x.sum()


def test_grad_of_jit_through_an_unbounded_while_names_it():
    from dy2st.errors import LoopGradientError

    with pytest.raises(LoopGradientError) as info:
        jax.grad(jax.jit(dy2st.to_static(unbounded)))(POS)
    assert_points_at(info.value, unbounded, "E:unbounded", "set_loop_options(maximum_iterations=N)")
    _starts_at(info.value, unbounded, "E:unbounded")


def test_plain_jax_while_transpose_error_is_untouched():
    loop = lambda x: jax.lax.while_loop(lambda c: c.sum() < 10, lambda c: c * 2, x).sum()
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(jax.jit(loop))(POS)


def test_forward_mode_through_an_unbounded_while_still_works():
    np.testing.assert_allclose(jax.jacfwd(jax.jit(dy2st.to_static(unbounded)))(POS), jax.jacfwd(unbounded)(POS))
