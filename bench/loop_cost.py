"""What a batched run costs on the path a user takes: ``jax.vmap`` of
``jaxmbd.simulate`` with its default arguments, against the forward-only
``adjoint="none"`` loop, and the gradient of a batched loss against its
forward pass.

The default loop (``adjoint="checkpoint"``) is a checkpointed while loop that
stops when the last member is done; in older versions it was a bounded scan of
``max_steps`` (default 4096) iterations, and under vmap every member ran all of
them, masked.  The script only uses arguments that both versions know, so the
same file measures either tree (run it from a checkout of an older commit with
``PYTHONPATH=<checkout>`` for the "before" column):

    python bench/loop_cost.py                 # writes bench/results/loop_cost_cpu.md
    python bench/loop_cost.py --label before --out <dir>   # a second tree

Cases (humanoid30 unless said): RK4 at dt = 2 ms for 25 steps (a short
run: a bounded scan of max_steps wastes the most on it); Dopri5 at tol 1e-6 over 0.05 s (adaptive: members take
different step counts); RosenbrockNystrom4 at tol 1e-6 over 0.2 s on the
stiff 10-link chain and over 0.05 s on humanoid30 (implicit).  Batch 256 by
default.  Times: best of ``--repeats`` after a warm-up; compile time of the
first call separately.
Ratios, not absolute times, are the result: they are taken in one run on one
machine."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jaxmbd  # noqa: E402
from jaxmbd import integrators as I  # noqa: E402

from common import jaxmbd_commit, machine, write_result  # noqa: E402
from jaxmbd import Start, Steps, Solver  # noqa: E402


def cases():
    hum = jaxmbd.models.humanoid30()
    chain = jaxmbd.models.stiff_chain(10)
    return [
        ("humanoid30, RK4, dt 2 ms, 25 steps", hum, dict(t1=0.05, integrator=I.RK4(), steps=Steps(dt0=0.002))),
        ("humanoid30, Dopri5, tol 1e-6, 0.05 s", hum, dict(t1=0.05, integrator=I.Dopri5(),
                                                           steps=Steps(rtol=1e-6, atol=1e-6))),
        ("stiff_chain10, Rosenbrock, tol 1e-6, 0.2 s", chain,
         dict(t1=0.2, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-6, atol=1e-6))),
        ("humanoid30, Rosenbrock, tol 1e-6, 0.05 s", hum,
         dict(t1=0.05, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-6, atol=1e-6))),
    ]


def states(model, batch, seed=0):
    rng = np.random.default_rng(seed)
    q0 = jnp.asarray(model.q0)
    dq = 0.1 * rng.standard_normal((batch, model.nv))
    q = jax.vmap(lambda d: jaxmbd.integrate_q(model, q0, d))(jnp.asarray(dq))
    v = jnp.asarray(0.1 * rng.standard_normal((batch, model.nv)))
    return q, v


def timed(f, *args, repeats=3):
    t0 = time.perf_counter()
    out = jax.block_until_ready(f(*args))
    first = time.perf_counter() - t0
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t0)
    return first, best, out


def measure(name, model, kw, batch, repeats):
    q, v = states(model, batch)

    def run(adjoint):
        extra = {} if adjoint is None else {"solver": Solver(adjoint=adjoint)}
        return jax.jit(jax.vmap(lambda q, v: jaxmbd.simulate(model, Start(q, v), **kw, **extra)))

    def loss(q, v):  # a batched loss: mean final kinetic-energy-like quantity
        sol = jax.vmap(lambda q, v: jaxmbd.simulate(model, Start(q, v), **kw))(q, v)
        return jnp.mean(sol.vs[:, -1] ** 2) + jnp.mean(sol.qs[:, -1, -1])

    row = {"case": name, "batch": batch}
    c, t, sol = timed(run("none"), q, v, repeats=repeats)
    row["none"], row["none_compile"] = t, c - t
    steps = np.asarray(sol.stats["accepted"]) + np.asarray(sol.stats["rejected"])
    row["steps_sum"], row["steps_max"] = int(steps.sum()), int(steps.max())
    c, t, sol_d = timed(run(None), q, v, repeats=repeats)
    row["default"], row["default_compile"] = t, c - t
    row["equal"] = float(np.max(np.abs(np.asarray(sol_d.qs) - np.asarray(sol.qs))))
    row["status"] = sorted(set(np.asarray(sol_d.status).tolist()))
    g = jax.jit(jax.grad(loss, argnums=1))
    c, t, gv = timed(g, q, v, repeats=repeats)
    row["grad"], row["grad_compile"] = t, c - t
    row["grad_finite"] = bool(np.all(np.isfinite(np.asarray(gv))))
    # every step stored for the reverse pass (checkpoints = max_steps = the steps the slowest member needs):
    # no recomputation, memory O(steps); only trees that know the `checkpoints` argument
    if _knows_checkpoints():
        n = row["steps_max"]

        def loss_all(q, v):
            many = dict(kw, steps=dataclasses.replace(kw["steps"], max_steps=n))
            sol = jax.vmap(lambda q, v: jaxmbd.simulate(model, Start(q, v), solver=Solver(checkpoints=n),
                                                        **many))(q, v)
            return jnp.mean(sol.vs[:, -1] ** 2) + jnp.mean(sol.qs[:, -1, -1])
        c, t, gv2 = timed(jax.jit(jax.grad(loss_all, argnums=1)), q, v, repeats=repeats)
        row["grad_all"], row["grad_all_compile"] = t, c - t
        row["grad_all_equal"] = float(np.max(np.abs(np.asarray(gv2) - np.asarray(gv))))
    return row


def _knows_checkpoints():
    return any(hasattr(sys.modules.get(name), "DEFAULT_CHECKPOINTS") for name in ("jaxmbd.simulate", "jaxmbd.options"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--label", default="after")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--only", type=int, action="append", default=None,
                    help="run only case number N (0-based); repeat for several")
    a = ap.parse_args()
    rows = []
    for i, (name, model, kw) in enumerate(cases()):
        if a.only is not None and i not in a.only:
            continue
        r = measure(name, model, kw, a.batch, a.repeats)
        print(r, flush=True)
        rows.append(r)
        write_table(rows, a.label, a.out)  # after every case: a run cut short keeps what it measured


def write_table(rows, label, out, header=None):
    lines = [f"# Batched loop cost ({label}): jax.vmap(simulate) with default arguments", ""]
    lines += [f"- {x}" for x in (header or machine())]
    lines += [f"- jaxmbd source: commit {jaxmbd_commit()}", ""]
    lines += ["| case | batch | steps (sum over members; max) | adjoint='none' (s) | default (s) | default / none | "
              "grad of batched loss (s) | grad / default | compile none / default / grad (s) | "
              "max abs(q_default - q_none) | grad finite | grad, every step stored (s) | its / default | "
              "compile (s) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['batch']} | {r['steps_sum']}; {r['steps_max']} | {r['none']:.3f} | "
                     f"{r['default']:.3f} | {r['default'] / r['none']:.2f} | {r['grad']:.3f} | "
                     f"{r['grad'] / r['default']:.2f} | {r['none_compile']:.1f} / {r['default_compile']:.1f} / "
                     f"{r['grad_compile']:.1f} | {r['equal']:.1e} | {r['grad_finite']} | "
                     + (f"{r['grad_all']:.3f} | {r['grad_all'] / r['default']:.2f} | {r['grad_all_compile']:.1f} |"
                        if "grad_all" in r else "– | – | – |"))
    write_result(out, f"loop_cost_{label}" if label != "after" else "loop_cost", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
