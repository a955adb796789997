"""dy2st: eager JAX code with Python control flow, run as one compiled XLA program.

    import dy2st

    @dy2st.to_static
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1
"""

from dy2st import errors
from dy2st.api import StaticFunction, not_to_static, to_code, to_static
from dy2st.config import VERSION, enable_to_static
from dy2st.errors import Dy2StaticError
from dy2st.explain import Report
from dy2st.api import explain  # (after the module of the same name: the name is the function)
from dy2st.export import load, save
from dy2st.input_spec import InputSpec
from dy2st.program import ConcreteProgram
from dy2st.runtime.loops import set_loop_options
from dy2st.settings import set_code_level, set_verbosity

__version__ = VERSION

__all__ = [
    "ConcreteProgram",
    "Dy2StaticError",
    "InputSpec",
    "Report",
    "StaticFunction",
    "enable_to_static",
    "errors",
    "explain",
    "load",
    "not_to_static",
    "save",
    "set_code_level",
    "set_loop_options",
    "set_verbosity",
    "to_code",
    "to_static",
]
