"""One process of the multi-process check (`tests/test_multiprocess.py` starts two, and a third
alone for the reference): a `to_static` data-parallel train step, with a data-dependent `if` and
`while`, on a batch sharded across every device of every process.

    python tests/multiprocess_script.py PROCESS_ID NUM_PROCESSES PORT OUT.npz

Each process has two CPU devices; with NUM_PROCESSES=2 they join through
`jax.distributed.initialize` on localhost, with CPU collectives through gloo. Each process gives
its own half of the global batch (`jax.make_array_from_process_local_data`). Process 0 writes the
losses and parameters after three steps to OUT.npz.
"""

import os
import sys

process_id, num_processes, port, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
if num_processes > 1:
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=num_processes,
                               process_id=process_id, initialization_timeout=120)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import dy2st  # noqa: E402

MESH = jax.make_mesh((len(jax.devices()),), ("data",))
DATA = NamedSharding(MESH, P("data"))
REPLICATED = NamedSharding(MESH, P())
GLOBAL_BATCH = 8


def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"])
    if h.mean() > 0:  # data-dependent: a lax.cond
        h = h * 2.0
    return jnp.mean((h @ params["w2"] - y) ** 2)


@dy2st.to_static
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
    scale = 1.0
    while norm * scale > 1.0:  # data-dependent: a lax.while_loop
        scale = scale * 0.5
    return jax.tree.map(lambda p, g: p - 0.1 * scale * g, params, grads), loss


def main():
    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((GLOBAL_BATCH, 4)).astype(np.float32)
    y_all = rng.standard_normal((GLOBAL_BATCH, 2)).astype(np.float32)
    per = GLOBAL_BATCH // num_processes
    mine = slice(process_id * per, (process_id + 1) * per)
    x = jax.make_array_from_process_local_data(DATA, x_all[mine], (GLOBAL_BATCH, 4))
    y = jax.make_array_from_process_local_data(DATA, y_all[mine], (GLOBAL_BATCH, 2))
    params = {"w1": jnp.full((4, 3), 0.3, jnp.float32), "w2": jnp.full((3, 2), -0.2, jnp.float32)}
    params = jax.device_put(params, REPLICATED)
    losses = []
    for _ in range(3):
        params, loss = train_step(params, x, y)
        losses.append(float(jax.device_get(loss)))
    assert len(train_step.programs) == 1, train_step.programs
    if process_id == 0:
        gathered = {k: np.asarray(jax.device_get(v)) for k, v in params.items()}
        np.savez(out_path, losses=np.asarray(losses), devices=len(jax.devices()), **gathered)
    print(f"process {process_id}: ok, {len(jax.devices())} devices, losses {losses}", flush=True)


if __name__ == "__main__":
    main()
    if num_processes > 1:
        jax.distributed.shutdown()
