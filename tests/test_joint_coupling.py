"""Joint couplings (MuJoCo's <equality><joint>) against MuJoCo's accelerations and runs.

A two-finger gripper written as robot collections write theirs: a wrist hinge, two slide fingers whose
right one mimics the left through a joint equality (polycoef "0 -1"; here with a small quadratic term
as well), a position actuator on the left finger, collision classes on every link (nothing touches),
and a hinge held near its start by a one-joint equality (no joint2)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import Inputs, Steps

mujoco = pytest.importorskip("mujoco")

GRIPPER = """
<mujoco model="coupled gripper">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.0005" integrator="RK4"/>
  <default>
    <default class="gripper">
      <joint damping="0.5" armature="0.001"/>
      <position kp="40" ctrlrange="-0.04 0.04"/>
      <default class="collision"><geom type="box" group="3" contype="0" conaffinity="0"/></default>
    </default>
    <equality solref="0.01 1"/>
  </default>
  <worldbody>
    <body name="hand" pos="0 0 0.5" childclass="gripper">
      <joint name="wrist" axis="0 0 1"/>
      <geom class="collision" size="0.05 0.02 0.02" mass="0.6"/>
      <body name="left" pos="0.02 0 -0.04">
        <joint name="left" type="slide" axis="1 0 0"/>
        <geom class="collision" size="0.005 0.01 0.03" mass="0.05"/>
      </body>
      <body name="right" pos="-0.02 0 -0.04">
        <joint name="right" type="slide" axis="1 0 0"/>
        <geom class="collision" size="0.005 0.01 0.03" mass="0.05"/>
      </body>
      <body name="thumb" pos="0 0.03 0" euler="0 0.3 0">
        <joint name="thumb" axis="1 0 0" ref="0.2"/>
        <geom class="collision" size="0.01 0.03 0.01" pos="0 0.03 0" mass="0.04"/>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint name="mimic" joint1="right" joint2="left" polycoef="0 -1 {c2}"/>
    <joint name="hold" joint1="thumb" polycoef="0.05" solimp="0.95 0.99 0.001"/>
  </equality>
  <actuator>
    <position class="gripper" name="grip" joint="left"/>
  </actuator>
</mujoco>
"""


def _pair(c2=0.0):
    xml = GRIPPER.format(c2=c2)
    info = jaxmbd.load_mjcf(xml, return_info=True)
    return info, mujoco.MjModel.from_xml_string(xml)


def _acc(model, q, v, ctrl):
    return jaxmbd.forward_dynamics(model, q, v, jaxmbd.actuator_force(model, q, v, ctrl))


@pytest.mark.parametrize("c2", [0.0, 3.0], ids=["mimic", "quadratic"])
def test_the_accelerations_equal_mujocos(c2):
    info, mj = _pair(c2)
    model = info.model
    assert not any("equality" in u for u in info.unsupported), info.unsupported
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(0)
    f = jax.jit(_acc)
    for _ in range(5):
        q = np.asarray(model.q0) + rng.normal(scale=[0.5, 0.01, 0.01, 0.05])
        v = rng.normal(scale=[1.0, 0.05, 0.05, 0.5])
        ctrl = rng.uniform(-0.04, 0.04, 1)
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, ctrl
        mujoco.mj_forward(mj, d)
        assert d.nefc == 2      # MuJoCo's two equality rows, nothing else
        np.testing.assert_allclose(f(model, q, v, ctrl), d.qacc, rtol=1e-9, atol=1e-9 * np.abs(d.qacc).max())


def test_the_fingers_move_together_as_in_mujoco():
    """0.3 s of the gripper closing from rest, against MuJoCo's RK4 at 0.5 ms: the right finger mirrors
    the left to the soft constraint's lag, as MuJoCo's does."""
    info, mj = _pair(0.0)
    model = info.model
    ctrl = jnp.array([0.03])
    sol = jaxmbd.simulate(model, None, t1=0.3, integrator=I.RosenbrockNystrom4(), inputs=Inputs(ctrl=ctrl),
                          steps=Steps(rtol=1e-9, atol=1e-9))
    d = mujoco.MjData(mj)
    d.ctrl[:] = ctrl
    for _ in range(600):
        mujoco.mj_step(mj, d)
    q = np.asarray(sol.qs[-1])
    assert q[1] > 0.01 and abs(q[1] + q[2]) < 1e-3 * q[1]        # closed, and mirrored
    np.testing.assert_allclose(q, d.qpos, atol=1e-6)


def test_the_builder_names_what_is_wrong():
    b = jaxmbd.ModelBuilder()
    b.add_body("a", joint="revolute", axis=(0, 0, 1))
    b.add_body("s", parent="a", joint="spherical")
    with pytest.raises(ValueError, match="not defined"):
        b.add_joint_coupling("a", "nope")
    with pytest.raises(ValueError, match="itself"):
        b.add_joint_coupling("a", "a")
    with pytest.raises(ValueError, match="polycoef"):
        b.add_joint_coupling("a", polycoef=(1, 2))
    b.add_joint_coupling("a", "s")
    with pytest.raises(ValueError, match="hinge and slide"):
        b.build()


def test_its_derivatives_equal_central_differences():
    info, _ = _pair(3.0)
    model = info.model
    rng = np.random.default_rng(1)
    q = np.asarray(model.q0) + rng.normal(scale=[0.5, 0.01, 0.01, 0.05])
    v = rng.normal(scale=[1.0, 0.05, 0.05, 0.5])
    ctrl = jnp.array([0.01])
    f = jax.jit(lambda x, y: _acc(model, x, y, ctrl))
    dq, dv = rng.normal(size=4), rng.normal(size=4)
    _, t = jax.jvp(f, (jnp.asarray(q), jnp.asarray(v)), (jnp.asarray(dq), jnp.asarray(dv)))
    eps = 1e-6
    fd = (np.asarray(f(q + eps * dq, v + eps * dv)) - np.asarray(f(q - eps * dq, v - eps * dv))) / (2 * eps)
    np.testing.assert_allclose(np.asarray(t), fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
    # and through the polynomial's coefficient
    i = next(i for i, e in enumerate(model.forces) if isinstance(e, jaxmbd.forces.JointCoupling))

    def with_c2(c2):
        m = eqx.tree_at(lambda t: t.forces[i].polycoef, model, model.forces[i].polycoef.at[0, 2].set(c2))
        return _acc(m, jnp.asarray(q), jnp.asarray(v), ctrl)
    g = jax.jacfwd(with_c2)(3.0)
    fd = (np.asarray(with_c2(3.0 + 1e-5)) - np.asarray(with_c2(3.0 - 1e-5))) / 2e-5
    assert np.abs(fd).max() > 1e-3
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())
