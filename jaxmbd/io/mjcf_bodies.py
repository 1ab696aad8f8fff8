"""MJCF ``<worldbody>``: bodies, sites and the inertia of every body (explicit ``<inertial>`` or from its geoms, MuJoCo's inertiafromgeom, boundmass, boundinertia and settotalmass).

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

import numpy as np

from . import _common as C
from .mjcf_base import IGNORED_IN_BODY, MJCFError, SOLIDS


class Bodies:
    def _name_bodies(self):
        """MuJoCo's body ids (depth-first, world = 0) name the unnamed bodies ``body<id>``."""
        self.auto_name = {}
        taken = set()
        order = []

        def visit(el):
            for item in el:
                if item.tag == "body":
                    order.append(item)
                    visit(item)
                elif item.tag == "frame":
                    visit(item)

        for wb in self.root.findall("worldbody"):
            visit(wb)
        for b in order:
            n = b.get("name")
            if n:
                if n in taken:
                    raise MJCFError(f"duplicate body name {n!r}")
                if n == "world":
                    raise MJCFError("a body may not be named 'world'")
                taken.add(n)
        for i, b in enumerate(order):
            if not b.get("name"):
                n = f"body{i + 1}"
                while n in taken:
                    n += "_"
                taken.add(n)
                self.auto_name[id(b)] = n
        self.taken_names = taken

    def _items(self, el, frame, cls):
        """Children of a body (or of the world), with <frame>s flattened: yields
        (element, (R, p) of the enclosing frame in the body, default class)."""
        for child in el:
            if child.tag == "frame":
                a = self.attrs(child, cls)
                what = f"<frame name={child.get('name')!r}>"
                R = C.quat_to_rot(self.orientation(a, what))
                p = C.numbers(a.get("pos", "0 0 0"), 3, f"{what}: pos")
                Rf, pf = frame
                yield from self._items(child, (Rf @ R, pf + Rf @ p), child.get("childclass", cls))
            else:
                yield child, frame, cls

    def _site(self, el, body, frame, cls):
        """Record a named site (read only if an equality constraint names it)."""
        sname = el.get("name")
        if not sname:
            return
        if sname in self.sites:
            raise MJCFError(f"duplicate site name {sname!r}")
        self.sites[sname] = (el, body, frame, cls)

    def _site_frame(self, name, what):
        """(body, position, rotation) of a named site in its body's frame."""
        if name not in self.sites:
            raise MJCFError(f"{what}: no site named {name!r}")
        el, body, (Rf, pf), cls = self.sites[name]
        a = self.attrs(el, cls)
        swhat = f"site {name!r}"
        if "fromto" in a:
            ft = C.numbers(a["fromto"], 6, f"{swhat}: fromto")
            if np.linalg.norm(ft[:3] - ft[3:]) < 1e-12:
                raise MJCFError(f"{swhat}: fromto has zero length")
            pos, R = 0.5 * (ft[:3] + ft[3:]), C.quat_to_rot(C.z_to_vec(ft[:3] - ft[3:]))
        else:
            pos = C.numbers(a.get("pos", "0 0 0"), 3, f"{swhat}: pos")
            R = C.quat_to_rot(self.orientation(a, swhat))
        return body, pf + Rf @ pos, Rf @ R

    def _body(self, el, parent, Rf, pf, cls, top=False):
        name = el.get("name") or self.auto_name[id(el)]
        what = f"body {name!r}"
        a = el.attrib
        q = self.orientation(a, what)
        R = Rf @ C.quat_to_rot(q)
        p = pf + Rf @ C.numbers(a.get("pos", "0 0 0"), 3, f"{what}: pos")
        ccls = a.get("childclass", cls)
        if ccls not in self.classes:
            raise MJCFError(f"{what}: unknown childclass {ccls!r}")
        gravcomp = C.number(a.get("gravcomp", "0"), f"{what}: gravcomp")
        joints, geoms, inertial, children = [], [], None, []
        for item, frame, icls in self._items(el, (np.eye(3), np.zeros(3)), ccls):
            t = item.tag
            if t in ("joint", "freejoint"):
                if not (np.allclose(frame[0], np.eye(3)) and not frame[1].any()):
                    raise MJCFError(f"{what}: joints inside a <frame> are not supported")
                joints.append((item, icls))
            elif t == "geom":
                geoms.append((item, frame, icls))
            elif t == "inertial":
                if inertial is not None:
                    raise MJCFError(f"{what}: more than one <inertial>")
                inertial = (item, frame)
            elif t == "body":
                children.append((item, frame, icls))
            elif t == "site":
                self._site(item, name, frame, icls)
            elif t in IGNORED_IN_BODY:
                continue
            elif t in ("composite", "flexcomp", "plugin", "replicate"):
                raise MJCFError(f"{what}: <{t}> is not supported")
            else:
                raise MJCFError(f"{what}: unknown element <{t}>")
        if a.get("mocap", "false") not in ("true", "false"):
            raise MJCFError(f"{what}: mocap must be true or false, got {a['mocap']!r}")
        mocap = a.get("mocap", "false") == "true"
        if mocap and (parent != "world" or joints):
            raise MJCFError(f"mocap {what} is not a fixed child of the world (MuJoCo refuses it too)")
        mass, com, inertia = self._inertia(name, inertial, geoms)
        body = dict(mass=mass, com=com, inertia=inertia, gravcomp=gravcomp, mocap=mocap)
        self.bodies.append(body)
        last = self._joints(name, parent, R, p, joints, body, top)
        self.builder_name[name] = last
        if top and not joints:
            self.static_top.add(name)
        if self._simple_sliders(joints, children, top or parent in self.static_top):
            self.simple_bodies.append((last, body, self.body_joints[name]))
        for child, frame, icls in children:
            self._body(child, last, frame[0], frame[1], icls)

    def _simple_sliders(self, joints, children, static_parent):
        """Whether MuJoCo's compiler makes the body "simple" with slide joints only (its
        ``body_simple`` 2): its inertial frame is its body frame, it has no child bodies, its parent is
        the world or a jointless child of the world, and its joints are slides at its origin along a
        body axis.  MuJoCo then takes 1/mass as its body_invweight0 and its DoFs' dof_invweight0."""
        if not (joints and self._principal_is_body and not children and static_parent):
            return False
        for el, cls in joints:
            a = self.attrs(el, cls) if el.tag != "freejoint" else {"type": "free"}
            if a.get("type", "hinge") != "slide":
                return False
            axis = C.numbers(a.get("axis", "0 0 1"), 3, "joint axis")
            pos = C.numbers(a.get("pos", "0 0 0"), 3, "joint pos")
            if np.count_nonzero(np.abs(axis) > 1e-14) != 1 or np.any(pos != 0):
                return False
        return True

    def _inertia(self, name, inertial, geoms):
        """(mass, com, 3x3 inertia about the com, body axes) of one MJCF body; sets
        ``_principal_is_body``: whether MuJoCo puts its inertial frame on its body frame (a single
        geom's frame, an ``<inertial>``'s, or principal axes in MuJoCo's order, largest first)."""
        m, c, I, same = self._inertia_frame(name, inertial, geoms)
        self._principal_is_body = same
        return m, c, I

    def _inertia_frame(self, name, inertial, geoms):
        what = f"body {name!r}"
        geom_mass = self.from_geom == "true" or (self.from_geom == "auto" and inertial is None)
        self.body_seq += 1
        for k, (g, (Rf, pf), cls) in enumerate(geoms):
            a = self.attrs(g, cls)
            gname = g.get("name")
            gw = f"{what}: geom {gname!r}" if gname else f"{what}: geom #{k}"
            self.geom_records.append(dict(body=name, a=a, name=gname, what=gw, R=Rf, p=pf,
                                          key=(self.body_seq, k)))
            collides = bool(C.number(a.get("contype", "1"), f"{gw}: contype")
                            or C.number(a.get("conaffinity", "1"), f"{gw}: conaffinity"))
            if collides:
                self.collision_geoms += 1
            # hulls of mesh geoms that collide or give the body mass (purely visual meshes are not read)
            if a.get("type", "sphere") == "mesh" and "mesh" in a and (
                    collides or (geom_mass and not self._zero_mass(a, gw))):
                self._record_mesh_geom(name, a, gname, gw, Rf, pf)
        if inertial is not None and self.from_geom != "true":
            el, (Rf, pf) = inertial
            a = el.attrib
            iwhat = f"{what}: <inertial>"
            if "mass" not in a or "pos" not in a:
                raise MJCFError(f"{iwhat}: needs mass and pos")
            m = C.number(a["mass"], f"{iwhat}: mass")
            c = pf + Rf @ C.numbers(a["pos"], 3, f"{iwhat}: pos")
            R = Rf @ C.quat_to_rot(self.orientation(a, iwhat))
            if "fullinertia" in a:
                xx, yy, zz, xy, xz, yz = C.numbers(a["fullinertia"], 6, f"{iwhat}: fullinertia")
                I = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
            elif "diaginertia" in a:
                I = np.diag(C.numbers(a["diaginertia"], 3, f"{iwhat}: diaginertia"))
            else:   # MuJoCo: no inertia given is zero inertia (a point mass)
                I = np.zeros((3, 3))
            same = _null(c) and (_sorted_diagonal(I) if "fullinertia" in a else _null(R - np.eye(3)))
            return m, c, R @ I @ R.T, same
        if self.from_geom == "false" or (inertial is None and not geoms):
            return 0.0, np.zeros(3), np.zeros((3, 3)), False
        parts, frames = [], []
        for k, (g, (Rf, pf), cls) in enumerate(geoms):
            a = self.attrs(g, cls)
            gname = g.get("name")
            gwhat = f"{what}: geom {gname!r}" if gname else f"{what}: geom #{k}"
            group = int(C.number(a.get("group", "0"), f"{gwhat}: group"))
            if not self.group_range[0] <= group <= self.group_range[1]:
                continue
            if self._zero_mass(a, gwhat):   # mass="0" or density="0": no contribution (MuJoCo's too)
                continue
            parts.append(self._geom_inertia(a, gwhat, Rf, pf))
            frames.append(None if a.get("type", "sphere") == "mesh" else Rf @ self._geom_shape(a, gwhat)[3])
        m = sum(p[0] for p in parts)
        if m <= 0:
            return 0.0, np.zeros(3), np.zeros((3, 3)), False
        c = sum(p[0] * p[1] for p in parts) / m
        I = np.zeros((3, 3))
        for mg, cg, Ig in parts:
            d = cg - c
            I += Ig + mg * ((d @ d) * np.eye(3) - np.outer(d, d))
        if len(parts) == 1:      # MuJoCo: the single geom's frame (a mesh's: its own principal frame)
            same = frames[0] is not None and _null(c) and _null(frames[0] - np.eye(3))
        else:                    # principal axes, largest moment first
            same = _null(c) and _sorted_diagonal(I)
        return m, c, I, same

    @staticmethod
    def _zero_mass(a, gwhat):
        if "mass" in a:
            return C.number(a["mass"], f"{gwhat}: mass") == 0
        return C.number(a.get("density", "1000"), f"{gwhat}: density") == 0

    def _geom_inertia(self, a, gwhat, Rf, pf):
        kind = a.get("type", "sphere")
        if kind == "mesh":
            return self._mesh_geom_inertia(a, gwhat, Rf, pf)
        if kind not in SOLIDS:
            if kind in ("hfield", "sdf", "plane"):
                raise MJCFError(f"{gwhat}: a {kind} geom has no inertia jaxmbd can compute (give the body an "
                                "<inertial>, or the geom mass='0' if it should carry none)")
            raise MJCFError(f"{gwhat}: unknown geom type {kind!r}")
        shell = a.get("shellinertia", "false") == "true"
        if shell and kind == "ellipsoid":
            raise MJCFError(f"{gwhat}: shellinertia on an ellipsoid is not supported (its area has no closed "
                            "form; give the body an <inertial>)")
        kind, size, pos, R = self._geom_shape(a, gwhat)
        vol, unit = (C.shell_area_inertia if shell else C.solid_volume_inertia)(kind, size)
        m = self._geom_mass(a, gwhat, vol)
        Rg = Rf @ R
        return m, pf + Rf @ pos, m * (Rg @ np.diag(unit) @ Rg.T)

    def _geom_shape(self, a, gwhat):
        """(type, size (3,), pos, R) of a primitive geom in its frame, as MuJoCo compiles it (fromto:
        the z axis along from - to, the half-length from its length)."""
        kind = a.get("type", "sphere")
        size = np.zeros(3)
        if "size" in a:
            s = C.numbers(a["size"], None, f"{gwhat}: size")
            size[:min(3, s.size)] = s[:3]
        if "fromto" in a:
            if kind == "sphere":
                raise MJCFError(f"{gwhat}: fromto is not allowed for spheres")
            ft = C.numbers(a["fromto"], 6, f"{gwhat}: fromto")
            d = ft[:3] - ft[3:]
            L = np.linalg.norm(d)
            if L < 1e-12:
                raise MJCFError(f"{gwhat}: fromto has zero length")
            pos = 0.5 * (ft[:3] + ft[3:])
            R = C.quat_to_rot(C.z_to_vec(d))  # MuJoCo aligns z with from - to
            if kind in ("capsule", "cylinder"):
                size[1] = L / 2
            else:  # box, ellipsoid: square cross-section of half-size size[0]
                size = np.array([size[0], size[0], L / 2])
        else:
            pos = C.numbers(a.get("pos", "0 0 0"), 3, f"{gwhat}: pos")
            R = C.quat_to_rot(self.orientation(a, gwhat))
        need = {"sphere": 1, "capsule": 2, "cylinder": 2, "box": 3, "ellipsoid": 3, "plane": 0}[kind]
        if np.any(size[:need] <= 0):
            raise MJCFError(f"{gwhat}: a {kind} needs {need} positive size(s), got {size[:need]}")
        return kind, size, pos, R

    @staticmethod
    def _geom_mass(a, gwhat, measure):
        """The geom's mass: ``mass``, else ``density`` (default 1000) times its volume (area for shells)."""
        if "mass" in a:
            m = C.number(a["mass"], f"{gwhat}: mass")
        else:
            m = C.number(a.get("density", "1000"), f"{gwhat}: density") * measure
        if m < 0:
            raise MJCFError(f"{gwhat}: negative mass")
        return m

    def _mesh_geom_inertia(self, a, gwhat, Rf, pf):
        """A mesh geom's mass, centre and inertia (body frame), as MuJoCo computes them
        for the mesh's inertia mode (mass per unit area for 'shell')."""
        if "mesh" not in a:
            raise MJCFError(f"{gwhat}: a mesh geom needs a mesh attribute")
        if a.get("shellinertia", "false") == "true":
            raise MJCFError(f"{gwhat}: shellinertia on a mesh geom (MuJoCo refuses it too: "
                            "use the mesh's inertia='shell')")
        if "fromto" in a:
            raise MJCFError(f"{gwhat}: fromto is not allowed for mesh geoms")
        measure, com, unit = self._mesh_mass(a["mesh"], gwhat)
        m = self._geom_mass(a, gwhat, measure)
        Rg = Rf @ C.quat_to_rot(self.orientation(a, gwhat))
        pos = C.numbers(a.get("pos", "0 0 0"), 3, f"{gwhat}: pos")
        return m, pf + Rf @ pos + Rg @ com, (m / measure) * (Rg @ unit @ Rg.T)

    def _finish_masses(self):
        """boundmass / boundinertia, then settotalmass, then attach to the plan."""
        for b in self.bodies:
            if self.boundmass > 0 and b["mass"] < self.boundmass:
                b["mass"] = self.boundmass
            if self.boundinertia > 0:
                w, V = np.linalg.eigh(b["inertia"])
                b["inertia"] = V @ np.diag(np.maximum(w, self.boundinertia)) @ V.T
        if self.totalmass > 0:
            total = sum(b["mass"] for b in self.bodies)
            if total <= 0:
                raise MJCFError("settotalmass on a model with no mass")
            s = self.totalmass / total
            for b in self.bodies:
                b["mass"] *= s
                b["inertia"] = b["inertia"] * s
        for kw in self._planned:
            b = kw.pop("body")
            if b is None:
                kw.update(mass=0.0, inertia=None)
                continue
            kw.update(mass=b["mass"], com=b["com"], inertia=b["inertia"], gravcomp=b["gravcomp"])
            if b["mocap"]:
                kw["mocap"] = True
            if b["mass"] <= 0:
                continue
            ev = np.linalg.eigvalsh(0.5 * (b["inertia"] + b["inertia"].T))
            what = f"body {kw['name']!r}"
            if kw["joint"] != "fixed":   # strict (positive definite), as MuJoCo's compiler for moving bodies
                if ev[0] <= 0:
                    raise MJCFError(f"{what}: a moving body with mass needs a positive-definite inertia "
                                    f"(principal moments {ev}); MuJoCo refuses it too")
                continue
            # welded (no joint): MuJoCo accepts a point mass (zero or semi-definite inertia),
            # and still requires the triangle inequality
            scale = max(abs(ev).max(), 1e-300)
            if ev[0] < -1e-9 * scale:
                raise MJCFError(f"{what}: inertia tensor is not positive semi-definite (principal moments {ev})")
            if ev[0] + ev[1] < ev[2] * (1 - 1e-9):
                raise MJCFError(f"{what}: principal moments {ev} violate the triangle inequality (I1 + I2 >= I3)")
            kw["strict_inertia"] = False


def _null(x, tol=1e-10):
    return bool(np.all(np.abs(x) < tol))


def _sorted_diagonal(I, tol=1e-12):
    """Whether MuJoCo's principal axes of I (eigenvalues largest first) are the body's axes."""
    d = np.diag(I)
    scale = max(np.max(np.abs(d)), 1e-300)
    return bool(np.all(np.abs(I - np.diag(d)) <= tol * scale) and d[0] >= d[1] >= d[2])
