"""issue 13, class 10 (b): f-strings, str.format, % and str()/repr() of traced values."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

import dy2st
from dy2st.errors import BuiltinError
from dy2st.testing import check_prints


def prints_formatted(x, width):
    print(f"v: {x}")
    print(f"r: {x!r} first {x[0]:.2f} second {x[1]:>{width}.1f} {{literal}} {width}")
    print("{} and {:.3f} {k}".format(x, x[0], k=width))
    print("%s|%.3f|%d" % (x, x[0], width))
    print("s:", str(x), repr(x), [x, 1], (x[0],))
    print("a" + f"{x[0]}" + "b")
    if x.sum() > 0:
        print(f"positive {x.sum()}")
    else:
        print(f"not positive {x.sum()}")
    for i in range(2):
        print(f"step {i}: {x[i] * 2}")
    return x


@pytest.mark.parametrize("values", [[1.0, 2.0], [-1.0, 0.5]])
def test_formatting_prints_runtime_values(values, capsys):
    x = jnp.array(values)
    prints_formatted(x, 8)
    eager = capsys.readouterr().out
    static = dy2st.to_static(prints_formatted)
    static(x, 8)
    jax.effects_barrier()
    assert capsys.readouterr().out == eager
    jax.jit(static, static_argnums=1)(x, 8)
    jax.effects_barrier()
    assert capsys.readouterr().out == eager


def test_python_values_format_as_python(capsys):
    def f(x, n):
        s = f"{n:03d}-{n!r}" + "%s" % (n,) + "{}".format(n)
        print(s, len(s))
        return x + len(s)

    expected = f(jnp.ones(1), 7)
    eager = capsys.readouterr().out
    out = dy2st.to_static(f)(jnp.ones(1), 7)
    jax.effects_barrier()
    assert capsys.readouterr().out == eager
    assert float(out[0]) == float(expected[0])


def uses_formatted_text(x):
    label = f"value {x}"  # E:format
    table = {label: 1}
    return x, table


def test_formatted_text_used_as_str_is_refused():
    with pytest.raises(BuiltinError) as info:
        dy2st.to_static(uses_formatted_text)(jnp.ones(2))
    text = str(info.value)
    assert text.startswith('File "') and "test_misc_format.py" in text
    assert 'label = f"value {x}"' in text
    assert "only exists when the" in text and "jax.debug.print" in text


def asserts_with_formatted_message(x):
    assert x.sum() > 0, f"bad sum {x.sum():.1f} of {x}"
    return x


def test_assert_message_formatted_at_run_time():
    np_ones = jnp.ones(2)
    assert (dy2st.to_static(asserts_with_formatted_message)(np_ones) == np_ones).all()
    with pytest.raises(AssertionError) as eager:
        asserts_with_formatted_message(-np_ones)
    with pytest.raises(AssertionError) as static:
        dy2st.to_static(asserts_with_formatted_message)(-np_ones)
    assert str(static.value).splitlines()[0] == str(eager.value).splitlines()[0] == "bad sum -2.0 of [-1. -1.]"


def joins_formatted_traced_values(x):
    print(", ".join(f"{v:.2f}" for v in x))
    print(" | ".join([str(x[0]), f"{x[1]}", "end"]))
    print("-".join(["a", "b"]))
    return x


def test_str_join_of_text_formatted_from_traced_values_prints_when_the_program_runs():
    """It raised a raw TypeError (`expected str instance, TracedString found`)."""
    check_prints(joins_formatted_traced_values, jnp.array([1.0, 2.5]))


class _Box:
    def __init__(self, w, inner=None):
        self.w, self.inner = w, inner

    def __repr__(self):
        return f"Box(w={self.w}, inner={self.inner!r})"


def prints_objects_holding_traced_arrays(x):
    box = _Box(x * 2, _Box(x + 1))
    box.me = box  # (a cycle: formatting stops walking it)
    print(box)
    print("boxes:", [box.inner])
    print(f"state {box.inner}")
    return x


def test_an_object_holding_traced_arrays_prints_its_values_when_the_program_runs():
    """Its text was made while tracing: `Box(w=JitTracer(float32[2]))` on every call."""
    check_prints(prints_objects_holding_traced_arrays, jnp.array([1.0, 2.0]))


def debug_prints_beside_prints(w):
    for step in range(3):
        w = w * 0.5
        jax.debug.print("debug step {} w {}", step, w.sum())
        print("print step", step)
        if w.sum() > 0.6:
            jax.debug.callback(lambda v: print("callback", v), w.sum())
    jax.debug.print("done")
    return w


def test_jax_debug_print_and_callback_keep_eagers_order_among_prints():
    """Found by a model-code probe: jax's debug effects are unordered by default, so they came
    out before the prints beside them, in any order; eagerly each prints where it stands."""
    printed = check_prints(debug_prints_beside_prints, jnp.ones(2), calls=3)
    assert printed.count("callback") == 1 and printed.endswith("print step 2\ndone\n"), printed


def prints_weak_reprs(x):
    y = jnp.asarray(1.0)
    print(repr(x), repr(y), [x * 2], str(x))
    return x


def test_the_repr_of_a_weakly_typed_array_says_so(capsys):
    """Eager's `repr` of `jnp.array(2.5)` or `jnp.asarray(1.0)` ends `weak_type=True)`; the text
    made at run time lost it (Paddle's print tests, ported)."""
    x = jnp.array(2.5)
    prints_weak_reprs(x)
    eager = capsys.readouterr().out
    assert "weak_type=True" in eager
    static = dy2st.to_static(prints_weak_reprs)
    for run in (static, static, jax.jit(static)):
        run(x)
        assert capsys.readouterr().out == eager


def prints_array_arithmetic_in_a_branch(x):
    w = jnp.array(2.5)
    if x.sum() > 0:
        print([w, w * 2], w + 1)
    else:
        print(w - 1)
    return x


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_array_arithmetic_on_a_constant_in_a_staged_branch_prints_as_an_array(sign, capsys):
    """`w * 2` of a `jnp.array(2.5)` made before a staged `if` printed as a Python float (`5.0`):
    the branch reads `w` as a value from before it, which the numbers rule took for a Python
    number, as it takes a constant (fuzzer, models stream)."""
    x = sign * jnp.ones(3)
    prints_array_arithmetic_in_a_branch(x)
    eager = capsys.readouterr().out
    static = dy2st.to_static(prints_array_arithmetic_in_a_branch)
    for run in (static, static, jax.jit(static)):
        run(x)
        assert capsys.readouterr().out == eager


def prints_reprs_jax_lays_out_its_own_way(x):
    print(repr(x > 0), repr((x > 0)[0]))  # bool arrays: numpy's repr has no dtype
    print(repr(jnp.tile(x, 400)))  # summarised: numpy's repr adds `shape=`
    print(repr(x[:0]), repr(jnp.arange(40.0).reshape(4, 10) * x[0]))  # empty; wrapped lines
    print([x.astype(jnp.int8), x.astype(jnp.bfloat16)])


def test_reprs_made_at_run_time_are_jax_arrays_reprs(capsys):
    """The text made at run time used numpy's repr with `array` renamed: a bool array lost its
    `dtype=bool`, a summarised one gained `shape=(1200,)` (probe of Python semantics)."""
    x = jnp.array([1.0, -2.0, 3.0])
    prints_reprs_jax_lays_out_its_own_way(x)
    eager = capsys.readouterr().out
    assert "dtype=bool" in eager
    static = dy2st.to_static(prints_reprs_jax_lays_out_its_own_way)
    for run in (static, static, jax.jit(static)):
        run(x)
        jax.effects_barrier()
        assert capsys.readouterr().out == eager


@dataclasses.dataclass
class _Stat:
    mean: object
    n: int


def prints_then_returns_an_object(x):
    s = _Stat(x.mean(), x.shape[0])
    print(s)
    return s


def test_an_object_printed_then_returned_is_given_back(capsys):
    """The print kept the object itself to render at run time, so the return took it for one
    held outside the call and refused it (probe of Python semantics)."""
    x = jnp.array([1.0, 2.0, 3.0])
    eager = prints_then_returns_an_object(x)
    eager_text = capsys.readouterr().out
    static = dy2st.to_static(prints_then_returns_an_object)
    for _ in range(2):
        got = static(x)
        jax.effects_barrier()
        assert capsys.readouterr().out == eager_text
        assert type(got) is _Stat and got.n == eager.n and jnp.array_equal(got.mean, eager.mean)
