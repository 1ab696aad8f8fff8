"""Fixed tendons (MuJoCo's ``<tendon><fixed>``): a length that is a linear combination of hinge and
slide coordinates, L = Σ cᵢ qᵢ, with a spring (stiffness, and a dead band between the two
``springlength`` values where it pulls nothing) and damping on its rate L' = Σ cᵢ q̇ᵢ, a passive force
-k (L - L_s) - b L' applied through the coefficients (MuJoCo's tendon part of ``qfrc_passive``);
actuators drive a tendon through the same coefficients (``ModelBuilder.add_actuator(tendon=...)``)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .base import JointElement, f64, make


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
    coef = np.zeros((len(names), nv))
    spring = np.zeros((len(names), 2))
    for i, n in enumerate(names):
        dofs, c = resolved[n]
        coef[i, list(dofs)] = c
        L0 = float(coef[i] @ np.asarray(q0)[qadr])
        sl = tendons[n]["springlength"]
        spring[i] = (L0, L0) if sl is None else sl
    return make(FixedTendons, names=tuple(names), dofs=tuple(resolved[n][0] for n in names), coef=f64(coef),
                stiffness=f64([tendons[n]["stiffness"] for n in names]),
                damping=f64([tendons[n]["damping"] for n in names]), spring=f64(spring))
