"""Each pipeline step's `creates` lists every trigger it may add to the tree.

The pipeline walks the tree for node kinds once and then trusts `creates`: a trigger a step
adds without declaring it would make a later step be skipped wrongly. Every step is run here
(none skipped) over hand-written functions and generated programs, and the trigger kinds its
output holds must be ones its input held or ones it declares.
"""

import ast
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings

from dy2st import analysis, ast_util, transformers
from dy2st.testing import fuzz
from dy2st.testing.program_gen import programs
from dy2st.transformers.base import ConversionContext
from dy2st.transformers.naming import Namer

_TRIGGERS = {kind for step in transformers.PIPELINE for kind in step.triggers}

FUNCTIONS = [
    """
    def f(xs, n):
        total = 0
        out = []
        for i in range(n):
            if i > 3 and not xs[i] > 0:
                break
            elif 0 < i < 2:
                continue
            out.append(xs[i] if i else -xs[i])
        else:
            total = -1
        while total < n:
            total += 1
            if total == 5:
                return total
        assert total > 0, "positive"
        return out, total
    """,
    """
    def f(x):
        global counter
        counter = counter + 1
        def inner(y):
            nonlocal x
            x = x + y
            return [v for v in y if v]
        try:
            if x.sum() > 0:
                x = x * 2
        except ValueError:
            pass
        g = lambda z: z or x
        return inner(x), g(x)
    """,
]


def _check_steps(source: str):
    node = ast.parse(textwrap.dedent(source)).body[0]
    namer = Namer.for_tree(node)
    ctx = ConversionContext("<test>", "f", namer, namer.new_symbol("jst"))
    module = ast.Module(body=[node], type_ignores=[])
    for step in transformers.PIPELINE:
        before = ast_util.scan(module).kinds & _TRIGGERS
        if step.needs_analysis:
            analysis.resolve(module)
        module = step.module.transform(module, ctx)
        added = (ast_util.scan(module).kinds & _TRIGGERS) - before
        assert added <= set(step.creates), f"{step.name} adds {added} not in its `creates`"


@pytest.mark.parametrize("source", FUNCTIONS)
def test_creates_covers_hand_written_functions(source):
    _check_steps(source)


@settings(max_examples=60, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(programs(fuzz.DEFAULT_FEATURES))
def test_creates_covers_generated_programs(program):
    for node in ast.parse(program.source).body:
        if isinstance(node, ast.FunctionDef):
            _check_steps(ast.unparse(node))
