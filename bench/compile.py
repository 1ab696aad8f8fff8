"""Compile time of jaxmbd's public entry points: trace + lower + XLA compile
of each, the way a user's first call pays it.

Each row is a fresh program: ``jax.clear_caches()`` (and a garbage
collection) before it, then ``jax.jit(f).lower(*args)`` (timed: trace +
lower) and ``.compile()`` (timed: XLA compile) at JAX's default XLA
optimisation level, float64, with ``--xla_cpu_multi_thread_eigen=false``
(as loop_cost.py; XLA_FLAGS from the environment wins).  The model and the
state arrays are arguments of the jitted function; times, tolerances and
steps are the Python numbers a user writes (``simulate`` turns them into
arrays).  The size of the lowered program (lines of
``lowered.as_text()``, StableHLO) is recorded beside the times: it is what
makes a compile slow.  Nothing is run.

The script only uses arguments that both this tree and the previous commit
know, so the same file measures an older checkout (run it from there with
``PYTHONPATH=<checkout>`` for the "before" table):

    python bench/compile.py                      # writes bench/results/compile_cpu.md
    python bench/compile.py --vehicle            # also the stiff vehicle (minutes per row)
    python bench/compile.py --only squeezer      # rows whose name contains the string
    cd <old checkout> && PYTHONPATH=. python <this checkout>/bench/compile.py --label before --out <dir>

Rows: forward dynamics (ABA, unrolled ABA, CRBA), mass matrix and inverse
dynamics on humanoid30; simulate on humanoid30 over 0.02 s with RK4
(dt0 1 ms), Dopri5, RosenbrockNystrom4 and SDIRK4 (tol 1e-6); vmap (batch 8)
and grad (w.r.t. v0) of the RK4 simulate; rollout of the RK4 simulate
(batch 8); Andrews' squeezer with RosenbrockNystrom4 (0.003 s, tol 1e-6)
and the gradient of its final crank angle w.r.t. the spring constant;
with ``--vehicle``, hmmwv14(stiffened=True) over 0.01 s at tol 1e-4
(adjoint="none", assemble_initial=False, h_max 0.05 s as vehicle.py) with
RosenbrockNystrom4, SDIRK4 and DescriptorSDIRK4.  Every other simulate
argument is its default (max_steps included, whatever the tree's default
is)."""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jaxmbd  # noqa: E402
from jaxmbd import integrators as I  # noqa: E402

from common import jaxmbd_commit, machine, write_result  # noqa: E402
from jaxmbd import Start, Steps, Solver  # noqa: E402

BATCH = 8
SPRING = "tree.forces.0.stiffness"  # the squeezer's spring constant, as rollout's model_params names it


def _field(model, name):
    """A parameter by dotted name; numbers index tuples (a model's force elements)."""
    for part in name.split("."):
        model = model[int(part)] if part.isdigit() else getattr(model, part)
    return model


def _with_field(model, name, value):
    return eqx.tree_at(lambda m: _field(m, name), model, value)


class Models:
    """Models built on first use (the vehicle only with --vehicle)."""

    def __init__(self):
        self._cache = {}

    def get(self, name):
        if name not in self._cache:
            make = {"humanoid30": jaxmbd.models.humanoid30, "squeezer": jaxmbd.models.andrews_squeezer,
                    "hmmwv14s": lambda: jaxmbd.models.hmmwv14(stiffened=True)}[name]
            self._cache[name] = make()
        return self._cache[name]


def batch_states(model, batch=BATCH, seed=0):
    rng = np.random.default_rng(seed)
    q0 = jnp.asarray(model.q0)
    dq = jnp.asarray(0.1 * rng.standard_normal((batch, model.nv)))
    q = jax.vmap(lambda d: jaxmbd.integrate_q(model, q0, d))(dq)
    v = jnp.asarray(0.1 * rng.standard_normal((batch, model.nv)))
    return q, v


def rows(models, vehicle):
    """(name, model label, target seconds or None, builder); builder() -> (f, args)."""
    hum = lambda: models.get("humanoid30")  # noqa: E731
    T_H = 0.02

    def state(m):
        return jnp.asarray(m.q0), jnp.asarray(m.v0) + 0.1, jnp.zeros(m.nv) + 0.5

    def fd(method):
        def build():
            m = hum()
            q, v, u = state(m)
            return (lambda m, q, v, u: jaxmbd.forward_dynamics(m, q, v, u, method=method)), (m, q, v, u)
        return build

    def mass_matrix():
        m = hum()
        q, _, _ = state(m)
        return (lambda m, q: jaxmbd.mass_matrix(m, q)), (m, q)

    def inverse_dynamics():
        m = hum()
        q, v, a = state(m)
        return (lambda m, q, v, a: jaxmbd.inverse_dynamics(m, q, v, a)), (m, q, v, a)

    def sim(model_name, t1, integ, **kw):
        def build():
            m = models.get(model_name)
            q, v = jnp.asarray(m.q0), jnp.asarray(m.v0)
            return (lambda m, q, v: jaxmbd.simulate(m, Start(q, v), t1, integrator=integ, **kw)), (m, q, v)
        return build

    rk4 = dict(integ=I.RK4(), steps=Steps(dt0=1e-3))
    tol6 = dict(steps=Steps(rtol=1e-6, atol=1e-6))

    def vmap_rk4():
        m = hum()
        q, v = batch_states(m)
        f = jax.vmap(lambda m, q, v: jaxmbd.simulate(m, Start(q, v), T_H, integrator=I.RK4(), steps=Steps(dt0=1e-3)),
                     in_axes=(None, 0, 0))
        return f, (m, q, v)

    def grad_rk4():
        m = hum()

        def loss(v, m, q):
            sol = jaxmbd.simulate(m, Start(q, v), T_H, integrator=I.RK4(), steps=Steps(dt0=1e-3))
            return jnp.sum(sol.qs[-1] ** 2) + jnp.sum(sol.vs[-1] ** 2)
        return jax.grad(loss), (jnp.asarray(m.v0) + 0.1, m, jnp.asarray(m.q0))

    def rollout_rk4():
        m = hum()
        q, v = batch_states(m)
        return (lambda m, q, v: jaxmbd.rollout(m, Start(q, v), T_H, integrator=I.RK4(), steps=Steps(dt0=1e-3))), (m, q, v)

    def squeezer_grad():
        m = models.get("squeezer")

        def angle(k, m):
            sol = jaxmbd.simulate(_with_field(m, SPRING, k), None, 0.003, integrator=I.RosenbrockNystrom4(),
                                  steps=Steps(rtol=1e-6, atol=1e-6))
            return sol.qs[-1, 0]
        return jax.grad(angle), (jnp.asarray(_field(m, SPRING)), m)

    H = "humanoid30"
    out = [
        ("forward_dynamics aba", H, None, fd("aba")),
        ("forward_dynamics aba_unrolled", H, None, fd("aba_unrolled")),
        ("forward_dynamics crba", H, None, fd("crba")),
        ("mass_matrix", H, None, mass_matrix),
        ("inverse_dynamics", H, None, inverse_dynamics),
        ("simulate RK4 dt0 1e-3", H, 5.0, sim(H, T_H, **rk4)),
        ("simulate Dopri5 tol 1e-6", H, None, sim(H, T_H, I.Dopri5(), **tol6)),
        ("simulate RosenbrockNystrom4 tol 1e-6", H, 5.0, sim(H, T_H, I.RosenbrockNystrom4(), **tol6)),
        ("simulate SDIRK4 tol 1e-6", H, None, sim(H, T_H, I.SDIRK4(), **tol6)),
        (f"vmap(simulate RK4), batch {BATCH}", H, None, vmap_rk4),
        ("grad(simulate RK4) w.r.t. v0", H, None, grad_rk4),
        (f"rollout RK4, batch {BATCH}", H, None, rollout_rk4),
        ("squeezer: simulate RosenbrockNystrom4 tol 1e-6", "andrews_squeezer, 0.003 s", 10.0,
         sim("squeezer", 0.003, I.RosenbrockNystrom4(), **tol6)),
        ("squeezer: grad of final crank angle w.r.t. spring_k", "andrews_squeezer, 0.003 s", 30.0, squeezer_grad),
    ]
    if vehicle:
        veh = dict(assemble_initial=False, steps=Steps(rtol=1e-4, atol=1e-4, controller=I.Controller(h_max=0.05)),
                   solver=Solver(adjoint="none"))
        for name, integ in (("RosenbrockNystrom4", I.RosenbrockNystrom4()), ("SDIRK4", I.SDIRK4()),
                            ("DescriptorSDIRK4", I.DescriptorSDIRK4())):
            out.append((f"vehicle: simulate {name} tol 1e-4", "hmmwv14(stiffened=True), 0.01 s", 30.0,
                        sim("hmmwv14s", 0.01, integ, **veh)))
    return out


def fresh():
    jax.clear_caches()
    gc.collect()


def measure(f, args, compile=True):
    fresh()
    t0 = time.perf_counter()
    lowered = jax.jit(f).lower(*args)
    t1 = time.perf_counter()
    cpu = time.process_time()
    c = lowered.compile() if compile else None
    t2 = time.perf_counter()
    cpu = time.process_time() - cpu
    lines = lowered.as_text().count("\n")
    fusions = len(re.findall(r"= \S+ fusion\(", c.as_text())) if compile else 0
    del c, lowered
    return dict(lower=t1 - t0, compile=t2 - t1, total=t2 - t0, lines=lines, cpu=cpu, fusions=fusions)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="after")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--only", default=None, help="run only rows whose name contains this string")
    ap.add_argument("--vehicle", action="store_true", help="add the stiff vehicle rows (minutes each)")
    ap.add_argument("--lines-only", action="store_true",
                    help="trace and lower only (program sizes, no XLA compile; prints, writes no file)")
    a = ap.parse_args()

    header = [f"# Compile time of the public entry points ({a.label})", ""]
    header += [f"- {x}" for x in machine()]
    header += [f"- jaxmbd source: commit {jaxmbd_commit()}",
               f"- command: python bench/compile.py {' '.join(sys.argv[1:])}",
               "- each row: jax.clear_caches(), then jax.jit(f).lower(*args) (trace + lower) and .compile() "
               "(XLA, default optimisation level); lines: of lowered.as_text() (StableHLO); XLA CPU: the "
               "compile's process CPU time (XLA compiles on several threads); fusions: the compiled "
               "program's fusion instructions (XLA:CPU compiles each to its own kernel: a measure of "
               "program size that does not depend on the machine's load, which moves the times by "
               "about 20% on this VM)", ""]
    print("\n".join(header), flush=True)

    # JAX's one-off start-up (backend, first compile), not charged to the first row
    jax.jit(lambda x: x + 1).lower(jnp.zeros(2)).compile()
    models = Models()
    todo = [r for r in rows(models, a.vehicle) if a.only is None or a.only in r[0]]
    if not todo:
        sys.exit(f"no row matches --only {a.only!r}")
    table = ["| entry point | model | trace + lower (s) | XLA compile (s) | total (s) | target (s) | "
             "lowered lines | XLA CPU (s) | fusions | load (1 min) |", "|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(table), flush=True)
    for name, model, target, build in todo:
        f, args = build()
        load = os.getloadavg()[0]
        r = measure(f, args, compile=not a.lines_only)
        tgt = "" if target is None or a.lines_only else f"≤ {target:g} ({'met' if r['total'] <= target else 'not met'})"
        line = (f"| {name} | {model} | {r['lower']:.2f} | {r['compile']:.2f} | {r['total']:.2f} | {tgt} | "
                f"{r['lines']} | {r['cpu']:.1f} | {r['fusions']} | {load:.1f} |")
        print(line, flush=True)
        table.append(line)
    fresh()
    if a.lines_only:
        return
    write_result(a.out, f"compile_{a.label}" if a.label != "after" else "compile", "\n".join(header + table) + "\n")


if __name__ == "__main__":
    main()
