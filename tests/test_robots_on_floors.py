"""Robots on their floors behave as MuJoCo's: the soft-constraint law
(jaxmbd.forces.soft) at a keyframe with the feet a centimetre in the floor,
one second standing under position servos, the gymnasium ant at rest, and
joint friction loss, each against MuJoCo run on the same file.

The robots: the built-in go2-class quadruped scene (jaxmbd.models, written as
MuJoCo Menagerie writes robot files) and the small humanoid below (collision
classes, position servos, armature, frictionloss, a keyframe with its feet
1 cm in the floor)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd.integrators import RK4, SDIRK4, RosenbrockNystrom4
from jaxmbd import Start, Inputs, Steps, Save

jax.config.update("jax_enable_x64", True)

HUMANOID = """<mujoco model="small humanoid">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.002" cone="elliptic" impratio="10"/>
  <default>
    <default class="hum">
      <joint damping="0.5" armature="0.02" frictionloss="0.2"/>
      <position kp="300" dampratio="1" forcerange="-150 150" inheritrange="1"/>
      <default class="visual"><geom group="2" contype="0" conaffinity="0" density="0" rgba="0.7 0.7 0.8 1"/></default>
      <default class="collision">
        <geom group="3" condim="3" friction="0.8 0.02 0.01"/>
        <default class="foot"><geom type="box" size="0.09 0.045 0.015" priority="1" friction="1.0 0.02 0.01"/></default>
      </default>
      <default class="hip_x"><joint axis="1 0 0" range="-0.4 0.4"/></default>
      <default class="hip_y"><joint axis="0 1 0" range="-1.6 0.6"/></default>
      <default class="knee"><joint axis="0 1 0" range="0 2.4"/></default>
      <default class="ankle"><joint axis="0 1 0" range="-0.9 0.9"/></default>
    </default>
  </default>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <body name="pelvis" pos="0 0 0.75" childclass="hum">
      <freejoint name="root"/>
      <geom name="pelvis" class="collision" type="box" size="0.08 0.12 0.06" mass="4"/>
      <geom class="visual" type="box" size="0.08 0.12 0.06"/>
      <body name="torso" pos="0 0 0.08">
        <joint name="waist" axis="0 0 1" range="-0.6 0.6"/>
        <geom name="torso" class="collision" type="capsule" fromto="0 0 0.02 0 0 0.25" size="0.09" mass="8"/>
        <geom name="head" class="collision" type="sphere" pos="0 0 0.42" size="0.09" mass="2"/>
        <geom class="visual" type="capsule" fromto="0 0 0.02 0 0 0.25" size="0.09"/>
      </body>
      <body name="l_thigh" pos="0 0.09 -0.07">
        <joint name="l_hip_x" class="hip_x"/>
        <joint name="l_hip_y" class="hip_y"/>
        <geom name="l_thigh" class="collision" type="capsule" fromto="0 0 -0.03 0 0 -0.27" size="0.05" mass="2.5"/>
        <geom class="visual" type="capsule" fromto="0 0 -0.03 0 0 -0.27" size="0.05"/>
        <body name="l_shin" pos="0 0 -0.3">
          <joint name="l_knee" class="knee"/>
          <geom name="l_shin" class="collision" type="capsule" fromto="0 0 -0.03 0 0 -0.26" size="0.04" mass="1.5"/>
          <geom class="visual" type="capsule" fromto="0 0 -0.03 0 0 -0.26" size="0.04"/>
          <body name="l_foot" pos="0 0 -0.3">
            <joint name="l_ankle" class="ankle"/>
            <geom name="l_foot" class="foot" pos="0.03 0 -0.02" mass="0.6"/>
            <geom class="visual" type="box" size="0.09 0.045 0.015" pos="0.03 0 -0.02"/>
          </body>
        </body>
      </body>
      <body name="r_thigh" pos="0 -0.09 -0.07">
        <joint name="r_hip_x" class="hip_x"/>
        <joint name="r_hip_y" class="hip_y"/>
        <geom name="r_thigh" class="collision" type="capsule" fromto="0 0 -0.03 0 0 -0.27" size="0.05" mass="2.5"/>
        <geom class="visual" type="capsule" fromto="0 0 -0.03 0 0 -0.27" size="0.05"/>
        <body name="r_shin" pos="0 0 -0.3">
          <joint name="r_knee" class="knee"/>
          <geom name="r_shin" class="collision" type="capsule" fromto="0 0 -0.03 0 0 -0.26" size="0.04" mass="1.5"/>
          <geom class="visual" type="capsule" fromto="0 0 -0.03 0 0 -0.26" size="0.04"/>
          <body name="r_foot" pos="0 0 -0.3">
            <joint name="r_ankle" class="ankle"/>
            <geom name="r_foot" class="foot" pos="0.03 0 -0.02" mass="0.6"/>
            <geom class="visual" type="box" size="0.09 0.045 0.015" pos="0.03 0 -0.02"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position class="hum" name="waist" joint="waist"/>
    <position class="hum" name="l_hip_x" joint="l_hip_x"/>
    <position class="hum" name="l_hip_y" joint="l_hip_y"/>
    <position class="hum" name="l_knee" joint="l_knee"/>
    <position class="hum" name="l_ankle" joint="l_ankle"/>
    <position class="hum" name="r_hip_x" joint="r_hip_x"/>
    <position class="hum" name="r_hip_y" joint="r_hip_y"/>
    <position class="hum" name="r_knee" joint="r_knee"/>
    <position class="hum" name="r_ankle" joint="r_ankle"/>
  </actuator>
  <keyframe>
    <key name="stand" qpos="0 0 0.6682 1 0 0 0  0  0 -0.3 0.6 -0.3  0 -0.3 0.6 -0.3"
         ctrl="0  0 -0.3 0.6 -0.3  0 -0.3 0.6 -0.3"/>
  </keyframe>
</mujoco>
"""


def _robot(name):
    if name == "quadruped":
        path = jaxmbd.models.quadruped_scene_path()
        return jaxmbd.load_mjcf(path, warn=False), mujoco.MjModel.from_xml_path(path)
    return jaxmbd.load_mjcf(HUMANOID, warn=False), mujoco.MjModel.from_xml_string(HUMANOID)


def _mj_key(mj):
    d = mujoco.MjData(mj)
    mujoco.mj_resetDataKeyframe(mj, d, 0)
    return d


@pytest.mark.parametrize("name", [pytest.param("quadruped", marks=pytest.mark.long), "humanoid"])
def test_keyframe_contact_forces_are_mujocos(name):
    """At the keyframe (feet 1 cm into the floor, the keyframe's ctrl): the total normal force is
    within a factor 2 of MuJoCo's (mj_contactForce) and each contact's within a factor 3 (matched by
    position); the penalty law gave 10x (quadruped: 1,422 N against MuJoCo's 107 N)."""
    m, mj = _robot(name)
    d = _mj_key(mj)
    mujoco.mj_forward(mj, d)
    theirs = []
    for i in range(d.ncon):
        f = np.zeros(6)
        mujoco.mj_contactForce(mj, d, i, f)
        theirs.append((d.contact[i].pos.copy(), d.contact[i].dist, f[0]))
    assert len(theirs) >= 4 and max(dist for _, dist, _ in theirs) < -0.009
    key = m.keyframes[list(m.keyframes)[0]]
    out = jaxmbd.contact_forces(m, key.qpos, key.qvel, ctrl=key.ctrl)
    fn, pos = np.asarray(out["normal_force"]), np.asarray(out["pos"])
    total = sum(f for _, _, f in theirs)
    assert 0.5 < fn.sum() / total < 2.0, (fn.sum(), total)
    for p, _, f in theirs:
        j = np.argmin(np.linalg.norm(pos - p, axis=1))
        assert np.linalg.norm(pos[j] - p) < 1e-6 and 1 / 3 < fn[j] / f < 3, (fn[j], f)


def _mj_run(mj, ts):
    d = _mj_key(mj)
    out = []
    for t in ts:
        while d.time < t - 1e-9:
            mujoco.mj_step(mj, d)
        out.append(d.qpos.copy())
    return np.array(out)


@pytest.mark.long
@pytest.mark.parametrize("name", ["quadruped", "humanoid"])
@pytest.mark.parametrize("method", ["rosenbrock", "sdirk4", "rk4"])
def test_one_second_standing_from_the_keyframe_is_mujocos(name, method):
    """From the keyframe under its ctrl, 1 s: the base height within 1 cm and every joint within
    0.05 rad of MuJoCo's run at its own timestep and integrator, with Rosenbrock (tol 1e-4), SDIRK4
    (tol 1e-4) and RK4 at the scene's timestep; every run succeeds."""
    m, mj = _robot(name)
    ts = np.linspace(0.0, 1.0, 11)
    ref = _mj_run(mj, ts)
    key = m.keyframes[list(m.keyframes)[0]]
    integ = {"rosenbrock": RosenbrockNystrom4(), "sdirk4": SDIRK4(), "rk4": RK4()}[method]
    kw = dict(steps=Steps(dt0=mj.opt.timestep)) if method == "rk4" else dict(steps=Steps(rtol=1e-4, atol=1e-4))
    sol = jaxmbd.simulate(m, Start(jnp.asarray(key.qpos), jnp.asarray(key.qvel)), 1.0, integrator=integ,
                          inputs=Inputs(ctrl=jnp.asarray(key.ctrl)), save=Save(ts=jnp.asarray(ts)), **kw)
    assert int(sol.status) == 0
    qs = np.asarray(sol.qs)
    assert np.abs(qs[:, 2] - ref[:, 2]).max() < 0.01
    assert np.abs(qs[:, 7:] - ref[:, 7:]).max() < 0.05


@pytest.mark.long
def test_the_ant_rests_where_mujoco_rests():
    """The gymnasium ant, zero controls, 1.5 s (Rosenbrock, tol 1e-5): torso height within 1 cm of
    MuJoCo's, run at a converged step (RK4 at 0.5 ms: 0.544 m; at the file's 10 ms MuJoCo's own
    result is 0.563 m, 2 cm from its converged one)."""
    from test_mjcf import gym_asset
    path = gym_asset("ant.xml")
    src = open(path).read().replace('<option integrator="RK4" timestep="0.01"/>',
                                    '<option integrator="RK4" timestep="0.0005"/>')
    mj = mujoco.MjModel.from_xml_string(src)
    assert mj.opt.timestep == 0.0005
    d = mujoco.MjData(mj)
    while d.time < 1.5 - 1e-9:
        mujoco.mj_step(mj, d)
    m = jaxmbd.load_mjcf(path, warn=False)
    sol = jaxmbd.simulate(m, Start(jnp.asarray(mj.qpos0), jnp.zeros(mj.nv)), 1.5, integrator=RosenbrockNystrom4(),
                          steps=Steps(rtol=1e-5, atol=1e-5))
    assert int(sol.status) == 0
    assert abs(float(sol.qs[-1, 2]) - d.qpos[2]) < 0.01, (float(sol.qs[-1, 2]), d.qpos[2])


PENDULUM = """<mujoco><option timestep="{dt}"/>
  <worldbody><body name="arm"><joint name="hinge" type="hinge" axis="0 1 0" frictionloss="0.5" armature="0.01"/>
    <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.02" mass="1"/></body></worldbody></mujoco>"""


def test_a_pendulum_with_friction_loss_stops_where_mujocos_stops():
    """Released at 0.6 rad, it swings, loses energy to the friction loss (0.5 N m) and sticks where
    gravity's torque falls below it (then creeps, as MuJoCo's soft friction does): at 2 s the angle
    is MuJoCo's (0.1 ms steps) to 1e-3 rad."""
    mj = mujoco.MjModel.from_xml_string(PENDULUM.format(dt=1e-4))
    d = mujoco.MjData(mj)
    d.qpos[0] = 0.6
    while d.time < 2.0 - 1e-9:
        mujoco.mj_step(mj, d)
    assert abs(d.qvel[0]) < 0.01      # stuck (creeping)
    m = jaxmbd.load_mjcf(PENDULUM.format(dt=1e-4), warn=False)
    sol = jaxmbd.simulate(m, Start(jnp.array([0.6]), jnp.zeros(1)), 2.0, integrator=RosenbrockNystrom4(),
                          steps=Steps(rtol=1e-8, atol=1e-8))
    assert int(sol.status) == 0
    assert abs(float(sol.qs[-1, 0]) - d.qpos[0]) < 1e-3, (float(sol.qs[-1, 0]), d.qpos[0])


def test_a_joint_below_its_friction_loss_stays():
    """Held at 1.45 rad, where gravity's torque (0.24 N m) is below the loss: the joint creeps at the
    soft constraint's rate R τ / B (R = (1 - dmin)/dmin · dof_invweight0, B = 2/(dmax τ_ref)), which is
    MuJoCo's creep too (both to 2%: the smooth cone scaling adds (A + R)((1 + x⁸)^⅛ - 1) τ / B,
    x ≈ 0.5 the load over the loss)."""
    mj = mujoco.MjModel.from_xml_string(PENDULUM.format(dt=1e-3))
    d = mujoco.MjData(mj)
    d.qpos[0] = 1.45
    for _ in range(3000):
        mujoco.mj_step(mj, d)
    m = jaxmbd.load_mjcf(PENDULUM.format(dt=1e-3), warn=False)
    q = jnp.array([1.45])
    sol = jaxmbd.simulate(m, Start(q, jnp.zeros(1)), 3.0, integrator=RosenbrockNystrom4(),
                          steps=Steps(rtol=1e-8, atol=1e-8))
    v = float(sol.vs[-1, 0])
    tau = 1.0 * 9.81 * 0.2 * np.cos(float(sol.qs[-1, 0]))
    R = (1 - 0.9) / 0.9 * mj.dof_invweight0[0]
    B = 2 / (0.95 * 0.02)
    np.testing.assert_allclose(v, R * tau / B, rtol=2e-2)
    np.testing.assert_allclose(v, d.qvel[0], rtol=2e-2)
    assert 0 < v < 0.01
