"""jaxmbd.cost against the published numbers of R. Featherstone, "Efficient
factorization of the joint-space inertia matrix for branched kinematic trees",
IJRR 24(6), 2005 (§3-4, §6, Tables 1-2), and against operation counts measured
on an instrumented NumPy implementation of the paper's algorithms."""

import numpy as np
import pytest

import jaxmbd
from jaxmbd import cost, models


def test_humanoid30_numbers():
    r = cost.analyze(models.humanoid30())
    assert (r.n, r.D0, r.D1, r.D2, r.nnz, r.D1_bodies) == (30, 24, 219, 1039, 468, 84)
    assert r.factor_ltdl == (1258, 1039) and r.solve_ltdl == (468, 438)
    assert r.factor_dense == (4930, 4495) and r.solve_dense == (900, 870)
    assert r.crba_terms == dict(D0a=21, D1a=66, D0b=3, D1b=18, D0c=1, D1c=6)
    assert r.crba == (2475, 2124) and r.crba_chain == (6462, 4419)
    assert r.rnea == (2275, 1996) and r.aba == (5544, 5054)
    assert r.fd_crba_ltdl == (6476, 5597) and r.fd_crba_dense == (14555, 11756)
    assert model_nM(models.humanoid30()) == 249  # MuJoCo's nM = n + D1


def model_nM(m):
    return m.topo.nM


def test_equivalent_chain():
    r = cost.analyze(models.chain(25, floating=True))
    assert r.n == 30 and r.crba == (6462, 4419) and (r.D1, r.D2) == (435, 4495)
    assert r.factor_ltdl == (4930, 4495) and r.rnea == (2263, 1972) and r.aba == (5346, 4883)


def test_section6_ratios():
    h = cost.analyze(models.humanoid30())
    c = cost.analyze(models.chain(25, floating=True))
    tot = lambda x, a=1: x[0] + a * x[1]
    assert round(tot(c.crba) / tot(h.crba), 3) == 2.366 and round(tot(c.crba, 0) / tot(h.crba, 0), 3) == 2.611
    assert round(tot(h.fd_crba_dense) / tot(h.fd_crba_ltdl), 3) == 2.179
    assert round(tot(h.fd_crba_dense, 0) / tot(h.fd_crba_ltdl, 0), 3) == 2.248
    assert round(tot(h.fd_crba_ltdl) / tot(h.aba), 3) == 1.139 and round(tot(h.fd_crba_ltdl, 0) / tot(h.aba, 0), 3) == 1.168
    assert round(tot(c.fd_crba_ltdl) / tot(c.aba), 3) == 2.572


@pytest.mark.parametrize("m", [2, 3, 5, 8])
def test_table2_closed_forms(m):
    sums = lambda model: (cost.analyze(model).D1, cost.analyze(model).D2)
    n = m * m
    assert sums(models.chain(n)) == ((n * n - n) // 2, (n ** 3 - n) // 6)
    assert sums(models.side_branch_chain(m)) == (m * m, (2 * m ** 3 + 3 * m * m + m) // 6)
    assert sums(models.binary_tree(m)) == (sum(i * 2 ** i for i in range(1, m)),
                                           sum(i * (i + 1) * 2 ** (i - 1) for i in range(1, m)))
    assert sums(models.grid_tree(m)) == (m ** 3 - m ** 2, (7 * m ** 4 - 6 * m ** 3 - m ** 2) // 12)


def test_section42_ratios():
    ratio = lambda tree: cost.simple_cost(models.chain(tree.nv)) / cost.simple_cost(tree)
    assert round(ratio(models.binary_tree(4)), 2) == 7.75
    assert round(ratio(models.binary_tree(8)), 1) == 434.4
    assert round(ratio(models.grid_tree(4)), 2) == 5.29
    assert round(ratio(models.grid_tree(16)), 1) == 73.9


# --- instrumented reference implementations (the paper's Appendix) ----------

class Ops:
    def __init__(self):
        self.m = self.a = self.d = self.sqrt = 0


def ltdl_counted(H, lam, ops):
    """In-situ LTDL (the paper's Appendix), counting operations; lam 0-based, -1 = base."""
    A = np.array(H, dtype=float)
    for k in range(len(A) - 1, -1, -1):
        i = lam[k]
        while i >= 0:
            a = A[k, i] / A[k, k]
            ops.d += 1
            j = i
            while j >= 0:
                A[i, j] -= A[k, j] * a
                ops.m += 1
                ops.a += 1
                j = lam[j]
            A[k, i] = a
            i = lam[i]
    return A


def ltl_counted(H, lam, ops):
    A = np.array(H, dtype=float)
    for k in range(len(A) - 1, -1, -1):
        A[k, k] = np.sqrt(A[k, k])
        ops.sqrt += 1
        j = lam[k]
        while j >= 0:
            A[k, j] /= A[k, k]
            ops.d += 1
            j = lam[j]
        i = lam[k]
        while i >= 0:
            j = i
            while j >= 0:
                A[i, j] -= A[k, i] * A[k, j]
                ops.m += 1
                ops.a += 1
                j = lam[j]
            i = lam[i]
    return A


def ltdl_solve_counted(A, lam, b, ops):
    x = np.array(b, dtype=float)
    n = len(x)
    for i in range(n - 1, -1, -1):  # x = L^-T x (unit diagonal)
        j = lam[i]
        while j >= 0:
            x[j] -= A[i, j] * x[i]
            ops.m += 1
            ops.a += 1
            j = lam[j]
    for i in range(n):
        x[i] /= A[i, i]
        ops.d += 1
    for i in range(n):  # x = L^-1 x (unit diagonal)
        j = lam[i]
        while j >= 0:
            x[i] -= A[i, j] * x[j]
            ops.m += 1
            ops.a += 1
            j = lam[j]
    return x


TREES = [(s, n) for s, n in [(0, 6), (1, 9), (2, 12), (3, 15)]]


@pytest.mark.parametrize("seed,n", TREES)
def test_instrumented_factorizations_match_formulas(seed, n):
    model = models.random_tree(seed, n, root_joint="free" if seed % 2 else None)
    lam = model.dof_parent
    r = cost.analyze(model)
    rng = np.random.default_rng(seed)
    q = np.asarray(jaxmbd.normalize_q(model, jaxmbd.neutral_q(model) + rng.normal(size=model.nq)))
    H = np.asarray(jaxmbd.mass_matrix(model, q))
    nv = model.nv

    ops = Ops()
    A = ltdl_counted(H, lam, ops)
    assert (ops.m + ops.d, ops.a) == r.factor_ltdl and ops.d == r.D1
    # it really factorizes H: H = L^T D L with unit lower L from the lower triangle
    L = np.tril(A, -1) + np.eye(nv)
    np.testing.assert_allclose(L.T @ np.diag(np.diag(A)) @ L, H, rtol=1e-12, atol=1e-12)

    ops = Ops()
    b = rng.normal(size=nv)
    x = ltdl_solve_counted(A, lam, b, ops)
    assert (ops.m + ops.d, ops.a) == r.solve_ltdl
    np.testing.assert_allclose(H @ x, b, atol=1e-10)

    ops = Ops()
    G = np.tril(ltl_counted(H, lam, ops))
    assert (ops.m + ops.d, ops.a, ops.sqrt) == r.factor_ltl + (r.sqrt_ltl,)
    np.testing.assert_allclose(G.T @ G, H, rtol=1e-12, atol=1e-12)

    # dense = the same loops on a chain of n: the expanded λ(i) = i - 1
    ops = Ops()
    ltdl_counted(H, np.arange(nv) - 1, ops)
    assert (ops.m + ops.d, ops.a) == r.factor_dense


@pytest.mark.parametrize("seed,n", TREES)
def test_instrumented_crba_operation_mix(seed, n):
    """The paper's CRBA loop (§5) performs D0 rigid-body adds and transforms and D1
    vector transforms on the body graph (eq. 14)."""
    model = models.random_tree(seed, n)
    parent = model.topo.parent_np
    ra = rx = vx = 0
    for i in range(len(parent) - 1, -1, -1):
        if parent[i] >= 0:
            ra += 1
            rx += 1
        j = i
        while parent[j] >= 0:
            vx += 1
            j = parent[j]
    r = cost.analyze(model)
    assert (ra, rx, vx) == (r.D0, r.D0, r.D1_bodies)
    t = r.crba_terms
    assert t["D0a"] + t["D0b"] == r.D0 and t["D1a"] + t["D1b"] == r.D1_bodies  # the paper's proof


def test_predicted_speedup_and_topology_input():
    h = models.humanoid30()
    assert cost.analyze(h.topo) == cost.analyze(h)
    assert round(cost.predicted_factor_solve_speedup(h), 2) == round((4930 + 4495 + 900 + 870) / (1258 + 1039 + 468 + 438), 2)
    assert cost.predicted_factor_solve_speedup(models.chain(12)) == 1.0
