"""Fixed tendons (MuJoCo's <tendon><fixed>) against MuJoCo: lengths, passive forces, tendon
actuators, accelerations and a run.

The gripper is written as the Panda's is in robot collections: two slide fingers coupled by a fixed
tendon "split" (coefficients 0.5) that one general actuator drives, and by a joint equality that
makes the fingers mirror; a wrist hinge with a sprung, damped tendon over it and the fingers;
collision classes on every link (nothing touches)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import Inputs, Steps
from jaxmbd.forces.tendon import FixedTendons

mujoco = pytest.importorskip("mujoco")

HAND = """
<mujoco model="tendon gripper">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.0005" integrator="RK4"/>
  <default>
    <default class="hand">
      <joint armature="0.001" damping="0.2"/>
      <general dyntype="none" biastype="affine" ctrlrange="0 255" forcerange="-100 100"
               gainprm="0.01568627451 0 0" biasprm="0 -100 -10"/>
      <default class="collision"><geom type="box" group="3" contype="0" conaffinity="0"/></default>
    </default>
    <tendon stiffness="0"/>
  </default>
  <worldbody>
    <body name="hand" pos="0 0 0.5" childclass="hand">
      <joint name="wrist" axis="0 0 1"/>
      <geom class="collision" size="0.05 0.02 0.02" mass="0.6"/>
      <body name="left_finger" pos="0 0 -0.05">
        <joint name="finger_joint1" type="slide" axis="0 1 0"/>
        <geom class="collision" size="0.01 0.005 0.02" mass="0.02"/>
      </body>
      <body name="right_finger" pos="0 0 -0.05" quat="0 0 0 1">
        <joint name="finger_joint2" type="slide" axis="0 1 0"/>
        <geom class="collision" size="0.01 0.005 0.02" mass="0.02"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="split">
      <joint joint="finger_joint1" coef="0.5"/>
      <joint joint="finger_joint2" coef="0.5"/>
    </fixed>
    <fixed name="twist" stiffness="2" damping="0.3" springlength="{spring}">
      <joint joint="wrist" coef="1"/>
      <joint joint="finger_joint1" coef="-3"/>
    </fixed>
  </tendon>
  {extra}
  <equality>
    <joint joint1="finger_joint1" joint2="finger_joint2" solimp="0.95 0.99 0.001" solref="0.005 1"/>
  </equality>
  <actuator>
    <general class="hand" name="actuator8" tendon="split"/>
    <motor name="wrist" joint="wrist" gear="2"/>
  </actuator>
  <sensor>
    <tendonpos name="split_length" tendon="split"/>
    <tendonvel name="twist_rate" tendon="twist" cutoff="0.5"/>
    <actuatorpos name="grip_length" actuator="actuator8"/>
    <actuatorvel name="grip_rate" actuator="actuator8"/>
  </sensor>
</mujoco>
"""


# a second wrist-and-finger tendon, limited and with friction loss (soft rows)
LIMITED = """<tendon>
    <fixed name="span" range="-0.2 0.3" solreflimit="0.01 0.8" frictionloss="0.05">
      <joint joint="wrist" coef="0.5"/>
      <joint joint="finger_joint2" coef="2"/>
    </fixed>
  </tendon>"""


def _pair(spring="0.1", extra=""):
    xml = HAND.format(spring=spring, extra=extra)
    info = jaxmbd.load_mjcf(xml, return_info=True)
    return info, mujoco.MjModel.from_xml_string(xml)


def _acc(model, q, v, ctrl):
    return jaxmbd.forward_dynamics(model, q, v, jaxmbd.actuator_force(model, q, v, ctrl))


@pytest.mark.parametrize("spring", ["0.1", "-0.05 0.2", "-1"], ids=["length", "deadband", "at_qpos0"])
def test_lengths_forces_and_accelerations_equal_mujocos(spring):
    info, mj = _pair(spring)
    model = info.model
    assert not any("tendon" in u for u in info.unsupported), info.unsupported
    el = next(e for e in model.forces if isinstance(e, FixedTendons))
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(2)
    f = jax.jit(_acc)
    for _ in range(5):
        q = rng.normal(scale=[0.6, 0.02, 0.02])
        v = rng.normal(scale=[1.0, 0.1, 0.1])
        ctrl = rng.uniform([0, -1], [255, 1])
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, ctrl
        mujoco.mj_forward(mj, d)
        np.testing.assert_allclose(el.lengths(model, jnp.asarray(q)), d.ten_length[1:], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(model.actuators.lengths(jnp.asarray(q)), d.actuator_length, rtol=1e-12,
                                   atol=1e-14)
        np.testing.assert_allclose(jaxmbd.actuator_force(model, q, v, ctrl), d.qfrc_actuator, rtol=1e-11,
                                   atol=1e-12)
        np.testing.assert_allclose(f(model, q, v, ctrl), d.qacc, rtol=1e-9, atol=1e-9 * np.abs(d.qacc).max())
        np.testing.assert_allclose(jaxmbd.sensordata(model, q, v, ctrl), d.sensordata, rtol=1e-12, atol=1e-14)


def test_a_limited_tendon_with_friction_loss_equals_mujocos_rows():
    """States past either end of the span tendon's range (deeper than the rows' fade-in), moving: the
    limit row, the friction-loss row and the joint equality solved together, as MuJoCo solves them."""
    info, mj = _pair(extra=LIMITED)
    model = info.model
    assert not any("tendon" in u for u in info.unsupported), info.unsupported
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(3)
    f = jax.jit(_acc)
    for past in (-0.05, 0.08, 0.0):      # below the range, above it, inside (friction only)
        for _ in range(3):
            q = rng.normal(scale=[0.3, 0.01, 0.01])
            L = 0.5 * q[0] + 2 * q[2]
            target = {-0.05: -0.2 - 0.05, 0.08: 0.3 + 0.08, 0.0: 0.05}[past]
            q[0] += 2 * (target - L)       # move the wrist so that the span length is at the target
            v = rng.normal(scale=[0.5, 0.05, 0.05])
            ctrl = rng.uniform([0, -1], [255, 1])
            d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, ctrl
            mujoco.mj_forward(mj, d)
            assert d.nefc == (3 if past else 2)      # the equality, the friction loss, the limit
            np.testing.assert_allclose(f(model, q, v, ctrl), d.qacc, rtol=1e-9,
                                       atol=1e-9 * np.abs(d.qacc).max())


COUPLED = """<tendon>
    <fixed name="span" springlength="0.05" stiffness="1">
      <joint joint="wrist" coef="0.5"/>
      <joint joint="finger_joint2" coef="2"/>
    </fixed>
  </tendon>
  <equality>
    <tendon tendon1="span" tendon2="twist" polycoef="0.01 0.5 0.2" solref="0.01 1"/>
  </equality>"""


def test_a_tendon_coupling_equals_mujocos_row():
    """<equality><tendon>: the span tendon's length held to a quadratic of the twist tendon's, a soft
    row beside the fingers' joint equality, as MuJoCo's."""
    info, mj = _pair(extra=COUPLED)
    model = info.model
    assert not any("tendon" in u or "equality" in u for u in info.unsupported), info.unsupported
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(4)
    f = jax.jit(_acc)
    for _ in range(4):
        q = rng.normal(scale=[0.3, 0.02, 0.02])
        v = rng.normal(scale=[0.5, 0.05, 0.05])
        ctrl = rng.uniform([0, -1], [255, 1])
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, ctrl
        mujoco.mj_forward(mj, d)
        assert d.nefc == 2
        np.testing.assert_allclose(f(model, q, v, ctrl), d.qacc, rtol=1e-9, atol=1e-9 * np.abs(d.qacc).max())


def test_the_tendon_driven_gripper_closes_as_mujocos_does():
    info, mj = _pair()
    model = info.model
    ctrl = jnp.array([40.0, 0.3])
    sol = jaxmbd.simulate(model, None, t1=0.5, integrator=I.RosenbrockNystrom4(), inputs=Inputs(ctrl=ctrl),
                          steps=Steps(rtol=1e-9, atol=1e-9))
    d = mujoco.MjData(mj)
    d.ctrl[:] = ctrl
    for _ in range(1000):
        mujoco.mj_step(mj, d)
    q = np.asarray(sol.qs[-1])
    assert abs(q[1]) > 1e-3 and abs(q[1] - q[2]) < 1e-2 * abs(q[1])      # moved, and mirrored (to the soft row)
    np.testing.assert_allclose(q, d.qpos, atol=1e-6)


def test_the_builder_names_what_is_wrong():
    b = jaxmbd.ModelBuilder()
    b.add_body("a", joint="revolute", axis=(0, 0, 1))
    b.add_body("s", parent="a", joint="spherical")
    with pytest.raises(ValueError, match="not defined"):
        b.add_fixed_tendon("t", ["nope"], [1.0])
    with pytest.raises(ValueError, match="one finite coefficient per joint"):
        b.add_fixed_tendon("t", ["a"], [1.0, 2.0])
    with pytest.raises(ValueError, match="springlength"):
        b.add_fixed_tendon("t", ["a"], [1.0], springlength=(0.2, 0.1))
    b.add_fixed_tendon("t", ["a", "s"], [1.0, 1.0], stiffness=1.0)
    with pytest.raises(ValueError, match="hinge and slide"):
        b.build()
    c = jaxmbd.ModelBuilder()
    c.add_body("a", joint="revolute", axis=(0, 0, 1))
    c.add_actuator(None, tendon="missing")
    with pytest.raises(ValueError, match="no tendon named 'missing'"):
        c.build()
