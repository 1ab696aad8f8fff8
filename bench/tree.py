"""Time jaxmbd's tree algorithms, and MuJoCo on the same mechanisms, in one run.

For each model and algorithm: the jit compile time (``jax.jit(f).lower(...)
.compile()``), the time of one call (batch 1) and of one vmapped call over a
batch, and MuJoCo's single-threaded time for the same quantity.  Writes a
markdown table with the machine description to ``<out>/tree_<backend>.md``
and prints it.  See bench/README.md for the meaning of each column.

    python bench/tree.py [--quick] [--out DIR]
"""

from __future__ import annotations

import os

# OpenBLAS (the LAPACK behind JAX's CPU Cholesky) spins its own threads; on a
# small, busy machine that made a 200x200 cho_factor 10-20x slower.  One thread
# gives stable numbers; set OPENBLAS_NUM_THREADS yourself to override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402
from common import compiled, machine as _machine, per_call, write_result  # noqa: E402
from jaxmbd import models  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from mjcf_util import builder_to_mjcf, depth_first  # noqa: E402

import mujoco  # noqa: E402

# name -> (builder, batch size of the vmapped timing)
MODELS = {
    "humanoid30": (models.humanoid30_builder, 1024),
    "chain30": (lambda: models.chain_builder(30), 1024),
    "binary_tree6": (lambda: models.binary_tree_builder(6), 1024),
    "chain200": (lambda: models.chain_builder(200), 256),
}
QUICK_MODELS = ("humanoid30",)
QUICK_BATCH_DIV = 4  # --quick runs the vmapped timing at a quarter of the batch size


def _mj_fk(m, d, out):
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    mujoco.mj_comVel(m, d)


def _mj_rnea(m, d, out):
    _mj_fk(m, d, out)
    mujoco.mj_rne(m, d, 1, out)


def _mj_crba(m, d, out):
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    mujoco.mj_crb(m, d)


def _mj_forward(m, d, out):
    mujoco.mj_forward(m, d)


# name -> (jaxmbd function of (model, q, v, u), MuJoCo peer of (m, d, out), what the peer calls)
# u is the joint acceleration for RNEA and the joint force for forward dynamics.
ALGORITHMS = {
    "FK": (lambda mdl, q, v, u: jaxmbd.forward_kinematics(mdl, q, v), _mj_fk,
           "mj_kinematics + mj_comPos + mj_comVel"),
    "RNEA": (lambda mdl, q, v, u: jaxmbd.inverse_dynamics(mdl, q, v, u), _mj_rnea,
             "mj_kinematics + mj_comPos + mj_comVel + mj_rne"),
    "CRBA": (lambda mdl, q, v, u: jaxmbd.mass_matrix(mdl, q), _mj_crba,
             "mj_kinematics + mj_comPos + mj_crb (sparse H)"),
    "FD-ABA": (lambda mdl, q, v, u: jaxmbd.forward_dynamics(mdl, q, v, u, method="aba"), _mj_forward,
               "mj_forward (CRBA + sparse LDL', contacts off)"),
    "FD-CRBA": (lambda mdl, q, v, u: jaxmbd.forward_dynamics(mdl, q, v, u, method="crba"), _mj_forward,
                "mj_forward (CRBA + sparse LDL', contacts off)"),
}




def states(model, rng, batch=None):
    shape = () if batch is None else (batch,)
    q = jnp.asarray(np.asarray(jaxmbd.neutral_q(model)) + 0.7 * rng.normal(size=shape + (model.nq,)))
    q = (jax.vmap(jaxmbd.normalize_q, (None, 0)) if batch else jaxmbd.normalize_q)(model, q)
    return q, jnp.asarray(rng.normal(size=shape + (model.nv,))), jnp.asarray(rng.normal(size=shape + (model.nv,)))


def bench_model(name, builder, batch, algs, target, repeats):
    b = depth_first(builder)  # MuJoCo's DoF order, so states pass unchanged
    model = b.build()
    mj = mujoco.MjModel.from_xml_string(builder_to_mjcf(b))
    assert (mj.nq, mj.nv) == (model.nq, model.nv)
    rng = np.random.default_rng(0)
    q1, v1, u1 = states(model, rng)
    qB, vB, uB = states(model, rng, batch)
    d = mujoco.MjData(mj)
    out = np.zeros(mj.nv)
    rows = []
    for alg in algs:
        f, mj_fn, _ = ALGORITHMS[alg]
        t_c1, f1 = compiled(f, model, q1, v1, u1)
        t_cB, fB = compiled(jax.vmap(f, in_axes=(None, 0, 0, 0)), model, qB, vB, uB)
        t1 = per_call(lambda: f1(model, q1, v1, u1), target, repeats)
        tB = per_call(lambda: fB(model, qB, vB, uB), target, repeats)
        d.qpos[:], d.qvel[:] = np.asarray(q1), np.asarray(v1)
        d.qacc[:] = d.qfrc_applied[:] = np.asarray(u1)
        t_mj = per_call(lambda: mj_fn(mj, d, out), target, repeats, sync=id)  # synchronous C calls
        rows.append(dict(model=name, alg=alg, compile1=t_c1, compileB=t_cB, t1=t1, batch=batch,
                         tB=tB / batch, mj=t_mj))
        print(f"  {name:13s} {alg:8s} compile {t_c1:5.2f}/{t_cB:5.2f} s  "
              f"1: {t1 * 1e6:8.1f} us  {batch}: {tB / batch * 1e6:7.2f} us/eval  mujoco {t_mj * 1e6:7.2f} us",
              flush=True)
    return model, rows



def machine():
    return _machine(f", mujoco {mujoco.__version__} (single-threaded calls from Python)")


def table(rows):
    head = ("| model | algorithm | compile B=1 (s) | compile B=N (s) | B=1 (µs) | N | B=N (µs/eval) "
            "| jaxmbd evals/s | MuJoCo (µs) | MuJoCo evals/s | ratio |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['alg']} | {r['compile1']:.2f} | {r['compileB']:.2f} | {r['t1'] * 1e6:.1f} "
            f"| {r['batch']} | {r['tB'] * 1e6:.2f} | {1 / r['tB']:,.0f} | {r['mj'] * 1e6:.2f} "
            f"| {1 / r['mj']:,.0f} | {r['mj'] / r['tB']:.2f} |")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"only {', '.join(QUICK_MODELS)}, batch / {QUICK_BATCH_DIV}, shorter timings")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output directory (default bench/results)")
    p.add_argument("--models", nargs="+", choices=sorted(MODELS), help="models to run (default: all)")
    p.add_argument("--algorithms", nargs="+", choices=list(ALGORITHMS), default=list(ALGORITHMS))
    args = p.parse_args(argv)
    names = args.models or (QUICK_MODELS if args.quick else list(MODELS))
    target, repeats = (0.01, 3) if args.quick else (0.05, 5)
    div = QUICK_BATCH_DIV if args.quick else 1

    desc = machine()
    print("\n".join(desc), flush=True)
    compiled(lambda m, q: jaxmbd.forward_kinematics(m, q), models.chain(2), jnp.zeros(2))  # JAX's one-off start-up
    t0 = time.perf_counter()
    rows, summaries = [], []
    for name in names:
        builder, batch = MODELS[name]
        model, r = bench_model(name, builder(), batch // div, args.algorithms, target, repeats)
        rows += r
        summaries.append(f"{name}: {model.summary()}")
    elapsed = time.perf_counter() - t0

    peers = [f"- {alg}: `{ALGORITHMS[alg][2]}`" for alg in args.algorithms]
    text = "\n".join(
        [f"# jaxmbd tree algorithms vs MuJoCo ({jax.default_backend()})", ""]
        + [f"- {line}" for line in desc]
        + [f"- mode: {'quick' if args.quick else 'full'} (median of {repeats} repeats of ≥{target * 1e3:.0f} ms), "
           f"benchmark took {elapsed:.0f} s", "", "Models:", ""]
        + [f"- {s}" for s in summaries]
        + ["", *table(rows), "", "MuJoCo peer of each row:", "", *peers, ""])
    print("\n" + text)
    write_result(args.out, "tree", text)


if __name__ == "__main__":
    main()
