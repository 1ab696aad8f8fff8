"""Hairer-Wanner SDIRK4 (γ = 4/15, stiffly accurate, L-stable) in the
z-form with a convergence-controlled simplified Newton iteration and the
H&W stage predictors (digest negrut.md §3.4, §3.7)."""

from __future__ import annotations

from fractions import Fraction as Fr
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .base import AbstractIntegrator, check_linear_solver, Attempt, check_tableau, iteration_matrix, newton

GAMMA_FR = Fr(4, 15)
A_FR = [
    [GAMMA_FR, 0, 0, 0, 0],
    [Fr(1, 2), GAMMA_FR, 0, 0, 0],
    [Fr(51069, 144200), Fr(-7809, 144200), GAMMA_FR, 0, 0],
    [Fr(12047244770625658, 141474406359725325), Fr(-3057890203562191, 47158135453241775),
     Fr(2239631894905804, 28294881271945065), GAMMA_FR, 0],
    [Fr(181513, 86430), Fr(-89074, 116015), Fr(83636, 34851), Fr(-69863904375173, 23297141763930), GAMMA_FR]]
A_FR = [[Fr(x) for x in row] for row in A_FR]
B_FR = A_FR[4]  # stiffly accurate
BHAT_FR = [Fr(33665407, 11668050), Fr(-2284766, 15662025), Fr(11244716, 4704885),
           Fr(-96203066666797, 23297141763930), Fr(0)]


def _inv_lower(A):
    """Exact inverse of a lower-triangular matrix of Fractions."""
    n = len(A)
    X = [[Fr(0)] * n for _ in range(n)]
    for j in range(n):
        X[j][j] = 1 / A[j][j]
        for i in range(j + 1, n):
            X[i][j] = -sum(A[i][k] * X[k][j] for k in range(j, i)) / A[i][i]
    return X


AINV_FR = _inv_lower(A_FR)
# stage equation z_i - γ h F(w0 + z_i) = Σ_{k<i} α_ik z_k with α = -γ A^-1 (strictly lower)
ALPHA_FR = [[-GAMMA_FR * AINV_FR[i][k] if k < i else Fr(0) for k in range(5)] for i in range(5)]
# error d̄ = (b - b̂) A^-1 applied to z (4.86)-(4.87)
DBAR_FR = [sum((B_FR[i] - BHAT_FR[i]) * AINV_FR[i][j] for i in range(5)) for j in range(5)]

A = np.array([[float(x) for x in r] for r in A_FR])
C = A.sum(1)
ALPHA = np.array([[float(x) for x in r] for r in ALPHA_FR])
DBAR = np.array([float(x) for x in DBAR_FR])
GAMMA = float(GAMMA_FR)
# H&W SDIRK4 Newton starting values for stages 2-5 (stage 1 starts at 0)
PRED = np.zeros((5, 5))
PRED[1, 0] = 23 / 8
PRED[2, :2] = (0.9838473040915402, 0.3969226768377252)
PRED[3, [0, 2]] = (0.6563374010466914, 0.3372498196189311)
PRED[4, :4] = -DBAR[:4]


class SDIRK4(AbstractIntegrator):
    """SDIRK4 (Hairer-Wanner, γ = 4/15), order 4(3), on w = (y, y').

    Per step: one Jacobian (J1, J2) and one LU of S = I - h γ J2 - h² γ² J1
    (the Nyström form of I - h γ G); five stages, each a simplified Newton
    iteration (at most 7 iterations, stop when η ‖δz‖ <= 0.03 in the scaled
    RMS norm).  A stage that does not converge rejects the step (h is halved).
    The error estimate (b - b̂) A^-1 z is filtered by (I - h γ G)^-1 as in the
    H&W code (``filtered=False``: raw).  ``linear_solver="sparse"``: the
    branch-sparse iteration matrix (see ``RosenbrockNystrom4``)."""
    order: ClassVar[int] = 4
    error_order: ClassVar[int] = 3
    filtered: bool = True
    adaptive_steps: bool = True
    linear_solver: str = "dense"

    def __check_init__(self):
        check_tableau("SDIRK4", A, A[4], C)
        check_linear_solver(self.linear_solver)

    def attempt(self, ode, t, v0, h, scale):
        n = v0.shape[0]
        y0 = jnp.zeros_like(v0)
        _, M = iteration_matrix(ode, t, v0, h * GAMMA, self.linear_solver)
        sc = jnp.concatenate(scale)

        def F(ti, z):
            return jnp.concatenate([v0 + z[n:], ode.g(ti, z[:n], v0 + z[n:])])

        def solve(r):
            return jnp.concatenate(M.solve_first_order(r[:n], r[n:]))

        zs, ok, iters, eta = [], jnp.array(True), jnp.array(0), jnp.array(1.0, v0.dtype)
        for i in range(5):
            rhs = sum((ALPHA[i, k] * zs[k] for k in range(i) if ALPHA[i, k] != 0.0), jnp.zeros(2 * n, v0.dtype))
            z0 = sum((PRED[i, k] * zs[k] for k in range(i) if PRED[i, k] != 0.0), jnp.zeros(2 * n, v0.dtype))
            ti = t + C[i] * h
            res = lambda z, ti=ti, rhs=rhs: z - h * GAMMA * F(ti, z) - rhs
            z, ok_i, it_i, eta = newton(res, solve, z0, sc, eta_old=eta)
            zs.append(z)
            ok, iters = ok & ok_i, iters + it_i
        w1 = zs[4]
        err = sum(DBAR[i] * zs[i] for i in range(5))
        ey, ed = err[:n], err[n:]
        if self.filtered:
            ey, ed = M.solve_first_order(ey, ed)
        return Attempt(w1[:n], v0 + w1[n:], ey, ed, ok=ok, rhs=1 + iters, jac=jnp.array(1, jnp.int32),
                       lu=jnp.array(1, jnp.int32), newton=iters)
