"""Joint kinematics, forward kinematics, Jacobians and energies.

Body velocities are spatial motion vectors in body coordinates (spatial.py).
World poses are (R, p) with x_world = R x_body + p.
"""

from __future__ import annotations

import functools
from functools import partial

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import joints, spatial
from .tangents import value_and_jvp_of_nonzero
from .topology import tree_forward


class JointState(NamedTuple):
    """Per-node joint quantities (one node per DoF, topology.py).

    A body's joint transform sits on its first node (identity on the others);
    all of a joint's nodes use the child body's coordinates.
    """
    R_up: jax.Array   # (nv,3,3) pose of the node in its parent node's frame
    p_up: jax.Array   # (nv,3)
    X_up: jax.Array   # (nv,6,6) motion transform parent node -> node
    s: jax.Array      # (nv,6) the node's motion axis, body coordinates
    vJ: jax.Array     # (nv,6) s_k qd_k
    cJ: jax.Array     # (nv,6) velocity-product term, on each joint's last node


class Kinematics(NamedTuple):
    rot: jax.Array    # (n,3,3) body orientations in the world
    pos: jax.Array    # (n,3) body origins in the world
    vel: jax.Array    # (n,6) spatial velocities in body coordinates
    mocap: tuple = None   # the mocap bodies' (rot (m,3,3), pos (m,3)) in the world (model.mocap), or None


def _check(model, q, v=None):
    if q.shape != (model.nq,):
        raise ValueError(f"q has shape {q.shape}, expected ({model.nq},); use jax.vmap for batches")
    if v is not None and v.shape != (model.nv,):
        raise ValueError(f"v has shape {v.shape}, expected ({model.nv},); use jax.vmap for batches")


def _chain_correction(S, qd):
    """-Σ_{l<k} (s_l qd_l) x (s_k qd_k): makes a chain of 1-DoF nodes with
    identity transforms reproduce the multi-DoF joint's velocity product
    (a = X a_p + S qdd + cJ + (X v_p) x vJ; the chain adds v_k x s_k qd_k with
    v_k including the earlier nodes' s_l qd_l)."""
    cols = S * qd[None, :]
    out = jnp.zeros(6, S.dtype)
    for k in range(1, S.shape[1]):
        out = out - spatial.cross_motion(jnp.sum(cols[:, :k], axis=1), cols[:, k])
    return out


@jax.jit
def joint_state(model, q, v=None) -> JointState:
    """Evaluate every joint (grouped by joint type, vectorised within a group)."""
    topo = model.topo
    nv = topo.nv
    q = jnp.asarray(q)
    _check(model, q, v)
    v = jnp.zeros(nv, q.dtype) if v is None else jnp.asarray(v)
    dt = q.dtype
    # Groups are evaluated one joint type at a time and put back in body/DoF
    # order by one static permutation (a gather: scatters cost far more under vmap).
    Rs, ps, Ss, cs = [], [], [], []
    for jt, bodies, qi, vi in topo.joint_groups:
        R, p, S, c = jax.vmap(joints.jcalc(jt))(
            q[qi], v[vi], model.axis[bodies], model.anchor[bodies], model.pitch[bodies])
        if S.shape[-1] > 1:
            c = c + jax.vmap(_chain_correction)(S, v[vi])
        Rs.append(R)
        ps.append(p)
        Ss.append(jnp.swapaxes(S, 1, 2).reshape((-1, 6)))
        cs.append(c)
    body_perm, dof_perm = topo.joint_group_perm
    R_j = jnp.concatenate(Rs)[body_perm]
    p_j = jnp.concatenate(ps)[body_perm]
    s = jnp.concatenate(Ss)[dof_perm]
    last = jnp.asarray(topo.dof_is_last)
    cJ = jnp.where(last[:, None], jnp.concatenate(cs)[body_perm][topo.dof_body], 0.0)
    R_b = spatial.mm(model.tree_rot, R_j)
    p_b = model.tree_pos + jnp.einsum("nij,nj->ni", model.tree_rot, p_j)
    first = jnp.asarray(topo.dof_is_first)
    R_up = jnp.where(first[:, None, None], R_b[topo.dof_body], jnp.eye(3, dtype=dt))
    p_up = jnp.where(first[:, None], p_b[topo.dof_body], 0.0)
    X_up = jax.vmap(spatial.plucker)(R_up, p_up)
    return JointState(R_up, p_up, X_up, s, s * v[:, None], cJ)


@jax.jit
def forward_kinematics(model, q, v=None) -> Kinematics:
    """World poses and body-frame spatial velocities of every moving body.

    Its derivatives are those of :func:`kinematics_and_axes` (the poses' own rule); a body's
    velocity is its world twist, the sum of its supporting DoFs' axes times their speeds, in
    its own coordinates."""
    q = jnp.asarray(q)
    _check(model, q, v)
    rot, pos, axes = _poses_axes(model, q)
    if v is None:
        return Kinematics(rot, pos, jnp.zeros(pos.shape[:-1] + (6,), pos.dtype), _mocap(model))
    twist = jnp.asarray(model.topo.support, axes.dtype) @ (axes * jnp.asarray(v)[:, None])   # (n, 6) at the origin
    w = jnp.einsum("nji,nj->ni", rot, twist[:, :3])
    lin = jnp.einsum("nji,nj->ni", rot, twist[:, 3:] + jnp.cross(twist[:, :3], pos))
    return Kinematics(rot, pos, jnp.concatenate([w, lin], 1), _mocap(model))


def _mocap(model):
    """The mocap bodies' world poses (rot, pos) from ``model.mocap``, or None without them."""
    mc = getattr(model, "mocap", None)
    return None if mc is None else (mc.rotations(), mc.pos)


@jax.jit
def kinematics_and_axes(model, q):
    """(the :class:`Kinematics` at q with zero velocities, each DoF's motion axis in world
    coordinates at the world origin (nv, 6)) from one evaluation of the joints.  With
    A = ``topo.support`` (n, nv), a body's world twist is A (axes * v) and a body wrench W (n, 6)
    (world coordinates, moment about the origin) has the generalized force sum(axes * (Aᵀ W), -1):
    the subtree sums of the RNEA's backward pass, taken at the world origin where they need no
    transform (Featherstone, Rigid Body Dynamics Algorithms, §5.3).

    Derivatives (a ``custom_jvp``, :func:`_poses_axes_jvp`): a body's pose moves by its world
    twist, the sum over its ancestors of each joint's own motion, so one tangent direction costs
    the joints' local derivatives and one product with the ancestor table, not a root-to-leaves
    pass (the joints' world-frame axes as the columns of the bodies' Jacobians, as in Carpentier and
    Mansard, "Analytical derivatives of rigid body dynamics algorithms", RSS 2018)."""
    rot, pos, axes = _poses_axes(model, jnp.asarray(q))
    return Kinematics(rot, pos, jnp.zeros(pos.shape[:-1] + (6,), pos.dtype), _mocap(model)), axes


def _forward(model, js):
    def step(par, inp):
        R_p, p_p, v_p = par
        R_up, p_up, vJ = inp
        return spatial.mm(R_p, R_up), p_p + R_p @ p_up, spatial.apply_motion(R_up, p_up, v_p) + vJ

    dt = js.X_up.dtype
    root = (jnp.eye(3, dtype=dt), jnp.zeros(3, dt), jnp.zeros(6, dt))
    rot, pos, vel = tree_forward(model.topo, step, root, (js.R_up, js.p_up, js.vJ))
    last = model.topo.body_last_dof
    return Kinematics(rot[last], pos[last], vel[last])


def _poses_axes_value(model, js):
    kin = _forward(model, js)
    return kin.rot, kin.pos, dof_motion_world(model, kin, js)


@jax.custom_jvp
def _poses_axes(model, q):
    """(rot (n, 3, 3), pos (n, 3), axes (nv, 6)): the bodies' world poses and the DoFs' world axes."""
    return _poses_axes_value(model, joint_state(model, q))


@partial(_poses_axes.defjvp, symbolic_zeros=True)
def _poses_axes_jvp(primals, tangents):
    """The poses' tangents from the joints' local ones.  Body c hangs from its parent p by its joint's
    frame (R_up, p_up) in p's coordinates: rot_c = rot_p R_up, pos_c = pos_p + rot_p p_up.  Writing
    d rot_c = E_c rot_c and d pos_c = u_c + E_c pos_c (E = [ω]× and u the world twist's linear part
    at the origin, for tangents that keep rotations orthonormal; any 3 x 3 E otherwise, e.g. a
    tangent of the model's joint frames), the recursion telescopes (R_up orthonormal):
        E_c = E_p + G_c,   G_c = rot_p (d R_up R_upᵀ) rot_pᵀ,
        u_c = u_p + h_c,   h_c = rot_p d p_up - G_c pos_c,
    so E and u are sums of G and h over each body's ancestors: one product with the 0/1 ancestor
    table.  An axis a = X s (X the body's world transform, s its body-frame axis) moves by
    d a = d X s + X d s.  The joints' local tangents (d R_up, d p_up, d s) are plain forward mode of
    the joint functions, in q and in the model's joint parameters alike."""
    model, q = primals
    js, d_js = value_and_jvp_of_nonzero(joint_state, primals, tangents)   # one evaluation of the joints
    rot, pos, axes = _poses_axes_value(model, js)
    return (rot, pos, axes), pose_tangents(model.topo, js, rot, pos, (d_js.R_up, d_js.p_up, d_js.s))


def pose_tangents(topo, js, rot, pos, d_frames, ancestors=None):
    """(d rot, d pos, d axes) of :func:`_poses_axes_jvp` from the joints' local tangents
    ``d_frames`` = (d R_up, d p_up, d s) (per node, as :class:`JointState`'s); ``ancestors``: the
    0/1 table of the sums (default ``topo.ancestors``)."""
    dR, dp, ds = d_frames
    first = topo.v_adr
    eye = jnp.eye(3, dtype=rot.dtype)[None]
    R_par = jnp.concatenate([eye, rot])[np.asarray(topo.parent_np) + 1]     # the parent's orientation
    R_up = js.R_up[first]
    G = spatial.mm(spatial.mm(R_par, spatial.mm(dR[first], jnp.swapaxes(R_up, -1, -2))), jnp.swapaxes(R_par, -1, -2))
    h = jnp.einsum("nij,nj->ni", R_par, dp[first]) - jnp.einsum("nij,nj->ni", G, pos)
    anc = jnp.asarray(topo.ancestors if ancestors is None else ancestors, rot.dtype)
    E = jnp.einsum("ij,jab->iab", anc, G)
    drot = spatial.mm(E, rot)
    dpos = anc @ h + jnp.einsum("nij,nj->ni", E, pos)
    b = topo.dof_body
    Rb, pb, dRb, dpb = rot[b], pos[b], drot[b], dpos[b]
    w = jnp.einsum("kij,kj->ki", Rb, js.s[:, :3])
    dw = jnp.einsum("kij,kj->ki", dRb, js.s[:, :3]) + jnp.einsum("kij,kj->ki", Rb, ds[:, :3])
    dlin = (jnp.einsum("kij,kj->ki", dRb, js.s[:, 3:]) + jnp.einsum("kij,kj->ki", Rb, ds[:, 3:])
            + jnp.cross(dpb, w) + jnp.cross(pb, dw))
    return drot, dpos, jnp.concatenate([dw, dlin], 1)


def node_inertias(model):
    """(nv,6,6): each body's spatial inertia on its joint's last node, zero elsewhere."""
    topo = model.topo
    I = body_inertias(model)[topo.dof_body]
    return jnp.where(jnp.asarray(topo.dof_is_last)[:, None, None], I, 0.0)


def dof_motion_world(model, kin: Kinematics, js: JointState):
    """Each DoF's motion axis in world coordinates at the world origin, (nv, 6)."""
    b = model.topo.dof_body
    return jax.vmap(spatial.motion_to_world)(kin.rot[b], kin.pos[b], js.s)


def _resolve_frame(model, body):
    """(moving body index, R_off, p_off) for a body/frame name or body index."""
    if isinstance(body, (int, np.integer)):
        if not 0 <= body < model.n_bodies:
            raise ValueError(f"body index {body} out of range [0, {model.n_bodies})")
        return int(body), None, None
    f = model.frame_id(body)
    return model.frame_body[f], model.frame_rot[f], model.frame_pos[f]


@partial(jax.jit, static_argnames=('body',))
def frame_pose(model, q, body):
    """World pose (R, p) of a body or welded frame (name or body index)."""
    b, Ro, po = _resolve_frame(model, body)
    kin = forward_kinematics(model, q)
    R, p = kin.rot[b], kin.pos[b]
    if Ro is None:
        return R, p
    return R @ Ro, p + R @ po


@partial(jax.jit, static_argnames=('body',))
def frame_jacobian(model, q, body, point=(0.0, 0.0, 0.0)):
    """(6, nv) Jacobian of [angular velocity; linear velocity of a point] in world coordinates.

    ``point`` is given in the coordinates of ``body`` (a name, possibly of a
    welded frame, or a body index); the default is the frame's origin.
    """
    b, Ro, po = _resolve_frame(model, body)
    kin, Sw = kinematics_and_axes(model, q)   # Sw: (nv, 6)
    point = jnp.asarray(point, kin.pos.dtype)
    if Ro is not None:
        point = po + Ro @ point
    pw = kin.pos[b] + kin.rot[b] @ point
    mask = jnp.asarray(model.topo.support[b], Sw.dtype)
    Jw = Sw[:, :3] * mask[:, None]
    Jv = (Sw[:, 3:] + spatial.cross(Jw, pw)) * mask[:, None]  # v_point = v_O + w x p
    return jnp.concatenate([Jw.T, Jv.T], axis=0)


@partial(jax.jit, static_argnames=('body',))
def point_jacobian(model, q, body, point=(0.0, 0.0, 0.0)):
    """(3, nv) Jacobian of the world-frame velocity of a point fixed in ``body``."""
    return frame_jacobian(model, q, body, point)[3:]


def body_inertias(model):
    """(n,6,6) spatial inertias about each body origin, in body coordinates.

    From the symmetric part of ``model.inertia`` (a rotational inertia is
    symmetric, and the same for a symmetric one): every algorithm is then a
    function of that part alone, so derivatives with respect to the inertia
    agree between algorithms (the ABA's derivatives are computed through
    the RNEA, ``aba.aba``) and are symmetric."""
    Ic = 0.5 * (model.inertia + jnp.swapaxes(model.inertia, -1, -2))
    return jax.vmap(spatial.spatial_inertia)(model.mass, model.com, Ic)


@jax.jit
def kinetic_energy(model, q, v):
    """Σ ½ v_iᵀ I_i v_i over bodies (independent of the mass matrix)."""
    kin = forward_kinematics(model, q, v)
    I = body_inertias(model)
    return 0.5 * jnp.einsum("ni,nij,nj->", kin.vel, I, kin.vel)


def _per_group(model, fn, q_out, *args):
    """Apply a per-joint function to every joint, vectorised within joint types."""
    for jt, bodies, qi, vi in model.topo.joint_groups:
        q_out = fn(jt, qi, vi, q_out, *args)
    return q_out


@jax.jit
def integrate_q(model, q, v, dt=1.0):
    """Advance q along v for time dt on the configuration manifold (q ⊕ v dt).

    Quaternions advance by the exact exponential map of the body-frame angular
    velocity and are renormalised."""
    q, v = jnp.asarray(q), jnp.asarray(v)
    _check(model, q, v)

    def upd(jt, qi, vi, out):
        new = jax.vmap(lambda a, b: joints.integrate(jt, a, b, dt))(q[qi], v[vi])
        return out.at[qi].set(new)
    return _per_group(model, upd, q)


@jax.jit
def qdot(model, q, v):
    """Coordinate rates q̇ = G(q) v, shape (nq,) (quaternion rates for ball/free joints)."""
    q, v = jnp.asarray(q), jnp.asarray(v)
    _check(model, q, v)

    def upd(jt, qi, vi, out):
        return out.at[qi].set(jax.vmap(lambda a, b: joints.qdot(jt, a, b))(q[qi], v[vi]))
    return _per_group(model, upd, jnp.zeros_like(q))


@jax.jit
def difference_q(model, q0, q1):
    """The velocity v with integrate_q(model, q0, v, 1) = q1 (q1 ⊖ q0)."""
    q0, q1 = jnp.asarray(q0), jnp.asarray(q1)
    _check(model, q0)
    _check(model, q1)

    def upd(jt, qi, vi, out):
        return out.at[vi].set(jax.vmap(lambda a, b: joints.difference(jt, a, b))(q0[qi], q1[qi]))
    return _per_group(model, upd, jnp.zeros(model.nv, jnp.result_type(q0, q1)))


@jax.jit
def normalize_q(model, q):
    """Renormalise every quaternion in q."""
    q = jnp.asarray(q)

    def upd(jt, qi, vi, out):
        return out.at[qi].set(jax.vmap(lambda a: joints.normalize(jt, a))(out[qi]))
    return _per_group(model, upd, q)


def neutral_q(model):
    """The reference configuration: zero angles and identity quaternions."""
    return jnp.concatenate([joints.neutral(jt) for jt in model.topo.jtype])


@functools.lru_cache(maxsize=None)
def _host_jcalc(name):
    """One joint's (R, p, S) as a compiled program per joint type, shared by every model."""
    jc = joints.get(name).jcalc
    return jax.jit(lambda q, axis, anchor, pitch: jc(q, jnp.zeros(joints.get(name).nv, q.dtype), axis, anchor,
                                                     pitch)[:3])


def host_kinematics(model, q):
    """Build-time forward kinematics on the host, in NumPy: (R (n,3,3), p (n,3)) the bodies' world
    poses and (w, u) (nv,3) each DoF's motion axis in world coordinates at the world origin
    (angular, linear), for q a concrete configuration.

    For data that a model's build or load needs once (effective masses, redundant constraint rows):
    each joint's own kinematics runs through one small compiled program per joint type, shared by all
    models, and the tree recursion in NumPy, where a compiled program per tree cost 5-15 s of tracing
    and compilation and an eager evaluation of the tree kernels more."""
    topo = model.topo
    q = np.asarray(q, np.float64)
    axis, anchor, pitch = (np.asarray(x, np.float64) for x in (model.axis, model.anchor, model.pitch))
    tree_rot, tree_pos = np.asarray(model.tree_rot, np.float64), np.asarray(model.tree_pos, np.float64)
    R_up = np.broadcast_to(np.eye(3), (topo.nv, 3, 3)).copy()
    p_up, s = np.zeros((topo.nv, 3)), np.zeros((topo.nv, 6))
    for i in range(topo.n_bodies):         # each joint on its own: shapes fixed per joint type
        jt = joints.get(topo.jtype[i])
        qa, va = topo.q_adr[i], topo.v_adr[i]
        R, p, S = _host_jcalc(jt.name)(q[qa:qa + jt.nq], axis[i], anchor[i], pitch[i])
        R_up[va], p_up[va] = tree_rot[i] @ np.asarray(R), tree_pos[i] + tree_rot[i] @ np.asarray(p)
        s[va:va + jt.nv] = np.asarray(S).T
    Rn, pn = np.empty((topo.nv, 3, 3)), np.empty((topo.nv, 3))
    for k in range(topo.nv):                  # nodes are regularly numbered: parents first
        par = topo.dof_parent[k]
        if par < 0:
            Rn[k], pn[k] = R_up[k], p_up[k]
        else:
            Rn[k], pn[k] = Rn[par] @ R_up[k], pn[par] + Rn[par] @ p_up[k]
    w = np.einsum("kij,kj->ki", Rn, s[:, :3])
    u = np.einsum("kij,kj->ki", Rn, s[:, 3:]) + np.cross(pn, w)
    last = topo.body_last_dof
    return Rn[last], pn[last], w, u


def host_point_jacobians(model, w, u, bodies, points):
    """(J_ω, J_p), each (k, 3, nv): the world angular velocity of each of ``bodies`` and the world
    velocity of a point fixed on it (``points`` (k, 3), world coordinates), from the DoF axes (w, u)
    of :func:`host_kinematics`; a body index < 0 (the world) gives zeros."""
    bodies = np.asarray(bodies)
    sup = np.where(bodies[:, None] >= 0, model.topo.support[np.maximum(bodies, 0)], False)[:, None, :]
    Jw = np.where(sup, w.T[None], 0.0)
    Jp = np.where(sup, np.swapaxes(u[None] + np.cross(w[None], np.asarray(points)[:, None]), 1, 2), 0.0)
    return Jw, Jp


@functools.lru_cache(maxsize=None)
def _host_integrate(name):
    return jax.jit(lambda q, v: joints.integrate(name, q, v, 1.0))


def host_integrate_q(model, q, v):
    """q ⊕ v (as :func:`integrate_q` with dt = 1) for concrete q, v, in NumPy at build time: one small
    compiled program per joint type, shared by all models."""
    topo = model.topo
    q, v = np.asarray(q, np.float64), np.asarray(v, np.float64)
    out = q.copy()
    for i in range(topo.n_bodies):
        jt = joints.get(topo.jtype[i])
        qa, va = topo.q_adr[i], topo.v_adr[i]
        out[qa:qa + jt.nq] = np.asarray(_host_integrate(jt.name)(q[qa:qa + jt.nq], v[va:va + jt.nv]))
    return out
