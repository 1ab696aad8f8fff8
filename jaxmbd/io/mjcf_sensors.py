"""MJCF ``<sensor>``: the sensors jaxmbd models (:mod:`jaxmbd.sensors`) into the builder, in the
file's order; the others keep their slots (zeros) so that ``sensordata`` has MuJoCo's layout, and are
named in the warning (plugin, contact and tactile sensors, whose size depends on what jaxmbd does not
read, are left out and named)."""

from __future__ import annotations

import numpy as np

from . import _common as C
from .mjcf_base import MJCFError
from .. import sensors as S

# the sizes of the kinds jaxmbd keeps only as a slot (MuJoCo's mjSENS_* dimensions)
SLOTS = {"magnetometer": 3, "rangefinder": 1, "camprojection": 2,
         "jointlimitpos": 1, "jointlimitvel": 1, "jointlimitfrc": 1, "tendonactuatorfrc": 1, "tendonlimitpos": 1, "tendonlimitvel": 1, "tendonlimitfrc": 1,
         "framelinacc": 3, "frameangacc": 3, "clock": 1, "e_potential": 1, "e_kinetic": 1,
         "distance": 1, "normal": 3, "fromto": 6, "insidesite": 1}
OBJ_ATTR = {**{k: "joint" for k in S.JOINT_KINDS}, **{k: "actuator" for k in S.ACTUATOR_KINDS},
            **{k: "site" for k in S.SITE_KINDS}, **{k: "body" for k in S.SUBTREE_KINDS},
            **{k: "tendon" for k in S.TENDON_KINDS}}


class Sensors:
    """The ``<sensor>`` stage of the compiler (a mixin of ``_Compiler``)."""

    def _read_sensors(self):
        """Sites and sensors into the builder; returns the warning's lines."""
        sensors = [el for sec in self.root.findall("sensor") for el in sec]
        if not sensors:
            return []
        self._add_sites()
        welded = {kw["name"] for kw in self._planned if kw["joint"] == "fixed"}
        kept, unsized = {}, []
        for k, el in enumerate(sensors):
            kind, a = el.tag, el.attrib
            name = a.get("name")
            what = f"sensor {name!r} <{kind}>" if name else f"sensor #{k} <{kind}>"
            cutoff = C.number(a.get("cutoff", "0"), f"{what}: cutoff")
            if cutoff < 0:
                raise MJCFError(f"{what}: cutoff must be >= 0")
            why = self._sensor_gap(kind, a, welded, getattr(self, "fixed_tendons", ()),
                                   getattr(self, "spatial_tendons", ()))
            if why is None and kind in ("force", "torque") and a.get("site") in self.sites \
                    and self.sites[a["site"]][1] in welded | {"world"}:
                why = "force and torque at sites of bodies without joints"
            if why is not None:
                if kind == "user":
                    dim = int(C.number(a.get("dim", "0"), f"{what}: dim"))
                    if dim <= 0:
                        raise MJCFError(f"{what}: dim must be positive (MuJoCo requires it)")
                elif kind in SLOTS or kind in S.DIMS:
                    dim = SLOTS.get(kind) or S.DIMS[kind]
                else:
                    unsized.append(name or f"#{k}")
                    continue
                kept.setdefault(why, []).append(name or f"#{k}")
                self.builder.add_sensor(kind, name=name, cutoff=cutoff, placeholder_dim=dim)
                continue
            kw = dict(name=name, cutoff=cutoff)
            if kind in OBJ_ATTR:
                key = OBJ_ATTR[kind]
                if key not in a:
                    raise MJCFError(f"{what}: needs {key}=")
                target = a[key]
                kw[key] = self.builder_name.get(target, target) if key == "body" else target
            else:
                kw.update(obj=self._sensor_obj(a["objtype"], a["objname"]), objtype=a["objtype"])
                if "refname" in a:
                    kw.update(ref=self._sensor_obj(a["reftype"], a["refname"]), reftype=a["reftype"])
            try:
                self.builder.add_sensor(kind, **kw)
            except ValueError as e:
                raise MJCFError(str(e)) from None
        notes = [f"sensors kept as zeros in sensordata ({why}: {', '.join(v)})" for why, v in kept.items()]
        if unsized:
            notes.append("sensors whose size jaxmbd cannot know, left out (sensordata's layout differs from "
                         f"MuJoCo's from the first of them on: {', '.join(unsized)})")
        return notes

    def _add_sites(self):
        """Every named site into the builder, once (what sensors and spatial tendons read)."""
        if getattr(self, "_sites_added", False):
            return
        self._sites_added = True
        for sname in self.sites:
            body, p, R = self._site_frame(sname, f"site {sname!r}")
            kind, size = self._site_shape(sname)
            self.builder.add_site(sname, self.builder_name.get(body, body), pos=p, quat=C.rot_to_quat(R),
                                  type=kind, size=size)

    def _site_shape(self, name):
        """(type, size (3,)) of a named site as MuJoCo compiles it: sizes given in part completed with
        0.005, a ``fromto``'s half-length as the size of a capsule or cylinder."""
        el, _, _, cls = self.sites[name]
        a = self.attrs(el, cls)
        what = f"site {name!r}"
        kind = a.get("type", "sphere")
        if kind not in S.SITE_TYPES:
            raise MJCFError(f"{what}: unknown type {kind!r} (expected one of {', '.join(S.SITE_TYPES)})")
        size = np.full(3, 0.005)
        if "size" in a:
            got = C.numbers(a["size"], None, f"{what}: size")
            if not 1 <= got.size <= 3:
                raise MJCFError(f"{what}: size takes 1 to 3 numbers, got {a['size']!r}")
            size[:got.size] = got
        if "fromto" in a and kind in ("capsule", "cylinder", "box", "ellipsoid"):
            ft = C.numbers(a["fromto"], 6, f"{what}: fromto")
            size[2 if kind in ("box", "ellipsoid") else 1] = 0.5 * np.linalg.norm(ft[3:] - ft[:3])
        return kind, size

    def _sensor_obj(self, objtype, name):
        return self.builder_name.get(name, name) if objtype in ("xbody", "body") else name

    @staticmethod
    def _sensor_gap(kind, a, welded, fixed, spatial=()):
        """Why a sensor is kept only as a slot, or None when jaxmbd models it."""
        if kind not in S.DIMS:
            return f"<{kind}> not modelled"
        if kind in S.FRAME_KINDS:
            for t, n in (("objtype", "objname"), ("reftype", "refname")):
                if t == "objtype" and (t not in a or n not in a):
                    raise MJCFError(f"<{kind}>: needs objtype and objname")
                if n in a and a.get(t) not in S.OBJTYPES:
                    return f"frames of objtype {a.get(t)!r}"
                if n in a and a[t] == "body" and kind in S.ORIENTED:
                    return "orientations of a body's inertial frame"
            if "refname" in a and kind not in ("framepos",) + S.ORIENTED:
                return "velocities relative to a reference frame"
        if kind in S.SUBTREE_KINDS and a.get("body") in welded:
            return "subtrees of bodies without joints"
        if kind in S.TENDON_KINDS and a.get("tendon") not in fixed and a.get("tendon") not in spatial:
            return "tendons jaxmbd does not model"
        return None
