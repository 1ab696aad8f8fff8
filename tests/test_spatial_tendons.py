"""Spatial tendons (jaxmbd.forces.spatial_tendon) against MuJoCo: a finger whose flexor runs from
the palm around a knuckle cylinder (with a side site) and a sphere at the middle joint to the
fingertip, with a spring and damping; a pulley; actuators on the tendon; the loader's warning;
derivatives."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd

mujoco = pytest.importorskip("mujoco")

FINGER = """
<mujoco model="finger">
  <compiler angle="radian" autolimits="true"/>
  <option gravity="0 0 -9.81"/>
  <default><joint damping="0.05" armature="0.001"/></default>
  <worldbody>
    <body name="palm">
      <geom type="box" size="0.03 0.03 0.01" contype="0" conaffinity="0" mass="0.2"/>
      <site name="anchor" pos="0 0.02 0.0"/>
      <body name="prox" pos="0 0 0.02">
        <joint name="mcp" axis="1 0 0" range="-1.5 1.5"/>
        <geom name="knuckle" type="cylinder" size="0.012 0.01" quat="0.7071068 0 0.7071068 0" contype="0" conaffinity="0" mass="0.02"/>
        <site name="knuckle_side" pos="0 0.03 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.05" size="0.008" contype="0" conaffinity="0" mass="0.03"/>
        <site name="p1" pos="0 0.012 0.03"/>
        <body name="dist" pos="0 0 0.05">
          <joint name="pip" axis="1 0 0" range="-1.5 1.5"/>
          <geom name="pulley_wrap" type="sphere" size="0.009" contype="0" conaffinity="0" mass="0.01"/>
          <geom type="capsule" fromto="0 0 0 0 0 0.04" size="0.007" contype="0" conaffinity="0" mass="0.02"/>
          <site name="tip" pos="0 0.008 0.035"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="flexor" stiffness="40" damping="0.3" springlength="0.09">
      <site site="anchor"/>
      <geom geom="knuckle" sidesite="knuckle_side"/>
      <site site="p1"/>
      <geom geom="pulley_wrap"/>
      <site site="tip"/>
    </spatial>
  </tendon>
  <sensor><tendonpos tendon="flexor"/><tendonvel tendon="flexor"/></sensor>
</mujoco>
"""

PULLEY = FINGER.replace('''<spatial name="flexor" stiffness="40" damping="0.3" springlength="0.09">''',
                        '''<spatial name="flexor" stiffness="40" damping="0.3" springlength="0.08 0.1" range="0 1"
             frictionloss="0.1">''').replace('''<geom geom="pulley_wrap"/>''',
                                               '''<pulley divisor="2"/><site site="p1"/>
      <geom geom="pulley_wrap"/>''')


@pytest.fixture(scope="module")
def finger():
    return jaxmbd.load_mjcf(FINGER), mujoco.MjModel.from_xml_string(FINGER)


def _mujoco(mm, q, v):
    d = mujoco.MjData(mm)
    d.qpos[:], d.qvel[:] = q, v
    mujoco.mj_forward(mm, d)
    return d


def test_length_velocity_and_accelerations_are_mujocos_to_1e9(finger):
    """At random states, no wrap, one and both: the tendon's length and rate (tendonpos, tendonvel)
    and the joint accelerations under its spring and damping equal MuJoCo's to 1e-9."""
    model, mm = finger
    sense = jax.jit(jaxmbd.sensordata)
    accel = jax.jit(lambda q, v: jaxmbd.forward_dynamics(model, q, v, jnp.zeros(model.nv)))
    rng = np.random.default_rng(0)
    wraps = set()
    for _ in range(24):
        q, v = rng.uniform(-1.4, 1.4, 2), rng.normal(size=2)
        d = _mujoco(mm, q, v)
        wraps.add(int(d.ten_wrapnum[0]))
        np.testing.assert_allclose(np.asarray(sense(model, q, v)), d.sensordata, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.asarray(accel(q, v)), d.qacc, rtol=1e-9, atol=1e-9)
    assert wraps == {3, 5, 7}, wraps          # the path: straight, around one, around both


def test_a_pulley_a_dead_band_a_limit_and_friction_loss_are_mujocos():
    """The flexor with a pulley, a dead-band spring, a range (0.055, 0.088) and friction loss: at random
    states below, inside and above the range, the soft limit row at the nearer bound and the
    friction-loss row, their Jacobian dL/dq at the state, are solved as MuJoCo solves them (qacc to
    1e-9); the loader's warning is empty."""
    xml = PULLEY.replace('range="0 1"', 'range="0.055 0.088"')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        model = jaxmbd.load_mjcf(xml)
    assert not w, [str(x.message) for x in w]
    mm = mujoco.MjModel.from_xml_string(xml)
    np.testing.assert_allclose(np.asarray(model.forces[-1].invweight), mm.tendon_invweight0, rtol=1e-12)
    sense = jax.jit(jaxmbd.sensordata)
    accel = jax.jit(lambda q, v: jaxmbd.forward_dynamics(model, q, v, jnp.zeros(2)))
    rng = np.random.default_rng(1)
    inside, rows = 0, set()
    for _ in range(16):
        q, v = rng.uniform(-1.4, 1.4, 2), rng.normal(size=2)
        d = _mujoco(mm, q, v)
        inside += 0.08 < d.ten_length[0] < 0.1
        rows.add((int(d.nefc), bool(d.ten_length[0] < 0.0715)))
        np.testing.assert_allclose(np.asarray(sense(model, q, v)), d.sensordata, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.asarray(accel(q, v)), d.qacc, rtol=1e-9, atol=1e-9 * np.abs(d.qacc).max())
    assert inside >= 1
    assert rows == {(1, True), (1, False), (2, True), (2, False)}, rows    # friction only; limit at each end


def test_the_spring_length_defaults_to_the_length_at_qpos0():
    xml = FINGER.replace('springlength="0.09"', "")
    model, mm = jaxmbd.load_mjcf(xml), mujoco.MjModel.from_xml_string(xml)
    el = next(e for e in model.forces if isinstance(e, jaxmbd.forces.spatial_tendon.SpatialTendons))
    np.testing.assert_allclose(np.asarray(el.spring)[0], mm.tendon_lengthspring[0], rtol=1e-12)
    np.testing.assert_allclose(mm.tendon_length0[0], np.asarray(el.spring)[0, 0], rtol=1e-12)


def test_the_derivatives_equal_central_differences(finger):
    model, _ = finger
    f = jax.jit(lambda x: jaxmbd.forward_dynamics(model, x[:2], x[2:], jnp.zeros(2)))
    jac = jax.jit(jax.jacfwd(f))
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = np.r_[rng.uniform(-1.2, 1.2, 2), rng.normal(size=2)]
        J = np.asarray(jac(jnp.asarray(x)))
        eps = 1e-6
        fd = np.stack([(np.asarray(f(x + eps * e)) - np.asarray(f(x - eps * e))) / (2 * eps) for e in np.eye(4)], 1)
        np.testing.assert_allclose(J, fd, rtol=1e-5, atol=1e-4)


ACTUATED = FINGER.replace('  <sensor><tendonpos tendon="flexor"/><tendonvel tendon="flexor"/></sensor>', """  <actuator>
    <position name="flex" tendon="flexor" kp="50" kv="0.5" ctrlrange="0.05 0.12"/>
    <general name="pull" tendon="flexor" gear="2" gainprm="3" biastype="affine" biasprm="0.1 -4 -0.2"/>
    <position name="servo" tendon="flexor" gear="-1.5" kp="20" dampratio="0.7"/>
  </actuator>
  <sensor>
    <tendonpos tendon="flexor"/><actuatorpos actuator="pull"/><actuatorvel actuator="servo"/>
    <actuatorfrc actuator="flex"/><actuatorfrc actuator="servo"/>
  </sensor>""")


def test_actuators_on_the_tendon_are_mujocos():
    """Position, general and damped position actuators on the flexor (gears 1, 2, -1.5): lengths,
    velocities, moments, forces and qfrc_actuator equal MuJoCo's to 1e-12 and the accelerations to
    1e-9 at random states (no wrap, one and both); the damping from dampratio is MuJoCo's."""
    info = jaxmbd.load_mjcf(ACTUATED, return_info=True)
    model, mm = info.model, mujoco.MjModel.from_xml_string(ACTUATED)
    assert not info.unsupported, info.unsupported
    act = model.actuators
    np.testing.assert_allclose(np.asarray(act.bias[:, 2]), mm.actuator_biasprm[:, 2], rtol=1e-12)
    parts = jax.jit(lambda q, v, u: (*act.state(model.nv, q, v, u, model), act.dense_moments(model, q),
                                     jaxmbd.sensordata(model, q, v, u), _actuated(model, q, v, u)))
    rng = np.random.default_rng(4)
    wraps = set()
    for _ in range(12):
        q, v, u = rng.uniform(-1.4, 1.4, 2), rng.normal(size=2), rng.uniform(0.0, 0.15, 3)
        d = mujoco.MjData(mm)
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, u
        mujoco.mj_forward(mm, d)
        wraps.add(int(d.ten_wrapnum[0]))
        moment = np.zeros((mm.nu, mm.nv))
        mujoco.mju_sparse2dense(moment, d.actuator_moment, d.moment_rownnz, d.moment_rowadr, d.moment_colind)
        L, Ld, f, qfrc, M, sd, qacc = parts(q, v, u)
        for ours, theirs in ((L, d.actuator_length), (Ld, d.actuator_velocity), (M, moment),
                             (f, d.actuator_force), (qfrc, d.qfrc_actuator), (sd, d.sensordata)):
            np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(np.asarray(qacc), d.qacc, rtol=1e-9, atol=1e-9)
    assert wraps == {3, 5, 7}, wraps


def _actuated(model, q, v, u):
    return jaxmbd.forward_dynamics(model, q, v, jaxmbd.actuator_force(model, q, v, u))


def test_the_actuated_derivative_equals_central_differences():
    """The accelerations' derivative along a direction of (q, v, ctrl) through the actuators' moment
    (itself a derivative of the wrapped length) equals central differences, wrapped on both."""
    model = jaxmbd.load_mjcf(ACTUATED)
    f = jax.jit(lambda x: _actuated(model, x[:2], x[2:4], x[4:]))
    x = np.r_[0.3, -0.5, 0.7, -0.2, 0.08, 0.05, 0.1]
    dx = np.random.default_rng(5).normal(size=7)
    d = np.asarray(jax.jit(lambda x: jax.jvp(f, (x,), (jnp.asarray(dx),))[1])(jnp.asarray(x)))
    eps = 1e-6
    fd = (np.asarray(f(x + eps * dx)) - np.asarray(f(x - eps * dx))) / (2 * eps)
    np.testing.assert_allclose(d, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


LIMITED = ACTUATED.replace('<spatial name="flexor" stiffness="40" damping="0.3" springlength="0.09">',
                           '<spatial name="flexor" stiffness="40" damping="0.3" springlength="0.09" '
                           'range="0.083 0.2" frictionloss="0.05">').replace(
    '<option gravity="0 0 -9.81"/>', '<option gravity="0 0 -9.81" timestep="0.0002" integrator="RK4"/>').replace(
    'ctrlrange="0.05 0.12"', 'ctrlrange="0.02 0.12"')


def _pulled(model):
    """The flexor's actuators at (c, 0, 0) for 0.3 s from rest, RK4 at 0.2 ms: the final q."""
    from jaxmbd import integrators as I

    def final(c):
        sol = jaxmbd.simulate(model, None, t1=0.3, integrator=I.RK4(), steps=jaxmbd.Steps(dt0=2e-4),
                              inputs=jaxmbd.Inputs(ctrl=jnp.stack([c, 0.0, 0.0])),
                              solver=jaxmbd.Solver(adjoint="none"))
        return sol.qs[-1]
    return final


def test_a_flexor_pulled_into_its_limit_moves_as_mujocos():
    """The actuators pull the flexor short (to 0.080 without a limit) against its range's lower end
    (0.083) with friction loss on it: 0.3 s from rest with RK4 at 0.2 ms here and in MuJoCo; the joint
    angles agree to 1e-4 rad (3e-5: the limit row fades in over a tenth of its resting depth where
    MuJoCo switches it on; without the range the runs agree to 1e-15)."""
    model, mm = jaxmbd.load_mjcf(LIMITED), mujoco.MjModel.from_xml_string(LIMITED)
    q1 = np.asarray(jax.jit(_pulled(model))(0.04))
    d = mujoco.MjData(mm)
    d.ctrl[:] = [0.04, 0.0, 0.0]
    for _ in range(1500):
        mujoco.mj_step(mm, d)
    assert 0.081 < d.ten_length[0] < 0.083 and abs(d.qpos).max() > 0.3, (d.ten_length, d.qpos)   # into it
    np.testing.assert_allclose(q1, d.qpos, atol=1e-4)


def test_the_pulled_flexor_s_derivative_is_the_limit_of_central_differences():
    """Central differences of the final angle with respect to the control approach its derivative
    (forward mode through the run) as their step tightens from 1e-5 to 1e-7 (the run crosses the
    limit's onset, so the function bends on the scale of 1e-5: at 1e-4 they are 60% off)."""
    final = _pulled(jaxmbd.load_mjcf(LIMITED))
    run = jax.jit(final)
    dq = float(jax.jit(lambda c: jax.jvp(final, (c,), (1.0,))[1][0])(0.05))
    errors = [abs((float(run(0.05 + h)[0]) - float(run(0.05 - h)[0])) / (2 * h) - dq) for h in (1e-5, 1e-6, 1e-7)]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-4 * abs(dq), (dq, errors)


def test_bad_paths_are_refused():
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "revolute", axis=(1, 0, 0))
    b.add_site("s0", "world")
    b.add_site("s1", "a", pos=(0, 0.1, 0))
    wrap = dict(wrap="cylinder", body="a", radius=0.01)
    for path, match in (([wrap, "s1"], "follow a site"), (["s0", wrap], "starts and ends"),
                        (["s0", ("pulley", 0.0), "s1"], "divisor must be positive"),
                        (["s0", 3, "s1"], "a path item")):
        with pytest.raises(ValueError, match=match):
            jaxmbd.ModelBuilder().add_spatial_tendon("t", path)
    b.add_spatial_tendon("t", ["s0", "nowhere"])
    with pytest.raises(ValueError, match="no site named 'nowhere'"):
        b.build()
    with pytest.raises(ValueError, match="wraps spheres and cylinders"):
        jaxmbd.load_mjcf(FINGER.replace('name="knuckle" type="cylinder" size="0.012 0.01"',
                                        'name="knuckle" type="box" size="0.012 0.01 0.01"'))
