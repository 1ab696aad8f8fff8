"""The contact narrow phase (jaxmbd.contact.geometry) against MuJoCo's
``mj_forward`` contacts, and the static pair selection (jaxmbd.contact.pairs)
against the pairs MuJoCo collides.

Scenes: two geoms in MJCF (a plane in the world body, the others on free
bodies) at random poses; each geom's ``margin`` makes MuJoCo report a contact
when dist < margin, so both penetrating and separated poses are compared.
Every MuJoCo contact must be one of ours (dist, pos and normal within the
tolerance), and, for the pair types where our candidates are MuJoCo's, our
candidates with dist < margin must be as many as MuJoCo reports (plane-box:
MuJoCo keeps at most 4).  The exact pair types agree to 1e-9 (measured:
3e-14 at worst, capsule-capsule)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from contact_util import random_contacts, random_quat, scene
from jaxmbd.contact import collide, collide_batch, contact_frame, geometry

N_POSES = 200
MARGIN = 0.05      # each geom's; MuJoCo reports a contact when dist < the sum of the two (checked)


def _size3(s, n):
    return np.broadcast_to(np.r_[s, [0.0] * (3 - len(s))], (n, 3))


_batched = jax.jit(collide_batch, static_argnums=(0, 1))


def _ours_and_mujoco(t1, s1, t2, s2, seed, spread, margin=MARGIN):
    m = scene(t1, s1, t2, s2, margin)
    (R1, p1, R2, p2), cons = random_contacts(m, N_POSES, seed, spread)
    c = _batched(t1, t2, (R1, p1), _size3(s1, len(R1)), (R2, p2), _size3(s2, len(R1)))
    return jax.tree.map(np.asarray, c), cons


def _match(c, cons, tol):
    """Worst over MuJoCo's contacts of the error of the closest of our
    candidates (max of |Δdist|, |Δpos|∞, |Δframe|∞: the normal and MuJoCo's
    tangents, which its pyramidal cone's edges follow)."""
    worst = 0.0
    for i, cl in enumerate(cons):
        for g, dist, pos, frame, margin in cl:
            assert g == (0, 1) and margin == 2 * MARGIN
            err = np.maximum(np.abs(c.dist[i] - dist), np.maximum(np.abs(c.pos[i] - pos).max(-1),
                                                                   np.abs(c.frame[i] - frame).max((-1, -2))))
            worst = max(worst, err.min())
    assert worst < tol, worst
    return worst


def _deepest_agree(c, cons, margin, tol):
    """Where our deepest candidate is within the margin MuJoCo reports a
    contact, and the deepest distances agree (and vice versa)."""
    for i, cl in enumerate(cons):
        ours = c.dist[i].min()
        assert (ours < margin) == bool(cl), (i, ours, cl)
        if cl:
            assert abs(min(x[1] for x in cl) - ours) < tol, (i, ours, cl)


EXACT = [  # (type1, size1, type2, size2, spread of the random positions, MuJoCo's cap on the count)
    ("plane", (1,), "sphere", (0.3,), 0.6, None),
    ("plane", (1,), "capsule", (0.2, 0.4), 0.6, None),
    ("plane", (1,), "box", (0.2, 0.3, 0.4), 0.6, 4),
    ("plane", (1,), "ellipsoid", (0.2, 0.3, 0.4), 0.5, None),
    ("sphere", (0.3,), "sphere", (0.2,), 0.4, None),
    ("sphere", (0.3,), "capsule", (0.2, 0.5), 0.5, None),
    ("capsule", (0.3, 0.4), "capsule", (0.2, 0.5), 0.6, None),
    ("sphere", (0.3,), "box", (0.2, 0.3, 0.4), 0.4, None),
]


@pytest.mark.parametrize("t1,s1,t2,s2,spread,cap", EXACT, ids=[f"{a[0]}-{a[2]}" for a in EXACT])
def test_exact_pairs_equal_mujoco(t1, s1, t2, s2, spread, cap):
    """dist, pos and normal equal MuJoCo's to 1e-9, and the candidates within
    the margin are exactly the contacts MuJoCo reports (capped as MuJoCo)."""
    c, cons = _ours_and_mujoco(t1, s1, t2, s2, seed=1, spread=spread)
    _match(c, cons, 1e-9)
    counts = (c.dist < 2 * MARGIN).sum(-1)
    if cap:
        counts = np.minimum(counts, cap)
    assert list(counts) == [len(cl) for cl in cons]
    # not vacuous: penetrating and separated poses both occur
    pen = sum(any(x[1] < 0 for x in cl) for cl in cons)
    assert 0.1 * N_POSES < pen < 0.9 * N_POSES, pen
    assert (c.dist >= 2 * MARGIN).any()


def test_sphere_box_inside_equals_mujoco():
    """Sphere centres inside the box (the nearest-face branch), to 1e-9."""
    c, cons = _ours_and_mujoco("sphere", (0.05,), "box", (0.3, 0.4, 0.5), seed=2, spread=0.25)
    _match(c, cons, 1e-9)
    assert sum(any(x[1] < -0.05 for x in cl) for cl in cons) > 0.3 * N_POSES


def test_plane_cylinder_contains_mujoco():
    """MuJoCo's four plane-cylinder contacts (the deeper cap's rim point and
    two at +-120 degrees, the other cap's rim point) are among our six, to
    1e-9; the deepest agree."""
    c, cons = _ours_and_mujoco("plane", (1,), "cylinder", (0.2, 0.4), seed=3, spread=0.6)
    _match(c, cons, 1e-9)
    _deepest_agree(c, cons, 2 * MARGIN, 1e-9)



def _deepest(c, cl):
    """(MuJoCo's deepest contact, our deepest candidate's (dist, normal))."""
    x = min(cl, key=lambda x: x[1])
    j = int(np.argmin(c.dist))
    return x, (c.dist[j], c.frame[j, 0])


def _box_sdf(x, R, p, h):
    """Signed distance of points x (n, 3) to a box, in NumPy (a reference)."""
    xl = (x - p) @ R
    q = np.clip(xl, -h, h)
    return np.where(np.all(xl == q, axis=-1), -np.min(h - np.abs(xl), axis=-1), np.linalg.norm(xl - q, axis=-1))


def test_capsule_box_against_mujoco():
    """Capsule-box.  The colliding poses are MuJoCo's.  While the capsule's
    axis is outside the box (a dense NumPy sampling of the axis decides),
    every MuJoCo contact is one of our three candidates: dist to 1e-9, pos and
    normal to 1e-6 (measured: dist 4e-16, normal 1e-8).  With the axis inside
    the box MuJoCo's depth is not the minimum translation (it reports depths
    below the radius there); ours is, and the two differ by up to 0.36 on
    this scene: not compared."""
    s1, s2 = (0.1, 0.3), np.array([0.2, 0.3, 0.4])
    c, cons = _ours_and_mujoco("capsule", s1, "box", tuple(s2), seed=6, spread=0.35, margin=0.0)
    m = scene("capsule", s1, "box", tuple(s2), 0.0)
    (R1, p1, R2, p2), _ = random_contacts(m, N_POSES, 6, 0.35)
    ts = np.linspace(0, 1, 4001)[:, None]
    outside = 0
    for i, cl in enumerate(cons):
        assert bool(cl) == (c.dist[i].min() < 0), i
        a, b = p1[i] + 0.3 * R1[i][:, 2], p1[i] - 0.3 * R1[i][:, 2]
        if cl and _box_sdf(a + ts * (b - a), R2[i], p2[i], s2).min() > 1e-6:
            outside += 1
            x, (d, n) = _deepest(jax.tree.map(lambda a: a[i], c), cl)
            assert abs(x[1] - d) < 1e-9 and np.abs(x[3][0] - n).max() < 1e-6, (i, x, d, n)
    assert outside > 20 and sum(map(bool, cons)) > outside + 20


def test_box_box_against_mujoco():
    """Box-box.  The colliding poses are MuJoCo's; MuJoCo's deepest contact
    and our deepest candidate agree to 1e-9 in dist and normal while the
    penetration is below 0.02 (a tenth of the smaller half-size).  Deeper,
    our face-face candidates are the overlap polygon's vertices (box corners
    and edge crossings), as MuJoCo's are, but MuJoCo adds points of its own
    (e.g. at the separating-axis depth): there our deepest is never deeper
    than MuJoCo's, and in most poses it is one of MuJoCo's contacts (1e-9;
    measured: 117 of 156)."""
    c, cons = _ours_and_mujoco("box", (0.1, 0.2, 0.3), "box", (0.2, 0.3, 0.4), seed=7, spread=0.35, margin=0.0)
    shallow = deep = same = 0
    for i, cl in enumerate(cons):
        assert bool(cl) == (c.dist[i].min() < 0), i
        if cl:
            x, (d, n) = _deepest(jax.tree.map(lambda a: a[i], c), cl)
            if x[1] > -0.02:
                shallow += 1
                assert abs(x[1] - d) < 1e-9 and np.abs(x[3][0] - n).max() < 1e-9, (i, x, d, n)
            else:
                deep += 1
                assert d >= x[1] - 1e-9, (i, x, d)
                same += min(abs(y[1] - d) for y in cl) < 1e-9
    assert shallow > 10 and deep > 100 and same > 0.6 * deep, (shallow, deep, same)


def test_resting_boxes_touch_at_the_overlap_rectangle_s_vertices():
    """Two boxes resting face to face, offset as in a stack: the active
    candidates are exactly the overlap rectangle's four vertices (two box
    corners and two edge crossings) at the penetration depth, normal +z;
    turned slightly about z, about x and about y, the contact points move
    by the order of the turn (no candidate jumps, which once stalled the
    step-size controller on a box stack)."""
    h, pen = np.array([0.1, 0.1, 0.1]), 1e-3
    p1, p2 = np.zeros(3), np.array([0.03, -0.02, 0.2 - pen])

    def active(R2):
        c = jax.tree.map(np.asarray, _batched("box", "box", (np.eye(3)[None], p1[None]), h[None],
                                              (R2[None], p2[None]), h[None]))
        on = c.dist[0] < 0
        return c.dist[0][on], c.pos[0][on], c.frame[0, on, 0]
    d, pos, n = active(np.eye(3))
    rect = {(x, y) for x in (-0.07, 0.1) for y in (-0.1, 0.08)}
    assert len(d) == 4 and {tuple(np.round(p[:2], 12)) for p in pos} == rect, pos
    np.testing.assert_allclose(d, -pen, atol=1e-12)
    np.testing.assert_allclose(pos[:, 2], 0.1 - pen / 2, atol=1e-12)
    np.testing.assert_allclose(np.abs(n[:, 2]), 1.0, atol=1e-12)
    for axis in np.eye(3):
        d2, pos2, _ = active(_rot(axis, 1e-4))
        assert len(d2) >= 3
        # each active point of the turned pose is within O(angle) of a point of the rectangle
        gap = np.abs(pos2[:, None, :2] - np.array(sorted(rect))[None]).max(-1).min(1)
        assert gap.max() < 1e-4, (axis, pos2)


@pytest.mark.parametrize("offset", [(0.0, 0.0), (0.03, 0.0), (0.0, -0.03), (0.03, -0.02), (0.03, 1e-15)])
def test_stacked_boxes_touch_at_mujocos_four_points(offset):
    """Boxes stacked with their sides aligned in both directions, in one, or in none: MuJoCo finds
    four contacts at the overlap rectangle's vertices, at the penetration depth; so do we (corners
    on a face's edge count, and a point where a corner meets an edge crossing counts once)."""
    import mujoco
    pen = 1e-3
    p2 = np.array([offset[0], offset[1], 0.2 - pen])
    xml = f"""<mujoco><worldbody><body><freejoint/><geom type="box" size=".1 .1 .1"/></body>
      <body pos="{p2[0]} {p2[1]} {p2[2]}"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
      </worldbody></mujoco>"""
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    theirs = sorted((round(c.pos[0], 9), round(c.pos[1], 9), round(c.dist, 12)) for c in d.contact[:d.ncon])
    c = jax.tree.map(np.asarray, _batched("box", "box", (np.eye(3)[None], np.zeros((1, 3))), np.full((1, 3), 0.1),
                                          (np.eye(3)[None], p2[None]), np.full((1, 3), 0.1)))
    on = c.dist[0] < 0
    ours = sorted((round(x[0], 9), round(x[1], 9), round(dd, 12)) for x, dd in zip(c.pos[0][on], c.dist[0][on]))
    assert len(theirs) == 4 and ours == theirs, (ours, theirs)
    np.testing.assert_allclose(np.abs(c.frame[0, on, 0, 2]), 1.0, atol=1e-12)


def test_plane_mesh_against_mujoco():
    """Plane-mesh (12 random vertices, MuJoCo's hull of them): every MuJoCo
    contact (it keeps at most 3 here) is one of our vertex candidates, dist
    and pos to 1e-9 (measured: exact), and the colliding poses agree."""
    v = np.random.default_rng(3).normal(size=(12, 3)) * [0.2, 0.3, 0.4]
    m = scene("plane", (1,), "mesh", None, margin=0.0, meshes={"b": v})
    verts = m.mesh_vert[m.mesh_vertadr[0]:m.mesh_vertadr[0] + m.mesh_vertnum[0]]
    (R1, p1, R2, p2), cons = random_contacts(m, N_POSES, 8, 0.4)
    V = np.broadcast_to(verts, (len(R1),) + verts.shape)
    c = jax.tree.map(np.asarray, _batched("plane", "mesh", (R1, p1), np.zeros((len(R1), 3)), (R2, p2), V))
    assert c.dist.shape == (N_POSES, len(verts))
    for i, cl in enumerate(cons):
        assert bool(cl) == (c.dist[i].min() < 0), i
        for g, dist, pos, frame, _ in cl:
            err = np.maximum(np.abs(c.dist[i] - dist), np.maximum(np.abs(c.pos[i] - pos).max(-1),
                                                                   np.abs(c.frame[i, :, 0] - frame[0]).max(-1)))
            assert err.min() < 1e-9, (i, err)
    assert sum(len(cl) > 1 for cl in cons) > 20


def _rot(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


DEGENERATE = [  # (type1, size1, pose1, type2, size2, pose2): poses where a direction is not unique
    ("capsule", (0.1, 0.3), (np.eye(3), np.zeros(3)), "capsule", (0.1, 0.3), (np.eye(3), np.array([0.15, 0, 0.1]))),
    ("capsule", (0.1, 0.3), (np.eye(3), np.zeros(3)), "capsule", (0.1, 0.3), (np.eye(3), np.array([0.0, 0, 0.1]))),
    ("capsule", (0.1, 1e-20), (np.eye(3), np.zeros(3)), "capsule", (0.1, 1e-20), (np.eye(3), np.array([0.1, 0, 0]))),
    ("capsule", (0.1, 0.3), (np.eye(3), np.zeros(3)), "capsule", (0.1, 0.3), (_rot([1, 0, 0], np.pi / 2), np.zeros(3))),
    ("sphere", (0.1,), (np.eye(3), np.zeros(3)), "sphere", (0.2,), (np.eye(3), np.zeros(3))),
    ("sphere", (0.1,), (np.eye(3), np.zeros(3)), "capsule", (0.2, 0.3), (np.eye(3), np.array([0, 0, 0.1]))),
    ("sphere", (0.1,), (np.eye(3), np.zeros(3)), "box", (0.2, 0.3, 0.4), (np.eye(3), np.zeros(3))),
    ("sphere", (0.1,), (np.eye(3), np.array([0.2, 0.3, 0.4])), "box", (0.2, 0.3, 0.4), (np.eye(3), np.zeros(3))),
    ("plane", (0,), (np.eye(3), np.zeros(3)), "cylinder", (0.2, 0.3), (np.eye(3), np.array([0, 0, 0.2]))),
    ("plane", (0,), (np.eye(3), np.zeros(3)), "box", (0.2, 0.3, 0.4), (np.eye(3), np.array([0, 0, 0.2]))),
    ("box", (0.1, 0.2, 0.3), (np.eye(3), np.zeros(3)), "box", (0.2, 0.3, 0.4), (np.eye(3), np.array([0, 0, 0.69]))),
    ("capsule", (0.1, 0.3), (_rot([0, 1, 0], np.pi / 2), np.zeros(3)), "box", (0.2, 0.3, 0.4),
     (np.eye(3), np.array([0, 0, 0.49]))),
]


@jax.jit(static_argnums=(0, 1))
def _value_and_grad(t1, t2, R1, p1, R2, p2, s1, s2):
    def f(R1, p1, R2, p2):
        c = collide(t1, t2, (R1, p1), s1, (R2, p2), s2)
        return jnp.sum(c.dist) + jnp.sum(jnp.sin(c.pos)) + jnp.sum(jnp.sin(c.frame))
    return jax.value_and_grad(f, argnums=(0, 1, 2, 3))(R1, p1, R2, p2)


# long; the sphere centred on a box's corner (DEGENERATE[7]) stays in the default run
@pytest.mark.parametrize("t1,s1,P1,t2,s2,P2",
                         [c if i == 7 else pytest.param(*c, marks=pytest.mark.long) for i, c in enumerate(DEGENERATE)],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_gradients_finite_at_degenerate_poses(t1, s1, P1, t2, s2, P2):
    """Parallel, crossing and zero-length capsule axes, coincident centres, a
    sphere centred in a box or on its corner, an upright cylinder, aligned
    boxes (parallel edges), a capsule parallel to a box face: value and
    gradient (every output with respect to both poses) are finite, and the
    distance equals MuJoCo's there."""
    args = tuple(jnp.asarray(x) for x in (*P1, *P2))
    val, grads = _value_and_grad(t1, t2, *args, jnp.asarray(_size3(s1, 1)[0]), jnp.asarray(_size3(s2, 1)[0]))
    assert np.isfinite(val) and all(np.isfinite(g).all() for g in grads), grads
    # the deepest distance at the degenerate pose is still MuJoCo's
    m = scene(t1, s1, t2, s2, margin=0.0)
    d = __import__("mujoco").MjData(m)
    if t1 == "plane":
        qpos = list(P2[1]) + [1, 0, 0, 0]
    else:
        q1, q2 = np.zeros(4), np.zeros(4)
        __import__("mujoco").mju_mat2Quat(q1, np.ravel(P1[0]))
        __import__("mujoco").mju_mat2Quat(q2, np.ravel(P2[0]))
        qpos = list(P1[1]) + list(q1) + list(P2[1]) + list(q2)
    d.qpos[:] = qpos
    __import__("mujoco").mj_forward(m, d)
    c = collide(t1, t2, (d.geom_xmat[0].reshape(3, 3), d.geom_xpos[0]), np.r_[s1, [0.0] * (3 - len(s1))],
                (d.geom_xmat[1].reshape(3, 3), d.geom_xpos[1]), np.r_[s2, [0.0] * (3 - len(s2))])
    assert d.ncon > 0 and abs(min(d.contact.dist[:d.ncon]) - float(c.dist.min())) < 1e-12


def test_float32():
    """float32 inputs give float32 outputs that agree with MuJoCo's (float64)
    to float32 round-off (2e-5 on lengths of order 1)."""
    for t1, s1, t2, s2, spread, _ in EXACT:
        m = scene(t1, s1, t2, s2, MARGIN)
        (R1, p1, R2, p2), cons = random_contacts(m, 50, 4, spread)
        f32 = lambda x: np.asarray(x, np.float32)
        c = _batched(t1, t2, (f32(R1), f32(p1)), f32(_size3(s1, len(R1))), (f32(R2), f32(p2)),
                     f32(_size3(s2, len(R1))))
        assert c.dist.dtype == c.pos.dtype == c.frame.dtype == jnp.float32
        _match(jax.tree.map(np.asarray, c), cons, 2e-5)


def test_frame_is_orthonormal_and_right_handed():
    n = np.random.default_rng(0).normal(size=(1000, 3))
    n = np.concatenate([n / np.linalg.norm(n, axis=1, keepdims=True), np.eye(3), -np.eye(3)])
    hint = np.random.default_rng(1).normal(size=n.shape)
    hint[:5] = n[:5]                                      # a hint along the normal: the default frame
    for F in (np.asarray(contact_frame(jnp.asarray(n))), np.asarray(contact_frame(jnp.asarray(n), hint))):
        assert np.abs(F @ F.transpose(0, 2, 1) - np.eye(3)).max() < 1e-14
        assert np.abs(np.linalg.det(F) - 1).max() < 1e-14 and np.abs(F[:, 0] - n).max() == 0
    np.testing.assert_allclose(F[:5], np.asarray(contact_frame(jnp.asarray(n[:5]))), atol=1e-15)
    t = hint[5:] - n[5:] * np.sum(n[5:] * hint[5:], -1, keepdims=True)
    long = np.sum(hint[5:] ** 2, -1) >= 0.25                # MuJoCo keeps a hint of length ½ or more
    np.testing.assert_allclose(F[5:][long, 1], (t / np.linalg.norm(t, axis=-1, keepdims=True))[long], atol=1e-14)
    assert (~long).sum() > 10


def test_swapped_order_flips_the_normal():
    rng = np.random.default_rng(5)
    R, p = _rot(rng.normal(size=3), 1.0), rng.normal(size=3) * 0.2
    a = collide("sphere", "capsule", (np.eye(3), np.zeros(3)), np.r_[0.2, 0, 0], (R, p), np.r_[0.1, 0.3, 0])
    b = collide(geometry.TYPES.index("capsule"), "sphere", (R, p), np.r_[0.1, 0.3, 0], (np.eye(3), np.zeros(3)),
                np.r_[0.2, 0, 0])
    assert np.allclose(a.dist, b.dist) and np.allclose(a.pos, b.pos) and np.allclose(a.frame[:, 0], -b.frame[:, 0])


# ---------------------------------------------------------------------------------------------------
# pair selection

import pathlib  # noqa: E402
import re  # noqa: E402

import mujoco as mj  # noqa: E402

from jaxmbd.contact import pairs as cpairs  # noqa: E402

GYM = pathlib.Path(mj.__file__).parents[1] / "gymnasium" / "envs" / "mujoco" / "assets"

NESTED = """<mujoco><option><flag gravity="disable" {flags}/></option>
<default><geom margin="10"/></default><worldbody>
<geom name="floor" type="plane" size="5 5 1"/>
<geom name="wsph" type="sphere" size="0.3"/>
<body name="S"><geom name="s" type="sphere" size="0.3"/></body>
<body name="A"><freejoint/><geom name="a" type="sphere" size="0.3"/><geom name="a2" type="capsule" size="0.1 0.2"/>
  <body name="B"><joint type="hinge"/><geom name="b" type="sphere" size="0.3"/>
    <body name="C"><geom name="c" type="box" size="0.3 0.2 0.1"/>
      <body name="D"><joint type="hinge"/><geom name="dd" type="sphere" size="0.3"/>
        <geom name="d2" type="sphere" size="0.3" contype="2" conaffinity="0"/></body></body></body></body>
<body name="E"><freejoint/><geom name="e" type="sphere" size="0.3"/><geom name="e2" type="capsule" size="0.2 0.1"
  contype="0" conaffinity="2"/></body>
<body name="F"><freejoint/><geom name="f" type="sphere" size="0.3"/><geom name="f2" type="sphere" size="0.2"/></body>
<body name="G" pos="0 0 -0.1"><geom name="g" type="plane" size="1 1 1" contype="3" conaffinity="3"/></body>
</worldbody>
<contact><pair geom1="dd" geom2="b"/><pair geom1="e" geom2="f"/><pair geom1="c" geom2="e"/>
<exclude body1="E" body2="F"/><exclude body1="S" body2="A"/></contact></mujoco>"""


def _nested(flags):
    """The scene; with the parent filter off, without bodies E and F (MuJoCo
    4.0 stops with "broadphase buffer full" on the whole scene then)."""
    xml = NESTED.format(flags=flags)
    if flags:
        xml = re.sub(r'<body name="E">.*?</body>\n<body name="F">.*?</body>\n', "", xml, flags=re.S)
        xml = xml.replace('<pair geom1="e" geom2="f"/><pair geom1="c" geom2="e"/>', "")
        xml = xml.replace('<exclude body1="E" body2="F"/>', "")
    return mj.MjModel.from_xml_string(xml)


def _mujoco_pairs(m, d):
    return {tuple(int(g) for g in c.geom) for c in d.contact[:d.ncon]}


@pytest.mark.parametrize("flags", ["", 'filterparent="disable"'])
def test_pair_rules_equal_mujoco(flags):
    """Every geom overlaps every other (margin 10), so MuJoCo's contacts name
    exactly the pairs it collides: the selection equals that set, with
    MuJoCo's geom order.  The scene has world geoms against the world's
    children, a welded body (C) between jointed ones, contype/conaffinity
    masks, explicit pairs (one of a parent-filtered pair, one that a body
    exclusion would remove), exclusions, and a second static plane; the flags disable the parent filter."""
    assert cpairs.DSBL_FILTERPARENT == int(mj.mjtDisableBit.mjDSBL_FILTERPARENT)
    assert cpairs.DSBL_CONTACT == int(mj.mjtDisableBit.mjDSBL_CONTACT)
    m = _nested(flags)
    d = mj.MjData(m)
    mj.mj_forward(m, d)
    ps = cpairs.from_mujoco(m)
    assert set(ps.all_pairs()) == _mujoco_pairs(m, d)
    assert len(ps) == len(ps.all_pairs())                      # no pair twice
    for (t1, t2), g in ps.groups.items():
        assert (m.geom_type[g[:, 0]] == mj.mjtGeom.__members__["mjGEOM_" + t1.upper()].value).all()
        assert (m.geom_type[g[:, 1]] == mj.mjtGeom.__members__["mjGEOM_" + t2.upper()].value).all()
    assert sorted(k for e in ps.explicit.values() for k in e if k >= 0) == list(range(m.npair))
    assert m.npair == (1 if flags else 3)


def _narrow_all(m, d, ps):
    """Our candidates for every selected pair at MuJoCo's geom poses."""
    R, p, s = d.geom_xmat.reshape(-1, 3, 3), d.geom_xpos, m.geom_size
    out = {}
    for (t1, t2), g in ps.groups.items():
        a, b = g[:, 0], g[:, 1]
        c = jax.tree.map(np.asarray, _batched(t1, t2, (R[a], p[a]), s[a], (R[b], p[b]), s[b]))
        for k, (i, j) in enumerate(g):
            out[(int(i), int(j))] = jax.tree.map(lambda x: x[k], c)
    return out


def _random_qpos(m, rng):
    q = m.qpos0.copy()
    for j in range(m.njnt):
        a = m.jnt_qposadr[j]
        if m.jnt_type[j] == mj.mjtJoint.mjJNT_FREE:
            q[a:a + 3] = [rng.uniform(-0.2, 0.2), rng.uniform(-0.2, 0.2), rng.uniform(0.0, 1.0)]
            q[a + 3:a + 7] = random_quat(rng)
        elif m.jnt_limited[j]:
            q[a] = rng.uniform(*m.jnt_range[j])
    return q


@pytest.mark.parametrize("name", ["ant", "humanoid"])
def test_gym_robots_pairs_and_contacts(name):
    """The gymnasium ant and humanoid: over random configurations (random
    joint angles, the root near the floor) every contact MuJoCo reports is
    between a selected pair and is one of our candidates (dist, pos, normal
    to 1e-9); after MuJoCo settles the model on its floor (300 steps), the
    model is lowered until its lowest contact penetrates 5 mm (MuJoCo's soft
    contacts rest at dist ~ +margin), and then the pairs with dist < 0 are
    MuJoCo's, and their deepest distances agree to 1e-9."""
    m = mj.MjModel.from_xml_path(str(GYM / f"{name}.xml"))
    d = mj.MjData(m)
    ps = cpairs.from_mujoco(m)
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(20):
        d.qpos[:] = _random_qpos(m, rng)
        mj.mj_forward(m, d)
        mjp = _mujoco_pairs(m, d)
        assert mjp <= set(ps.all_pairs()), mjp - set(ps.all_pairs())
        seen |= mjp
        ours = _narrow_all(m, d, ps)
        cons = {}
        for c in d.contact[:d.ncon]:
            cons.setdefault(tuple(int(g) for g in c.geom), []).append(
                (tuple(c.geom), c.dist, c.pos.copy(), c.frame.reshape(3, 3).copy(), None))
        for pair, cl in cons.items():
            o = ours[pair]
            err = [min(max(abs(o.dist[k] - x[1]), np.abs(o.pos[k] - x[2]).max(), np.abs(o.frame[k, 0] - x[3][0]).max())
                       for k in range(len(o.dist))) for x in cl]
            assert max(err) < 1e-9, (pair, err)
    assert len(seen) > (10 if name == "humanoid" else 4), seen   # self-collisions in the humanoid, not in the ant

    mj.mj_resetData(m, d)
    for _ in range(300):
        mj.mj_step(m, d)
    mj.mj_forward(m, d)
    d.qpos[2] -= min(d.contact.dist[:d.ncon]) + 0.005              # the root's free joint: z
    mj.mj_forward(m, d)
    ours = _narrow_all(m, d, ps)
    mine = {pr: float(c.dist.min()) for pr, c in ours.items() if c.dist.min() < 0}
    theirs = {}
    for c in d.contact[:d.ncon]:
        pr = tuple(int(g) for g in c.geom)
        if c.dist < 0:
            theirs[pr] = min(theirs.get(pr, 0.0), c.dist)
    assert len(theirs) >= 2 and set(mine) == set(theirs), (mine, theirs)
    assert max(abs(mine[pr] - theirs[pr]) for pr in mine) < 1e-9
