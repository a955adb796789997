"""Golden before/after tests of the loops transformer alone: the carried state is exactly the
variables the body writes that are live after the loop or in the next iteration."""

from dy2st.transformers import break_statements, loops
from tests.transformers.util import dedent, transform_snippet


def test_while_carries_live_written_variables_only():
    code = transform_snippet(
        """
        def f(x, tol):
            err = x
            while err > tol:
                tmp = err * 0.5
                err = tmp
                unused = 1
            return err
        """,
        loops,
    )
    assert code == dedent("""
        def f(x, tol):
            err = x

            def loop_test():
                return err > tol

            def loop_body():
                nonlocal err
                tmp = err * 0.5
                err = tmp
                unused = 1
            err, = jst.convert_while(loop_test, loop_body, ('err',), ('err',))
            return err
    """)


def test_for_over_enumerate_goes_through_loop_iter_with_tuple_target():
    code = transform_snippet(
        """
        def f(xs):
            h = 0
            for t, x in enumerate(xs):
                h = h + t * x
            return h, t
        """,
        loops,
    )
    assert code == dedent("""
        def f(xs):
            h = 0

            def loop_body(itr):
                nonlocal h, t
                t, x = itr
                h = h + t * x
            h, t = jst.convert_for(jst.loop_iter(enumerate, xs), loop_body, ('h', 't'), ('h', 't'), None)
            return (h, t)
    """)


def test_for_break_flag_is_carried_and_checked():
    code = transform_snippet(
        """
        def f(xs):
            s = 0
            for x in xs:
                s = s + x
                break
            return s
        """,
        break_statements,
        loops,
    )
    assert ("jst.convert_for(xs, loop_body, ('break_', 's'), ('the break flag', 's'), lambda: jst.convert_not(break_))"
            in code)
    assert "nonlocal break_, s" in code


def test_shadowed_range_is_called_as_is_at_run_time():
    code = transform_snippet(
        """
        def f(range, n):
            for i in range(n):
                pass
        """,
        loops,
    )
    assert "jst.loop_iter(range, n)" in code
