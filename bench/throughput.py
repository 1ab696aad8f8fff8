"""Rollout throughput: RK4 member-steps per second for humanoid30 (no
contacts, float64, fixed step 1 ms) with ``jaxmbd.rollout`` (ABA and
CRBA+LTDL forward dynamics) against MuJoCo's multithreaded
``mujoco.rollout`` using every usable core, in one run on one machine.
Writes bench/results/throughput_<backend>.md.

    python bench/throughput.py [--quick] [--batches 1 64 1024 4096] [--steps 50]

MJX is not measured here (not installed in this environment)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd
from jaxmbd import models
from jaxmbd.cli import rk4_rollout_rate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from common import machine  # noqa: E402
from mjcf_util import builder_to_mjcf, depth_first  # noqa: E402

import mujoco  # noqa: E402
from mujoco import rollout as mj_rollout  # noqa: E402

DT = 1e-3


def mujoco_rate(mj, q, v, steps, nthread):
    B = q.shape[0]
    d = mujoco.MjData(mj)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    size = mujoco.mj_stateSize(mj, spec)
    state0 = np.zeros((B, size))
    for b in range(B):
        d.qpos[:], d.qvel[:] = q[b], v[b]
        d.time = 0.0
        mujoco.mj_getState(mj, d, state0[b], spec)
    datas = [mujoco.MjData(mj) for _ in range(nthread)]
    with mj_rollout.Rollout(nthread=nthread) as r:
        r.rollout(mj, datas, state0, nstep=steps)  # warm-up
        best = np.inf
        for _ in range(2):
            t0 = time.perf_counter()
            st, _ = r.rollout(mj, datas, state0, nstep=steps)
            best = min(best, time.perf_counter() - t0)
    qpos = st[:, -1, 1:1 + mj.nq]  # FULLPHYSICS: time, qpos, qvel, ...
    return B * steps / best, qpos


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="batches 1 and 64, 20 steps")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024, 4096])
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args(argv)
    batches, steps = ([1, 64], 20) if args.quick else (args.batches, args.steps)
    nthread = len(os.sched_getaffinity(0))

    b = depth_first(models.humanoid30_builder())  # MuJoCo's DoF order: states pass unchanged
    model = b.build()
    xml = builder_to_mjcf(b).replace('integrator="Euler"', 'integrator="RK4"')
    mj = mujoco.MjModel.from_xml_string(xml)
    mj.opt.timestep = DT
    assert (mj.nq, mj.nv) == (model.nq, model.nv)
    desc = machine(f", mujoco {mujoco.__version__}") + [
        f"humanoid30 ({model.summary()}), RK4, dt = {DT}, {steps} steps per member, no contacts; "
        f"MuJoCo rollout with {nthread} threads; rate = members x steps / best of 2 wall times after a warm-up"]
    print("\n".join(desc), flush=True)
    rows = []
    rng = np.random.default_rng(0)
    for B in batches:
        dq = 0.3 * rng.standard_normal((B, model.nv))
        q = np.asarray(jax.vmap(lambda d: jaxmbd.integrate_q(model, model.q0, d))(jnp.asarray(dq)))
        v = 0.3 * rng.standard_normal((B, model.nv))
        r_mj, q_mj = mujoco_rate(mj, q, v, steps, nthread)
        row = dict(B=B, mujoco=r_mj)
        for dyn in ("aba", "crba"):
            r, t_c, qs = rk4_rollout_rate(model, jnp.asarray(q), jnp.asarray(v), steps, DT, dyn)
            dev = float(np.abs(qs[:, -1] - q_mj).max())  # same states after `steps` RK4 steps (sanity check)
            row[dyn], row[dyn + "_compile"], row[dyn + "_dev"] = r, t_c, dev
        rows.append(row)
        print(f"B={B:6d} mujoco {r_mj:12,.0f}  aba {row['aba']:12,.0f} (compile {row['aba_compile']:.1f} s, "
              f"|dq| {row['aba_dev']:.1e})  crba {row['crba']:12,.0f} (compile {row['crba_compile']:.1f} s)",
              flush=True)
    head = ("| batch | MuJoCo rollout (steps/s) | jaxmbd ABA | jaxmbd CRBA+LTDL | ABA / MuJoCo | CRBA / MuJoCo | "
            "compile ABA (s) | compile CRBA (s) | max |q - q_MuJoCo| after the run |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r['B']} | {r['mujoco']:,.0f} | {r['aba']:,.0f} | {r['crba']:,.0f} | "
                     f"{r['aba'] / r['mujoco']:.3f} | {r['crba'] / r['mujoco']:.3f} | {r['aba_compile']:.1f} | "
                     f"{r['crba_compile']:.1f} | {max(r['aba_dev'], r['crba_dev']):.1e} |")
    text = "# Rollout throughput, humanoid30, RK4 (" + jax.default_backend() + ")\n\n" + \
        "\n".join(f"- {x}" for x in desc) + "\n\n" + "\n".join(lines) + "\n"
    out = HERE / "results" / f"throughput_{jax.default_backend()}{'_quick' if args.quick else ''}.md"
    out.write_text(text)
    print("\n" + text + f"\nwritten to {out}")


if __name__ == "__main__":
    main()
