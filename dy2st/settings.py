"""The public setters of dy2st's logging options, with their arguments checked.

`dy2st.config` holds the options and is a leaf module (`dy2st.errors` reads it at import), so
it cannot raise dy2st's errors itself; these are the functions `dy2st.set_code_level` and
`dy2st.set_verbosity` name, and they refuse a level that is not an int >= 0 with an
`ArgumentError` at the caller's line before setting it::

    dy2st.set_code_level(100)   # log the code after every transformer stage
    dy2st.set_verbosity(0)      # off
"""

from __future__ import annotations

import operator

from dy2st import config
from dy2st.errors import ArgumentError
from dy2st.input_spec import user_origin


def set_code_level(level: int = 100) -> None:
    """Log the translated code after the first `level` transformer stages (0 turns it off)."""
    config.set_code_level(_level("set_code_level", level))


def set_verbosity(level: int = 1) -> None:
    """Log conversion and caching decisions; higher levels say more (0 turns it off)."""
    config.set_verbosity(_level("set_verbosity", level))


def _level(function: str, level) -> int:
    """`level` as an int >= 0 (a numpy integer too; not a bool, a float or a string)."""
    try:
        value = None if isinstance(level, bool) else operator.index(level)
    except TypeError:
        value = None
    if value is None or value < 0:
        raise ArgumentError(f"dy2st.{function}(level) takes an int >= 0, got {type(level).__name__} {level!r:.60}.",
                            user_origin(), advice=f"pass e.g. dy2st.{function}(1), or 0 to turn it off.")
    return value
