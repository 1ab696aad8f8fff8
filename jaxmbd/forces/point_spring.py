"""Point-to-point (translational) spring-damper between point ``pa`` of body
``a`` and point ``pb`` of body ``b`` (either may be the world; points in
body coordinates, world coordinates on the world).

With L = |pb - pa| and L' its rate, the tension ``k (L - l0) + c L' + f0``
pulls the two points together: the generalized force is
-(k (L - l0) + c L' + f0) ∂L/∂x (autodiff through the kinematics).  L must
stay positive.  Potential: ½ k (L - l0)² + f0 L."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ..checks import scalar, vec
from .base import PoseElement, body_name, dofs_of_bodies, f64, make, world_points


class PointSpringDamper(PoseElement):
    """``PointSpringDamper(body_a, point_a, body_b, point_b, stiffness=, damping=, rest_length=, force=)``;
    after binding, one row per spring."""
    bodies: tuple = eqx.field(static=True)   # ((a, b), ...): names, then moving-body indices (-1 world)
    point_a: jax.Array                         # (n, 3) on a's host body
    point_b: jax.Array
    stiffness: jax.Array                       # (n,)
    damping: jax.Array
    rest_length: jax.Array
    force: jax.Array

    def __init__(self, body_a, point_a, body_b, point_b, *, stiffness=0.0, damping=0.0, rest_length=0.0,
                 force=0.0, name=None):
        what = f"spring {name}" if name else "spring"
        a, b = body_name(body_a, what), body_name(body_b, what)
        if a == b:
            raise ValueError(f"{what}: both ends are on {a!r}")
        pa, pb = vec(point_a, 3, f"{what}: point_a"), vec(point_b, 3, f"{what}: point_b")
        k, c = scalar(stiffness, f"{what}: stiffness"), scalar(damping, f"{what}: damping")
        l0, f0 = scalar(rest_length, f"{what}: rest_length"), scalar(force, f"{what}: force")
        if k < 0 or c < 0 or l0 < 0:
            raise ValueError(f"{what}: stiffness, damping and rest_length must be non-negative")
        self.bodies = ((a, b),)
        self.point_a, self.point_b = f64(pa, (1, 3)), f64(pb, (1, 3))
        self.stiffness, self.damping = f64([k]), f64([c])
        self.rest_length, self.force = f64([l0]), f64([f0])

    def bind(self, ctx):
        (a, b), = self.bodies
        what = f"spring between {a!r} and {b!r}"
        ia, xa = ctx.point(a, self.point_a[0], what)
        ib, xb = ctx.point(b, self.point_b[0], what)
        if ia == ib:
            raise ValueError(f"{what}: both ends move with the same body")
        return make(type(self), bodies=((ia, ib),), point_a=f64(xa, (1, 3)), point_b=f64(xb, (1, 3)),
                    stiffness=self.stiffness, damping=self.damping, rest_length=self.rest_length,
                    force=self.force)

    def couplings(self, topo):
        return tuple(dofs_of_bodies(topo, ab) for ab in self.bodies)

    def measure(self, model, kin):
        d = (world_points(kin, [b for _, b in self.bodies], self.point_b)
             - world_points(kin, [a for a, _ in self.bodies], self.point_a))
        return jnp.sqrt(jnp.sum(d * d, axis=-1))

    def law(self, L, Ld):
        return -(self.stiffness * (L - self.rest_length) + self.damping * Ld + self.force)

    def energy(self, model, q, L=None):
        return jnp.sum(0.5 * self.stiffness * (L - self.rest_length) ** 2 + self.force * L)
