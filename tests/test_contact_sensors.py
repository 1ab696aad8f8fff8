"""Touch, force and torque sensors (jaxmbd.sensors) against MuJoCo's sensordata: a leg on a floor,
written as robot collections write theirs (collision classes, a position actuator, a touch site
around the foot, a force/torque site at the knee), at random states in and out of contact, their
derivatives against central differences, and recorded in a batched run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd.options import Save, Steps

mujoco = pytest.importorskip("mujoco")

LEG = """
<mujoco model="leg">
  <compiler angle="radian" autolimits="true"/>
  <option cone="pyramidal"/>
  <default>
    <default class="leg">
      <joint damping="0.2" armature="0.01"/>
      <position kp="40" ctrlrange="-2 2"/>
      <default class="collision"><geom group="3" friction="0.8" contype="2" conaffinity="1"/></default>
    </default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="hip" pos="0 0 0.5" childclass="leg">
      <joint name="height" type="slide" axis="0 0 1"/>
      <joint name="swing" type="slide" axis="1 0 0"/>
      <geom class="collision" type="box" size="0.1 0.08 0.04" mass="4"/>
      <body name="thigh">
        <joint name="hip_pitch" axis="0 1 0" range="-1.5 1.5"/>
        <geom class="collision" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.8"/>
        <body name="shin" pos="0 0 -0.2">
          <joint name="knee" axis="0 1 0" range="-2.5 0.2"/>
          <site name="knee_ft" pos="0 0 -0.02" euler="0.1 0.3 -0.2" size="0.01"/>
          <geom class="collision" type="capsule" fromto="0 0 0 0.02 0 -0.2" size="0.025" mass="0.4"/>
          <geom name="foot" class="collision" type="sphere" pos="0.02 0 -0.2" size="0.04" mass="0.1"/>
          <site name="sole" type="box" pos="0.02 0 -0.22" size="0.05 0.05 0.04"/>
          <site name="toe" type="capsule" pos="0.06 0 -0.2" size="0.02 0.02" quat="0.7071 0 0.7071 0"/>
          <site name="heel" type="sphere" pos="-0.03 0 -0.22" size="0.025"/>
          <site name="ankle" type="cylinder" pos="0.02 0 -0.21" size="0.045 0.03"/>
          <site name="bubble" type="ellipsoid" pos="0.02 0 -0.22" size="0.05 0.03 0.045"/>
        </body>
      </body>
    </body>
    <body name="block" pos="0.4 0 0.05">
      <freejoint/>
      <geom class="collision" type="box" size="0.05 0.05 0.05" mass="0.5"/>
      <site name="block_base" type="box" pos="0 0 -0.05" size="0.06 0.06 0.01"/>
      <site name="block_c" pos="0 0 0"/>
    </body>
  </worldbody>
  <actuator>
    <position class="leg" name="hip" joint="hip_pitch"/>
    <position class="leg" name="knee" joint="knee"/>
  </actuator>
  <sensor>
    <touch name="sole" site="sole"/>
    <touch name="toe" site="toe"/>
    <touch name="heel" site="heel"/>
    <touch name="ankle" site="ankle"/>
    <touch name="bubble" site="bubble"/>
    <force name="knee_f" site="knee_ft"/>
    <torque name="knee_t" site="knee_ft"/>
    <touch name="block_touch" site="block_base"/>
    <force name="block_f" site="block_c"/>
    <torque name="block_t" site="block_c"/>
    <jointpos joint="knee"/>
  </sensor>
</mujoco>
"""


@pytest.fixture(scope="module")
def pair():
    return jaxmbd.load_mjcf(LEG), mujoco.MjModel.from_xml_string(LEG)


def _states(mj, n, seed, depth):
    """Random states whose foot is ``depth`` into the floor (negative: above it), the block resting."""
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(mj)
    out = []
    for _ in range(n):
        q = np.zeros(mj.nq)
        q[2:4] = rng.uniform([-0.8, -1.6], [0.8, -0.2])
        q[1] = 0.2 * rng.normal()
        q[4:7] = [0.4, 0.0, 0.0499]
        q[7:11] = [1.0, 0.0, 0.0, 0.0]
        d.qpos[:] = q
        mujoco.mj_kinematics(mj, d)
        foot = d.geom_xpos[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, "foot")]
        q[0] = -(foot[2] - 0.04) - depth
        v = rng.normal(size=mj.nv) * np.r_[0.2, 0.3, 1.0, 1.0, 0.05 * np.ones(6)]
        out.append((q, v, rng.uniform(-1, 1, mj.nu)))
    return out


def _mujoco(mj, q, v, ctrl):
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, ctrl
    mujoco.mj_forward(mj, d)
    return d.sensordata.copy(), d


def test_out_of_contact_the_force_and_torque_are_the_inertial_ones_to_1e9(pair):
    model, mj = pair
    f = jax.jit(jaxmbd.sensordata)
    for q, v, ctrl in _states(mj, 4, 0, -0.05):
        ours, (theirs, d) = np.asarray(f(model, q, v, ctrl)), _mujoco(mj, q, v, ctrl)
        assert d.ncon == 4                                   # only the block touches the floor
        s = model.sensors
        for name in ("sole", "toe", "heel", "ankle", "bubble"):
            assert ours[s.slot(name)][0] == 0.0
        for name in ("knee_f", "knee_t"):
            np.testing.assert_allclose(ours[s.slot(name)], theirs[s.slot(name)], rtol=1e-9, atol=1e-9)


def test_in_contact_they_are_mujocos_to_1e9(pair):
    """The foot 2-8 mm into the floor, sliding and sticking, the block resting: each touch zone sums
    the contacts MuJoCo's does (zero where MuJoCo's is zero), and every value equals MuJoCo's to 1e-9
    (the soft solves' contact forces agree to rounding)."""
    model, mj = pair
    f = jax.jit(jaxmbd.sensordata)
    seen = set()
    for k, (q, v, ctrl) in enumerate(_states(mj, 8, 1, 0.002) + _states(mj, 8, 2, 0.008)):
        ours, (theirs, d) = np.asarray(f(model, q, v, ctrl)), _mujoco(mj, q, v, ctrl)
        assert d.ncon >= 5, k
        s = model.sensors
        for name, kind in zip(s.names, s.kinds):
            x, y = ours[s.slot(name)], theirs[s.slot(name)]
            assert (x == 0).all() == (y == 0).all(), (k, name, x, y)
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9, err_msg=f"{k} {name}")
            if kind == "touch" and y[0] > 0:
                seen.add(name)
    assert {"sole", "bubble", "block_touch"} <= seen and len(seen) >= 4, seen


def test_the_derivatives_equal_central_differences(pair):
    model, mj = pair
    q, v, ctrl = _states(mj, 1, 3, 0.004)[0]
    f = jax.jit(lambda x, y: jaxmbd.sensordata(model, x, y, ctrl))
    rng = np.random.default_rng(5)
    dq, dv = rng.normal(size=model.nq) * np.r_[1e-2 * np.ones(4), np.zeros(7)], rng.normal(size=model.nv)
    _, tangent = jax.jvp(f, (jnp.asarray(q), jnp.asarray(v)), (jnp.asarray(dq), jnp.asarray(dv)))
    eps = 1e-6
    fd = (np.asarray(f(q + eps * dq, v + eps * dv)) - np.asarray(f(q - eps * dq, v - eps * dv))) / (2 * eps)
    assert np.abs(fd[model.sensors.slot("sole")]) > 1.0           # the touch reading moves with the state
    np.testing.assert_allclose(np.asarray(tangent), fd, rtol=1e-5, atol=1e-5)


def test_recorded_in_a_batched_run_as_observe(pair):
    model, mj = pair
    states = _states(mj, 2, 4, 0.001)
    ctrl = jnp.zeros(model.nu)
    q0 = jnp.stack([jnp.asarray(s[0]) for s in states])
    v0 = jnp.zeros((2, model.nv))

    def run(q, v):
        return jaxmbd.simulate(model, (q, v), t1=0.01, integrator=I.RK4(), steps=Steps(dt0=2e-4),
                               save=Save(ts=jnp.array([0.006, 0.01]),
                                         observe=lambda m, q, v: jaxmbd.sensordata(m, q, v, ctrl)))
    sol = jax.jit(jax.vmap(run))(q0, v0)
    assert np.all(np.asarray(sol.status) == 0)
    for b in range(2):
        for t in range(2):
            want = jaxmbd.sensordata(model, sol.qs[b, t], sol.vs[b, t], ctrl)
            np.testing.assert_allclose(np.asarray(sol.obs[b, t]), np.asarray(want), rtol=1e-12, atol=1e-12)
            theirs, _ = _mujoco(mj, np.asarray(sol.qs[b, t]), np.asarray(sol.vs[b, t]), np.zeros(model.nu))
            np.testing.assert_allclose(np.asarray(sol.obs[b, t]), theirs, rtol=1e-9, atol=1e-9)


def test_what_is_refused_and_what_is_kept_as_a_slot():
    """A force/torque site on a body without a joint: the builder refuses it, the loader keeps its
    slot (zeros) and names it; a site of a type MuJoCo's sites do not have is refused."""
    b = jaxmbd.ModelBuilder()
    b.add_body("link", "world", "revolute", axis=(0, 1, 0))
    b.add_body("pad", "link", "fixed", pos=(0, 0, -0.2), mass=0.1)
    b.add_site("s", "pad")
    b.add_sensor("force", site="s")
    with pytest.raises(ValueError, match="no joint of its own"):
        b.build()
    with pytest.raises(ValueError, match="type 'cone'"):
        jaxmbd.ModelBuilder().add_site("s", "world", type="cone")
    xml = LEG.replace('<site name="knee_ft" pos="0 0 -0.02"', '<body name="pad"><site name="knee_ft" pos="0 0 -0.02"')
    xml = xml.replace('size="0.01"/>', 'size="0.01"/></body>', 1)
    info = jaxmbd.load_mjcf(xml, return_info=True, warn=False)
    s = info.model.sensors
    assert s.placeholder[s.names.index("knee_f")] and s.placeholder[s.names.index("knee_t")]
    assert any("force and torque at sites of bodies without joints: knee_f, knee_t" in u
               for u in info.unsupported), info.unsupported
    assert s.size == mujoco.MjModel.from_xml_string(xml).nsensordata
