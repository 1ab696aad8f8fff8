"""The broad phase of contact (:class:`jaxmbd.forces.contact.Contact`): which of a model's geom
pairs the narrow phase sees.

Pairs are grouped by their two geom types.  A group has a static capacity K (:func:`capacities`: by
default all its pairs when it has few, else about twice the pairs within reach at ``q0`` plus
headroom): the narrow phase runs on the K pairs whose bounds (:func:`pair_bounds`: bounding
spheres and boxes, or a box against a plane) are lowest, so shapes stay static under jit, vmap and
grad and a batch does bounded work, as MJX's and MuJoCo Warp's contact capacities do.  While no
group has more pairs within reach than its capacity, the forces equal the all-pairs evaluation
exactly (a pair left out cannot touch); a state where one does is reported
(:meth:`jaxmbd.forces.contact.Contact.overflow`, :func:`jaxmbd.simulate`'s status
``CONTACT_OVERFLOW``), never silently dropped."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..contact import geometry as G

CAPACITY_FLOOR = {True: 16, False: 8}   # groups against a plane (closed-form narrow phase), the others
CANDIDATE_BUDGET = 64                    # a group's floor keeps at most about this many candidate contacts


def pair_bounds(el, Rg, pg):
    """Per group, a lower bound (np_g,) of each pair's signed distance minus its margin: the larger
    of the gaps of the geoms' bounding spheres and of their bounding boxes (a separating-axis test
    over the boxes' 15 axes), or against a plane the gap of the bounding box.  The projections of
    two convex sets on any unit axis are at most their signed distance apart (its negative, the
    penetration depth, is the least overlap over all axes), so a pair whose bound is positive has
    no candidate within its margin and its force is zero (the narrow phase's candidates are never
    closer than the geoms themselves)."""
    if not el.groups:
        return []
    rows, plane, splits = _pair_tables(el.groups)
    gap = jnp.zeros(len(rows), pg.dtype)
    # every pair of a kind in one pass (a few operations, not a few per group)
    on_plane, apart = np.flatnonzero(plane), np.flatnonzero(~plane)
    if len(on_plane):
        a, b = rows[on_plane, 0], rows[on_plane, 1]
        n, R2 = Rg[a][:, :, 2], Rg[b]
        reach = jnp.sum(el.geom_half[b] * jnp.abs(jnp.sum(n[..., None] * R2, 1)), -1)
        gap = gap.at[on_plane].set(jnp.sum(n * (pg[b] - pg[a]), -1) - reach)
    if len(apart):
        a, b = rows[apart, 0], rows[apart, 1]
        d = pg[b] - pg[a]
        sphere = jnp.sqrt(jnp.sum(d * d, -1) + 1e-300) - el.geom_rbound[a] - el.geom_rbound[b]
        box = _box_gap(Rg[a], el.geom_half[a], Rg[b], el.geom_half[b], d)
        gap = gap.at[apart].set(jnp.maximum(sphere, box))
    return jnp.split(jax.lax.stop_gradient(gap - el.margin), splits)


def select(el, Rg, pg):
    """The broad phase: per group, the geom pairs the narrow phase sees ((K, 2) geom indices and
    (K,) pair indices, K = ``capacity``); whether any group has more pairs within reach (bound
    ≤ 0, :func:`pair_bounds`) than its capacity; and per group whether any pair is within reach
    (None for a group taken whole).  A group whose capacity is its pair count is taken whole
    (static indices, no bound computed); another keeps its K pairs of lowest bound.  While no
    group overflows, every pair left out has a positive bound and so zero force: the forces
    equal the all-pairs evaluation, and stay continuous as pairs enter and leave the kept set
    (a pair enters before its bound reaches zero)."""
    sel, reach, overflow, start = [], [], jnp.array(False), 0
    bounds = pair_bounds(el, Rg, pg) if el.culled else [None] * len(el.groups)
    for (_, _, rows), k, b in zip(el.groups, el.capacity, bounds):
        rows = np.asarray(rows, np.int64).reshape(-1, 2)
        n = len(rows)
        if k >= n:
            sel.append((rows, np.arange(start, start + n)))
            reach.append(None)
        else:
            idx = jax.lax.top_k(-b, k)[1]
            sel.append((jnp.asarray(rows)[idx], start + idx))
            within = b <= 0
            overflow = overflow | (jnp.sum(within) > k)
            reach.append(jnp.any(within))
        start += n
    return sel, overflow, reach


def _pair_tables(groups):
    """(rows (np, 2) geom indices of every pair in group order, (np,) whether its first geom is a plane,
    the group boundaries for ``split``), static."""
    rows = np.concatenate([np.asarray(r, np.int64).reshape(-1, 2) for _, _, r in groups])
    plane = np.concatenate([np.full(len(r), t1 == "plane") for t1, _, r in groups])
    return rows, plane, np.cumsum([len(r) for _, _, r in groups])[:-1]


def _box_gap(R1, e1, R2, e2, d):
    """(k,) the largest gap between the projections of two boxes (rotations R (k, 3, 3) with their axes
    as columns, half extents e (k, 3), centres d = p2 - p1 apart) on their 15 separating axes: a lower
    bound of the boxes' signed distance (axes of near-parallel edges, whose cross product vanishes, are
    left out).  In box 1's frame, with C = R1ᵀ R2 and t = R1ᵀ d (Gottschalk, Lin and Manocha, "OBBTree",
    SIGGRAPH 1996, Table 1): the axes u_i, w_j and u_i x w_j, the last of length
    (C[i+1, j]² + C[i+2, j]²)^½, every product written out (forming the 15 world axes first and
    projecting both boxes on them took several times as long on a CPU)."""
    C = sum(R1[:, m, :, None] * R2[:, m, None, :] for m in range(3))           # (k, 3, 3)
    t = sum(R1[:, m, :] * d[:, m, None] for m in range(3))                     # (k, 3)
    aC = jnp.abs(C)
    gap1 = jnp.abs(t) - e1 - jnp.sum(aC * e2[:, None, :], -1)                             # axes u_i
    gap2 = jnp.abs(jnp.sum(C * t[:, :, None], 1)) - jnp.sum(aC * e1[:, :, None], 1) - e2  # axes w_j
    i1, i2 = np.array([1, 2, 0]), np.array([2, 0, 1])                         # u_i x w_j, [i, j]
    dist = jnp.abs(t[:, i2, None] * C[:, i1, :] - t[:, i1, None] * C[:, i2, :])
    r1 = e1[:, i1, None] * aC[:, i2, :] + e1[:, i2, None] * aC[:, i1, :]
    r2 = e2[:, None, i1] * aC[:, :, i2] + e2[:, None, i2] * aC[:, :, i1]
    norm2 = C[:, i1, :] ** 2 + C[:, i2, :] ** 2
    ok = norm2 > 1e-12
    gap3 = jnp.where(ok, (dist - r1 - r2) / jnp.sqrt(jnp.where(ok, norm2, 1.0)), -jnp.inf).reshape(-1, 9)
    return jnp.max(jnp.concatenate([gap1, gap2, gap3], axis=1), axis=1)


def bounding_half_extents(gtype, size, verts=None):
    """The half extents of a box about a geom's origin, along the geom's axes, that holds the geom
    (zeros for a plane, whose bound is the half-space test)."""
    size = np.asarray(size, np.float64)
    r, h = size[0], size[1]
    table = {"plane": (0.0, 0.0, 0.0), "sphere": (r, r, r), "capsule": (r, r, h + r), "cylinder": (r, r, h),
             "ellipsoid": tuple(size), "box": tuple(size)}
    if gtype == "mesh":
        return np.max(np.abs(np.asarray(verts, np.float64)), axis=0)
    if gtype == "hfield":          # size: rx, ry, top, base (the height field's own four)
        return np.array([size[0], size[1], max(size[2], size[3])], np.float64)
    if gtype not in table:
        raise ValueError(f"no bounding box for geom type {gtype!r}")
    return np.asarray(table[gtype], np.float64)


def bounding_radius(gtype, size, verts=None):
    """The radius of a sphere about a geom's origin that holds the geom (0 for a plane, which the
    broad phase treats as a half-space)."""
    size = np.asarray(size, np.float64)
    if gtype == "plane":
        return 0.0
    if gtype == "sphere":
        return float(size[0])
    if gtype == "capsule":
        return float(size[0] + size[1])
    if gtype == "cylinder":
        return float(np.hypot(size[0], size[1]))
    if gtype == "ellipsoid":
        return float(np.max(size))
    if gtype == "box":
        return float(np.linalg.norm(size))
    if gtype == "mesh":
        return float(np.max(np.linalg.norm(np.asarray(verts, np.float64), axis=1)))
    if gtype == "hfield":
        return float(np.linalg.norm(bounding_half_extents(gtype, size)))
    raise ValueError(f"no bounding radius for geom type {gtype!r}")


def capacities(el, model, spec=None):
    """Per group of ``el``, the broad phase's capacity (how many of its pairs the narrow phase sees).

    spec None (the default rule): a group keeps all its pairs when it has at most 16 (against a
    plane) or 8 (any other types) and at most 64 candidate contacts (a box-box pair has 33: a floor
    of 2); a larger group keeps that floor plus 2 c pairs, c its pairs within reach (bound ≤ 0,
    :func:`pair_bounds`) at the model's ``q0``, and never more than it has.  "all": every pair (no broad phase).  An int: that many per group (at most its pair
    count).  A dict {(type1, type2): int} sets the groups it names (MuJoCo's type order, e.g.
    ("plane", "sphere")); the others follow the default rule."""
    from ..kinematics import host_kinematics
    sizes = [len(rows) for _, _, rows in el.groups]
    if isinstance(spec, str):
        if spec != "all":
            raise ValueError(f"contact capacity {spec!r}: expected None, 'all', an int or a dict")
        return tuple(sizes)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"contact capacity must be at least 1, got {spec}")
        return tuple(min(int(spec), n) for n in sizes)
    if spec is not None and not isinstance(spec, dict):
        raise ValueError(f"contact capacity {spec!r}: expected None, 'all', an int or a dict")
    spec = dict(spec or {})
    known = {(t1, t2) for t1, t2, _ in el.groups}
    for key, k in spec.items():
        if tuple(key) not in known:
            raise ValueError(f"contact capacity for {key!r}: the model has no {key[0]}-{key[1]} pairs "
                             f"(its groups: {sorted(known)})")
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"contact capacity for {key!r} must be an int >= 1, got {k!r}")
    R, p, _, _ = host_kinematics(model, model.q0)
    mc = model.mocap
    mocap = None if mc is None else (np.asarray(mc.rotations()), np.asarray(mc.pos))
    Rg, pg = (jnp.asarray(x) for x in el.place(R, p, mocap, np))
    bounds = pair_bounds(el, Rg, pg)
    out = []
    for (t1, t2, rows), b in zip(el.groups, bounds):
        n = len(rows)
        if (t1, t2) in spec:
            out.append(min(int(spec[(t1, t2)]), n))
            continue
        floor = min(CAPACITY_FLOOR[t1 == "plane"], max(2, CANDIDATE_BUDGET // per_pair(el, t1, t2, rows[0])))
        within = int(np.sum(np.asarray(b) <= 0))
        out.append(n if n <= floor else min(n, floor + 2 * within))
    return tuple(out)


def per_pair(el, t1, t2, row):
    """The narrow phase's candidate count for a pair of these types (the pair ``row`` for a mesh's)."""
    def size(g, t):
        if t == "hfield":
            return el.hfield_shape((t1, t2))
        if t != "mesh":
            return None
        mesh = el.mesh_of(np.array([g]))
        return G.Mesh(*(np.asarray(x)[0] for x in mesh))
    return G.num_contacts(t1, t2, size(row[0], t1), size(row[1], t2))
