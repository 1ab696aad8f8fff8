"""Rotational spring-damper between body ``a`` and body ``b`` about a common
axis: frames A (on a) and B (on b) share their z axis; θ is the z component
of the rotation vector of R_Aᵀ R_B (the rotation angle of B relative to A
about z while the axes stay aligned) and the torque -(k (θ - ref) + c θ')
acts on b (its opposite on a).  The generalized force is
-(k (θ - ref) + c θ') ∂θ/∂x (autodiff).  |θ| < π.  Potential: ½ k (θ - ref)²."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .. import spatial
from ..checks import axis_frame, scalar, vec
from .base import PoseElement, body_name, dofs_of_bodies, f64, make, pose_of


class RotationalSpringDamper(PoseElement):
    """``RotationalSpringDamper(body_a, body_b, axis=, axis_b=None, stiffness=, damping=, reference=)``:
    ``axis`` in body a's coordinates, ``axis_b`` in body b's (default: the same
    vector; world coordinates for "world").  θ = 0 where the two frames built
    from the axes coincide."""
    bodies: tuple = eqx.field(static=True)
    rot_a: jax.Array    # (n, 3, 3) frame A on a's host body
    rot_b: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    reference: jax.Array

    def __init__(self, body_a, body_b, *, axis, axis_b=None, stiffness=0.0, damping=0.0, reference=0.0,
                 name=None):
        what = f"rotational spring {name}" if name else "rotational spring"
        a, b = body_name(body_a, what), body_name(body_b, what)
        if a == b:
            raise ValueError(f"{what}: both ends are on {a!r}")
        Ra = axis_frame(vec(axis, 3, f"{what}: axis"), f"{what}: axis")
        Rb = axis_frame(vec(axis if axis_b is None else axis_b, 3, f"{what}: axis_b"), f"{what}: axis_b")
        k, c = scalar(stiffness, f"{what}: stiffness"), scalar(damping, f"{what}: damping")
        if k < 0 or c < 0:
            raise ValueError(f"{what}: stiffness and damping must be non-negative")
        self.bodies = ((a, b),)
        self.rot_a, self.rot_b = f64(Ra, (1, 3, 3)), f64(Rb, (1, 3, 3))
        self.stiffness, self.damping = f64([k]), f64([c])
        self.reference = f64([scalar(reference, f"{what}: reference")])

    def bind(self, ctx):
        (a, b), = self.bodies
        what = f"rotational spring between {a!r} and {b!r}"
        ia, Ra = ctx.frame(a, self.rot_a[0], what)
        ib, Rb = ctx.frame(b, self.rot_b[0], what)
        if ia == ib:
            raise ValueError(f"{what}: both move with the same body")
        return make(type(self), bodies=((ia, ib),), rot_a=f64(Ra, (1, 3, 3)), rot_b=f64(Rb, (1, 3, 3)),
                    stiffness=self.stiffness, damping=self.damping, reference=self.reference)

    def couplings(self, topo):
        return tuple(dofs_of_bodies(topo, ab) for ab in self.bodies)

    def measure(self, model, kin):
        RA = jnp.einsum("kij,kjl->kil", pose_of(kin, [a for a, _ in self.bodies])[0], self.rot_a)
        RB = jnp.einsum("kij,kjl->kil", pose_of(kin, [b for _, b in self.bodies])[0], self.rot_b)
        rel = jnp.einsum("kji,kjl->kil", RA, RB)
        return jax.vmap(spatial.rotation_vector)(rel)[:, 2]

    def law(self, th, thd):
        return -(self.stiffness * (th - self.reference) + self.damping * thd)

    def energy(self, model, q, th=None):
        return jnp.sum(0.5 * self.stiffness * (th - self.reference) ** 2)
