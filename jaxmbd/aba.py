"""The articulated-body algorithm (RBDA Table 7.1), level-parallel, with its
derivatives through the RNEA (the forward-dynamics compositions, with every
force and the factorization rule, are in :mod:`jaxmbd.dynamics`)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from . import spatial
from .kinematics import joint_state, node_inertias
from .rnea import node_forces, rnea
from .topology import tree_backward, tree_forward


@jax.jit
def aba(model, q, v, tau, f_ext=None):
    """Articulated-body algorithm; tau includes every generalized force (passive ones too).

    Its derivatives are not those of the three passes: qdd solves
    R(θ, q, v, qdd) = RNEA(θ, q, v, qdd, f_ext) + armature qdd - tau = 0, so
    (implicit-function theorem, as in Carpentier and Mansard's analytical
    derivatives of the ABA) qdd' = H⁻¹ (tau' - ∂R/∂(θ, q, v, f_ext) · (θ', q', v', f_ext')):
    one forward-mode pass of the RNEA at the solution and one more ABA with
    zero velocity and gravity for H⁻¹.  Reverse mode transposes that: the
    RNEA's pullback and one ABA's transpose, in place of the pullback
    of the three ABA passes (larger to compile and slower to run)."""
    return _aba(model, q, v, tau, f_ext)


@jax.custom_jvp
def _aba(model, q, v, tau, f_ext):
    return _aba_passes(model, q, v, tau, f_ext)


@_aba.defjvp
def _aba_jvp(primals, tangents):
    model, q, v, tau, f_ext = primals
    dmodel, dq, dv, dtau, df = tangents
    qdd = _aba(model, q, v, tau, f_ext)

    def residual(model, q, v, f_ext):
        return rnea(model, q, v, qdd, f_ext) + model.armature * qdd
    _, dr = jax.jvp(residual, (model, q, v, f_ext), (dmodel, dq, dv, df))
    still = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))
    return qdd, _aba(still, q, jnp.zeros_like(v), dtau - dr, None)


def _aba_passes(model, q, v, tau, f_ext):
    topo = model.topo
    js = joint_state(model, q, v)
    dt = js.X_up.dtype

    # pass 1: velocities, velocity-product accelerations c and bias forces pA.
    # Transforms are applied from (R, p) without forming the 6x6 X (spatial.py):
    # about 1.8x faster batched (humanoid30, B = 1024, 2-core CPU, ad hoc timing).
    def fwd_v(v_p, inp):
        R, p, vJ = inp
        return spatial.apply_motion(R, p, v_p) + vJ

    vel = tree_forward(topo, fwd_v, jnp.zeros(6, dt), (js.R_up, js.p_up, js.vJ))
    c = js.cJ + jax.vmap(spatial.cross_motion)(vel, js.vJ)
    I = node_inertias(model)
    pA = jax.vmap(spatial.cross_force)(vel, jnp.einsum("nij,nj->ni", I, vel))
    if f_ext is not None:
        pA = pA - node_forces(model, f_ext)

    # pass 2: articulated inertias, leaves to root (one axis per node: D is a scalar)
    def bwd(acc, inp):
        IA, pa = acc
        R, p, s, c_k, tau_k, arm = inp
        U = IA @ s
        D = s @ U + arm
        u = tau_k - s @ pa
        Ia = IA - U[:, None] * U[None, :] / D
        pa_k = pa + Ia @ c_k + U * (u / D)
        return (spatial.inertia_up(R, p, Ia), spatial.apply_force_up(R, p, pa_k)), (U, D, u)

    U, D, u = tree_backward(topo, bwd, (I, pA), (js.R_up, js.p_up, js.s, c, tau, model.armature))

    # pass 3: accelerations, root to leaves; the base accelerates at -g
    def fwd_a(par, inp):
        a_p, _ = par
        R, p, s, c_k, U_k, D_k, u_k = inp
        a1 = spatial.apply_motion(R, p, a_p) + c_k
        qdd = (u_k - U_k @ a1) / D_k
        return a1 + s * qdd, qdd

    a0 = jnp.concatenate([jnp.zeros(3, dt), -model.gravity])
    _, qdd = tree_forward(topo, fwd_a, (a0, jnp.zeros((), dt)), (js.R_up, js.p_up, js.s, c, U, D, u))
    return qdd
