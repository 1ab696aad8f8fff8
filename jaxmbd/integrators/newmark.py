"""The trapezoidal rule on accelerations: Newmark with γ = 1/2, β = 1/4
(average acceleration; D. Negrut's thesis, University of Iowa, 1998, §4.1,
(4.1)-(4.2)).  Order 2, A-stable, not
L-stable."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from .base import AbstractImplicit, Attempt, Kept, check_linear_solver, check_tol_factor, newton, step_iteration_matrix


class Trapezoidal(AbstractImplicit):
    """y1 = h y0' + h²/4 (a0 + a1), y1' = y0' + h/2 (a0 + a1), with a1 the
    solution of a1 = g(t + h, y1, y1') by modified Newton (matrix
    S = I - h/2 J2 - h²/4 J1 at the step start, predictor a1 = a0).

    Error estimate: the difference to backward Euler on the accelerations
    (a1 in place of (a0 + a1)/2): h/2 (a1 - a0) in velocity and h²/4 (a1 - a0)
    in position, order q = 1 (step-size exponent 1/2).  ``linear_solver="sparse"``:
    the branch-sparse iteration matrix (see ``RosenbrockNystrom4``).

    ``keep_factorization``: keep J and the LU while h is unchanged and Newton
    contracts with θ <= 1e-3 (dense linear solver; see ``SDIRK4``).
    ``tol_factor`` (default 0.3) scales rtol and atol: with it the global
    error of the stiff double pendulum over the thesis's protocol stays
    within 7x the requested tolerance (19x without)."""
    name: ClassVar[str] = "trapezoidal"
    order: ClassVar[int] = 2
    error_order: ClassVar[int] = 1
    holds_step: ClassVar[bool] = True
    adaptive_steps: bool = True
    linear_solver: str = "dense"
    keep_factorization: bool = True
    tol_factor: float = 0.3

    def __check_init__(self):
        check_linear_solver(self.linear_solver)
        check_tol_factor("Trapezoidal", self.tol_factor)

    def init_cache(self, ode, t, v0):
        return Kept.empty(v0.shape[0], v0.dtype)

    def attempt(self, ode, t, v0, h, scale, cache=None):
        keep = self.keep_factorization and self.linear_solver == "dense" and cache is not None
        # (h γ, h² β) = (h/2, h²/4)
        a0, M, fresh = step_iteration_matrix(ode, t, v0, h, 0.5 * h, self.linear_solver, cache if keep else None,
                                             need_g0=True)

        def res(a):
            return a - ode.g(t + h, h * v0 + 0.25 * h * h * (a0 + a), v0 + 0.5 * h * (a0 + a))

        # Newton on a, measured in velocity units (h/2 a) against the velocity scale
        sc = scale[1] / (0.5 * h)
        a1, ok, it, _, theta = newton(res, M.solve_S, a0, sc)
        y1 = h * v0 + 0.25 * h * h * (a0 + a1)
        yd1 = v0 + 0.5 * h * (a0 + a1)
        new_cache = Kept.after(M, h, ok, theta) if keep else cache
        work = fresh.astype(jnp.int32)
        return Attempt(y1, yd1, 0.25 * h * h * (a1 - a0), 0.5 * h * (a1 - a0), ok=ok, rhs=1 + it,
                       jac=work, lu=work, newton=it, cache=new_cache, exact=M.exact)
