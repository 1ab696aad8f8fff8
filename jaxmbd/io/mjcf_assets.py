"""MJCF ``<asset>``: mesh and height-field files, their mass properties and convex hulls, found as MuJoCo finds them (meshdir, assetdir, the main file's directory).

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

import os

import numpy as np

from . import _common as C
from . import mesh as _mesh
from .mjcf_base import MJCFError


class Assets:
    def _read_meshes(self):
        """<asset><mesh>: name -> attributes and file path.  Every mesh file must
        exist (MuJoCo reads them all, used or not); a file is parsed only when a
        geom needs its mass properties or hull."""
        comp = self.compiler
        mdir = comp.get("meshdir", comp.get("assetdir", ""))
        self.meshes, self._mesh_cache, self._mesh_props, self._hulls = {}, {}, {}, {}
        self.mesh_notes = set()
        self.mesh_geoms = []
        for asset in self.root.findall("asset"):
            for el in asset.findall("mesh"):
                a = self.attrs(el, "main")
                f = a.get("file")
                name = a.get("name") or (os.path.splitext(os.path.basename(f))[0] if f else None)
                what = f"<mesh name={name!r}>"
                if not name:
                    raise MJCFError("<mesh> without a name or a file")
                if name in self.meshes:
                    raise MJCFError(f"{what}: duplicate mesh name")
                if f:
                    if comp.get("strippath", "false") == "true":
                        f = os.path.basename(f)
                    path = self._asset_path(f, mdir)
                    if not os.path.isfile(path):
                        raise MJCFError(f"{what}: cannot open mesh file {path!r}")
                    a["_path"] = path
                elif "vertex" not in a:
                    raise MJCFError(f"{what}: needs a file or vertex data (builtin meshes are not supported)")
                mode = a.get("inertia", "legacy")
                if mode not in _mesh.INERTIA_MODES:
                    raise MJCFError(f"{what}: inertia={mode!r}: expected one of {', '.join(_mesh.INERTIA_MODES)}")
                self.meshes[name] = a

    def _asset_path(self, f, adir):
        """The path of an asset file as MuJoCo finds it: from the main file's directory and the
        compiler's asset directory ``adir``, whichever file (included or not) names it."""
        return f if os.path.isabs(f) else os.path.normpath(os.path.join(self.base, adir, f))

    def _read_hfields(self):
        """<asset><hfield>: name -> (normalized elevation (nrow, ncol), row 0 at -y; size (4,)), as
        MuJoCo compiles them: from ``elevation`` (nrow x ncol numbers, the first row at +y), from a
        file (MuJoCo's binary format, or a PNG image; looked up in ``meshdir``), or zeros (nrow and
        ncol alone); normalized to [0, 1] (:func:`jaxmbd.contact.hfield.normalize`)."""
        from ..contact import hfield as H
        comp = self.compiler
        hdir = comp.get("meshdir", comp.get("assetdir", ""))
        self.hfields = {}
        for asset in self.root.findall("asset"):
            for el in asset.findall("hfield"):
                a = self.attrs(el, "main")
                f = a.get("file")
                name = a.get("name") or (os.path.splitext(os.path.basename(f))[0] if f else None)
                what = f"<hfield name={name!r}>"
                if not name:
                    raise MJCFError("<hfield> without a name or a file")
                if name in self.hfields:
                    raise MJCFError(f"{what}: duplicate hfield name")
                try:
                    size = H.check_size(C.numbers(a.get("size", ""), None, f"{what}: size"), what)
                    nrow = int(C.number(a.get("nrow", "0"), f"{what}: nrow"))
                    ncol = int(C.number(a.get("ncol", "0"), f"{what}: ncol"))
                    if f:
                        if nrow or ncol or "elevation" in a:
                            raise MJCFError(f"{what}: a file gives the grid: nrow, ncol and elevation must be left out")
                        if comp.get("strippath", "false") == "true":
                            f = os.path.basename(f)
                        path = self._asset_path(f, hdir)
                        data = H.read_file(path, what)
                    else:
                        if nrow < 2 or ncol < 2:
                            raise MJCFError(f"{what}: needs a file, or nrow and ncol (at least 2 each)")
                        if "elevation" in a:
                            data = C.numbers(a["elevation"], None, f"{what}: elevation")
                            if data.size != nrow * ncol:
                                raise MJCFError(f"{what}: elevation has {data.size} numbers, nrow x ncol = "
                                                f"{nrow * ncol}")
                            data = data.reshape(nrow, ncol)[::-1]          # its first row is at +y
                        else:
                            data = np.zeros((nrow, ncol))
                    self.hfields[name] = (H.normalize(H.check_data(data, what)), size)
                except ValueError as e:
                    raise MJCFError(str(e)) from None

    def _mesh_data(self, name, what):
        """(vertices, faces) of a mesh asset in its geom's frame: the file's
        vertices (float32, as MuJoCo stores them) moved by refpos/refquat, then
        scaled; faces turned over by a mirroring scale."""
        if name in self._mesh_cache:
            return self._mesh_cache[name]
        if name not in self.meshes:
            raise MJCFError(f"{what}: no mesh asset named {name!r}")
        a = self.meshes[name]
        mwhat = f"<mesh name={name!r}>"
        try:
            if "_path" in a:
                V, F, notes = _mesh.read_mesh(a["_path"])
                self.mesh_notes.update(f"{os.path.basename(a['_path'])}: {n}" for n in notes)
            else:
                V = _mesh._f32(C.numbers(a["vertex"], None, f"{mwhat}: vertex"))
                if V.size % 3 or V.size < 12:
                    raise MJCFError(f"{mwhat}: vertex needs at least 4 points (3 numbers each)")
                V = V.reshape(-1, 3)
                F = np.zeros((0, 3), np.int64)
                if "face" in a:
                    F = C.numbers(a["face"], None, f"{mwhat}: face")
                    if F.size == 0 or F.size % 3 or np.any(F != np.round(F)) or F.min() < 0 or F.max() >= len(V):
                        raise MJCFError(f"{mwhat}: face must be triples of vertex indices")
                    F = F.astype(np.int64).reshape(-1, 3)
        except _mesh.MeshError as e:
            raise MJCFError(f"{mwhat}: {e}") from None
        refpos = C.numbers(a.get("refpos", "0 0 0"), 3, f"{mwhat}: refpos")
        refquat = C.numbers(a.get("refquat", "1 0 0 0"), 4, f"{mwhat}: refquat")
        if np.linalg.norm(refquat) < 1e-12:
            raise MJCFError(f"{mwhat}: refquat is zero")
        scale = C.numbers(a.get("scale", "1 1 1"), 3, f"{mwhat}: scale")
        V = ((V - refpos) @ C.quat_to_rot(refquat)) * scale
        if np.prod(scale) < 0:
            F = F[:, [0, 2, 1]]
        self._mesh_cache[name] = (V, F)
        return V, F

    def _mesh_mass(self, name, what):
        """(measure, centre, inertia per unit density) of a mesh asset, per its inertia mode."""
        if name not in self._mesh_props:
            a = self.meshes.get(name, {})
            mode = a.get("inertia", "legacy")
            hullvert = C.number(a.get("maxhullvert", "-1"), f"<mesh name={name!r}>: maxhullvert")
            if mode == "convex" and int(hullvert) != -1:
                raise MJCFError(f"{what}: mesh {name!r} has maxhullvert and inertia='convex': MuJoCo's "
                                "vertex-limited hull is not reproduced (give the body an <inertial>)")
            try:
                V, F = self._mesh_data(name, what)
                self._mesh_props[name] = _mesh.mass_properties(V, F, mode)
            except (_mesh.MeshError, MJCFError) as e:
                if name not in self.meshes:
                    raise
                raise MJCFError(f"{what}: mesh {name!r}: {e} (its mass properties are needed: give the "
                                "body an <inertial>, or the geom mass='0')") from None
        return self._mesh_props[name]

    def _hull(self, mesh, what):
        """The vertices of a mesh asset's convex hull (in its geom frame), or None where jaxmbd cannot
        read the mesh (noted in the warning)."""
        if mesh not in self._hulls:
            try:
                V, _ = self._mesh_data(mesh, what)
            except MJCFError as e:
                if mesh not in self.meshes:
                    raise
                self.mesh_notes.add(f"no hull kept for mesh {mesh!r} ({str(e).split(': ', 1)[-1]})")
                return None
            try:
                self._hulls[mesh] = _mesh.hull_vertices(V)
            except Exception:  # flat or degenerate: keep every vertex
                self._hulls[mesh] = V
        return self._hulls[mesh]

    def _record_mesh_geom(self, body, a, gname, what, Rf, pf):
        """Keep the convex hull of a mesh geom that collides or carries mass.  A mesh
        jaxmbd cannot read is an error only where its mass is needed (_mesh_mass);
        here it is noted in the warning."""
        if self._hull(a["mesh"], what) is None:
            return
        R = Rf @ C.quat_to_rot(self.orientation(a, what))
        p = pf + Rf @ C.numbers(a.get("pos", "0 0 0"), 3, f"{what}: pos")
        maxhullvert = int(C.number(self.meshes[a["mesh"]].get("maxhullvert", "-1"), f"{what}: maxhullvert"))
        self.mesh_geoms.append(dict(body=body, name=gname, mesh=a["mesh"], pos=p, quat=C.rot_to_quat(R),
                                    hull=self._hulls[a["mesh"]], maxhullvert=maxhullvert))
