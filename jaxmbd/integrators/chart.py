"""The equations of motion as a second-order ODE in a local chart.

Each step starts a fresh chart at its initial configuration q0:
``q(y) = integrate_q(model, q0, y)`` with y in R^nv and y = 0 at the start
of the step.  For joints with scalar coordinates (revolute, prismatic,
helical, planar, the translation of a free joint) y is the coordinate
increment and y' is the joint velocity.  For a rotation (ball joint, the
rotation of a free joint) y is the body-frame rotation vector, and the
body-frame angular velocity is ``w = Jr(y) y'`` with the right Jacobian of
SO(3).  So

    y'' = g(t, y, y') = Jr(y)^-1 (a - (dJr(y)[y']) y'),  a = forward dynamics(q(y), Jr(y) y', tau),

a smooth ODE on R^nv to which every method applies with its full order (a
Runge-Kutta-Munthe-Kaas construction).  Jr(0) = I, so y'(0) = v0, and at
y = 0 the Jacobians of g are those of the forward dynamics in the tangent
space.  After the step, ``q1 = q(y1)`` (renormalised) and ``v1 = Jr(y1) y1'``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import joints, kinematics
from ..aba import forward_dynamics
from ..spatial import skew

_SMALL = 1e-4  # below this angle (rad) the SO(3) series are used


@functools.lru_cache(maxsize=None)
def rotation_dofs(topo) -> np.ndarray:
    """(k, 3) DoF indices of every rotation-vector triple (ball joints, free-joint rotations)."""
    return joints.rotation_dofs(topo)


@functools.lru_cache(maxsize=None)
def coordinate_of_dof(topo) -> np.ndarray:
    """(nv,) the q index whose magnitude scales DoF k's position error (the
    coordinate itself for scalar joints and free-joint translations), -1 for rotation DoFs."""
    return joints.coordinate_of_dof(topo)


def _coeffs(phi):
    """Safe (theta², c1, c2, c3) with c1 = (1 - cos θ)/θ², c2 = (θ - sin θ)/θ³,
    c3 = 1/θ² - (1 + cos θ)/(2 θ sin θ)."""
    t2 = jnp.sum(phi * phi, axis=-1)
    small = t2 < _SMALL ** 2
    t2s = jnp.where(small, 1.0, t2)  # double-where: no NaN gradients at 0
    t = jnp.sqrt(t2s)
    c1 = jnp.where(small, 0.5 - t2 / 24.0, (1.0 - jnp.cos(t)) / t2s)
    c2 = jnp.where(small, 1.0 / 6.0 - t2 / 120.0, (t - jnp.sin(t)) / (t2s * t))
    c3 = jnp.where(small, 1.0 / 12.0 + t2 / 720.0, 1.0 / t2s - (1.0 + jnp.cos(t)) / (2.0 * t * jnp.sin(t)))
    return c1, c2, c3


def right_jacobian(phi):
    """Jr(φ) = I - c1 [φ]x + c2 [φ]x², so that w_body = Jr(φ) φ' for R = R0 exp([φ]x)."""
    K = jax.vmap(skew)(phi) if phi.ndim > 1 else skew(phi)
    c1, c2, _ = _coeffs(phi)
    I = jnp.broadcast_to(jnp.eye(3, dtype=phi.dtype), K.shape)
    return I - c1[..., None, None] * K + c2[..., None, None] * (K @ K)


def right_jacobian_inv(phi):
    """Jr(φ)^-1 = I + ½ [φ]x + c3 [φ]x²."""
    K = jax.vmap(skew)(phi) if phi.ndim > 1 else skew(phi)
    _, _, c3 = _coeffs(phi)
    I = jnp.broadcast_to(jnp.eye(3, dtype=phi.dtype), K.shape)
    return I + 0.5 * K + c3[..., None, None] * (K @ K)


class ChartODE:
    """y'' = g(t, y, y') around q0 for a model, control and parameters.

    control: None (zero torque), an (nv,) array, or a function
    ``tau(t, q, v, params)``."""

    def __init__(self, model, q0, control=None, params=None, dynamics="aba"):
        self.model, self.q0, self.control, self.params = model, q0, control, params
        self.dynamics = dynamics
        self.R = rotation_dofs(model.topo)
        self.time_dependent = callable(control)

    def velocity(self, y, yd):
        """Joint velocity v = Jr(y) y' (identity on scalar DoFs)."""
        if not len(self.R):
            return yd
        w = jnp.einsum("kij,kj->ki", right_jacobian(y[self.R]), yd[self.R])
        return yd.at[self.R].set(w)

    def config(self, y):
        return kinematics.integrate_q(self.model, self.q0, y)

    def tau(self, t, q, v):
        c = self.control
        if c is None:
            return jnp.zeros(self.model.nv, q.dtype)
        if callable(c):
            return jnp.asarray(c(t, q, v, self.params), q.dtype)
        return jnp.broadcast_to(jnp.asarray(c, q.dtype), (self.model.nv,))

    def accel(self, t, q, v):
        return forward_dynamics(self.model, q, v, self.tau(t, q, v), method=self.dynamics)

    def g(self, t, y, yd):
        q, v = self.config(y), self.velocity(y, yd)
        a = self.accel(t, q, v)
        if not len(self.R):
            return a
        _, corr = jax.jvp(lambda yy: self.velocity(yy, yd), (y,), (yd,))
        r = a - corr
        return r.at[self.R].set(jnp.einsum("kij,kj->ki", right_jacobian_inv(y[self.R]), r[self.R]))

    def g_and_jac(self, t, y, yd):
        """g and its Jacobians J1 = dg/dy, J2 = dg/dy' (forward-mode autodiff)."""
        nv = y.shape[0]

        def f(z):
            out = self.g(t, z[:nv], z[nv:])
            return out, out
        J, g0 = jax.jacfwd(f, has_aux=True)(jnp.concatenate([y, yd]))
        return g0, J[:, :nv], J[:, nv:]

    def g_t(self, t, y, yd):
        """dg/dt (non-zero only for a time-dependent control)."""
        if not self.time_dependent:
            return jnp.zeros_like(y)
        return jax.jvp(lambda s: self.g(s, y, yd), (t,), (jnp.ones_like(t),))[1]

    def finish(self, y, yd):
        """Chart point -> (q, v) on the manifold."""
        q = kinematics.normalize_q(self.model, self.config(y))
        return q, self.velocity(y, yd)

    def position_magnitude(self, q):
        """Per-DoF |coordinate| used by the relative error scale (0 for rotation DoFs)."""
        idx = coordinate_of_dof(self.model.topo)
        return jnp.where(idx >= 0, jnp.abs(q[np.maximum(idx, 0)]), 0.0)
