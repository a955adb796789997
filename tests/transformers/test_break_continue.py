"""Golden before/after tests of the break, continue and list-append transformers alone (the code
after an `if` whose branch always jumps goes into its other side: `jump_flags._lift`),
plus behaviour of the full pipeline on 0, 1 and many iterations."""

import ast
import textwrap

import pytest

from dy2st import analysis, conversion
from dy2st.transformers import break_statements, continue_statements, lists, return_statements
from dy2st.transformers.base import ConversionContext
from dy2st.transformers.naming import Namer


def transformed(fn, *steps, analyse=False):
    """Source of `fn` after only the given transformer modules."""
    source, first, filename = conversion.fetch_source(fn)
    node = conversion._parse_function(fn, source, first, filename)
    namer = Namer.for_tree(node)
    ctx = ConversionContext(filename, fn.__name__, namer, namer.new_symbol("jst"))
    module = ast.Module(body=[node], type_ignores=[])
    for step in steps:
        if analyse:
            analysis.resolve(module)
        module = step.transform(module, ctx)
    return conversion.to_source(module.body[0]).strip()


def golden(text):
    return textwrap.dedent(text).strip()


def test_break_in_while_becomes_flag_in_condition():
    def f(x, n):
        i = 0
        while i < n:
            if x[i] > 0:
                break
            i += 1
        else:
            i = -1
        return i

    assert transformed(f, break_statements) == golden("""
        def f(x, n):
            i = 0
            break_ = False
            while not break_ and i < n:
                if x[i] > 0:
                    break_ = True
                else:
                    i += 1
            if not break_:
                i = -1
            return i
    """)


def test_break_in_for_guards_rest_and_marks_loop():
    def f(xs):
        for x in xs:
            y = x
            if y > 0:
                z = 1
                break
                z = 2
            y = y + 1
        return y

    assert transformed(f, break_statements) == golden("""
        def f(xs):
            break_ = False
            for x in xs:
                y = x
                if y > 0:
                    z = 1
                    break_ = True
                else:
                    y = y + 1
            return y
    """)


def test_loop_else_without_break_follows_loop():
    def f(xs):
        for x in xs:
            pass
        else:
            x = 0
        return x

    assert transformed(f, break_statements) == golden("""
        def f(xs):
            for x in xs:
                pass
            x = 0
            return x
    """)


def test_nested_loops_get_their_own_flags():
    def f(xs):
        for x in xs:
            for v in x:
                if v:
                    break
            else:
                break
        return x

    assert transformed(f, break_statements) == golden("""
        def f(xs):
            break_ = False
            for x in xs:
                break__1 = False
                for v in x:
                    if v:
                        break__1 = True
                if not break__1:
                    break_ = True
            return x
    """)


def test_continue_becomes_flag_reset_each_iteration():
    def f(xs):
        total = 0
        for x in xs:
            if x < 0:
                continue
            total += x
        return total

    assert transformed(f, continue_statements) == golden("""
        def f(xs):
            total = 0
            for x in xs:
                continue_ = False
                if x < 0:
                    continue_ = True
                else:
                    total += x
            return total
    """)


def test_return_in_loop_goes_through_break_flag():
    def f(xs):
        for x in xs:
            if x > 0:
                return x
        return 0

    code = transformed(f, return_statements, break_statements)
    assert "break" not in code.replace("break_", "")
    assert "do_return = True" in code and "break_ = True" in code


def test_list_append_becomes_assignment_for_locals_and_parameters_only():
    # A closure's list is not rebound: its receiver is marked for the runtime (`in_place`).
    outer = []

    def f(xs, param):
        outs = []
        for x in xs:
            outs.append(x)
            param.append(x)
            outer.append(x)
        return outs

    assert transformed(f, lists, analyse=True) == golden("""
        def f(xs, param):
            outs = []
            for x in xs:
                outs = jst.list_append(outs, x, 'outs')
                param = jst.list_append(param, x, 'param')
                jst.in_place(outer, 'outer.append()').append(x)
            return outs
    """)


def python_loops(xs, n):
    hits = []
    total = 0
    for x in xs:
        if x < 0:
            continue
        if x > 10:
            break
        total += x
        hits.append(x)
    i = 0
    while i < n:
        i += 1
        if i == 3:
            continue
        total += i
    return total, hits


@pytest.mark.parametrize("xs", [[], [1], [1, -2, 3, 11, 4], [-1, -2]])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_python_valued_loops_keep_exact_python_semantics(xs, n):
    # Python values stay Python: the converted function gives exactly what eager Python gives
    total, hits = conversion.convert(python_loops)(xs, n)
    assert (total, hits) == python_loops(xs, n)
