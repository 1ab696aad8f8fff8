"""Branch-induced sparse LᵀDL factorization of the joint-space inertia matrix
(Featherstone, seed 000; digests/factorization.md §2), as level-parallel scans.

Storage.  Row k of H (and of the factor) holds only k and its ancestors in
the expanded graph: ``P[k, t] = A(k, anc_t(k))`` with ``anc_0(k) = k``,
``anc_{t+1}(k) = dof_parent[anc_t(k)]``, padded with zeros to the depth ``D``
of the deepest row.  After factorization ``P[k, 0] = d_k`` (the diagonal of
D) and ``P[k, t] = l_{k, anc_t(k)}`` (unit lower L, diagonal implicit).  No
entry off the pattern exists in this storage, so there is no fill-in by
construction (the seed's induction proof: row k only updates pairs of its own
ancestors, which are on the pattern).

Schedule.  The seed's loop runs k = n, ..., 1.  Row k must be complete (every
descendant's update applied) before it is scaled, and it then updates only
its ancestors.  Processing rows by depth, deepest level first, satisfies
this: all descendants of k are deeper, hence earlier.  Two rows of one depth
are never ancestor and descendant of each other, so a level's rows read
nothing the level writes except through additive updates to shared ancestor
rows, which commute: they are combined with a scatter-add.  One scan step per
level; the number of sequential steps is the depth of the expanded tree.

Alignment (the key trick of MuJoCo's mj_factorI, seed 004): the tail of row
k from position t, ``[A(k, anc_t), A(k, anc_{t+1}), ...]``, lines up element
for element with row ``i = anc_t(k)``, ``[A(i, i), A(i, anc_1(i)), ...]``, so
the update A(i, j) -= l_ki d_k l_kj is a shifted row axpy.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class Tables(NamedTuple):
    D: int                 # longest row (depth of the expanded tree)
    anc: np.ndarray        # (nv+1, D) ancestors, padding -> nv (a dummy row)
    levels: np.ndarray     # (L, W) rows of depth l+1, padding -> nv
    shift: np.ndarray      # (D-1, D) tail index: shift[t-1, s] = t + s, or D (a zero column)
    pos: np.ndarray        # (nM,) position of each compact (legacy qM) entry in its padded row


@functools.lru_cache(maxsize=None)
def tables(topo) -> Tables:
    """Static tables, derived from the topology's compact storage and level schedule."""
    nv = topo.nv
    D = int(topo.dof_depth.max())
    pos = np.arange(topo.nM) - topo.dof_Madr[topo.M_rows]
    anc = np.full((nv + 1, D), nv, np.int64)
    anc[topo.M_rows, pos] = topo.M_cols  # row k of the compact storage lists k's ancestors in order
    counts = np.bincount(topo.dof_depth - 1, minlength=topo.n_levels)
    valid = np.arange(topo.level_width)[None, :] < counts[:, None]
    levels = np.where(valid, topo.level_node, nv)  # padding -> the dummy row, not node 0
    t = np.arange(1, D)[:, None]
    s = np.arange(D)[None, :]
    shift = np.where(t + s < D, t + s, D)
    return Tables(D, anc, levels, shift, pos)


class Factor(eqx.Module):
    """A factor in padded per-row ancestor storage, ``P`` of shape (nv, D).

    kind "ltdl": ``P[k, 0] = d_k`` and ``P[k, t] = l_{k, anc_t(k)}`` (t >= 1) of
    the unit lower L; kind "ltl": row k of the lower L itself, diagonal first."""
    P: jax.Array
    kind: str = eqx.field(static=True, default="ltdl")


def to_rows(model, H):
    """Dense (nv, nv) or compact (n + D1,) H -> padded per-row storage (nv, D)."""
    topo, tb = model.topo, tables(model.topo)
    H = jnp.asarray(H)
    if H.shape == (topo.nv, topo.nv):
        H = H[topo.M_rows, topo.M_cols]
    elif H.shape != (topo.nM,):
        raise ValueError(f"H has shape {H.shape}; expected ({topo.nv}, {topo.nv}) or compact ({topo.nM},)")
    return jnp.zeros((topo.nv, tb.D), H.dtype).at[topo.M_rows, tb.pos].set(H)


def to_dense_lower(model, P, unit=True):
    """Padded rows -> dense lower-triangular matrix (unit diagonal if ``unit``)."""
    tb = tables(model.topo)
    nv = model.nv
    rows = np.repeat(np.arange(nv), tb.D)
    cols = tb.anc[:nv].ravel()
    M = jnp.zeros((nv + 1, nv + 1), P.dtype).at[rows, cols].set(P.ravel())[:nv, :nv]
    return M - jnp.diag(jnp.diag(M)) + jnp.eye(nv, dtype=P.dtype) if unit else M


@functools.partial(jax.jit, static_argnames=("kind",))
def factor(model, H, kind="ltdl"):
    """H = Lᵀ D L (kind="ltdl") or H = Lᵀ L (kind="ltl", L = sqrt(D) L_unit).

    H: dense (nv, nv) or compact (n + D1,) (see ``mass_matrix_compact``).
    Returns a :class:`Factor`."""
    tb = tables(model.topo)
    nv, D = model.nv, tb.D
    P = to_rows(model, H)
    # dummy row nv (diagonal 1) and a zero column D: padding reads zeros and
    # padded writes land in the dummy row, which the result drops
    A = jnp.zeros((nv + 1, D + 1), P.dtype).at[:nv, :D].set(P).at[nv, 0].set(1.0)
    anc, shift = jnp.asarray(tb.anc), jnp.asarray(tb.shift)

    def step(A, rows):
        R = A[rows]                                   # (W, D+1) complete rows
        a = R[:, 1:D] / R[:, :1]                      # l_{k, anc_t(k)}, t >= 1
        U = a[:, :, None] * R[:, shift]               # (W, D-1, D) shifted tails
        U = jnp.concatenate([U, jnp.zeros_like(U[..., :1])], axis=-1)
        A = A.at[anc[rows, 1:]].add(-U)               # into the ancestor rows
        return A.at[rows, 1:D].set(a), None

    if D > 1:
        A, _ = jax.lax.scan(step, A, jnp.asarray(tb.levels[::-1]))  # deepest level first
    P = A[:nv, :D]
    if kind == "ltl":
        s = jnp.sqrt(P[:, :1])
        P = jnp.concatenate([s, P[:, 1:] * s], axis=1)
    elif kind != "ltdl":
        raise ValueError(f"unknown factorization kind {kind!r}; expected 'ltdl' or 'ltl'")
    return Factor(P, kind)


def _rhs(model, b):
    b = jnp.asarray(b)
    if b.shape[0] != model.nv:
        raise ValueError(f"right-hand side has {b.shape[0]} rows, expected {model.nv}")
    X = b.reshape(model.nv, -1)
    return jnp.concatenate([X, jnp.zeros_like(X[:1])], axis=0), b.shape


def _padded(P):
    return jnp.concatenate([P, jnp.zeros_like(P[:1])], axis=0)


def _diag(F: Factor):
    """Diagonal of L (ones for a unit LᵀDL factor), with the dummy row's 1."""
    d = F.P[:, 0] if F.kind == "ltl" else jnp.ones_like(F.P[:, 0])
    return jnp.concatenate([d, jnp.ones(1, d.dtype)])


def _solve_Lt(model, F, X):
    """X <- L^-T X, leaves to root: finish each row, then push it into its ancestors."""
    tb = tables(model.topo)
    anc, Pp, dg = jnp.asarray(tb.anc), _padded(F.P), _diag(F)

    def step(X, rows):
        X = X.at[rows].set(X[rows] / dg[rows][:, None])
        return X.at[anc[rows, 1:]].add(-Pp[rows, 1:, None] * X[rows][:, None, :]), None
    return jax.lax.scan(step, X, jnp.asarray(tb.levels[::-1]))[0]


def _solve_L(model, F, X):
    """X <- L^-1 X, root to leaves: pull from the (already final) ancestors."""
    tb = tables(model.topo)
    anc, Pp, dg = jnp.asarray(tb.anc), _padded(F.P), _diag(F)

    def step(X, rows):
        acc = X[rows] - jnp.sum(Pp[rows, 1:, None] * X[anc[rows, 1:]], axis=1)
        return X.at[rows].set(acc / dg[rows][:, None]), None
    return jax.lax.scan(step, X, jnp.asarray(tb.levels))[0]


def _out(model, X, shape):
    return X[: model.nv].reshape(shape)


@jax.jit
def solve(model, F: Factor, b):
    """x = H^-1 b from the factor: L^-1 D^-1 L^-T b (LᵀDL) or L^-1 L^-T b (LᵀL);
    b: (nv,) or (nv, m)."""
    X, shape = _rhs(model, b)
    X = _solve_Lt(model, F, X)
    if F.kind == "ltdl":
        X = X / jnp.concatenate([F.P[:, 0], jnp.ones(1, F.P.dtype)])[:, None]
    return _out(model, _solve_L(model, F, X), shape)


@jax.jit
def half_solve(model, F: Factor, b):
    """y = D^-1/2 L^-T b (LᵀDL) or L^-T b (LᵀL), so that
    J H^-1 Jᵀ = yᵀ y with b = Jᵀ."""
    X, shape = _rhs(model, b)
    X = _solve_Lt(model, F, X)
    if F.kind == "ltdl":
        X = X / jnp.sqrt(jnp.concatenate([F.P[:, 0], jnp.ones(1, F.P.dtype)]))[:, None]
    return _out(model, X, shape)


@jax.jit
def solve_Lt(model, F: Factor, b):
    """x = L^-T b."""
    X, shape = _rhs(model, b)
    return _out(model, _solve_Lt(model, F, X), shape)


@jax.jit
def solve_L(model, F: Factor, b):
    """x = L^-1 b."""
    X, shape = _rhs(model, b)
    return _out(model, _solve_L(model, F, X), shape)


@jax.jit
def mul_L(model, F: Factor, x):
    """y = L x: each row reads its ancestors (no sequential steps)."""
    X, shape = _rhs(model, x)
    tb = tables(model.topo)
    Pp, anc = _padded(F.P), jnp.asarray(tb.anc)
    Y = _diag(F)[:, None] * X + jnp.sum(Pp[:, 1:, None] * X[anc[:, 1:]], axis=1)
    return _out(model, Y, shape)


@jax.jit
def mul_Lt(model, F: Factor, x):
    """y = Lᵀ x: each row adds into its ancestors (a scatter-add)."""
    X, shape = _rhs(model, x)
    tb = tables(model.topo)
    Pp, anc = _padded(F.P), jnp.asarray(tb.anc)
    Y = (_diag(F)[:, None] * X).at[anc[:, 1:]].add(Pp[:, 1:, None] * X[:, None, :])
    return _out(model, Y, shape)


@jax.jit
def mul_H(model, H, x):
    """y = H x from H in compact (n + D1,) or padded-row storage; the symmetric
    product over the pattern: y_i += H_ij x_j and y_j += H_ij x_i (i below j)."""
    P = to_rows(model, H) if H.ndim == 1 else H
    X, shape = _rhs(model, x)
    tb = tables(model.topo)
    Pp, anc = _padded(P), jnp.asarray(tb.anc)
    Y = Pp[:, :1] * X + jnp.sum(Pp[:, 1:, None] * X[anc[:, 1:]], axis=1)
    Y = Y.at[anc[:, 1:]].add(Pp[:, 1:, None] * X[:, None, :])
    return _out(model, Y, shape)


# --- exchange with MuJoCo's storage ------------------------------------------
#
# legacy qM / qLD order: row k at dof_Madr[k] is [diag, λ(k), λ(λ(k)), ...]
# (the compact storage of ``mass_matrix_compact``); CSR (MuJoCo >= 3.2,
# M_rowadr/M_rownnz/M_colind): columns increasing, diagonal last.

def _csr_index(topo):
    """For each CSR entry (rows in order, columns increasing): (row k, position t)."""
    d = topo.dof_depth
    rows = np.repeat(np.arange(topo.nv), d)
    t = np.concatenate([np.arange(dk)[::-1] for dk in d])
    return rows, t


def to_mujoco_csr(model, P):
    """Padded rows (factor or H) -> MuJoCo's CSR value array (e.g. ``qLD``, ``M``)."""
    rows, t = _csr_index(model.topo)
    return jnp.asarray(P)[rows, t]


def from_mujoco_csr(model, vals):
    """MuJoCo CSR value array -> padded rows (a :class:`Factor`'s ``P`` for ``qLD``)."""
    rows, t = _csr_index(model.topo)
    vals = jnp.asarray(vals)
    return jnp.zeros((model.nv, tables(model.topo).D), vals.dtype).at[rows, t].set(vals)


def to_legacy(model, P):
    """Padded rows -> legacy qM/qLD order (= ``mass_matrix_compact`` order)."""
    topo = model.topo
    return jnp.asarray(P)[topo.M_rows, tables(topo).pos]


def from_legacy(model, vals):
    """Legacy qM/qLD order -> padded rows."""
    return to_rows(model, vals)
