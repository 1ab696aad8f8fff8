"""Work-precision on contact scenes: error against each engine's own tight
reference versus wall time, for jaxmbd's integrators and MuJoCo's.

Scenes (each an MJCF document, so that jaxmbd and MuJoCo load the same
scene; jaxmbd loads it with its default contact law, MuJoCo's soft constraints):
- cube toss: a 0.2 m, 1 kg cube thrown tumbling onto the floor (friction
  0.5), 0.6 s;
- box stack: two 0.2 m boxes dropped in a slightly offset stack onto the
  floor (box-box contact between bodies), 0.8 s;
- ant drop: the gymnasium ant, unactuated, dropped from 0.2 m above its rest
  height, 1 s.

jaxmbd: RosenbrockNystrom4 and SDIRK4 (error control, several tolerances,
rtol = atol), Dopri5 (explicit, error control), RK4 and semi-implicit Euler
(fixed steps); error = max over 10 save times of max |q - q_ref| with q_ref a
RosenbrockNystrom4 run at tol 1e-10.  MuJoCo (the `mujoco` in this
environment, one thread, ``mujoco.rollout``): Euler, implicitfast and RK4 at
fixed steps, against its own RK4 at a 10 us step (its soft-constraint
contact: a different model, so the two errors are each engine's own
discretization error).  Wall: a compiled run of one member (best of 2, or
one run when it takes over 5 s); tolerances and steps are traced, so each
method compiles once per scene (compile times listed).  Writes
bench/results/work_precision_<backend>.md and .png.

    .venv/bin/python bench/work_precision.py [--scenes cube stack ant] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402
from jaxmbd import integrators as I  # noqa: E402
from jaxmbd import Start, Steps, Save, Solver

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import best_of, machine, write_result  # noqa: E402

NSAVE = 10

CUBE = """<mujoco model="cube toss"><option timestep="0.002"/>
<worldbody><geom name="floor" type="plane" size="5 5 0.1" friction="0.5 0.005 0.0001"/>
<body name="cube" pos="0 0 0.25"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"
friction="0.5 0.005 0.0001"/></body></worldbody></mujoco>"""


def stack_xml():
    bodies = "".join(
        f'<body name="box{i}" pos="{0.03 * i:.2f} {-0.02 * i:.2f} {0.15 + 0.25 * i:.2f}"><freejoint/>'
        f'<geom type="box" size="0.1 0.1 0.1" mass="1" friction="0.6 0.005 0.0001"/></body>' for i in range(2))
    return (f'<mujoco model="box stack"><option timestep="0.002"/><worldbody><geom name="floor" type="plane" '
            f'size="5 5 0.1" friction="0.6 0.005 0.0001"/>{bodies}</worldbody></mujoco>')


def scenes(which):
    th = 0.3
    out = {}
    if "cube" in which:
        q0 = np.array([0.0, 0.0, 0.25, np.cos(th / 2), np.sin(th / 2) * 0.6, np.sin(th / 2) * 0.8, 0.0])
        v0 = np.array([0.8, 0.0, -0.5, 1.0, -2.0, 0.5])
        out["cube toss"] = (CUBE, q0, v0, 0.6)
    if "stack" in which:
        out["box stack"] = (stack_xml(), None, None, 0.8)
    if "ant" in which:
        import gymnasium
        path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "ant.xml")
        out["ant drop"] = (Path(path).read_text(), "ant", None, 1.0)
    return out


def load(xml, q0, v0):
    import mujoco
    m = jaxmbd.load_mjcf(xml, warn=False)
    mj = mujoco.MjModel.from_xml_string(xml)
    if q0 is None:
        q0 = np.asarray(m.q0)
    elif isinstance(q0, str):  # the ant: raised 0.2 m
        q0 = np.asarray(m.q0).copy()
        q0[2] += 0.2
    if v0 is None:
        v0 = np.zeros(m.nv)
    assert np.allclose(q0[:mj.nq], q0) and mj.nq == m.nq
    return m, mj, q0, v0


def jaxmbd_runner(m, integrator, t1, fixed):
    ts = jnp.linspace(t1 / NSAVE, t1, NSAVE)

    def run(q0, v0, x):
        steps = Steps(dt0=x, max_steps=2_000_000) if fixed else Steps(rtol=x, atol=x, max_steps=2_000_000)
        sol = jaxmbd.simulate(m, Start(q0, v0), t1, integrator=integrator, steps=steps,
                              save=Save(ts=ts), solver=Solver(adjoint="none"))
        return sol.qs, sol.status, sol.stats["accepted"], sol.stats["rejected"]
    return run


def mujoco_run(mj, q0, v0, t1, dt, integrator, repeat=2):
    import mujoco
    from mujoco import rollout as mj_rollout
    mj.opt.timestep = dt
    mj.opt.integrator = int(getattr(mujoco.mjtIntegrator, "mjINT_" + integrator))
    n = int(round(t1 / dt))
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:] = q0, v0
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    s0 = np.zeros((1, mujoco.mj_stateSize(mj, spec)))
    mujoco.mj_getState(mj, d, s0[0], spec)
    idx = [int(round(k * n / NSAVE)) - 1 for k in range(1, NSAVE + 1)]
    best = np.inf
    with mj_rollout.Rollout(nthread=1) as r:
        st, _ = r.rollout(mj, [mujoco.MjData(mj)], s0, nstep=n)
        for _ in range(repeat):
            t0 = time.perf_counter()
            st, _ = r.rollout(mj, [mujoco.MjData(mj)], s0, nstep=n)
            best = min(best, time.perf_counter() - t0)
    return (best if repeat else np.nan), st[0, idx, 1:1 + mj.nq], n


JAXMBD = [("RosenbrockNystrom4", I.RosenbrockNystrom4(), False, [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]),
          ("SDIRK4", I.SDIRK4(), False, [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]),
          ("Dopri5", I.Dopri5(), False, [1e-3, 1e-5]),
          ("RK4", I.RK4(), True, [1e-3, 3e-4, 1e-4]),
          ("SemiImplicitEuler", I.SemiImplicitEuler(), True, [1e-3, 1e-4, 1e-5])]
MUJOCO = [("EULER", [4e-3, 2e-3, 1e-3, 5e-4]), ("IMPLICITFAST", [4e-3, 2e-3, 1e-3, 5e-4]),
          ("RK4", [4e-3, 2e-3, 1e-3, 5e-4])]


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(results)
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for meth, pts in results[name].items():
            pts = [(w, e) for w, e in pts if np.isfinite(w) and np.isfinite(e) and e > 0]
            if not pts:
                continue
            w, e = zip(*pts)
            ls = "--" if meth.startswith("MuJoCo") else "-"
            ax.loglog(w, e, ls, marker="o", ms=4, label=meth)
        ax.set_xlabel("wall time of one run (s)")
        ax.set_ylabel("max |q - q_ref| over 10 save times (m, rad)")
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Work-precision on contact scenes (jaxmbd vs its tol-1e-10 reference; MuJoCo vs its own 10 us RK4)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", nargs="+", default=["cube", "stack", "ant"])
    ap.add_argument("--quick", action="store_true", help="two settings per method (a smoke test)")
    ap.add_argument("--out", default=str(HERE / "results"))
    a = ap.parse_args(argv)
    started = time.perf_counter()
    import mujoco
    head = machine(f", mujoco {mujoco.__version__}")
    lines = ["# Work-precision on contact scenes (" + jax.default_backend() + ")", ""]
    lines += [f"- {x}" for x in head] + [""]
    lines += ["| scene | engine / method | tol or dt | status | steps (rejected) | error | wall (s) | compile (s) |",
              "|---|---|---|---|---|---|---|---|"]
    results = {}
    for name, (xml, q0, v0, t1) in scenes(a.scenes).items():
        m, mj, q0, v0 = load(xml, q0, v0)
        qj, vj = jnp.asarray(q0), jnp.asarray(v0)
        ref_run = jax.jit(jaxmbd_runner(m, I.RosenbrockNystrom4(), t1, False))
        ref_qs, st, acc, rej = ref_run(qj, vj, 1e-10)
        assert int(st) == 0, jaxmbd.status_name(st)
        ref_qs = np.asarray(ref_qs)
        _, mref, _ = mujoco_run(mj, q0, v0, t1, 1e-5, "RK4", repeat=0)
        print(f"{name}: references done ({int(acc)} Rosenbrock steps at 1e-10)", flush=True)
        res = results[name] = {}
        for meth, ig, fixed, xs in JAXMBD:
            xs = xs[:2] if a.quick else xs
            t0 = time.perf_counter()
            c = jax.jit(jaxmbd_runner(m, ig, t1, fixed)).lower(qj, vj, xs[0]).compile()
            comp = time.perf_counter() - t0
            for x in xs:
                wall, (qs, st, acc, rej) = best_of(c, qj, vj, x)
                e = float(np.abs(np.asarray(qs) - ref_qs).max()) if int(st) == 0 else np.nan
                res.setdefault(f"jaxmbd {meth}", []).append((wall, e))
                lines.append(f"| {name} | jaxmbd {meth} | {'dt' if fixed else 'tol'} {x:g} | "
                             f"{jaxmbd.status_name(st)} | {int(acc)} ({int(rej)}) | {e:.1e} | {wall:.3f} | {comp:.1f} |")
                print(lines[-1], flush=True)
        for integ, dts in MUJOCO:
            dts = dts[:2] if a.quick else dts
            for dt in dts:
                wall, qs, n = mujoco_run(mj, q0, v0, t1, dt, integ)
                e = float(np.abs(qs - mref).max())
                label = f"MuJoCo {integ.lower()}"
                res.setdefault(label, []).append((wall, e))
                lines.append(f"| {name} | {label} | dt {dt:g} | - | {n} | {e:.1e} | {wall:.4f} | - |")
                print(lines[-1], flush=True)
    lines += ["", "error: max over the 10 save times of max |q - q_ref| (positions in m, quaternion components, "
              "joint angles in rad); jaxmbd against its RosenbrockNystrom4 tol-1e-10 run, MuJoCo against its own "
              "RK4 at 10 us. A failed run (status not success) has no error.", "",
              f"Benchmark took {time.perf_counter() - started:.0f} s."]
    path = write_result(a.out, "work_precision", "\n".join(lines) + "\n")
    plot(results, str(path)[:-3] + ".png")
    print(f"plot: {str(path)[:-3]}.png")


if __name__ == "__main__":
    main()
