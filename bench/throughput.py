"""Rollout throughput: RK4 member-steps per second for humanoid30 (no
contacts, float64, fixed step 1 ms) with ``jaxmbd.rollout`` (ABA and
CRBA+LTDL forward dynamics) against MuJoCo's multithreaded
``mujoco.rollout`` using every usable core, in one run on one machine.
Writes bench/results/throughput_<backend>.md.

    python bench/throughput.py [--quick] [--batches 1 64 1024 4096] [--steps 50]

MJX (mujoco-mjx 3.17, which needs mujoco 3.17) runs in its own virtual
environment as a subprocess (bench/mjx_rollout.py; set MJX_PYTHON to its
interpreter, default .venv-mjx/bin/python); it is skipped when absent.

``--devices N`` additionally runs the jaxmbd ABA rollout with the batch
sharded over N XLA CPU devices (rollout's ``shard=True``; the flag
``--xla_force_host_platform_device_count`` is set before JAX starts), the
way the batch is spread over the cores that MuJoCo's threads use."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if "--devices" in sys.argv:  # must precede the first JAX import
    _n = sys.argv[sys.argv.index("--devices") + 1]
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={_n}").strip()

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd
from jaxmbd import models
from jaxmbd.cli import rk4_rollout_rate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from common import machine, mjx_subprocess  # noqa: E402
from mjcf_util import builder_to_mjcf, depth_first  # noqa: E402

import mujoco  # noqa: E402
from mujoco import rollout as mj_rollout  # noqa: E402

DT = 1e-3
MJX_TIMEOUT = 300  # s; mujoco-mjx 3.17 under jax 0.10.2 sat idle (no CPU) at batch 1024 here


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


def mjx_rate(xml, q, v, steps):
    """(rate, compile seconds, final qpos, description) from MJX, or None when MJX is absent."""
    out = mjx_subprocess(lambda path: Path(path).write_text(xml), dict(q=q, v=v), steps, MJX_TIMEOUT)
    if out is None:
        return None
    return out["rate"], out["compile"], np.asarray(out["qpos"]), f"mjx {out['mjx']} ({out['dtype']}, {out['device']})"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="batches 1 and 64, 20 steps")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024, 4096])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--devices", type=int, default=0,
                   help="also run jaxmbd ABA sharded over this many XLA CPU devices")
    p.add_argument("--mjx-max-batch", type=int, default=64,
                   help="run MJX up to this batch (mjx 3.17 on XLA:CPU hung at 1024 and 4096 here)")
    args = p.parse_args(argv)
    batches, steps = ([1, 64], 20) if args.quick else (args.batches, args.steps)
    nthread = len(os.sched_getaffinity(0))

    b = depth_first(models.humanoid30_builder())  # MuJoCo's DoF order: states pass unchanged
    model = b.build()
    xml = builder_to_mjcf(b).replace('integrator="Euler"', 'integrator="RK4"')
    mj = mujoco.MjModel.from_xml_string(xml)
    mj.opt.timestep = DT
    assert f'timestep="{DT}"' in xml
    assert (mj.nq, mj.nv) == (model.nq, model.nv)
    desc = machine(f", mujoco {mujoco.__version__}") + [
        f"humanoid30 ({model.summary()}), RK4, dt = {DT}, {steps} steps per member, no contacts; "
        f"MuJoCo rollout with {nthread} threads; rate = members x steps / best of 2 wall times after a warm-up"]
    print("\n".join(desc), flush=True)
    ndev = len(jax.devices())
    rows = []
    rng = np.random.default_rng(0)
    mjx_desc = "MJX: not installed (see bench/mjx_rollout.py)"
    for B in batches:
        dq = 0.3 * rng.standard_normal((B, model.nv))
        q = np.asarray(jax.vmap(lambda d: jaxmbd.integrate_q(model, model.q0, d))(jnp.asarray(dq)))
        v = 0.3 * rng.standard_normal((B, model.nv))
        r_mj, q_mj = mujoco_rate(mj, q, v, steps, nthread)
        row = dict(B=B, mujoco=r_mj, dev=0.0)
        runs = [("aba", "aba", False), ("unr", "aba_unrolled", False), ("crba", "crba", False)]
        if ndev > 1:
            runs.append(("aba_sh", "aba", True))
        for key, dyn, shard in runs:
            r, t_c, qs = rk4_rollout_rate(model, jnp.asarray(q), jnp.asarray(v), steps, DT, dyn, shard=shard)
            row[key], row[key + "_compile"] = r, t_c
            row["dev"] = max(row["dev"], float(np.abs(qs[:, -1] - q_mj).max()))  # same states as MuJoCo's
        mx = mjx_rate(xml, q, v, steps) if B <= args.mjx_max_batch else None  # the XML carries RK4, dt = 1 ms
        if mx is not None:
            row["mjx"], row["mjx_compile"], q_mjx, mjx_desc = mx
            row["mjx_dev"] = float(np.abs(q_mjx - q_mj).max())
        rows.append(row)
        print(f"B={B:6d} " + "  ".join(f"{k} {row[k]:,.0f}" for k in ("mujoco", "mjx", "aba", "unr", "aba_sh", "crba")
                                        if k in row), flush=True)
    sh = ndev > 1
    head = ("| batch | MuJoCo rollout (steps/s) | MJX | jaxmbd ABA | jaxmbd ABA unrolled | "
            + (f"jaxmbd ABA, {ndev} devices | " if sh else "")
            + "jaxmbd CRBA+LTDL | best jaxmbd / MuJoCo | best jaxmbd / MJX | compile ABA (s) | "
            "compile ABA unrolled (s) | compile CRBA (s) | compile MJX (s) | max abs(q - q_MuJoCo) (jaxmbd; MJX) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    fmt = lambda r, k, f="{:,.0f}": f.format(r[k]) if k in r else "–"
    for r in rows:
        best = max(r["aba"], r["unr"], r["crba"], r.get("aba_sh", 0.0))
        lines.append(f"| {r['B']} | {r['mujoco']:,.0f} | {fmt(r, 'mjx')} | {r['aba']:,.0f} | {r['unr']:,.0f} | "
                     + (f"{r['aba_sh']:,.0f} | " if sh else "") +
                     f"{r['crba']:,.0f} | {best / r['mujoco']:.3f} | "
                     + (f"{best / r['mjx']:.2f}" if "mjx" in r else "–") +
                     f" | {r['aba_compile']:.1f} | {r['unr_compile']:.1f} | {r['crba_compile']:.1f} | "
                     f"{fmt(r, 'mjx_compile', '{:.1f}')} | "
                     f"{r['dev']:.1e}; {fmt(r, 'mjx_dev', '{:.1e}')} |")
    desc.append(mjx_desc + ("; MJX runs single-device (one XLA CPU device)" if "mjx" in rows[0] else ""))
    if sh:
        desc.append(f"{ndev} XLA CPU devices (--xla_force_host_platform_device_count); the unsharded jaxmbd "
                    "columns and MJX use one of them")
    text = "# Rollout throughput, humanoid30, RK4 (" + jax.default_backend() + ")\n\n" + \
        "\n".join(f"- {x}" for x in desc) + "\n\n" + "\n".join(lines) + "\n"
    out = HERE / "results" / f"throughput_{jax.default_backend()}{'_quick' if args.quick else ''}.md"
    out.write_text(text)
    print("\n" + text + f"\nwritten to {out}")


if __name__ == "__main__":
    main()
