"""Recursive Newton-Euler inverse dynamics (RBDA Table 5.1), level-parallel."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from . import spatial
from .kinematics import body_inertias, joint_state, _check
from .topology import tree_backward, tree_forward


@jax.jit
def passive_force(model, q, v):
    """Joint damping and spring forces, -b v - k (q - q_ref), shape (nv,)."""
    topo = model.topo
    tau = -model.damping * v
    sel = topo.dof_qadr >= 0
    if sel.any():
        qa = jnp.where(sel, topo.dof_qadr, 0)
        spring = -model.stiffness * (q[qa] - model.spring_ref[qa])
        tau = tau + jnp.where(jnp.asarray(sel), spring, 0.0)
    return tau


def _scatter_dofs(topo, per_body):
    """(n,K) per-body DoF values -> (nv,) vector."""
    out = jnp.zeros(topo.nv + 1, per_body.dtype).at[topo.body_dof_idx].set(per_body)
    return out[: topo.nv]


def _gather_dofs(topo, x):
    """(nv,) vector -> (n,K) per-body values, zero in padding."""
    return jnp.concatenate([x, jnp.zeros(1, x.dtype)])[topo.body_dof_idx]


@jax.jit
def rnea(model, q, v, a, f_ext=None):
    """Rigid-body inverse dynamics without joint friction, springs or armature.

    f_ext: optional (n, 6) external spatial forces on each body, in body
    coordinates, moment about the body origin ([n; f]).
    """
    q, v, a = jnp.asarray(q), jnp.asarray(v), jnp.asarray(a)
    _check(model, q, v)
    topo = model.topo
    js = joint_state(model, q, v)
    a_pad = _gather_dofs(topo, a)
    aJ = jnp.einsum("nik,nk->ni", js.S, a_pad) + js.cJ

    # forward pass: velocities and accelerations; the base accelerates at -g
    # so that gravity appears in every body force (RBDA §5.3).
    def fwd(par, inp):
        v_p, a_p = par
        X, vJ, aJ_i = inp
        vi = X @ v_p + vJ
        return vi, X @ a_p + aJ_i + spatial.cross_motion(vi, vJ)

    dt = js.X_up.dtype
    a0 = jnp.concatenate([jnp.zeros(3, dt), -model.gravity])
    vel, acc = tree_forward(topo, fwd, (jnp.zeros(6, dt), a0), (js.X_up, js.vJ, aJ))
    I = body_inertias(model)
    f = jnp.einsum("nij,nj->ni", I, acc) + jax.vmap(spatial.cross_force)(
        vel, jnp.einsum("nij,nj->ni", I, vel))
    if f_ext is not None:
        f = f - f_ext

    # backward pass: joint forces, f_parent += X_up^T f_i
    def bwd(f_i, inp):
        X, S = inp
        return X.T @ f_i, S.T @ f_i

    tau = tree_backward(topo, bwd, f, (js.X_up, js.S))
    return _scatter_dofs(topo, tau)


@jax.jit
def inverse_dynamics(model, q, v, a, f_ext=None):
    """Joint forces tau with H(q) a + C(q, v) = tau (armature, damping, springs included)."""
    return rnea(model, q, v, a, f_ext) + model.armature * a - passive_force(model, q, v)


@jax.jit
def bias_force(model, q, v, f_ext=None):
    """C(q, v): Coriolis, centrifugal, gravity, damping and spring forces, (nv,)."""
    return rnea(model, q, v, jnp.zeros_like(v), f_ext) - passive_force(model, q, v)
