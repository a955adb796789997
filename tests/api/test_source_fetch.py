"""The quick source read (linecache + the code's last line) gives what inspect gives, or
stands aside: for every layout below the parsed function is the one `fetch_source` parses."""

import ast
import functools

import pytest

from dy2st import conversion


def plain(x):
    y = x + 1
    return y


def multi_line_header(
    x,
    y=(1,
2),
):
    return x + y[0]


def unreachable_tail(x):
    return x
    y = x * 2  # noqa: F841 - dead code the compiler drops: still part of the function
    if y:
        pass


def trailing_pass(x):
    if x:
        x = 1
    else:
        pass
    # a trailing comment, indented like the body


def dedented_string(x):
    text = """
first
second"""
    return x, text


def dedented_bracket(x):
    return max(
        x,
0)


def ends_in_docstring_like(x):
    x = x + 1
    """
a string statement the compiler drops
"""


def one_liner(x): return x * 2  # noqa: E704


def continued(x):
    return x + \
1


@functools.lru_cache(
    maxsize=None,
)
def decorated(x):
    return x


class Holder:
    def method(self, x):
        def nested(y):
            return y + 1

        return nested(x)

    @staticmethod
    def static(x):
        return -x


def with_nested_class(x):
    class Inner:
        value = 3

    return x + Inner.value


CASES = [
    plain,
    multi_line_header,
    unreachable_tail,
    trailing_pass,
    dedented_string,
    dedented_bracket,
    ends_in_docstring_like,
    one_liner,
    continued,
    decorated.__wrapped__,
    Holder.method,
    Holder.static,
    with_nested_class,
]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__qualname__)
def test_quick_source_parses_like_inspect(fn):
    source, first, filename = conversion.fetch_source(fn)
    quick = conversion._quick_source(fn)
    if quick is None:
        return  # it stood aside: conversion takes the inspect path
    quick_source, quick_first, quick_filename, tree = quick
    assert (quick_first, quick_filename) == (first, filename)
    expected = ast.increment_lineno(ast.parse(source), first - 1)  # the quick parse numbers lines as the file
    assert ast.dump(tree, include_attributes=True) == ast.dump(expected, include_attributes=True)


@pytest.mark.parametrize("fn", [plain, multi_line_header, unreachable_tail, trailing_pass, Holder.method])
def test_quick_source_taken_for_ordinary_layouts(fn):
    assert conversion._quick_source(fn) is not None


def test_quick_source_stands_aside_for_lambdas_and_wrappers():
    assert conversion._quick_source(lambda x: x) is None
    assert conversion._quick_source(decorated) is None


def test_the_printed_translation_is_the_one_compiled_after_the_file_changes(tmp_path):
    """`.code` translates the source text read for the conversion again (the tree is not
    kept): a file edited since still shows what runs."""
    import importlib.util

    path = tmp_path / "edited.py"
    path.write_text("def f(x):\n    if x > 0:\n        x = x + 1\n    return x\n")
    spec = importlib.util.spec_from_file_location("edited", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    converted = conversion.convert(module.f)
    path.write_text("def f(x):\n    return x - 100\n")
    printed = conversion.source_of(converted)
    assert "convert_ifelse" in printed and "x - 100" not in printed
    assert converted(1) == 2


# -- lambdas whose source lines do not parse alone, or hold several of the same parameters ------
def _lambdas_on_a_header():
    found = []
    for f in (lambda x: x * 2 if x.sum() > 0 else x - 1, lambda x: x + 1):
        found.append(f)
    return found


def _lambdas_on_a_continuation_line():
    return [g for g in (lambda x: x - 1,
                        lambda x: x * 10 if x.sum() > 0 else x)]


_PAIR = (lambda x: x * 3, lambda x: x + 7)
_K = 3
_NESTED = lambda x: (lambda x: x * _K)(x) + 1  # noqa: E731


@pytest.mark.parametrize("fn", [*_lambdas_on_a_header(), *_lambdas_on_a_continuation_line(), *_PAIR, _NESTED])
def test_a_lambda_is_found_by_its_position_where_its_line_is_not_enough(fn):
    """A lambda on a `for` header, on a continuation line, beside another of its parameters,
    or inside another: its file's parse, by its instructions' positions (these raised
    "Cannot parse the source line of this lambda" / "Cannot tell which lambda")."""
    import jax
    import jax.numpy as jnp

    import dy2st

    static = dy2st.to_static(fn)
    for x in (jnp.arange(3.0), -jnp.arange(3.0)):
        for _ in range(2):
            assert jnp.array_equal(static(x), fn(x))
        assert jnp.array_equal(jax.jit(static)(x), fn(x))
