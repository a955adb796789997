"""Flax NNX modules: to_static __call__ with parameters as inputs, BatchNorm statistics and
counters written back in place, nnx.grad / nnx.jit, and an optax step without recompiling."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.testing.models import assert_same_state, check_model_equivalent, run_eagerly

pytestmark = pytest.mark.models
nnx = pytest.importorskip("flax.nnx")
optax = pytest.importorskip("optax")

POS = jnp.linspace(0.1, 1.0, 12).reshape(3, 4)
NEG = -POS


class Net(nnx.Module):
    def __init__(self, width=8, seed=0):
        rngs = nnx.Rngs(seed)
        self.l1 = nnx.Linear(4, width, rngs=rngs)
        self.bn = nnx.BatchNorm(width, rngs=rngs)
        self.l2 = nnx.Linear(width, 2, rngs=rngs)
        self.count = nnx.Variable(jnp.zeros((), jnp.int32))

    @dy2st.to_static
    def __call__(self, x):
        h = self.bn(self.l1(x))  # updates the batch statistics
        if h.mean() > 0:
            h = nnx.relu(h)
        else:
            h = jnp.tanh(h) * 2
        self.count[...] = self.count[...] + 1
        return self.l2(h)


def call(model, x):
    return model(x)


@pytest.mark.parametrize("x", [POS, NEG], ids=["pos", "neg"])
def test_outputs_and_state_after_call(x):
    eager, static, _ = check_model_equivalent(Net, call, x)
    identity = static.bn
    y_eager = run_eagerly(call, eager, x * 0.5)
    np.testing.assert_allclose(call(static, x * 0.5), y_eager, rtol=1e-5, atol=1e-5)
    assert_same_state(eager, static, atol=1e-5)
    assert static.bn is identity and int(static.count[...]) == 2


def test_nnx_grad_matches_eager():
    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    for x in (POS, NEG):
        eager, static = Net(), Net()
        g_static = nnx.grad(loss)(static, x)
        g_eager = run_eagerly(nnx.grad(loss), eager, x)
        jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5),
                               nnx.state(g_static), nnx.state(g_eager))
        assert_same_state(eager, static, atol=1e-5)  # batch statistics updated inside nnx.grad


def test_nnx_jit_composes():
    eager, static = Net(), Net()
    y = nnx.jit(call)(static, POS)
    np.testing.assert_allclose(y, run_eagerly(call, eager, POS), rtol=1e-5, atol=1e-5)
    assert_same_state(eager, static, atol=1e-5)


def test_optimizer_step_reuses_the_program_and_shape_change_recompiles():
    model, reference = Net(), Net()
    opt = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    ref_opt = nnx.Optimizer(reference, optax.sgd(0.1), wrt=nnx.Param)

    def loss(m, x):
        return jnp.sum(m(x) ** 2)

    model(POS)
    run_eagerly(call, reference, POS)
    count = len(Net.__call__.programs)
    for x in (POS, NEG):
        opt.update(model, nnx.grad(loss)(model, x))
        ref_opt.update(reference, run_eagerly(nnx.grad(loss), reference, x))
        np.testing.assert_allclose(model(x), run_eagerly(call, reference, x), rtol=1e-4, atol=1e-5)
    assert len(Net.__call__.programs) == count
    assert_same_state(reference, model, rtol=1e-4, atol=1e-5)
    Net(width=6)(POS)
    assert len(Net.__call__.programs) == count + 1


def test_to_static_of_an_undecorated_module():
    class Plain(nnx.Module):
        def __init__(self):
            self.lin = nnx.Linear(4, 3, rngs=nnx.Rngs(1))
            self.seen = nnx.Variable(jnp.zeros(3))

        def __call__(self, x):
            y = self.lin(x)
            if y.sum() > 0:
                update = y.mean(0)
            else:
                update = -y.mean(0) * 2
            # NNX forbids writing a Variable from inside a staged branch (a different trace
            # level), so the write sits after the if.
            self.seen[...] = self.seen[...] + update
            return y

    eager, static = Plain(), Plain()
    f = dy2st.to_static(static)
    for x in (POS, NEG, POS):
        np.testing.assert_allclose(f(x), eager(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(static.seen[...], eager.seen[...], rtol=1e-5)
    assert len(f.programs) == 1


class BranchWrite(nnx.Module):
    def __init__(self):
        self.total = nnx.Variable(jnp.zeros(4))

    @dy2st.to_static
    def __call__(self, x):
        if x.sum() > 0:
            self.total[...] = self.total[...] + x.sum(0)
        return x


def test_variable_write_inside_a_staged_branch_explains_the_fix():
    model = BranchWrite()
    # Refused at the write while the branch is traced: `self.total[...] = v` changes the
    # Variable in place, which cannot be put back after the side.
    with pytest.raises(dy2st.errors.PythonEffectError) as info:
        model(POS)
    message = str(info.value)
    assert message.startswith('File "') and "self.total[...] = self.total[...] + x.sum(0)" in message.splitlines()[1]
    assert "changes a Variable in place (self.total[...] = ...)" in message
    assert "To fix: read the item into a variable before the `if`" in message
    np.testing.assert_array_equal(model.total[...], jnp.zeros(4))  # the model is untouched


def _train_step(model, optimizer, x):
    def loss_fn(m):
        return jnp.mean(m(x) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


class Mlp(nnx.Module):
    def __init__(self):
        rngs = nnx.Rngs(1)
        self.l1 = nnx.Linear(4, 8, rngs=rngs)
        self.l2 = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x):
        return self.l2(jnp.tanh(self.l1(x)))


def test_optimizer_with_state_writes_into_the_same_variables():
    """Model and an adam optimizer as arguments: parameters, both moments and the step count
    are written into the objects' own Variables (as nnx.update would), step after step."""
    model, reference = Mlp(), Mlp()
    opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
    ref_opt = nnx.Optimizer(reference, optax.adam(1e-2), wrt=nnx.Param)
    step = dy2st.to_static(_train_step)
    kernel, mu = model.l1.kernel, opt.opt_state[0].mu
    for x in (POS, NEG, POS):
        np.testing.assert_allclose(step(model, opt, x), _train_step(reference, ref_opt, x), rtol=1e-5)
    assert model.l1.kernel is kernel and opt.opt_state[0].mu is mu  # updated in place, not replaced
    assert_same_state(reference, model, rtol=1e-4, atol=1e-5)
    assert_same_state(ref_opt, opt, rtol=1e-4, atol=1e-5)
    assert int(opt.step[...]) == 3


def _bump_first(layers, x):
    layers[0].kernel.value = layers[0].kernel.value + 1.0
    return layers[0](x)


def _bump_named(layers, x):
    layers["a"].kernel.value = layers["a"].kernel.value * 2.0
    return layers["a"](x)


def _read_first(layers, x):
    return layers[0](x)


@pytest.mark.parametrize("fn, make", [
    (_bump_first, lambda: [nnx.Linear(4, 3, rngs=nnx.Rngs(0))]),
    (_bump_named, lambda: {"a": nnx.Linear(4, 3, rngs=nnx.Rngs(0))}),
], ids=["list", "dict"])
def test_module_inside_a_list_or_dict_argument_is_written_back_in_place(fn, make):
    # Found in issue 17's call-path work: a module inside a list argument reached the program
    # as a pytree and its changes were lost (a silent wrong answer); now the list is lifted.
    eager_layers, static_layers = make(), make()
    eager_module = next(iter(eager_layers.values())) if isinstance(eager_layers, dict) else eager_layers[0]
    static_module = next(iter(static_layers.values())) if isinstance(static_layers, dict) else static_layers[0]
    static = dy2st.to_static(fn)
    for _ in range(3):
        np.testing.assert_allclose(static(static_layers, POS), fn(eager_layers, POS), rtol=1e-6)
        np.testing.assert_allclose(static_module.kernel.value, eager_module.kernel.value, rtol=1e-6)
    kept = static_layers[0] if isinstance(static_layers, list) else static_layers["a"]
    assert kept is static_module  # updated in place, as the eager call does


def test_module_read_inside_a_list_stays_on_the_plain_path():
    layers = [nnx.Linear(4, 3, rngs=nnx.Rngs(0))]
    static = dy2st.to_static(_read_first)
    for _ in range(2):
        np.testing.assert_allclose(static(layers, POS), _read_first(layers, POS), rtol=1e-6)
    assert static._stateful is None and not static.policy.lists_lifted


def test_module_changed_inside_a_tuple_argument_is_refused():
    def bump(pair, x):
        pair[0].kernel.value = pair[0].kernel.value + 1.0
        return x

    module = nnx.Linear(4, 3, rngs=nnx.Rngs(0))
    before = np.asarray(module.kernel.value)
    with pytest.raises(dy2st.errors.PythonEffectError,
                       match=r"(?s)a Linear inside an argument is changed in place.*return the new Linear"):
        dy2st.to_static(bump)((module,), POS)
    np.testing.assert_array_equal(module.kernel.value, before)


class CountingNet(nnx.Module):
    """Counts its calls in a plain Python int, which NNX keeps as static data."""

    def __init__(self):
        self.lin = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
        self.calls = 0
        self.inner = Counter()

    def __call__(self, x):
        self.calls += 1
        self.inner.seen += 2
        y = self.lin(x)
        if y.sum() > 0:
            y = y * 2
        return y


class Counter(nnx.Module):
    def __init__(self):
        self.seen = 0


def test_a_python_counter_of_an_nnx_module_is_written_back():
    """`self.calls += 1` on an NNX module: `nnx.update` writes Variables only, so the counter
    stayed 0 after `to_static(model)` calls (eager: one per call). The attributes NNX keeps as
    static data are now set from the module the call left (each new value is a new program:
    a Python number is part of the key, as for `nnx.jit`)."""
    eager, static = CountingNet(), CountingNet()
    forward = dy2st.to_static(static)
    for x in (POS, NEG, POS):
        np.testing.assert_allclose(forward(x), run_eagerly(lambda m, v: m(v), eager, x), rtol=1e-5, atol=1e-5)
    assert static.calls == eager.calls == 3
    assert static.inner.seen == eager.inner.seen == 6


class LoggingNet(nnx.Module):
    def __init__(self):
        self.lin = nnx.Linear(4, 2, rngs=nnx.Rngs(0))
        self.log = []

    def __call__(self, x):
        y = self.lin(x)
        self.log.append(y.sum())
        return y


def test_a_list_an_nnx_module_keeps_as_static_data_changed_by_the_call_is_refused():
    """NNX keeps a plain list attribute as static data: the traced append stayed in the
    module's list (a tracer in the user's model) and later calls appended nothing. Refused at
    the call, naming the attribute, and the list is put back as it was."""
    model = LoggingNet()
    with pytest.raises(dy2st.errors.PythonEffectError) as err:
        dy2st.to_static(model)(POS)
    text = str(err.value)
    assert text.startswith('File "' + __file__)
    assert "the call changes LoggingNet.log in place, a list or dict that Flax NNX keeps as static data" in text
    assert "nnx.Variable" in text
    assert model.log == []


# -- shared Variables (tied weights) --------------------------------------------------------------
class _Tied(nnx.Module):
    def __init__(self, rngs):
        self.enc = nnx.Linear(3, 3, rngs=rngs)
        self.dec = self.enc  # tied: one Linear, two attributes

    def __call__(self, x):
        return self.dec(self.enc(x))


_TIED_X = jnp.arange(6.0).reshape(2, 3) - 2.0


def _tied_write_then_read(model):
    model.enc.kernel.value = model.enc.kernel.value + 1.0
    return model.dec.kernel.value.sum()


def _tied_train_step(model, opt, x):
    loss, grads = nnx.value_and_grad(lambda m: (m(x) ** 2).mean())(model)
    opt.update(model, grads)
    return loss


def _same_model_twice(a, b, x):
    return a(x) + b(x), a is b


class _Counted(nnx.Module):
    def __init__(self, rngs):
        self.lin = nnx.Linear(3, 3, rngs=rngs)
        self.n = nnx.Variable(jnp.array(0))

    def __call__(self, x):
        self.n.value += 1
        return self.lin(x)


class _TiedCounted(nnx.Module):
    def __init__(self, rngs):
        self.a = _Counted(rngs)
        self.b = self.a

    def __call__(self, x):
        return self.b(self.a(x))


class _TwoDropouts(nnx.Module):
    def __init__(self, rngs):
        self.d1 = nnx.Dropout(0.5, rngs=rngs)  # one Rngs stream, two layers
        self.d2 = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x):
        return self.d1(x) + self.d2(x)


def _run_both(make, run):
    """`run(convert, made)` eagerly and converted, each on its own `make()`."""
    return {name: run(convert, make()) for name, convert in (("eager", lambda f: f), ("static", dy2st.to_static))}


def test_tied_weights_are_one_variable_inside_a_converted_function():
    """Modules enter a program as pytrees, one copy per place: tied weights trained apart (SGD
    losses 4.25, 0.94, 0.30 where eager gives 4.25, 0.25, 0.087) and a write through one
    attribute was missed by the other, silently. The rebuilt modules are shared again as the
    caller's are (state._shared_as_given)."""
    sums = _run_both(lambda: _Tied(nnx.Rngs(0)), lambda c, m: float(c(_tied_write_then_read)(m)))
    assert sums["static"] == pytest.approx(sums["eager"])

    def train(convert, model):
        opt = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
        step = convert(_tied_train_step)
        return [float(step(model, opt, _TIED_X)) for _ in range(3)], np.asarray(model.enc.kernel[...])

    runs = _run_both(lambda: _Tied(nnx.Rngs(0)), train)
    np.testing.assert_allclose(runs["static"][0], runs["eager"][0], rtol=1e-5)
    np.testing.assert_allclose(runs["static"][1], runs["eager"][1], rtol=1e-5)
    grads = _run_both(lambda: _Tied(nnx.Rngs(0)), lambda c, m: sorted(nnx.to_pure_dict(
        c(lambda mm, x: nnx.grad(lambda t: (t(x) ** 2).mean())(mm))(m, _TIED_X))))
    assert grads["static"] == grads["eager"] == ["dec"]


def test_a_shared_submodule_counts_once_per_use_and_one_module_given_twice_is_one():
    def forward(convert, model):
        f = convert(model)
        for _ in range(3):
            f(_TIED_X)
        return int(model.a.n.value), convert(lambda a, b: a is b)(model, model)

    assert _run_both(lambda: _TiedCounted(nnx.Rngs(0)), forward) == {"eager": (6, True), "static": (6, True)}


def test_layers_sharing_one_rngs_stream_draw_in_turn():
    def draws(convert, model):
        f = convert(model)
        return [np.asarray(f(jnp.ones(2))) for _ in range(3)], int(model.d1.rngs.count[...])

    runs = _run_both(lambda: _TwoDropouts(nnx.Rngs(dropout=0)), draws)
    np.testing.assert_array_equal(np.stack(runs["static"][0]), np.stack(runs["eager"][0]))
    assert runs["static"][1] == runs["eager"][1]


def _tied_step_on_state(graphdef, state, x):
    model = nnx.merge(graphdef, state, copy=True)
    loss, grads = nnx.value_and_grad(lambda m: (m(x) ** 2).mean())(model)
    lr = 0.1 if loss > 1 else 0.01
    nnx.update(model, jax.tree.map(lambda p, g: p - lr * g, nnx.state(model, nnx.Param), grads))
    return loss, nnx.state(model)


def test_the_split_merge_form_trains_tied_weights_as_eager():
    losses = {}
    for name, convert in (("eager", lambda f: f), ("static", dy2st.to_static)):
        model, step, losses[name] = _Tied(nnx.Rngs(0)), convert(_tied_step_on_state), []
        for _ in range(3):
            loss, state = step(*nnx.split(model), _TIED_X)
            nnx.update(model, state)
            losses[name].append(float(loss))
    np.testing.assert_allclose(losses["static"], losses["eager"], rtol=1e-5)
    assert losses["eager"][1] < 0.3  # (trained as one Linear)


# -- modules given and returned --------------------------------------------------------------------
def _step_returning_its_arguments(model, opt, x):
    loss, grads = nnx.value_and_grad(lambda m: (m(x) ** 2).mean())(model)
    opt.update(model, grads)
    return model, opt, loss


def test_a_module_and_optimizer_returned_are_the_callers_own_updated():
    """They came back as copies: code that rebinds `model, opt = step(model, opt, x)` (a pure
    train step's style) left every other reference to the model behind, silently."""
    kernels = {}
    for name, convert in (("eager", lambda f: f), ("static", dy2st.to_static)):
        model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
        opt = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
        holder = {"model": model}
        step = convert(_step_returning_its_arguments)
        for _ in range(3):
            returned, returned_opt, _ = step(model, opt, jnp.ones(3))
            assert returned is model and returned_opt is opt
            model, opt = returned, returned_opt
        assert holder["model"] is model
        kernels[name] = np.asarray(model.kernel[...])
    np.testing.assert_allclose(kernels["static"], kernels["eager"], rtol=1e-6)


class _Stack(nnx.Module):
    def __init__(self, rngs):
        self.first = nnx.Linear(2, 2, rngs=rngs)
        self.calls = nnx.Variable(jnp.array(0))

    def __call__(self, x):
        self.calls[...] += 1
        y = self.first(x) if x.sum() > 0 else x
        return y, self.first


def test_a_submodule_returned_is_the_callers_own():
    model = _Stack(nnx.Rngs(0))
    static = dy2st.to_static(model)
    for x in (jnp.ones(2), -jnp.ones(2), jnp.ones(2)):
        _, sub = static(x)
        assert sub is model.first
    assert int(model.calls[...]) == 3


# -- NNX writes in staged code ---------------------------------------------------------------------
class _DropsWhenPositive(nnx.Module):
    def __init__(self):
        self.drop = nnx.Dropout(0.5, rngs=nnx.Rngs(dropout=0))

    def __call__(self, x):
        if x.sum() > 0:
            x = self.drop(x)
        return x


class _CountsInAWhile(nnx.Module):
    def __init__(self):
        self.count = nnx.Variable(jnp.array(0))

    def __call__(self, x):
        while x.sum() < 10:
            x = x * 2
            self.count.value += 1
        return x


@pytest.mark.parametrize("model, line", [(_DropsWhenPositive, "if x.sum() > 0:"),
                                         (_CountsInAWhile, "while x.sum() < 10:")])
def test_an_nnx_write_in_staged_code_is_refused_at_the_if_or_loop(model, line):
    """Flax raised its own TraceContextError ("Cannot mutate RngCount from a different trace
    level"): a raw library error where eager works."""
    with pytest.raises(dy2st.errors.PythonEffectError) as err:
        dy2st.to_static(model())(jnp.ones(4))
    text = str(err.value)
    assert text.startswith('File "' + __file__) and line in text.splitlines()[1]
    assert "writes a Flax NNX Variable" in text and "jnp.where(c, y, x)" in text


class _MaybeTied(nnx.Module):
    def __init__(self, tie: bool, seed: int):
        rngs = nnx.Rngs(seed)
        self.enc = nnx.Linear(2, 2, rngs=rngs)
        self.dec = self.enc if tie else nnx.Linear(2, 2, rngs=rngs)


def _through_both(m, x):
    return m.dec(m.enc(x)), m.enc is m.dec


def _two_models(a, b, x):
    return a(x) + b(x), a is b


@pytest.mark.parametrize("order", [(True, False), (False, True)])
def test_the_sharing_of_nnx_objects_keys_the_program(order):
    # the cache key had the modules' pytree structure only: a call with an untied model reused
    # the program traced with a tied one (its values and `enc is dec`), and the other way round
    static = dy2st.to_static(_through_both)
    x = jnp.ones((1, 2))
    for tie in order * 2:
        model = _MaybeTied(tie, 0)
        (want, want_same), (got, got_same) = _through_both(model, x), static(model, x)
        assert got_same is want_same
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_one_model_given_twice_then_two_models_are_two_programs():
    static = dy2st.to_static(_two_models)
    m1, m2 = nnx.Linear(2, 2, rngs=nnx.Rngs(0)), nnx.Linear(2, 2, rngs=nnx.Rngs(1))
    x = jnp.ones((1, 2))
    for a, b in ((m1, m1), (m1, m2), (m2, m2), (m1, m2)):
        (want, want_same), (got, got_same) = _two_models(a, b, x), static(a, b, x)
        assert got_same is want_same
        np.testing.assert_allclose(got, want, rtol=1e-6)


class EarlyExit(nnx.Module):
    def __init__(self, rngs):
        self.layers = nnx.List([nnx.Linear(4, 4, rngs=rngs) for _ in range(3)])

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if x.mean() > 0:
                return x, i
        return x, -1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_early_exit_over_an_nnx_list_in_enumerate(seed):
    """`enumerate(self.layers)` in the loop header over an `nnx.List` (a library's sequence, not a
    list) was refused as an iterator the code holds (found by a model-code probe)."""
    x = jax.random.normal(jax.random.PRNGKey(seed), (8, 4))
    model = EarlyExit(nnx.Rngs(0))
    static = dy2st.to_static(model)
    expected = run_eagerly(model, x)
    for _ in range(2):
        got = static(x)
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)
        assert int(got[1]) == expected[1]


def test_a_module_changed_from_a_closure_runs_eagerly_and_the_warning_says_to_pass_it(caplog):
    """An NNX model and optimizer captured by the step's closure: NNX refuses to change them inside
    a trace, so each call runs eagerly (eager's results); the one warning says what to change
    (found by a model-code probe: it showed only NNX's trace-level error)."""
    def make_step(model, optimizer):
        def step(x):
            loss, grads = nnx.value_and_grad(lambda m: jnp.mean(m(x) ** 2))(model)
            optimizer.update(model, grads)
            return loss
        return step

    models = [nnx.Linear(4, 2, rngs=nnx.Rngs(0)) for _ in range(2)]
    steps = [make_step(m, nnx.Optimizer(m, optax.sgd(0.1), wrt=nnx.Param)) for m in models]
    static = dy2st.to_static(steps[1])
    x = jnp.ones((2, 4))
    with caplog.at_level("WARNING", logger="dy2st"):
        for _ in range(2):
            np.testing.assert_allclose(static(x), steps[0](x), rtol=1e-5)
    assert_same_state(models[0], models[1])
    assert "pass it as an argument, and dy2st lifts its state" in caplog.text


def _guarded_update(m, opt, x, y):
    loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(m)
    if jnp.isfinite(loss):
        opt.update(m, grads)
    return loss


def test_an_optimizer_updated_under_a_traced_guard_is_refused_with_what_to_write():
    """(Probe of real-model code: the advice was a set's, `s = s | {v}`.)"""
    m = nnx.Linear(8, 4, rngs=nnx.Rngs(0))
    opt = nnx.Optimizer(m, optax.adam(1e-2), wrt=nnx.Param)
    with pytest.raises(dy2st.errors.PythonEffectError) as info:
        dy2st.to_static(_guarded_update)(m, opt, jnp.ones((2, 8)), jnp.ones((2, 4)))
    text = str(info.value)
    assert text.startswith(f'File "{__file__}"') and "opt.update(m, grads)" in text.splitlines()[1]
    assert "optax.apply_if_finite" in text and "s | {v}" not in text
