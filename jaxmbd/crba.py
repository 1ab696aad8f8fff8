"""Composite rigid-body algorithm: the joint-space inertia matrix H(q).

Backward pass (RBDA Table 6.2): composite inertias Ic_λ(k) += X_upᵀ Ic_k X_up
over the nodes.  Then F_k = Ic_k s_k and, for every structural non-zero (k, j)
with j an ancestor of k or k itself (Featherstone, IJRR 24(6), 2005, eqs. 5-6),
H_kj = s_jᵀ F_k.  Both vectors are carried to world coordinates first, so each
entry is one 6-vector dot product and all n + D1 entries are computed at once:
no entry off the ancestor pattern is ever written, and those zeros are exact.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from . import spatial
from .kinematics import (body_inertias, dof_motion_world, forward_kinematics, host_kinematics, host_point_jacobians,
                         joint_state, kinematics_and_axes, node_inertias)
from .topology import tree_backward


def composite_inertias(model, js):
    """(nv,6,6) composite inertia of the subtree below each node, in its body's coordinates."""
    def bwd(Ic, inp):
        R, p = inp
        return spatial.inertia_up(R, p, Ic), Ic
    return tree_backward(model.topo, bwd, node_inertias(model), (js.R_up, js.p_up))


def composite_forces(model, js):
    """(nv,6) F_k = Ic_k s_k: the force that gives the subtree below node k a unit
    acceleration about its axis (kept instead of Ic_k: a vector per node)."""
    def bwd(Ic, inp):
        R, p, s = inp
        return spatial.inertia_up(R, p, Ic), Ic @ s
    return tree_backward(model.topo, bwd, node_inertias(model), (js.R_up, js.p_up, js.s))


def _axes_and_forces(model, q):
    """World-frame motion axes S (nv,6) and composite forces F = Ic s (nv,6)."""
    js = joint_state(model, q)
    kin = forward_kinematics(model, q)
    F = composite_forces(model, js)
    b = model.topo.dof_body
    Fw = jax.vmap(spatial.force_to_world)(kin.rot[b], kin.pos[b], F)
    return dof_motion_world(model, kin, js), Fw


def _dense_pattern(topo):
    """Use one dense product when the pattern fills at least a quarter of H."""
    return 4 * topo.nM >= topo.nv * topo.nv


@jax.jit
def mass_matrix_compact(model, q):
    """H in the compact per-row ancestor storage, shape (n + D1,).

    Row k occupies ``topo.dof_Madr[k]`` onwards as [H(k,k), H(k,λ(k)),
    H(k,λ(λ(k))), ...] (MuJoCo's qM order); ``topo.M_rows``/``topo.M_cols``
    give each entry's (row, column).  Armature is included on the diagonal.
    """
    return _compact(model, *_axes_and_forces(model, q))


def _compact(model, S, F):
    """The compact entries H(k, j) = s_jᵀ F_k on H's pattern from common-frame axes S and composite
    forces F (nv, 6), armature on the diagonal."""
    topo = model.topo
    if _dense_pattern(topo):
        vals = (F @ S.T)[topo.M_rows, topo.M_cols]
    else:
        vals = jnp.sum(S[topo.M_cols] * F[topo.M_rows], axis=-1)
    return vals.at[topo.dof_Madr].add(model.armature)


# Above this many (body, DoF) pairs the subtree sums of mass_matrix_compact_from cost more than the
# CRBA's backward pass (they are a dense (nv, n) product); mass_matrix_compact_at falls back to it.
WORLD_SUM_MAX_PAIRS = 64 * 64


@functools.lru_cache(maxsize=None)
def _tree_roots(topo) -> np.ndarray:
    """(n,) int: each body's root (the ancestor whose parent is the world)."""
    root = np.arange(topo.n_bodies)
    for i in range(topo.n_bodies):      # parents come before their children
        p = topo.parent_np[i]
        if p >= 0:
            root[i] = root[p]
    return root


def mass_matrix_compact_from(model, kin, axes):
    """H in compact storage (as :func:`mass_matrix_compact`) from the kinematics and the DoFs' world
    axes (:func:`jaxmbd.kinematics.kinematics_and_axes`): the composite inertias are sums over
    subtrees of the bodies' inertias in one common frame, so no backward pass transforms them
    (Featherstone, Rigid Body Dynamics Algorithms, 2008, §6.2: H_ij = s_iᵀ I^c_i s_j for j an
    ancestor of i, in any frame common to both).  The frame is world-aligned with its origin at each
    tree's root body, not at the world origin: the entries are then as accurate for a robot far from
    the origin as near it.  Where the kinematics are at hand anyway (the soft stage's rows), H costs
    a product of the support pattern (n, nv) with the bodies' inertias and no second pass over the
    tree."""
    topo = model.topo
    o = kin.pos[_tree_roots(topo)]                                      # (n, 3) each body's reference
    I6 = jax.vmap(spatial.inertia_up)(kin.rot, kin.pos - o, body_inertias(model)).reshape(-1, 36)
    Ic = (jnp.asarray(topo.support.T, I6.dtype) @ I6).reshape(-1, 6, 6)     # (nv, 6, 6) subtree sums
    w = axes[:, :3]
    S = jnp.concatenate([w, axes[:, 3:] + jnp.cross(w, o[topo.dof_body])], axis=1)   # axes about o
    return _compact(model, S, jnp.einsum("kij,kj->ki", Ic, S))


def mass_matrix_compact_at(model, q, kin_axes=None):
    """H in compact storage at q, by :func:`mass_matrix_compact_from` (with ``kin_axes`` =
    ``kinematics_and_axes(model, q)`` when the caller has them) where the tree is small enough
    (``WORLD_SUM_MAX_PAIRS``), else by :func:`mass_matrix_compact`."""
    if model.topo.n_bodies * model.topo.nv > WORLD_SUM_MAX_PAIRS:
        return mass_matrix_compact(model, q)
    kin, axes = kinematics_and_axes(model, q) if kin_axes is None else kin_axes
    return mass_matrix_compact_from(model, kin, axes)


def compact_to_dense(model, vals):
    """Dense symmetric (nv, nv) matrix from compact per-row ancestor storage."""
    topo = model.topo
    H = jnp.zeros((topo.nv, topo.nv), vals.dtype)
    return H.at[topo.M_rows, topo.M_cols].set(vals).at[topo.M_cols, topo.M_rows].set(vals)


@jax.jit
def mass_matrix(model, q):
    """Joint-space inertia matrix H(q), dense (nv, nv), exact zeros off the ancestor pattern."""
    topo = model.topo
    if not _dense_pattern(topo):
        return compact_to_dense(model, mass_matrix_compact(model, q))
    Sw, Fw = _axes_and_forces(model, q)
    lower = np.zeros((topo.nv, topo.nv), bool)
    lower[topo.M_rows, topo.M_cols] = True
    strict = lower & ~np.eye(topo.nv, dtype=bool)
    Hl = jnp.where(lower, Fw @ Sw.T, 0.0)  # H[k, j] = F_k . s_j on the pattern
    return Hl + jnp.where(strict, Hl, 0.0).T + jnp.diag(model.armature)


def host_mass_matrix(model, q, com_jacobians=False):
    """H(q) as a NumPy array, evaluated on the host for build-time data (MuJoCo's compiler-time
    quantities: the solref mapping's effective masses, actuator dampratios), and optionally the
    Jacobians of the bodies' centres of mass (n, 3, nv), both in world coordinates.

    From :func:`jaxmbd.kinematics.host_kinematics`, H = Σ_b (m_b J_cᵀJ_c + J_ωᵀ I_b J_ω) (armature
    on the diagonal) in NumPy.  A compiled program per tree, as :func:`mass_matrix`
    would be, cost every model load 5-15 s of tracing and compilation."""
    Rb, pb, w, u = host_kinematics(model, q)
    c = pb + np.einsum("nij,nj->ni", Rb, np.asarray(model.com, np.float64))
    Jw, Jc = host_point_jacobians(model, w, u, np.arange(model.topo.n_bodies), c)   # (n, 3, nv) each
    I = np.asarray(model.inertia, np.float64)
    Iw = Rb @ (0.5 * (I + np.swapaxes(I, 1, 2))) @ np.swapaxes(Rb, 1, 2)
    m = np.asarray(model.mass, np.float64)
    H = (np.einsum("n,nik,nil->kl", m, Jc, Jc) + np.einsum("nik,nij,njl->kl", Jw, Iw, Jw)
         + np.diag(np.asarray(model.armature, np.float64)))
    return (H, Jc) if com_jacobians else H
