"""MJX's RK4 rollout throughput on one MJCF model, for bench/throughput.py.

MJX needs `mujoco` 3.17 (`mujoco` 4.0 has no matching `mujoco-mjx`), so it
runs in its own virtual environment and is called as a subprocess:

    python3 -m venv .venv-mjx
    .venv-mjx/bin/pip install mujoco==3.17.0 mujoco-mjx==3.17.0
    .venv-mjx/bin/python bench/mjx_rollout.py MODEL.xml STATES.npz STEPS OUT.json

STATES.npz holds q (B, nq) and v (B, nv).  The model's own options are used
(the caller writes integrator="RK4", the timestep and contacts off into the
XML).  OUT.json gets the rate (member-steps per second, best of 2 after a
warm-up), the compile time and the final positions.
"""

from __future__ import annotations

import json
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import mjx  # noqa: E402


def main(xml_path, states_path, steps, out_path):
    mj = mujoco.MjModel.from_xml_path(xml_path)
    mj.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    st = np.load(states_path)
    q, v = jnp.asarray(st["q"]), jnp.asarray(st["v"])
    m = mjx.put_model(mj)
    d0 = mjx.make_data(m)

    def one(q, v):
        d = d0.replace(qpos=q, qvel=v)
        d = jax.lax.fori_loop(0, steps, lambda _, d: mjx.step(m, d), d)
        return d.qpos

    f = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    c = f.lower(q, v).compile()
    t_compile = time.perf_counter() - t0
    c(q, v).block_until_ready()
    best = np.inf
    for _ in range(2):
        t0 = time.perf_counter()
        out = c(q, v).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    dtype = str(out.dtype)
    with open(out_path, "w") as fh:
        json.dump({"rate": q.shape[0] * steps / best, "compile": t_compile, "dtype": dtype,
                   "mjx": mujoco.__version__, "device": str(jax.devices()[0]),
                   "qpos": np.asarray(out).tolist()}, fh)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
