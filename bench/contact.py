"""Contact scenes under error control: does contact onset stall the
step-size controller, and what does a run cost?

Scenes: a box thrown tumbling onto the floor (0.6 s; the box of
tests/test_contact.py: four-corner stiffness 1e5 N/m, Hunt-Crossley damping
100 s/m, friction 0.5), and the gymnasium ant, loaded from MJCF with its
floor, limits and the default solref mapping, dropped from 0.2 m above its
rest height (1 s).  Per integrator and tolerance: status, accepted and
rejected steps, RHS evaluations, Jacobians, the wall time of a compiled run
(best of 2) and the compile time; RK4 at a fixed 1 ms for comparison; MuJoCo's
own step (its soft-constraint contact, Euler at its default 2 ms) on the ant
for scale (its own timestep from the file; a different contact model: not the same physics).  Writes
bench/results/contact_<backend>.md.

    .venv/bin/python bench/contact.py [--tols 1e-4 1e-6] [--out bench/results]"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import Start, Steps, Solver

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import machine, write_result  # noqa: E402


def box_scene():
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "plane", name="floor", contype=0)
    b.add_body("box", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(1 / 150, 1 / 150, 1 / 150))
    b.add_geom("box", "box", (0.1, 0.1, 0.1), name="box")
    b.add_contact_pair("floor", "box", stiffness=1e5, damping=100.0, friction=(0.5, 0, 0))
    m = b.build()
    th = 0.3
    q0 = jnp.array([0.0, 0.0, 0.25, math.cos(th / 2), math.sin(th / 2) * 0.6, math.sin(th / 2) * 0.8, 0.0])
    v0 = jnp.array([0.8, 0.0, -0.5, 1.0, -2.0, 0.5])
    return m, q0, v0, 0.6


def ant_scene():
    import gymnasium
    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "ant.xml")
    m = jaxmbd.load_mjcf(path, warn=False)
    q0 = m.q0.at[2].add(0.2)
    return m, q0, jnp.zeros(m.nv), 1.0, path


def run_row(m, q0, v0, t1, integrator, tol=None, dt0=None):
    steps = Steps(rtol=tol, atol=tol, max_steps=200_000) if tol is not None else Steps(dt0=dt0, max_steps=200_000)

    def f(q0, v0):
        return jaxmbd.simulate(m, Start(q0, v0), t1, integrator=integrator, steps=steps,
                               solver=Solver(adjoint="none"))
    t0 = time.perf_counter()
    c = jax.jit(f).lower(q0, v0).compile()
    comp = time.perf_counter() - t0
    walls = []
    for _ in range(2):
        t0 = time.perf_counter()
        sol = jax.block_until_ready(c(q0, v0))
        walls.append(time.perf_counter() - t0)
    st = {k: int(v) for k, v in sol.stats.items()}
    return dict(status=jaxmbd.status_name(sol.status), wall=min(walls), compile=comp, z=float(sol.qs[-1, 2]), **st)


def mujoco_ant(path, t1):
    import mujoco
    mj = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(mj)
    d.qpos[2] += 0.2
    n = int(round(t1 / mj.opt.timestep))
    t0 = time.perf_counter()
    for _ in range(n):
        mujoco.mj_step(mj, d)
    return n, time.perf_counter() - t0, float(d.qpos[2]), f"{mujoco.__version__}", mj.opt.timestep


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tols", type=float, nargs="+", default=[1e-4, 1e-6])
    ap.add_argument("--out", default=str(HERE / "results"))
    a = ap.parse_args()
    started = time.perf_counter()
    head = machine()
    lines = ["# Contact scenes under error control (cpu)", ""] + [f"- {x}" for x in head] + [""]
    lines += ["| scene | method | tol / dt | status | accepted | rejected | RHS | Jacobians | wall (s) | compile (s) "
              "| final z (m) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    box = box_scene()
    ant = ant_scene()
    for name, (m, q0, v0, t1) in (("tumbling box", box), ("ant drop", ant[:4])):
        rows = [(type(ig).__name__, f"{tol:g}", run_row(m, q0, v0, t1, ig, tol=tol))
                for ig in (I.RosenbrockNystrom4(), I.SDIRK4()) for tol in a.tols]
        rows.append(("RK4", "dt 1e-3", run_row(m, q0, v0, t1, I.RK4(), dt0=1e-3)))
        for meth, tol, r in rows:
            lines.append(f"| {name} | {meth} | {tol} | {r['status']} | {r['accepted']} | {r['rejected']} | "
                         f"{r['rhs_evals']} | {r.get('jacobian_evals', 0)} | {r['wall']:.3f} | {r['compile']:.1f} | "
                         f"{r['z']:.4f} |")
            print(lines[-1], flush=True)
    n, wall, z, ver, dt = mujoco_ant(ant[4], ant[3])
    lines.append(f"| ant drop | MuJoCo {ver} mj_step (Euler, its soft constraints) | dt {dt:g} | - | {n} | - | - | - | "
                 f"{wall:.3f} | - | {z:.4f} |")
    lines += ["", f"Benchmark took {time.perf_counter() - started:.0f} s."]
    write_result(a.out, "contact", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
