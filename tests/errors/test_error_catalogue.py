"""The error catalogue: each bad input, the error it raises, the user's file:line, the advice.

Every case asserts the error type, the user's file name and the marked line (found through its
`# <marker>` comment, never a hard-coded number), the source line, and the key words of the
advice. docs/limitations.md lists the same cases with their fixes.
"""

import importlib.util
import os
import sys
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import (
    BranchOutputError,
    BuiltinError,
    ConversionError,
    Dy2StaticError,
    InputSignatureError,
    PredicateError,
    ScopeWriteError,
    StagedBranchError,
    StagedInTryError,
    UnsupportedSyntaxError,
)
from dy2st.testing import check_equivalent

from catalogue_helpers import assert_points_at, full_text, line_of

POS = jnp.array([1.0, 2.0, 3.0])
NEG = jnp.array([-1.0, -2.0, -3.0])
counter = 0
total = jnp.zeros(())


# -- rejected up front by the fence ---------------------------------------------------------
def uses_yield(x):
    for row in x:
        yield row * 2  # E:yield


def uses_yield_from(x):
    yield from [x, x]  # E:yield_from


def has_nested_async(x):
    async def inner():  # E:async_def
        return x

    return x


def del_in_if(x):
    y = x * 2
    if x.sum() > 0:
        del y  # E:del_if
        y = x
    return y


def test_del_in_if_converts():
    # issue 13: `del` in an `if` is no longer refused; each branch matches eager.
    for x in (jnp.ones(2), -jnp.ones(2)):
        assert jnp.allclose(dy2st.to_static(del_in_if)(x), del_in_if(x))


def del_in_for(x):
    tmp = x
    for i in range(2):
        x = x + tmp  # read by the next iteration: the del cannot be dropped
        tmp = x * i
        del tmp  # E:del_for
    return x


@pytest.mark.parametrize(
    "fn, marker, words",
    [
        (uses_yield, "E:yield", ["generators", "list"]),
        (uses_yield_from, "E:yield_from", ["yield from", "list"]),
        (has_nested_async, "E:async_def", ["async def", "plain `def`"]),
        (del_in_for, "E:del_for", ["del tmp", "after the loop"]),
    ],
)
def test_fence_rejects(fn, marker, words):
    with pytest.raises(UnsupportedSyntaxError) as info:
        dy2st.to_static(fn)(POS)
    assert_points_at(info.value, fn, marker, *words)


async def async_top(x):  # E:async_top
    return x


def test_async_function_rejected():
    with pytest.raises(UnsupportedSyntaxError) as info:
        dy2st.to_code(async_top)
    assert_points_at(info.value, async_top, "E:async_top", "async def", "plain `def`")


# -- writes to global/nonlocal variables ----------------------------------------------------
def global_traced_write(x):
    global total
    total = x.sum()  # E:global_write
    return x


def global_write_in_staged_if(x):
    global total
    if x.sum() > 0:
        total += x.sum()  # E:global_if
    return x


def global_python_write_ok(x):
    global counter
    counter += 1
    return x * 2


def make_nonlocal_writer():
    seen = None

    def write(x):
        nonlocal seen
        seen = x * 2  # E:nonlocal_write
        return x

    return write


def helper_writes_global(x):
    global total
    total = x * 3  # E:helper_global
    return x


def calls_global_writer(x):
    return helper_writes_global(x) + 1


@pytest.mark.parametrize(
    "fn, where, marker, kind",
    [
        (global_traced_write, global_traced_write, "E:global_write", "global"),
        (global_write_in_staged_if, global_write_in_staged_if, "E:global_if", "global"),
        (make_nonlocal_writer(), make_nonlocal_writer, "E:nonlocal_write", "nonlocal"),
        (calls_global_writer, helper_writes_global, "E:helper_global", "global"),
    ],
)
def test_traced_write_to_outer_scope(fn, where, marker, kind):
    with pytest.raises(ScopeWriteError) as info:
        dy2st.to_static(fn)(POS)
    assert_points_at(info.value, where, marker, kind, "leaked tracer", "return the value")


def test_python_value_write_to_global_is_fine():
    before = counter
    assert float(dy2st.to_static(global_python_write_ok)(POS).sum()) == 12.0
    assert counter == before + 1  # once, at trace time


# -- staged control flow inside try ---------------------------------------------------------
def staged_if_in_try(x):
    try:
        if x.sum() > 0:
            y = x * 2
        else:
            y = x
    except ValueError:
        y = x
    return y


def staged_if_whose_side_raises_in_try(x, table):
    try:
        if x.sum() > 0:  # E:try_if
            y = x * table["scale"]
        else:
            y = x * table["shift"]  # a KeyError while tracing: eagerly only on data that takes this side
    except KeyError:
        y = x
    return y


def python_if_in_try(x, n):
    try:
        if n > 0:
            y = x * n
        else:
            y = x
    except ValueError:
        y = x
    return y


def test_staged_if_in_try_converts():
    # tracing neither side raises, so eagerly no data makes the `except` run either
    for x in (POS, -POS):
        check_equivalent(staged_if_in_try, x)


def test_staged_if_in_try_whose_side_raises_is_rejected():
    with pytest.raises(StagedInTryError) as info:
        dy2st.to_static(staged_if_whose_side_raises_in_try)(POS, {"scale": 2.0})
    assert isinstance(info.value, UnsupportedSyntaxError)
    assert_points_at(info.value, staged_if_whose_side_raises_in_try, "E:try_if", "raised KeyError", "may catch that",
                     "move the `try`")


def test_python_if_in_try_is_fine():
    f = dy2st.to_static(python_if_in_try)
    assert float(f(POS, 2).sum()) == 12.0 and float(f(POS, 0).sum()) == 6.0


# -- staged branches that cannot merge -------------------------------------------------------
def shape_mismatch(x):
    if x.sum() > 0:  # E:shape
        y = x
    else:
        y = x[:2]
    return y


def dtype_mismatch(x):
    if x.sum() > 0:  # E:dtype
        y = x
    else:
        y = x.astype(jnp.int32)
    return y


def one_branch_only(x):
    d = {}
    if x.sum() > 0:  # E:one_branch
        d["y"] = x
    return d["y"]


def structure_mismatch(x):
    if x.sum() > 0:  # E:structure
        y = (x, x)
    else:
        y = x
    return y


def array_predicate(x):
    if x > 0:  # E:predicate
        x = x * 2
    return x


def array_assert(x):
    assert x > 0  # E:array_assert
    return x


@pytest.mark.parametrize(
    "fn, marker, error, words",
    [
        (shape_mismatch, "E:shape", BranchOutputError, ["'y'", "float32[3]", "float32[2]", "same shape"]),
        (dtype_mismatch, "E:dtype", BranchOutputError, ["'y'", "int32", "cast"]),
        (one_branch_only, "E:one_branch", BranchOutputError, ["d['y']", "if branch only", "assign"]),
        (structure_mismatch, "E:structure", BranchOutputError, ["'y'", "structure"]),
        (array_predicate, "E:predicate", PredicateError, ["shape (3,)", ".all()"]),
        (array_assert, "E:array_assert", PredicateError, ["shape (3,)", "assert (x > 0).all()"]),
    ],
)
def test_staging_errors(fn, marker, error, words):
    with pytest.raises(error) as info:
        dy2st.to_static(fn)(POS)
    assert_points_at(info.value, fn, marker, *words)


# -- run-time asserts -------------------------------------------------------------------------
def runtime_assert(x):
    y = x * 2
    assert y.sum() > 0, "y must be positive"  # E:assert
    return y


def runtime_assert_no_message(x):
    assert x.min() > 0  # E:assert_plain
    return x


def runtime_assert_in_branch(x):
    if x[0] > -2:
        assert x.sum() > 0, f"sum of {x.shape[0]} values"  # E:assert_branch
    return x


def test_runtime_assert_fails_with_users_line():
    f = dy2st.to_static(runtime_assert)
    assert float(f(POS).sum()) == 12.0
    with pytest.raises(AssertionError) as info:
        f(NEG)
    assert str(info.value).startswith("y must be positive")
    assert_points_at(info.value, runtime_assert, "E:assert", "assert failed when the program ran")
    with pytest.raises(AssertionError):  # again, now from the cache
        f(NEG)


def test_runtime_assert_without_message():
    with pytest.raises(AssertionError) as info:
        dy2st.to_static(runtime_assert_no_message)(NEG)
    assert_points_at(info.value, runtime_assert_no_message, "E:assert_plain", "assertion failed")


def test_runtime_assert_inside_staged_branch():
    f = dy2st.to_static(runtime_assert_in_branch)
    assert float(f(POS).sum()) == 6.0
    assert float(f(jnp.array([-3.0, -1.0])).sum()) == -4.0  # the branch is not taken
    with pytest.raises(AssertionError) as info:
        f(jnp.array([-1.0, -1.0]))
    assert_points_at(info.value, runtime_assert_in_branch, "E:assert_branch", "sum of 2 values")


def test_runtime_assert_through_outer_jit():
    f = jax.jit(dy2st.to_static(runtime_assert))
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        f(NEG)
    assert_points_at(info.value, runtime_assert, "E:assert", "y must be positive", "AssertionError")


def python_assert(x, n):
    assert n > 0, "n must be positive"  # E:py_assert
    return x * n


def test_python_assert_is_a_plain_assert():
    with pytest.raises(AssertionError, match="n must be positive") as info:
        dy2st.to_static(python_assert)(POS, 0)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].lineno == line_of(python_assert, "E:py_assert")
    assert frames[-1].filename == __file__


# -- errors of user code or JAX keep their type, gain the user's line ---------------------------
def matmul_in_branch(x):
    if x.sum() > 0:
        y = x @ jnp.ones((2, 2))  # E:matmul
    else:
        y = x
    return y


def add_string(x):
    return x + "a"  # E:add_string


def helper_with_bad_shape(x):
    if x[0] > 0:
        return x.reshape(2, 2)  # E:helper_reshape
    return x


def calls_bad_helper(x):
    return helper_with_bad_shape(x) * 2


def comprehension_filter(x):
    return [v for v in x if v > 0]  # E:comprehension


@dy2st.not_to_static
def unconverted_helper(x):
    if x.sum() > 0:  # E:unconverted
        return x
    return -x


def calls_unconverted(x):
    return unconverted_helper(x)


class Scaler:
    def scale(self, x):
        return x * jnp.ones(4)  # E:method


def calls_method(x):
    return Scaler().scale(x)


def calls_lambda(x):
    bad = lambda v: jnp.dot(v, jnp.ones(5))  # E:lambda
    return bad(x)


@pytest.mark.parametrize("fn, words", [(matmul_in_branch, "dot_general"), (calls_bad_helper, "reshape")])
def test_a_builtin_error_in_a_staged_branch_is_raised_when_the_data_takes_it(fn, words):
    static = dy2st.to_static(fn)
    for _ in range(2):
        np.testing.assert_array_equal(static(NEG), fn(NEG))  # the side not taken: eager's value
        with pytest.raises(TypeError, match=words) as info:  # taken: eager's error, when it runs
            static(POS)
        assert not isinstance(info.value, Dy2StaticError)
    # inside a user's jax.jit there is no program of dy2st's to raise it: a refusal, of its type
    with pytest.raises(dy2st.errors.StagedBranchError) as info:
        jax.jit(dy2st.to_static(fn))(POS)
    assert isinstance(info.value, TypeError) and isinstance(info.value.__cause__, TypeError)
    assert str(info.value).startswith('File "') and words in str(info.value)
    assert "if branch" in str(info.value) and "To fix:" in str(info.value)


def reads_unassigned_in_untaken_branch(x, flag=False):
    if flag:
        t = x * 2
    elif x.sum() > 100:  # E:unassigned_in_branch
        x = t + 1
    return x


def test_a_variable_no_path_assigned_read_in_a_staged_branch_is_eagers():
    # Fuzz seed 130964 (reduced): eagerly the side is not taken here, so `t` is never read; the
    # staged side is traced anyway and read `t`, which raised a raw NameError (UnboundLocalError).
    assert reads_unassigned_in_untaken_branch(POS) is POS
    static = dy2st.to_static(reads_unassigned_in_untaken_branch)
    np.testing.assert_array_equal(static(POS), POS)
    with pytest.raises(UnboundLocalError, match="'t'"):
        reads_unassigned_in_untaken_branch(POS * 100)
    with pytest.raises(UnboundLocalError, match="'t'"):  # taken: eager's error, when it runs
        static(POS * 100)
    with pytest.raises(dy2st.errors.StagedBranchError) as info:  # no program of dy2st's: refused
        jax.jit(dy2st.to_static(reads_unassigned_in_untaken_branch))(POS)
    assert isinstance(info.value, NameError) and isinstance(info.value.__cause__, NameError)
    assert_points_at(info.value, reads_unassigned_in_untaken_branch, "E:unassigned_in_branch", "'t'",
                     "if branch", "assign the variable on every path before this `if`")


@pytest.mark.parametrize(
    "fn, where, marker, error, words",
    [
        (add_string, add_string, "E:add_string", TypeError, []),
        (calls_method, Scaler.scale, "E:method", TypeError, ["broadcast"]),
        (calls_lambda, calls_lambda, "E:lambda", TypeError, ["dot"]),
    ],
)
def test_user_and_jax_errors_keep_type_and_gain_note(fn, where, marker, error, words):
    with pytest.raises(error) as info:
        dy2st.to_static(fn)(POS)
    assert not isinstance(info.value, Dy2StaticError)
    assert_points_at(info.value, where, marker, "(dy2st)", *words)


def list_index_of_array(x):
    xs = [1.0, x.sum()]
    return xs.index(x.sum())  # E:list_index


@pytest.mark.parametrize(
    "fn, where, marker, words",
    [
        (comprehension_filter, comprehension_filter, "E:comprehension", ["jnp.where", "comprehension"]),
        (calls_unconverted, unconverted_helper, "E:unconverted", ["not_to_static"]),
        (list_index_of_array, list_index_of_array, "E:list_index", ["xs.index(v)", "jnp.argmax"]),
    ],
)
def test_python_needing_a_concrete_traced_value_is_a_traced_value_error(fn, where, marker, words):
    with pytest.raises(dy2st.errors.TracedValueError) as info:
        dy2st.to_static(fn)(POS)
    assert isinstance(info.value, TypeError)  # as JAX's own error was
    assert isinstance(info.value.__cause__, jax.errors.ConcretizationTypeError)
    assert str(info.value).startswith('File "')
    assert_points_at(info.value, where, marker, "concrete value of a traced array", *words)


def masked_mean(x):
    d = x - 1.0
    return jnp.mean(d[x > 0] ** 2)  # E:mask


def zeroes_by_mask(x):
    return x.at[x < 0].set(0.0)  # E:at_mask


@pytest.mark.parametrize("fn, marker", [(masked_mean, "E:mask"), (zeroes_by_mask, "E:at_mask")])
def test_a_boolean_mask_of_traced_values_is_a_traced_value_error_saying_how_to_mask(fn, marker):
    """As under jax.jit: the result's shape would be the data's; the advice keeps the shape."""
    with pytest.raises(dy2st.errors.TracedValueError) as info:
        dy2st.to_static(fn)(POS)
    assert isinstance(info.value.__cause__, jax.errors.NonConcreteBooleanIndexError)
    assert_points_at(info.value, fn, marker, "a boolean mask of traced values indexes an array here",
                     "jnp.where(mask, x, 0)", "where=mask")


def picks_the_best(cands):
    best, best_i = jnp.inf, 0
    for i, c in enumerate(cands):
        if jnp.sum(c ** 2) < best:
            best, best_i = jnp.sum(c ** 2), i
    return cands[best_i]  # E:index


def test_a_list_indexed_by_a_position_the_data_decides_says_to_index_an_array():
    """Found by a model-code probe: the message blamed code dy2st runs as it is."""
    with pytest.raises(dy2st.errors.TracedValueError) as info:
        dy2st.to_static(picks_the_best)([POS, -POS, POS * 2])
    assert_points_at(info.value, picks_the_best, "E:index", "used where Python needs a concrete int",
                     "is a 0-d array (the numbers rule)", "jnp.stack(items)[i]")


def test_dy2st_frames_are_hidden_from_tracebacks():
    with pytest.raises(TypeError) as info:
        dy2st.to_static(add_string)(POS)
    files = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    package = os.path.dirname(dy2st.__file__)
    assert not [f for f in files if f.startswith(package)], files
    assert line_of(add_string, "E:add_string") in [f.lineno for f in traceback.extract_tb(info.value.__traceback__)]
    # an error a staged side raises when the program runs: the user's line, and of dy2st's
    # frames only the one that re-raised it (the dispatcher's, or the front's miss on a first call)
    with pytest.raises(TypeError) as info:
        dy2st.to_static(matmul_in_branch)(POS)
    entries = traceback.extract_tb(info.value.__traceback__)
    assert [f.name for f in entries if f.filename.startswith(package)] in ([], ["matmul_in_branch"], ["miss"])
    assert line_of(matmul_in_branch, "E:matmul") in [f.lineno for f in entries]


def test_traceback_filtering_can_be_turned_off(tmp_path):
    import subprocess

    script = tmp_path / "show.py"
    script.write_text(
        "import traceback, jax.numpy as jnp, dy2st\n"
        "def f(x):\n"
        "    return x @ jnp.ones((2, 2))\n"
        "try:\n"
        "    dy2st.to_static(f)(jnp.ones(3))\n"
        "except TypeError as e:\n"
        "    print(sum('/dy2st/' in fr.filename for fr in traceback.extract_tb(e.__traceback__)))\n"
    )
    root = os.path.dirname(os.path.dirname(dy2st.__file__))
    counts = {}
    for mode in ("on", "off"):
        env = dict(os.environ, PYTHONPATH=root, DY2ST_TRACEBACK_FILTERING=mode, JAX_PLATFORMS="cpu")
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
        counts[mode] = int(out.stdout.strip().splitlines()[-1])
    assert counts["on"] == 0 and counts["off"] > 0


# -- builtins on traced values ----------------------------------------------------------------
def int_of_vector(x):
    return int(x)  # E:int


def float_of_matrix(x):
    return float(x.reshape(3, 1))  # E:float


def max_with_key(x):
    return max(x, x[1:], key=lambda v: v.sum())  # E:max_key


def max_of_matrix(x):
    return max(jnp.stack([x, x]))  # E:max_2d


def range_float_bound(x):
    n = x.sum()
    return list(range(n))  # E:range_float


def range_iterated_in_python(x):
    n = x.sum().astype(jnp.int32)
    return list(range(n))  # E:range_list


@pytest.mark.parametrize(
    "fn, marker, words",
    [
        (int_of_vector, "E:int", ["int()", "shape (3,)", "reduce"]),
        (float_of_matrix, "E:float", ["float()", "shape (3, 1)", "reduce"]),
        (max_with_key, "E:max_key", ["max()", "key=", "one shape", "jnp.argmax"]),
        (max_of_matrix, "E:max_2d", ["max()", "shape (2, 3)", "axis"]),
        (range_float_bound, "E:range_float", ["range()", "float32", "int("]),
        (range_iterated_in_python, "E:range_list", ["range()", "for` loop", "jnp.arange"]),
    ],
)
def test_builtin_errors(fn, marker, words):
    with pytest.raises(BuiltinError) as info:
        dy2st.to_static(fn)(POS)
    assert isinstance(info.value, TypeError)
    assert_points_at(info.value, fn, marker, *words)


# -- conversion and signature errors ------------------------------------------------------------
def test_function_without_source(tmp_path):
    module_file = tmp_path / "gone_module.py"
    module_file.write_text("def gone(x):\n    return x * 2  # E:gone\n")
    spec = importlib.util.spec_from_file_location("gone_module", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module_file.unlink()
    import linecache

    linecache.clearcache()
    with pytest.raises(ConversionError) as info:
        dy2st.to_static(module.gone)(POS)
    text = full_text(info.value)
    assert f'File "{module_file}", line 1, in gone' in text
    assert "source" in text and "dy2st.not_to_static" in text


def test_helper_without_source_runs_unconverted(tmp_path):
    module_file = tmp_path / "gone_helper.py"
    module_file.write_text("def helper(x):\n    return x * 2\n")
    spec = importlib.util.spec_from_file_location("gone_helper", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module_file.unlink()
    import linecache

    linecache.clearcache()

    def caller(x):
        return module.helper(x) + 1

    assert float(dy2st.to_static(caller)(POS).sum()) == 15.0


def test_c_function_runs_as_is():
    # Nothing of the user's to convert: a C function runs exactly as eagerly (issue 13).
    assert dy2st.to_static(len)([1, 2]) == 2


two_lambdas = (lambda x: x + 1, lambda x: x - 1)  # E:two_lambdas


def test_two_lambdas_on_one_line_are_told_apart_by_position():
    """(This was a ConversionError, "Cannot tell which lambda on this line to convert".)"""
    for fn in two_lambdas:
        assert "lambda_" in dy2st.to_code(fn)
        x = jnp.arange(3.0)
        np.testing.assert_allclose(dy2st.to_static(fn)(x), fn(x))


def line_of_module(marker):
    with open(__file__) as f:
        lines = f.read().splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1
    return hits[0]


def takes_static(x, options):
    return x * len(options)


def test_unhashable_static_argument():
    with pytest.raises(InputSignatureError) as info:
        dy2st.to_static(takes_static)(POS, {1, 2})
    assert "hashable" in str(info.value) and "tuple" in str(info.value)


def countdown(x, n):
    if n > 0:  # E:recursion_if
        return countdown(x * 2, n - 1)  # E:recursion
    return x


def test_recursion_on_python_value_works_and_on_traced_value_explains():
    f = dy2st.to_static(countdown)
    assert float(f(POS, 3).sum()) == 48.0
    # a Dy2StaticError that is still a RecursionError, at the staged `if` whose traced condition
    # is the base case (the user's line the traceback holds most often, wherever Python's limit struck)
    with pytest.raises(dy2st.errors.TracedRecursionError) as info:
        f(POS, jnp.array(3))
    assert isinstance(info.value, RecursionError)
    assert_points_at(info.value, countdown, "E:recursion_if", "base case", "Python value")


# -- with staged loops ---------------------------------------------------------------------------
def staged_while_in_try(x):
    try:
        while x.sum() < 10:
            x = x * 2
    except FloatingPointError:
        pass
    return x


def staged_while_whose_body_raises_in_try(x, table):
    try:
        while x.sum() < 10:  # E:try_while
            x = x * table["growth"]
    except Exception:
        x = x * 0
    return x


def global_write_in_staged_loop(x):
    global total
    for v in x:
        total = total + v  # E:global_loop
    return x


def make_python_counter_in_staged_loop():
    count = 0

    def f(x):
        nonlocal count
        while x.sum() < 10:
            x = x * 2
            count += 1  # E:counter_loop
        return x

    return f


def range_outside_for(x):
    n = x.shape[0] + (x.sum() > 0).astype(jnp.int32)
    return jnp.stack(list(range(n)))  # E:range_outside


def test_staged_while_in_try_converts():
    for x in (POS, POS * 20):
        check_equivalent(staged_while_in_try, x)


def test_staged_while_in_try_whose_body_raises_is_rejected():
    # the user's `except Exception` does not swallow the refusal: raised again after the trace
    with pytest.raises(StagedBranchError) as info:
        dy2st.to_static(staged_while_whose_body_raises_in_try)(POS, {})
    assert_points_at(info.value, staged_while_whose_body_raises_in_try, "E:try_while", "raised KeyError",
                     "only when an iteration runs")


def test_global_write_in_staged_loop():
    with pytest.raises(ScopeWriteError) as info:
        dy2st.to_static(global_write_in_staged_loop)(POS)
    assert_points_at(info.value, global_write_in_staged_loop, "E:global_loop", "'total'", "return the value")


def test_python_counter_becomes_traced_in_staged_loop():
    fn = make_python_counter_in_staged_loop()
    with pytest.raises(ScopeWriteError) as info:
        dy2st.to_static(fn)(POS)
    assert_points_at(info.value, make_python_counter_in_staged_loop, "E:counter_loop", "'count'", "nonlocal")


def test_range_of_traced_bound_outside_for():
    with pytest.raises(BuiltinError) as info:
        dy2st.to_static(range_outside_for)(POS)
    assert_points_at(info.value, range_outside_for, "E:range_outside", "for` loop", "jnp.arange")


def test_only_functions_with_runtime_checks_wait_for_results():
    checked, plain = dy2st.to_static(runtime_assert), dy2st.to_static(relu_like)
    checked(POS)
    plain(POS)
    assert checked.policy.checks and not plain.policy.checks


def relu_like(x):
    if x.sum() > 0:
        return x
    return x * 0


# -- docs/errors.md is generated from dy2st/testing/errors_doc.py and checked here -----------
def test_errors_doc_is_current():
    """Regenerates docs/errors.md's text; DY2ST_REWRITE_ERRORS_DOC=1 rewrites the file instead."""
    from dy2st.testing import errors_doc

    path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs", "errors.md")
    text = errors_doc.render()
    if os.environ.get("DY2ST_REWRITE_ERRORS_DOC") == "1":
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert f.read() == text, "docs/errors.md is stale: run `python -m dy2st.testing.errors_doc`"


def test_errors_doc_covers_every_error_class_and_messages_start_at_the_user_line():
    import dy2st.errors as errors_module
    from dy2st.testing import errors_doc

    documented = {example.error for example in errors_doc.EXAMPLES}
    elsewhere = {errors_module.Dy2StaticError}  # the base class
    classes = {c for c in vars(errors_module).values()
               if isinstance(c, type) and issubclass(c, errors_module.Dy2StaticError)}
    assert classes - elsewhere <= documented, sorted(c.__name__ for c in classes - elsewhere - documented)
    for example in errors_doc.EXAMPLES:
        message = errors_doc.message_of(example)
        assert message.startswith(f'File "{errors_doc.EXAMPLE_FILE}", line '), message
        assert "To fix:" in message, message


def unbound_after_a_python_if(x, flag):
    if flag:
        y = x
    return y + 1  # E:unbound_read


def test_an_unbound_read_names_pythons_error_at_the_reading_line():
    """(issue 30) Python's own message, at the line that reads the variable (it named the `if`)."""
    unbound_after_a_python_if(POS, True)
    with pytest.raises(UnboundLocalError) as eager:
        unbound_after_a_python_if(POS, False)
    for _ in range(2):
        with pytest.raises(UnboundLocalError) as info:
            dy2st.to_static(unbound_after_a_python_if)(POS, False)
        text = str(info.value)
        assert f'line {line_of_module("E:unbound_read")}, in unbound_after_a_python_if\n' in text, text
        assert str(eager.value) in text  # "cannot access local variable 'y' where it is not associated with a value"
        assert any("left unassigned by the `if`/loop at" in note for note in info.value.__notes__)


def aliased_dict_on_one_side(x):
    d = {"a": x}
    if x.sum() > 0:
        out = (d, d)
    else:
        out = (d, {"a": x, "b": x})
    return out


def test_a_branch_mismatch_describes_a_value_held_twice_by_its_contents():
    """(Campaign seeds 950017, 950025) the side holding one dict twice was described as
    `<dy2st.runtime.static_outputs.Identities object at 0x...>`."""
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(aliased_dict_on_one_side)(POS)
    text = str(info.value)
    assert "object at 0x" not in text and "Identities" not in text, text
    # (`d` is from before the `if`: held on one side where the other holds a new dict, it is
    # refused as such, by identity, before the contents are compared)
    assert "'out' holds an object from before the `if`" in text, text


def counts_rows_in_a_dict(preds):
    counts = {}
    for p in preds:  # rows of an array: each `int(p)` is a number the data decides
        counts[int(p)] = counts.get(int(p), 0) + 1
    return counts


def test_a_traced_dict_key_is_refused_at_its_line():
    # it was Python's raw `TypeError: unhashable type: 'DynamicJaxprTracer'`
    with pytest.raises(dy2st.errors.TracedValueError) as info:
        dy2st.to_static(counts_rows_in_a_dict)(jnp.array([1, 2, 2, 0]))
    text = str(info.value)
    assert text.startswith(f'File "{__file__}"') and "counts[int(p)] = counts.get(int(p), 0) + 1" in text
    assert "a traced value is a dict key or a set item here" in text and "jnp.bincount" in text


def averages_a_buffer(buf, x):
    buf.append(x)
    return sum(buf) / len(buf)


def test_a_deque_argument_is_refused_with_a_list_as_the_fix():
    import collections

    with pytest.raises(dy2st.errors.InputSignatureError) as info:
        dy2st.to_static(averages_a_buffer)(collections.deque(maxlen=3), jnp.ones(2))
    text = str(info.value)
    assert "must be hashable" in text and "pass a list or dict instead of the deque" in text


GENERATED = (i for i in range(100))


def reads_a_module_generator_then_branches(x):
    v = next(GENERATED)
    if x.sum() < 0:
        x = -x
    return x + v


def test_a_module_generator_read_before_a_staged_if_is_refused_saying_why():
    """The generator's position cannot be read (a new token each read), so any staged side after
    it counts as changing it; the message said the side "changes the global", which it does not."""
    with pytest.raises(dy2st.errors.PythonEffectError) as info:
        dy2st.to_static(reads_a_module_generator_then_branches)(jnp.ones(2))
    text = str(info.value)
    assert text.startswith(f'File "{__file__}"') and "\n    if x.sum() < 0:\n" in text, text
    assert "reads the generator GENERATED" in text and "whose position dy2st cannot read" in text
    assert "To fix: take the items you need from GENERATED into a list" in text
