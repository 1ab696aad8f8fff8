"""Gradients through contact: the cube toss.

A cube (1 kg, 0.2 m, the tumbling box of tests/test_contact.py: four-corner
stiffness 1e5 N/m, Hunt-Crossley damping 100 s/m, friction 0.5) is thrown
tumbling onto the floor; the loss is its x position at t = 0.6 s, the
parameter its initial velocity vx (0.8 m/s).  Per method: the loss, d loss /
d vx by ``jax.grad`` through the run, its error against central differences
(eps 1e-4) of tol-1e-10 Rosenbrock runs (checked against eps 1e-5), and the
compiled forward and gradient walls (best of 2) with their compile times.
The adaptive runs hold their step sizes fixed for the gradient (the step
controller is not differentiated, as in diffrax); fixed-step RK4 and
semi-implicit Euler differentiate every step.

Batched: the gymnasium ant of bench/contact_throughput.py (its floor, joint
limits and motors; 64 members from that bench's random states near the floor,
each with its constant control); the loss is the members' mean torso x at
t = 0.05 s, the parameters all members' initial velocities (64 x 14).  Per
method, through ``jaxmbd.rollout`` with its defaults (the
checkpointed adjoint): the compiled forward and ``jax.grad`` walls (best of
2), their ratio and compile times, and the gradient's check: its product with
a random direction w against the central difference of the loss along w
(eps 1e-6).  Writes bench/results/contact_gradients_<backend>.md.

    .venv/bin/python bench/contact_gradients.py [--out bench/results] [--parts cube ant]"""

from __future__ import annotations

import argparse
import sys
import time
import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import Start, Steps

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import machine, write_result  # noqa: E402
from contact import box_scene  # noqa: E402
from contact_throughput import ant_path, initial_states  # noqa: E402

VX = 0.8
METHODS = [("RosenbrockNystrom4", "tol 1e-6", I.RosenbrockNystrom4(), dict(steps=Steps(rtol=1e-6, atol=1e-6))),
           ("SDIRK4", "tol 1e-6", I.SDIRK4(), dict(steps=Steps(rtol=1e-6, atol=1e-6))),
           ("RK4", "dt 1e-3", I.RK4(), dict(steps=Steps(dt0=1e-3))),
           ("RK4", "dt 3e-5", I.RK4(), dict(steps=Steps(dt0=3e-5))),
           ("SemiImplicitEuler", "dt 1e-3", I.SemiImplicitEuler(), dict(steps=Steps(dt0=1e-3))),
           ("SemiImplicitEuler", "dt 3e-5", I.SemiImplicitEuler(), dict(steps=Steps(dt0=3e-5)))]


def loss_fn(m, q0, v0, t1, integrator, kw):
    def loss(vx):
        sol = jaxmbd.simulate(m, Start(q0, v0.at[0].set(vx)), t1, integrator=integrator,
                              steps=dataclasses.replace(kw["steps"], max_steps=40_000))
        return sol.qs[-1, 0], sol.status
    return loss


def timed(f, x):
    t0 = time.perf_counter()
    c = jax.jit(f).lower(x).compile()
    comp = time.perf_counter() - t0
    walls = []
    for _ in range(2):
        t0 = time.perf_counter()
        out = jax.block_until_ready(c(x))
        walls.append(time.perf_counter() - t0)
    return out, min(walls), comp, c


ANT_BATCH, ANT_T1 = 64, 0.05
ANT_METHODS = [("SemiImplicitEuler", "dt 1e-3", I.SemiImplicitEuler(), Steps(dt0=1e-3)),
               ("RK4", "dt 1e-3", I.RK4(), Steps(dt0=1e-3)),
               ("RosenbrockNystrom4", "tol 1e-4", I.RosenbrockNystrom4(), Steps(rtol=1e-4, atol=1e-4))]


def ant_rows():
    """The batched table (module docstring)."""
    m = jaxmbd.load_mjcf(ant_path())
    q, v, u = (jnp.asarray(x) for x in initial_states(m, ANT_BATCH))
    w = jax.random.normal(jax.random.key(0), v.shape, v.dtype)
    lines = [f"Batched: the ant, {ANT_BATCH} members, loss = mean torso x at t = {ANT_T1} s, gradient with "
             "respect to every member's initial velocity.", "",
             "| method | step | statuses ok | forward wall (s) | grad wall (s) | grad / forward | forward compile (s) "
             "| grad compile (s) | <grad, w> against central difference (rel.) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, step, ig, steps in ANT_METHODS:
        def loss(v, ig=ig, steps=steps):
            sol = jaxmbd.rollout(m, Start(q, v), ANT_T1, integrator=ig, inputs=jaxmbd.Inputs(ctrl=u), steps=steps,
                                 save=jaxmbd.Save(ts=jnp.array([ANT_T1])))
            return jnp.mean(sol.qs[:, -1, 0]), sol.status
        (x, st), fw, fc, f = timed(loss, v)
        g, gw, gc, _ = timed(jax.grad(lambda v: loss(v)[0]), v)
        eps = 1e-6      # the central difference reuses the timed forward program
        cd = (float(f(v + eps * w)[0]) - float(f(v - eps * w)[0])) / (2 * eps)
        gw_dot = float(jnp.vdot(g, w))
        lines.append(f"| {name} | {step} | {int((st == 0).sum())}/{ANT_BATCH} | {fw:.3f} | {gw:.3f} | {gw / fw:.1f} | "
                     f"{fc:.1f} | {gc:.1f} | {abs(gw_dot - cd) / abs(cd):.1e} |")
        print(lines[-1], flush=True)
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--parts", nargs="+", default=["cube", "ant"], choices=["cube", "ant"])
    a = ap.parse_args()
    started = time.perf_counter()
    head = ["# Gradients through contact: the cube toss and the batched ant (cpu)", "",
            __doc__.split("\n\n")[1].replace("\n", " "), "", __doc__.split("\n\n")[2].replace("\n", " "), ""]
    head += [f"- {x}" for x in machine()] + [""]
    lines = head + (cube_rows() if "cube" in a.parts else []) + (ant_rows() if "ant" in a.parts else [])
    lines += ["", f"Benchmark took {time.perf_counter() - started:.0f} s."]
    write_result(a.out, "contact_gradients", "\n".join(lines) + "\n")


def cube_rows():
    """The cube toss's table (module docstring)."""
    m, q0, v0, t1 = box_scene()
    ref = loss_fn(m, q0, v0, t1, I.RosenbrockNystrom4(), dict(steps=Steps(rtol=1e-10, atol=1e-10)))
    f_ref = jax.jit(lambda x: ref(x)[0])
    L = float(f_ref(VX))
    cds = {eps: (float(f_ref(VX + eps)) - float(f_ref(VX - eps))) / (2 * eps) for eps in (1e-4, 1e-5)}
    g_ref = cds[1e-4]
    lines = [f"Reference (tol-1e-10 Rosenbrock): loss x(0.6 s) = {L:.9f} m; central differences d x / d vx = "
              f"{g_ref:.9f} (eps 1e-4), {cds[1e-5]:.9f} (eps 1e-5): they agree to "
              f"{abs(cds[1e-4] - cds[1e-5]) / abs(g_ref):.1e} relative.", ""]
    lines += ["| method | step | status | loss x (m) | loss error | jax.grad | gradient rel. error | forward wall (s) "
              "| forward compile (s) | grad wall (s) | grad compile (s) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, step, ig, kw in METHODS:
        loss = loss_fn(m, q0, v0, t1, ig, kw)
        (x, st), fw, fc, _ = timed(loss, jnp.asarray(VX))
        g, gw, gc, _ = timed(jax.grad(lambda v: loss(v)[0]), jnp.asarray(VX))
        err = abs(float(g) - g_ref) / abs(g_ref)
        lines.append(f"| {name} | {step} | {jaxmbd.status_name(st)} | {float(x):.6f} | {abs(float(x) - L):.1e} | "
                     f"{float(g):.6f} | {err:.1e} | {fw:.3f} | {fc:.1f} | {gw:.3f} | {gc:.1f} |")
        print(lines[-1], flush=True)
    return lines + [""]


if __name__ == "__main__":
    main()
