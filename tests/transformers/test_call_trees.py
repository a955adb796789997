"""Golden before/after tests of the steps this issue adds, each run alone on a snippet, plus
the logging switches (code level, verbosity) and the retracing warning."""

import ast
import logging
import textwrap

import jax.numpy as jnp
import pytest

import dy2st
from dy2st import conversion
from dy2st.transformers import asserts, call_trees, scoped_writes, try_blocks
from dy2st.transformers.base import ConversionContext
from dy2st.transformers.naming import Namer


def run_step(step, source: str, generated=()) -> str:
    tree = ast.parse(textwrap.dedent(source))
    namer = Namer.for_tree(tree)
    for name in generated:
        namer._taken.discard(name)
        namer.new_symbol(name)
    namer._taken.discard("jst")  # the snippet spells the runtime as generated code would
    ctx = ConversionContext("<test>", "f", namer, namer.new_symbol("jst"))
    tree = step.transform(tree, ctx)
    return conversion.to_source(tree.body[0]).strip()


def test_call_trees_wraps_user_calls():
    before = """
        def f(x, *args, **kwargs):
            y = helper(x, n=2) + self.layer(x)[0]
            print('y', y, *args, sep=', ', **kwargs)
            return g(h(x))(x)
    """
    after = """
        def f(x, *args, **kwargs):
            y = jst.convert_call(helper)(x, n=2) + jst.convert_call(self.layer)(x)[0]
            jst.convert_call(print)('y', y, *args, sep=', ', **kwargs)
            return jst.convert_call(jst.convert_call(g)(jst.convert_call(h)(x)))(x)
    """
    assert run_step(call_trees, before) == textwrap.dedent(after).strip()


def test_call_trees_leaves_runtime_generated_and_super_alone():
    before = """
        def f(x):
            y = jst.convert_ifelse(x > 0, if_body, None, None, None, (), 0)
            if_body()
            return super().f(x)
    """
    after = """
        def f(x):
            y = jst.convert_ifelse(x > 0, if_body, None, None, None, (), 0)
            if_body()
            return jst.convert_call(super().f)(x)
    """
    assert run_step(call_trees, before, generated=("if_body",)) == textwrap.dedent(after).strip()


def test_asserts():
    before = """
        def f(x):
            assert x.sum() > 0, f'bad {x}'
            assert x
    """
    after = """
        def f(x):
            jst.convert_assert(x.sum() > 0, lambda: f'bad {x}')
            jst.convert_assert(x, None)
    """
    assert run_step(asserts, before) == textwrap.dedent(after).strip()


def test_scoped_writes():
    before = """
        def f(x):
            global total
            nonlocal seen
            total = x
            seen, y = (x, x)
            y = x

            def inner():
                total = 1
    """
    after = """
        def f(x):
            global total
            nonlocal seen
            jst.remember_global('total')
            total = x
            jst.check_scoped_write(total, 'total', 'global')
            seen, y = (x, x)
            jst.check_scoped_write(seen, 'seen', 'nonlocal')
            y = x

            def inner():
                total = 1
    """
    assert run_step(scoped_writes, before) == textwrap.dedent(after).strip()


def test_try_blocks():
    # conditions inside a `try` are left to the runtime (a raising side is refused there); a
    # `finally` that jumps holds the exception it discards
    before = """
        def f(xs):
            for x in xs:
                try:
                    if x > 0:
                        y = 1
                except ValueError:
                    y = 2
                finally:
                    break
            return y
    """
    after = """
        def f(xs):
            for x in xs:
                pending_exception = None
                try:
                    try:
                        try:
                            if x > 0:
                                y = 1
                        except ValueError:
                            y = 2
                    except BaseException as caught:
                        pending_exception = caught
                finally:
                    break
                    if pending_exception is not None:
                        raise pending_exception
            return y
    """
    assert run_step(try_blocks, before) == textwrap.dedent(after).strip()


def test_pipeline_puts_calls_last():
    from dy2st.transformers import PIPELINE

    names = [step.name for step in PIPELINE]
    assert names[:6] == ["super_calls", "annotated_assignments", "walrus_conditions", "dead_deletes", "unbound_reads",
                         "try_blocks"]
    assert names[-3:] == ["scoped_writes", "asserts", "call_trees"]
    assert all(step.why for step in PIPELINE)


def branchy(x):
    if x.sum() > 0:
        return helper(x)
    return x


def helper(x):
    return x * 2


def test_code_level_logs_each_stage(caplog):
    conversion.clear_cache()
    dy2st.set_code_level(100)
    try:
        with caplog.at_level(logging.INFO, logger="dy2st"):
            dy2st.to_code(branchy)
    finally:
        dy2st.set_code_level(0)
    stages = [r.getMessage() for r in caplog.records if "after" in r.getMessage()]
    from dy2st.transformers import PIPELINE

    assert len(stages) == len(PIPELINE)
    assert "after call_trees" in stages[-1] and "jst.convert_call(helper)" in stages[-1]


def test_code_level_picks_the_number_of_stages(caplog):
    conversion.clear_cache()
    dy2st.set_code_level(2)
    try:
        with caplog.at_level(logging.INFO, logger="dy2st"):
            dy2st.to_code(branchy)
    finally:
        dy2st.set_code_level(0)
    assert len([r for r in caplog.records if "after" in r.getMessage()]) == 2


def test_verbosity_logs_conversion_and_call_decisions(caplog):
    conversion.clear_cache()
    from dy2st.runtime import calls

    calls._function_cache.clear()
    dy2st.set_verbosity(3)
    try:
        with caplog.at_level(logging.INFO, logger="dy2st"):
            dy2st.to_static(branchy)(jnp.ones(2))
    finally:
        dy2st.set_verbosity(0)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "converted branchy" in text
    assert "converted call target helper" in text
    assert "new program #1" in text


def test_env_variables_are_read(monkeypatch):
    from dy2st.config import _Config

    monkeypatch.setenv("DY2ST_CODE_LEVEL", "3")
    monkeypatch.setenv("DY2ST_VERBOSITY", "2")
    monkeypatch.setenv("DY2ST_TRACEBACK_FILTERING", "off")
    fresh = _Config()
    assert (fresh.code_level, fresh.verbosity, fresh.traceback_filtering) == (3, 2, False)
    monkeypatch.setenv("DY2ST_TRACEBACK_FILTERING", "sometimes")
    with pytest.raises(ValueError, match="DY2ST_TRACEBACK_FILTERING"):
        _Config()


def scale(x, n):
    return x * n


def grow(x):
    return x.sum()


def nested_arg(d, factor=1.0):
    return d[0] * factor


@pytest.mark.parametrize(
    "fn, make_args, expected",
    [
        (scale, lambda i: ((jnp.ones(2), i), {}), "argument 'n' (Python value) keeps changing: 0, 1, 2, 3 and more"),
        (grow, lambda i: ((jnp.ones(i + 1),), {}), "argument 'x' keeps changing: float32[1], float32[2]"),
        (nested_arg, lambda i: (((jnp.ones(2),),), {"factor": float(i)}),
         "argument 'factor' (Python value) keeps changing: 0.0, 1.0"),
        (nested_arg, lambda i: (((jnp.ones(i + 1), 1.0),), {}), "argument 'd'[0] (array) keeps changing"),
    ],
)
def test_retracing_warning_names_the_changing_argument(caplog, fn, make_args, expected):
    f = dy2st.to_static(fn)
    with caplog.at_level(logging.WARNING, logger="dy2st"):
        for i in range(10):
            args, kwargs = make_args(i)
            f(*args, **kwargs)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert expected in warnings[0]
