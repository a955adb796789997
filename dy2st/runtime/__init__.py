"""The operators generated code calls. Imports nothing from transformers or analysis.

Generated code reaches this module through one closure cell (named `jst` or a fresh variant),
never through the user's globals.
"""

from dy2st.runtime.control_flow import check_not_escaping, convert_ifelse, convert_ifexp
from dy2st.runtime.iterables import loop_iter
from dy2st.runtime.lists import list_append
from dy2st.runtime.logical import convert_and, convert_compare_chain, convert_not, convert_or
from dy2st.runtime.loops import convert_for, convert_while, set_loop_options
from dy2st.runtime.staging import is_traced
from dy2st.runtime.undefined import UNDEFINED_RETURN, Undefined, UndefinedReturn, ldu

__all__ = [
    "UNDEFINED_RETURN",
    "Undefined",
    "UndefinedReturn",
    "check_not_escaping",
    "convert_and",
    "convert_compare_chain",
    "convert_for",
    "convert_ifelse",
    "convert_ifexp",
    "convert_not",
    "convert_or",
    "convert_while",
    "is_traced",
    "ldu",
    "list_append",
    "loop_iter",
    "set_loop_options",
]
