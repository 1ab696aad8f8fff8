"""The Descriptor Form codes InflTrap and InflSDIRK of D. Negrut, "On the
implicit integration of differential-algebraic equations of multibody
dynamics", PhD thesis, University of Iowa, 1998 (§3.3, §4.2-4.3, Tables 14
and 15): implicit integrators for mechanisms (trees with loop
constraints) whose Newton unknowns are the full accelerations and the
Lagrange multipliers, z = [q̈; λ] (nv + nc), instead of the independent
accelerations alone.

Per Newton iteration (thesis §3.3): take the independent part v̈ = q̈[ind];
integrate the independent positions and rates with the formula; recover
the dependent ones (Newton on Φ = 0, then a linear solve: exact constraint
satisfaction at position and velocity level, so this is still a
state-space method); evaluate the residual of the augmented system (3.76)

    Ψ(q̈, λ) = [ H(q) q̈ + Φ_qᵀ(q) λ - (τ - C(q, q̇)) ;  Φ_q(q) q̈ - τ_c(q, q̇) ]

at the recovered state; correct z.  The iteration matrix ∂Ψ/∂z is formed
by forward-mode autodiff through the recovery at the step start (the
thesis's closed form of §3.3, rows "M + βh²{...} - γh Q^A_q̇ Ĥ", is what
``jacfwd`` computes) and factored once per step (dense LU; the thesis used
MA48); the SDIRK code reuses it for all five stages.

The unknowns are the chart accelerations ẍ of the step's local chart (for
scalar joints these are the joint accelerations; for a rotation, the
second derivative of the rotation vector), so ball and free joints are
supported: the residual uses the joint accelerations
v̇ = d/dt (Jr(x) ẋ) = Jr(x) ẍ + (dJr(x)[ẋ]) ẋ.  The methods need a
:class:`jaxmbd.odes.ConstrainedChartODE` (a mechanism passed to
:func:`jaxmbd.simulate`)."""

from __future__ import annotations

from fractions import Fraction as Fr
from typing import ClassVar

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from ..odes.base import DescriptorODE
from .base import NEWTON_MAX, AbstractAdaptive, Attempt, check_tableau, check_tol_factor, newton

# --- SDIRK4/16 (γ = 1/4), the thesis's Table 13 -------------------------------------------

GAMMA16_FR = Fr(1, 4)
A16_FR = [[Fr(1, 4), 0, 0, 0, 0],
          [Fr(1, 2), Fr(1, 4), 0, 0, 0],
          [Fr(17, 50), Fr(-1, 25), Fr(1, 4), 0, 0],
          [Fr(371, 1360), Fr(-137, 2720), Fr(15, 544), Fr(1, 4), 0],
          [Fr(25, 24), Fr(-49, 48), Fr(125, 16), Fr(-85, 12), Fr(1, 4)]]
A16_FR = [[Fr(x) for x in row] for row in A16_FR]
C16_FR = [Fr(1, 4), Fr(3, 4), Fr(11, 20), Fr(1, 2), Fr(1)]
B16_FR = list(A16_FR[4])  # stiffly accurate
BHAT16_FR = [Fr(59, 48), Fr(-17, 96), Fr(225, 32), Fr(-85, 12), Fr(0)]


def _check_sdirk16():
    """The tableau's exact properties (Fractions): c = row sums of A, the
    eight order-4 conditions for b, the four order-3 conditions for b̂,
    b A⁻¹ = e5 (R(∞) = 0, stiffly accurate) and (b - b̂) A⁻¹ (exact values)."""
    A, b, bh, c, s = A16_FR, B16_FR, BHAT16_FR, C16_FR, 5
    R = range(s)
    dot = lambda u, w: sum(ui * wi for ui, wi in zip(u, w))  # noqa: E731
    Av = lambda w: [dot(A[i], w) for i in R]  # noqa: E731
    c2, c3 = [x * x for x in c], [x ** 3 for x in c]
    checks = {
        "c = A 1": all(sum(A[i]) == c[i] for i in R),
        "diagonal γ": all(A[i][i] == GAMMA16_FR for i in R) and all(A[i][j] == 0 for i in R for j in R if j > i),
        "Σb = 1": sum(b) == 1, "b·c = 1/2": dot(b, c) == Fr(1, 2), "b·c² = 1/3": dot(b, c2) == Fr(1, 3),
        "b A c = 1/6": dot(b, Av(c)) == Fr(1, 6), "b·c³ = 1/4": dot(b, c3) == Fr(1, 4),
        "b (c∘Ac) = 1/8": dot(b, [c[i] * x for i, x in enumerate(Av(c))]) == Fr(1, 8),
        "b A c² = 1/12": dot(b, Av(c2)) == Fr(1, 12), "b A A c = 1/24": dot(b, Av(Av(c))) == Fr(1, 24),
        "Σb̂ = 1": sum(bh) == 1, "b̂·c = 1/2": dot(bh, c) == Fr(1, 2), "b̂·c² = 1/3": dot(bh, c2) == Fr(1, 3),
        "b̂ A c = 1/6": dot(bh, Av(c)) == Fr(1, 6),
    }
    # x = b A⁻¹ solves x A = b (A lower triangular: back substitution from the last column)
    def left_solve(w):
        x = [Fr(0)] * s
        for j in reversed(R):
            x[j] = (w[j] - sum(x[i] * A[i][j] for i in range(j + 1, s))) / A[j][j]
        return x
    checks["b A⁻¹ = e5"] = left_solve(b) == [0, 0, 0, 0, 1]
    checks["(b - b̂) A⁻¹"] = left_solve([x - y for x, y in zip(b, bh)]) == [Fr(23, 6), Fr(17, 12), Fr(-125, 4),
                                                                          Fr(85, 3), Fr(1)]
    bad = [k for k, v in checks.items() if not v]
    if bad:
        raise AssertionError(f"SDIRK4/16 tableau fails: {bad}")


_check_sdirk16()

A16 = np.array([[float(x) for x in r] for r in A16_FR])
C16 = np.array([float(x) for x in C16_FR])
B16 = np.array([float(x) for x in B16_FR])
GAMMA16 = float(GAMMA16_FR)
# stage positions ỹ_i = h c_i ẏ0 + h² Σ_{j<i} μ_ij a_j + h² γ² a_i, μ = A² (μ_ij = Σ_{k=j..i} a_ik a_kj)
MU16 = np.array([[float(sum(A16_FR[i][k] * A16_FR[k][j] for k in range(5))) for j in range(5)] for i in range(5)])
# y1 = h ẏ0 + h² Σ φ_i a_i, φ = b A; error weights (b - b̂) and (b - b̂) A
PHI16 = np.array([float(sum(B16_FR[j] * A16_FR[j][i] for j in range(5))) for i in range(5)])
EB16 = np.array([float(B16_FR[i] - BHAT16_FR[i]) for i in range(5)])
# the velocity change Σ_i |b_i| h |δa| that errors δa in the stage accelerations can make in y1'
SUM_ABS_B16 = float(sum(abs(x) for x in B16_FR))
EPHI16 = np.array([float(sum((B16_FR[j] - BHAT16_FR[j]) * A16_FR[j][i] for j in range(5))) for i in range(5)])


def _check_ode(name, ode):
    if not isinstance(ode, DescriptorODE):
        raise TypeError(f"{name} integrates mechanisms (models with loop constraints) in descriptor form; "
                        f"it needs a jaxmbd.odes.DescriptorODE (a mechanism passed to simulate), "
                        f"got {type(ode).__name__}")


def _check_newton_max(name, n):
    if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1):
        raise ValueError(f"{name}: newton_max must be an integer >= 1, got {n!r}")


def _newton_scale(ode, scale, h_unit, lam_w):
    """Scale of the unknowns z = [q̈; λ] for the Newton norm.

    q̈[ind]: the velocity scale over h_unit (the velocity change the
    formula makes from it, as ``Trapezoidal``); q̈[dep]: the mean of those
    (no velocity scale exists for the dependent coordinates; they are fixed
    by the independent ones through the constraints); λ_j: that mean
    divided by |H⁻¹ Φ_qᵀ e_j|∞, i.e. λ is measured in the accelerations it
    induces, so the scale is independent of the multipliers' units.
    (A norm on q̈[ind] alone stopped too early: 1.1e-4 against 9e-7 error
    on the slider crank with DescriptorSDIRK4 at tol 1e-6.)"""
    sa = scale[1] / h_unit
    mean = jnp.mean(sa)
    sx = jnp.full((ode.nv,), mean, sa.dtype).at[ode.ind].set(sa)
    sl = mean / jnp.maximum(lam_w, 1e-300)
    return jnp.concatenate([sx, sl])


class DescriptorTrapezoidal(AbstractAdaptive):
    """InflTrap (thesis §3.3, §4.1 (4.1)-(4.2), Table 15): the trapezoidal rule
    on accelerations (Newmark γ = 1/2, β = 1/4; as :class:`Trapezoidal`)
    in descriptor form.  y1 = h y0' + h²/4 (a0 + a1), y1' = y0' + h/2 (a0 + a1)
    on the independent coordinates, with a1 = q̈1[ind] and (q̈1, λ1) the
    solution of Ψ = 0 (3.76) at the recovered state (t + h, y1, y1'), by
    simplified Newton with convergence control (``base.newton``) from the
    step-start (q̈0, λ0); the iteration matrix ∂Ψ/∂(q̈, λ) ((nv + nc) square,
    ``jacfwd`` through the recovery at the step start) is factored once per
    step.

    Error estimate: the difference to backward Euler, h²/4 (a1 - a0) in
    position and h/2 (a1 - a0) in velocity, order q = 1.  ``tol_factor``
    (default 0.3, as ``Trapezoidal``) scales rtol and atol; ``newton_max``:
    the Newton iteration limit (a failure halves h).  Newton measures
    q̈[ind] in velocity units (h/2 q̈) against the velocity scale, as
    ``Trapezoidal``; q̈[dep] and λ as described in :func:`_newton_scale`.
    Order 2, A-stable, not L-stable."""
    name: ClassVar[str] = "infl_trap"
    descriptor: ClassVar[bool] = True
    order: ClassVar[int] = 2
    error_order: ClassVar[int] = 1
    adaptive_steps: bool = True
    tol_factor: float = 0.3
    newton_max: int = NEWTON_MAX

    def __check_init__(self):
        check_tol_factor("DescriptorTrapezoidal", self.tol_factor)
        _check_newton_max("DescriptorTrapezoidal", self.newton_max)

    def attempt(self, ode, t, v0, h, scale, cache=None):
        _check_ode("DescriptorTrapezoidal", ode)
        beta, gh = 0.25 * h * h, 0.5 * h
        z0, a0, ok0, lu, lam_w = ode.descriptor_start(t, v0, beta, gh)
        ytil, ydtil = h * v0 + beta * a0, v0 + gh * a0
        res = lambda z: ode.descriptor_residual(t + h, ytil, ydtil, beta, gh, z)  # noqa: E731
        solve = lambda r: jsl.lu_solve(lu, r)  # noqa: E731
        z1, ok, it, _, _ = newton(res, solve, z0, _newton_scale(ode, scale, gh, lam_w), max_iter=self.newton_max)
        a1 = z1[:ode.nv][ode.ind]
        y1, yd1 = ytil + beta * a1, ydtil + gh * a1
        one = jnp.array(1, jnp.int32)
        return Attempt(y1, yd1, beta * (a1 - a0), gh * (a1 - a0), ok=ok & ok0, rhs=1 + it, jac=one, lu=one,
                       newton=it, cache=cache)


class DescriptorSDIRK4(AbstractAdaptive):
    """InflSDIRK (thesis §3.2.2, (3.68)-(3.73); §3.3; Tables 13 and 14):
    SDIRK4/16 (γ = 1/4, stiffly accurate, L-stable, order 4 with an
    embedded order-3 b̂; tableau checked exactly at import) in the
    "multistep-like" stage form on the independent coordinates, in
    descriptor form.  Stage i solves Ψ(q̈⁽ⁱ⁾, λ⁽ⁱ⁾) = 0 (3.76) at time
    t + c_i h and the recovered state of

        y⁽ⁱ⁾ = h c_i y0' + h² Σ_{j<i} μ_ij a⁽ʲ⁾ + h² γ² a⁽ⁱ⁾,  μ = A²,
        y'⁽ⁱ⁾ = y0' + h Σ_{j<i} a_ij a⁽ʲ⁾ + γ h a⁽ⁱ⁾,          a⁽ⁱ⁾ = q̈⁽ⁱ⁾[ind],

    by simplified Newton (``base.newton``, η carried from stage to stage;
    stage 1 starts from the step-start (q̈0, λ0), stage i from stage i-1),
    with one iteration matrix ∂Ψ/∂(q̈, λ) per step (β = γ²h², γh; at the
    step start) reused by all five stages.  y1 = h y0' + h² Σ φ_i a⁽ⁱ⁾
    (φ = b A), y1' = y0' + h Σ b_i a⁽ⁱ⁾; the error estimate is the same
    formula with b - b̂ (order q = 3), unfiltered.  ``tol_factor``
    (default 0.5, as ``SDIRK4``) scales rtol and atol.

    Newton norm: y1' = y0' + h Σ b_i a⁽ⁱ⁾ weighs the stage accelerations
    with Σ|b_i| ≈ 17.3, so q̈[ind] is measured in the velocity units
    h Σ|b_i| q̈ against the velocity scale (with γh, the unit of one stage's
    velocity, the Newton errors dominated: 1.4e-5 against 9e-7 on the
    slider crank at tol 1e-6); q̈[dep] and λ as in :func:`_newton_scale`.
    ``newton_max`` (default 10): the iteration matrix is the step start's,
    not the stage's, so Newton contracts more slowly than in the z-form
    ``SDIRK4`` and 7 iterations (H&W) cause many Newton rejections."""
    name: ClassVar[str] = "infl_sdirk"
    descriptor: ClassVar[bool] = True
    order: ClassVar[int] = 4
    error_order: ClassVar[int] = 3
    adaptive_steps: bool = True
    tol_factor: float = 0.5
    newton_max: int = 10

    def __check_init__(self):
        check_tableau("DescriptorSDIRK4", A16, B16, C16)
        check_tol_factor("DescriptorSDIRK4", self.tol_factor)
        _check_newton_max("DescriptorSDIRK4", self.newton_max)

    def attempt(self, ode, t, v0, h, scale, cache=None):
        _check_ode("DescriptorSDIRK4", ode)
        beta, gh = GAMMA16 * GAMMA16 * h * h, GAMMA16 * h
        z0, _, ok0, lu, lam_w = ode.descriptor_start(t, v0, beta, gh)
        sc = _newton_scale(ode, scale, h * SUM_ABS_B16, lam_w)
        solve = lambda r: jsl.lu_solve(lu, r)  # noqa: E731
        nv = ode.nv
        dt = v0.dtype
        mu, a16, c16 = jnp.asarray(MU16, dt), jnp.asarray(A16, dt), jnp.asarray(C16, dt)

        def stage(carry, i):
            # one traced stage for all five (a scan): rows j >= i of S are still zero, μ and A strictly
            # lower triangular apart from the diagonal γ, which the rows' masks drop
            S, z, ok, iters, eta = carry
            low = jnp.arange(5) < i
            ytil = h * c16[i] * v0 + h * h * (jnp.where(low, mu[i], 0.0) @ S)
            ydtil = v0 + h * (jnp.where(low, a16[i], 0.0) @ S)
            res = lambda zz: ode.descriptor_residual(t + c16[i] * h, ytil, ydtil, beta, gh, zz)  # noqa: E731
            z, ok_i, it_i, eta, _ = newton(res, solve, z, sc, max_iter=self.newton_max, eta_old=eta)
            return (S.at[i].set(z[:nv][ode.ind]), z, ok & ok_i, iters + it_i, eta), None

        init = (jnp.zeros((5, ode.ind.shape[0]), dt), z0, ok0, jnp.array(0), jnp.array(1.0, dt))
        (S, _, ok, iters, _), _ = jax.lax.scan(stage, init, jnp.arange(5))
        y1 = h * v0 + h * h * (PHI16 @ S)
        yd1 = v0 + h * (B16 @ S)
        one = jnp.array(1, jnp.int32)
        return Attempt(y1, yd1, h * h * (EPHI16 @ S), h * (EB16 @ S), ok=ok, rhs=1 + iters, jac=one, lu=one,
                       newton=iters, cache=cache)


__all__ = ["DescriptorTrapezoidal", "DescriptorSDIRK4"]
