"""Joint couplings (MuJoCo's ``<equality><joint>``): a hinge or slide joint held to a polynomial of
another, ``q1 - q1₀ = c₀ + c₁ x + c₂ x² + c₃ x³ + c₄ x⁴`` with ``x = q2 - q2₀`` (q₀: the model's
q0, MuJoCo's qpos0), or to ``q1₀ + c₀`` alone: the mimic joints of grippers and linkages.

Each coupling is one bilateral soft row of MuJoCo's soft-constraint stage (:mod:`jaxmbd.forces.soft`),
as MuJoCo's equality rows: its residual r = q1 - q1₀ - p(x), its Jacobian J = e₁ - p'(x) e₂, the
reference acceleration ``-B J v - K d(|r|) r``, the impedance d from ``solimp`` at |r|, the regularizer
(1 - d)/d · Â with Â the sum of the two DoFs' ``dof_invweight0``, and a force without bounds (the
stage's frictional rows with an unreachable bound)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import vec
from .base import JointElement, SoftRows, dofs_of_bodies, f64, make

UNBOUNDED = 1e30   # the rows' force bound: far beyond any force, finite for the stage's cone scaling


class JointCoupling(SoftRows, JointElement):
    """``JointCoupling(joint1, joint2=None, polycoef=(0, 1, 0, 0, 0), solref=(0.02, 1),
    solimp=(0.9, 0.95, 0.001, 0.5, 2))``: joints named by their bodies, each with one scalar DoF.
    Bound rows: ``dofs`` (k, 2) static DoF pairs (-1: no second joint), ``bodies`` (k, 2); traced
    ``polycoef`` (k, 5), ``ref`` (k, 2) the joints' q0 (NaN until the build fills it), ``solref``,
    ``solimp``, ``invweight`` (k,) (NaN until the build fills it with Â)."""
    dofs: tuple = eqx.field(static=True)
    bodies: tuple = eqx.field(static=True)
    polycoef: jax.Array
    ref: jax.Array
    solref: jax.Array
    solimp: jax.Array
    invweight: jax.Array

    def __init__(self, joint1, joint2=None, *, polycoef=(0.0, 1.0, 0.0, 0.0, 0.0), solref=None, solimp=None):
        from .soft import SOLIMP_DEFAULT, SOLREF_DEFAULT, check_solimp, check_solref
        what = f"joint coupling of {joint1!r}" + (f" to {joint2!r}" if joint2 is not None else "")
        if joint2 == joint1:
            raise ValueError(f"{what}: a joint cannot be coupled to itself")
        c = vec(polycoef, 5, f"{what}: polycoef")
        self.dofs = ((joint1, joint2),)
        self.bodies = ((joint1, joint2),)
        self.polycoef = f64([c])
        self.ref = f64([[np.nan, np.nan]])
        self.solref = f64([check_solref(SOLREF_DEFAULT if solref is None else solref, f"{what}: solref")])
        self.solimp = f64([check_solimp(SOLIMP_DEFAULT if solimp is None else solimp, f"{what}: solimp")])
        self.invweight = f64([np.nan])

    def bind(self, ctx):
        dofs, bodies = [], []
        for j1, j2 in self.dofs:
            what = f"joint coupling of {j1!r}"
            pair, owners = [], []
            for j in (j1, j2):
                if j is None:
                    pair.append(-1), owners.append(-1)
                    continue
                first, n, jt = ctx.joint(j, what)
                if n != 1:
                    raise ValueError(f"{what}: joint {j!r} is {jt}; couplings take hinge and slide joints")
                pair.append(first), owners.append(int(ctx.topo.dof_body[first]))
            dofs.append(tuple(pair)), bodies.append(tuple(owners))
        return make(type(self), dofs=tuple(dofs), bodies=tuple(bodies), polycoef=self.polycoef, ref=self.ref,
                    solref=self.solref, solimp=self.solimp, invweight=self.invweight)

    def filled(self, model, dof_iw):
        """The element with its unset ``ref`` (the joints' q0) and ``invweight`` (the sum of the two
        DoFs' ``dof_invweight0``, as MuJoCo's diagApprox of a joint equality) filled in."""
        d = np.asarray(self.dofs, np.int64)
        q0 = np.asarray(model.q0, np.float64)
        qadr = model.topo.dof_qadr
        ref0 = np.stack([q0[qadr[d[:, 0]]], np.where(d[:, 1] >= 0, q0[qadr[np.maximum(d[:, 1], 0)]], 0.0)], 1)
        ref = np.asarray(self.ref, np.float64)
        iw0 = dof_iw[d[:, 0]] + np.where(d[:, 1] >= 0, dof_iw[np.maximum(d[:, 1], 0)], 0.0)
        iw = np.asarray(self.invweight, np.float64)
        return make(type(self), dofs=self.dofs, bodies=self.bodies, polycoef=self.polycoef,
                    ref=jnp.asarray(np.where(np.isnan(ref), ref0, ref)), solref=self.solref, solimp=self.solimp,
                    invweight=jnp.asarray(np.where(np.isnan(iw), iw0, iw)))

    def couplings(self, topo):
        return tuple(sorted({dofs_of_bodies(topo, b) for b in self.bodies if b[1] >= 0}))

    def force(self, model, q, v):
        return jnp.zeros(model.nv, jnp.result_type(q, v, float))

    def energy(self, model, q, m=None):
        return jnp.zeros((), jnp.result_type(q, float))

    has_soft = True

    def residuals(self, model, q):
        """(r (k,), p'(x) (k,)): the couplings' residuals and the polynomials' slopes at q."""
        d = np.asarray(self.dofs, np.int64)
        qadr = model.topo.dof_qadr
        two = jnp.asarray(d[:, 1] >= 0)
        q1 = q[qadr[d[:, 0]]]
        x = jnp.where(two, q[qadr[np.maximum(d[:, 1], 0)]] - self.ref[:, 1], 0.0)
        c = self.polycoef
        p = c[:, 0] + x * (c[:, 1] + x * (c[:, 2] + x * (c[:, 3] + x * c[:, 4])))
        dp = c[:, 1] + x * (2 * c[:, 2] + x * (3 * c[:, 3] + x * 4 * c[:, 4]))
        p = jnp.where(two, p, c[:, 0])
        return q1 - self.ref[:, 0] - p, jnp.where(two, dp, 0.0)

    def soft_rows(self, model, q, v, kin=None, axes=None):
        from .soft import MINVAL, FrictionRows, NormalRows, impedance, ref_coefficients
        d = np.asarray(self.dofs, np.int64)
        k = d.shape[0]
        dt = jnp.result_type(q, v, float)
        r, dp = self.residuals(model, q)
        J = jnp.zeros((k, model.nv), dt).at[np.arange(k), d[:, 0]].set(1.0)
        J = J.at[np.arange(k), np.maximum(d[:, 1], 0)].add(jnp.where(jnp.asarray(d[:, 1] >= 0), -dp, 0.0))
        imp = impedance(jnp.abs(r), self.solimp)
        K, B = ref_coefficients(self.solref, self.solimp)
        R = jnp.maximum((1.0 - imp) / imp * self.invweight, MINVAL)
        N = NormalRows(jnp.zeros((0, model.nv), dt), *(jnp.zeros(0, dt),) * 2, jnp.zeros((0, 2), dt),
                       jnp.zeros((0, 5), dt), jnp.zeros(0, dt))
        T = FrictionRows(J, J @ v, B, R, jnp.ones(k, dt), jnp.ones(k, dt), np.full(k, -1),
                         jnp.full(k, UNBOUNDED, dt), np.arange(k), kr=K * imp * r)
        return N, T, None
