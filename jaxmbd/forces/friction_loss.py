"""Joint friction loss (MuJoCo's ``frictionloss``): dry friction on a joint's
DoFs, at most ``loss`` (N m or N) in either direction.

It acts in the soft-constraint stage (:mod:`jaxmbd.forces.soft`) as one
frictional row per DoF, as MuJoCo's: reference acceleration -B q̇ (B from
``solref``), impedance solimp's dmin (the row's distance is 0), regularizer
(1 - d)/d · Â with Â the DoF's ``dof_invweight0``, and the force scaled
smoothly into [-loss, loss].  A joint under a load below the loss holds,
creeping at most at the rate the regularizer allows (the soft constraint's,
as MuJoCo's); above it, it slides against a force of the loss."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import scalar
from .base import JointElement, SoftRows, f64, make


class FrictionLoss(SoftRows, JointElement):
    """``FrictionLoss(joint, loss, solref=(0.02, 1), solimp=(0.9, 0.95, 0.001, 0.5, 2), invweight=None)``:
    every DoF of the joint (named by its body) gets a dry friction of at most ``loss`` > 0;
    ``invweight`` is the rows' Â (None: (H⁻¹)_ii at the model's q0, filled in when it is built)."""
    dofs: tuple = eqx.field(static=True)        # joint names, then DoF indices
    loss: jax.Array                             # (n,) per DoF
    solref: jax.Array                           # (n, 2)
    solimp: jax.Array                           # (n, 5)
    invweight: jax.Array                        # (n,)

    def __init__(self, joint, loss, *, solref=None, solimp=None, invweight=None):
        from .soft import SOLIMP_DEFAULT, SOLREF_DEFAULT, check_solimp, check_solref
        what = f"friction loss on {joint!r}"
        f = scalar(loss, f"{what}: loss")
        if not f > 0:
            raise ValueError(f"{what}: loss must be > 0, got {f}")
        sr = check_solref(SOLREF_DEFAULT if solref is None else solref, f"{what}: solref")
        si = check_solimp(SOLIMP_DEFAULT if solimp is None else solimp, f"{what}: solimp")
        iw = np.nan if invweight is None else scalar(invweight, f"{what}: invweight")
        self.dofs = (joint,)
        self.loss, self.solref, self.solimp, self.invweight = f64([f]), f64([sr]), f64([si]), f64([iw])

    def bind(self, ctx):
        joint, = self.dofs
        first, n, _ = ctx.joint(joint, f"friction loss on {joint!r}")
        rep = lambda a: jnp.repeat(a, n, axis=0)  # noqa: E731
        return make(type(self), dofs=tuple(range(first, first + n)), loss=rep(self.loss), solref=rep(self.solref),
                    solimp=rep(self.solimp), invweight=rep(self.invweight))

    def couplings(self, topo):
        return ()

    def force(self, model, q, v):
        return jnp.zeros(model.nv, jnp.result_type(q, v, float))

    def energy(self, model, q, m=None):
        return jnp.zeros((), jnp.result_type(q, float))

    has_soft = True

    def soft_rows(self, model, q, v, kin=None, axes=None):
        from .soft import MINVAL, FrictionRows, NormalRows, impedance, ref_coefficients
        dofs = np.asarray(self.dofs, np.int64)
        k = len(dofs)
        dt = jnp.result_type(q, v, float)
        J = jnp.zeros((k, model.nv), dt).at[np.arange(k), dofs].set(1.0)
        d = impedance(jnp.zeros(k, dt), self.solimp)
        _, B = ref_coefficients(self.solref, self.solimp)
        R = jnp.maximum((1.0 - d) / d * self.invweight, MINVAL)
        N = NormalRows(jnp.zeros((0, model.nv), dt), *(jnp.zeros(0, dt),) * 2, jnp.zeros((0, 2), dt),
                       jnp.zeros((0, 5), dt), jnp.zeros(0, dt))
        T = FrictionRows(J, v[dofs], B, R, jnp.ones(k, dt), jnp.ones(k, dt), np.full(k, -1), self.loss,
                         np.arange(k))
        return N, T, None
