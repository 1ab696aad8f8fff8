"""Gravity compensation (MuJoCo's body ``gravcomp``): on each compensated body an upward force
``-s m g`` at its centre of mass, a fraction ``s`` of its weight (``s = 1`` cancels gravity on the
body exactly; ``s > 1`` lifts it, as buoyancy).  It is a passive force (MuJoCo's
``qfrc_gravcomp``, part of ``qfrc_passive``), the gradient of the potential
``U = Σ s m (g · x_com)``; with gravity zero it vanishes.

Each row is one body's share on its moving host body.  Where every body welded into a host has the
host's fraction, the row reads the host's mass and centre of mass from the model (so a gradient with
respect to ``model.mass`` or ``model.com`` moves gravity and its compensation together); a welded
body with a fraction of its own gets a row of its own with its mass and centre of mass as built."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .base import PoseElement, dofs_of_bodies, f64, make, world_points


class GravityCompensation(PoseElement):
    """Built by :meth:`jaxmbd.ModelBuilder.build` from the bodies' ``gravcomp`` (bound already: rows
    on moving host indices).  Row k: ``bodies[k]`` the host, ``scale[k]`` the fraction; ``own[k]``
    (static) True to use the host's model mass and centre of mass, else ``mass[k]`` at ``point[k]``
    (host coordinates)."""
    bodies: tuple = eqx.field(static=True)
    own: tuple = eqx.field(static=True)
    scale: jax.Array     # (k,)
    mass: jax.Array      # (k,) used where not own
    point: jax.Array     # (k, 3) used where not own

    def __init__(self, bodies, own, scale, mass, point):
        self.bodies, self.own = tuple(int(b) for b in bodies), tuple(bool(o) for o in own)
        k = len(self.bodies)
        if len(self.own) != k:
            raise ValueError("gravity compensation: one 'own' flag per row")
        self.scale, self.mass, self.point = f64(scale, (k,)), f64(mass, (k,)), f64(point, (k, 3))
        if not np.all(np.isfinite(np.asarray(self.scale))):
            raise ValueError("gravity compensation: the fractions must be finite")

    def bind(self, ctx):
        return self

    def couplings(self, topo):
        return tuple(dofs_of_bodies(topo, (b,)) for b in self.bodies)

    def measure(self, model, kin):
        b = np.asarray(self.bodies)
        own = jnp.asarray(np.asarray(self.own))
        m = jnp.where(own, model.mass[b], self.mass)
        c = jnp.where(own[:, None], model.com[b], self.point)
        return self.scale * m * (world_points(kin, self.bodies, c) @ model.gravity)

    def law(self, m, mdot):
        return -jnp.ones_like(m)

    def energy(self, model, q, m=None):
        return jnp.sum(m)


def rows(parts, host_mass):
    """The element's rows from ``parts``: (host index, fraction, mass, centre of mass in host
    coordinates) of every body with mass (moving and welded), and the hosts' total masses; None when
    no fraction is nonzero."""
    by_host = {}
    for h, s, m, c in parts:
        if m > 0:
            by_host.setdefault(h, []).append((s, m, c))
    bodies, own, scale, mass, point = [], [], [], [], []
    for h, ps in sorted(by_host.items()):
        fr = {s for s, _, _ in ps}
        if len(fr) == 1 and abs(sum(m for _, m, _ in ps) - host_mass[h]) <= 1e-12 * host_mass[h]:
            s = fr.pop()
            if s != 0:
                bodies.append(h), own.append(True), scale.append(s), mass.append(0.0), point.append(np.zeros(3))
            continue
        for s, m, c in ps:
            if s != 0:
                bodies.append(h), own.append(False), scale.append(s), mass.append(m), point.append(c)
    if not bodies:
        return None
    return make(GravityCompensation, bodies=tuple(bodies), own=tuple(own), scale=f64(scale),
                mass=f64(mass), point=f64(np.stack(point), (len(bodies), 3)))
