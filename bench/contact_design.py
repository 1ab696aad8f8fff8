"""A design optimization through contact: the hopping leg of jaxmbd.design.

The hopper (``design.hopper``: a 2 kg body on a vertical slide, a 0.2 kg
sphere foot on a sprung, damped slide below it, a compliant floor) is dropped
with its foot 0.37 m above the floor; the design is the leg's spring constant
k (N/m) and damping c (N s/m), optimized in log(k), log(c) so that the centre
of mass bounces back to a target apex height (``design.apex_height``: adaptive
RosenbrockNystrom4, tol 1e-8).  ``design.optimize`` runs ``optax.polyak_sgd``
on |apex - target| (the minimum-norm Newton step for one equation in two
unknowns, shortened by max_learning_rate 3 while the miss is large) in one
compiled scan.  Checks: the optimizer's first gradient against central
differences of tol-1e-11 Dopri5 runs, and the optimized design's apex by
three independent forward simulations (Dopri5 at 1e-11 saved every
millisecond, also its highest saved point refined by the parabola through
its neighbours; SDIRK4 at 1e-10; fixed-step RK4 at 1e-5 s), each with its
wall (best of 2) and compile time.  Writes
bench/results/contact_design_<backend>.md.

    .venv/bin/python bench/contact_design.py [--target 0.55] [--steps 7] [--out bench/results]"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax._src import monitoring

import jaxmbd
from jaxmbd import design
from jaxmbd import integrators as I
from jaxmbd import Start, Steps, Save

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import compiled, machine, write_result  # noqa: E402

K0, C0 = 400.0, 8.0
T1 = 0.75
DENSE = jnp.linspace(0.0, T1, 751)

_compile_seconds = [0.0]


def _listener(event, duration, **kw):
    """Trace, lowering and backend-compile seconds, summed (jax's monitoring events)."""
    if event.rsplit("/", 1)[-1] in ("jaxpr_trace_duration", "jaxpr_to_mlir_module_duration",
                                    "backend_compile_duration"):
        _compile_seconds[0] += duration


def best_of_2(c, *args):
    """(output, best-of-2 wall of the compiled c)."""
    walls = []
    for _ in range(2):
        t0 = time.perf_counter()
        out = jax.block_until_ready(c(*args))
        walls.append(time.perf_counter() - t0)
    return out, min(walls)


def timed(f, *args):
    """(output, best-of-2 wall of the compiled f, compile seconds)."""
    comp, c = compiled(f, *args)
    return (*best_of_2(c, *args), comp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", type=float, default=0.55)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--out", default=str(HERE / "results"))
    a = ap.parse_args()
    started = time.perf_counter()
    monitoring.register_event_duration_secs_listener(_listener)
    base = design.hopper()
    t_touch = float(design.hopper_touchdown_time(base))

    def model(theta):
        k, c = jnp.exp(theta)
        return design.hopper_design(k, c, base)

    def ros_apex(theta, tol):
        return design.apex_height(model(theta), T1, rtol=tol)

    def dense(theta, tol):
        m = model(theta)
        obs = lambda m, q, v: (design.ballistic_apex(m, q, v), design.center_of_mass(m, q, v)[0][2])  # noqa: E731
        sol = jaxmbd.simulate(m, Start(m.q0, m.v0), T1, integrator=I.Dopri5(),
                              steps=Steps(rtol=tol, atol=tol, max_steps=100_000),
                              save=Save(ts=DENSE, observe=obs, states=False))
        return sol.obs, sol.status, sol.stats["accepted"]

    after = np.asarray(DENSE) >= t_touch

    def dense_apex(out):
        (e, z), status, steps = out
        e, z = np.asarray(e), np.asarray(z)
        i = int(np.argmax(np.where(after, z, -np.inf)))
        y0, y1, y2 = z[i - 1:i + 2]
        return float(np.max(e[after])), y1 - (y0 - y2) ** 2 / (8 * (y0 - 2 * y1 + y2)), int(status), int(steps)

    theta0 = jnp.log(jnp.array([K0, C0]))
    (apex0, st0), fw0, fc0 = timed(ros_apex, theta0, 1e-8)

    def loss(theta):
        apex, _ = design.apex_height(model(theta), T1, rtol=1e-8)
        return jnp.abs(apex - a.target)

    _compile_seconds[0] = 0.0
    t0 = time.perf_counter()
    res = design.optimize(loss, theta0, optax.polyak_sgd(max_learning_rate=3.0), steps=a.steps)
    jax.block_until_ready(res)
    opt_wall = time.perf_counter() - t0
    opt_compile = _compile_seconds[0]
    k, c = np.exp(np.asarray(res.params))

    # the gradient at the start: the optimizer's first, against central differences of Dopri5 runs
    dense_compile, f_dense = compiled(dense, theta0, 1e-11)
    sign = np.sign(float(apex0) - a.target)
    g = sign * np.asarray(res.grad0)
    fds = {}
    for eps in (1e-3, 1e-4):
        fds[eps] = np.array([(dense_apex(f_dense(theta0.at[i].add(eps), 1e-11))[0]
                              - dense_apex(f_dense(theta0.at[i].add(-eps), 1e-11))[0]) / (2 * eps) for i in range(2)])
    grad_err = np.abs(g - fds[1e-3]) / np.abs(fds[1e-3])

    # the optimized design by independent forward simulations
    rows = []
    out, w = best_of_2(f_dense, res.params, 1e-11)
    ballistic, highest, st, steps = dense_apex(out)
    rows.append(("Dopri5, ballistic apex", "tol 1e-11", st, steps, ballistic, w, dense_compile))
    rows.append(("Dopri5, highest saved point (1 ms) + parabola", "tol 1e-11", st, steps, highest, w,
                 dense_compile))
    for name, step, integ, kw in (("SDIRK4", "tol 1e-10", I.SDIRK4(), dict(steps=Steps(rtol=1e-10))),
                                  ("RK4", "dt 1e-5 s", I.RK4(), dict(steps=Steps(dt0=1e-5, max_steps=100_000)))):
        def fwd(theta, integ=integ, kw=kw):
            return design.apex_height(model(theta), T1, integrator=integ, **kw)
        (apex, st), w, cmp = timed(fwd, res.params)
        rows.append((name + ", ballistic apex", step, int(st), "-", float(apex), w, cmp))
    (apex_ros, _), _, _ = timed(ros_apex, res.params, 1e-8)

    try:
        git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, cwd=HERE).stdout.strip()  # noqa: E731
        commit = git("rev-parse", "--short", "HEAD")
        if git("status", "--porcelain", "--", str(HERE.parent / "jaxmbd"), str(Path(__file__).resolve())):
            commit += " (with uncommitted changes to jaxmbd/ or this script)"
    except OSError:
        commit = "unknown"
    doc = " ".join(__doc__.split("\n\n")[1].split())
    lines = ["# A design optimization through contact: the hopping leg (cpu)", "",
             f"Recorded at commit {commit}. {doc}", ""]
    lines += [f"- {x}" for x in machine()] + [""]
    lines += ["## Optimization", "",
              f"- start: k = {K0:g} N/m, c = {C0:g} N s/m: apex {float(apex0):.6f} m (status "
              f"{jaxmbd.status_name(st0)}), target {a.target} m: a miss of {abs(float(apex0) - a.target):.3f} m "
              f"(one Rosenbrock forward run: {fw0:.2f} s, compile {fc0:.1f} s)",
              f"- optimizer: optax.polyak_sgd(max_learning_rate=3) on |apex - target|, {a.steps} steps in one "
              f"design.optimize call: wall {opt_wall:.1f} s, of which trace/lower/compile {opt_compile:.1f} s "
              f"(so about {(opt_wall - opt_compile) / (a.steps + 1):.1f} s per value-and-gradient evaluation)",
              "- |apex - target| before each step (m): " + ", ".join(f"{x:.2e}" for x in np.asarray(res.history))
              + f"; after the last: {float(res.loss):.2e}",
              f"- optimized design: k = {k:.4f} N/m, c = {c:.5f} N s/m (apex by the optimizer's own tol-1e-8 "
              f"Rosenbrock run: {float(apex_ros):.10f} m)", "",
              "## Gradient at the start", "",
              "| | d apex / d log k (m) | d apex / d log c (m) |", "|---|---|---|",
              f"| jax.grad through adaptive Rosenbrock, tol 1e-8 (optimizer's first gradient) | {g[0]:.9f} | "
              f"{g[1]:.9f} |",
              f"| central differences, Dopri5 tol 1e-11, eps 1e-3 | {fds[1e-3][0]:.9f} | {fds[1e-3][1]:.9f} |",
              f"| central differences, Dopri5 tol 1e-11, eps 1e-4 | {fds[1e-4][0]:.9f} | {fds[1e-4][1]:.9f} |",
              f"| relative error of jax.grad (against eps 1e-3) | {grad_err[0]:.1e} | {grad_err[1]:.1e} |", "",
              "## Independent check of the optimized design", "",
              "| simulation | tol / step | status | accepted steps | apex (m) | apex - target (m) | wall (s) "
              "| compile (s) |", "|---|---|---|---|---|---|---|---|"]
    for name, step, st, steps, apex, w, cmp in rows:
        lines.append(f"| {name} | {step} | {jaxmbd.status_name(st)} | {steps} | {apex:.10f} | "
                     f"{apex - a.target:+.1e} | {w:.2f} | {cmp:.1f} |")
    lines += ["", f"Benchmark took {time.perf_counter() - started:.0f} s."]
    print("\n".join(lines))
    write_result(a.out, "contact_design", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
