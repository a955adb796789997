"""Error text of the core: each message starts at the user's file and line, shows the line,
names what is wrong and says what to do."""

import dataclasses
import enum
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.errors import (
    BranchOutputError,
    ConversionError,
    Dy2StaticError,
    InputSignatureError,
    PredicateError,
    UnsupportedSyntaxError,
)

X = jnp.array([1.0, -2.0, 3.0])
THIS_FILE = __file__


def line_of(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if marker in line:
            return start + offset
    raise AssertionError(f"marker {marker!r} not in {fn.__name__}")


def assert_points_at(err: Dy2StaticError, fn, marker: str, *keywords):
    text = str(err)
    lineno = line_of(fn, marker)
    first = text.splitlines()[0]
    assert first == f'File "{THIS_FILE}", line {lineno}, in {fn.__name__}', text
    assert marker in text.splitlines()[1], text
    for word in keywords:
        assert word in text, f"{word!r} not in:\n{text}"


def shape_mismatch(x):
    if x.sum() > 0:  # MARK-shape
        y = x
    else:
        y = x[:2]
    return y


class Box:
    """A plain object whose attributes a branch sets."""


def undefined_in_one_branch(x):
    state = Box()
    if x.sum() > 0:  # MARK-undef
        state.y = x * 2
    return state.y


def dtype_mismatch(x):
    if x.sum() > 0:  # MARK-dtype
        y = x
    else:
        y = x.astype(jnp.int32)
    return y


def vector_predicate(x):
    if x > 0:  # MARK-pred
        x = x + 1
    return x


def vector_assert(x):
    assert x > 0  # MARK-assert
    return x


def none_vs_array_return(x):
    if x.sum() > 0:  # MARK-none
        return x
    print("no return on this path")


def structure_mismatch(x):
    if x.sum() > 0:  # MARK-struct
        y = (x, x)
    else:
        y = [x, x]
    return y


def generator(x):
    for i in range(3):
        yield x * i  # MARK-yield


def ternary_shapes(x):
    return x if x.sum() > 0 else x[:1]  # MARK-ternary


def vector_and(x):
    return (x > 0) and (x < 5)  # MARK-and


@dataclasses.dataclass
class Running:  # a plain dataclass: not a pytree
    total: object
    count: int = 0


class Color(enum.Enum):
    RED = 1
    GREEN = 2


def an_enum_member_by_data(x):
    color = Color.RED
    if x.sum() > 0:  # MARK-enum
        color = Color.GREEN
    return x, color


def a_new_object_on_one_side(x):
    state = Running(x)
    if x.sum() > 0:  # MARK-object
        state = dataclasses.replace(state, total=state.total * 2, count=state.count + 1)
    return state.total


@pytest.mark.parametrize(
    "fn, marker, error, keywords",
    [
        (shape_mismatch, "MARK-shape", BranchOutputError, ["'y'", "float32[3]", "float32[2]", "shapes differ", "To fix"]),
        (undefined_in_one_branch, "MARK-undef", BranchOutputError, ["'state.y'", "defined in the if branch only", "assign 'state.y' before"]),
        (dtype_mismatch, "MARK-dtype", BranchOutputError, ["'y'", "float32[3]", "int32[3]", "astype"]),
        (vector_predicate, "MARK-pred", PredicateError, ["shape (3,)", "ambiguous", ".all()", ".any()"]),
        (none_vs_array_return, "MARK-none", BranchOutputError, ["the return value", "None", "float32[3]"]),
        (structure_mismatch, "MARK-struct", BranchOutputError, ["'y'", "structure"]),
        (ternary_shapes, "MARK-ternary", BranchOutputError, ["conditional expression", "float32[1]", "shapes differ"]),
        (vector_and, "MARK-and", PredicateError, ["ambiguous", ".all()"]),
        (an_enum_member_by_data, "MARK-enum", BranchOutputError,
         ["'color'", "another member of Color", "`Color.X.value`", "`Color(v)`"]),
        (a_new_object_on_one_side, "MARK-object", BranchOutputError,
         ["'state'", "each side gives its own Running object", "change the object's attributes in place",
          "jax.tree_util.register_dataclass"]),
        (vector_assert, "MARK-assert", PredicateError, ["asserted condition", "shape (3,)", "ambiguous", "assert (x > 0).all()"]),
    ],
)
def test_staging_errors_point_at_user_line(fn, marker, error, keywords):
    static = dy2st.to_static(fn)
    with pytest.raises(error) as info:
        static(X)
    assert_points_at(info.value, fn, marker, *keywords)
    # the same error surfaces through an enclosing jax.jit
    with pytest.raises(error):
        jax.jit(static)(X)


def test_unsupported_syntax_rejected_before_any_rewrite():
    with pytest.raises(UnsupportedSyntaxError) as info:
        dy2st.to_static(generator)(X)
    assert_points_at(info.value, generator, "MARK-yield", "yield", "not_to_static")


def test_function_without_source():
    namespace = {}
    exec("def no_source(x):\n    return x\n", namespace)
    with pytest.raises(ConversionError) as info:
        dy2st.to_static(namespace["no_source"])(X)
    text = str(info.value)
    assert "Cannot read the source of 'no_source'" in text
    assert "not_to_static" in text and "To fix" in text


def test_unhashable_static_argument():
    def f(x, options):
        return x

    with pytest.raises(InputSignatureError) as info:
        dy2st.to_static(f)(X, bytearray(b"mutable options"))
    assert "hashable" in str(info.value)


def test_undefined_variable_on_python_path_names_it():
    with pytest.raises(NameError) as info:
        dy2st.to_static(python_path_undefined)(X, False)
    assert_points_at(info.value, python_path_undefined, "MARK-py-undef", "'y'", "not assigned", "every branch")


def python_path_undefined(x, flag):
    if flag:
        y = x
    return y  # MARK-py-undef


def nested_shape_mismatch(x):
    if x.sum() > 0:
        if x[0] > 0:  # MARK-nested
            y = x
        else:
            y = x[:1]
    else:
        y = x
    return y


def test_nested_if_error_names_user_function():
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(nested_shape_mismatch)(X)
    assert_points_at(info.value, nested_shape_mismatch, "MARK-nested", "'y'", "float32[1]")


def make_counter_function():
    counter = 0

    def count_positive(x):
        nonlocal counter
        if x.sum() > 0:  # MARK-nonlocal
            counter = counter + 1
        return x

    return count_positive


def test_nonlocal_written_in_staged_if_is_an_error():
    fn = make_counter_function()
    with pytest.raises(Dy2StaticError) as info:
        dy2st.to_static(fn)(X)
    assert_points_at(info.value, fn, "MARK-nonlocal", "'counter'", "nonlocal", "return the value")


def test_nonlocal_written_under_python_condition_works():
    def make():
        counter = 0

        def f(x, flag):
            nonlocal counter
            if flag:
                counter = counter + 1
            return x

        return f, lambda: counter

    f, get = make()
    dy2st.to_static(f)(X, True)
    assert get() == 1


def skips_a_non_finite_update(params, x):
    loss = jnp.sum((x * params["w"] + params["b"]) ** 2)
    if jnp.isfinite(loss):  # MARK-sorted
        params = jax.tree_util.tree_map(lambda p: p - 0.1, params)  # (optax's updates too) sorted keys
    else:
        params = dict(params)
    return params


def skips_it_with_the_advised_fix(params, x):
    loss = jnp.sum((x * params["w"] + params["b"]) ** 2)
    if jnp.isfinite(loss):
        params = jax.tree_util.tree_map(lambda p: p - 0.1, params)
    else:
        params = jax.tree_util.tree_map(lambda v: v, params)
    return params


def test_a_dict_sorted_on_one_side_only_says_where_sorted_keys_come_from():
    """Found by a model-code probe: skipping an update on a non-finite loss, with parameters in
    insertion order {w, b}; the update's dict comes back sorted."""
    params = {"w": jnp.ones(3), "b": jnp.zeros(3)}
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(skips_a_non_finite_update)(params, X)
    assert_points_at(info.value, skips_a_non_finite_update, "MARK-sorted", "One side gives its keys sorted",
                     "optax.apply_updates", "jax.tree_util.tree_map(lambda v: v, params)")
    expected = skips_it_with_the_advised_fix(params, X)
    got = dy2st.to_static(skips_it_with_the_advised_fix)(params, X)
    assert list(got) == list(expected) == ["b", "w"]


def stops_early(x, epochs):
    losses = []
    for epoch in range(epochs):  # MARK-early
        x = x * 0.5
        losses.append(jnp.sum(x ** 2))
        if losses[-1] < 0.1:
            break
    return losses


def test_a_list_grown_in_a_loop_a_traced_break_may_end_says_to_preallocate():
    """Found by a model-code probe: the message spoke of branches and a function's returns."""
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(stops_early)(X, 10)
    assert_points_at(info.value, stops_early, "MARK-early", "'losses'", "a list grown per iteration",
                     "`losses = jnp.zeros(n)` before the loop, `losses = losses.at[i].set(v)`")


def a_long_name_by_data(x):
    name = "layer_" + "x" * 30 + "_weights_" + "y" * 30
    if x.sum() > 0:  # MARK-long
        name = "layer_" + "x" * 30 + "_biases__" + "y" * 30
    return x, name


def test_two_values_that_look_the_same_cut_short_are_shown_where_they_differ():
    """Both texts cut short read the same (found by a stdlib probe): they are shown around
    where they first differ."""
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(a_long_name_by_data)(X)
    assert_points_at(info.value, a_long_name_by_data, "MARK-long", "_biases__", "_weights_")


def _sign_step(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


@pytest.mark.parametrize("arg, said", [
    (np.array([1, 2], dtype=object), "a numpy array of dtype object"),
    (np.ma.array([1.0, 2.0], mask=[0, 1]), "a masked array"),
    (np.array(["a", "b"]), "a numpy array of dtype <U1"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "a numpy array of dtype datetime64[D]"),
])
def test_a_numpy_array_jax_cannot_take_is_refused_at_the_call(arg, said):
    """Object, masked, string and datetime arrays raised jax's raw TypeError or ValueError from
    the program cache's key, with no line of the user's and no fix."""
    with pytest.raises(dy2st.errors.InputSignatureError) as err:
        dy2st.to_static(_sign_step)(arg)
    text = str(err.value)
    assert text.startswith(f'File "{__file__}"') and "dy2st.to_static(_sign_step)(arg)" in text.splitlines()[1]
    assert f"an argument is {said}" in text and "To fix: convert it before the call" in text


class _AppendsOnEnterAndExit:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("in")

    def __exit__(self, *exc):
        self.log.append("out")


def grows_a_managers_list_in_a_loop_with_a_traced_break(x, log):
    out = x
    for i in range(3):
        with _AppendsOnEnterAndExit(log):
            out = out + 1
            if x[i] < 0:
                break
    return out


def test_a_list_described_not_named_gets_advice_without_code_made_of_its_description():
    """The advice pasted the description into code: "`the list given to CM() (which changes
    it) = jnp.zeros(n)` before the loop" (probe of Python semantics)."""
    with pytest.raises(BranchOutputError) as info:
        dy2st.to_static(grows_a_managers_list_in_a_loop_with_a_traced_break)(X, [])
    text = str(info.value)
    assert "`the list given" not in text and "make the `break` condition a Python value" in text


def grows_on_one_side_replaces_an_item_on_the_other(x):
    hist = [x]
    if x.sum() > 0:
        hist.append(x)
    else:
        hist[0] = -x
    return hist


def test_one_list_of_two_lengths_is_a_structure_refusal_not_two_references():
    """One reference, changed in place by an item write on one side and grown on the other, was
    refused as 'two references to one list are appended to separately' (independent fuzzer)."""
    with pytest.raises(BranchOutputError, match=r"'hist' is \[float32\[3\], float32\[3\]\] in the if branch but "
                                                r"\[float32\[3\]\] in the else branch"):
        dy2st.to_static(grows_on_one_side_replaces_an_item_on_the_other)(X)


def test_an_error_in_code_dy2st_did_not_convert_names_that_code():
    """A traced `if` in a Flax linen module's `__call__` (called through `apply`, so not
    converted) was reported 'in gate_step', the converted caller, with `__call__`'s line and
    source (models probe)."""
    nn = pytest.importorskip("flax.linen")

    class Gate(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.Dense(4)(x)
            if h.mean() > 0:  # MARK-linen
                h = nn.relu(h)
            return h

    gate = Gate()

    def gate_step(params, x):
        return gate.apply({"params": params}, x).sum()

    params = gate.init(jax.random.PRNGKey(0), jnp.ones((2, 3)))["params"]
    with pytest.raises(dy2st.Dy2StaticError) as info:
        dy2st.to_static(gate_step)(params, jnp.ones((2, 3)))
    first = str(info.value).splitlines()[0]
    assert first.endswith("in __call__") and "MARK-linen" in str(info.value), str(info.value)
