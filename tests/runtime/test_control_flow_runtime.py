"""Runtime operators called directly, with Python and traced values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dy2st import runtime
from dy2st.errors import BranchOutputError


class Cell:
    """State as attributes of an object the branches close over, always named `cell`: the
    runtime reaches it through their cells (`state_cells`) and writes the attributes back."""

    def __init__(self, **values):
        self.__dict__.update(values)


def make_if(cell, names, true_updates, false_updates):
    """(if_body, else_body, paths, display names) for state `names` of `cell`."""
    def if_body():
        for k, fn in true_updates.items():
            setattr(cell, k, fn(cell))

    def else_body():
        for k, fn in false_updates.items():
            setattr(cell, k, fn(cell))

    return if_body, else_body, tuple(("cell", n) for n in names), names


def test_python_predicate_runs_one_branch():
    cell = Cell(y=1)
    branches = make_if(cell, ("y",), {"y": lambda c: 2}, {"y": lambda c: 3})
    assert runtime.convert_ifelse(True, *branches, 1) == ()  # attributes: written back, not given back
    assert cell.y == 2
    runtime.convert_ifelse([], *branches, 1)  # Python truthiness
    assert cell.y == 3


def test_plain_names_are_reached_through_the_branches_cells():
    y, k = 1, "kept"

    def if_body():
        nonlocal y
        y = y + len(k) - 3  # reads k: a branch reaches every state variable (here by its cell)

    def else_body():
        nonlocal y
        del y

    assert runtime.convert_ifelse(True, if_body, else_body, ("y", "k"), ("y", "k"), 2) == (2, "kept")
    assert y == 2
    (y, k) = runtime.convert_ifelse(False, if_body, else_body, ("y", "k"), ("y", "k"), 2)
    assert isinstance(y, runtime.Undefined) and y.name == "y" and k == "kept"


def test_traced_predicate_stages_cond_and_keeps_equal_python_values():
    def f(x):
        cell = Cell(y=x, k=5)
        branches = make_if(cell, ("y", "k"), {"y": lambda c: c.y * 2}, {"y": lambda c: c.y - 1})
        runtime.convert_ifelse(x.sum() > 0, *branches, 2)
        assert cell.k == 5 and isinstance(cell.k, int)  # unchanged Python value stays Python
        return cell.y

    x = jnp.arange(3.0)
    np.testing.assert_allclose(jax.jit(f)(x), x * 2)
    np.testing.assert_allclose(jax.jit(f)(-x - 1), -x - 2)


def test_traced_predicate_promotes_python_scalars():
    def f(x):
        cell = Cell(n=0)
        branches = make_if(cell, ("n",), {"n": lambda c: 1}, {"n": lambda c: 2.5})
        runtime.convert_ifelse(x > 0, *branches, 1)
        return cell.n

    assert jax.jit(f)(1.0) == 1.0
    assert jax.jit(f)(-1.0) == 2.5


def test_mismatch_raises_branch_output_error():
    def f(x):
        cell = Cell(y=x)
        branches = make_if(cell, ("y",), {"y": lambda c: c.y[:1]}, {})
        return runtime.convert_ifelse(x.sum() > 0, *branches, 1)

    with pytest.raises(BranchOutputError, match="'y' is float32\\[1\\] in the if branch but float32\\[3\\]"):
        jax.jit(f)(jnp.ones(3))


def _counted_if(cell, names, true_updates, false_updates, runs):
    """`make_if` whose branches count their Python-side executions in `runs`."""
    if_body, else_body, paths, names = make_if(cell, names, true_updates, false_updates)

    def counted(side, body):
        def run():
            runs.append(side)
            assert cell is not None  # closes over `cell`, as generated branches do
            body()

        return run

    return counted("if", if_body), counted("else", else_body), paths, names


def test_cond_with_agreeing_types_traces_each_branch_once():
    runs = []

    def f(x):
        cell = Cell(y=x)
        branches = _counted_if(cell, ("y",), {"y": lambda c: c.y * 2}, {"y": lambda c: c.y - 1.0}, runs)
        runtime.convert_ifelse(x.sum() > 0, *branches, 1)
        return cell.y

    x = jnp.arange(3.0)
    np.testing.assert_allclose(jax.jit(f)(x), x * 2)
    assert runs == ["if", "else"]
    np.testing.assert_allclose(jax.jit(f)(-x - 1), -x - 2)


def test_cond_whose_first_branch_needs_promotion_is_built_again():
    runs = []

    def f(x):
        cell = Cell(y=x.sum())  # a Python 0 in the if branch against a float32 in the else branch
        branches = _counted_if(cell, ("y",), {"y": lambda c: 0}, {"y": lambda c: c.y + 1}, runs)
        runtime.convert_ifelse(x.sum() > 0, *branches, 1)
        return cell.y

    x = jnp.arange(3.0, dtype=jnp.float32)
    out = jax.jit(f)(x)
    assert out.dtype == jnp.float32 and not out.weak_type and out == 0.0
    assert runs == ["if", "else", "if", "else"]
    assert jax.jit(f)(-x) == -2.0


def test_scalar_condition_is_not_reshaped():
    def f(x):
        cell = Cell(y=x)
        branches = make_if(cell, ("y",), {"y": lambda c: c.y * 2}, {})
        runtime.convert_ifelse(x.sum() > 0, *branches, 1)
        return cell.y

    assert "reshape" not in str(jax.make_jaxpr(f)(jnp.ones(3)))


def test_and_or_short_circuit_python():
    evaluated = []

    def right():
        evaluated.append(True)
        return "right"

    assert runtime.convert_and(lambda: 0, right) == 0
    assert runtime.convert_or(lambda: "left", right) == "left"
    assert evaluated == []
    assert runtime.convert_and(lambda: 1, right) == "right"
    assert runtime.convert_or(lambda: None, right) == "right"


@pytest.mark.parametrize("a", [True, False])
@pytest.mark.parametrize("b", [True, False])
def test_and_or_traced_values(a, b):
    f_and = jax.jit(lambda p, q: runtime.convert_and(lambda: p, lambda: q))
    f_or = jax.jit(lambda p, q: runtime.convert_or(lambda: p, lambda: q))
    assert bool(f_and(a, b)) == (a and b)
    assert bool(f_or(a, b)) == (a or b)


def test_and_traced_left_python_right_value():
    # eager: (x > 0) and 5 -> 5 if x > 0 else False; staged gives the same values (promoted)
    f = jax.jit(lambda x: runtime.convert_and(lambda: x > 0, lambda: 5))
    assert f(1.0) == 5
    assert f(-1.0) == 0


def test_not_and_compare_chain():
    assert runtime.convert_not(0) is True
    assert bool(jax.jit(lambda x: runtime.convert_not(x > 0))(-1.0))
    calls = []

    def operand(v):
        def thunk():
            calls.append(v)
            return v

        return thunk

    lt = lambda l, r: l < r  # noqa: E731
    assert runtime.convert_compare_chain(operand(3), (lt, operand(1)), (lt, operand(5))) is False
    assert calls == [3, 1]  # the third operand is never evaluated
    traced = jax.jit(lambda x: runtime.convert_compare_chain(lambda: 0.0, (lt, lambda: x), (lt, lambda: 10.0)))
    assert bool(traced(5.0)) and not bool(traced(11.0)) and not bool(traced(-1.0))


def test_an_unbound_state_variable_reads_as_an_undefined_marker():
    def f():
        def if_body():
            nonlocal never_bound
            never_bound = 1

        (never_bound,) = runtime.convert_ifelse(False, if_body, None, ("never_bound",), ("never_bound",), 1)
        return never_bound

    value = f()
    assert isinstance(value, runtime.Undefined) and value.name == "never_bound"
    assert value.origin is not None and value.origin.function_name == "f"  # the `if`'s line
    with pytest.raises(NameError, match="never_bound"):
        value + 1


def test_runtime_imports_nothing_from_transformers_or_analysis():
    """One-way doors: generated code reaches the runtime; the runtime never reaches back."""
    import ast
    from pathlib import Path

    forbidden = ("dy2st.transformers", "dy2st.analysis", "dy2st.conversion", "dy2st.api")
    for path in Path(runtime.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(forbidden), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith(forbidden), f"{path.name} imports {alias.name}"
