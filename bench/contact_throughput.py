"""Throughput with contact: batched rollouts of the gymnasium ant (its floor,
joint limits and eight motors, loaded from MJCF) started from randomized
states near the floor with a random constant control per member, against
``mujoco.rollout`` (every core) and MJX on the same scene, step and
batch, in one run.  Also the batched cost of adaptive runs (the vmap cost:
members that settle wait for members still working).

Rows, per batch:
- jaxmbd fixed step: semi-implicit Euler and RK4 at ``--dt`` (1 ms), through
  ``jaxmbd.rollout`` with its defaults (the path a user takes);
- jaxmbd adaptive: RosenbrockNystrom4 at ``--tol`` (1e-4) through
  ``jaxmbd.rollout`` with its defaults, once with the whole batch in one
  vmap and once with ``chunk_size`` (bounds how long a member waits);
- MuJoCo's ``mujoco.rollout`` (C, all cores of the host), Euler and RK4 at
  the same step, its own soft-constraint contact model;
- MJX (JAX) Euler at the same step: in this process when ``mujoco.mjx``
  imports beside the JAX that runs (the GPU machine), else through
  ``.venv-mjx`` (``bench/mjx_rollout.py``) on XLA:CPU up to
  ``--mjx-max-batch``.

rate = member-steps per second (for the adaptive rows: member-seconds of
simulated time per second, and the mean number of steps a member takes);
best of 2 after a warm-up (a first run over 5 s is
timed alone); compile = lower + compile of the jitted rollout.
Accuracy (first 8 members, torso position at t1): jaxmbd rows against a
jaxmbd Rosenbrock tol-1e-10 run; MuJoCo/MJX rows against MuJoCo's own RK4 at
a 100x finer step (each against its own contact model: they are different
models, not different errors).  The vmap cost of the adaptive rows is the
batch waste: the loop iterations the batch runs times its width over the
step attempts its members need, B x max(n_i) / sum(n_i) in one vmap and the
sum over chunks with ``chunk_size`` (1 = no member waits).

    .venv/bin/python bench/contact_throughput.py [--batches 1 64 1024 4096] [--steps 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jax
from jaxmbd import Start, Inputs, Steps, Save, Solver

F32 = "--f32" in sys.argv
jax.config.update("jax_enable_x64", not F32)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402
from jaxmbd import integrators as I  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import compiled_best_of as timed, machine, mjx_subprocess, write_result  # noqa: E402

NREF = 8           # members checked against the reference runs
MJX_TIMEOUT = 900


def ant_path(given=None):
    if given:
        return given
    import gymnasium
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "ant.xml")


def initial_states(m, B, seed=0):
    """Torso 0-10 cm above its rest height, upright within ~0.2 rad, joints
    +-0.3 rad from their reference, random velocities (0.3 scale), and a
    random constant control in [-0.5, 0.5] per motor."""
    rng = np.random.default_rng(seed)
    q = np.tile(np.asarray(m.q0), (B, 1))
    q[:, 2] += rng.uniform(0.0, 0.1, B)
    axis = rng.standard_normal((B, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    ang = rng.uniform(0.0, 0.2, B)
    q[:, 3] = np.cos(ang / 2)
    q[:, 4:7] = np.sin(ang / 2)[:, None] * axis
    q[:, 7:] += rng.uniform(-0.3, 0.3, (B, m.nq - 7))
    v = 0.3 * rng.standard_normal((B, m.nv))
    u = rng.uniform(-0.5, 0.5, (B, m.nu))
    return q, v, u


def jaxmbd_fixed(m, integrator, q, v, u, t1, dt):
    n = int(round(t1 / dt))

    def f(q, v, u):
        sol = jaxmbd.rollout(m, Start(q, v), t1, integrator=integrator, inputs=Inputs(ctrl=u), steps=Steps(dt0=dt),
                             save=Save(ts=jnp.array([t1])))
        return sol.qs[:, -1], sol.status
    wall, t_c, (qf, st) = timed(f, q, v, u)
    return dict(rate=q.shape[0] * n / wall, compile=t_c, wall=wall, q=np.asarray(qf), ok=int((np.asarray(st) == 0).sum()))


def jaxmbd_adaptive(m, q, v, u, t1, tol, chunk=None):
    def f(q, v, u):
        sol = jaxmbd.rollout(m, Start(q, v), t1, integrator=I.RosenbrockNystrom4(), inputs=Inputs(ctrl=u),
                             steps=Steps(rtol=tol, atol=tol), save=Save(ts=jnp.array([t1])), chunk_size=chunk)
        return sol.qs[:, -1], sol.status, sol.stats["accepted"] + sol.stats["rejected"], sol.stats["accepted"]
    wall, t_c, (qf, st, n, acc) = timed(f, q, v, u)
    n = np.asarray(n)
    B = q.shape[0]
    c = B if chunk is None or chunk >= B else chunk
    waste = sum(c * n[i:i + c].max() for i in range(0, B, c)) / n.sum()
    return dict(rate=B * t1 / wall, compile=t_c, wall=wall, q=np.asarray(qf), ok=int((np.asarray(st) == 0).sum()),
                attempts=n, accepted=float(np.asarray(acc).mean()), waste=waste, sum_attempts=int(n.sum()))


def reference_jaxmbd(m, q, v, u, t1):
    sol = jax.jit(lambda q, v, u: jaxmbd.rollout(m, Start(q, v), t1, integrator=I.RosenbrockNystrom4(),
                                                 inputs=Inputs(ctrl=u),
                                                 steps=Steps(rtol=1e-10, atol=1e-10, max_steps=1_000_000),
                                                 save=Save(ts=jnp.array([t1])), solver=Solver(adjoint="none")))(q, v, u)
    assert (np.asarray(sol.status) == 0).all(), sol.status
    return np.asarray(sol.qs[:, -1])


def mj_model(path, dt, integrator):
    import mujoco
    mj = mujoco.MjModel.from_xml_path(path)
    mj.opt.timestep = dt
    mj.opt.integrator = int(getattr(mujoco.mjtIntegrator, "mjINT_" + integrator))
    return mj


def mujoco_rollout(path, q, v, u, t1, dt, integrator, nthread, repeat=2):
    import mujoco
    from mujoco import rollout as mj_rollout
    mj = mj_model(path, dt, integrator)
    n = int(round(t1 / dt))
    B = q.shape[0]
    d = mujoco.MjData(mj)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.zeros((B, mujoco.mj_stateSize(mj, spec)))
    for b in range(B):
        mujoco.mj_resetData(mj, d)
        d.qpos[:], d.qvel[:] = q[b], v[b]
        mujoco.mj_getState(mj, d, state0[b], spec)
    ctrl = np.repeat(u[:, None, :], n, axis=1)
    datas = [mujoco.MjData(mj) for _ in range(nthread)]
    best = np.inf
    with mj_rollout.Rollout(nthread=nthread) as r:
        w = min(B, 4 * nthread)  # warm-up on a few members
        st, _ = r.rollout(mj, datas, state0[:w], ctrl[:w], nstep=n)
        if not repeat:
            st, _ = r.rollout(mj, datas, state0, ctrl, nstep=n)
        for _ in range(repeat):
            t0 = time.perf_counter()
            st, _ = r.rollout(mj, datas, state0, ctrl, nstep=n)
            best = min(best, time.perf_counter() - t0)
    return dict(rate=B * n / best, wall=best, q=st[:, -1, 1:1 + mj.nq], ok=int(np.isfinite(st[:, -1]).all(1).sum()))


def mjx_inprocess():
    """True when MJX imports beside this JAX (and mujoco is the version it needs)."""
    try:
        from mujoco import mjx  # noqa: F401 - importable is what is asked
        return True
    except Exception:  # noqa: BLE001
        return False


def mjx_rollout(path, q, v, u, t1, dt):
    """MJX Euler at dt: in process when it imports here, else via .venv-mjx."""
    n = int(round(t1 / dt))
    if mjx_inprocess():
        sys.path.insert(0, str(HERE))
        from mjx_rollout import mjx_run
        mj = mj_model(path, dt, "EULER")
        return mjx_run(mj, q, v, u, n, contacts=True)
    import mujoco
    out = mjx_subprocess(lambda xp: mujoco.mj_saveLastXML(xp, mj_model(path, dt, "EULER")), dict(q=q, v=v, ctrl=u),
                         n, MJX_TIMEOUT, contacts=True)
    if out is None:
        return None
    out["q"] = np.asarray(out.pop("qpos"))
    return out


def main(argv=None):
    gpu = jax.default_backend() == "gpu"
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[8192, 32768, 65536] if gpu else [1, 64, 1024, 4096])
    p.add_argument("--t1", type=float, default=0.2, help="simulated seconds per member")
    p.add_argument("--dt", type=float, default=1e-3)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--chunk", type=int, default=None, help="chunk_size of the chunked adaptive row "
                   "(default: batch / 16, at least 1; off at batch 1)")
    p.add_argument("--mjx-max-batch", type=int, default=10**9 if gpu else 64,
                   help="MJX up to this batch (mjx 3.17 on XLA:CPU hung at batch 1024 here)")
    p.add_argument("--adaptive-max-batch", type=int, default=10**9)
    p.add_argument("--xml", default=None, help="the ant's MJCF (default: gymnasium's)")
    p.add_argument("--f32", action="store_true", help="float32 (jaxmbd and MJX); default float64")
    p.add_argument("--no-fixed", action="store_true", help="skip jaxmbd's fixed-step rows")
    p.add_argument("--no-mujoco", action="store_true", help="skip the MuJoCo CPU rows")
    p.add_argument("--mujoco-repeat", type=int, default=2, help="timed MuJoCo rollouts (best of)")
    p.add_argument("--save-ref", default=None, help="write the reference runs (and their states) to this .npz")
    p.add_argument("--ref-only", action="store_true", help="only compute (and --save-ref) the references")
    p.add_argument("--ref-file", default=None, help="read the reference runs from this .npz (--save-ref)")
    p.add_argument("--out", default=str(HERE / "results"))
    a = p.parse_args(argv)
    started = time.perf_counter()
    path = ant_path(a.xml)
    m = jaxmbd.load_mjcf(path, warn=False)
    nthread = len(os.sched_getaffinity(0))
    import mujoco
    head = machine(f", mujoco {mujoco.__version__}")
    head += [f"scene: gymnasium ant (nq={m.nq}, nv={m.nv}, nu={m.nu}, its floor, limits and motors), "
             f"{a.t1} s from randomized states 0-10 cm above rest with random constant controls in [-0.5, 0.5]",
             f"fixed step dt = {a.dt:g} ({int(round(a.t1 / a.dt))} steps) for jaxmbd, MuJoCo and MJX; "
             f"jaxmbd adaptive: RosenbrockNystrom4 rtol = atol = {a.tol:g}",
             f"MuJoCo rollout: {nthread} threads; MJX: "
             + ("in this process" if mjx_inprocess() else f"XLA:CPU subprocess (.venv-mjx), up to batch "
                f"{a.mjx_max_batch}")]
    print("\n".join(head), flush=True)
    q, v, u = initial_states(m, max(a.batches + [NREF]))
    if a.ref_file:  # computed elsewhere (float64, same seed): the states must be the same
        z = np.load(a.ref_file)
        assert float(z["t1"]) == a.t1, "reference t1 differs"
        q[:NREF], v[:NREF], u[:NREF] = z["q"], z["v"], z["u"]  # the first members are the reference's
        ref, mref = z["ref"], z["mref"]
        head.append(f"references read from {Path(a.ref_file).name} ({z['where']})")
    else:
        ref = reference_jaxmbd(m, jnp.asarray(q[:NREF]), jnp.asarray(v[:NREF]), jnp.asarray(u[:NREF]), a.t1)
        mref = mujoco_rollout(path, q[:NREF], v[:NREF], u[:NREF], a.t1, a.dt / 100, "RK4", 1, repeat=0)["q"]
        if a.save_ref:
            where = f"jaxmbd on {jax.default_backend()}, mujoco {mujoco.__version__}"
            np.savez(a.save_ref, q=q[:NREF], v=v[:NREF], u=u[:NREF], t1=a.t1, ref=ref, mref=mref, where=where)
    print(f"references done ({time.perf_counter() - started:.0f} s)", flush=True)
    if a.ref_only:
        return
    rows = []

    def report():
        dt_name = "float32" if F32 else "float64"
        lines = [f"# Throughput with contact: the gymnasium ant on its floor ({jax.default_backend()}, {dt_name})", ""]
        lines += [f"- {x}" for x in head] + [""]
        lines += ["| batch | method | rate | wall (s) | compile (s) | ok | torso err vs own reference (m) | "
                  "steps/member | batch waste |", "|---|---|---|---|---|---|---|---|---|"]
        nfix = int(round(a.t1 / a.dt))
        for B, name, x in rows:
            adaptive = "waste" in x
            rate = (f"{x['rate']:.3g} member-s/s" if adaptive else f"{x['rate']:,.0f} steps/s")
            comp = f"{x['compile']:.1f}" if "compile" in x else "–"
            steps = f"{x['accepted']:.0f}" if adaptive else f"{nfix}"
            waste = f"{x['waste']:.2f}" if adaptive else "–"
            lines.append(f"| {B} | {name} | {rate} | {x['wall']:.3f} | {comp} | {x['ok']}/{B} | {x['err']:.1e} | "
                         f"{steps} | {waste} |")
        lines += ["", "Equal-footing rate for the fixed-step rows: member-steps/s at the same step and batch. "
                  "The adaptive rows' rate is simulated member-seconds per wall second (fixed-step rows: rate x dt). "
                  "batch waste = the loop iterations the batch runs x its members / the attempts the members need "
                  "(1 = no member waits).", "",
                  f"Benchmark took {time.perf_counter() - started:.0f} s."]
        write_result(a.out, "contact_throughput" + ("_f32" if F32 else ""), "\n".join(lines) + "\n")

    def add(B, name, x):
        own = ref if name.startswith("jaxmbd") else mref
        nref = min(B, NREF)
        x["err"] = float(np.abs(x["q"][:nref, :3] - own[:nref, :3]).max())
        extra = (f", {x['accepted']:.0f} accepted steps/member, waste {x['waste']:.2f}" if "waste" in x else "")
        print(f"B={B} {name}: {x['rate']:,.4g}/s wall {x['wall']:.3f} s compile {x.get('compile', 0):.1f} s "
              f"err {x['err']:.1e} ok {x['ok']}/{B}{extra}", flush=True)
        rows.append((B, name, x))
        report()

    for B in a.batches:  # cheap rows first: partial results are written after each row
        qb, vb, ub = q[:B], v[:B], u[:B]
        qj, vj, uj = jnp.asarray(qb), jnp.asarray(vb), jnp.asarray(ub)
        for name, ig in () if a.no_fixed else (("jaxmbd semi-implicit Euler", I.SemiImplicitEuler()),
                                                ("jaxmbd RK4", I.RK4())):
            add(B, name, jaxmbd_fixed(m, ig, qj, vj, uj, a.t1, a.dt))
        for integ in () if a.no_mujoco else ("EULER", "RK4"):
            add(B, f"MuJoCo rollout {integ.capitalize() if integ == 'EULER' else integ}",
                mujoco_rollout(path, qb, vb, ub, a.t1, a.dt, integ, nthread, repeat=a.mujoco_repeat))
        if B <= a.mjx_max_batch:
            x = mjx_rollout(path, qb, vb, ub, a.t1, a.dt)
            if x is not None:
                add(B, f"MJX Euler ({x.get('dtype', '?')})", x)
        if B <= a.adaptive_max_batch:
            add(B, "jaxmbd Rosenbrock (adaptive)", jaxmbd_adaptive(m, qj, vj, uj, a.t1, a.tol))
            chunk = a.chunk or max(1, B // 16)
            if chunk < B:
                add(B, f"jaxmbd Rosenbrock, chunk_size={chunk}", jaxmbd_adaptive(m, qj, vj, uj, a.t1, a.tol, chunk))


if __name__ == "__main__":
    main()
