"""Revolute joint (MuJoCo hinge): one angle about ``axis`` through ``anchor``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import spatial
from .. import spatial_unrolled as U
from .base import JointType


def jcalc(q, v, axis, anchor, pitch):
    """Rotation by q[0] about the axis through the anchor, plus ``pitch * q[0]``
    along it (pitch is 0 for a true revolute; the helical joint shares this)."""
    R = spatial.axis_angle_rot(axis, q[0])
    p = anchor - R @ anchor + pitch * q[0] * axis
    S = jnp.concatenate([axis, spatial.cross(anchor, axis) + pitch * axis])[:, None]
    return R, p, S, jnp.zeros(6, q.dtype)


def unrolled(g):
    """Closed form for the unrolled ABA: the pose in the parent is
    ``T + sin q TK + (1 - cos q) TK²`` (K = [axis]x) with the constant products
    formed once per call; S is constant."""
    th = g.q[g.qi[:, 0]]
    K = jax.vmap(spatial.skew)(g.axis)
    TK = g.T @ K
    TK2 = TK @ K
    sn, omc = jnp.sin(th), 1.0 - jnp.cos(th)
    Tm, TKm, TK2m = g.M(g.T), g.M(TK), g.M(TK2)
    R = tuple(tuple(Tm[i][j] + sn * TKm[i][j] + omc * TK2m[i][j] for j in U.R3) for i in U.R3)
    c1 = g.V(-jnp.einsum("gij,gj->gi", TK, g.anchor))
    c2 = g.V(-jnp.einsum("gij,gj->gi", TK2, g.anchor))
    c3 = g.V(g.pitch[:, None] * jnp.einsum("gij,gj->gi", g.T, g.axis))
    tb = g.V(g.t)
    p = tuple(tb[i] + sn * c1[i] + omc * c2[i] + th * c3[i] for i in U.R3)
    S = jnp.concatenate([g.axis, jnp.cross(g.anchor, g.axis) + g.pitch[:, None] * g.axis], axis=1)
    return R, p, (g.z3, g.z3), g.SV(S)


REVOLUTE = JointType(
    name="revolute", nq=1, nv=1, jcalc=jcalc, aliases=("hinge",),
    uses_axis=True, uses_anchor=True, scalar_coords=True, unrolled=unrolled,
    random_trees=True, mjcf="hinge", urdf=("revolute", "continuous"),
)
