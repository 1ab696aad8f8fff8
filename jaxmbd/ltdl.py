"""Branch-induced sparse LᵀDL / LᵀL factorization of the joint-space inertia
matrix (R. Featherstone, "Efficient factorization of the joint-space inertia
matrix for branched kinematic trees", Int. J. Robotics Research 24(6), 2005:
§2 and the Appendix) as scans over the depth of the tree, with batch-minor
kernels.

Storage.  Factors and H use the compact per-row ancestor storage of
:func:`jaxmbd.mass_matrix_compact` (MuJoCo's legacy qM/qLD order): row k
starts at ``dof_Madr[k]`` and lists ``[A(k, k), A(k, λ(k)), A(k, λ(λ(k))),
...]``; entry ``(k, t)`` is ``A(k, anc_t(k))`` with ``anc_0(k) = k``,
``anc_{t+1}(k) = λ(anc_t(k))``.  A factor holds ``d_k`` on the diagonal and
``l_{k, anc_t(k)}`` (t >= 1) of the unit lower L (kind "ltdl"), or row k of
L = sqrt(D) L_unit itself (kind "ltl").  No entry off the ancestor pattern
exists in this storage, so there is no fill-in by construction (Featherstone's
§2 induction: row k only updates pairs of its own ancestors, which are
related, hence on the pattern).

Algorithm.  Featherstone's LTDL loop (Appendix; k = n..1: scale row k by d_k, then for every
pair of ancestors i = anc_t(k), j = anc_u(k), t <= u, update A(i, j) -=
l_ki d_k l_kj) is split into independent tasks:

- *scale* (k): l_{k, anc_t} = A(k, anc_t) / A(k, k), for all t >= 1;
- *update* (k, t, u): A(anc_t(k), anc_u(k)) -= l_{k,anc_t} d_k l_{k,anc_u}.

Schedule.  Step s = 0, 1, ..., D-1 (D the depth of the expanded tree) scales
every row of depth D - s, then applies a set of update tasks.  A task may
run in any step of its *window*: it needs row k scaled (step D - d_k or
later, after that step's scaling) and must land before its target row
anc_t(k), of depth d_k - t, is scaled (step D - d_k + t, so at the latest
step D - d_k + t - 1).  Why tasks in one step never conflict:

1. the rows scaled in step s all have depth D - s; every update into them
   comes from a deeper row k and has a window ending by step s - 1, so each
   such row is complete when scaled;
2. an update task reads only entries of its source row k, which is final
   from its own scaling step on (nothing writes into row k after it is
   scaled, by 1.), so no task reads what another task of the step writes;
3. tasks of one step that write the same entry are additive and commute:
   they are combined with one scatter-add.

Within its window each task is placed by an earliest-deadline-first
schedule with the smallest per-step capacity that meets every deadline, so
every step does about the same amount of padded work (plain levels would
pad every step to the busiest level: 3x the real work on the humanoid, 5x
on a binary tree).  The number of sequential steps is the depth; the traced
program has a fixed size whatever the number of bodies.  The solves use the
same construction with one task per off-diagonal entry.

Batching.  Every kernel works on arrays with the entry (or DoF) index first
and a batch axis last, so each gather and scatter moves contiguous batch
vectors.  Under ``jax.vmap`` a ``custom_vmap`` rule moves the batch axis to
the end; XLA:CPU's gathers cost ~10 ns per element and would otherwise be
paid per system.

Derivatives (``custom_jvp``).  The factor, the full solve and the fused
factor-solve (kinds "ltdl" and "ltl") have tangent rules by dense products:
dx = H⁻¹ (db - dH x) with H⁻¹ from one solve with nv columns, and the
factor's tangent from M = L⁻ᵀ dH L⁻¹ (see :func:`_factor_tangent`).  The
2nv directions of an integrator's Jacobian then share one H⁻¹ instead of each
running the sequential sweeps.  The other kernels (triangular and half solves,
products, the LU) are differentiated through their own sweeps in the
ordinary, batch-major layout.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.custom_derivatives import SymbolicZero

_I = np.int32


# --- static schedule -----------------------------------------------------------

def edf_schedule(lo, hi, n_steps):
    """Assign tasks with windows [lo, hi] (inclusive step indices) to steps,
    minimizing the largest number of tasks in a step.

    Earliest-deadline-first is optimal for unit tasks with release times and
    deadlines at a fixed capacity; a bisection finds the smallest feasible
    capacity.  Returns (step of each task, capacity)."""
    lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
    n = len(lo)
    if n == 0:
        return np.zeros(0, np.int64), 0
    if np.any(lo > hi) or lo.min() < 0 or hi.max() >= n_steps:
        raise ValueError("empty or out-of-range task window")
    order = np.lexsort((lo, hi))           # by deadline, then release
    start = np.searchsorted(hi[order], np.arange(n_steps), "left")
    end = np.searchsorted(hi[order], np.arange(n_steps), "right")
    lo_sorted = lo[order]
    # released[h, s]: tasks of deadline h released by step s
    released = np.stack([np.searchsorted(lo_sorted[start[h]:end[h]], np.arange(n_steps), "right")
                         for h in range(n_steps)])

    def run(cap, step=None):
        done = np.zeros(n_steps, np.int64)
        for s in range(n_steps):
            left = cap
            for h in range(s, n_steps):
                if left == 0:
                    break
                take = min(released[h, s] - done[h], left)
                if take > 0:
                    if step is not None:
                        step[order[start[h] + done[h]: start[h] + done[h] + take]] = s
                    done[h] += take
                    left -= take
            if done[s] < end[s] - start[s]:
                return False
        return True

    lo_cap, hi_cap = -(-n // n_steps), n
    while lo_cap < hi_cap:
        mid = (lo_cap + hi_cap) // 2
        if run(mid):
            hi_cap = mid
        else:
            lo_cap = mid + 1
    step = np.full(n, -1, np.int64)
    run(lo_cap, step)
    return step, lo_cap


def _by_step(step, n_steps, cols, pads):
    """Tasks -> per-step padded tables: one (n_steps, width) array per column."""
    counts = np.bincount(step, minlength=n_steps) if len(step) else np.zeros(n_steps, np.int64)
    width = max(1, int(counts.max()) if len(counts) else 1)
    order = np.argsort(step, kind="stable")
    slot = np.arange(len(step)) - np.concatenate([[0], np.cumsum(counts)[:-1]])[step[order]]
    out = []
    for col, pad in zip(cols, pads):
        a = np.full((n_steps, width), pad, _I)
        a[step[order], slot] = np.asarray(col)[order]
        out.append(a)
    return out


class Plan(NamedTuple):
    nv: int
    nM: int
    D: int                       # depth of the expanded tree = number of steps
    entry: np.ndarray            # (nv, D) compact entry of (k, t), -1 off the row
    anc: np.ndarray              # (nv, D) anc_t(k), -1 past the root
    diag: np.ndarray             # (nv,) entry of (k, 0)
    entry_row: np.ndarray        # (nM,) row of each entry
    # factor, step s: scale rows of depth D - s, then updates
    f_scale: np.ndarray          # (D, Ws) entries to scale (pad: TRASH)
    f_scale_d: np.ndarray        # (D, Ws) their row's diagonal (pad: ONE)
    f_upd: tuple                 # 4 x (D, T): l_kt, l_ku, d_k entries, target entry
    # solves, over DoF rows (pad row: nv); Lt sweep leaves first, L sweep root first
    rows_up: np.ndarray          # (D, W) rows of depth D - s
    rows_down: np.ndarray        # (D, W) rows of depth s + 1
    lt_push: tuple               # 3 x (D, T2): L entry, source row, target row
    l_pull: tuple                # 3 x (D, T2): L entry, source row, target row
    pairs: tuple                 # 3 x (nM - nv,): L entry, row k, ancestor row (all t >= 1)
    work: dict                   # real and padded task counts, for the record
    lu: tuple                    # non-symmetric variant: (scale, scale_d, upd (4,), push (3,)), on [lo; up]


@functools.lru_cache(maxsize=None)
def plan(topo) -> Plan:
    """The static schedule of every kernel for a topology (cached)."""
    nv, nM = topo.nv, topo.nM
    ZERO, ONE, TRASH = nM, nM + 1, nM + 2
    d = topo.dof_depth.astype(np.int64)
    D = int(d.max()) if nv else 1
    pos = np.arange(nM) - topo.dof_Madr[topo.M_rows]
    entry = np.full((nv, D), -1, np.int64)
    entry[topo.M_rows, pos] = np.arange(nM)
    anc = np.full((nv, D), -1, np.int64)
    anc[topo.M_rows, pos] = topo.M_cols
    diag = entry[:, 0].copy()

    # off-diagonal (k, t), t >= 1
    kk, tt = np.nonzero(entry[:, 1:] >= 0)
    tt = tt + 1
    # factor updates (k, t, u), 1 <= t <= u < d_k
    uk, ut, uu = [], [], []
    for k in range(nv):
        for t in range(1, d[k]):
            u = np.arange(t, d[k])
            uk.append(np.full(len(u), k)); ut.append(np.full(len(u), t)); uu.append(u)
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)
    uk, ut, uu = cat(uk), cat(ut), cat(uu)
    f_step, _ = edf_schedule(D - d[uk], D - d[uk] + ut - 1, D)
    f_upd = _by_step(f_step, D, (entry[uk, ut], entry[uk, uu], entry[uk, 0], entry[anc[uk, ut], uu - ut]),
                     (ZERO, ZERO, ZERO, TRASH))
    f_scale = _by_step(D - d[kk], D, (entry[kk, tt], entry[kk, 0]), (TRASH, ONE))

    # rows by step
    rows_up, = _by_step(D - d, D, (np.arange(nv),), (nv,))
    rows_down, = _by_step(d - 1, D, (np.arange(nv),), (nv,))
    # Lt sweep: push x[anc_t(k)] -= l_kt x[k], window [D - d_k, D - d_k + t - 1]
    p_step, _ = edf_schedule(D - d[kk], D - d[kk] + tt - 1, D)
    lt_push = _by_step(p_step, D, (entry[kk, tt], kk, anc[kk, tt]), (ZERO, 0, nv))
    # L sweep: pull x[k] -= l_kt x[anc_t(k)], window [d_k - t, d_k - 1]
    q_step, _ = edf_schedule(d[kk] - tt, d[kk] - 1, D)
    l_pull = _by_step(q_step, D, (entry[kk, tt], anc[kk, tt], kk), (ZERO, 0, nv))

    lu = _lu_tables(nv, nM, D, d, entry, anc, kk, tt, p_step)
    work = dict(factor_updates=len(uk), factor_updates_padded=f_upd[0].size,
                solve_tasks=len(kk), solve_tasks_padded=lt_push[0].size)
    return Plan(nv, nM, D, entry, anc, diag, topo.M_rows.astype(np.int64), f_scale[0], f_scale[1],
                tuple(f_upd), rows_up, rows_down, tuple(lt_push), tuple(l_pull),
                (entry[kk, tt].astype(_I), kk.astype(_I), anc[kk, tt].astype(_I)), work, lu)


def _lu_tables(nv, nM, D, d, entry, anc, kk, tt, p_step):
    """Tables of the non-symmetric elimination on the combined array [lo; up]:
    lo[e(k, t)] = A(k, anc_t(k)) (row k, diagonal at t = 0) and
    up[e(k, t)] = A(anc_t(k), k) (column k above the diagonal), t >= 1.

    Eliminating k (deepest first) updates A(anc_t, anc_u) -= A(anc_t, k) A(k, anc_u) / d_k
    for every ordered pair t, u >= 1; the target lies in the lower storage (t < u),
    the upper storage (t > u) or on the diagonal (t = u) of anc_min(t,u), so the
    task's window ends before that row is scaled: [D - d_k, D - d_k + min(t, u) - 1]."""
    ZERO, ONE, TRASH = 2 * nM, 2 * nM + 1, 2 * nM + 2
    uk, ut, uu = [], [], []
    for k in range(nv):
        t, u = np.meshgrid(np.arange(1, d[k]), np.arange(1, d[k]), indexing="ij")
        uk.append(np.full(t.size, k)); ut.append(t.ravel()); uu.append(u.ravel())
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64)
    uk, ut, uu = cat(uk), cat(ut), cat(uu)
    lo_t, hi_t = np.minimum(ut, uu), np.maximum(ut, uu)
    deeper = anc[uk, lo_t]
    tgt = np.where(ut < uu, entry[deeper, hi_t - lo_t], np.where(ut > uu, nM + entry[deeper, hi_t - lo_t],
                                                                  entry[deeper, 0]))
    step, _ = edf_schedule(D - d[uk], D - d[uk] + lo_t - 1, D)
    upd = _by_step(step, D, (nM + entry[uk, ut], entry[uk, uu], entry[uk, 0], tgt), (ZERO, ZERO, ZERO, TRASH))
    ke, kt = entry[kk, tt], entry[kk, 0]
    scale = _by_step(np.concatenate([D - d[kk]] * 2), D, (np.concatenate([ke, nM + ke]), np.concatenate([kt, kt])),
                     (TRASH, ONE))
    # solves read [lo; 0; 1; up]: the symmetric pull tables stay valid, pushes read up
    push = _by_step(p_step, D, (nM + 2 + entry[kk, tt], kk, anc[kk, tt]), (nM, 0, nv))
    return scale[0], scale[1], tuple(upd), tuple(push)


# --- batch-minor plumbing ------------------------------------------------------

# Batches are processed in chunks of this many systems, so that a chunk's
# working set (entries x CHUNK doubles per array) stays in the CPU's L2 cache;
# 64-128 was fastest on the benchmark machine (bench/README.md).
CHUNK = 64


def _plain(kernel):
    """``kernel`` on unbatched arrays (a batch axis of size 1 added and removed)."""
    return lambda *args: kernel(*(a[..., None] for a in args))[..., 0]


def _batch_minor(kernel, tangent=None):
    """Wrap ``kernel(*arrays)`` (each array: its index axis first, a batch axis
    last, of size 1 or B; returns one array laid out the same way) as a function
    of unbatched arrays that is differentiable and, under ``jax.vmap``, runs the
    kernel once on the whole batch with the batch axis last.

    ``tangent(f, primals, out, tangents)`` (optional): the output's tangent, given
    the wrapped function f, its output and the input tangents (a
    ``jax.custom_derivatives.SymbolicZero`` where an input is not perturbed);
    without it, the tangent is the JVP of the kernel itself."""
    plain = _plain(kernel)

    @custom_vmap
    def fast(*args):
        return plain(*args)

    @fast.def_vmap
    def _rule(axis_size, in_batched, *args):
        fixed = [None if b else a[..., None] for a, b in zip(args, in_batched)]
        batched = [a for a, b in zip(args, in_batched) if b]

        def run(chunk):  # chunk: the batched args, batch axis first
            it = iter(chunk)
            full = [f if f is not None else jnp.moveaxis(next(it), 0, -1) for f in fixed]
            return jnp.moveaxis(kernel(*full), -1, 0)

        if axis_size <= CHUNK:
            return run(batched), True
        n = -(-axis_size // CHUNK)
        pad = n * CHUNK - axis_size  # repeat the last system: padded lanes stay finite
        chunks = [jnp.concatenate([a, jnp.repeat(a[-1:], pad, axis=0)]) if pad else a for a in batched]
        chunks = [a.reshape((n, CHUNK) + a.shape[1:]) for a in chunks]
        out = jax.lax.map(run, chunks)
        return out.reshape((n * CHUNK,) + out.shape[2:])[:axis_size], True

    @jax.custom_jvp
    def f(*args):
        return fast(*args)

    if tangent is None:
        @f.defjvp
        def _jvp(primals, tangents):
            return jax.jvp(plain, primals, tangents)
    else:
        @functools.partial(f.defjvp, symbolic_zeros=True)
        def _jvp(primals, tangents):
            out = f(*primals)
            return out, tangent(f, primals, out, tangents)

    return f


def _is_zero(t):
    return isinstance(t, SymbolicZero)


def _inverse_tangent(pl, dH_times):
    """Tangent of x = H(p)⁻¹ b for a kernel f(p, b): dx = H⁻¹ (db - dH x), with H⁻¹ as a dense
    matrix from the kernel itself (f(p, I), one solve with nv columns) and
    ``dH_times(p, dp, x)`` = dH x by dense products.  Under ``jax.jacfwd`` the directions then
    share one H⁻¹ (a batched matrix product) instead of each running the kernel's sequential
    sweeps, and the rule is linear in (dp, db) through products and gathers that reverse mode
    transposes."""
    def tangent(f, primals, x, tangents):
        p, b = primals
        dp, db = tangents
        if _is_zero(dp) and _is_zero(db):
            return jnp.zeros_like(x)
        r = None if _is_zero(db) else db.astype(x.dtype)
        if not _is_zero(dp):
            dHx = dH_times(p, dp.astype(p.dtype), x)
            r = -dHx if r is None else r - dHx
        return f(p, jnp.eye(pl.nv, dtype=x.dtype)) @ r
    return tangent


def _pattern(pl):
    """(row, column) of each compact entry: the lower triangle on the branch pattern."""
    return pl.entry_row, pl.anc[pl.entry_row, np.arange(pl.nM) - pl.diag[pl.entry_row]]


def _dense_maps(pl):
    """(nv, nv) gather maps from compact entries (extended by a zero at index nM) to dense
    matrices: the pattern's lower triangle with its diagonal, without it, and both triangles."""
    rows, cols = _pattern(pl)
    low = np.full((pl.nv, pl.nv), pl.nM, _I)
    low[rows, cols] = np.arange(pl.nM)
    strict = low.copy()
    strict[np.arange(pl.nv), np.arange(pl.nv)] = pl.nM
    sym = low.copy()
    sym[cols, rows] = np.arange(pl.nM)
    return low, strict, sym


def _dense(c, idx):
    """A dense matrix from compact entries c by a gather map of :func:`_dense_maps`."""
    return jnp.concatenate([c, jnp.zeros((1,), c.dtype)])[idx]


def _by_row(d, X):
    """diag(d) X for X of shape (nv,) or (nv, m)."""
    return d.reshape((-1,) + (1,) * (X.ndim - 1)) * X


def _unit_lower(pl, vals):
    """The dense unit lower L and the diagonal D of an LᵀDL factor's entries."""
    _, strict, _ = _dense_maps(pl)
    return _dense(vals[: pl.nM], strict) + jnp.eye(pl.nv, dtype=vals.dtype), vals[pl.diag]


def _dH_times_of_factor(pl, kind):
    """(vals, dvals, X) -> dH X for H = Lᵀ D L (kind "ltdl") or Lᵀ L ("ltl") from the factor's
    entries and their tangent: dLᵀ D L X + Lᵀ dD L X + Lᵀ D dL X (LᵀL: dLᵀ L X + Lᵀ dL X)."""
    low, strict, _ = _dense_maps(pl)

    def times(vals, dvals, X):
        if kind == "ltl":
            L, dL = _dense(vals, low), _dense(dvals, low)
            return dL.T @ (L @ X) + L.T @ (dL @ X)
        L, D = _unit_lower(pl, vals)
        dL, dD = _dense(dvals, strict), dvals[pl.diag]
        LX = L @ X
        return dL.T @ _by_row(D, LX) + L.T @ (_by_row(dD, LX) + _by_row(D, dL @ X))
    return times


def _dH_times(pl, dense):
    """(H, dH, X) -> dH X for the symmetric matrix that :func:`factor` reads from H (dense: its
    lower triangle on the pattern; compact: (nM,))."""
    rows, cols = _pattern(pl)
    sym = _dense_maps(pl)[2]
    return lambda H, dH, X: _dense(dH[rows, cols] if dense else dH, sym) @ X


def _factor_tangent(pl, kind, dense, inv_L):
    """Tangent of the factor's entries from that of H (kinds "ltdl" and "ltl"), dense: with
    M = L⁻ᵀ dH L⁻¹ and X = dL L⁻¹ (strictly lower for the unit L of LᵀDL, lower for LᵀL),
    dH = dLᵀ D L + Lᵀ dD L + Lᵀ D dL gives M = Xᵀ D + dD + D X, so dD = diag(M),
    X = D⁻¹ tril(M, -1); for LᵀL, M = Xᵀ + X, so X = tril(M, -1) + diag(M) / 2; then dL = X L.
    ``inv_L(vals, I)``: L⁻¹ from the factor.  The pattern has no fill-in (Featherstone, 2005, §2),
    so dL lies on it too."""
    rows, cols = _pattern(pl)
    low, _, sym = _dense_maps(pl)
    is_diag = np.zeros(pl.nM, bool)
    is_diag[pl.diag] = True

    def tangent(f, primals, vals, tangents):
        (dH,) = tangents
        if _is_zero(dH):
            return jnp.zeros_like(vals)
        dHd = _dense((dH[rows, cols] if dense else dH).astype(vals.dtype), sym)
        Li = inv_L(vals, jnp.eye(pl.nv, dtype=vals.dtype))
        M = Li.T @ dHd @ Li
        if kind == "ltdl":
            L, D = _unit_lower(pl, vals)
            return jnp.where(is_diag, jnp.diag(M)[rows], ((jnp.tril(M, -1) / D[:, None]) @ L)[rows, cols])
        X = jnp.tril(M, -1) + 0.5 * jnp.diag(jnp.diag(M))
        return (X @ _dense(vals, low))[rows, cols]
    return tangent


def _ext(x, *vals):
    """Append constant rows (zero, one, ...) along the index axis."""
    tail = jnp.broadcast_to(jnp.asarray(vals, x.dtype).reshape((len(vals),) + (1,) * (x.ndim - 1)),
                            (len(vals),) + x.shape[1:])
    return jnp.concatenate([x, tail], axis=0)


def _batch_like(X, vals):
    """Broadcast X's batch axis to that of the factor (one right-hand side, many factors)."""
    return jnp.broadcast_to(X, X.shape[:-1] + (max(X.shape[-1], vals.shape[-1]),))


def _mid(l, X):
    """Insert X's middle (right-hand-side) axes into a batch-minor L gather."""
    return l.reshape(l.shape[:1] + (1,) * (X.ndim - 2) + l.shape[-1:])


# --- kernels (batch-minor) ---------------------------------------------------------

def _factor_kernel(pl, kind, dense):
    if kind == "lu":
        sc, scd, upd, _ = pl.lu
    else:
        upd, sc, scd = pl.f_upd, pl.f_scale, pl.f_scale_d  # NumPy: no tracers kept in the closure
    rows, cols = _pattern(pl)
    is_diag = np.zeros(pl.nM, bool)
    is_diag[pl.diag] = True

    def kernel(H):
        if dense:  # (nv, nv, b) -> (nM, b): the lower triangle on the pattern (and the upper for LU)
            H = jnp.concatenate([H[rows, cols], H[cols, rows]]) if kind == "lu" else H[rows, cols]
        A = _ext(H, 0.0, 1.0, 0.0)    # ZERO, ONE, TRASH

        def step(A, xs):
            s, sd, P, Q, Dg, T = xs
            A = A.at[s].set(A[s] / A[sd])
            return A.at[T].add(-(A[P] * A[Dg] * A[Q])), None

        if pl.D > 1:
            A, _ = jax.lax.scan(step, A, (sc, scd) + upd)
        A = A[: (2 if kind == "lu" else 1) * pl.nM]
        if kind == "ltl":
            r = jnp.sqrt(A[pl.diag[pl.entry_row]])
            A = jnp.where(is_diag.reshape((-1,) + (1,) * (A.ndim - 1)), r, A * r)
        return A
    return kernel


def _sweep_Lt(pl, unit, Lv, X, push=None):
    """X <- L^-T X (leaves to root). Lv: L entries extended with ZERO, ONE.
    ``push``: other push tables (the LU's upper factor)."""
    e, src, tgt = (jnp.asarray(a) for a in (push or pl.lt_push))
    rows = jnp.asarray(pl.rows_up)
    dg = _ext(jnp.asarray(pl.diag, _I), pl.nM + 1)  # pad row nv -> ONE

    def step(X, xs):
        r, e, src, tgt = xs
        if not unit:
            X = X.at[r].set(X[r] / _mid(Lv[dg[r]], X))
        return X.at[tgt].add(-_mid(Lv[e], X) * X[src]), None
    return jax.lax.scan(step, X, (rows, e, src, tgt))[0]


def _sweep_L(pl, unit, Lv, X):
    """X <- L^-1 X (root to leaves)."""
    e, src, tgt = (jnp.asarray(a) for a in pl.l_pull)
    rows = jnp.asarray(pl.rows_down)
    dg = _ext(jnp.asarray(pl.diag, _I), pl.nM + 1)

    def step(X, xs):
        r, e, src, tgt = xs
        X = X.at[tgt].add(-_mid(Lv[e], X) * X[src])
        if not unit:
            X = X.at[r].set(X[r] / _mid(Lv[dg[r]], X))
        return X, None
    return jax.lax.scan(step, X, (rows, e, src, tgt))[0]


def _solve_kernel(pl, kind, what):
    unit = kind in ("ltdl", "lu")
    if kind == "lu" and what != "solve":
        raise ValueError(f"{what!r} is not defined for an LU factor; use solve")

    def kernel(vals, b):
        b = _batch_like(b, vals)
        Lv = _ext(vals[: pl.nM], 0.0, 1.0)
        if kind == "lu":
            Lv = jnp.concatenate([Lv, vals[pl.nM:]])
        X = _ext(b, 0.0)  # row nv: padding target
        if what in ("solve", "half", "Lt"):
            X = _sweep_Lt(pl, unit, Lv, X, pl.lu[3] if kind == "lu" else None)
        if unit and what in ("solve", "half"):
            dd = _mid(vals[pl.diag], X)
            X = X.at[: pl.nv].divide(jnp.sqrt(dd) if what == "half" else dd)
        if what in ("solve", "L"):
            X = _sweep_L(pl, unit, Lv, X)
        return X[: pl.nv]
    return kernel


def _mul_kernel(pl, kind, what):
    e, k, a = pl.pairs

    def kernel(vals, X):
        X = _batch_like(X, vals)
        dg = _mid(vals[pl.diag], X)
        Y = X if (what != "H" and kind == "ltdl") else dg * X
        if what in ("L", "H"):
            Y = Y.at[k].add(_mid(vals[e], X) * X[a])
        if what in ("Lt", "H"):
            Y = Y.at[a].add(_mid(vals[e], X) * X[k])
        return Y
    return kernel


def _factor_solve_kernel(pl, kind, dense):
    fk, sk = _factor_kernel(pl, kind, dense), _solve_kernel(pl, kind, "solve")
    return lambda H, b: sk(fk(H), b)


@functools.lru_cache(maxsize=None)
def _op(topo, name, kind, arg):
    pl = plan(topo)
    if name == "factor_solve":
        return _batch_minor(_factor_solve_kernel(pl, kind, arg),
                            None if kind == "lu" else _inverse_tangent(pl, _dH_times(pl, arg)))
    if name == "factor":
        if kind == "lu":
            return _batch_minor(_factor_kernel(pl, kind, arg))
        return _batch_minor(_factor_kernel(pl, kind, arg),
                            _factor_tangent(pl, kind, arg, _op(topo, "solve", kind, "L")))
    if name == "mul":
        if kind == "lu":
            raise ValueError("products are not defined for an LU factor; use solve")
        return _batch_minor(_mul_kernel(pl, kind, arg))
    if arg == "solve" and kind != "lu":
        return _batch_minor(_solve_kernel(pl, kind, arg), _inverse_tangent(pl, _dH_times_of_factor(pl, kind)))
    return _batch_minor(_solve_kernel(pl, kind, arg))


# --- public API --------------------------------------------------------------------

class Factor(eqx.Module):
    """A factor in compact per-row ancestor storage, ``vals`` of shape (nM,).

    kind "ltdl": ``d_k`` at ``dof_Madr[k]`` and the unit lower L's
    ``l_{k, anc_t(k)}`` after it; kind "ltl": row k of the lower L itself,
    diagonal first.  This is MuJoCo's legacy qLD layout.  Kind "lu" (shape
    (2 nM,)): that of L and D, then the unit upper U's ``u_{anc_t(k), k}`` at
    the same positions (A = U D L; only ``solve`` applies)."""
    vals: jax.Array
    kind: str = eqx.field(static=True, default="ltdl")


def _compact(model, H, kind="ltdl"):
    topo = model.topo
    H = jnp.asarray(H)
    n_c = (2 if kind == "lu" else 1) * topo.nM
    if H.shape == (topo.nv, topo.nv):
        return H, True
    if H.shape == (n_c,):
        return H, False
    raise ValueError(f"H has shape {H.shape}; expected ({topo.nv}, {topo.nv}) or compact ({n_c},)")


KINDS = ("ltdl", "ltl", "lu")


def _check_kind(kind):
    if kind not in KINDS:
        raise ValueError(f"unknown factorization kind {kind!r}; expected 'ltdl', 'ltl' or 'lu'")


@functools.partial(jax.jit, static_argnames=("kind",))
def factor(model, H, kind="ltdl"):
    """H = Lᵀ D L (kind="ltdl") or H = Lᵀ L (kind="ltl", L = sqrt(D) L_unit);
    kind="lu": a non-symmetric matrix A with the branch-induced pattern (such
    as an iteration matrix H + h γ ∂ID/∂v + h² γ² ∂ID/∂q), A = U D L with U
    unit upper and L unit lower on the pattern, eliminated leaves first without
    pivoting and without fill-in.

    H: dense (nv, nv) (only the entries on the branch pattern are read: the
    lower triangle, and for "lu" the upper one too) or compact: (nM,) (see
    ``mass_matrix_compact``), for "lu" (2 nM,) = [lower rows; upper columns]
    (``A[k, anc_t(k)]`` then ``A[anc_t(k), k]`` in the same order).
    Returns a :class:`Factor`."""
    _check_kind(kind)
    H, dense = _compact(model, H, kind)
    if not jnp.issubdtype(H.dtype, jnp.floating):
        H = H.astype(jnp.result_type(float))
    return Factor(_op(model.topo, "factor", kind, dense)(H), kind)


@functools.partial(jax.jit, static_argnames=("kind",))
def factor_solve(model, H, b, kind="ltdl"):
    """x = H⁻¹ b: :func:`factor` and :func:`solve` fused in one kernel (under
    ``jax.vmap`` the factor never leaves the batch-minor layout).  H: dense
    (nv, nv) or compact (nM,); b: (nv,) or (nv, m)."""
    _check_kind(kind)
    H, dense = _compact(model, H, kind)
    b = _rhs(model, b)
    dt = jnp.result_type(H, b, float)
    return _op(model.topo, "factor_solve", kind, dense)(H.astype(dt), b.astype(dt))


def _rhs(model, b):
    b = jnp.asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != model.nv:
        raise ValueError(f"right-hand side has shape {b.shape}; expected ({model.nv},) or ({model.nv}, m)")
    return b


def _check_factor(model, F):
    n = (2 if isinstance(F, Factor) and F.kind == "lu" else 1) * model.topo.nM
    if not isinstance(F, Factor) or F.vals.shape != (n,):
        raise ValueError(f"expected a Factor with vals of shape ({n},)")


def _apply(model, F, b, name, arg):
    _check_factor(model, F)
    b = _rhs(model, b)
    dt = jnp.result_type(F.vals, b)
    return _op(model.topo, name, F.kind, arg)(F.vals.astype(dt), b.astype(dt))


@jax.jit
def solve(model, F: Factor, b):
    """x = H⁻¹ b from the factor: L⁻¹ D⁻¹ L⁻ᵀ b (LᵀDL) or L⁻¹ L⁻ᵀ b (LᵀL);
    b: (nv,) or (nv, m)."""
    return _apply(model, F, b, "solve", "solve")


@jax.jit
def half_solve(model, F: Factor, b):
    """y = D^-1/2 L⁻ᵀ b (LᵀDL) or L⁻ᵀ b (LᵀL), so that J H⁻¹ Jᵀ = yᵀ y with b = Jᵀ."""
    return _apply(model, F, b, "solve", "half")


@jax.jit
def solve_Lt(model, F: Factor, b):
    """x = L⁻ᵀ b."""
    return _apply(model, F, b, "solve", "Lt")


@jax.jit
def solve_L(model, F: Factor, b):
    """x = L⁻¹ b."""
    return _apply(model, F, b, "solve", "L")


@jax.jit
def mul_L(model, F: Factor, x):
    """y = L x (no sequential steps)."""
    return _apply(model, F, x, "mul", "L")


@jax.jit
def mul_Lt(model, F: Factor, x):
    """y = Lᵀ x (a scatter-add into the ancestors)."""
    return _apply(model, F, x, "mul", "Lt")


@jax.jit
def mul_H(model, H, x):
    """y = H x from H in compact (nM,) storage: y_i += H_ij x_j and
    y_j += H_ij x_i for each stored j below i."""
    H = jnp.asarray(H)
    if H.shape != (model.topo.nM,):
        raise ValueError(f"H has shape {H.shape}; expected compact ({model.topo.nM},)")
    return _apply(model, Factor(H, "ltl"), x, "mul", "H")


def to_dense_lower(model, vals, unit=True):
    """Compact factor entries -> dense lower-triangular L (unit diagonal if ``unit``)."""
    topo = model.topo
    vals = jnp.asarray(vals)
    M = jnp.zeros((topo.nv, topo.nv), vals.dtype).at[topo.M_rows, topo.M_cols].set(vals)
    return M - jnp.diag(jnp.diag(M)) + jnp.eye(topo.nv, dtype=vals.dtype) if unit else M


# --- exchange with MuJoCo's storage ------------------------------------------------
#
# The compact storage *is* the legacy qM / qLD order.  CSR (MuJoCo >= 3.2,
# M_rowadr/M_rownnz/M_colind): row k lists its ancestors with columns
# increasing, the diagonal last.

def _csr_to_compact(topo):
    """For each CSR entry (rows in order, columns increasing): its compact entry."""
    d = topo.dof_depth
    return np.concatenate([topo.dof_Madr[k] + np.arange(d[k])[::-1] for k in range(topo.nv)]).astype(np.int64)


def to_mujoco_csr(model, vals):
    """Compact entries (a factor's ``vals`` or H) -> MuJoCo's CSR value array (``qLD``, ``M``)."""
    return jnp.asarray(vals)[_csr_to_compact(model.topo)]


def from_mujoco_csr(model, vals):
    """MuJoCo CSR value array -> compact entries."""
    idx = _csr_to_compact(model.topo)
    vals = jnp.asarray(vals)
    return jnp.zeros(model.topo.nM, vals.dtype).at[idx].set(vals)
