"""HMMWV14 (jaxmbd.models.hmmwv14) against values computed independently with
NumPy/SciPy from the same Project Chrono HMMWV data (hardpoints, masses and
inertias; see jaxmbd.models.vehicle), and the road, tire and rotational
spring-damper force elements against closed forms and identities."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import dae, forces, integrators, odes
from jaxmbd.constraints import phi_jacobian_tree
from jaxmbd.models import vehicle as V
from jaxmbd import Start, Steps, Save


@pytest.fixture(scope="module")
def baseline():
    return jaxmbd.models.hmmwv14()


@pytest.fixture(scope="module")
def stiff():
    return jaxmbd.models.hmmwv14(stiffened=True)


def test_counts_match_the_thesis(baseline, stiff):
    """27 joint coordinates, 16 cut-joint equations, 11 DOF; the stiffened
    variant 34 / 16 / 18 (rack welded); Φ_q of full rank at the design."""
    assert (baseline.nv, baseline.nc, baseline.nv - baseline.nc) == (27, 16, 11)
    assert (stiff.nv, stiff.nc, stiff.nv - stiff.nc) == (34, 16, 18)
    assert baseline.tree.n_bodies == 14 and stiff.tree.n_bodies == 13   # the rack rides on the chassis
    for m in (baseline, stiff):
        assert float(jnp.abs(jaxmbd.constraint_residual(m, m.q0)).max()) < 1e-12
        G = np.asarray(jaxmbd.constraint_jacobian(m, m.q0))
        assert np.linalg.matrix_rank(G) == 16
        assert float(jnp.abs(jnp.asarray(G) @ m.v0).max()) < 1e-12          # the forward motion is consistent
        assert float(m.tree.mass.sum()) == pytest.approx(2576.924, abs=1e-9)  # Chrono's masses, the spindle merged


def test_geometry_and_inertias_match_the_data_sheet():
    """Geometry and inertias derived independently from Chrono's inch hardpoints."""
    F, R = V.hardpoints("F", 1), V.hardpoints("R", 1)
    np.testing.assert_allclose(F["UCA_F"], (1.641050, 0.445960, 0.244622), atol=1e-6)
    np.testing.assert_allclose(R["TIEROD_U"], (-1.518683, 0.821106, -0.009271), atol=1e-6)
    assert np.linalg.norm(F["TIEROD_U"] - F["TIEROD_C"]) == pytest.approx(0.386537, abs=1e-6)
    assert np.linalg.norm(R["TIEROD_U"] - R["TIEROD_C"]) == pytest.approx(0.414116, abs=1e-6)
    assert np.linalg.norm(F["SPRING_C"] - F["SPRING_A"]) == pytest.approx(0.246463, abs=1e-6)
    assert np.linalg.norm(R["SHOCK_C"] - R["SHOCK_A"]) == pytest.approx(0.364516, abs=1e-6)
    assert F["SPINDLE"][0] - R["SPINDLE"][0] == pytest.approx(3.301984, abs=1e-6)   # wheel-centre wheelbase
    np.testing.assert_allclose(V._arm_inertia(V.UCA_MOMENTS, F, "UCA", 1),
                               [[0.031341, -0.000672, -0.006456], [-0.000672, 0.030337, 0.003236],
                                [-0.006456, 0.003236, 0.061082]], atol=1e-6)
    np.testing.assert_allclose(V._arm_inertia(V.LCA_MOMENTS, F, "LCA", 1),
                               [[0.4, 0, 0], [0, 0.428255, 0.114691], [0, 0.114691, 0.865545]], atol=1e-6)
    m, c, I = V._merged_spindle(F)
    assert m == pytest.approx(90.555)
    np.testing.assert_allclose(c - F["SPINDLE"], (0, -0.034084, 0), atol=1e-6)
    np.testing.assert_allclose(I, np.diag([4.894751, 7.581220, 4.772821]), atol=1e-6)
    e1, e2 = V._bushing_directions(F, 1)
    np.testing.assert_allclose(e1, (-0.202304, 0.101415, 0.974058), atol=1e-6)
    np.testing.assert_allclose(e2, (0.157627, 0.985027, -0.069819), atol=1e-6)
    e1, e2 = V._bushing_directions(R, 1)
    np.testing.assert_allclose(e1, (-0.014096, 0.028699, 0.999489), atol=1e-6)
    np.testing.assert_allclose(e2, (-0.000361, 0.999588, -0.028707), atol=1e-6)
    T = F["UCA_B"] + 0.3162 * (F["UCA_F"] - F["UCA_B"])
    np.testing.assert_allclose(T, (1.490410, 0.467689, 0.211073), atol=1e-6)


@pytest.mark.long
def test_the_initial_state_is_the_static_equilibrium(baseline, stiff):
    """At rest the constrained accelerations vanish; the baseline rests where
    an independent NumPy/SciPy static solve puts it (chassis COM
    z 0.687838 m, pitch 0.0233° nose down, tire loads 6518.8 / 6121.0 N,
    springs at their design lengths)."""
    for m in (baseline, stiff):
        a, _ = jaxmbd.constrained_dynamics(m, m.q0, jnp.zeros(m.nv))
        assert float(jnp.abs(a).max()) < 1e-7
        qt = m.to_tree(m.q0)
        fz = np.asarray(forces.tire_forces(m.tree, qt, jnp.zeros(m.nv)))
        assert fz.sum() == pytest.approx(2576.924 * 9.81, rel=1e-9)       # they carry the weight
    qt = baseline.to_tree(baseline.q0)
    kin = jaxmbd.forward_kinematics(baseline.tree, qt)
    com = kin.pos[0] + kin.rot[0] @ baseline.tree.com[0]
    assert float(com[2]) == pytest.approx(0.687838, abs=2e-6)
    pitch = math.degrees(2 * math.atan2(float(baseline.q0[5]), float(baseline.q0[3])))
    assert pitch == pytest.approx(0.0233, abs=1e-4)
    fz = np.asarray(forces.tire_forces(baseline.tree, qt, jnp.zeros(baseline.nv)))
    np.testing.assert_allclose(fz, [6518.8, 6518.8, 6121.0, 6121.0], atol=0.1)
    L = np.asarray(forces.spring_lengths(baseline.tree, qt))[[0, 4]]            # the front and rear springs
    np.testing.assert_allclose(L, [0.246463, 0.306016], atol=2e-6)


@pytest.mark.slow
def test_the_stiffened_spectrum(stiff):
    """The linearization of the stiffened variant's state-space ODE at rest
    (forward-mode Jacobians J1, J2 through the recovery): an independent
    NumPy eigen-analysis gives the bushing modes -2.585e5,
    -2.582e5 (the thesis: about -2.6e5) and the body modes -3.63 ± 7.28i,
    -7.11 ± 10.74i, -9.27 ± 12.84i."""
    qt = stiff.to_tree(stiff.q0)
    P = dae.partition(phi_jacobian_tree(stiff, qt))
    ode = odes.ConstrainedChartODE(stiff, qt, P["dep"], P["ind"])
    y0 = jnp.zeros(18)
    _, J1, J2 = jax.jit(ode.g_and_jac)(0.0, y0, y0)
    A = np.block([[np.zeros((18, 18)), np.eye(18)], [np.asarray(J1), np.asarray(J2)]])
    ev = np.linalg.eigvals(A)
    ev = ev[np.argsort(ev.real)]
    np.testing.assert_allclose(ev[:2].real, [-2.585e5, -2.582e5], rtol=2e-3)
    assert np.abs(ev[:2].imag).max() < 1e-3 * 2.6e5
    for lam in (-3.63 + 7.28j, -7.11 + 10.74j, -9.27 + 12.84j):
        assert np.min(np.abs(ev - lam)) < 0.02, lam
    assert np.sum(np.abs(ev) < 1e-4 * np.abs(ev).max()) >= 6 - 2   # the neutral rigid-body modes (x, y, yaw)


def test_enveloped_bump_profile():
    """The enveloped road (wheel-centre locus of a disc of radius r0 rolling over the
    half-cylinder): s* = √(2 r0 R + R²) = 0.222463 m, crest 0.05 m, slope
    jumps ±0.47343 at entry and exit, continuity, and h' = dh/dx."""
    r0, xb, R = 0.4699, jnp.array([2.0]), jnp.array([0.05])
    s_star = math.sqrt(2 * r0 * 0.05 + 0.05 ** 2)
    assert s_star == pytest.approx(0.222463, abs=1e-6)
    h, dh = forces.road_height(jnp.array([2.0, 2.0 - s_star + 1e-9, 2.0 + s_star - 1e-9, 1.0, 3.0]), r0, xb, R)
    np.testing.assert_allclose(h, [0.05, 0, 0, 0, 0], atol=1e-8)
    np.testing.assert_allclose(dh[1:3], [0.47343, -0.47343], atol=1e-5)
    x = jnp.linspace(1.8, 2.2, 41)
    d_ad = jax.vmap(jax.grad(lambda s: forces.road_height(s, r0, xb, R)[0]))(x)
    np.testing.assert_allclose(d_ad, forces.road_height(x, r0, xb, R)[1], atol=1e-12)


def _toy():
    b = jaxmbd.ModelBuilder()
    b.add_body("base", "world", "free", mass=3.0, inertia=(0.1, 0.2, 0.3))
    b.add_body("arm", "base", "spherical", pos=(0.2, 0.1, 0), mass=1.0, inertia=(0.01, 0.02, 0.025))
    b.add_body("wheel", "arm", "revolute", axis=(0, 1, 0), pos=(0.3, 0, 0), mass=1.0, inertia=(0.01, 0.02, 0.025))
    b.add_rotational_spring("base", "arm", axis=(0.3, 0.2, 1.0), stiffness=5.0, damping=0.7, reference=0.1)
    b.add_tire("wheel", (0.05, 0, 0), stiffness=1000.0, damping=30.0, radius=0.6)
    b.add_tire("arm", (0.0, 0, 0), stiffness=800.0, damping=20.0, radius=0.55)
    b.add_road_bump(5.0, 0.05)
    return b.build()


@pytest.mark.long
def test_rotational_spring_and_tire_forces():
    """Without damping (flat road), the generalized forces are -∂U/∂x of the
    elements' potential; the dampers dissipate; the tire force is k δ + c δ'
    with δ from the wheel centre's height (closed form)."""
    m = _toy()
    rng = np.random.default_rng(0)
    q = jaxmbd.normalize_q(m, m.q0 + 0.3 * rng.normal(size=m.nq)).at[2].set(0.4)
    v = jnp.asarray(rng.normal(size=m.nv))
    rot, tire = m.forces   # the rotational spring, the tires (jaxmbd.forces elements, in the order added)
    m0 = eqx.tree_at(lambda mm: (mm.forces[0].damping, mm.forces[1].damping), m, (rot.damping * 0, tire.damping * 0))
    gU = jax.grad(lambda x: forces.potential(m0, jaxmbd.integrate_q(m0, q, x)))(jnp.zeros(m.nv))
    f0 = forces.generalized_force(m0, q, v)
    np.testing.assert_allclose(f0, -gU, atol=1e-10 * float(jnp.abs(gU).max()))
    assert float((forces.generalized_force(m, q, v) - f0) @ v) < 0
    # the tire law against the wheel centre's world position and velocity
    kin = jaxmbd.forward_kinematics(m, q)
    p = kin.pos[2] + kin.rot[2] @ tire.center[0]
    pd = jax.jvp(lambda x: (lambda k: k.pos[2] + k.rot[2] @ tire.center[0])(
        jaxmbd.forward_kinematics(m, jaxmbd.integrate_q(m, q, x))), (jnp.zeros(m.nv),), (v,))[1]
    want = 1000.0 * (0.6 - p[2]) - 30.0 * pd[2]
    assert float(forces.tire_forces(m, q, v)[0]) == pytest.approx(float(want), rel=1e-12)


def test_force_element_validation():
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "revolute", axis=(0, 0, 1))
    with pytest.raises(ValueError, match="axis is zero"):
        b.add_rotational_spring("world", "a", axis=(0, 0, 0))
    with pytest.raises(ValueError, match="radius"):
        b.add_tire("a", (0, 0, 0), stiffness=1.0, radius=0.0)
    with pytest.raises(ValueError, match="moving body"):
        b.add_tire("world", (0, 0, 0), stiffness=1.0, radius=0.3)
    b.add_road_bump(1.0, 0.05)
    with pytest.raises(ValueError, match="no tire"):
        b.build()


def _spatial_loop():
    """Two bodies on ball joints (6 DoF) closed by a distance constraint to
    the ground: 5 DOF with rotation coordinates only."""
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "spherical", mass=1.0, com=(0.25, 0, -0.1), inertia=(0.01, 0.03, 0.035))
    b.add_body("b", "a", "spherical", pos=(0.5, 0, 0), mass=0.7, com=(0.2, 0.05, 0), inertia=(0.01, 0.02, 0.025))
    b.add_loop("distance", "b", "world", pos_a=(0.4, 0, 0), pos_b=(0.6, 0.5, -0.3), distance=0.55)
    return b.build()


@pytest.mark.slow
def test_descriptor_codes_with_ball_joints():
    """InflSDIRK and InflTrap now take rotation DoFs (their unknowns are the
    chart accelerations): on a spatial loop they agree with the state-space
    SDIRK4 at tight tolerance, keep the constraints at round-off and
    conserve the energy."""
    m = _spatial_loop()
    rng = np.random.default_rng(3)
    q0 = jaxmbd.normalize_q(m.tree, m.q0 + 0.2 * rng.normal(size=m.nq))   # tree order = mechanism order here
    q0, v0, info = jaxmbd.assemble(m, q0, jnp.asarray(rng.normal(size=m.nv)))
    assert float(info["residual"]) < 1e-12
    kw = dict(t1=0.3, steps=Steps(rtol=1e-9, atol=1e-9, max_steps=5000))
    ref = jaxmbd.simulate(m, Start(q0, v0), integrator=integrators.SDIRK4(), **kw)
    s = jaxmbd.simulate(m, Start(q0, v0), integrator=integrators.DescriptorSDIRK4(), **kw)
    assert int(ref.status) == int(s.status) == 0
    assert float(jnp.abs(jaxmbd.difference_q(m.tree, s.qs[-1], ref.qs[-1])).max()) < 1e-7
    assert float(jnp.abs(jaxmbd.difference_q(m.tree, ref.qs[-1], q0)).max()) > 0.1   # it moved
    E = lambda q, v: float(jaxmbd.kinetic_energy(m.tree, q, v) + jaxmbd.potential_energy(m.tree, q))  # noqa: E731
    assert abs(E(s.qs[-1], s.vs[-1]) - E(q0, v0)) < 1e-6 * abs(E(q0, v0))
    assert np.all(np.asarray(s.max_residuals) <= 1e-10)
    # InflTrap and SspTrap: the same formula, so equal at fixed steps (tight Newton tolerances)
    kw = dict(t1=0.05, steps=Steps(dt0=5e-4, rtol=1e-11, atol=1e-11, max_steps=200))
    a = jaxmbd.simulate(m, Start(q0, v0), integrator=integrators.DescriptorTrapezoidal(adaptive_steps=False), **kw)
    b = jaxmbd.simulate(m, Start(q0, v0), integrator=integrators.SspTrapezoidal(adaptive_steps=False), **kw)
    assert int(a.status) == int(b.status) == 0 and int(a.stats["accepted"]) == 100
    assert float(jnp.abs(jaxmbd.difference_q(m.tree, a.qs[-1], b.qs[-1])).max()) < 1e-10
    assert np.all(np.asarray(a.max_residuals) <= 1e-10)


def test_step_history_records_the_accepted_steps():
    """simulate(step_history=N): end times and sizes of the accepted steps;
    the sizes add up to the span, the end times are their running sum, and
    slots beyond the steps taken stay NaN."""
    m = jaxmbd.models.pendulum()
    s = jaxmbd.simulate(m, t1=0.5, integrator=integrators.Dopri5(), steps=Steps(rtol=1e-6, atol=1e-6),
                        save=Save(step_history=400))
    n = int(s.stats["accepted"])
    t, h = np.asarray(s.steps["t"]), np.asarray(s.steps["h"])
    assert int(s.status) == 0 and 5 < n < 400
    assert np.all(np.isfinite(h[:n])) and np.all(np.isnan(h[n:]))
    np.testing.assert_allclose(np.cumsum(h[:n]), t[:n], rtol=1e-12)
    assert t[n - 1] == pytest.approx(0.5, rel=1e-12)
    with pytest.raises(ValueError, match="step_history"):
        jaxmbd.simulate(m, t1=0.5, integrator=integrators.Dopri5(), save=Save(step_history=-1))


@pytest.mark.long
def test_static_equilibrium_of_a_hanging_four_bar():
    """jaxmbd.static_equilibrium on a four-bar under gravity: the accelerations
    vanish at the result, the constraints hold, and the potential energy is
    stationary there along the mechanism's one degree of freedom (central
    differences along the constraint manifold), which it was not at the start."""
    m = jaxmbd.models.four_bar()
    q, info = jaxmbd.static_equilibrium(m, iterations=12)
    assert float(info["residual"]) < 1e-9
    assert float(jnp.abs(jaxmbd.constraint_residual(m, q)).max()) < 1e-12
    a0, _ = jaxmbd.constrained_dynamics(m, m.q0, jnp.zeros(m.nv))
    assert float(jnp.abs(a0).max()) > 1e-2                      # the start was not at rest
    U = lambda x: float(jaxmbd.potential_energy(m.tree, x))      # noqa: E731

    def slope(x, s=1e-3):
        t = jnp.asarray(np.linalg.svd(np.asarray(jaxmbd.constraint_jacobian(m, x)))[2][-1])  # manifold tangent
        up, down = (jaxmbd.assemble(m, x + d * t)[0] for d in (s, -s))
        return (U(up) - U(down)) / float(jnp.linalg.norm(up - down))
    assert abs(slope(m.q0)) > 0.1
    assert abs(slope(q)) < 1e-5
