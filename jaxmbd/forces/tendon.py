"""Fixed tendons (MuJoCo's ``<tendon><fixed>``): a length that is a linear combination of hinge and
slide coordinates, L = Σ cᵢ qᵢ, with a spring (stiffness, and a dead band between the two
``springlength`` values where it pulls nothing) and damping on its rate L' = Σ cᵢ q̇ᵢ, a passive force
-k (L - L_s) - b L' applied through the coefficients (MuJoCo's tendon part of ``qfrc_passive``;
:class:`FixedTendons`); a range and a friction loss as MuJoCo's soft rows (:class:`TendonRows`);
actuators drive a tendon through the same coefficients (``ModelBuilder.add_actuator(tendon=...)``)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .base import JointElement, SoftRows, f64, make


def resolve(tendons, ctx):
    """{name: (dofs (tuple), coefficients (n,))} of the builder's fixed tendons on the built tree:
    each joint named by its body, with one scalar coordinate."""
    out = {}
    for name, t in tendons.items():
        dofs = []
        for body in t["joints"]:
            first, n, jt = ctx.joint(body, f"tendon {name!r}")
            if n != 1:
                raise ValueError(f"tendon {name!r}: joint {body!r} is {jt}; fixed tendons take hinge and slide joints")
            dofs.append(first)
        if len(set(dofs)) != len(dofs):
            raise ValueError(f"tendon {name!r}: a joint appears twice")
        out[name] = (tuple(dofs), np.asarray(t["coef"], np.float64))
    return out


def _coefficients(names, resolved, nv):
    """(k, nv): the named tendons' coefficients over the DoFs."""
    coef = np.zeros((len(names), nv))
    for i, n in enumerate(names):
        dofs, c = resolved[n]
        coef[i, list(dofs)] = c
    return coef


class FixedTendons(JointElement):
    """The model's fixed tendons with a spring or damping: per tendon ``names`` and ``dofs`` (static),
    ``coef`` (k, nv) the coefficients over the DoFs, ``stiffness``, ``damping`` (k,) and ``spring``
    (k, 2) the dead band's ends (equal: a plain spring of that rest length)."""
    names: tuple = eqx.field(static=True)
    dofs: tuple = eqx.field(static=True)
    coef: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    spring: jax.Array

    def bind(self, ctx):
        return self

    def couplings(self, topo):
        return tuple(tuple(sorted(d)) for d in self.dofs if len(d) > 1)

    def lengths(self, model, q):
        """(k,) the tendons' lengths at q."""
        return self.coef @ q[model.topo.dof_qadr]

    def _stretch(self, L):
        lo, hi = self.spring[:, 0], self.spring[:, 1]
        return jnp.where(L > hi, L - hi, jnp.where(L < lo, L - lo, 0.0))

    def force(self, model, q, v):
        L = self.lengths(model, q)
        f = -self.stiffness * self._stretch(L) - self.damping * (self.coef @ v)
        return self.coef.T @ f

    def energy(self, model, q, m=None):
        return 0.5 * jnp.sum(self.stiffness * self._stretch(self.lengths(model, q)) ** 2)


def element(tendons, resolved, nv, q0, qadr):
    """The :class:`FixedTendons` of the tendons with a spring or damping (None if none): a spring
    length not given is the tendon's length at q0, as MuJoCo's compiler sets it."""
    names = [n for n, t in tendons.items() if t["stiffness"] or t["damping"]]
    if not names:
        return None
    coef = _coefficients(names, resolved, nv)
    spring = np.zeros((len(names), 2))
    for i, n in enumerate(names):
        L0 = float(coef[i] @ np.asarray(q0)[qadr])
        sl = tendons[n]["springlength"]
        spring[i] = (L0, L0) if sl is None else sl
    return make(FixedTendons, names=tuple(names), dofs=tuple(resolved[n][0] for n in names), coef=f64(coef),
                stiffness=f64([tendons[n]["stiffness"] for n in names]),
                damping=f64([tendons[n]["damping"] for n in names]), spring=f64(spring))


class TendonRows(SoftRows, JointElement):
    """The soft rows of fixed tendons (:mod:`jaxmbd.forces.soft`), as MuJoCo's: a limit row for each
    limited tendon at its nearer bound (r = L - lower with J = c, or r = upper - L with J = -c; c the
    tendon's coefficients over the DoFs), and a friction-loss row for each tendon with a
    ``frictionloss`` (J = c, the force within ±loss).  Â (``invweight``) is MuJoCo's
    ``tendon_invweight0``, c H⁻¹ cᵀ at the model's q0.  Static: ``names``, ``dofs``, which tendons
    are ``limited`` and which have ``friction``."""
    names: tuple = eqx.field(static=True)
    dofs: tuple = eqx.field(static=True)
    limited: tuple = eqx.field(static=True)
    friction: tuple = eqx.field(static=True)
    coef: jax.Array          # (k, nv)
    range: jax.Array         # (k, 2)
    solref_limit: jax.Array  # (k, 2)
    solimp_limit: jax.Array  # (k, 5)
    loss: jax.Array          # (k,)
    solref_friction: jax.Array
    solimp_friction: jax.Array
    invweight: jax.Array     # (k,)

    has_soft = True

    def bind(self, ctx):
        return self

    def couplings(self, topo):
        return tuple(tuple(sorted(d)) for d in self.dofs if len(d) > 1)

    def force(self, model, q, v):
        return jnp.zeros(model.nv, jnp.result_type(q, v, float))

    def soft_rows(self, model, q, v, kin=None, axes=None):
        return length_rows(self, self.coef, self.coef @ q[model.topo.dof_qadr], self.coef @ v)


def length_rows(el, J, L, Ld):
    """(NormalRows, FrictionRows, None) of tendons with lengths L, rates Ld and Jacobian J (k, nv):
    the limit rows of ``el.limited`` at the nearer bound of ``el.range`` and the friction-loss rows
    of ``el.friction`` (``el``'s soft parameters and ``invweight``)."""
    from .soft import MINVAL, FrictionRows, NormalRows, impedance, ref_coefficients
    dt = L.dtype
    lim = np.flatnonzero(np.asarray(el.limited, bool))
    dl, du = L[lim] - el.range[lim, 0], el.range[lim, 1] - L[lim]
    low = dl <= du
    sign = jnp.where(low, 1.0, -1.0)
    N = NormalRows(sign[:, None] * J[lim], jnp.where(low, dl, du), sign * Ld[lim],
                   el.solref_limit[lim], el.solimp_limit[lim], el.invweight[lim])
    fr = np.flatnonzero(np.asarray(el.friction, bool))
    k = fr.size
    d = impedance(jnp.zeros(k, dt), el.solimp_friction[fr])
    _, B = ref_coefficients(el.solref_friction[fr], el.solimp_friction[fr])
    R = jnp.maximum((1.0 - d) / d * el.invweight[fr], MINVAL)
    T = FrictionRows(J[fr], Ld[fr], B, R, jnp.ones(k, dt), jnp.ones(k, dt), np.full(k, -1),
                     el.loss[fr], np.arange(k))
    return N, T, None


def rows_element(tendons, resolved, nv, H0):
    """The :class:`TendonRows` of the limited tendons and those with friction loss (None if none);
    H0: the mass matrix at q0 (armature included) for the rows' Â."""
    names = [n for n, t in tendons.items() if t["range"] is not None or t["frictionloss"] > 0]
    if not names:
        return None
    coef = _coefficients(names, resolved, nv)
    iw = np.einsum("ki,ki->k", coef, np.linalg.solve(H0, coef.T).T)
    t = [tendons[n] for n in names]
    return make(TendonRows, names=tuple(names), dofs=tuple(resolved[n][0] for n in names),
                limited=tuple(x["range"] is not None for x in t), friction=tuple(x["frictionloss"] > 0 for x in t),
                coef=f64(coef), range=f64([x["range"] if x["range"] is not None else (0.0, 0.0) for x in t]),
                solref_limit=f64([x["solref_limit"] for x in t]), solimp_limit=f64([x["solimp_limit"] for x in t]),
                loss=f64([x["frictionloss"] for x in t]), solref_friction=f64([x["solref_friction"] for x in t]),
                solimp_friction=f64([x["solimp_friction"] for x in t]), invweight=f64(iw))
