"""A Coriolis matrix C(q, v) with C v = c(q, v) and Ḣ = C + Cᵀ, for every joint type.

With world-frame body Jacobians J_i (v_i = J_i v) and world-frame inertias
I_i, H = Σ J_iᵀ I_i J_i.  Taking

    C = Σ_i J_iᵀ (I_i J̇_i + B(I_i, v_i) J_i),
    B(I, v) = ½ [(v×*) I - I (v×) + (I v)⊼],   (I v)⊼ u := u ×* (I v),

gives C v = Σ J_iᵀ (I_i a_i^{vp} + v_i ×* I_i v_i) (the velocity-product part
of inverse dynamics) and, because B + Bᵀ = İ = (v×*) I - I (v×), the identity
Ḣ = C + Cᵀ (Echeandía & Wensing, 2021).  It holds for quaternion joints too,
where the Christoffel matrix ½ ∂c/∂v does not (v is a quasi-velocity there).
J̇ is the exact time derivative along q(t) = q ⊕ v t, by forward-mode autodiff.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import spatial
from .kinematics import body_inertias, dof_motion_world, forward_kinematics, integrate_q, joint_state


def _world_jacobians(model, q):
    js = joint_state(model, q)
    kin = forward_kinematics(model, q)
    Sw = dof_motion_world(model, kin, js)  # (nv,6)
    J = jnp.asarray(model.topo.support, Sw.dtype)[:, :, None] * Sw[None]  # (n,nv,6)
    return jnp.swapaxes(J, 1, 2), kin  # (n,6,nv)


def _force_cross_of(f):
    """Matrix of u -> u ×* f (skew-symmetric)."""
    n, fl = spatial.skew(f[:3]), spatial.skew(f[3:])
    z = jnp.zeros((3, 3), f.dtype)
    return -jnp.concatenate([jnp.concatenate([n, fl], 1), jnp.concatenate([fl, z], 1)], 0)


@jax.jit
def coriolis_matrix(model, q, v):
    """(nv, nv) Coriolis matrix: C v = bias force without gravity, damping or springs."""
    (J, kin), (Jdot, _) = jax.jvp(lambda t: _world_jacobians(model, integrate_q(model, q, v, t)),
                                  (jnp.zeros(()),), (jnp.ones(()),))
    X0 = jax.vmap(spatial.plucker)(kin.rot, kin.pos)  # world -> body motion transforms
    Iw = jnp.einsum("nji,njk,nkl->nil", X0, body_inertias(model), X0)
    vw = jnp.einsum("nij,j->ni", J, v)

    def B(I, vi):
        return 0.5 * (spatial.crf(vi) @ I - I @ spatial.crm(vi) + _force_cross_of(I @ vi))

    Bw = jax.vmap(B)(Iw, vw)
    return jnp.einsum("nai,nab,nbj->ij", J, Iw, Jdot) + jnp.einsum("nai,nab,nbj->ij", J, Bw, J)
