"""The partial derivatives of inverse dynamics by their own recursion: ∂τ/∂q, ∂τ/∂v and
∂τ/∂a = H of the RNEA in one evaluation (Carpentier and Mansard, "Analytical derivatives of
rigid body dynamics algorithms", RSS 2018, §III; here in world coordinates with the tree's
ancestor patterns in place of the passes, as :func:`jaxmbd.rnea.rnea_at`).

Notation (every spatial vector in world coordinates about its tree's root body, held fixed):
S_k is DoF k's axis, b(k) its body, V_b, A_b a body's velocity and acceleration (the base
accelerating at -g), I_b its inertia, f_b = I_b A_b + V_b ×* I_b V_b - f_ext,b, and the subtree
sums over the bodies b' ⪰ b are F_b (of f), Ic_b (of I), h_b (of I V) and Bc_b (of the inertias'
rates V ×* I - I V×).  τ_k = S_k · F_b(k).

Configuration derivatives are taken in the tangent: δ_i moves the subtree of b(i) rigidly by
the twist S_i δ_i (a quaternion joint's tangent is its body-frame rotation vector; the chain
rule from the coordinates q is :func:`tangent`).  Under such a move every body-fixed vector m
changes by S_i × m, a force by S_i ×* f, and what remains is small:

* a joint's own axes in body coordinates may depend on its coordinates (a free joint's
  translations, a universal joint's first axis): D[:, k, i] = ∂S_k^B/∂δ_i, and cJ = S̊ q̇
  changes by ∂cJ/∂δ_i and ∂cJ/∂v_i; these come from the joint type's ``jcalc`` by forward mode
  over its own few coordinates (a 6 x n x n tensor per joint, no tree);
* ∂V_b/∂δ_i = S_i × V_b + ΔV_i with ΔV_i = w_i - S_i × V_λ(i) (w_i = X Σ_k D[:, k, i] v_k), for
  every b ⪰ b(i), and ∂A_b/∂δ_i = S_i × A_b + c_i + ΔV_i × V_b with
  c_i = -S_i × A_λ(i) - ΔV_i × V_λ(i) + X (Σ_k D[:, k, i] a_k + ∂cJ/∂δ_i) + V_b(i) × w_i;
* ∂V_b/∂v_i = S_i and ∂A_b/∂v_i = S_i × V_b + d_i, d_i = (V_λ(i) + V_b(i)) × S_i + X ∂cJ/∂v_i.

Summing f's changes over a subtree gives, with b the deeper of b(k), b(i) on one branch,

  ∂τ_k/∂δ_i = S_k · (Ic_b c_i + Bc_b ΔV_i + ΔV_i ×* h_b)  [+ S_k · (S_i ×* F_b) where b(k) ≺ b(i)]
              [+ D[:, k, i] · F_b in body coordinates where k and i are one joint's],
  ∂τ_k/∂v_i = S_k · (Bc_b S_i + Ic_b d_i + S_i ×* h_b),
  ∂τ_k/∂a_i = S_k · Ic_b S_i,

each a product of (nv, 6) tables masked by the ancestor pattern: O(nv²) entries, no pass per
direction.  :func:`jaxmbd.rnea.rnea` registers them as its forward-mode rule, so every
``jax.jvp``, ``jacfwd``, ``grad`` and ``vmap`` through inverse dynamics (the ABA's rule, the
soft stage's bias force) uses them."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import joints, spatial
from .crba import _tree_roots
from .kinematics import _forward, body_inertias, joint_state


class Partials(NamedTuple):
    tau: jax.Array   # (nv,) the RNEA's value
    dq: jax.Array    # (nv, nv) ∂τ/∂δ in the tangent of the configuration
    dv: jax.Array    # (nv, nv) ∂τ/∂v
    H: jax.Array     # (nv, nv) ∂τ/∂a, the joint-space inertia matrix (no armature)
    S: jax.Array     # (nv, 6) the DoFs' axes, world coordinates about each tree's root
    R: jax.Array     # (n, 3, 3) body orientations
    p: jax.Array     # (n, 3) body origins relative to their tree's root

    def external(self, model, df):
        """∂τ/∂f_ext applied to df (n, 6), body-frame forces as :func:`jaxmbd.rnea.rnea`'s f_ext."""
        topo = model.topo
        fw = jax.vmap(spatial.force_to_world)(self.R, self.p, df)
        F = jnp.asarray(_ancestors(topo).T, fw.dtype) @ fw
        return -jnp.sum(self.S * F[topo.dof_body], axis=1)


def _ancestors(topo) -> np.ndarray:
    """(n, n) bool: entry (b, b') where body b' is b or one of its ancestors."""
    return topo.support[:, topo.v_adr]


def _joint_locals(model, q, v, a):
    """Per DoF, in body coordinates: the joint's axis derivatives contracted with v and a
    (Σ_k D[:, k, i] v_k and Σ_k D[:, k, i] a_k + ∂cJ/∂δ_i), ∂cJ/∂v_i, and per joint group the
    tensors D (bodies, 6, n, n) with their DoF indices; per body the joint's own cJ = S̊ q̇."""
    topo = model.topo
    Dv_, Da_, Qv_, cs, groups = [], [], [], [], []
    for jt, bodies, qi, vi in topo.joint_groups:
        jc = joints.jcalc(jt)
        nvj = vi.shape[1]

        def local(qj, vj, aj, ax, an, pi, jt=jt, jc=jc, nvj=nvj):
            def at(d):
                _, _, S, c = jc(joints.integrate(jt, qj, d, 1.0), vj, ax, an, pi)
                return S, c
            zero = jnp.zeros(nvj, qj.dtype)
            D, dc_dd = jax.jacfwd(at)(zero)                       # (6, nvj, nvj), (6, nvj)
            dc_dv = jax.jacfwd(lambda u: jc(qj, u, ax, an, pi)[3])(vj)
            c = jc(qj, vj, ax, an, pi)[3]
            return (jnp.einsum("ski,k->si", D, vj), jnp.einsum("ski,k->si", D, aj) + dc_dd,
                    dc_dv, c, D)

        wv, wa, qv, c, D = jax.vmap(local)(q[qi], v[vi], a[vi], model.axis[bodies], model.anchor[bodies],
                                          model.pitch[bodies])
        Dv_.append(jnp.swapaxes(wv, 1, 2).reshape(-1, 6))
        Da_.append(jnp.swapaxes(wa, 1, 2).reshape(-1, 6))
        Qv_.append(jnp.swapaxes(qv, 1, 2).reshape(-1, 6))
        cs.append(c)
        groups.append((bodies, vi, D))
    body_perm, dof_perm = topo.joint_group_perm
    return (jnp.concatenate(Dv_)[dof_perm], jnp.concatenate(Da_)[dof_perm], jnp.concatenate(Qv_)[dof_perm],
            jnp.concatenate(cs)[body_perm], groups)


def tangent(model, q, dq):
    """The tangent δ (nv,) of a coordinate tangent dq (nq,) at q: the motion the pose makes,
    Σ S_k δ_k (the derivative of the joint types' ``difference(q, ·)`` at q)."""
    topo = model.topo
    out = []
    for jt, bodies, qi, vi in topo.joint_groups:
        d = jax.vmap(lambda q0, dq0, jt=jt: jax.jvp(lambda q1: joints.difference(jt, q0, q1), (q0,), (dq0,))[1])(
            q[qi], dq[qi])
        out.append(d.reshape(-1))
    return jnp.concatenate(out)[topo.joint_group_perm[1]]


def _cross_motion(x, y):
    return jax.vmap(spatial.cross_motion)(x, y)


def _cross_force(x, y):
    return jax.vmap(spatial.cross_force)(x, y)


def _mv(M, x):
    return jnp.einsum("nij,nj->ni", M, x)


def partials(model, q, v, a, f_ext=None) -> Partials:
    """τ = RNEA(q, v, a, f_ext) with ∂τ/∂δ (tangent), ∂τ/∂v and ∂τ/∂a (module docstring)."""
    topo = model.topo
    n = topo.n_bodies
    js = joint_state(model, q, v)
    kin = _forward(model, js)
    dt = js.X_up.dtype
    b = topo.dof_body
    o = jax.lax.stop_gradient(kin.pos[_tree_roots(topo)])
    R, p = kin.rot, kin.pos - o

    def to_world(m, at=b):
        return jax.vmap(spatial.motion_to_world)(R[at], p[at], m)

    wB, gB, QB, cJ, groups = _joint_locals(model, q, v, a)
    S = to_world(js.s)
    anc = _ancestors(topo)
    Anc = jnp.asarray(anc, dt)
    sup = jnp.asarray(topo.support, dt)
    par = topo.parent_np
    a0 = jnp.concatenate([jnp.zeros(3, dt), -model.gravity])

    Sv = S * v[:, None]
    V = sup @ Sv                                                          # (n, 6)
    Vp = jnp.where((par >= 0)[:, None], V[np.maximum(par, 0)], 0.0)       # parent's velocity
    t = S * a[:, None] + _cross_motion(V[b], Sv)
    A = a0[None, :] + sup @ t + Anc @ jax.vmap(spatial.motion_to_world)(R, p, cJ)
    Ap = jnp.where((par >= 0)[:, None], A[np.maximum(par, 0)], a0[None, :])
    I = jax.vmap(spatial.inertia_up)(R, p, body_inertias(model))         # (n, 6, 6)
    IV = _mv(I, V)
    f = _mv(I, A) + _cross_force(V, IV)
    if f_ext is not None:
        f = f - jax.vmap(spatial.force_to_world)(R, p, f_ext)
    Bb = jax.vmap(lambda Vb, Ib: spatial.crf(Vb) @ Ib - Ib @ spatial.crm(Vb))(V, I)
    down = Anc.T                                                          # subtree sums
    F = down @ f
    h = down @ IV
    Ic = (down @ I.reshape(n, 36)).reshape(n, 6, 6)
    Bc = (down @ Bb.reshape(n, 36)).reshape(n, 6, 6)
    tau = jnp.sum(S * F[b], axis=1)

    # per DoF i: the motion's intrinsic parts (module docstring)
    w = to_world(wB)
    Vpi, Api, Vbi = Vp[b], Ap[b], V[b]
    dV = w - _cross_motion(S, Vpi)
    c = -_cross_motion(S, Api) - _cross_motion(dV, Vpi) + to_world(gB) + _cross_motion(Vbi, w)
    d = _cross_motion(Vpi + Vbi, S) + to_world(QB)
    # b(i) ⪯ b(k): the subtree sums of k's body
    Icb, Bcb, hb = Ic[b], Bc[b], h[b]
    u = _mv(Icb, S)                                                       # Ic S_k
    r = jnp.einsum("kji,kj->ki", Bcb, S) - _cross_force(S, hb)            # rows against ΔV_i, S_i
    dq1 = u @ c.T + r @ dV.T
    dv1 = r @ S.T + u @ d.T
    # b(k) ≺ b(i): the subtree sums of i's body
    y = _cross_force(S, F[b]) + _mv(Icb, c) + _mv(Bcb, dV) + _cross_force(dV, hb)
    z = _mv(Bcb, S) + _mv(Icb, d) + _cross_force(S, hb)
    dq2, dv2, H2 = S @ y.T, S @ z.T, S @ u.T
    m1 = anc[b][:, b]                                                     # b(i) ⪯ b(k)
    m2 = m1.T & (b[:, None] != b[None, :])                                # b(k) ≺ b(i)
    dq = jnp.where(m1, dq1, 0.0) + jnp.where(m2, dq2, 0.0)
    dv = jnp.where(m1, dv1, 0.0) + jnp.where(m2, dv2, 0.0)
    H = jnp.where(m1, u @ S.T, 0.0) + jnp.where(m2, H2, 0.0)
    # a joint's own axes turning with its coordinates: D[:, k, i] · F in body coordinates
    for bodies, vi, D in groups:
        FB = jax.vmap(_force_to_body)(R[bodies], p[bodies], F[bodies])
        dq = dq.at[vi[:, :, None], vi[:, None, :]].add(jnp.einsum("bski,bs->bki", D, FB))
    return Partials(tau, dq, dv, H, S, R, p)


def _force_to_body(R, p, f):
    """World force (moment about the reference point) -> body coordinates, moment about the
    body origin at (R, p): the transpose of motion_to_world, so (X m)·f = m·(Xᵀ f)."""
    n, fl = f[:3], f[3:]
    return jnp.concatenate([R.T @ (n - spatial.cross(p, fl)), R.T @ fl])
