"""Sensors (jaxmbd.sensors) against MuJoCo's sensordata, central differences and runs.

The robot is written as robot collections write theirs: a floating torso with an IMU site, a leg
of a hinge, a ball and a slide joint with a welded foot pad, collision classes on every link (no
floor: nothing touches, so the accelerations are the smooth dynamics'), position and motor
actuators, a sensor of every kind jaxmbd models (touch reads zero: no floor), and one it keeps
only as a slot."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd.options import Save, Steps

mujoco = pytest.importorskip("mujoco")

BOT = """
<mujoco model="sensor bot">
  <compiler angle="radian" autolimits="true"/>
  <default>
    <default class="bot">
      <joint damping="0.1" armature="0.01"/>
      <position kp="30" ctrlrange="-2 2"/>
      <default class="collision"><geom group="3" contype="0" conaffinity="0"/></default>
    </default>
  </default>
  <worldbody>
    <site name="origin" pos="0.1 -0.2 0.05" euler="0.1 0.2 0.3"/>
    <body name="torso" pos="0 0 0.5" childclass="bot">
      <freejoint name="root"/>
      <geom class="collision" type="box" size="0.15 0.08 0.04" mass="3"/>
      <site name="imu" pos="0.02 0.01 0.03" euler="0.2 -0.1 0.4"/>
      <body name="shoulder" pos="0.15 0 0">
        <joint name="hip" axis="0 1 0"/>
        <geom class="collision" type="capsule" fromto="0 0 0 0.2 0 0" size="0.03" mass="0.5"/>
        <body name="forearm" pos="0.2 0 0">
          <joint name="wrist" type="ball"/>
          <geom class="collision" type="capsule" fromto="0 0 0 0 0.02 -0.2" size="0.025" mass="0.3"/>
          <body name="slider" pos="0 0 -0.2">
            <joint name="ext" type="slide" axis="0 0 1"/>
            <inertial pos="0.01 0 0" mass="0.2" diaginertia="1e-3 2e-3 3e-3"/>
            <site name="tip" pos="0 0.01 -0.05" quat="0.9 0.1 0.3 0.2"/>
            <body name="pad">
              <geom class="collision" type="sphere" size="0.02" pos="0 0 -0.05" mass="0.05"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position class="bot" name="hip" joint="hip"/>
    <motor name="ext" joint="ext" gear="2" ctrlrange="-5 5"/>
  </actuator>
  <sensor>
    <jointpos joint="hip"/>
    <jointvel name="hip_v" joint="hip" cutoff="0.5"/>
    <ballquat name="wrist_q" joint="wrist"/>
    <ballangvel name="wrist_w" joint="wrist"/>
    <jointpos name="ext_q" joint="ext"/>
    <actuatorpos name="ext_len" actuator="ext"/>
    <actuatorvel name="ext_rate" actuator="ext"/>
    <actuatorfrc name="hip_f" actuator="hip"/>
    <jointactuatorfrc name="ext_qfrc" joint="ext"/>
    <touch name="foot_touch" site="tip"/>
    <framepos name="imu_pos" objtype="site" objname="imu"/>
    <framequat name="imu_quat" objtype="site" objname="imu"/>
    <framexaxis objtype="xbody" objname="forearm"/>
    <frameyaxis objtype="site" objname="tip" reftype="site" refname="imu"/>
    <framezaxis objtype="xbody" objname="pad"/>
    <framepos name="tip_in_torso" objtype="site" objname="tip" reftype="xbody" refname="torso"/>
    <framepos name="slider_com" objtype="body" objname="slider"/>
    <framequat name="tip_rel" objtype="site" objname="tip" reftype="xbody" refname="shoulder"/>
    <framequat name="pad_quat" objtype="xbody" objname="pad"/>
    <framelinvel objtype="site" objname="tip"/>
    <frameangvel objtype="xbody" objname="slider"/>
    <framepos objtype="site" objname="origin"/>
    <framepos objtype="site" objname="tip" reftype="site" refname="origin"/>
    <framelinacc name="tip_acc" objtype="site" objname="tip"/>
    <gyro name="gyro" site="imu"/>
    <velocimeter site="imu" cutoff="1.5"/>
    <accelerometer name="acc" site="imu"/>
    <accelerometer site="tip" cutoff="20"/>
    <subtreecom body="torso"/>
    <subtreecom body="world"/>
    <subtreelinvel body="shoulder"/>
    <subtreeangmom body="torso"/>
    <subtreeangmom body="forearm"/>
  </sensor>
</mujoco>
"""
SLOTS_ONLY = ("tip_acc",)


@pytest.fixture(scope="module")
def pair():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        info = jaxmbd.load_mjcf(BOT, return_info=True)
    return info, mujoco.MjModel.from_xml_string(BOT), [str(x.message) for x in w]


def _unit(x):
    return x / np.linalg.norm(x)


def _states(model, n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = np.asarray(jaxmbd.neutral_q(model)) + 0.6 * rng.normal(size=model.nq)
        q[3:7], q[8:12] = _unit(q[3:7]), _unit(q[8:12])
        out.append((q, 1.5 * rng.normal(size=model.nv), rng.uniform(-3, 3, model.nu)))
    return out


def _mujoco(mj, q, v, ctrl):
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, ctrl
    mujoco.mj_forward(mj, d)
    return d.sensordata.copy()


def _compare(s, ours, theirs, tol):
    """Every modelled sensor's entries equal (quaternions up to sign); slots-only ones zero."""
    assert ours.shape == theirs.shape
    for name, kind, a, n in zip(s.names, s.kinds, s.adr, s.dims):
        x, y = ours[a:a + n], theirs[a:a + n]
        if name in SLOTS_ONLY:
            assert not np.any(x), name
            continue
        if kind in ("framequat", "ballquat") and np.dot(x, y) < 0:
            y = -y
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol, err_msg=f"{name} ({kind})")


def test_the_layout_is_mujocos(pair):
    info, mj, _ = pair
    s = info.model.sensors
    assert s.size == mj.nsensordata and s.n == mj.nsensor
    np.testing.assert_array_equal(s.adr, mj.sensor_adr)
    np.testing.assert_array_equal(s.dims, mj.sensor_dim)
    assert s.names[1] == "hip_v" and s.slot("acc") == slice(mj.sensor_adr[26], mj.sensor_adr[26] + 3)


def test_the_warning_names_only_the_slots_kept(pair):
    info, _, msgs = pair
    lines = [u for u in info.unsupported if "sensor" in u]
    assert len(lines) == 1, info.unsupported
    assert any("framelinacc" in u and "tip_acc" in u for u in lines)
    assert any("tip_acc" in m for m in msgs)


def test_every_modelled_sensor_equals_mujocos_sensordata(pair):
    info, mj, _ = pair
    model = info.model
    f = jax.jit(jaxmbd.sensordata)
    clamped = 0
    for q, v, ctrl in _states(model, 6, 0):
        ours = np.asarray(f(model, q, v, ctrl))
        theirs = _mujoco(mj, q, v, ctrl)
        _compare(model.sensors, ours, theirs, 1e-9)
        clamped += abs(ours[model.sensors.slot("hip_v")][0]) == 0.5
    assert clamped >= 1   # the cutoff was exercised


def test_its_derivatives_equal_central_differences(pair):
    model = pair[0].model
    q, v, ctrl = _states(model, 1, 3)[0]
    dq, dv = np.random.default_rng(4).normal(size=(2, model.nq)), np.random.default_rng(5).normal(size=model.nv)
    f = jax.jit(lambda x, y: jaxmbd.sensordata(model, x, y, ctrl))
    _, tangent = jax.jvp(f, (jnp.asarray(q), jnp.asarray(v)), (jnp.asarray(dq[0]), jnp.asarray(dv)))
    eps = 1e-6
    fd = (np.asarray(f(q + eps * dq[0], v + eps * dv)) - np.asarray(f(q - eps * dq[0], v - eps * dv))) / (2 * eps)
    np.testing.assert_allclose(np.asarray(tangent), fd, rtol=1e-6, atol=1e-6)
    # reverse mode agrees with forward mode: <w, J (dq, dv)> from the pullback of w
    w = np.random.default_rng(6).normal(size=model.sensors.size)
    gq, gv = jax.grad(lambda x, y: jnp.dot(jnp.asarray(w), f(x, y)), argnums=(0, 1))(jnp.asarray(q), jnp.asarray(v))
    np.testing.assert_allclose(np.dot(gq, dq[0]) + np.dot(gv, dv), np.dot(w, tangent), rtol=1e-10)


def test_recorded_in_a_batched_run_as_observe(pair):
    info, mj, _ = pair
    model = info.model
    states = _states(model, 3, 7)
    ctrl = jnp.asarray(states[0][2])
    q0 = jnp.stack([jnp.asarray(s[0]) for s in states])
    v0 = 0.2 * jnp.stack([jnp.asarray(s[1]) for s in states])

    def run(q, v):
        return jaxmbd.simulate(model, (q, v), t1=0.05, integrator=I.RK4(),
                               inputs=jaxmbd.Inputs(ctrl=ctrl), steps=Steps(dt0=0.005),
                               save=Save(ts=jnp.array([0.02, 0.05]),
                                         observe=lambda m, q, v: jaxmbd.sensordata(m, q, v, ctrl)))

    sol = jax.jit(jax.vmap(run))(q0, v0)
    assert sol.obs.shape == (3, 2, model.sensors.size)
    for i in range(3):
        for k in range(2):
            q, v = np.asarray(sol.qs[i, k]), np.asarray(sol.vs[i, k])
            np.testing.assert_allclose(np.asarray(sol.obs[i, k]),
                                       np.asarray(jaxmbd.sensordata(model, q, v, ctrl)), rtol=1e-12, atol=1e-12)
            _compare(model.sensors, np.asarray(sol.obs[i, k]), _mujoco(mj, q, v, np.asarray(ctrl)), 1e-9)


def test_the_imu_at_rest_reads_gravity_upward():
    """Closed form: a body held by a vertical slide at rest on nothing but its spring reads
    +g along the world's z (an accelerometer measures the specific force)."""
    b = jaxmbd.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("box", joint="prismatic", axis=(0, 0, 1), mass=2.0, stiffness=2.0 * 9.81 / 0.1, spring_ref=0.0)
    b.add_site("imu", "box", pos=(0.1, 0.0, 0.0), quat=(np.cos(0.25), 0.0, np.sin(0.25), 0.0))
    b.add_sensor("accelerometer", name="acc", site="imu")
    b.add_sensor("framezaxis", obj="imu", objtype="site")
    model = b.build()
    out = np.asarray(jaxmbd.sensordata(model, jnp.array([-0.1]), jnp.zeros(1)))
    np.testing.assert_allclose(jaxmbd.forward_dynamics(model, jnp.array([-0.1]), jnp.zeros(1), jnp.zeros(1)), 0.0,
                               atol=1e-12)
    # the site is turned by 0.5 rad about y: world z is (-sin, 0, cos) in its coordinates
    np.testing.assert_allclose(out[:3], 9.81 * np.array([-np.sin(0.5), 0.0, np.cos(0.5)]), atol=1e-12)
    np.testing.assert_allclose(out[3:6], [np.sin(0.5), 0.0, np.cos(0.5)], atol=1e-12)


def test_the_builder_names_what_is_wrong():
    b = jaxmbd.ModelBuilder()
    b.add_body("a", joint="revolute", axis=(0, 0, 1))
    b.add_body("w", parent="a", joint="fixed")
    with pytest.raises(ValueError, match="unknown kind"):
        b.add_sensor("thermometer", joint="a")
    with pytest.raises(ValueError, match="needs joint="):
        b.add_sensor("jointpos")
    with pytest.raises(ValueError, match="needs objtype"):
        b.add_sensor("framepos", obj="a")
    with pytest.raises(ValueError, match="cutoff"):
        b.add_sensor("jointpos", joint="a", cutoff=-1)
    for kw, msg in ((dict(kind="ballquat", joint="a"), "ball joint"),
                    (dict(kind="jointpos", joint="nope"), "no joint named"),
                    (dict(kind="framequat", obj="a", objtype="body"), "principal-axis"),
                    (dict(kind="subtreecom", body="w"), "welded"),
                    (dict(kind="gyro", site="nowhere"), "no site named"),
                    (dict(kind="framelinvel", obj="a", objtype="xbody", ref="w", reftype="xbody"), "velocities"),
                    (dict(kind="actuatorfrc", actuator="m"), "no actuator")):
        bb = jaxmbd.ModelBuilder()
        bb.add_body("a", joint="revolute", axis=(0, 0, 1))
        bb.add_body("w", parent="a", joint="fixed")
        bb.add_sensor(kw.pop("kind"), **kw)
        with pytest.raises(ValueError, match=msg):
            bb.build()
