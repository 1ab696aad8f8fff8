"""Height fields: MuJoCo's ``hfield`` geom and its contacts with convex geoms.

The field (MuJoCo's conventions, checked against ``mujoco.MjModel.hfield_data``
in ``tests/test_hfield.py``).  A grid of ``nrow`` x ``ncol`` elevations
``data`` in [0, 1] and a size ``(rx, ry, top, base)``: in the geom frame,
grid point (r, c) is at x = -rx + 2 rx c / (ncol - 1), y = -ry + 2 ry r /
(nrow - 1) (row 0 at -y), height ``data[r, c] * top``; the solid reaches
down to z = -base.  Each grid cell (r, c)-(r+1, c+1) is split along that
diagonal into two triangles, and each triangle with the column under it,
down to -base, is a triangular prism: the convex pieces MuJoCo collides
(``mjc_ConvexHField``).  Elevation data from a file or an attribute are
normalized to [0, 1] (minus the minimum, divided by the range; a constant
field is all zeros): :func:`normalize`.

Contacts (:func:`hfield_pair`).  MuJoCo bounds the other geom by its
axis-aligned box in the field's frame, takes the grid cells under it, and
gives one contact per prism that the geom penetrates: the prism's and the
geom's deepest point pair (penetration depth, normal from the field to the
geom, the middle of the two witness points).  Here the cells are a window of
a static size (:class:`HField`'s ``window``: ``kr`` x ``kc`` cells, enough for
any pose of the geom, :func:`window_size`) placed at the geom's box, so every
pair gives ``2 kr kc`` candidates, in MuJoCo's order (row by row, in a cell the
triangle on the (c, r+1) side first); a prism outside MuJoCo's cell range or
past the grid's edge reports dist :data:`_FAR`.  A prism apart from the geom
reports a positive distance (zero force).  The deepest pair: for a sphere, a
closed form (the centre's signed distance to the prism: the distance to its
closest point outside, the nearest face plane inside; exact); for the other
convex geoms GJK/EPA (:mod:`.convex`) on the prism's six vertices.  MuJoCo
keeps at most 50 contacts per pair (``mjMAXCONPAIR``); here there is no cap.
"""

from __future__ import annotations

import math
import os
import struct
import zlib
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .convex import convex as _convex

_FAR = 1e9


class HField(NamedTuple):
    """A height field as the narrow phase takes it.  ``data`` (R, C): the
    normalized elevations (row r at y index r), padded beyond ``dims``;
    ``size`` (4,): (rx, ry, top, base); ``dims`` (2,) int: (nrow, ncol);
    ``window`` (kr, kc): only its shape counts, the static number of cells
    searched per pair (:func:`window_size`)."""
    data: jax.Array
    size: jax.Array
    dims: jax.Array
    window: jax.Array


# --------------------------------------------------------------------------------------------------
# data (build time, NumPy)

def normalize(data):
    """MuJoCo's normalization of elevation data: (data - min) / (max - min), all zeros for a
    constant field."""
    d = np.asarray(data, np.float64)
    lo, hi = d.min(), d.max()
    return np.zeros_like(d) if hi <= lo else (d - lo) / (hi - lo)


def check_size(size, what="hfield"):
    s = np.asarray(size, np.float64).reshape(-1)
    if s.shape != (4,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"{what}: size must be 4 positive numbers (rx ry top base), got {size!r}")
    return s


def check_data(data, what="hfield"):
    d = np.asarray(data, np.float64)
    if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 2 or not np.all(np.isfinite(d)):
        raise ValueError(f"{what}: elevation must be a finite (nrow >= 2, ncol >= 2) array, got shape {d.shape}")
    return d


def read_file(path, what="hfield"):
    """The elevation grid (nrow, ncol) of a height-field file, row 0 at -y, not yet normalized:
    MuJoCo's binary format (int32 nrow, int32 ncol, nrow * ncol float32, native byte order,
    row 0 first) or a PNG image (its top row at +y; grey, or the red channel of a colour image;
    16-bit samples are cut to their high byte, as MuJoCo does)."""
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {path!r} ({e.strerror})") from None
    if raw[:8] == b"\x89PNG\r\n\x1a\n":
        return read_png(raw, what)[::-1].astype(np.float64)
    if os.path.splitext(path)[1].lower() == ".png":
        raise ValueError(f"{what}: {path!r} is not a PNG file")
    if len(raw) < 8:
        raise ValueError(f"{what}: {path!r} is too short for a binary height field")
    nrow, ncol = struct.unpack("<ii" if np.little_endian else ">ii", raw[:8])
    if nrow < 1 or ncol < 1 or len(raw) != 8 + 4 * nrow * ncol:
        raise ValueError(f"{what}: {path!r}: header says {nrow} x {ncol} floats, the file holds "
                         f"{(len(raw) - 8) / 4:g}")
    return np.frombuffer(raw[8:], np.float32).reshape(nrow, ncol).astype(np.float64)


def _unfilter(rows, bpp, stride):
    """PNG scanline filters (ISO/IEC 15948, 9.2) undone: rows (h, 1 + stride) bytes.  None, Sub and
    Up by whole rows; Average and Paeth byte by byte (each byte depends on the one before)."""
    out = np.zeros((len(rows), stride), np.int64)
    prev = np.zeros(stride, np.int64)
    for i, row in enumerate(rows):
        ftype, x = int(row[0]), row[1:].astype(np.int64)
        if ftype == 0:
            cur = x
        elif ftype == 1:
            cur = np.cumsum(x.reshape(-1, bpp), axis=0).reshape(-1) & 0xFF
        elif ftype == 2:
            cur = (x + prev) & 0xFF
        elif ftype in (3, 4):
            cur = np.zeros(stride, np.int64)
            for k in range(stride):
                a = int(cur[k - bpp]) if k >= bpp else 0
                b = int(prev[k])
                if ftype == 3:
                    pred = (a + b) // 2
                else:
                    c = int(prev[k - bpp]) if k >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if (pa <= pb and pa <= pc) else (b if pb <= pc else c)
                cur[k] = (int(x[k]) + pred) & 0xFF
        else:
            raise ValueError(f"unknown PNG filter type {ftype}")
        out[i] = cur
        prev = cur
    return out


def read_png(raw, what="hfield"):
    """The first channel (grey, or red) of a non-interlaced PNG, 8-bit values (h, w)."""
    pos, chunks = 8, {}
    idat = b""
    while pos + 8 <= len(raw):
        n, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        body = raw[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        else:
            chunks.setdefault(kind, body)
    if b"IHDR" not in chunks:
        raise ValueError(f"{what}: PNG without a header")
    w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(ctype)
    if channels is None or interlace or depth not in ((8, 16) if ctype != 3 else (8,)):
        raise ValueError(f"{what}: PNG colour type {ctype}, bit depth {depth}, interlace {interlace} "
                         "is not supported (8- or 16-bit, not interlaced)")
    nbyte = depth // 8
    bpp = channels * nbyte
    stride = w * bpp
    try:
        data = np.frombuffer(zlib.decompress(idat), np.uint8)
    except zlib.error as e:
        raise ValueError(f"{what}: corrupt PNG data ({e})") from None
    if len(data) != h * (stride + 1):
        raise ValueError(f"{what}: PNG data of the wrong length")
    px = _unfilter(data.reshape(h, stride + 1), bpp, stride).reshape(h, w, channels, nbyte)
    first = px[:, :, 0, 0]                     # the high byte of 16-bit samples
    if ctype == 3:
        pal = np.frombuffer(chunks.get(b"PLTE", b""), np.uint8).reshape(-1, 3)
        if len(pal) == 0 or first.max() >= len(pal):
            raise ValueError(f"{what}: PNG palette missing or too short")
        first = pal[first, 0]
    return first.astype(np.uint8)


def window_size(size, nrow, ncol, reach):
    """The static window (kr, kc) of cells that holds every cell under a geom whose points lie
    within ``reach`` of its centre (its bounding radius), in any pose: its box in the field's frame
    is at most 2 reach wide, so it spans at most ceil(2 reach / spacing) + 1 cells per axis (no more
    than the grid has)."""
    dx = 2 * size[0] / (ncol - 1)
    dy = 2 * size[1] / (nrow - 1)
    kc = min(ncol - 1, math.ceil(2 * reach / dx - 1e-9) + 1)
    kr = min(nrow - 1, math.ceil(2 * reach / dy - 1e-9) + 1)
    return int(max(kr, 1)), int(max(kc, 1))


def surface_mesh(data, size):
    """(vertices (nrow ncol + 4, 3), faces (m, 3)) of a height field's top surface and its four
    sides and base (for drawing), in the geom frame."""
    d = np.asarray(data, np.float64)
    nrow, ncol = d.shape
    x = np.linspace(-size[0], size[0], ncol)
    y = np.linspace(-size[1], size[1], nrow)
    X, Y = np.meshgrid(x, y)
    V = np.stack([X, Y, d * size[2]], -1).reshape(-1, 3)
    idx = np.arange(nrow * ncol).reshape(nrow, ncol)
    a, b = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel()
    c, e = idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    F = np.concatenate([np.stack([a, e, c], 1), np.stack([a, b, e], 1)])
    # the base: one quad under the field, the sides as fans to it
    base = np.array([[-size[0], -size[1]], [size[0], -size[1]], [size[0], size[1]], [-size[0], size[1]]])
    k = len(V)
    V = np.concatenate([V, np.column_stack([base, np.full(4, -size[3])])])
    F = [F, np.array([[k, k + 2, k + 1], [k, k + 3, k + 2]])]
    for edge, (b0, b1) in ((idx[0, :], (k, k + 1)), (idx[:, -1], (k + 1, k + 2)),
                           (idx[-1, ::-1], (k + 2, k + 3)), (idx[::-1, 0], (k + 3, k))):
        F.append(np.array([[edge[i], b0, edge[i + 1]] for i in range(len(edge) - 1)] + [[edge[-1], b0, b1]]))
    return V, np.concatenate(F).astype(np.int64)


# --------------------------------------------------------------------------------------------------
# the narrow phase

def _box_in_field(R1, p1, kind, R2, p2, s2, verts2):
    """The other geom's axis-aligned box in the field's frame: (lo (3,), hi (3,)), from its support
    points along the field's axes (MuJoCo's); kind static."""
    from .convex import _SUPPORTS, _sup_mesh
    fn = _sup_mesh if kind == 7 else _SUPPORTS[kind - 2]
    sz = verts2 if kind == 7 else s2
    D = R2.T @ R1                                                   # the field's axes, geom frame
    dirs = jnp.concatenate([D.T, -D.T])                            # (6, 3)
    pts = jax.vmap(lambda d: fn(d, sz))(dirs) @ R2.T + (p2 - p1)[None]   # world offsets from the field
    ext = jnp.sum(pts * jnp.concatenate([R1.T, -R1.T]), 1)          # hi, then -lo
    rad = s2[0] if kind in (2, 3) else 0.0
    return -ext[3:] - rad, ext[:3] + rad


def prisms(hf, lo, hi):
    """The prisms of the window under the box (lo, hi) (field frame): vertices (2 kr kc, 6, 3)
    (three on top, then the three under them at -base) and whether each is in MuJoCo's cell range
    (2 kr kc,)."""
    data, size = hf.data, hf.size
    kr, kc = hf.window.shape
    nrow, ncol = hf.dims[0], hf.dims[1]
    dt = size.dtype
    dx = 2 * size[0] / (ncol - 1).astype(dt)
    dy = 2 * size[1] / (nrow - 1).astype(dt)
    cmin = jnp.maximum(jnp.floor((lo[0] + size[0]) / dx).astype(jnp.int32), 0)
    cmax = jnp.minimum(jnp.ceil((hi[0] + size[0]) / dx).astype(jnp.int32), ncol - 1)
    rmin = jnp.maximum(jnp.floor((lo[1] + size[1]) / dy).astype(jnp.int32), 0)
    rmax = jnp.minimum(jnp.ceil((hi[1] + size[1]) / dy).astype(jnp.int32), nrow - 1)
    r0 = jnp.clip(rmin, 0, jnp.maximum(nrow - 1 - kr, 0))
    c0 = jnp.clip(cmin, 0, jnp.maximum(ncol - 1 - kc, 0))
    r = r0 + jnp.arange(kr, dtype=jnp.int32)[:, None] + jnp.zeros((1, kc), jnp.int32)
    c = c0 + jnp.arange(kc, dtype=jnp.int32)[None, :] + jnp.zeros((kr, 1), jnp.int32)
    r, c = r.reshape(-1), c.reshape(-1)
    ok = (r >= rmin) & (r < rmax) & (c >= cmin) & (c < cmax) & (r < nrow - 1) & (c < ncol - 1)
    R, C = data.shape

    def vert(rr, cc):
        z = data[jnp.clip(rr, 0, R - 1), jnp.clip(cc, 0, C - 1)] * size[2]
        return jnp.stack([cc.astype(dt) * dx - size[0], rr.astype(dt) * dy - size[1], z], -1)
    v00, v01, v10, v11 = vert(r, c), vert(r, c + 1), vert(r + 1, c), vert(r + 1, c + 1)
    tops = jnp.stack([jnp.stack([v10, v00, v11], 1), jnp.stack([v00, v11, v01], 1)], 1).reshape(-1, 3, 3)
    bottoms = tops.at[..., 2].set(-size[3])
    return jnp.concatenate([tops, bottoms], 1), jnp.repeat(ok, 2)


_EDGES = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3], [0, 3], [1, 4], [2, 5]])


def sphere_prism(P, c, r):
    """A sphere (centre c, radius r, field frame) against the prism P (6, 3) (three top vertices, then
    the three under them): (dist, pos, normal from the prism to the sphere), exact.  The prism is
    five half-spaces (top, base, three vertical walls).  Inside all of them the centre's depth is
    its distance to the nearest face plane; outside, its closest point lies inside a face, an edge
    or at a vertex, and is the projection on that feature's plane, line or point: of the 20
    projections, the nearest one that is in the prism."""
    top = P[:3]
    dt = P.dtype
    ez = jnp.array([0.0, 0.0, 1.0], dt)
    nt = jnp.cross(top[1] - top[0], top[2] - top[0])
    nt = nt * jnp.where(nt[2] >= 0, 1.0, -1.0) / jnp.sqrt(nt @ nt)
    ns = jnp.cross(jnp.roll(top, -1, 0) - top, ez[None]).at[:, 2].set(0.0)   # walls, outward below
    ns = ns / jnp.linalg.norm(ns, axis=1, keepdims=True)
    ns = ns * jnp.where(jnp.sum(ns * (top - jnp.mean(top, 0)[None]), 1) >= 0, 1.0, -1.0)[:, None]
    N = jnp.concatenate([nt[None], -ez[None], ns])                               # (5, 3) outward
    b = jnp.concatenate([(nt @ top[0])[None], -P[3, 2][None], jnp.sum(ns * top, 1)])
    h = N @ c - b                                                                # signed plane distances
    inside = jnp.all(h <= 0)
    a, e = P[_EDGES[:, 0]], P[_EDGES[:, 1]] - P[_EDGES[:, 0]]
    t = jnp.sum((c[None] - a) * e, 1) / jnp.sum(e * e, 1)
    cand = jnp.concatenate([c[None] - h[:, None] * N, a + t[:, None] * e, P])     # (20, 3)
    tol = 1e-10 * (1.0 + jnp.max(jnp.abs(P)))
    ok = jnp.all(cand @ N.T - b[None] <= tol, 1)
    d2 = jnp.where(ok, jnp.sum((cand - c[None]) ** 2, 1), jnp.inf)
    q = cand[jnp.argmin(d2)]
    kf = jnp.argmax(h)
    v = c - q
    n2 = v @ v
    safe = n2 > jnp.finfo(dt).eps ** 2
    d_out = jnp.sqrt(jnp.where(safe, n2, 1.0))
    n = jnp.where(inside | ~safe, N[kf], v / d_out)
    sd = jnp.where(inside, h[kf], jnp.where(safe, d_out, 0.0))
    dist = sd - r
    return dist, 0.5 * (c - sd * n + c - r * n), n


def hfield_pair(kind):
    """The pair function (R1, p1, hf: :class:`HField`, R2, p2, size2) -> (dist (k,), pos (k, 3),
    normal (k, 3)) of a height field and a convex geom of type ``kind`` (a name; a mesh's size2 is
    its vertex array or :class:`.geometry.Mesh`), k = 2 kr kc."""
    from .convex import KINDS
    code = KINDS[kind]

    def pair(R1, p1, hf, R2, p2, s2):
        verts2 = getattr(s2, "verts", s2) if kind == "mesh" else jnp.zeros((1, 3), p2.dtype)
        size2 = jnp.zeros(3, p2.dtype) if kind == "mesh" else s2
        sg = jax.lax.stop_gradient
        lo, hi = _box_in_field(*map(sg, (R1, p1)), code, *map(sg, (R2, p2, size2, verts2)))
        P, ok = prisms(hf, lo, hi)
        if kind == "sphere":
            c = R1.T @ (p2 - p1)
            d, x, n = jax.vmap(lambda Pk: sphere_prism(Pk, c, size2[0]))(P)
            x, n = x @ R1.T + p1[None], n @ R1.T
        else:
            z3 = jnp.zeros(3, p2.dtype)
            d, x, n = jax.vmap(lambda Pk: _convex(7, R1, p1, z3, Pk, code, R2, p2, size2, verts2))(P)
        return jnp.where(ok, d, _FAR), x, n

    pair.__name__ = f"hfield_{kind}"
    pair.__doc__ = (f"2 kr kc candidates: each prism of the window against the {kind} "
                    f"({'closed form' if kind == 'sphere' else 'GJK/EPA'}); see :mod:`.hfield`.")
    return pair


def num_contacts(hf):
    """The candidates of a height-field pair: two prisms per cell of the window."""
    kr, kc = np.shape(hf.window)
    return 2 * kr * kc
