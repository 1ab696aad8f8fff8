"""Time batched branch-sparse LᵀDL factor + solve against dense Cholesky, in one run.

For each model and batch size B: x = H⁻¹ b for B (H, b) pairs with
``jax.vmap``, three ways on the same inputs:

- dense: ``jax.scipy.linalg.cho_factor(H)`` + ``cho_solve`` on the dense H;
- sparse: ``ltdl.factor_solve(model, H, b)`` (factor + solve fused) from the
  *same* dense H (the kernel gathers H's branch pattern first);
- compact: the same from compact storage (``mass_matrix_compact``, shape
  (nM,)), i.e. without the dense H: the input ``forward_dynamics`` gives it.

Reports the jit compile times, the median time per system, the measured
speed-up (dense / sparse), the speed-up predicted from the operation counts
of ``jaxmbd.cost`` and the largest difference between the sparse and dense
solutions.  Writes a markdown table with the machine description to
``<out>/ltdl_<backend>.md`` and prints it.  See bench/README.md.

    python bench/ltdl.py [--quick] [--out DIR] [--models NAME ...] [--batches B ...]
"""

from __future__ import annotations

import os

# OpenBLAS (the LAPACK behind JAX's CPU Cholesky) spins its own threads; on a
# small, busy machine that made a 200x200 cho_factor 10-20x slower.  One thread
# gives stable numbers; set OPENBLAS_NUM_THREADS yourself to override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.scipy.linalg import cho_factor, cho_solve  # noqa: E402

import jaxmbd  # noqa: E402  (enables float64)
from jaxmbd import cost, ltdl, models  # noqa: E402
from common import compiled, machine as _machine, per_call  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

MODELS = {
    "humanoid30": models.humanoid30,
    "chain10": lambda: models.chain(10),
    "chain30": lambda: models.chain(30),
    "chain100": lambda: models.chain(100),
    **{f"binary_tree{l}": (lambda l=l: models.binary_tree(l)) for l in range(4, 9)},
    "grid_tree4": lambda: models.grid_tree(4),
    "grid_tree8": lambda: models.grid_tree(8),
}
BATCHES = (1, 64, 1024, 4096)
BIG_NV, BIG_BATCH = 100, 256  # models with nv > BIG_NV run at batch <= BIG_BATCH (memory)
MAX_CALL_S = 3.0  # ... and at most the power-of-2 batch whose slowest call should last <= this (0.5 with --quick)
QUICK_MODELS = ("humanoid30", "chain30", "binary_tree8")
QUICK_BATCHES = (1, 256)
N_STATES = 8  # distinct random states per model, tiled to the batch
TOL = 1e-8    # max |x_sparse - x_dense| / max |x_dense|

# Issue targets: (model, batch, minimum dense/sparse speed-up, wording)
TARGETS = (
    ("humanoid30", 4096, 3.0, "humanoid30 at batch 4096: sparse >= 3x faster than dense"),
    ("binary_tree8", 256, 50.0, "binary_tree8 at batch 256: sparse >= 50x faster than dense"),
    ("chain30", 4096, 1 / 1.5, "chain30 at batch 4096: sparse no more than 1.5x slower than dense"),
)


def dense_solve(model, H, b):
    return cho_solve(cho_factor(H, lower=True), b)


def sparse_solve(model, H, b):
    return ltdl.factor_solve(model, H, b)


PATHS = {"dense": dense_solve, "sparse": sparse_solve, "compact": sparse_solve}




def inputs(model, rng):
    """N_STATES random SPD mass matrices, dense (S, nv, nv) and compact (S, nM)."""
    q = jnp.asarray(np.asarray(jaxmbd.neutral_q(model)) + 0.7 * rng.normal(size=(N_STATES, model.nq)))
    q = jax.vmap(jaxmbd.normalize_q, (None, 0))(model, q)
    H = jax.jit(jax.vmap(jaxmbd.mass_matrix, (None, 0)))(model, q)
    Hc = jax.jit(jax.vmap(jaxmbd.mass_matrix_compact, (None, 0)))(model, q)
    topo = model.topo
    assert np.allclose(np.asarray(H)[:, topo.M_rows, topo.M_cols], np.asarray(Hc), rtol=1e-12, atol=1e-12)
    return H, Hc


def tile(x, batch):
    return jnp.asarray(np.resize(np.asarray(x), (batch,) + x.shape[1:]))  # cycles through the states


def bench_model(name, model, batches, target, repeats, max_call):
    """Rows for each batch size; returns (rows, note on capped batches or None)."""
    rng = np.random.default_rng(0)
    H1, Hc1 = inputs(model, rng)
    pred = cost.predicted_factor_solve_speedup(model)
    rows, notes, t_sys = [], [], 0.0
    batches = sorted(set(batches))
    if model.nv > BIG_NV and batches[-1] > BIG_BATCH:
        notes.append(f"nv = {model.nv} > {BIG_NV}: batch capped at {BIG_BATCH} (memory: a dense H batch is "
                     f"B nv² 8 bytes, {4096 * model.nv ** 2 * 8 / 1e9:.1f} GB at B=4096)")
        batches = sorted({min(B, BIG_BATCH) for B in batches})
    for i, B in enumerate(batches):
        if t_sys * B > max_call:  # the slowest path would take too long per call
            cap = 2 ** int(np.log2(max_call / t_sys))
            prev = rows[-1]["batch"]
            notes.append(f"B={B} would take ~{t_sys * B:.1f} s per call (slowest path {t_sys * 1e6:.0f} µs/system "
                         f"at B={prev}), over {max_call:g} s: "
                         + (f"ran B={cap} instead, larger batches skipped" if cap > prev
                            else "this and larger batches skipped"))
            if cap <= prev:
                break
            B = cap
        H, Hc = tile(H1, B), tile(Hc1, B)
        b = jnp.asarray(rng.normal(size=(B, model.nv)))
        args = {"dense": H, "sparse": H, "compact": Hc}
        row = dict(model=name, nv=model.nv, D=int(model.topo.dof_depth.max()), batch=B, pred=pred)
        x = {}
        for path, f in PATHS.items():
            tc, fc = compiled(jax.vmap(f, in_axes=(None, 0, 0)), model, args[path], b)
            x[path] = jax.block_until_ready(fc(model, args[path], b))  # also the warm-up call
            row[f"c_{path}"] = tc
            row[f"t_{path}"] = per_call(lambda: fc(model, args[path], b), target, repeats, warmup=False) / B
            del fc
        scale = float(jnp.max(jnp.abs(x["dense"])))
        row["err"] = max(float(jnp.max(jnp.abs(x[p] - x["dense"]))) for p in ("sparse", "compact")) / scale
        rows.append(row)
        t_sys = max(row[f"t_{p}"] for p in PATHS)
        print(f"  {name:13s} B={B:5d} compile {row['c_dense']:4.2f}/{row['c_sparse']:4.2f}/{row['c_compact']:4.2f} s"
              f"  dense {row['t_dense'] * 1e6:9.2f}  sparse {row['t_sparse'] * 1e6:8.2f}"
              f"  compact {row['t_compact'] * 1e6:8.2f} us/system"
              f"  speed-up {row['t_dense'] / row['t_sparse']:6.2f} (predicted {pred:6.2f})"
              f"  rel err {row['err']:.1e}{'' if row['err'] < TOL else '  FAILED'}", flush=True)
        del H, Hc, b, x
        if B < batches[i]:
            break  # ran at the time cap
    return rows, "; ".join(notes) or None



def machine():
    return _machine()


def table(rows):
    head = ("| model | nv | DoF depth | B | compile dense (s) | compile sparse (s) | compile compact (s) "
            "| dense (µs/sys) | sparse (µs/sys) | compact (µs/sys) | speed-up | speed-up compact "
            "| predicted | rel. diff |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['nv']} | {r['D']} | {r['batch']} | {r['c_dense']:.2f} | {r['c_sparse']:.2f} "
            f"| {r['c_compact']:.2f} | {r['t_dense'] * 1e6:.2f} | {r['t_sparse'] * 1e6:.2f} "
            f"| {r['t_compact'] * 1e6:.2f} | {r['t_dense'] / r['t_sparse']:.2f} "
            f"| {r['t_dense'] / r['t_compact']:.2f} | {r['pred']:.2f} | {r['err']:.1e} |")
    return lines


def targets(rows):
    """Verdicts.  Each path is timed from the input its pipeline produces:
    ``forward_dynamics`` feeds the sparse path the CRBA's compact H and the
    dense path the dense H, so the verdict uses dense (dense H) against sparse
    (compact H); the ratio from a dense H, which adds a gather of the pattern
    out of an nv x nv matrix, is reported beside it."""
    out = []
    for name, B, need, text in TARGETS:
        r = next((r for r in rows if r["model"] == name and r["batch"] == B), None)
        if r is None:
            out.append(f"- {text}: not measured in this run")
            continue
        s, sc = r["t_dense"] / r["t_sparse"], r["t_dense"] / r["t_compact"]
        verdict = "met" if sc >= need else "MISSED"
        out.append(f"- {text}: **{verdict}**, measured {sc:.2f}x from compact H, the CRBA's output "
                   f"({s:.2f}x when the sparse path also starts from the dense H; "
                   f"needed {need:.2f}x, predicted from operation counts {r['pred']:.2f}x)")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"only {', '.join(QUICK_MODELS)} at batches {QUICK_BATCHES}, shorter timings")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output directory (default bench/results)")
    p.add_argument("--models", nargs="+", choices=list(MODELS), help="models to run (default: all)")
    p.add_argument("--batches", nargs="+", type=int, help=f"batch sizes (default {BATCHES})")
    args = p.parse_args(argv)
    names = args.models or (QUICK_MODELS if args.quick else list(MODELS))
    batches = tuple(args.batches or (QUICK_BATCHES if args.quick else BATCHES))
    target, repeats = (0.01, 3) if args.quick else (0.05, 5)
    max_call = 0.5 if args.quick else MAX_CALL_S

    desc = machine()
    print("\n".join(desc), flush=True)
    compiled(lambda m, H, b: sparse_solve(m, H, b), models.chain(2), jnp.eye(2), jnp.ones(2))  # JAX start-up
    t0 = time.perf_counter()
    rows, summaries, caps = [], [], []
    for name in names:
        model = MODELS[name]()
        r, note = bench_model(name, model, batches, target, repeats, max_call)
        rows += r
        summaries.append(f"{name}: {model.summary()}, nM={model.topo.nM}")
        if note:
            caps.append(f"  - {name}: {note}")
    elapsed = time.perf_counter() - t0
    bad = [r for r in rows if not r["err"] < TOL]

    notes = [f"- batches {', '.join(map(str, batches))}" + ("; capped:" if caps else ""), *caps,
             f"- inputs: {N_STATES} random states per model (`normalize_q(neutral_q + 0.7 N(0,1))`), "
             "H = `mass_matrix` (and `mass_matrix_compact`) tiled to the batch; b ~ N(0,1) per system",
             f"- every sparse solution agrees with the dense one to max|Δx| / max|x| < {TOL:g}: "
             + ("yes" if not bad else f"NO ({len(bad)} rows fail)")]
    text = "\n".join(
        [f"# jaxmbd batched LTDL factor + solve vs dense Cholesky ({jax.default_backend()})", ""]
        + [f"- {line}" for line in desc]
        + [f"- mode: {'quick' if args.quick else 'full'} (median of {repeats} repeats of ≥{target * 1e3:.0f} ms "
           f"after a warm-up call), benchmark took {elapsed:.0f} s", *notes, "", "Models:", ""]
        + [f"- {s}" for s in summaries]
        + ["", *table(rows), "", "Targets (speed-up = dense time from dense H / sparse time from compact H, same batch):", "",
           *targets(rows), ""])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"ltdl_{jax.default_backend()}.md"
    path.write_text(text)
    print("\n" + text)
    print(f"written to {path}")
    if bad:
        raise SystemExit(f"{len(bad)} rows: sparse and dense solutions differ by more than {TOL:g} (relative)")


if __name__ == "__main__":
    main()
