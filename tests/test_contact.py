"""Contact: closed-form physics of the compliant law with
friction, integration with error control, gradients through contact.

Models are small and shared: numbers that differ between cases (gravity,
friction, stiffness) are traced, so the runs of one model share compiled
programs."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd.forces import law
from jaxmbd import contact_forces
from jaxmbd.forces.contact import Contact
from jaxmbd import Start, Inputs, Steps, Save

G = 9.81
R_BALL, H_BOX = 0.1, 0.1


def _contact(m):
    return [e for e in m.forces if isinstance(e, Contact)][0]


def _set(m, **vals):
    """The model with contact parameters (per pair) or gravity replaced (traced values: same programs)."""
    for key, val in vals.items():
        if key == "gravity":
            m = eqx.tree_at(lambda mm: mm.gravity, m, jnp.asarray(val, jnp.float64))
        else:
            i = [k for k, e in enumerate(m.forces) if isinstance(e, Contact)][0]
            old = getattr(m.forces[i], key)
            m = eqx.tree_at(lambda mm: getattr(mm.forces[i], key), m, jnp.broadcast_to(jnp.asarray(val, old.dtype),
                                                                                    old.shape))
    return m


@pytest.fixture(scope="module")
def ball():
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "plane", name="floor", contype=0)
    b.add_body("ball", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(4e-3, 4e-3, 4e-3))
    b.add_geom("ball", "sphere", R_BALL, name="ball")
    b.add_contact_pair("floor", "ball", stiffness=2e4, damping=0.5, exponent=1.5, condim=3)
    b.set_initial_state(np.array([0, 0, 0.3, 1, 0, 0, 0.0]), np.zeros(6))
    return b.build()


@pytest.fixture(scope="module")
def box():
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "plane", name="floor", contype=0)
    b.add_body("box", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(1 / 150, 1 / 150, 1 / 150))
    b.add_geom("box", "box", (H_BOX, H_BOX, H_BOX), name="box")
    b.add_contact_pair("floor", "box", stiffness=1e5, damping=100.0, exponent=1.0, width=0.0, condim=3,
                       friction=(0.5, 0, 0))
    b.set_initial_state(np.array([0, 0, H_BOX, 1, 0, 0, 0.0]), np.zeros(6))
    return b.build()


def _run(m, q0, v0, t1, saves, integrator=None, tol=1e-10):
    return jaxmbd.simulate(m, Start(jnp.asarray(q0), jnp.asarray(v0)), t1,
                           integrator=integrator or I.RosenbrockNystrom4(),
                           steps=Steps(rtol=tol, atol=tol, max_steps=200_000), save=Save(ts=jnp.asarray(saves)))


def _box_state(x=0.0, z=H_BOX, vx=0.0, vz=0.0):
    return np.array([x, 0, z, 1, 0, 0, 0.0]), np.array([vx, 0, vz, 0, 0, 0.0])


def test_the_pairs_and_parameters_are_what_was_asked(ball, box):
    c = _contact(box)
    assert c.pair_list() == (("floor", "box"),) and c.groups[0][:2] == ("plane", "box")
    np.testing.assert_allclose([c.stiffness[0], c.damping[0], c.exponent[0]], [1e5, 100.0, 1.0])
    np.testing.assert_allclose(c.friction[0], [0.5, 0, 0])


@pytest.mark.long
def test_a_ball_at_rest_sinks_the_penetration_of_the_law(ball):
    """k δ^p = m g: the settled ball's centre is at r - (m g / k)^(1/p) (1e-8)
    (the damping set near critical, a traced value: the same program)."""
    q0 = np.array([0, 0, R_BALL - 5e-3, 1, 0, 0, 0.0])
    ball = _set(ball, damping=10.0)
    sol = _run(ball, q0, np.zeros(6), 2.0, [2.0], tol=1e-6)      # the rest state is a fixed point of the method
    assert int(sol.status) == 0, jaxmbd.status_name(sol.status)
    delta = (1.0 * G / 2e4) ** (1 / 1.5)
    np.testing.assert_allclose(R_BALL - float(sol.qs[-1, 2]), delta, rtol=1e-8)
    f = contact_forces(ball, sol.qs[-1], sol.vs[-1])
    np.testing.assert_allclose(float(jnp.sum(f["normal_force"])), G, rtol=1e-8)


def test_contact_parameters_are_differentiable(ball):
    """Sizes and law parameters are traced: the contact energy's gradient with
    respect to the ball's radius is minus its gradient with respect to its
    height (dist = z - r), and the energy is linear in the stiffness
    (dU/dk = U/k), both to 1e-12 relative."""
    i = [k for k, e in enumerate(ball.forces) if isinstance(e, Contact)][0]

    def energy(r, k, z):
        m = eqx.tree_at(lambda mm: mm.forces[i].geom_size, ball, _contact(ball).geom_size.at[1, 0].set(r))
        m = eqx.tree_at(lambda mm: mm.forces[i].stiffness, m, jnp.reshape(k, (1,)))
        return _contact(m).energy(m, jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]).at[2].set(z))
    r, k, z = 0.1, 2e4, 0.1 - 3e-3
    U = energy(r, k, z)
    dr, dk, dz = jax.grad(energy, argnums=(0, 1, 2))(r, k, z)
    assert float(U) > 0
    np.testing.assert_allclose(float(dr), -float(dz), rtol=1e-12)
    np.testing.assert_allclose(float(dk), float(U) / k, rtol=1e-12)


def test_friction_law_derivatives_are_finite_without_friction():
    """A frictionless contact (condim 1: mu = 0) gives zero friction force
    with finite first and second derivatives in the slip, the normal force
    and mu (the Rosenbrock methods differentiate the law's Jacobian), and with
    friction the law's derivatives equal central differences."""
    slip, fn, vs = jnp.array([[0.3, -0.2]]), jnp.array([2.0]), jnp.array([0.01])

    def f(s, fn, mu):
        return jnp.sum(law.friction_force(fn, s, mu, vs) * jnp.array([[1.0, 2.0]]))
    zero = jnp.zeros((1, 2))
    assert float(f(slip, fn, zero)) == 0.0
    for args in ((slip, fn, zero), (zero, fn, zero)):
        for d in (jax.grad(f, argnums=(0, 1, 2))(*args), jax.hessian(f, argnums=(0, 1, 2))(*args)):
            assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(d))
    mu = jnp.array([[0.5, 0.5]])
    g = jax.grad(f)(slip, fn, mu)
    e = 1e-6
    fd = [(f(slip.at[0, j].add(e), fn, mu) - f(slip.at[0, j].add(-e), fn, mu)) / (2 * e) for j in range(2)]
    np.testing.assert_allclose(np.asarray(g)[0], np.asarray(fd), rtol=1e-7)


@pytest.mark.long
def test_a_dropped_ball_bounces_with_the_law_s_restitution_and_never_rises_higher(ball):
    """In zero gravity a ball thrown at the floor leaves at e v_in with e
    from law.restitution (1e-6; exact for the Hunt-Crossley law).  Dropped
    under gravity onto a stiff floor (k = 1e9: contact lasting under a
    millisecond, so gravity's impulse during it stays below 1%), it leaves
    the floor at e v_in (1%; the exit speed from the free flight's energy,
    v² + 2 g (z - r)), rises no higher than it fell from, and its energy
    (kinetic, gravity, contact) never increases."""
    zg = _set(ball, gravity=(0.0, 0.0, 0.0))
    saves = np.linspace(0.0, 0.8, 801)
    sol = _run(zg, [0, 0, 0.2, 1, 0, 0, 0.0], [0, 0, -1.0, 0, 0, 0], 0.8, saves)
    assert int(sol.status) == 0
    e = law.restitution(1.0, 0.5)
    assert 0.5 < e < 0.9
    np.testing.assert_allclose(float(sol.vs[-1, 2]), e * 1.0, rtol=1e-6)
    ball = _set(ball, stiffness=1e9)
    sol = _run(ball, [0, 0, 0.3, 1, 0, 0, 0.0], np.zeros(6), 0.8, saves)
    assert int(sol.status) == 0
    z, vz = np.asarray(sol.qs[:, 2]), np.asarray(sol.vs[:, 2])
    vin = math.sqrt(2 * G * (0.3 - R_BALL))
    idx = np.flatnonzero((saves > 0.21) & (z > R_BALL + 1e-3))
    first = idx[:np.argmax(np.diff(idx) > 1)] if np.any(np.diff(idx) > 1) else idx   # the first flight back up
    assert len(first) > 100
    v_exit = np.sqrt(vz[first] ** 2 + 2 * G * (z[first] - R_BALL))
    np.testing.assert_allclose(v_exit, law.restitution(vin, 0.5) * vin, rtol=1e-2)
    assert z[saves > 0.25].max() < 0.3
    E = jax.vmap(lambda q, v: jaxmbd.kinetic_energy(ball, q, v) + jaxmbd.potential_energy(ball, q))(sol.qs, sol.vs)
    assert float(jnp.max(jnp.diff(E))) <= 1e-8 * float(jnp.abs(E).max())
    assert float(E[-1]) < float(E[0]) - 0.1


@pytest.mark.long
def test_a_sliding_block_stops_after_v0_squared_over_2_mu_g(box):
    """Two friction coefficients in one vmapped run (contact parameters are
    traced: batched like any model number): each block stops v0²/(2μg) from
    where it started (2%)."""
    q0, v0 = _box_state(z=H_BOX - 1e-4, vx=2.0)
    mus = jnp.array([0.4, 0.6])
    sol = jax.vmap(lambda mu: _run(_set(box, friction=jnp.stack([mu, 0.0, 0.0])), q0, v0, 1.5, [0.5, 1.0, 1.5],
                                   tol=1e-6))(mus)
    assert np.all(np.asarray(sol.status) == 0)
    np.testing.assert_allclose(np.asarray(sol.qs[:, -1, 0]), 2.0 ** 2 / (2 * np.asarray(mus) * G), rtol=2e-2)
    assert float(jnp.max(jnp.abs(sol.vs[:, -1, 0]))) < 1e-3


@pytest.mark.parametrize("tan_theta", [pytest.param(0.3, marks=pytest.mark.long), 0.7])  # 0.7 in the default run
def test_a_block_on_an_incline_creeps_below_the_friction_angle_and_slides_above(box, tan_theta):
    """The incline is gravity tilted by θ.  Below atan μ the block creeps no
    faster than v_s tanθ/sqrt(μ² - tan²θ); above, it accelerates at
    g (sinθ - μ cosθ) (1%)."""
    th = math.atan(tan_theta)
    m = _set(box, gravity=(G * math.sin(th), 0.0, -G * math.cos(th)))
    q0, v0 = _box_state(z=H_BOX - 1e-4)
    sol = _run(m, q0, v0, 1.0, [0.5, 0.75, 1.0], tol=1e-6)
    assert int(sol.status) == 0, jaxmbd.status_name(sol.status)
    x, vx = np.asarray(sol.qs[:, 0]), np.asarray(sol.vs[:, 0])
    if tan_theta < 0.5:
        creep = (x[2] - x[1]) / 0.25
        assert 0 < creep <= law.creep_speed(th, 0.5, float(_contact(m).smoothing[0])) * (1 + 1e-3)
    else:
        acc = (vx[2] - vx[1]) / 0.25
        np.testing.assert_allclose(acc, G * (math.sin(th) - 0.5 * math.cos(th)), rtol=1e-2)


def test_a_box_at_rest_carries_its_weight(box):
    q0, v0 = _box_state(z=H_BOX - 1e-4)
    sol = _run(box, q0, v0, 1.5, [0.5, 1.0, 1.5], tol=1e-6)
    f = contact_forces(box, sol.qs[-1], sol.vs[-1])
    np.testing.assert_allclose(float(jnp.sum(f["normal_force"])), 1.0 * G, rtol=1e-6)
    assert int(np.sum(np.asarray(f["normal_force"]) > 0)) == 4      # the four bottom corners


def _tumbling_box():
    th = 0.3
    q0 = np.array([0.0, 0.0, 0.25, math.cos(th / 2), math.sin(th / 2) * 0.6, math.sin(th / 2) * 0.8, 0.0])
    v0 = np.array([0.8, 0.0, -0.5, 1.0, -2.0, 0.5])
    return q0, v0


@pytest.mark.slow
@pytest.mark.parametrize("integrator", [I.RosenbrockNystrom4(), I.SDIRK4()], ids=lambda m: type(m).__name__)
def test_a_tumbling_box_at_tolerance_1e_6_agrees_with_1e_10(box, integrator):
    """A box thrown tumbling onto the floor, 0.6 s: the end state at tol 1e-6
    within 10x the tolerance of a tol-1e-10 run; energy never increases."""
    q0, v0 = _tumbling_box()
    saves = np.linspace(0, 0.6, 61)
    ref = _run(box, q0, v0, 0.6, saves, tol=1e-10)
    sol = _run(box, q0, v0, 0.6, saves, integrator=integrator, tol=1e-6)
    assert int(sol.status) == 0 and int(ref.status) == 0
    assert float(jnp.min(ref.qs[:, 2])) < 0.15                          # it lands
    err = float(jnp.max(jnp.abs(sol.qs[-1] - ref.qs[-1])))
    assert err <= 10 * 1e-6, err
    E = jax.vmap(lambda q, v: jaxmbd.kinetic_energy(box, q, v) + jaxmbd.potential_energy(box, q))(ref.qs, ref.vs)
    assert float(jnp.max(jnp.diff(E))) <= 1e-8 * float(jnp.abs(E).max())
    print("steps", {k: int(v) for k, v in sol.stats.items()})


@pytest.mark.slow
@pytest.mark.parametrize("integrator,rtol", [(I.RosenbrockNystrom4(), 1e-4), (I.SDIRK4(), 1e-3)],
                         ids=["RosenbrockNystrom4", "SDIRK4"])
def test_the_gradient_through_a_cube_toss_equals_central_differences(box, integrator, rtol):
    """d(final x)/d(initial vx) of a cube tossed onto the floor, by jax.grad
    through an adaptive Rosenbrock run (tol 1e-8), equals central differences
    of tol-1e-11 Rosenbrock runs to 1e-4.  SDIRK4's gradient, to 1e-3: it is
    5e-4 off at tol 1e-8 and 6.9e-4 at 1e-6 (bench/contact_gradients.py), and
    finite because a failed Newton solve does not take its diverging iterate
    (integrators.base.newton), which the reverse pass of a rejected step would
    otherwise see.  The difference is not from the simplified Newton
    iterations: differentiating each stage's solution by the implicit-function
    theorem instead (jax.lax.custom_root, exact ∂r/∂z) gives 2.9e-4 at 1e-8
    and 2.4e-3 at 1e-6.  What remains is the accuracy of the discrete map's
    derivative with the steps held fixed."""
    q0, v0 = _tumbling_box()

    def final_x(vx, tol, method=I.RosenbrockNystrom4()):
        v = jnp.asarray(v0).at[0].set(vx)
        sol = jaxmbd.simulate(box, Start(jnp.asarray(q0), v), 0.5, integrator=method,
                              steps=Steps(rtol=tol, atol=tol, max_steps=200_000))
        return sol.qs[-1, 0]
    g = jax.grad(final_x)(0.8, 1e-8, integrator)
    eps = 1e-4
    fd = (final_x(0.8 + eps, 1e-11) - final_x(0.8 - eps, 1e-11)) / (2 * eps)
    assert abs(float(fd)) > 0.05
    np.testing.assert_allclose(float(g), float(fd), rtol=rtol)


@pytest.mark.slow
@pytest.mark.parametrize("integrator,kw", [
    (I.RosenbrockNystrom4(), dict(rtol=1e-7, atol=1e-7)),
    (I.SDIRK4(), dict(rtol=1e-7, atol=1e-7)),
    (I.Trapezoidal(), dict(rtol=1e-7, atol=1e-7)),
    (I.Dopri5(), dict(rtol=1e-7, atol=1e-7)),
    (I.RK4(), dict(dt0=1e-4)),
    (I.SemiImplicitEuler(), dict(dt0=2e-5)),
], ids=["Rosenbrock", "SDIRK4", "Trapezoidal", "Dopri5", "RK4", "SemiImplicitEuler"])
def test_every_integrator_runs_a_bounce(ball, integrator, kw):
    """The dropped ball through its first bounce and up again (0.6 s; the ball
    rolls off with a sideways spin, so friction acts): every integrator ends
    where a tol-1e-11 Rosenbrock run does (1e-3; 1e-2 for first-order
    semi-implicit Euler), with success."""
    q0 = np.array([0, 0, 0.3, 1, 0, 0, 0.0])
    v0 = np.array([0.3, 0, 0, 0, 0, 2.0])
    ref = _run(ball, q0, v0, 0.6, [0.6], tol=1e-11)
    sol = jaxmbd.simulate(ball, Start(jnp.asarray(q0), jnp.asarray(v0)), 0.6, integrator=integrator,
                          steps=Steps(max_steps=200_000, **kw), save=Save(ts=jnp.array([0.6])))
    assert int(sol.status) == 0, jaxmbd.status_name(sol.status)
    tol = 1e-2 if isinstance(integrator, I.SemiImplicitEuler) else 1e-3
    np.testing.assert_allclose(sol.qs[-1, :3], ref.qs[-1, :3], atol=tol)
    np.testing.assert_allclose(sol.vs[-1], ref.vs[-1], atol=10 * tol)


def _crank_against_a_wall():
    """A slider-crank (1 DoF, closed by a planar pin) driven by a constant
    crank torque; a sphere on the slider hits a wall plane near the end of
    its stroke, by the penalty law (the descriptor codes' residual is the
    inverse dynamics, which soft-constraint rows do not enter)."""
    z, crank, rod = (0.0, 0.0, 1.0), 0.1, 0.3
    b = jaxmbd.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.set_contact_options(law="penalty")
    b.add_body("crank", "world", "revolute", axis=z, mass=1.0, com=(crank / 2, 0, 0),
               inertia=(1e-3, crank ** 2 / 12, crank ** 2 / 12 + 1e-3))
    b.add_body("rod", "crank", "revolute", axis=z, pos=(crank, 0, 0), mass=1.0, com=(rod / 2, 0, 0),
               inertia=(1e-3, rod ** 2 / 12, rod ** 2 / 12 + 1e-3))
    b.add_body("slider", "world", "prismatic", axis=(1, 0, 0), mass=0.5, inertia=(1e-3, 1e-3, 1e-3))
    b.add_loop("point_planar", "rod", "slider", pos_a=(rod, 0, 0), name="pin")
    s = math.sqrt(0.5)
    b.add_geom("world", "plane", pos=(0.43, 0, 0), quat=(s, 0, -s, 0), name="wall")   # normal -x
    b.add_geom("slider", "sphere", 0.05, name="ball")
    a0 = 1.5
    cy = crank * math.sin(a0)
    x = crank * math.cos(a0) + math.sqrt(rod ** 2 - cy ** 2)
    b.set_initial_state(np.array([a0, math.atan2(-cy, x - crank * math.cos(a0)) - a0, x]), np.zeros(3))
    return b.build()


@pytest.mark.slow
def test_a_closed_loop_mechanism_hits_a_wall_with_every_implicit_code():
    """Contact on a closed-loop mechanism: the descriptor-form codes (and
    SDIRK4, Rosenbrock) integrate a slider-crank whose slider hits a wall
    (1 s, tol 1e-6): the loop closed to round-off, the end state within 50x
    tol of a tol-1e-10 run (measured 2.0e-5 DescriptorSDIRK4, 4.9e-7
    DescriptorTrapezoidal, 1.5e-5 SDIRK4, 7.9e-8 Rosenbrock)."""
    m = _crank_against_a_wall()
    assert isinstance(m, jaxmbd.Mechanism)
    obs = lambda model, q, v: jnp.min(contact_forces(model, q, v)["dist"])   # noqa: E731
    kw = dict(inputs=Inputs(tau=jnp.array([0.5, 0.0, 0.0])), save=Save(ts=jnp.linspace(0, 1.0, 11), observe=obs))
    ref = jaxmbd.simulate(m, t1=1.0, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-10, atol=1e-10), **kw)
    assert int(ref.status) == 0
    assert float(jnp.min(ref.obs)) < -1e-3                              # the ball pressed into the wall
    for integrator in (I.DescriptorSDIRK4(), I.DescriptorTrapezoidal(), I.SDIRK4(), I.RosenbrockNystrom4()):
        sol = jaxmbd.simulate(m, t1=1.0, integrator=integrator, steps=Steps(rtol=1e-6, atol=1e-6), **kw)
        name = type(integrator).__name__
        assert int(sol.status) == 0, name
        assert float(jnp.abs(jax.vmap(lambda q: jaxmbd.constraint_residual(m, q))(sol.qs)).max()) < 1e-10, name
        np.testing.assert_allclose(sol.qs, ref.qs, rtol=0, atol=50 * 1e-6, err_msg=name)
