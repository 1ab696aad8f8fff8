"""Convex mesh geoms in models: the hull a mesh collides as
(:func:`jaxmbd.contact.geometry.make_mesh`), the several candidates of a
polytope pair (a mesh against a plane, a box or a mesh), against the box
primitive, against MuJoCo, and in a simulation (a mesh cube resting on a
table stays level and carries its weight) and an MJCF scene.

The box-mesh kernel is compiled once: every batch has N poses and every mesh
is padded to NV vertices and NF planes."""

import jax
import jax.numpy as jnp
import mujoco as mj
import numpy as np
import pytest

import jaxmbd
from contact_util import random_contacts, random_rotations
from jaxmbd import integrators as I
from jaxmbd.contact import geometry as G
from jaxmbd import contact_forces
from jaxmbd.forces.contact import Contact
from jaxmbd import Steps

N, NV, NF, NE = 60, 12, 20, 30
H1 = np.array([0.1, 0.2, 0.3])                 # the box primitive
H2 = np.array([0.15, 0.25, 0.3])               # the box the cube mesh is made of
SIGNS = np.array([[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)], float)
RANDOM = np.random.default_rng(3).normal(size=(12, 3)) * [0.2, 0.3, 0.4]


def _batch(mesh):
    return jax.tree.map(lambda x: np.broadcast_to(x, (N,) + np.shape(x)), mesh)


_box_mesh = jax.jit(lambda P1, s1, P2, m2: G.collide_batch("box", "mesh", P1, s1, P2, m2))


def test_make_mesh_is_the_convex_hull():
    """Interior points are dropped, every input point is inside every face
    plane, every hull vertex lies on at least three planes, coplanar
    triangles share one plane (a cube: 8 vertices, 6 planes), padding
    repeats the first vertex and plane and marks the rest invalid."""
    rng = np.random.default_rng(0)
    cube = SIGNS * H2
    m = G.make_mesh(np.concatenate([cube, 0.5 * rng.uniform(-1, 1, (20, 3)) * H2]))
    assert len(m.verts) == 8 and len(m.planes) == 6 and m.valid.all()
    assert {tuple(v) for v in np.round(m.verts, 12)} == {tuple(v) for v in np.round(cube, 12)}
    for pts in (RANDOM, cube):
        mm = G.make_mesh(pts)
        s = pts @ mm.planes[:, :3].T - mm.planes[:, 3]
        assert s.max() < 1e-12
        np.testing.assert_allclose(np.linalg.norm(mm.planes[:, :3], axis=1), 1.0, atol=1e-14)
        on = np.abs(mm.verts @ mm.planes[:, :3].T - mm.planes[:, 3]) < 1e-12
        assert on.sum(1).min() >= 3
    assert len(G.make_mesh(cube).edges) == 12                            # no face diagonals
    p = G.pad_mesh(G.make_mesh(cube), NV, NF, NE)
    assert p.verts.shape == (NV, 3) and p.planes.shape == (NF, 4) and p.valid.sum() == 8
    assert p.edges.shape == (NE, 2, 3) and (p.edges[12:] == p.edges[0]).all()
    assert (p.verts[8:] == p.verts[0]).all() and (p.planes[6:] == p.planes[0]).all()
    with pytest.raises(ValueError, match="geom 'flat'.*no convex hull with volume"):
        G.make_mesh(np.c_[rng.normal(size=(10, 2)), np.zeros(10)], what="geom 'flat'")
    with pytest.raises(ValueError, match="padding"):
        G.pad_mesh(G.make_mesh(RANDOM), 4, NF)


def test_bad_mesh_geoms_get_a_clear_error():
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(1e-2,) * 3)
    with pytest.raises(ValueError, match="geom 'm'.*needs its vertices"):
        b.add_geom("a", "mesh", name="m")
    with pytest.raises(ValueError, match="geom 'm'.*vertices are for meshes"):
        b.add_geom("a", "box", (0.1, 0.1, 0.1), name="m", vertices=SIGNS)
    with pytest.raises(ValueError, match="geom 'm'.*no convex hull with volume"):
        b.add_geom("a", "mesh", name="m", vertices=np.c_[SIGNS[:, :2], np.zeros(8)])
    with pytest.raises(ValueError, match="geom 'm'.*finite vertices"):
        b.add_geom("a", "mesh", name="m", vertices=np.where(SIGNS > 0, np.nan, SIGNS))


@pytest.mark.long
def test_polytope_candidates_equal_the_box_primitive_s():
    """A box-shaped mesh against a box, and two box-shaped meshes (random
    poses, many overlapping), against box-box: FACE_POINTS point candidates
    and the deepest pair.  Where box-box has face contact, every penetrating
    point candidate is one of box-box's face-face candidates (the overlap
    polygon's vertices: dist and pos to 1e-9), as many as box-box has up to
    FACE_POINTS; where box-box has edge-edge contact, the separating-axis
    candidate's depth (its residual plus the deepest point's) is box-box's;
    no point candidate is deeper than the pair's penetration depth beyond
    the face preference (G.FACE_PREFERENCE); against
    a plane the mesh gives the box's candidates."""
    rng = np.random.default_rng(1)
    R1, R2 = random_rotations(rng, N), random_rotations(rng, N)
    p1, p2 = rng.uniform(-0.25, 0.25, (N, 3)), rng.uniform(-0.25, 0.25, (N, 3))
    p2[: N // 3] = p1[: N // 3] + rng.uniform(-0.1, 0.1, (N // 3, 3))           # more deep overlaps
    mesh = G.pad_mesh(G.make_mesh(SIGNS * H2), NV, NF, NE)
    m1 = G.pad_mesh(G.make_mesh(SIGNS * H1), NV, NF, NE)
    ref = jax.tree.map(np.asarray, G.collide_batch("box", "box", (R1, p1), np.broadcast_to(H1, (N, 3)), (R2, p2),
                                                   np.broadcast_to(H2, (N, 3))))
    bm = jax.tree.map(np.asarray, _box_mesh((R1, p1), np.broadcast_to(H1, (N, 3)), (R2, p2), _batch(mesh)))
    mm = jax.tree.map(np.asarray, G.collide_batch("mesh", "mesh", (R1, p1), _batch(m1), (R2, p2), _batch(mesh)))
    k = G.FACE_POINTS
    face_pairs = edge_pairs = 0
    for c in (bm, mm):
        assert c.dist.shape == (N, k + 1)
        for i in range(N):
            depth = ref.dist[i].min()
            if depth >= 0:
                continue
            pts = c.dist[i, :k]
            rel, ab = G.FACE_PREFERENCE                                   # a face axis is preferred within this
            assert pts.min() >= depth * (1 + rel) - ab * 0.5 - 1e-9, i   # (0.5: above the hulls' size)
            if ref.dist[i, 16] < G._FAR / 2:                              # box-box: edge-edge contact
                sat = c.dist[i, -1] + min(c.dist[i, :-1].min(), 0)
                np.testing.assert_allclose(sat, ref.dist[i, 16], atol=1e-12)
                edge_pairs += 1
                continue
            theirs = np.nonzero(ref.dist[i] < 0)[0]
            ours = np.nonzero(pts < 0)[0]
            assert len(ours) == min(k, len(theirs)), (i, len(ours), len(theirs))
            for j in ours:
                err = np.maximum(np.abs(ref.dist[i, theirs] - pts[j]), np.abs(ref.pos[i, theirs] - c.pos[i, j]).max(1))
                assert err.min() < 1e-9, (i, j, err.min())
                np.testing.assert_allclose(np.abs(c.frame[i, j, 0] @ ref.frame[i, theirs[0], 0]), 1, atol=1e-12)
            face_pairs += 1
    assert face_pairs > 20 and edge_pairs > 4, (face_pairs, edge_pairs)
    pl = G.collide_batch("plane", "mesh", (R1, p1), np.zeros((N, 3)), (R2, p2), _batch(mesh))
    pb = G.collide_batch("plane", "box", (R1, p1), np.zeros((N, 3)), (R2, p2), np.broadcast_to(H2, (N, 3)))
    np.testing.assert_allclose(np.sort(np.asarray(pl.dist)[:, :8], 1), np.sort(np.asarray(pb.dist), 1), atol=1e-12)


def test_box_mesh_deepest_equals_mujoco_and_no_candidate_is_deeper():
    """A box against a random convex mesh, MuJoCo's exact deepest contact
    (nativeccd at tight tolerances, multiccd off): our deepest candidate is
    its dist (1e-9): the GJK/EPA candidate's penetration less the deepest
    vertex's plus that vertex's is the true depth, and no point candidate is
    deeper than the pair's penetration depth (beyond G.FACE_PREFERENCE, the
    margin by which face contact is preferred to edge-edge contact).  Both kinds are exercised: poses where
    a vertex is the deepest point and poses where the GJK/EPA candidate is
    deeper than every vertex (edge-edge contact, and deep overlaps)."""
    xml = ('<mujoco><option ccd_iterations="500" ccd_tolerance="1e-12"><flag gravity="disable" multiccd="disable"/>'
           f'</option><asset><mesh name="bm" vertex="{" ".join(map(str, RANDOM.ravel()))}"/></asset><worldbody>'
           f'<body><freejoint/><geom name="a" type="box" size="{" ".join(map(str, H1))}"/></body>'
           '<body><freejoint/><geom name="b" type="mesh" mesh="bm"/></body></worldbody></mujoco>')
    m = mj.MjModel.from_xml_string(xml)
    (R1, p1, R2, p2), cons = random_contacts(m, N, 4, 0.3)
    k = m.geom_dataid[1]
    verts = m.mesh_vert[m.mesh_vertadr[k]:m.mesh_vertadr[k] + m.mesh_vertnum[k]].astype(float)
    mesh = G.pad_mesh(G.make_mesh(verts), NV, NF, NE)
    c = jax.tree.map(np.asarray, _box_mesh((R1, p1), np.broadcast_to(H1, (N, 3)), (R2, p2), _batch(mesh)))
    vertex_deepest = deeper = 0
    for i, cl in enumerate(cons):
        assert bool(cl) == (c.dist[i].min() < 0), i
        if cl:
            d = cl[0][1]
            dv = c.dist[i, :-1].min()
            assert abs(min(dv, 0) + c.dist[i, -1] - d) < 1e-9, (i, d, dv, c.dist[i, -1])
            rel, ab = G.FACE_PREFERENCE                   # a face's support polygon is preferred within this
            assert dv >= d * (1 + rel) - ab * 0.5 - 1e-9
            vertex_deepest += abs(dv - d) < 1e-9
            deeper += dv > d + 1e-3
    assert vertex_deepest >= 3 and deeper > 5, (vertex_deepest, deeper)


@pytest.fixture(scope="module")
def table():
    """A mesh cube (a box's 8 corners and interior points) on a free joint, resting on a box table."""
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "box", (0.3, 0.3, 0.05), pos=(0, 0, -0.05), name="table")
    b.add_body("cube", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(1 / 150,) * 3)
    pts = np.concatenate([SIGNS * 0.1, np.random.default_rng(2).uniform(-0.05, 0.05, (5, 3))])
    b.add_geom("cube", "mesh", vertices=pts, name="cube")
    b.set_initial_state(np.array([0.05, 0.02, 0.1 + 1e-3, 1, 0, 0, 0]), np.zeros(6))
    return b.build()


@pytest.mark.long
def test_a_mesh_cube_rests_level_on_a_table_and_carries_its_weight(table):
    """Face on face, the four bottom vertices carry the weight (one GJK point
    would let the cube rock): after 1 s it is level to 1e-9, at rest, the
    normal forces sum to mg (1e-6) over exactly four contacts, and the
    separating-axis candidate's residual penetration is zero."""
    c = [e for e in table.forces if isinstance(e, Contact)][0]
    assert c.pair_list() == (("table", "cube"),) and c.groups[0][:2] == ("box", "mesh")
    assert c.mesh_nvert == (8,)
    sol = jaxmbd.simulate(table, t1=1.0, integrator=I.RosenbrockNystrom4(),
                          steps=Steps(rtol=1e-8, atol=1e-8, max_steps=20_000))
    assert int(sol.status) == 0
    q, v = sol.qs[-1], sol.vs[-1]
    assert float(jnp.max(jnp.abs(q[4:7]))) < 1e-9 and float(jnp.max(jnp.abs(v))) < 1e-6
    f = contact_forces(table, q, v)
    fn = np.asarray(f["normal_force"])
    np.testing.assert_allclose(fn.sum(), 9.81, rtol=1e-6)
    assert (fn > 1e-3).sum() == 4 and abs(float(f["dist"][-1])) < 1e-10
    np.testing.assert_allclose(np.asarray(f["pos"])[fn > 1e-3][:, :2].mean(0), [0.05, 0.02], atol=1e-6)


def test_an_mjcf_mesh_geom_collides_as_mujoco_s(tmp_path):
    """A mesh geom loaded from MJCF (inline vertices, a geom pos/quat, a mesh
    scale) rests on a plane: it is in the model's contacts (not in the
    warning), and at MuJoCo's states its plane candidates below the plane are
    MuJoCo's contacts: dist and pos to 1e-7 (MuJoCo stores mesh vertices in
    float32 and moves them to the mesh's inertial frame in float32: measured
    1.1e-8 here; the narrow phase itself is exact, test_contact_geometry)."""
    verts = " ".join(map(str, RANDOM.ravel()))
    xml = ('<mujoco><option><flag multiccd="disable"/></option>'
           f'<asset><mesh name="rock" vertex="{verts}" scale="1 1 0.5"/></asset><worldbody>'
           '<geom name="floor" type="plane" size="2 2 0.1"/>'
           '<body name="rock" pos="0 0 0.5"><freejoint/>'
           '<geom name="rock" type="mesh" mesh="rock" pos="0.02 0 0.01" quat="0.96 0.1 0.2 0.15" density="500"/>'
           '</body></worldbody></mujoco>')
    path = tmp_path / "rock.xml"
    path.write_text(xml)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # nothing left out
        model = jaxmbd.load_mjcf(str(path))
    c = [e for e in model.forces if isinstance(e, Contact)][0]
    assert c.pair_list() == (("floor", "rock"),) and c.groups[0][:2] == ("plane", "mesh")
    mm = mj.MjModel.from_xml_string(xml)
    d = mj.MjData(mm)
    rng = np.random.default_rng(5)
    found = 0
    for _ in range(20):
        q = rng.normal(size=4)
        d.qpos[:] = np.r_[rng.uniform(-0.1, 0.1, 2), rng.uniform(0.0, 0.3), q / np.linalg.norm(q)]
        mj.mj_forward(mm, d)
        ours = contact_forces(model, jnp.asarray(d.qpos), jnp.zeros(6))
        dist, pos = np.asarray(ours["dist"]), np.asarray(ours["pos"])
        assert (dist < 0).sum() >= d.ncon
        for con in d.contact[:d.ncon]:
            err = np.maximum(np.abs(dist - con.dist), np.abs(pos - con.pos).max(1))
            assert err.min() < 1e-7, err.min()
            found += 1
    assert found > 10
