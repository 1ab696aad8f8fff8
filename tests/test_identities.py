"""Identities between the algorithms on random trees of every joint type.

Hypothesis draws a topology (from a few, so compiled code is shared), new
physical parameters (damping, armature and springs included) and a state.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, strategies as st

import jaxmbd
from trees import TOPOLOGIES, ancestor_pattern, base_tree, eqx_set, perturb, random_state

topologies = st.sampled_from(sorted(TOPOLOGIES))
seeds = st.integers(0, 2**31 - 1)


def test_trees_cover_every_joint_type():
    seen = set()
    for s in TOPOLOGIES:
        seen |= set(base_tree(s).topo.jtype)
    assert seen == {"revolute", "prismatic", "helical", "spherical", "free", "planar"}
    # and at least one welded body was merged away
    assert any(len(base_tree(s).frame_names) > base_tree(s).n_bodies for s in TOPOLOGIES)


@pytest.mark.long
@given(topologies, seeds)
def test_inverse_of_forward_dynamics(topo, seed):
    model = perturb(base_tree(topo), seed)
    q, v, tau = random_state(model, seed)
    for method in ("aba", "crba"):
        qdd = jaxmbd.forward_dynamics(model, q, v, tau, method=method)
        np.testing.assert_allclose(jaxmbd.inverse_dynamics(model, q, v, qdd), tau, rtol=0, atol=1e-10)


@pytest.mark.long
@given(topologies, seeds)
def test_aba_equals_crba_solve(topo, seed):
    model = perturb(base_tree(topo), seed)
    q, v, tau = random_state(model, seed)
    a1 = jaxmbd.forward_dynamics(model, q, v, tau, method="aba")
    H = np.asarray(jaxmbd.mass_matrix(model, q))
    c = np.asarray(jaxmbd.bias_force(model, q, v))
    a2 = np.linalg.solve(H, np.asarray(tau) - c)  # independent (LAPACK LU) solve
    np.testing.assert_allclose(a1, a2, rtol=1e-9, atol=1e-9)


@given(topologies, seeds)
def test_mass_matrix_spd_and_branch_sparse(topo, seed):
    model = perturb(base_tree(topo), seed)
    q, v, _ = random_state(model, seed)
    H = np.asarray(jaxmbd.mass_matrix(model, q))
    np.testing.assert_array_equal(H, H.T)
    assert np.linalg.eigvalsh(H).min() > 0
    off = ~ancestor_pattern(model)
    assert np.all(H[off] == 0.0)  # exactly zero, never written
    # the pattern is also the true one: entries on it are generically non-zero
    assert np.all(H[~off] != 0.0)
    # compact storage holds exactly the n + D1 pattern entries
    Hc = jaxmbd.mass_matrix_compact(model, q)
    assert Hc.shape == (model.topo.nM,)
    np.testing.assert_array_equal(H[model.topo.M_rows, model.topo.M_cols], np.asarray(Hc))


def _moved(model, seed, far):
    """The model with every tree's root moved ``far`` from its place, in a random direction."""
    rng = np.random.default_rng(seed)
    roots = model.topo.parent_np < 0
    shift = np.where(roots[:, None], far * rng.normal(size=(model.n_bodies, 3)), 0.0)
    return eqx_set(model, "tree_pos", model.tree_pos + shift)


@given(topologies, seeds, st.sampled_from([0.0, 1e3]))
@pytest.mark.long
def test_mass_matrix_from_subtree_sums_in_a_common_frame(topo, seed, far):
    """H from the kinematics (subtree sums of world-aligned inertias, each tree's root as origin)
    equals the CRBA's backward pass, also with every tree moved ``far`` from the world origin
    (each root somewhere else)."""
    from jaxmbd.crba import mass_matrix_compact_from
    model = _moved(perturb(base_tree(topo), seed), seed, far)
    q, _, _ = random_state(model, seed)
    ref = np.asarray(jaxmbd.mass_matrix_compact(model, q))
    got = np.asarray(mass_matrix_compact_from(model, *jaxmbd.kinematics.kinematics_and_axes(model, q)))
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


@pytest.mark.long
@given(topologies, seeds, st.sampled_from([0.0, 1e3]))
def test_inverse_dynamics_in_world_coordinates_is_the_rneas(topo, seed, far):
    """rnea_at (sums over the ancestor and support patterns of world-axis terms, each tree's root as
    origin, from the kinematics) equals the level-recursive RNEA at a random state and acceleration,
    also with every tree moved ``far`` from the world origin."""
    from jaxmbd.rnea import rnea, rnea_at
    model = _moved(perturb(base_tree(topo), seed), seed, far)
    q, v, _ = random_state(model, seed)
    a = jnp.asarray(np.random.default_rng(seed + 1).normal(size=model.nv))
    ref = np.asarray(rnea(model, q, v, a))
    got = np.asarray(rnea_at(model, q, v, a, jaxmbd.kinematics.kinematics_and_axes(model, q)))
    # 1e3 m from the origin, the bodies' world positions (differences taken from the root's) hold
    # three digits fewer
    tol = 1e-12 if far == 0.0 else 1e-10
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol * np.abs(ref).max())


@pytest.mark.long
@given(topologies, seeds)
def test_mass_matrix_by_unit_accelerations(topo, seed):
    """Column j of H = ID(q, 0, e_j) - ID(q, 0, 0) (gravity, springs cancel)."""
    model = perturb(base_tree(topo), seed)
    q, _, _ = random_state(model, seed)
    z = jnp.zeros(model.nv)
    cols = jax.vmap(lambda a: jaxmbd.inverse_dynamics(model, q, z, a))(jnp.eye(model.nv))
    H_id = np.asarray(cols - jaxmbd.inverse_dynamics(model, q, z, z)[None, :]).T
    np.testing.assert_allclose(H_id, jaxmbd.mass_matrix(model, q), rtol=0, atol=1e-11)


@pytest.mark.long
@given(topologies, seeds)
def test_hdot_equals_c_plus_ct(topo, seed):
    model = perturb(base_tree(topo), seed)
    q, v, _ = random_state(model, seed)
    Hdot = jax.jacfwd(lambda t: jaxmbd.mass_matrix(model, jaxmbd.integrate_q(model, q, v, t)))(0.0)
    C = jaxmbd.coriolis_matrix(model, q, v)
    np.testing.assert_allclose(Hdot, C + C.T, rtol=0, atol=1e-10)
    # C v is the velocity-product part of RNEA's bias force
    m0 = _conservative(model, gravity=False)
    np.testing.assert_allclose(C @ v, jaxmbd.bias_force(m0, q, v), rtol=0, atol=1e-10)


def _conservative(model, gravity=True):
    from trees import eqx_set
    m = eqx_set(model, "damping", jnp.zeros_like(model.damping))
    if not gravity:
        m = eqx_set(m, "gravity", jnp.zeros(3))
        m = eqx_set(m, "stiffness", jnp.zeros_like(model.stiffness))
    return m


@given(topologies, seeds)
def test_kinetic_energy(topo, seed):
    model = perturb(base_tree(topo), seed)
    q, v, _ = random_state(model, seed)
    H = jaxmbd.mass_matrix(model, q) - jnp.diag(model.armature)  # armature is rotor, not link, inertia
    np.testing.assert_allclose(jaxmbd.kinetic_energy(model, q, v), 0.5 * v @ H @ v, rtol=1e-12)


def _rk4_step(model, q, v, h):
    """Classical RK4 on (q, v) in the coordinates themselves, q̇ = G(q) v."""
    def f(q, v):
        return jaxmbd.qdot(model, q, v), jaxmbd.forward_dynamics(model, q, v, jnp.zeros(model.nv))
    k1 = f(q, v)
    k2 = f(q + h / 2 * k1[0], v + h / 2 * k1[1])
    k3 = f(q + h / 2 * k2[0], v + h / 2 * k2[1])
    k4 = f(q + h * k3[0], v + h * k3[1])
    return (q + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]),
            v + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))


def _energy_drift(model, q, v, h, steps):
    E = lambda q, v: jaxmbd.kinetic_energy(model, q, v) + jaxmbd.potential_energy(model, q) \
        + 0.5 * v @ (model.armature * v)

    @jax.jit
    def run(q, v):
        def body(c, _):
            return _rk4_step(model, *c, h), None
        return jax.lax.scan(body, (q, v), None, length=steps)[0]
    q1, v1 = run(q, v)
    return abs(float(E(q1, v1) - E(q, v))) / abs(float(E(q, v)))


@pytest.mark.long
def test_energy_conserved_by_accurate_integration():
    """Energy (kinetic + gravity + springs) drifts by O(h^4): halving h cuts the
    drift ~16x, and it is tiny at the finer step; damping makes it fall."""
    model = _conservative(perturb(base_tree(0), 11))
    q, v, _ = random_state(model, 3, scale=0.3)
    d1 = _energy_drift(model, q, v, 2e-3, 100)
    d2 = _energy_drift(model, q, v, 1e-3, 200)
    assert d2 < 1e-9
    assert d1 / d2 > 12  # fourth order: 16x
    damped = perturb(base_tree(0), 11)  # has damping
    E = lambda m, q, v: jaxmbd.kinetic_energy(m, q, v) + jaxmbd.potential_energy(m, q) + 0.5 * v @ (m.armature * v)
    qn, vn = q, v
    for _ in range(20):
        qn, vn = _rk4_step(damped, qn, vn, 1e-3)
    assert E(damped, qn, vn) < E(damped, q, v)


@given(seeds)
def test_structured_transforms_equal_the_plucker_matrix(seed):
    """apply_motion / apply_force_up / inertia_up (3x3 blocks) = products with the 6x6 X."""
    from jaxmbd import spatial
    rng = np.random.default_rng(seed)
    R = jnp.asarray(np.linalg.qr(rng.standard_normal((3, 3)))[0])
    p = jnp.asarray(rng.standard_normal(3))
    m, f = jnp.asarray(rng.standard_normal(6)), jnp.asarray(rng.standard_normal(6))
    A = rng.standard_normal((6, 6))
    I = jnp.asarray(A @ A.T)  # any symmetric matrix (articulated inertias are not rigid-body ones)
    X = spatial.plucker(R, p)
    np.testing.assert_allclose(spatial.apply_motion(R, p, m), X @ m, rtol=0, atol=1e-13)
    np.testing.assert_allclose(spatial.apply_force_up(R, p, f), X.T @ f, rtol=0, atol=1e-13)
    np.testing.assert_allclose(spatial.inertia_up(R, p, I), X.T @ I @ X, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(X.T @ I @ X))))


@given(seeds)
def test_small_products_and_the_cross_matrix(seed):
    """spatial.mm = matmul (batched too); skew(v) u = v x u and skew(v) is antisymmetric."""
    from jaxmbd import spatial
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((4, 3, 5)), rng.standard_normal((4, 5, 2))
    np.testing.assert_allclose(spatial.mm(jnp.asarray(A), jnp.asarray(B)), A @ B, rtol=0, atol=1e-14)
    v, u = rng.standard_normal(3), rng.standard_normal(3)
    K = np.asarray(spatial.skew(jnp.asarray(v)))
    np.testing.assert_allclose(K @ u, np.cross(v, u), rtol=0, atol=1e-14)
    np.testing.assert_array_equal(K, -K.T)
