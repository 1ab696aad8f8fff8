"""Rollout throughput on a GPU: RK4 member-steps per second for humanoid30
(no contacts, float64, fixed step 1 ms) with ``jaxmbd.rollout`` against MJX on
the same GPU, at large batches, in one run.  MuJoCo's CPU ``mujoco.rollout``
(every core of the host) runs too, as the reference the final states are
checked against.  Writes bench/results/throughput_gpu.md (or to --out).

    python bench/throughput_gpu.py [--batches 8192 16384 32768 65536] [--steps 20]

MJX runs in this process: it needs ``mujoco`` and ``mujoco-mjx`` of one
version (3.17 was used) importable beside the JAX that drives the GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402
from jaxmbd import models  # noqa: E402
from jaxmbd.cli import compile_and_time, rk4_rollout_rate  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from common import machine  # noqa: E402
from mjcf_util import builder_to_mjcf, depth_first  # noqa: E402
from throughput import DT, mujoco_rate  # noqa: E402

import mujoco  # noqa: E402


def mjx_rate(mj, q, v, steps):
    """(rate, compile seconds, final qpos) of MJX's vmapped RK4 rollout."""
    from mujoco import mjx
    m = mjx.put_model(mj)
    d0 = mjx.make_data(m)

    def one(q, v):
        d = d0.replace(qpos=q, qvel=v)
        return jax.lax.fori_loop(0, steps, lambda _, d: mjx.step(m, d), d).qpos

    q, v = jnp.asarray(q), jnp.asarray(v)
    best, t_compile, out = compile_and_time(jax.jit(jax.vmap(one)), q, v)
    return q.shape[0] * steps / best, t_compile, np.asarray(out), str(out.dtype)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[8192, 16384, 32768, 65536])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--methods", nargs="+", default=["aba", "aba_unrolled", "crba"])
    p.add_argument("--no-mjx", action="store_true")
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    steps = args.steps
    nthread = len(os.sched_getaffinity(0))

    b = depth_first(models.humanoid30_builder())
    model = b.build()
    xml = builder_to_mjcf(b).replace('integrator="Euler"', 'integrator="RK4"')
    mj = mujoco.MjModel.from_xml_string(xml)
    mj.opt.timestep = DT
    mj.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    assert (mj.nq, mj.nv) == (model.nq, model.nv)
    desc = machine(f", mujoco {mujoco.__version__}") + [
        f"humanoid30 ({model.summary()}), RK4, dt = {DT}, {steps} steps per member, no contacts",
        f"MuJoCo CPU rollout with {nthread} threads on the host (the reference for the final states)",
        "rate = members x steps / best of 2 wall times after a warm-up; compile = lower + compile of the "
        "whole jitted rollout"]
    print("\n".join(desc), flush=True)
    rows = []
    rng = np.random.default_rng(0)
    for B in args.batches:
        dq = 0.3 * rng.standard_normal((B, model.nv))
        q = np.asarray(jax.vmap(lambda d: jaxmbd.integrate_q(model, model.q0, d))(jnp.asarray(dq)))
        v = 0.3 * rng.standard_normal((B, model.nv))
        r_mj, q_mj = mujoco_rate(mj, q, v, steps, nthread)
        row = dict(B=B, mujoco=r_mj)
        for meth in args.methods:
            r, t_c, qs = rk4_rollout_rate(model, jnp.asarray(q), jnp.asarray(v), steps, DT, meth)
            row[meth], row[meth + "_c"] = r, t_c
            row[meth + "_dev"] = float(np.abs(qs[:, -1] - q_mj).max())
            print(f"B={B} {meth}: {r:,.0f} steps/s (compile {t_c:.1f} s, dev {row[meth + '_dev']:.1e})", flush=True)
        if not args.no_mjx:
            try:
                r, t_c, qx, dt = mjx_rate(mj, q, v, steps)
                row["mjx"], row["mjx_c"], row["mjx_dev"], row["mjx_dtype"] = r, t_c, float(np.abs(qx - q_mj).max()), dt
                print(f"B={B} mjx: {r:,.0f} steps/s (compile {t_c:.1f} s, {dt}, dev {row['mjx_dev']:.1e})", flush=True)
            except Exception as e:  # noqa: BLE001 - a failed peer is reported, not fatal
                print(f"B={B} mjx failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
        rows.append(row)
    names = {"aba": "jaxmbd ABA", "aba_unrolled": "jaxmbd ABA unrolled", "crba": "jaxmbd CRBA+LTDL"}
    cols = args.methods + ([] if args.no_mjx else ["mjx"])
    head = ("| batch | MuJoCo CPU rollout | " + " | ".join(names.get(c, "MJX") for c in cols)
            + " | best jaxmbd / MJX | best jaxmbd / MuJoCo CPU | compile (s): "
            + ", ".join(names.get(c, "MJX") for c in cols) + " | max abs(q - q_MuJoCo): "
            + ", ".join(names.get(c, "MJX") for c in cols) + " |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    fmt = lambda r, k, f: f.format(r[k]) if k in r else "–"
    for r in rows:
        best = max(r[m] for m in args.methods)
        lines.append(f"| {r['B']} | {r['mujoco']:,.0f} | " + " | ".join(fmt(r, c, "{:,.0f}") for c in cols)
                     + " | " + (f"{best / r['mjx']:.2f}" if "mjx" in r else "–") + f" | {best / r['mujoco']:.2f} | "
                     + ", ".join(fmt(r, c + "_c", "{:.1f}") for c in cols) + " | "
                     + ", ".join(fmt(r, c + "_dev", "{:.1e}") for c in cols) + " |")
    if any("mjx_dtype" in r for r in rows):
        desc.append(f"MJX dtype {rows[-1].get('mjx_dtype', '?')}, same device")
    text = "# Rollout throughput, humanoid30, RK4 (" + jax.default_backend() + ")\n\n" + \
        "\n".join(f"- {x}" for x in desc) + "\n\n" + "\n".join(lines) + "\n"
    out = Path(args.out) / f"throughput_{jax.default_backend()}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print("\n" + text + f"\nwritten to {out}", flush=True)


if __name__ == "__main__":
    main()
