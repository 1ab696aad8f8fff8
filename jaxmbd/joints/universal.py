"""Universal (Cardan) joint: q = [q1, q2], a rotation q1 about the joint frame's
x axis, then q2 about the y axis as moved by the first, so R = Rx(q1) Ry(q2).

The joint frame is the body's placement (``pos``/``quat`` of ``add_body``):
orient the body to point the two axes; the joint uses no axis, anchor or
pitch.  Its coordinates are scalars with q̇ = v (springs apply per angle).
MuJoCo has no such joint; the same motion is a body with two hinges, axes
x then y (body frame) in that order, whose qpos are (q1, q2).

Body velocity relative to J in B coordinates: ω = q1' Ry(q2)ᵀ e_x + q2' e_y,
so S = [[cos q2, 0], [0, 1], [sin q2, 0]; 0] and, from the rate of the first
column, cJ = q1' q2' (-sin q2, 0, cos q2; 0).
"""

from __future__ import annotations

import jax.numpy as jnp

from .. import spatial_unrolled as U
from .base import JointType


def jcalc(q, v, axis, anchor, pitch):
    c1, s1, c2, s2 = jnp.cos(q[0]), jnp.sin(q[0]), jnp.cos(q[1]), jnp.sin(q[1])
    zero, one = jnp.zeros_like(c1), jnp.ones_like(c1)
    # Rx(q1) Ry(q2), written out
    R = jnp.stack([jnp.stack([c2, zero, s2]),
                   jnp.stack([s1 * s2, c1, -s1 * c2]),
                   jnp.stack([-c1 * s2, s1, c1 * c2])])
    S = jnp.stack([jnp.stack([c2, zero, s2, zero, zero, zero]),
                   jnp.stack([zero, one, zero, zero, zero, zero])], axis=1)
    w12 = v[0] * v[1]
    cJ = jnp.stack([-s2 * w12, zero, c2 * w12, zero, zero, zero])
    return R, jnp.zeros(3, q.dtype), S, cJ


def unrolled(g):
    """Closed form for the unrolled ABA (component tuples; see jaxmbd.aba_unrolled)."""
    q1, q2 = g.q[g.qi[:, 0]], g.q[g.qi[:, 1]]
    c1, s1, c2, s2 = jnp.cos(q1), jnp.sin(q1), jnp.cos(q2), jnp.sin(q2)
    zero, z3 = g.zero, g.z3
    Rj = ((c2, zero, s2), (s1 * s2, c1, -s1 * c2), (-c1 * s2, s1, c1 * c2))
    R = U.mm(g.M(g.T), Rj)
    p = g.V(g.t)
    cols = [((c2, zero, s2), z3), ((zero, jnp.ones_like(zero), zero), z3)]
    w12 = g.v[g.vi[:, 0]] * g.v[g.vi[:, 1]]
    cJ, Scols = U.multi_dof_columns(g, cols, ((-s2 * w12, zero, c2 * w12), z3))
    return R, p, cJ, Scols


# scalar coordinates: the configuration-manifold functions are the vector-space defaults
UNIVERSAL = JointType(name="universal", nq=2, nv=2, jcalc=jcalc, aliases=("cardan",), scalar_coords=True,
                      unrolled=unrolled)
