"""Probe: the two-box stack of work_precision.py under RosenbrockNystrom4
(tol 1e-4) over growing horizons: accepted and rejected steps and wall time,
printed (a diagnostic of the step-size controller once the boxes rest face to
face; it writes no file).

    .venv/bin/python bench/box_stack_probe.py"""

import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import work_precision as W  # noqa: E402

import jaxmbd  # noqa: E402
from jaxmbd import integrators as I  # noqa: E402
from jaxmbd import Start, Steps, Save, Solver


def main():
    xml, q0, v0, _ = W.scenes(["stack"])["box stack"]
    m, _, q0, v0 = W.load(xml, q0, v0)

    @jax.jit
    def run(q0, v0, tol, t1):
        sol = jaxmbd.simulate(m, Start(q0, v0), t1, integrator=I.RosenbrockNystrom4(),
                              steps=Steps(max_steps=200_000, rtol=tol, atol=tol),
                              save=Save(ts=jnp.linspace(0.1, 1.0, 10) * t1), solver=Solver(adjoint="none"))
        return sol.qs, sol.status, sol.stats

    print("| t1 (s) | status | accepted | rejected | wall (s) | box heights at t1 (m) |")
    print("|---|---|---|---|---|---|")
    for t1 in [0.1, 0.2, 0.3, 0.4]:
        t = time.perf_counter()
        qs, st, stats = jax.block_until_ready(run(jnp.asarray(q0), jnp.asarray(v0), 1e-4, t1))
        z = np.asarray(qs)[-1, [2, 9]]
        print(f"| {t1} | {jaxmbd.status_name(st)} | {int(stats['accepted'])} | {int(stats['rejected'])} | "
              f"{time.perf_counter() - t:.0f} | {z[0]:.4f}, {z[1]:.4f} |", flush=True)


if __name__ == "__main__":
    main()
