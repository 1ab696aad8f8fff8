"""Linear bushing: six uncoupled linear spring-dampers between frame A on
body ``a`` and frame B on body ``b`` (either may be the world), the way
vehicle models attach rubber mounts.

The deflection is measured in frame A: the translation d = R_Aᵀ (p_B - p_A)
and the rotation vector θ = log(R_Aᵀ R_B)ᵛ, m = [d; θ]; the bushing is at
rest when the two frames coincide.  The forces conjugate to m are
-(K m + C ṁ) with K = diag(k_x, k_y, k_z, k_rx, k_ry, k_rz) and C likewise,
so the generalized force is -(∂m/∂x)ᵀ (K m + C ṁ) (autodiff through the
kinematics).  Potential: ½ mᵀ K m.  For a rotation about one of A's axes θ
is exactly that angle; otherwise it is the rotation vector (|θ| < π)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial
from ..checks import quat_rot, vec
from .base import PoseElement, body_name, dofs_of_bodies, f64, make, pose_of


def _six(x, what):
    a = np.broadcast_to(np.asarray(x, np.float64), (6,)).copy() if np.ndim(x) == 0 else vec(x, 6, what)
    if np.any(a < 0):
        raise ValueError(f"{what} must be non-negative, got {a}")
    return a


def _rotation(quat, what):
    qv = vec(quat, 4, what)
    if np.linalg.norm(qv) < 1e-12:
        raise ValueError(f"{what} is zero")
    return quat_rot(qv / np.linalg.norm(qv))


class LinearBushing(PoseElement):
    """``LinearBushing(body_a, body_b, pos_a=, quat_a=, pos_b=, quat_b=, stiffness=, damping=)``:
    frames placed in their body's coordinates (world coordinates on the
    world); ``stiffness`` and ``damping``: one number for all six, or
    (x, y, z, rx, ry, rz) in frame A."""
    bodies: tuple = eqx.field(static=True)
    rot_a: jax.Array        # (n, 3, 3) frame A on a's host body
    pos_a: jax.Array        # (n, 3)
    rot_b: jax.Array
    pos_b: jax.Array
    stiffness: jax.Array    # (n, 6)
    damping: jax.Array      # (n, 6)

    def __init__(self, body_a, body_b, *, pos_a=(0.0, 0.0, 0.0), quat_a=(1.0, 0.0, 0.0, 0.0),
                 pos_b=(0.0, 0.0, 0.0), quat_b=(1.0, 0.0, 0.0, 0.0), stiffness=0.0, damping=0.0, name=None):
        what = f"bushing {name}" if name else "bushing"
        a, b = body_name(body_a, what), body_name(body_b, what)
        if a == b:
            raise ValueError(f"{what}: both frames are on {a!r}")
        self.bodies = ((a, b),)
        self.rot_a = f64(_rotation(quat_a, f"{what}: quat_a"), (1, 3, 3))
        self.rot_b = f64(_rotation(quat_b, f"{what}: quat_b"), (1, 3, 3))
        self.pos_a = f64(vec(pos_a, 3, f"{what}: pos_a"), (1, 3))
        self.pos_b = f64(vec(pos_b, 3, f"{what}: pos_b"), (1, 3))
        self.stiffness = f64(_six(stiffness, f"{what}: stiffness"), (1, 6))
        self.damping = f64(_six(damping, f"{what}: damping"), (1, 6))

    def bind(self, ctx):
        (a, b), = self.bodies
        what = f"bushing between {a!r} and {b!r}"
        ia, pa = ctx.point(a, self.pos_a[0], what)
        ib, pb = ctx.point(b, self.pos_b[0], what)
        _, Ra = ctx.frame(a, self.rot_a[0], what)
        _, Rb = ctx.frame(b, self.rot_b[0], what)
        if ia == ib:
            raise ValueError(f"{what}: both frames move with the same body")
        return make(type(self), bodies=((ia, ib),), rot_a=f64(Ra, (1, 3, 3)), pos_a=f64(pa, (1, 3)),
                    rot_b=f64(Rb, (1, 3, 3)), pos_b=f64(pb, (1, 3)), stiffness=self.stiffness,
                    damping=self.damping)

    def couplings(self, topo):
        return tuple(dofs_of_bodies(topo, ab) for ab in self.bodies)

    def measure(self, model, kin):
        Ra, pa = pose_of(kin, [a for a, _ in self.bodies])
        Rb, pb = pose_of(kin, [b for _, b in self.bodies])
        RA, RB = Ra @ self.rot_a, Rb @ self.rot_b
        PA = pa + jnp.einsum("kij,kj->ki", Ra, self.pos_a)
        PB = pb + jnp.einsum("kij,kj->ki", Rb, self.pos_b)
        d = jnp.einsum("kji,kj->ki", RA, PB - PA)
        th = jax.vmap(spatial.rotation_vector)(jnp.einsum("kji,kjl->kil", RA, RB))
        return jnp.concatenate([d, th], axis=1).reshape(-1)

    def law(self, m, md):
        return -(self.stiffness.reshape(-1) * m + self.damping.reshape(-1) * md)

    def energy(self, model, q, m=None):
        return 0.5 * jnp.sum(self.stiffness.reshape(-1) * m * m)
