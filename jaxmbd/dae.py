"""Closed loops as index-3 DAEs (Negrut's thesis; digests/negrut.md §1-2).

* :func:`constrained_dynamics`: accelerations and multipliers from the
  augmented system ``[[H, Φ_qᵀ], [Φ_q, 0]] [a; λ] = [τ - C; τ_c]``, through
  the factorization of H and the Schur complement ``Φ_q H⁻¹ Φ_qᵀ`` (formed
  with the LᵀDL half-solve on branched trees), or densely (the reference).
* Generalized coordinate partitioning (§1.2): :func:`partition` runs full-
  pivot Gaussian elimination on Φ_q and returns the dependent (pivot) and
  independent columns; ``cond(Φ_u)`` is watched and the partition is
  renewed when it exceeds 1.25x its value at partitioning.
* :class:`ConstrainedChartODE`: the state-space ODE (SSODE, §1.4) on the
  independent coordinates, in the local chart of the tree at the step start,
  so every integrator of :mod:`jaxmbd.integrators` applies to it: given
  the independent chart coordinates y and rates y', the dependent ones are
  recovered by Newton on Φ = 0 and one linear solve, then the constrained
  accelerations are computed and their independent part returned.  Its
  Jacobians J1 = ∂y''/∂y and J2 = ∂y''/∂y' come from forward-mode autodiff
  through the recovery (the thesis's Appendix A, as a JVP).
* :func:`assemble`: consistent positions (Gauss-Newton with the LU
  projection method's least-squares / minimum-norm steps; redundant
  constraints allowed) and velocities (minimum-norm correction).

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
import numpy as np

from . import linalg, ltdl
from .constraints import Mechanism, _check, phi_bias_tree, phi_jacobian_tree, phi_tree
from .integrators.chart import ChartODE, right_jacobian_inv

REPARTITION_FACTOR = 1.25   # the thesis's α (§1.2)
NEWTON_ITERS = 5            # position recovery: Newton steps from the step start's dependent coordinates
RECOVERY_TOL = 1e-12        # |Φ| after them (relative to 1 + |q0|); above it the evaluation fails


# --- constrained accelerations (tree order) ---------------------------------------------

# Below this many DoFs the Schur path factors H densely: evaluations are
# dispatch-bound there.  Measured on the squeezer (nv = 7, 2-core CPU, batch 1,
# XLA at the tests' optimisation level; ad hoc): the state-space ODE's g costs
# 0.78 ms with dense Cholesky against 2.0 ms with the level-scan LᵀDL.
DENSE_BELOW = 16


def _factorization(tree, factorization):
    from .aba import factorization_for
    if factorization == "auto":
        return "dense" if tree.nv < DENSE_BELOW else factorization_for(tree)
    if factorization not in ("sparse", "dense"):
        raise ValueError(f"unknown factorization {factorization!r}; expected 'auto', 'sparse' or 'dense'")
    return factorization


def accel_tree(mech, q, v, tau, method="schur", G=None, factorization="auto"):
    """(a, λ) for tree-ordered q, v, tau; see :func:`constrained_dynamics`
    (G: Φ_q at q when the caller has it)."""
    from .crba import mass_matrix, mass_matrix_compact
    from .rnea import bias_force
    tree = mech.tree
    rhs = tau - bias_force(tree, q, v)
    if mech.nc == 0:
        from .aba import forward_dynamics
        return forward_dynamics(tree, q, v, tau), jnp.zeros((0,), rhs.dtype)
    G = phi_jacobian_tree(mech, q) if G is None else G
    tc = phi_bias_tree(mech, q, v)
    if method == "dense":
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
    lam = jnp.linalg.solve(B, G @ au - tc)
    return solve(rhs - G.T @ lam), lam


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
    -Φ_qᵀ λ is the generalized constraint force."""
    q, v = jnp.asarray(q), jnp.asarray(v)
    _check(mech, q, v)
    tau = jnp.zeros(mech.nv, jnp.result_type(q, v)) if tau is None else jnp.asarray(tau)
    if tau.shape != (mech.nv,):
        raise ValueError(f"tau has shape {tau.shape}, expected ({mech.nv},)")
    a, lam = accel_tree(mech, mech.to_tree(q), mech.to_tree(v), mech.to_tree(tau), method,
                        factorization=factorization)
    return mech.from_tree(a), lam


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


# --- the state-space ODE on the independent coordinates ----------------------------------

class ConstrainedChartODE:
    """y'' = g(t, y, y') for the independent chart coordinates of a mechanism
    around a consistent tree-ordered configuration q0 (see the module
    docstring).  ``control(t, q, v, params)`` and the saved states use the
    mechanism's coordinate order; everything inside is in tree order."""

    def __init__(self, mech, q0, dep, ind, control=None, params=None, method="schur"):
        self.mech, self.q0, self.dep, self.ind = mech, q0, dep, ind
        self.chart = ChartODE(mech.tree, q0)
        self.model = mech.tree
        self.control, self.params, self.method = control, params, method
        self.R = self.chart.R
        self.time_dependent = callable(control)
        self.nv = mech.nv
        if self.dep.shape[0]:
            # the tangent plane at the step start: x_dep ≈ -Φ_u⁻¹ Φ_v y, Newton's starting guess
            G0 = jax.jacfwd(self.phi_x)(jnp.zeros(self.nv, jnp.result_type(q0, float)))
            self._H0 = -jnp.linalg.solve(G0[:, dep], G0[:, ind])

    def _tangent_guess(self, y):
        return self._H0 @ y

    # -- chart, recovery --------------------------------------------------------------
    def phi_x(self, x):
        return phi_tree(self.mech, self.chart.config(x))

    def _x(self, y, xd):
        return jnp.zeros(self.nv, y.dtype).at[self.ind].set(y).at[self.dep].set(xd)

    def recover(self, y, guess=None, iters=NEWTON_ITERS):
        """Dependent chart coordinates for independent ones y.

        NEWTON_ITERS Newton steps on Φ(x_dep, y) = 0 from the tangent-plane
        guess -Φ_u⁻¹ Φ_v y (step start), each with the full
        Jacobian Φ_x (one forward-mode pass over the tree gives Φ and Φ_x).
        The steps are ordinary differentiable operations, so derivatives
        with respect to y (and model parameters) are those of the converged
        iteration: the implicit-function derivatives, to every order.
        ``iters=0`` keeps the tangent-plane guess: exact, with exact first
        derivatives, at the chart origin y = 0 only (see :meth:`g_and_jac`).
        Returns (x (nv,), Φ_x there (nc, nv), ok)."""
        m = self.dep.shape[0]
        if m == 0:
            return self._x(y, jnp.zeros(0, y.dtype)), jnp.zeros((0, self.nv), y.dtype), jnp.array(True)
        xd0 = self._tangent_guess(y) if guess is None else guess

        def val_jac(x):
            J, r = jax.jacfwd(lambda z: (self.phi_x(z),) * 2, has_aux=True)(x)
            return r, J

        def it(xd, _):
            r, J = val_jac(self._x(y, xd))
            return xd - jnp.linalg.solve(J[:, self.dep], r), None
        xd = jax.lax.scan(it, xd0, None, length=iters)[0] if iters else xd0
        r, J = val_jac(self._x(y, xd))     # Φ and Φ_x at the result: exact velocity recovery
        res = jnp.max(jnp.abs(r)) if m else jnp.zeros((), y.dtype)
        ok = jnp.isfinite(res) & jnp.all(jnp.isfinite(xd)) & (res <= RECOVERY_TOL * (1.0 + jnp.max(jnp.abs(self.q0))))
        return self._x(y, xd), J, ok

    def chart_velocity(self, Gx, yd):
        """Full chart rates x' from the independent ones (Φ_x x' = 0)."""
        if self.dep.shape[0] == 0:
            return jnp.zeros(self.nv, yd.dtype).at[self.ind].set(yd)
        xd_dep = -jnp.linalg.solve(Gx[:, self.dep], Gx[:, self.ind] @ yd)
        return jnp.zeros(self.nv, yd.dtype).at[self.ind].set(yd).at[self.dep].set(xd_dep)

    def state(self, y, yd, iters=NEWTON_ITERS):
        """(q, v, x, x', ok, G): the full tree-ordered state for independent
        (y, y'), and Φ_q there when the chart's Jacobian is it (scalar joints)."""
        x, Gx, ok = self.recover(y, iters=iters)
        xd = self.chart_velocity(Gx, yd)
        G = Gx if not len(self.R) else None
        return self.chart.config(x), self.chart.velocity(x, xd), x, xd, ok, G

    def tau(self, t, q, v):
        c, mech = self.control, self.mech
        if c is None:
            return jnp.zeros(self.nv, q.dtype)
        if callable(c):
            return mech.to_tree(jnp.asarray(c(t, mech.from_tree(q), mech.from_tree(v), self.params), q.dtype))
        return mech.to_tree(jnp.broadcast_to(jnp.asarray(c, q.dtype), (self.nv,)))

    def accel_full(self, t, y, yd, iters=NEWTON_ITERS):
        """(x'' (nv,), a (nv,), λ, ok) at independent (y, y')."""
        q, v, x, xd, ok, G = self.state(y, yd, iters)
        a, lam = accel_tree(self.mech, q, v, self.tau(t, q, v), self.method, G)
        xdd = self._chart_accel(x, xd, a)
        return xdd, a, lam, ok

    def _chart_accel(self, x, xd, a):
        ch = self.chart
        if not len(self.R):
            return a
        _, corr = jax.jvp(lambda xx: ch.velocity(xx, xd), (x,), (xd,))
        r = a - corr
        return r.at[self.R].set(jnp.einsum("kij,kj->ki", right_jacobian_inv(x[self.R]), r[self.R]))

    # -- the ChartODE interface the integrators use --------------------------------
    def g(self, t, y, yd, iters=NEWTON_ITERS):
        xdd, _, _, ok = self.accel_full(t, y, yd, iters)
        return jnp.where(ok, xdd[self.ind], jnp.nan)

    def g_and_jac(self, t, y, yd):
        """g and J1 = ∂g/∂y, J2 = ∂g/∂y' by forward-mode autodiff, at the
        chart origin y = 0 (the step start, where every integrator forms
        its Jacobians).  There the recovery needs no Newton step: the
        tangent-plane guess x_dep = -Φ_u⁻¹ Φ_v y is exact at y = 0 and so
        is its derivative, the implicit-function derivative -Φ_u⁻¹ Φ_v
        (and its derivatives with respect to q0 and model parameters, so
        gradients through the Jacobians stay exact).  Skipping the five
        Newton steps makes the Jacobian about 5x cheaper on the HMMWV."""
        nv = y.shape[0]

        def f(z):
            out = self.g(t, z[:nv], z[nv:], iters=0)
            return out, out
        J, g0 = jax.jacfwd(f, has_aux=True)(jnp.concatenate([y, yd]))
        return g0, J[:, :nv], J[:, nv:]

    g_t = ChartODE.g_t

    def finish(self, y, yd):
        from .kinematics import normalize_q
        q, v, _, _, ok, _ = self.state(y, yd)
        q = normalize_q(self.model, q)
        return jnp.where(ok, q, jnp.nan), jnp.where(ok, v, jnp.nan)

    def position_magnitude(self, q):
        return self.chart.position_magnitude(q)[self.ind]


# --- consistent initial conditions ----------------------------------------------------------

@partial(jax.jit, static_argnames=("iterations",))
def assemble(mech, q, v=None, iterations=20, tol=1e-12):
    """Consistent positions and velocities near (q, v) (mechanism order).

    Positions: Gauss-Newton q ← q ⊕ δ with δ the minimum-norm solution of
    Φ_q δ = -Φ (the LU projection method, :func:`jaxmbd.linalg.minnorm_lu`;
    least squares with :func:`~jaxmbd.linalg.lstsq_lu` when there are more
    equations than coordinates); converges quadratically for full-rank Φ_q.
    Velocities: the minimum-norm correction v - Φ_qᵀ (Φ_q Φ_qᵀ)⁻¹ Φ_q v.
    Redundant constraints (a rank-deficient Φ_q, e.g. a planar linkage
    closed by a spatial revolute constraint) are allowed: those steps use
    the pseudo-inverse.  Returns (q, v, info) with info =
    dict(residual_history (|Φ|∞ per iteration), residual, velocity_residual,
    status: linalg.OK, or RANK_DEFICIENT when Φ_q was rank-deficient
    somewhere (redundant constraints; the result is still checked by the
    residuals))."""
    from .kinematics import integrate_q, normalize_q
    q = jnp.asarray(q)
    v = mech.v0 if v is None else jnp.asarray(v)
    _check(mech, q, v)
    tree = mech.tree
    qt, vt = mech.to_tree(q), mech.to_tree(v)
    m, n = mech.nc, mech.nv
    tall = m > n

    def step(c, _):
        qt, status = c
        r = phi_tree(mech, qt)
        G = phi_jacobian_tree(mech, qt)
        if tall:
            s = linalg.lstsq_lu(G, -r)
        else:
            s = linalg.minnorm_lu(G, -r)
        # redundant constraints (rank-deficient Φ_q): the pseudo-inverse step instead
        dx = jnp.where(s.status == linalg.OK, s.x, jnp.linalg.pinv(G, rtol=1e-10) @ -r)
        small = jnp.max(jnp.abs(r)) <= tol
        dx = jnp.where(small, 0.0, dx)
        return (normalize_q(tree, integrate_q(tree, qt, dx)), status | s.status), jnp.max(jnp.abs(r))
    (qt, status), hist = jax.lax.scan(step, (qt, jnp.array(0, jnp.int32)), None, length=iterations)
    G = phi_jacobian_tree(mech, qt)
    if m:
        s = linalg.minnorm_lu(G, G @ vt) if not tall else None
        ok = (s.status == linalg.OK) if s is not None else jnp.array(False)
        dv = jnp.linalg.pinv(G, rtol=1e-10) @ (G @ vt)
        vt = vt - (jnp.where(ok, s.x, dv) if s is not None else dv)
        status = status | (s.status if s is not None else jnp.array(linalg.RANK_DEFICIENT, jnp.int32))
    vres = jnp.max(jnp.abs(G @ vt)) if m else jnp.zeros((), vt.dtype)
    res = jnp.max(jnp.abs(phi_tree(mech, qt))) if m else jnp.zeros((), vt.dtype)
    return mech.from_tree(qt), mech.from_tree(vt), dict(residual_history=hist, residual=res,
                                                         velocity_residual=vres, status=status)


@partial(jax.jit, static_argnames=("iterations",))
def static_equilibrium(mech, q=None, iterations=8, tau=None):
    """A configuration at rest near q (mechanism order; default ``mech.q0``)
    where the constrained accelerations vanish: Newton on the state-space
    ODE's independent accelerations, g(y, 0) = 0, with the Jacobian
    ∂g/∂y from forward-mode autodiff (through the position recovery) and
    least-squares steps, so neutral directions (a free-floating body's
    horizontal position and heading, which no force restores) stay where
    they are.  q must satisfy the constraints (see :func:`assemble`); tau:
    a constant generalized force (mechanism order), default zero.
    Returns (q, info) with info = dict(residual_history (max |g| before each
    step), residual (max |a| at the result, all coordinates))."""
    q = mech.q0 if q is None else jnp.asarray(q)
    _check(mech, q)
    control = None if tau is None else jnp.asarray(tau, q.dtype)

    def step(qt, _):
        P = partition(phi_jacobian_tree(mech, qt))
        ode = ConstrainedChartODE(mech, qt, P["dep"], P["ind"], control)
        y0 = jnp.zeros(P["ind"].shape[0], q.dtype)
        g0, J1, _ = ode.g_and_jac(jnp.zeros((), q.dtype), y0, y0)
        dy = jnp.linalg.lstsq(J1, -g0, rcond=1e-10)[0]
        qn, _ = ode.finish(dy, y0)
        return qn, jnp.max(jnp.abs(g0))
    qt, hist = jax.lax.scan(step, mech.to_tree(q), None, length=iterations)
    a, _ = accel_tree(mech, qt, jnp.zeros(mech.nv, q.dtype),
                      jnp.zeros(mech.nv, q.dtype) if tau is None else mech.to_tree(control))
    return mech.from_tree(qt), dict(residual_history=hist, residual=jnp.max(jnp.abs(a)))


__all__ = ["static_equilibrium", "constrained_dynamics", "full_pivot", "partition", "ConstrainedChartODE", "assemble", "Mechanism"]
