"""Plain Python classes holding jax arrays: to_static forwards take the arrays as inputs,
write mutations back, differentiate, and recompile only on a structural or shape change."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dy2st
from dy2st.state import split_state
from dy2st.testing.models import assert_same_state, check_model_equivalent, run_eagerly

POS = jnp.array([[0.5, 1.0, 0.2], [0.3, 0.1, 0.9]])
NEG = -POS


class Dense:
    def __init__(self, n_in, n_out, seed):
        self.w = jax.random.normal(jax.random.PRNGKey(seed), (n_in, n_out)) * 0.5
        self.b = jnp.zeros(n_out) + 0.1


class Net:
    """Sub-objects in a list, a dict of options, running statistics in a tuple, counters."""

    def __init__(self, width=3):
        self.layers = [Dense(3, width, 0), Dense(width, 3, 1)]
        self.opts = {"scale": jnp.float32(2.0), "shift": [jnp.ones(8)]}
        self.stats = (jnp.zeros(3), jnp.zeros((), jnp.int32))
        self.calls = 0
        self.name = "net"

    @dy2st.to_static
    def forward(self, x):
        for layer in self.layers:
            x = x @ layer.w + layer.b
            if x.sum() > 0:
                x = jnp.tanh(x)
            else:
                x = x * self.opts["scale"] - self.opts["shift"][0][: x.shape[-1]]
        mean, seen = self.stats
        self.stats = (0.9 * mean + 0.1 * x.mean(0), seen + 1)
        self.calls += 1
        return x


def forward(model, x):
    return model.forward(x)


@pytest.mark.parametrize("x", [POS, NEG, jnp.zeros((2, 3))], ids=["pos", "neg", "zero"])
def test_outputs_and_state_after_call(x):
    eager, static, _ = check_model_equivalent(Net, forward, x)
    assert static.calls == eager.calls == 1 and static.name == "net"
    # a second call starts from the written-back state
    y_eager = run_eagerly(forward, eager, x * 0.5)
    np.testing.assert_allclose(forward(static, x * 0.5), y_eager, rtol=1e-5, atol=1e-6)
    assert_same_state(eager, static)
    assert static.calls == 2


def test_parameters_are_inputs_not_constants():
    model, reference = Net(), Net()
    model.calls = reference.calls = 0
    forward(model, POS)
    count = len(Net.forward.programs)
    for m in (model, reference):  # an optimizer-like step replaces every parameter
        for layer in m.layers:
            layer.w = layer.w - 0.3
            layer.b = layer.b + 0.2
        m.calls = 0
    y = forward(model, POS)
    np.testing.assert_allclose(y, run_eagerly(forward, reference, POS), rtol=1e-5, atol=1e-6)
    assert len(Net.forward.programs) == count
    # another instance with the same structure reuses the program too
    other = Net()
    other.calls = 0
    forward(other, NEG)
    assert len(Net.forward.programs) == count


def test_shape_and_structure_changes_compile_new_programs():
    model = Net()
    model.calls = 7
    forward(model, POS)
    model.calls = 7
    count = len(Net.forward.programs)
    wide = Net(width=5)
    wide.calls = 7
    forward(wide, POS)
    assert len(Net.forward.programs) == count + 1
    model.extra = jnp.ones(2)  # a new attribute: a new state structure
    model.calls = 7
    forward(model, POS)
    assert len(Net.forward.programs) == count + 2


class Cache:
    """The forward grows a list and adds an attribute: a structural change written back."""

    def __init__(self):
        self.w = jnp.array([1.0, -2.0, 3.0])
        self.history = []

    @dy2st.to_static
    def __call__(self, x):
        y = x * self.w
        if y.sum() > 0:
            self.last = y
        else:
            self.last = -y
        self.history.append(self.last.sum())
        return y


@pytest.mark.parametrize("x", [POS[0], NEG[0]], ids=["pos", "neg"])
def test_structural_mutation_is_written_back(x):
    eager, static, _ = check_model_equivalent(Cache, lambda m, x: m(x), x)
    static(x * 2)
    run_eagerly(lambda: eager(x * 2))
    assert len(static.history) == len(eager.history) == 2
    np.testing.assert_allclose(np.array(static.history), np.array(eager.history), rtol=1e-6)
    assert_same_state(eager, static)


class Shared:
    def __init__(self):
        block = Dense(3, 3, 4)
        self.a = block
        self.b = block  # the same sub-object reached twice
        self.step = jnp.zeros((), jnp.int32)

    def forward(self, x):  # not decorated: converted by to_static(model)
        x = x @ self.a.w
        if x.max() > 0.5:
            x = x @ self.b.w
        self.a.b = self.a.b + 1
        self.step = self.step + 1
        return x + self.b.b


@pytest.mark.parametrize("x", [POS, NEG], ids=["pos", "neg"])
def test_to_static_model_object_with_shared_submodule(x):
    eager, static = Shared(), Shared()
    f = dy2st.to_static(static)
    assert isinstance(f, dy2st.StaticFunction)
    for _ in range(2):
        np.testing.assert_allclose(f(x), eager.forward(x), rtol=1e-5, atol=1e-6)
    assert static.a is static.b
    np.testing.assert_allclose(static.b.b, eager.b.b)
    assert int(static.step) == 2
    assert "convert_ifelse" in f.code


def test_gradients_with_respect_to_parameters():
    model = Net()
    state, merge = split_state(model)
    params = {k: v for k, v in state.items() if jnp.issubdtype(v.dtype, jnp.floating)}

    def loss(p, x):
        merge(p)
        try:
            return jnp.sum(model.forward(x) ** 2)
        finally:
            merge(state)

    for x in (POS, NEG):
        static_grad = jax.grad(loss)(params, x)
        eager_grad = run_eagerly(jax.grad(loss), params, x)
        assert sorted(static_grad) == sorted(params)
        for name in params:
            np.testing.assert_allclose(static_grad[name], eager_grad[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert all(not isinstance(v, jax.core.Tracer) for v in split_state(model)[0].values())


def test_state_under_jit_matches_eager():
    eager, static = Net(), Net()
    arrays, merge = split_state(static)

    @jax.jit
    def step(arrays, x):
        merge(arrays)
        try:
            y = static.forward(x)
            return y, split_state(static)[0]
        finally:
            merge(concrete)

    concrete = arrays
    y, new_state = step(arrays, POS)
    merge(new_state)
    np.testing.assert_allclose(y, run_eagerly(eager.forward, POS), rtol=1e-5, atol=1e-6)
    static.calls = eager.calls  # a Python counter cannot leave a jax.jit trace
    assert_same_state(eager, static)


def test_function_with_model_argument_writes_back():
    def sgd_step(model, x, lr):
        y = model.forward(x)
        if y.mean() > 0:
            model.layers[0].w = model.layers[0].w - lr
        else:
            model.layers[0].w = model.layers[0].w + lr
        return y.sum()

    static_step = dy2st.to_static(sgd_step)
    eager, static = Net(), Net()
    for x in (POS, NEG, POS):
        np.testing.assert_allclose(static_step(static, x, 0.1), run_eagerly(sgd_step, eager, x, 0.1), rtol=1e-5)
    assert_same_state(eager, static)
    assert static.calls == eager.calls == 3


def test_concrete_program_has_parameters_as_inputs():
    model = Net()
    program = model.forward.get_concrete_program(POS)
    names = list(split_state(model)[0])
    assert len(program.input_spec) == len(names) + 1
    assert "stablehlo" in program.as_text() or "func.func" in program.as_text()
    model.forward(POS)
    assert all(p.jaxpr is not None for p in Net.forward.programs)


def test_split_state_names_and_merge():
    model = Net()
    arrays, merge = split_state(model)
    assert list(arrays) == ["layers.0.w", "layers.0.b", "layers.1.w", "layers.1.b",
                            "opts.scale", "opts.shift.0", "stats.0", "stats.1"]
    assert merge({k: v * 0 for k, v in arrays.items()}) is model
    assert float(jnp.abs(model.layers[1].w).sum()) == 0.0
    assert isinstance(model.stats, tuple) and model.calls == 0


class PureNet(Net):
    """A forward that writes no state, so vmap can run it per example."""

    @dy2st.to_static
    def forward(self, x):
        for layer in self.layers:
            x = x @ layer.w + layer.b
            if x.sum() > 0:
                x = jnp.tanh(x)
            else:
                x = x * self.opts["scale"] - self.opts["shift"][0][: x.shape[-1]]
        return x


def test_vmap_over_examples_inlines():
    model = PureNet()
    xs = jnp.stack([POS[0], NEG[0], POS[1]])
    expected = jnp.stack([run_eagerly(model.forward, x[None])[0] for x in xs])
    actual = jax.vmap(lambda x: model.forward(x[None])[0])(xs)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


class Layer:
    def __init__(self, seed):
        self.w = jax.random.normal(jax.random.PRNGKey(seed), (3, 3)) * 0.6

    @dy2st.to_static
    def __call__(self, x):
        y = x @ self.w
        if y.sum() > 0:
            return jnp.tanh(y)
        return y * 0.5


class Stack:
    def __init__(self):
        self.blocks = {"first": Layer(5), "second": Layer(6)}

    @dy2st.to_static
    def __call__(self, x):
        return self.blocks["second"](self.blocks["first"](x))


@pytest.mark.parametrize("x", [POS, NEG], ids=["pos", "neg"])
def test_nested_to_static_submodules_and_their_gradients(x):
    model = Stack()
    check_model_equivalent(Stack, lambda m, x: m(x), x)
    state, merge = split_state(model)

    def loss(p):
        merge(p)
        try:
            return jnp.sum(model(x) ** 2)
        finally:
            merge(state)

    static_grad, eager_grad = jax.grad(loss)(state), run_eagerly(jax.grad(loss), state)
    for name in state:
        np.testing.assert_allclose(static_grad[name], eager_grad[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert sorted(state) == ["blocks.first.w", "blocks.second.w"]


def test_model_passed_by_keyword_is_state_too():
    def apply(x, *, model):
        return model.forward(x)

    static_apply = dy2st.to_static(apply)
    eager, static = Net(), Net()
    np.testing.assert_allclose(static_apply(POS, model=static), run_eagerly(apply, POS, model=eager), rtol=1e-5)
    for layer in static.layers + eager.layers:
        layer.w = layer.w * -1.0
    static.calls = eager.calls = 0
    count = len(static_apply.programs)
    np.testing.assert_allclose(static_apply(POS, model=static), run_eagerly(apply, POS, model=eager), rtol=1e-5)
    assert len(static_apply.programs) == count
    assert_same_state(eager, static)


class Broken:
    def __init__(self):
        self.w = jnp.ones(3)
        self.seen = jnp.zeros(3)

    @dy2st.to_static
    def __call__(self, x):
        self.seen = self.seen + x
        if x.sum() > 0:
            y = x @ self.w
        else:
            y = x
        return y  # 'y' has two shapes: an error while tracing the staged if


def test_an_error_while_tracing_leaves_the_model_untouched():
    model = Broken()
    with pytest.raises(dy2st.errors.BranchOutputError, match="'y' is float32"):
        model(POS[0])
    assert type(model.seen) is type(model.w) and not isinstance(model.seen, jax.core.Tracer)
    np.testing.assert_array_equal(model.seen, jnp.zeros(3))


class PythonCounter:
    def __init__(self):
        self.w = jnp.ones(3)
        self.calls = 0

    @dy2st.to_static
    def __call__(self, x):
        self.calls += 1
        return x * self.w * self.calls


def test_python_counter_recompiles_and_warns_naming_the_attribute(caplog):
    model = PythonCounter()
    with caplog.at_level("WARNING", logger="dy2st"):
        for i in range(1, 11):
            np.testing.assert_allclose(model(POS[0]), POS[0] * i)
    assert model.calls == 10
    assert len(PythonCounter.__call__.programs) == 10
    warnings = [r.getMessage() for r in caplog.records if "model states" in r.getMessage()]
    assert len(warnings) == 1
    assert "calls: 7 -> 8" in warnings[0] and "jax arrays" in warnings[0]


def test_replaced_submodules_and_numpy_parameters_reuse_the_program():
    model, reference = Net(), Net()
    model.calls = reference.calls = 0
    forward(model, POS)
    run_eagerly(forward, reference, POS)
    count = len(Net.forward.programs)
    for m in (model, reference):
        m.layers[0] = Dense(3, 3, 9)  # a new object of the same structure
        m.layers[1].w = np.asarray(m.layers[1].w) * 2  # a numpy parameter
        m.calls = 0
    np.testing.assert_allclose(forward(model, NEG), run_eagerly(forward, reference, NEG), rtol=1e-5, atol=1e-6)
    assert len(Net.forward.programs) == count
    assert_same_state(reference, model)
    model.layers[0] = Dense(3, 3, 9)
    model.layers[0].b = None  # a structural change inside a sub-object: a new program
    model.calls = 0
    with pytest.raises(TypeError):
        forward(model, NEG)  # the forward adds None: the same error as eager
    with pytest.raises(TypeError):
        run_eagerly(forward, model, NEG)


class Memo:
    pass


class MakesObjects:
    def __init__(self):
        self.w = jnp.array([1.0, 2.0, -4.0])

    @dy2st.to_static
    def __call__(self, x):
        if (x * self.w).sum() > 0:
            y = x * self.w
        else:
            y = -x
        self.memo = Memo()  # a new sub-object, list and dict, created by the forward
        self.memo.v = y
        self.memo.items = {"a": [y * 2, 1]}
        return y


@pytest.mark.parametrize("x", [POS[0], NEG[0]], ids=["pos", "neg"])
def test_new_objects_created_by_the_forward_are_written_back(x):
    eager, static, _ = check_model_equivalent(MakesObjects, lambda m, x: m(x), x)
    assert type(static.memo) is Memo and static.memo.items["a"][1] == 1
    static(x)
    run_eagerly(eager, x)
    assert_same_state(eager, static)


class DottedKeys:
    """A PyTorch-style flat key beside a nested dict whose path reads the same (`a.b`)."""

    def __init__(self):
        self.p = {"a.b": jnp.ones(2), "a": {"b": jnp.full(2, 3.0)}}


@pytest.mark.parametrize("make", [DottedKeys, lambda: DottedKeys().p], ids=["object", "pytree"])
def test_split_state_names_colliding_paths_apart(make, tmp_path):
    """Both arrays read `a.b`: one name for two lost one of them, and `merge` wrote the other's
    values into both (`save` overwrote the caller's `p["a.b"]` and exported another model)."""
    model = make()
    arrays, merge = split_state(model)
    assert list(arrays) in (["p.a.b", "p.a.b#2"], ["a.b", "a.b#2"])
    first, second = list(arrays)
    merge({first: jnp.zeros(2), second: jnp.full(2, 7.0)})
    p = model.p if isinstance(model, DottedKeys) else model
    if isinstance(model, DottedKeys):  # (a pytree is rebuilt, not changed in place)
        assert p["a.b"].tolist() == [0.0, 0.0] and p["a"]["b"].tolist() == [7.0, 7.0]
    params = DottedKeys().p

    def g(p, x):
        return x + p["a.b"] * 10 + p["a"]["b"]

    x = np.zeros(2, np.float32)
    dy2st.save(g, tmp_path / "art", [dy2st.InputSpec((2,), "float32", "x")], params=params)
    assert params["a.b"].tolist() == [1.0, 1.0]
    assert dy2st.load(tmp_path / "art")(x).tolist() == [13.0, 13.0]
