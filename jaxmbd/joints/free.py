"""Free joint (MuJoCo free): q = [position of B's origin in J, quaternion];
v = [linear velocity of B's origin in J coordinates, angular velocity in B]."""

from __future__ import annotations

import jax.numpy as jnp

from .. import spatial
from .. import spatial_unrolled as U
from .base import JointType


def translating_base_cJ(R, p_dot_J, w_B, dtype):
    """cJ for joints whose translational rates are given in J coordinates.

    Linear DoFs move the origin of B with velocity p_dot_J (J coordinates), i.e.
    R^T p_dot_J in B coordinates; S̊ = d/dt(R^T) = -[w]x R^T gives
    cJ = [0; -w x (R^T p_dot_J)].
    """
    vB = R.T @ p_dot_J
    return jnp.concatenate([jnp.zeros(3, dtype), -spatial.cross(w_B, vB)])


def jcalc(q, v, axis, anchor, pitch):
    R = spatial.quat_to_rot(q[3:7])
    z3 = jnp.zeros((3, 3), q.dtype)
    S = jnp.concatenate(
        [jnp.concatenate([z3, jnp.eye(3, dtype=q.dtype)], axis=1),
         jnp.concatenate([R.T, z3], axis=1)], axis=0)
    cJ = translating_base_cJ(R, v[:3], v[3:], q.dtype)
    return R, q[:3], S, cJ


def neutral(dtype=jnp.float64):
    return jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0], dtype)


def _unit(quat):
    return quat / jnp.sqrt(jnp.sum(quat * quat))


def integrate(q, v, dt):
    """Position along the J-frame velocity; the quaternion by the exact
    exponential of the body-frame rotation vector, renormalised."""
    quat = _unit(spatial.quat_mul(q[3:7], spatial.quat_exp(v[3:] * dt)))
    return jnp.concatenate([q[:3] + v[:3] * dt, quat])


def qdot(q, v):
    return jnp.concatenate([v[:3], 0.5 * spatial.quat_mul(q[3:7], jnp.concatenate([jnp.zeros(1, v.dtype), v[3:]]))])


def difference(q0, q1):
    r = spatial.quat_log(spatial.quat_mul(spatial.quat_conj(q0[3:7]), q1[3:7]))
    return jnp.concatenate([q1[:3] - q0[:3], r])


def normalize(q):
    return jnp.concatenate([q[:3], _unit(q[3:7])])


def unrolled(g):
    """Closed form for the unrolled ABA: linear columns [0; Rᵀ e_i] (row i of
    R), angular columns [e_i; 0], cJ = [0; -w x (Rᵀ v_lin)]."""
    Rj = U.quat_rot(*(g.q[g.qi[:, k]] for k in (3, 4, 5, 6)))
    Tm = g.M(g.T)
    R = U.mm(Tm, Rj)
    pj = tuple(g.q[g.qi[:, k]] for k in U.R3)
    zero, z3 = g.zero, g.z3
    one = jnp.ones_like(zero)
    e = [(one, zero, zero), (zero, one, zero), (zero, zero, one)]
    cols = [(z3, Rj[i]) for i in U.R3] + [(e[i], z3) for i in U.R3]
    vlin = tuple(g.v[g.vi[:, k]] for k in U.R3)
    w = tuple(g.v[g.vi[:, 3 + k]] for k in U.R3)
    cJ = (z3, U.scale(-1.0, U.cross(w, U.mtv(Rj, vlin))))
    p = U.add(g.V(g.t), U.mv(Tm, pj))
    cJ, Scols = U.multi_dof_columns(g, cols, cJ)
    return R, p, cJ, Scols


FREE = JointType(
    name="free", nq=7, nv=6, jcalc=jcalc, aliases=("floating",),
    floating=True, rotation_blocks=(3,), position_coords=((0, 0), (1, 1), (2, 2)), quaternions=(3,),
    neutral=neutral, integrate=integrate, qdot=qdot, difference=difference, normalize=normalize,
    unrolled=unrolled, mjcf="free", urdf=("floating",),
)
