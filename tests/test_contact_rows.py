"""The soft solve's default rows (jaxmbd.forces.contact_rows.default_rows): the per-pair counts against
MuJoCo's and the narrow phase's, the rule's closed form on small models, and robots landing and
falling over for 2 s with the defaults: never CONTACT_OVERFLOW, and the forces of all rows."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd import Inputs, Save, Start, Steps
from jaxmbd.contact import geometry as G
from jaxmbd.forces.base import elements
from jaxmbd.forces.contact import Contact, with_contact_options
from jaxmbd.forces.contact_rows import (BETWEEN_ROWS, PLANE_CONTACTS, SOFT_ROWS_FLOOR, TREE_ROWS, face_vertices,
                                        pair_contacts)
from jaxmbd.integrators import RK4
from test_robots_on_floors import HUMANOID as LEGS

jax.config.update("jax_enable_x64", True)


def _contact(m):
    return next(e for e in elements(getattr(m, "tree", m)) if isinstance(e, Contact))


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

def _arm(side, y, shoulder_x=""):
    """An arm of the humanoid below (upper arm, forearm and hand, collision classes)."""
    return f"""
        <body name="{side}_upper_arm" pos="0 {y} 0.22">
          <joint name="{side}_shoulder_y" class="shoulder_y"/>
          <joint name="{side}_shoulder_x" class="shoulder_x"{shoulder_x}/>
          <geom name="{side}_upper_arm" class="collision" type="capsule" fromto="0 0 0 0 0 -0.22" size="0.035" mass="1.2"/>
          <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.22" size="0.035"/>
          <body name="{side}_forearm" pos="0 0 -0.25">
            <joint name="{side}_elbow" class="elbow"/>
            <geom name="{side}_forearm" class="collision" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.8"/>
            <geom name="{side}_hand" class="collision" type="sphere" pos="0 0 -0.24" size="0.04" mass="0.3"/>
            <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03"/>
          </body>
        </body>"""


def _with_arms(legs):
    """The small humanoid of tests/test_robots_on_floors.py with two arms on its torso, their position
    servos, and its keyframe with the arms hanging."""
    out = legs
    for old, new in [
        ('<mujoco model="small humanoid">', '<mujoco model="humanoid with arms">'),
        ('      <default class="ankle"><joint axis="0 1 0" range="-0.9 0.9"/></default>\n',
         '      <default class="ankle"><joint axis="0 1 0" range="-0.9 0.9"/></default>\n'
         '      <default class="arm"><position kp="100" forcerange="-40 40"/></default>\n'
         '      <default class="shoulder_y"><joint axis="0 1 0" range="-2.5 1.5"/></default>\n'
         '      <default class="shoulder_x"><joint axis="1 0 0" range="-0.3 1.5"/></default>\n'
         '      <default class="elbow"><joint axis="0 1 0" range="-2.2 0"/></default>\n'),
        ('        <geom class="visual" type="capsule" fromto="0 0 0.02 0 0 0.25" size="0.09"/>',
         '        <geom class="visual" type="capsule" fromto="0 0 0.02 0 0 0.25" size="0.09"/>'
         + _arm("l", 0.2) + _arm("r", -0.2, ' range="-1.5 0.3"')),
        ('    <position class="hum" name="waist" joint="waist"/>\n',
         '    <position class="hum" name="waist" joint="waist"/>\n' + "".join(
             f'    <position class="arm" name="{s}_{j}" joint="{s}_{j}"/>\n'
             for s in "lr" for j in ("shoulder_y", "shoulder_x", "elbow"))),
        ('qpos="0 0 0.6682 1 0 0 0  0  0 -0.3 0.6 -0.3  0 -0.3 0.6 -0.3"',
         'qpos="0 0 0.6682 1 0 0 0  0  0 0 -0.3  0 0 -0.3  0 -0.3 0.6 -0.3  0 -0.3 0.6 -0.3"'),
        ('ctrl="0  0 -0.3 0.6 -0.3  0 -0.3 0.6 -0.3"', 'ctrl="0  0 0 -0.3  0 0 -0.3  0 -0.3 0.6 -0.3  0 -0.3 0.6 -0.3"')]:
        assert out.count(old) == 1, old
        out = out.replace(old, new)
    return out


HUMANOID = _with_arms(LEGS)


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
    every = with_contact_options(model, rows=_contact(model).n_candidates)
    for i in np.argsort(-counts, kind="stable")[:n]:
        q, v = sol.qs[i], sol.vs[i]
        a = jaxmbd.contact_forces(model, q, v, ctrl=jnp.asarray(ctrl))
        b = jaxmbd.contact_forces(every, q, v, ctrl=jnp.asarray(ctrl))
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
