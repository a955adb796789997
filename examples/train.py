"""Train an RNN over variable-length sequences with optax, eagerly and with dy2st.to_static.

The model is a plain Python class whose forward has data-dependent control flow: it stops
stepping once every sequence in the batch has ended (`if t < lengths.max()`), and masks the
sequences that ended earlier. The training step is an ordinary function of the model object:
it splits the model's arrays out (`dy2st.state.split_state`), takes the gradient, applies an
optax update and writes the new parameters back, and bumps a step counter on the model.

`dy2st.to_static(train_step)` runs that whole step as one XLA program whose inputs are the
model's arrays: after each update the next call runs the same program on the new values, and
the updated parameters and counter are written back onto the model object.

Run:  python examples/train.py
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import dy2st
from dy2st.state import split_state

T, FEATURES, HIDDEN, BATCH, STEPS = 10, 2, 16, 32, 80


class RNNClassifier:
    """Elman RNN over per-example lengths, then a linear read-out to two classes."""

    def __init__(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.cell = {
            "wx": jax.random.normal(k1, (FEATURES, HIDDEN)) / np.sqrt(FEATURES),
            "wh": jax.random.normal(k2, (HIDDEN, HIDDEN)) * 0.5 / np.sqrt(HIDDEN),
            "b": jnp.zeros(HIDDEN),
        }
        self.head = [jax.random.normal(k3, (HIDDEN, 2)) / np.sqrt(HIDDEN), jnp.zeros(2)]
        self.steps = jnp.zeros((), jnp.int32)

    @dy2st.to_static
    def __call__(self, xs, lengths):
        h = jnp.zeros((xs.shape[0], HIDDEN))
        for t in range(xs.shape[1]):
            if t < lengths.max():  # data-dependent: stop once every sequence has ended
                new = jnp.tanh(xs[:, t] @ self.cell["wx"] + h @ self.cell["wh"] + self.cell["b"])
                h = jnp.where((t < lengths)[:, None], new, h)
        w, b = self.head
        return h @ w + b


optimizer = optax.adam(3e-2)


def train_step(model, opt_state, xs, lengths, labels):
    state, merge = split_state(model)
    params = {k: v for k, v in state.items() if k != "steps"}

    def loss_of(p):
        merge(p)
        logits = model(xs, lengths)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = jax.value_and_grad(loss_of)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    merge(optax.apply_updates(params, updates))
    model.steps = model.steps + 1
    return loss, opt_state


def make_batch(key):
    """Label: whether the sequence's first feature sums to more than its second, over its length."""
    kx, kl = jax.random.split(key)
    xs = jax.random.normal(kx, (BATCH, T, FEATURES))
    lengths = jax.random.randint(kl, (BATCH,), 1, T + 1)
    valid = jnp.arange(T)[None, :] < lengths[:, None]
    totals = jnp.where(valid[..., None], xs, 0.0).sum(1)
    return xs, lengths, (totals[:, 0] > totals[:, 1]).astype(jnp.int32)


def train(step_fn, label, batches):
    model = RNNClassifier(jax.random.PRNGKey(0))
    opt_state = optimizer.init({k: v for k, v in split_state(model)[0].items() if k != "steps"})
    losses, times = [], []
    for i, batch in enumerate(batches):
        start = time.perf_counter()
        loss, opt_state = step_fn(model, opt_state, *batch)
        loss = float(loss)  # waits for the step to finish
        times.append(time.perf_counter() - start)
        losses.append(loss)
        if (i + 1) % 20 == 0:
            print(f"  {label:9s} steps {i - 18:3d}-{i + 1:3d}  mean loss {np.mean(losses[-20:]):.4f}")
    return model, losses, times


def main():
    batches = [make_batch(k) for k in jax.random.split(jax.random.PRNGKey(1), STEPS)]
    static_step = dy2st.to_static(train_step)

    print("eager:")
    dy2st.enable_to_static(False)  # every StaticFunction (the model's forward too) runs as Python
    eager_model, eager_losses, eager_times = train(train_step, "eager", batches)
    dy2st.enable_to_static(True)
    print("to_static:")
    static_model, static_losses, static_times = train(static_step, "to_static", batches)

    eager_state, static_state = split_state(eager_model)[0], split_state(static_model)[0]
    param_diff = max(float(jnp.abs(eager_state[k] - static_state[k]).max()) for k in eager_state)
    loss_diff = max(abs(a - b) for a, b in zip(eager_losses, static_losses))
    eager_ms = 1e3 * float(np.median(eager_times[1:]))
    static_ms = 1e3 * float(np.median(static_times[1:]))
    print(f"loss: {eager_losses[0]:.4f} -> {eager_losses[-1]:.4f} (eager), "
          f"{static_losses[0]:.4f} -> {static_losses[-1]:.4f} (to_static)")
    print(f"agreement: max |loss diff| {loss_diff:.2e}, max |param diff| {param_diff:.2e}, "
          f"steps {int(eager_model.steps)} / {int(static_model.steps)}")
    print(f"programs compiled for the training step: {len(static_step.programs)}")
    print(f"time per step (median): eager {eager_ms:.2f} ms, to_static {static_ms:.3f} ms "
          f"({eager_ms / static_ms:.0f}x); first to_static step incl. compile {1e3 * static_times[0]:.0f} ms")
    assert static_losses[-1] < static_losses[0] and loss_diff < 1e-3 and param_diff < 1e-3
    assert int(static_model.steps) == STEPS and len(static_step.programs) == 1


if __name__ == "__main__":
    main()
