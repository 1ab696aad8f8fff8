"""What a model looks like: its geoms as they are drawn (:mod:`jaxmbd.view`).

A model's visual geoms are static data beside its dynamics (``Model.visual_data``): each geom's
host body (the moving body it rides on after welded bodies are merged, -1 for the world), its type
and size in MuJoCo's conventions, its pose in the host's body frame, its colour and MuJoCo's geom
group, and for a mesh its vertices and faces.  They never enter a computation: two models that
differ only in how they look share their compiled programs only when their visuals are equal too,
since the record is part of the model's static structure (it hashes by content)."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np

from .mujoco_defaults import DRAWN_TYPES

GEOM_TYPES = DRAWN_TYPES
DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)
"""MuJoCo's geom colour when a file gives none."""
PALETTE = ((0.90, 0.55, 0.20, 1.0), (0.25, 0.55, 0.85, 1.0), (0.35, 0.70, 0.35, 1.0), (0.80, 0.30, 0.35, 1.0),
           (0.60, 0.45, 0.80, 1.0), (0.85, 0.75, 0.25, 1.0), (0.30, 0.70, 0.70, 1.0), (0.65, 0.50, 0.35, 1.0))
"""Body colours for geoms built without one (``ModelBuilder.add_geom``): one per body, in turn."""
FLOOR_RGBA = (0.82, 0.84, 0.86, 1.0)
"""Colour of a plane built without one."""


class VisualGeom(NamedTuple):
    """One drawn geom: ``body`` the host index (-1: the world), ``type`` (:data:`GEOM_TYPES`),
    ``size`` (3 numbers, MuJoCo's: radius / half-lengths / half-sizes; a plane's x and y
    half-sizes, 0 for as large as the scene), ``pos`` and ``rot`` (the rotation matrix, row by
    row) on the host,
    ``rgba`` in [0, 1], MuJoCo's ``group`` (0-5), ``mesh`` (the mesh's key in
    :attr:`Visuals.meshes`, else None) and the geom's ``name``."""
    name: str
    body: int
    type: str
    size: tuple
    pos: tuple
    rot: tuple
    rgba: tuple
    group: int
    mesh: str | None


class Visuals:
    """A model's visual geoms and their meshes (name -> (vertices (n, 3) float32, faces (m, 3)
    int32)), read-only, hashed and compared by content."""

    def __init__(self, geoms, meshes):
        self.geoms = tuple(geoms)
        frozen = {}
        for key, (V, F) in meshes.items():
            V = np.array(V, np.float32).reshape(-1, 3)
            F = np.array(F, np.int32).reshape(-1, 3)
            V.setflags(write=False), F.setflags(write=False)
            frozen[key] = (V, F)
        self.meshes = frozen
        h = hashlib.sha256(repr(self.geoms).encode())
        for key in sorted(frozen):
            h.update(key.encode())
            h.update(frozen[key][0].tobytes())
            h.update(frozen[key][1].tobytes())
        self.digest = h.hexdigest()

    def __hash__(self):
        return hash(self.digest)

    def __eq__(self, other):
        return isinstance(other, Visuals) and other.digest == self.digest

    def __repr__(self):
        return f"Visuals({len(self.geoms)} geoms, {len(self.meshes)} meshes)"


def check_rgba(rgba, what):
    """rgba as a tuple of 4 floats in [0, 1], or a ValueError naming ``what``."""
    c = np.asarray(rgba, np.float64).ravel()
    if c.shape != (4,) or not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(c > 1):
        raise ValueError(f"{what}: rgba must be 4 numbers in [0, 1], got {rgba!r}")
    return tuple(float(x) for x in c)


def mesh_faces(vertices):
    """Faces of the convex hull of ``vertices`` (how a mesh given by its vertices alone is drawn;
    it collides as that hull too)."""
    from scipy.spatial import ConvexHull
    V = np.asarray(vertices, np.float64)
    hull = ConvexHull(V)
    F = hull.simplices.copy()
    # outward orientation: each face's normal points away from the hull's centroid
    c = V.mean(0)
    n = np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]])
    flip = np.einsum("ij,ij->i", n, V[F[:, 0]] - c) < 0
    F[flip] = F[flip][:, [0, 2, 1]]
    return F
