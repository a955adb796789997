"""Every dy2st option in one place, each read from its `DY2ST_*` variable once at import.

Options:
  enable_to_static (DY2ST_ENABLE, "1"/"0"): when off, every StaticFunction runs eagerly.
  code_level (DY2ST_CODE_LEVEL, int >= 0): log the code after this many transformer stages.
  verbosity (DY2ST_VERBOSITY, int >= 0): log conversion and cache decisions at this detail.
  traceback_filtering (DY2ST_TRACEBACK_FILTERING, "on"/"off"): hide dy2st's own frames from
    tracebacks of errors leaving a StaticFunction (and from jax's filtered tracebacks).
  max_while_trips (DY2ST_MAX_WHILE_TRIPS, int >= 0): debug bound: a staged `while` with no
    `maximum_iterations` stops after this many trips and raises at its line if its condition
    is still true (0, the default, is off). Makes a loop that never ends stoppable.
  retrace_warning_threshold: programs for one function before a retracing warning.
"""

from __future__ import annotations

import dataclasses
import logging
import os

VERSION = "0.1.0"  # dy2st.__version__ (here: a leaf module export.py reads too; kept equal to pyproject.toml)

logger = logging.getLogger("dy2st")


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a non-negative integer") from None
    if value < 0:
        raise ValueError(f"{name}={raw!r}: expected a non-negative integer")
    return value


def _bool_env(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    choices = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}
    if raw.lower() not in choices:
        raise ValueError(f"{name}={raw!r}: expected one of {sorted(choices)}")
    return choices[raw.lower()]


@dataclasses.dataclass
class _Config:
    enable_to_static: bool = dataclasses.field(default_factory=lambda: _bool_env("DY2ST_ENABLE", True))
    code_level: int = dataclasses.field(default_factory=lambda: _int_env("DY2ST_CODE_LEVEL", 0))
    verbosity: int = dataclasses.field(default_factory=lambda: _int_env("DY2ST_VERBOSITY", 0))
    traceback_filtering: bool = dataclasses.field(
        default_factory=lambda: _bool_env("DY2ST_TRACEBACK_FILTERING", True))
    max_while_trips: int = dataclasses.field(default_factory=lambda: _int_env("DY2ST_MAX_WHILE_TRIPS", 0))
    retrace_warning_threshold: int = 8


config = _Config()


_switch_listeners: list = []  # called after enable_to_static changes the switch


def enable_to_static(enable: bool = True) -> None:
    """Globally switch conversion on or off; off runs every StaticFunction eagerly (debugging)."""
    config.enable_to_static = bool(enable)
    for listener in _switch_listeners:
        listener()


def set_code_level(level: int = 100) -> None:
    """Log the translated code after the first `level` transformer stages (0 turns it off)."""
    config.code_level = int(level)
    if level and not logger.handlers and not logging.getLogger().handlers:
        logging.basicConfig()
    if level:
        logger.setLevel(min(logger.level or logging.INFO, logging.INFO))


def set_verbosity(level: int = 1) -> None:
    """Log conversion and caching decisions; higher levels say more (0 turns it off)."""
    config.verbosity = int(level)
    if level and not logger.handlers and not logging.getLogger().handlers:
        logging.basicConfig()
    if level:
        logger.setLevel(min(logger.level or logging.INFO, logging.INFO))


def log(level: int, message: str, *args) -> None:
    """Log `message` when verbosity is at least `level`."""
    if config.verbosity >= level:
        logger.info(message, *args)
