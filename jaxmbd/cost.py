"""Operation counts of the algorithms of R. Featherstone, "Efficient
factorization of the joint-space inertia matrix for branched kinematic trees",
Int. J. Robotics Research 24(6), 2005 (§3-6, Tables 1-2), from the topology
alone.  Counts are pairs (multiplications, additions); divisions count as
multiplications and subtractions as additions, as in the paper's §6.

* Factorization and back-substitution use the *expanded* graph (one node per
  DoF, ``dof_parent``): D1 = Σ (d_i - 1), D2 = Σ d_i (d_i - 1) / 2.
* The CRBA uses the *original* (body) graph: D0 = number of bodies not
  attached to the base, D1 = Σ (d_i - 1) over bodies, with eq. 21's split
  into DH nodes (one child per parent, chosen to maximise D1a), non-DH nodes,
  and the savings of a floating base's DH child.
* "dense" means the same algorithm on a chain of the same n, i.e. a dense
  LDLᵀ / Cholesky.
* RNEA and ABA use the published closed forms the paper quotes (Balafoutis-
  Patel-Misra; McMillan-Orin), with the paper's per-branch corrections.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import joints

Count = tuple  # (multiplications incl. divisions, additions)


def _sums(d):
    """(D1, D2) from the node depths d: Σ (d_i - 1) and Σ d_i (d_i - 1) / 2."""
    return int(np.sum(d - 1)), int(np.sum(d * (d - 1) // 2))





def factor_counts(n, D1, D2):
    """LTDL factorization: D1 divisions + D2 (m + a)."""
    return (D1 + D2, D2)


def solve_counts(n, D1):
    """LTDL back-substitution (one right-hand side): n divisions + 2 D1 (m + a)."""
    return (n + 2 * D1, 2 * D1)


@dataclasses.dataclass(frozen=True)
class CostReport:
    n: int                 # DoFs (size of H)
    n_bodies: int
    D0: int                # bodies not attached to the base (original graph)
    D1: int                # expanded graph
    D2: int                # expanded graph
    D1_bodies: int         # original graph (the CRBA's D1)
    nnz: int               # non-zeros of H: n + 2 D1
    factor_ltdl: Count
    factor_ltl: Count      # plus sqrt_ltl square roots
    sqrt_ltl: int
    solve_ltdl: Count
    solve_ltl: Count
    factor_dense: Count
    solve_dense: Count
    crba_terms: dict       # D0a, D1a, D0b, D1b, D0c, D1c of eq. 21
    crba: Count
    crba_chain: Count      # eq. 21 for the unbranched chain of the same bodies
    rnea: Count
    aba: Count
    fd_crba_ltdl: Count    # CRBA + LTDL factor + one solve + RNEA for the bias
    fd_crba_dense: Count   # the same on the unbranched chain (dense H)

    def table(self) -> str:
        rows = [(k, v) for k, v in dataclasses.asdict(self).items()]
        return "\n".join(f"{k:>14s}: {v}" for k, v in rows)


def _crba_terms(parent, floating):
    """D0a, D1a, D0b, D1b, D0c, D1c (eq. 19-21) of a body parent array."""
    parent = np.asarray(parent)
    N = len(parent)
    size = np.ones(N, np.int64)
    for i in range(N - 1, -1, -1):
        if parent[i] >= 0:
            size[parent[i]] += size[i]
    dh = np.zeros(N, bool)
    for p in range(-1, N):
        kids = np.flatnonzero(parent == p)
        if len(kids):
            dh[kids[np.argmax(size[kids])]] = True  # the largest subtree maximises D1a
    inner = parent >= 0
    a, b = inner & dh, inner & ~dh
    c = np.zeros(N, bool)
    for i in np.flatnonzero(inner & dh):
        c[i] = floating[parent[i]]
    return dict(D0a=int(a.sum()), D1a=int(size[a].sum()), D0b=int(b.sum()), D1b=int(size[b].sum()),
                D0c=int(c.sum()), D1c=int(size[c].sum()))


def crba_counts(t):
    """Eq. 21: D0a(32m+43a) + D1a(20m+12a) + D0b(47m+58a) + D1b(24m+18a)
    - D0c(18m+21a) - D1c(12m+8a)."""
    return (32 * t["D0a"] + 20 * t["D1a"] + 47 * t["D0b"] + 24 * t["D1b"] - 18 * t["D0c"] - 12 * t["D1c"],
            43 * t["D0a"] + 12 * t["D1a"] + 58 * t["D0b"] + 18 * t["D1b"] - 21 * t["D0c"] - 8 * t["D1c"])


def analyze(model) -> CostReport:
    """Operation counts of the paper's algorithms for a model's topology (a
    :class:`jaxmbd.Model` or its ``Topology``)."""
    topo = getattr(model, "topo", model)
    n, N = topo.nv, topo.n_bodies
    D1, D2 = _sums(topo.dof_depth)
    D1b_, _ = _sums(topo.depth)
    D0 = int(np.sum(topo.parent_np >= 0))
    floating = np.array([joints.get(jt).floating and p < 0 for jt, p in zip(topo.jtype, topo.parent)])
    terms = _crba_terms(topo.parent_np, floating)
    chain_terms = _crba_terms(np.arange(N) - 1, np.arange(N) == 0 if floating.any() else np.zeros(N, bool))
    D1c, D2c = n * (n - 1) // 2, (n ** 3 - n) // 6
    n_extra = int(sum(max(0, int(np.sum(topo.parent_np == p)) - 1) for p in range(-1, N)))
    root6 = bool(floating.any())
    # Balafoutis-Patel-Misra (93n-69)m + (81n-66)a, +7m+13a for a 6-DoF root,
    # +4m+8a per extra branch (the paper's §6)
    rnea = (93 * N - 69 + 7 * root6 + 4 * n_extra, 81 * N - 66 + 13 * root6 + 8 * n_extra)
    # McMillan-Orin (224n-30)m + (205n-37)a with n = moving bodies beyond a
    # floating root (the paper's figure), +66m+57a per extra branch
    Na = N - root6
    aba = (224 * Na - 30 + 66 * n_extra, 205 * Na - 37 + 57 * n_extra)
    crba, crba_chain = crba_counts(terms), crba_counts(chain_terms)
    f, s = factor_counts(n, D1, D2), solve_counts(n, D1)
    fd, sd = factor_counts(n, D1c, D2c), solve_counts(n, D1c)
    rnea_chain = (93 * N - 69 + 7 * root6, 81 * N - 66 + 13 * root6)
    add = lambda *cs: (sum(c[0] for c in cs), sum(c[1] for c in cs))
    return CostReport(
        n=n, n_bodies=N, D0=D0, D1=D1, D2=D2, D1_bodies=D1b_, nnz=n + 2 * D1,
        factor_ltdl=f, factor_ltl=f, sqrt_ltl=n, solve_ltdl=s, solve_ltl=(2 * n + 2 * D1, 2 * D1),
        factor_dense=fd, solve_dense=sd, crba_terms=terms, crba=crba, crba_chain=crba_chain,
        rnea=rnea, aba=aba, fd_crba_ltdl=add(crba, f, s, rnea), fd_crba_dense=add(crba_chain, fd, sd, rnea_chain))


def predicted_factor_solve_speedup(model) -> float:
    """Dense / sparse operation count of one factorization plus one solve
    (multiplications and additions counted alike)."""
    r = analyze(model)
    return (sum(r.factor_dense) + sum(r.solve_dense)) / (sum(r.factor_ltdl) + sum(r.solve_ltdl))


def simple_cost(model) -> int:
    """The paper's §4.2 metric D1 + 2 D2 of the (expanded) factorization."""
    D1, D2 = _sums(getattr(model, "topo", model).dof_depth)
    return D1 + 2 * D2
