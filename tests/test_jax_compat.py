"""The private JAX names dy2st needs exist and behave as dy2st assumes (fails loudly on upgrade)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dy2st import _jax_compat


def test_convert_element_type_keeps_the_weak_flag():
    weak = _jax_compat.convert_element_type(jnp.asarray(1, jnp.int32), np.dtype(np.int32), weak_type=True)
    strong = _jax_compat.convert_element_type(jnp.asarray(1, jnp.int32), np.dtype(np.int32), weak_type=False)
    assert jax.typeof(weak).weak_type and not jax.typeof(strong).weak_type


def test_weak_result_type_follows_jax_promotion():
    assert _jax_compat.weak_result_type(jnp.float32(1), 2.0) == (np.dtype(np.float32), False)
    assert _jax_compat.weak_result_type(1.0, 2) == (jnp.result_type(float), True)


def test_tracer_kinds_are_recognised():
    seen = {}

    def probe(x):
        seen["batch"] = _jax_compat.is_batch_tracer(x)
        return x

    jax.vmap(probe)(jnp.ones(2))
    assert seen["batch"] is True
    jax.jit(probe)(jnp.ones(2))
    assert seen["batch"] is False

    def reverse(x):
        seen["linearize"] = _jax_compat.is_linearize_tracer(x)
        return x * 2.0

    jax.grad(reverse)(1.0)
    assert seen["linearize"] is True  # the pinned jax range linearizes through LinearizeTracer


def test_top_level_is_told_apart_from_every_transformation():
    seen = []

    def probe(x):
        seen.append(_jax_compat.at_top_level())
        return x * 2.0

    assert _jax_compat.at_top_level() is True
    jax.jit(probe)(1.0)
    jax.grad(probe)(1.0)
    jax.vmap(probe)(jnp.ones(2))
    jax.jvp(probe, (1.0,), (1.0,))
    assert seen == [False, False, False, False]


def test_traceback_helpers_answer():
    assert _jax_compat.traceback_filtering_mode() in {"off", "tracebackhide", "remove_frames",
                                                      "quiet_remove_frames", "auto"}
    assert _jax_compat.traceback_shows("/somewhere/user_model.py") is True


def test_ir_context_parses_an_exported_module():
    from jax.extend.mlir import ir

    exported = jax.export.export(jax.jit(lambda x: x + 1))(jax.ShapeDtypeStruct((2,), np.float32))
    with _jax_compat.make_ir_context() as ctx:
        module = ir.Module.parse(exported.mlir_module(), context=ctx)
    assert "func.func" in str(module)


def test_a_moved_name_says_what_and_where():
    with pytest.raises(_jax_compat.JaxInternalsMoved, match=r"jax\._src\.nowhere\.thing.*_jax_compat\.py"):
        _jax_compat._private("jax._src.nowhere", "thing")


def test_debug_callback_failures_are_logged_where_dy2st_filters_them(caplog):
    def boom(_):
        raise ValueError("boom")

    with caplog.at_level("ERROR", logger=_jax_compat.debug_callback_logger().name):
        with pytest.raises(Exception):
            jax.block_until_ready(jax.jit(lambda x: (jax.debug.callback(boom, x), x)[1])(1.0))
    assert any("callback failed" in r.getMessage() for r in caplog.records)


def test_equation_frames_and_the_while_transpose_hook_exist():
    assert isinstance(_jax_compat.current_equation_frames(), list)
    seen = []
    _jax_compat.wrap_while_transpose(lambda rule: seen.append(rule) or rule)  # wraps with itself
    assert callable(seen[0])


def test_a_jit_front_caches_what_its_miss_gives_and_forgets_on_clear():
    inner = jax.jit(lambda x: x * 2)
    misses, direct = [], []

    def miss(*args, **kwargs):
        misses.append(args)
        if kwargs or not all(isinstance(a, jax.Array) for a in args):
            return _jax_compat.front_result(inner(*args, **kwargs), None)  # not cached
        return _jax_compat.front_result(*_jax_compat.jit_miss(inner, args))

    def fun(*args, **kwargs):
        direct.append(args)
        return inner(*args, **kwargs)

    front = _jax_compat.jit_front("double", fun, miss)
    x = jnp.arange(3.0)
    for _ in range(3):
        np.testing.assert_array_equal(front(x), x * 2)
    assert len(misses) == 1
    front(3.0), front(3.0)
    assert len(misses) == 3  # never cached
    _jax_compat.clear_front(front)
    front(x)
    assert len(misses) == 4
    with jax.disable_jit():
        front(x)
    assert len(misses) == 4 and len(direct) == 1
    jax.jit(front)(x)  # traced arguments: the miss, every time
    assert len(misses) == 5


def test_exported_shape_strings_reads_every_aval_dimension():
    spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("n, 3"), np.float32)
    exported = jax.export.export(jax.jit(lambda x: x.reshape(-1)))(spec)
    strings = set(_jax_compat.exported_shape_strings(bytes(exported.serialize())))
    assert {b"n", b"3", b"3*n"} <= strings
