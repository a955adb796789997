"""The operators generated code calls. Imports nothing from transformers or analysis.

Generated code reaches this module through one closure cell (named `jst` or a fresh variant),
never through the user's globals.
"""

from dy2st.runtime import builtins as _builtins  # registers the staged builtins
from dy2st.runtime.builtins import convert_negative_power
from dy2st.runtime.asserts import convert_assert
from dy2st.runtime.calls import convert_call, managed
from dy2st.runtime.checks import check_scoped_write, ld, remember_global
from dy2st.runtime.control_flow import convert_ifelse, convert_ifexp, convert_jump_if
from dy2st.runtime.formatting import convert_format, convert_percent
from dy2st.runtime.iterables import loop_iter
from dy2st.runtime.lists import list_append
from dy2st.runtime.writes import in_place
from dy2st.runtime.logical import convert_and, convert_compare_chain, convert_is, convert_not, convert_unary, convert_or, python_operand
from dy2st.runtime.loops import convert_for, convert_while, set_loop_options
from dy2st.runtime.values import is_traced
from dy2st.runtime.undefined import UNDEFINED_RETURN, Undefined, UndefinedReturn, ldu_dead

__all__ = [
    "UNDEFINED_RETURN",
    "check_scoped_write",
    "remember_global",
    "convert_assert",
    "convert_call",
    "Undefined",
    "UndefinedReturn",
    "convert_and",
    "convert_compare_chain",
    "convert_is",
    "convert_unary",
    "convert_for",
    "convert_format",
    "convert_percent",
    "convert_ifelse",
    "convert_ifexp",
    "convert_jump_if",
    "convert_negative_power",
    "convert_not",
    "python_operand",
    "convert_or",
    "convert_while",
    "is_traced",
    "ld",
    "ldu_dead",
    "list_append",
    "in_place",
    "loop_iter",
    "managed",
    "set_loop_options",
]
