"""`logging` in converted code is eager's on every call, as `print` is: each call of the program
logs, with traced arguments' run-time values, in order with prints, only where the data takes a
staged branch, at the logger's level as it is when the call runs, and the record names the
user's line. It ran while tracing: once, with tracers, whatever a staged `if` decided."""

import io
import logging

import jax
import jax.numpy as jnp
import pytest

import dy2st

FORMAT = "%(levelname)s %(funcName)s:%(lineno)d %(message)s"


@pytest.fixture
def logger():
    buf = io.StringIO()
    log = logging.getLogger(f"dy2st-test-{id(buf)}")
    log.propagate = False
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter(FORMAT))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.buf = buf
    yield log
    log.removeHandler(handler)


def train_step(w, x, log):
    loss = ((x @ w) ** 2).mean()
    log.info("loss %s", loss)
    if loss > 1.0:
        log.warning("loss is high: %.2f", loss)
    log.debug("debug %d", 1)
    log.log(logging.ERROR, "n=%d", x.shape[0])
    return w - 0.1 * loss


def _log_of(convert, logger, inputs, between=None):
    step = convert(train_step)
    w = jnp.full((3, 1), 0.1)
    for i, x in enumerate(inputs):
        if between is not None:
            between(i)
        w = step(w, x, logger)
    text = logger.buf.getvalue()
    logger.buf.truncate(0)
    logger.buf.seek(0)
    return text


INPUTS = [jnp.ones((2, 3)), jnp.ones((2, 3)) * 10, jnp.ones((2, 3))]


@pytest.mark.parametrize("convert", [dy2st.to_static, lambda f: jax.jit(dy2st.to_static(f), static_argnums=2)],
                         ids=["to_static", "jit"])
def test_a_logger_logs_on_every_call_as_eager(logger, convert):
    expected = _log_of(lambda f: f, logger, INPUTS)
    assert expected.count("loss is high") == 2 and "INFO train_step:34 loss 0.09" in expected
    assert _log_of(convert, logger, INPUTS) == expected


def test_the_level_is_the_loggers_when_the_call_runs(logger):
    def between(i):
        logger.setLevel(logging.DEBUG if i == 1 else logging.INFO)

    expected = _log_of(lambda f: f, logger, INPUTS, between)
    assert expected.count("debug 1") == 1
    assert _log_of(dy2st.to_static, logger, INPUTS, between) == expected


def logs_through_an_adapter(x, log):
    adapter = logging.LoggerAdapter(log, {"run": 7})
    adapter.info("sum %s", x.sum())
    return x * 2


def test_an_adapter_logs_through_its_logger(logger):
    static = dy2st.to_static(logs_through_an_adapter)
    for _ in range(2):
        logs_through_an_adapter(jnp.ones(2), logger)
        static(jnp.ones(2), logger)
    lines = logger.buf.getvalue().splitlines()
    assert len(lines) == 4 and len(set(lines)) == 1 and lines[0].endswith("sum 2.0")
