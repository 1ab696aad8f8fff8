"""MJCF collision and visual geoms: ``<geom>``, ``<contact><pair>`` and ``<exclude>`` as the builder's geoms, pairs and excludes, every geom as a visual, and the warning's lines about contact options and flags.

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

import numpy as np

from ..contact import geometry as _geometry
from . import _common as C
from ..mujoco_defaults import FRICTION, GEOM_TYPES, PAIR_FRICTION
from .mjcf_base import MJCFError


class Geoms:
    def _add_contacts(self):
        """The collision geoms (every geom with a nonzero contype or conaffinity, and every geom a
        <pair> names), <contact><pair> and <exclude>, as ModelBuilder geoms, pairs and excludes
        (jaxmbd.forces.contact; MuJoCo's geom ids name unnamed geoms ``geom<id>``).  A mesh geom
        collides as the convex hull of its vertices (as MuJoCo's do), an hfield geom as its grid's
        prisms (:mod:`jaxmbd.contact.hfield`).  SDF geoms,
        meshes jaxmbd cannot read, pair types the narrow phase lacks, gaps and anisotropic pair
        friction are listed in the warning."""
        recs = sorted(self.geom_records, key=lambda r: r["key"])
        for i, r in enumerate(recs):
            r["id_name"] = r["name"] or f"geom{i}"
        named = {r["id_name"]: r for r in recs}
        pairs, excludes = [], []
        for sec in self.root.findall("contact"):
            for el in sec:
                if el.tag == "pair":
                    a = self.attrs(el, el.get("class", "main"))
                    pw = f"<pair {a.get('geom1')!r} {a.get('geom2')!r}>"
                    for key in ("geom1", "geom2"):
                        if a.get(key) not in named:
                            raise MJCFError(f"{pw}: {key} {a.get(key)!r} is not a geom")
                    pairs.append((a, pw))
                elif el.tag == "exclude":
                    for key in ("body1", "body2"):
                        if el.get(key) not in self.builder_name:
                            raise MJCFError(f"<exclude>: {key} {el.get(key)!r} is not a body")
                    excludes.append((self.builder_name[el.get("body1")], self.builder_name[el.get("body2")]))
                else:
                    raise MJCFError(f"<contact>: unknown element <{el.tag}>")
        in_pair = {a[k] for a, _ in pairs for k in ("geom1", "geom2")}
        skipped, gaps = {}, []
        used = set()
        for r in recs:
            a, gw = r["a"], r["what"]
            collides = bool(C.number(a.get("contype", "1"), f"{gw}: contype")
                            or C.number(a.get("conaffinity", "1"), f"{gw}: conaffinity"))
            if not (collides or r["id_name"] in in_pair):
                continue
            kind = a.get("type", "sphere")
            if kind not in GEOM_TYPES + ("sdf",):
                raise MJCFError(f"{gw}: unknown geom type {kind!r}")
            hull = self._hull(a["mesh"], gw) if kind == "mesh" and "mesh" in a else None
            if kind not in GEOM_TYPES or (
                    "mesh" in a and kind != "mesh") or (kind == "mesh" and hull is None):
                skipped[kind] = skipped.get(kind, 0) + 1
                continue
            elevation = None
            if kind == "hfield":
                elevation, size = self._hfield_of(a, gw)
                pos = C.numbers(a.get("pos", "0 0 0"), 3, f"{gw}: pos")
                R = C.quat_to_rot(self.orientation(a, gw))
                hullvert = None
            elif kind == "mesh":     # the convex hull of its vertices in the geom frame
                try:
                    _geometry.make_mesh(hull)
                except ValueError:
                    skipped["mesh (flat: no hull with volume)"] = skipped.get("mesh (flat: no hull with volume)", 0) + 1
                    continue
                size, pos = np.zeros(3), C.numbers(a.get("pos", "0 0 0"), 3, f"{gw}: pos")
                R = C.quat_to_rot(self.orientation(a, gw))
                hullvert = self.meshes[a["mesh"]].get("maxhullvert")
                hullvert = None if hullvert is None else int(C.number(hullvert, f"{gw}: maxhullvert"))
            else:
                kind, size, pos, R = self._geom_shape(a, gw)
            num = lambda key, d: C.numbers(a.get(key, d), None, f"{gw}: {key}")  # noqa: E731
            fr = num("friction", "1 0.005 0.0001")
            fr = np.concatenate([fr, FRICTION[len(fr):]])[:3]
            if C.number(a.get("gap", "0"), f"{gw}: gap"):
                gaps.append(r["id_name"])
            solref = self._solref_attr(a.get("solref"), f"{gw}: solref")
            self.builder.add_geom(
                self.builder_name[r["body"]], kind,
                size if kind == "hfield" else size[:self.builder.GEOM_SIZES.get(kind, 0)],
                vertices=hull, elevation=elevation,
                maxhullvert=hullvert if kind == "mesh" else None,
                pos=r["p"] + r["R"] @ pos, quat=C.rot_to_quat(r["R"] @ R), name=r["id_name"],
                contype=int(C.number(a.get("contype", "1"), gw)), conaffinity=int(C.number(a.get("conaffinity", "1"), gw)),
                condim=int(C.number(a.get("condim", "3"), f"{gw}: condim")), friction=fr, solref=solref,
                solimp=self._solimp(a.get("solimp"), f"{gw}: solimp"),
                margin=C.number(a.get("margin", "0"), f"{gw}: margin"),
                priority=int(C.number(a.get("priority", "0"), f"{gw}: priority")),
                solmix=C.number(a.get("solmix", "1"), f"{gw}: solmix"))
            used.add(r["id_name"])
        for a, pw in pairs:
            if a["geom1"] not in used or a["geom2"] not in used:
                skipped["pair with an SDF geom"] = skipped.get("pair with an SDF geom", 0) + 1
                continue
            fr = C.numbers(a.get("friction", "1 1 0.005 0.0001 0.0001"), None, f"{pw}: friction")
            fr = np.concatenate([fr, PAIR_FRICTION[len(fr):]])[:5]
            if fr[0] != fr[1] or fr[3] != fr[4]:
                self.unsupported.append(f"anisotropic pair friction ({pw}; the first of each kind is used)")
            if C.number(a.get("gap", "0"), f"{pw}: gap"):
                gaps.append(pw)
            if np.any(self._leading(a.get("solreffriction"), (0.0, 0.0), f"{pw}: solreffriction") != 0):
                self.unsupported.append(f"pair solreffriction ({pw}; jaxmbd's friction law has no solref)")
            self.builder.add_contact_pair(
                a["geom1"], a["geom2"], condim=int(C.number(a.get("condim", "3"), f"{pw}: condim")),
                friction=(fr[0], fr[2], fr[3]), solref=self._solref_attr(a.get("solref"), f"{pw}: solref"),
                solimp=self._solimp(a.get("solimp"), f"{pw}: solimp"),
                margin=C.number(a.get("margin", "0"), f"{pw}: margin"))
        for b1, b2 in excludes:
            self.builder.exclude_contact(b1, b2)
        self.builder.set_contact_options(filterparent=self.filterparent, skip_unsupported=True,
                                         body_alias=self.chain_alias,
                                         timestep=self.timestep if self.refsafe else None,
                                         capacity=self.contact_capacity, impratio=self.impratio,
                                         law=self.law, rows=self.contact_rows, cone=self.cone)
        if skipped:
            self.unsupported.append("contacts of " + ", ".join(f"{k} geoms ({n})" for k, n in sorted(skipped.items())))
        if gaps:
            self.unsupported.append(f"contact gaps ({', '.join(gaps)})")
        self.unsupported.extend(self._contact_option_notes())

    def _hfield_of(self, a, gw):
        """(normalized elevation, size (4,)) of an hfield geom's asset."""
        if a.get("hfield") not in self.hfields:
            raise MJCFError(f"{gw}: no hfield asset named {a.get('hfield')!r}")
        return self.hfields[a["hfield"]]

    def _add_visuals(self):
        """Every geom, colliding or not, as a visual geom (:meth:`ModelBuilder.add_visual`): its shape
        as MuJoCo compiles it, its colour (the geom's ``rgba`` where it sets one, else its material's,
        else MuJoCo's grey) and its group; a height field as the mesh of its grid.  SDFs and meshes
        jaxmbd cannot read are not drawn."""
        from ..visuals import DEFAULT_RGBA
        materials = {}
        for asset in self.root.findall("asset"):
            for el in asset.findall("material"):
                a = self.attrs(el, el.get("class", "main"))
                if a.get("name") and "rgba" in a:
                    materials[a["name"]] = C.numbers(a["rgba"], 4, f"<material name={a['name']!r}>: rgba")
        recs = sorted(self.geom_records, key=lambda r: r["key"])
        for i, r in enumerate(recs):
            a, gw = r["a"], r["what"]
            kind = a.get("type", "sphere")
            if kind not in GEOM_TYPES:
                continue
            if "rgba" in a:
                rgba = C.numbers(a["rgba"], 4, f"{gw}: rgba")
            elif a.get("material") in materials:
                rgba = materials[a["material"]]
            else:
                rgba = DEFAULT_RGBA
            rgba = np.clip(rgba, 0.0, 1.0)
            group = int(np.clip(C.number(a.get("group", "0"), f"{gw}: group"), 0, 5))
            name = r["name"] or f"geom{i}"
            body = self.builder_name[r["body"]]
            if kind == "hfield":          # the mesh of its grid
                from ..contact.hfield import surface_mesh
                data, hsize = self._hfield_of(a, gw)
                V, F = surface_mesh(data, hsize)
                R = C.quat_to_rot(self.orientation(a, gw))
                pos = C.numbers(a.get("pos", "0 0 0"), 3, f"{gw}: pos")
                key = f"hfield:{a['hfield']}"
                self.builder.add_visual(body, "mesh", pos=r["p"] + r["R"] @ pos, quat=C.rot_to_quat(r["R"] @ R),
                                        rgba=rgba, group=group, name=name, mesh=key,
                                        vertices=V if key not in self.builder._visual_meshes else None, faces=F)
                continue
            if kind == "mesh" or "mesh" in a:
                if kind != "mesh" or "mesh" not in a:
                    continue      # a mesh geom without a mesh, or an hfield/SDF naming one: not drawn
                try:
                    V, F = self._mesh_data(a["mesh"], gw)
                except MJCFError:
                    continue
                if len(V) < 4:
                    continue
                R = C.quat_to_rot(self.orientation(a, gw))
                pos = C.numbers(a.get("pos", "0 0 0"), 3, f"{gw}: pos")
                self.builder.add_visual(body, "mesh", pos=r["p"] + r["R"] @ pos, quat=C.rot_to_quat(r["R"] @ R),
                                        rgba=rgba, group=group, name=name, mesh=a["mesh"],
                                        vertices=V if a["mesh"] not in self.builder._visual_meshes else None,
                                        faces=F if len(F) else None)
                continue
            kind, size, pos, R = self._geom_shape(a, gw)
            need = self.builder.GEOM_SIZES.get(kind, 2)
            self.builder.add_visual(body, kind, size[:need] if kind != "plane" else np.maximum(size[:2], 0.0),
                                    pos=r["p"] + r["R"] @ pos, quat=C.rot_to_quat(r["R"] @ R), rgba=rgba,
                                    group=group, name=name)

    def _contact_option_notes(self):
        """Warning lines for the options that change MuJoCo's contact forces and that jaxmbd's
        contact law does not take (they matter only where something collides)."""
        opt, out = self.opt, []
        if not (getattr(self.builder, "_geoms", None) or getattr(self.builder, "_pairs", None)):
            return out
        if self.override:
            given = [f"{k}={opt[k]!r}" for k in ("o_margin", "o_solref", "o_solimp", "o_friction") if k in opt]
            out.append("<flag override='enable'> (contact parameter override"
                       + (f": {', '.join(given)})" if given else ")"))
        return out

    def _flag_notes(self):
        """Warning lines for the ``<flag>`` settings that change MuJoCo's dynamics and that the loader does
        not apply (gravity, contact, limit, constraint (for contacts and limits), refsafe, filterparent,
        override, actuation and clampctrl are applied)."""
        out = []
        loops = any(d["type"] in ("connect", "weld") and d.get("active", "true") != "false" for d in self.equality)
        kept = {("spring", "disable"): "joint stiffness is kept", ("damper", "disable"): "joint damping is kept",
                ("sleep", "enable"): "no body sleeps", ("speculative", "enable"): None, ("ipc", "enable"): None}
        if loops:
            kept.update({("equality", "disable"): "connect/weld constraints are kept",
                         ("constraint", "disable"): "connect/weld constraints are kept"})
        for (k, v), why in kept.items():
            if self.flags.get(k) == v:
                out.append(f"<flag {k}='{v}'>" + (f" ({why})" if why else ""))
        return out
