"""The soft law's rows of contact (:mod:`jaxmbd.forces.soft`): which candidate contacts enter
the solve (the ``rows`` deepest, :func:`soft_candidates`), their normal and frictional rows
(:func:`soft_rows`, elliptic or pyramidal cones), and how many rows a model gets by default
(:func:`default_rows`, from what its pairs can touch at once)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..contact import geometry as G
from . import soft as S
from .contact_broadphase import per_pair

FRICTION_ROWS = {1: 0, 3: 2, 4: 3, 6: 5}   # condim -> the soft law's frictional rows per contact
SOFT_ROWS_FLOOR = 8       # the soft law's rows (candidate contacts in the solve, the deepest): at least this many
TREE_ROWS = 24            # a tree's share of the default rows: its contacts, up to this many; half of a larger count
SELF_ROWS = 4             # a tree's contacts between its own geoms (a limb across another), at most, by default
BETWEEN_ROWS = 8          # a tree's contacts with another tree (a box on a box), at most, by default
FACE_DEPTH = 0.01         # m: a mesh's vertices this close to a supporting plane count as touching it (default_rows)
PLANE_CONTACTS = {"sphere": 1, "capsule": 2, "ellipsoid": 1, "cylinder": 3, "box": 4}   # against a plane, at once
PAIR_CONTACTS = {("box", "box"): 8, ("capsule", "box"): 2}   # other pairs of primitives: 1 (the others' narrow phase)
MAXCONPAIR = 50           # MuJoCo's most contacts of one geom pair (mjMAXCONPAIR): a height-field pair's bound


def soft_candidates(el, kin):
    """The candidates that enter the soft solve: the ``rows`` deepest of the soft pairs' candidates
    (all of them when there are fewer), as a dict like
    :meth:`jaxmbd.forces.contact.Contact.candidates` plus ``index`` (their positions among all
    candidates), ``penetration`` and ``overflow`` (more candidates within their margin than
    ``rows``).  A candidate left out is never within its margin while there is
    no overflow, so the forces are those of all candidates."""
    c = el.narrow_phase(kin)
    pr = c["pair"]
    delta = el.margin[pr] - c["dist"]
    if el.law == "mixed":
        delta = jnp.where(el.soft[pr] > 0, delta, -G._FAR)
    nc = delta.shape[0]
    k = min(el.rows, nc)
    if k < nc:
        idx = jax.lax.top_k(jax.lax.stop_gradient(delta), k)[1]
        overflow = jnp.sum(delta > 0) > k
    else:
        idx = np.arange(nc)
        overflow = jnp.array(False)
    out = {key: jnp.asarray(val)[idx] for key, val in c.items()}
    return dict(out, index=idx, penetration=delta[idx], overflow=overflow)


def soft_rows(el, model, q, v, kin, axes):
    """(NormalRows, FrictionRows, candidates) of the soft pairs' contacts at (q, v)
    (:mod:`jaxmbd.forces.soft`): per kept candidate one normal row n·(v₂ - v₁) at the contact point,
    and ``fdim`` frictional rows (two sliding, one torsional, two rolling; a row beyond the pair's
    condim has μ = 0 and stays off).  Rows are formed from the DoFs' world axes: the point
    velocity of a body's DoF j is vⱼ + ωⱼ × x on the DoFs that move it."""
    c = el.soft_candidates(kin)
    x, n, pr = c["pos"], c["normal"], c["pair"]
    k = x.shape[0]
    sup = jnp.asarray(np.concatenate([np.zeros((1, model.nv)), np.asarray(model.topo.support, float)]),
                      axes.dtype)
    bodies = (c["body1"] + 1, c["body2"] + 1)                            # rows of sup (0: the world)

    def lin(u):                    # the spatial direction of a direction u at the contact point
        return jnp.concatenate([jnp.cross(x, u), u], -1)

    def ang(u):                    # of an angular direction u
        return jnp.concatenate([u, jnp.zeros_like(u)], -1)

    def rows(rho, reps=1):         # (J, J v, its RowGeometry) of directions ρ, reps per contact
        g = S.RowGeometry(rho, *(jnp.repeat(b, reps) for b in bodies), sup)
        op = S.RowMap(None, rho, axes, g.body1, g.body2, sup)
        return op.matrix(), op.apply(v), g
    Jn, vn, gn = rows(lin(n))
    solref, solimp, iw = el.solref[pr], el.solimp[pr], el.invweight[pr]
    N = S.NormalRows(Jn, -c["penetration"], vn, solref, solimp, iw, geo=gn)
    fd = el.fdim
    if fd == 0:
        return N, _no_friction_rows(model.nv, Jn.dtype), c
    t1 = c["tangent"]                                  # MuJoCo's contact frame (G.contact_frame)
    t2 = jnp.cross(n, t1)
    mu = el.friction[pr]
    dirs = [(lin(t1), mu[:, 0]), (lin(t2), mu[:, 0]), (ang(n), mu[:, 1]), (ang(t1), mu[:, 2]),
            (ang(t2), mu[:, 2])][:fd]
    if el.cone == "pyramidal":
        return _pyramid_rows(el, N, dirs, mu[:, 0], rows), _no_friction_rows(model.nv, Jn.dtype), c
    rhoT = jnp.stack([d[0] for d in dirs], 1).reshape(k * fd, 6)               # contact-major
    JT, vT, gT = rows(rhoT, fd)
    muT = jnp.stack([d[1] for d in dirs], 1).reshape(-1)
    d = S.impedance(jnp.abs(N.r), solimp)
    _, B = S.ref_coefficients(solref, solimp)
    Rn = jnp.maximum((1.0 - d) / d * N.invweight, S.MINVAL)
    mu0 = jnp.repeat(mu[:, :1], fd, 1).reshape(-1)
    ratio = jnp.where((muT > 0) & (mu0 > 0), mu0 / jnp.where(muT > 0, muT, 1.0), 1.0)   # rows off: any R > 0
    RT = jnp.repeat(Rn / el.impratio, fd) * ratio ** 2
    on = jnp.repeat(S.activation(-N.r, S.onset_width(solref, solimp)), fd) * (muT > 0)
    T = S.FrictionRows(JT, vT, jnp.repeat(B, fd), RT, on, muT, np.repeat(np.arange(k), fd),
                       jnp.zeros(k * fd, JT.dtype), np.repeat(np.arange(k), fd), geo=gT)
    return N, T, c


def _pyramid_rows(el, N, dirs, mu0, rows):
    """MuJoCo's pyramidal cone: each contact's normal row N and frictional directions (ρ_j, μ_j)
    become 2 fdim unilateral rows, the cone's edges J_n ± μ_j J_j (spatial directions ρ_n ± μ_j ρ_j),
    all at the contact's distance, with R = 2 μ₀² (1 + μ₀²) R_n / impratio (μ₀ the sliding friction,
    R_n the elliptic normal row's regularizer: MuJoCo's, checked against its efc_R in
    tests/test_friction_cones.py).  The normal force is the edges' sum and friction j is
    μ_j (f₊ - f₋).  A contact without friction (condim 1) keeps its plain normal row; edges of
    directions beyond a contact's condim are off.  ``rows(ρ, reps)``: the rows' (J, J v, RowGeometry)."""
    k, fd = N.J.shape[0], len(dirs)
    rho_d = jnp.stack([d[0] for d in dirs], 1)                        # (k, fd, 6)
    mud = jnp.stack([d[1] for d in dirs], 1)                          # (k, fd)
    rho_n = N.geo.rho[:, None]
    rho_e = jnp.stack([rho_n + mud[..., None] * rho_d, rho_n - mud[..., None] * rho_d], 2)
    plain = (mu0 <= 0)[:, None] & (jnp.arange(fd) == 0)[None, :]      # a frictionless contact's normal row
    on = jnp.stack([(mud > 0) | plain, mud > 0], 2).astype(rho_e.dtype).reshape(-1)
    rscale = jnp.where(mu0 > 0, 2.0 * mu0 ** 2 * (1.0 + mu0 ** 2) / el.impratio, 1.0)
    rep = lambda x: jnp.repeat(x, 2 * fd, axis=0)  # noqa: E731
    Je, ve, ge = rows(rho_e.reshape(k * fd * 2, 6), 2 * fd)
    return S.NormalRows(Je, rep(N.r), ve, rep(N.solref), rep(N.solimp), rep(N.invweight), rep(rscale), on, ge)


def _no_friction_rows(nv, dtype):
    return S.FrictionRows(jnp.zeros((0, nv), dtype), *(jnp.zeros(0, dtype),) * 5, np.zeros(0, np.int64),
                          jnp.zeros(0, dtype), np.zeros(0, np.int64))


def pair_contacts(el, t1, t2, g1, g2):
    """The most of the pair's candidate contacts that are within their margin at once, as the
    default rows count them (:func:`default_rows`): against a plane a sphere or an ellipsoid 1, a
    capsule 2 (lying down), a cylinder 3 (on a cap: three rim points, as MuJoCo's), a box 4 (a face
    down, MuJoCo's count), a mesh the hull vertices within :data:`FACE_DEPTH` of the plane in its worst
    pose, over the hull's face normals (:func:`face_vertices`; MuJoCo keeps 4 of them, here every
    vertex is a candidate); box-box 8 (the face-face polygon's vertices, MuJoCo's 8), capsule-box 2
    (lying on a face, MuJoCo's 2); box-mesh and mesh-mesh the two faces' vertices (a box face 4); a
    height field the cells under the geom, at most :data:`MAXCONPAIR` (MuJoCo's limit per pair); the
    other pairs 1 (one closest-point candidate).  Never more than the pair's candidates
    (:func:`jaxmbd.contact.geometry.num_contacts`).  tests/test_contact_rows.py checks the table
    against MuJoCo's ``ncon`` of each pair in its worst pose and against the narrow phase."""
    cap = per_pair(el, t1, t2, (g1, g2))
    if t1 == "hfield":
        return min(cap, MAXCONPAIR)
    faces = [4 if t == "box" else face_vertices(el, g) if t == "mesh" else 0 for t, g in ((t1, g1), (t2, g2))]
    if t1 == "plane":
        n = faces[1] if t2 == "mesh" else PLANE_CONTACTS[t2]
    elif "mesh" in (t1, t2) and t1 in ("box", "mesh"):
        n = faces[0] + faces[1]
    else:
        n = PAIR_CONTACTS.get((t1, t2), 1)
    return min(n, cap)


def face_vertices(el, g, depth=FACE_DEPTH):
    """The most hull vertices of mesh geom g within ``depth`` of a plane the hull rests on, over its
    face normals (a face of n vertices resting on a floor: n candidates within the margin)."""
    mesh = el.mesh_of(np.array([g]))
    verts = np.asarray(mesh.verts)[0][np.asarray(mesh.valid)[0]]
    planes = np.asarray(mesh.planes)[0]
    h = verts @ planes[:, :3].T                                  # (V, F): heights along each face normal
    return int(np.max(np.sum(h >= h.max(0, keepdims=True) - depth, 0)))


def default_rows(el, topo):
    """How many candidate contacts (the deepest) enter the soft law's solve unless the model says,
    from the model's pairs.  Per tree T (a body whose parent is the world, with its descendants; a
    free body, a robot): W the contacts its geoms can make at once with the world's geoms (a floor),
    summed over its pairs with them (:func:`pair_contacts`: a sphere 1, a capsule 2, a box 4 on a
    plane), plus S those between its own geoms (at most :data:`SELF_ROWS`); the tree's share is
    W + S while that is at most :data:`TREE_ROWS` (a free box: 4; a small humanoid that fell over
    touches with most of its geoms), else the larger of TREE_ROWS and half of W + S (a tree lying
    on a floor touches it with the geoms of one side; docs/contact.md has the falls it is
    calibrated on).  Between trees: each tree's largest
    count with another tree (at most :data:`BETWEEN_ROWS`: a box resting on a box), summed and
    halved (a contact is two trees'). The rows: the shares and that term summed, at least
    :data:`SOFT_ROWS_FLOOR` and at most the soft candidates.  Only pairs that follow the soft law
    count; pairs through a world-welded body count as the world's.

    The built-in quadruped scene (25 geoms that touch the floor: W = 67, S = 4; its falls from
    random poses and controls make at most about 20 contacts) gets 36, a free box 8, the humanoid of
    tests/test_robots_on_floors.py (W = 23) 24.  The solve's cost
    grows with its rows (docs/contact.md, "What the rows cost"); more candidates within their margin at
    once than the rows stop a run with ``CONTACT_OVERFLOW`` (set them with
    ``load_mjcf(..., contact_rows=...)`` or ``set_contact_options(rows=...)``)."""
    parent = topo.parent

    def tree(h):               # the root body of host h's tree; -1 the world
        while h >= 0 and parent[h] >= 0:
            h = parent[h]
        return h
    hosts = el.geom_body
    soft = np.asarray(el.soft) > 0
    world, own, between = {}, {}, {}
    i = 0
    for t1, t2, rows in el.groups:
        for a, b in rows:
            if soft[i]:
                ta, tb = tree(hosts[a]), tree(hosts[b])
                n = pair_contacts(el, t1, t2, a, b)
                if ta < 0 or tb < 0:
                    if ta != tb:
                        world[max(ta, tb)] = world.get(max(ta, tb), 0) + n
                elif ta == tb:
                    own[ta] = own.get(ta, 0) + n
                else:
                    key = (min(ta, tb), max(ta, tb))
                    between[key] = between.get(key, 0) + n
            i += 1
    total = 0
    for t in set(world) | set(own):
        c = world.get(t, 0) + min(own.get(t, 0), SELF_ROWS)
        total += c if c <= TREE_ROWS else max(TREE_ROWS, -(-c // 2))
    most = {}
    for (ta, tb), n in between.items():
        for t in (ta, tb):
            most[t] = max(most.get(t, 0), min(n, BETWEEN_ROWS))
    total += -(-sum(most.values()) // 2)
    return max(SOFT_ROWS_FLOOR, min(total, el.n_candidates))
