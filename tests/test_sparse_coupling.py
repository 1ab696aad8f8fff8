"""The branch-sparse iteration matrix is exact for every model, or refuses:
force elements that couple two branches are corrected for exactly (they
declare the DoFs they couple), a control that couples two branches stops the
run with a clear status; never a silent difference from the dense matrix."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxmbd
from jaxmbd import forces, integrators as I, models
from jaxmbd.odes import ChartODE, IterationMatrix, SparseIterationMatrix
from jaxmbd import Start, Inputs, Steps, Save


def _cross_spring_tree():
    """A stiff damped spring between two leaves on different branches: a force that couples two branches."""
    b = models.binary_tree_builder(3)
    b.add_spring("node4", (0.1, 0, 0), "node7", (0.1, 0, 0), stiffness=5e3, damping=50.0)
    return b.build()


@jax.jit
def _both(model, q0, v0, t, hg, r, x=None):
    """S⁻¹ r and J1 x by the sparse and the dense iteration matrix (x defaults
    to r), and the sparse one's exactness flag."""
    x = r if x is None else x
    ode = ChartODE(model, q0)
    g0, J1, J2 = ode.g_and_jac(t, jnp.zeros_like(v0), v0)
    sparse = SparseIterationMatrix.build(ode, t, v0, g0, hg)
    return sparse.solve_S(r), IterationMatrix.build(J1, J2, hg).solve_S(r), sparse.J1mv(x), J1 @ x, sparse.exact


def _state(model, seed):
    rng = np.random.default_rng(seed)
    return (jnp.asarray(0.4 * rng.normal(size=model.nq)), jnp.asarray(rng.normal(size=model.nv)),
            jnp.asarray(rng.normal(size=model.nv)))


@pytest.mark.long
def test_the_reproduction_is_exact():
    m = _cross_spring_tree()
    q0, v0, r = _state(m, 0)
    # the couplings the spring declares: every DoF that moves node4 or node7
    (group,) = forces.couplings(m)
    assert set(group) == {m.body_id(n) for n in ("node1", "node2", "node4", "node3", "node7")}
    xs, xd, _, _, exact = _both(m, q0, v0, jnp.asarray(0.0), jnp.asarray(0.02), r)
    assert bool(exact)
    np.testing.assert_allclose(xs, xd, rtol=1e-12, atol=1e-12 * float(jnp.abs(xd).max()))
    # and the integration: sparse = dense, where dropping the coupling once departed by 2.5e-3 rad in 0.05 s
    runs = [jaxmbd.simulate(m, Start(q0, v0), 0.05, integrator=I.RosenbrockNystrom4(linear_solver=ls),
                            steps=Steps(rtol=1e-8, atol=1e-8)) for ls in ("dense", "sparse")]
    assert [int(s.status) for s in runs] == [0, 0]
    np.testing.assert_allclose(runs[1].qs, runs[0].qs, rtol=0, atol=1e-9)


@pytest.mark.long
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
        xs, xd, _, _, exact = _both(m, q0, v0, jnp.asarray(0.1), jnp.asarray(0.01), r)
        assert bool(exact)
        np.testing.assert_allclose(xs, xd, rtol=1e-12, atol=1e-12 * float(jnp.abs(xd).max()))
    assert checked_cross >= 2  # most draws do couple two branches


@pytest.mark.long
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
    b.set_contact_options(law="penalty")      # the sparse iteration matrix takes forces of the state alone
    m = b.build()
    assert set(map(frozenset, _contact_pairs(m))) >= {frozenset(("s4", "s7")), frozenset(("floor", "s5"))}
    q0, v0, r = _state(m, 4)
    c = jaxmbd.contact_forces(m, q0, v0)
    active = {tuple(sorted(c["pairs"][int(k)])) for k in np.asarray(c["pair"])[np.asarray(c["normal_force"]) > 0]}
    assert {("s4", "s7"), ("floor", "s5")} <= active
    xs, xd, _, _, exact = _both(m, q0, v0, jnp.asarray(0.0), jnp.asarray(0.02), r)
    assert bool(exact)
    np.testing.assert_allclose(xs, xd, rtol=1e-12, atol=1e-12 * float(jnp.abs(xd).max()))
    ode = ChartODE(m, q0)
    _, J1, J2 = ode.g_and_jac(jnp.asarray(0.0), jnp.zeros_like(v0), v0)
    H = jaxmbd.mass_matrix(m, q0)
    off = ~np.asarray(_pattern(m))
    assert float(jnp.abs(H @ J1)[off].max()) > 1e-3 * float(jnp.abs(H @ J1).max())


def _dumbbell():
    """A free body with a ball-jointed arm and a hinged hand, a sphere on
    the body and on the hand, over a floor."""
    b = jaxmbd.ModelBuilder()
    b.add_body("torso", "world", "free", mass=2.0, inertia=(0.02, 0.03, 0.04))
    b.add_body("arm", "torso", "spherical", pos=(0.2, 0, 0), mass=0.5, com=(0.15, 0, 0), inertia=(0.002, 0.004, 0.005),
               damping=0.05)
    b.add_body("hand", "arm", "revolute", axis=(0, 0.6, 0.8), pos=(0.3, 0, 0), mass=0.2, com=(0.05, 0.01, 0),
               inertia=(0.001, 0.001, 0.001))
    b.add_geom("world", "plane", name="floor")
    b.add_geom("torso", "sphere", 0.1, name="body")
    b.add_geom("hand", "sphere", 0.05, pos=(0.1, 0, 0), name="hand")
    b.set_contact_options(law="penalty")      # the sparse iteration matrix takes forces of the state alone
    return b.build()


@pytest.mark.long
def test_ball_and_free_joints_with_contact():
    """Rotations (a free root, a ball joint) have their own chart terms in
    the iteration matrix (v = Jr(y) y'): the sparse S⁻¹ r and J1 x equal the
    dense ones to 1e-12 at random states with both spheres pressed into the
    floor."""
    m = _dumbbell()
    rng = np.random.default_rng(3)
    on_floor = np.array(["floor" in p for p in _contact_pairs(m)])
    assert on_floor.sum() == 2
    for seed in range(2):
        _, v0, r = _state(m, 10 + seed)
        rot = Rotation.from_rotvec(0.3 * rng.normal(size=3)).as_quat(scalar_first=True)
        arm = Rotation.from_rotvec([0.1 * rng.normal(), 0.4, 0.1 * rng.normal()]).as_quat(scalar_first=True)
        q0 = jnp.concatenate([jnp.zeros(3), rot, arm, jnp.asarray([rng.normal()])])
        d0 = np.asarray(jaxmbd.contact_forces(m, q0, v0)["dist"])[on_floor]
        q0 = q0.at[2].set(-d0.max() - 0.01)                       # both spheres pressed into the floor
        c = jaxmbd.contact_forces(m, q0, v0)
        assert float(jnp.min(c["normal_force"][on_floor])) > 0
        x = jnp.asarray(rng.normal(size=m.nv))
        xs, xd, J1s, J1d, exact = _both(m, q0, 3.0 * v0, jnp.asarray(0.0), jnp.asarray(0.02), r, x)
        assert bool(exact)
        np.testing.assert_allclose(xs, xd, rtol=0, atol=1e-12 * float(jnp.abs(xd).max()))
        np.testing.assert_allclose(J1s, J1d, rtol=0, atol=1e-12 * float(jnp.abs(J1d).max()))


@pytest.mark.slow
def test_ball_and_free_joints_through_contact_onset():
    """A Rosenbrock run of the dumbbell dropped spinning onto the floor (its
    arm swinging on the ball joint) with the sparse matrix equals the dense run."""
    d = _dumbbell()
    q0 = jaxmbd.neutral_q(d).at[2].set(0.15)
    v0 = jnp.array([0.3, 0.0, -1.0, 1.0, 2.0, 3.0, 0.0, 4.0, -2.0, 1.0])
    obs = lambda model, q, v: jnp.min(jaxmbd.contact_forces(model, q, v)["dist"])   # noqa: E731
    runs = [jaxmbd.simulate(d, Start(q0, v0), 0.2, integrator=I.RosenbrockNystrom4(linear_solver=ls),
                            steps=Steps(rtol=1e-6, atol=1e-6), save=Save(ts=jnp.linspace(0.0, 0.2, 21), observe=obs)) for ls in ("dense", "sparse")]
    assert [int(s.status) for s in runs] == [0, 0]
    assert float(jnp.min(runs[0].obs)) < 0                          # it did touch the floor
    np.testing.assert_allclose(runs[1].qs, runs[0].qs, rtol=0, atol=1e-9)


def _contact_pairs(m):
    return [e for e in m.forces if isinstance(e, forces.Contact)][0].pair_list()


def _pattern(m):
    on = np.zeros((m.nv, m.nv), bool)
    on[m.topo.M_rows, m.topo.M_cols] = True
    return on | on.T


@pytest.mark.long
def test_a_control_that_couples_two_branches_is_refused():
    m = models.binary_tree(3)
    i, j = m.body_id("node4"), m.body_id("node7")
    couple = lambda t, q, v, p: (jnp.zeros(m.nv).at[i].set(-p * (q[i] - q[j]))   # noqa: E731
                                 .at[j].set(-p * (q[j] - q[i])))
    q0, v0, _ = _state(m, 1)
    kw = dict(integrator=I.RosenbrockNystrom4(linear_solver="sparse"), steps=Steps(rtol=1e-6, atol=1e-6))
    on, off = jnp.asarray(30.0), jnp.asarray(0.0)   # arrays: the runs below share their programs
    bad = jaxmbd.simulate(m, Start(q0, v0), 0.05, inputs=Inputs(tau=couple, params=on), **kw)
    assert int(bad.status) == I.SPARSE_COUPLING
    assert "use linear_solver='dense'" in jaxmbd.status_name(bad.status)
    assert int(bad.stats["accepted"]) == 0
    # the same control without the coupling term integrates (and agrees with dense)
    ok = jaxmbd.simulate(m, Start(q0, v0), 0.05, inputs=Inputs(tau=couple, params=off), **kw)
    ref = jaxmbd.simulate(m, Start(q0, v0), 0.05, inputs=Inputs(tau=couple, params=off),
                          **dict(kw, integrator=I.RosenbrockNystrom4()))
    assert int(ok.status) == 0 and int(ref.status) == 0
    np.testing.assert_allclose(ok.qs, ref.qs, rtol=0, atol=1e-9)
    # the dense matrix integrates the coupled control
    assert int(jaxmbd.simulate(m, Start(q0, v0), 0.05, inputs=Inputs(tau=couple, params=on),
                               **dict(kw, integrator=I.RosenbrockNystrom4())).status) == 0


def test_the_sparse_matrix_refuses_soft_rows():
    """MuJoCo's soft constraints (the default law) do not enter the inverse dynamics the sparse
    matrix is built from: linear_solver="sparse" refuses such a model by name."""
    b = jaxmbd.ModelBuilder()
    b.add_body("ball", joint="free", mass=1.0, inertia=np.eye(3) * 0.004, pos=(0, 0, 0.09))
    b.add_geom("world", "plane", name="floor")
    b.add_geom("ball", "sphere", 0.1, name="ball")
    m = b.build()
    with pytest.raises(ValueError, match="soft-constraint rows"):
        jaxmbd.simulate(m, t1=0.01, integrator=I.RosenbrockNystrom4(linear_solver="sparse"))
