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
    L = np.asarray(ltdl.to_dense_lower(model, F.P))
    d = np.asarray(F.P[:, 0])
    np.testing.assert_allclose(L.T @ np.diag(d) @ L, H, rtol=0, atol=1e-12 * np.abs(H).max())
    assert np.all(L[~ancestor_pattern(model)] == 0.0)
    assert np.all(d > 0)
    # LᵀL: sqrt(D) L, and equal to the seed's in-situ LTL run in NumPy
    G = np.asarray(ltdl.to_dense_lower(model, ltdl.factor(model, H, kind="ltl").P, unit=False))
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
    """For a chain, LᵀL = (R Gᵀ R)ᵀ (R Gᵀ R) with R H R = G Gᵀ (seed §3)."""
    model = models.chain(9)
    H, _ = _H(model, 1)
    R = np.eye(9)[::-1]
    G = np.linalg.cholesky(R @ H @ R)
    L = np.asarray(ltdl.to_dense_lower(model, ltdl.factor(model, H, kind="ltl").P, unit=False))
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
    np.testing.assert_allclose(ltdl.to_mujoco_csr(model, ltdl.to_rows(model, Hc)), d.M, rtol=1e-12, atol=1e-14)
    F = ltdl.factor(model, Hc)
    np.testing.assert_allclose(ltdl.to_mujoco_csr(model, F.P), d.qLD, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(1.0 / F.P[:, 0], d.qLDiagInv, rtol=1e-10)
    np.testing.assert_array_equal(ltdl.from_mujoco_csr(model, ltdl.to_mujoco_csr(model, F.P)), F.P)
    np.testing.assert_array_equal(ltdl.to_legacy(model, ltdl.from_legacy(model, Hc)), Hc)
    rng = np.random.default_rng(0)
    y = rng.normal(size=(3, model.nv))
    x = np.zeros_like(y)
    mujoco.mj_solveM(mj, d, x, y)
    np.testing.assert_allclose(ltdl.solve(model, F, y.T).T, x, rtol=1e-10, atol=1e-12)


def test_grads_through_factor_and_solve():
    model = perturb(base_tree(2), 3)
    H, _ = _H(model, 3)
    H = H + np.eye(model.nv)  # same pattern, better conditioned: finite differences stay accurate
    b = np.random.default_rng(1).normal(size=model.nv)
    f = lambda H, b: ltdl.solve(model, ltdl.factor(model, 0.5 * (H + H.T)), b)
    check_grads(f, (jnp.asarray(H), jnp.asarray(b)), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    g = lambda H: ltdl.factor(model, 0.5 * (H + H.T), kind="ltl").P
    check_grads(g, (jnp.asarray(H),), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


def test_bad_inputs():
    model = base_tree(0)
    with pytest.raises(ValueError, match="H has shape"):
        ltdl.factor(model, np.eye(3))
    with pytest.raises(ValueError, match="unknown factorization kind"):
        ltdl.factor(model, np.eye(model.nv), kind="lu")


@pytest.mark.parametrize("topo", [0, 3])
def test_products_and_triangular_solves(topo):
    model = perturb(base_tree(topo), topo + 20)
    H, q = _H(model, topo + 20)
    rng = np.random.default_rng(topo)
    X = rng.normal(size=(model.nv, 3))
    for kind in ("ltdl", "ltl"):
        F = ltdl.factor(model, H, kind=kind)
        L = np.asarray(ltdl.to_dense_lower(model, F.P, unit=(kind == "ltdl")))
        np.testing.assert_allclose(ltdl.mul_L(model, F, X), L @ X, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ltdl.mul_Lt(model, F, X), L.T @ X, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ltdl.solve_L(model, F, X), np.linalg.solve(L, X), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ltdl.solve_Lt(model, F, X), np.linalg.solve(L.T, X), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ltdl.solve(model, F, X), np.linalg.solve(H, X), rtol=1e-10, atol=1e-12)
        y = np.asarray(ltdl.half_solve(model, F, X))
        np.testing.assert_allclose(y.T @ y, X.T @ np.linalg.solve(H, X), rtol=1e-10, atol=1e-12)
    Hc = jaxmbd.mass_matrix_compact(model, q)
    np.testing.assert_allclose(ltdl.mul_H(model, Hc, X[:, 0]), H @ X[:, 0], rtol=1e-12, atol=1e-12)


def test_forward_dynamics_factorizations_agree_and_auto_rule():
    from jaxmbd.aba import factorization_for
    for model in (perturb(base_tree(0), 7), models.binary_tree(6)):
        q, v, tau = random_state(model, 7)
        ref = jaxmbd.forward_dynamics(model, q, v, tau, method="aba")
        for fz in ("sparse", "dense", "auto"):
            qdd = jaxmbd.forward_dynamics(model, q, v, tau, method="crba", factorization=fz)
            np.testing.assert_allclose(qdd, ref, rtol=1e-9, atol=1e-9, err_msg=fz)
    # the benchmark-backed rule: dense for the humanoid, grid and chains; sparse for big binary trees
    assert factorization_for(models.humanoid30()) == "dense"
    assert factorization_for(models.grid_tree(8)) == "dense"
    assert factorization_for(models.chain(30)) == "dense"
    assert factorization_for(models.binary_tree(6)) == "sparse"
    assert factorization_for(models.binary_tree(8)) == "sparse"
    with pytest.raises(ValueError, match="unknown factorization 'qr'"):
        jaxmbd.forward_dynamics(models.pendulum(), jnp.zeros(1), jnp.zeros(1), jnp.zeros(1), method="crba",
                                factorization="qr")
