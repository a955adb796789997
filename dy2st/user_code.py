"""What is the user's code and what is a library's: the one place that says so.

A leaf module (it imports nothing of dy2st's), so the runtime, the state walk, guards and the
program cache all ask it without importing each other. Library code (jax, numpy, flax,
equinox, optax, dy2st, scipy, the standard library) runs as it is; everything else, and
dy2st's own reference models and fuzz programs (`dy2st.testing`), is the user's.
"""

from __future__ import annotations

import functools
import sys
import types

LIBRARY_PACKAGES = frozenset(
    {"jax", "jaxlib", "numpy", "flax", "equinox", "optax", "dy2st", "scipy", "ml_dtypes", "chex", "opt_einsum"}
) | frozenset(sys.stdlib_module_names)
NOT_OBJECTS = (type, types.FunctionType, types.MethodType, types.ModuleType, types.BuiltinFunctionType,
                functools.partial)


def top_package(module_name) -> str:
    return (module_name or "").partition(".")[0]


def is_library_module(module_name) -> bool:
    """Code of jax, numpy, ... or dy2st itself, which runs as it is; dy2st's reference models and
    fuzz programs (`dy2st.testing`) are user code."""
    return top_package(module_name) in LIBRARY_PACKAGES and not (module_name or "").startswith("dy2st.testing.")


def is_users_class(cls) -> bool:
    """A class of the user's code, not a library's or a builtin type."""
    return not is_library_module(cls.__module__)


def is_users_object(obj) -> bool:
    """An instance of a class of the user's code, whose attributes a WriteTracker records when
    its method is called."""
    return hasattr(obj, "__dict__") and not isinstance(obj, NOT_OBJECTS) and is_users_class(type(obj))
