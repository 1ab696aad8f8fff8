"""The articulated-body algorithm with its spatial algebra unrolled into scalars.

Same algorithm, same level schedule and same results as :func:`jaxmbd.aba.aba`;
only the representation differs.  There every node carries small arrays
(a 6-vector, a 6x6 inertia, a 3x3 rotation) and the per-node maths is array
maths over those tiny trailing axes.  Here every spatial quantity is a Python
tuple of its components, each component an array over the nodes of a level
(and, under ``vmap``, over the batch).  So every operation the compiler sees is
an elementwise operation on whole arrays of nodes x members: no 3- or 6-long
minor axis, no small dot products, no concatenations.  On a GPU that is what
large batches want: humanoid30's RK4 rollout at batch 65536 on an H100 runs
1.6x faster than with the array form (and 1.6x MJX;
bench/results/throughput_gpu.md).  On a CPU the gain is small (about 1.1x in
the rollout, bench/results/throughput_cpu.md): XLA:CPU materialises most of
the intermediate component arrays, so the pass is bound by memory traffic,
not arithmetic.

The formulas also use structure the array form ignores: inertias are
symmetric (21 distinct entries; only the upper triangles are computed), [p]x
products are cross products, and a joint type's transform can be written out
(``JointType.unrolled`` in jaxmbd/joints: a revolute joint's pose in its
parent is ``T + sin q TK + (1 - cos q) TK²`` with the constant products TK,
TK² formed once per call); a type without such a closed form goes through its
array-form jcalc, one member at a time.

Representation (all tuples; every leaf an array of the same shape):
  v3: (x, y, z); m3: ((r00, r01, r02), (r10, ...), (r20, ...)), row-major;
  a spatial vector: (w, u), two v3; a symmetric spatial inertia:
  (A, B, C) with I = [[A, B], [Bᵀ, C]], A and C symmetric m3 whose mirrored
  entries are the same array object.
"""

from __future__ import annotations

import sys
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import joints
from .kinematics import _chain_correction, node_inertias
from .rnea import node_forces
from .topology import tree_backward, tree_forward

R3 = range(3)


def _spread(x, bshape):
    """x broadcast over trailing batch axes bshape (per-node or per-body constants)."""
    return jnp.broadcast_to(x.reshape(x.shape + (1,) * len(bshape)), x.shape + bshape)


# --- v3 / m3 algebra on component tuples --------------------------------------

def _add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def _sub(a, b):
    return tuple(x - y for x, y in zip(a, b))


def _scale(s, a):
    return tuple(s * x for x in a)


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _mv(M, x):
    """M x."""
    return tuple(_dot(M[i], x) for i in R3)


def _mtv(M, x):
    """Mᵀ x."""
    return tuple(M[0][i] * x[0] + M[1][i] * x[1] + M[2][i] * x[2] for i in R3)


def _mm(A, B):
    return tuple(tuple(A[i][0] * B[0][j] + A[i][1] * B[1][j] + A[i][2] * B[2][j] for j in R3) for i in R3)


def _sym(entry):
    """A symmetric m3 from ``entry(i, j)`` evaluated for i <= j only."""
    up = {(i, j): entry(i, j) for i in R3 for j in R3 if i <= j}
    return tuple(tuple(up[(min(i, j), max(i, j))] for j in R3) for i in R3)


def _cross_cols(p, M):
    """[p]x M: p crossed with every column of M."""
    cols = [_cross(p, (M[0][j], M[1][j], M[2][j])) for j in R3]
    return tuple(tuple(cols[j][i] for j in R3) for i in R3)


def _rows_cross(M, p):
    """M [p]x: every row of M crossed with p (rowᵀ [p]x = (row x p)ᵀ)."""
    return tuple(_cross(M[i], p) for i in R3)


# --- spatial algebra -----------------------------------------------------------

def _apply_motion(R, p, m):
    """X m for X = plucker(R, p) (spatial.apply_motion)."""
    w, u = m
    return _mtv(R, w), _mtv(R, _sub(u, _cross(p, w)))


def _apply_force_up(R, p, f):
    """Xᵀ f (spatial.apply_force_up)."""
    n, g = f
    Rg = _mv(R, g)
    return _add(_mv(R, n), _cross(p, Rg)), Rg


def _cross_motion(v, m):
    w, u = v
    mw, mu = m
    return _cross(w, mw), _add(_cross(w, mu), _cross(u, mw))


def _cross_force(v, f):
    w, u = v
    fn, ff = f
    return _add(_cross(w, fn), _cross(u, ff)), _cross(w, ff)


def _inertia_mul(I, m):
    """I m for a spatial inertia (A, B, C) and a motion vector."""
    A, B, C = I
    w, u = m
    return _add(_mv(A, w), _mv(B, u)), _add(_mtv(B, w), _mv(C, u))


def _rotate_sym(R, S):
    """R S Rᵀ for symmetric S (upper triangle only)."""
    T = _mm(R, S)
    return _sym(lambda i, j: _dot(T[i], R[j]))


def _inertia_up(R, p, I):
    """Xᵀ I X (spatial.inertia_up): rotate the blocks into the parent frame,
    then shift by p: with P = [p]x and M = B P,
    A' = A - M - Mᵀ - P C P,  B' = B + P C,  C' = C."""
    A, B, C = I
    A = _rotate_sym(R, A)
    TB = _mm(R, B)
    B = tuple(tuple(_dot(TB[i], R[j]) for j in R3) for i in R3)
    C = _rotate_sym(R, C)
    M = _rows_cross(B, p)
    PC = _cross_cols(p, C)
    PCP = _rows_cross(PC, p)
    A2 = _sym(lambda i, j: A[i][j] - M[i][j] - M[j][i] - PCP[i][j])
    B2 = tuple(tuple(B[i][j] + PC[i][j] for j in R3) for i in R3)
    return A2, B2, C


def _inertia_sub_outer(I, U, D):
    """I - U Uᵀ / D (symmetric rank-one downdate)."""
    A, B, C = I
    Uw, Uu = U
    Wd = _scale(1.0 / D, Uw)
    Ud = _scale(1.0 / D, Uu)
    A2 = _sym(lambda i, j: A[i][j] - Wd[i] * Uw[j])
    B2 = tuple(tuple(B[i][j] - Wd[i] * Uu[j] for j in R3) for i in R3)
    C2 = _sym(lambda i, j: C[i][j] - Ud[i] * Uu[j])
    return A2, B2, C2


def _sdot(a, b):
    """Pairing of two spatial vectors (sᵀ f)."""
    return _dot(a[0], b[0]) + _dot(a[1], b[1])


# --- conversions between arrays and component tuples ---------------------------

def _v_of(x):
    """(..., 3) array -> v3 of (...) arrays."""
    return tuple(x[..., i] for i in R3)


def _m_of(x):
    return tuple(tuple(x[..., i, j] for j in R3) for i in R3)


def _sv_of(x):
    return (_v_of(x[..., :3]), _v_of(x[..., 3:]))


def _inertia_of(I):
    """(..., 6, 6) symmetric array -> (A, B, C) with shared mirrored entries."""
    A = _sym(lambda i, j: I[..., i, j])
    B = tuple(tuple(I[..., i, 3 + j] for j in R3) for i in R3)
    C = _sym(lambda i, j: I[..., 3 + i, 3 + j])
    return A, B, C


def _quat_rot(w, x, y, z):
    """Rotation of a (not necessarily unit) quaternion, as an m3."""
    n = w * w + x * x + y * y + z * z
    s = 2.0 / n
    xx, yy, zz = s * x * x, s * y * y, s * z * z
    xy, xz, yz = s * x * y, s * x * z, s * y * z
    wx, wy, wz = s * w * x, s * w * y, s * w * z
    return ((1.0 - yy - zz, xy - wz, xz + wy),
            (xy + wz, 1.0 - xx - zz, yz - wx),
            (xz - wy, yz + wx, 1.0 - xx - yy))


# --- joint state ------------------------------------------------------------------

class _Group(NamedTuple):
    """What a joint type's closed form (``JointType.unrolled``) gets: one joint
    type's bodies, the state (members on trailing axes), their per-body
    parameters, helpers that turn per-body constants into component tuples
    spread over the members, and this module (``alg``) for the algebra."""
    model: object
    bodies: np.ndarray
    qi: np.ndarray
    vi: np.ndarray
    q: jax.Array
    v: jax.Array
    T: jax.Array       # (G,3,3) joint frame in the parent
    t: jax.Array       # (G,3)
    axis: jax.Array
    anchor: jax.Array
    pitch: jax.Array
    zero: jax.Array    # (G, *batch) zeros
    z3: tuple
    M: Callable        # (G,3,3) constant -> m3
    V: Callable        # (G,3) constant -> v3
    SV: Callable       # (G,6) constant -> spatial vector
    alg: object


def _multi_dof_columns(g, cols, cJ):
    """For a joint with several DoFs given its S columns (spatial vectors, in
    order) and cJ: cJ plus the chain correction -Σ_{l<k} (s_l qd_l) x (s_k qd_k)
    of its 1-DoF nodes (kinematics._chain_correction), and the columns
    body-major (body g's columns in order)."""
    q, v, zero = g.q, g.v, g.zero
    qd = [v[g.vi[:, k]] for k in range(len(cols))]
    cols = [jax.tree.map(lambda x: jnp.broadcast_to(x, zero.shape), c) for c in cols]
    sc = [tuple(_scale(qd[k], h) for h in cols[k]) for k in range(len(cols))]
    acc = sc[0]
    for k in range(1, len(sc)):
        cJ = tuple(_sub(c, x) for c, x in zip(cJ, _cross_motion(acc, sc[k])))
        acc = tuple(_add(x, y) for x, y in zip(acc, sc[k]))
    Scols = tuple(tuple(jnp.stack([cols[k][h][i] for k in range(len(cols))], axis=1).reshape((-1,) + q.shape[1:])
                        for i in R3) for h in range(2))
    return cJ, Scols


def _group_state(model, jt, bodies, qi, vi, q, v):
    """One joint type's bodies: (R_b m3, p_b v3, cJ per body (6-vector), S
    columns per DoF as a spatial vector, body-major).  R_b, p_b: the body's
    pose in its parent (tree transform composed with the joint's).  The
    type's closed form where it has one (``JointType.unrolled``), else its
    array-form jcalc (:func:`_group_state_jcalc`)."""
    form = joints.get(jt).unrolled
    if form is None:
        return _group_state_jcalc(model, jt, bodies, qi, vi, q, v)
    bc = lambda x: _spread(x, q.shape[1:])  # noqa: E731
    zero = jnp.zeros((len(bodies),) + q.shape[1:], q.dtype)
    g = _Group(model=model, bodies=bodies, qi=qi, vi=vi, q=q, v=v,
               T=model.tree_rot[bodies], t=model.tree_pos[bodies], axis=model.axis[bodies],
               anchor=model.anchor[bodies], pitch=model.pitch[bodies], zero=zero, z3=(zero, zero, zero),
               M=lambda x: jax.tree.map(bc, _m_of(x)), V=lambda x: jax.tree.map(bc, _v_of(x)),
               SV=lambda x: jax.tree.map(bc, _sv_of(x)), alg=sys.modules[__name__])
    return form(g)


def _group_state_jcalc(model, jt, bodies, qi, vi, q, v):
    """Any joint type through the array form (its jcalc), then split into components."""
    if q.ndim > 1:  # members on the trailing axis: one member at a time, vmapped
        f = lambda q, v: _group_state_jcalc(model, jt, bodies, qi, vi, q, v)  # noqa: E731
        return jax.vmap(f, in_axes=-1, out_axes=-1)(q, v)
    R, p, S, c = jax.vmap(joints.get(jt).jcalc)(q[qi], v[vi], model.axis[bodies], model.anchor[bodies],
                                                 model.pitch[bodies])
    if S.shape[-1] > 1:
        c = c + jax.vmap(_chain_correction)(S, v[vi])
    T = model.tree_rot[bodies]
    Rb = T @ R
    pb = model.tree_pos[bodies] + jnp.einsum("gij,gj->gi", T, p)
    return _m_of(Rb), _v_of(pb), _sv_of(c), _sv_of(jnp.swapaxes(S, 1, 2).reshape((-1, 6)))


def joint_state(model, q, v):
    """Per-node (R_up m3, p_up v3, s, vJ, cJ) as component tuples of (nv,) arrays
    (kinematics.joint_state, unrolled)."""
    topo = model.topo
    Rs, ps, cs, Ss = [], [], [], []
    for jt, bodies, qi, vi in topo.joint_groups:
        R, p, c, S = _group_state(model, jt, bodies, qi, vi, q, v)
        Rs.append(R), ps.append(p), cs.append(c), Ss.append(S)
    body_perm, dof_perm = topo.joint_group_perm
    cat = lambda parts, idx: jax.tree.map(lambda *xs: jnp.concatenate(xs)[idx], *parts)
    bshape = q.shape[1:]
    first = jnp.asarray(topo.dof_is_first).reshape((-1,) + (1,) * len(bshape))
    last = jnp.asarray(topo.dof_is_last).reshape(first.shape)
    db = topo.dof_body
    R_b, p_b, c_b = cat(Rs, body_perm), cat(ps, body_perm), cat(cs, body_perm)
    R_up = tuple(tuple(jnp.where(first, R_b[i][j][db], float(i == j)) for j in R3) for i in R3)
    p_up = tuple(jnp.where(first, p_b[i][db], 0.0) for i in R3)
    cJ = jax.tree.map(lambda x: jnp.where(last, x[db], 0.0), c_b)
    s = cat(Ss, dof_perm)
    s = jax.tree.map(lambda x: jnp.broadcast_to(x, v.shape), s)
    vJ = jax.tree.map(lambda x: x * v, s)
    return R_up, p_up, s, vJ, cJ


# --- the algorithm ---------------------------------------------------------------

def aba(model, q, v, tau, f_ext=None):
    """Joint accelerations by the ABA, unrolled (drop-in for jaxmbd.aba.aba:
    tau includes every generalized force; f_ext (n, 6) body-frame forces).

    Members may ride on trailing axes: q (nq, *batch), v and tau (nv, *batch),
    f_ext (n, 6, *batch) give qdd (nv, *batch), every operation then running
    over contiguous member rows (see :func:`aba_batch`)."""
    topo = model.topo
    dt = q.dtype
    bshape = q.shape[1:]
    bc = lambda x: _spread(x, bshape)  # noqa: E731
    R_up, p_up, s, vJ, cJ = joint_state(model, q, v)

    def fwd_v(v_p, inp):
        R, p, vJ_k = inp
        return tuple(_add(x, y) for x, y in zip(_apply_motion(R, p, v_p), vJ_k))

    z3 = (jnp.zeros(bshape, dt),) * 3
    vel = tree_forward(topo, fwd_v, (z3, z3), (R_up, p_up, vJ))
    c = tuple(_add(x, y) for x, y in zip(cJ, _cross_motion(vel, vJ)))
    I = jax.tree.map(bc, _inertia_of(node_inertias(model)))
    pA = _cross_force(vel, _inertia_mul(I, vel))
    if f_ext is not None:
        fe = node_forces(model, f_ext)
        fe = (tuple(fe[:, i] for i in R3), tuple(fe[:, 3 + i] for i in R3))
        pA = tuple(_sub(x, y) for x, y in zip(pA, fe))

    def bwd(acc, inp):
        IA, pa = acc
        R, p, s_k, c_k, tau_k, arm = inp
        U = _inertia_mul(IA, s_k)
        D = _sdot(s_k, U) + arm
        u = tau_k - _sdot(s_k, pa)
        Ia = _inertia_sub_outer(IA, U, D)
        Iac = _inertia_mul(Ia, c_k)
        r = u / D
        pa_k = tuple(tuple(pa[h][i] + Iac[h][i] + U[h][i] * r for i in R3) for h in range(2))
        return (_inertia_up(R, p, Ia), _apply_force_up(R, p, pa_k)), (U, D, u)

    U, D, u = tree_backward(topo, bwd, (I, pA), (R_up, p_up, s, c, tau, bc(model.armature)))

    def fwd_a(par, inp):
        a_p, _ = par
        R, p, s_k, c_k, U_k, D_k, u_k = inp
        a1 = tuple(_add(x, y) for x, y in zip(_apply_motion(R, p, a_p), c_k))
        qdd = (u_k - _sdot(U_k, a1)) / D_k
        return tuple(_add(x, _scale(qdd, y)) for x, y in zip(a1, s_k)), qdd

    g = model.gravity
    zero = jnp.zeros(bshape, dt)
    a0 = ((zero, zero, zero), tuple(zero - g[i] for i in R3))
    _, qdd = tree_forward(topo, fwd_a, (a0, zero), (R_up, p_up, s, c, U, D, u))
    return qdd


def aba_batch(model, q, v, tau, f_ext=None):
    """The unrolled ABA for a batch with members on the leading axis, computed
    with members on the trailing (minor) axis: q (B, nq), v and tau (B, nv),
    f_ext (B, n, 6) -> qdd (B, nv).  Same numbers as vmapping :func:`aba`."""
    f_ext = None if f_ext is None else jnp.moveaxis(f_ext, 0, -1)
    return aba(model, q.T, v.T, tau.T, f_ext).T
