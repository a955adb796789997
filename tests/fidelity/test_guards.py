"""Python values read from outside the arguments are eager's on every call (runtime/guards.py):
globals, closure cells and defaults changed between calls trace again; Python effects (a global
counter, a default list, a closure's log) happen on every call; a function reading no such value
keeps jit's own dispatch."""

import contextlib
import functools
import itertools
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.runtime import guards

X = jnp.arange(3.0)

FLAG = True
SCALE = {"k": 2.0}
TABLE = np.array([1.0, 2.0, 3.0], np.float32)
WEIGHT = jnp.ones(3)
COUNT = 0


def reads_globals(x):
    y = x * SCALE["k"] + WEIGHT + TABLE
    if FLAG:
        return y + 1
    return y - 1


def test_globals_changed_between_calls_are_read_again():
    global FLAG, WEIGHT
    static = dy2st.to_static(reads_globals)
    try:
        for flag in (True, False, True):
            for k in (2.0, 3.0):
                FLAG = flag
                SCALE["k"] = k
                for _ in range(2):
                    np.testing.assert_array_equal(static(X), reads_globals(X))
        TABLE[0] = 10.0  # a numpy array changed in place
        np.testing.assert_array_equal(static(X), reads_globals(X))
        WEIGHT = jnp.zeros(3)  # a global array rebound
        np.testing.assert_array_equal(static(X), reads_globals(X))
    finally:
        FLAG, SCALE["k"], WEIGHT = True, 2.0, jnp.ones(3)
        TABLE[0] = 1.0


def make_scaled(scale):
    def scaled(x):
        return x * scale[0]
    return scaled


WIDE = np.ones(3)  # float64: JAX makes a float32 device copy of it, which it keeps by identity


def reads_a_float64_table(x):
    return x + WIDE


def test_a_float64_numpy_array_changed_in_place_is_read_again():
    """The guard saw the change and the function traced again, but JAX gave the trace the
    device copy it had made of the array the first time (probe of Python semantics)."""
    static = dy2st.to_static(reads_a_float64_table)
    for value in (1.0, 10.0, 20.0):
        WIDE[0] = value
        np.testing.assert_array_equal(static(X), X + np.float32(value) * np.array([1, 0, 0]) + np.array([0, 1, 1]))


def test_a_closure_cell_changed_between_calls_is_read_again():
    scale = [2.0]
    fn = make_scaled(scale)
    static = dy2st.to_static(fn)
    for value in (2.0, 5.0, 5.0, -1.0):
        scale[0] = value
        np.testing.assert_array_equal(static(X), fn(X))


def counts(x):
    global COUNT
    COUNT += 1
    return x + COUNT


def appends_to_default(x, acc=[]):
    acc.append(1)
    return x * len(acc)


def test_python_effects_happen_on_every_call():
    global COUNT
    static = dy2st.to_static(counts)
    COUNT = 0
    eager = [counts(X) for _ in range(3)]
    COUNT = 0
    got = [static(X) for _ in range(3)]
    assert COUNT == 3
    for e, s in zip(eager, got):
        np.testing.assert_array_equal(e, s)
    static = dy2st.to_static(appends_to_default)
    got = [static(X) for _ in range(3)]
    assert [float(g[1]) for g in got] == [1.0, 2.0, 3.0]


def scales(x, k=2.0, *, shift=1.0):
    if x.sum() > 0:
        return x * k + shift
    return x - k


def calls_scales(x):
    return scales(x) + 1


class Stepper:
    def step(self, x, k=1.0):
        return scales(x, k)


@pytest.mark.parametrize("x", [X, -X])
def test_defaults_set_on_the_function_between_calls_are_read_again(x):
    """`f.__defaults__ = ...` / `f.__kwdefaults__ = ...` on the function itself, a helper it
    calls, a method: eager binds the new defaults on the next call."""
    stepper = Stepper()
    cases = [(scales, dy2st.to_static(scales)), (calls_scales, dy2st.to_static(calls_scales)),
             (stepper.step, dy2st.to_static(stepper.step))]
    try:
        for defaults, kwdefaults, method_defaults in [((2.0,), {"shift": 1.0}, (1.0,)), ((5.0,), {"shift": 1.0}, (3.0,)),
                                                      ((5.0,), {"shift": -2.0}, (3.0,)), ((2.0,), {"shift": 1.0}, (1.0,))]:
            scales.__defaults__, scales.__kwdefaults__ = defaults, kwdefaults
            Stepper.step.__defaults__ = method_defaults
            for eager, static in cases:
                for _ in range(2):
                    np.testing.assert_array_equal(static(x), eager(x))
    finally:
        scales.__defaults__, scales.__kwdefaults__ = (2.0,), {"shift": 1.0}
        Stepper.step.__defaults__ = (1.0,)


def helper(x):
    return x * SCALE["k"]


def calls_a_helper(x):
    return helper(x) + 1


def test_values_a_called_function_reads_are_guarded_too():
    static = dy2st.to_static(calls_a_helper)
    try:
        for k in (2.0, 4.0):
            SCALE["k"] = k
            np.testing.assert_array_equal(static(X), calls_a_helper(X))
    finally:
        SCALE["k"] = 2.0


def test_a_function_reading_nothing_outside_keeps_the_front():
    def pure(x):
        if x.sum() > 0:
            return jnp.tanh(x)
        return x

    static = dy2st.to_static(pure)
    static(X)
    static(X)
    assert not static._guards
    assert type(static.func).__name__ == "PjitFunction"  # jit's own C++ dispatch


def test_a_guarded_function_warns_once_when_it_keeps_changing(caplog):
    static = dy2st.to_static(counts)
    with caplog.at_level(logging.WARNING, logger="dy2st"):
        for _ in range(dy2st.config.config.retrace_warning_threshold + 3):
            static(X)
    warnings = [r for r in caplog.records if "global COUNT" in r.getMessage()]
    assert len(warnings) == 1 and "counts" in warnings[0].getMessage()


def test_tokens_tell_values_apart_as_eager_code_would():
    kept = []
    assert guards._freeze(1, kept) != guards._freeze(1.0, kept) != guards._freeze(True, kept)
    assert guards._freeze(0.0, kept) != guards._freeze(-0.0, kept)
    assert guards._freeze(float("nan"), kept) == guards._freeze(float("nan"), kept)
    t = [1, {"a": (2, 3)}]
    before = guards._freeze(t, kept)
    t[1]["a"] = (2, 4)
    assert guards._freeze(t, kept) != before
    cycle = []
    cycle.append(cycle)
    assert guards._freeze(cycle, kept) == guards._freeze(cycle, kept)


LOG = []


def check():
    LOG.append(1)
    return True


class Counted:
    def __init__(self):
        self.reads = 0

    @property
    def scale(self):
        self.reads += 1
        return 2.0


COUNTED = Counted()


def effect_in_lazy_operand(x):
    ok = x.sum() < 0 and check()
    return x, ok


def effect_in_property_read_in_a_branch(x):
    if x.sum() > 0:
        y = x * COUNTED.scale
    else:
        y = x
    return y


def effect_in_a_loop_body(x):
    while x.sum() < 10:
        check()
        x = x + 1
    return x


@pytest.mark.parametrize("fn", [effect_in_lazy_operand, effect_in_property_read_in_a_branch, effect_in_a_loop_body])
def test_a_python_effect_in_a_staged_side_is_refused_at_its_line(fn):
    # (a list appended to in place in a staged `and`'s side is refused at the append itself)
    with pytest.raises(dy2st.errors.PythonEffectError,
                       match=r"(?s)(changes the global (LOG|COUNTED)|changes COUNTED\.reads, a Python value from outside|LOG.append\(1\)\n.*changes a list in place).*To fix") as info:
        dy2st.to_static(fn)(X)
    assert info.value.origin.filename == __file__


def test_a_python_effect_decided_in_python_runs_as_eagerly():
    def f(x, n):
        if n > 0 and check():  # Python values: eager's short circuit, on every call
            return x + 1
        return x

    static = dy2st.to_static(f)
    LOG.clear()
    for n in (0, 1, 1, 0, 2):
        np.testing.assert_array_equal(static(X, n), X + 1 if n > 0 else X)
    assert len(LOG) == 3


def counts_in_a_loop_with_a_traced_break(x):
    global COUNT
    for i in range(3):
        if x.sum() > 3:
            break
        COUNT += 1
    return x


def test_a_refused_global_write_keeps_the_global():
    # real-program fuzzer, seed 700225: the refused call left the module without the global
    global COUNT
    COUNT = 5
    with pytest.raises(dy2st.errors.ScopeWriteError):
        dy2st.to_static(counts_in_a_loop_with_a_traced_break)(X)
    assert COUNT == 5


def counts_in_a_loop_over_a_list(x, xs):
    global COUNT
    for i, v in enumerate(xs):
        COUNT = (COUNT + 4) % 97
        if x.min() < 5:
            break
    return x


def test_a_refused_global_write_in_a_staged_loop_leaves_no_tracer():
    # real-program fuzzer, seed 920989: the loop's carried tracer stayed in the global
    global COUNT
    COUNT = 3
    with pytest.raises(dy2st.errors.ScopeWriteError):
        dy2st.to_static(counts_in_a_loop_over_a_list)(X, [X, X, X])
    assert COUNT == 3


# -- attributes of a user's module or class (issue 29's guard gaps) ------------------------------
class Defaults:
    lr = 0.5
    clip = True


def reads_class_attributes(x):
    y = x * Defaults.lr
    if Defaults.clip:
        y = jnp.clip(y, -1.0, 1.0)
    return y


def test_a_class_attribute_changed_between_calls_is_read_again():
    static = dy2st.to_static(reads_class_attributes)
    x = jnp.array([1.0, 4.0, -6.0])
    try:
        for lr, clip in [(0.5, True), (0.5, True), (2.0, True), (2.0, False), (0.25, False)]:
            Defaults.lr, Defaults.clip = lr, clip
            for _ in range(2):
                np.testing.assert_allclose(static(x), reads_class_attributes(x))
                # under an outer jit, jit's own cache keeps what a trace read, as for eager code
                np.testing.assert_allclose(jax.jit(static)(x), jax.jit(reads_class_attributes)(x))
    finally:
        Defaults.lr, Defaults.clip = 0.5, True


def test_a_user_module_attribute_changed_between_calls_is_read_again(tmp_path, monkeypatch):
    import importlib

    (tmp_path / "dy2st_guard_config.py").write_text("DEBUG = False\nSCALE = 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = importlib.import_module("dy2st_guard_config")
    source = tmp_path / "dy2st_guard_user.py"
    source.write_text(
        "import jax.numpy as jnp\nimport dy2st_guard_config as config\n\n"
        "def step(x):\n"
        "    y = x * config.SCALE\n"
        "    if config.DEBUG:\n"
        "        y = y + 100.0\n"
        "    return y\n")
    user = importlib.import_module("dy2st_guard_user")
    static = dy2st.to_static(user.step)
    x = jnp.arange(3.0)
    for debug, scale in [(False, 2.0), (True, 2.0), (True, 3.0), (False, 3.0)]:
        config.DEBUG, config.SCALE = debug, scale
        for _ in range(2):
            np.testing.assert_allclose(static(x), user.step(x))


def uses_a_library_module_constant(x):
    import math
    return x * math.pi


def test_a_library_module_attribute_is_not_guarded():
    static = dy2st.to_static(uses_a_library_module_constant)
    static(jnp.ones(2))
    static(jnp.ones(2))
    assert static._fast is not None  # no guard: jit's own dispatch


# -- effects of context managers and methods, class attributes through self / cls -----------------
EVENTS = []


class Span:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        EVENTS.append("enter " + self.name)
        return self

    def __exit__(self, *exc):
        EVENTS.append("exit " + self.name)
        return False


@contextlib.contextmanager
def span(name):
    EVENTS.append("in " + name)
    yield name
    EVENTS.append("out " + name)


def with_managers(x):
    with Span("a") as s, span("b") as name:
        y = x * len(s.name + name)
    with jax.named_scope("library"):  # a library's manager: nothing of the user's to note
        y = y + 1
    return y


class Stats:
    calls = 0
    scale = 2.0

    @classmethod
    def hit(cls):
        cls.calls += 1
        return cls.scale


class Scaled(Stats):
    def apply(self, x):
        return x * self.scale  # a class attribute of its base, through self


def with_methods(x):
    return Scaled().apply(x) * Stats.hit()


def test_context_managers_make_their_effects_on_every_call():
    # Python calls __enter__/__exit__ itself (not through convert_call): they ran on the first
    # call only, the program replayed without them
    static = dy2st.to_static(with_managers)
    for fn in (with_managers, static, with_managers, static):
        EVENTS.clear()
        for _ in range(3):
            np.testing.assert_allclose(fn(X), with_managers(X))
        assert EVENTS == ["enter a", "in b", "out b", "exit a"] * 6


def test_class_attributes_through_cls_and_self_are_read_and_changed_on_every_call():
    static = dy2st.to_static(with_methods)
    try:
        for scale in (2.0, 2.0, 3.0):
            Stats.scale = scale
            for fn in (with_methods, static):
                before = Stats.calls
                np.testing.assert_allclose(fn(X), X * scale * scale)
                assert Stats.calls == before + 1
    finally:
        Stats.calls, Stats.scale = 0, 2.0


def test_a_context_manager_changing_a_global_in_a_staged_side_is_refused():
    def staged(x):
        if x.sum() > 0:
            with Span("c"):
                x = x * 2
        return x

    with pytest.raises(dy2st.Dy2StaticError, match="changes the global EVENTS"):
        dy2st.to_static(staged)(X)


# -- iterators from outside, advanced by the function ---------------------------------------------
BATCHES = iter([])
COUNTER = itertools.count()


def next_batch(w):
    return w * next(BATCHES) + next(COUNTER)


def next_given(w, it):
    return w * next(it)


def _counting():
    k = 0
    while True:
        k += 1
        yield k


def test_an_iterator_from_outside_gives_its_next_item_on_every_call():
    # its first item was frozen into the program: the iterator looked the same on every call
    global BATCHES, COUNTER
    static = dy2st.to_static(next_batch)
    results = {}
    for fn in (next_batch, static):
        BATCHES, COUNTER = iter([1.0, 2.0, 3.0]), itertools.count(5)
        results[fn] = [float(fn(X)[1]) for _ in range(3)]
    assert results[static] == results[next_batch] == [6.0, 8.0, 10.0]
    given = dy2st.to_static(next_given)
    for make in (lambda: iter([1.0, 2.0, 3.0]), _counting, lambda: iter({1.0: 0, 2.0: 0, 3.0: 0})):
        eager_it, static_it = make(), make()
        assert [float(given(X, static_it)[1]) for _ in range(3)] == [float(next_given(X, eager_it)[1]) for _ in range(3)]


def spans_in_a_static_loop(x):
    for i in range(2):
        with Span(str(i + 1)):
            x = x + 1
    return x


def test_a_python_effect_in_a_loop_of_known_length_unrolls_it():
    # Staged as a scan, the body appended traced values to EVENTS and was refused, leaving them
    # there; now the loop runs as Python, as eagerly
    static = dy2st.to_static(spans_in_a_static_loop)
    for fn in (spans_in_a_static_loop, static, static):
        EVENTS.clear()
        np.testing.assert_array_equal(fn(X), X + 2)
        assert EVENTS == ["enter 1", "exit 1", "enter 2", "exit 2"]


def test_a_refused_side_puts_back_the_global_list_it_changed():
    def staged_while(x):
        while x.sum() < 10:
            with Span("w"):
                x = x + 1
        return x

    EVENTS.clear()
    with pytest.raises(dy2st.Dy2StaticError, match="changes the global EVENTS"):
        dy2st.to_static(staged_while)(X)
    assert EVENTS == []


def bumps_count(x):
    global COUNT
    COUNT += 1
    return x * COUNT


def test_a_value_the_trace_changes_is_changed_on_every_call_even_when_reset():
    # The guard's token was the value before the trace's own bump: a caller resetting the
    # counter to it got the cached program, which bumps nothing
    global COUNT
    static = dy2st.to_static(bumps_count)
    try:
        for fn in (bumps_count, static):
            for _ in range(3):
                COUNT = 0
                np.testing.assert_array_equal(fn(X), X)
                assert COUNT == 1
    finally:
        COUNT = 0


class _Counted:
    calls = 0

    @classmethod
    def hit(cls):
        cls.calls += 1  # on a subclass: sets the subclass's own attribute, shadowing this one
        return cls.calls


class _Sub(_Counted):
    pass


def reads_an_inherited_attribute(x):
    s = _Sub()
    before = s.calls
    return x * (before + type(s).hit())


def test_an_attribute_a_subclass_gains_shadowing_its_base_is_read_on_every_call():
    # The subclass had no `calls` when traced (it was the base's): the one its classmethod then
    # set went unguarded, and the program kept the first call's value (seed 1102961)
    static = dy2st.to_static(reads_an_inherited_attribute)
    results = {}
    for fn in (reads_an_inherited_attribute, static):
        if "calls" in vars(_Sub):
            del _Sub.calls
        results[fn] = [float(fn(X)[1]) for _ in range(3)]
    assert results[static] == results[reads_an_inherited_attribute] == [1.0, 3.0, 5.0]


class Scheduled:
    lr = 0.1  # a class-level hyperparameter a schedule sets between calls

    def __init__(self):
        self.w = jnp.ones(2)

    def step(self, g):
        if g.sum() > 0:
            return self.w - self.lr * g
        return self.w


def step_of(trainer, g):
    return trainer.w - trainer.lr * g


def test_a_class_attribute_read_through_self_or_an_argument_is_read_again():
    # read through `self` or an argument object, it was frozen at the first trace (inside a
    # function especially, where nothing else made the program trace again)
    def main():
        trainer, g = Scheduled(), jnp.ones(2)
        bound, plain = dy2st.to_static(trainer.step), dy2st.to_static(step_of)
        for lr in (0.1, 0.5, 0.01, 0.5):
            Scheduled.lr = lr
            np.testing.assert_allclose(bound(g), trainer.step(g), rtol=1e-6)
            np.testing.assert_allclose(plain(trainer, g), step_of(trainer, g), rtol=1e-6)

    try:
        main()
    finally:
        Scheduled.lr = 0.1


def test_a_class_constant_of_an_equinox_module_changed_between_calls_is_read_again():
    eqx = pytest.importorskip("equinox")

    class Scaled(eqx.Module):
        w: jax.Array
        SCALE = 1.0

        def __call__(self, x):
            return self.w * x * self.SCALE

    model = Scaled(jnp.ones(2))
    static = dy2st.to_static(model)
    for scale in (1.0, 5.0, 2.0):
        Scaled.SCALE = scale
        np.testing.assert_allclose(static(jnp.ones(2)), model(jnp.ones(2)))


# -- code rebound between calls: a notebook cell defines a helper again, a test patches a method.
# The user's functions and classes are guarded by identity; a library's code is machinery.

def activation(x):
    return jnp.tanh(x)


class Layer:
    def __init__(self):
        self.w = jnp.array([1.0, -2.0, 3.0])

    def act(self, y):
        return y + 1.0

    @staticmethod
    def bias():
        return 0.5

    def forward(self, x):
        y = x * self.w + self.bias()
        if y.sum() > 0:
            return self.act(y)
        return -y


LAYER = Layer()


def uses_activation(x):
    if x.sum() > 0:
        return activation(x) * 2.0
    return activation(-x)


def uses_global_layer(x):
    return LAYER.act(x) * 3.0


def uses_argument_layer(layer, x):
    return layer.act(x) - 1.0


def builds(x):
    return Box(x).scaled()


class Box:
    def __init__(self, v):
        self.v = v

    def scaled(self):
        return self.v * 2.0


class OtherBox(Box):
    def scaled(self):
        return self.v * -5.0


@contextlib.contextmanager
def rebound(holder, name, value):
    """`holder.name = value` for the block (a module's global or a class's attribute)."""
    old = holder[name] if isinstance(holder, dict) else vars(holder)[name]  # (a staticmethod as is)
    if isinstance(holder, dict):
        holder[name] = value
    else:
        setattr(holder, name, value)
    try:
        yield
    finally:
        if isinstance(holder, dict):
            holder[name] = old
        else:
            setattr(holder, name, old)


def _same_on_calls(static, eager, *args):
    for _ in range(2):
        np.testing.assert_allclose(static(*args), eager(*args), rtol=1e-6)


@pytest.mark.parametrize("x", [X, -X - 1.0], ids=["positive", "negative"])
def test_a_global_function_defined_again_between_calls_is_called_again(x):
    static = dy2st.to_static(uses_activation)
    _same_on_calls(static, uses_activation, x)
    with rebound(globals(), "activation", lambda v: v * 10.0):
        _same_on_calls(static, uses_activation, x)
    _same_on_calls(static, uses_activation, x)


def test_a_to_static_helper_defined_again_between_calls_is_called_again():
    static = dy2st.to_static(uses_activation)
    _same_on_calls(static, uses_activation, X)
    with rebound(globals(), "activation", dy2st.to_static(lambda v: v - 7.0)):
        _same_on_calls(static, uses_activation, X)


@pytest.mark.parametrize("x", [X, -X - 1.0], ids=["positive", "negative"])
def test_a_method_patched_on_the_class_between_calls_is_called_again(x):
    layer = Layer()
    method = dy2st.to_static(layer.forward)
    via_global, via_argument = dy2st.to_static(uses_global_layer), dy2st.to_static(uses_argument_layer)

    def check():
        _same_on_calls(method, layer.forward, x)
        _same_on_calls(via_global, uses_global_layer, x)
        _same_on_calls(via_argument, uses_argument_layer, layer, x)

    check()
    with rebound(Layer, "act", lambda self, y: y * 100.0):
        check()
        with rebound(Layer, "bias", staticmethod(lambda: -4.0)):
            check()
    check()


def test_a_global_class_rebound_between_calls_is_built_again():
    static = dy2st.to_static(builds)
    _same_on_calls(static, builds, X)
    with rebound(globals(), "Box", OtherBox):
        _same_on_calls(static, builds, X)
    _same_on_calls(static, builds, X)


def test_a_library_function_read_as_a_global_is_not_guarded():
    relu = jax.nn.relu

    def only_library_code(x):
        if x.sum() > 0:
            return relu(x)
        return jnp.tanh(x)

    static = dy2st.to_static(only_library_code)
    static(X)
    static(X)
    assert not static._guards
    assert type(static.func).__name__ == "PjitFunction"


def test_an_unchanged_helper_costs_one_identity_test_per_call():
    static = dy2st.to_static(uses_activation)
    static(X)
    (key, check), = static._guards.checks.items()
    assert key[2] == "activation" and check()
    with rebound(globals(), "activation", jnp.sin):
        assert not check()


# -- an attribute a class gains between calls: the trace found it missing ------------------------
class Options:
    pass


def reads_optional_settings(x, opts):
    if hasattr(Options, "boost"):
        x = x * 3.0
    return x + getattr(opts, "shift", 0.0)


def test_an_attribute_a_class_gains_between_calls_is_read_again():
    static = dy2st.to_static(reads_optional_settings)
    opts = Options()
    try:
        for step in range(4):
            if step == 1:
                Options.boost = True  # hasattr was false when traced
            if step == 2:
                Options.shift = 0.5  # getattr gave its default when traced
            if step == 3:
                del Options.boost
            for _ in range(2):
                np.testing.assert_allclose(static(X, opts), reads_optional_settings(X, opts))
    finally:
        for name in ("boost", "shift"):
            if name in vars(Options):
                delattr(Options, name)


# -- under the user's own jax.jit: a loop whose body makes a Python effect runs as Python --------
SPANS = []


class Tagged:
    def __init__(self, tag):
        self.tag = tag

    def __enter__(self):
        SPANS.append(self.tag)
        return self

    def __exit__(self, *exc_info):
        SPANS.append(-self.tag)
        return False


def spans_in_a_loop(x):
    for t in range(2):
        with Tagged(t + 1):
            x = x + t
    if len(SPANS) >= 3:
        return x * 2
    return x


def test_a_loop_with_a_python_effect_runs_as_python_under_the_users_jit():
    # Inline into the user's jit there is no program of dy2st's: the loop was a scan, its body
    # (and the context manager's appends) ran once, so `len(SPANS)` read 2 where eager reads 4.
    # (jit traces once per function: each side is called once, as jit caches both)
    SPANS.clear()
    expected = jax.jit(spans_in_a_loop)(X)
    eager_spans = list(SPANS)
    SPANS.clear()
    static = jax.jit(dy2st.to_static(spans_in_a_loop))
    np.testing.assert_array_equal(static(X), expected)
    np.testing.assert_array_equal(static(X), expected)
    assert SPANS == eager_spans == [1, -1, 2, -2]


def test_an_attribute_a_user_module_gains_between_calls_is_read_again(tmp_path, monkeypatch):
    import importlib

    (tmp_path / "dy2st_guard_options.py").write_text("SCALE = 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    options = importlib.import_module("dy2st_guard_options")

    def step(x):
        y = x * getattr(options, "BOOST", 1.0)
        if hasattr(options, "SHIFT"):
            y = y + options.SHIFT
        return y

    static = dy2st.to_static(step)
    for boost, shift in [(None, None), (5.0, None), (5.0, 0.5), (None, 0.5), (None, None)]:
        for name, value in (("BOOST", boost), ("SHIFT", shift)):
            if value is None:
                vars(options).pop(name, None)
            else:
                setattr(options, name, value)
        for _ in range(2):
            np.testing.assert_allclose(static(X), step(X))


def scaled_pair(pair):
    a, b = pair
    return a * SCALE["k"] + b


def test_a_guarded_call_of_a_pytree_checks_its_guards_once(monkeypatch):
    # (the generated dispatcher tested them before the array-only test, and again on the pytree route)
    counted = []
    holds = guards.GuardSet.holds
    monkeypatch.setattr(guards.GuardSet, "holds", lambda self: counted.append(1) or holds(self))
    static = dy2st.to_static(scaled_pair)
    pair = (X, X + 1.0)
    for _ in range(3):
        static(pair)
    counted.clear()
    np.testing.assert_allclose(static(pair), scaled_pair(pair))
    assert len(counted) == 1


class Settings:
    pass


class MaybeScaled:
    def __init__(self):
        self.w = jnp.ones(3)

    def forward(self, x):
        try:
            s = self.scale
        except AttributeError:
            s = 1.0
        if x.sum() > 0:
            return x * s * self.w
        return x - s


def scale_of(x, settings, name):
    try:
        s = settings.scale
    except AttributeError:
        s = 1.0
    return x * s + getattr(Settings, name, 0.0)


SETTINGS = Settings()


def scale_of_global(x):
    try:
        s = SETTINGS.scale
    except AttributeError:
        s = 1.0
    try:
        return x * s + getattr(SETTINGS, "shift")
    except AttributeError:
        return x * s


@pytest.mark.parametrize("x", [X, -X])
def test_an_attribute_a_class_gains_or_loses_is_read_again_under_except_attribute_error(x):
    """`try: s = obj.scale` / `except AttributeError:` (and `getattr` without a default, of a name
    the caller gives): a class that gains the attribute between calls is read again, as eagerly."""
    model, settings = MaybeScaled(), Settings()
    cases = [(model.forward, dy2st.to_static(model.forward), ()),
             (scale_of, dy2st.to_static(scale_of), (settings, "shift")),
             (scale_of_global, dy2st.to_static(scale_of_global), ())]
    try:
        for change in (None, "gain", "lose", "gain"):
            if change == "gain":
                MaybeScaled.scale = Settings.scale = 3.0
                Settings.shift = 0.5
            elif change == "lose":
                del MaybeScaled.scale, Settings.scale, Settings.shift
            for eager, static, rest in cases:
                for _ in range(2):
                    np.testing.assert_array_equal(static(x, *rest), eager(x, *rest))
    finally:
        for klass, name in ((MaybeScaled, "scale"), (Settings, "scale"), (Settings, "shift")):
            if name in vars(klass):
                delattr(klass, name)


SCALE_BY = functools.partial(lambda a, c=1.0: a * c)


def scales_by_partial(x):
    return SCALE_BY(x)


def test_a_partials_arguments_changed_in_place_are_read_again():
    static = dy2st.to_static(scales_by_partial)
    try:
        for c in (1.0, 2.0, 2.0, 5.0):
            SCALE_BY.keywords["c"] = c
            np.testing.assert_array_equal(static(X), scales_by_partial(X))
    finally:
        SCALE_BY.keywords.clear()


TRACES_COUNTED = 0


def counts_and_appends(x, log):
    global TRACES_COUNTED
    TRACES_COUNTED += 1
    log.append(1)
    return x * len(log)


def test_a_trace_given_up_for_another_route_does_not_repeat_outside_effects():
    """The first call finds the function changes its list argument and traces again with the
    list lifted: the global the first trace bumped is put back first, so it counts once."""
    global TRACES_COUNTED
    static = dy2st.to_static(counts_and_appends)
    TRACES_COUNTED = 0
    for n in range(1, 4):
        static(X, [])
        assert TRACES_COUNTED == n


# -- more places a Python value lives outside the arguments (found by a probe): a function's
# own attributes, a module made at run time, a numpy scalar, a class given as an argument

LR = np.float32(1.0)


def scaled_by_its_attribute(x):
    scaled_by_its_attribute.calls += 1  # a call counter kept on the function
    return x * scaled_by_its_attribute.scale + LR


scaled_by_its_attribute.calls, scaled_by_its_attribute.scale = 0, 1.0


def test_function_attributes_and_numpy_scalars_are_read_on_every_call():
    global LR
    fn = scaled_by_its_attribute
    static = dy2st.to_static(fn)
    got, want = [], []
    try:
        for step in range(3):
            fn.scale, LR = 1.0 + step, np.float32(step)
            fn.calls = 0
            want.append((np.asarray(fn(X)), fn.calls))
            fn.calls = 0
            got.append((np.asarray(static(X)), fn.calls))
        for (g, gc), (w, wc) in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert gc == wc == 1
    finally:
        LR, fn.calls, fn.scale = np.float32(1.0), 0, 1.0


def test_a_module_made_at_run_time_is_read_on_every_call():
    import types

    cfg = types.ModuleType("dy2st_test_cfg")
    cfg.K, cfg.COUNT = 1.0, 0

    def f(x):
        cfg.COUNT += 1
        return x * cfg.K

    static = dy2st.to_static(f)
    for k in (1.0, 2.0, 3.0):
        cfg.K = k
        np.testing.assert_array_equal(static(X), X * k)
    assert cfg.COUNT == 3


class Counted:
    k = 1.0


def bumps_its_class(x, cls):
    r = x * cls.k
    cls.k += 1
    return r


def test_a_class_given_as_an_argument_is_read_and_changed_on_every_call():
    static = dy2st.to_static(bumps_its_class)
    try:
        outs = [np.asarray(static(X, Counted))[1] for _ in range(3)]
        assert outs == [1.0, 2.0, 3.0] and Counted.k == 4.0
    finally:
        Counted.k = 1.0


def counts_with_a_default(x):
    counts_with_a_default.calls = getattr(counts_with_a_default, "calls", 0) + 1  # no attribute at first
    return x + counts_with_a_default.calls


def test_a_function_attribute_read_with_a_default_counts_every_call():
    static = dy2st.to_static(counts_with_a_default)
    try:
        outs = [float(static(X)[0]) for _ in range(3)]
        assert outs == [1.0, 2.0, 3.0] and counts_with_a_default.calls == 3
    finally:
        counts_with_a_default.__dict__.pop("calls", None)


def scaled_by_keywords(x, *, scale=2.0, train=False):
    return x * scale if train else x + scale


def test_keyword_defaults_set_in_place_between_calls_are_read():
    static = dy2st.to_static(scaled_by_keywords)
    try:
        for scale in (2.0, 3.0, 3.0, 2.5):
            scaled_by_keywords.__kwdefaults__["scale"] = scale  # the same dict, another value
            for train in (False, True):
                np.testing.assert_array_equal(static(X, train=train), scaled_by_keywords(X, train=train))
    finally:
        scaled_by_keywords.__kwdefaults__["scale"] = 2.0


params = {"w": jnp.ones(3)}  # a global named like an attribute the function reads


class _State:
    def __init__(self):
        self.params = {"w": jnp.full(3, 2.0)}


def reads_an_attribute_named_like_a_global(state, x):
    return state.params["w"] * x


def test_an_attribute_named_like_a_global_guards_no_global():
    """`state.params` put `params` among the names the guards read (co_names holds attribute
    names too): the global dict of that name was walked on every call (a flax TrainState step
    beside a global `params`: 143 against 86 us a call), and changing it traced again."""
    static = dy2st.to_static(reads_an_attribute_named_like_a_global)
    state = _State()
    for _ in range(2):
        np.testing.assert_array_equal(static(state, jnp.ones(3)), reads_an_attribute_named_like_a_global(state, jnp.ones(3)))
    assert not [key for key in static._guards.entries if key[0] == "g"]  # (`_State` gaining one is read)
    params["w"] = jnp.zeros(3)  # not read: no trace again, and the answer is eager's
    np.testing.assert_array_equal(static(state, jnp.ones(3)), reads_an_attribute_named_like_a_global(state, jnp.ones(3)))
