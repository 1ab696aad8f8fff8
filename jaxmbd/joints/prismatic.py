"""Prismatic joint (MuJoCo slide): a displacement along ``axis``."""

from __future__ import annotations

import jax.numpy as jnp

from .. import spatial_unrolled as U
from .base import JointType


def jcalc(q, v, axis, anchor, pitch):
    R = jnp.eye(3, dtype=q.dtype)
    S = jnp.concatenate([jnp.zeros(3, q.dtype), axis])[:, None]
    return R, axis * q[0], S, jnp.zeros(6, q.dtype)


def unrolled(g):
    """Closed form for the unrolled ABA: pose (T, t + x T axis), constant S."""
    x = g.q[g.qi[:, 0]]
    Ta = g.V(jnp.einsum("gij,gj->gi", g.T, g.axis))
    tb = g.V(g.t)
    p = tuple(tb[i] + x * Ta[i] for i in U.R3)
    S = jnp.concatenate([jnp.zeros_like(g.axis), g.axis], axis=1)
    return g.M(g.T), p, (g.z3, g.z3), g.SV(S)


PRISMATIC = JointType(
    name="prismatic", nq=1, nv=1, jcalc=jcalc, aliases=("slide",),
    uses_axis=True, scalar_coords=True, unrolled=unrolled,
    random_trees=True, mjcf="slide", urdf=("prismatic",),
)
