"""Spherical joint (MuJoCo ball): a unit quaternion (w, x, y, z) about ``anchor``;
the velocity is the angular velocity in body coordinates."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import spatial
from .. import spatial_unrolled as U
from .base import JointType


def jcalc(q, v, axis, anchor, pitch):
    R = spatial.quat_to_rot(q)
    p = anchor - R @ anchor
    S = jnp.concatenate([jnp.eye(3, dtype=q.dtype), spatial.skew(anchor)], axis=0)
    return R, p, S, jnp.zeros(6, q.dtype)


def neutral(dtype=jnp.float64):
    return jnp.array([1.0, 0.0, 0.0, 0.0], dtype)


def _unit(quat):
    return quat / jnp.sqrt(jnp.sum(quat * quat))


def integrate(q, v, dt):
    """Exact exponential of the body-frame rotation vector, renormalised."""
    return _unit(spatial.quat_mul(q, spatial.quat_exp(v * dt)))


def qdot(q, v):
    """½ q ⊗ (0, ω)."""
    return 0.5 * spatial.quat_mul(q, jnp.concatenate([jnp.zeros(1, v.dtype), v]))


def difference(q0, q1):
    return spatial.quat_log(spatial.quat_mul(spatial.quat_conj(q0), q1))


def normalize(q):
    return _unit(q)


def unrolled(g):
    """Closed form for the unrolled ABA: rotation from the quaternion's
    components, columns [e_i; anchor x e_i] (constant)."""
    Rj = U.quat_rot(*(g.q[g.qi[:, k]] for k in range(4)))
    Tm = g.M(g.T)
    R = U.mm(Tm, Rj)
    ancm = g.V(g.anchor)
    pj = U.sub(ancm, U.mv(Rj, ancm))
    S = jnp.concatenate([jnp.broadcast_to(jnp.eye(3, dtype=g.q.dtype), (len(g.bodies), 3, 3)),
                         jax.vmap(spatial.skew)(g.anchor)], axis=1)              # (G, 6, 3)
    cols = [g.SV(S[:, :, k]) for k in U.R3]
    p = U.add(g.V(g.t), U.mv(Tm, pj))
    cJ, Scols = U.multi_dof_columns(g, cols, (g.z3, g.z3))
    return R, p, cJ, Scols


SPHERICAL = JointType(
    name="spherical", nq=4, nv=3, jcalc=jcalc, aliases=("ball",),
    uses_anchor=True, rotation_blocks=(0,), quaternions=(0,),
    neutral=neutral, integrate=integrate, qdot=qdot, difference=difference, normalize=normalize,
    unrolled=unrolled, random_trees=True, mjcf="ball",
)
