"""What the soft solve's rows cost: for the built-in quadruped scene and the humanoid of
tests/test_contact_rows.py, the ODE right-hand side (``ChartODE(m, q).g``) and its value with
Jacobians (``g_and_jac``), each ``jax.jit(jax.vmap(...))`` at a batch of states near the keyframe,
with 8 rows (the floor of :func:`jaxmbd.forces.contact_rows.default_rows`) and with the default rows;
the solve in joint space where the rows outnumber the joints (the default) and, with
``--row-space``, also with every system in the rows' space (``jaxmbd.forces.soft.JOINT_SPACE``
off), the cost the joint-space form removes.

    python bench/contact_rows.py [--batch 64] [--rows 8,default] [--row-space]

Writes bench/results/contact_rows_<backend>.md (or prints with --no-write)."""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
import jaxmbd  # noqa: E402
from jaxmbd.forces import soft  # noqa: E402
from jaxmbd.forces.base import elements  # noqa: E402
from jaxmbd.forces.contact import Contact, with_contact_options  # noqa: E402
from jaxmbd.odes import ChartODE  # noqa: E402
from common import machine, per_call, write_result  # noqa: E402


def contact(m):
    return next(e for e in elements(m) if isinstance(e, Contact))


def models():
    from test_contact_rows import HUMANOID
    yield "quadruped scene", jaxmbd.load_mjcf(str(jaxmbd.models.quadruped_scene_path()), warn=False)
    yield "humanoid (tests/test_contact_rows.py)", jaxmbd.load_mjcf(HUMANOID, warn=False)


def states(m, batch):
    key = list(m.keyframes.values())[0]
    rng = np.random.default_rng(0)
    q = np.tile(np.asarray(key.qpos), (batch, 1))
    q[:, 7:] += 1e-3 * rng.normal(size=(batch, m.nq - 7))
    return jnp.asarray(q), jnp.asarray(0.1 * rng.normal(size=(batch, m.nv)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rows", default="8,default")
    ap.add_argument("--target", type=float, default=0.5)
    ap.add_argument("--row-space", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    lines = []
    for name, m0 in models():
        el = contact(m0)
        q, v = states(m0, a.batch)
        for spec, joint in [(s, j) for s in a.rows.split(",") for j in ((True, False) if a.row_space else (True,))]:
            k = el.rows if spec == "default" else int(spec)
            m = with_contact_options(m0, rows=k)
            soft.JOINT_SPACE = joint
            jax.clear_caches()
            g = jax.jit(jax.vmap(lambda q, v, m=m: ChartODE(m, q).g(0.0, jnp.zeros(m.nv), v)))
            gj = jax.jit(jax.vmap(lambda q, v, m=m: ChartODE(m, q).g_and_jac(0.0, jnp.zeros(m.nv), v)))
            nrows = k * (1 + el.fdim)
            space = "joint" if joint and nrows > m.nv else "rows"
            row = [name, f"{k}{' (default)' if k == el.rows else ''}", str(el.n_candidates), str(el.fdim),
                   str(m.nv), space]
            for f in (g, gj):
                t0 = time.perf_counter()
                jax.block_until_ready(f(q, v))
                first = time.perf_counter() - t0
                t = per_call(lambda f=f: f(q, v), a.target, 3)
                row += [f"{1e3 * t:.1f}", f"{first:.0f}"]
            print(" | ".join(row), flush=True)
            lines.append("| " + " | ".join(row) + " |")
    soft.JOINT_SPACE = True
    text = (f"# Soft-solve rows: cost per batched call, batch {a.batch}\n\n"
            f"`python bench/contact_rows.py --batch {a.batch} --rows {a.rows}{' --row-space' if a.row_space else ''}`; float64, "
            "`--xla_cpu_multi_thread_eigen=false`; median of 3 timing loops of about "
            f"{a.target} s (ms per `jax.jit(jax.vmap(...))` call over the batch), first call = trace, "
            "compile and run.  Rows: the candidate contacts (the deepest) in the soft solve, each one "
            "normal row and `fdim` frictional rows (a pyramidal contact 2 `fdim` edges); solve: its systems "
            "factored in joint space (nv x nv, where the rows outnumber the joints) or in the rows' space.\n\n"
            "| model | rows | candidates | fdim | nv | solve | g (ms) | first call (s) | g_and_jac (ms) | first call (s) |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n\n" + "\n".join(machine()) + "\n")
    if a.no_write:
        print(text)
    else:
        write_result(Path(__file__).parent / "results", "contact_rows", text)


if __name__ == "__main__":
    main()
