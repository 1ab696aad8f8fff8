"""Built-in models: the topologies of Featherstone, "Efficient factorization of
the joint-space inertia matrix for branched kinematic trees" (IJRR 24(6), 2005),
and closed-form dynamics."""

import numpy as np
import pytest

import jax.numpy as jnp
import jaxmbd
from jaxmbd import models
from jaxmbd import Steps


def D1(model):
    return int(np.sum(model.topo.dof_depth - 1))


def D2(model):
    d = model.topo.dof_depth
    return int(np.sum(d * (d - 1) // 2))


def test_humanoid30_is_the_seed_mechanism():
    m = models.humanoid30()
    assert (m.n_bodies, m.nq, m.nv) == (25, 31, 30)
    assert m.topo.jtype.count("revolute") == 24 and m.topo.jtype[0] == "free"
    # Featherstone 2005, §6: expanded λ (1-based, 0 = base)
    lam = [0, 1, 2, 3, 4, 5] + sum(([6] + list(range(7 + 6 * l, 12 + 6 * l)) for l in range(4)), [])
    np.testing.assert_array_equal(m.dof_parent, np.array(lam) - 1)
    assert (D1(m), D2(m)) == (219, 1039)
    assert 2 * D1(m) + m.nv == 468 and m.topo.nM == 249  # nnz(H); MuJoCo's nM
    # body graph: depth and subtree sizes (torso: everything; each limb: 6, 5, ..., 1)
    assert list(m.topo.depth) == [1] + [2, 3, 4, 5, 6, 7] * 4
    assert list(m.topo.subtree_size) == [25] + [6, 5, 4, 3, 2, 1] * 4


@pytest.mark.parametrize("n", [1, 5, 30])
def test_chain(n):
    m = models.chain(n)
    assert m.nv == n and list(m.dof_parent) == list(range(-1, n - 1))
    assert (D1(m), D2(m)) == ((n * n - n) // 2, (n ** 3 - n) // 6)  # seed Table 2


@pytest.mark.parametrize("levels", [1, 4, 8])
def test_binary_tree(levels):
    m = models.binary_tree(levels)
    assert m.n_bodies == 2 ** levels - 1 and m.topo.max_depth == levels
    mm = levels
    assert D1(m) == sum(i * 2 ** i for i in range(1, mm))
    assert D2(m) == sum(i * (i + 1) * 2 ** (i - 1) for i in range(1, mm))


@pytest.mark.parametrize("mm", [1, 4, 16])
def test_grid_tree(mm):
    m = models.grid_tree(mm)
    assert m.n_bodies == mm * mm
    depth = {name: d for name, d in zip(m.body_names, m.topo.depth)}
    assert all(depth[f"g{r}_{c}"] == r + c + 1 for r in range(mm) for c in range(mm))
    assert D1(m) == mm ** 3 - mm ** 2 and D2(m) == (7 * mm ** 4 - 6 * mm ** 3 - mm ** 2) // 12


def test_side_branch_chain():
    m = models.side_branch_chain(6)
    assert m.n_bodies == 12 and D1(m) == 36 and D2(m) == (2 * 216 + 3 * 36 + 6) // 6


def test_random_tree_is_reproducible_and_regular():
    a, b = models.random_tree(5, 9), models.random_tree(5, 9)
    assert a.topo == b.topo and hash(a.topo) == hash(b.topo)
    np.testing.assert_array_equal(a.mass, b.mass)
    assert all(p < i for i, p in enumerate(a.topo.parent))


def test_level_schedule():
    """Nodes (DoFs) are grouped by depth; parent/child slot tables are consistent."""
    for m in (models.binary_tree(4), models.humanoid30(), models.random_tree(7, 8, root_joint="free")):
        t = m.topo
        W = t.level_width
        assert t.level_node.shape == (t.n_levels, W) and t.n_levels == t.dof_depth.max()
        seen = []
        for l in range(t.n_levels):
            nodes = np.flatnonzero(t.dof_depth == l + 1)
            k = len(nodes)
            np.testing.assert_array_equal(t.level_node[l, :k], nodes)
            seen += list(nodes)
            if l > 0:  # parent slots point at the parents in the level above
                np.testing.assert_array_equal(t.level_node[l - 1][t.level_parent_slot[l, :k]], t.dof_parent[nodes])
            # child slots list exactly each node's children
            for slot, node in enumerate(nodes):
                kids = t.level_child_slot[l, slot]
                kids = sorted(t.level_node[l + 1][kids[kids < W]]) if l + 1 < t.n_levels else []
                assert kids == sorted(np.flatnonzero(t.dof_parent == node))
            # padding slots replicate slot 0 (so they compute what it computes)
            assert np.all(t.level_node[l, k:] == t.level_node[l, 0])
            assert np.all(t.level_parent_slot[l, k:] == t.level_parent_slot[l, 0])
            assert np.all(t.level_child_slot[l, k:] == t.level_child_slot[l, 0])
        assert sorted(seen) == list(range(m.nv))
    assert models.binary_tree(4).topo.level_width == 8
    assert models.humanoid30().topo.n_levels == 12  # 6 base DoFs + 6 limb links


def test_pendulum_closed_form():
    L, M, g = 0.7, 1.3, 9.81
    m = models.pendulum(length=L, mass=M, gravity=g)
    I = M * L * L + 0.4 * M * (1e-3 * L) ** 2
    for th, w in [(0.3, 0.0), (-1.2, 2.0), (2.5, -1.0)]:
        qdd = jaxmbd.forward_dynamics(m, jnp.array([th]), jnp.array([w]), jnp.zeros(1))
        # about +y, gravity along -z, bob at -L z: torque = -M g L sin(th)
        np.testing.assert_allclose(qdd[0], -M * g * L * np.sin(th) / I, rtol=1e-13)


def test_double_pendulum_closed_form():
    """Point-mass double pendulum (Lagrange), bob inertias negligible but included."""
    l1, l2, m1, m2, g = 1.1, 0.8, 1.5, 0.7, 9.81
    m = models.double_pendulum(l1, l2, m1, m2, g)
    r = 1e-3
    i1, i2 = 0.4 * m1 * r * r, 0.4 * m2 * r * r
    rng = np.random.default_rng(0)
    for _ in range(3):
        t1, t2, w1, w2, u1, u2 = rng.normal(size=6)
        d = t2  # relative angle; both joints about +y, angles measured from hanging
        H = np.array([[m1 * l1**2 + m2 * (l1**2 + l2**2 + 2 * l1 * l2 * np.cos(d)) + i1 + i2,
                       m2 * (l2**2 + l1 * l2 * np.cos(d)) + i2],
                      [m2 * (l2**2 + l1 * l2 * np.cos(d)) + i2, m2 * l2**2 + i2]])
        h = m2 * l1 * l2 * np.sin(d)
        c = np.array([-h * (2 * w1 * w2 + w2**2), h * w1**2])
        gq = np.array([(m1 + m2) * g * l1 * np.sin(t1) + m2 * g * l2 * np.sin(t1 + t2),
                       m2 * g * l2 * np.sin(t1 + t2)])
        q, v, tau = jnp.array([t1, t2]), jnp.array([w1, w2]), jnp.array([u1, u2])
        np.testing.assert_allclose(jaxmbd.mass_matrix(m, q), H, rtol=1e-13)
        np.testing.assert_allclose(jaxmbd.bias_force(m, q, v), c + gq, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(jaxmbd.forward_dynamics(m, q, v, tau), np.linalg.solve(H, tau - c - gq), rtol=1e-11)


@pytest.mark.long
def test_the_quadruped_stands_where_its_contact_law_puts_it():
    """The built-in contact scene: started on straight legs just above the
    floor, the quadruped settles on its four feet and nothing else: after 3 s
    they carry its weight (5e-3: the last of the settling), each about a
    quarter (2e-2: four feet on a plane are statically indeterminate and the
    regularized friction lets the stance creep toward symmetry), its joints
    are near the servos' 0, and its torso is at the standing height less the
    foot penetration at which the law's force is a quarter of the weight
    (1e-4 m)."""
    from scipy.optimize import brentq
    from jaxmbd import integrators as I
    from jaxmbd.forces import law
    from jaxmbd import contact_forces
    from jaxmbd.forces.contact import Contact
    import importlib
    Q = importlib.import_module("jaxmbd.models.quadruped")
    m = models.quadruped(drop=1e-3)
    sol = jaxmbd.simulate(m, t1=3.0, integrator=I.RK4(), steps=Steps(dt0=1e-3, max_steps=4000))
    assert int(sol.status) == 0
    q, v = sol.qs[-1], sol.vs[-1]
    f = contact_forces(m, q, v)
    c = [e for e in m.forces if isinstance(e, Contact)][0]
    weight = float(jnp.sum(m.mass)) * 9.81
    on = np.asarray(f["normal_force"]) > 0
    feet = [c.pair_list().index(("floor", f"{leg}_foot")) for leg in Q.HIPS]
    assert sorted(np.asarray(f["pair"])[on].tolist()) == sorted(feet)
    np.testing.assert_allclose(float(jnp.sum(f["normal_force"])), weight, rtol=5e-3)
    np.testing.assert_allclose(np.asarray(f["normal_force"])[on], weight / 4, rtol=2e-2)
    k = feet[0]
    delta = brentq(lambda d: float(law.normal_force(d, 0.0, c.stiffness[k], c.exponent[k], c.damping[k],
                                                    c.width[k], c.viscous[k])) - weight / 4, 0.0, 0.05)
    np.testing.assert_allclose(float(q[2]), Q.STAND_HEIGHT - delta, atol=1e-4)
    assert float(jnp.max(jnp.abs(q[7:]))) < 1e-2
