"""A real-robot-sized contact scene: the built-in go2-class quadruped
(``jaxmbd.models.quadruped_scene_path()``: 61 geoms of which 26 collide, 267
candidate geom pairs by MuJoCo's rules, 12 position servos), loaded from its
MJCF by jaxmbd and by MuJoCo (``--xml``: another file with the same
keyframe and actuator layout), standing on its floor with the standing pose as
control.

jaxmbd (float64, batch 1, the model an argument of the jitted functions),
from the keyframe ``home`` (feet about 1 cm in the floor) with its ctrl
(``--start qpos0``: the file's pose, feet 0.6 mm above the floor, with ctrl =
the pose's joint angles):

- ``fd``: one jitted ``forward_dynamics`` with the actuators' force
  (``actuator_force``) and the model's force elements (contacts, joint
  limits): compile (lower + compile) and per call (median of 5 repeats,
  each looping about 0.2 s);
- ``jac``: the integrators' right-hand side g (``ChartODE`` at y = 0) and g
  with its two Jacobians (what a Rosenbrock attempt builds): per call each,
  and their ratio; and g per evaluation inside one compiled loop of 20 (what
  a step inside ``simulate`` pays; a lone call at batch 1 costs more, in a
  profile mostly XLA's CPU runtime around the program's thousands of small
  kernels: thread-pool hand-offs and allocation);
- ``rk4``: ``simulate`` with RK4 at ``--dt`` (1 ms) over ``--rk4-steps``
  steps: compile and wall per step;
- ``rosenbrock``: ``simulate`` with RosenbrockNystrom4 at rtol = atol =
  ``--tol`` (1e-4) over ``--attempt-duration`` (0.03 s): compile (first
  call), wall, and the cost of one step attempt = wall / (accepted +
  rejected) from the solution's stats;
- ``stand``: the same compiled Rosenbrock run (t1 is an argument) over
  ``--duration`` (1 s): wall after compile, attempts, final base height and
  (where ``jaxmbd.contact_forces`` exists) the pairs pushing.

MuJoCo (``mujoco`` in this process, one thread, its own soft-constraint
contacts): ``--duration`` of ``mj_step`` at the scene's timestep from the
``home`` keyframe (feet 1 cm into the floor) and from ``qpos0``, with the
keyframe's ctrl; best wall of 3; contacts (``d.ncon``) per step; and one
``mj_forward`` (per call, as for ``fd``) at qpos0 and at the end of the
standing run.

    .venv/bin/python bench/robot_scene.py [--duration 1.0] [--rows K] [--only mujoco fd jac rk4 rosenbrock stand]

The table goes to ``--out`` (default bench/results) as ``robot_scene_<backend>.md``
(``robot_scene_rows<K>_<backend>.md`` with ``--rows``),
with the machine, the command and the rows not run marked as such.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # as bench/tree.py: OpenBLAS threads spin against XLA's

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402
from jaxmbd import integrators as I  # noqa: E402
from jaxmbd import Start, Inputs, Steps

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import compiled, jaxmbd_commit, machine, per_call, write_result  # noqa: E402

PARTS = ("mujoco", "fd", "jac", "rk4", "rosenbrock", "stand")


def scene_path(given=None):
    """The scene's file: `given`, else the installed jaxmbd's, else this checkout's (a jaxmbd
    installed from elsewhere may predate the file)."""
    if given:
        return given
    if hasattr(jaxmbd.models, "quadruped_scene_path"):
        return jaxmbd.models.quadruped_scene_path()
    return str(HERE.parent / "jaxmbd" / "models" / "assets" / "quadruped_scene.xml")


def scene(given=None, start="home", rows=None):
    """(path, jaxmbd model, q0, v0, ctrl): the keyframe ``home`` (its qpos, qvel and ctrl), or the
    file's pose qpos0 at rest with its joint angles as the servo targets; ``rows``: the soft solve's
    contact rows (load_mjcf's contact_rows; None: its default)."""
    path = scene_path(given)
    m = jaxmbd.load_mjcf(path, warn=False, contact_rows=rows)
    if start == "home":
        k = m.keyframes["home"]
        return path, m, jnp.asarray(k.qpos), jnp.asarray(k.qvel), jnp.asarray(k.ctrl)
    q0 = jnp.asarray(m.q0)
    return path, m, q0, jnp.zeros(m.nv), q0[7:]


def jaxmbd_fd(m, q, v, u):
    def f(m, q, v, u):
        return jaxmbd.forward_dynamics(m, q, v, jaxmbd.actuator_force(m, q, v, u))
    t_c, c = compiled(f, m, q, v, u)
    t = per_call(lambda: c(m, q, v, u), 0.2, 5)
    qdd = np.asarray(c(m, q, v, u))
    return dict(compile=t_c, call=t, finite=bool(np.isfinite(qdd).all()))


LOOP = 20    # the right-hand side's evaluations in one compiled call (jaxmbd_jac)


def jaxmbd_jac(m, q, v, u):
    """The integrators' right-hand side g (ChartODE at y = 0) and g with its Jacobians (J1, J2, as a
    Rosenbrock attempt builds them): per call of each and their ratio."""
    from jaxmbd.odes import ChartODE

    def g(m, q, v, u):
        return ChartODE(m, q, Inputs(ctrl=u)).g(0.0, jnp.zeros(m.nv), v)

    def gj(m, q, v, u):
        return ChartODE(m, q, Inputs(ctrl=u)).g_and_jac(0.0, jnp.zeros(m.nv), v)
    def g_loop(m, q, v, u):     # LOOP evaluations at nearby configurations in one call
        def body(i, acc):
            return acc + g(m, q.at[0].add(1e-9 * i), v, u)
        return jax.lax.fori_loop(0, LOOP, body, jnp.zeros(m.nv))
    out = {}
    for name, f in (("g", g), ("jac", gj), ("g_loop", g_loop)):
        t_c, c = compiled(f, m, q, v, u)
        out[name] = per_call(lambda: c(m, q, v, u), 0.2, 5)
        out[name + "_compile"] = t_c
    out["g_loop"] /= LOOP
    return out


def _run(c, *args):
    t0 = time.perf_counter()
    out = jax.block_until_ready(c(*args))
    return time.perf_counter() - t0, out


def jaxmbd_rk4(m, q, v, u, dt, steps):
    def f(m, q, v, u):
        sol = jaxmbd.simulate(m, Start(q, v), steps * dt, integrator=I.RK4(), inputs=Inputs(ctrl=u),
                              steps=Steps(dt0=dt))
        return sol.qs[-1], sol.status, sol.stats["accepted"]
    t_c, c = compiled(f, m, q, v, u)
    wall, (qf, st, acc) = _run(c, m, q, v, u)
    wall = min(wall, *(_run(c, m, q, v, u)[0] for _ in range(2)))
    return dict(compile=t_c, wall=wall, steps=int(acc), step=wall / max(int(acc), 1), status=int(st),
                z=float(qf[2]))


def rosenbrock(m, q, v, u, tol):
    """The compiled Rosenbrock run, t1 an argument (one compile for both rows)."""
    def f(m, q, v, u, t1):
        sol = jaxmbd.simulate(m, Start(q, v), t1, integrator=I.RosenbrockNystrom4(), inputs=Inputs(ctrl=u),
                              steps=Steps(rtol=tol, atol=tol))
        return sol.qs[-1], sol.vs[-1], sol.status, sol.stats["accepted"], sol.stats["rejected"]
    return compiled(f, m, q, v, u, jnp.asarray(0.01))


def rosenbrock_run(c, m, q, v, u, t1, repeat):
    wall, (qf, vf, st, acc, rej) = _run(c, m, q, v, u, jnp.asarray(t1))
    for _ in range(repeat):
        wall = min(wall, _run(c, m, q, v, u, jnp.asarray(t1))[0])
    n = int(acc) + int(rej)
    return dict(wall=wall, accepted=int(acc), rejected=int(rej), attempt=wall / max(n, 1), status=int(st),
                z=float(qf[2]), q=qf, v=vf)


def pushing_pairs(m, q, v, u):
    """Pairs with a positive normal force at (q, v) with the actuators at u."""
    from jaxmbd import contact_forces
    f = contact_forces(m, q, v, ctrl=u)
    return len({int(p) for p, fn in zip(np.asarray(f["pair"]), np.asarray(f["normal_force"])) if fn > 0})


def mujoco_stand(path, duration, start, repeat=3):
    """mj_step for `duration` from the keyframe "home" or qpos0 with the keyframe's ctrl."""
    import mujoco
    mj = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(mj)
    key = mj.key("home").id
    n = int(round(duration / mj.opt.timestep))
    best, ncon, z = np.inf, None, None
    for _ in range(repeat):
        if start == "home":
            mujoco.mj_resetDataKeyframe(mj, d, key)
        else:
            mujoco.mj_resetData(mj, d)
            d.ctrl[:] = mj.key_ctrl[key]
        nc = np.zeros(n, int)
        t0 = time.perf_counter()
        for i in range(n):
            mujoco.mj_step(mj, d)
            nc[i] = d.ncon
        best = min(best, time.perf_counter() - t0)
        ncon, z = nc, float(d.qpos[2])
    return dict(wall=best, steps=n, dt=mj.opt.timestep, ncon=ncon, z=z, qpos=d.qpos.copy(), qvel=d.qvel.copy())


def mujoco_forward(path, qpos=None, qvel=None):
    """Seconds per mj_forward at qpos0 at rest, or at (qpos, qvel) with the keyframe's ctrl."""
    import mujoco
    mj = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(mj)
    d.ctrl[:] = mj.key_ctrl[mj.key("home").id]
    if qpos is not None:
        d.qpos[:], d.qvel[:] = qpos, qvel
    return per_call(lambda: mujoco.mj_forward(mj, d), 0.2, 5, sync=lambda x: x)


def contact_rows(m):
    """How many contacts enter the model's soft solve."""
    from jaxmbd.forces.base import elements
    from jaxmbd.forces.contact import Contact
    return next(e.rows for e in elements(m) if isinstance(e, Contact))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=1.0, help="simulated seconds of standing (jaxmbd and MuJoCo)")
    p.add_argument("--attempt-duration", type=float, default=0.03,
                   help="simulated seconds of the Rosenbrock run that prices one step attempt")
    p.add_argument("--tol", type=float, default=1e-4, help="Rosenbrock rtol = atol")
    p.add_argument("--dt", type=float, default=1e-3, help="RK4 step")
    p.add_argument("--rk4-steps", type=int, default=20)
    p.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="the parts to run")
    p.add_argument("--xml", default=None, help="the scene (default: jaxmbd.models.quadruped_scene_path())")
    p.add_argument("--start", choices=("home", "qpos0"), default="home",
                   help="jaxmbd's start: the keyframe home (feet about 1 cm in the floor) or qpos0 at rest")
    p.add_argument("--rows", type=int, default=None,
                   help="the soft solve's contact rows (load_mjcf(contact_rows=...); default: the model's)")
    p.add_argument("--out", default=str(HERE / "results"))
    a = p.parse_args(argv)
    started = time.perf_counter()
    import mujoco
    from jaxmbd.contact.pairs import from_mujoco

    path, m, q, v, u = scene(a.xml, a.start, a.rows)
    mj = mujoco.MjModel.from_xml_path(path)
    colliding = int(((mj.geom_contype != 0) | (mj.geom_conaffinity != 0)).sum())
    npairs = len(from_mujoco(mj))
    head = machine(f", mujoco {mujoco.__version__}")
    head += [f"jaxmbd code measured: git commit {jaxmbd_commit()} (the contact code changes between commits)",
             f"command: python bench/robot_scene.py {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip(),
             f"scene: {Path(path).name}{'' if a.xml else ' (jaxmbd/models/assets)'}, a go2-class quadruped "
             f"(nq={m.nq}, nv={m.nv}, nu={m.nu}, {float(mj.body_mass.sum()):.1f} kg), {mj.ngeom} geoms ({colliding} collide), "
             f"{npairs} candidate pairs by MuJoCo's rules; MuJoCo timestep {mj.opt.timestep:g} s",
             "jaxmbd: float64, batch 1, "
             + ("from the keyframe home (feet about 1 cm in the floor) with its ctrl" if a.start == "home" else
                "from qpos0 (feet 0.6 mm above the floor) at rest, ctrl = the pose's joint angles")
             + f"; soft solve rows {contact_rows(m)}" + (" (--rows)" if a.rows else " (the model's default)")
             + f"; RK4 at {a.dt:g} s, RosenbrockNystrom4 at rtol = atol = {a.tol:g}, simulate's defaults "
             "otherwise; MuJoCo: mj_step (its default Euler), one thread, with the keyframe's ctrl"]
    print("\n".join(head), flush=True)
    rows = []   # (quantity, value, note)

    def add(what, value, note=""):
        print(f"{what}: {value} {note}", flush=True)
        rows.append((what, value, note))

    def report():
        lines = [f"# A robot scene: the go2-class quadruped standing ({jax.default_backend()}, float64)", ""]
        lines += [f"- {x}" for x in head] + [""]
        lines += ["| part | quantity | value | note |", "|---|---|---|---|"]
        lines += [f"| {w.split(': ')[0]} | {w.split(': ', 1)[1]} | {v} | {n} |" for w, v, n in rows]
        skipped = [x for x in PARTS if x not in a.only]
        if skipped:
            lines += ["", f"Not run here: {', '.join(skipped)} (--only {' '.join(a.only)})."]
        lines += ["", f"Benchmark took {time.perf_counter() - started:.0f} s."]
        write_result(a.out, "robot_scene" + (f"_rows{a.rows}" if a.rows else ""), "\n".join(lines) + "\n")

    if "mujoco" in a.only:
        add("MuJoCo: mj_forward at qpos0 (µs)", f"{mujoco_forward(path) * 1e6:.1f}",
            "per call; the state of jaxmbd's forward_dynamics row (no contact yet)")
        for start in ("home", "qpos0"):
            r = mujoco_stand(path, a.duration, start)
            nc = r["ncon"]
            add(f"MuJoCo: {a.duration:g} s of mj_step from {start}, wall (s)", f"{r['wall']:.4f}",
                f"{r['steps']} steps of {r['dt']:g} s, {r['wall'] / r['steps'] * 1e6:.1f} µs/step, best of 3")
            add(f"MuJoCo: contacts (d.ncon) from {start}", f"{nc.min()}-{nc.max()} (mean {nc.mean():.2f}, "
                f"last {nc[-1]})", f"base height at the end {r['z']:.4f} m")
            if start == "home":
                add("MuJoCo: mj_forward standing (µs)", f"{mujoco_forward(path, r['qpos'], r['qvel']) * 1e6:.1f}",
                    f"per call, at the end of the run from home ({nc[-1]} contacts; no warm start)")
        report()
    if "fd" in a.only:
        r = jaxmbd_fd(m, q, v, u)
        add("jaxmbd: forward_dynamics with contacts, compile (s)", f"{r['compile']:.1f}", "lower + compile, batch 1")
        add("jaxmbd: forward_dynamics with contacts, per call (µs)", f"{r['call'] * 1e6:,.0f}",
            f"batch 1, {a.start}{'' if r['finite'] else ' (NOT FINITE)'}")
        report()
    if "jac" in a.only:
        r = jaxmbd_jac(m, q, v, u)
        add("jaxmbd: right-hand side g (ChartODE), per call (µs)", f"{r['g'] * 1e6:,.0f}",
            f"compile {r['g_compile']:.1f} s")
        add("jaxmbd: g with its Jacobians J1, J2, per call (µs)", f"{r['jac'] * 1e6:,.0f}",
            f"{r['jac'] / r['g']:.1f}x g; compile {r['jac_compile']:.1f} s")
        add("jaxmbd: g inside a compiled loop, per evaluation (µs)", f"{r['g_loop'] * 1e6:,.0f}",
            f"{LOOP} evaluations in one call (what a step pays); a lone call costs "
            f"{(r['g'] - r['g_loop']) * 1e6:,.0f} µs more")
        report()
    if "rk4" in a.only:
        r = jaxmbd_rk4(m, q, v, u, a.dt, a.rk4_steps)
        add("jaxmbd: simulate RK4, compile (s)", f"{r['compile']:.1f}", "first call: lower + compile")
        add(f"jaxmbd: simulate RK4 at {a.dt:g} s, per step (ms)", f"{r['step'] * 1e3:.2f}",
            f"{r['steps']} steps in {r['wall']:.3f} s (best of 3), status {r['status']}")
        report()
    if "rosenbrock" in a.only or "stand" in a.only:
        t_c, c = rosenbrock(m, q, v, u, a.tol)
        add("jaxmbd: simulate Rosenbrock, compile (s)", f"{t_c:.1f}", "first call: lower + compile (t1 traced)")
        report()
        if "rosenbrock" in a.only:
            r = rosenbrock_run(c, m, q, v, u, a.attempt_duration, repeat=2 if a.attempt_duration <= 0.1 else 0)
            add(f"jaxmbd: Rosenbrock, {a.attempt_duration:g} s, per attempt (ms)", f"{r['attempt'] * 1e3:.2f}",
                f"wall {r['wall']:.3f} s / ({r['accepted']} accepted + {r['rejected']} rejected), status "
                f"{r['status']}")
            report()
        if "stand" in a.only:
            r = rosenbrock_run(c, m, q, v, u, a.duration, repeat=0)
            push = pushing_pairs(m, r["q"], r["v"], u)
            add(f"jaxmbd: Rosenbrock, {a.duration:g} s standing, wall (s)", f"{r['wall']:.2f}",
                f"after compile; {r['accepted']} accepted + {r['rejected']} rejected "
                f"({r['attempt'] * 1e3:.2f} ms/attempt), status {r['status']}")
            add("jaxmbd: standing, at the end", f"base height {r['z']:.4f} m",
                f"pairs pushing: {push}")
            report()


if __name__ == "__main__":
    main()
