"""Golden before/after tests: each transformer alone on small snippets."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from util import dedent, transform_snippet  # noqa: E402

from dy2st.transformers import conditional_expressions, ifelse, logical_expressions, return_statements  # noqa: E402


def test_return_single_exit():
    out = transform_snippet(
        """
        def f(x):
            '''doc'''
            if x > 0:
                return x * 2
            x = x - 1
            return x
        """,
        return_statements,
    )
    assert out == dedent(
        """
        def f(x):
            \"\"\"doc\"\"\"
            do_return = False
            retval = jst.UNDEFINED_RETURN
            if x > 0:
                retval = x * 2
                do_return = True
            else:
                x = x - 1
                retval = x
                do_return = True
            return retval
        """
    )


def test_return_only_at_end_is_unchanged():
    src = """
        def f(x):
            if x > 0:
                x = x + 1
            return x
        """
    assert transform_snippet(src, return_statements) == dedent(src)


def test_return_in_both_branches_drops_dead_code_and_fall_through():
    out = transform_snippet(
        """
        def f(x):
            if x > 0:
                return 1
            else:
                return 2
        """,
        return_statements,
    )
    assert out == dedent(
        """
        def f(x):
            do_return = False
            retval = jst.UNDEFINED_RETURN
            if x > 0:
                retval = 1
                do_return = True
            else:
                retval = 2
                do_return = True
            return retval
        """
    )


def test_return_falling_off_the_end_sets_none():
    out = transform_snippet(
        """
        def f(x):
            if x > 0:
                return x
            print(x)
        """,
        return_statements,
    )
    assert "else:\n        print(x)\n        retval = None\n        do_return = True\n    return retval" in out


def test_return_in_loop_breaks_and_outer_loop_checks_flag():
    out = transform_snippet(
        """
        def f(xs):
            for row in xs:
                for v in row:
                    if v > 0:
                        return v
                total = 1
            return 0
        """,
        return_statements,
    )
    assert out == dedent(
        """
        def f(xs):
            do_return = False
            retval = jst.UNDEFINED_RETURN
            for row in xs:
                for v in row:
                    if v > 0:
                        retval = v
                        do_return = True
                        break
                if do_return:
                    break
                total = 1
            if not do_return:
                retval = 0
                do_return = True
            return retval
        """
    )


def test_logical_operators_become_thunked_calls():
    out = transform_snippet(
        """
        def f(a, b, c):
            return a and b or not c
        """,
        logical_expressions,
    )
    assert out == dedent(
        """
        def f(a, b, c):
            return jst.convert_or(lambda: jst.convert_and(lambda: a, lambda: b), lambda: jst.convert_not(c))
        """
    )


def test_chained_comparison():
    out = transform_snippet("def f(a, b, c):\n    return a < b <= c\n", logical_expressions)
    assert out.splitlines()[1].strip() == (
        "return jst.convert_compare_chain(lambda: a, (lambda l, r: l < r, lambda: b), (lambda l, r: l <= r, lambda: c))"
    )


def test_single_comparison_untouched():
    src = "def f(a, b):\n    return a < b\n"
    assert transform_snippet(src, logical_expressions) == dedent(src)


def test_ternary():
    out = transform_snippet("def f(x):\n    return x * 2 if x > 0 else x - 1\n", conditional_expressions)
    assert out.splitlines()[1].strip() == "return jst.convert_ifexp(x > 0, lambda: x * 2, lambda: x - 1)"


def test_ifelse_carries_live_outputs_only():
    out = transform_snippet(
        """
        def f(x):
            if x > 0:
                tmp = x + 1
                y = tmp * 2
            else:
                y = -x
            return y
        """,
        ifelse,
    )
    assert out == dedent(
        """
        def f(x):

            def if_body():
                nonlocal y
                tmp = x + 1
                y = tmp * 2

            def else_body():
                nonlocal y
                y = -x
            y, = jst.convert_ifelse(x > 0, if_body, else_body, ('y',), ('y',), 1)
            return y
        """
    )


def test_ifelse_without_state_is_a_plain_call():
    out = transform_snippet(
        """
        def f(x):
            if x > 0:
                print(x)
            return x
        """,
        ifelse,
    )
    assert "    jst.convert_ifelse(x > 0, if_body, None, (), (), 0)\n" in out


def test_ifelse_read_before_write_is_carried_not_output():
    out = transform_snippet(
        """
        def f(x, n):
            if x > 0:
                n = n + 1
                x = x * n
            return x
        """,
        ifelse,
    )
    # x is live after; n only read-before-written (carried so the branch's `nonlocal` finds it)
    assert "x, n = jst.convert_ifelse(x > 0, if_body, None, ('x', 'n'), ('x', 'n'), 1)" in out


def test_ifelse_attribute_write_is_output():
    out = transform_snippet(
        """
        def f(self, x):
            if x > 0:
                self.count = self.count + 1
            return x
        """,
        ifelse,
    )
    # the runtime writes attributes back itself (never leaving an Undefined marker): the call
    # names the path and gives back no value for it
    assert "    jst.convert_ifelse(x > 0, if_body, None, (('self', 'count'),), ('self.count',), 1)\n" in out
