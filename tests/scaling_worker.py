"""One process of tests/test_scaling.py: a rollout whose batch is sharded over
the devices of every process (JAX's distributed runtime), or, run alone, over
this process's devices.

    python scaling_worker.py OUT.npz                                  # one process
    python scaling_worker.py OUT.npz localhost:PORT NUM_PROCESSES ID  # one of several

Every process runs the same rollouts and gathers the results; process 0 writes
them to OUT.npz.  The two batches come in the two ways a multi-process
program can give them: the same full inputs in every process, and global
arrays of which each process makes only its own rows (docs/scaling.md)."""

import sys

import numpy as np

B_FULL, B_GLOBAL = 5, 6  # 5: not a multiple of the device count (padding); 6: two or three rows a process


def simulate_batch(model, q0, v0, stiffness):
    """The one rollout call of the scaling tests: (B, 1) q0, v0, stiffness
    for the pendulum; 0.3 s of RK4 at 10 ms, the final state saved.  The call
    form lives here alone."""
    from jaxmbd import Start, Steps, integrators, rollout
    return rollout(model, Start(q0, v0), 0.3, integrator=integrators.RK4(), steps=Steps(dt0=0.01),
                   model_params={"stiffness": stiffness})


def batch(B):
    """(q0, v0, stiffness), each (B, 1), the same in every process."""
    rows = np.arange(B, dtype=np.float64)[:, None]
    return 0.3 * rows - 0.6, 0.1 * rows, 2.0 + rows


def main(out, coordinator=None, num_processes="1", process_id="0"):
    import jax
    n, pid = int(num_processes), int(process_id)
    if n > 1:  # before anything else in JAX starts its backend
        jax.distributed.initialize(coordinator, n, pid, initialization_timeout=60)
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import jaxmbd
    model = jaxmbd.models.pendulum()

    def gather(sol):
        assert len(sol.qs.sharding.device_set) == len(jax.devices()), sol.qs.sharding
        return {k: np.asarray(multihost_utils.process_allgather(x, tiled=True)) if n > 1 else np.asarray(x)
                for k, x in (("qs", sol.qs), ("vs", sol.vs), ("status", sol.status))}

    # every process passes the same full inputs (rollout's device_put checks that they agree)
    full = gather(simulate_batch(model, *batch(B_FULL)))
    # every process makes only the rows its devices hold: global arrays sharded like rollout's batch axis
    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("batch",)), PartitionSpec("batch"))
    asked = []
    inputs = [jax.make_array_from_callback(x.shape, sharding, lambda rows, x=x: asked.append(rows) or x[rows])
              for x in batch(B_GLOBAL)]
    assert n == 1 or (not inputs[0].is_fully_addressable and len(asked) == 3 * len(jax.local_devices())), asked
    glob = gather(simulate_batch(model, *inputs))
    if pid == 0:
        np.savez(out, devices=len(jax.devices()), processes=jax.process_count(),
                 **{f"full_{k}": v for k, v in full.items()}, **{f"global_{k}": v for k, v in glob.items()})


if __name__ == "__main__":
    main(*sys.argv[1:])
