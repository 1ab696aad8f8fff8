"""Joint and tendon couplings (MuJoCo's ``<equality><joint>`` and ``<equality><tendon>``): a
coordinate (a hinge or slide joint's, or a fixed tendon's length) held to a polynomial of another,
``L1 - L1₀ = c₀ + c₁ x + c₂ x² + c₃ x³ + c₄ x⁴`` with ``x = L2 - L2₀`` (₀: at the model's q0, MuJoCo's
qpos0), or to ``L1₀ + c₀`` alone: the mimic joints of grippers and linkages.

Both coordinates are linear in the joint coordinates, L = a · q over the scalar DoFs (a joint: a unit
row; a fixed tendon: its coefficients, :mod:`jaxmbd.forces.tendon`).  Each coupling is one bilateral
soft row of MuJoCo's soft-constraint stage (:mod:`jaxmbd.forces.soft`), as MuJoCo's equality rows: its
residual r = L1 - L1₀ - p(x), its Jacobian J = a₁ - p'(x) a₂, the reference acceleration
``-B J v - K d(|r|) r``, the impedance d from ``solimp`` at |r|, the regularizer (1 - d)/d · Â with Â
= a₁ H⁻¹ a₁ᵀ + a₂ H⁻¹ a₂ᵀ at q0 (MuJoCo's ``dof_invweight0`` or ``tendon_invweight0`` of the two), and a
force without bounds (the stage's frictional rows with an unreachable bound)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import vec
from .base import JointElement, SoftRows, dofs_of_bodies, f64, make

UNBOUNDED = 1e30   # the rows' force bound: far beyond any force, finite for the stage's cone scaling


def _soft(polycoef, solref, solimp, what):
    from .soft import SOLIMP_DEFAULT, SOLREF_DEFAULT, check_solimp, check_solref
    return (vec(polycoef, 5, f"{what}: polycoef"),
            check_solref(SOLREF_DEFAULT if solref is None else solref, f"{what}: solref"),
            check_solimp(SOLIMP_DEFAULT if solimp is None else solimp, f"{what}: solimp"))


class JointCoupling(SoftRows, JointElement):
    """``JointCoupling(joint1, joint2=None, polycoef=(0, 1, 0, 0, 0), solref=(0.02, 1),
    solimp=(0.9, 0.95, 0.001, 0.5, 2))``: joints named by their bodies, each with one scalar DoF
    (:func:`tendon_rows` makes the rows of tendon couplings).  Bound rows: ``dofs`` (static, per row the
    DoFs it involves), ``two`` (static, per row: whether it has a second coordinate); traced ``a1``,
    ``a2`` (k, nv) the two coordinates' rows over the DoFs, ``polycoef`` (k, 5), ``ref`` (k, 2) the
    coordinates at q0 and ``invweight`` (k,) (NaN until the build fills them), ``solref``, ``solimp``."""
    dofs: tuple = eqx.field(static=True)
    two: tuple = eqx.field(static=True)
    a1: jax.Array
    a2: jax.Array
    polycoef: jax.Array
    ref: jax.Array
    solref: jax.Array
    solimp: jax.Array
    invweight: jax.Array

    def __init__(self, joint1, joint2=None, *, polycoef=(0.0, 1.0, 0.0, 0.0, 0.0), solref=None, solimp=None):
        what = f"joint coupling of {joint1!r}" + (f" to {joint2!r}" if joint2 is not None else "")
        if joint2 == joint1:
            raise ValueError(f"{what}: a joint cannot be coupled to itself")
        c, sr, si = _soft(polycoef, solref, solimp, what)
        self.dofs = ((joint1, joint2),)       # names until bound
        self.two = (joint2 is not None,)
        self.a1 = self.a2 = jnp.zeros((1, 0))
        self.polycoef, self.solref, self.solimp = f64([c]), f64([sr]), f64([si])
        self.ref = f64([[np.nan, np.nan]])
        self.invweight = f64([np.nan])

    def bind(self, ctx):
        nv = ctx.topo.nv
        a1, a2, dofs = np.zeros((len(self.dofs), nv)), np.zeros((len(self.dofs), nv)), []
        for i, (j1, j2) in enumerate(self.dofs):
            what = f"joint coupling of {j1!r}"
            involved = []
            for j, a in ((j1, a1), (j2, a2)):
                if j is None:
                    continue
                first, n, jt = ctx.joint(j, what)
                if n != 1:
                    raise ValueError(f"{what}: joint {j!r} is {jt}; couplings take hinge and slide joints")
                a[i, first] = 1.0
                involved.append(first)
            dofs.append(tuple(involved))
        return make(type(self), dofs=tuple(dofs), two=self.two, a1=f64(a1), a2=f64(a2), polycoef=self.polycoef,
                    ref=self.ref, solref=self.solref, solimp=self.solimp, invweight=self.invweight)

    def filled(self, model, dof_iw=None):
        """The element with its unset ``ref`` (the coordinates at q0) and ``invweight`` (Â: a₁ H⁻¹ a₁ᵀ +
        a₂ H⁻¹ a₂ᵀ at q0) filled in."""
        from ..crba import host_mass_matrix
        qs = np.asarray(model.q0, np.float64)[model.topo.dof_qadr]
        a1, a2 = np.asarray(self.a1, np.float64), np.asarray(self.a2, np.float64)
        Hinv = np.linalg.inv(np.asarray(host_mass_matrix(model, model.q0), np.float64))
        ref0 = np.stack([a1 @ qs, a2 @ qs], 1)
        iw0 = np.einsum("ki,ij,kj->k", a1, Hinv, a1) + np.einsum("ki,ij,kj->k", a2, Hinv, a2)
        ref, iw = np.asarray(self.ref, np.float64), np.asarray(self.invweight, np.float64)
        return make(type(self), dofs=self.dofs, two=self.two, a1=self.a1, a2=self.a2, polycoef=self.polycoef,
                    ref=jnp.asarray(np.where(np.isnan(ref), ref0, ref)), solref=self.solref, solimp=self.solimp,
                    invweight=jnp.asarray(np.where(np.isnan(iw), iw0, iw)))

    def couplings(self, topo):
        return tuple(sorted({dofs_of_bodies(topo, tuple(int(topo.dof_body[k]) for k in d))
                             for d in self.dofs if len(d) > 1}))

    def force(self, model, q, v):
        return jnp.zeros(model.nv, jnp.result_type(q, v, float))

    def energy(self, model, q, m=None):
        return jnp.zeros((), jnp.result_type(q, float))

    has_soft = True

    def residuals(self, model, q):
        """(r (k,), p'(x) (k,)): the couplings' residuals and the polynomials' slopes at q."""
        qs = q[model.topo.dof_qadr]
        two = jnp.asarray(np.asarray(self.two, bool))
        x = jnp.where(two, self.a2 @ qs - self.ref[:, 1], 0.0)
        c = self.polycoef
        p = c[:, 0] + x * (c[:, 1] + x * (c[:, 2] + x * (c[:, 3] + x * c[:, 4])))
        dp = c[:, 1] + x * (2 * c[:, 2] + x * (3 * c[:, 3] + x * 4 * c[:, 4]))
        p = jnp.where(two, p, c[:, 0])
        return self.a1 @ qs - self.ref[:, 0] - p, jnp.where(two, dp, 0.0)

    def soft_rows(self, model, q, v, kin=None, axes=None):
        from .soft import MINVAL, FrictionRows, NormalRows, impedance, ref_coefficients
        k = len(self.dofs)
        dt = jnp.result_type(q, v, float)
        r, dp = self.residuals(model, q)
        J = self.a1 - dp[:, None] * self.a2
        imp = impedance(jnp.abs(r), self.solimp)
        K, B = ref_coefficients(self.solref, self.solimp)
        R = jnp.maximum((1.0 - imp) / imp * self.invweight, MINVAL)
        N = NormalRows(jnp.zeros((0, model.nv), dt), *(jnp.zeros(0, dt),) * 2, jnp.zeros((0, 2), dt),
                       jnp.zeros((0, 5), dt), jnp.zeros(0, dt))
        T = FrictionRows(J, J @ v, B, R, jnp.ones(k, dt), jnp.ones(k, dt), np.full(k, -1),
                         jnp.full(k, UNBOUNDED, dt), np.arange(k), kr=K * imp * r)
        return N, T, None


def tendon_rows(specs, resolved, nv):
    """A bound :class:`JointCoupling` of tendon couplings (MuJoCo's ``<equality><tendon>``): ``specs``
    [(tendon1, tendon2 or None, polycoef, solref, solimp)], ``resolved`` the fixed tendons
    ({name: (dofs, coefficients)}, :func:`jaxmbd.forces.tendon.resolve`); None without specs."""
    if not specs:
        return None
    a1, a2, dofs, two, poly, sr, si = np.zeros((len(specs), nv)), np.zeros((len(specs), nv)), [], [], [], [], []
    for i, (t1, t2, polycoef, solref, solimp) in enumerate(specs):
        what = f"tendon coupling of {t1!r}"
        involved = set()
        for t, a in ((t1, a1), (t2, a2)):
            if t is None:
                continue
            if t not in resolved:
                raise ValueError(f"{what}: no tendon named {t!r}")
            td, c = resolved[t]
            a[i, list(td)] += c
            involved |= set(td)
        c, r, m = _soft(polycoef, solref, solimp, what)
        dofs.append(tuple(sorted(involved))), two.append(t2 is not None), poly.append(c), sr.append(r), si.append(m)
    k = len(specs)
    return make(JointCoupling, dofs=tuple(dofs), two=tuple(two), a1=f64(a1), a2=f64(a2), polycoef=f64(poly),
                ref=f64(np.full((k, 2), np.nan)), solref=f64(sr), solimp=f64(si), invweight=f64(np.full(k, np.nan)))
