"""The articulated-body algorithm (RBDA Table 7.1), level-parallel, with its
derivatives through the RNEA (the forward-dynamics compositions, with every
force and the factorization rule, are in :mod:`jaxmbd.dynamics`)."""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from . import rnea_partials, spatial
from .kinematics import joint_state, node_inertias
from .rnea import _rnea_passes, node_forces, partials_tangent, rnea
from .tangents import is_zero as _is_zero, jvp_of_nonzero
from .topology import tree_backward, tree_forward


@jax.jit
def aba(model, q, v, tau, f_ext=None):
    """Articulated-body algorithm; tau includes every generalized force (passive ones too).

    Its derivatives are not those of the three passes: qdd solves
    R(θ, q, v, qdd) = RNEA(θ, q, v, qdd, f_ext) + armature qdd - tau = 0, so
    (implicit-function theorem, as in Carpentier and Mansard's analytical
    derivatives of the ABA) qdd' = H⁻¹ (tau' - ∂R/∂(θ, q, v, f_ext) · (θ', q', v', f_ext')):
    the RNEA's partials at the solution (:mod:`jaxmbd.rnea_partials`: ∂τ/∂q, ∂τ/∂v and H
    from one evaluation, whatever the number of directions), and H⁻¹ by a dense Cholesky
    factor of that H for trees of up to ``DENSE_HINV_MAX_NV`` DoFs, above by the ABA's last
    two passes at zero velocity and gravity on the articulated inertias the primal passes
    computed.  Reverse mode transposes that, in place of the pullback of the three ABA
    passes (larger to compile and slower to run)."""
    return _aba(model, q, v, tau, f_ext)


@jax.custom_jvp
def _aba(model, q, v, tau, f_ext):
    return _aba_passes(model, q, v, tau, f_ext)[0]


# Up to this many DoFs the ABA's rule solves with H from the RNEA's partials by a dense Cholesky
# factor, one for every direction (jax.jacfwd); above, by the ABA's own passes per direction.
DENSE_HINV_MAX_NV = 64


@partial(_aba.defjvp, symbolic_zeros=True)
def _aba_jvp(primals, tangents):
    model, q, v, tau, f_ext = primals
    dmodel, dq, dv, dtau, df = tangents
    qdd, fac = _aba_passes(model, q, v, tau, f_ext)
    P = rnea_partials.partials(model, q, v, qdd, f_ext)
    dr = partials_tangent(P, (model, q, v, qdd, f_ext), (dmodel, dq, dv, None, df),
                          model_part=lambda m: _rnea_passes(m, q, v, qdd, f_ext) + m.armature * qdd)
    if not _is_zero(dtau):
        dr = dr - dtau
    if model.nv <= DENSE_HINV_MAX_NV:
        return qdd, -jsl.cho_solve(jsl.cho_factor(P.H + jnp.diag(model.armature)), dr)
    return qdd, _hinv(model, q, -dr, fac)


@jax.custom_jvp
def _hinv(model, q, x, fac):
    """H(q)⁻¹ x from the articulated inertias ``fac`` that the ABA's second
    pass left (they depend on q only, not on v, tau or gravity): the ABA's
    last two passes with zero velocity and gravity, without recomputing the
    joint transforms or the articulated inertias."""
    return _aba_solve(model.topo, fac, x)


@partial(_hinv.defjvp, symbolic_zeros=True)
def _hinv_jvp(primals, tangents):
    # d(H⁻¹x) = H⁻¹ (dx - dH H⁻¹x): dH y is the (model, q)-derivative of the
    # RNEA at zero velocity and gravity with accelerations y.  fac is a
    # function of (model, q), so its own tangent is not needed here (its
    # computation is dead code).  fac must not be cut from the graph
    # (stop_gradient): where reverse mode inlines _hinv's primal, the
    # q-dependence of H⁻¹ flows through fac.
    model, q, x, fac = primals
    dmodel, dq, dx, _ = tangents
    y = _aba_solve(model.topo, fac, x)

    def hy(model, q):
        still = eqx.tree_at(lambda m: m.gravity, model, jnp.zeros_like(model.gravity))
        return rnea(still, q, jnp.zeros_like(y), y) + model.armature * y
    dh = jvp_of_nonzero(hy, (model, q), (dmodel, dq), y)
    if not _is_zero(dx):
        dh = dh - dx
    return y, _hinv(model, q, -dh, fac)


def _aba_solve(topo, fac, x):
    """The ABA's passes 2 and 3 for generalized forces x at zero velocity and
    gravity, given (R_up, p_up, s, U, D) of the configuration."""
    R, p, s, U, D = fac

    def bwd(acc, inp):
        (pa,) = acc
        R_k, p_k, s_k, U_k, D_k, x_k = inp
        u = x_k - s_k @ pa
        return (spatial.apply_force_up(R_k, p_k, pa + U_k * (u / D_k)),), u

    u = tree_backward(topo, bwd, (jnp.zeros((topo.nv, 6), x.dtype),), (R, p, s, U, D, x))

    def fwd(par, inp):
        a_p, _ = par
        R_k, p_k, s_k, U_k, D_k, u_k = inp
        a1 = spatial.apply_motion(R_k, p_k, a_p)
        qdd = (u_k - U_k @ a1) / D_k
        return a1 + s_k * qdd, qdd

    _, qdd = tree_forward(topo, fwd, (jnp.zeros(6, x.dtype), jnp.zeros((), x.dtype)), (R, p, s, U, D, u))
    return qdd


def _aba_passes(model, q, v, tau, f_ext):
    """(qdd, the factor (R_up, p_up, s, U, D) for :func:`_hinv`)."""
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
    return qdd, (js.R_up, js.p_up, js.s, U, D)
