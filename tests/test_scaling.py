"""rollout past one process: two CPU processes joined by JAX's distributed
runtime (jax.distributed.initialize) shard one batch over both processes'
devices, and the result is the single-process rollout of the same batch.
The rollouts themselves are in tests/scaling_worker.py."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import scaling_worker as worker

WORKER = os.path.join(os.path.dirname(__file__), "scaling_worker.py")
KEYS = ("qs", "vs", "status")


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _run_workers(tmp_path, argv_of, n, device_count=1, timeout=240):
    """Run n workers at once (argv_of(i): the arguments after OUT.npz); the
    contents of process 0's OUT.npz.  A worker that fails or hangs ends them all."""
    out = tmp_path / f"out_{n}x{device_count}.npz"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=" ".join(flags + [f"--xla_force_host_platform_device_count={device_count}"]))
    logs = [open(tmp_path / f"log_{n}x{device_count}_{i}.txt", "w+") for i in range(n)]
    procs = [subprocess.Popen([sys.executable, WORKER, str(out), *argv_of(i)], env=env, stdout=log,
                              stderr=subprocess.STDOUT) for i, log in enumerate(logs)]
    try:
        for p in procs:
            p.wait(timeout=timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, log in zip(procs, logs):
        log.seek(0)
        assert p.returncode == 0, log.read()[-4000:]
        log.close()
    with np.load(out) as z:
        return dict(z)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """The worker's rollouts over two processes of one CPU device each."""
    port = _free_port()
    r = _run_workers(tmp_path_factory.mktemp("two_processes"), lambda i: [f"localhost:{port}", "2", str(i)], n=2)
    assert (int(r["processes"]), int(r["devices"])) == (2, 2)
    return r


def test_a_batch_over_two_processes_is_the_one_process_rollout(two_processes):
    """To round-off: a device's share of the batch is vectorised over fewer members."""
    import jaxmbd
    model = jaxmbd.models.pendulum()
    for how, B in (("full", worker.B_FULL), ("global", worker.B_GLOBAL)):
        ref = worker.simulate_batch(model, *worker.batch(B))
        assert two_processes[f"{how}_qs"].shape == (B, 1, 1), two_processes[f"{how}_qs"].shape
        for key in KEYS:
            np.testing.assert_allclose(two_processes[f"{how}_{key}"], np.asarray(getattr(ref, key)),
                                       rtol=1e-13, atol=1e-13, err_msg=f"{how} inputs: {key}")
        assert np.all(two_processes[f"{how}_status"] == 0)
        assert np.ptp(two_processes[f"{how}_qs"][:, -1, 0]) > 0.1  # the members differ


def test_two_processes_equal_two_devices_of_one_process_bitwise(tmp_path, two_processes):
    """The same two-way split of the batch in one process with two host devices."""
    one = _run_workers(tmp_path, lambda i: [], n=1, device_count=2)
    assert (int(one["processes"]), int(one["devices"])) == (1, 2)
    for key in (f"{how}_{k}" for how in ("full", "global") for k in KEYS):
        np.testing.assert_array_equal(two_processes[key], one[key], err_msg=key)
