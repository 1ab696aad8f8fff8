"""Recursive Newton-Euler inverse dynamics (RBDA Table 5.1), level-parallel, and its form in
world coordinates from the kinematics at hand (:func:`rnea_at`)."""

from __future__ import annotations

import functools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from . import crba, rnea_partials, spatial
from .crba import _tree_roots
from .kinematics import _check, body_inertias, joint_state, kinematics_and_axes, node_inertias
from .tangents import is_zero as _is_zero, instantiate as _instantiate
from .topology import tree_backward, tree_forward


def node_forces(model, f_ext):
    """(n,6) body forces -> (nv,6) on each body's last node (trailing batch
    axes, (n, 6, *batch), carry through)."""
    return jnp.zeros((model.nv,) + f_ext.shape[1:], f_ext.dtype).at[model.topo.body_last_dof].set(f_ext)


@jax.jit
def rnea(model, q, v, a, f_ext=None):
    """Rigid-body inverse dynamics without joint friction, springs or armature.

    f_ext: optional (n, 6) external spatial forces on each body, in body
    coordinates, moment about the body origin ([n; f]).

    Its forward-mode rule is the RNEA's own derivatives (:mod:`jaxmbd.rnea_partials`):
    ∂τ/∂q, ∂τ/∂v and H from one evaluation, whatever the number of directions
    (``jax.jacfwd`` and ``vmap`` reuse them; reverse mode transposes the products).
    Derivatives in the model's parameters are plain forward mode of the passes.
    """
    q, v, a = jnp.asarray(q), jnp.asarray(v), jnp.asarray(a)
    _check(model, q, v)
    return _rnea(model, q, v, a, f_ext)


@jax.custom_jvp
def _rnea(model, q, v, a, f_ext):
    return _rnea_passes(model, q, v, a, f_ext)


@partial(_rnea.defjvp, symbolic_zeros=True)
def _rnea_jvp(primals, tangents):
    model, q, v, a, f_ext = primals
    P = rnea_partials.partials(model, q, v, a, f_ext)
    # the primal by the passes, not P.tau (the same value to round-off): a program differentiated in
    # forward mode then computes the very numbers the plain program does, so an adaptive run takes
    # the same steps with and without jvp
    return _rnea_passes(model, q, v, a, f_ext), partials_tangent(P, primals, tangents)


def partials_tangent(P, primals, tangents, model_part=None):
    """dτ of the RNEA at ``primals`` = (model, q, v, a, f_ext) for ``tangents`` (symbolic zeros
    skipped) from its partials ``P``; the model's tangent by plain forward mode of
    ``model_part(model)`` (default: the passes)."""
    model, q, v, a, f_ext = primals
    dmodel, dq, dv, da, df = tangents
    out = jnp.zeros_like(P.tau)
    if not _is_zero(dq):
        out = out + P.dq @ rnea_partials.tangent(model, q, dq)
    if not _is_zero(dv):
        out = out + P.dv @ dv
    if not _is_zero(da):
        out = out + P.H @ da
    if f_ext is not None and not _is_zero(df):
        out = out + P.external(model, df)
    if not _is_zero(dmodel):
        part = model_part or (lambda m: _rnea_passes(m, q, v, a, f_ext))
        out = out + jax.jvp(part, (model,), (_instantiate(dmodel),))[1]
    return out


def _rnea_passes(model, q, v, a, f_ext):
    js = joint_state(model, q, v)
    aJ = js.s * a[:, None] + js.cJ

    # forward pass: velocities and accelerations; the base accelerates at -g
    # so that gravity appears in every body force (RBDA §5.3).
    def fwd(par, inp):
        v_p, a_p = par
        R, p, vJ, aJ_k = inp
        vk = spatial.apply_motion(R, p, v_p) + vJ
        return vk, spatial.apply_motion(R, p, a_p) + aJ_k + spatial.cross_motion(vk, vJ)

    dt = js.X_up.dtype
    a0 = jnp.concatenate([jnp.zeros(3, dt), -model.gravity])
    vel, acc = tree_forward(model.topo, fwd, (jnp.zeros(6, dt), a0), (js.R_up, js.p_up, js.vJ, aJ))
    I = node_inertias(model)
    f = jnp.einsum("nij,nj->ni", I, acc) + jax.vmap(spatial.cross_force)(
        vel, jnp.einsum("nij,nj->ni", I, vel))
    if f_ext is not None:
        f = f - node_forces(model, f_ext)

    # backward pass: joint forces tau_k = s_k . f_k, f_parent += X_up^T f_k
    def bwd(f_k, inp):
        R, p, s = inp
        return spatial.apply_force_up(R, p, f_k), s @ f_k

    return tree_backward(model.topo, bwd, f, (js.R_up, js.p_up, js.s))


@functools.lru_cache(maxsize=None)
def _dof_ancestors(topo) -> np.ndarray:
    """(nv, nv) 0/1: entry (k, j) is 1 where DoF j is k or one of its ancestors (H's compact pattern)."""
    P = np.zeros((topo.nv, topo.nv))
    P[topo.M_rows, topo.M_cols] = 1.0
    return P


def world_form(topo) -> bool:
    """Whether :func:`rnea_at` (and ``crba.mass_matrix_compact_at``) take the world-coordinate form
    for this tree: (bodies x DoFs) at most ``crba.WORLD_SUM_MAX_PAIRS``."""
    return topo.n_bodies * topo.nv <= crba.WORLD_SUM_MAX_PAIRS


def rnea_at(model, q, v, a, kin_axes=None):
    """:func:`rnea` (no external forces), from ``kin_axes`` = ``kinematics_and_axes(model, q)`` where
    the caller has them and the tree is small enough (``crba.WORLD_SUM_MAX_PAIRS``), else by
    :func:`rnea`.

    The recursion in world coordinates (Featherstone, Rigid Body Dynamics Algorithms, 2008, §5.3):
    with S_k each DoF's world axis, the velocity of DoF k's node is the sum of S_j v_j over k and its
    ancestors j, its acceleration the sum of S_j a_j + V_j × S_j v_j + c_j (V_j node j's velocity,
    c_j its joint's velocity-product term carried to world coordinates), the body forces are
    I A + V ×* I V with the bodies' inertias in world coordinates, and τ_k = S_kᵀ (the sum of the
    forces of the bodies k moves).  The sums are products with the tree's 0/1 ancestor and support
    patterns: no pass over the levels.  Every vector is taken about its tree's root body (as
    ``crba.mass_matrix_compact_from``), which keeps the products as accurate far from the origin as
    near it.  Its forward-mode rule is :func:`rnea`'s (the RNEA's partials): ``kin_axes`` must be
    ``kinematics_and_axes(model, q)``, and their own tangents are not read."""
    topo = model.topo
    if not world_form(topo):
        return rnea(model, q, v, a)
    return _rnea_world(model, q, v, a, kinematics_and_axes(model, q) if kin_axes is None else kin_axes)


@jax.custom_jvp
def _rnea_world(model, q, v, a, kin_axes):
    return _rnea_world_passes(model, q, v, a, kin_axes)


@partial(_rnea_world.defjvp, symbolic_zeros=True)
def _rnea_world_jvp(primals, tangents):
    model, q, v, a, kin_axes = primals
    dmodel, dq, dv, da, _ = tangents
    P = rnea_partials.partials(model, q, v, a)
    # the primal by the passes (as _rnea_jvp's)
    tau = _rnea_world_passes(model, q, v, a, kin_axes)
    return tau, partials_tangent(P, (model, q, v, a, None), (dmodel, dq, dv, da, None),
                                 model_part=lambda m: _rnea_world_passes(m, q, v, a, kinematics_and_axes(m, q)))


def _rnea_world_passes(model, q, v, a, kin_axes):
    topo = model.topo
    kin, axes = kin_axes
    cJ = joint_state(model, q, v).cJ
    b = topo.dof_body
    o = kin.pos[_tree_roots(topo)]
    w = axes[:, :3]
    S = jnp.concatenate([w, axes[:, 3:] + jnp.cross(w, o[b])], axis=1)
    P = jnp.asarray(_dof_ancestors(topo), S.dtype)
    Sv = S * v[:, None]
    Vn = P @ Sv
    c = jax.vmap(spatial.motion_to_world)(kin.rot[b], kin.pos[b] - o[b], cJ)
    An = P @ (S * a[:, None] + jax.vmap(spatial.cross_motion)(Vn, Sv) + c)
    last = topo.body_last_dof
    V = Vn[last]
    A = An[last] + jnp.concatenate([jnp.zeros(3, S.dtype), -model.gravity])[None, :]   # the base accelerates at -g
    I = jax.vmap(spatial.inertia_up)(kin.rot, kin.pos - o, body_inertias(model))
    IV = jnp.einsum("nij,nj->ni", I, V)
    F = jnp.einsum("nij,nj->ni", I, A) + jax.vmap(spatial.cross_force)(V, IV)
    return jnp.sum(S * (jnp.asarray(topo.support.T, S.dtype) @ F), axis=1)
