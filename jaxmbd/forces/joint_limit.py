"""Joint limits: a one-sided compliant stop at each end of a hinge or slide
joint's range, with the contact law of :mod:`jaxmbd.forces.law` (a
Hunt-Crossley spring-damper that never pulls, smoothed over an onset width).

Past the upper bound the penetration is δ = q - upper and the stop pushes
back with -f_n(δ, q̇); below the lower bound δ = lower - q and it pushes with
+f_n(δ, -q̇).  Inside the range the force is exactly zero.  Potential: the
law's elastic energy of both stops."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import scalar
from .base import JointElement, f64, make
from .law import normal_force, normal_potential


class JointLimit(JointElement):
    """``JointLimit(joint, lower, upper, stiffness=, damping=, exponent=1, width=0)``: the joint (named
    by its body) must be a hinge or slide joint; ``lower < upper`` (radians or metres, in the joint's
    coordinate).  ``stiffness`` k > 0 (N m/rad^p or N/m^p), ``damping`` c ≥ 0 (s/rad or s/m: the
    Hunt-Crossley factor 1 + c δ̇), ``exponent`` p ≥ 1, ``width`` w ≥ 0 (the onset ramp),
    ``viscous`` b ≥ 0 (N m s/rad or N s/m: damping that does not grow with the penetration).
    After binding, one row per limited DoF."""
    dofs: tuple = eqx.field(static=True)       # joint names, then DoF indices
    lower: jax.Array                           # (n,)
    upper: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    exponent: jax.Array
    width: jax.Array
    viscous: jax.Array

    def __init__(self, joint, lower, upper, *, stiffness, damping=0.0, exponent=1.0, width=0.0, viscous=0.0):
        what = f"joint limit on {joint!r}"
        lo, hi = scalar(lower, f"{what}: lower"), scalar(upper, f"{what}: upper")
        if not lo < hi:
            raise ValueError(f"{what}: lower ({lo}) must be below upper ({hi})")
        k, c = scalar(stiffness, f"{what}: stiffness"), scalar(damping, f"{what}: damping")
        p, w = scalar(exponent, f"{what}: exponent"), scalar(width, f"{what}: width")
        bv = scalar(viscous, f"{what}: viscous")
        if k <= 0 or c < 0 or p < 1 or w < 0 or bv < 0:
            raise ValueError(f"{what}: needs stiffness > 0, damping >= 0, exponent >= 1, width >= 0 and "
                             f"viscous >= 0 (got {k}, {c}, {p}, {w}, {bv})")
        self.dofs = (joint,)
        self.lower, self.upper = f64([lo]), f64([hi])
        self.stiffness, self.damping = f64([k]), f64([c])
        self.exponent, self.width = f64([p]), f64([w])
        self.viscous = f64([bv])

    def bind(self, ctx):
        joint, = self.dofs
        what = f"joint limit on {joint!r}"
        first, n, jtype = ctx.joint(joint, what)
        if n != 1 or jtype not in ("revolute", "prismatic"):
            raise ValueError(f"{what}: limits are for hinge (revolute) and slide (prismatic) joints, "
                             f"not {jtype}")
        return make(type(self), dofs=(first,), lower=self.lower, upper=self.upper, stiffness=self.stiffness,
                    damping=self.damping, exponent=self.exponent, width=self.width, viscous=self.viscous)

    def couplings(self, topo):
        return ()

    def _coords(self, model, q):
        dofs = np.array(self.dofs, np.int64)
        return q[model.topo.dof_qadr[dofs]], dofs

    def penetrations(self, model, q):
        """(n, 2): how far each limited coordinate is past its lower and its upper bound (≤ 0 inside)."""
        x, _ = self._coords(model, q)
        return jnp.stack([self.lower - x, x - self.upper], axis=-1)

    def force(self, model, q, v):
        x, dofs = self._coords(model, q)
        xd = v[dofs]
        k, c, p, w, b = self.stiffness, self.damping, self.exponent, self.width, self.viscous
        f = (normal_force(self.lower - x, -xd, k, p, c, w, b)
             - normal_force(x - self.upper, xd, k, p, c, w, b))
        return jnp.zeros(model.nv, jnp.result_type(q, v, float)).at[dofs].add(f)

    def energy(self, model, q, m=None):
        x, _ = self._coords(model, q)
        k, p, w = self.stiffness, self.exponent, self.width
        return jnp.sum(normal_potential(self.lower - x, k, p, w) + normal_potential(x - self.upper, k, p, w))


def joint_limit_penetrations(model, q):
    """(n, 2) the penetrations of every joint limit of the model (``JointLimit.penetrations``; columns:
    lower, upper), in the order the limits were added; (0, 2) without limits."""
    from .base import elements
    rows = [e.penetrations(model, q) for e in elements(model) if isinstance(e, JointLimit)]
    return jnp.concatenate(rows) if rows else jnp.zeros((0, 2), jnp.result_type(q, float))
