"""The soft solve's default rows (jaxmbd.forces.contact.default_rows): the per-pair counts against
MuJoCo's and the narrow phase's, the rule's closed form on small models, and robots landing and
falling over for 2 s with the defaults: never CONTACT_OVERFLOW, and the forces of all rows."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd import Inputs, Save, Start, Steps
from jaxmbd.contact import geometry as G
from jaxmbd.forces.base import elements, make
from jaxmbd.forces.contact import (BETWEEN_ROWS, PLANE_CONTACTS, SOFT_ROWS_FLOOR, TREE_ROWS, Contact,
                                   face_vertices, pair_contacts)
from jaxmbd.integrators import RK4

jax.config.update("jax_enable_x64", True)


def _contact(m):
    return next(e for e in elements(getattr(m, "tree", m)) if isinstance(e, Contact))


def _with_rows(m, k):
    """The model with its soft solve taking k rows."""
    import equinox as eqx
    el = _contact(m)
    new = make(Contact, **dict({f.name: getattr(el, f.name) for f in dataclasses.fields(Contact)}, rows=int(k)))
    return eqx.tree_at(lambda t: t.forces, m, tuple(new if e is el else e for e in m.forces))


# --- the per-pair counts --------------------------------------------------------------------------

def _rot(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


PRISM = np.array([[0.08 * np.cos(a), 0.08 * np.sin(a), z] for z in (-0.05, 0.05)
                  for a in np.linspace(0, 2 * np.pi, 16, endpoint=False)])

# geom type, MJCF size, jaxmbd size, worst poses (rotation of the geom; it is pressed 2 mm into the floor)
ON_PLANE = [
    ("sphere", "0.1", (0.1, 0, 0), [np.eye(3)]),
    ("capsule", "0.05 0.15", (0.05, 0.15, 0), [_rot((1, 0, 0), np.pi / 2), _rot((1, 0, 0), np.pi / 2 - 0.01)]),
    ("ellipsoid", "0.1 0.07 0.05", (0.1, 0.07, 0.05), [np.eye(3), _rot((1, 1, 0), 0.3)]),
    ("cylinder", "0.1 0.02", (0.1, 0.02, 0), [np.eye(3), _rot((1, 0, 0), 0.05), _rot((1, 0, 0), np.pi / 2)]),
    ("box", "0.1 0.07 0.05", (0.1, 0.07, 0.05), [np.eye(3), _rot((0, 0, 1), 0.7), _rot((1, 0, 0), 0.01)]),
    ("mesh", PRISM, PRISM, [np.eye(3), _rot((1, 0, 0), np.pi / 2)]),
]


def _mujoco_ncon(gtype, size, R, depth):
    asset, geom = "", f'type="{gtype}" size="{size}"'
    if gtype == "mesh":
        asset = f'<asset><mesh name="m" vertex="{" ".join(map(str, np.ravel(size)))}"/></asset>'
        geom = 'type="mesh" mesh="m"'
    mj = mujoco.MjModel.from_xml_string(f'<mujoco>{asset}<worldbody><geom type="plane" size="1 1 .1"/>'
                                        f'<body><freejoint/><geom {geom}/></body></worldbody></mujoco>')
    d = mujoco.MjData(mj)
    w, x, y, z = _quat(R)
    d.qpos[3:7] = (w, x, y, z)
    lo, hi = -1.0, 1.0          # the height at which the deepest contact is `depth` in the floor
    for _ in range(60):
        d.qpos[2] = 0.5 * (lo + hi)
        mujoco.mj_forward(mj, d)
        deepest = min([d.contact[i].dist for i in range(d.ncon)], default=1.0)
        lo, hi = (d.qpos[2], hi) if deepest < -depth else (lo, d.qpos[2])
    d.qpos[2] = hi
    mujoco.mj_forward(mj, d)
    return d.ncon, hi


def _quat(R):
    from scipy.spatial.transform import Rotation
    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return w, x, y, z


@pytest.mark.parametrize("case", ON_PLANE, ids=[c[0] for c in ON_PLANE])
def test_the_plane_counts_bound_mujocos_and_the_narrow_phases(case):
    """Against a plane, in each worst pose (a face down, lying, a cap tipped), 2 mm deep: MuJoCo's
    contact count and the narrow phase's candidates within the margin are at most the count the rule
    takes (sphere 1, capsule 2, ellipsoid 1, cylinder 3, box 4, a 16-gon prism's cap 16), and the
    largest of them over the poses equals it."""
    gtype, mj_size, size, poses = case
    b = jaxmbd.ModelBuilder()
    b.add_body("body", "world", "free", mass=1.0, inertia=(0.01, 0.01, 0.01))
    kw = dict(vertices=size) if gtype == "mesh" else {}
    b.add_geom("body", gtype, () if gtype == "mesh" else tuple(s for s in size if s), name="g", **kw)
    b.add_geom("world", "plane", name="floor")
    el = _contact(b.build())
    (t1, t2, ((g1, g2),)), = el.groups
    rule = pair_contacts(el, t1, t2, g1, g2)
    expected = {"mesh": 16, **PLANE_CONTACTS}[gtype]
    assert rule == expected
    ours, theirs = [], []
    mesh = G.make_mesh(PRISM) if gtype == "mesh" else None
    for R in poses:
        n, z = _mujoco_ncon(gtype, mj_size if gtype != "mesh" else PRISM, R, 0.002)
        theirs.append(n)
        c = G.collide("plane", gtype, (np.eye(3), np.zeros(3)), np.zeros(3), (R, np.array([0.0, 0.0, z])),
                      mesh if gtype == "mesh" else np.array(size, float))
        ours.append(int(jnp.sum(c.dist < 1e-12)))
    assert max(theirs) <= rule and max(ours) <= rule, (theirs, ours)
    assert max(max(theirs), max(ours)) == rule, (theirs, ours)


def test_a_box_on_a_box_counts_eight():
    """A cube resting 1 mm deep on another, turned 45 and 17 degrees about the vertical: MuJoCo makes
    8 contacts (the octagon of the two faces' overlap), the narrow phase has 8 candidates within the
    margin, and the rule counts a box-box pair 8."""
    xml = ('<mujoco><worldbody><geom type="box" size=".1 .1 .1"/><body><freejoint/>'
           '<geom type="box" size=".1 .1 .1"/></body></worldbody></mujoco>')
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    el = _contact(jaxmbd.load_mjcf(xml, warn=False))
    (t1, t2, ((g1, g2),)), = el.groups
    assert pair_contacts(el, t1, t2, g1, g2) == 8
    size = np.full(3, 0.1)
    for ang in (np.pi / 4, 0.3):
        d.qpos[:3], d.qpos[3:7] = (0, 0, 0.199), (np.cos(ang / 2), 0, 0, np.sin(ang / 2))
        mujoco.mj_forward(mj, d)
        c = G.collide("box", "box", (np.eye(3), np.zeros(3)), size, (_rot((0, 0, 1), ang), np.array([0, 0, 0.199])),
                      size)
        assert d.ncon == 8 and int(jnp.sum(c.dist < 1e-12)) == 8, (ang, d.ncon, np.asarray(c.dist))


def test_face_vertices_of_a_mesh():
    """A mesh's count on a plane: the most hull vertices within 1 cm of a plane it rests on, over its
    face normals (a cube 4, the 16-gon prism 16 on a cap, an 8 mm thin slab all 8)."""
    b = jaxmbd.ModelBuilder()
    b.add_body("body", "world", "free", mass=1.0, inertia=(0.01, 0.01, 0.01))
    cube = np.array([[x, y, z] for x in (-.1, .1) for y in (-.1, .1) for z in (-.1, .1)])
    for name, verts in (("cube", cube), ("prism", PRISM), ("slab", cube * [1, 1, 0.04])):
        b.add_geom("body", "mesh", (), vertices=verts, name=name)
    b.add_geom("world", "plane", name="floor")
    el = _contact(b.build())
    assert [face_vertices(el, g) for g in range(3)] == [4, 16, 8]


# --- the rule on small models ----------------------------------------------------------------------

def _boxes_on_body(n):
    return "".join(f'<geom type="box" size="0.05 0.05 0.05" pos="{0.12 * i} 0 0"/>' for i in range(n))


def _rows(xml, **kw):
    return _contact(jaxmbd.load_mjcf(xml, warn=False, **kw)).rows


def test_the_default_rows_closed_form():
    """Per tree W (its contacts with the world's geoms) + S (between its own, at most 4): its share is
    W + S up to 24, else max(24, ceil((W + S) / 2)); between trees, each tree's largest count with
    another (at most 8), summed and halved; the rows: at least 8, at most the candidates.  A free box
    on a floor: 4, so 8; two boxes: 4 + 4 + (8 + 8) / 2 = 16; a free body carrying 20 boxes: W = 80,
    so 40, and 5 boxes: W = 20, so 20; a box whose geom touches nothing: no contacts to count;
    filters apply (conaffinity 0 against the floor: no pair with it, a capsule in its place: 8);
    an explicit rows setting wins; the penalty law keeps its floor."""
    floor = '<geom name="floor" type="plane" size="5 5 .1"/>'

    def scene(*bodies):
        return f"<mujoco><worldbody>{floor}{''.join(bodies)}</worldbody></mujoco>"
    box = '<body pos="{x} 0 0.2"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>'
    assert _rows(scene(box.format(x=0))) == SOFT_ROWS_FLOOR == 8
    assert _rows(scene(box.format(x=0), box.format(x=0.5))) == 4 + 4 + (BETWEEN_ROWS + BETWEEN_ROWS) // 2 == 16
    many = f'<body pos="0 0 0.2"><freejoint/>{_boxes_on_body(20)}</body>'
    assert _rows(scene(many)) == max(TREE_ROWS, 80 // 2) == 40
    assert _rows(scene(f'<body pos="0 0 0.2"><freejoint/>{_boxes_on_body(5)}</body>')) == 20
    # a capsule that touches the floor and a box that touches nothing (conaffinity 0 against contype 1)
    filt = ('<body pos="0 0 0.2"><freejoint/><geom type="capsule" size="0.05 0.2"/>'
            '<geom type="box" size="0.3 0.3 0.3" contype="2" conaffinity="2"/></body>')
    assert _rows(scene(filt)) == 8
    # an explicit pair counts, an exclude removes: two free boxes excluded from each other
    excl = scene(box.format(x=0).replace("<body ", '<body name="a" '), box.format(x=0.5).replace("<body ", '<body name="b" '))
    excl = excl.replace("</worldbody>", '</worldbody><contact><exclude body1="a" body2="b"/></contact>')
    assert _rows(excl) == 8
    assert _rows(scene(many), contact_rows=5) == 5
    assert _contact(jaxmbd.load_mjcf(scene(many), warn=False, law="penalty")).rows == SOFT_ROWS_FLOOR


def test_the_rows_of_a_tree_follow_its_pairs():
    """A hinged chain of 8 boxes on a floor (one tree): W = 32, S (the non-adjacent boxes' box-box
    pairs) capped at 4, so 36 > 24: max(24, 18) = 24; a chain of 14: W = 56, so 30."""
    def chain(n):
        body = ""
        for i in range(n):
            body += (f'<body pos="{0.12 if i else 0} 0 {0 if i else 0.2}">'
                     + ('<freejoint/>' if i == 0 else '<joint type="hinge" axis="0 0 1"/>')
                     + '<geom type="box" size="0.05 0.05 0.05"/>')
        body += "</body>" * n
        return f'<mujoco><worldbody><geom type="plane" size="5 5 .1"/>{body}</worldbody></mujoco>'
    assert _rows(chain(8)) == max(TREE_ROWS, (32 + 4 + 1) // 2) == 24
    assert _rows(chain(14)) == (56 + 4) // 2 == 30


# --- robots landing and falling over ------------------------------------------------------------------

HUMANOID = """<mujoco model="humanoid with arms">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.002" cone="elliptic" impratio="10"/>
  <default>
    <default class="hum">
      <joint damping="0.5" armature="0.02" frictionloss="0.2"/>
      <position kp="300" dampratio="1" forcerange="-150 150" inheritrange="1"/>
      <default class="visual"><geom group="2" contype="0" conaffinity="0" density="0"/></default>
      <default class="collision">
        <geom group="3" condim="3" friction="0.8 0.02 0.01"/>
        <default class="foot"><geom type="box" size="0.09 0.045 0.015" priority="1" friction="1.0 0.02 0.01"/></default>
      </default>
      <default class="arm"><position kp="100" forcerange="-40 40"/></default>
      <default class="hip_x"><joint axis="1 0 0" range="-0.4 0.4"/></default>
      <default class="hip_y"><joint axis="0 1 0" range="-1.6 0.6"/></default>
      <default class="knee"><joint axis="0 1 0" range="0 2.4"/></default>
      <default class="ankle"><joint axis="0 1 0" range="-0.9 0.9"/></default>
      <default class="shoulder_y"><joint axis="0 1 0" range="-2.5 1.5"/></default>
      <default class="shoulder_x"><joint axis="1 0 0" range="-0.3 1.5"/></default>
      <default class="elbow"><joint axis="0 1 0" range="-2.2 0"/></default>
    </default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <body name="pelvis" pos="0 0 0.75" childclass="hum">
      <freejoint name="root"/>
      <geom name="pelvis" class="collision" type="box" size="0.08 0.12 0.06" mass="4"/>
      <geom class="visual" type="box" size="0.08 0.12 0.06"/>
      <body name="torso" pos="0 0 0.08">
        <joint name="waist" axis="0 0 1" range="-0.6 0.6"/>
        <geom name="torso" class="collision" type="capsule" fromto="0 0 0.02 0 0 0.25" size="0.09" mass="8"/>
        <geom name="head" class="collision" type="sphere" pos="0 0 0.42" size="0.09" mass="2"/>
        <geom class="visual" type="capsule" fromto="0 0 0.02 0 0 0.25" size="0.09"/>
        <body name="l_upper_arm" pos="0 0.2 0.22">
          <joint name="l_shoulder_y" class="shoulder_y"/>
          <joint name="l_shoulder_x" class="shoulder_x"/>
          <geom name="l_upper_arm" class="collision" type="capsule" fromto="0 0 0 0 0 -0.22" size="0.035" mass="1.2"/>
          <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.22" size="0.035"/>
          <body name="l_forearm" pos="0 0 -0.25">
            <joint name="l_elbow" class="elbow"/>
            <geom name="l_forearm" class="collision" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.8"/>
            <geom name="l_hand" class="collision" type="sphere" pos="0 0 -0.24" size="0.04" mass="0.3"/>
            <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03"/>
          </body>
        </body>
        <body name="r_upper_arm" pos="0 -0.2 0.22">
          <joint name="r_shoulder_y" class="shoulder_y"/>
          <joint name="r_shoulder_x" class="shoulder_x" range="-1.5 0.3"/>
          <geom name="r_upper_arm" class="collision" type="capsule" fromto="0 0 0 0 0 -0.22" size="0.035" mass="1.2"/>
          <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.22" size="0.035"/>
          <body name="r_forearm" pos="0 0 -0.25">
            <joint name="r_elbow" class="elbow"/>
            <geom name="r_forearm" class="collision" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.8"/>
            <geom name="r_hand" class="collision" type="sphere" pos="0 0 -0.24" size="0.04" mass="0.3"/>
            <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03"/>
          </body>
        </body>
      </body>
      <body name="l_thigh" pos="0 0.09 -0.07">
        <joint name="l_hip_x" class="hip_x"/>
        <joint name="l_hip_y" class="hip_y"/>
        <geom name="l_thigh" class="collision" type="capsule" fromto="0 0 -0.03 0 0 -0.27" size="0.05" mass="2.5"/>
        <geom class="visual" type="capsule" fromto="0 0 -0.03 0 0 -0.27" size="0.05"/>
        <body name="l_shin" pos="0 0 -0.3">
          <joint name="l_knee" class="knee"/>
          <geom name="l_shin" class="collision" type="capsule" fromto="0 0 -0.03 0 0 -0.26" size="0.04" mass="1.5"/>
          <geom class="visual" type="capsule" fromto="0 0 -0.03 0 0 -0.26" size="0.04"/>
          <body name="l_foot" pos="0 0 -0.3">
            <joint name="l_ankle" class="ankle"/>
            <geom name="l_foot" class="foot" pos="0.03 0 -0.02" mass="0.6"/>
            <geom class="visual" type="box" size="0.09 0.045 0.015" pos="0.03 0 -0.02"/>
          </body>
        </body>
      </body>
      <body name="r_thigh" pos="0 -0.09 -0.07">
        <joint name="r_hip_x" class="hip_x"/>
        <joint name="r_hip_y" class="hip_y"/>
        <geom name="r_thigh" class="collision" type="capsule" fromto="0 0 -0.03 0 0 -0.27" size="0.05" mass="2.5"/>
        <geom class="visual" type="capsule" fromto="0 0 -0.03 0 0 -0.27" size="0.05"/>
        <body name="r_shin" pos="0 0 -0.3">
          <joint name="r_knee" class="knee"/>
          <geom name="r_shin" class="collision" type="capsule" fromto="0 0 -0.03 0 0 -0.26" size="0.04" mass="1.5"/>
          <geom class="visual" type="capsule" fromto="0 0 -0.03 0 0 -0.26" size="0.04"/>
          <body name="r_foot" pos="0 0 -0.3">
            <joint name="r_ankle" class="ankle"/>
            <geom name="r_foot" class="foot" pos="0.03 0 -0.02" mass="0.6"/>
            <geom class="visual" type="box" size="0.09 0.045 0.015" pos="0.03 0 -0.02"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position class="hum" name="waist" joint="waist"/>
    <position class="arm" name="l_shoulder_y" joint="l_shoulder_y"/>
    <position class="arm" name="l_shoulder_x" joint="l_shoulder_x"/>
    <position class="arm" name="l_elbow" joint="l_elbow"/>
    <position class="arm" name="r_shoulder_y" joint="r_shoulder_y"/>
    <position class="arm" name="r_shoulder_x" joint="r_shoulder_x"/>
    <position class="arm" name="r_elbow" joint="r_elbow"/>
    <position class="hum" name="l_hip_x" joint="l_hip_x"/>
    <position class="hum" name="l_hip_y" joint="l_hip_y"/>
    <position class="hum" name="l_knee" joint="l_knee"/>
    <position class="hum" name="l_ankle" joint="l_ankle"/>
    <position class="hum" name="r_hip_x" joint="r_hip_x"/>
    <position class="hum" name="r_hip_y" joint="r_hip_y"/>
    <position class="hum" name="r_knee" joint="r_knee"/>
    <position class="hum" name="r_ankle" joint="r_ankle"/>
  </actuator>
  <keyframe>
    <key name="stand" qpos="0 0 0.6682 1 0 0 0  0  0 0 -0.3  0 0 -0.3  0 -0.3 0.6 -0.3  0 -0.3 0.6 -0.3"
         ctrl="0  0 0 -0.3  0 0 -0.3  0 -0.3 0.6 -0.3  0 -0.3 0.6 -0.3"/>
  </keyframe>
</mujoco>
"""


def _within(model, q):
    """How many candidate contacts are within their margin at q."""
    el = _contact(model)
    c = el.candidates(model, q)
    return jnp.sum(el.margin[c["pair"]] - c["dist"] > 0)


def _run(model, q0, v0, ctrl):
    """2 s with the defaults (RK4 at the scene's 2 ms), saved every 20 ms: the solution and the count of
    contacts within their margin at each save."""
    ts = jnp.linspace(0.0, 2.0, 101)
    sol = jaxmbd.simulate(model, Start(jnp.asarray(q0), jnp.asarray(v0)), 2.0, integrator=RK4(),
                          steps=Steps(dt0=0.002), inputs=Inputs(ctrl=jnp.asarray(ctrl)),
                          save=Save(ts=ts, observe=lambda m, q, v: _within(m, q)))
    return sol, np.asarray(sol.obs)


def _same_forces(model, sol, counts, ctrl, n=4):
    """At the n saved states with the most contacts: contact_forces with the default rows equal those
    with every candidate as a row."""
    every = _with_rows(model, _contact(model).n_candidates)
    for i in np.argsort(-counts, kind="stable")[:n]:
        q, v = sol.qs[i], sol.vs[i]
        a = jaxmbd.forces.contact_forces(model, q, v, ctrl=jnp.asarray(ctrl))
        b = jaxmbd.forces.contact_forces(every, q, v, ctrl=jnp.asarray(ctrl))
        scale = max(float(jnp.max(jnp.abs(b["normal_force"]))), 1.0)
        assert float(jnp.sum(b["normal_force"] > 0)) > 0
        for key in ("normal_force", "friction_force", "friction_moment"):
            np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), rtol=0, atol=1e-9 * scale,
                                       err_msg=f"{key} at save {i}")


@pytest.mark.long
def test_a_quadruped_lands_from_20_cm_within_the_default_rows():
    """The built-in go2-class quadruped scene (Menagerie's style), its home keyframe raised 20 cm and
    held by its servos: 2 s with the defaults succeeds (no CONTACT_OVERFLOW), the most contacts
    within their margin at once stay below the default rows (36), and at the states with the most
    contacts the forces equal those of the solve with every candidate a row."""
    m = jaxmbd.load_mjcf(str(jaxmbd.models.quadruped_scene_path()), warn=False)
    rows = _contact(m).rows
    assert rows == 36
    key = m.keyframes["home"]
    q0 = np.asarray(key.qpos).copy()
    q0[2] += 0.2
    sol, counts = _run(m, q0, np.zeros(m.nv), key.ctrl)
    assert int(sol.status) == 0, int(sol.status)
    assert 4 <= counts.max() < rows, counts.max()
    assert float(sol.qs[-1, 2]) > 0.2            # standing again
    _same_forces(m, sol, counts, key.ctrl)


@pytest.mark.long
def test_a_humanoid_falls_onto_its_side_within_the_default_rows():
    """A small humanoid with arms (collision geoms on every link, position servos, feet 1 cm in the
    floor at its keyframe), pushed sideways with its servos at zero: it falls onto its side; 2 s with
    the defaults succeeds, the most contacts within their margin at once stay below the default
    rows, and at the states with the most contacts the forces equal those of all rows."""
    m = jaxmbd.load_mjcf(HUMANOID, warn=False)
    rows = _contact(m).rows
    key = m.keyframes["stand"]
    v0 = np.zeros(m.nv)
    v0[1], v0[3] = 0.8, -2.5            # sideways (+y) and rolling towards it
    ctrl = np.zeros(m.nu)
    sol, counts = _run(m, key.qpos, v0, ctrl)
    assert int(sol.status) == 0, int(sol.status)
    assert float(sol.qs[-1, 2]) < 0.3        # down on the floor
    assert 6 <= counts.max() < rows, (counts.max(), rows)
    _same_forces(m, sol, counts, ctrl)
