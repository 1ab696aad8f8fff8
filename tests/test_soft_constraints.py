"""MuJoCo's soft constraints (jaxmbd.forces.soft) for contacts, joint limits
and joint friction loss, against MuJoCo's own forward dynamics at states
where its solution has every row active and inside its cone (so it solves
the same linear system), and against closed forms."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd.forces import soft
from jaxmbd import Start, Steps

jax.config.update("jax_enable_x64", True)


def _both(xml):
    return jaxmbd.load_mjcf(xml, warn=False), mujoco.MjModel.from_xml_string(xml)


def _mj_qacc(mj, q, v, ctrl=None):
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:] = q, v
    if ctrl is not None:
        d.ctrl[:] = ctrl
    mujoco.mj_forward(mj, d)
    return d


def _ours(m, q, v):
    return np.asarray(jaxmbd.forward_dynamics(m, jnp.asarray(q), jnp.asarray(v), jnp.zeros(m.nv)))


BALL = """<mujoco><option timestep="0.001"/>
  <worldbody><geom name="floor" type="plane" size="5 5 .1" condim="1"/>
    <body name="ball" pos="0 0 1"><freejoint/>
      <geom name="ball" type="sphere" size="0.1" mass="2" condim="1" solref="{solref}" solimp="{solimp}"/>
    </body></worldbody></mujoco>"""


@pytest.mark.parametrize("solref, solimp", [("0.02 1", "0.9 0.95 0.001 0.5 2"),
                                            ("0.01 0.5", "0.8 0.99 0.02 0.3 3"),
                                            ("-5000 -40", "0.9 0.95 0.001 0.5 2")])
def test_one_contact_row_is_mujocos(solref, solimp):
    """A frictionless ball 4 mm in its floor, moving: jaxmbd's accelerations equal MuJoCo's (its
    force (A + R)⁻¹(aref - a₀) on the impedance curve, standard and direct solref)."""
    m, mj = _both(BALL.format(solref=solref, solimp=solimp))
    q = np.array([0.01, 0, 0.096, 1, 0, 0, 0])
    for vz in (-0.3, 0.0, 0.05):
        v = np.array([0.2, 0, vz, 0.1, 0.3, 0])
        d = _mj_qacc(mj, q, v)
        assert d.ncon == 1 and d.efc_force[0] > 0
        np.testing.assert_allclose(_ours(m, q, v), d.qacc, rtol=1e-9, atol=1e-9)


BOX = """<mujoco><option timestep="0.001"/>
  <worldbody><geom name="floor" type="plane" size="5 5 .1" condim="1"/>
    <body name="box" pos="0 0 1"><freejoint/>
      <geom name="box" type="box" size="0.2 0.15 0.1" mass="3" condim="1"/>
    </body></worldbody></mujoco>"""


def test_a_box_on_four_corners_is_mujocos():
    """A flat box 2 mm in its floor: four coupled rows (A = J H⁻¹ Jᵀ of rank 3, the regularizer
    decides the split), all pushing: the accelerations equal MuJoCo's."""
    m, mj = _both(BOX)
    q = np.array([0, 0, 0.098, 1, 0, 0, 0])
    v = np.array([0, 0, -0.1, 0.05, 0.02, 0])
    d = _mj_qacc(mj, q, v)
    assert d.ncon == 4 and np.all(d.efc_force > 0)
    np.testing.assert_allclose(_ours(m, q, v), d.qacc, rtol=1e-9, atol=1e-9)


def test_a_pulling_row_is_switched_off():
    """The box tipped onto one edge and spinning away from the floor on the other: MuJoCo's solution
    leaves the lifting corners without force; so does jaxmbd's solve (accelerations to 1e-6)."""
    m, mj = _both(BOX)
    th = 0.01      # the +x edge 4.5 mm deep, the -x edge 0.5 mm, lifting at 0.4 m/s
    zc = 0.1 * np.cos(th) + 0.2 * np.sin(th) - 0.0045
    q = np.array([0, 0, zc, np.cos(th / 2), 0, np.sin(th / 2), 0])
    v = np.array([0, 0, 0, 0, 2.0, 0])
    d = _mj_qacc(mj, q, v)
    f = d.efc_force
    assert d.ncon >= 3 and np.any(f <= 1e-12) and np.any(f > 0)
    np.testing.assert_allclose(_ours(m, q, v), d.qacc, rtol=1e-6, atol=1e-6)


HINGE = """<mujoco><option timestep="0.001"/>
  <worldbody><body name="arm"><joint name="hinge" type="hinge" axis="0 1 0" range="-30 30"
     solreflimit="{solref}" {extra}/>
    <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="1"/></body></worldbody></mujoco>"""


@pytest.mark.parametrize("solref", ["0.02 1", "0.05 0.3"])
def test_a_joint_limit_row_is_mujocos(solref):
    """A hinge 0.05 rad past its upper stop, moving either way: MuJoCo's accelerations."""
    m, mj = _both(HINGE.format(solref=solref, extra=""))
    for qd in (-1.0, 0.0, 0.7):
        q, v = np.array([np.radians(30) + 0.05]), np.array([qd])
        d = _mj_qacc(mj, q, v)
        assert d.nefc == 1 and d.efc_force[0] > 0
        np.testing.assert_allclose(_ours(m, q, v), d.qacc, rtol=1e-9, atol=1e-9)


def test_friction_loss_below_its_bound_is_mujocos():
    """A horizontal arm with frictionloss above its gravity torque: MuJoCo's friction row is inside
    its bound, so its force is (A + R)⁻¹(aref - a₀); jaxmbd's smooth bound changes it by
    (1 + x⁸)^(-1/8) - 1 < 1e-6 relative for x = |f|/loss below 0.2."""
    xml = HINGE.format(solref="0.02 1", extra='frictionloss="20"')
    m, mj = _both(xml)
    for qd in (0.0, 0.3):
        q, v = np.array([0.0]), np.array([qd])
        d = _mj_qacc(mj, q, v)
        assert abs(d.efc_force[0]) < 0.2 * 20
        np.testing.assert_allclose(_ours(m, q, v), d.qacc, rtol=1e-5, atol=1e-8)


def test_friction_loss_saturates_at_its_bound():
    """Far past it (a fast joint), the friction loss is the bound: a ≈ (τ_gravity - loss)/I."""
    xml = HINGE.format(solref="0.02 1", extra='frictionloss="0.5"')
    m, mj = _both(xml)
    q, v = np.array([0.0]), np.array([20.0])
    d = _mj_qacc(mj, q, v)
    assert abs(abs(d.efc_force[0]) - 0.5) < 1e-12
    np.testing.assert_allclose(_ours(m, q, v), d.qacc, rtol=1e-6)


def test_impedance_is_mujocos_curve():
    """d(x) at the curve's ends, midpoint and power (MuJoCo's documented formula), dmin/dmax clamped."""
    si = jnp.array([0.8, 0.99, 0.02, 0.3, 3.0])
    x = jnp.array([0.0, 0.006, 0.01, 0.02, 0.5])
    u = np.asarray(x) / 0.02
    y = np.where(u <= 0.3, u ** 3 / 0.3 ** 2, 1 - (1 - u) ** 3 / 0.7 ** 2)
    np.testing.assert_allclose(soft.impedance(x, si), 0.8 + np.minimum(y, 1) * 0.19, rtol=1e-14)
    assert float(soft.impedance(jnp.array(0.0), jnp.array([0.0, 1.0, 0.01, 0.5, 2]))) == soft.MINIMP


def _imp(x, dmin=0.9, dmax=0.95, width=0.001, mid=0.5, power=2.0):
    u = min(x / width, 1.0)
    y = u ** power / mid ** (power - 1) if u <= mid else 1 - (1 - u) ** power / (1 - mid) ** (power - 1)
    return dmin + y * (dmax - dmin)


@pytest.mark.long
def test_rest_penetration_closed_form():
    """At rest a row is the spring f = K d(δ)² δ / ((1 - d(δ)) Â), K = 1/(dmax τ ζ)²: a ball sinks the
    δ with (1 - d) g = d² K δ (0.367 mm at MuJoCo's defaults, on the impedance curve), reached by the
    soft law's own dynamics from a drop (Rosenbrock, 1 s); MuJoCo's ball rests there too."""
    from scipy.optimize import brentq
    m, mj = _both(BALL.format(solref="0.02 1", solimp="0.9 0.95 0.001 0.5 2"))
    q0 = jnp.array([0, 0, 0.12, 1, 0, 0, 0.0])
    sol = jaxmbd.simulate(m, Start(q0, jnp.zeros(6)), 1.0, integrator=jaxmbd.integrators.RosenbrockNystrom4(),
                          steps=Steps(rtol=1e-7, atol=1e-7))
    assert int(sol.status) == 0
    K = 1.0 / (0.95 * 0.02) ** 2
    closed = brentq(lambda x: (1 - _imp(x)) * 9.81 - _imp(x) ** 2 * K * x, 1e-7, 1e-2, xtol=1e-14)
    np.testing.assert_allclose(0.1 - float(sol.qs[-1, 2]), closed, rtol=1e-4)
    d = mujoco.MjData(mj)
    d.qpos[:] = np.asarray(q0)
    for _ in range(2000):
        mujoco.mj_step(mj, d)
    np.testing.assert_allclose(0.1 - d.qpos[2], closed, rtol=1e-3)


def test_grad_through_the_soft_rows():
    """d a / d(solref time constant) of the ball in its floor: jax.grad equals a central difference."""
    xml = BALL.format(solref="0.02 1", solimp="0.9 0.95 0.001 0.5 2")
    m, _ = _both(xml)
    el = [e for e in m.forces if isinstance(e, jaxmbd.forces.Contact)][0]
    q = jnp.array([0.01, 0, 0.096, 1, 0, 0, 0])
    v = jnp.array([0.2, 0, -0.3, 0.1, 0.3, 0])

    def az(tc):
        mm = jax.tree_util.tree_map(lambda x: x, m)
        new = el.solref.at[:, 0].set(tc)
        mm = jaxmbd.forces.without(m, jaxmbd.forces.Contact)
        import dataclasses
        from jaxmbd.forces.base import make
        e2 = make(type(el), **dict({f.name: getattr(el, f.name) for f in dataclasses.fields(el)}, solref=new))
        mm = dataclasses.replace(mm, forces=(mm.forces or ()) + (e2,))
        return jaxmbd.forward_dynamics(mm, q, v, jnp.zeros(6))[2]
    g = jax.grad(az)(0.02)
    h = 1e-6
    fd = (az(0.02 + h) - az(0.02 - h)) / (2 * h)
    assert np.isfinite(g) and abs(g) > 1
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_bad_solref_and_solimp_are_named():
    with pytest.raises(ValueError, match="joint limit on 'arm'.*solref"):
        jaxmbd.forces.JointLimit("arm", -1, 1, solref=(-0.02, 1.0))
    with pytest.raises(ValueError, match="x: contains NaN"):
        soft.check_solimp((0.9, np.nan, 0.001), "x")
    np.testing.assert_array_equal(soft.check_solimp((0.9, 1.5), "x"), [0.9, 1.5, 0.001, 0.5, 2.0])  # kept
    np.testing.assert_array_equal(soft.check_solref(0.01, "x"), [0.01, 1.0])


ARM_ON_FLOOR = """<mujoco><option timestep="0.002"/>
  <worldbody><geom name="floor" type="plane" size="5 5 .1"/>
    <body name="box" pos="0 0 0.098"><freejoint/>
      <geom name="box" type="box" size="0.1 0.1 0.1" mass="2" condim="6" friction="0.8 0.02 0.01"/>
      <body name="arm" pos="0.1 0 0.05">
        <joint name="hinge" type="hinge" axis="0 1 0" range="-0.3 0.3" frictionloss="0.4"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.3"/>
      </body>
    </body></worldbody></mujoco>"""


@pytest.mark.long
def test_the_smooth_accelerations_from_the_stage_factor_are_the_abas():
    """With soft rows, forward_dynamics takes the accelerations without them from the stage's factor
    of H and the RNEA's bias force; "aba_unrolled" still runs its ABA first.  Both agree (1e-12) with
    joint torques, body forces f_ext, damping and springs, at a state with contact, a joint limit and
    friction loss active; so do their gradients."""
    m = jaxmbd.load_mjcf(ARM_ON_FLOOR.replace('frictionloss="0.4"', 'frictionloss="0.4" damping="0.3" '
                                              'stiffness="2" springref="0.1"'), warn=False)
    q = jnp.array([0.01, 0.0, 0.0985, 1.0, 0.0, 0.01, 0.0, 0.32])
    v = jnp.array([0.1, 0.05, -0.02, 0.1, 0.2, -0.1, 0.3])
    rng = np.random.default_rng(0)
    tau, f_ext = jnp.asarray(rng.normal(size=m.nv)), jnp.asarray(rng.normal(size=(m.n_bodies, 6)))
    fd = lambda method: jax.jit(lambda v, tau, f: jaxmbd.forward_dynamics(m, q, v, tau, f, method=method))  # noqa: E731
    for method in ("aba", "crba"):
        a, ref = fd(method)(v, tau, f_ext), fd("aba_unrolled")(v, tau, f_ext)
        np.testing.assert_allclose(a, ref, rtol=0, atol=1e-12 * float(jnp.abs(ref).max()))
    loss = lambda method: jax.jit(jax.grad(                                          # noqa: E731
        lambda v, tau, f: jnp.sum(jnp.sin(jaxmbd.forward_dynamics(m, q, v, tau, f, method=method))), (0, 1, 2)))
    for a, b in zip(loss("aba")(v, tau, f_ext), loss("aba_unrolled")(v, tau, f_ext)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-11 * float(jnp.abs(b).max()))


@pytest.mark.long
def test_the_soft_stage_derivatives_are_the_implicit_functions():
    """The rows' forces differentiate as the implicit function of their fixed point (a custom JVP:
    (I + D A) df = dF at the solution); the integrators' Jacobians of the whole right-hand side and a
    reverse-mode gradient through it equal central differences (1e-7 of their scale), at a state with
    contact (four corners sliding, condim 6), a joint limit and friction loss active."""
    m = jaxmbd.load_mjcf(ARM_ON_FLOOR, warn=False)
    q = jnp.array([0.01, 0.0, 0.0985, 1.0, 0.0, 0.01, 0.0, 0.32])
    v = jnp.array([0.1, 0.05, -0.02, 0.1, 0.2, -0.1, 0.3])
    ode = jaxmbd.odes.ChartODE(m, q)
    y0 = jnp.zeros(m.nv)
    g = jax.jit(lambda y, v: ode.g(0.0, y, v))
    val, Jy, Jv = jax.jit(lambda v: ode.g_and_jac(0.0, y0, v))(v)
    grad = jax.jit(jax.grad(lambda v: jnp.sum(jnp.sin(ode.g(0.0, y0, v)))))(v)
    N, T, _ = soft.rows(m, q, v)
    assert float(jnp.max(soft.activation(-N.r, soft.onset_width(N.solref, N.solimp)))) > 0   # rows are on
    h, E = 1e-6, np.eye(m.nv)
    fd_y = np.stack([(g(y0 + h * e, v) - g(y0 - h * e, v)) / (2 * h) for e in E], 1)
    fd_v = np.stack([(g(y0, v + h * e) - g(y0, v - h * e)) / (2 * h) for e in E], 1)
    fd_grad = np.array([(np.sum(np.sin(g(y0, v + h * e))) - np.sum(np.sin(g(y0, v - h * e)))) / (2 * h) for e in E])
    np.testing.assert_allclose(np.asarray(val), np.asarray(g(y0, v)), rtol=0, atol=1e-12)
    for ours, ref in [(Jy, fd_y), (Jv, fd_v), (grad, fd_grad)]:
        scale = float(np.abs(ref).max())
        assert scale > 0
        np.testing.assert_allclose(np.asarray(ours), ref, rtol=0, atol=1e-7 * scale)


@pytest.mark.long
def test_contact_rows_of_an_mjcf_file():
    """load_mjcf(contact_rows=k): the k deepest candidates enter the solve; more within their margin
    stop a run with CONTACT_OVERFLOW; with enough rows the forces are those of every candidate."""
    xml = ARM_ON_FLOOR.replace('range="-0.3 0.3" frictionloss="0.4"', "")
    q = jnp.array([0.0, 0.0, 0.099, 1.0, 0.0, 0.0, 0.0, 0.0])
    v = jnp.zeros(7)
    few, many = (jaxmbd.load_mjcf(xml, warn=False, contact_rows=k) for k in (2, 8))
    a8 = jaxmbd.forward_dynamics(many, q, v, jnp.zeros(7))
    every = jaxmbd.load_mjcf(xml, warn=False, contact_rows=_contact(many).n_candidates)
    assert _contact(every).rows == _contact(many).n_candidates > 8
    a_all = jaxmbd.forward_dynamics(every, q, v, jnp.zeros(7))
    np.testing.assert_allclose(np.asarray(a8), np.asarray(a_all), rtol=1e-12, atol=1e-12)
    sol = jaxmbd.simulate(few, Start(q, v), 0.01, integrator=jaxmbd.integrators.RK4(), steps=Steps(dt0=0.002))
    assert int(sol.status) == jaxmbd.integrators.CONTACT_OVERFLOW
    with pytest.raises(ValueError, match="rows"):
        jaxmbd.load_mjcf(xml, warn=False, contact_rows=0)


def _contact(m):
    from jaxmbd.forces.base import elements
    from jaxmbd.forces.contact import Contact
    return next(e for e in elements(m) if isinstance(e, Contact))


STACK = """<mujoco><worldbody><geom name="floor" type="plane" size="5 5 .1"/>
    <body name="b1" pos="0 0 0.099"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
    <body name="b2" pos="0.01 0 0.297"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
    <body name="b3" pos="0.02 0 0.495"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
  </worldbody></mujoco>"""


@pytest.mark.long
def test_the_default_contact_rows_follow_the_model():
    """Unless given, the soft solve's rows follow the model's pairs (default_rows): a stack of three
    boxes (MuJoCo: 12 contacts at rest) gets 3 x 4 on the floor + 3 x 8 / 2 between them = 24, within
    which its forces are those of every candidate, while 8 rows would overflow; the go2-class
    quadruped (W + S = 71 > 24) gets half, 36; an arm on a floor the floor of 8."""
    from jaxmbd import models
    from jaxmbd.forces.base import overflow as contact_overflow
    stack = jaxmbd.load_mjcf(STACK, warn=False)
    mj = mujoco.MjModel.from_xml_string(STACK)
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    assert d.ncon == 12 and _contact(stack).rows == 24
    assert not bool(contact_overflow(stack, stack.q0))
    every = jaxmbd.load_mjcf(STACK, warn=False, contact_rows=_contact(stack).n_candidates)
    z = jnp.zeros(stack.nv)
    np.testing.assert_allclose(np.asarray(jaxmbd.forward_dynamics(stack, stack.q0, z, z)),
                               np.asarray(jaxmbd.forward_dynamics(every, every.q0, z, z)), rtol=1e-12, atol=1e-12)
    eight = jaxmbd.load_mjcf(STACK, warn=False, contact_rows=8)
    assert bool(contact_overflow(eight, eight.q0))
    assert _contact(models.load_quadruped_scene()).rows == 36
    arm = jaxmbd.load_mjcf(ARM_ON_FLOOR.replace("<freejoint/>", ""), warn=False)
    assert arm.topo.jtype.count("free") == 0 and _contact(arm).rows == 8


@pytest.mark.long
def test_the_held_configuration_work_gives_the_plain_jacobians():
    """ChartODE.g_and_jac with soft rows holds the rows and H's factors (computed once, differentiated
    in the position directions only): its value and Jacobians equal one forward-mode pass of g over
    [y; y'] (1e-12 of their scale), in the forward and the reverse-only (checkpoint loop) forms, and
    a gradient (with respect to the chart point and velocity) through its reverse-only form equals one
    through the plain reverse-only form, at a state with
    contact (condim 6), a joint limit and friction loss active, away from the chart's origin."""
    from jaxmbd.odes.base import AbstractODE
    m = jaxmbd.load_mjcf(ARM_ON_FLOOR, warn=False)
    q = jnp.array([0.01, 0.0, 0.0985, 1.0, 0.0, 0.01, 0.0, 0.32])
    v = jnp.array([0.1, 0.05, -0.02, 0.1, 0.2, -0.1, 0.3])
    y = jnp.array([1e-3, -2e-3, 5e-4, 0.01, -0.02, 0.015, 0.01])

    def both(q, y, v, plain, reverse_only=False):
        ode = jaxmbd.odes.ChartODE(m, q)
        ode.reverse_only = reverse_only
        return (AbstractODE.g_and_jac if plain else jaxmbd.odes.ChartODE.g_and_jac)(ode, 0.0, y, v)
    ref = jax.jit(lambda q, y, v: both(q, y, v, True))(q, y, v)
    for reverse_only in (False, True):
        out = jax.jit(lambda q, y, v: both(q, y, v, False, reverse_only))(q, y, v)
        for a, b in zip(out, ref):
            scale = float(jnp.max(jnp.abs(b)))
            assert scale > 0
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-12 * scale)

    def loss(y, v, plain, reverse_only):
        g0, J1, J2 = both(q, y, v, plain, reverse_only)
        return jnp.sum(jnp.sin(g0)) + jnp.sum(J1 ** 2) * 1e-4 + jnp.sum(jnp.tanh(J2))
    ours = jax.jit(jax.grad(lambda y, v: loss(y, v, False, True), argnums=(0, 1)))(y, v)
    plain = jax.jit(jax.grad(lambda y, v: loss(y, v, True, True), argnums=(0, 1)))(y, v)
    for a, b in zip(ours, plain):
        assert float(jnp.max(jnp.abs(b))) > 0
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-10 * float(jnp.max(jnp.abs(b))))


@pytest.mark.long
def test_a_gradient_through_rosenbrock_on_soft_contact_is_finite_and_right():
    """The implicit step's gradient pulls back through its Jacobians, i.e. through second derivatives
    of the right-hand side: with friction cones whose limit and forces vanish (the arm's rows beyond
    their contact) a root near zero in the cone scaling once made them NaN.  The gradient of a short
    Rosenbrock run of the box and arm equals central differences of the loss (2e-4 relative)."""
    m = jaxmbd.load_mjcf(ARM_ON_FLOOR, warn=False)
    q = jnp.array([0.01, 0.0, 0.0985, 1.0, 0.0, 0.01, 0.0, 0.32])
    q = q.at[3:7].set(q[3:7] / jnp.linalg.norm(q[3:7]))
    v = jnp.array([0.1, 0.05, -0.02, 0.1, 0.2, -0.1, 0.3])

    def loss(vx):
        sol = jaxmbd.simulate(m, Start(q, v.at[0].set(vx)), 0.02, integrator=jaxmbd.integrators.RosenbrockNystrom4(),
                              steps=Steps(rtol=1e-9, atol=1e-9))
        return sol.qs[-1, 0] + sol.qs[-1, -1], sol.status
    (value, status), grad = jax.jit(jax.value_and_grad(loss, has_aux=True))(v[0])
    assert int(status) == 0 and np.isfinite(float(grad))
    f = jax.jit(lambda x: loss(x)[0])
    eps = 1e-4
    cd = (float(f(v[0] + eps)) - float(f(v[0] - eps))) / (2 * eps)
    assert abs(float(grad) - cd) < 2e-4 * abs(cd), (float(grad), cd)
