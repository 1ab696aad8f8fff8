"""Featherstone's humanoid vs the equivalent 30-DoF chain: predicted operation
counts next to measured times.

R. Featherstone ("Efficient factorization of the joint-space inertia matrix
for branched kinematic trees", IJRR 24(6), 2005, §6) compares, by
operation counts only, the 30-DoF humanoid (a torso on a 6-DoF free joint and
four 6-link revolute limbs: ``models.humanoid30()``) with "the equivalent
unbranched chain": the same 25 bodies in series with the floating base at one
end (``models.chain(25, floating=True)``: a free joint, then 24 revolute
joints; nv = 30, expanded λ(i) = i - 1, H dense).  Its claims: the CRBA-based
forward dynamics (CRBA + LᵀDL + back-substitution + RNEA for the bias) costs
about 2.2x less on the humanoid than on the chain, and on the humanoid it is
only about 15% costlier than the ABA (2.6x on the chain).

For each model this script prints the counts of ``jaxmbd.cost.analyze``
and times, per member of a ``jax.vmap`` batch (B = 1 unbatched), with the
model passed as a jit argument, one warm-up call and the median of repeats
(as ``common.per_call`` and bench/tree.py, except that the repeats alternate
between the models so that load from other processes hits both sides of a
ratio alike):

- CRBA      ``mass_matrix_compact`` (the n + D1 structural entries of H);
- LTDL      ``ltdl.factor`` of that compact H;
- LTDL+sol  ``ltdl.factor_solve`` (factor + one back-substitution);
- RNEA      ``bias_force`` (the C(q, v) that the CRBA route needs);
- FD-CRBA   ``forward_dynamics(method="crba", factorization="sparse")``: the
            paper's O(n³) route, the same algorithm on both models;
- FD-chol   the same with a dense Cholesky (``factorization="dense"``; what
            ``"auto"`` picks for chains);
- ABA       ``forward_dynamics(method="aba")``.

A third model, ``chain30-rev`` (``models.chain(30)``: 30 revolute bodies), can
be added for reference (``--models humanoid30 chain30-free chain30-rev``); it
is not the paper's chain (30 bodies, no floating base: its CRBA, RNEA and ABA
counts are higher).

Writes a markdown report to ``<out>/humanoid_vs_chain_<backend>.md`` and
prints it.  See bench/README.md.

    python bench/humanoid_vs_chain.py [--quick] [--out DIR] [--batches B ...] [--models NAME ...]
"""

from __future__ import annotations

import os

# OpenBLAS (the LAPACK behind JAX's CPU Cholesky) spins its own threads; on a
# small, busy machine that made a 200x200 cho_factor 10-20x slower.  One thread
# gives stable numbers; set OPENBLAS_NUM_THREADS yourself to override.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmbd  # noqa: E402  (enables float64)
from jaxmbd import cost, ltdl, models  # noqa: E402
from common import compiled, machine, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

HUMANOID, CHAIN = "humanoid30", "chain30-free"
# name -> (constructor, description)
MODELS = {
    HUMANOID: (models.humanoid30, "the paper's humanoid: torso on a free joint, four 6-link revolute limbs "
                                  "(`models.humanoid30()`)"),
    CHAIN: (lambda: models.chain(25, floating=True),
            "the paper's equivalent chain: the same 25 bodies in series, free joint first, then 24 revolute "
            "(`models.chain(25, floating=True)`; nv = 30, H dense)"),
    "chain30-rev": (lambda: models.chain(30),
                    "reference only, not the paper's chain: 30 revolute bodies (`models.chain(30)`)"),
}
DEFAULT_MODELS = (HUMANOID, CHAIN)
BATCHES = (1, 64, 1024)
QUICK_BATCHES = (1, 64)


def _add(*counts):
    return (sum(c[0] for c in counts), sum(c[1] for c in counts))


# name -> (function of (model, q, v, u, Hc), predicted (m, a) from a CostReport, what the count covers)
ALGORITHMS = {
    "CRBA": (lambda mdl, q, v, u, Hc: jaxmbd.mass_matrix_compact(mdl, q),
             lambda r: r.crba, "eq. 21 (D0a, D1a, D0b, D1b, D0c, D1c)"),
    "LTDL": (lambda mdl, q, v, u, Hc: ltdl.factor(mdl, Hc).vals,
             lambda r: r.factor_ltdl, "D1 div + D2 (m + a), div counted as m"),
    "LTDL+sol": (lambda mdl, q, v, u, Hc: ltdl.factor_solve(mdl, Hc, u),
                 lambda r: _add(r.factor_ltdl, r.solve_ltdl), "factor + n div + 2 D1 (m + a)"),
    "RNEA": (lambda mdl, q, v, u, Hc: jaxmbd.bias_force(mdl, q, v),
             lambda r: r.rnea, "Balafoutis-Patel-Misra + the paper's root/branch terms"),
    "FD-CRBA": (lambda mdl, q, v, u, Hc: jaxmbd.forward_dynamics(mdl, q, v, u, method="crba",
                                                                 factorization="sparse"),
                lambda r: r.fd_crba_ltdl, "CRBA + LTDL + solve + RNEA"),
    "FD-chol": (lambda mdl, q, v, u, Hc: jaxmbd.forward_dynamics(mdl, q, v, u, method="crba",
                                                                 factorization="dense"),
                lambda r: _add(r.crba, r.factor_dense, r.solve_dense, r.rnea),
                "CRBA + dense LDLᵀ counts + RNEA (Cholesky's n square roots not counted)"),
    "ABA": (lambda mdl, q, v, u, Hc: jaxmbd.forward_dynamics(mdl, q, v, u, method="aba"),
            lambda r: r.aba, "McMillan-Orin + the paper's branch terms"),
}

# The paper's figures (Featherstone 2005, §6 and the abstract):
# chain / humanoid operation-count ratios at a = m and a = 0, and FD-CRBA / ABA.
PAPER_CHAIN_OVER_HUMANOID = {"CRBA": "2.37 (a=m), 2.61 (a=0)",
                            "FD-CRBA": "2.18 (a=m), 2.25 (a=0): \"about 2.2\"",
                            "ABA": "\"only 15% faster on the humanoid\" than FD-CRBA; ABA itself ~equal"}
PAPER_FD_OVER_ABA = {HUMANOID: "1.14 (a=m), 1.17 (a=0): \"only 15% slower\"",
                    CHAIN: "2.57 (a=m), 2.72 (a=0): \"2.6 times slower\""}


def states(model, rng, batch):
    """`batch` random states (q, v, u) and the compact H at each q; batch None: one, unbatched."""
    shape = () if batch is None else (batch,)
    q = jnp.asarray(np.asarray(jaxmbd.neutral_q(model)) + 0.7 * rng.normal(size=shape + (model.nq,)))
    if batch is None:
        q = jaxmbd.normalize_q(model, q)
        Hc = jaxmbd.mass_matrix_compact(model, q)
    else:
        q = jax.vmap(jaxmbd.normalize_q, (None, 0))(model, q)
        Hc = jax.jit(jax.vmap(jaxmbd.mass_matrix_compact, (None, 0)))(model, q)
    v = jnp.asarray(rng.normal(size=shape + (model.nv,)))
    u = jnp.asarray(rng.normal(size=shape + (model.nv,)))
    return q, v, u, Hc


def interleaved(calls, target, repeats):
    """Median seconds per call of each fn in `calls` ({key: fn}), timed as
    ``common.per_call`` does (a warm-up call, loops of at least `target`
    seconds waiting for every result, the median of `repeats` loops), except
    that the repeats alternate between the functions: a burst of load from
    other processes then lands on both sides of a ratio, not on one model."""
    def loop(fn, n):
        t0 = time.perf_counter()
        for _ in range(n):
            jax.block_until_ready(fn())
        return time.perf_counter() - t0

    n, runs = {}, {}
    for k, fn in calls.items():
        loop(fn, 1)  # warm-up
        n[k], t = 1, loop(fn, 1)
        while t < target:
            n[k] = max(2 * n[k], int(n[k] * 1.2 * target / max(t, 1e-7)))
            t = loop(fn, n[k])
        runs[k] = [t]
    for _ in range(repeats - 1):
        for k, fn in calls.items():
            runs[k].append(loop(fn, n[k]))
    return {k: statistics.median(r) / n[k] for k, r in runs.items()}


def bench(built, batches, algs, target, repeats):
    """Rows (model, alg, batch, compile, t) and, per model and batch, the forward-dynamics check."""
    rng = np.random.default_rng(0)
    rows = []
    for B in batches:
        args = {n: states(m, rng, None if B == 1 else B) for n, m in built.items()}
        outs = {n: {} for n in built}
        for alg in algs:
            f = ALGORITHMS[alg][0]
            fb = f if B == 1 else jax.vmap(f, in_axes=(None, 0, 0, 0, 0))
            calls, tcs = {}, {}
            for n, m in built.items():
                tcs[n], fc = compiled(fb, m, *args[n])
                outs[n][alg] = jax.block_until_ready(fc(m, *args[n]))
                calls[n] = functools.partial(fc, m, *args[n])
            ts = interleaved(calls, target, repeats)
            for n in built:
                t = ts[n] / B
                rows.append(dict(model=n, alg=alg, batch=B, compile=tcs[n], t=t))
                print(f"  {n:12s} {alg:9s} B={B:5d}  compile {tcs[n]:5.2f} s  {t * 1e6:9.2f} us/member",
                      flush=True)
            del calls
        for n in built:  # the forward-dynamics routes must agree
            fds = [outs[n][a] for a in ("FD-CRBA", "FD-chol", "ABA") if a in outs[n]]
            if len(fds) > 1:
                scale = float(jnp.max(jnp.abs(fds[-1])))
                err = max(float(jnp.max(jnp.abs(x - fds[-1]))) for x in fds[:-1]) / scale
                rows.append(dict(model=n, alg="_check", batch=B, err=err))
    return rows


def structure(model):
    """The work the implementation schedules, beside the arithmetic the counts assume."""
    t, w = model.topo, ltdl.plan(model.topo).work
    return (f"tree passes (CRBA, RNEA, ABA): {t.n_levels} sequential levels x width {t.level_width} = "
            f"{t.n_levels * t.level_width} node slots for {t.nv} nodes; LTDL: {ltdl.plan(t).D} steps, "
            f"{w['factor_updates']} updates ({w['factor_updates_padded']} padded)")


def fmt_count(c):
    return f"{c[0]}m + {c[1]}a"


def ratio_text(num, den):
    """Predicted ratio of two (m, a) counts at a = m and at a = 0."""
    return f"{sum(num) / sum(den):.2f} ({num[0] / den[0]:.2f})"


def report(names, reports, rows, batches, algs):
    lines = ["## Predicted operation counts", "",
             "`jaxmbd.cost.analyze` (the paper's §3/§6 formulas; m = multiplications and divisions, "
             "a = additions and subtractions).  Ratio: chain ÷ humanoid, with a = m and, in brackets, a = 0.", ""]
    head = "| algorithm | counted as | " + " | ".join(names) + " | predicted chain ÷ humanoid | Featherstone 2005 |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for alg in algs:
        counts = [ALGORITHMS[alg][1](reports[n]) for n in names]
        pr = ratio_text(ALGORITHMS[alg][1](reports[CHAIN]), ALGORITHMS[alg][1](reports[HUMANOID])) \
            if CHAIN in names and HUMANOID in names else "-"
        lines.append(f"| {alg} | {ALGORITHMS[alg][2]} | " + " | ".join(fmt_count(c) for c in counts)
                     + f" | {pr} | {PAPER_CHAIN_OVER_HUMANOID.get(alg, '-')} |")
    lines += ["", "FD-CRBA ÷ ABA predicted: " + "; ".join(
        f"{n} {ratio_text(reports[n].fd_crba_ltdl, reports[n].aba)}" for n in names), ""]

    t = {(r["model"], r["alg"], r["batch"]): r for r in rows if r["alg"] != "_check"}
    lines += ["## Measured time per member (µs)", "",
              "B = 1: one unbatched call; B > 1: one `jax.vmap` call over B members, divided by B.", ""]
    cols = " | ".join(names)
    head = f"| algorithm | B | {cols} | measured chain ÷ humanoid | predicted (a = m) |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for alg in algs:
        for B in batches:
            cells = [t.get((n, alg, B)) for n in names]
            ts = " | ".join(f"{c['t'] * 1e6:.2f}" if c else "-" for c in cells)
            h, c = t.get((HUMANOID, alg, B)), t.get((CHAIN, alg, B))
            meas = f"{c['t'] / h['t']:.2f}" if h and c else "-"
            pred = ALGORITHMS[alg][1]
            pr = f"{sum(pred(reports[CHAIN])) / sum(pred(reports[HUMANOID])):.2f}" if h and c else "-"
            lines.append(f"| {alg} | {B} | {ts} | {meas} | {pr} |")

    if "FD-CRBA" in algs and "ABA" in algs:
        lines += ["", "## FD-CRBA ÷ ABA (same model, same batch)", ""]
        head = "| model | " + " | ".join(f"B={B}" for B in batches) + " | predicted (a = m) | Featherstone 2005 |"
        lines += [head, "|" + "---|" * (head.count("|") - 1)]
        for n in names:
            cells = []
            for B in batches:
                a, b = t.get((n, "FD-CRBA", B)), t.get((n, "ABA", B))
                cells.append(f"{a['t'] / b['t']:.2f}" if a and b else "-")
            pred = sum(reports[n].fd_crba_ltdl) / sum(reports[n].aba)
            lines.append(f"| {n} | " + " | ".join(cells) + f" | {pred:.2f} | {PAPER_FD_OVER_ABA.get(n, '-')} |")

    lines += ["", "## Compile times (s, `jax.jit(f).lower(...).compile()`)", ""]
    head = "| algorithm | B | " + cols + " |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for alg in algs:
        for B in batches:
            lines.append(f"| {alg} | {B} | " + " | ".join(
                f"{t[(n, alg, B)]['compile']:.2f}" if (n, alg, B) in t else "-" for n in names) + " |")
    checks = [r for r in rows if r["alg"] == "_check"]
    if checks:
        worst = max(r["err"] for r in checks)
        lines += ["", f"Forward-dynamics routes agree (FD-CRBA, FD-chol vs ABA, max |Δq̈| / max |q̈| over all "
                      f"models and batches): {worst:.1e}"]
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"batches {QUICK_BATCHES} only, shorter timing loops")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"), help="output directory (default bench/results)")
    p.add_argument("--models", nargs="+", choices=list(MODELS),
                   help=f"models to run (default: {' '.join(DEFAULT_MODELS)}; both are needed for the ratios)")
    p.add_argument("--batches", nargs="+", type=int, help=f"batch sizes (default {BATCHES})")
    p.add_argument("--algorithms", nargs="+", choices=list(ALGORITHMS), default=list(ALGORITHMS))
    args = p.parse_args(argv)
    names = args.models or list(DEFAULT_MODELS)
    batches = tuple(sorted(set(args.batches or (QUICK_BATCHES if args.quick else BATCHES))))
    target, repeats = (0.01, 3) if args.quick else (0.05, 5)

    desc = machine()
    print("\n".join(desc), flush=True)
    compiled(lambda m, q: jaxmbd.forward_kinematics(m, q), models.chain(2), jnp.zeros(2))  # JAX's one-off start-up
    built = {n: MODELS[n][0]() for n in names}
    reports = {n: cost.analyze(m) for n, m in built.items()}
    t0 = time.perf_counter()
    rows = bench(built, batches, args.algorithms, target, repeats)
    elapsed = time.perf_counter() - t0

    backend = jax.default_backend()
    text = "\n".join(
        [f"# humanoid30 vs the equivalent 30-DoF chain: predicted operations and measured times ({backend})", ""]
        + [f"- {line}" for line in desc]
        + [f"- mode: {'quick' if args.quick else 'full'} (model passed as a jit argument; one warm-up call, "
           f"then the median of {repeats} repeats of ≥{target * 1e3:.0f} ms), batches "
           f"{', '.join(map(str, batches))}; the repeats alternate between the models (see `interleaved`); "
           f"benchmark took {elapsed:.0f} s, load average {os.getloadavg()[0]:.2f} at the end",
           "- inputs: distinct random states per member (`normalize_q(neutral_q + 0.7 N(0,1))`, v and τ ~ N(0,1)); "
           "LTDL's input is the CRBA's compact H at those states",
           "- the paper's figures are operation-count predictions (Featherstone 2005 §6), not timings", "",
           "Models:", ""]
        + [f"- **{n}**: {MODELS[n][1]}; {built[n].summary()}, D1 = {reports[n].D1}, D2 = {reports[n].D2}; "
           f"{structure(built[n])}" for n in names]
        + [""] + report(names, reports, rows, batches, args.algorithms) + [""])
    print("\n" + text)
    write_result(args.out, "humanoid_vs_chain", text)


if __name__ == "__main__":
    main()
