"""The branch-sparse iteration matrix is exact for every model, or refuses:
force elements that couple two branches are corrected for exactly (they
declare the DoFs they couple), a control that couples two branches stops the
run with a clear status; never a silent difference from the dense matrix."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import forces, integrators as I, models
from jaxmbd.odes import ChartODE, IterationMatrix, SparseIterationMatrix


def _cross_spring_tree():
    """The reproduction of issue 18: a stiff damped spring between two leaves on different branches."""
    b = models.binary_tree_builder(3)
    b.add_spring("node4", (0.1, 0, 0), "node7", (0.1, 0, 0), stiffness=5e3, damping=50.0)
    return b.build()


@jax.jit
def _both(model, q0, v0, t, hg, r):
    """S⁻¹ r by the sparse and the dense iteration matrix, and the sparse one's exactness flag."""
    ode = ChartODE(model, q0)
    g0, J1, J2 = ode.g_and_jac(t, jnp.zeros_like(v0), v0)
    sparse = SparseIterationMatrix.build(ode, t, v0, g0, hg)
    return sparse.solve_S(r), IterationMatrix.build(J1, J2, hg).solve_S(r), sparse.exact


def _state(model, seed):
    rng = np.random.default_rng(seed)
    return (jnp.asarray(0.4 * rng.normal(size=model.nq)), jnp.asarray(rng.normal(size=model.nv)),
            jnp.asarray(rng.normal(size=model.nv)))


def test_the_reproduction_is_exact():
    m = _cross_spring_tree()
    q0, v0, r = _state(m, 0)
    # the couplings the spring declares: every DoF that moves node4 or node7
    (group,) = forces.couplings(m)
    assert set(group) == {m.body_id(n) for n in ("node1", "node2", "node4", "node3", "node7")}
    xs, xd, exact = _both(m, q0, v0, jnp.asarray(0.0), jnp.asarray(0.02), r)
    assert bool(exact)
    np.testing.assert_allclose(xs, xd, rtol=1e-12, atol=1e-12 * float(jnp.abs(xd).max()))
    # and the integration: sparse = dense, where dropping the coupling once departed by 2.5e-3 rad in 0.05 s
    runs = [jaxmbd.simulate(m, q0, v0, 0.0, 0.05, integrator=I.RosenbrockNystrom4(linear_solver=ls), rtol=1e-8,
                            atol=1e-8) for ls in ("dense", "sparse")]
    assert [int(s.status) for s in runs] == [0, 0]
    np.testing.assert_allclose(runs[1].qs, runs[0].qs, rtol=0, atol=1e-9)


def test_random_trees_with_random_cross_branch_springs():
    """Random trees, springs between random pairs of bodies (some on one
    branch, some across): sparse = dense to 1e-12 in every case."""
    checked_cross = 0
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        b = models.random_tree_builder(seed + 11, 9, joint_types=("revolute", "prismatic", "helical"))
        names = [f"b{i}" for i in range(9)]
        for k in range(3):
            a, c = rng.choice(len(names), size=2, replace=False)
            b.add_spring(names[a], tuple(0.1 * rng.normal(size=3)), names[c], tuple(0.1 * rng.normal(size=3)),
                         stiffness=float(rng.uniform(1e2, 1e4)), damping=float(rng.uniform(1.0, 50.0)),
                         rest_length=0.05)
        m = b.build()
        on = np.zeros((m.nv, m.nv), bool)
        on[m.topo.M_rows, m.topo.M_cols] = True
        on |= on.T
        checked_cross += any(not on[np.ix_(g, g)].all() for g in forces.couplings(m))
        q0, v0, r = _state(m, seed)
        xs, xd, exact = _both(m, q0, v0, jnp.asarray(0.1), jnp.asarray(0.01), r)
        assert bool(exact)
        np.testing.assert_allclose(xs, xd, rtol=1e-12, atol=1e-12 * float(jnp.abs(xd).max()))
    assert checked_cross >= 2  # most draws do couple two branches


def test_contact_keeps_the_sparse_matrix_exact():
    """Contact: a leaf's sphere pressed into a floor plane depends only on its
    own branch (the pattern holds); two leaves of different branches pressed
    into each other couple the branches, which the Contact element declares:
    with both active the sparse iteration matrix equals the dense one (1e-12),
    and the dense one does have entries off the branch pattern (not vacuous)."""
    b = models.binary_tree_builder(3)
    b.add_geom("world", "plane", pos=(0, 0, 5.0), name="floor")
    b.add_geom("node5", "sphere", 10.0, name="s5")                  # always below the floor plane: in contact
    b.add_geom("node4", "sphere", 3.0, name="s4")                   # big spheres: always overlapping
    b.add_geom("node7", "sphere", 3.0, name="s7")
    b.exclude_contact("node4", "world")
    b.exclude_contact("node7", "world")
    m = b.build()
    assert set(map(frozenset, _contact_pairs(m))) >= {frozenset(("s4", "s7")), frozenset(("floor", "s5"))}
    q0, v0, r = _state(m, 4)
    c = jaxmbd.forces.contact_forces(m, q0, v0)
    active = {tuple(sorted(c["pairs"][int(k)])) for k in np.asarray(c["pair"])[np.asarray(c["normal_force"]) > 0]}
    assert {("s4", "s7"), ("floor", "s5")} <= active
    xs, xd, exact = _both(m, q0, v0, jnp.asarray(0.0), jnp.asarray(0.02), r)
    assert bool(exact)
    np.testing.assert_allclose(xs, xd, rtol=1e-12, atol=1e-12 * float(jnp.abs(xd).max()))
    ode = ChartODE(m, q0)
    _, J1, J2 = ode.g_and_jac(jnp.asarray(0.0), jnp.zeros_like(v0), v0)
    H = jaxmbd.mass_matrix(m, q0)
    off = ~np.asarray(_pattern(m))
    assert float(jnp.abs(H @ J1)[off].max()) > 1e-3 * float(jnp.abs(H @ J1).max())


def _contact_pairs(m):
    return [e for e in m.forces if isinstance(e, forces.Contact)][0].pair_list()


def _pattern(m):
    on = np.zeros((m.nv, m.nv), bool)
    on[m.topo.M_rows, m.topo.M_cols] = True
    return on | on.T


def test_a_control_that_couples_two_branches_is_refused():
    m = models.binary_tree(3)
    i, j = m.body_id("node4"), m.body_id("node7")
    couple = lambda t, q, v, p: (jnp.zeros(m.nv).at[i].set(-p * (q[i] - q[j]))   # noqa: E731
                                 .at[j].set(-p * (q[j] - q[i])))
    q0, v0, _ = _state(m, 1)
    kw = dict(integrator=I.RosenbrockNystrom4(linear_solver="sparse"), control=couple, rtol=1e-6, atol=1e-6)
    on, off = jnp.asarray(30.0), jnp.asarray(0.0)   # arrays: the runs below share their programs
    bad = jaxmbd.simulate(m, q0, v0, 0.0, 0.05, params=on, **kw)
    assert int(bad.status) == I.SPARSE_COUPLING
    assert "use linear_solver='dense'" in jaxmbd.status_name(bad.status)
    assert int(bad.stats["accepted"]) == 0
    # the same control without the coupling term integrates (and agrees with dense)
    ok = jaxmbd.simulate(m, q0, v0, 0.0, 0.05, params=off, **kw)
    ref = jaxmbd.simulate(m, q0, v0, 0.0, 0.05, params=off, **dict(kw, integrator=I.RosenbrockNystrom4()))
    assert int(ok.status) == 0 and int(ref.status) == 0
    np.testing.assert_allclose(ok.qs, ref.qs, rtol=0, atol=1e-9)
    # the dense matrix integrates the coupled control
    assert int(jaxmbd.simulate(m, q0, v0, 0.0, 0.05, params=on,
                               **dict(kw, integrator=I.RosenbrockNystrom4())).status) == 0
