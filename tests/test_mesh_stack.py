"""Three mesh cubes stacked on a floor stand as MuJoCo's do: the mesh-mesh
pairs give the support polygon of their resting faces (face-face clipping,
jaxmbd.contact.geometry._face_clip), so the stack neither sinks nor slides.

The MJCF is written as robot collections write theirs: a default class for
the collision geoms, 8-vertex <mesh> assets, a keyframe with the stack a
tenth of a millimetre in contact.  The cones are elliptic, as jaxmbd's are
(MuJoCo's default pyramidal cone gives other resting depths between two
moving bodies; docs/contact.md)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd import Start, Steps, Save
from jaxmbd.contact import geometry as G
from jaxmbd.integrators import RK4

jax.config.update("jax_enable_x64", True)

CUBE = " ".join(f"{x} {y} {z}" for x in (-0.05, 0.05) for y in (-0.05, 0.05) for z in (-0.05, 0.05))
STACK = f"""<mujoco model="mesh cube stack">
  <compiler angle="radian"/>
  <option timestep="0.001" integrator="RK4" cone="elliptic"/>
  <default>
    <default class="collision"><geom type="mesh" group="3" condim="3" friction="0.8 0.02 0.01"/></default>
    <default class="visual"><geom type="mesh" group="2" contype="0" conaffinity="0" density="0"/></default>
  </default>
  <asset><mesh name="cube" vertex="{CUBE}"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <body name="c1" pos="0 0 0.05"><freejoint/>
      <geom name="c1" class="collision" mesh="cube" mass="1"/><geom class="visual" mesh="cube"/></body>
    <body name="c2" pos="0 0 0.15"><freejoint/>
      <geom name="c2" class="collision" mesh="cube" mass="1"/><geom class="visual" mesh="cube"/></body>
    <body name="c3" pos="0 0 0.25"><freejoint/>
      <geom name="c3" class="collision" mesh="cube" mass="1"/><geom class="visual" mesh="cube"/></body>
  </worldbody>
  <keyframe><key name="stack" qpos="0 0 0.0499 1 0 0 0  0 0 0.1498 1 0 0 0  0 0 0.2497 1 0 0 0"/></keyframe>
</mujoco>"""
Z = np.array([2, 9, 16])              # the cubes' heights in qpos
XY = np.array([[0, 1], [7, 8], [14, 15]])


def _penetrations(qs):
    """Per cube, its penetration into what carries it: the floor, or the cube below (m)."""
    z = qs[:, Z]
    return np.stack([0.05 - z[:, 0], 0.1 - (z[:, 1] - z[:, 0]), 0.1 - (z[:, 2] - z[:, 1])], 1)


@pytest.mark.long
def test_three_mesh_cubes_stand_two_seconds_as_mujocos():
    """2 s of RK4 at 1 ms from the keyframe, saved every 0.1 s: the run succeeds, each cube's
    penetration stays within MuJoCo's (same file, its RK4) plus 10 um, and no cube drifts
    sideways or turns (1 mm, 1e-3 rad: the unfixed kernel let the middle cube slide 67 mm and
    the top one fall off at 1.4 s)."""
    mj = mujoco.MjModel.from_xml_string(STACK)
    d = mujoco.MjData(mj)
    mujoco.mj_resetDataKeyframe(mj, d, 0)
    ts = np.linspace(0.0, 2.0, 21)
    ref = []
    for t in ts:
        while d.time < t - 1e-9:
            mujoco.mj_step(mj, d)
        ref.append(d.qpos.copy())
    ref = np.array(ref)
    m = jaxmbd.load_mjcf(STACK, warn=False)
    key = m.keyframes["stack"]
    sol = jaxmbd.simulate(m, Start(jnp.asarray(key.qpos), jnp.zeros(18)), 2.0, integrator=RK4(),
                          steps=Steps(dt0=1e-3), save=Save(ts=jnp.asarray(ts)))
    assert int(sol.status) == 0
    qs = np.asarray(sol.qs)
    ours, theirs = _penetrations(qs), _penetrations(ref)
    assert theirs[1:].min() > 5e-5                                   # MuJoCo's stack is in contact throughout
    assert (ours <= theirs + 1e-5).all(), np.abs(ours - theirs).max(0)
    assert (ours[1:] > 0).all()                                      # and so is ours: it carries the weight
    drift = np.linalg.norm(qs[:, XY] - qs[:1, XY], axis=2)
    assert drift.max() < 1e-3, drift.max(0)
    quat = qs[:, np.r_[3:7, 10:14, 17:21]].reshape(len(ts), 3, 4)
    assert np.abs(quat[..., 1:]).max() < 1e-3


def _mesh():
    return G.make_mesh(np.array([[x, y, z] for x in (-0.05, 0.05) for y in (-0.05, 0.05) for z in (-0.05, 0.05)]))


def _quat(axis, angle):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.r_[np.cos(angle / 2), np.sin(angle / 2) * a]


@pytest.mark.parametrize("pose", ["aligned", "offset", "yawed", "yawed 45", "tilted", "tilted 2 axes"])
def test_face_on_face_mesh_contacts_are_mujocos(pose):
    """One cube resting face on face on another, against MuJoCo's contacts of the pair (its
    default multiccd: the clipped polygon, at most 4 points): every MuJoCo contact is one of our
    penetrating point candidates (pos and dist to 1e-6: MuJoCo stores mesh vertices in float32),
    we have as many as MuJoCo, all with the normal of the resting face (MuJoCo: the same face,
    or for a tilted cube the tilted one's: then only the depth of the deepest point is compared),
    and none of ours is deeper than the deepest pair."""
    p, q = {"aligned": ([0, 0, 0.0998], [1, 0, 0, 0]), "offset": ([0.03, 0.02, 0.0998], [1, 0, 0, 0]),
            "yawed": ([0.01, -0.02, 0.0998], _quat([0, 0, 1], 0.3)),
            "yawed 45": ([0, 0, 0.0998], _quat([0, 0, 1], np.pi / 4)),
            "tilted": ([0.03, 0, 0.0998], _quat([1, 0, 0], 0.01)),
            "tilted 2 axes": ([0, 0, 0.0998], _quat([1, 1, 0], 0.01))}[pose]
    xml = (f'<mujoco><asset><mesh name="cube" vertex="{CUBE}"/></asset><worldbody>'
           '<body><freejoint/><geom type="mesh" mesh="cube"/></body>'
           '<body><freejoint/><geom type="mesh" mesh="cube"/></body></worldbody></mujoco>')
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    d.qpos[:] = np.r_[0, 0, 0, 1, 0, 0, 0, p, q]
    mujoco.mj_forward(mj, d)
    cons = d.contact[:d.ncon]
    assert 2 <= d.ncon <= 4
    R2 = d.geom_xmat[1].reshape(3, 3)
    c = jax.tree.map(np.asarray, G.collide("mesh", "mesh", (np.eye(3), np.zeros(3)), _mesh(),
                                           (R2, d.geom_xpos[1].copy()), _mesh()))
    pts = np.nonzero(c.dist[:G.FACE_POINTS] < 0)[0]
    assert len(pts) == d.ncon
    np.testing.assert_allclose(c.frame[pts, 0], np.broadcast_to([0, 0, 1.0], (len(pts), 3)), atol=1e-12)
    assert c.dist.min() >= min(con.dist for con in cons) - 1e-6
    if pose.startswith("tilted"):      # MuJoCo's reference face is the tilted cube's
        np.testing.assert_allclose(c.dist[pts].min(), min(con.dist for con in cons), atol=1e-6)
        return
    if pose == "yawed 45":             # an octagon: MuJoCo and we keep 4 of its 8 corners, maybe not the same
        x = c.pos[pts]
        u = (x - d.geom_xpos[1][None]) @ R2
        for a in (x[:, :2], u[:, :2]):                     # on the boundary of both faces
            np.testing.assert_allclose(np.abs(a).max(1), 0.05, atol=1e-9)
        np.testing.assert_allclose(c.dist[pts], cons[0].dist, atol=1e-6)
        ang = np.sort(np.arctan2(x[:, 1], x[:, 0]))        # spread: the centre is inside their hull
        assert np.diff(np.r_[ang, ang[0] + 2 * np.pi]).max() < np.pi
        return
    for con in cons:
        np.testing.assert_allclose(con.frame[:3], [0, 0, 1], atol=1e-6)
        err = np.maximum(np.abs(c.dist[pts] - con.dist), np.abs(c.pos[pts] - con.pos[None]).max(1))
        assert err.min() < 1e-6, (pose, err.min(), con.pos)
