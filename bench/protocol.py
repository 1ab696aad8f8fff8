"""Accuracy over the validation protocol of Negrut's thesis (University of Iowa,
1998, §5.1, (5.1)-(5.4)), on its stiff double pendulum:
T = 2 s, rtol = atol = tol = 1e-2 .. 1e-6, max error of the first
coordinate and its rate over the save grid against scipy Radau at 1e-12, in
units of tol; accepted steps and LU factorizations.  Each implicit method
with its default settings, with ``tol_factor=1`` (the thesis's controller as
is) and, for the methods that keep their factorization, without keeping it.
No timings: the numbers are deterministic.  Writes bench/results/protocol.md.

    python bench/protocol.py"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import models
from jaxmbd import Steps, Save

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import machine  # noqa: E402

TOLS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
T = 2.0
PROBLEMS = {  # name -> (model, save times): 40 points on the pendulum (the thesis's grid is finer still),
    # 4 on the chains so that the tolerance, not the save grid, sets the steps
    "stiff_double_pendulum": (models.stiff_double_pendulum, np.linspace(0.0, T, 41)[1:]),
    "stiff_chain3": (lambda: models.stiff_chain(3), np.linspace(0.0, T, 5)[1:]),
    "stiff_chain10": (lambda: models.stiff_chain(10), np.linspace(0.0, T, 5)[1:]),
}
METHODS = {
    "SDIRK4": I.SDIRK4(),
    "SDIRK4 (tol_factor 1)": I.SDIRK4(tol_factor=1.0),
    "SDIRK4 (no kept LU)": I.SDIRK4(keep_factorization=False),
    "RosenbrockNystrom4": I.RosenbrockNystrom4(),
    "RosenbrockNystrom4 (tol_factor 1)": I.RosenbrockNystrom4(tol_factor=1.0),
    "Trapezoidal": I.Trapezoidal(),
    "Trapezoidal (tol_factor 1)": I.Trapezoidal(tol_factor=1.0),
    "Trapezoidal (no kept LU)": I.Trapezoidal(keep_factorization=False),
}


def reference(model, ts):
    nv = model.nv
    f = lambda x: jnp.concatenate([x[nv:], jaxmbd.forward_dynamics(model, x[:nv], x[nv:], jnp.zeros(nv))])  # noqa: E731
    fj, jac = jax.jit(f), jax.jit(jax.jacfwd(f))
    r = solve_ivp(lambda t, x: np.asarray(fj(x)), (0.0, T), np.concatenate([model.q0, model.v0]), method="Radau",
                  t_eval=ts, rtol=1e-12, atol=1e-12, jac=lambda t, x: np.asarray(jac(x)))
    assert r.status == 0
    return r.y.T


def main():
    desc = machine() + ["command: `python bench/protocol.py`", "reference: scipy Radau at rtol = atol = 1e-12 on jaxmbd's forward dynamics "
                        "(checked against a hand-derived closed form in tests/test_integrators.py)"]
    print("\n".join(desc), flush=True)
    lines = []
    for pname, (make, ts) in PROBLEMS.items():
        model = make()
        ref = reference(model, ts)
        lines += [f"\n## {pname} ({len(ts)} save points, T = {T} s)\n",
                  "| method | " + " | ".join(f"tol {t:.0e}: q / v err, steps, LU" for t in TOLS) + " |",
                  "|---|" + "---|" * len(TOLS)]
        for mname, method in METHODS.items():
            cells = []
            for tol in TOLS:
                sol = jaxmbd.simulate(model, t1=T, integrator=method,
                                      steps=Steps(rtol=jnp.asarray(tol), atol=jnp.asarray(tol), max_steps=60_000),
                                      save=Save(ts=jnp.asarray(ts)))
                ep = np.abs(np.asarray(sol.qs[:, 0]) - ref[:, 0]).max() / tol
                ev = np.abs(np.asarray(sol.vs[:, 0]) - ref[:, model.nv]).max() / tol
                ok = "" if int(sol.status) == 0 else f" ({jaxmbd.status_name(sol.status)})"
                cells.append(f"{ep:.2f} / {ev:.2f}, {int(sol.stats['accepted'])}, "
                             f"{int(sol.stats['lu_factorizations'])}{ok}")
            lines.append(f"| {mname} | " + " | ".join(cells) + " |")
            print(pname, lines[-1], flush=True)
    text = ("# Accuracy over the thesis's protocol\n\n" + "\n".join(f"- {x}" for x in desc)
            + "\n- cells: max |θ1 - ref| / tol / max |θ̇1 - ref| / tol over the save points (first coordinate and "
            "its rate), accepted steps, LU factorizations\n" + "\n".join(lines) + "\n")
    out = HERE / "results" / "protocol.md"
    out.write_text(text)
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
