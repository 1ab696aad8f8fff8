"""Friction as MuJoCo's soft constraints give it, through impacts and sliding, with
elliptic and pyramidal cones (jaxmbd.forces.soft, jaxmbd.forces.contact): each scene
written as MJCF and run in MuJoCo as the reference.

- the pyramidal cone's rows (edges J_n ± μ_j J_j, their regularizer with impratio) equal
  MuJoCo's efc rows, and the accelerations of a sliding, a sticking and a frictionless
  contact equal MuJoCo's;
- a box thrown onto the floor stops where MuJoCo's stops (both cones), and its
  sensitivity to the throw equals MuJoCo's central differences;
- a box pushed across the floor, a box dropped onto an edge and boxes on an incline at
  and past the cone's edge move as MuJoCo's;
- the go2-class quadruped with ``cone="pyramidal"`` and ``impratio="100"`` stands as
  MuJoCo's (tests/test_robots_on_floors.py's comparison, with the file's cone)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd import Inputs, Save, Start, Steps, simulate
from jaxmbd.forces.contact import Contact
from jaxmbd.integrators import RosenbrockNystrom4

jax.config.update("jax_enable_x64", True)


def box_scene(cone, *, z=0.2, quat="1 0 0 0", floor_quat="1 0 0 0", friction="0.6", impratio=1,
              timestep=0.0002):
    return f"""<mujoco model="box">
  <option timestep="{timestep}" integrator="RK4" cone="{cone}" impratio="{impratio}"/>
  <default><default class="collision"><geom group="3" friction="{friction}"/></default></default>
  <worldbody>
    <geom name="floor" class="collision" type="plane" size="5 5 0.1" quat="{floor_quat}"/>
    <body name="box" pos="0 0 {z}" quat="{quat}">
      <freejoint/>
      <geom name="box" class="collision" type="box" size="0.05 0.05 0.05" density="800"/>
    </body>
  </worldbody>
</mujoco>"""


def mujoco_run(xml, qvel0, t1, qfrc=None, qpos0=None):
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    if qpos0 is not None:
        d.qpos[:] = qpos0
    d.qvel[:] = qvel0
    if qfrc is not None:
        d.qfrc_applied[:] = qfrc
    for _ in range(int(round(t1 / m.opt.timestep))):
        mujoco.mj_step(m, d)
    return d.qpos.copy(), d.qvel.copy()


def jaxmbd_run(model, q0, v0, t1, tau=None, tol=1e-8):
    sol = simulate(model, Start(jnp.asarray(q0), jnp.asarray(v0)), t1, integrator=RosenbrockNystrom4(),
                   inputs=Inputs(tau=None if tau is None else jnp.asarray(tau)),
                   steps=Steps(rtol=tol, atol=tol, max_steps=20000), save=Save(ts=jnp.array([t1])))
    assert int(sol.status) == 0, sol.status
    return np.asarray(sol.qs[-1]), np.asarray(sol.vs[-1])


# --- the rows and one evaluation ----------------------------------------------------------------

SPHERE = """<mujoco><option cone="{cone}" impratio="{impratio}"/>
  <default><geom friction="{mu} 0.02 0.003" condim="{condim}"/></default>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="b" pos="0 0 0.099"><freejoint/><geom type="sphere" size="0.1" mass="{mass}"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("condim,mu,impratio,mass", [(3, 0.5, 1, 1.0), (4, 0.25, 3, 2.0), (6, 0.8, 100, 0.5),
                                                     (1, 0.5, 1, 1.0)])
def test_pyramidal_rows_and_accelerations_are_mujocos(condim, mu, impratio, mass):
    """One sphere 1 mm in the floor, sliding and spinning: the edges' regularizers equal MuJoCo's
    efc_R, and qacc equals MuJoCo's to round-off: the Newton iterations find MuJoCo's solution
    of the complementarity problem (with impratio 100 and condim 6, half the edges are off)."""
    xml = SPHERE.format(cone="pyramidal", impratio=impratio, mu=mu, mass=mass, condim=condim)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    v = np.array([0.03, -0.02, 0.0, 0.0, 0.0, 0.05])
    d.qvel[:] = v
    mujoco.mj_forward(m, d)
    model = jaxmbd.load_mjcf(xml)
    from jaxmbd.forces import soft
    q = jnp.asarray(d.qpos)
    N, T, _ = soft.rows(model, q, jnp.asarray(v))
    _, R, s, _ = soft.normal_parameters(N)
    on = np.asarray(s) > 0
    assert on.sum() == d.nefc == (1 if condim == 1 else 2 * (condim - 1))
    np.testing.assert_allclose(np.sort(np.asarray(R)[on]), np.sort(d.efc_R[:d.nefc]), rtol=1e-9)
    a = jaxmbd.forward_dynamics(model, q, jnp.asarray(v), jnp.zeros(6))
    np.testing.assert_allclose(np.asarray(a), d.qacc, rtol=1e-6, atol=1e-6 * np.abs(d.qacc).max())


LEGS = """<mujoco><option cone="pyramidal"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1" euler="7 -4 0"/>
    <body name="leg" pos="0 0 0.3" euler="0 0 35"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05" mass="1" friction="0.8"/></body>
    <body name="ball" pos="1 0 0.3"><freejoint/><geom type="sphere" size="0.05" mass="1" friction="0.8"/></body>
    <body name="brick" pos="-1 0 0.3" euler="0 0 20"><freejoint/>
      <geom type="box" size="0.1 0.05 0.05" mass="1" friction="0.8"/></body>
  </worldbody></mujoco>"""


def test_pyramidal_edges_follow_mujocos_contact_frames():
    """MuJoCo's pyramid has its edges along its contact frame's tangents, so the frame decides how
    much friction a direction gets (a pyramid's diagonal gets 1/√2 of what a direction along an
    edge gets).  A capsule lying at 35° on a floor tilted about two axes (its contacts' first
    tangent is the capsule's axis, as MuJoCo's plane-capsule contacts have it), a sphere and a box
    (the default tangent: the world y axis made orthogonal to the normal), settled in MuJoCo, each
    pushed along the capsule's axis, across it or diagonally, at rest and moving, sticking and
    sliding: qacc equals MuJoCo's, and the candidates' tangents are MuJoCo's contact frames'."""
    m = mujoco.MjModel.from_xml_string(LEGS)
    d = mujoco.MjData(m)
    for _ in range(300):
        mujoco.mj_step(m, d)
    qpos, qvel = d.qpos.copy(), d.qvel.copy()
    n = d.geom_xmat[0].reshape(3, 3)[:, 2]
    model = jaxmbd.load_mjcf(LEGS)
    rng = np.random.default_rng(0)
    for push, v in ((0.6, 0.0), (0.9, 0.0), (1.2, 0.0), (0.3, 0.05)):
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        axis = d.geom_xmat[1].reshape(3, 3)[:, 0]
        axis = axis - n * (n @ axis)
        axis /= np.linalg.norm(axis)
        across = np.cross(n, axis)
        f = np.zeros(m.nv)
        for i, u in enumerate((axis, across, (axis + across) / np.sqrt(2))):
            f[6 * i:6 * i + 3] = push * 0.8 * 9.81 * u       # a multiple of μ m g along the direction
            d.qvel[6 * i:6 * i + 3] += v * u
        d.qvel[:] += 0.01 * rng.normal(size=m.nv) * (v > 0)
        d.qfrc_applied[:] = f
        mujoco.mj_forward(m, d)
        assert d.ncon >= 6
        a = jaxmbd.forward_dynamics(model, jnp.asarray(d.qpos), jnp.asarray(d.qvel), jnp.asarray(f))
        np.testing.assert_allclose(np.asarray(a), d.qacc, rtol=1e-6, atol=1e-6 * np.abs(d.qacc).max())
    c = jaxmbd.contact_forces(model, jnp.asarray(d.qpos), jnp.asarray(d.qvel))
    pos = np.stack([d.contact[i].pos for i in range(d.ncon)])
    for x, t, dist in zip(np.asarray(c["pos"]), np.asarray(c["tangent"]), np.asarray(c["dist"])):
        if dist < 0:
            i = np.argmin(np.abs(pos - x).sum(-1))
            np.testing.assert_allclose(t, d.contact[i].frame[3:6], atol=1e-9)


MIXED = """<mujoco><option cone="elliptic" impratio="10"/>
  <worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="a" pos="0 0 0.099"><freejoint/><geom type="sphere" size="0.1" mass="1" condim="3" friction="0.5"/></body>
    <body name="b" pos="0.5 0 0.0985"><freejoint/>
      <geom type="sphere" size="0.1" mass="2" condim="6" friction="0.7 0.02 0.003"/></body>
    <body name="arm" pos="0 1 1"><joint name="hinge" type="hinge" axis="0 1 0" frictionloss="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5" contype="0" conaffinity="0"/></body>
  </worldbody></mujoco>"""


def test_elliptic_cones_of_several_widths_with_friction_loss_are_mujocos():
    """Elliptic cones of condim 3 and 6 and a joint's friction loss in one solve (cones of 1, 2 and 5
    rows, so the cone passes pad their blocks): two spheres in the floor, sliding and spinning, and a
    swinging arm; qacc equals MuJoCo's (the padded blocks once made every force NaN)."""
    m = mujoco.MjModel.from_xml_string(MIXED)
    d = mujoco.MjData(m)
    v = np.array([0.03, -0.02, 0.0, 0.0, 0.0, 0.05, -0.02, 0.01, 0.0, 0.1, 0.0, -0.2, 0.4])
    d.qvel[:] = v
    mujoco.mj_forward(m, d)
    model = jaxmbd.load_mjcf(MIXED)
    a = jaxmbd.forward_dynamics(model, jnp.asarray(d.qpos), jnp.asarray(v), jnp.zeros(m.nv))
    assert np.isfinite(np.asarray(a)).all()
    np.testing.assert_allclose(np.asarray(a), d.qacc, rtol=1e-6, atol=1e-6 * np.abs(d.qacc).max())


# --- runs -------------------------------------------------------------------------------------

@pytest.mark.long
@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_a_thrown_box_stops_where_mujocos_stops(cone):
    """A 10 cm box (density 800, friction 0.6) thrown at 1.5 m/s from 0.2 m, no spin: it lands flat,
    slides and stops.  The friction impulse at the landing (bounded by μ times the normal impulse)
    decides where: the final x within 5 mm of MuJoCo's (RK4 at 0.2 ms), and, with the default cone,
    dx/dvx (jax.grad through the Rosenbrock run) within 5% of MuJoCo's central differences."""
    xml = box_scene(cone)
    model = jaxmbd.load_mjcf(xml)
    q0 = np.array([0, 0, 0.2, 1, 0, 0, 0.])
    t1 = 0.8

    def final_x(vx):
        v0 = jnp.zeros(6).at[0].set(vx)
        sol = simulate(model, Start(jnp.asarray(q0), v0), t1, integrator=RosenbrockNystrom4(),
                       steps=Steps(rtol=1e-8, atol=1e-8, max_steps=20000), save=Save(ts=jnp.array([t1])))
        return sol.qs[-1, 0], sol.status
    mj = lambda vx: mujoco_run(xml, [vx, 0, 0, 0, 0, 0], t1)[0][0]  # noqa: E731
    if cone == "elliptic":                            # the value only (the gradient costs minutes)
        x, status = jax.jit(final_x)(1.5)
    else:
        (x, status), dx = jax.value_and_grad(final_x, has_aux=True)(1.5)
        h = 1e-3
        mj_dx = (mj(1.5 + h) - mj(1.5 - h)) / (2 * h)
        assert abs(float(dx) - mj_dx) < 0.05 * abs(mj_dx), (float(dx), mj_dx)
    assert int(status) == 0
    assert abs(float(x) - mj(1.5)) < 5e-3, (float(x), mj(1.5))
    assert float(x) - 0.26 > 0.01                     # it slid after landing (at x = 0.26)


@pytest.mark.long
def test_a_quadruped_on_pyramidal_cones_with_impratio_100_stands_as_mujocos(tmp_path):
    """The go2-class scene with ``cone="pyramidal" impratio="100"`` (as Menagerie's go2 scene_mjx
    sets them): 1 s from its keyframe (RosenbrockNystrom4, tol 1e-4) within 5 mm of MuJoCo's base
    height and 0.05 rad of its joints, MuJoCo at its own step.  The pyramid's edges carry the normal
    force with impratio's small regularizer."""
    import os
    import shutil
    src = os.path.dirname(jaxmbd.models.quadruped_scene_path())
    for f in os.listdir(src):
        shutil.copy(os.path.join(src, f), tmp_path)
    robot = (tmp_path / "quadruped.xml").read_text()
    assert '<option cone="elliptic" impratio="100"/>' in robot
    scene = tmp_path / "quadruped_scene.xml"
    ts = np.linspace(0.0, 1.0, 11)

    def mj_heights(cone):
        from test_robots_on_floors import _mj_run
        (tmp_path / "quadruped.xml").write_text(robot.replace('cone="elliptic"', f'cone="{cone}"'))
        return _mj_run(mujoco.MjModel.from_xml_path(str(scene)), ts)
    ref = mj_heights("pyramidal")
    m = jaxmbd.load_mjcf(str(scene), warn=False)
    key = m.keyframes[list(m.keyframes)[0]]
    sol = simulate(m, Start(jnp.asarray(key.qpos), jnp.asarray(key.qvel)), 1.0, integrator=RosenbrockNystrom4(),
                   inputs=Inputs(ctrl=jnp.asarray(key.ctrl)), steps=Steps(rtol=1e-4, atol=1e-4),
                   save=Save(ts=jnp.asarray(ts)))
    assert int(sol.status) == 0
    qs = np.asarray(sol.qs)
    assert np.abs(qs[:, 2] - ref[:, 2]).max() < 5e-3, (qs[:, 2], ref[:, 2])
    assert np.abs(qs[:, 7:] - ref[:, 7:]).max() < 0.05


def _compare(xml, q0, v0, t1, tau=None, tol_x=2e-3):
    """jaxmbd's and MuJoCo's end states of one box scene: (jaxmbd q, MuJoCo q)."""
    model = jaxmbd.load_mjcf(xml)
    q, _ = jaxmbd_run(model, q0, v0, t1, tau=tau, tol=1e-6)
    ref, _ = mujoco_run(xml, v0, t1, qfrc=tau, qpos0=q0)
    return q, ref


REST_Z = 0.05 - 0.0002          # a box resting on its face, about MuJoCo's resting depth in the floor


@pytest.mark.long
@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_a_box_pushed_across_the_floor_moves_as_mujocos(cone):
    """A constant horizontal force on a resting box (0.8 kg, μ = 0.6: μ m g = 4.71 N): 6 N slides it
    (1.6 m/s² by Coulomb's law), 3 N does not (it creeps as MuJoCo's does); 0.5 s, x within 1 mm of
    MuJoCo's run and of the closed form's sliding distance within 2%."""
    # x within 1 mm of MuJoCo's, or 1% of the sliding distance
    xml = box_scene(cone)
    q0 = np.array([0, 0, REST_Z, 1, 0, 0, 0.])
    for F in (6.0, 3.0):
        tau = np.array([F, 0, 0, 0, 0, 0])
        q, ref = _compare(xml, q0, np.zeros(6), 0.5, tau=tau)
        assert abs(q[0] - ref[0]) < max(1e-3, 0.01 * abs(ref[0])), (F, q[0], ref[0])
        mass, g = 0.8, 9.81
        coulomb = max(F - 0.6 * mass * g, 0.0) / mass * 0.5 ** 2 / 2
        if coulomb > 0:
            assert abs(q[0] - coulomb) < 0.02 * coulomb, (q[0], coulomb)
        else:   # it stays: it creeps no more than MuJoCo's soft friction lets it (0.5-1 mm), within 0.2 mm
            assert abs(q[0]) < abs(ref[0]) + 2e-4, (q[0], ref[0])
        np.testing.assert_allclose(q[3:7], ref[3:7], atol=1e-3)


@pytest.mark.long
def test_a_box_dropped_onto_an_edge_lands_as_mujocos():
    """A box tilted 30° about x, dropped from 0.15 m without spin: it lands on an edge and falls onto
    a face; after 0.6 s its position within 3 mm and its orientation within 0.02 of MuJoCo's."""
    c, s = np.cos(np.pi / 12), np.sin(np.pi / 12)
    xml = box_scene("pyramidal")
    q0 = np.array([0, 0, 0.15, c, s, 0, 0])
    q, ref = _compare(xml, q0, np.zeros(6), 0.6)
    assert np.abs(q[:3] - ref[:3]).max() < 3e-3, (q[:3], ref[:3])
    assert min(np.abs(q[3:7] - ref[3:7]).max(), np.abs(q[3:7] + ref[3:7]).max()) < 0.02, (q[3:7], ref[3:7])
    assert abs(q[2] - 0.05) < 1e-3                      # on a face at the end


@pytest.mark.long
@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_a_box_on_an_incline_at_and_past_the_cones_edge_is_mujocos(cone):
    """A resting box on a plane tilted by θ about y: at tan θ = μ (the cone's edge) it stays (it
    creeps, as MuJoCo's soft friction does), 5° past it, it slides with g (sin θ - μ cos θ), the
    sliding distance within 2% of the closed form; in both cases, 0.5 s, within 1 mm of MuJoCo's
    along the plane.
    Not checked: a pyramidal cone exactly at its edge.  There MuJoCo's pyramid lifts the sliding
    box to the surface (its edges' velocities are ±μ v_t), where jaxmbd's rows fade in and are
    softer: it creeps 21 mm in 0.5 s where MuJoCo's creeps 7 mm."""
    mu, g, t1 = 0.6, 9.81, 0.5
    for theta in (np.arctan(mu), np.arctan(mu) + np.radians(5)):
        if cone == "pyramidal" and theta == np.arctan(mu):
            continue
        qf = f"{np.cos(theta / 2)} 0 {np.sin(theta / 2)} 0"
        xml = box_scene(cone, floor_quat=qf)
        R = np.array([[np.cos(theta), 0, np.sin(theta)], [0, 1, 0], [-np.sin(theta), 0, np.cos(theta)]])
        q0 = np.concatenate([R @ np.array([0, 0, REST_Z]), [np.cos(theta / 2), 0, np.sin(theta / 2), 0]])
        q, ref = _compare(xml, q0, np.zeros(6), t1)
        along = lambda p: (p[:3] - q0[:3]) @ R[:, 0]  # noqa: E731
        diff = q[:3] - ref[:3]
        assert abs(diff @ R[:, 0]) < 1e-3 and abs(diff[1]) < 1e-3, (theta, q[:3], ref[:3])
        # sliding, the box rocks on its leading edge, MuJoCo's too (its centre rises up to 0.9 mm
        # above its resting height), so its height is checked against its face's resting height, not
        # MuJoCo's phase of the rocking: on its face (tipped onto an edge, it would be 21 mm higher)
        assert abs(q[:3] @ R[:, 2] - REST_Z) < 2e-3, (theta, q[:3] @ R[:, 2])
        slide = g * (np.sin(theta) - mu * np.cos(theta)) * t1 ** 2 / 2
        if slide > 1e-9:
            assert abs(along(q) - slide) < 0.02 * slide, (along(q), slide)
        else:       # it stays: it creeps no more than MuJoCo's box (2.1 mm), within 0.2 mm
            assert abs(along(q)) < abs(along(ref)) + 2e-4, (along(q), along(ref))


def _perturbed_contact_states(mj, d, t1, every):
    """MuJoCo's run from d to t1, every ``every`` steps its state with the velocities perturbed
    (standard deviations 0.1, 0.5 and 2 per DoF), kept where every contact is at least 0.1 mm deep:
    (qpos, qvel, qacc) lists, qacc from MuJoCo's solver run to a tolerance of 1e-14."""
    mj.opt.tolerance, mj.opt.iterations = 1e-14, 1000
    probe = mujoco.MjData(mj)
    rng = np.random.default_rng(0)
    Q, V, ref = [], [], []
    while d.time < t1:
        for _ in range(every):
            mujoco.mj_step(mj, d)
        for s in (0.1, 0.5, 2.0):
            probe.qpos[:], probe.qvel[:], probe.ctrl[:] = d.qpos, d.qvel + s * rng.normal(size=mj.nv), d.ctrl
            mujoco.mj_forward(mj, probe)
            if probe.ncon and all(c.dist - c.includemargin < -1e-4 for c in probe.contact[:probe.ncon]):
                Q.append(probe.qpos.copy()), V.append(probe.qvel.copy()), ref.append(probe.qacc.copy())
    return Q, V, ref


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_the_solve_converges_to_mujocos_forces_away_from_rest(cone):
    """The gymnasium ant landing (MuJoCo's run, every 10 ms with a contact), each state with its
    velocities perturbed (standard deviations 0.1, 0.5 and 2 per DoF), contacts at least 0.1 mm deep
    (beyond the rows' fade-in): qacc equals MuJoCo's (its solver run to a tolerance of 1e-14) to 1e-6
    of its scale.  The Newton iterations run until the forces are the force map's fixed point (to
    1e-12): the elliptic cone's projection is nonlinear, and four iterations left 68 of 174 such
    states up to 1.6% off."""
    from test_mjcf import gym_asset
    src = open(gym_asset("ant.xml")).read().replace(
        '<option integrator="RK4" timestep="0.01"/>', f'<option integrator="RK4" timestep="0.0005" cone="{cone}"/>')
    mj = mujoco.MjModel.from_xml_string(src)
    Q, V, ref = _perturbed_contact_states(mj, mujoco.MjData(mj), 1.5, 20)
    assert len(Q) > 100
    m = jaxmbd.load_mjcf(src, warn=False)
    a = jax.jit(jax.vmap(lambda q, v: jaxmbd.forward_dynamics(m, q, v, jnp.zeros(m.nv))))(
        jnp.asarray(np.array(Q)), jnp.asarray(np.array(V)))
    ref = np.array(ref)
    err = np.abs(np.asarray(a) - ref).max(1) / np.abs(ref).max(1)
    assert err.max() < 1e-6, (int((err > 1e-6).sum()), err.max())


@pytest.mark.long
def test_the_solve_converges_to_mujocos_forces_on_landing_condim6_feet():
    """The built-in quadruped scene (elliptic cones, impratio 100, condim-6 feet: torsional and
    rolling friction) dropped from 20 cm onto its floor in MuJoCo's run, every 20 ms with the feet in
    contact, velocities perturbed (0.1, 0.5 and 2 per DoF), contacts at least 0.1 mm deep, its
    servos at the keyframe's ctrl: qacc equals MuJoCo's (its solver run to 1e-14) to 1e-6 of its
    scale, with the default rows (36 contacts, 216 rows: the joint-space solve).  The Newton
    iterations search along their directions for MuJoCo's cost's minimum: without the search, 60
    of these 123 states were off, by up to 7 times their scale, after 16 iterations."""
    path = str(jaxmbd.models.quadruped_scene_path())
    mj = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(mj)
    mujoco.mj_resetDataKeyframe(mj, d, 0)
    d.qpos[2] += 0.2
    Q, V, ref = _perturbed_contact_states(mj, d, 1.0, 10)
    assert len(Q) > 100
    m = jaxmbd.load_mjcf(path, warn=False)
    el = next(e for e in m.forces if isinstance(e, Contact))
    assert el.rows == 36 and el.rows * (1 + el.fdim) > m.nv
    ctrl = jnp.asarray(d.ctrl)
    fd = lambda q, v: jaxmbd.forward_dynamics(m, q, v, m.actuators.generalized_force(m.nv, q, v, ctrl))  # noqa: E731
    a = jax.jit(jax.vmap(fd))(jnp.asarray(np.array(Q)), jnp.asarray(np.array(V)))
    ref = np.array(ref)
    err = np.abs(np.asarray(a) - ref).max(1) / np.abs(ref).max(1)
    assert err.max() < 1e-6, (int((err > 1e-6).sum()), err.max())
