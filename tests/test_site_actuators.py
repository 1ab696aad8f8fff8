"""Site transmissions (MuJoCo's actuator ``site=`` without ``refsite``) against MuJoCo: moments,
lengths, velocities, forces, accelerations and sensordata at random states, a flight, and the
gradient of a flight.

The quadrotor is written as the drones of robot collections are: a free body whose thrust and
body moments are motors at an ``actuation`` site (gear along the site's z and about its axes),
collision classes on its links; here the site sits off the centre of mass and a welded rotor
body carries a rotated site with a velocity-dependent general actuator.  The arm drives a rotated
tool site through hinges and a slide (a position servo with dampratio and a velocity servo); its
links do not collide."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import Inputs, Solver, Steps
from jaxmbd import integrators as I

mujoco = pytest.importorskip("mujoco")

DRONE = """
<mujoco model="quadrotor">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.001" integrator="RK4"/>
  <default>
    <default class="cf2">
      <motor ctrlrange="-1 1"/>
      <default class="collision"><geom type="box" group="3"/></default>
    </default>
  </default>
  <worldbody>
    <body name="cf2" pos="0 0 0.5" childclass="cf2">
      <freejoint name="root"/>
      <inertial pos="0 0 0" mass="0.027" diaginertia="2.3951e-5 2.3951e-5 3.2347e-5"/>
      <geom class="collision" size="0.04 0.04 0.01" mass="0"/>
      <site name="actuation" pos="0.002 -0.001 0.003"/>
      <body name="rotor" pos="0.03 0.01 0.01" euler="0.2 0 0.1">
        <geom class="collision" size="0.01 0.01 0.005" mass="0.003"/>
        <site name="rotor_site" pos="0.01 0 0.002" quat="0.9 0.1 0.2 0.3"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor class="cf2" name="body_thrust" ctrlrange="0 0.35" gear="0 0 1 0 0 0" site="actuation"/>
    <motor class="cf2" name="x_moment" gear="0 0 0 -0.00001 0 0" site="actuation"/>
    <motor class="cf2" name="y_moment" gear="0 0 0 0 -0.00001 0" site="actuation"/>
    <motor class="cf2" name="z_moment" gear="0 0 0 0 0 -0.00001" site="actuation"/>
    <general name="rotor_drag" site="rotor_site" gear="0.3 -0.2 1 0.01 0.02 -0.03" biastype="affine"
             biasprm="0 0 -0.05"/>
  </actuator>
  <sensor>
    <actuatorpos actuator="body_thrust"/>
    <actuatorvel actuator="rotor_drag"/>
    <actuatorfrc actuator="rotor_drag"/>
    <actuatorvel actuator="x_moment"/>
  </sensor>
</mujoco>
"""

ARM = """
<mujoco model="site arm">
  <compiler angle="radian" autolimits="true"/>
  <option><flag contact="disable"/></option>
  <default>
    <default class="arm">
      <joint damping="0.1" armature="0.01"/>
      <default class="collision"><geom type="capsule" group="3"/></default>
    </default>
  </default>
  <worldbody>
    <body name="base" childclass="arm">
      <joint name="j1" axis="0 0 1"/>
      <geom class="collision" fromto="0 0 0 0 0 0.3" size="0.04"/>
      <body name="upper" pos="0 0 0.3">
        <joint name="j2" axis="0 1 0"/>
        <geom class="collision" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="fore" pos="0.3 0 0">
          <joint name="j3" axis="0 1 0"/>
          <joint name="j4" type="slide" axis="1 0 0"/>
          <geom class="collision" fromto="0 0 0 0.25 0 0" size="0.025"/>
          <site name="tool" pos="0.25 0 0" euler="0.3 -0.2 0.5"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="tool_push" site="tool" gear="1 0.5 0 0 0 0" kp="20" dampratio="1"/>
    <velocity name="tool_twist" site="tool" gear="0 0 0 0 0.2 1" kv="0.5"/>
    <motor name="j1_motor" joint="j1"/>
  </actuator>
  <sensor>
    <actuatorvel actuator="tool_push"/>
    <actuatorfrc actuator="tool_push"/>
    <actuatorfrc actuator="tool_twist"/>
  </sensor>
</mujoco>
"""


def _acc(model, q, v, ctrl):
    return jaxmbd.forward_dynamics(model, q, v, jaxmbd.actuator_force(model, q, v, ctrl))


def _random_state(model, rng):
    q = np.asarray(model.q0) + rng.normal(scale=0.4, size=model.nq)
    if model.nq == 7:
        q[3:7] /= np.linalg.norm(q[3:7])
    return q, rng.normal(size=model.nv)


@pytest.mark.parametrize("xml", [DRONE, ARM], ids=["drone", "arm"])
def test_moments_forces_and_accelerations_equal_mujocos(xml):
    info = jaxmbd.load_mjcf(xml, return_info=True)
    model = info.model
    assert not info.unsupported, info.unsupported
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    np.testing.assert_allclose(model.actuators.bias[:, 2], mj.actuator_biasprm[:, 2], rtol=1e-12)  # dampratio
    rng = np.random.default_rng(7)
    acc, sensors = jax.jit(_acc), jax.jit(jaxmbd.sensordata)
    act = jax.jit(lambda m, q, v, u: m.actuators.forces(q, v, u, m)[0])
    vel = jax.jit(lambda m, q, v: m.actuators.velocities(q, v, m))
    for _ in range(4):
        q, v = _random_state(model, rng)
        lo, hi = mj.actuator_ctrlrange.T
        ctrl = rng.uniform(np.where(mj.actuator_ctrllimited, lo, -2.0), np.where(mj.actuator_ctrllimited, hi, 2.0))
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, ctrl
        mujoco.mj_forward(mj, d)
        moment = np.zeros((mj.nu, mj.nv))
        mujoco.mju_sparse2dense(moment, d.actuator_moment, d.moment_rownnz, d.moment_rowadr, d.moment_colind)
        ms = np.asarray(model.actuators.site_moments(model, jnp.asarray(q)))
        np.testing.assert_allclose(ms, moment[model.actuators.sites], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(model.actuators.lengths(jnp.asarray(q)), d.actuator_length, atol=1e-14)
        np.testing.assert_allclose(vel(model, q, v), d.actuator_velocity, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(act(model, q, v, ctrl), d.actuator_force, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(jaxmbd.actuator_force(model, q, v, ctrl), d.qfrc_actuator, rtol=1e-11,
                                   atol=1e-14)
        np.testing.assert_allclose(acc(model, q, v, ctrl), d.qacc, rtol=1e-9, atol=1e-9 * np.abs(d.qacc).max())
        np.testing.assert_allclose(sensors(model, q, v, ctrl), d.sensordata, rtol=1e-12, atol=1e-14)


def test_a_quadrotor_flies_as_mujocos_and_its_gradient_is_central_differences():
    """Thrust above hover with a roll moment: the drone climbs, rolls and drifts sideways; 0.4 s with
    jaxmbd's RK4 and MuJoCo's RK4 at 1 ms agree to 1e-8 m; d(final y)/d(roll control), forward-mode
    through the run, equals central differences (h = 1e-4) to 1e-6 relative."""
    model = jaxmbd.load_mjcf(DRONE)
    mj = mujoco.MjModel.from_xml_string(DRONE)
    ctrl = np.array([0.32, 0.4, -0.1, 0.05, 0.2])

    def final(u):
        sol = jaxmbd.simulate(model, None, t1=0.4, integrator=I.RK4(), steps=Steps(dt0=1e-3),
                              inputs=Inputs(ctrl=u), solver=Solver(adjoint="none"))
        return sol.qs[-1]
    run = jax.jit(final)
    q1 = np.asarray(run(jnp.asarray(ctrl)))
    d = mujoco.MjData(mj)
    d.ctrl[:] = ctrl
    for _ in range(400):
        mujoco.mj_step(mj, d)
    assert d.qpos[2] > 0.52 and abs(d.qpos[1]) > 1e-3, d.qpos[:3]     # climbed and drifted
    np.testing.assert_allclose(q1, d.qpos, atol=1e-8)

    h = 1e-4
    e = np.eye(len(ctrl))[1]
    dy = float(jax.jit(lambda u: jax.jvp(final, (u,), (jnp.asarray(e),))[1][1])(jnp.asarray(ctrl)))
    fd = (float(run(jnp.asarray(ctrl + h * e))[1]) - float(run(jnp.asarray(ctrl - h * e))[1])) / (2 * h)
    assert abs(dy - fd) <= 1e-6 * abs(fd), (dy, fd)


def test_site_transmissions_the_loader_and_the_builder_refuse_or_keep():
    ref = DRONE.replace('site="actuation"/>\n    <motor class="cf2" name="y_moment"',
                        'site="actuation" refsite="rotor_site"/>\n    <motor class="cf2" name="y_moment"')
    info = jaxmbd.load_mjcf(ref, return_info=True)
    assert any("refsite" in u and "x_moment" in u for u in info.unsupported), info.unsupported
    assert info.model.nu == 5
    with pytest.raises(ValueError, match="refsite needs a site transmission"):
        jaxmbd.load_mjcf(ARM.replace('<motor name="j1_motor" joint="j1"/>',
                                     '<motor name="j1_motor" joint="j1" refsite="tool"/>'))
    with pytest.raises(ValueError, match="unknown site 'nowhere'"):
        jaxmbd.load_mjcf(ARM.replace('site="tool" gear="0 0 0 0 0.2 1"', 'site="nowhere" gear="0 0 0 0 0.2 1"'))
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "revolute", axis=(0, 0, 1), mass=1.0, inertia=(0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="cannot share its transmission"):
        b.add_actuator("a", site="s")
    b.add_actuator(None, site="missing")
    with pytest.raises(ValueError, match="no site named 'missing'"):
        b.build()
