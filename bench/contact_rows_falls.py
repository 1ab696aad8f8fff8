"""The falls the default contact rows are calibrated on (docs/contact.md, "The soft solve's rows"):
2 s runs in MuJoCo of the built-in quadruped scene and the humanoids of the tests, each from a
random height (0.3-0.8 m), orientation (every other run upright), joint positions (uniform in
their ranges), base velocity and controls (zero, or uniform in their ranges redrawn every 0.2 s);
states every 0.1 s and each run's state with MuJoCo's most contacts.  Prints, per model, MuJoCo's
most contacts and the most of jaxmbd's candidate contacts within their margin at those states,
beside the model's default rows.

    python bench/contact_rows_falls.py [--runs 150]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from scipy.spatial.transform import Rotation

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
import jaxmbd  # noqa: E402
from jaxmbd.forces.base import elements  # noqa: E402
from jaxmbd.forces.contact import Contact  # noqa: E402


def falls(mj, runs, seed, T=2.0):
    """[(MuJoCo's contact count, qpos)] of the runs' sampled states."""
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(mj)
    out = []
    lo, hi = mj.jnt_range[1:, 0], mj.jnt_range[1:, 1]
    clo, chi = mj.actuator_ctrlrange[:, 0], mj.actuator_ctrlrange[:, 1]
    every = max(1, round(0.1 / mj.opt.timestep))
    for i in range(runs):
        mujoco.mj_resetData(mj, d)
        d.qpos[:] = mj.qpos0
        d.qpos[2] = 0.3 + 0.5 * rng.random()
        if i % 2:
            d.qpos[3:7] = Rotation.random(random_state=int(rng.integers(1 << 30))).as_quat()[[3, 0, 1, 2]]
        d.qpos[7:] = lo + (hi - lo) * rng.random(len(lo))
        d.qvel[:6] = rng.normal(size=6) * [1, 1, 0, 3, 3, 3]
        best, k = (0, None), 0
        while d.time < T:
            if k % (2 * every) == 0:
                d.ctrl[:] = 0 if i % 3 == 0 else clo + (chi - clo) * rng.random(mj.nu)
            mujoco.mj_step(mj, d)
            k += 1
            if d.ncon >= best[0]:
                best = (d.ncon, d.qpos.copy())
            if k % every == 0:
                out.append((d.ncon, d.qpos.copy()))
        out.append(best)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=150)
    a = ap.parse_args()
    from test_contact_rows import HUMANOID as ARMS
    from test_robots_on_floors import HUMANOID
    path = str(jaxmbd.models.quadruped_scene_path())
    for name, src in (("quadruped scene", path), ("humanoid (test_robots_on_floors)", HUMANOID),
                      ("humanoid with arms (test_contact_rows)", ARMS)):
        mj = mujoco.MjModel.from_xml_path(src) if src == path else mujoco.MjModel.from_xml_string(src)
        m = jaxmbd.load_mjcf(src, warn=False)
        el = next(e for e in elements(m) if isinstance(e, Contact))
        states = falls(mj, a.runs, 1)

        def count(q):
            c = el.candidates(m, q)
            return jnp.sum(el.margin[c["pair"]] - c["dist"] > 0)
        f = jax.jit(jax.vmap(count))
        Q = np.stack([s[1] for s in states])
        n = np.concatenate([np.asarray(f(jnp.asarray(Q[i:i + 256]))) for i in range(0, len(Q), 256)])
        theirs = np.array([s[0] for s in states])
        print(f"{name}: {len(Q)} states; most contacts within their margin: jaxmbd {n.max()}, MuJoCo "
              f"{theirs.max()}; default rows {el.rows}", flush=True)


if __name__ == "__main__":
    main()
