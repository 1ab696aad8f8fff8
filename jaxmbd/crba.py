"""Composite rigid-body algorithm: the joint-space inertia matrix H(q).

Backward pass (RBDA Table 6.2): composite inertias Ic_λ(i) += X_upᵀ Ic_i X_up.
Then F_i = Ic_b(i) S_i and, for every structural non-zero (k, j) with j an
ancestor of k or k itself (digests/factorization.md eq. 5),
H_kj = S_jᵀ F_k.  Both vectors are carried to world coordinates first, so each
entry is one 6-vector dot product and all n + D1 entries are computed at once:
no entry off the ancestor pattern is ever written, and those zeros are exact.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from . import spatial
from .kinematics import body_inertias, dof_motion_world, forward_kinematics, joint_state, _dof_rows
from .topology import tree_backward


def composite_inertias(model, js):
    """(n,6,6) composite inertia of each subtree, in its root body's coordinates."""
    def bwd(Ic, X):
        return spatial.mm(X.T, spatial.mm(Ic, X)), Ic
    return tree_backward(model.topo, bwd, body_inertias(model), js.X_up)


@jax.jit
def mass_matrix_compact(model, q):
    """H in the compact per-row ancestor storage, shape (n + D1,).

    Row k occupies ``topo.dof_Madr[k]`` onwards as [H(k,k), H(k,λ(k)),
    H(k,λ(λ(k))), ...] (MuJoCo's qM order); ``topo.M_rows``/``topo.M_cols``
    give each entry's (row, column).  Armature is included on the diagonal.
    """
    topo = model.topo
    js = joint_state(model, q)
    kin = forward_kinematics(model, q)
    Ic = composite_inertias(model, js)
    F = spatial.mm(Ic, js.S)  # (n,6,K)
    Fw = jax.vmap(jax.vmap(spatial.force_to_world, in_axes=(None, None, 1)))(kin.rot, kin.pos, F)
    Fw = Fw.reshape(-1, 6)[_dof_rows(topo)]
    Sw = dof_motion_world(model, kin, js)
    vals = jnp.sum(Sw[topo.M_cols] * Fw[topo.M_rows], axis=-1)
    return vals.at[topo.dof_Madr].add(model.armature)


def compact_to_dense(model, vals):
    """Dense symmetric (nv, nv) matrix from compact per-row ancestor storage."""
    topo = model.topo
    H = jnp.zeros((topo.nv, topo.nv), vals.dtype)
    return H.at[topo.M_rows, topo.M_cols].set(vals).at[topo.M_cols, topo.M_rows].set(vals)


@jax.jit
def mass_matrix(model, q):
    """Joint-space inertia matrix H(q), dense (nv, nv), exact zeros off the ancestor pattern."""
    return compact_to_dense(model, mass_matrix_compact(model, q))
