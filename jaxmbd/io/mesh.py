"""Triangle meshes for the MJCF loader: reading STL and OBJ files, convex hulls,
and the mass properties MuJoCo gives a mesh geom.

Everything here is NumPy (load time only).  Vertices are rounded to float32
as MuJoCo stores them, so that volumes, centres of mass and inertias agree
with MuJoCo's compiled model to round-off.

Mass properties per ``<mesh inertia=...>`` (established against MuJoCo 4.0.0's
compiled ``body_mass``/``body_ipos``/``body_inertia``):

* ``exact``: the solid bounded by the triangles: signed tetrahedra, first on
  the area-weighted centroid of the surface (giving the centre of mass), then
  on that centre of mass (giving volume and inertia); inconsistently oriented
  faces or a negative volume are errors, as in MuJoCo;
* ``convex``: the same for the convex hull of the vertices;
* ``legacy`` (MuJoCo's default): as ``exact`` with every tetrahedron counted
  positive;
* ``shell``: a thin uniform shell, mass per unit area.
"""

from __future__ import annotations

import math
import os
import struct

import numpy as np

from ..mujoco_defaults import SOLID_TYPES

INERTIA_MODES = ("convex", "exact", "legacy", "shell")


class MeshError(ValueError):
    """A mesh that cannot be read or has no usable mass properties."""


# --- reading ----------------------------------------------------------------------------

def _f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32).astype(np.float64)


def _index(tri_vertices):
    """(n, 3, 3) triangle corners -> (unique vertices, (n, 3) faces)."""
    flat = tri_vertices.reshape(-1, 3)
    V, inv = np.unique(flat, axis=0, return_inverse=True)
    return V, inv.reshape(-1, 3).astype(np.int64)


def read_stl(path):
    """(vertices, faces, ascii) of an STL file, binary or ASCII.

    Corners shared between triangles are merged (exact float32 equality)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) >= 84:
        n = struct.unpack_from("<I", data, 80)[0]
        if len(data) == 84 + 50 * n:
            rec = np.frombuffer(data, dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]),
                                count=n, offset=84)
            if n == 0:
                raise MeshError(f"{path}: STL file has no triangles")
            V, F = _index(rec["v"].astype(np.float64))
            return V, F, False
    text = data.decode("ascii", errors="replace")
    if not text.lstrip().startswith("solid"):
        raise MeshError(f"{path}: not a binary STL (size does not match its triangle count) nor an ASCII one")
    corners = []
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "vertex":
            if len(parts) != 4:
                raise MeshError(f"{path}: malformed ASCII STL line {line.strip()!r}")
            try:
                corners.append([float(x) for x in parts[1:]])
            except ValueError:
                raise MeshError(f"{path}: malformed ASCII STL line {line.strip()!r}") from None
    if not corners or len(corners) % 3:
        raise MeshError(f"{path}: ASCII STL has {len(corners)} vertices, not a positive multiple of 3")
    V, F = _index(_f32(corners).reshape(-1, 3, 3))
    return V, F, True


def _triangulate(idx, verts):
    if len(idx) == 4:
        p = [np.asarray(verts[i], np.float32) for i in idx]
        d02, d13 = p[2] - p[0], p[3] - p[1]
        if float(d02 @ d02) < float(d13 @ d13):
            return [[idx[0], idx[1], idx[2]], [idx[0], idx[2], idx[3]]]
        return [[idx[0], idx[1], idx[3]], [idx[1], idx[2], idx[3]]]
    return [[idx[0], idx[j], idx[j + 1]] for j in range(1, len(idx) - 1)]


def read_obj(path):
    """(vertices, faces, number of ignored groups, number of polygons with more
    than 4 vertices) of a Wavefront OBJ file: ``v`` and ``f`` lines (negative
    indices allowed; quads split along their shorter diagonal, as MuJoCo's OBJ
    reader does, larger polygons as fans).  As MuJoCo 4.0.0 does, every vertex
    is kept but only the faces of the first group or object (``g``/``o``) that
    has faces are used."""
    verts, shapes, ngons = [], [[]], 0
    with open(path, "r", errors="replace") as f:
        for k, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                if parts[0] == "v":
                    verts.append([float(x) for x in parts[1:4]])
                    if len(verts[-1]) != 3:
                        raise ValueError
                elif parts[0] in ("g", "o"):
                    if shapes[-1]:
                        shapes.append([])
                elif parts[0] == "f":
                    idx = []
                    for p in parts[1:]:
                        i = int(p.split("/")[0])
                        idx.append(i - 1 if i > 0 else len(verts) + i)
                    if len(idx) < 3:
                        raise ValueError
                    ngons += len(idx) > 4 and len(shapes) == 1
                    shapes[-1].extend(_triangulate(idx, verts))
            except ValueError:
                raise MeshError(f"{path}:{k}: malformed OBJ line {line.strip()!r}") from None
    if not verts:
        raise MeshError(f"{path}: OBJ file has no vertices")
    F = np.asarray(shapes[0], dtype=np.int64).reshape(-1, 3)
    if F.size and (F.min() < 0 or F.max() >= len(verts)):
        raise MeshError(f"{path}: OBJ face index out of range")
    return _f32(verts), F, sum(1 for s in shapes[1:] if s), ngons


def read_mesh(path):
    """(vertices, faces, notes) of an STL or OBJ file, by its extension."""
    ext = os.path.splitext(path)[1].lower()
    V, F, notes = _read(path, ext)
    if not np.all(np.isfinite(V)):
        raise MeshError(f"mesh file {path!r} has NaN or infinite vertex coordinates")
    if len(V) < 4:
        raise MeshError(f"mesh file {path!r} has fewer than 4 vertices")
    return V, F, notes


def _read(path, ext):
    try:
        if ext == ".stl":
            V, F, ascii_ = read_stl(path)
            return V, F, (["ASCII STL, read as the binary STL of the same triangles "
                                     "(MuJoCo 4.0.0 refuses ASCII STL)"] if ascii_ else [])
        if ext == ".obj":
            V, F, extra, ngons = read_obj(path)
            notes = [f"the faces of {extra} OBJ group(s) after the first are ignored, as MuJoCo does"] if extra else []
            if ngons:
                notes.append(f"{ngons} polygon(s) of more than 4 vertices split as fans (MuJoCo may split "
                             "them otherwise; the same solid when they are planar and convex)")
            return V, F, notes
    except OSError as e:
        raise MeshError(f"cannot read mesh file {path!r} ({e.strerror or e})") from None
    raise MeshError(f"mesh file {path!r}: unsupported format {ext!r} (STL and OBJ are supported)")


# --- geometry -----------------------------------------------------------------------------

def convex_hull(V):
    """Outward-oriented triangles (indices into V) of the convex hull of V."""
    from scipy.spatial import ConvexHull, QhullError
    try:
        h = ConvexHull(V)
    except (QhullError, ValueError) as e:
        raise MeshError(f"the vertices have no convex hull with volume ({str(e).splitlines()[0]})") from None
    F = h.simplices.copy()
    a, b, c = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
    flip = np.einsum("ij,ij->i", np.cross(b - a, c - a), h.equations[:, :3]) < 0
    F[flip] = F[flip][:, [0, 2, 1]]
    return F


def hull_vertices(V):
    """The vertices of V on its convex hull."""
    from scipy.spatial import ConvexHull
    return V[np.sort(ConvexHull(V).vertices)]


def _outer_sum(a, b, c):
    s = a + b + c
    return (np.einsum("ni,nj->nij", s, s) + np.einsum("ni,nj->nij", a, a)
            + np.einsum("ni,nj->nij", b, b) + np.einsum("ni,nj->nij", c, c))


def _solid(V, F, ref, unsigned):
    """(volume, centroid, second moment about the centroid) of the tetrahedra
    (ref, triangle); unsigned: every tetrahedron counts positive."""
    a, b, c = V[F[:, 0]] - ref, V[F[:, 1]] - ref, V[F[:, 2]] - ref
    vol = np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0
    if unsigned:
        vol = np.abs(vol)
    total = vol.sum()
    return total, ref + (vol[:, None] * (a + b + c)).sum(0) / (4.0 * total), vol


def _second_moment(V, F, ref, unsigned):
    """∫ x xᵀ dV about ref over the tetrahedra (ref, triangle)."""
    a, b, c = V[F[:, 0]] - ref, V[F[:, 1]] - ref, V[F[:, 2]] - ref
    vol = np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0
    if unsigned:
        vol = np.abs(vol)
    return vol.sum(), np.einsum("n,nij->ij", vol, _outer_sum(a, b, c)) / 20.0


def _check_orientation(F):
    """Consistently oriented triangles traverse each shared edge once each way:
    a directed edge used twice is an error for inertia='exact', as in MuJoCo."""
    E = np.concatenate([F[:, [0, 1]], F[:, [1, 2]], F[:, [2, 0]]])
    _, counts = np.unique(E, axis=0, return_counts=True)
    if np.any(counts > 1):
        raise MeshError(f"{int(np.sum(counts > 1))} edges are traversed twice in the same direction: the "
                        "faces have inconsistent orientation, which inertia='exact' refuses (as MuJoCo does, "
                        "though it lets such defects on tiny faces pass; 'legacy' and 'convex' accept them)")


def _inertia(S):
    """Rotational inertia from a second-moment matrix S = ∫ x xᵀ."""
    return np.trace(S) * np.eye(3) - S


def mass_properties(V, F, mode):
    """(measure, centre, inertia per unit density about the centre) of a mesh:
    measure is the volume, or the area for ``shell``."""
    if mode not in INERTIA_MODES:
        raise MeshError(f"unknown mesh inertia {mode!r}; expected one of {', '.join(INERTIA_MODES)}")
    if mode == "convex" or not len(F):
        F = convex_hull(V)
    if mode == "shell":
        T = V[F]
        area = 0.5 * np.linalg.norm(np.cross(T[:, 1] - T[:, 0], T[:, 2] - T[:, 0]), axis=1)
        A = area.sum()
        if not A > 0:
            raise MeshError("mesh surface area is zero")
        com = (area[:, None] * T.sum(1)).sum(0) / (3.0 * A)
        a, b, c = T[:, 0] - com, T[:, 1] - com, T[:, 2] - com
        S = np.einsum("n,nij->ij", area, _outer_sum(a, b, c)) / 12.0
        return A, com, _inertia(S)
    if mode == "exact":
        _check_orientation(F)
    # the centre of mass from tetrahedra on the area-weighted centroid of the surface, then
    # volume and inertia from tetrahedra on the centre of mass (for a closed, consistently
    # oriented surface the reference point does not matter; for an open one it does)
    unsigned = mode == "legacy"
    T = V[F]
    area = 0.5 * np.linalg.norm(np.cross(T[:, 1] - T[:, 0], T[:, 2] - T[:, 0]), axis=1)
    if not area.sum() > 0:
        raise MeshError("mesh surface area is zero")
    ref = (area[:, None] * T.sum(1)).sum(0) / (3.0 * area.sum())
    vol, com, _ = _solid(V, F, ref, unsigned)
    if not vol > 0:
        raise MeshError("mesh volume is negative (misoriented triangles)" if vol < 0 else "mesh volume is zero")
    vol, S = _second_moment(V, F, com, unsigned)
    if vol < 0:
        raise MeshError("mesh volume is negative (misoriented triangles)")
    if not vol > 1e-15:
        raise MeshError(f"mesh volume {vol:.3g} is too small")
    return vol, com, _inertia(S)


# --- a primitive fitted to a mesh (MuJoCo's geom type="box" etc. with mesh="...") -------------

def _qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _qmat(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


STOP = 3e-7   # the Jacobi sweep stops at off-diagonal entries below this times the largest moment


def principal_frame(I, eps=1e-12):
    """(principal moments, decreasing; quaternion w x y z of the principal axes) of a symmetric 3x3
    matrix, by the Jacobi sweep of MuJoCo's compiler, so that the axes, their signs and their order
    are MuJoCo's (they place a mesh's frame and a primitive fitted to it): the largest off-diagonal
    entry of Rᵀ I R is cancelled by a rotation about the third axis, accumulated as a quaternion
    (the half-angle taken from atan), until the largest is below :data:`STOP` times the largest
    moment; then the moments are sorted, decreasing, by quarter turns (moments within ``eps`` count
    as equal, as in MuJoCo).  MuJoCo 4.0's frames of 24 uneven meshes (sizes 0.05 to 1) are
    reproduced to 2e-15 with any stopping ratio in (9e-8, 9e-7); a frame is only that precise (an
    off-diagonal entry of 3e-7 turns the axes by about 3e-7 / the moments' gap)."""
    q = np.array([1.0, 0.0, 0.0, 0.0])
    for _ in range(500):
        R = _qmat(q)
        D = R.T @ I @ R
        lam = np.diag(D).copy()
        if abs(D[0, 1]) > abs(D[0, 2]) and abs(D[0, 1]) > abs(D[1, 2]):
            r, c, k = 0, 1, 2
        elif abs(D[0, 2]) > abs(D[1, 2]):
            r, c, k = 0, 2, 1
        else:
            r, c, k = 1, 2, 0
        if abs(D[r, c]) <= STOP * np.abs(lam).max():
            break
        tau = (D[c, c] - D[r, r]) / (2.0 * D[r, c])
        t = 1.0 / (abs(tau) + math.sqrt(1.0 + tau * tau))      # tan of the rotation, |t| <= 1
        s = math.sin(0.5 * math.atan(t)) * (-1.0 if tau >= 0 else 1.0) * (-1.0 if k == 1 else 1.0)
        if s == 0.0:
            break
        dq = np.zeros(4)
        dq[k + 1] = s
        dq[0] = math.sqrt(1.0 - s * s)
        q = _qmul(q, dq)
        q /= np.linalg.norm(q)
    for j in range(3):   # decreasing order: swap neighbours (0, 1), (1, 2), (0, 1) by quarter turns
        a = j % 2
        if lam[a] + eps < lam[a + 1]:
            lam[a], lam[a + 1] = lam[a + 1], lam[a]
            dq = np.zeros(4)
            dq[0] = dq[(a + 2) % 3 + 1] = math.sqrt(0.5)
            q = _qmul(q, dq)
            q /= np.linalg.norm(q)
    return lam, q


FIT_TYPES = SOLID_TYPES


def fit_primitive(kind, V, measure, com, unit, fitaabb=False, fitscale=1.0):
    """(size (3,), position (3,), quaternion) of a ``kind`` primitive fitted to a mesh as MuJoCo's
    compiler fits it, in the mesh's (geom's) frame.  ``V``: the mesh's vertices; ``measure``,
    ``com``, ``unit``: its volume (area for a shell), centre and inertia per unit density
    (:func:`mass_properties`).  The primitive sits in the mesh's principal frame (centred at
    ``com``, axes by :func:`principal_frame`).  ``fitaabb=False``: sized from the box of equal
    inertia (half-sizes b); sphere: r = mean of b; capsule: r = (b0 + b1)/2, half-length
    max(0, b2 - r/2); cylinder: r = (b0 + b1)/2, half-length b2; box and ellipsoid: b.
    ``fitaabb=True``: from the half-extents h of the vertices' bounding box in the principal frame,
    centred on that box: sphere: r = max h; cylinder: r = max(h0, h1), half-length h2; capsule: that
    radius, half-length h2 - r; box and ellipsoid: h.  Every size is then multiplied by ``fitscale``."""
    if kind not in FIT_TYPES:
        raise MeshError(f"a {kind} cannot be fitted to a mesh")
    lam, q = principal_frame(unit)
    size = np.zeros(3)
    pos = np.array(com, np.float64)
    if not fitaabb:
        b = 0.5 * np.sqrt(np.maximum(6.0 * (lam.sum() - 2.0 * lam) / measure, 0.0))
        if kind == "sphere":
            size[0] = b.sum() / 3.0
        elif kind in ("capsule", "cylinder"):
            size[0] = 0.5 * (b[0] + b[1])
            size[1] = max(0.0, b[2] - size[0] / 2.0) if kind == "capsule" else b[2]
        else:
            size[:] = b
    else:
        P = (np.asarray(V, np.float64) - com) @ _qmat(q)     # vertices in the principal frame
        lo, hi = P.min(0), P.max(0)
        cen = 0.5 * (lo + hi)
        pos = pos + _qmat(q) @ cen
        h = hi - cen
        if kind == "sphere":
            size[0] = h.max()
        elif kind in ("capsule", "cylinder"):
            size[0] = max(h[0], h[1])
            size[1] = h[2] - size[0] if kind == "capsule" else h[2]
        else:
            size[:] = h
    return size * fitscale, pos, q
