"""MuJoCo's soft constraints for contacts, joint limits and joint friction
loss, as an explicit function of the state.

Each contact (normal direction), each joint limit and each frictional
direction is a *row*: a Jacobian row J (so J v is the row's velocity and
Jᵀ f its generalized force) and, for unilateral rows, a signed distance r
(negative when violated).  MuJoCo (Todorov, "Convex and analytically-
invertible dynamics with contacts and constraints", ICRA 2014; the MuJoCo
documentation, Computation: Soft constraints) gives each row

* a reference acceleration ``aref = -B J v - K d(r) r`` with, for
  ``solref = (τ, ζ)``, K = 1 / (dmax τ ζ)², B = 2 / (dmax τ), and for the
  direct form ``solref = (-k, -b)``, K = k / dmax², B = b / dmax;
* an impedance d(r) in (0, 1) rising from ``dmin`` at r = 0 to ``dmax``
  at |r| ≥ ``width`` along solimp's curve (midpoint, power:
  :func:`impedance`);
* a regularizer R = (1 - d) / d · Â, Â the row's approximate inverse
  effective mass at the reference configuration (``body_invweight0``,
  ``dof_invweight0``; frictional rows of a contact: R_normal / impratio,
  scaled by (μ_slide / μ_j)² for torsion and rolling),

and its force solves (A + R) f = aref - a₀ on the rows that are active,
with A = J H⁻¹ Jᵀ and a₀ = J a_free the rows' acceleration without them,
so that J a = a₀ + A f = (1 - d) a₀ + d aref for a single row: the
violation is driven back at a bounded reference acceleration, and the
force scales with the load (the effective mass), not with the depth.  At
rest (J a = 0) a row is a linear spring: f = K d² r / ((1 - d) Â), MuJoCo's
resting penetration.

MuJoCo's forces minimize ½ fᵀ(A + R) f + fᵀ(a₀ - aref) over the constraint set (normal forces
≥ 0, frictional forces in their cones, friction loss within ±loss).  Here they are found with a
bounded amount of work, so that they are a function of (q, v) and of every parameter that
derivatives go through:

1. a starting point (:func:`_start`): the normal rows (contacts, limits, a pyramidal cone's edges)
   by one solve f_N = max₀((S A + R)⁻¹ S b), S the rows' activation (0 while the row is separated,
   rising over a tenth of its resting depth under 1 g, :func:`onset_width`: MuJoCo switches rows on
   at r = 0), then the frictional rows (elliptic cones' friction, joint friction loss) by the same
   solve with the normal forces applied, each cone scaled smoothly onto its limit
   (f ← f · L / (L⁸ + g⁸)^⅛, g the cone norm of f);
2. Newton iterations on MuJoCo's problem itself (:func:`_newton`, :func:`_force_map`), whose
   fixed point is MuJoCo's solution, each with an exact line search along its direction for
   MuJoCo's cost (:func:`_line_search`), until the forces are the fixed point to
   :data:`NEWTON_RTOL` of their scale (at least :data:`NEWTON`, at most :data:`NEWTON_MAX`).
   The iterations, not the start, decide the forces: a better start saves iterations only.

Where the rows outnumber the joints, the linear systems of the rows' space are solved in joint
space (:func:`_woodbury`, :data:`JOINT_SPACE`), and the force map's Jacobian, block-diagonal, is
formed one cone position at a time (:func:`_map_jacobian`), so the solve's work grows with the
rows times the joints rather than with the cube of the rows.

The forces' derivatives are those of the fixed point (the implicit-function theorem, :func:`_forces`):
nothing of the start or the iterations is differentiated.

Where this differs from MuJoCo: rows fade in over a tenth of their resting depth instead of
switching on, and the row acceleration J a ignores J̇ v as MuJoCo does.  Pyramidal cones are rows
of their own (:func:`jaxmbd.forces.contact_rows.soft_rows`).  The normal forces of
:func:`jaxmbd.contact_forces` come from the same solve."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..mujoco_defaults import SOLIMP, SOLREF
from .law import ramp

NEWTON = 1              # Newton iterations on MuJoCo's problem from the starting forces, at least,
NEWTON_MAX = 16         # and at most, stopping in between when |f - F| ≤ NEWTON_RTOL max(|f|, |F|)
NEWTON_RTOL = 1e-12     # (64 ulp where the dtype's precision is coarser)
LINE_SEARCH = 8         # safeguarded Newton steps of each Newton iteration's exact line search
SAT_POWER = 8.0         # the cone scaling's smoothness: f L / (L^p + g^p)^(1/p)
ONSET_FRACTION = 0.1    # a row fades in over this fraction of its resting depth under ONSET_G
ONSET_G = 9.81          # m/s² (rad/s²)
EPS_ACC = 1e-3          # m/s² (rad/s²): the width of a normal force's ramp at 0, times the row's mass
JOINT_SPACE = True      # where the rows outnumber the joints, factorize in joint space (_woodbury)
MINIMP, MAXIMP = 1e-4, 0.9999     # MuJoCo's clamp of dmin and dmax
MINVAL = 1e-15                      # MuJoCo's mjMINVAL


def impedance(x, solimp):
    """d(x) for |r| = x ≥ 0 and solimp (..., 5) = (dmin, dmax, width, midpoint, power): MuJoCo's
    curve (dmin at 0, dmax from the width on, the two power-law halves meeting at the midpoint)."""
    dmin = jnp.clip(solimp[..., 0], MINIMP, MAXIMP)
    dmax = jnp.clip(solimp[..., 1], MINIMP, MAXIMP)
    width, mid, power = solimp[..., 2], jnp.clip(solimp[..., 3], 1e-4, 1 - 1e-4), jnp.maximum(solimp[..., 4], 1.0)
    flat = (dmin == dmax) | (width <= MINVAL)
    u = jnp.clip(x / jnp.where(flat, 1.0, width), 0.0, 1.0)
    lo = u ** power / mid ** (power - 1.0)
    hi = 1.0 - (1.0 - u) ** power / (1.0 - mid) ** (power - 1.0)
    y = jnp.where(u <= mid, lo, hi)
    return jnp.where(flat, 0.5 * (dmin + dmax), dmin + y * (dmax - dmin))


def ref_coefficients(solref, solimp):
    """(K, B) of the reference acceleration for solref (..., 2) and solimp (..., 5) (standard form for
    a positive time constant, direct form otherwise)."""
    dmax = jnp.clip(solimp[..., 1], MINIMP, MAXIMP)
    tc, dr = solref[..., 0], solref[..., 1]
    std = tc > 0
    tcs, drs = jnp.where(std, tc, 1.0), jnp.where(std, dr, 1.0)
    K = jnp.where(std, 1.0 / (dmax * tcs * drs) ** 2, -tc / dmax ** 2)
    B = jnp.where(std, 2.0 / (dmax * tcs), -dr / dmax)
    return K, B


def activation(delta, width):
    """0 for δ ≤ 0, the C¹ smoothstep over (0, width), 1 beyond (width 0: a step)."""
    w = jnp.where(width > 0, width, 1.0)
    u = jnp.clip(delta / w, 0.0, 1.0)
    smooth = u * u * (3.0 - 2.0 * u)
    return jnp.where(width > 0, smooth, (delta > 0).astype(delta.dtype))


class RowGeometry(NamedTuple):
    """Rows whose Jacobian is built from the tree's DoF axes: row i of J is P_i ∘ (S ρ_i) + plain_i, with
    S (nv, 6) the DoFs' world axes (angular; linear) at the world origin
    (:func:`jaxmbd.kinematics.kinematics_and_axes`), ρ (k, 6) each row's spatial direction (a
    direction u at the point x: (x × u, u); an angular direction u: (u, 0)), P_i = support[body2_i] -
    support[body1_i] its ±1 on the DoFs that move its bodies (``support`` (n + 1, nv): row 0 the world,
    row b + 1 the DoFs that move body b), and ``plain`` (k, nv) the rows given as a matrix (None: none;
    zero where a row is given by ρ).  A row's product with a velocity is then ρ · (its bodies' relative
    twist), and its transpose's product with a force sums spatial forces over the bodies and up the
    tree, so neither product forms J, and their tangents in a position direction take the tangents of
    ρ and S (k + nv six-vectors), not those of J (k × nv) (:class:`RowMap`)."""
    rho: jax.Array
    body1: jax.Array
    body2: jax.Array
    support: jax.Array
    plain: jax.Array | None = None


class RowMap(NamedTuple):
    """The rows' Jacobian J as a linear map: ``plain`` (k, nv) (None: no rows given as a matrix), and
    rows of spatial directions ``rho`` (k, 6) on the DoFs' world axes ``axes`` (nv, 6) between the bodies
    ``body1``, ``body2`` (rows of ``support``), as in :class:`RowGeometry`.  :meth:`apply` (J z) and
    :meth:`apply_T` (Jᵀ f) take O((k + n nv) · 6) multiplications beyond ``plain``'s product, and their
    tangents in ρ and the axes as many; :meth:`matrix` forms J."""
    plain: jax.Array | None
    rho: jax.Array | None = None
    axes: jax.Array | None = None
    body1: jax.Array | None = None
    body2: jax.Array | None = None
    support: jax.Array | None = None

    def matrix(self):
        if self.rho is None:
            return self.plain
        J = (self.support[self.body2] - self.support[self.body1]) * (self.rho @ self.axes.T)
        return J if self.plain is None else J + self.plain

    def apply(self, z):
        if self.rho is None:
            return self.plain @ z
        twist = self.support @ (self.axes * z[:, None])           # (n + 1, 6): each body's world twist
        out = jnp.sum(self.rho * (twist[self.body2] - twist[self.body1]), -1)
        return out if self.plain is None else out + self.plain @ z

    def apply_T(self, f):
        if self.rho is None:
            return self.plain.T @ f
        w = f[:, None] * self.rho                                 # the rows' spatial forces
        W = jnp.zeros((self.support.shape[0], 6), w.dtype).at[self.body2].add(w).at[self.body1].add(-w)
        out = jnp.sum(self.axes * (self.support.T @ W), -1)       # each DoF: the forces on its subtree
        return out if self.plain is None else out + self.plain.T @ f


def row_map(rows, axes=None):
    """The :class:`RowMap` of NormalRows or FrictionRows (``axes``: the DoFs' world axes, needed where
    the rows have a :class:`RowGeometry`)."""
    g = rows.geo
    if g is None:
        return RowMap(rows.J)
    if axes is None:
        raise ValueError("rows with a RowGeometry need the DoFs' world axes")
    return RowMap(g.plain, g.rho, axes, g.body1, g.body2, g.support)


class NormalRows(NamedTuple):
    """Unilateral rows: J (k, nv), r (k,) signed distance (< 0 violated), vel (k,) = J v, solref (k, 2),
    solimp (k, 5), invweight (k,) (Â: the row's effective inverse mass, which sets the width of its
    force's ramp at 0), and optionally rscale (k,) (R = (1 - d)/d · Â · rscale; None: 1), on (k,)
    (a factor on the activation; None: 1; a pyramidal cone's edges beyond its contact's condim are
    off) and geo (J's :class:`RowGeometry`, equal to J; None: J only)."""
    J: jax.Array
    r: jax.Array
    vel: jax.Array
    solref: jax.Array
    solimp: jax.Array
    invweight: jax.Array
    rscale: jax.Array | None = None
    on: jax.Array | None = None
    geo: RowGeometry | None = None


class FrictionRows(NamedTuple):
    """Frictional rows: J (k, nv), vel (k,), B (k,), R (k,), on (k,) their activation, mu (k,) their
    cone weights (the limit is L = f_N[normal] or ``loss``), normal (k,) index of the normal row whose
    force bounds them (-1: none), loss (k,), cone (static (k,) int: rows of one cone share it), kr
    (optional (k,): a position term, the reference acceleration -B vel - kr; bilateral equality rows,
    :mod:`jaxmbd.forces.joint_coupling`; None: 0), geo (optional: as :class:`NormalRows`)."""
    J: jax.Array
    vel: jax.Array
    B: jax.Array
    R: jax.Array
    on: jax.Array
    mu: jax.Array
    normal: np.ndarray
    loss: jax.Array
    cone: np.ndarray
    kr: jax.Array | None = None
    geo: RowGeometry | None = None


def onset_width(solref, solimp):
    """The violation over which a row fades in: a tenth of its resting depth under 1 g of load,
    ONSET_FRACTION g (1 - dmax) / (dmax² K), and never more than solimp's width, so a row at rest
    is fully on and rests at MuJoCo's depth."""
    K, _ = ref_coefficients(solref, solimp)
    dmax = jnp.clip(solimp[..., 1], MINIMP, MAXIMP)
    rest = ONSET_G * (1.0 - dmax) / (dmax * dmax * jnp.maximum(K, MINVAL))
    return jnp.minimum(solimp[..., 2], ONSET_FRACTION * rest)


def normal_parameters(rows):
    """(aref, R, activation, d) of normal rows."""
    delta = -rows.r
    d = impedance(jnp.abs(rows.r), rows.solimp)
    K, B = ref_coefficients(rows.solref, rows.solimp)
    aref = -B * rows.vel - K * d * rows.r
    R = (1.0 - d) / d * rows.invweight
    R = jnp.maximum(R if rows.rscale is None else R * rows.rscale, MINVAL)
    s = activation(delta, onset_width(rows.solref, rows.solimp))
    return aref, R, s if rows.on is None else s * rows.on, d


def _solve(A, R, s, b):
    """f = (S A + R)⁻¹ S b (S = diag(s)): the rows with s = 0 get f = 0 and no say in the others."""
    M = s[:, None] * A + jnp.diag(jnp.maximum(R, MINVAL))
    return _lu_solve(M, s * b)


def _lu(M):
    """(L, U) of M = L U, L unit lower triangular (its strictly lower part returned), by Gaussian
    elimination without pivoting, in plain array operations: M = S A + R = D C D⁻¹ with D = S^½ and
    C = D A D + R symmetric positive definite, so its pivots are C's, all positive (no pivoting
    needed); and no LAPACK call, whose batched form under ``vmap`` runs on a thread pool that can
    wait on itself inside a compiled loop on a small CPU."""
    k = M.shape[0]
    idx = jnp.arange(k)

    def eliminate(j, carry):
        U, L = carry
        lj = jnp.where(idx > j, U[:, j] / U[j, j], 0.0)
        return U - lj[:, None] * U[j][None, :], L.at[:, j].set(lj)
    return jax.lax.fori_loop(0, k, eliminate, (M, jnp.zeros_like(M)))[::-1]


def _lu_apply(L, U, x):
    """U⁻¹ L⁻¹ x (x: (k,) or (k, m)) by forward and back substitution."""
    k = U.shape[0]
    y = jax.lax.fori_loop(0, k, lambda j, y: y - L[:, j].reshape((-1,) + (1,) * (y.ndim - 1)) * y[j], x)
    return _back_substitute(U, y)


def _back_substitute(U, y):
    """U⁻¹ y for upper triangular U."""
    k = U.shape[0]

    def back(t, f):
        i = k - 1 - t
        return f.at[i].set((y[i] - U[i] @ f) / U[i, i])
    return jax.lax.fori_loop(0, k, back, jnp.zeros_like(y))


@jax.custom_jvp
def _lu_solve(M, x):
    """M⁻¹ x: the elimination carries x along (no L kept), then back substitution.  Its derivative
    M⁻¹ (dx - dM f) reuses M's factors: every tangent direction costs two triangular solves, not an
    elimination of its own (the integrators' Jacobians take 2 nv of them)."""
    k = M.shape[0]
    idx = jnp.arange(k)

    def eliminate(j, carry):
        U, y = carry
        lj = jnp.where(idx > j, U[:, j] / U[j, j], 0.0)
        return U - lj[:, None] * U[j][None, :], y - lj * y[j]
    return _back_substitute(*jax.lax.fori_loop(0, k, eliminate, (M, x)))


@_lu_solve.defjvp
def _lu_solve_jvp(primals, tangents):
    M, x = primals
    dM, dx = tangents
    L, U = _lu(M)
    f = _lu_apply(L, U, x)
    return f, _lu_apply(L, U, dx - dM @ f)


def _plu(M):
    """(L, U, perm) with M[perm] = L U, by Gaussian elimination with partial pivoting in plain array
    operations (L's strictly lower part returned).  For the joint-space systems I + Y U of
    :func:`_woodbury`, whose leading minors, unlike those of I + D A, need not be positive."""
    n = M.shape[0]
    idx = jnp.arange(n)

    def eliminate(j, carry):
        U, L, perm = carry
        p = jnp.argmax(jnp.where(idx >= j, jnp.abs(U[:, j]), -1.0))
        swap = jnp.where(idx == j, p, jnp.where(idx == p, j, idx))
        U, L, perm = U[swap], L[swap], perm[swap]
        lj = jnp.where(idx > j, U[:, j] / U[j, j], 0.0)
        return U - lj[:, None] * U[j][None, :], L.at[:, j].set(lj), perm
    U, L, perm = jax.lax.fori_loop(0, n, eliminate, (M, jnp.zeros_like(M), idx))
    return L, U, perm


def _woodbury(U, Y):
    """The factors of (I + U Y)⁻¹ for U (k, n), Y (n, k) with n < k: (I + U Y)⁻¹ x = x - U (I + Y U)⁻¹ Y x
    (Woodbury), an n × n factorization instead of a k × k one.  With Y = H⁻¹ Jᵀ this is the
    joint-space form of a system in the rows' space, as MuJoCo's Newton solver factorizes
    H + Jᵀ D J rather than a matrix of the rows."""
    L, Uf, perm = _plu(jnp.eye(U.shape[1], dtype=U.dtype) + Y @ U)
    return U, Y, L, Uf, perm


def _woodbury_apply(W, x):
    """(I + U Y)⁻¹ x for the factors W of :func:`_woodbury` (x: (k,) or (k, m))."""
    U, Y, L, Uf, perm = W
    return x - U @ _lu_apply(L, Uf, (Y @ x)[perm])


def _solve_joint(J, Y, R, s, b):
    """f = (S A + R)⁻¹ S b for A = J Y (:func:`_solve`) in joint space: with z = R⁻¹ S b and U = R⁻¹ S J,
    f = (I + U Y)⁻¹ z (:func:`_woodbury`)."""
    w = s / jnp.maximum(R, MINVAL)
    return _woodbury_apply(_woodbury(w[:, None] * J, Y), w * b)


def _scale(L, g2):
    """The smooth factor L / (L^p + g^p)^(1/p) that brings a cone's forces of squared cone norm g2
    onto its limit L (p = :data:`SAT_POWER`)."""
    p = SAT_POWER
    s = L ** p + g2 ** (p / 2)
    # where both the limit and the forces vanish (s below 1e-200: |f| < 1e-25) the scale is taken as 1;
    # a root of s near zero has finite first derivatives but infinite second ones (inf x 0 = NaN in
    # the integrators' Jacobians differentiated again, as a gradient through an implicit step does)
    live = s > 1e-200
    return jnp.where(live, L / jnp.where(live, s, 1.0) ** (1.0 / p), 1.0)


def _cone_scale(f, rows, fN):
    """Each cone's forces scaled smoothly onto their limit."""
    nc = int(rows.cone.max()) + 1 if len(rows.cone) else 0
    has_n = rows.normal >= 0
    L = jnp.where(jnp.asarray(has_n), fN[np.maximum(rows.normal, 0)] if fN.shape[0] else 0.0, rows.loss)
    mu = jnp.where(rows.mu > 0, rows.mu, 1.0)
    g2 = jax.ops.segment_sum((f / mu) ** 2, jnp.asarray(rows.cone), nc)[rows.cone]
    scale = _scale(L, g2)
    return jnp.where(rows.mu > 0, f * scale, 0.0)


class Solution(NamedTuple):
    """The stage's result: accelerations a, normal forces fN (kN,), frictional forces fT (kT,) and the
    generalized constraint force tau (nv,)."""
    a: jax.Array
    fN: jax.Array
    fT: jax.Array
    tau: jax.Array


def solve(N, T, a_free, respond, axes=None):
    """The accelerations with the rows' forces (module docstring).  N: NormalRows, T: FrictionRows
    (either may have no rows); a_free: the accelerations without them; respond(X) = the acceleration
    response to generalized forces X, (nv, m) or (nv,) (H⁻¹ X for a tree); axes: the DoFs' world
    axes, needed where rows have a :class:`RowGeometry`."""
    op = joined_map(N, T, axes)
    kN = N.J.shape[0]
    aN, R_N, sN, _ = normal_parameters(N)
    eps = EPS_ACC / jnp.maximum(N.invweight, MINVAL)
    aref = jnp.concatenate([aN, -T.B * T.vel - (0.0 if T.kr is None else T.kr)])
    R = jnp.maximum(jnp.concatenate([R_N, T.R]), MINVAL)
    k, nv = N.J.shape[0] + T.J.shape[0], N.J.shape[1]
    joint = JOINT_SPACE and k > nv
    # respond's closed-over arrays (H's factor, a mechanism's constraint terms) become arguments of the
    # forces' rule, for the rows' response Y = respond(Jᵀ) and for one vector, respond(Jᵀ f): the rule
    # takes the tangent of Y f alone, never of Y (nv x rows in every direction)
    example = jnp.zeros((nv, k), N.J.dtype)
    matrix, c_matrix = jax.closure_convert(respond, example)
    vector, c_vector = jax.closure_convert(respond, example[:, 0])
    f = _forces(T.normal, T.cone, joint, matrix, vector)(op, op.apply(a_free), aref, R, sN, T.on, T.mu, T.loss,
                                                         jax.lax.stop_gradient(eps), c_matrix, c_vector)
    generalized = op.apply_T(f)
    return Solution(a_free + respond(generalized), f[:kN], f[kN:], generalized)


def joined_map(N, T, axes=None):
    """The :class:`RowMap` of the normal rows N followed by the frictional rows T."""
    return row_map(N._replace(J=jnp.concatenate([N.J, T.J]), geo=join_geometry([N, T])), axes)


def join_geometry(row_sets):
    """The RowGeometry of the row sets (NormalRows or FrictionRows) one after the other (a set given as
    a matrix: ρ = 0 and its J in ``plain``); None where no set has one."""
    geos = [r.geo for r in row_sets]
    if all(g is None for g in geos):
        return None
    support = next(g.support for g in geos if g is not None)
    parts = []
    for r, g in zip(row_sets, geos):
        k, nv = r.J.shape
        if g is None:
            z = jnp.zeros(k, np.int32)
            g = RowGeometry(jnp.zeros((k, 6), r.J.dtype), z, z, support, r.J if k else None)
        parts.append(g)
    plains = [g.plain for g in parts]
    plain = None
    if any(p is not None for p in plains):
        plain = jnp.concatenate([jnp.zeros(r.J.shape, r.J.dtype) if p is None else p
                                 for r, p in zip(row_sets, plains)])
    cat = lambda xs: jnp.concatenate([jnp.asarray(x) for x in xs])  # noqa: E731
    return RowGeometry(cat([g.rho for g in parts]), cat([g.body1 for g in parts]).astype(np.int32),
                       cat([g.body2 for g in parts]).astype(np.int32), support, plain)


def _forces(normal, cone, joint, matrix, vector):
    """MuJoCo's forces of the rows, f(op, a0, aref, R, sN, on, mu, loss, eps, c_matrix, c_vector) with
    op the rows' Jacobian J as a :class:`RowMap`, A = J Y, Y = matrix(Jᵀ, *c_matrix) the rows' response
    (H⁻¹ Jᵀ for a tree; ``vector`` the same response of one generalized force, with its arrays
    ``c_vector``), for frictional rows of the static ``normal`` and ``cone`` indices: a starting point
    (:func:`_start`), then Newton iterations on MuJoCo's problem (:func:`_newton`).  Its derivative is the
    implicit function's at the fixed point f = F(a0 + A f - aref) of the force map
    (:func:`_force_map`): (I + D A) df = dF, dF the force map's own derivative at the solution
    (D = -∂F/∂y) in the tangents of a0 - aref + A f (dA f = dJ (Y f) + J d(Y f), d(Y f) the tangent of
    the response of the one vector Jᵀ f: neither A's nor Y's tangent is formed, and J's tangent enters
    only through the products dJ (Y f) and dJᵀ f, the tangents of op's :meth:`RowMap.apply` and
    :meth:`RowMap.apply_T`) and of R and the activations, so every tangent direction costs a forward
    and a back substitution with one factorization, and nothing of the start or the iterations is
    differentiated.  ``joint`` (static): Y has fewer rows (joints) than J, and every system of the
    rows' space is solved in joint space (:func:`_woodbury`), so the solve's factorizations cost the
    cube of the joints, not of the rows."""
    def rows_of(R, on, mu, loss, kN):
        k = R.shape[0] - kN
        return FrictionRows(jnp.zeros((k, 0), R.dtype), None, None, R[kN:], on, mu, normal, loss, cone)

    @jax.custom_jvp
    def forces(op, a0, aref, R, sN, on, mu, loss, eps, c_matrix, c_vector):
        J = op.matrix()
        Y = matrix(J.T, *c_matrix)
        A = J @ Y
        kN = sN.shape[0]
        T = rows_of(R, on, mu, loss, kN)
        JY = (J, Y) if joint else None
        f = _start(A, a0, aref, R, sN, T, eps, JY)
        return _newton(A, a0, aref, R, sN, T, f, JY)

    @forces.defjvp
    def forces_jvp(primals, tangents):
        op, a0, aref, R, sN, on, mu, loss, eps, c_matrix, c_vector = primals
        dop, da0, daref, dR, dsN, don, dmu, dloss, _, _, dc_vector = tangents
        kN = sN.shape[0]
        f = forces(*primals)
        J = op.matrix()
        Y = matrix(J.T, *c_matrix)
        # Y f and its tangent d(Y f) = dY f at fixed f, through the response of one vector
        # the rows' bodies and the support table have no tangent: only ρ, the axes and the plain rows do
        live = lambda o: (o.plain, o.rho, o.axes)  # noqa: E731
        at = lambda x: RowMap(*x, op.body1, op.body2, op.support)  # noqa: E731
        Yf, dYf = jax.jvp(lambda x, c: vector(at(x).apply_T(f), *c), (live(op), c_vector), (live(dop), dc_vector))
        dJ_Yf = jax.jvp(lambda x: at(x).apply(Yf), (live(op),), (live(dop),))[1]
        y = a0 + J @ Yf - aref
        F = lambda y, R, sN, on, mu, loss: _force_map(y, R, sN, rows_of(R, on, mu, loss, kN), kN)  # noqa: E731
        dy = da0 + dJ_Yf + J @ dYf - daref
        dF = jax.jvp(F, (y, R, sN, on, mu, loss), (dy, dR, dsN, don, dmu, dloss))[1]
        blocks = _blocks(normal, cone, kN)
        D = _map_jacobian(lambda y: F(y, R, sN, on, mu, loss), y, blocks)
        if joint:
            return f, _woodbury_apply(_woodbury(_apply_map_jacobian(D, blocks, J), Y), dF)
        Lf, Uf = _lu(jnp.eye(J.shape[0], dtype=J.dtype) + _apply_map_jacobian(D, blocks, J @ Y))
        return f, _lu_apply(Lf, Uf, dF)
    return forces


def _start(A, a0, aref, R, sN, T, eps, JY=None):
    """The Newton iterations' starting point: the normal rows' forces f_N = max₀((S A + R)⁻¹ S b)
    (S their activations, the frictional rows' forces at zero; the C¹ ramp of width ``eps``), then
    the frictional rows' forces by the same solve with those normal forces applied, each cone's
    scaled smoothly onto its limit (:func:`_cone_scale`).  ``JY`` = (J, Y): the solves in joint
    space (:func:`_solve_joint`)."""
    kN, kT = sN.shape[0], R.shape[0] - sN.shape[0]

    def solve_rows(rows, s, b):
        if JY is None:
            return _solve(A[rows, rows], R[rows], s, b)
        return _solve_joint(JY[0][rows], JY[1][:, rows], R[rows], s, b)
    fN = jnp.zeros(kN, A.dtype)
    fT = jnp.zeros(kT, A.dtype)
    if kN:
        fN = ramp(solve_rows(slice(0, kN), sN, aref[:kN] - a0[:kN]), eps)
    if kT:
        raw = solve_rows(slice(kN, None), T.on, aref[kN:] - a0[kN:] - A[kN:, :kN] @ fN)
        fT = _cone_scale(raw, T, fN)
    return jnp.concatenate([fN, fT])


def _force_map(y, R, sN, T, kN):
    """MuJoCo's forces at row accelerations J a with residual y = J a - aref: the projection of
    -R⁻¹ y onto the rows' constraint set in the metric R (Todorov 2014; MuJoCo documentation,
    Computation: the primal problem): a unilateral row max(0, -y/R); a friction loss row clipped to
    ±loss; an elliptic cone (a normal row and its frictional rows) by the closed-form projection onto
    the circular cone ‖x_t‖ ≤ m x_n in the scaled coordinates x = R^½ f, in which MuJoCo's frictional
    regularizers (R_n / impratio · (μ₀/μ_j)²) make the cone circular, m = μ_j (R_j / R_n)^½.
    Each row's force is weighted by its activation."""
    kT = T.J.shape[0]
    sq = jnp.sqrt(R)
    fN = sN * jnp.maximum(-y[:kN] / R[:kN], 0.0)
    if not kT:
        return fN
    yT, RT, sqT = y[kN:], R[kN:], sq[kN:]
    fT = jnp.clip(-yT / RT, -T.loss, T.loss)                        # friction loss rows
    has_n = np.asarray(T.normal) >= 0
    if has_n.any():
        n_of = np.maximum(np.asarray(T.normal), 0)
        cone = np.asarray(T.cone)
        nc = int(cone.max()) + 1
        live = T.mu > 0
        tn = -y[:kN][n_of] / sq[:kN][n_of]                            # per frictional row, its cone's
        tt = jnp.where(live, -yT / sqT, 0.0)
        tau2 = jax.ops.segment_sum(tt * tt, jnp.asarray(cone), nc)[cone]
        m = jax.ops.segment_max(jnp.where(live, T.mu * sqT / sq[:kN][n_of], 0.0), jnp.asarray(cone), nc)[cone]
        pos = tau2 > 0
        tau = jnp.sqrt(jnp.where(pos, tau2, 1.0))
        inside = jnp.where(pos, tau <= m * tn, tn >= 0)
        below = jnp.where(pos, m * tau <= -tn, tn < 0)
        xb = (tn + m * tau) / (1.0 + m * m)
        xn = jnp.where(inside, tn, jnp.where(below, 0.0, xb))
        xt = jnp.where(inside, tt, jnp.where(below, 0.0, m * xb * tt / tau))
        fT = jnp.where(jnp.asarray(has_n), T.on * xt / sqT, fT)
        first = np.full(kN, -1)
        for i in np.nonzero(has_n)[0][::-1]:
            first[n_of[i]] = i
        with_cone = first >= 0
        fN = jnp.where(jnp.asarray(with_cone), sN * (xn / sq[:kN][n_of])[np.maximum(first, 0)], fN)
    else:
        fT = T.on * fT
    return jnp.concatenate([fN, fT])


def _blocks(normal, cone, kN):
    """The force map's block structure (static): a row's force depends on the residuals of its own
    block only (an elliptic cone: its normal row and frictional rows; every other row alone).  Returns
    (color (k,), member (k, c)): rows of one block have distinct colors, and member[i, j] is the row of
    i's block with color j (-1: none), so the map's Jacobian takes c tangents (:func:`_map_jacobian`),
    not k."""
    normal, cone = np.asarray(normal), np.asarray(cone)
    kT = len(normal)
    k = kN + kT
    color = np.zeros(k, np.int64)
    block = np.arange(k)                               # a representative row per block
    for c in np.unique(cone[normal >= 0]) if kT else ():
        rows = np.nonzero((cone == c) & (normal >= 0))[0]
        color[kN + rows] = 1 + np.arange(len(rows))
        block[kN + rows] = normal[rows[0]]
    nc = int(color.max()) + 1
    rep = np.full((k, nc), -1, np.int64)               # per representative row, its block's rows by color
    rep[block, color] = np.arange(k)
    return color, rep[block]


def _map_jacobian(F, y, blocks):
    """-∂F/∂y of the block-diagonal force map at y, as (k, c) entries t with -∂F_i/∂y_member[i, j] =
    t[i, j] (:func:`_blocks`): one forward-mode tangent per color."""
    color, member = blocks
    E = jnp.asarray(color[None, :] == np.arange(member.shape[1])[:, None], y.dtype)
    t = jax.vmap(lambda e: jax.jvp(F, (y,), (e,))[1])(E).T
    return -jnp.where(jnp.asarray(member >= 0), t, 0.0)


def _apply_map_jacobian(t, blocks, X):
    """D X for the Jacobian entries t of :func:`_map_jacobian` and X (k, m): each row combines the rows of
    its block."""
    member = blocks[1]
    return jnp.einsum("kc,kcm->km", t, X[np.maximum(member, 0)])


def _line_search(F, f, y, d, w):
    """The step α along the Newton direction d (forces; w = A d, the rows' accelerations) that minimizes
    MuJoCo's cost, as MuJoCo's solver searches along its primal Newton direction: the cost along
    the line, ½ μᵀ A μ + s(a0 + A μ - aref) at μ = f + α d (s the constraints' convex cost, -∇s = F),
    has the slope g(α) = wᵀ (f + α d - F(y + α w)), nondecreasing and piecewise linear.  The full
    step is taken where g(1) ≤ 0; otherwise the root of g in (0, 1) by :data:`LINE_SEARCH` Newton
    steps on g from α = 1, each kept inside the bracket (bisection where it leaves it).  Without the
    search the iterations can jump between the cost's quadratic pieces for tens of steps (a quadruped
    landing on condim-6 feet: its forces 15% off after 16 iterations)."""
    def slope(a):
        Fa, dF = jax.jvp(F, (y + a * w,), (w,))
        return w @ (f + a * d - Fa), w @ d - w @ dF

    def refine(_, carry):
        a, lo, hi, g, gp = carry
        lo, hi = jnp.where(g < 0, a, lo), jnp.where(g < 0, hi, a)
        nxt = a - g / jnp.where(gp > 0, gp, 1.0)
        nxt = jnp.where((gp > 0) & (nxt > lo) & (nxt < hi), nxt, 0.5 * (lo + hi))
        nxt = jnp.where(g == 0, a, nxt)
        return (nxt, lo, hi) + slope(nxt)
    one = jnp.ones((), y.dtype)
    g1, gp1 = slope(one)
    a = jax.lax.fori_loop(0, LINE_SEARCH, refine, (one, 0 * one, one, g1, gp1))[0]
    return jnp.where(g1 <= 0, one, a)


def _newton(A, a0, aref, R, sN, T, f, JY=None):
    """Newton iterations on MuJoCo's constrained problem, from the forces ``f`` (at least :data:`NEWTON`,
    then until |f - F| ≤ :data:`NEWTON_RTOL` max(|f|, |F|), at most :data:`NEWTON_MAX`; under ``vmap``
    a member that has converged keeps its forces while the others iterate): with
    row accelerations J a = a0 + A μ, the fixed point μ = F(a0 + A μ - aref) of the force map
    (:func:`_force_map`), each step μ ← μ - (I + D A)⁻¹ (μ - F), D = -∂F/∂y.  This is MuJoCo's
    primal Newton step written in the rows' space ((H + Jᵀ D J)⁻¹ Jᵀ = H⁻¹ Jᵀ (I + D A)⁻¹): at its
    fixed point the forces are those of MuJoCo's solver, its cone's normal force included (a
    sliding contact's normal row is not at rest in MuJoCo's convex model: its residual balances the
    cone's friction), which a complementarity solve does not give.  Each step goes as far along
    its direction as minimizes MuJoCo's cost (:func:`_line_search`), so the iterations descend as
    MuJoCo's do.  ``JY`` = (J, Y): each step factorizes in joint space (:func:`_woodbury`)."""
    kN = sN.shape[0]
    eye = jnp.eye(A.shape[0], dtype=A.dtype)
    F = lambda y: _force_map(y, R, sN, T, kN)  # noqa: E731
    blocks = _blocks(T.normal, T.cone, kN)

    rtol = max(NEWTON_RTOL, 64 * float(jnp.finfo(A.dtype).eps))

    def residual(f):
        g = F(a0 + A @ f - aref)
        return jnp.max(jnp.abs(f - g)) - rtol * jnp.maximum(jnp.max(jnp.abs(f)), jnp.max(jnp.abs(g)))

    def step(carry):
        i, f, _ = carry
        y = a0 + A @ f - aref
        D = _map_jacobian(F, y, blocks)
        if JY is None:
            d = -_lu_solve(eye + _apply_map_jacobian(D, blocks, A), f - F(y))
            w = A @ d
        else:
            d = -_woodbury_apply(_woodbury(_apply_map_jacobian(D, blocks, JY[0]), JY[1]), f - F(y))
            w = JY[0] @ (JY[1] @ d)
        f = f + _line_search(F, f, y, d, w) * d
        return i + 1, f, residual(f)

    def more(carry):
        i, _, r = carry
        return (i < NEWTON_MAX) & ((i < NEWTON) | (r > 0))
    return jax.lax.while_loop(more, step, (jnp.asarray(0), f, residual(f)))[1]


SOLREF_DEFAULT, SOLIMP_DEFAULT = SOLREF, SOLIMP


def _completed(x, defaults, check, name, what):
    """x as floats, its missing trailing numbers taken from MuJoCo's ``defaults``, then ``check``ed."""
    a = np.atleast_1d(np.asarray(x, np.float64)).reshape(-1)
    if a.size == 0 or a.size > len(defaults):
        raise ValueError(f"{what}: {name} takes 1 to {len(defaults)} numbers, got {x!r}")
    return check(np.concatenate([a, defaults[a.size:]]), what)


def check_solref(solref, what):
    """solref as a (2,) float array (fewer numbers take MuJoCo's defaults for the rest), checked by
    :func:`jaxmbd.checks.solref` (a ValueError naming ``what``)."""
    from ..checks import solref as check
    return _completed(solref, SOLREF_DEFAULT, check, "solref", what)


def check_solimp(solimp, what):
    """solimp as a (5,) float array (fewer numbers take MuJoCo's defaults for the rest), checked by
    :func:`jaxmbd.checks.solimp` (a ValueError naming ``what``)."""
    from ..checks import solimp as check
    return _completed(solimp, SOLIMP_DEFAULT, check, "solimp", what)


def has_rows(model):
    """Whether any force element of the model has soft rows (static)."""
    from .base import soft_elements
    return bool(soft_elements(model))


def rows(model, q, v, kin_axes=None):
    """(NormalRows, FrictionRows, per element (element, (first normal row, count), (first frictional
    row, count), its extra)) of every soft element of the model at (q, v), concatenated (frictional
    rows' normal and cone indices offset).  ``kin_axes``: ``kinematics_and_axes(model, q)`` where the
    caller has them."""
    from ..kinematics import kinematics_and_axes
    from .base import soft_elements
    kin, axes = kinematics_and_axes(model, q) if kin_axes is None else kin_axes
    Ns, Ts, extras, n0, t0, c0 = [], [], [], 0, 0, 0
    for e in soft_elements(model):
        N, T, extra = e.soft_rows(model, q, v, kin, axes)
        normal = np.where(T.normal >= 0, T.normal + n0, -1)
        cone = T.cone + c0
        Ns.append(N)
        Ts.append(T._replace(normal=normal, cone=cone))
        extras.append((e, (n0, N.J.shape[0]), (t0, T.J.shape[0]), extra))
        n0 += N.J.shape[0]
        t0 += T.J.shape[0]
        c0 += int(T.cone.max()) + 1 if len(T.cone) else 0
    cat = lambda xs: jnp.concatenate(xs) if isinstance(xs[0], jax.Array) else np.concatenate(xs)  # noqa: E731
    ones = lambda n, f: jnp.ones(n.r.shape, n.r.dtype) if getattr(n, f) is None else getattr(n, f)  # noqa: E731
    N = NormalRows(*(cat([ones(n, f) for n in Ns]) for f in NormalRows._fields[:-1]), join_geometry(Ns))
    zeros = lambda t, f: jnp.zeros(t.R.shape, t.R.dtype) if getattr(t, f) is None else getattr(t, f)  # noqa: E731
    kr = None if all(t.kr is None for t in Ts) else cat([zeros(t, "kr") for t in Ts])
    T = FrictionRows(*(cat([getattr(t, f) for t in Ts]) for f in FrictionRows._fields[:-2]), kr, join_geometry(Ts))
    return N, T, extras


def dynamics(model, q, v, a_free, respond, kin_axes=None):
    """The model's accelerations with its soft rows (a :class:`Solution`; :func:`solve`)."""
    from ..kinematics import kinematics_and_axes
    kin_axes = kinematics_and_axes(model, q) if kin_axes is None else kin_axes
    N, T, extras = rows(model, q, v, kin_axes)
    sol = solve(N, T, a_free, respond, kin_axes[1])
    return sol, (N, T, extras)
