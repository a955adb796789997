"""Differential tests of builtins inside converted code, on traced and on Python values:
len, range, enumerate, zip, int/float/bool, abs, min/max, isinstance, print and assert."""

import io

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.testing import check_equivalent

POS = jnp.array([1.0, 2.5, 3.0])
NEG = jnp.array([-1.0, -2.5, -3.0])
MIX = jnp.array([-3.0, 1.0, 0.5])
INPUTS = [POS, NEG, MIX]


def uses_len(x):
    return x * len(x) + len(x.shape)


def uses_range(x):
    acc = jnp.zeros(())
    for i in range(len(x)):
        acc = acc + x[i] * i
    for j in range(1, 3):
        acc = acc - j
    return acc


def uses_enumerate(x):
    acc = jnp.zeros(())
    for i, v in enumerate(x):
        if v > 0:
            acc = acc + v * i
    return acc


def uses_zip(x):
    acc = jnp.zeros(())
    for a, b in zip(x, x[::-1]):
        acc = acc + a * b
    return acc


def uses_int(x):
    return x * int(x.sum() / 4)


def uses_float(x):
    return float(x[0]) * x + float(2)


def uses_bool(x):
    if bool(x.sum()):
        return x * 2
    return x


def uses_bool_of_zero(x):
    return jnp.where(bool(x.sum() * 0), x, -x)


def uses_abs(x):
    return abs(x).sum() + abs(x.sum())


def uses_max_min_scalars(x):
    return max(x.sum(), 0.0) + min(x[0], x[1], x[2]) + max(x[0], 1)


def uses_max_min_vector(x):
    return max(x) - min(x)


def uses_max_of_list(x):
    return max([x[0], x[1]]) * min((x[1], x[2]))


def uses_isinstance(x):
    if isinstance(x, jax.Array):
        y = x * 2
    else:
        y = x
    if isinstance(x, float):
        y = y + 100
    return y


def uses_python_builtins(x):
    n = int("3") + max(1, 2) + min([4, 5]) + len(range(3)) + abs(-2) + int(bool(0))
    return x * n + float(1)


CASES = [
    uses_len,
    uses_range,
    uses_enumerate,
    uses_zip,
    uses_int,
    uses_float,
    uses_bool,
    uses_bool_of_zero,
    uses_abs,
    uses_max_min_scalars,
    uses_max_min_vector,
    uses_max_of_list,
    uses_isinstance,
    uses_python_builtins,
]


@pytest.mark.parametrize("x", INPUTS, ids=["pos", "neg", "mix"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_builtins_differential(fn, x):
    check_equivalent(fn, x)


@pytest.mark.parametrize("fn", [uses_abs, uses_max_min_scalars, uses_max_min_vector, uses_max_of_list])
def test_builtins_gradients(fn):
    check_equivalent(fn, MIX, grad_argnums=0)


def test_casts_are_staged_not_concretized():
    jaxpr = str(dy2st.to_static(uses_int).get_concrete_program(POS).jaxpr)
    assert "convert_element_type" in jaxpr
    assert dy2st.to_static(uses_int)(jnp.array([-6.0, 0.0])).tolist() == [6.0, 0.0]  # int(-1.5) == -1, not -2


# -- print --------------------------------------------------------------------------------------
def print_values(x):
    print(x)
    print("sum", x.sum(), sep="|", end="!\n")
    print("static", len(x), [x[0], 1], (2, "a"))
    return x * 2


def print_in_branch(x):
    if x.sum() > 0:
        print("positive", x.sum())
        y = x
    else:
        print("not positive", x.min())
        y = -x
    return y


def print_to_file(x, buffer):
    print("value:", x[0], file=buffer)
    return x


def print_helper(v):
    print("helper sees", v.max())
    return v + 1


def print_through_helper(x):
    if x[0] > 0:
        x = print_helper(x)
    return x


def _captured(capsys, fn, *args):
    fn(*args)
    return capsys.readouterr().out


@pytest.mark.parametrize("fn", [print_values, print_in_branch, print_through_helper], ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", INPUTS, ids=["pos", "neg", "mix"])
def test_print_matches_python(capsys, fn, x):
    expected = _captured(capsys, fn, x)
    assert expected or (fn is print_through_helper and float(x[0]) <= 0)
    assert _captured(capsys, dy2st.to_static(fn), x) == expected
    assert _captured(capsys, jax.jit(dy2st.to_static(fn)), x) == expected


def test_print_runs_each_call_from_the_cache(capsys):
    f = dy2st.to_static(print_in_branch)
    f(POS)
    f(NEG)
    f(POS)
    assert capsys.readouterr().out == "positive 6.5\nnot positive -3.0\npositive 6.5\n"


def test_print_to_a_file():
    eager, staged = io.StringIO(), io.StringIO()
    print_to_file(POS, eager)
    dy2st.to_static(print_to_file)(POS, eager.__class__() if False else staged)
    assert staged.getvalue() == eager.getvalue() == "value: 1.0\n"


def test_print_to_a_file_given_as_an_argument_writes_to_each_calls_file():
    # files are static values keyed by identity, not state objects walked by attribute (all
    # StringIOs looked alike, and every call wrote into the first call's)
    def f(x, buf, n):
        print("sum", x.sum(), n, file=buf)
        if x.sum() > 0:
            print("positive", file=buf)
        return x

    g = dy2st.to_static(f)
    for x in (POS, NEG, POS):
        eager, staged = io.StringIO(), io.StringIO()
        f(x, eager, 1)
        g(x, staged, 1)
        assert staged.getvalue() == eager.getvalue()


def test_print_of_python_values_prints_on_every_call_in_order(capsys):
    log = []

    def f(x, n):
        print("shape", x.shape, n)
        log.append(n)
        print("seen", log)  # the text as eager makes it here, not the list as it is later
        if x.sum() > 0:
            print("positive", x)
        else:
            print("not positive")
        log.append(-n)
        return x

    g = dy2st.to_static(f)
    for x in (POS, POS, NEG):
        f(x, 1)
    eager = capsys.readouterr().out
    log.clear()
    for x in (POS, POS, NEG):
        g(x, 1)
    assert capsys.readouterr().out == eager  # the closure's list changes per call: traced again (guards)
    assert log == [1, -1] * 3


def test_print_of_python_values_inside_a_users_jit_prints_on_every_call_in_order(capsys):
    # Inline in a user's jit, as in dy2st's own programs: printed while tracing, the prints in
    # both sides of the staged `if` would show once each, before the arrays', whatever the data
    # says, and nothing on later calls.
    def f(x, n):
        print("shape", x.shape, n)
        if x.sum() > 0:
            print("positive", n)
            x = x + 1
        else:
            print("not positive")
        print("after", x)
        return x

    expected = "".join(_captured(capsys, f, x, 2) for x in (POS, POS, NEG))
    g = jax.jit(dy2st.to_static(f), static_argnums=1)
    printed = "".join(_captured(capsys, lambda x: jax.block_until_ready(g(x, 2)), x) for x in (POS, POS, NEG))
    jax.effects_barrier()
    assert printed + capsys.readouterr().out == expected
    dy2st.to_static(f)(POS, 2)
    grad_out = capsys.readouterr().out
    jax.grad(lambda x: dy2st.to_static(f)(x, 2).sum())(POS)
    jax.effects_barrier()
    assert capsys.readouterr().out == grad_out


# -- assert ---------------------------------------------------------------------------------------
def asserts_positive(x):
    assert x.sum() > 0, "need a positive sum"
    assert len(x) == 3
    return x * 2


def test_assert_passing_is_differential():
    check_equivalent(asserts_positive, POS, grad_argnums=0)


def test_assert_failing_raises_like_python():
    with pytest.raises(AssertionError, match="need a positive sum"):
        asserts_positive(NEG)
    with pytest.raises(AssertionError, match="need a positive sum"):
        dy2st.to_static(asserts_positive)(NEG)
    with pytest.raises(AssertionError):
        dy2st.to_static(asserts_positive)(jnp.ones(4))  # a Python condition: raised while tracing


# -- inside staged loops ----------------------------------------------------------------------
def print_in_loop(x):
    acc = jnp.zeros(())
    i = 0
    while acc < x.sum():
        acc = acc + 1.5
        print("step", i, "acc", acc)
        i = i + 1
    return acc


def builtins_in_loop(x):
    acc = jnp.zeros(())
    for i, v in enumerate(x):
        acc = acc + max(v, 0.0) + abs(v) * int(v) + float(i)
    return acc


def assert_in_loop(x):
    n = (x.sum() // 1).astype(jnp.int32)
    acc = x
    for i in range(n):
        assert acc.sum() < 100.0, "acc grew too large"
        acc = acc * 2
    return acc


@pytest.mark.parametrize("x", [jnp.array([-1.0]), jnp.array([1.0]), jnp.array([4.0, 1.0])], ids=["0", "1", "many"])
def test_print_inside_staged_loop(capsys, x):
    expected = _captured(capsys, print_in_loop, x)
    assert _captured(capsys, dy2st.to_static(print_in_loop), x) == expected
    assert "while" in str(dy2st.to_static(print_in_loop).get_concrete_program(x).jaxpr)


@pytest.mark.parametrize("x", INPUTS, ids=["pos", "neg", "mix"])
def test_builtins_inside_staged_loop(x):
    check_equivalent(builtins_in_loop, x)


def test_assert_inside_staged_loop():
    f = dy2st.to_static(assert_in_loop)
    check_equivalent(assert_in_loop, jnp.array([1.0, 2.0]))
    with pytest.raises(AssertionError, match="acc grew too large"):
        f(jnp.array([30.0, 40.0]))
