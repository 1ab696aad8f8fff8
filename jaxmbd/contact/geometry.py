"""The contact narrow phase: candidate contacts between two geoms.

Conventions (MuJoCo's, so that results compare with ``mujoco.MjData.contact``):

* A geom is a type, a pose and a size.  The pose is jaxmbd's pair ``(R, p)``:
  ``R`` (3, 3) has the geom's axes as columns (world coordinates) and ``p``
  (3,) is its centre, so ``x_world = R @ x_geom + p`` (MuJoCo's
  ``geom_xmat.reshape(3, 3)`` and ``geom_xpos``).  The size is MuJoCo's
  ``geom_size`` (3,): sphere ``(r, ., .)``; capsule and cylinder ``(r, h, .)``
  with half-length ``h`` along the local z axis; box ``(hx, hy, hz)``
  half-sizes; ellipsoid ``(a, b, c)`` semi-axes; plane: unused (a plane is
  infinite, its normal is the local +z axis, it passes through ``p``).  A
  mesh's "size" is a :class:`Mesh` (:func:`make_mesh`: its hull's vertices
  and face planes in the geom frame) or a bare vertex array ``(n, 3)``
  (MuJoCo's ``mesh_vert`` of the geom's mesh); the geom is the convex hull of
  the vertices, as MuJoCo collides it.  Lengths in the model's unit (metres).
* Each pair type gives a FIXED number k of candidate contacts
  (:func:`num_contacts`), whether the geoms touch or not.  A candidate has a
  signed distance ``dist`` (negative: penetration depth), a position ``pos``
  midway between the two surfaces, and a frame (3, 3) whose rows are the
  normal, pointing from geom1 to geom2, and two tangents with
  ``t2 = n x t1`` (right-handed; MuJoCo's choice of tangents, see
  :func:`contact_frame`).  Candidates with ``dist > 0`` are kept: a smooth
  force law gives zero force there.  MuJoCo reports only contacts with
  ``dist < margin`` (and at most 4 for plane-box); compare only those.
* Geom types are MuJoCo's names or ``mjtGeom`` integers, static Python
  values.  :func:`collide` accepts either order and flips the normal when it
  swaps the geoms; MuJoCo itself orders a contact's geoms by type (plane <
  sphere < capsule < ellipsoid < cylinder < box < mesh).

Every function is pure JAX on one pair (batch with :func:`collide_batch` or
``jax.vmap``), branch-free (``jnp.where`` on both sides, with the unused side
made safe so that gradients stay finite at degenerate poses: coincident
centres, parallel or zero-length capsule axes, an upright cylinder on a
plane), and keeps the dtype of its inputs (float32 or float64).

Exactness: plane-sphere, plane-capsule, plane-box, plane-ellipsoid,
sphere-sphere, sphere-capsule, capsule-capsule and sphere-box are the exact
closest (or deepest) points, equal to MuJoCo's to round-off (away from the
near-parallel capsules where MuJoCo switches to two contacts); so are
plane-cylinder (MuJoCo's four among our six) and plane-mesh (one candidate
per vertex).  capsule-box equals MuJoCo's deepest contact while the
capsule's axis is outside the box; box-box's deepest equals MuJoCo's for
shallow penetration; deeper, ours is the minimum translation and MuJoCo's is
not (differences measured in ``tests/test_contact_geometry.py``).

The other convex pairs (sphere, capsule, ellipsoid, cylinder, box, mesh
against ellipsoid, cylinder and mesh, and cylinder-box) are in
:mod:`.convex`: GJK/EPA on support functions with static iteration counts,
one candidate each (the deepest or closest point pair; a face resting on a
face gets one point of the patch, not several), except box-mesh and
mesh-mesh given :class:`Mesh` es, which get FACE_POINTS + 1 (see
:func:`_polytopes`): the deepest pair (small hulls, separating-axis work E1
E2 (V1 + V2) within :data:`EXACT_BUDGET`: the exact separating-axis
candidate; larger hulls: GJK/EPA's, work and memory O(V1 + V2 + F1 + F2 +
E1 + E2)) and four point candidates: in face contact the support polygon
of the two contact faces (reference/incident face clipping,
:func:`_face_clip`), spread over it, so that a mesh resting on a face stays
level and carries its load at the polygon's corners as MuJoCo's multiccd
does; in edge-edge contact each polytope's vertices against the other.  A
curved geom (sphere, capsule, ellipsoid, cylinder)
against a mesh keeps one candidate (GJK/EPA on the vertices' support
function, O(V)).  In float64 they equal
MuJoCo's nativeccd (run at tight tolerances, multiccd off) to 1e-12 in dist
for the polytope pairs and 1e-9 for curved surfaces, normal 3e-5, pos 7e-6
(``tests/test_contact_convex.py``); exactly touching a curved surface
against an edge or rim, dist is a lower bound within 2e-6.  In float32 the
polytope pairs are exact to round-off, the curved ones approximate (a lower
bound within 3e-3).  The derivative of dist is Danskin's (exact where the
closest features are unique); normal and pos are held constant for
derivatives.  Height fields against the convex geoms are in :mod:`.hfield` (one candidate per prism of a
static window of grid cells).  Not here: SDF geoms, and several contact
points for face-face contact of the curved convex pairs (MuJoCo's multiccd).
"""

from __future__ import annotations

import functools

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..mujoco_defaults import GEOM_TYPES
from .convex import convex_pair
from .hfield import HField, hfield_pair
from .hfield import num_contacts as _hfield_count

TYPES = GEOM_TYPES   # mjtGeom order


class Contacts(NamedTuple):
    """Candidate contacts of one geom pair (leading batch axes under vmap).

    dist: (k,) signed distance (negative: penetration).  pos: (k, 3) world
    position midway between the surfaces.  frame: (k, 3, 3), rows normal
    (geom1 -> geom2), tangent1, tangent2, as MuJoCo's ``contact.frame``.
    """
    dist: jax.Array
    pos: jax.Array
    frame: jax.Array


# --------------------------------------------------------------------------------------------------
# small helpers

def _eps2(x):
    return jnp.finfo(x.dtype).eps ** 2


def _normalize(v, fallback):
    """(v / |v|, |v|), or (fallback, 0) where |v| is below round-off; the
    gradient is finite on both sides."""
    n2 = jnp.sum(v * v, axis=-1, keepdims=True)
    ok = n2 > _eps2(v)
    norm = jnp.sqrt(jnp.where(ok, n2, 1.0))
    return jnp.where(ok, v / norm, fallback), jnp.where(ok, norm, 0.0)[..., 0]


def contact_frame(n, tangent=None):
    """(..., 3, 3) frame with rows (n, t1, t2), right-handed (t2 = n x t1), from a unit normal
    n (..., 3) as MuJoCo builds ``contact.frame`` (``mju_makeFrame``): t1 is the hint ``tangent``
    (a narrow phase's choice: MuJoCo's plane-capsule contact gives the capsule's axis) made
    orthogonal to n, or where there is none (or it is shorter than ½), the world y axis made
    orthogonal to n while |n_y| < ½ and the world z axis otherwise.  An isotropic friction law
    does not see the choice; MuJoCo's pyramidal cone, whose edges lie along ±t1 and ±t2, does.
    A hint within 1e-6 of the normal's direction falls back to the default (MuJoCo normalizes
    what round-off leaves of it)."""
    n = jnp.asarray(n)
    ey = jnp.zeros_like(n).at[..., 1].set(1.0)
    ez = jnp.zeros_like(n).at[..., 2].set(1.0)
    default = jnp.where((jnp.abs(n[..., 1]) < 0.5)[..., None], ey, ez)

    def orthogonal(t):
        return t - n * jnp.sum(n * t, -1, keepdims=True)
    t = orthogonal(default)
    if tangent is not None:
        hint = jnp.broadcast_to(jnp.asarray(tangent, n.dtype), n.shape)
        th = orthogonal(hint)
        ok = (jnp.sum(hint * hint, -1) >= 0.25) & (jnp.sum(th * th, -1) > 1e-12)
        t = jnp.where(ok[..., None], th, t)
    t1 = t / jnp.linalg.norm(t, axis=-1, keepdims=True)
    return jnp.stack([n, t1, jnp.cross(n, t1)], axis=-2)


def _basis(n):
    """(3, 3) rows (n, t1, t2), right-handed, from a unit normal n (3,): Duff et al., "Building an
    orthonormal basis, revisited" (JCGT 2017), smooth in n except across n_z = 0."""
    x, y, z = n[..., 0], n[..., 1], n[..., 2]
    s = jnp.where(z >= 0, 1.0, -1.0).astype(n.dtype)
    a = -1.0 / (s + z)
    b = x * y * a
    t1 = jnp.stack([1.0 + s * x * x * a, s * b, -s * x], axis=-1)
    t2 = jnp.stack([b, s + y * y * a, -y], axis=-1)
    return jnp.stack([n, t1, t2], axis=-2)


def _spheres(c1, r1, c2, r2):
    """Sphere-sphere: (dist, pos, normal).  Coincident centres: normal +x
    (MuJoCo's choice)."""
    ex = jnp.zeros_like(c1).at[..., 0].set(1.0)
    n, d = _normalize(c2 - c1, ex)
    dist = d - r1 - r2
    pos = c1 + n * (r1 + 0.5 * dist)[..., None]
    return dist, pos, n


def _on_plane(n, p, pts):
    """Points pts (k, 3) of geom2 against the plane (normal n, point p):
    (dist, pos, normal) with pos midway between the point and the plane."""
    dist = (pts - p[None]) @ n
    return dist, pts - 0.5 * dist[:, None] * n[None], jnp.broadcast_to(n, pts.shape)


def _segment_point(a, b, c):
    """Parameter t in [0, 1] of the point of segment a-b closest to c."""
    d = b - a
    dd = d @ d
    ok = dd > _eps2(d)
    return jnp.where(ok, jnp.clip(((c - a) @ d) / jnp.where(ok, dd, 1.0), 0.0, 1.0), 0.5)


def _segments(p1, q1, p2, q2):
    """Parameters (s, t) of the closest points of segments p1-q1 and p2-q2
    (Ericson, Real-Time Collision Detection, 5.1.9, written branch-free).
    Parallel segments (non-unique closest points): the point of segment 1
    closest to the middle of the part of segment 2 that overlaps it, so the
    pair stays in the overlap; zero-length segments are points."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, b = d1 @ d1, d2 @ d2, d1 @ d2
    c, f = d1 @ r, d2 @ r
    tiny = _eps2(d1)
    a_ok, e_ok = a > tiny, e > tiny
    a_s, e_s = jnp.where(a_ok, a, 1.0), jnp.where(e_ok, e, 1.0)
    den = a * e - b * b
    par = den <= 1e-12 * a * e + tiny  # relative: sin^2 of the angle below 1e-12
    den_s = jnp.where(par, 1.0, den)
    # segment 2 projected on segment 1's line, clipped: its middle for parallel segments
    u0, u1 = jnp.clip(-c / a_s, 0.0, 1.0), jnp.clip((b - c) / a_s, 0.0, 1.0)
    s = jnp.where(par, 0.5 * (u0 + u1), jnp.clip((b * f - c * e) / den_s, 0.0, 1.0))
    s = jnp.where(a_ok, s, 0.0)
    t = (b * s + f) / e_s
    t_c = jnp.clip(t, 0.0, 1.0)
    s = jnp.where(t_c != t, jnp.clip((t_c * b - c) / a_s, 0.0, 1.0), s)
    s = jnp.where(a_ok, s, 0.0)
    t = jnp.where(e_ok, t_c, 0.0)
    return s, t


def _ends(R, p, h):
    """The two ends of a capsule's (or cylinder's) axis segment: +z end first."""
    ax = R[:, 2] * h
    return p + ax, p - ax


def _box_corners(R, p, h):
    signs = jnp.array([[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)], R.dtype)
    return p[None] + (signs * h[None]) @ R.T


# --------------------------------------------------------------------------------------------------
# pair functions: (R1, p1, size1, R2, p2, size2) -> (dist (k,), pos (k, 3), normal (k, 3)),
# geom1 of the lower MuJoCo type

def plane_sphere(R1, p1, s1, R2, p2, s2):
    """1 candidate: the sphere's deepest point; exact."""
    return _on_plane(R1[:, 2], p1, (p2 - s2[0] * R1[:, 2])[None])


def plane_capsule(R1, p1, s1, R2, p2, s2):
    """2 candidates: the deepest points of the two end caps (+z end first, as
    MuJoCo); exact."""
    e1, e2 = _ends(R2, p2, s2[1])
    return _on_plane(R1[:, 2], p1, jnp.stack([e1, e2]) - s2[0] * R1[None, :, 2])


def plane_box(R1, p1, s1, R2, p2, s2):
    """8 candidates: the corners; exact (MuJoCo reports at most 4 of them, the
    first in its own order with dist < margin)."""
    return _on_plane(R1[:, 2], p1, _box_corners(R2, p2, s2))


def plane_ellipsoid(R1, p1, s1, R2, p2, s2):
    """1 candidate: the ellipsoid's support point along -n,
    p - R A² m / |A m| with m = Rᵀ n, A = diag(semi-axes); exact."""
    m = R2.T @ R1[:, 2]
    am = s2 * m
    return _on_plane(R1[:, 2], p1, (p2 - R2 @ (s2 * am) / jnp.sqrt(am @ am))[None])


def plane_cylinder(R1, p1, s1, R2, p2, s2):
    """6 candidates: on each cap's rim (+z cap first), the point deepest
    toward the plane and the two at +-120 degrees from it.  MuJoCo's four
    (the deeper cap's three and the other cap's deepest) are among them.  An
    upright cylinder (rim all equally deep) takes the geom's x axis as the
    first rim direction."""
    n, a = R1[:, 2], R2[:, 2]
    v, _ = _normalize((n @ a) * a - n, R2[:, 0])
    w = jnp.cross(a, v)
    r, h = s2[0], s2[1]
    c, s = -0.5, 0.75 ** 0.5
    rim = jnp.stack([v, c * v + s * w, c * v - s * w]) * r
    e1, e2 = _ends(R2, p2, h)
    return _on_plane(n, p1, jnp.concatenate([e1[None] + rim, e2[None] + rim]))


def sphere_sphere(R1, p1, s1, R2, p2, s2):
    """1 candidate; exact."""
    d, x, n = _spheres(p1, s1[0], p2, s2[0])
    return d[None], x[None], n[None]


def sphere_capsule(R1, p1, s1, R2, p2, s2):
    """1 candidate: the sphere against the closest point of the capsule's
    axis; exact."""
    e1, e2 = _ends(R2, p2, s2[1])
    t = _segment_point(e1, e2, p1)
    d, x, n = _spheres(p1, s1[0], e1 + t * (e2 - e1), s2[0])
    return d[None], x[None], n[None]


def capsule_capsule(R1, p1, s1, R2, p2, s2):
    """1 candidate: the closest points of the two axes; exact.  (MuJoCo gives
    two contacts, the ends of the overlap, when the axes are parallel to
    about 1e-4 rad; here the one candidate sits in the middle of the
    overlap.)"""
    a1, b1 = _ends(R1, p1, s1[1])
    a2, b2 = _ends(R2, p2, s2[1])
    s, t = _segments(a1, b1, a2, b2)
    d, x, n = _spheres(a1 + s * (b1 - a1), s1[0], a2 + t * (b2 - a2), s2[0])
    return d[None], x[None], n[None]


def _point_box(x, R, p, h):
    """Signed distance of world points x (k, 3) to the box (R, p, half-sizes
    h), and the box's outward normal there (k, 3): from the closest surface
    point, or, for a point inside, the normal of the nearest face."""
    xl = (x - p[None]) @ R                      # box coordinates
    q = jnp.clip(xl, -h[None], h[None])
    inside = jnp.all(xl == q, axis=-1)
    n_out, d_out = _normalize(xl - q, jnp.zeros_like(xl).at[:, 0].set(1.0))
    depth = h[None] - jnp.abs(xl)
    e = jax.nn.one_hot(jnp.argmin(depth, axis=-1), 3, dtype=x.dtype)
    n_in = e * jnp.where(xl >= 0, 1.0, -1.0).astype(x.dtype)
    n = jnp.where(inside[:, None], n_in, n_out) @ R.T
    return jnp.where(inside, -jnp.sum(depth * e, axis=-1), d_out), n


def sphere_box(R1, p1, s1, R2, p2, s2):
    """1 candidate: the sphere against the box point closest to its centre,
    or, with the centre inside the box, against the nearest face; exact."""
    r = s1[0]
    d, n = _point_box(p1[None], R2, p2, s2)
    dist = d - r
    return dist, p1[None] - n * (r + 0.5 * dist)[:, None], -n


def _golden_min(f, iters):
    """Argmin over [0, 1] of a convex (or unimodal) scalar function by golden
    section, a fixed number of iterations (width 0.618^iters)."""
    g = (5 ** 0.5 - 1) / 2

    def step(ab, _):
        a, b = ab
        c, d = b - g * (b - a), a + g * (b - a)
        left = f(c) < f(d)
        return (jnp.where(left, a, c), jnp.where(left, d, b)), None
    (a, b), _ = jax.lax.scan(step, (jnp.zeros(()), jnp.ones(())), None, length=iters)
    return 0.5 * (a + b)


def capsule_box(R1, p1, s1, R2, p2, s2):
    """3 candidates: the capsule's two end spheres (+z end first) and the
    axis point deepest in the box.  While the axis is outside the box the
    third is exact: the box's signed distance is convex along the axis
    (golden section, 60 iterations, then 4 alternating projections between
    the axis and the box; t* held constant for derivatives, so the distance's
    gradient is exact by the envelope theorem).  Once the axis
    enters the box the third is the separating-axis answer (box face normals,
    axis x box edges: the exact penetration depth of the axis, minus the
    radius), continuous with the first at the crossing.  With the capsule flat
    on a face the three coincide in depth (MuJoCo reports the two ends)."""
    r = s1[0]
    a, b = _ends(R1, p1, s1[1])
    f = lambda t: _point_box((a + t * (b - a))[None], R2, p2, s2)[0][0]
    t = _golden_min(f, 60).astype(a.dtype)
    for _ in range(4):   # golden section finds t to sqrt(eps) only: alternate projections polish it
        x = a + t * (b - a)
        dx, nx = _point_box(x[None], R2, p2, s2)
        t = _segment_point(a, b, x - dx[0] * nx[0])
    t = jax.lax.stop_gradient(t)
    c = jnp.stack([a, b, a + t * (b - a)])
    d, n = _point_box(c, R2, p2, s2)
    dist = d - r
    pos = c - n * (r + 0.5 * dist)[:, None]
    n = -n
    # the axis inside the box: separating axes of the segment and the box
    m, e = 0.5 * (a + b), 0.5 * (b - a)
    cr_n, cr_len = _normalize(jnp.cross(e[None], R2.T), jnp.zeros_like(R2).at[:, 0].set(1.0))
    axes = jnp.concatenate([R2.T, cr_n])
    sep = axes @ (p2 - m)
    axes = axes * jnp.where(sep >= 0, 1.0, -1.0)[:, None]
    gap = jnp.abs(sep) - jnp.abs(axes @ e) - jnp.abs(axes @ R2) @ s2
    gap = jnp.where(jnp.concatenate([jnp.ones(3, bool), cr_len > 1e-6]), gap, -jnp.inf)
    k = jnp.argmax(gap)
    u = axes[k]
    tol = 1e-9 if u.dtype == jnp.float64 else 1e-5
    ue = u @ e
    sa = m + jnp.where(jnp.abs(ue) > tol, jnp.sign(ue), 0.0) * e + r * u
    sb = _box_support(R2, p2, s2, -u, tol)
    inside = d[2] < 0
    dist = dist.at[2].set(jnp.where(inside, gap[k] - r, dist[2]))
    pos = pos.at[2].set(jnp.where(inside, 0.5 * (sa + sb), pos[2]))
    n = n.at[2].set(jnp.where(inside, u, n[2]))
    return dist, pos, n


def _box_support(R, p, h, u, tol):
    """The centroid of the box's feature farthest along u (a vertex, an edge's
    midpoint or a face's centre: components within tol count as zero)."""
    c = R.T @ u
    sgn = jnp.where(jnp.abs(c) > tol, jnp.sign(c), 0.0)
    return p + R @ (h * sgn)


def _contact_faces(Rr, pr, sr, a, nr, Ri, pi, si):
    """The two faces of face-face contact: the reference face (axis a of box r, outward normal nr
    towards box i): its in-plane axes u, v, half-extents eu, ev and centre cr; the incident face
    (box i's face most anti-parallel to nr): its centre, outward normal ni and half-edge vectors
    U, V."""
    e3 = jnp.eye(3, dtype=Rr.dtype)
    ob, oc = jnp.take(e3, (a + 1) % 3, axis=0), jnp.take(e3, (a + 2) % 3, axis=0)
    u, v, eu, ev, ea = Rr @ ob, Rr @ oc, sr @ ob, sr @ oc, sr @ jnp.take(e3, a, axis=0)
    cr = pr + nr * ea
    proj = Ri.T @ nr
    ai = jnp.argmax(jnp.abs(proj))
    fa, fb, fc = (jnp.take(e3, ai, axis=0), jnp.take(e3, (ai + 1) % 3, axis=0), jnp.take(e3, (ai + 2) % 3, axis=0))
    sgn = -jnp.where(proj @ fa >= 0, 1.0, -1.0).astype(Rr.dtype)
    return u, v, eu, ev, cr, pi + sgn * (Ri @ (fa * si)), sgn * (Ri @ fa), Ri @ (fb * si), Ri @ (fc * si)


def _face_crossings(Rr, pr, sr, a, nr, Ri, pi, si, tol):
    """16 candidates of face-face contact: the crossings of the incident
    face's 4 edges (the face of box i most anti-parallel to nr) with the 4
    side planes of the reference face (axis a of box r, outward normal nr
    towards box i) that lie within the reference face's extent: the
    vertices of the overlap polygon that are neither box's corner.  dist:
    the crossing's height above the reference face plane (negative: inside);
    _FAR where there is no crossing.  A crossing reaches an edge's end
    exactly where the incident corner enters the face, so the candidates
    hand over continuously to the corner candidates."""
    u, v, eu, ev, cr, centre, _, U, V = _contact_faces(Rr, pr, sr, a, nr, Ri, pi, si)
    P0 = centre[None] + jnp.stack([U + V, -U + V, -U - V, U - V])          # the face's corners, in order
    P1 = jnp.roll(P0, -1, axis=0)
    W, e = jnp.stack([u, -u, v, -v]), jnp.stack([eu, eu, ev, ev])         # side planes w.(x - pr) = e
    O, eo = jnp.stack([v, v, u, u]), jnp.stack([ev, ev, eu, eu])         # and the face's other extent
    f0 = (P0 - pr[None]) @ W.T - e[None]                                   # (edge, plane)
    f1 = (P1 - pr[None]) @ W.T - e[None]
    # an end within tol of the plane, or a crossing on the face's boundary, is a corner's (_face_corners)
    cross = (f0 * f1 < 0) & (jnp.minimum(jnp.abs(f0), jnp.abs(f1)) > tol * e[None])
    t = jnp.where(cross, f0 / jnp.where(cross, f0 - f1, 1.0), 0.5)
    X = P0[:, None] + t[..., None] * (P1 - P0)[:, None]
    within = jnp.abs(jnp.einsum("epk,pk->ep", X - pr[None, None], O)) < eo[None] * (1 - tol)
    h = (X - cr[None, None]) @ nr
    ok = cross & within
    dist = jnp.where(ok, h, _FAR)
    pos = X - 0.5 * jnp.where(ok, h, 0.0)[..., None] * nr[None, None]
    return dist.reshape(16), pos.reshape(16, 3)


def _face_corners(Rr, pr, sr, a, nr, Ri, pi, si, tol):
    """Face-face contact at the two faces' corners, 8 candidates per box (in :func:`_box_corners`'
    order; _FAR off the contact faces): each corner of the incident face (box i's face most
    anti-parallel to nr) within the reference face's extent (axis a of box r, outward normal nr
    towards box i), at its height above the reference plane along nr; and each corner of the
    reference face within the incident face's extent, at the incident plane's height above it
    along nr.  The extents include their boundary, so corners on a face's edge count: boxes stacked
    with aligned sides touch at four points, as MuJoCo's.  A reference corner that coincides with
    an incident one (on both of the incident face's boundaries) is left to it; where an incident
    corner leaves the reference face, the reference corner on its path or the edge crossing
    (:func:`_face_crossings`) takes over at the same point and depth.  Returns (dist_i, pos_i,
    dist_r, pos_r)."""
    u, v, eu, ev, cr, centre, ni, U, V = _contact_faces(Rr, pr, sr, a, nr, Ri, pi, si)
    CI = _box_corners(Ri, pi, si)
    on_i = (CI - pi[None]) @ ni > 0                             # the incident face's corners
    hI = (CI - cr[None]) @ nr
    inside = (jnp.abs((CI - pr[None]) @ u) <= eu * (1 + tol)) & (jnp.abs((CI - pr[None]) @ v) <= ev * (1 + tol))
    dI = jnp.where(on_i & inside, hI, _FAR)
    CR = _box_corners(Rr, pr, sr)
    on_r = (CR - pr[None]) @ nr > 0                             # the reference face's corners
    t = ((centre[None] - CR) @ ni) / (ni @ nr)
    X = CR + t[:, None] * nr[None]
    w1, w2 = jnp.abs((X - centre[None]) @ U) / (U @ U), jnp.abs((X - centre[None]) @ V) / (V @ V)
    within = (w1 <= 1 + tol) & (w2 <= 1 + tol)
    coincide = (w1 >= 1 - tol) & (w2 >= 1 - tol)
    dR = jnp.where(on_r & within & ~coincide, t, _FAR)
    return dI, CI - 0.5 * jnp.where(dI < _FAR, hI, 0.0)[:, None] * nr[None], \
        dR, CR + 0.5 * jnp.where(dR < _FAR, t, 0.0)[:, None] * nr[None]


def box_box(R1, p1, s1, R2, p2, s2):
    """33 candidates: box2's 8 corners, box1's 8 corners, the edge-edge
    candidate and 16 face-face candidates.  The separating axes are the 3 + 3 face normals and the 9
    edge-edge cross products; the largest gap over them is the exact
    penetration depth of overlapping boxes (when apart, a lower bound of
    their distance).  Where an edge-edge axis has the largest gap (by more
    than round-off: resting faces tie with the edge axes parallel to them),
    candidate 16 is that axis's gap, normal and the closest points of the two
    supporting edges, and the face-face candidates are off.  Otherwise the
    face with the largest gap is the reference face, candidate 16 is off,
    the corner candidates are the two contact faces' corners inside the other
    face (:func:`_face_corners`) and the face-face candidates the overlap
    polygon's edge crossings (:func:`_face_crossings`): together the
    polygon's vertices, MuJoCo's face-face contact points.  In edge-edge
    contact the corners are at their exact signed distance to the other box.  A single argmax
    candidate for face-face contact would jump between the nearly equal face
    axes of two resting boxes and stall the step-size controller
    (bench/results/work_precision_cpu.md)."""
    d12, n12 = _point_box(_box_corners(R2, p2, s2), R1, p1, s1)   # outward normals of box1: geom1 -> geom2
    c2 = _box_corners(R2, p2, s2)
    d21, n21 = _point_box(_box_corners(R1, p1, s1), R2, p2, s2)
    c1 = _box_corners(R1, p1, s1)
    # separating axes
    cr = jnp.cross(R1.T[:, None, :], R2.T[None, :, :]).reshape(9, 3)
    cr_n, cr_len = _normalize(cr, jnp.zeros_like(cr).at[:, 0].set(1.0))
    axes = jnp.concatenate([R1.T, R2.T, cr_n])
    valid = jnp.concatenate([jnp.ones(6, bool), cr_len > 1e-6])
    delta = p2 - p1
    sep = axes @ delta
    axes = axes * jnp.where(sep >= 0, 1.0, -1.0)[:, None]
    reach = jnp.abs(axes @ R1) @ s1 + jnp.abs(axes @ R2) @ s2
    gap = jnp.where(valid, jnp.abs(sep) - reach, -jnp.inf)
    tol = 1e-9 if gap.dtype == jnp.float64 else 1e-5
    kf = jnp.argmax(gap[:6])
    k = 6 + jnp.argmax(gap[6:])
    edge = gap[k] > gap[kf] + tol * (1.0 + jnp.abs(gap[kf]))
    # edge-edge: closest points of the two supporting edges (directions i, j of the cross product)
    n = axes[k]
    sa, sb = _box_support(R1, p1, s1, n, tol), _box_support(R2, p2, s2, -n, tol)
    i, j = (k - 6) // 3, (k - 6) % 3
    ea, eb = R1[:, i] * s1[i], R2[:, j] * s2[j]
    s, t = _segments(sa - ea, sa + ea, sb - eb, sb + eb)
    ee = 0.5 * ((sa - ea + 2 * s * ea) + (sb - eb + 2 * t * eb))
    # face-face: box1's face (kf < 3) or box2's as the reference
    one = kf < 3
    nf = axes[kf]                                                  # from box1 towards box2
    Rr, pr, sr = jnp.where(one, R1, R2), jnp.where(one, p1, p2), jnp.where(one, s1, s2)
    Ri, pi, si = jnp.where(one, R2, R1), jnp.where(one, p2, p1), jnp.where(one, s2, s1)
    nr = jnp.where(one, nf, -nf)
    d_ff, pos_ff = _face_crossings(Rr, pr, sr, kf % 3, nr, Ri, pi, si, tol)
    d_ff = jnp.where(edge, _FAR, d_ff)
    dI, xI, dR, xR = _face_corners(Rr, pr, sr, kf % 3, nr, Ri, pi, si, tol)
    f2, x2 = jnp.where(one, dI, dR), jnp.where(one, xI, xR)                 # box2's corners in face contact
    f1, x1 = jnp.where(one, dR, dI), jnp.where(one, xR, xI)
    pos2 = jnp.where(edge, c2 - 0.5 * d12[:, None] * n12, x2)
    pos1 = jnp.where(edge, c1 - 0.5 * d21[:, None] * n21, x1)
    nf8 = jnp.broadcast_to(nf, (8, 3))
    dist = jnp.concatenate([jnp.where(edge, d12, f2), jnp.where(edge, d21, f1), jnp.where(edge, gap[k], _FAR)[None],
                            d_ff])
    pos = jnp.concatenate([pos2, pos1, ee[None], pos_ff])
    return dist, pos, jnp.concatenate([jnp.where(edge, n12, nf8), jnp.where(edge, -n21, nf8), n[None],
                                       jnp.broadcast_to(nf, (16, 3))])


# --------------------------------------------------------------------------------------------------
# convex meshes

class Mesh(NamedTuple):
    """A convex mesh as the narrow phase takes it (:func:`make_mesh`), in its
    geom frame: ``verts`` (V, 3) the vertices of its convex hull; ``planes``
    (F, 4) the hull's face planes, a unit outward normal n and an offset d
    (n.x - d is a point's signed distance to the plane); ``valid`` (V,) marks
    real vertices; ``edges`` (E, 2, 3) the hull's edges (not the diagonals of
    its flat faces).  Arrays padded to a common size repeat their first
    vertex, plane and edge: the same hull.  A bare vertex array is also accepted where a mesh is
    expected; it collides by its support function alone (one candidate)."""
    verts: jax.Array
    planes: jax.Array
    valid: jax.Array
    edges: jax.Array


_FAR = 1e9   # the dist of a padding vertex's candidate: never in contact


def make_mesh(vertices, n_verts=None, n_planes=None, what="mesh", maxhullvert=-1):
    """The :class:`Mesh` of the convex hull of ``vertices`` (n, 3) (NumPy, at
    build time), padded to ``n_verts`` vertices and ``n_planes`` planes when
    given.  Coplanar hull triangles share one plane.  Raises ValueError naming
    ``what`` when the points have no hull with volume.

    ``maxhullvert`` (MuJoCo's mesh attribute; -1: no limit) simplifies the
    hull to at most that many vertices (at least 4), the hull of a subset of
    the vertices (inside the full hull): from Qhull's initial simplex
    (Barber, Dobkin and Huhdanpaa, "The Quickhull algorithm for convex
    hulls", ACM TOMS 1996), the vertex farthest outside the current hull's
    face planes is added until there are maxhullvert (greedy farthest-point
    insertion).  MuJoCo's compiler stops Qhull after maxhullvert - 4 added
    points (option ``TA``), the farthest point of one face at a time: the
    same vertex count, a looser hull (2,000 points on an ellipsoid, 64
    vertices: the farthest point 4.3% of the largest semi-axis outside ours,
    10.5% outside Qhull's).
    """
    import numpy as np
    V = np.asarray(vertices, np.float64)
    if V.ndim != 2 or V.shape[1] != 3 or len(V) < 4 or not np.all(np.isfinite(V)):
        raise ValueError(f"{what}: a mesh needs an (n >= 4, 3) array of finite vertices, got shape {V.shape}")
    maxhullvert = -1 if maxhullvert is None else int(maxhullvert)
    if maxhullvert != -1 and maxhullvert < 4:
        raise ValueError(f"{what}: maxhullvert must be -1 (no limit) or at least 4, got {maxhullvert}")
    from scipy.spatial import ConvexHull, QhullError
    try:
        h = ConvexHull(V)
        if maxhullvert != -1 and len(h.vertices) > maxhullvert:
            V = V[h.vertices]
            keep = ConvexHull(V, qhull_options="Qt TA0").vertices          # the initial simplex
            tol = 1e-12 * np.abs(V).max()
            while True:
                h = ConvexHull(V[keep])
                keep = keep[h.vertices]                                     # (a new vertex may hide one)
                out = (V @ h.equations[:, :3].T + h.equations[:, 3]).max(1)
                k = int(np.argmax(out))
                if len(keep) >= maxhullvert or out[k] <= tol:
                    break
                keep = np.append(keep, k)
            V = V[keep]
            h = ConvexHull(V)
    except (QhullError, ValueError) as e:
        raise ValueError(f"{what}: the vertices have no convex hull with volume "
                         f"({str(e).strip().splitlines()[0]})") from None
    verts = V[h.vertices]
    eq = h.equations                                         # n.x + e <= 0 inside, |n| = 1
    scale = np.abs(verts).max()
    key = np.round(np.concatenate([eq[:, :3], eq[:, 3:] / scale], 1), 9)
    _, first = np.unique(key, axis=0, return_index=True)
    planes = np.concatenate([eq[np.sort(first), :3], -eq[np.sort(first), 3:]], 1)
    # edges: a triangle side whose two triangles lie in different planes
    face_of = np.empty(len(eq), int)
    face_of[:] = np.unique(key, axis=0, return_inverse=True)[1].ravel()
    sides = {}
    for t, tri in enumerate(h.simplices):
        for a, b in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0])):
            sides.setdefault((min(a, b), max(a, b)), set()).add(face_of[t])
    edges = np.array([[V[a], V[b]] for (a, b), f in sorted(sides.items()) if len(f) > 1]).reshape(-1, 2, 3)
    return pad_mesh(Mesh(verts, planes, np.ones(len(verts), bool), edges), n_verts, n_planes, None, what)


def pad_mesh(mesh, n_verts=None, n_planes=None, n_edges=None, what="mesh"):
    """A :class:`Mesh` (NumPy) padded to ``n_verts`` vertices, ``n_planes``
    planes and ``n_edges`` edges by repeating its first ones (the same hull)."""
    import numpy as np
    nv, nf, ne = int(np.sum(mesh.valid)), len(mesh.planes), len(mesh.edges)
    verts, planes, edges = np.asarray(mesh.verts)[:nv], np.asarray(mesh.planes), np.asarray(mesh.edges)
    n_verts, n_planes, n_edges = n_verts or nv, n_planes or nf, n_edges or ne
    if n_verts < nv or n_planes < nf or n_edges < ne:
        raise ValueError(f"{what}: its hull has {nv} vertices, {nf} planes and {ne} edges, more than the "
                         f"padding ({n_verts}, {n_planes}, {n_edges})")
    return Mesh(np.concatenate([verts, np.repeat(verts[:1], n_verts - nv, 0)]),
                np.concatenate([planes, np.repeat(planes[:1], n_planes - nf, 0)]),
                np.arange(n_verts) < nv, np.concatenate([edges, np.repeat(edges[:1], n_edges - ne, 0)]))


def _mesh_verts(m):
    return m.verts if isinstance(m, Mesh) else m


def _planes_depth(planes, x):
    """Signed depth of points x (k, 3) (in the mesh frame) against a hull's
    planes: max over faces of n.x - d (exact inside the hull, a positive lower
    bound of the distance outside) and that face's normal (k, 3)."""
    s = x @ planes[:, :3].T - planes[None, :, 3]
    return jnp.max(s, 1), planes[jnp.argmax(s, 1), :3]


def plane_mesh(R1, p1, s1, R2, p2, mesh):
    """One candidate per hull vertex (a bare vertex array: per vertex; the
    others lie above the deepest); the deepest is exact."""
    dist, pos, n = _on_plane(R1[:, 2], p1, p2[None] + _mesh_verts(mesh) @ R2.T)
    if isinstance(mesh, Mesh):
        dist = jnp.where(mesh.valid, dist, _FAR)
    return dist, pos, n


EXACT_BUDGET = 32_768   # box-mesh, mesh-mesh: the exact path while its separating-axis work E1 E2 (V1 + V2) <= this
SUPPORT_DIRS = 8        # the bounded path: support points along the normal tilted towards this many directions
SUPPORT_TILT = 0.2      # ... by atan(0.2) (11 degrees)
FACE_VERTS = 12         # face-face contact: at most this many vertices and edges of each contact face
FACE_POINTS = 4         # box-mesh, mesh-mesh: this many point candidates spread over the contact patch (MuJoCo: 4)
FACE_PREFERENCE = (0.05, 1e-4)   # face contact while a face's gap is within this (relative, x size) of the deepest
_BOX_EDGES = [(a, b) for a in range(8) for b in range(a + 1, 8) if bin(a ^ b).count("1") == 1]   # corner pairs


def _tols(x):
    """(round-off tolerance of the face-face clipping, of face membership), relative to the hulls' size."""
    return (1e-9, 1e-7) if x.dtype == jnp.float64 else (1e-5, 1e-4)


def _extent(VA, VB):
    """The two polytopes' size, the scale of the round-off tolerances: the largest coordinate of a
    vertex from its polytope's centroid."""
    return jnp.max(jnp.abs(jnp.concatenate([VA - jnp.mean(VA, 0)[None], VB - jnp.mean(VB, 0)[None]])))


def _sat(VA, NA, DA, EA, VB, NB, DB, EB):
    """The separating-axis candidate of two convex polytopes (world
    coordinates): vertices V (n, 3), face normals N (f, 3) (either sign),
    edge directions D (d, 3) and edge segments E (e, 2, 3).  Over the face
    normals of both and the cross products of their edge directions, the
    largest gap: the exact penetration depth of overlapping polytopes (when
    apart a positive lower bound of their distance), its axis (geom A to B)
    the normal (a face resting on a face ties with the cross products of its
    edges: the face axis is taken).  The position: for an edge-edge
    axis the middle of the closest points of the two supporting edges; for a
    face axis the other polytope's supporting vertex moved half the gap
    toward the face.  Returns (dist (1,), pos (1, 3), normal (1, 3))."""
    cr = jnp.cross(DA[:, None, :], DB[None, :, :]).reshape(-1, 3)
    scale = (jnp.linalg.norm(DA, axis=1)[:, None] * jnp.linalg.norm(DB, axis=1)[None, :]).reshape(-1)
    crn, crl = _normalize(cr, jnp.zeros_like(cr).at[:, 0].set(1.0))
    nfa, nfb = len(NA), len(NB)
    axes = jnp.concatenate([NA, NB, crn])
    valid = jnp.concatenate([jnp.ones(nfa + nfb, bool), crl > 1e-6 * scale])
    pa, pb = axes @ VA.T, axes @ VB.T
    g1 = jnp.min(pb, 1) - jnp.max(pa, 1)            # B beyond A along +u
    g2 = jnp.min(pa, 1) - jnp.max(pb, 1)            # along -u
    gap = jnp.where(valid, jnp.maximum(g1, g2), -jnp.inf)
    size = _extent(VA, VB)
    slack = jnp.where(jnp.arange(len(axes)) >= nfa + nfb, _tols(VA)[0] * size, 0.0)
    k = jnp.argmax(gap - jax.lax.stop_gradient(slack))
    n = axes[k] * jnp.where(g1[k] >= g2[k], 1.0, -1.0)
    dist = gap[k]
    # supporting edges: both ends at the support level along n (A) and -n (B)
    ea = EA[jnp.argmax(jnp.min(EA @ n, 1))]
    eb = EB[jnp.argmin(jnp.max(EB @ n, 1))]
    s_, t_ = _segments(ea[0], ea[1], eb[0], eb[1])
    ee = 0.5 * (ea[0] + s_ * (ea[1] - ea[0]) + eb[0] + t_ * (eb[1] - eb[0]))
    vb = VB[jnp.argmin(VB @ n)]
    va = VA[jnp.argmax(VA @ n)]
    pos = jnp.where(k < nfa, vb - 0.5 * dist * n, jnp.where(k < nfa + nfb, va + 0.5 * dist * n, ee))
    return dist[None], pos[None], n[None]


def _polytope_pair(d_v, pos_v, n_v, sat):
    """The candidates of two polytopes: the point candidates (the support
    polygon of face contact, or each polytope's vertices against the other)
    and the deepest pair (:func:`_sat` or GJK/EPA's) for edge-edge contact.
    That last one's penetration is reduced by the deepest point candidate's
    (a continuous correction) so that a contact a point already carries is
    not counted twice: its dist is the residual, 0 when a point candidate is
    the deepest point (a face or edge resting on a face)."""
    dg, pg, ng = sat
    dg = dg - jnp.minimum(jnp.min(d_v), 0.0)
    return (jnp.concatenate([d_v, dg]), jnp.concatenate([pos_v, pg]), jnp.concatenate([n_v, ng]))


class _Hull(NamedTuple):
    """A polytope in the world: vertices V (n, 3) and which are real (n,), face planes N (f, 3) (unit
    outward normals) and D (f,) (N.x <= D inside), edges E (e, 2, 3) and which are real (e,)."""
    V: jax.Array
    valid: jax.Array
    N: jax.Array
    D: jax.Array
    E: jax.Array
    evalid: jax.Array


def _mesh_hull(R, p, mesh):
    """A :class:`Mesh` in the world as a :class:`_Hull` (padding edges, repeats of the first, off)."""
    N = mesh.planes[:, :3] @ R.T
    first = jnp.all(mesh.edges == mesh.edges[:1], axis=(1, 2)) & (jnp.arange(len(mesh.edges)) > 0)
    return _Hull(p[None] + mesh.verts @ R.T, mesh.valid, N, mesh.planes[:, 3] + N @ p,
                 p[None, None] + mesh.edges @ R.T, ~first)


def _box_hull(R, p, h):
    """A box (half-sizes h) as a :class:`_Hull`: 8 corners, 6 faces, 12 edges."""
    c = _box_corners(R, p, h)
    N = jnp.concatenate([R.T, -R.T])
    return _Hull(c, jnp.ones(8, bool), N, N @ p + jnp.concatenate([h, h]), c[jnp.asarray(_BOX_EDGES)],
                 jnp.ones(12, bool))


def _pad_hull(h, nv, nf, ne):
    """h padded to nv vertices, nf planes and ne edges (repeats of the first, marked off)."""
    def pad(x, n):
        return jnp.concatenate([x, jnp.repeat(x[:1], n - len(x), axis=0)])
    return _Hull(pad(h.V, nv), pad(h.valid, nv) & (jnp.arange(nv) < len(h.V)), pad(h.N, nf), pad(h.D, nf),
                 pad(h.E, ne), pad(h.evalid, ne) & (jnp.arange(ne) < len(h.E)))


def _face(h, f, tol_on):
    """The face f of the hull h: its normal and offset, its vertices and edges (indices, padded to
    at most FACE_VERTS each, and which are real) and its edges' side planes: unit outward normals
    S (k, 3) perpendicular to the face and offsets O (k,) (S.x <= O inside the prism over the
    face), and whether all its members fit in FACE_VERTS.  Members are the vertices and edges
    within tol_on of the face's plane."""
    n, d = h.N[f], h.D[f]
    onv = h.valid & (jnp.abs(h.V @ n - d) <= tol_on)
    one = h.evalid & jnp.all(jnp.abs(h.E @ n - d) <= tol_on, axis=1)
    kv, ke = min(FACE_VERTS, len(h.V)), min(FACE_VERTS, len(h.E))
    iv = jnp.nonzero(onv, size=kv, fill_value=0)[0]
    ie = jnp.nonzero(one, size=ke, fill_value=0)[0]
    mv, me = jnp.arange(kv) < onv.sum(), jnp.arange(ke) < one.sum()
    centre = jnp.sum(jnp.where(onv[:, None], h.V, 0.0), 0) / jnp.maximum(onv.sum(), 1)
    E = h.E[ie]
    S, _ = _normalize(jnp.cross(E[:, 1] - E[:, 0], n[None]), jnp.zeros_like(E[:, 0]))
    S = S * jnp.where(jnp.sum(S * (E[:, 0] - centre[None]), -1) >= 0, 1.0, -1.0)[:, None]
    fits = (onv.sum() <= kv) & (one.sum() <= ke)
    return n, d, h.V[iv], mv, E, me, S, jnp.sum(S * E[:, 0], -1), fits


def _outside(X, S, O, m):
    """How far the points X (..., 3) are outside the prism of side planes S, O (those marked m):
    max over the planes of S.x - O (negative inside)."""
    h = X @ S.T - O.reshape((1,) * (X.ndim - 1) + O.shape)
    return jnp.max(jnp.where(m.reshape((1,) * (X.ndim - 1) + m.shape), h, -_FAR), axis=-1)


def _face_clip(ref, fr, inc, fi, tol, tol_on):
    """Face-face contact: the vertices of the overlap of the reference face (the face fr of the
    hull ref) and the incident face (fi of inc) seen along the reference face's normal nr, with
    their signed heights (the dist: negative below the reference plane) as in the classic
    reference/incident face clipping (Gregorius, "The Separating Axis Test between Convex
    Polyhedra", GDC 2013; MuJoCo's box-box and multiccd face contacts): the incident face's
    vertices inside the prism over the reference face (at their height above the reference
    plane), the reference face's vertices inside the incident face (at the incident plane's height
    above them, along nr) unless they coincide with an incident vertex, and the crossings of the
    incident face's edges with the reference face's side planes strictly inside its other sides
    (at their height).  A crossing reaches an edge's end exactly where the incident vertex enters
    the prism, so the candidates hand over continuously.  Returns dist (2 k + k^2,) (_FAR where
    there is no point), pos (middle of the two surfaces) and whether both faces fit in FACE_VERTS
    (a face with more vertices, a cylinder's cap of many sides, is clipped wrongly: not used)."""
    nr, dr, VR, mvr, _, mer, SR, OR, fits_r = _face(ref, fr, tol_on)
    ni, di, VI, mvi, EI, mei, SI, OI, fits_i = _face(inc, fi, tol_on)
    # (a) incident vertices in the reference prism
    ha = VI @ nr - dr
    ok_a = mvi & (_outside(VI, SR, OR, mer) <= tol)
    # (b) reference vertices in the incident face, projected along nr onto its plane
    den = ni @ nr
    den = jnp.where(jnp.abs(den) > 1e-3, den, -1.0)
    t = (di - VR @ ni) / den
    P = VR + t[:, None] * nr[None]
    near = jnp.min(jnp.where(mvi[None], jnp.sum((P[:, None] - VI[None]) ** 2, -1), _FAR), 1) <= tol ** 2
    ok_b = mvr & (_outside(P, SI, OI, mei) <= tol) & ~near
    # (c) incident edges crossing the reference face's side planes
    f0 = EI[:, 0] @ SR.T - OR[None]                 # (incident edge, side plane)
    f1 = EI[:, 1] @ SR.T - OR[None]
    cross = mei[:, None] & mer[None] & (f0 * f1 < 0) & (jnp.minimum(jnp.abs(f0), jnp.abs(f1)) > tol)
    s = jnp.where(cross, f0 / jnp.where(cross, f0 - f1, 1.0), 0.5)
    X = EI[:, None, 0] + s[..., None] * (EI[:, None, 1] - EI[:, None, 0])
    others = mer[None, :] & ~jnp.eye(len(SR), dtype=bool)                  # (side plane, the other side planes)
    ok_c = cross & (jnp.max(jnp.where(others[None], X @ SR.T - OR[None, None], -_FAR), -1) < -tol)
    hc = X @ nr - dr
    dist = jnp.concatenate([jnp.where(ok_a, ha, _FAR), jnp.where(ok_b, t, _FAR), jnp.where(ok_c, hc, _FAR).ravel()])
    pos = jnp.concatenate([VI - 0.5 * ha[:, None] * nr[None], VR + 0.5 * t[:, None] * nr[None],
                           (X - 0.5 * hc[..., None] * nr[None, None]).reshape(-1, 3)])
    return dist, pos, fits_r & fits_i


def _face_contact(h1, h2, n, tol, tol_on):
    """The support polygon's candidates (:func:`_face_clip`) of two hulls in contact near the
    normal n (hull 1 to hull 2): of the face of hull 1 most along n and the face of hull 2 most
    against it, the one with the larger gap (the separation of the hulls along its normal; hull
    1's on a tie) is the reference face, the other hull's face most opposed to it the incident
    face.  Returns (dist, pos, normal (3,) from hull 1 to hull 2: the reference face's, gap along
    it, whether both faces fit in FACE_VERTS)."""
    n = jax.lax.stop_gradient(n)
    f1, f2 = jnp.argmax(h1.N @ n), jnp.argmax(-(h2.N @ n))
    g1 = jnp.min(jnp.where(h2.valid, h2.V @ h1.N[f1], _FAR)) - h1.D[f1]
    g2 = jnp.min(jnp.where(h1.valid, h1.V @ h2.N[f2], _FAR)) - h2.D[f2]
    one = jax.lax.stop_gradient(g1 >= g2 - tol)
    nv, nf, ne = max(len(h1.V), len(h2.V)), max(len(h1.N), len(h2.N)), max(len(h1.E), len(h2.E))
    H1, H2 = _pad_hull(h1, nv, nf, ne), _pad_hull(h2, nv, nf, ne)
    ref = jax.tree.map(lambda x, y: jnp.where(one, x, y), H1, H2)
    inc = jax.tree.map(lambda x, y: jnp.where(one, y, x), H1, H2)
    fr = jnp.where(one, f1, f2)
    fi = jnp.argmin(inc.N @ jax.lax.stop_gradient(ref.N[fr]))
    dist, pos, fits = _face_clip(ref, fr, inc, fi, tol, tol_on)
    return dist, pos, jnp.where(one, h1.N[f1], -h2.N[f2]), jnp.maximum(g1, g2), fits


def _spread(dist, pos, m, size):
    """Indices of m of the candidates (dist, pos) that span their patch, and which of them are
    real: the deepest first, then, as long as there are penetrating ones, each time the one
    farthest from those taken (farthest-point sampling: a polygon's extreme corners), then the
    shallowest of the rest.  Candidates at _FAR are never taken.  Static shapes, O(m k)."""
    dist, pos = jax.lax.stop_gradient((dist, pos))
    real = dist < 0.5 * _FAR
    first = jnp.argmin(dist)
    gap = jnp.sum((pos - pos[first][None]) ** 2, -1)
    taken = jnp.zeros(len(dist), bool).at[first].set(True)

    def pick(carry, _):
        gap, taken = carry
        score = jnp.where(dist <= 0, 100.0 * size ** 2 + gap, -dist)
        score = jnp.where(real & ~taken, score, -jnp.inf)
        j = jnp.argmax(score)
        ok = score[j] > -jnp.inf
        gap = jnp.minimum(gap, jnp.sum((pos - pos[j][None]) ** 2, -1))
        return (gap, taken.at[j].set(True)), (j, ok)
    _, (idx, ok) = jax.lax.scan(pick, (gap, taken), None, length=m - 1)
    return jnp.concatenate([first[None], idx]), jnp.concatenate([real[first][None], ok])


def _polytopes(h1, h2, deep, d_v, pos_v, n_v):
    """The candidates of two polytopes (:class:`_Hull` s) given their deepest (or closest) pair
    ``deep`` (dist (1,), pos (1, 3), normal (1, 3)): FACE_POINTS point candidates and the deepest
    pair (:func:`_polytope_pair`).  Face contact, where the gap along the best-aligned face's
    normal (:func:`_face_contact`) is within FACE_PREFERENCE of the deepest pair's (a face resting
    on a face, or on an edge or a vertex, and nearly so): the support polygon of the two contact
    faces, along the reference face's normal, where both faces have at most FACE_VERTS vertices
    and edges; elsewhere (edge-edge contact, larger faces) the point candidates
    d_v, pos_v, n_v (each polytope's vertices against the other).  Of these FACE_POINTS are kept,
    spread over the patch (:func:`_spread`), as MuJoCo keeps at most four of a polygon's."""
    tol_rel, on_rel = _tols(h1.V)
    size = _extent(h1.V, h2.V)
    size = jax.lax.stop_gradient(size)
    tol, tol_on = tol_rel * size, on_rel * size
    d_f, p_f, n_f, g_f, fits = _face_contact(h1, h2, deep[2][0], tol, tol_on)
    dg = jax.lax.stop_gradient(deep[0][0])
    face = fits & (jax.lax.stop_gradient(g_f) >= dg - FACE_PREFERENCE[0] * jnp.abs(dg) - FACE_PREFERENCE[1] * size - tol)
    d = jnp.concatenate([jnp.where(face, d_f, _FAR), jnp.where(face, _FAR, d_v)])
    pos = jnp.concatenate([p_f, pos_v])
    nrm = jnp.concatenate([jnp.broadcast_to(n_f[None], p_f.shape), n_v])
    idx, ok = _spread(d, pos, min(FACE_POINTS, len(d)), size)
    return _polytope_pair(jnp.where(ok, d[idx], _FAR), pos[idx], nrm[idx], deep)


def exact_polytopes(n_verts1, n_edges1, n_verts2, n_edges2):
    """Whether a box-mesh or mesh-mesh pair of hulls with these (padded)
    vertex and edge counts takes the exact path (every vertex against the
    other hull, separating axes: E1 E2 (V1 + V2) work and memory, at most
    :data:`EXACT_BUDGET`) rather than the bounded one (O(V1 + V2):
    :func:`box_mesh`).  A box has 8 vertices and 12 edges.  Static."""
    return n_edges1 * n_edges2 * (n_verts1 + n_verts2) <= EXACT_BUDGET


def _support_points(V, d):
    """Indices (SUPPORT_DIRS + 1,) into the points V (n, 3) of their support
    point along the unit direction d (first) and along d tilted by
    atan(SUPPORT_TILT) towards SUPPORT_DIRS tangent directions evenly spaced
    around it, and whether each is the first of its index (False for a
    repeat).  The tilted supports are the extreme points of the face (or of
    the patch near the support point) that faces d, spread around it: of a
    face perpendicular to d, a corner whose outward angle (the angle between
    its two edges' outward normals) exceeds 360 / SUPPORT_DIRS degrees is
    always among them (every corner of a rectangle or a regular polygon of
    up to 8 sides); of a regular 8k-gon, every k-th corner.
    O(n) work and memory; d is held constant (the choice is piecewise
    constant)."""
    d = jax.lax.stop_gradient(d)
    fr = _basis(d)
    ang = 2 * jnp.pi * jnp.arange(SUPPORT_DIRS) / SUPPORT_DIRS
    tilted = d[None] + SUPPORT_TILT * (jnp.cos(ang)[:, None] * fr[1][None] + jnp.sin(ang)[:, None] * fr[2][None])
    dirs = jnp.concatenate([d[None], tilted.astype(d.dtype)])
    idx = jnp.argmax(V @ dirs.T, axis=0)
    k = len(dirs)
    earlier = jnp.asarray([[j < i for j in range(k)] for i in range(k)])
    first = ~jnp.any((idx[:, None] == idx[None, :]) & earlier, axis=1)
    return idx, first


def box_mesh(R1, p1, s1, R2, p2, mesh):
    """Box against a convex mesh.  With a :class:`Mesh`, FACE_POINTS + 1
    candidates (:func:`_polytopes`): the deepest (or closest) pair, and
    where it is face contact the support polygon of the two contact faces
    (:func:`_face_clip`, the box a polytope of 8 vertices, 6 faces and 12
    edges), else (edge-edge contact) the hull's vertices against the box
    (exact signed distance) and the box's corners against the hull's planes
    (exact inside).  While :func:`exact_polytopes` holds the deepest pair is
    the separating-axis candidate (:func:`_sat`: exact penetration, work O(E
    (V + 8)) for E hull edges) and every hull vertex is a point candidate;
    larger hulls take the bounded path, work and memory O(V + F + E): the
    deepest pair by GJK/EPA (:mod:`.convex`), face contact where its normal
    is a face's (within FACE_PREFERENCE), and of the hull's vertices only the
    SUPPORT_DIRS + 1 of :func:`_support_points` along that normal.  A bare
    vertex array: 1 (GJK/EPA)."""
    if not isinstance(mesh, Mesh):
        return _BOX_MESH_1(R1, p1, s1, R2, p2, mesh)
    h1, h2 = _box_hull(R1, p1, s1), _mesh_hull(R2, p2, mesh)
    c1 = h1.V
    d1, nl = _planes_depth(mesh.planes, (c1 - p2[None]) @ R2)
    n21 = nl @ R2.T
    if exact_polytopes(8, 12, len(mesh.verts), len(mesh.edges)):
        deep = _sat(c1, R1.T, R1.T, h1.E, h2.V, h2.N, h2.E[:, 1] - h2.E[:, 0], h2.E)
        vw, keep = h2.V, mesh.valid
    else:
        deep = _BOX_MESH_1(R1, p1, s1, R2, p2, mesh.verts)
        idx, keep = _support_points(mesh.verts, -(R2.T @ deep[2][0]))
        vw = p2[None] + mesh.verts[idx] @ R2.T
    d2, n12 = _point_box(vw, R1, p1, s1)
    d_v = jnp.concatenate([jnp.where(keep, d2, _FAR), d1])
    pos_v = jnp.concatenate([vw - 0.5 * d2[:, None] * n12, c1 - 0.5 * d1[:, None] * n21])
    return _polytopes(h1, h2, deep, d_v, pos_v, jnp.concatenate([n12, -n21]))


def mesh_mesh(R1, p1, m1, R2, p2, m2):
    """Two convex meshes.  With :class:`Mesh` es, FACE_POINTS + 1 candidates
    (:func:`_polytopes`): the deepest (or closest) pair, and where it is face
    contact the support polygon of the two contact faces (:func:`_face_clip`:
    a mesh resting on a face is carried at the polygon's corners, as MuJoCo's
    multiccd carries it), else (edge-edge contact) each hull's vertices
    against the other's planes (exact inside).  While :func:`exact_polytopes`
    holds the deepest pair is the separating-axis candidate (:func:`_sat`,
    work O(E1 E2 (V1 + V2))) and every vertex is a point candidate; larger
    hulls take the bounded path, work and memory O(V1 + V2 + F1 + F2 + E1 +
    E2): GJK/EPA's deepest pair, face contact where its normal is a face's
    (within FACE_PREFERENCE), and of each hull's vertices the SUPPORT_DIRS + 1 of
    :func:`_support_points` along that normal.  Bare vertex arrays: 1
    (GJK/EPA)."""
    if not (isinstance(m1, Mesh) and isinstance(m2, Mesh)):
        return _MESH_MESH_1(R1, p1, _mesh_verts(m1), R2, p2, _mesh_verts(m2))
    h1, h2 = _mesh_hull(R1, p1, m1), _mesh_hull(R2, p2, m2)
    if exact_polytopes(len(m1.verts), len(m1.edges), len(m2.verts), len(m2.edges)):
        deep = _sat(h1.V, h1.N, h1.E[:, 1] - h1.E[:, 0], h1.E, h2.V, h2.N, h2.E[:, 1] - h2.E[:, 0], h2.E)
        v1, v2, keep1, keep2 = h1.V, h2.V, m1.valid, m2.valid
    else:
        deep = _MESH_MESH_1(R1, p1, m1.verts, R2, p2, m2.verts)
        n = deep[2][0]
        i1, keep1 = _support_points(m1.verts, R1.T @ n)
        i2, keep2 = _support_points(m2.verts, -(R2.T @ n))
        v1, v2 = p1[None] + m1.verts[i1] @ R1.T, p2[None] + m2.verts[i2] @ R2.T
    d2, nl = _planes_depth(m1.planes, (v2 - p1[None]) @ R1)          # mesh 2's vertices in mesh 1
    n12 = nl @ R1.T
    d1, nl = _planes_depth(m2.planes, (v1 - p2[None]) @ R2)
    n21 = nl @ R2.T
    d_v = jnp.concatenate([jnp.where(keep2, d2, _FAR), jnp.where(keep1, d1, _FAR)])
    pos_v = jnp.concatenate([v2 - 0.5 * d2[:, None] * n12, v1 - 0.5 * d1[:, None] * n21])
    return _polytopes(h1, h2, deep, d_v, pos_v, jnp.concatenate([n12, -n21]))


def _mesh_single(fn):
    """A GJK/EPA pair function of a primitive and a mesh that takes a Mesh too (by its vertices)."""
    def pair(R1, p1, s1, R2, p2, s2):
        return fn(R1, p1, _mesh_verts(s1), R2, p2, _mesh_verts(s2))
    pair.__name__, pair.__doc__ = fn.__name__, fn.__doc__
    return pair


_BOX_MESH_1 = convex_pair("box", "mesh")
_MESH_MESH_1 = convex_pair("mesh", "mesh")


# --------------------------------------------------------------------------------------------------
# dispatch

_PAIRS = {
    ("plane", "sphere"): (plane_sphere, 1),
    ("plane", "capsule"): (plane_capsule, 2),
    ("plane", "ellipsoid"): (plane_ellipsoid, 1),
    ("plane", "cylinder"): (plane_cylinder, 6),
    ("plane", "box"): (plane_box, 8),
    ("sphere", "sphere"): (sphere_sphere, 1),
    ("sphere", "capsule"): (sphere_capsule, 1),
    ("capsule", "capsule"): (capsule_capsule, 1),
    ("sphere", "box"): (sphere_box, 1),
    ("capsule", "box"): (capsule_box, 3),
    ("box", "box"): (box_box, 33),
    ("plane", "mesh"): (plane_mesh, None),
}
_CONVEX = [("sphere", "ellipsoid"), ("sphere", "cylinder"), ("sphere", "mesh"),
           ("capsule", "ellipsoid"), ("capsule", "cylinder"), ("capsule", "mesh"),
           ("ellipsoid", "ellipsoid"), ("ellipsoid", "cylinder"), ("ellipsoid", "box"), ("ellipsoid", "mesh"),
           ("cylinder", "cylinder"), ("cylinder", "box"), ("cylinder", "mesh"),
           ("box", "mesh"), ("mesh", "mesh")]
_PAIRS.update({k: (convex_pair(*k) if "mesh" not in k else _mesh_single(convex_pair(*k)), 1) for k in _CONVEX})
_PAIRS.update({("box", "mesh"): (box_mesh, 1), ("mesh", "mesh"): (mesh_mesh, 1)})
_PAIRS.update({("hfield", k): (hfield_pair(k), "hfield")
               for k in ("sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh")})


def type_name(t):
    """MuJoCo geom type name of a name or an ``mjtGeom`` integer."""
    if isinstance(t, str):
        if t not in TYPES:
            raise ValueError(f"unknown geom type {t!r}; known: {TYPES}")
        return t
    t = int(t)
    if not 0 <= t < len(TYPES):
        raise ValueError(f"unknown geom type {t}; known: 0..{len(TYPES) - 1} ({TYPES})")
    return TYPES[t]


def _ordered(type1, type2):
    """(canonical pair key, swapped?) for two type names."""
    t1, t2 = type_name(type1), type_name(type2)
    swap = TYPES.index(t1) > TYPES.index(t2)
    key = (t2, t1) if swap else (t1, t2)
    if key not in _PAIRS:
        raise NotImplementedError(f"no narrow phase for {key[0]}-{key[1]} "
                                  f"(supported: {sorted(f'{a}-{b}' for a, b in _PAIRS)})")
    return key, swap


def supported_pairs():
    """The supported (type1, type2) pairs in MuJoCo's order, with their counts (None: one per mesh
    vertex; "hfield": two per cell of the height field's window, see :func:`num_contacts`)."""
    return {k: n for k, (_, n) in _PAIRS.items()}


def num_contacts(type1, type2, size1=None, size2=None):
    """The fixed number of candidates of :func:`collide` for these types (a
    mesh's count may depend on its vertex count)."""
    key, swap = _ordered(type1, type2)
    n = _PAIRS[key][1]
    m1, m2 = (size2, size1) if swap else (size1, size2)
    if n == "hfield":                               # two per cell of the field's window
        if not isinstance(m1, HField):
            raise ValueError("a height-field pair's count depends on its window: pass the HField")
        return _hfield_count(m1)
    if n is None:                                   # one per mesh vertex
        if m2 is None:
            raise ValueError("a mesh pair's count is its vertex count: pass the vertex array")
        return len(_mesh_verts(m2))
    if (key == ("box", "mesh") and isinstance(m2, Mesh)) or (
            key == ("mesh", "mesh") and isinstance(m1, Mesh) and isinstance(m2, Mesh)):
        return FACE_POINTS + 1                      # the support polygon's (or vertices') deepest, the deepest pair
    return n


@functools.partial(jax.jit, static_argnums=(0, 1))
def collide(type1, type2, pose1, size1, pose2, size2):
    """Candidate contacts between geom1 and geom2 (:class:`Contacts`, k =
    :func:`num_contacts` rows; normals from geom1 to geom2).

    type1, type2: static MuJoCo type names or ``mjtGeom`` ints.  pose1,
    pose2: ``(R, p)`` world poses.  size1, size2: MuJoCo ``geom_size`` (3,);
    for a mesh its :class:`Mesh` (from :func:`make_mesh`: several candidates
    against a plane, a box or a mesh) or a bare vertex array (its support
    function: one candidate, except per vertex on a plane); for a height
    field its :class:`.hfield.HField` (two candidates per cell of its window).
    """
    key, swap = _ordered(type1, type2)
    fn = _PAIRS[key][0]
    (R1, p1), (R2, p2) = pose1, pose2
    arrs = [x.size if isinstance(x, HField) else _mesh_verts(x) for x in (R1, p1, size1, R2, p2, size2)]
    dt = jnp.result_type(*arrs, jnp.float32)

    def conv(x):
        if isinstance(x, HField):
            return HField(jnp.asarray(x.data, dt), jnp.asarray(x.size, dt), jnp.asarray(x.dims, jnp.int32),
                          jnp.asarray(x.window, dt))
        if isinstance(x, Mesh):
            return Mesh(jnp.asarray(x.verts, dt), jnp.asarray(x.planes, dt), jnp.asarray(x.valid, bool),
                        jnp.asarray(x.edges, dt))
        return jnp.asarray(x, dt)
    args = [conv(x) for x in (R1, p1, size1, R2, p2, size2)]
    if swap:
        args = args[3:] + args[:3]
    dist, pos, n = fn(*args)
    if swap:
        n = -n
    # MuJoCo's plane-capsule contacts take the capsule's axis as their first tangent
    hint = args[3][..., :, 2] if key == ("plane", "capsule") else None
    return Contacts(dist, pos, contact_frame(n, hint))


@functools.partial(jax.jit, static_argnums=(0, 1))
def collide_batch(type1, type2, pose1, size1, pose2, size2):
    """:func:`collide` for many pairs of the same two types: every array has a
    leading batch axis (B, ...); returns Contacts with shapes (B, k, ...)."""
    return jax.vmap(lambda P1, s1, P2, s2: collide(type1, type2, P1, s1, P2, s2))(pose1, size1, pose2, size2)
