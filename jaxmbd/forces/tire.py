"""Tire: a vertical spring-damper against the road (Negrut's vehicle tire).

The wheel centre ``p`` on body ``b`` at world (x_c, y_c, z_c) deflects the
tire by δ = r0 - (z_c - h(x_c)) with rate δ' = h'(x_c) x_c' - z_c'; the force
``k δ + c δ'`` acts at the wheel centre along world +z (bilateral: it may
pull; :func:`tire_forces` reports it so lift-off can be flagged).  Nothing
acts horizontally.  The road is flat (z = 0) with half-cylinder bumps across
it (axis along y, centre x_b, radius R; ``ModelBuilder.add_road_bump``),
seen by each tire through its enveloped profile, the locus of a disc of
radius r0 rolling over the cylinder: h(s) = √((r0 + R)² - s²) - r0 for
|s| < √(2 r0 R + R²), s = x - x_b (continuous, with slope jumps at entry and
exit).  Potential: ½ k δ², exact on a flat road (over a bump the
vertical-only force is not conservative)."""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from ..checks import scalar, vec
from .base import PoseElement, dofs_of_bodies, f64, make, velocity_of, world_points


def road_height(x, r0, bump_x, bump_r):
    """(h, h') of the enveloped road under a wheel of radius r0 at world x
    (broadcasts over x and r0; sums the bumps, which must not overlap)."""
    x, r0 = jnp.broadcast_arrays(jnp.asarray(x), jnp.asarray(r0, jnp.result_type(x, float)))
    x, r0 = x[..., None], r0[..., None]
    bump_x = jnp.reshape(bump_x, (1,) * (x.ndim - 1) + (-1,))
    bump_r = jnp.reshape(bump_r, (1,) * (x.ndim - 1) + (-1,))
    s = x - bump_x
    big = (r0 + bump_r) ** 2
    on = s * s < 2.0 * r0 * bump_r + bump_r * bump_r
    root = jnp.sqrt(jnp.where(on, big - s * s, 1.0))        # safe where off the bump (no NaN gradients)
    h = jnp.where(on, root - r0, 0.0)
    dh = jnp.where(on, -s / root, 0.0)
    return jnp.sum(h, axis=-1), jnp.sum(dh, axis=-1)


class Tire(PoseElement):
    """``Tire(body, center, stiffness=, damping=, radius=)``: ``center`` in body coordinates."""
    shared: ClassVar[tuple] = ("bump_x", "bump_r")
    bodies: tuple = eqx.field(static=True)
    center: jax.Array       # (n, 3) wheel centres on the host bodies
    stiffness: jax.Array
    damping: jax.Array
    radius: jax.Array       # unloaded radii
    bump_x: jax.Array       # (nb,) bump centre lines (world x)
    bump_r: jax.Array       # (nb,) bump radii

    def __init__(self, body, center, *, stiffness, damping=0.0, radius, name=None):
        what = f"tire {name}" if name else "tire"
        if body is None or body == "world":
            raise ValueError(f"{what}: a tire needs a moving body")
        k, c = scalar(stiffness, f"{what}: stiffness"), scalar(damping, f"{what}: damping")
        r0 = scalar(radius, f"{what}: radius")
        if k < 0 or c < 0 or not r0 > 0:
            raise ValueError(f"{what}: stiffness and damping must be non-negative and radius positive")
        self.bodies = (body,)
        self.center = f64(vec(center, 3, f"{what}: center"), (1, 3))
        self.stiffness, self.damping, self.radius = f64([k]), f64([c]), f64([r0])
        self.bump_x = self.bump_r = f64([])

    def bind(self, ctx):
        body, = self.bodies
        ib, p = ctx.point(body, self.center[0], f"tire on {body!r}")
        if ib < 0:
            raise ValueError(f"tire on {body!r}: the body is welded to the world")
        bumps = ctx.road_bumps
        return make(type(self), bodies=(ib,), center=f64(p, (1, 3)), stiffness=self.stiffness,
                    damping=self.damping, radius=self.radius, bump_x=f64([x for x, _ in bumps]),
                    bump_r=f64([r for _, r in bumps]))

    def couplings(self, topo):
        return tuple(dofs_of_bodies(topo, (b,)) for b in self.bodies)

    def measure(self, model, kin):
        return world_points(kin, list(self.bodies), self.center).reshape(-1)

    def vertical_force(self, pc, dpc):
        """(n,) k δ + c δ' from the wheel centres (n, 3) and their velocities."""
        h, dh = road_height(pc[:, 0], self.radius, self.bump_x, self.bump_r)
        delta = self.radius - (pc[:, 2] - h)
        return self.stiffness * delta + self.damping * (dh * dpc[:, 0] - dpc[:, 2])

    def law(self, m, md):
        fz = self.vertical_force(m.reshape(-1, 3), md.reshape(-1, 3))
        return jnp.zeros((fz.shape[0], 3), fz.dtype).at[:, 2].set(fz).reshape(-1)

    def energy(self, model, q, m=None):
        pc = m.reshape(-1, 3)
        h, _ = road_height(pc[:, 0], self.radius, self.bump_x, self.bump_r)
        return jnp.sum(0.5 * self.stiffness * (self.radius - (pc[:, 2] - h)) ** 2)


def tire_forces(model, q, v):
    """(nt,) vertical tire forces k δ + c δ' (negative: the tire would lift off)."""
    out = velocity_of(model, q, v, Tire)
    if out is None:
        return jnp.zeros((0,), jnp.result_type(q, v, float))
    tire = next(e for e in model.forces if isinstance(e, Tire))
    m, md = out
    return tire.vertical_force(m.reshape(-1, 3), md.reshape(-1, 3))
