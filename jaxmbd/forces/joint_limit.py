"""Joint limits: a one-sided compliant stop at each end of a hinge or slide
joint's range, with the contact law of :mod:`jaxmbd.forces.law` (a
Hunt-Crossley spring-damper that never pulls, smoothed over an onset width).

Past the upper bound the penetration is δ = q - upper and the stop pushes
back with -f_n(δ, q̇); below the lower bound δ = lower - q and it pushes with
+f_n(δ, -q̇).  Inside the range the force is exactly zero.  Potential: the
law's elastic energy of both stops."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import scalar
from ..mujoco_defaults import SOLIMP, SOLREF
from .base import JointElement, SoftRows, f64, make
from .law import normal_force, normal_potential


class JointLimit(SoftRows, JointElement):
    """``JointLimit(joint, lower, upper, ...)``: the joint (named by its body) must be a hinge or slide
    joint; ``lower < upper`` (radians or metres, in the joint's coordinate).  Two laws:

    * MuJoCo's soft constraint (:mod:`jaxmbd.forces.soft`; the default, without ``stiffness``):
      ``solref`` (default (0.02, 1)), ``solimp`` (default (0.9, 0.95, 0.001, 0.5, 2)) and
      ``invweight`` (the row's Â, MuJoCo's ``dof_invweight0``; None: (H⁻¹)_ii at the model's q0,
      filled in when the model is built);
    * the penalty law of :mod:`jaxmbd.forces.law`, given directly: ``stiffness`` k > 0 (N m/rad^p or
      N/m^p), ``damping`` c ≥ 0 (s/rad or s/m: the Hunt-Crossley factor 1 + c δ̇), ``exponent``
      p ≥ 1, ``width`` w ≥ 0 (the onset ramp), ``viscous`` b ≥ 0 (N m s/rad or N s/m: damping that
      does not grow with the penetration).

    After binding, one row per limited DoF."""
    dofs: tuple = eqx.field(static=True)       # joint names, then DoF indices
    lower: jax.Array                           # (n,)
    upper: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    exponent: jax.Array
    width: jax.Array
    viscous: jax.Array
    soft: jax.Array                            # (n,) 1 for the soft law
    solref: jax.Array                          # (n, 2)
    solimp: jax.Array                          # (n, 5)
    invweight: jax.Array                       # (n,) (NaN: to be filled in at build time)
    law: str = eqx.field(static=True)          # "penalty", "soft" or "mixed"

    def __init__(self, joint, lower, upper, *, stiffness=None, damping=0.0, exponent=1.0, width=0.0, viscous=0.0,
                 solref=None, solimp=None, invweight=None):
        from .soft import check_solimp, check_solref
        what = f"joint limit on {joint!r}"
        lo, hi = scalar(lower, f"{what}: lower"), scalar(upper, f"{what}: upper")
        if not lo < hi:
            raise ValueError(f"{what}: lower ({lo}) must be below upper ({hi})")
        soft = stiffness is None
        if soft:
            k, c, p, w, bv = 1.0, 0.0, 1.0, 0.0, 0.0
            sr = check_solref(SOLREF if solref is None else solref, f"{what}: solref")
            si = check_solimp(SOLIMP if solimp is None else solimp, f"{what}: solimp")
            iw = np.nan if invweight is None else scalar(invweight, f"{what}: invweight")
            if not (np.isnan(iw) or iw > 0):
                raise ValueError(f"{what}: invweight must be > 0, got {iw}")
        else:
            if solref is not None or solimp is not None or invweight is not None:
                raise ValueError(f"{what}: give either stiffness (the penalty law) or solref/solimp (MuJoCo's "
                                 "soft constraint), not both")
            k, c = scalar(stiffness, f"{what}: stiffness"), scalar(damping, f"{what}: damping")
            p, w = scalar(exponent, f"{what}: exponent"), scalar(width, f"{what}: width")
            bv = scalar(viscous, f"{what}: viscous")
            if k <= 0 or c < 0 or p < 1 or w < 0 or bv < 0:
                raise ValueError(f"{what}: needs stiffness > 0, damping >= 0, exponent >= 1, width >= 0 and "
                                 f"viscous >= 0 (got {k}, {c}, {p}, {w}, {bv})")
            sr, si, iw = SOLREF, SOLIMP, 1.0
        self.dofs = (joint,)
        self.lower, self.upper = f64([lo]), f64([hi])
        self.stiffness, self.damping = f64([k]), f64([c])
        self.exponent, self.width = f64([p]), f64([w])
        self.viscous = f64([bv])
        self.soft, self.solref, self.solimp = f64([float(soft)]), f64([sr]), f64([si])
        self.invweight = f64([iw])
        self.law = "soft" if soft else "penalty"

    @classmethod
    def merge(cls, elements):
        if len(elements) == 1:
            return elements[0]
        laws = {e.law for e in elements}
        fields = {f.name: getattr(elements[0], f.name) for f in dataclasses.fields(cls)}
        for name in fields:
            if name == "dofs":
                fields[name] = tuple(d for e in elements for d in e.dofs)
            elif name == "law":
                fields[name] = laws.pop() if len(laws) == 1 else "mixed"
            else:
                fields[name] = jnp.concatenate([getattr(e, name) for e in elements])
        return make(cls, **fields)

    def bind(self, ctx):
        joint, = self.dofs
        what = f"joint limit on {joint!r}"
        first, n, jtype = ctx.joint(joint, what)
        if n != 1 or jtype not in ("revolute", "prismatic"):
            raise ValueError(f"{what}: limits are for hinge (revolute) and slide (prismatic) joints, "
                             f"not {jtype}")
        return make(type(self), **dict({f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
                                       dofs=(first,)))

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
        """The penalty limits' generalized force (the soft ones act in :mod:`jaxmbd.forces.soft`)."""
        if self.law == "soft":
            return jnp.zeros(model.nv, jnp.result_type(q, v, float))
        x, dofs = self._coords(model, q)
        xd = v[dofs]
        k, c, p, w, b = self.stiffness, self.damping, self.exponent, self.width, self.viscous
        f = (normal_force(self.lower - x, -xd, k, p, c, w, b)
             - normal_force(x - self.upper, xd, k, p, c, w, b))
        if self.law == "mixed":
            f = jnp.where(self.soft > 0, 0.0, f)
        return jnp.zeros(model.nv, jnp.result_type(q, v, float)).at[dofs].add(f)

    def energy(self, model, q, m=None):
        """The penalty limits' elastic energy (the soft law has no potential: zero)."""
        if self.law == "soft":
            return jnp.zeros((), jnp.result_type(q, float))
        x, _ = self._coords(model, q)
        k, p, w = self.stiffness, self.exponent, self.width
        e = normal_potential(self.lower - x, k, p, w) + normal_potential(x - self.upper, k, p, w)
        return jnp.sum(jnp.where(self.soft > 0, 0.0, e))

    @property
    def has_soft(self):
        return self.law != "penalty"

    def soft_rows(self, model, q, v, kin=None, axes=None):
        """One normal row per soft limit (:mod:`jaxmbd.forces.soft`), at the nearer bound: r = q - lower
        with J = +e, or r = upper - q with J = -e (the other bound is never active at once)."""
        from .soft import FrictionRows, NormalRows
        x, dofs = self._coords(model, q)
        dl, du = x - self.lower, self.upper - x
        low = dl <= du
        r = jnp.where(low, dl, du)
        sign = jnp.where(low, 1.0, -1.0)
        if self.law == "mixed":
            r = jnp.where(self.soft > 0, r, 1e9)
        J = jnp.zeros((len(dofs), model.nv), r.dtype).at[np.arange(len(dofs)), dofs].set(sign)
        N = NormalRows(J, r, sign * v[dofs], self.solref, self.solimp, self.invweight)
        return N, FrictionRows(jnp.zeros((0, model.nv), r.dtype), *(jnp.zeros(0, r.dtype),) * 5,
                               np.zeros(0, np.int64), jnp.zeros(0, r.dtype), np.zeros(0, np.int64)), None


def joint_limit_penetrations(model, q):
    """(n, 2) the penetrations of every joint limit of the model (``JointLimit.penetrations``; columns:
    lower, upper), in the order the limits were added; (0, 2) without limits."""
    from .base import elements
    rows = [e.penetrations(model, q) for e in elements(model) if isinstance(e, JointLimit)]
    return jnp.concatenate(rows) if rows else jnp.zeros((0, 2), jnp.result_type(q, float))
