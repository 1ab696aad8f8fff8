"""Spatial (6-D) vector algebra.

Conventions, used everywhere in jaxmbd:

* Spatial vectors are ordered ``[angular; linear]`` (Featherstone, RBDA ch. 2).
  A motion vector ``[w; v]`` holds the angular velocity ``w`` and the linear
  velocity ``v`` of the body-fixed point that coincides with the frame origin.
  A force vector ``[n; f]`` holds the moment ``n`` about the frame origin and
  the force ``f``.
* Dynamics runs in local body frames.  A pose is a pair ``(R, p)``: the columns
  of ``R`` are the child's axes in parent coordinates and ``p`` is the child's
  origin in parent coordinates, so ``x_parent = R @ x_child + p``.
* The Plücker motion transform from parent to child coordinates of a pose
  ``(R, p)`` is ``X = [[E, 0], [-E [p]x, E]]`` with ``E = R^T`` (RBDA eq. 2.24).
  Forces transform with ``X^{-T}``; the transpose ``X^T`` carries child forces
  to the parent.

Every function works on a single object; batch with ``jax.vmap``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def mm(A, B):
    """Small matrix product A @ B as a broadcast product summed over the shared index.

    For the 3x3 and 6x6 blocks of this library, XLA fuses this into one loop,
    which on CPU is several times faster than a batched dot_general (one tiny
    GEMM call per matrix) and as fast as unrolled multiply-adds; and it is a
    few operations whatever the size, where unrolled multiply-adds take
    several per column of A, so programs compile faster.
    """
    return jnp.sum(A[..., :, :, None] * B[..., None, :, :], axis=-2)


# [v]x = Σ_k v_k K_k with K_k[i, j] = -ε_ijk (the Levi-Civita symbol); small integers, which take v's dtype
_SKEW_BASIS = -np.array([[[0, 0, 0], [0, 0, 1], [0, -1, 0]],
                         [[0, 0, -1], [0, 0, 0], [1, 0, 0]],
                         [[0, 1, 0], [-1, 0, 0], [0, 0, 0]]], np.int8)


def skew(v):
    """3x3 matrix [v]x with [v]x @ u = cross(v, u); one product with a constant basis (four
    operations where nine stacked entries take about twenty: programs compile faster)."""
    return jnp.sum(v[:, None, None] * _SKEW_BASIS, axis=0)


cross = jnp.cross


def plucker(R, p):
    """6x6 motion transform from parent to child for the child pose (R, p)."""
    E = R.T
    top = jnp.concatenate([E, jnp.zeros((3, 3), E.dtype)], axis=1)
    bot = jnp.concatenate([-mm(E, skew(p)), E], axis=1)
    return jnp.concatenate([top, bot], axis=0)


def apply_motion(R, p, m):
    """X m for the motion transform X = plucker(R, p), without forming X
    (E = Rᵀ: [E w; E (u - p x w)])."""
    w, u = m[:3], m[3:]
    Rt = R.T
    return jnp.concatenate([Rt @ w, Rt @ (u - cross(p, w))])


def apply_force_up(R, p, f):
    """Xᵀ f for X = plucker(R, p): a child-frame force in parent coordinates
    ([R n + p x (R f); R f])."""
    Rf = R @ f[3:]
    return jnp.concatenate([R @ f[:3] + cross(p, Rf), Rf])


def inertia_up(R, p, I):
    """Xᵀ I X for X = plucker(R, p) and a symmetric 6x6 I given in child
    coordinates: the same inertia in parent coordinates.

    Written with 3x3 blocks (rotate each block, then shift by p), about half
    the multiply-adds of two 6x6 products.  With blocks A, B, C of R-rotated I
    and P = [p]x:  A' = A - B P + P (Bᵀ - C P),  B' = B + P C,  C' = C.
    """
    Rt = R.T
    A = mm(mm(R, I[:3, :3]), Rt)
    B = mm(mm(R, I[:3, 3:]), Rt)
    C = mm(mm(R, I[3:, 3:]), Rt)
    P = skew(p)
    B2 = B + mm(P, C)
    A2 = A - mm(B, P) + mm(P, B.T - mm(C, P))
    return jnp.concatenate([jnp.concatenate([A2, B2], axis=1), jnp.concatenate([B2.T, C], axis=1)], axis=0)


def crm(v):
    """Motion cross-product matrix: crm(v) @ m = v x m (RBDA eq. 2.31)."""
    w, u = v[:3], v[3:]
    sw = skew(w)
    z = jnp.zeros((3, 3), v.dtype)
    return jnp.concatenate(
        [jnp.concatenate([sw, z], axis=1), jnp.concatenate([skew(u), sw], axis=1)], axis=0
    )


def crf(v):
    """Force cross-product matrix: crf(v) @ f = v x* f = -crm(v)^T f."""
    return -crm(v).T


def cross_motion(v, m):
    """v x m for motion vectors."""
    w, u = v[:3], v[3:]
    return jnp.concatenate([cross(w, m[:3]), cross(w, m[3:]) + cross(u, m[:3])])


def cross_force(v, f):
    """v x* f for a motion vector v and a force vector f."""
    w, u = v[:3], v[3:]
    return jnp.concatenate([cross(w, f[:3]) + cross(u, f[3:]), cross(w, f[3:])])


def spatial_inertia(mass, com, inertia_com):
    """6x6 spatial inertia about the frame origin (RBDA eq. 2.63).

    mass: scalar; com: (3,) centre of mass; inertia_com: (3, 3) rotational
    inertia about the centre of mass, all in the same frame.
    """
    C = skew(com)
    top = jnp.concatenate([inertia_com + mass * mm(C, C.T), mass * C], axis=1)
    bot = jnp.concatenate([mass * C.T, mass * jnp.eye(3, dtype=C.dtype)], axis=1)
    return jnp.concatenate([top, bot], axis=0)


def motion_to_world(R, p, m):
    """Body-frame motion vector -> world coordinates at the world origin."""
    w = R @ m[:3]
    return jnp.concatenate([w, R @ m[3:] + cross(p, w)])


def force_to_world(R, p, f):
    """Body-frame force vector -> world coordinates, moment about the world origin."""
    fw = R @ f[3:]
    return jnp.concatenate([R @ f[:3] + cross(p, fw), fw])


# --- rotations ---------------------------------------------------------------

def quat_to_rot(q):
    """Rotation matrix of a quaternion (w, x, y, z); need not be normalised."""
    q = q / jnp.sqrt(jnp.sum(q * q))
    w, u = q[0], q[1:]
    eye = jnp.eye(3, dtype=q.dtype)
    return (w * w - u @ u) * eye + 2.0 * u[:, None] * u[None, :] + 2.0 * w * skew(u)


def quat_mul(a, b):
    """Hamilton product a ⊗ b of (w, x, y, z) quaternions."""
    aw, av = a[0], a[1:]
    bw, bv = b[0], b[1:]
    return jnp.concatenate([jnp.array([aw * bw - av @ bv]), aw * bv + bw * av + cross(av, bv)])


def quat_conj(q):
    return q * jnp.array([1.0, -1.0, -1.0, -1.0], q.dtype)


def _safe_norm(v):
    """Norm with a finite gradient at zero."""
    sq = jnp.sum(v * v)
    nz = sq > 0
    return jnp.where(nz, jnp.sqrt(jnp.where(nz, sq, 1.0)), 0.0)


def quat_exp(r):
    """Unit quaternion of the rotation vector r (angle |r| about r/|r|)."""
    th = _safe_norm(r)
    half = 0.5 * th
    small = th < 1e-6
    th_s = jnp.where(small, 1.0, th)
    # sin(th/2)/th with a Taylor series near zero keeps the gradient exact.
    k = jnp.where(small, 0.5 - th * th / 48.0, jnp.sin(half) / th_s)
    return jnp.concatenate([jnp.array([jnp.cos(half)]), k * r])


def quat_log(q):
    """Rotation vector of a unit quaternion (shortest rotation, angle in [0, pi])."""
    q = jnp.where(q[0] < 0, -q, q)
    v = q[1:]
    s = _safe_norm(v)
    th = 2.0 * jnp.arctan2(s, q[0])
    small = s < 1e-6
    s_s = jnp.where(small, 1.0, s)
    # th/s -> 2/w (1 + s^2/(3 w^2)) for small s.
    w = q[0]
    k = jnp.where(small, (2.0 / w) * (1.0 - s * s / (3.0 * w * w)), th / s_s)
    return k * v


def axis_angle_rot(axis, angle):
    """Rotation matrix of a rotation by `angle` about unit `axis` (Rodrigues)."""
    K = skew(axis)
    return jnp.eye(3, dtype=K.dtype) + jnp.sin(angle) * K + (1 - jnp.cos(angle)) * (K @ K)


def rotation_vector(R):
    """log(R)ᵛ: zero only at the identity (the skew part ½ vee(R - Rᵀ) also
    vanishes at half turns); smooth near the identity (series below 1e-4 rad)."""
    s = 0.5 * jnp.stack([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    c = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    n2 = jnp.sum(s * s)
    small = n2 < 1e-8
    n = jnp.sqrt(jnp.where(small, 1.0, n2))
    theta = jnp.arctan2(n, c)
    return s * jnp.where(small, 1.0 + n2 / 6.0, theta / n)
