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

The algebra on component tuples is :mod:`jaxmbd.spatial_unrolled`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import joints
from . import spatial_unrolled as SU
from .kinematics import _chain_correction, node_inertias
from .rnea import node_forces
from .topology import tree_backward, tree_forward

# --- joint state ------------------------------------------------------------------

class _Group(NamedTuple):
    """What a joint type's closed form (``JointType.unrolled``) gets: one joint
    type's bodies, the state (members on trailing axes), their per-body
    parameters, and helpers that turn per-body constants into component
    tuples spread over the members (the algebra: :mod:`jaxmbd.spatial_unrolled`)."""
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


def _group_state(model, jt, bodies, qi, vi, q, v):
    """One joint type's bodies: (R_b m3, p_b v3, cJ per body (6-vector), S
    columns per DoF as a spatial vector, body-major).  R_b, p_b: the body's
    pose in its parent (tree transform composed with the joint's).  The
    type's closed form where it has one (``JointType.unrolled``), else its
    array-form jcalc (:func:`_group_state_jcalc`)."""
    form = joints.get(jt).unrolled
    if form is None:
        return _group_state_jcalc(model, jt, bodies, qi, vi, q, v)
    bc = lambda x: SU.spread(x, q.shape[1:])  # noqa: E731
    zero = jnp.zeros((len(bodies),) + q.shape[1:], q.dtype)
    g = _Group(model=model, bodies=bodies, qi=qi, vi=vi, q=q, v=v,
               T=model.tree_rot[bodies], t=model.tree_pos[bodies], axis=model.axis[bodies],
               anchor=model.anchor[bodies], pitch=model.pitch[bodies], zero=zero, z3=(zero, zero, zero),
               M=lambda x: jax.tree.map(bc, SU.m_of(x)), V=lambda x: jax.tree.map(bc, SU.v_of(x)),
               SV=lambda x: jax.tree.map(bc, SU.sv_of(x)))
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
    return SU.m_of(Rb), SU.v_of(pb), SU.sv_of(c), SU.sv_of(jnp.swapaxes(S, 1, 2).reshape((-1, 6)))


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
    R_up = tuple(tuple(jnp.where(first, R_b[i][j][db], float(i == j)) for j in SU.R3) for i in SU.R3)
    p_up = tuple(jnp.where(first, p_b[i][db], 0.0) for i in SU.R3)
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
    bc = lambda x: SU.spread(x, bshape)  # noqa: E731
    R_up, p_up, s, vJ, cJ = joint_state(model, q, v)

    def fwd_v(v_p, inp):
        R, p, vJ_k = inp
        return tuple(SU.add(x, y) for x, y in zip(SU.apply_motion(R, p, v_p), vJ_k))

    z3 = (jnp.zeros(bshape, dt),) * 3
    vel = tree_forward(topo, fwd_v, (z3, z3), (R_up, p_up, vJ))
    c = tuple(SU.add(x, y) for x, y in zip(cJ, SU.cross_motion(vel, vJ)))
    I = jax.tree.map(bc, SU.inertia_of(node_inertias(model)))
    pA = SU.cross_force(vel, SU.inertia_mul(I, vel))
    if f_ext is not None:
        fe = node_forces(model, f_ext)
        fe = (tuple(fe[:, i] for i in SU.R3), tuple(fe[:, 3 + i] for i in SU.R3))
        pA = tuple(SU.sub(x, y) for x, y in zip(pA, fe))

    def bwd(acc, inp):
        IA, pa = acc
        R, p, s_k, c_k, tau_k, arm = inp
        U = SU.inertia_mul(IA, s_k)
        D = SU.sdot(s_k, U) + arm
        u = tau_k - SU.sdot(s_k, pa)
        Ia = SU.inertia_sub_outer(IA, U, D)
        Iac = SU.inertia_mul(Ia, c_k)
        r = u / D
        pa_k = tuple(tuple(pa[h][i] + Iac[h][i] + U[h][i] * r for i in SU.R3) for h in range(2))
        return (SU.inertia_up(R, p, Ia), SU.apply_force_up(R, p, pa_k)), (U, D, u)

    U, D, u = tree_backward(topo, bwd, (I, pA), (R_up, p_up, s, c, tau, bc(model.armature)))

    def fwd_a(par, inp):
        a_p, _ = par
        R, p, s_k, c_k, U_k, D_k, u_k = inp
        a1 = tuple(SU.add(x, y) for x, y in zip(SU.apply_motion(R, p, a_p), c_k))
        qdd = (u_k - SU.sdot(U_k, a1)) / D_k
        return tuple(SU.add(x, SU.scale(qdd, y)) for x, y in zip(a1, s_k)), qdd

    g = model.gravity
    zero = jnp.zeros(bshape, dt)
    a0 = ((zero, zero, zero), tuple(zero - g[i] for i in SU.R3))
    _, qdd = tree_forward(topo, fwd_a, (a0, zero), (R_up, p_up, s, c, U, D, u))
    return qdd


def aba_batch(model, q, v, tau, f_ext=None):
    """The unrolled ABA for a batch with members on the leading axis, computed
    with members on the trailing (minor) axis: q (B, nq), v and tau (B, nv),
    f_ext (B, n, 6) -> qdd (B, nv).  Same numbers as vmapping :func:`aba`."""
    f_ext = None if f_ext is None else jnp.moveaxis(f_ext, 0, -1)
    return aba(model, q.T, v.T, tau.T, f_ext).T
