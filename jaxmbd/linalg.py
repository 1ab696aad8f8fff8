"""Quasi-square rectangular systems by the LU-based projection method of
J. Cardenal, I. S. Duff and J. M. Jiménez, "A projection method for the
solution of rectangular systems", Rutherford Appleton Laboratory report, 1996.

For a tall matrix T (m x n, m >= n, full column rank) one row-pivoted LU,
``P T = [L1; L2] U``, gives everything:

* ``J = L2 L1⁻¹`` ((m-n) x n; U cancels) and the small SPD matrix
  ``S = I + J Jᵀ`` of order m - n;
* a basis of the null space of Tᵀ, ``N = Pᵀ [-Jᵀ; I]``, with ``Nᵀ N = S``;
* the least-squares solution of ``min |b - T x|`` (eqs. 3.7-3.8):
  ``S r2 = b2 - J b1``, ``U x = L1⁻¹ (b1 + Jᵀ r2)``;
* the minimum-norm solution of ``Tᵀ x = b`` (eqs. 3.9 and 3.10, the latter
  with the report's typo corrected: ``x1 = A1⁻ᵀ b - Jᵀ x2``).

When m - n is small this costs about m n² - n³/3 flops, against m n² + n³/3
for the normal equations and 2 m n² - 2 n³/3 for Householder QR, and its
error grows like cond(T), as QR's does, not like cond(T)² (normal equations).

The public functions use the usual orientation: :func:`lstsq_lu` takes a
tall A (m >= n) and :func:`minnorm_lu` a wide A (k rows, m >= k columns)
for ``A x = b``; internally the wide case works on T = Aᵀ.  Everything is traceable (static shapes), batches with ``vmap`` and
differentiates with ``grad`` (through LAPACK's LU, triangular solves and
Cholesky; the pivot order is piecewise constant).  A (numerically)
rank-deficient matrix sets ``status = RANK_DEFICIENT``; the solution is then
kept finite but is meaningless.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

OK = 0
RANK_DEFICIENT = 1


class LUProjection(NamedTuple):
    """The factorization of a tall T (m x n): ``T[perm] = [L1; L2] U``."""
    perm: jax.Array    # (m,) row order: T[perm] = L U
    L1: jax.Array      # (n, n) unit lower triangular
    U: jax.Array       # (n, n) upper triangular (tiny pivots replaced by 1 when rank-deficient)
    J: jax.Array       # (m-n, n) = L2 L1⁻¹
    S_chol: jax.Array  # (m-n, m-n) lower Cholesky factor of S = I + J Jᵀ
    status: jax.Array  # () OK or RANK_DEFICIENT


class Solution(NamedTuple):
    """x: the solution.  aux: for :func:`lstsq_lu` the residual ``b - A x``;
    for :func:`minnorm_lu` the multiplier y with ``x = -Aᵀ y`` (the second
    block of the augmented system (3.3)).  status: OK or RANK_DEFICIENT."""
    x: jax.Array
    aux: jax.Array
    status: jax.Array


def _check_matrix(A, what):
    A = jnp.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"{what}: expected a 2-d matrix, got shape {A.shape} (use jax.vmap for batches)")
    if not jnp.issubdtype(A.dtype, jnp.floating):
        A = A.astype(jnp.result_type(float))
    return A


def lu_projection(T, rcond=None) -> LUProjection:
    """Factor a tall T (m x n, m >= n) for the projection method.

    rcond: a pivot |U_ii| <= rcond * max_i |U_ii| marks T rank-deficient
    (default max(m, n) * machine epsilon)."""
    T = _check_matrix(T, "lu_projection")
    m, n = T.shape
    if m < n:
        raise ValueError(f"lu_projection: T must be tall (m >= n), got {m} x {n}")
    if n == 0:
        raise ValueError("lu_projection: T has no columns")
    eps = jnp.finfo(T.dtype).eps
    rcond = max(m, n) * eps if rcond is None else rcond
    lu, _, perm = jax.lax.linalg.lu(T)
    L = jnp.tril(lu, -1) + jnp.eye(m, n, dtype=T.dtype)
    L1, L2 = L[:n], L[n:]
    U = jnp.triu(lu[:n])
    d = jnp.abs(jnp.diagonal(U))
    tiny = d <= rcond * jnp.max(d)
    status = jnp.where(jnp.any(tiny) | ~jnp.all(jnp.isfinite(lu)), RANK_DEFICIENT, OK)
    U = U + jnp.diag(jnp.where(tiny, 1.0, 0.0).astype(T.dtype))  # finite, flagged
    k = m - n
    if k:
        # Jᵀ = L1⁻ᵀ L2ᵀ: one triangular solve with m-n right-hand sides (the report's main kernel)
        J = jsl.solve_triangular(L1, L2.T, trans=1, lower=True, unit_diagonal=True).T
        S_chol = jnp.linalg.cholesky(jnp.eye(k, dtype=T.dtype) + J @ J.T)
    else:
        J = jnp.zeros((0, n), T.dtype)
        S_chol = jnp.zeros((0, 0), T.dtype)
    return LUProjection(perm, L1, U, J, S_chol, status)


def _S_solve(F, y):
    if F.J.shape[0] == 0:
        return y
    return jsl.cho_solve((F.S_chol, True), y)


def _A1_solve(F, y):      # A1 = L1 U
    z = jsl.solve_triangular(F.L1, y, lower=True, unit_diagonal=True)
    return jsl.solve_triangular(F.U, z, lower=False)


def _A1T_solve(F, y):     # A1ᵀ = Uᵀ L1ᵀ
    z = jsl.solve_triangular(F.U, y, trans=1, lower=False)
    return jsl.solve_triangular(F.L1, z, trans=1, lower=True, unit_diagonal=True)


def _unpermute(F, top, bottom):
    full = jnp.concatenate([top, bottom])
    return jnp.zeros_like(full).at[F.perm].set(full)


def augmented_solve(F: LUProjection, c1, c2):
    """Solve ``[[I, T], [Tᵀ, 0]] [y1; y2] = [c1; c2]`` with the factors of T
    (the report's block factorization (3.6) applied to a general right-hand
    side; the system is symmetric, so the same
    factors serve adjoint solves).  Returns (y1 (m,), y2 (n,))."""
    n = F.U.shape[0]
    pc1 = jnp.asarray(c1)[F.perm]
    c11, c12 = pc1[:n], pc1[n:]
    z1 = _A1T_solve(F, jnp.asarray(c2))
    z2 = c11 - z1
    y12 = _S_solve(F, c12 - F.J @ z2)
    y2 = _A1_solve(F, z2 + F.J.T @ y12)
    y11 = z1 - F.J.T @ y12
    return _unpermute(F, y11, y12), y2


def null_space(F: LUProjection):
    """N = Pᵀ [-Jᵀ; I] (m x (m-n)): a basis of null(Tᵀ), not orthonormal (Nᵀ N = S)."""
    k = F.J.shape[0]
    top = -F.J.T
    bottom = jnp.eye(k, dtype=top.dtype)
    full = jnp.concatenate([top, bottom])
    return jnp.zeros_like(full).at[F.perm].set(full)


def lstsq_lu(A, b, rcond=None) -> Solution:
    """Least squares ``min |b - A x|`` for a tall A (m x n, m >= n, full
    column rank); aux is the residual ``b - A x``."""
    A = _check_matrix(A, "lstsq_lu")
    b = jnp.asarray(b, A.dtype)
    if b.shape != (A.shape[0],):
        raise ValueError(f"lstsq_lu: b has shape {b.shape}, expected ({A.shape[0]},)")
    F = lu_projection(A, rcond)
    n = A.shape[1]
    pb = b[F.perm]
    b1, b2 = pb[:n], pb[n:]
    r2 = _S_solve(F, b2 - F.J @ b1)                   # (3.7)
    x = _A1_solve(F, b1 + F.J.T @ r2)                 # (3.8)
    r = _unpermute(F, -F.J.T @ r2, r2)                # r1 = -Jᵀ r2
    return Solution(x, r, F.status)


def minnorm_lu(A, b, rcond=None) -> Solution:
    """Minimum-norm solution of ``A x = b`` for a wide A (k x m, k <= m,
    full row rank); aux is the multiplier y of the augmented system
    (``x = -Aᵀ y``)."""
    A = _check_matrix(A, "minnorm_lu")
    b = jnp.asarray(b, A.dtype)
    if b.shape != (A.shape[0],):
        raise ValueError(f"minnorm_lu: b has shape {b.shape}, expected ({A.shape[0]},)")
    if A.shape[0] > A.shape[1]:
        raise ValueError(f"minnorm_lu: A must be wide (rows <= columns), got {A.shape[0]} x {A.shape[1]}; "
                         "for a tall A use lstsq_lu")
    F = lu_projection(A.T, rcond)
    w = _A1T_solve(F, b)                              # A1⁻ᵀ b
    x2 = _S_solve(F, F.J @ w)                         # (3.9)
    x1 = w - F.J.T @ x2                               # (3.10), corrected
    y = _A1_solve(F, F.J.T @ x2 - w)
    return Solution(_unpermute(F, x1, x2), y, F.status)


def flops(m, n):
    """Leading-order dense flop counts of an m x n (m >= n) least-squares
    solve (the report's Table 4.5, plus the standard Householder QR count)."""
    m, n = float(m), float(n)
    return {
        "normal_equations": m * n**2 + n**3 / 3,
        "peters_wilkinson": 2 * m * n**2 - 2 * n**3 / 3,
        "projection": m * n**2 - n**3 / 3 + (m - n) * (m * n + (m - n) ** 2 / 3),
        "householder_qr": 2 * m * n**2 - 2 * n**3 / 3,
    }


__all__ = ["lu_projection", "LUProjection", "Solution", "lstsq_lu", "minnorm_lu", "augmented_solve",
           "null_space", "flops", "OK", "RANK_DEFICIENT"]
