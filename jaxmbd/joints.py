"""Joint models: configuration size, motion subspace and joint transform.

Each joint connects a *joint frame* J (placed in the parent body frame) to the
child body frame B.  ``jcalc`` returns, for one joint,

* ``(R, p)``: the pose of B relative to J (``x_J = R x_B + p``);
* ``S``: the motion subspace, (6, nv), in B coordinates, so the velocity of B
  relative to J is ``v_J = S @ qd`` (RBDA §4.4);
* ``cJ``: the apparent derivative ``S̊ @ qd`` in B coordinates (zero when S is
  constant in B).

Joint types and their coordinates (MuJoCo's conventions where MuJoCo has the
joint, so states pass between the two unchanged):

==========  ===  ===  ============================================================
type        nq   nv   coordinates
==========  ===  ===  ============================================================
revolute     1    1   angle about ``axis`` through ``anchor`` (MuJoCo hinge)
prismatic    1    1   displacement along ``axis`` (MuJoCo slide)
helical      1    1   angle about ``axis``; translation ``pitch * angle`` along it
spherical    4    3   q = quaternion (w, x, y, z); v = angular velocity in B (ball)
free         7    6   q = [position in J, quaternion]; v = [linear velocity of the
                      origin of B in J coordinates, angular velocity in B] (free)
planar       3    3   q = v-integral = [x, y, theta]: translation in J's xy-plane,
                      then rotation theta about z
fixed        0    0   welded: merged into the parent body when the model is built
==========  ===  ===  ============================================================
"""

from __future__ import annotations

import jax.numpy as jnp

from . import spatial

JOINT_TYPES = ("revolute", "prismatic", "helical", "spherical", "free", "planar", "fixed")
ALIASES = {"hinge": "revolute", "slide": "prismatic", "ball": "spherical", "floating": "free",
           "screw": "helical", "weld": "fixed"}
NQ = {"revolute": 1, "prismatic": 1, "helical": 1, "spherical": 4, "free": 7, "planar": 3, "fixed": 0}
NV = {"revolute": 1, "prismatic": 1, "helical": 1, "spherical": 3, "free": 6, "planar": 3, "fixed": 0}
# joints whose coordinates are scalars with q̇ = v (springs and limits apply per coordinate)
SCALAR_COORDS = ("revolute", "prismatic", "helical", "planar")
USES_AXIS = ("revolute", "prismatic", "helical")
USES_ANCHOR = ("revolute", "helical", "spherical")


def canonical(jtype: str) -> str:
    return ALIASES.get(jtype, jtype)


def _zero6(dtype):
    return jnp.zeros(6, dtype)


def _revolute(q, v, axis, anchor, pitch):
    R = spatial.axis_angle_rot(axis, q[0])
    p = anchor - R @ anchor + pitch * q[0] * axis
    S = jnp.concatenate([axis, spatial.cross(anchor, axis) + pitch * axis])[:, None]
    return R, p, S, _zero6(q.dtype)


def _prismatic(q, v, axis, anchor, pitch):
    R = jnp.eye(3, dtype=q.dtype)
    S = jnp.concatenate([jnp.zeros(3, q.dtype), axis])[:, None]
    return R, axis * q[0], S, _zero6(q.dtype)


def _spherical(q, v, axis, anchor, pitch):
    R = spatial.quat_to_rot(q)
    p = anchor - R @ anchor
    S = jnp.concatenate([jnp.eye(3, dtype=q.dtype), spatial.skew(anchor)], axis=0)
    return R, p, S, _zero6(q.dtype)


def _translating_base(R, p_dot_J, w_B, dtype):
    """S and cJ for joints whose translational rates are given in J coordinates.

    Linear DoFs move the origin of B with velocity p_dot_J (J coordinates), i.e.
    R^T p_dot_J in B coordinates; S̊ = d/dt(R^T) = -[w]x R^T gives
    cJ = [0; -w x (R^T p_dot_J)].
    """
    vB = R.T @ p_dot_J
    cJ = jnp.concatenate([jnp.zeros(3, dtype), -spatial.cross(w_B, vB)])
    return cJ


def _free(q, v, axis, anchor, pitch):
    R = spatial.quat_to_rot(q[3:7])
    z3 = jnp.zeros((3, 3), q.dtype)
    S = jnp.concatenate(
        [jnp.concatenate([z3, jnp.eye(3, dtype=q.dtype)], axis=1),
         jnp.concatenate([R.T, z3], axis=1)], axis=0)
    cJ = _translating_base(R, v[:3], v[3:], q.dtype)
    return R, q[:3], S, cJ


def _planar(q, v, axis, anchor, pitch):
    R = spatial.axis_angle_rot(jnp.array([0.0, 0.0, 1.0], q.dtype), q[2])
    p = jnp.stack([q[0], q[1], jnp.zeros_like(q[0])])
    Rt = R.T
    S = jnp.zeros((6, 3), q.dtype)
    S = S.at[2, 2].set(1.0).at[3:, 0].set(Rt[:, 0]).at[3:, 1].set(Rt[:, 1])
    w = jnp.array([0.0, 0.0, 1.0], q.dtype) * v[2]
    cJ = _translating_base(R, jnp.stack([v[0], v[1], jnp.zeros_like(v[0])]), w, q.dtype)
    return R, p, S, cJ


JCALC = {
    "revolute": _revolute,
    "prismatic": _prismatic,
    "helical": _revolute,  # a revolute joint with pitch; pitch is 0 for true revolutes
    "spherical": _spherical,
    "free": _free,
    "planar": _planar,
}


# --- configuration manifold --------------------------------------------------

def neutral(jtype, dtype=jnp.float64):
    if jtype == "spherical":
        return jnp.array([1.0, 0.0, 0.0, 0.0], dtype)
    if jtype == "free":
        return jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0], dtype)
    return jnp.zeros(NQ[jtype], dtype)


def integrate(jtype, q, v, dt):
    """q ⊕ v dt for one joint.  Quaternions are advanced by the exact exponential
    of the body-frame rotation vector and renormalised."""
    if jtype == "spherical":
        qn = spatial.quat_mul(q, spatial.quat_exp(v * dt))
        return qn / jnp.sqrt(jnp.sum(qn * qn))
    if jtype == "free":
        quat = spatial.quat_mul(q[3:7], spatial.quat_exp(v[3:] * dt))
        quat = quat / jnp.sqrt(jnp.sum(quat * quat))
        return jnp.concatenate([q[:3] + v[:3] * dt, quat])
    return q + v * dt


def qdot(jtype, q, v):
    """Time derivative of the coordinates, q̇ = G(q) v (quaternion rate ½ q ⊗ (0, ω))."""
    if jtype == "spherical":
        return 0.5 * spatial.quat_mul(q, jnp.concatenate([jnp.zeros(1, v.dtype), v]))
    if jtype == "free":
        return jnp.concatenate([v[:3], 0.5 * spatial.quat_mul(q[3:7], jnp.concatenate([jnp.zeros(1, v.dtype), v[3:]]))])
    return v


def difference(jtype, q0, q1):
    """The velocity v with integrate(q0, v, 1) = q1 (q1 ⊖ q0)."""
    if jtype == "spherical":
        return spatial.quat_log(spatial.quat_mul(spatial.quat_conj(q0), q1))
    if jtype == "free":
        r = spatial.quat_log(spatial.quat_mul(spatial.quat_conj(q0[3:7]), q1[3:7]))
        return jnp.concatenate([q1[:3] - q0[:3], r])
    return q1 - q0


def normalize(jtype, q):
    if jtype == "spherical":
        return q / jnp.sqrt(jnp.sum(q * q))
    if jtype == "free":
        quat = q[3:7]
        return jnp.concatenate([q[:3], quat / jnp.sqrt(jnp.sum(quat * quat))])
    return q
