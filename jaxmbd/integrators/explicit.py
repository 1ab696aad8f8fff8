"""Explicit baselines: semi-implicit (symplectic) Euler and RK4 with fixed
steps, and the adaptive Dormand-Prince 5(4) pair."""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .base import AbstractAdaptive, AbstractIntegrator, Attempt, check_tableau, check_tol_factor


def _zero_work(y):
    z = jnp.zeros((), jnp.int32)
    return dict(ok=jnp.array(True), jac=z, lu=z, newton=z)


class SemiImplicitEuler(AbstractIntegrator):
    """v1 = v0 + h a(q0, v0); q1 = q0 ⊕ h v1.  Order 1, fixed step."""
    name: ClassVar[str] = "euler"
    order: ClassVar[int] = 1

    def attempt(self, ode, t, v0, h, scale, cache=None):
        y0 = jnp.zeros_like(v0)
        yd1 = v0 + h * ode.g(t, y0, v0)
        y1 = h * yd1
        return Attempt(y1, yd1, jnp.zeros_like(y1), jnp.zeros_like(y1), rhs=jnp.array(1, jnp.int32),
                       **_zero_work(y1))


def _explicit_rk(ode, t, v0, h, A, b, c, bhat=None):
    """Explicit RK on w = (y, y'), w' = (y', g(t, y, y')), from y = 0.

    The stages run in a ``lax.scan`` (stage i reads row i of A), so the
    traced program holds one evaluation of the dynamics instead of one per
    stage: the humanoid's RK4 rollout compiles in about a third of the time.
    """
    s, n = len(b), v0.shape[0]
    dt = v0.dtype
    y0 = jnp.zeros_like(v0)
    A_, c_ = jnp.asarray(A, dt), jnp.asarray(c, dt)

    def stage(K, i):
        Ky, Kd = K
        y = y0 + h * (A_[i] @ Ky)
        yd = v0 + h * (A_[i] @ Kd)
        return (Ky.at[i].set(yd), Kd.at[i].set(ode.g(t + c_[i] * h, y, yd))), None

    (Ky, Kd), _ = jax.lax.scan(stage, (jnp.zeros((s, n), dt), jnp.zeros((s, n), dt)), jnp.arange(s))
    w = jnp.asarray(b, dt)
    y1, d1 = y0 + h * (w @ Ky), v0 + h * (w @ Kd)
    if bhat is None:
        return y1, d1, jnp.zeros_like(y1), jnp.zeros_like(y1), s
    e = jnp.asarray(np.asarray(b) - np.asarray(bhat), dt)
    return y1, d1, h * (e @ Ky), h * (e @ Kd), s


_RK4 = (np.array([[0, 0, 0, 0], [0.5, 0, 0, 0], [0, 0.5, 0, 0], [0, 0, 1, 0]], float),
        np.array([1, 2, 2, 1], float) / 6, np.array([0, 0.5, 0.5, 1.0]))


class RK4(AbstractIntegrator):
    """The classical fourth-order Runge-Kutta method, fixed step."""
    name: ClassVar[str] = "rk4"
    order: ClassVar[int] = 4

    def __check_init__(self):
        check_tableau("RK4", _RK4[0], _RK4[1], _RK4[2], strictly_lower=True)

    def attempt(self, ode, t, v0, h, scale, cache=None):
        y1, d1, ey, ed, n = _explicit_rk(ode, t, v0, h, *_RK4)
        return Attempt(y1, d1, ey, ed, rhs=jnp.array(n, jnp.int32), **_zero_work(y1))


_DP_A = np.array([
    [0, 0, 0, 0, 0, 0, 0],
    [1 / 5, 0, 0, 0, 0, 0, 0],
    [3 / 40, 9 / 40, 0, 0, 0, 0, 0],
    [44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0],
    [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0]])
_DP_B = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0])
_DP_BHAT = np.array([5179 / 57600, 0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40])
_DP_C = np.array([0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1])


class Dopri5(AbstractAdaptive):
    """Dormand-Prince 5(4), adaptive; the explicit baseline (standing in for the
    thesis's DEABM).  Seven RHS evaluations per attempt (no FSAL reuse: each
    step starts a new chart, see jaxmbd.odes.chart)."""
    name: ClassVar[str] = "dopri5"
    order: ClassVar[int] = 5
    error_order: ClassVar[int] = 4
    adaptive_steps: bool = True
    tol_factor: float = 1.0

    def __check_init__(self):
        check_tableau("Dopri5", _DP_A, _DP_B, _DP_C, strictly_lower=True)
        check_tol_factor("Dopri5", self.tol_factor)

    def attempt(self, ode, t, v0, h, scale, cache=None):
        y1, d1, ey, ed, n = _explicit_rk(ode, t, v0, h, _DP_A, _DP_B, _DP_C, _DP_BHAT)
        return Attempt(y1, d1, ey, ed, rhs=jnp.array(n, jnp.int32), **_zero_work(y1))
