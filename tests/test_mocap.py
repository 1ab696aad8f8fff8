"""Mocap bodies (MuJoCo's ``mocap="true"``): their pose is an input (``model.mocap``,
``jaxmbd.set_mocap``), their geoms collide with the moving bodies where MuJoCo puts them, a key's
``mpos``/``mquat`` are MuJoCo's, and a paddle moved by its mocap pose pushes a box as MuJoCo's does."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd

mujoco = pytest.importorskip("mujoco")

PADDLE = """
<mujoco model="paddle">
  <option timestep="0.002"/>
  <default>
    <default class="collision"><geom group="3" friction="0.1"/></default>
    <default class="visual"><geom contype="0" conaffinity="0" group="2"/></default>
  </default>
  <worldbody>
    <geom name="floor" class="collision" type="plane" size="2 2 0.1"/>
    <body name="paddle" mocap="true" pos="-0.12 0 0.05">
      <geom class="visual" type="box" size="0.02 0.15 0.03" rgba="0.2 0.3 0.8 1"/>
      <geom name="blade" class="collision" type="box" size="0.02 0.15 0.03"/>
      <body name="handle" pos="0 0 0.2">
        <geom name="grip" class="collision" type="capsule" size="0.015" fromto="0 0 -0.17 0 0 0"/>
      </body>
    </body>
    <body name="box" pos="0 0 0.05">
      <freejoint/>
      <geom name="box" class="collision" type="box" size="0.05 0.05 0.05" mass="1"/>
    </body>
    <body name="target" mocap="true" pos="0.5 0.5 0.2" quat="0.9 0 0.3 0.1">
      <geom class="visual" type="sphere" size="0.02"/>
    </body>
  </worldbody>
  <keyframe>
    <key name="start" qpos="0 0 0.0499 1 0 0 0"/>
    <key name="near" qpos="0 0 0.0499 1 0 0 0" mpos="-0.06 0 0.05  0.1 0.2 0.3" mquat="1 0 0 0.2  0 1 0 0"/>
  </keyframe>
</mujoco>
"""


def _mujoco(xml, dt=None):
    m = mujoco.MjModel.from_xml_string(xml if dt is None else xml.replace('timestep="0.002"', f'timestep="{dt}"'))
    return m, mujoco.MjData(m)


def test_mocap_geoms_collide_where_mujoco_puts_them_and_keys_are_mujocos():
    model = jaxmbd.load_mjcf(PADDLE)
    mm, d = _mujoco(PADDLE)
    assert model.mocap.names == ("paddle", "target")
    np.testing.assert_allclose(model.mocap.pos, d.mocap_pos, atol=1e-15)
    np.testing.assert_allclose(model.mocap.quat / np.linalg.norm(model.mocap.quat, axis=1, keepdims=True),
                               d.mocap_quat, atol=1e-15)
    for i, key in enumerate(model.keyframes.values()):
        np.testing.assert_allclose(key.mpos.ravel(), mm.key_mpos[i], atol=1e-15)
        np.testing.assert_allclose(key.mquat.ravel(), mm.key_mquat[i], atol=1e-15)
    contacts = jaxmbd.contact_forces
    rng = np.random.default_rng(0)
    for trial in range(4):       # the paddle tilted and turned into the box: every contact's depth and point
        quat = np.r_[1.0, 0.3 * rng.standard_normal(3)]
        pos = np.array([-0.06, 0.0, 0.05]) + 0.01 * rng.standard_normal(3)
        q = mm.key_qpos[0].copy()
        q[:3] += 0.005 * rng.standard_normal(3)
        d.qpos[:] = q
        d.mocap_pos[0], d.mocap_quat[0] = pos, quat / np.linalg.norm(quat)
        mujoco.mj_forward(mm, d)
        moved = jaxmbd.set_mocap(model, np.stack([pos, d.mocap_pos[1]]), np.stack([quat, d.mocap_quat[1]]))
        c = contacts(moved, jnp.asarray(q), jnp.zeros(model.nv))
        dist, pos_ = np.asarray(c["dist"]), np.asarray(c["pos"])
        pairs = [tuple(sorted(c["pairs"][k])) for k in np.asarray(c["pair"])]
        names = [mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_GEOM, g) or "floor" for g in range(mm.ngeom)]
        theirs = {}
        for k in d.contact[:d.ncon]:
            p = tuple(sorted((names[k.geom1], names[k.geom2])))
            if k.dist < theirs.get(p, (0.0,))[0]:
                theirs[p] = (k.dist, k.pos.copy())
        mine = {}
        for p, x, at in zip(pairs, dist, pos_):
            if x < mine.get(p, (0.0,))[0]:
                mine[p] = (float(x), at)
        assert sorted(mine) == sorted(theirs) and ("blade", "box") in mine, trial   # the pairs in contact
        for p, (x, at) in theirs.items():   # each box pair's deepest point (MuJoCo's counts of equally deep
            if p != ("box", "grip"):         # points differ by pair type; its capsule-box depth is not exact)
                np.testing.assert_allclose(mine[p][0], x, atol=1e-9)
                np.testing.assert_allclose(mine[p][1], at, atol=1e-9)
        el = next(e for e in moved.forces if isinstance(e, jaxmbd.forces.contact.Contact))
        R, P = el.geom_poses(jaxmbd.forward_kinematics(moved, jnp.asarray(q)))
        for i, name in enumerate(el.geom_names):      # every geom, the welded handle's included
            g = names.index(name)
            np.testing.assert_allclose(P[i], d.geom_xpos[g], atol=1e-12)
            np.testing.assert_allclose(np.asarray(R[i]).ravel(), d.geom_xmat[g], atol=1e-12)


def test_the_mocap_pose_is_differentiable_and_refused_where_mujoco_refuses():
    model = jaxmbd.load_mjcf(PADDLE)
    q = jnp.asarray(model.keyframes["start"].qpos)

    def accel(x):
        moved = jaxmbd.set_mocap(model, model.mocap.pos.at[0, 0].set(x))
        return jaxmbd.forward_dynamics(moved, q, jnp.zeros(6), jnp.zeros(6))[0]
    x = -0.066
    g = jax.grad(accel)(x)
    eps = 1e-6
    fd = (accel(x + eps) - accel(x - eps)) / (2 * eps)
    assert float(g) > 0 and abs(float(g) - float(fd)) < 1e-5 * abs(float(fd))
    assert float(accel(-0.2)) == pytest.approx(0.0, abs=1e-9)        # out of reach: nothing pushes
    with pytest.raises(ValueError, match=r"expected \(2, 3\)"):
        jaxmbd.set_mocap(model, np.zeros(3))
    with pytest.raises(ValueError, match="no mocap bodies"):
        jaxmbd.set_mocap(jaxmbd.models.pendulum(), np.zeros((1, 3)))
    for bad in ('<body mocap="true"><joint/><geom size=".1"/></body>',
                '<body><joint/><geom size=".1"/><body mocap="true"><geom size=".1"/></body></body>'):
        xml = f"<mujoco><worldbody>{bad}<body><freejoint/><geom size='.1'/></body></worldbody></mujoco>"
        with pytest.raises(ValueError):
            mujoco.MjModel.from_xml_string(xml)
        with pytest.raises(ValueError, match="fixed child of the world"):
            jaxmbd.load_mjcf(xml)
    b = jaxmbd.ModelBuilder()
    b.add_body("m", "world", "fixed", mocap=True, mass=0.0)
    b.add_body("arm", "m", "revolute", axis=(0, 1, 0))
    with pytest.raises(ValueError, match="below the mocap body 'm'"):
        b.build()
    b = jaxmbd.ModelBuilder()
    b.add_body("m", "world", "fixed", mocap=True, mass=0.0)
    b.add_body("ball", "world", "free")
    b.add_site("tip", "m")
    b.add_sensor("framepos", obj="tip", objtype="site")
    with pytest.raises(ValueError, match="mocap body"):
        b.build()
    with pytest.raises(ValueError, match="child of the world with a fixed joint"):
        jaxmbd.ModelBuilder().add_body("m", "world", "free", mocap=True)


@pytest.mark.long
def test_a_mocap_paddle_pushes_a_box_as_mujocos():
    """The paddle's pose set every 4 ms along a line (0.25 m/s for 0.6 s, then held), as a MuJoCo
    user sets mocap_pos between steps; the box it pushes and leaves sliding on the floor follows
    MuJoCo's (at the file's 2 ms and at 0.5 ms) within 1.5 mm over 1 s and ends within 1 mm of
    it.  The pushes are a train of small impacts (the paddle jumps 1 mm into the box every 4 ms):
    MuJoCo's own runs at 2 ms and 0.125 ms differ by up to 0.8 mm while it is pushed."""
    seg, speed, n = 0.004, 0.25, 250
    xs = -0.12 + speed * np.minimum(np.arange(n) * seg, 0.6)
    refs = []
    for dt in (0.002, 0.0005):
        mm, d = _mujoco(PADDLE, dt)
        mujoco.mj_resetDataKeyframe(mm, d, 0)
        out = []
        for x in xs:
            d.mocap_pos[0, 0] = x
            for _ in range(int(round(seg / dt))):
                mujoco.mj_step(mm, d)
            out.append(d.qpos.copy())
        refs.append(np.array(out))
    model = jaxmbd.load_mjcf(PADDLE)
    key = model.keyframes["start"]

    def run(model, xs):
        def segment(state, x):
            moved = jaxmbd.set_mocap(model, model.mocap.pos.at[0, 0].set(x))
            sol = jaxmbd.simulate(moved, jaxmbd.Start(*state), seg,
                                  integrator=jaxmbd.integrators.RosenbrockNystrom4(),
                                  steps=jaxmbd.Steps(rtol=1e-5, atol=1e-5))
            return (sol.qs[-1], sol.vs[-1]), (sol.qs[-1], sol.status)
        return jax.lax.scan(segment, (jnp.asarray(key.qpos), jnp.zeros(model.nv)), xs)[1]
    qs, status = jax.jit(run)(model, jnp.asarray(xs))
    assert np.all(np.asarray(status) == 0)
    qs = np.asarray(qs)
    assert qs[-1, 0] > 0.1                      # pushed 6 cm by the paddle, then slid
    for ref in refs:
        assert np.abs(ref[-1, 0] - ref[0, 0]) > 0.1
        np.testing.assert_allclose(qs[:, :3], ref[:, :3], atol=1.5e-3)
        np.testing.assert_allclose(qs[-1, :3], ref[-1, :3], atol=1e-3)
