"""A robot written as robot collections write theirs, with the parts of such a file:
an arm on a fixed base under gravity compensation, position servos with frictionloss and armature,
a two-finger gripper on slides driven through a fixed tendon and coupled by a joint equality, a
wrist force/torque site, a touch pad, an IMU, a mocap target, a cube on the floor and a keyframe.
It loads without a warning, and its accelerations and sensordata are MuJoCo's."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd

mujoco = pytest.importorskip("mujoco")

ARM = """
<mujoco model="arm7">
  <compiler angle="radian" autolimits="true"/>
  <option integrator="implicitfast" cone="elliptic" impratio="10"/>
  <default>
    <default class="arm">
      <joint armature="0.1" damping="1" frictionloss="0.1" range="-2.8 2.8"/>
      <position kp="200" kv="20" forcerange="-80 80"/>
      <default class="visual"><geom type="mesh" contype="0" conaffinity="0" group="2"/></default>
      <default class="collision"><geom group="3" type="capsule"/></default>
      <default class="finger">
        <joint type="slide" axis="0 1 0" range="0 0.04" armature="0.01" damping="5" frictionloss="0"/>
        <geom type="box" size="0.008 0.01 0.025" group="3" friction="1.2" mass="0.05"/>
      </default>
    </default>
  </default>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="2 2 0.05"/>
    <body name="base" pos="0 0 0.3" childclass="arm">
      <geom class="collision" type="cylinder" size="0.06 0.05" pos="0 0 0.05" mass="2"/>
      <body name="link1" pos="0 0 0.1" gravcomp="1">
        <joint name="j1" axis="0 0 1"/>
        <geom class="collision" fromto="0 0 0 0 0 0.25" size="0.045" mass="1.5"/>
        <body name="link2" pos="0 0 0.25" gravcomp="1">
          <joint name="j2" axis="0 1 0" range="-1.7 1.7"/>
          <geom class="collision" fromto="0 0 0 0.3 0 0" size="0.04" mass="1.2"/>
          <body name="link3" pos="0.3 0 0" gravcomp="1">
            <joint name="j3" axis="0 1 0"/>
            <geom class="collision" fromto="0 0 0 0.25 0 0" size="0.035" mass="0.8"/>
            <body name="wrist" pos="0.25 0 0" gravcomp="1">
              <joint name="j4" axis="1 0 0"/>
              <geom class="collision" type="sphere" size="0.04" mass="0.4"/>
              <site name="ft" pos="0.04 0 0"/>
              <site name="imu" pos="0.02 0 0.01"/>
              <body name="hand" pos="0.06 0 0" gravcomp="1">
                <joint name="j5" axis="0 1 0"/>
                <geom class="collision" type="box" size="0.02 0.05 0.02" mass="0.3"/>
                <body name="left" pos="0.04 0.01 0" childclass="finger">
                  <joint name="fl"/>
                  <geom/>
                  <site name="left_pad" type="box" size="0.01 0.012 0.027"/>
                </body>
                <body name="right" pos="0.04 -0.01 0" childclass="finger">
                  <joint name="fr" axis="0 -1 0"/>
                  <geom/>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
    <body name="target" mocap="true" pos="0.5 0 0.4">
      <geom type="sphere" size="0.02" contype="0" conaffinity="0" rgba="0 1 0 0.5"/>
    </body>
    <body name="cube" pos="0.6 0 0.025">
      <freejoint/>
      <geom type="box" size="0.025 0.025 0.025" mass="0.1"/>
    </body>
  </worldbody>
  <contact><exclude body1="base" body2="link1"/></contact>
  <tendon>
    <fixed name="split"><joint joint="fl" coef="0.5"/><joint joint="fr" coef="0.5"/></fixed>
  </tendon>
  <equality><joint joint1="fl" joint2="fr" solimp="0.95 0.99 0.001" solref="0.005 1"/></equality>
  <actuator>
    <position class="arm" name="a1" joint="j1"/>
    <position class="arm" name="a2" joint="j2"/>
    <position class="arm" name="a3" joint="j3"/>
    <position class="arm" name="a4" joint="j4" kp="50" kv="5"/>
    <position class="arm" name="a5" joint="j5" kp="50" kv="5"/>
    <general name="grip" tendon="split" ctrlrange="0 0.04" forcerange="-50 50" gainprm="500" biastype="affine" biasprm="0 -500 -20"/>
  </actuator>
  <sensor>
    <jointpos joint="j2"/>
    <force name="wrist_force" site="ft"/>
    <torque name="wrist_torque" site="ft"/>
    <touch name="pad" site="left_pad"/>
    <accelerometer site="imu"/>
    <gyro site="imu"/>
    <framepos objtype="site" objname="imu"/>
    <tendonpos tendon="split"/>
    <actuatorfrc actuator="grip"/>
  </sensor>
  <keyframe>
    <key name="home" qpos="0 0 0 0 0 0.02 0.02 0.6 0 0.0249 1 0 0 0" ctrl="0 0 0 0 0 0.02" mpos="0.6 0 0.3"/>
  </keyframe>
</mujoco>
"""


def _states(mm, key, n=5, seed=0):
    """The home keyframe (the cube resting), then random states: arm, fingers and cube moving, the
    cube sliding, the servos' targets moved."""
    rng = np.random.default_rng(seed)
    out = [(key.qpos.copy(), np.zeros(mm.nv), key.ctrl.copy())]
    for _ in range(n - 1):
        q, v, u = key.qpos.copy(), 0.5 * rng.normal(size=mm.nv), key.ctrl.copy()
        q[:5] += 0.3 * rng.normal(size=5)
        v[7:] *= 0.1
        u[:5] += 0.2 * rng.normal(size=5)
        out.append((q, v, u))
    return out


def _mujoco(mm, q, v, u):
    d = mujoco.MjData(mm)
    mujoco.mj_resetDataKeyframe(mm, d, 0)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, u
    mujoco.mj_forward(mm, d)
    assert d.ncon == 4                                         # the cube on the floor
    return d


@pytest.fixture(scope="module")
def arm():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        model = jaxmbd.load_mjcf(ARM)
    key = model.keyframes["home"]
    return model, key, mujoco.MjModel.from_xml_string(ARM), [str(x.message) for x in w]


def test_it_loads_without_a_warning_and_accelerates_as_mujocos(arm):
    """No warning; the accelerations to 1e-9 at rest on the keyframe and to 1e-6 of their size in
    motion (the sliding cube's elliptic cone: MuJoCo's solver tolerance)."""
    model, key, mm, msgs = arm
    assert msgs == []
    model = jaxmbd.set_mocap(model, key.mpos, key.mquat)
    accel = jax.jit(lambda m, q, v, u: jaxmbd.forward_dynamics(m, q, v, jaxmbd.actuator_force(m, q, v, u)))
    for k, (q, v, u) in enumerate(_states(mm, key)):
        d = _mujoco(mm, q, v, u)
        tol = 1e-9 if k == 0 else 1e-6 * np.abs(d.qacc).max()
        np.testing.assert_allclose(np.asarray(accel(model, q, v, u)), d.qacc, rtol=0, atol=tol)


def test_its_sensordata_is_mujocos(arm):
    """Joint, wrist force and torque, touch pad, IMU, frame, tendon and actuator sensors to 1e-9 at
    the same states."""
    model, key, mm, _ = arm
    sense = jax.jit(jaxmbd.sensordata)
    for q, v, u in _states(mm, key):
        d = _mujoco(mm, q, v, u)
        np.testing.assert_allclose(np.asarray(sense(model, q, v, u)), d.sensordata, rtol=1e-9, atol=1e-9)
    ours = np.asarray(sense(model, key.qpos, np.zeros(mm.nv), key.ctrl))
    assert np.abs(ours[model.sensors.slot("wrist_force")]).max() > 1      # the hand's weight
