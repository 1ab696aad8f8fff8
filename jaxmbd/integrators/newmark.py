"""The trapezoidal rule on accelerations: Newmark with γ = 1/2, β = 1/4
(average acceleration; digest negrut.md §3.1).  Order 2, A-stable, not
L-stable."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp

from .base import AbstractIntegrator, check_linear_solver, Attempt, iteration_matrix, newton


class Trapezoidal(AbstractIntegrator):
    """y1 = h y0' + h²/4 (a0 + a1), y1' = y0' + h/2 (a0 + a1), with a1 the
    solution of a1 = g(t + h, y1, y1') by modified Newton (matrix
    S = I - h/2 J2 - h²/4 J1 at the step start, predictor a1 = a0).

    Error estimate: the difference to backward Euler on the accelerations
    (a1 in place of (a0 + a1)/2): h/2 (a1 - a0) in velocity and h²/4 (a1 - a0)
    in position, order q = 1 (step-size exponent 1/2).  ``linear_solver="sparse"``:
    the branch-sparse iteration matrix (see ``RosenbrockNystrom4``)."""
    order: ClassVar[int] = 2
    error_order: ClassVar[int] = 1
    adaptive_steps: bool = True
    linear_solver: str = "dense"

    def __check_init__(self):
        check_linear_solver(self.linear_solver)

    def attempt(self, ode, t, v0, h, scale):
        y0 = jnp.zeros_like(v0)
        a0, M = iteration_matrix(ode, t, v0, 0.5 * h, self.linear_solver)  # (h γ, h² β) = (h/2, h²/4)

        def res(a):
            return a - ode.g(t + h, h * v0 + 0.25 * h * h * (a0 + a), v0 + 0.5 * h * (a0 + a))

        # Newton on a, measured in velocity units (h/2 a) against the velocity scale
        sc = scale[1] / (0.5 * h)
        a1, ok, it, _ = newton(res, M.solve_S, a0, sc)
        y1 = h * v0 + 0.25 * h * h * (a0 + a1)
        yd1 = v0 + 0.5 * h * (a0 + a1)
        return Attempt(y1, yd1, 0.25 * h * h * (a1 - a0), 0.5 * h * (a1 - a0), ok=ok, rhs=1 + it,
                       jac=jnp.array(1, jnp.int32), lu=jnp.array(1, jnp.int32), newton=it)
