"""Recursive Newton-Euler inverse dynamics (RBDA Table 5.1), level-parallel."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import spatial
from .kinematics import _check, joint_state, node_inertias
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
    """
    q, v, a = jnp.asarray(q), jnp.asarray(v), jnp.asarray(a)
    _check(model, q, v)
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
