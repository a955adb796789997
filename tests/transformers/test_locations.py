"""Every node of the converted code has a location of its own when it is compiled.

The transformers locate what they make (`Transformer.visit`, `copy_location_recursive`, and the
steps that change a located node in place), so `conversion._compile_located` compiles without
the walk that fills in missing locations (a tenth of a long function's conversion). A node left
without one would still compile, through that walk, but at its parent's line, and slower: here
the walk must not run at all, over generated programs of every construct the fuzzers draw.
"""

import ast

import pytest

from dy2st import ast_util, conversion
from dy2st.testing import fuzz
from dy2st.testing.real_program_gen import draw_program

_LOCATED = (ast.expr, ast.stmt, ast.excepthandler, ast.keyword, ast.arg)


@pytest.fixture
def no_filling_in(monkeypatch):
    def refuse(tree):
        missing = [ast.dump(n)[:80] for n in ast_util.walk(tree)
                   if isinstance(n, _LOCATED) and getattr(n, "lineno", None) is None]
        raise AssertionError(f"nodes without a location: {missing[:5]}")

    monkeypatch.setattr(ast_util, "fix_missing_locations", refuse)


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_generated_programs_compile_fully_located(seed, no_filling_in):
    module = fuzz.load_module(draw_program(seed).source)
    conversion.clear_cache()
    converted = conversion.convert(module.f).__dy2st_converted__
    for node in ast_util.walk(converted._retranslate()):  # the translation it compiled, made again
        if isinstance(node, _LOCATED):
            assert node.lineno is not None and node.end_lineno is not None, ast.dump(node)[:80]


def _every_statement(x, xs, obj):
    total = 0
    for i in range(3):
        if x.sum() > i:
            continue
        while total < 2:
            total += 1
            if total > 5:
                break
        else:
            total -= 1
    try:
        y = [v * 2 for v in xs if v is not None]
    except (ValueError, TypeError) as err:
        raise RuntimeError("no") from err
    finally:
        obj.done = True
    with open(__file__) as handle:
        del handle
    f = lambda v, *rest, k=1, **kw: v + k  # noqa: E731
    assert x is not None, "x"
    match total:
        case 0 | 1:
            z = f(x)
        case _:
            z = -x if x.sum() > 0 else x
    return z, y, f"{total!r}"


def test_every_statement_kind_compiles_fully_located(no_filling_in):
    conversion.clear_cache()
    conversion.convert(_every_statement)
