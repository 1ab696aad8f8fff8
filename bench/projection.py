"""The LU-based projection method (jaxmbd.linalg) against the normal
equations, Householder QR and jnp.linalg.lstsq on the report's matrix sizes
(Cardenal-Duff-Jiménez Table 4.1), batched, float64, with the flop model's
predicted ratios beside the measured ones.  Writes
bench/results/projection_<backend>.md.

    python bench/projection.py [--batch 8] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# XLA:CPU's multithreaded Eigen pool wedged twice here in a batched solve
# (every thread in a futex wait, no CPU; a known XLA:CPU problem on vmapped
# graphs); single-threaded Eigen avoids it.  Set before JAX starts.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from jaxmbd import linalg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import machine  # noqa: E402

SIZES = [(117, 105), (170, 161), (181, 180), (385, 361), (574, 526)]


def ls_normal(A, b):
    c = jsl.cho_factor(A.T @ A)
    return jsl.cho_solve(c, A.T @ b)


def ls_qr(A, b):
    Q, R = jnp.linalg.qr(A)
    return jsl.solve_triangular(R, Q.T @ b)


def ls_lstsq(A, b):
    return jnp.linalg.lstsq(A, b)[0]


def ls_proj(A, b):
    return linalg.lstsq_lu(A, b).x


def mn_normal(C, c):  # C wide (k x m): x = Cᵀ (C Cᵀ)⁻¹ c
    return C.T @ jsl.cho_solve(jsl.cho_factor(C @ C.T), c)


def mn_qr(C, c):      # Cᵀ = Q R: x = Q R⁻ᵀ c
    Q, R = jnp.linalg.qr(C.T)
    return Q @ jsl.solve_triangular(R, c, trans=1)


def mn_lstsq(C, c):
    return jnp.linalg.lstsq(C, c)[0]


def mn_proj(C, c):
    return linalg.minnorm_lu(C, c).x


def timed(f, *args, reps):
    g = jax.jit(jax.vmap(f))
    out = g(*args).block_until_ready()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        g(*args).block_until_ready()
        ts.append(time.perf_counter() - t0)
    return float(np.min(ts)), np.asarray(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--quick", action="store_true", help="the three smaller sizes, 3 repeats")
    a = p.parse_args(argv)
    sizes = SIZES[:3] if a.quick else SIZES
    reps = 3 if a.quick else 5
    B = a.batch
    rng = np.random.default_rng(0)
    lines = []
    for kind, fns in (("least squares", (ls_proj, ls_normal, ls_qr, ls_lstsq)),
                      ("minimum norm", (mn_proj, mn_normal, mn_qr, mn_lstsq))):
        lines += [f"\n### {kind}\n",
                  "| m x n | projection (µs/system) | normal eq. | QR | jnp.linalg.lstsq (SVD) | NE / proj measured "
                  "| NE / proj flop model | QR / proj measured | QR / proj flop model | max rel. diff vs lstsq |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for m, n in sizes:
            A = jnp.asarray(rng.standard_normal((B, m, n)))
            if kind == "least squares":
                args = (A, jnp.asarray(rng.standard_normal((B, m))))
            else:
                args = (jnp.swapaxes(A, 1, 2), jnp.asarray(rng.standard_normal((B, n))))
            res = [timed(f, *args, reps=reps) for f in fns]
            t = [r[0] / B * 1e6 for r in res]
            ref = res[3][1]
            diff = max(float(np.max(np.linalg.norm(r[1] - ref, axis=1) / np.linalg.norm(ref, axis=1)))
                       for r in res[:3])
            fl = linalg.flops(m, n)
            lines.append(f"| {m} x {n} | {t[0]:,.0f} | {t[1]:,.0f} | {t[2]:,.0f} | {t[3]:,.0f} | {t[1] / t[0]:.2f} | "
                         f"{fl['normal_equations'] / fl['projection']:.2f} | {t[2] / t[0]:.2f} | "
                         f"{fl['householder_qr'] / fl['projection']:.2f} | {diff:.1e} |")
            print(lines[-1], flush=True)
    desc = machine() + [f"batch {B} random N(0,1) systems per size (vmap of each solver, jitted), best of {reps} "
                        "runs after a warm-up; float64; the report's sizes (Table 4.1); minimum norm on the "
                        "transposes (n equations, m unknowns)"]
    text = (f"# LU projection method vs normal equations and QR ({jax.default_backend()})\n\n"
            + "\n".join(f"- {x}" for x in desc) + "\n" + "\n".join(lines) + "\n")
    out = HERE / "results" / f"projection_{jax.default_backend()}{'_quick' if a.quick else ''}.md"
    out.write_text(text)
    print(text + f"\nwritten to {out}")


if __name__ == "__main__":
    main()
