"""Mesh geoms at the cost of their hulls: the collision hull's vertex limit
(``maxhullvert``, :func:`jaxmbd.contact.geometry.make_mesh`; a default of
:data:`jaxmbd.forces.contact.MAXHULLVERT_DEFAULT` for collisions), the
bounded narrow phase of large box-mesh and mesh-mesh pairs (GJK/EPA's
deepest pair and support points: memory O(V1 + V2 + F1 + F2) per pair, not
O(V F) or O(E1 E2 (V1 + V2))) against the exact path and MuJoCo, a prism
resting level on it, and the compiled memory of one forward-dynamics call of
an arm of twelve mesh links of 2,000 vertices each."""

import jax
import jax.numpy as jnp
import mujoco as mj
import numpy as np
import pytest

import jaxmbd
from contact_util import random_contacts
from jaxmbd.contact import geometry as G
from jaxmbd import contact_forces
from jaxmbd.forces.contact import MAXHULLVERT_DEFAULT, Contact

N = 40


def _cloud(n, axes, seed):
    """n points on an ellipsoid's surface (semi-axes ``axes``): every one a hull vertex."""
    u = np.random.default_rng(seed).normal(size=(n, 3))
    return u / np.linalg.norm(u, axis=1)[:, None] * np.asarray(axes)


def _contact(model):
    return [e for e in model.forces if isinstance(e, Contact)][0]


def _batch(mesh, n=N):
    return jax.tree.map(lambda x: np.broadcast_to(x, (n,) + np.shape(x)), mesh)


# --- the hull's vertex limit ------------------------------------------------------------------------

def test_maxhullvert_limits_the_collision_hull():
    """make_mesh(maxhullvert=n): at most n vertices, all of them input points,
    a hull inside the full one (every kept vertex inside its planes) that
    holds most of it (the farthest points are added first: the input points
    lie within 5% of the size outside the 64-vertex hull); n vertices as
    MuJoCo's compiled hull for the same limit; -1 is the full hull; below 4
    is refused.  A builder mesh geom collides as a hull of at most
    MAXHULLVERT_DEFAULT (64) vertices unless it sets its own limit, and
    load_mjcf reads <mesh maxhullvert>."""
    pts = _cloud(2000, (0.1, 0.05, 0.08), 0)
    full = G.make_mesh(pts)
    assert len(full.verts) == 2000
    for n in (8, 16, 64):
        m = G.make_mesh(pts, maxhullvert=n)
        assert len(m.verts) == n
        assert min(np.abs(pts - v).max(1).min() for v in m.verts) == 0.0          # input points
        assert (m.verts @ full.planes[:, :3].T - full.planes[:, 3]).max() < 1e-12
        xml = (f'<mujoco><asset><mesh name="m" vertex="{" ".join(map(str, pts.ravel()))}" maxhullvert="{n}"/>'
               '</asset><worldbody><geom type="mesh" mesh="m"/></worldbody></mujoco>')
        mm = mj.MjModel.from_xml_string(xml)
        assert mm.mesh_graph[mm.mesh_graphadr[0]] == n                        # MuJoCo's hull: n vertices too
    out = (pts @ m.planes[:, :3].T - m.planes[:, 3]).max()
    assert 0 < out < 0.05 * 0.1, out
    assert len(G.make_mesh(pts, maxhullvert=-1).verts) == 2000
    with pytest.raises(ValueError, match="maxhullvert"):
        G.make_mesh(pts, maxhullvert=3)
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "plane", name="floor")
    for i, cap in enumerate((None, -1, 12)):
        b.add_body(f"b{i}", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(1e-2,) * 3)
        b.add_geom(f"b{i}", "mesh", vertices=pts, name=f"m{i}", maxhullvert=cap)
    assert _contact(b.build()).mesh_nvert == (MAXHULLVERT_DEFAULT, 2000, 12)
    with pytest.raises(ValueError, match="maxhullvert is for meshes"):
        b.add_geom("b0", "box", (0.1, 0.1, 0.1), maxhullvert=8)
    verts = " ".join(map(str, pts[:300].ravel()))
    xml = (f'<mujoco><asset><mesh name="a" vertex="{verts}" maxhullvert="20"/><mesh name="b" vertex="{verts}"/>'
           '</asset><worldbody><geom name="floor" type="plane" size="1 1 .1"/>'
           '<body pos="0 0 1"><freejoint/><geom type="mesh" mesh="a"/></body>'
           '<body pos="0 0 2"><freejoint/><geom type="mesh" mesh="b"/></body></worldbody></mujoco>')
    assert _contact(jaxmbd.load_mjcf(xml, warn=False)).mesh_nvert == (20, MAXHULLVERT_DEFAULT)


# --- the bounded narrow phase -----------------------------------------------------------------------

HULL_A = _cloud(24, (0.15, 0.2, 0.25), 1)       # 24 and 40 vertices: E1 E2 (V1 + V2) above EXACT_BUDGET
HULL_B = _cloud(40, (0.2, 0.12, 0.15), 2)
BOX = np.array([0.1, 0.2, 0.15])


def _exact_and_bounded(t1, s1, mesh, monkeypatch):
    """(exact path, bounded path) Contacts of t1 (a box or a mesh) against mesh at N random
    poses: the exact one with the budget lifted."""
    rng = np.random.default_rng(4)
    from contact_util import random_rotations
    R1, R2 = random_rotations(rng, N), random_rotations(rng, N)
    p1, p2 = rng.uniform(-0.15, 0.15, (N, 3)), rng.uniform(-0.15, 0.15, (N, 3)) + [0.2, 0, 0]
    f = jax.jit(jax.vmap(lambda a, b, c, d: G.collide(t1, "mesh", (a, b), s1, (c, d), mesh)))
    bounded = jax.tree.map(np.asarray, f(R1, p1, R2, p2))
    monkeypatch.setattr(G, "EXACT_BUDGET", 10 ** 9)
    jax.clear_caches()
    f = jax.jit(jax.vmap(lambda a, b, c, d: G.collide(t1, "mesh", (a, b), s1, (c, d), mesh)))
    return jax.tree.map(np.asarray, f(R1, p1, R2, p2)), bounded


def _deepest(c):
    """The pair's depth: the last (separating-axis or GJK/EPA) candidate's residual plus the deepest vertex."""
    return c.dist[:, -1] + np.minimum(c.dist[:, :-1].min(1), 0)


@pytest.mark.parametrize("t1", [pytest.param("box", marks=pytest.mark.long), "mesh"])
def test_the_bounded_path_keeps_the_exact_depth(t1, monkeypatch):
    """Hulls of 24 and 40 vertices take the bounded path (FACE_POINTS + 1 candidates, as the exact
    path: the support polygon's or the vertices' points and the deepest pair); its depth is the exact
    path's (1e-12) where they overlap, and its distance where they are apart
    (GJK: the exact distance, never below the separating axes' lower bound);
    no candidate is deeper than the pair (beyond the face preference, G.FACE_PREFERENCE)."""
    mesh_b = G.make_mesh(HULL_B)
    s1 = BOX if t1 == "box" else G.make_mesh(HULL_A)
    nv1, ne1 = (8, 12) if t1 == "box" else (len(s1.verts), len(s1.edges))
    assert not G.exact_polytopes(nv1, ne1, len(mesh_b.verts), len(mesh_b.edges))
    k = G.num_contacts(t1, "mesh", s1, mesh_b)
    exact, bounded = _exact_and_bounded(t1, s1, mesh_b, monkeypatch)
    assert k == G.FACE_POINTS + 1 and bounded.dist.shape == (N, k)
    de, db = _deepest(exact), _deepest(bounded)
    over = de < 0
    assert 10 < over.sum() < N - 5
    np.testing.assert_allclose(db[over], de[over], atol=1e-12)
    assert (db[~over] >= de[~over] - 1e-12).all()
    rel, ab = G.FACE_PREFERENCE       # a face's support polygon is preferred within this of the deepest
    size = max(np.linalg.norm(h - h.mean(0), axis=1).max() for h in (np.asarray(HULL_A), np.asarray(HULL_B)))
    assert (bounded.dist[:, :-1].min(1) >= db * (1 + rel) - ab * size - 1e-12)[over].all()


@pytest.mark.parametrize("t1", [pytest.param("box", marks=pytest.mark.long), "mesh"])
def test_the_bounded_path_s_deepest_equals_mujoco(t1):
    """Against MuJoCo's nativeccd (tight tolerances, multiccd off) on hulls
    of 24 and 40 vertices: overlap where MuJoCo reports a contact, and the deepest
    candidate's depth is MuJoCo's dist (1e-9)."""
    va = " ".join(map(str, HULL_A.ravel()))
    vb = " ".join(map(str, HULL_B.ravel()))
    g1 = f'type="box" size="{" ".join(map(str, BOX))}"' if t1 == "box" else 'type="mesh" mesh="ma"'
    xml = ('<mujoco><option ccd_iterations="500" ccd_tolerance="1e-12"><flag gravity="disable" multiccd="disable"/>'
           f'</option><asset><mesh name="ma" vertex="{va}"/><mesh name="mb" vertex="{vb}"/></asset><worldbody>'
           f'<body><freejoint/><geom name="a" {g1}/></body>'
           '<body><freejoint/><geom name="b" type="mesh" mesh="mb"/></body></worldbody></mujoco>')
    m = mj.MjModel.from_xml_string(xml)
    (R1, p1, R2, p2), cons = random_contacts(m, N, 6, 0.2)

    def hull(g):       # MuJoCo's vertices (re-centred on the geom frame)
        k = m.geom_dataid[g]
        return G.make_mesh(m.mesh_vert[m.mesh_vertadr[k]:m.mesh_vertadr[k] + m.mesh_vertnum[k]].astype(float))
    mb = hull(1)
    s1 = BOX if t1 == "box" else hull(0)
    c = jax.tree.map(np.asarray, jax.jit(jax.vmap(lambda a, b, cc, d: G.collide(t1, "mesh", (a, b), s1, (cc, d), mb)))(
        R1, p1, R2, p2))
    d = _deepest(c)
    hits = 0
    for i, cl in enumerate(cons):
        assert bool(cl) == (d[i] < 0), i
        if cl:
            assert abs(d[i] - cl[0][1]) < 1e-9, (i, d[i], cl[0][1])
            hits += 1
    assert hits > 8


@pytest.mark.long
def test_a_prism_rests_level_on_the_bounded_path():
    """A 32-sided prism (64 vertices: the bounded path) standing on a box
    table, level and 1 mm deep: its bottom face has more vertices than a face
    contact takes (FACE_VERTS), so the hulls' vertices are the candidates
    (none of the table's corners); FACE_POINTS (4) rim vertices spread over
    the face carry it, all 1 mm deep, and the normal forces' resultant passes
    through the centre of the face (its moment about the centre is zero:
    the prism stays level); the contact energy's gradient is finite."""
    ang = 2 * np.pi * np.arange(32) / 32
    rim = np.c_[0.1 * np.cos(ang), 0.1 * np.sin(ang)]
    pts = np.concatenate([np.c_[rim, np.full(32, -0.05)], np.c_[rim, np.full(32, 0.05)]])
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "box", (0.3, 0.3, 0.05), pos=(0, 0, -0.05), name="table")
    b.add_body("prism", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(1e-2,) * 3)
    b.add_geom("prism", "mesh", vertices=pts, name="prism", quat=(np.cos(0.1), 0, 0, np.sin(0.1)))
    b.set_contact_options(law="penalty")       # the penalty law has the contact energy checked below
    model = b.build()
    c = _contact(model)
    assert c.mesh_nvert == (64,) and not G.exact_polytopes(8, 12, 64, c.mesh_nedge[0])
    f = contact_forces(model, jnp.array([0.02, -0.01, 0.05 - 1e-3, 1, 0, 0, 0]), jnp.zeros(6))
    dist, fn, pos = (np.asarray(f[k]) for k in ("dist", "normal_force", "pos"))
    on = dist[:-1] < 0
    assert on.sum() == G.FACE_POINTS
    np.testing.assert_allclose(dist[:-1][on], -1e-3, atol=1e-12)
    assert abs(dist[-1]) < 1e-12                               # the GJK/EPA residual: nothing left
    r = pos[:-1][on][:, :2] - [0.02, -0.01]
    np.testing.assert_allclose(np.linalg.norm(r, axis=1), 0.1, atol=1e-6)   # rim vertices
    moment = np.sum(fn[:-1][on, None] * r, 0)
    assert np.abs(moment).max() < 1e-9 * fn.sum()
    g = np.asarray(jax.grad(lambda q: c.energy(model, q))(jnp.array([0.02, -0.01, 0.05 - 1e-3, 1, 0, 0, 0])))
    assert np.isfinite(g).all() and g[2] < 0                  # the energy falls as the prism rises


# --- the memory of a forward-dynamics call ----------------------------------------------------------

def _arm(cap=None, n_links=12, n_pts=2000):
    """A chain of n_links hinged links, each a mesh of n_pts points on an ellipsoid, above a floor and
    beside a box and a sphere: plane-mesh, sphere-mesh, box-mesh and mesh-mesh pairs."""
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "plane", name="floor", pos=(0, 0, -0.3))
    b.add_geom("world", "box", (0.1, 0.1, 0.1), pos=(0.3, 0, 0.5), name="block")
    b.add_geom("world", "sphere", (0.08,), pos=(-0.3, 0, 0.8), name="ball")
    parent = "world"
    for i in range(n_links):
        b.add_body(f"link{i}", parent, "revolute", axis=(0, 1, 0) if i % 2 == 0 else (1, 0, 0),
                   pos=(0, 0, 0.2) if i else (0, 0, 0), mass=0.5, com=(0, 0, 0.1), inertia=(1e-3, 1e-3, 5e-4))
        b.add_geom(f"link{i}", "mesh", vertices=_cloud(n_pts, (0.05, 0.06, 0.12), i) + [0, 0, 0.1], name=f"g{i}",
                   maxhullvert=cap)
        parent = f"link{i}"
    return b.build()


def _budget(model):
    """The memory budget of one forward-dynamics call, from the model: per candidate pair 128 kB
    (GJK/EPA's fixed-size state and the candidates' Jacobians) and 1 kB per hull vertex (128
    floats: the support points, the candidates against the other's planes, F < 2 V): 8 bytes x
    sum over pairs of (16384 + 128 (V1 + V2)), V a primitive's 0."""
    c = _contact(model)
    nv = np.asarray(c.mesh_nvert)
    gm = np.asarray(c.geom_mesh)
    total = 0
    for _, _, rows in c.groups:
        for g in np.ravel(rows):
            total += 128 * (nv[gm[g]] if gm[g] >= 0 else 0)
        total += 16384 * len(rows)
    return 8 * total


def _temp_bytes(model):
    f = jax.jit(lambda q, v: jaxmbd.forward_dynamics(model, q, v, jnp.zeros(model.nv)))
    q, v = jnp.full(model.nq, 0.3), jnp.zeros(model.nv)
    out = f(q, v)
    assert bool(jnp.all(jnp.isfinite(out)))
    return f.lower(q, v).compile().memory_analysis().temp_size_in_bytes


@pytest.mark.long
def test_an_arm_of_mesh_links_runs_within_a_memory_budget(monkeypatch):
    """Twelve links of 2,000-vertex meshes (91 pairs: 55 mesh-mesh, 12 each
    against a plane, a box, a sphere): one jitted forward-dynamics call's
    temporary memory (XLA's buffer assignment) is within the model's budget
    (:func:`_budget`) with the default 64-vertex collision hulls and with the
    full 2,000-vertex hulls (maxhullvert=-1): the bounded narrow phase grows
    with the hulls' vertices, not their product.  The exact path
    (separating axes, every vertex against every plane) on the same 64-vertex
    hulls exceeds the budget (E1 E2 (V1 + V2) = 4.4 million per pair)."""
    capped = _arm()
    c = _contact(capped)
    assert c.mesh_nvert == (64,) * 12 and c.n_pairs == 91
    t_capped, b_capped = _temp_bytes(capped), _budget(capped)
    full = _arm(cap=-1)
    assert _contact(full).mesh_nvert == (2000,) * 12
    t_full, b_full = _temp_bytes(full), _budget(full)
    monkeypatch.setattr(G, "EXACT_BUDGET", 10 ** 12)
    jax.clear_caches()
    t_exact = _temp_bytes(capped)
    print(f"temp bytes: 64-vertex hulls {t_capped:,} (budget {b_capped:,}); 2000-vertex hulls {t_full:,} "
          f"(budget {b_full:,}); exact path on 64-vertex hulls {t_exact:,}")
    assert t_capped < b_capped and t_full < b_full
    assert t_exact > b_capped
