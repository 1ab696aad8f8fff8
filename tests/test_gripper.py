"""A tendon-driven two-finger gripper (a fixed tendon through both fingers' slides, an actuator on
the tendon, the fingers coupled by a joint equality, as robot collections write their grippers)
closes on a box in the air and holds it against gravity for 1 s as MuJoCo's does."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd

mujoco = pytest.importorskip("mujoco")

GRIP = """
<mujoco model="gripper">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.002" cone="elliptic" impratio="10"/>
  <default>
    <default class="gripper">
      <joint type="slide" damping="2" armature="0.01" range="0 0.05"/>
      <default class="pad"><geom type="box" size="0.01 0.02 0.04" friction="1.5" group="3" mass="0.05"/></default>
    </default>
  </default>
  <worldbody>
    <body name="hand" pos="0 0 0.5" childclass="gripper">
      <geom type="box" size="0.03 0.08 0.02" pos="0 0 0.06" mass="0.5" contype="0" conaffinity="0"/>
      <body name="left" pos="0 0.06 0">
        <joint name="left" axis="0 -1 0"/>
        <geom class="pad"/>
      </body>
      <body name="right" pos="0 -0.06 0">
        <joint name="right" axis="0 1 0"/>
        <geom class="pad"/>
      </body>
    </body>
    <body name="box" pos="0 0 0.5">
      <freejoint/>
      <geom type="box" size="0.02 0.03 0.02" mass="0.1" friction="1.5"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="split"><joint joint="left" coef="0.5"/><joint joint="right" coef="0.5"/></fixed>
  </tendon>
  <equality><joint joint1="left" joint2="right" solimp="0.95 0.99 0.001" solref="0.005 1"/></equality>
  <actuator>
    <general name="grip" tendon="split" ctrlrange="0 0.05" gainprm="200" biasprm="0 -200 -10" forcerange="-30 30"/>
  </actuator>
  <keyframe><key name="open" qpos="0.0 0.0  0 0 0.5 1 0 0 0" ctrl="0.05"/></keyframe>
</mujoco>
"""


@pytest.mark.long
def test_a_tendon_driven_gripper_holds_a_box_as_mujocos():
    """Fingers and box over 1 s against MuJoCo's run at the file's 2 ms step, within 1 mm: the
    fingers close 1 cm in 0.2 s, the box slips 3 mm while the grip builds and then hangs; the
    fingers rest at MuJoCo's depth in the box (their rows weighted as MuJoCo's simple bodies)."""
    mm = mujoco.MjModel.from_xml_string(GRIP)
    d = mujoco.MjData(mm)
    mujoco.mj_resetDataKeyframe(mm, d, 0)
    ref = []
    for _ in range(500):
        mujoco.mj_step(mm, d)
        ref.append(d.qpos.copy())
    ref = np.array(ref)
    model = jaxmbd.load_mjcf(GRIP)
    key = model.keyframes["open"]
    ts = jnp.asarray(np.arange(1, 501) * mm.opt.timestep)
    sol = jax.jit(lambda m: jaxmbd.simulate(
        m, jaxmbd.Start(jnp.asarray(key.qpos), jnp.zeros(m.nv)), 1.0,
        integrator=jaxmbd.integrators.RosenbrockNystrom4(), inputs=jaxmbd.Inputs(ctrl=jnp.asarray(key.ctrl)),
        steps=jaxmbd.Steps(rtol=1e-5, atol=1e-5), save=jaxmbd.Save(ts=ts)))(model)
    assert int(sol.status) == 0
    qs = np.asarray(sol.qs)
    assert ref[-1, 0] > 0.01 and 0.002 < ref[0, 4] - ref[-1, 4] < 0.005     # closed on it; it hangs
    np.testing.assert_allclose(qs[:, :2], ref[:, :2], atol=1e-3)             # the fingers
    np.testing.assert_allclose(qs[:, 2:5], ref[:, 2:5], atol=1e-3)           # the box
    np.testing.assert_allclose(qs[:, 0], qs[:, 1], atol=1e-6)                # coupled by the equality
    np.testing.assert_allclose(qs[-1, :2], ref[-1, :2], atol=1e-6)           # the grip's resting depth


SIMPLE_CASES = {   # an MJCF body on slides over a floor: does MuJoCo's compiler make it "simple"?
    "one box": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 0" range="-1 1"/>'
                '<geom type="box" size="0.01 0.02 0.04" mass="0.05"/></body>', True),
    "two slides": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="1 0 0" range="-1 1"/>'
                   '<joint type="slide" axis="0 0 1"/><geom type="sphere" size="0.03" mass="0.2"/></body>', True),
    "on a fixed base": ('<body name="base"><geom type="box" size="0.1 0.1 0.01" pos="0 0 0.3" contype="0" '
                        'conaffinity="0" mass="1"/><body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 0" '
                        'range="-1 1"/><geom type="box" size="0.04 0.02 0.01" mass="0.05"/></body></body>', True),
    "two geoms in order": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 0" range="-1 1"/>'
                           '<geom type="box" size="0.01 0.02 0.04" mass="0.05"/>'
                           '<geom type="sphere" size="0.01" mass="0.01"/></body>', True),
    "two geoms out of order": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 0" range="-1 1"/>'
                               '<geom type="box" size="0.04 0.02 0.01" mass="0.05"/>'
                               '<geom type="sphere" size="0.01" mass="0.01"/></body>', False),
    "diaginertia": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 0" range="-1 1"/>'
                    '<inertial pos="0 0 0" mass="1" diaginertia="1 2 3"/><geom type="sphere" size="0.03" '
                    'mass="0"/></body>', True),
    "fullinertia": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 0" range="-1 1"/>'
                    '<inertial pos="0 0 0" mass="1" fullinertia="1 2 3 0 0 0"/><geom type="sphere" '
                    'size="0.03" mass="0"/></body>', False),
    "off-centre mass": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 0" range="-1 1"/>'
                        '<geom type="sphere" size="0.03" pos="0.01 0 0" mass="0.2"/></body>', False),
    "tilted slide": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 1" range="-1 1"/>'
                     '<geom type="sphere" size="0.03" mass="0.2"/></body>', False),
    "hinge": ('<body name="b" pos="0 0 0.1"><joint type="hinge" axis="0 1 0" range="-1 1"/>'
              '<geom type="sphere" size="0.03" mass="0.2"/></body>', False),
    "with a child": ('<body name="b" pos="0 0 0.1"><joint type="slide" axis="0 1 0" range="-1 1"/>'
                     '<geom type="sphere" size="0.03" mass="0.2"/><body><geom type="sphere" size="0.01" '
                     'mass="0.01"/></body></body>', False),
}


@pytest.mark.parametrize("case", list(SIMPLE_CASES))
def test_the_rows_weights_follow_mujocos_simple_bodies(case):
    """MuJoCo's compiler takes 1/mass as body_invweight0 and dof_invweight0 of a "simple" body on
    slides (armature and the mass matrix aside); the contact and limit rows' Â are MuJoCo's, simple
    or not."""
    body, simple = SIMPLE_CASES[case]
    xml = (f'<mujoco><worldbody><geom name="floor" type="plane" size="1 1 0.1"/>{body}</worldbody>'
           '<default><joint armature="0.01"/></default></mujoco>')
    mm = mujoco.MjModel.from_xml_string(xml)
    b = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY, "b")
    assert (mm.body_simple[b] == 2) == simple
    model = jaxmbd.load_mjcf(xml)
    contact = next(e for e in model.forces if isinstance(e, jaxmbd.forces.contact.Contact))
    floor_pairs = [k for k, (g1, g2) in enumerate(r for _, _, rows in contact.groups for r in rows)
                   if "floor" in (contact.geom_names[g1], contact.geom_names[g2])]
    np.testing.assert_allclose(np.asarray(contact.invweight)[floor_pairs], mm.body_invweight0[b, 0], rtol=1e-12,
                               atol=1e-200)
    limit = next(e for e in model.forces if isinstance(e, jaxmbd.forces.JointLimit))
    np.testing.assert_allclose(np.asarray(limit.invweight)[0], mm.dof_invweight0[mm.jnt_dofadr[0]], rtol=1e-12)
