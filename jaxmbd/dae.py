"""Closed loops as index-3 DAEs (D. Negrut, "On the implicit integration of
differential-algebraic equations of multibody dynamics", PhD thesis,
University of Iowa, 1998: Ch. 2-3).

* :func:`constrained_dynamics`: accelerations and multipliers from the
  augmented system ``[[H, Φ_qᵀ], [Φ_q, 0]] [a; λ] = [τ - C; τ_c]``, through
  the factorization of H and the Schur complement ``Φ_q H⁻¹ Φ_qᵀ`` (formed
  with the LᵀDL half-solve on branched trees), or densely (the reference).
* Generalized coordinate partitioning (thesis §3.1, §4.1.2): :func:`partition` runs full-
  pivot Gaussian elimination on Φ_q and returns the dependent (pivot) and
  independent columns; ``cond(Φ_u)`` is watched and the partition is
  renewed when it exceeds 1.25x its value at partitioning.
* The state-space ODE (SSODE, thesis (3.15)-(3.17), (3.85)) the integrators advance is
  :class:`jaxmbd.odes.ConstrainedChartODE` (the position recovery below is
  its).
* :func:`assemble`: consistent positions (Gauss-Newton with the LU
  projection method's least-squares / minimum-norm steps on the independent
  rows) and velocities (minimum-norm correction).

Position recovery differentiates exactly: a fixed number of full Newton
steps (from the step start's dependent coordinates, which are within the
step's motion of the answer) with the Jacobian of each; the derivative of a
converged Newton iteration is the implicit-function derivative
(u_v = -Φ_u⁻¹ Φ_v) and each step squares the error of every derivative
order as well, so the Rosenbrock Jacobians and gradients through them are
exact.  An evaluation whose recovery did not converge returns NaN, which
simulate rejects (smaller step).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from . import linalg, ltdl
from .crba import mass_matrix, mass_matrix_compact
from .forces import soft
from .dynamics import bias_force, factorization_for, forward_dynamics
from .kinematics import integrate_q, normalize_q
from .constraints import Mechanism, _check, phi_bias_tree, phi_jacobian_tree, phi_tree

REPARTITION_FACTOR = 1.25   # the thesis's α (§4.1.2, the repartition test of Table 11)
NEWTON_ITERS = 5            # position recovery: Newton steps from the step start's dependent coordinates
RECOVERY_TOL = 1e-12        # |Φ| after them (relative to 1 + |q0|); above it the evaluation fails


# --- constrained accelerations (tree order) ---------------------------------------------

# Below this many DoFs the Schur path factors H densely: evaluations are
# dispatch-bound there.  Measured on the squeezer (nv = 7, 2-core CPU, batch 1,
# XLA at the tests' optimisation level; ad hoc): the state-space ODE's g costs
# 0.78 ms with dense Cholesky against 2.0 ms with the level-scan LᵀDL.
DENSE_BELOW = 16


def _factorization(tree, factorization):
    if factorization == "auto":
        return "dense" if tree.nv < DENSE_BELOW else factorization_for(tree)
    if factorization not in ("sparse", "dense"):
        raise ValueError(f"unknown factorization {factorization!r}; expected 'auto', 'sparse' or 'dense'")
    return factorization


def accel_tree(mech, q, v, tau, method="schur", G=None, factorization="auto"):
    """(a, λ) for tree-ordered q, v, tau; see :func:`constrained_dynamics`
    (G: Φ_q at q when the caller has it, independent rows only).  With
    redundant constraints only the independent rows (``mech.active_rows``)
    enter, and λ is theirs (``mech.expand_rows`` puts zeros on the others)."""
    tree = mech.tree
    rhs = tau - bias_force(tree, q, v)
    if mech.nc == 0:
        return forward_dynamics(tree, q, v, tau), jnp.zeros((0,), rhs.dtype)
    G = mech.rows(phi_jacobian_tree(mech, q)) if G is None else G
    tc = mech.rows(phi_bias_tree(mech, q, v))
    if method == "dense":
        if soft.has_rows(tree):
            raise ValueError("method 'dense' (the augmented-matrix reference) does not take the model's "
                             "soft-constraint rows (contacts, limits, friction loss from solref); use 'schur'")
        H = mass_matrix(tree, q)
        m = G.shape[0]
        K = jnp.block([[H, G.T], [G, jnp.zeros((m, m), H.dtype)]])
        sol = jnp.linalg.solve(K, jnp.concatenate([rhs, tc]))
        return sol[:tree.nv], sol[tree.nv:]
    if method != "schur":
        raise ValueError(f"unknown method {method!r}; expected 'schur' or 'dense'")
    if _factorization(tree, factorization) == "sparse":
        F = ltdl.factor(tree, mass_matrix_compact(tree, q))
        solve = lambda b: ltdl.solve(tree, F, b)           # noqa: E731
        Y = ltdl.half_solve(tree, F, G.T)                   # D^-1/2 L^-T Gᵀ
    else:
        c = jsl.cho_factor(mass_matrix(tree, q), lower=True)
        solve = lambda b: jsl.cho_solve(c, b)               # noqa: E731
        Y = jsl.solve_triangular(c[0], G.T, lower=True)     # L^-1 Gᵀ with H = L Lᵀ
    B = Y.T @ Y                                             # Φ_q H⁻¹ Φ_qᵀ
    au = solve(rhs)
    Bf = jsl.lu_factor(B)
    lam = jsl.lu_solve(Bf, G @ au - tc)
    a = solve(rhs - G.T @ lam)
    if not soft.has_rows(tree):
        return a, lam

    def respond(X):      # the constrained acceleration response to generalized forces X: H⁻¹ (X - Gᵀ Λ)
        Z = solve(X)
        return Z - solve(G.T @ jsl.lu_solve(Bf, G @ Z))
    sol = soft.dynamics(tree, q, v, a, respond)[0]
    # the loop multipliers with the soft rows' force applied
    lam = lam + jsl.lu_solve(Bf, G @ solve(sol.tau))
    return sol.a, lam


@partial(jax.jit, static_argnames=("method", "factorization"))
def constrained_dynamics(mech, q, v, tau=None, method="schur", factorization="auto"):
    """Accelerations and multipliers of a mechanism: (a, λ) with

        H a + Φ_qᵀ λ = τ - C(q, v),   Φ_q a = τ_c = -(Φ_q v)_q v,

    (q, v, τ, a in the mechanism's coordinate order; τ defaults to zero).
    method: "schur" (default: a factorization of H and the Schur complement
    Φ_q H⁻¹ Φ_qᵀ = Yᵀ Y from the half-solve Y = D^-1/2 L⁻ᵀ Φ_qᵀ) or "dense"
    (LU of the whole augmented matrix; the reference).  factorization (for
    "schur"): "sparse" (the branch-sparse LᵀDL of :mod:`jaxmbd.ltdl`),
    "dense" (Cholesky) or "auto" (dense below 16 DoFs, where evaluations
    are dispatch-bound, else the tree's rule: sparse on branched trees).
    -Φ_qᵀ λ is the generalized constraint force.

    Redundant constraints (``mech.dropped_rows``: rows implied by the others,
    e.g. the third row of a point constraint closing a planar loop; found
    when the mechanism is built) leave the accelerations unique but not the
    multipliers: the ones returned solve the system with λ = 0 on the
    redundant rows (the unique multipliers of the independent rows)."""
    q, v = jnp.asarray(q), jnp.asarray(v)
    _check(mech, q, v)
    tau = jnp.zeros(mech.nv, jnp.result_type(q, v)) if tau is None else jnp.asarray(tau)
    if tau.shape != (mech.nv,):
        raise ValueError(f"tau has shape {tau.shape}, expected ({mech.nv},)")
    a, lam = accel_tree(mech, mech.to_tree(q), mech.to_tree(v), mech.to_tree(tau), method,
                        factorization=factorization)
    return mech.from_tree(a), mech.expand_rows(lam)


# --- generalized coordinate partitioning ---------------------------------------------------

def full_pivot(A):
    """Gaussian elimination with complete pivoting on A (m x n, m <= n).

    Returns (cols, pivots): ``cols`` orders the columns so that the first m
    are the pivot columns (the dependent coordinates) in pivot order and the
    rest (independent) follow in increasing order; ``pivots`` are the m
    pivot magnitudes.  Ties go to the first maximum in row-major order."""
    m, n = A.shape
    rows = jnp.arange(m)
    colsn = jnp.arange(n)

    def body(k, c):
        W, rp, cp, piv = c
        mask = (rows[:, None] >= k) & (colsn[None, :] >= k)
        i_j = jnp.argmax(jnp.where(mask, jnp.abs(W), -1.0).ravel())
        i, j = i_j // n, i_j % n
        W = W.at[jnp.array([k, i])].set(W[jnp.array([i, k])])
        rp = rp.at[jnp.array([k, i])].set(rp[jnp.array([i, k])])
        W = W.at[:, jnp.array([k, j])].set(W[:, jnp.array([j, k])])
        cp = cp.at[jnp.array([k, j])].set(cp[jnp.array([j, k])])
        p = W[k, k]
        safe = jnp.where(p == 0, 1.0, p)
        f = jnp.where(rows > k, W[:, k] / safe, 0.0)
        W = W - f[:, None] * W[k][None, :]
        return W, rp, cp, piv.at[k].set(jnp.abs(p))

    init = (A, rows, colsn, jnp.zeros(m, A.dtype))
    _, _, cp, piv = jax.lax.fori_loop(0, m, body, init)
    dep = cp[:m]
    is_dep = jnp.zeros(n, bool).at[dep].set(True)
    ind = jnp.argsort(jnp.where(is_dep, n + colsn, colsn))[: n - m]
    return jnp.concatenate([dep, ind]).astype(jnp.int32), piv


def partition(G, rcond=None):
    """Partition from the constraint Jacobian G (m x n): dict(dep, ind, cond0, ok)."""
    m, n = G.shape
    cols, piv = full_pivot(G)
    dep, ind = cols[:m], cols[m:]
    rcond = max(m, n) * 1e3 * jnp.finfo(G.dtype).eps if rcond is None else rcond
    ok = jnp.min(piv) > rcond * jnp.maximum(jnp.max(piv), 1e-300)
    return dict(dep=dep, ind=ind, cond0=jnp.linalg.cond(G[:, dep]), ok=ok)


# --- consistent initial conditions ----------------------------------------------------------

@partial(jax.jit, static_argnames=("iterations",))
def assemble(mech, q, v=None, iterations=20, tol=1e-12):
    """Consistent positions and velocities near (q, v) (mechanism order).

    Positions: Gauss-Newton q ← q ⊕ δ with δ the minimum-norm solution of
    Φ_q δ = -Φ (the LU projection method, :func:`jaxmbd.linalg.minnorm_lu`;
    least squares with :func:`~jaxmbd.linalg.lstsq_lu` when there are more
    equations than coordinates); converges quadratically for full-rank Φ_q.
    Velocities: the minimum-norm correction v - Φ_qᵀ (Φ_q Φ_qᵀ)⁻¹ Φ_q v.
    Both use the independent rows (``mech.active_rows``; the redundant rows
    found when the mechanism was built are implied by them on the
    constraint manifold), so Φ_q is full-rank away from singular
    configurations; where it is not, those steps use the pseudo-inverse.
    Returns (q, v, info) with info = dict(residual_history (|Φ|∞ of the
    independent rows per iteration), residual and velocity_residual (|Φ|∞
    and |Φ_q v|∞ of every row, the redundant ones included), status:
    linalg.OK, or RANK_DEFICIENT when the independent rows' Φ_q was
    rank-deficient somewhere (the result is still checked by the
    residuals))."""
    q = jnp.asarray(q)
    v = mech.v0 if v is None else jnp.asarray(v)
    _check(mech, q, v)
    tree = mech.tree
    qt, vt = mech.to_tree(q), mech.to_tree(v)
    m, n = mech.n_active, mech.nv
    tall = m > n

    def step(c, _):
        qt, status = c
        r = mech.rows(phi_tree(mech, qt))
        G = mech.rows(phi_jacobian_tree(mech, qt))
        if tall:
            s = linalg.lstsq_lu(G, -r)
        else:
            s = linalg.minnorm_lu(G, -r)
        # a singular configuration (rank-deficient Φ_q): the pseudo-inverse step instead
        dx = jnp.where(s.status == linalg.OK, s.x, jnp.linalg.pinv(G, rtol=1e-10) @ -r)
        small = jnp.max(jnp.abs(r)) <= tol
        dx = jnp.where(small, 0.0, dx)
        return (normalize_q(tree, integrate_q(tree, qt, dx)), status | s.status), jnp.max(jnp.abs(r))
    (qt, status), hist = jax.lax.scan(step, (qt, jnp.array(0, jnp.int32)), None, length=iterations)
    G_all = phi_jacobian_tree(mech, qt)
    G = mech.rows(G_all)
    if m:
        s = linalg.minnorm_lu(G, G @ vt) if not tall else None
        ok = (s.status == linalg.OK) if s is not None else jnp.array(False)
        dv = jnp.linalg.pinv(G, rtol=1e-10) @ (G @ vt)
        vt = vt - (jnp.where(ok, s.x, dv) if s is not None else dv)
        status = status | (s.status if s is not None else jnp.array(linalg.RANK_DEFICIENT, jnp.int32))
    vres = jnp.max(jnp.abs(G_all @ vt)) if m else jnp.zeros((), vt.dtype)
    res = jnp.max(jnp.abs(phi_tree(mech, qt))) if m else jnp.zeros((), vt.dtype)
    return mech.from_tree(qt), mech.from_tree(vt), dict(residual_history=hist, residual=res,
                                                         velocity_residual=vres, status=status)


__all__ = ["constrained_dynamics", "full_pivot", "partition", "assemble", "accel_tree", "Mechanism"]
