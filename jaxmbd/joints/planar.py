"""Planar joint: q = [x, y, theta]: translation in J's xy-plane, then rotation
theta about z (q̇ = v: the velocity integrates to the coordinates)."""

from __future__ import annotations

import jax.numpy as jnp

from .. import spatial
from .base import JointType
from .free import translating_base_cJ


def jcalc(q, v, axis, anchor, pitch):
    z = jnp.array([0.0, 0.0, 1.0], q.dtype)
    R = spatial.axis_angle_rot(z, q[2])
    p = jnp.stack([q[0], q[1], jnp.zeros_like(q[0])])
    Rt = R.T
    S = jnp.zeros((6, 3), q.dtype)
    S = S.at[2, 2].set(1.0).at[3:, 0].set(Rt[:, 0]).at[3:, 1].set(Rt[:, 1])
    cJ = translating_base_cJ(R, jnp.stack([v[0], v[1], jnp.zeros_like(v[0])]), z * v[2], q.dtype)
    return R, p, S, cJ


# no closed form for the unrolled ABA: it evaluates jcalc
PLANAR = JointType(
    name="planar", nq=3, nv=3, jcalc=jcalc, scalar_coords=True,
    random_trees=True, urdf=("planar",),
)
