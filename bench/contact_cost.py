"""Where a contact scene's time goes, per batch member: the rigid-body forward dynamics
(ABA) without contacts and limits, the contacts and limits alone (``dynamics.passive_force``,
and for MuJoCo's soft constraints the soft stage's generalized force, ``dynamics.soft_stage``),
the ODE right-hand side with them, and the forward-mode Jacobians of each (the nv position
directions, then the nv velocity directions with the position held, as the implicit integrators
build them), each a lone batched call; the right-hand side and its value with Jacobians again
inside one compiled loop (what a step pays); then the cost of one RosenbrockNystrom4 attempt in
right-hand-side evaluations (its wall per attempt over a short adaptive run, divided by the
right-hand side's, lone and in-loop).

    python bench/contact_cost.py [--batch 64] [--model ant|quadruped_scene]

Writes bench/results/contact_cost_<backend>.md (or prints with --no-write)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).parent))
import jaxmbd  # noqa: E402
from jaxmbd import integrators as I  # noqa: E402
from jaxmbd.dynamics import forward_dynamics, passive_force, soft_stage  # noqa: E402
from jaxmbd.forces import soft  # noqa: E402
from jaxmbd.odes import ChartODE  # noqa: E402
from common import machine, per_call, write_result  # noqa: E402
from jaxmbd import Start, Steps


LOOP = 20      # evaluations per compiled loop (the in-loop rows)


def load(name):
    if name == "ant":
        import gymnasium
        path = Path(gymnasium.__file__).parent / "envs/mujoco/assets/ant.xml"
        return jaxmbd.load_mjcf(str(path), warn=False)
    from jaxmbd import models
    return getattr(models, f"load_{name}")()


def states(m, batch, seed=0):
    """Members near the model's q0 with random joint offsets and velocities (contacts active)."""
    rng = np.random.default_rng(seed)
    q = np.repeat(np.asarray(m.q0)[None], batch, 0)
    if m.topo.jtype[0] == "free":
        q[:, 2] -= 0.02
        q[:, 7:] += rng.normal(size=(batch, m.nq - 7)) * 0.2
    v = rng.normal(size=(batch, m.nv)) * 0.3
    return jnp.asarray(q), jnp.asarray(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--model", default="ant")
    ap.add_argument("--target", type=float, default=0.5)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    m = load(a.model)
    bare = dataclasses.replace(m, forces=None)
    q, v = states(m, a.batch)
    tau = jnp.zeros_like(v)
    B = a.batch

    def jac(f):   # forward-mode Jacobian in the 2 nv directions of (q's tangent, v), as ChartODE's:
        def g(q, v):   # the position directions, then the velocity directions with the position held
            ode = ChartODE(m, q)
            return (jax.jacfwd(lambda y: f(ode.config(y), v))(jnp.zeros(m.nv)),
                    jax.jacfwd(lambda u: f(q, u))(v))
        return g
    aba = lambda q, v: forward_dynamics(bare, q, v, tau[0])           # noqa: E731
    if soft.has_rows(m):   # MuJoCo's soft constraints: the stage's generalized force (for a_free = 0)
        pf = lambda q, v: passive_force(m, q, v) + soft_stage(m, q, v, jnp.zeros(m.nv))[0].tau  # noqa: E731
    else:
        pf = lambda q, v: passive_force(m, q, v)                      # noqa: E731
    rhs = lambda q, v: ChartODE(m, q).g(0.0, jnp.zeros(m.nv), v)      # noqa: E731
    rhs_jac = lambda q, v: ChartODE(m, q).g_and_jac(0.0, jnp.zeros(m.nv), v)  # noqa: E731
    rows = []
    timings = {}
    for name, f in [("rigid-body ABA (contacts and limits removed)", aba), ("its Jacobian", jac(aba)),
                    ("contacts + limits (passive_force; the soft stage)", pf), ("their Jacobian", jac(pf)),
                    ("ODE right-hand side with contact", rhs), ("its value and Jacobian (g_and_jac)", rhs_jac)]:
        fb = jax.jit(jax.vmap(f))
        t0 = time.perf_counter()
        jax.block_until_ready(fb(q, v))
        comp = time.perf_counter() - t0
        t = per_call(lambda: fb(q, v), a.target, 3) / B
        timings[name] = t
        rows.append((name, t, comp))
    base = timings["rigid-body ABA (contacts and limits removed)"]
    g = timings["ODE right-hand side with contact"]

    # the same two inside one compiled loop of LOOP evaluations, the state moved by each result (so no
    # work is loop-invariant): what a step inside simulate pays, without a lone call's runtime cost
    def looped(f):
        def body(_, c):
            q, v = c
            d = f(q, v)
            return q + 1e-12 * d[:, :1], v + 1e-9 * d
        return jax.jit(lambda q, v: jax.lax.fori_loop(0, LOOP, body, (q, v)))
    flat = {"ODE right-hand side with contact": jax.vmap(rhs),
            "its value and Jacobian (g_and_jac)": jax.vmap(lambda q, v: (lambda r: r[0] + r[1].sum(1) + r[2].sum(1))(
                rhs_jac(q, v)))}
    loop_rows = []
    for name, f in flat.items():
        fl = looped(f)
        jax.block_until_ready(fl(q, v))
        loop_rows.append((name, per_call(lambda: fl(q, v), a.target, 3) / B / LOOP))

    # one Rosenbrock attempt, from a short adaptive run of the batch (wall / attempts of the slowest member)
    integ = I.RosenbrockNystrom4()
    run = jax.jit(jax.vmap(lambda q0, v0: jaxmbd.simulate(m, Start(q0, v0), 0.02, integrator=integ,
                                                          steps=Steps(rtol=1e-4, atol=1e-4, max_steps=100_000))))
    t0 = time.perf_counter()
    sol = jax.block_until_ready(run(q, v))
    comp_ros = time.perf_counter() - t0
    walls = []
    for _ in range(3):          # the median of three runs: one run on a shared machine can take twice as long
        t0 = time.perf_counter()
        sol = jax.block_until_ready(run(q, v))
        walls.append(time.perf_counter() - t0)
    wall = float(np.median(walls))
    attempts = int(np.max(np.asarray(sol.stats["accepted"]) + np.asarray(sol.stats["rejected"])))
    per_attempt = wall / attempts / B
    status = np.bincount(np.asarray(sol.status), minlength=1).tolist()

    lines = [f"# Contact cost per batch member: {a.model}, batch {B}", "",
             f"`python bench/contact_cost.py --model {a.model} --batch {B}`; float64, "
             "`--xla_cpu_multi_thread_eigen=false`, XLA's default optimisation level; median of 3 timing loops "
             f"of about {a.target} s each (per member = per batched call / batch).", "",
             "| piece | per member (µs) | ratio | first call (s) |", "|---|---|---|---|"]
    pfv = timings["contacts + limits (passive_force; the soft stage)"]
    ratio_of = {"its Jacobian": f"{timings['its Jacobian'] / base:.1f}x the ABA",
                "contacts + limits (passive_force; the soft stage)": f"{pfv / base:.2f}x the ABA",
                "their Jacobian": f"{timings['their Jacobian'] / pfv:.1f}x their value",
                "ODE right-hand side with contact": f"{g / base:.2f}x the ABA",
                "its value and Jacobian (g_and_jac)":
                    f"{timings['its value and Jacobian (g_and_jac)'] / g:.1f}x the right-hand side"}
    for name, t, comp in rows:
        lines.append(f"| {name} | {t * 1e6:.1f} | {ratio_of.get(name, '1')} | {comp:.1f} |")
    gl = loop_rows[0][1]
    lines += ["", f"Inside one compiled loop of {LOOP} evaluations (each moves the state, so none is "
              "loop-invariant; what a step inside `simulate` pays, without a lone call's runtime cost):", "",
              "| piece | per member and evaluation (µs) | ratio |", "|---|---|---|"]
    lines += [f"| {name} | {t * 1e6:.1f} | {t / gl:.1f}x the right-hand side |" for name, t in loop_rows]
    lines += ["", f"RosenbrockNystrom4, rtol = atol = 1e-4, 20 ms from these states: {attempts} attempts of the "
              f"slowest member, {per_attempt * 1e6:.0f} µs per attempt and member (median of 3 runs) = "
              f"**{per_attempt / g:.1f} lone right-hand-side evaluations** ({per_attempt / gl:.1f} in-loop ones); "
              f"first call {comp_ros:.1f} s; "
              f"statuses {status}.", ""] + list(machine())
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_write:
        write_result(Path(__file__).parent / "results", f"contact_cost_{a.model}", text)


if __name__ == "__main__":
    main()
