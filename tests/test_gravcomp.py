"""Gravity compensation (MuJoCo's body ``gravcomp``) against a closed form and MuJoCo's own runs.

The arm below is written as robot collections write arms: a base turning about z, a shoulder and an
elbow with two hinges in one body, a welded hand with its own fraction, collision classes on
every link (contacts off: nothing touches), position actuators, damping and armature."""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd.forces import GravityCompensation, without
from jaxmbd.options import Steps

mujoco = pytest.importorskip("mujoco")

ARM = """
<mujoco model="gravcomp arm">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.0001" integrator="RK4"/>
  <default>
    <default class="arm">
      <joint damping="0.3" armature="0.02"/>
      <position kp="20" ctrlrange="-3 3"/>
      <default class="visual"><geom type="capsule" contype="0" conaffinity="0" group="2"/></default>
      <default class="collision"><geom type="capsule" group="3" contype="0" conaffinity="0"/></default>
    </default>
  </default>
  <worldbody>
    <body name="base" pos="0 0 0.4" childclass="arm" gravcomp="{g0}">
      <joint name="yaw" axis="0 0 1"/>
      <inertial pos="0.01 0 0.03" mass="1.2" diaginertia="0.004 0.004 0.003"/>
      <geom class="collision" fromto="0 0 0 0 0 0.1" size="0.05"/>
      <body name="upper" pos="0 0 0.1" gravcomp="{g1}">
        <joint name="shoulder" axis="0 1 0"/>
        <geom class="visual" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <geom class="collision" fromto="0 0 0 0.3 0 0" size="0.035" mass="0.9"/>
        <body name="lower" pos="0.3 0 0" gravcomp="{g2}">
          <joint name="elbow" axis="0 1 0"/>
          <joint name="roll" axis="1 0 0"/>
          <geom class="collision" fromto="0 0 0 0.25 0.02 0" size="0.03" mass="0.6"/>
          <body name="hand" pos="0.25 0 0" gravcomp="{g3}">
            <geom class="collision" type="box" pos="0.03 0 0.01" size="0.03 0.03 0.02" mass="0.4"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position class="arm" name="yaw" joint="yaw"/>
    <position class="arm" name="shoulder" joint="shoulder"/>
    <position class="arm" name="elbow" joint="elbow"/>
  </actuator>
  <keyframe>
    <key name="home" qpos="0 -0.4 0.9 0.1" ctrl="0 -0.4 0.9"/>
  </keyframe>
</mujoco>
"""

FULL = dict(g0=1, g1=1, g2=1, g3=1)
MIXED = dict(g0=0, g1=0.5, g2=1, g3=0.25)      # a welded hand with a fraction of its own
LIFT = dict(g0=0, g1=1.7, g2=0, g3=0)          # more than its weight, as buoyancy


def _pair(fr):
    xml = ARM.format(**fr)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # gravcomp is modelled: nothing listed as dropped
        model = jaxmbd.load_mjcf(xml)
    return model, mujoco.MjModel.from_xml_string(xml)


def _acc(model, q, v, ctrl=None):
    """The accelerations with the actuators at ``ctrl`` (zeros: MuJoCo's default)."""
    ctrl = jnp.zeros(model.actuators.nu) if ctrl is None else ctrl
    return jaxmbd.forward_dynamics(model, q, v, jaxmbd.actuator_force(model, q, v, ctrl))


def _states(model, n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.5, 1.5, (n, model.nq)), rng.normal(size=(n, model.nv))


def test_a_body_compensated_by_a_fraction_falls_with_the_rest_of_g():
    """Closed form: a body on a vertical slide, compensated by s, accelerates at -(1 - s) g."""
    for s in (0.0, 0.3, 1.0, 1.6):
        b = jaxmbd.ModelBuilder(gravity=(0.0, 0.0, -9.81))
        b.add_body("slider", joint="prismatic", axis=(0, 0, 1), mass=2.5, com=(0.1, 0.2, 0.0), gravcomp=s)
        model = b.build()
        a = jaxmbd.forward_dynamics(model, jnp.zeros(1), jnp.zeros(1), jnp.zeros(1))
        np.testing.assert_allclose(a, [-(1 - s) * 9.81], rtol=1e-14, atol=1e-14)
        # its potential: the work of the force, -s m g z, so gravity's and its own sum to (1 - s) m g z
        z = jnp.array([0.7])
        assert np.isclose(jaxmbd.potential_energy(model, z), (1 - s) * 2.5 * 9.81 * 0.7, rtol=1e-14)


def test_the_builder_refuses_a_fraction_that_is_not_finite():
    b = jaxmbd.ModelBuilder()
    with pytest.raises(ValueError, match="gravcomp"):
        b.add_body("a", joint="revolute", axis=(0, 0, 1), gravcomp=float("nan"))


@pytest.mark.parametrize("fr", [FULL, MIXED, LIFT], ids=["full", "mixed", "lift"])
def test_the_force_and_the_accelerations_equal_mujocos(fr):
    model, mj = _pair(fr)
    d = mujoco.MjData(mj)
    plain = without(model, GravityCompensation)
    qs, vs = _states(model, 4, 1)
    for q, v in zip(qs, vs):
        d.qpos[:], d.qvel[:] = q, v
        mujoco.mj_forward(mj, d)
        gc = jaxmbd.passive_force(model, q, v) - jaxmbd.passive_force(plain, q, v)
        np.testing.assert_allclose(gc, d.qfrc_gravcomp, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(_acc(model, q, v), d.qacc, rtol=1e-10, atol=1e-10)


def test_a_fully_compensated_arm_holds_still_as_mujocos_does():
    model, mj = _pair(FULL)
    q0 = np.array([0.3, -0.7, 1.1, 0.4])
    ctrl = jnp.asarray(q0[:3])   # the servos hold where the arm is: they push nothing
    np.testing.assert_allclose(_acc(model, q0, np.zeros(4), ctrl), 0.0, atol=1e-12)
    sol = jaxmbd.simulate(model, (jnp.asarray(q0), jnp.zeros(4)), t1=1.0, integrator=I.RosenbrockNystrom4(),
                          inputs=jaxmbd.Inputs(ctrl=ctrl), steps=Steps(rtol=1e-10, atol=1e-10))
    d = mujoco.MjData(mj)
    d.qpos[:], d.ctrl[:] = q0, ctrl
    for _ in range(10000):
        mujoco.mj_step(mj, d)
    np.testing.assert_allclose(np.asarray(sol.qs[-1]), q0, atol=1e-10)
    np.testing.assert_allclose(d.qpos, q0, atol=1e-10)
    # the same arm without compensation falls
    fall = _acc(without(model, GravityCompensation), q0, np.zeros(4), ctrl)
    assert np.abs(fall).max() > 1.0


@pytest.mark.parametrize("fr", [MIXED, LIFT], ids=["mixed", "lift"])
def test_a_partly_compensated_arm_moves_as_mujocos_does(fr):
    """0.5 s from rest under the position actuators' hold of the keyframe, against MuJoCo's RK4 at
    1e-4 s."""
    model, mj = _pair(fr)
    key = model.keyframes["home"]
    ctrl = jnp.asarray(key.ctrl) + 0.2
    sol = jaxmbd.simulate(model, (jnp.asarray(key.qpos) - 0.3, jnp.zeros(4)), t1=0.5,
                          integrator=I.RosenbrockNystrom4(), inputs=jaxmbd.Inputs(ctrl=ctrl),
                          steps=Steps(rtol=1e-11, atol=1e-11))
    d = mujoco.MjData(mj)
    d.qpos[:] = np.asarray(key.qpos) - 0.3
    d.ctrl[:] = ctrl
    for _ in range(5000):
        mujoco.mj_step(mj, d)
    assert np.abs(d.qpos - (np.asarray(key.qpos) - 0.3)).max() > 0.05   # it moved
    np.testing.assert_allclose(np.asarray(sol.qs[-1]), d.qpos, atol=1e-7)


def test_compensation_follows_the_mass_and_centre_of_mass_under_grad():
    """With every body compensated fully, the accelerations at rest are zero whatever the masses and
    centres of mass: their derivatives with respect to model.mass and model.com vanish (they would
    not if the compensation held the masses as built)."""
    model, _ = _pair(FULL)
    q = jnp.array([0.3, -0.7, 1.1, 0.4])

    def acc(mass, com):
        m = eqx.tree_at(lambda t: (t.mass, t.com), model, (mass, com))
        return jaxmbd.forward_dynamics(m, q, jnp.zeros(4), jnp.zeros(4))

    dm, dc = jax.jacfwd(acc, argnums=(0, 1))(model.mass, model.com)
    heavy = np.flatnonzero(np.asarray(model.mass) > 0)   # not the massless body between the elbow's two joints
    assert len(heavy) == 3
    assert np.abs(np.asarray(dm)[:, heavy]).max() < 1e-12 and np.abs(np.asarray(dc)[:, heavy]).max() < 1e-12
    plain = without(model, GravityCompensation)
    dm_plain = jax.jacfwd(lambda m: jaxmbd.forward_dynamics(eqx.tree_at(lambda t: t.mass, plain, m), q,
                                                            jnp.zeros(4), jnp.zeros(4)))(plain.mass)
    assert np.abs(np.asarray(dm_plain)).max() > 0.1


def test_the_gradient_through_a_run_equals_central_differences():
    """d q(0.3 s) / d mass of the upper link, with its half compensation, and d / d fraction (RK4 at
    2 ms: the gradient of the discrete run, which central differences of the same run check)."""
    model, _ = _pair(MIXED)
    q0 = jnp.array([0.2, -0.5, 0.8, 0.1])
    i = next(i for i, e in enumerate(model.forces) if isinstance(e, GravityCompensation))
    el = model.forces[i]
    k = model.body_names.index("upper")

    def final(mass_k, scale0):
        m = eqx.tree_at(lambda t: (t.mass, t.forces[i].scale), model,
                        (model.mass.at[k].set(mass_k), el.scale.at[0].set(scale0)))
        sol = jaxmbd.simulate(m, (q0, jnp.zeros(4)), t1=0.3, integrator=I.RK4(), steps=Steps(dt0=2e-3))
        return sol.qs[-1, 1]

    x = (model.mass[k], el.scale[0])
    g = jax.jit(jax.grad(final, argnums=(0, 1)))(*x)
    final = jax.jit(final)
    for j, eps in ((0, 1e-5), (1, 1e-5)):
        hi = [float(c) for c in x]
        lo = list(hi)
        hi[j] += eps
        lo[j] -= eps
        fd = (final(*hi) - final(*lo)) / (2 * eps)
        np.testing.assert_allclose(g[j], fd, rtol=1e-5)
        assert abs(fd) > 1e-3


def test_batched_under_jit_and_vmap():
    model, mj = _pair(MIXED)
    qs, vs = _states(model, 5, 2)
    f = jax.jit(jax.vmap(lambda q, v: _acc(model, q, v)))
    out = np.asarray(f(jnp.asarray(qs), jnp.asarray(vs)))
    d = mujoco.MjData(mj)
    for i in range(5):
        d.qpos[:], d.qvel[:] = qs[i], vs[i]
        mujoco.mj_forward(mj, d)
        np.testing.assert_allclose(out[i], d.qacc, rtol=1e-10, atol=1e-10)


def test_actuatorgravcomp_under_a_force_range_is_named_in_the_warning():
    xml = ARM.format(**FULL).replace('<joint name="shoulder" axis="0 1 0"/>',
                                     '<joint name="shoulder" axis="0 1 0" actuatorgravcomp="true" '
                                     'actuatorfrcrange="-1 1"/>')
    info = jaxmbd.load_mjcf(xml, return_info=True, warn=False)
    assert any("actuatorgravcomp" in u and "shoulder" in u for u in info.unsupported)
    free = jaxmbd.load_mjcf(xml.replace(' actuatorfrcrange="-1 1"', ""), return_info=True, warn=False)
    assert not any("actuatorgravcomp" in u for u in free.unsupported)
