"""Integrators on the thesis's stiff problems, against diffrax and scipy, in one run.

Problems: ``stiff_double_pendulum`` (T = 2 s) and ``stiff_chain(10)`` (T = 1 s),
from the models' own initial states, tolerances (rtol = atol) 1e-2 .. 1e-5.
Methods: jaxmbd's RosenbrockNystrom4 (filtered and raw estimate), SDIRK4,
Trapezoidal and Dopri5 through ``jaxmbd.simulate``; diffrax's Kvaerno5 with a
PID controller, and scipy's Radau, on the same first-order ODE (q, v)' = (v,
forward_dynamics(q, v, 0)) (both models have only revolute joints, so q' = v).

For each: accepted steps, RHS evaluations, Jacobians, LU factorizations,
wall time per run (jit-compiled, after a warm-up call; scipy calls a jitted
RHS and Jacobian per evaluation) and the max error of the first joint angle
at the end time against scipy Radau at rtol = atol = 1e-11.  Writes
``<out>/integrators_<backend>.md``.

    python bench/integrators.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd  # noqa: F401  (float64)
from jaxmbd import integrators as I
from jaxmbd import models, simulate
from common import machine
from jaxmbd import Steps

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = {"stiff_double_pendulum": (models.stiff_double_pendulum, 2.0),
            "stiff_chain10": (lambda: models.stiff_chain(10), 1.0)}
TOLS = (1e-2, 1e-3, 1e-4, 1e-5)
METHODS = {"RosenbrockNystrom4": I.RosenbrockNystrom4(), "RosenbrockNystrom4 (raw est.)":
           I.RosenbrockNystrom4(filtered=False),
           "RosenbrockNystrom4 (sparse Π)": I.RosenbrockNystrom4(linear_solver="sparse"),
           "RosenbrockNystrom4 (FD Jacobian)": I.RosenbrockNystrom4(jacobian="fd"),
           "SDIRK4": I.SDIRK4(), "Trapezoidal": I.Trapezoidal(), "Dopri5": I.Dopri5()}
MAX_STEPS = {"Dopri5": 400_000}


def first_order(model):
    nv = model.nv

    def f(x):
        return jnp.concatenate([x[nv:], jaxmbd.forward_dynamics(model, x[:nv], x[nv:], jnp.zeros(nv, x.dtype))])
    return f


def timed(fn, repeats):
    fn()  # warm-up (compile)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return out, min(ts)


def run_jaxmbd(model, T, method, tol, max_steps, repeats):
    f = jax.jit(lambda m, r: simulate(m, t1=T, integrator=method, steps=Steps(rtol=r, atol=r, max_steps=max_steps)))
    sol, wall = timed(lambda: jax.block_until_ready(f(model, jnp.asarray(tol))), repeats)
    st = {k: int(v) for k, v in sol.stats.items()}
    return dict(status=jaxmbd.status_name(sol.status), accepted=st["accepted"], rejected=st["rejected"],
                rhs=st["rhs_evals"], jac=st["jacobian_evals"], lu=st["lu_factorizations"], wall=wall,
                theta=float(sol.qs[-1, 0]))


def run_diffrax(model, T, tol, repeats):
    import diffrax
    f = first_order(model)
    x0 = jnp.concatenate([model.q0, model.v0])

    @jax.jit
    def solve(r):
        return diffrax.diffeqsolve(diffrax.ODETerm(lambda t, x, a: f(x)), diffrax.Kvaerno5(), 0.0, T, None, x0,
                                   stepsize_controller=diffrax.PIDController(rtol=r, atol=r), max_steps=100_000)
    sol, wall = timed(lambda: jax.block_until_ready(solve(jnp.asarray(tol))), repeats)
    s = sol.stats
    return dict(status="success" if int(sol.result._value) == 0 else str(sol.result), accepted=int(s["num_accepted_steps"]),
                rejected=int(s["num_rejected_steps"]), rhs=-1, jac=-1, lu=-1, wall=wall, theta=float(sol.ys[-1, 0]))


def run_radau(model, T, tol, repeats=1):
    from scipy.integrate import solve_ivp
    f = first_order(model)
    fj, jj = jax.jit(f), jax.jit(jax.jacfwd(f))
    x0 = np.concatenate([model.q0, model.v0])
    call = lambda: solve_ivp(lambda t, x: np.asarray(fj(x)), (0.0, T), x0, method="Radau", rtol=tol, atol=tol,
                             jac=lambda t, x: np.asarray(jj(x)))
    r, wall = timed(call, repeats)
    return dict(status="success" if r.status == 0 else r.message, accepted=int(r.t.size - 1), rejected=-1,
                rhs=int(r.nfev), jac=int(r.njev), lu=int(r.nlu), wall=wall, theta=float(r.y[0, -1]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="stiff_double_pendulum only, tol 1e-3, no Dopri5")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args(argv)
    probs = {"stiff_double_pendulum": PROBLEMS["stiff_double_pendulum"]} if args.quick else PROBLEMS
    tols = (1e-3,) if args.quick else TOLS
    methods = {k: v for k, v in METHODS.items() if not (args.quick and k == "Dopri5")}
    desc = machine()
    print("\n".join(desc), flush=True)
    t_start = time.perf_counter()
    rows, targets = [], []
    for pname, (mk, T) in probs.items():
        model = mk()
        ref = run_radau(model, T, 1e-11)["theta"]
        for tol in tols:
            res = {}
            for mname, method in methods.items():
                res[mname] = run_jaxmbd(model, T, method, tol, MAX_STEPS.get(mname, 20_000), 1 if mname == "Dopri5" else 3)
            res["diffrax Kvaerno5 (PID)"] = run_diffrax(model, T, tol, 3)
            res["scipy Radau"] = run_radau(model, T, tol)
            for mname, r in res.items():
                r.update(problem=pname, tol=tol, method=mname, err=abs(r["theta"] - ref))
                rows.append(r)
                print(f"{pname:22s} tol {tol:.0e} {mname:30s} {r['status']:10s} acc {r['accepted']:7d} rej {r['rejected']:5d} "
                      f"rhs {r['rhs']:8d} jac {r['jac']:6d} wall {r['wall'] * 1e3:10.2f} ms  err {r['err']:.1e}", flush=True)
            ros = res["RosenbrockNystrom4"]["wall"]
            if pname == "stiff_chain10" and tol == 1e-3 and "Dopri5" in res:
                targets.append(f"- stiff_chain10, tol 1e-3: Dopri5 / RosenbrockNystrom4 wall time = "
                               f"{res['Dopri5']['wall'] / ros:.0f}x (target >= 100x)")
            if tol in (1e-3, 1e-5):
                targets.append(f"- {pname}, tol {tol:.0e}: diffrax Kvaerno5 / RosenbrockNystrom4 wall time = "
                               f"{res['diffrax Kvaerno5 (PID)']['wall'] / ros:.2f}x (target > 1)")
    head = "| problem | tol | method | status | accepted | rejected | RHS evals | Jacobians | LU | wall (ms) | error θ1(T) |"
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['problem']} | {r['tol']:.0e} | {r['method']} | {r['status']} | {r['accepted']} | "
                     f"{r['rejected'] if r['rejected'] >= 0 else '-'} | {r['rhs'] if r['rhs'] >= 0 else '-'} | "
                     f"{r['jac'] if r['jac'] >= 0 else '-'} | {r['lu'] if r['lu'] >= 0 else '-'} | "
                     f"{r['wall'] * 1e3:.2f} | {r['err']:.1e} |")
    text = "\n".join([f"# Integrators on stiff problems ({jax.default_backend()})", ""] + [f"- {d}" for d in desc]
                     + [f"- mode: {'quick' if args.quick else 'full'}; wall = best of 3 runs after a warm-up "
                        f"(Dopri5: 1 run); benchmark took {time.perf_counter() - t_start:.0f} s",
                        "- error: |θ1(T) - reference| with the reference from scipy Radau at rtol = atol = 1e-11",
                        "", *lines, "", "Targets:", "", *targets, ""])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"integrators_{jax.default_backend()}.md"
    path.write_text(text)
    print("\n" + text + f"\nwritten to {path}")


if __name__ == "__main__":
    main()
