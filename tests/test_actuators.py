"""Actuators (jaxmbd.forces.actuator, the MJCF loader's <actuator>) and the
``ctrl`` input of simulate/rollout.

MuJoCo is the oracle: ``jaxmbd.actuator_force`` equals MuJoCo's
``qfrc_actuator`` to 1e-12 (relative to the largest entry, at least 1) at
random states and random controls (drawn beyond the control ranges, so the
clamps act) on every gymnasium asset with actuators and on two documents
written here that use every modelled kind and option.  Then ``ctrl`` in the
integrated equations: a constant ctrl equals the same force given as a
``control`` torque function, gradients through a run equal central
differences, per-member controls under rollout/vmap equal separate runs,
and bad input is a clear error."""

import dataclasses
import glob
import os
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators
from jaxmbd import Start, Inputs, Steps

mujoco = pytest.importorskip("mujoco")

TOL = 1e-12
N_STATES = 20

_batched_force = jax.jit(jax.vmap(jaxmbd.actuator_force, (None, 0, 0, 0)))


def random_states(mj, n, seed):
    """(qpos, qvel, ctrl) at n random states: qpos0 moved by O(1) steps (quaternions
    renormalised, w of either sign), ctrl up to 3x beyond each control range."""
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(mj)
    Q, V = [], []
    for _ in range(n):
        d.qpos[:] = mj.qpos0 + rng.normal(size=mj.nq)
        mujoco.mj_normalizeQuat(mj, d.qpos)
        Q.append(d.qpos.copy())
        V.append(rng.normal(size=mj.nv))
    span = np.where(mj.actuator_ctrllimited, np.abs(mj.actuator_ctrlrange).max(1), 1.0)
    U = rng.uniform(-3, 3, size=(n, mj.nu)) * np.maximum(span, 1.0)
    return np.array(Q), np.array(V), U


def mujoco_qfrc(mj, Q, V, U):
    d = mujoco.MjData(mj)
    out = []
    for q, v, u in zip(Q, V, U):
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, u
        mujoco.mj_forward(mj, d)
        out.append(d.qfrc_actuator.copy())
    return np.array(out)


def assert_matches_mujoco(model, mj, seed=0, n=N_STATES):
    tree = model.tree if isinstance(model, jaxmbd.Mechanism) else model
    assert tree.nu == mj.nu
    Q, V, U = random_states(mj, n, seed)
    ref = mujoco_qfrc(mj, Q, V, U)
    got = np.asarray(_batched_force(tree, jnp.asarray(Q), jnp.asarray(V), jnp.asarray(U)))
    err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1.0)
    assert err <= TOL, f"qfrc_actuator differs by {err:.2e} (relative)"
    return ref


def load(xml):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        info = jaxmbd.load_mjcf(xml, return_info=True)
    return info, [str(x.message) for x in w]


# --- (a) the gymnasium assets ----------------------------------------------------------------------

def _gym_assets():
    try:
        import gymnasium
    except ImportError:
        return []
    root = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
    return sorted(glob.glob(os.path.join(root, "*.xml")))


GYM = [p for p in _gym_assets() if "<actuator" in open(p).read()]


@pytest.mark.parametrize("path", GYM, ids=[os.path.basename(p) for p in GYM])
def test_gymnasium_assets_match_mujoco(path):
    mj = mujoco.MjModel.from_xml_path(path)
    try:
        info, _ = load(path)
    except ValueError as e:   # not loadable for reasons other than actuators
        pytest.skip(f"jaxmbd does not load {os.path.basename(path)}: {e}")
    assert mj.nu > 0
    assert not any("actuator" in u for u in info.unsupported), info.unsupported
    ref = assert_matches_mujoco(info.model, mj)
    assert np.abs(ref).max() > 0


def test_gymnasium_assets_found():
    if not _gym_assets():
        pytest.skip("gymnasium is not installed")
    assert len(GYM) >= 10


# --- (b) two documents with every modelled kind and option -------------------------------------------

BODIES = """
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="h1" type="hinge" axis="0 1 0" range="-30 60"/>
      <geom type="box" size=".1 .2 .3" mass="1" pos=".1 .2 .3"/>
      <body name="b" pos="0 0 -1">
        <joint name="s1" type="slide" axis="1 0 1" range="-0.5 0.5"/>
        <geom type="capsule" size=".05 .2" mass="0.7"/>
        <body name="c" pos="0.3 0 -0.5">
          <joint name="ball" type="ball"/>
          <geom type="box" size=".1 .15 .2" mass="1.3" pos=".1 0 .2"/>
          <body name="e" pos="0 0.2 -0.4">
            <joint name="h2" type="hinge" axis="1 0 0" armature="0.05"/>
            <joint name="h3" type="hinge" axis="0 0 1"/>
            <geom type="sphere" size=".1" mass="0.4" pos="0 0 -.1"/>
          </body>
        </body>
      </body>
    </body>
    <body name="f" pos="1 0 0">
      <freejoint name="fr"/>
      <geom type="box" size=".1 .2 .3" mass="1.1"/>
    </body>
  </worldbody>
"""

# autolimits on (MuJoCo's default), degrees; every kind, defaults and classes,
# dampratio (position and general), inheritrange, jointinparent on ball and free
# joints, force ranges, a joint actuator-force range with two actuators on it
DOC_A = """
<mujoco>
  <compiler angle="degree"/>
  <option gravity="0 0 -9.81"/>
  <default>
    <motor gear="2" ctrlrange="-1 1"/>
    <default class="frc"><joint actuatorfrcrange="-1.5 2.5"/></default>
    <default class="pos"><position kp="7" kv="2"/></default>
    <default class="vel"><velocity kv="5" forcerange="-4 4"/></default>
    <default class="gen">
      <general gainprm="4 1 1" biasprm="1 -3 -2" gaintype="affine" biastype="affine" gear="1.5"/>
      <default class="gen2"><general gear="3" ctrlrange="-2 2"/></default>
    </default>
    <default class="damp"><damper kv="6" ctrlrange="0 2"/></default>
    <default class="two"><position kp="7" kv="3"/><velocity kv="5"/></default>
  </default>
""" + BODIES.replace('name="h1" type="hinge"', 'name="h1" class="frc" type="hinge"') + """
  <actuator>
    <motor name="m_h1" joint="h1"/>
    <motor name="m_h1b" joint="h1" gear="3 9 9" ctrlrange="-2 2"/>
    <position name="p_s1" class="pos" joint="s1" kp="11"/>
    <position name="p_h3" class="pos" joint="h3" ctrlrange="-0.5 0.5" forcerange="-3 2"/>
    <position name="p_h1_dr" joint="h1" kp="5" dampratio="0.7" ctrlrange="-3 3"/>
    <position name="p_h1_ir" joint="h1" kp="2" inheritrange="0.8"/>
    <position name="p_two" class="two" joint="h3"/>
    <velocity name="v_h2" class="vel" joint="h2"/>
    <velocity name="v_pos" class="pos" joint="h2"/>
    <general name="g_s1" class="gen" joint="s1" forcerange="-3 3"/>
    <general name="g_h3" class="gen2" joint="h3" forcelimited="false" forcerange="-1 1"/>
    <general name="g_dr" joint="h2" gainprm="5" biasprm="0 -5 0.8" biastype="affine"/>
    <general name="g_fixed" joint="h3" gainprm="2 7 7" biasprm="0.5 0.25 -0.5" biastype="affine"
             ctrllimited="false" ctrlrange="-1 1"/>
    <damper name="d_s1" class="damp" joint="s1"/>
    <motor name="m_ball" joint="ball" gear="1 2 3" ctrlrange="-5 5"/>
    <motor name="m_ball_ip" jointinparent="ball" gear="0.5 -1 2"/>
    <position name="p_ball" joint="ball" kp="3" kv="0.5" gear="1 -2 0.5" ctrllimited="false"/>
    <velocity name="v_ball" jointinparent="ball" kv="2" gear="0 1 1"/>
    <motor name="m_free" joint="fr" gear="1 2 3 4 5 6"/>
    <general name="g_free_ip" jointinparent="fr" gear="1 -1 2 0.5 1 -2" gainprm="2 0 0.5"
             gaintype="affine" biasprm="0.1 0 -0.3" biastype="affine" forcerange="-6 6"/>
    <motor name="m_s1_inparent" jointinparent="s1" gear="1.5"/>
  </actuator>
</mujoco>
"""

# autolimits off (every *limited flag explicit), radians, clampctrl disabled,
# an actuator group disabled, an explicit joint actuator-force range
DOC_B = """
<mujoco>
  <compiler angle="radian" autolimits="false"/>
  <option actuatorgroupdisable="3"><flag clampctrl="disable"/></option>
  <default>
    <position kp="4" kv="1"/>
  </default>
""" + BODIES.replace('range="-30 60"', 'range="-0.5 1" limited="true" actuatorfrclimited="true" '
                                    'actuatorfrcrange="-3 3"').replace('range="-0.5 0.5"', '') + """
  <actuator>
    <position name="p_h1" joint="h1" forcelimited="true" forcerange="-2 1" ctrllimited="true"
              ctrlrange="-0.2 0.2"/>
    <position name="p_h1_ir" joint="h1" inheritrange="1" ctrllimited="true"/>
    <motor name="m_s1" joint="s1" gear="2" ctrllimited="true" ctrlrange="-1 1"/>
    <motor name="m_s1_off" joint="s1" group="3"/>
    <velocity name="v_h2" joint="h2" kv="3" ctrllimited="false" forcelimited="true" forcerange="-1 1"/>
    <damper name="d_h3" joint="h3" kv="2" ctrlrange="0 1"/>
    <general name="g_ball" joint="ball" gear="1 1 1" gainprm="1" biasprm="0 -2 -1" biastype="affine"
             ctrllimited="false"/>
    <motor name="m_free" joint="fr" gear="0 0 1 0 0 1" ctrllimited="false" group="2"/>
  </actuator>
</mujoco>
"""


@pytest.mark.parametrize("doc", ["A", "B"])
def test_documents_match_mujoco(doc):
    xml = {"A": DOC_A, "B": DOC_B}[doc]
    mj = mujoco.MjModel.from_xml_string(xml)
    info, _ = load(xml)
    assert not any("actuator" in u for u in info.unsupported), info.unsupported
    model = info.model
    act = model.actuators
    assert act.names == tuple(mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(mj.nu))
    # the compiled parameters themselves, MuJoCo's general form
    np.testing.assert_allclose(np.asarray(act.gear), mj.actuator_gear, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(act.gain), mj.actuator_gainprm[:, :3], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(np.asarray(act.bias), mj.actuator_biasprm[:, :3], rtol=1e-12, atol=1e-15)
    clamp = not mj.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CLAMPCTRL
    assert act.ctrl_limited == tuple(bool(x) and clamp for x in mj.actuator_ctrllimited)
    assert act.force_limited == tuple(bool(x) for x in mj.actuator_forcelimited)
    ref = assert_matches_mujoco(model, mj, seed=1)
    assert np.abs(ref).max() > 0
    if doc == "A":   # actuation switched off: no force at all, in both
        off = DOC_A.replace('<option gravity="0 0 -9.81"/>', '<option><flag actuation="disable"/></option>')
        mj_off = mujoco.MjModel.from_xml_string(off)
        assert np.abs(assert_matches_mujoco(load(off)[0].model, mj_off, n=3)).max() == 0


def test_documents_cover_every_option():
    """The two documents above use every kind and option the loader models."""
    both = DOC_A + DOC_B
    for word in ("<motor", "<position", "<velocity", "<damper", "<general", 'gaintype="affine"',
                 'biastype="affine"', "gear=", "ctrlrange", "ctrllimited", "forcerange", "forcelimited",
                 "actuatorfrcrange", "actuatorfrclimited", "jointinparent", "dampratio", "inheritrange",
                 'autolimits="false"', "<default class", 'clampctrl="disable"', "actuatorgroupdisable",
                 'joint="ball"', 'joint="fr"', 'joint="s1"', 'joint="h1"'):
        assert word in both, word


# --- what the loader does not model -------------------------------------------------------------

DOC_UNSUPPORTED = BODIES.join(["<mujoco>", """
  <tendon><fixed name="t"><joint joint="h1" coef="1"/><joint joint="h2" coef="-0.5"/></fixed></tendon>
  <actuator>
    <motor name="m1" joint="h1" gear="2"/>
    <intvelocity name="iv" joint="h2" kp="3" actrange="-1 1"/>
    <motor name="tm" tendon="t"/>
    <cylinder name="cy" joint="s1" timeconst="0.1"/>
    <general name="filt" joint="h3" dyntype="filter" dynprm="0.2"/>
    <position name="pt" joint="h3" kp="2" timeconst="0.05"/>
    <adhesion name="ad" body="c" gain="2" ctrlrange="0 1"/>
    <motor name="m2" joint="s1"/>
  </actuator>
</mujoco>"""])


def test_unsupported_actuators_keep_their_slot_and_are_listed():
    mj = mujoco.MjModel.from_xml_string(DOC_UNSUPPORTED)
    info, msgs = load(DOC_UNSUPPORTED)
    model = info.model
    assert model.nu == mj.nu == 8
    assert model.actuators.active == (True, False, True, False, False, False, False, True)   # tm: a fixed tendon
    listed = "; ".join(info.unsupported)
    for name in ("iv", "cy", "filt", "pt", "ad"):
        assert name in listed
    assert "m1" not in listed and "m2" not in listed and "tm" not in listed
    assert "intvelocity" in listed and "adhesion" in listed and "activation dynamics" in listed
    assert len(msgs) == 1 and "iv" in msgs[0]
    # the modelled ones act as in MuJoCo: its qfrc_actuator less the unmodelled actuators' share
    Q, V, U = random_states(mj, 5, seed=2)
    d = mujoco.MjData(mj)
    got = np.asarray(_batched_force(model, jnp.asarray(Q), jnp.asarray(V), jnp.asarray(U)))
    for k in range(5):
        d.qpos[:], d.qvel[:], d.ctrl[:] = Q[k], V[k], U[k]
        mujoco.mj_forward(mj, d)
        moment = np.zeros((mj.nu, mj.nv))
        mujoco.mju_sparse2dense(moment, d.actuator_moment, d.moment_rownnz, d.moment_rowadr, d.moment_colind)
        off = [i for i in range(mj.nu) if not model.actuators.active[i]]
        ref = d.qfrc_actuator - moment[off].T @ d.actuator_force[off]
        assert np.abs(got[k] - ref).max() <= TOL * max(np.abs(ref).max(), 1.0)


def test_gymnasium_loader_warning_has_no_actuators():
    if not GYM:
        pytest.skip("gymnasium is not installed")
    _, msgs = load(GYM[0])
    assert all("actuator" not in m for m in msgs)


# --- ctrl in simulate and rollout -------------------------------------------------------------------

def servo_model(kp=20.0):
    """A double pendulum with a position servo on the shoulder, a motor on the elbow
    (force-limited) and a velocity actuator on the elbow."""
    b = jaxmbd.ModelBuilder(gravity=(0, 0, -9.81))
    b.add_body("upper", "world", "revolute", axis=(0, 1, 0), mass=1.0, com=(0, 0, -0.5),
               inertia=(0.02, 0.02, 0.001))
    b.add_body("lower", "upper", "revolute", axis=(0, 1, 0), pos=(0, 0, -1.0), mass=1.0, com=(0, 0, -0.5),
               inertia=(0.02, 0.02, 0.001), damping=0.1)
    b.add_actuator("upper", "position", kp=kp, kv=2.0, ctrlrange=(-1, 1), name="servo")
    b.add_actuator("lower", "motor", gear=3.0, forcerange=(-4, 4), name="motor")
    b.add_actuator("lower", "velocity", kv=0.5, name="vel")
    b.set_initial_state(q0=[0.3, -0.2])
    return b.build()


RUN = dict(t1=0.3, integrator=integrators.RK4(), steps=Steps(dt0=0.01))
U0 = jnp.array([0.4, 0.7, -0.3])


def _ctrl_of_params(t, q, v, p):
    return p["u"]


def _torque_of_params(t, q, v, p):
    return p["tau"]


@pytest.mark.long
def test_constant_ctrl_equals_control_torque():
    model = servo_model()
    bare = dataclasses.replace(model, actuators=None)    # the same tree without its actuators

    def as_torque(t, q, v, p):   # the actuators' force given as a joint-torque control
        return jaxmbd.actuator_force(model, q, v, p["u"]) + p["tau"]
    zero_tau = dict(u=U0, tau=jnp.zeros(2))
    a = jaxmbd.simulate(model, inputs=Inputs(ctrl=U0), **RUN)
    b = jaxmbd.simulate(bare, inputs=Inputs(tau=as_torque, params=zero_tau), **RUN)
    assert a.ok and b.ok
    np.testing.assert_allclose(np.asarray(a.qs), np.asarray(b.qs), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(a.vs), np.asarray(b.vs), rtol=0, atol=1e-12)
    # a callable ctrl and a control torque add up
    both = dict(u=U0, tau=jnp.array([0.5, -0.25]))
    c = jaxmbd.simulate(model, inputs=Inputs(ctrl=_ctrl_of_params, tau=_torque_of_params, params=both), **RUN)
    d = jaxmbd.simulate(bare, inputs=Inputs(tau=as_torque, params=both), **RUN)
    np.testing.assert_allclose(np.asarray(c.qs), np.asarray(d.qs), rtol=0, atol=1e-12)
    assert np.abs(np.asarray(c.qs) - np.asarray(a.qs)).max() > 1e-3
    # ctrl None is ctrl zero (MuJoCo's default): the servo holds 0, unlike a model without actuators
    e = jaxmbd.simulate(model, **RUN)
    f = jaxmbd.simulate(model, inputs=Inputs(ctrl=jnp.zeros(3)), **RUN)
    np.testing.assert_array_equal(np.asarray(e.qs), np.asarray(f.qs))
    assert abs(float(jaxmbd.actuator_force(model, model.q0, model.v0, jnp.zeros(3))[0])) > 1.0


@pytest.mark.long
def test_gradients_match_central_differences():
    """d(final angles)/d(the servo's gain, MuJoCo's gainprm[0], its bias kept) and /d ctrl."""
    model = servo_model()
    w = jnp.array([1.0, 0.5])

    def loss(kp, u):
        m = eqx.tree_at(lambda mm: mm.actuators.gain, model, model.actuators.gain.at[0, 0].set(kp))
        return jnp.sum(jaxmbd.simulate(m, inputs=Inputs(ctrl=u), **RUN).qs[-1] * w)

    kp0, h = model.actuators.gain[0, 0], 1e-6
    g_kp, g_u = jax.grad(loss, argnums=(0, 1))(kp0, U0)
    fd_kp = (loss(kp0 + h, U0) - loss(kp0 - h, U0)) / (2 * h)
    fd_u = np.array([(loss(kp0, U0.at[i].add(h)) - loss(kp0, U0.at[i].add(-h))) / (2 * h) for i in range(3)])
    assert abs(g_kp - fd_kp) <= 1e-7 * abs(fd_kp), (g_kp, fd_kp)
    assert np.abs(np.asarray(g_u) - fd_u).max() <= 1e-7 * np.abs(fd_u).max()
    assert abs(fd_kp) > 1e-4 and np.all(np.abs(fd_u) > 1e-4)


@pytest.mark.long
def test_ctrl_per_member_under_rollout():
    """simulate under jax.vmap, and rollout: each member its own ctrl."""
    model = servo_model()
    U = jnp.array([[0.4, 0.7, -0.3], [-0.8, 0.1, 0.5], [2.0, -3.0, 0.0]])   # the last beyond the ranges
    roll = jaxmbd.rollout(model, inputs=Inputs(ctrl=U), **RUN)
    vm = jax.vmap(lambda u: jaxmbd.simulate(model, inputs=Inputs(ctrl=u), **RUN).qs)(U)
    np.testing.assert_allclose(np.asarray(vm), np.asarray(roll.qs), rtol=0, atol=1e-12)
    for i in range(3):
        one = jaxmbd.simulate(model, inputs=Inputs(ctrl=U[i]), **RUN)
        np.testing.assert_allclose(np.asarray(roll.qs[i]), np.asarray(one.qs), rtol=0, atol=1e-12)
    assert np.abs(np.asarray(roll.qs[0]) - np.asarray(roll.qs[1])).max() > 1e-3
    # a callable ctrl reading per-member params; a shared (nu,) ctrl with batched states
    called = jaxmbd.rollout(model, inputs=Inputs(ctrl=_ctrl_of_params, params=dict(u=U)), **RUN)
    np.testing.assert_allclose(np.asarray(called.qs), np.asarray(roll.qs), rtol=0, atol=1e-12)
    shared = jaxmbd.rollout(model, Start(jnp.stack([model.q0, model.q0 + 0.1])), inputs=Inputs(ctrl=U[0]), **RUN)
    np.testing.assert_allclose(np.asarray(shared.qs[0]), np.asarray(roll.qs[0]), rtol=0, atol=1e-12)


def test_ctrl_on_a_mechanism_in_its_coordinate_order():
    """A four-bar (a Mechanism, coordinates reordered) with a servo on the crank and a
    motor on the rocker: in its state-space ODE (what simulate integrates), a
    ctrl(t, q, v, params) that sees the mechanism's order gives the same
    accelerations as the same force given as a control torque."""
    z = (0.0, 0.0, 1.0)
    b = jaxmbd.ModelBuilder(gravity=(0.0, -9.81, 0.0))
    for name, parent, pos, L in (("crank", "world", (0, 0, 0), 1.0), ("coupler", "crank", (1.0, 0, 0), 3.0),
                                 ("rocker", "world", (3.0, 0, 0), 2.5)):
        b.add_body(name, parent, "revolute", axis=z, pos=pos, mass=1.0, com=(L / 2, 0, 0),
                   inertia=(1e-3, L ** 2 / 12, L ** 2 / 12))
    b.add_loop("point_planar", "coupler", "rocker", pos_a=(3.0, 0, 0), pos_b=(2.5, 0, 0))
    b.add_actuator("crank", "position", kp=30.0, kv=1.0, name="servo")
    b.add_actuator("rocker", "motor", gear=2.0, ctrlrange=(-1, 1), name="motor")
    A, D = np.array([np.cos(1.0), np.sin(1.0)]), np.array([3.0, 0.0])   # closed at crank angle 1
    dist = np.linalg.norm(D - A)
    e, a = (D - A) / dist, (3.0 ** 2 - 2.5 ** 2 + dist ** 2) / (2 * dist)
    X = A + a * e + np.sqrt(3.0 ** 2 - a ** 2) * np.array([-e[1], e[0]])
    crank, coupler = 1.0, np.arctan2(X[1] - A[1], X[0] - A[0]) - 1.0
    b.set_initial_state([np.arctan2(X[1], X[0] - 3.0), crank, coupler], np.zeros(3))   # (rocker, crank, coupler)
    mech = b.build(coordinate_order=("rocker", "crank", "coupler"))
    assert mech.nu == 2
    bare = dataclasses.replace(mech, tree=dataclasses.replace(mech.tree, actuators=None))

    def ctrl(t, q, v, p):      # q in the mechanism's order: q[1] is the crank angle
        return p + jnp.stack([0.0 * q[0], -0.5 * q[1]])

    def as_torque(t, q, v, p):
        return mech.from_tree(jaxmbd.actuator_force(mech.tree, mech.to_tree(q), mech.to_tree(v), ctrl(t, q, v, p)))

    @jax.jit
    def accelerations(y, yd, p):
        q = mech.to_tree(mech.q0)
        P = jaxmbd.dae.partition(mech.rows(jaxmbd.constraints.phi_jacobian_tree(mech, q)))
        with_ctrl = jaxmbd.odes.ConstrainedChartODE(mech, q, P["dep"], P["ind"], Inputs(ctrl=ctrl, params=p))
        with_torque = jaxmbd.odes.ConstrainedChartODE(bare, q, P["dep"], P["ind"], Inputs(tau=as_torque, params=p))
        return with_ctrl.g(0.0, y, yd), with_torque.g(0.0, y, yd), with_ctrl.g(0.0, y, yd) - \
            jaxmbd.odes.ConstrainedChartODE(bare, q, P["dep"], P["ind"]).g(0.0, y, yd)
    a, c, diff = accelerations(jnp.array([0.05]), jnp.array([0.3]), jnp.array([1.5, 0.4]))
    np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=0, atol=1e-12)
    assert np.abs(np.asarray(diff)).max() > 1e-2      # the actuators do act


# --- bad input -----------------------------------------------------------------------------------

def test_ctrl_shape_errors_name_nu():
    model = servo_model()
    with pytest.raises(ValueError, match=r"expected \(3,\).*nu = 3"):
        jaxmbd.simulate(model, inputs=Inputs(ctrl=jnp.zeros(2)), **RUN)
    with pytest.raises(ValueError, match=r"nu = 3"):
        jaxmbd.simulate(model, inputs=Inputs(ctrl=lambda t, q, v, p: jnp.zeros(4)), **RUN)
    with pytest.raises(ValueError, match=r"nu = 3"):
        jaxmbd.actuator_force(model, model.q0, model.v0, jnp.zeros((3, 1)))
    with pytest.raises(ValueError, match=r"\(B, 3\)"):
        jaxmbd.rollout(model, inputs=Inputs(ctrl=jnp.zeros((2, 4))), **RUN)
    plain = jaxmbd.models.double_pendulum()
    with pytest.raises(ValueError, match="no actuators"):
        jaxmbd.simulate(plain, inputs=Inputs(ctrl=jnp.zeros(1)), **RUN)
    assert plain.nu == 0
    np.testing.assert_array_equal(np.asarray(jaxmbd.actuator_force(plain, plain.q0, plain.v0, jnp.zeros(0))), 0.0)


def _builder():
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "revolute", axis=(0, 0, 1))
    b.add_body("w", "a", "fixed")
    b.add_body("p", "a", "planar")
    return b


@pytest.mark.parametrize("kwargs, message", [
    (dict(joint="nope"), "joint 'nope' is not defined"),
    (dict(joint="w"), "'w' is welded"),
    (dict(joint="p"), "planar joint is not modelled"),
    (dict(joint="a", ctrlrange=(1, -1)), "ctrlrange lower bound 1.0 must be below the upper -1.0"),
    (dict(joint="a", forcerange=(2, 2)), "forcerange lower bound"),
    (dict(joint="a", kind="servo"), "unknown kind 'servo'"),
    (dict(joint="a", kp=3.0), "kp do not apply to a motor actuator"),
    (dict(joint="a", kind="position", kv=-1.0), "kv cannot be negative"),
    (dict(joint="a", kind="position", kv=1.0, dampratio=1.0), "kv and dampratio cannot both"),
    (dict(joint="a", kind="damper", kv=1.0), "a damper needs a non-negative ctrlrange"),
    (dict(joint="a", kind="general", gaintype="muscle"), "gaintype 'muscle' is not modelled"),
    (dict(joint="a", gear=np.ones(7)), "gear: expected 1 to 6 numbers"),
    (dict(joint="a", gear=np.nan), "gear: contains NaN"),
])
def test_builder_errors_name_the_actuator(kwargs, message):
    b = _builder()
    with pytest.raises(ValueError, match=message) as e:
        b.add_actuator(name="act", **kwargs)
        b.build()
    assert "act" in str(e.value)


def test_builder_duplicate_names_and_force_ranges():
    b = _builder().add_actuator("a", name="x").add_actuator("a", name="x")
    with pytest.raises(ValueError, match="duplicate actuator name 'x'"):
        b.build()
    with pytest.raises(ValueError, match="only hinge and slide joints"):
        _builder().add_actuator("a").set_actuator_force_range("p", (-1, 1)).build()
    with pytest.raises(ValueError, match="actuator force range lower bound"):
        _builder().set_actuator_force_range("a", (1, -1))
    with pytest.raises(ValueError, match="no actuators"):
        _builder().set_actuator_force_range("a", (-1, 1)).build()


@pytest.mark.parametrize("actuator, compiler, message", [
    ('<motor joint="h1" ctrlrange="-1 1"/>', 'autolimits="false"', "ctrlrange without ctrllimited"),
    ('<motor joint="h1" forcerange="-1 1"/>', 'autolimits="false"', "forcerange without forcelimited"),
    ('<motor joint="h1" ctrlrange="1 -1" ctrllimited="true"/>', "", "invalid ctrlrange"),
    ('<motor joint="nope"/>', "", "unknown joint 'nope'"),
    ('<motor/>', "", "exactly one transmission target"),
    ('<position joint="h1" kv="1" dampratio="1"/>', "", "kv and dampratio cannot both"),
    ('<position joint="h1" kv="-1"/>', "", "kv cannot be negative"),
    ('<position joint="h1" dampratio="-1"/>', "", "dampratio cannot be negative"),
    ('<position joint="h3" inheritrange="1"/>', "", "inheritrange needs a limited joint"),
    ('<motor joint="h1" class="nope"/>', "", "unknown default class 'nope'"),
])
def test_mjcf_errors(actuator, compiler, message):
    xml = f"<mujoco><compiler {compiler}/>{BODIES}<actuator>{actuator}</actuator></mujoco>"
    with pytest.raises(ValueError, match=message):
        jaxmbd.load_mjcf(xml, warn=False)
