"""Spatial algebra on component tuples: every 3-vector, 3x3 matrix, spatial vector and symmetric
spatial inertia is a Python tuple of its components, each component an array over a level's nodes
(and, under ``vmap``, over the batch), so every operation is elementwise on whole arrays.  Used by
:mod:`jaxmbd.aba_unrolled` and by the joint types' closed forms (``JointType.unrolled``).

Representation (all tuples; every leaf an array of the same shape):
  v3: (x, y, z); m3: ((r00, r01, r02), (r10, ...), (r20, ...)), row-major;
  a spatial vector: (w, u), two v3; a symmetric spatial inertia:
  (A, B, C) with I = [[A, B], [Bᵀ, C]], A and C symmetric m3 whose mirrored
  entries are the same array object.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

R3 = range(3)


def spread(x, bshape):
    """x broadcast over trailing batch axes bshape (per-node or per-body constants)."""
    return jnp.broadcast_to(x.reshape(x.shape + (1,) * len(bshape)), x.shape + bshape)


# --- v3 / m3 algebra on component tuples --------------------------------------

def add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def sub(a, b):
    return tuple(x - y for x, y in zip(a, b))


def scale(s, a):
    return tuple(s * x for x in a)


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def mv(M, x):
    """M x."""
    return tuple(dot(M[i], x) for i in R3)


def mtv(M, x):
    """Mᵀ x."""
    return tuple(M[0][i] * x[0] + M[1][i] * x[1] + M[2][i] * x[2] for i in R3)


def mm(A, B):
    return tuple(tuple(A[i][0] * B[0][j] + A[i][1] * B[1][j] + A[i][2] * B[2][j] for j in R3) for i in R3)


def sym(entry):
    """A symmetric m3 from ``entry(i, j)`` evaluated for i <= j only."""
    up = {(i, j): entry(i, j) for i in R3 for j in R3 if i <= j}
    return tuple(tuple(up[(min(i, j), max(i, j))] for j in R3) for i in R3)


def cross_cols(p, M):
    """[p]x M: p crossed with every column of M."""
    cols = [cross(p, (M[0][j], M[1][j], M[2][j])) for j in R3]
    return tuple(tuple(cols[j][i] for j in R3) for i in R3)


def rows_cross(M, p):
    """M [p]x: every row of M crossed with p (rowᵀ [p]x = (row x p)ᵀ)."""
    return tuple(cross(M[i], p) for i in R3)


# --- spatial algebra -----------------------------------------------------------

def apply_motion(R, p, m):
    """X m for X = plucker(R, p) (spatial.apply_motion)."""
    w, u = m
    return mtv(R, w), mtv(R, sub(u, cross(p, w)))


def apply_force_up(R, p, f):
    """Xᵀ f (spatial.apply_force_up)."""
    n, g = f
    Rg = mv(R, g)
    return add(mv(R, n), cross(p, Rg)), Rg


def cross_motion(v, m):
    w, u = v
    mw, mu = m
    return cross(w, mw), add(cross(w, mu), cross(u, mw))


def cross_force(v, f):
    w, u = v
    fn, ff = f
    return add(cross(w, fn), cross(u, ff)), cross(w, ff)


def inertia_mul(I, m):
    """I m for a spatial inertia (A, B, C) and a motion vector."""
    A, B, C = I
    w, u = m
    return add(mv(A, w), mv(B, u)), add(mtv(B, w), mv(C, u))


def rotate_sym(R, S):
    """R S Rᵀ for symmetric S (upper triangle only)."""
    T = mm(R, S)
    return sym(lambda i, j: dot(T[i], R[j]))


def inertia_up(R, p, I):
    """Xᵀ I X (spatial.inertia_up): rotate the blocks into the parent frame,
    then shift by p: with P = [p]x and M = B P,
    A' = A - M - Mᵀ - P C P,  B' = B + P C,  C' = C."""
    A, B, C = I
    A = rotate_sym(R, A)
    TB = mm(R, B)
    B = tuple(tuple(dot(TB[i], R[j]) for j in R3) for i in R3)
    C = rotate_sym(R, C)
    M = rows_cross(B, p)
    PC = cross_cols(p, C)
    PCP = rows_cross(PC, p)
    A2 = sym(lambda i, j: A[i][j] - M[i][j] - M[j][i] - PCP[i][j])
    B2 = tuple(tuple(B[i][j] + PC[i][j] for j in R3) for i in R3)
    return A2, B2, C


def inertia_sub_outer(I, U, D):
    """I - U Uᵀ / D (symmetric rank-one downdate)."""
    A, B, C = I
    Uw, Uu = U
    Wd = scale(1.0 / D, Uw)
    Ud = scale(1.0 / D, Uu)
    A2 = sym(lambda i, j: A[i][j] - Wd[i] * Uw[j])
    B2 = tuple(tuple(B[i][j] - Wd[i] * Uu[j] for j in R3) for i in R3)
    C2 = sym(lambda i, j: C[i][j] - Ud[i] * Uu[j])
    return A2, B2, C2


def sdot(a, b):
    """Pairing of two spatial vectors (sᵀ f)."""
    return dot(a[0], b[0]) + dot(a[1], b[1])


# --- conversions between arrays and component tuples ---------------------------

def v_of(x):
    """(..., 3) array -> v3 of (...) arrays."""
    return tuple(x[..., i] for i in R3)


def m_of(x):
    return tuple(tuple(x[..., i, j] for j in R3) for i in R3)


def sv_of(x):
    return (v_of(x[..., :3]), v_of(x[..., 3:]))


def inertia_of(I):
    """(..., 6, 6) symmetric array -> (A, B, C) with shared mirrored entries."""
    A = sym(lambda i, j: I[..., i, j])
    B = tuple(tuple(I[..., i, 3 + j] for j in R3) for i in R3)
    C = sym(lambda i, j: I[..., 3 + i, 3 + j])
    return A, B, C


def quat_rot(w, x, y, z):
    """Rotation of a (not necessarily unit) quaternion, as an m3."""
    n = w * w + x * x + y * y + z * z
    s = 2.0 / n
    xx, yy, zz = s * x * x, s * y * y, s * z * z
    xy, xz, yz = s * x * y, s * x * z, s * y * z
    wx, wy, wz = s * w * x, s * w * y, s * w * z
    return ((1.0 - yy - zz, xy - wz, xz + wy),
            (xy + wz, 1.0 - xx - zz, yz - wx),
            (xz - wy, yz + wx, 1.0 - xx - yy))


def multi_dof_columns(g, cols, cJ):
    """For a joint with several DoFs given its S columns (spatial vectors, in
    order) and cJ: cJ plus the chain correction -Σ_{l<k} (s_l qd_l) x (s_k qd_k)
    of its 1-DoF nodes (kinematics._chain_correction), and the columns
    body-major (body g's columns in order)."""
    q, v, zero = g.q, g.v, g.zero
    qd = [v[g.vi[:, k]] for k in range(len(cols))]
    cols = [jax.tree.map(lambda x: jnp.broadcast_to(x, zero.shape), c) for c in cols]
    sc = [tuple(scale(qd[k], h) for h in cols[k]) for k in range(len(cols))]
    acc = sc[0]
    for k in range(1, len(sc)):
        cJ = tuple(sub(c, x) for c, x in zip(cJ, cross_motion(acc, sc[k])))
        acc = tuple(add(x, y) for x, y in zip(acc, sc[k]))
    Scols = tuple(tuple(jnp.stack([cols[k][h][i] for k in range(len(cols))], axis=1).reshape((-1,) + q.shape[1:])
                        for i in R3) for h in range(2))
    return cJ, Scols
