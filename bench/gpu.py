"""Every GPU row in one run, under a time budget: the humanoid30 (no contacts), the gymnasium ant
on its floor and the go2-class quadruped scene (``jaxmbd.models.quadruped_scene_path()``) at large
batches, each with RK4 at a fixed step and with the adaptive RosenbrockNystrom4, through the path a
user takes (``jaxmbd.rollout`` of the model as loaded, default options); MJX's RK4 beside it in the
same process where ``mujoco.mjx`` imports.  Writes bench/results/gpu_<backend>.md (or to --out).

    python bench/gpu.py [--models humanoid30 ant go2] [--batches 4096 16384 65536] [--t1 0.05]
                        [--dt 1e-3] [--tol 1e-4] [--budget 540] [--no-mjx] [--out DIR]

Per row: compile (lower + compile of the whole jitted rollout, seconds), member-steps per second
(members x accepted steps / the best of up to three timed runs), simulated member-seconds per
second (members x t1 / that time) and how many members ended with status 0.  A row that would
start after ``--budget`` seconds is listed as not run, so the whole script fits a 10-minute device
lease.  On a CPU, small batches (``--batches 8 --t1 0.01``) check the script itself.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402
from jaxmbd import Inputs, Save, Start, Steps, integrators as I, models  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from common import compiled_best_of as timed, machine, write_result  # noqa: E402


def _humanoid30():
    from mjcf_util import builder_to_mjcf, depth_first
    b = depth_first(models.humanoid30_builder())
    return b.build(), builder_to_mjcf(b), False


def _ant():
    import gymnasium
    path = Path(gymnasium.__file__).parent / "envs/mujoco/assets/ant.xml"
    return jaxmbd.load_mjcf(str(path), warn=False), path.read_text(), True


def _go2():
    path = Path(models.quadruped_scene_path())
    return jaxmbd.load_mjcf(str(path), warn=False), str(path), True


MODELS = {"humanoid30": _humanoid30, "ant": _ant, "go2": _go2}


def states(m, B, seed=0):
    """(q, v, ctrl): the model's first keyframe (else q0 at rest) with joint offsets of 0.05 rad
    and velocities of 0.1 (so members differ), controls at the keyframe's (else zero)."""
    rng = np.random.default_rng(seed)
    key = next(iter(m.keyframes.values()), None)
    q0 = np.asarray(key.qpos if key is not None else m.q0)
    u0 = np.asarray(key.ctrl) if key is not None and len(key.ctrl) == m.nu else np.zeros(m.nu)
    dq = 0.05 * rng.standard_normal((B, m.nv))
    q = jax.vmap(lambda d: jaxmbd.integrate_q(m, jnp.asarray(q0), d))(jnp.asarray(dq))
    v = 0.1 * rng.standard_normal((B, m.nv))
    return q, jnp.asarray(v), jnp.asarray(np.tile(u0, (B, 1)))


def jaxmbd_row(m, q, v, u, t1, method, dt, tol):
    if method == "rk4":
        integ, steps = I.RK4(), Steps(dt0=dt, max_steps=int(round(t1 / dt)) + 1)
    else:
        integ, steps = I.RosenbrockNystrom4(), Steps(rtol=tol, atol=tol)

    def f(q, v, u):
        sol = jaxmbd.rollout(m, Start(q, v), t1, integrator=integ, inputs=Inputs(ctrl=u) if m.nu else Inputs(),
                             steps=steps, save=Save(ts=jnp.array([t1])))
        return sol.status, sol.stats["accepted"]
    wall, t_c, (st, acc) = timed(f, q, v, u)
    B = q.shape[0]
    return dict(compile=t_c, wall=wall, steps=B * float(np.mean(acc)) / wall, sim=B * t1 / wall,
                ok=int((np.asarray(st) == 0).sum()), B=B)


def mjx_row(xml, contacts, q, v, u, t1, dt):
    import mujoco
    from mujoco import mjx
    mj = mujoco.MjModel.from_xml_string(xml) if xml.lstrip().startswith("<") else mujoco.MjModel.from_xml_path(xml)
    mj.opt.timestep, mj.opt.integrator = dt, int(mujoco.mjtIntegrator.mjINT_RK4)
    if not contacts:
        mj.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    n = int(round(t1 / dt))
    mx = mjx.put_model(mj)
    d0 = mjx.make_data(mx)

    def f(q, v, u):
        def one(q, v, u):
            d = d0.replace(qpos=q, qvel=v, ctrl=u)
            return jax.lax.fori_loop(0, n, lambda _, d: mjx.step(mx, d), d).qpos
        return jax.vmap(one)(q, v, u)
    wall, t_c, qf = timed(f, q, v, u)
    B = q.shape[0]
    return dict(compile=t_c, wall=wall, steps=B * n / wall, sim=B * t1 / wall,
                ok=int(np.isfinite(np.asarray(qf)).all(axis=1).sum()), B=B, dtype=str(qf.dtype))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--batches", nargs="+", type=int, default=[4096, 16384, 65536])
    p.add_argument("--t1", type=float, default=0.05, help="simulated seconds per member")
    p.add_argument("--dt", type=float, default=1e-3, help="RK4's step (MJX's too)")
    p.add_argument("--tol", type=float, default=1e-4, help="Rosenbrock's rtol = atol")
    p.add_argument("--budget", type=float, default=540.0, help="seconds after which no row starts")
    p.add_argument("--no-mjx", action="store_true")
    p.add_argument("--out", default=str(HERE / "results"))
    a = p.parse_args(argv)
    start = time.perf_counter()
    mjx_ok = False
    if not a.no_mjx:
        try:
            from mujoco import mjx  # noqa: F401 - importable is what is asked
            mjx_ok = True
        except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
            print(f"MJX not run: {type(e).__name__}: {e}", flush=True)
    rows = []
    for name in a.models:
        m, xml, contacts = MODELS[name]()
        print(f"{name}: {m.summary()}", flush=True)
        for B in a.batches:
            q, v, u = states(m, B)
            for code in ("rk4", "rosenbrock") + (("mjx",) if mjx_ok else ()):
                row = dict(model=name, code=code, B=B)
                if time.perf_counter() - start > a.budget:
                    row["skipped"] = "budget"
                elif code == "mjx":
                    try:
                        row.update(mjx_row(xml, contacts, q, v, u, a.t1, a.dt))
                    except Exception as e:  # noqa: BLE001 - a failed peer is reported, not fatal
                        row["skipped"] = f"{type(e).__name__}: {str(e)[:120]}"
                else:
                    row.update(jaxmbd_row(m, q, v, u, a.t1, code, a.dt, a.tol))
                rows.append(row)
                print({k: (f"{x:.4g}" if isinstance(x, float) else x) for k, x in row.items()}, flush=True)
    names = {"rk4": f"jaxmbd RK4 (dt {a.dt:g})", "rosenbrock": f"jaxmbd RosenbrockNystrom4 (tol {a.tol:g})",
             "mjx": f"MJX RK4 (dt {a.dt:g})"}
    lines = ["| model | code | batch | compile (s) | member-steps/s | simulated member-s/s | status 0 |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['model']} | {names[r['code']]} | {r['B']} | not run: {r['skipped']} | | | |")
        else:
            lines.append(f"| {r['model']} | {names[r['code']]} | {r['B']} | {r['compile']:.1f} | {r['steps']:,.0f} | "
                         f"{r['sim']:,.1f} | {r['ok']}/{r['B']} |")
    desc = machine() + [
        f"each member {a.t1:g} s from the model's first keyframe (else q0) with joint offsets of 0.05 and "
        "velocities of 0.1, controls at the keyframe's; jaxmbd.rollout with default options, float64",
        "member-steps/s: members x mean accepted steps / best wall time of up to three runs after compiling; "
        "compile: lower + compile of the whole jitted rollout",
        f"whole run: {time.perf_counter() - start:.0f} s (command: python bench/gpu.py "
        + " ".join(sys.argv[1:] if argv is None else argv) + ")"]
    if any(r.get("dtype") for r in rows):
        desc.append("MJX dtype " + next(r["dtype"] for r in rows if r.get("dtype")) + ", same device, same process")
    text = (f"# Batched rollouts on one device ({jax.default_backend()})\n\n" + "\n".join(f"- {x}" for x in desc)
            + "\n\n" + "\n".join(lines) + "\n")
    print("\n" + text, flush=True)
    write_result(a.out, "gpu", text)


if __name__ == "__main__":
    main()
