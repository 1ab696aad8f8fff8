"""MJCF ``<default>`` classes and the attribute values an element gets from them, and the numbers and orientations of the compiler's conventions (angle units, Euler sequence, fitted primitive geoms).

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

import math

import numpy as np

from . import _common as C
from . import mesh as _mesh
from .mjcf_base import MJCFError, ORIENTATIONS, _over


class Defaults:
    def _read_defaults(self):
        self.classes = {"main": {}}

        def visit(el, name, inherited):
            own = {tag: dict(v) for tag, v in inherited.items()}
            for child in el:
                if child.tag == "default":
                    continue
                own[child.tag] = _over(own.get(child.tag, {}), child.attrib)
            if name in self.classes and name != "main":
                raise MJCFError(f"<default class={name!r}> defined twice")
            if name == "main":
                for tag, v in own.items():
                    self.classes["main"][tag] = _over(self.classes["main"].get(tag, {}), v)
            else:
                self.classes[name] = own
            for child in el:
                if child.tag == "default":
                    cname = child.get("class")
                    if not cname:
                        raise MJCFError("nested <default> without a class name")
                    visit(child, cname, own)

        for el in self.root.findall("default"):
            visit(el, el.get("class", "main"), self.classes["main"])

    def attrs(self, el, cls):
        """The element's attributes over its default class's (MuJoCo's inheritance); a primitive geom
        naming a mesh comes fitted to it (:meth:`_fit`)."""
        c = el.get("class", cls)
        if c not in self.classes:
            raise MJCFError(f"<{el.tag} name={el.get('name')!r}>: unknown default class {c!r}")
        a = _over(self.classes[c].get(el.tag, {}), el.attrib)
        if el.tag == "geom" and "mesh" in a and a.get("type", "sphere") in _mesh.FIT_TYPES:
            a = self._fit(a, f"geom {el.get('name')!r}" if el.get("name") else "a geom")
        return a

    def _fit(self, a, what):
        """A primitive geom naming a mesh, as MuJoCo compiles it: the primitive fitted to the mesh
        (:func:`jaxmbd.io.mesh.fit_primitive`, ``<compiler fitaabb>``, the geom's ``fitscale``), placed
        in the mesh's principal frame; the mesh reference is dropped (its size, pos and quat replaced)."""
        name, kind = a["mesh"], a.get("type", "sphere")
        if "fromto" in a:
            raise MJCFError(f"{what}: fromto cannot be used with a mesh (MuJoCo refuses it too)")
        key = (name, kind, a.get("fitscale", "1"))
        if key not in self._fits:
            measure, com, unit = self._mesh_mass(name, f"{what}: a {kind} fitted to mesh {name!r}")
            V, _ = self._mesh_data(name, what)
            fitscale = C.number(a.get("fitscale", "1"), f"{what}: fitscale")
            self._fits[key] = _mesh.fit_primitive(kind, V, measure, com, unit, self.fitaabb, fitscale)
        size, mpos, mquat = self._fits[key]
        q = self.orientation(a, what)
        pos = C.numbers(a.get("pos", "0 0 0"), 3, f"{what}: pos") + C.quat_to_rot(q) @ mpos
        out = {k: v for k, v in a.items() if k not in ORIENTATIONS and k != "mesh"}
        out.update(size=" ".join(repr(float(x)) for x in size), pos=" ".join(repr(float(x)) for x in pos),
                   quat=" ".join(repr(float(x)) for x in C.quat_mul(q, mquat)))
        return out

    def angle(self, x):
        return math.radians(x) if self.deg else x

    def orientation(self, a, what):
        keys = [k for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if k in a]
        if len(keys) > 1:
            raise MJCFError(f"{what}: more than one orientation ({', '.join(keys)})")
        if not keys:
            return np.array([1.0, 0.0, 0.0, 0.0])
        k = keys[0]
        if k == "quat":
            q = C.numbers(a[k], 4, f"{what}: quat")
            if np.linalg.norm(q) < 1e-12:
                raise MJCFError(f"{what}: quat is zero")
            return q / np.linalg.norm(q)
        if k == "axisangle":
            v = C.numbers(a[k], 4, f"{what}: axisangle")
            if np.linalg.norm(v[:3]) < 1e-12:
                raise MJCFError(f"{what}: axisangle axis is zero")
            return C.quat_axis_angle(v[:3], self.angle(v[3]))
        if k == "euler":
            v = C.numbers(a[k], 3, f"{what}: euler")
            q = np.array([1.0, 0.0, 0.0, 0.0])
            for ch, ang in zip(self.eulerseq, v):
                r = C.quat_axis_angle(np.eye(3)["xyz".index(ch.lower())], self.angle(ang))
                q = C.quat_mul(q, r) if ch.islower() else C.quat_mul(r, q)  # intrinsic / extrinsic
            return q
        if k == "xyaxes":
            v = C.numbers(a[k], 6, f"{what}: xyaxes")
            x, y = v[:3], v[3:]
            if np.linalg.norm(x) < 1e-12:
                raise MJCFError(f"{what}: xyaxes x axis is zero")
            x = x / np.linalg.norm(x)
            y = y - (y @ x) * x
            if np.linalg.norm(y) < 1e-12:
                raise MJCFError(f"{what}: xyaxes y axis is parallel to x")
            y = y / np.linalg.norm(y)
            return C.rot_to_quat(np.stack([x, y, np.cross(x, y)], axis=1))
        v = C.numbers(a[k], 3, f"{what}: zaxis")
        if np.linalg.norm(v) < 1e-12:
            raise MJCFError(f"{what}: zaxis is zero")
        return C.z_to_vec(v)
