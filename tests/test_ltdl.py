"""Branch-sparse LᵀDL / LᵀL: reconstruction, exact sparsity, solves, the
chain = reversed dense Cholesky identity, MuJoCo's mj_factorM, gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxmbd
from jaxmbd import ltdl, models
from test_cost import Ops, ltl_counted
from trees import TOPOLOGIES, ancestor_pattern, base_tree, perturb, random_state

mujoco = pytest.importorskip("mujoco")


def _H(model, seed):
    q, _, _ = random_state(model, seed)
    return np.asarray(jaxmbd.mass_matrix(model, q)), q


@pytest.mark.parametrize("topo", sorted(TOPOLOGIES))
def test_reconstruction_and_exact_sparsity(topo):
    model = perturb(base_tree(topo), topo)
    H, _ = _H(model, topo)
    F = ltdl.factor(model, H)
    L = np.asarray(ltdl.to_dense_lower(model, F.vals))
    d = np.asarray(F.vals[model.topo.dof_Madr])
    np.testing.assert_allclose(L.T @ np.diag(d) @ L, H, rtol=0, atol=1e-12 * np.abs(H).max())
    assert np.all(L[~ancestor_pattern(model)] == 0.0)
    assert np.all(d > 0)
    # LᵀL: sqrt(D) L, and equal to Featherstone's (2005, §2) in-situ LTL run in NumPy
    G = np.asarray(ltdl.to_dense_lower(model, ltdl.factor(model, H, kind="ltl").vals, unit=False))
    np.testing.assert_allclose(G, np.sqrt(d)[:, None] * L, rtol=1e-13, atol=1e-15)
    ref = np.tril(ltl_counted(H, model.dof_parent, Ops()))
    np.testing.assert_allclose(G, ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("topo", sorted(TOPOLOGIES))
def test_solves(topo):
    model = perturb(base_tree(topo), topo + 10)
    H, _ = _H(model, topo + 10)
    F = ltdl.factor(model, H)
    rng = np.random.default_rng(topo)
    b, B = rng.normal(size=model.nv), rng.normal(size=(model.nv, 4))
    np.testing.assert_allclose(ltdl.solve(model, F, b), np.linalg.solve(H, b), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ltdl.solve(model, F, B), np.linalg.solve(H, B), rtol=1e-10, atol=1e-12)
    y = np.asarray(ltdl.half_solve(model, F, B))
    np.testing.assert_allclose(y.T @ y, B.T @ np.linalg.solve(H, B), rtol=1e-10, atol=1e-12)


def test_chain_is_reversed_dense_cholesky():
    """For a chain, LᵀL = (R Gᵀ R)ᵀ (R Gᵀ R) with R H R = G Gᵀ (Featherstone 2005, §3)."""
    model = models.chain(9)
    H, _ = _H(model, 1)
    R = np.eye(9)[::-1]
    G = np.linalg.cholesky(R @ H @ R)
    L = np.asarray(ltdl.to_dense_lower(model, ltdl.factor(model, H, kind="ltl").vals, unit=False))
    np.testing.assert_allclose(L, R @ G.T @ R, rtol=1e-12, atol=1e-14)


def test_matches_mujoco_factorM_and_solveM():
    from mjcf_util import builder_to_mjcf, depth_first
    b = depth_first(models.random_tree_builder(3, 7, joint_types=("revolute", "prismatic", "spherical"),
                                               root_joint="free"))
    model = b.build()
    mj = mujoco.MjModel.from_xml_string(builder_to_mjcf(b))
    d = mujoco.MjData(mj)
    q, _, _ = random_state(model, 4)
    d.qpos[:] = np.asarray(q)
    mujoco.mj_forward(mj, d)  # computes M and its factor qLD (mj_factorM)
    np.testing.assert_array_equal(mj.M_rownnz, model.topo.dof_depth)
    Hc = jaxmbd.mass_matrix_compact(model, q)
    np.testing.assert_allclose(ltdl.to_mujoco_csr(model, Hc), d.M, rtol=1e-12, atol=1e-14)
    F = ltdl.factor(model, Hc)
    np.testing.assert_allclose(ltdl.to_mujoco_csr(model, F.vals), d.qLD, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(1.0 / F.vals[model.topo.dof_Madr], d.qLDiagInv, rtol=1e-10)
    np.testing.assert_array_equal(ltdl.from_mujoco_csr(model, ltdl.to_mujoco_csr(model, F.vals)), F.vals)
    rng = np.random.default_rng(0)
    y = rng.normal(size=(3, model.nv))
    x = np.zeros_like(y)
    mujoco.mj_solveM(mj, d, x, y)
    np.testing.assert_allclose(ltdl.solve(model, F, y.T).T, x, rtol=1e-10, atol=1e-12)


@pytest.mark.long
def test_grads_through_factor_and_solve():
    model = perturb(base_tree(2), 3)
    H, _ = _H(model, 3)
    H = H + np.eye(model.nv)  # same pattern, better conditioned: finite differences stay accurate
    b = np.random.default_rng(1).normal(size=model.nv)
    f = lambda H, b: ltdl.solve(model, ltdl.factor(model, 0.5 * (H + H.T)), b)
    check_grads(f, (jnp.asarray(H), jnp.asarray(b)), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    g = lambda H: ltdl.factor(model, 0.5 * (H + H.T), kind="ltl").vals
    check_grads(g, (jnp.asarray(H),), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


def test_bad_inputs():
    model = base_tree(0)
    with pytest.raises(ValueError, match="H has shape"):
        ltdl.factor(model, np.eye(3))
    with pytest.raises(ValueError, match="unknown factorization kind"):
        ltdl.factor(model, np.eye(model.nv), kind="qr")


@pytest.mark.parametrize("topo", [0, 3])
def test_products_and_triangular_solves(topo):
    model = perturb(base_tree(topo), topo + 20)
    H, q = _H(model, topo + 20)
    rng = np.random.default_rng(topo)
    X = rng.normal(size=(model.nv, 3))
    for kind in ("ltdl", "ltl"):
        F = ltdl.factor(model, H, kind=kind)
        L = np.asarray(ltdl.to_dense_lower(model, F.vals, unit=(kind == "ltdl")))
        np.testing.assert_allclose(ltdl.mul_L(model, F, X), L @ X, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ltdl.mul_Lt(model, F, X), L.T @ X, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ltdl.solve_L(model, F, X), np.linalg.solve(L, X), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ltdl.solve_Lt(model, F, X), np.linalg.solve(L.T, X), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ltdl.solve(model, F, X), np.linalg.solve(H, X), rtol=1e-10, atol=1e-12)
        y = np.asarray(ltdl.half_solve(model, F, X))
        np.testing.assert_allclose(y.T @ y, X.T @ np.linalg.solve(H, X), rtol=1e-10, atol=1e-12)
    Hc = jaxmbd.mass_matrix_compact(model, q)
    np.testing.assert_allclose(ltdl.mul_H(model, Hc, X[:, 0]), H @ X[:, 0], rtol=1e-12, atol=1e-12)


@pytest.mark.long
def test_forward_dynamics_factorizations_agree_and_auto_rule():
    from jaxmbd.dynamics import factorization_for
    for model in (perturb(base_tree(0), 7), models.binary_tree(6)):
        q, v, tau = random_state(model, 7)
        ref = jaxmbd.forward_dynamics(model, q, v, tau, method="aba")
        for fz in ("sparse", "dense", "auto"):
            qdd = jaxmbd.forward_dynamics(model, q, v, tau, method="crba", factorization=fz)
            np.testing.assert_allclose(qdd, ref, rtol=1e-9, atol=1e-9, err_msg=fz)
    # the benchmark-backed rule: sparse for branched trees, dense for chains
    assert factorization_for(models.humanoid30()) == "sparse"
    assert factorization_for(models.grid_tree(4)) == "sparse"
    assert factorization_for(models.binary_tree(4)) == "sparse"
    assert factorization_for(models.chain(30)) == "dense"
    assert factorization_for(models.chain(10, floating=True)) == "dense"
    with pytest.raises(ValueError, match="unknown factorization 'qr'"):
        jaxmbd.forward_dynamics(models.pendulum(), jnp.zeros(1), jnp.zeros(1), jnp.zeros(1), method="crba",
                                factorization="qr")


def _hall_bound(lo, hi, S):
    """Smallest feasible per-step capacity for unit tasks with windows [lo, hi]:
    max over step intervals [a, b] of ceil(#tasks inside / (b - a + 1))."""
    best = 0
    for a in range(S):
        for b in range(a, S):
            n = int(np.sum((lo >= a) & (hi <= b)))
            best = max(best, -(-n // (b - a + 1)))
    return best


def test_edf_schedule_is_feasible_and_optimal():
    rng = np.random.default_rng(0)
    for _ in range(30):
        S = int(rng.integers(1, 9))
        lo = rng.integers(0, S, size=int(rng.integers(1, 60)))
        hi = np.minimum(S - 1, lo + rng.integers(0, S, size=len(lo)))
        step, cap = ltdl.edf_schedule(lo, hi, S)
        assert np.all((step >= lo) & (step <= hi))
        assert np.bincount(step, minlength=S).max() <= cap
        assert cap == _hall_bound(lo, hi, S)
    with pytest.raises(ValueError, match="window"):
        ltdl.edf_schedule([2], [1], 3)


@pytest.mark.parametrize("name", ["humanoid", "binary5", "random"])
def test_plan_respects_dependencies(name):
    """Every update task runs after its source row is scaled and before its
    target row is; the per-step capacity is the optimum for the task windows."""
    model = {"humanoid": models.humanoid30, "binary5": lambda: models.binary_tree(5),
             "random": lambda: perturb(base_tree(3), 1)}[name]()
    pl, topo = ltdl.plan(model.topo), model.topo
    d, D, nM = topo.dof_depth, ltdl.plan(model.topo).D, topo.nM
    row = np.append(pl.entry_row, [-1, -1, -1])   # ZERO, ONE, TRASH have no row
    P, Q, Dg, T = pl.f_upd
    real = T < nM
    steps = np.broadcast_to(np.arange(D)[:, None], T.shape)
    k, tgt = row[P[real]], row[T[real]]
    assert np.all(row[Q[real]] == k) and np.all(row[Dg[real]] == k)
    assert np.all(steps[real] >= D - d[k])              # source row already scaled
    assert np.all(steps[real] <= D - d[tgt] - 1)        # target row not yet scaled
    assert real.sum() == pl.work["factor_updates"] == sum(int(x) * (int(x) - 1) // 2 for x in d)
    # the scaled rows of step s are exactly the rows of depth D - s
    sc = pl.f_scale[pl.f_scale < nM]
    np.testing.assert_array_equal(np.sort(sc), np.sort(np.setdiff1d(np.arange(nM), pl.diag)))
    # optimal capacity: the Hall bound of the windows
    kk, tt = np.nonzero(pl.entry[:, 1:] >= 0)
    tt = tt + 1
    lo = np.concatenate([np.full(int(x) - t, D - int(x)) for x, t in zip(d[kk], tt)])
    hi = np.concatenate([np.full(int(x) - t, D - int(x) + t - 1) for x, t in zip(d[kk], tt)])
    assert T.shape[1] == _hall_bound(lo, hi, D)


def test_batched_paths_match_single_systems():
    """vmap (chunked, with a padded last chunk), one factor with many right-hand
    sides, many factors with one, and the fused factor_solve, against per-system calls."""
    model = perturb(base_tree(1), 5)
    B = ltdl.CHUNK + 3
    Hs = np.stack([_H(model, s)[0] for s in range(4)])
    Hs = np.concatenate([Hs] * (B // 4 + 1))[:B] * np.linspace(1, 2, B)[:, None, None]
    bs = np.random.default_rng(2).normal(size=(B, model.nv))
    Hc = Hs[:, model.topo.M_rows, model.topo.M_cols]
    want = np.linalg.solve(Hs, bs[..., None])[..., 0]
    F = jax.vmap(lambda H: ltdl.factor(model, H))(Hc)
    np.testing.assert_allclose(jax.vmap(lambda F, b: ltdl.solve(model, F, b))(F, bs), want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(jax.vmap(lambda H, b: ltdl.factor_solve(model, H, b))(Hs, bs), want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(jax.vmap(lambda H, b: ltdl.factor_solve(model, H, b))(Hc, bs), want, rtol=1e-9, atol=1e-11)
    F0 = ltdl.factor(model, Hs[0])
    np.testing.assert_allclose(jax.vmap(lambda b: ltdl.solve(model, F0, b))(bs),
                               np.linalg.solve(Hs[0], bs.T).T, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(jax.vmap(lambda F: ltdl.solve(model, F, bs[0]))(F),
                               np.linalg.solve(Hs, bs[0]), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(jax.vmap(lambda F, b: ltdl.mul_L(model, F, b))(F, bs)[7],
                               ltdl.mul_L(model, jax.tree.map(lambda x: x[7], F), bs[7]), rtol=1e-13)
    # nested vmap falls back to the ordinary batching of the outer axis
    out = jax.vmap(jax.vmap(lambda H, b: ltdl.factor_solve(model, H, b)))(Hc.reshape(1, B, -1), bs[None])
    np.testing.assert_allclose(out[0], want, rtol=1e-9, atol=1e-11)


def test_grads_through_fused_and_batched():
    model = perturb(base_tree(0), 2)
    H, _ = _H(model, 2)
    H = H + np.eye(model.nv)
    Hc = jnp.asarray(H[model.topo.M_rows, model.topo.M_cols])
    b = jnp.asarray(np.random.default_rng(3).normal(size=model.nv))
    check_grads(lambda Hc, b: ltdl.factor_solve(model, Hc, b), (Hc, b), order=1, modes=("fwd", "rev"),
                atol=1e-6, rtol=1e-6)
    g1 = jax.grad(lambda Hc: ltdl.factor_solve(model, Hc, b).sum())(Hc)
    gB = jax.vmap(jax.grad(lambda Hc: ltdl.factor_solve(model, Hc, b).sum()))(jnp.stack([Hc, Hc]))
    np.testing.assert_allclose(gB[1], g1, rtol=1e-12)


@pytest.mark.parametrize("topo", [1, 3])
def test_nonsymmetric_lu_on_the_branch_pattern(topo):
    """kind="lu": A = U D L without fill-in for a non-symmetric matrix with the
    branch-induced pattern; solve = dense solve; a symmetric A gives LᵀDL."""
    model = perturb(base_tree(topo), topo + 30)
    H, _ = _H(model, topo + 30)
    pat = ancestor_pattern(model)
    pat = pat | pat.T
    rng = np.random.default_rng(topo)
    A = H + 0.3 * np.where(pat, rng.normal(size=H.shape), 0.0) * np.abs(H).max()
    F = ltdl.factor(model, A, kind="lu")
    n, nM = model.nv, model.topo.nM
    L = np.asarray(ltdl.to_dense_lower(model, F.vals[:nM]))
    U = np.asarray(ltdl.to_dense_lower(model, F.vals[nM:])).T
    d = np.asarray(F.vals[model.topo.dof_Madr])
    np.testing.assert_allclose(U @ np.diag(d) @ L, A, rtol=0, atol=1e-11 * np.abs(A).max())
    assert np.all(L[~ancestor_pattern(model)] == 0) and np.all(U.T[~ancestor_pattern(model)] == 0)
    B = rng.normal(size=(n, 3))
    np.testing.assert_allclose(ltdl.solve(model, F, B), np.linalg.solve(A, B), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(ltdl.factor_solve(model, A, B[:, 0], kind="lu"), np.linalg.solve(A, B[:, 0]),
                               rtol=1e-9, atol=1e-10)
    # compact input, batched
    lo, up = A[model.topo.M_rows, model.topo.M_cols], A[model.topo.M_cols, model.topo.M_rows]
    Fb = jax.vmap(lambda c: ltdl.factor(model, c, kind="lu"))(np.stack([np.concatenate([lo, up])] * 3))
    # (rounding only: the batch-minor kernels order their multiply-adds differently;
    # 1.8e-13 relative was seen on a GPU, well under 1e-12)
    np.testing.assert_allclose(Fb.vals[2], F.vals, rtol=1e-12, atol=1e-15)
    # symmetric input: U = Lᵀ and the same D, L as LᵀDL
    S = ltdl.factor(model, H, kind="lu")
    np.testing.assert_allclose(S.vals[:nM], ltdl.factor(model, H).vals, rtol=1e-12, atol=1e-15)
    off = np.setdiff1d(np.arange(nM), model.topo.dof_Madr)
    np.testing.assert_allclose(S.vals[nM:][off], S.vals[:nM][off], rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="not defined for an LU"):
        ltdl.mul_L(model, F, B)


@pytest.mark.parametrize("topo", [0, pytest.param(3, marks=pytest.mark.long)])
def test_dense_tangent_rules_equal_the_kernels_own_derivatives(topo):
    """factor, solve and factor_solve take their tangents by dense products (dx = H⁻¹ (db - dH x);
    the factor's from M = L⁻ᵀ dH L⁻¹).  They equal forward and reverse mode through the kernels'
    own sweeps (``_plain``) for both kinds, dense and compact H, one and several right-hand sides,
    and with one input unperturbed (a symbolic zero)."""
    model = perturb(base_tree(topo), topo + 20)
    pl, topology = ltdl.plan(model.topo), model.topo
    H, _ = _H(model, topo + 20)
    H = jnp.asarray(H + np.eye(model.nv))
    Hc = H[topology.M_rows, topology.M_cols]
    rng = np.random.default_rng(topo)
    dH = jnp.asarray(rng.normal(size=H.shape))
    dH = dH + dH.T
    dHc = dH[topology.M_rows, topology.M_cols]
    b, B = jnp.asarray(rng.normal(size=model.nv)), jnp.asarray(rng.normal(size=(model.nv, 3)))
    db, dB = jnp.asarray(rng.normal(size=model.nv)), jnp.asarray(rng.normal(size=(model.nv, 3)))

    def pair(rule, own, primals, tangents):
        """(rule's, own) value, tangent and pullback of a fixed cotangent."""
        y, t = jax.jvp(rule, primals, tangents)
        ybar = jnp.cos(jnp.arange(y.size, dtype=y.dtype)).reshape(y.shape)
        out = [y, t, *jax.vjp(rule, *primals)[1](ybar)]
        y0, t0 = jax.jvp(own, primals, tangents)
        return out, [y0, t0, *jax.vjp(own, *primals)[1](ybar)]

    @jax.jit
    def everything():
        got, want = [], []

        def add(*args):
            g, w = pair(*args)
            got.extend(g)
            want.extend(w)
        for kind in ("ltdl", "ltl"):
            for Hin, dHin, dense in ((H, dH, True), (Hc, dHc, False)):
                add(lambda H: ltdl.factor(model, H, kind=kind).vals,
                    ltdl._plain(ltdl._factor_kernel(pl, kind, dense)), (Hin,), (dHin,))
                own_fs = ltdl._plain(ltdl._factor_solve_kernel(pl, kind, dense))
                rule = lambda H, x: ltdl.factor_solve(model, H, x, kind=kind)
                add(rule, own_fs, (Hin, B), (dHin, dB))
                add(lambda x: rule(Hin, x), lambda x: own_fs(Hin, x), (b,), (db,))
                add(lambda H: rule(H, b), lambda H: own_fs(H, b), (Hin,), (dHin,))
            vals = ltdl.factor(model, Hc, kind=kind).vals
            dvals = jax.jvp(lambda H: ltdl.factor(model, H, kind=kind).vals, (Hc,), (dHc,))[1]
            own_solve = ltdl._plain(ltdl._solve_kernel(pl, kind, "solve"))
            rule = lambda v, x: ltdl.solve(model, ltdl.Factor(v, kind), x)
            add(rule, own_solve, (vals, B), (dvals, dB))
            add(lambda v: rule(v, b), lambda v: own_solve(v, b), (vals,), (dvals,))
            add(lambda x: rule(vals, x), lambda x: own_solve(vals, x), (b,), (db,))
        return got, want

    got, want = everything()
    assert len(got) == len(want) == 2 * (2 * 13 + 10)   # kinds x (two H forms x 13 + solve 10)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-11 * float(jnp.abs(w).max()))
