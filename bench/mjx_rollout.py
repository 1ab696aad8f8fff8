"""MJX's rollout throughput on one MJCF model, for bench/throughput.py and
bench/contact_throughput.py.

MJX needs `mujoco` 3.17 (`mujoco` 4.0 has no matching `mujoco-mjx`), so on
a machine whose `mujoco` is 4.0 it runs in its own virtual environment and
is called as a subprocess:

    python3 -m venv .venv-mjx
    .venv-mjx/bin/pip install mujoco==3.17.0 mujoco-mjx==3.17.0
    .venv-mjx/bin/python bench/mjx_rollout.py MODEL.xml STATES.npz STEPS OUT.json [contacts]

STATES.npz holds q (B, nq), v (B, nv) and optionally ctrl (B, nu), a
constant control per member.  The model's own options are used (the caller
writes the integrator and the timestep into the XML); contacts are switched
off unless the fifth argument is ``contacts``.  OUT.json gets the rate
(member-steps per second, best of 2 after a warm-up), the compile time and
the final positions.  Where MJX imports beside the caller's JAX (the GPU
machine), callers use :func:`mjx_run` in process.
"""

from __future__ import annotations

import json
import sys
import time

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import mjx


def mjx_run(mj, q, v, ctrl, steps, contacts=False):
    """dict(rate, compile, wall, q (final positions), ok, dtype, mjx, device) of
    MJX's vmapped rollout of `steps` steps of the MjModel mj."""
    if not contacts:
        mj.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    q, v = jnp.asarray(q), jnp.asarray(v)
    ctrl = jnp.zeros((q.shape[0], mj.nu)) if ctrl is None else jnp.asarray(ctrl)
    m = mjx.put_model(mj)
    d0 = mjx.make_data(m)

    def one(q, v, u):
        d = d0.replace(qpos=q, qvel=v, ctrl=u)
        d = jax.lax.fori_loop(0, steps, lambda _, d: mjx.step(m, d), d)
        return d.qpos

    f = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    c = f.lower(q, v, ctrl).compile()
    t_compile = time.perf_counter() - t0
    c(q, v, ctrl).block_until_ready()
    best = np.inf
    for _ in range(2):
        t0 = time.perf_counter()
        out = c(q, v, ctrl).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    out = np.asarray(out)
    return dict(rate=q.shape[0] * steps / best, compile=t_compile, wall=best, q=out,
                ok=int(np.isfinite(out).all(axis=1).sum()), dtype=str(out.dtype), mjx=mujoco.__version__,
                device=str(jax.devices()[0]))


def main(xml_path, states_path, steps, out_path, contacts=False):
    mj = mujoco.MjModel.from_xml_path(xml_path)
    st = np.load(states_path)
    r = mjx_run(mj, st["q"], st["v"], st["ctrl"] if "ctrl" in st.files else None, steps, contacts)
    r["qpos"] = r.pop("q").tolist()
    with open(out_path, "w") as fh:
        json.dump(r, fh)


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)  # as a module, the caller's precision holds
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], contacts=sys.argv[5:6] == ["contacts"])
