"""Programs the differential fuzzer (`dy2st.testing.fuzz`) found failing, minimized, each named
for what broke. Each runs eagerly, via to_static and via jit(to_static) on inputs taking every
path (and the loop zero, one and several times where it loops)."""

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.testing import check_equivalent
from dy2st.testing.fuzz import tree_difference

POS = jnp.array([1.0, 2.0, 0.0, 1.0])
NEG = jnp.array([-3.0, -3.0, -1.0, -2.0])


def tuple_return_in_staged_while(x):
    # Fuzz seed 3, example 16 (reduced): the return value starts undefined (one leaf) and
    # becomes a 2-tuple in the body; the initial carry had one leaf too few
    # ("foreach() argument 2 is shorter than argument 1" in lax.while_loop).
    k = 0
    while x.min() > -2.0:
        return x, 4
    return x, k


def tuple_return_in_while_with_counter(x, n):
    # Fuzz seed 3, example 16 as generated, less its dead code.
    k1 = -n
    k0 = k1 if x.sum() <= -2 else 3
    i1 = 0
    while i1 < k0 % 4 and x.min() > -2.0:
        i1 += 1
        k1 = 4
        return x, x * 2, (k1 // 2), k1
    k0 = jnp.sum(x > -1.0)
    return x, x, k0, k1


def nested_tuple_return_in_staged_while(x):
    # The same undefined return value, with a nested structure and a later staged update.
    s = x.sum()
    while s < 10.0:
        s = s + 3.0
        if s > 4.0:
            return (x * s, (s, 1))
    return (x, (s, 0))


@pytest.mark.parametrize("x", [POS, NEG], ids=["loops", "skips"])
def test_tuple_return_in_staged_while(x):
    check_equivalent(tuple_return_in_staged_while, x)


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("x", [POS, NEG, -POS], ids=["pos", "neg", "mixed"])
def test_tuple_return_in_while_with_counter(x, n):
    check_equivalent(tuple_return_in_while_with_counter, x, n)


@pytest.mark.parametrize("x", [POS, NEG, jnp.full((4,), 3.0)], ids=["several", "many", "zero"])
def test_nested_tuple_return_in_staged_while(x):
    check_equivalent(nested_tuple_return_in_staged_while, x)


def state_read_inside_early_return_guard(x, y, n):
    # Fuzz seed 52, example 1214 (reduced): after an early return, the rest of the function is a
    # branch function in which `k0` is local; the last if's get_state read it plainly because
    # it was bound in the user's function (NameError: cannot access free variable 'k0').
    k0 = n
    k1 = -k0
    if y[k1 % 4] > 0.0:
        return x, k1
    elif x[0] <= 3.0:
        x = x + y
    else:
        k0 = 0
    if x.sum() > 1:
        k0 = 2
    else:
        k0 = 1
    return x, k0


def defined_only_on_the_branch_that_does_not_return(x):
    # Fuzz seed 53, examples 1191/1420/1544 (reduced): `v` is unbound on the returning branch,
    # where eager never reads it; staging must not call it "defined in one branch only".
    if x.sum() > 0:
        return x
    else:
        v = x * 2
    return v + 1


def defined_only_on_the_branch_that_does_not_break(x):
    total = x
    for i in range(3):
        if total.sum() > 4:
            break
        else:
            step = total * 0.5
        total = total + step
    return total


@pytest.mark.parametrize("x", [POS, NEG])
@pytest.mark.parametrize("n", [0, 3])
def test_state_read_inside_early_return_guard(x, n):
    check_equivalent(state_read_inside_early_return_guard, x, -x, n)


@pytest.mark.parametrize("x", [POS, NEG])
def test_defined_only_on_the_branch_that_does_not_return(x):
    check_equivalent(defined_only_on_the_branch_that_does_not_return, x, grad_argnums=0)


@pytest.mark.parametrize("x", [POS, NEG, POS * 0.1])
def test_defined_only_on_the_branch_that_does_not_break(x):
    check_equivalent(defined_only_on_the_branch_that_does_not_break, x)


def python_number_set_in_a_loop_over_rows(x, y):
    # Campaign seed 92732 (reduced): `k` is an array before a loop over an array's rows whose
    # body sets it to a Python int; eagerly it is that int after the loop (the rows are there),
    # the staged scan carried it as float32 (2.0 for 2).
    k = x.min()
    for e in y:
        t = (e, 2)
        k = t[1] % 97
    return k


def python_number_set_in_a_while(x, n):
    # Campaign seed 99908, as a traced trip count: the body's int if the loop ran, else the array.
    k = x.min()
    w = 0
    while w < n:
        w += 1
        k = 5
    return k, w


def python_number_before_a_while(x, n):
    # A Python int before a loop that may run zero times, an array after an iteration: eagerly
    # still the int 0 if it never ran (it came back as float32 0.0).
    k = 0
    while k < n:
        k = k + jnp.abs(x.sum()) + 1
    return k


def _exact(fn, *args):
    expected, static = fn(*args), dy2st.to_static(fn)
    assert tree_difference(expected, static(*args), "to_static") is None
    assert tree_difference(expected, jax.jit(static)(*args), "jit", under_jit=True) is None


def test_python_number_set_in_a_loop_over_rows():
    _exact(python_number_set_in_a_loop_over_rows, POS, jnp.stack([POS, NEG]))


@pytest.mark.parametrize("n", [0, 1, 3])
def test_python_number_set_in_a_while(n):
    _exact(python_number_set_in_a_while, POS, jnp.int32(n))


@pytest.mark.parametrize("n", [0, 1, 30])
def test_python_number_before_a_while(n):
    _exact(python_number_before_a_while, POS, jnp.int32(n))


def choice_kept_through_a_rebuilt_cond(x, y, m, n):
    # Fuzz seed 9000, example 40 (reduced): `k1` is a Python number or an array by data (a
    # python_choice); the inner `if` leaves it as it is on both sides, and the outer cond is
    # built again (its sides' types differ). Each build merged `k1`'s candidate table with
    # itself once more, so the table grew each time and the builds never agreed: a false
    # "the branches give different types each time they are traced".
    k1 = jnp.sum(y > 0.0)
    k1 = -2 if x.sum() == x[2] else k1
    k0 = k1 if m[2, 0] <= -1 else -1
    a0 = x
    if (x <= x).all():
        if x[0] > 1:
            i2 = 0
            while i2 < 0:
                i2 += 1
                k1 = -1 if x[i2 % 4] >= -1.0 else n
        else:
            a0 = x * x
        a0 = (x * 2) if 3 <= k0 else y
    return a0, k0, k1


_M = jnp.array([[2.0, 1.0, -3.0, -1.0], [1.0, -3.0, 1.0, -2.0], [3.0, -2.0, -2.0, -1.0]])


@pytest.mark.parametrize("x", [jnp.array([3.0, 3.0, 0.0, 1.0]), jnp.array([1.0, -1.0, 5.0, 0.0]),
                               jnp.array([3.0, 1.0, 2.0, -6.0])], ids=["array", "number", "inner-if"])
@pytest.mark.parametrize("m", [_M, _M.at[2, 0].set(-1.0)], ids=["k0-number", "k0-k1"])
def test_choice_kept_through_a_rebuilt_cond(x, m):
    _exact(choice_kept_through_a_rebuilt_cond, x, jnp.array([3.0, -2.0, -2.0, -1.0]), m, 2)


class _Bumper:
    def __init__(self):
        self.count = jnp.zeros(())

    def bump(self, v):
        self.count = self.count + v.sum()
        return 3


def print_beside_a_method_changing_an_attribute(x, obj, s):
    # Campaign seed 950188 (reduced): the method's attribute write made the `if` build its cond
    # again carrying it; the first build, which JAX keeps for its print, printed too: twice per call.
    k = 1
    if (x > 0).any():
        k = obj.bump(x) % 97
    else:
        print("p2", s)
    return x * k


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_print_in_a_side_rebuilt_to_carry_an_attribute_prints_once(sign, capsys):
    x = POS * sign
    eager_obj, static_obj = _Bumper(), _Bumper()
    static = dy2st.to_static(print_beside_a_method_changing_an_attribute)
    for _ in range(2):
        expected = print_beside_a_method_changing_an_attribute(x, eager_obj, 1)
        eager_out = capsys.readouterr().out
        got = static(x, static_obj, 1)
        jax.effects_barrier()
        assert capsys.readouterr().out == eager_out
        assert tree_difference(expected, got, "to_static") is None
        assert tree_difference(eager_obj.count, static_obj.count, "attribute") is None


def test_one_function_in_two_modules_at_the_same_line_converts_for_each(tmp_path):
    """Code objects compare equal across files: two modules holding the same function at the
    same line shared one converted code, which named the first module's file (campaign seed
    4,501,350 after 4,501,342 in one process)."""
    import importlib.util

    source = "def f(x):\n    if x.sum() > 0:\n        x = x + 1\n    return x\n"
    functions = []
    for name in ("first_copy", "second_copy"):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        functions.append(module.f)
    assert functions[0].__code__ == functions[1].__code__  # (what the cache keyed on)
    converted = [dy2st.to_static(f)._converted for f in functions]
    assert [c.__code__.co_filename for c in converted] == [f.__code__.co_filename for f in functions]
