"""MJCF ``<attach>``: other models composed into this one (their bodies, defaults, assets, actuators and keyframes, under a prefix), as MuJoCo's model composition does.

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import numpy as np

from . import _common as C
from . import mjcf_actuator as _actuators
from .mjcf_base import ATTACHED, MJCFError, ORIENTATIONS


class Attach:
    def _attach_models(self):
        """Replace every ``<attach model body prefix>`` by the named body of the ``<asset><model>`` file
        (its whole world body's content where ``body`` is omitted), as MuJoCo composes models: the
        attached elements keep the values their own file gives them (its defaults, its compiler's
        angle unit, Euler sequence, mesh directory and fit, its meshes and materials), every name
        (bodies, joints, geoms, sites, meshes, materials, actuators, pairs, equalities) takes the
        prefix, and the model's actuators, contact pairs, exclusions and connect/weld constraints
        whose joints, geoms, bodies and sites all come along are added."""
        models = {}
        for asset in self.root.findall("asset"):
            for el in asset.findall("model"):
                name, f = el.get("name"), el.get("file")
                if not f:
                    raise MJCFError(f"<model name={name!r}>: needs a file")
                path = self._asset_path(f, "")
                child, _, _ = C.parse_xml(path, "MJCF")
                name = name or child.get("model") or os.path.splitext(os.path.basename(f))[0]
                models[name] = (child, os.path.dirname(os.path.abspath(path)))
        parents = [p for p in self.root.iter() if any(c.tag == "attach" for c in p)]
        if not parents:
            return
        self.classes.setdefault(ATTACHED, {})
        done = {}
        for parent in parents:
            out = []
            for el in list(parent):
                if el.tag != "attach":
                    out.append(el)
                    continue
                mname, prefix = el.get("model"), el.get("prefix")
                what = f"<attach model={mname!r}>"
                if mname not in models:
                    raise MJCFError(f"{what}: no <asset><model> named {mname!r}")
                if prefix is None:
                    raise MJCFError(f"{what}: needs a prefix (as in MuJoCo)")
                if mname not in done:
                    root, base = models[mname]
                    try:
                        done[mname] = type(self)(root, base, self.contact_capacity, self.law, self.contact_rows)
                    except MJCFError as e:
                        raise MJCFError(f"{what}: {e}") from None
                out.extend(self._attached(done[mname], el.get("body"), prefix, what))
            parent[:] = out

    def _attached(self, child, body, prefix, what):
        """The elements one <attach> stands for, resolved in the attached model ``child``."""
        for key, default in (("inertiafromgeom", "auto"), ("inertiagrouprange", "0 5"), ("boundmass", "0"),
                             ("boundinertia", "0"), ("settotalmass", "-1"), ("autolimits", "true")):
            mine, theirs = self.compiler.get(key, default), child.compiler.get(key, default)
            if mine.split() != theirs.split() and not (key not in ("inertiafromgeom", "autolimits") and np.array_equal(
                    C.numbers(mine, None, key), C.numbers(theirs, None, key))):
                raise MJCFError(f"{what}: <compiler {key}> is {theirs!r} in the attached model and {mine!r} "
                                "here; jaxmbd applies one setting to the whole model (set it alike in both)")
        wb = [w for w in child.root.findall("worldbody")]
        if body is None:
            tops = [(c, "main") for w in wb for c in w]
        else:
            found = [b for w in wb for b in w.iter("body") if b.get("name") == body]
            if not found:
                raise MJCFError(f"{what}: the attached model has no body named {body!r}")
            tops = [(found[0], self._class_at(child, found[0]))]
        bodies, joints, geoms, sites = set(), set(), set(), set()
        moved_joints = {}     # id of a joint element that came along -> its name in the attached model
        conv = 1.0 if child.deg == self.deg else (math.pi / 180.0 if child.deg else 180.0 / math.pi)

        def oriented(a, ewhat):
            if any(k in a for k in ORIENTATIONS):
                q = child.orientation(a, ewhat)
                a = {k: v for k, v in a.items() if k not in ORIENTATIONS}
                a["quat"] = " ".join(repr(float(x)) for x in q)
            return a

        def copy(el, cls):
            tag, ewhat = el.tag, f"{what}: <{el.tag} name={el.get('name')!r}>"
            kids = None
            if tag == "body":
                a = oriented(dict(el.attrib), ewhat)
                a["childclass"] = ATTACHED
                a.pop("class", None)
                kids = el.get("childclass", cls)
                bodies.add(el.get("name"))
            elif tag == "frame":
                a = oriented(child.attrs(el, cls), ewhat)
                a.update({"class": ATTACHED, "childclass": ATTACHED})
                kids = el.get("childclass", cls)
            elif tag in ("geom", "site", "joint"):
                a = oriented(child.attrs(el, cls), ewhat)
                a["class"] = ATTACHED
                for ref in ("mesh", "material", "hfield"):
                    if ref in a:
                        a[ref] = prefix + a[ref]
                if tag == "joint" and conv != 1.0 and a.get("type", "hinge") in ("hinge", "ball"):
                    for k in ("range", "ref", "springref"):
                        if k in a:
                            a[k] = " ".join(repr(float(x) * conv) for x in C.numbers(a[k], None, f"{ewhat}: {k}"))
                {"geom": geoms, "site": sites, "joint": joints}[tag].add(el.get("name"))
                if tag == "joint":
                    moved_joints[id(el)] = el.get("name")
            elif tag in ("inertial", "freejoint"):
                a = oriented(dict(el.attrib), ewhat)
                if tag == "freejoint":
                    joints.add(el.get("name"))
                    moved_joints[id(el)] = el.get("name")
            else:   # cameras, lights, and what the loader refuses anyway
                a = dict(el.attrib)
            if "name" in a:
                a["name"] = prefix + a["name"]
            new = ET.Element(tag, a)
            if kids is not None:
                new.extend(copy(c, kids) for c in el)
            return new

        out = [copy(el, cls) for el, cls in tops]
        for name, a in child.meshes.items():
            self.meshes.setdefault(prefix + name, a)
        carried = self._attach_sections(child, prefix, dict(body=bodies, joint=joints, geom=geoms, site=sites), what)
        self._attach_keys(child, prefix, moved_joints, carried)
        return out

    def _attach_keys(self, child, prefix, moved_joints, carried):
        """The attached model's keyframes, as MuJoCo merges them: key ``prefix + name`` with the key's
        time, the qpos/qvel of the joints that came along (named ones) and the ctrl of the actuators
        that came along; the rest of the model at qpos0 and zeros (:meth:`_with_keyframes`)."""
        keys = [el for sec in child.root.findall("keyframe") for el in sec if el.tag == "key"]
        if not keys:
            return
        layout = []    # (joint element, nq, nv) in the attached model's qpos order
        sizes = {"free": (7, 6), "ball": (4, 3)}

        def walk(el, cls):
            for c in el:
                if c.tag == "freejoint":
                    layout.append((c, 7, 6))
                elif c.tag == "joint":
                    layout.append((c, *sizes.get(child.attrs(c, cls).get("type", "hinge"), (1, 1))))
                elif c.tag in ("body", "frame"):
                    walk(c, c.get("childclass", cls))
        for w in child.root.findall("worldbody"):
            walk(w, "main")
        for el in keys:
            vec = {k: C.numbers(el.get(k, ""), None, f"attached <key name={el.get('name')!r}>: {k}")
                   for k in ("qpos", "qvel", "ctrl")}
            qpos, qvel, ctrl = {}, {}, {}
            iq = iv = 0
            for j, nq, nv in layout:
                name = moved_joints.get(id(j))
                if name is not None:
                    if vec["qpos"].size >= iq + nq:
                        qpos[prefix + name] = vec["qpos"][iq:iq + nq]
                    if vec["qvel"].size >= iv + nv:
                        qvel[prefix + name] = vec["qvel"][iv:iv + nv]
                iq, iv = iq + nq, iv + nv
            for k, name in carried:
                if name is not None and k < vec["ctrl"].size:
                    ctrl[name] = vec["ctrl"][k]
            self.attached_keys.append(dict(name=None if el.get("name") is None else prefix + el.get("name"),
                                           time=el.get("time", "0"), qpos=qpos, qvel=qvel, ctrl=ctrl))

    @staticmethod
    def _class_at(comp, target):
        """The default class in force at an element of ``comp``'s world body (the nearest childclass)."""
        def find(el, cls):
            for c in el:
                if c is target:
                    return cls
                if c.tag in ("body", "frame"):
                    got = find(c, c.get("childclass", cls))
                    if got is not None:
                        return got
            return None
        for w in comp.root.findall("worldbody"):
            got = find(w, "main")
            if got is not None:
                return got
        return "main"

    def _attach_sections(self, child, prefix, came, what):
        """The attached model's materials (prefixed), and its actuators, contact pairs and exclusions and
        connect/weld constraints whose every reference came along (prefixed)."""
        def section(tag):
            got = self.root.find(tag)
            if got is None:
                got = ET.SubElement(self.root, tag)
            return got

        for asset in child.root.findall("asset"):
            for el in asset.findall("material"):
                a = child.attrs(el, el.get("class", "main"))
                if a.get("name"):
                    a.update(name=prefix + a["name"], **{"class": ATTACHED})
                    section("asset").append(ET.Element("material", a))
        refs = {"joint": "joint", "jointinparent": "joint", "geom1": "geom", "geom2": "geom", "body1": "body",
                "body2": "body", "site1": "site", "site2": "site"}

        def moved(el):
            keys = [k for k in el.attrib if k in refs]
            if not keys or any(el.get(k) not in came[refs[k]] for k in keys):
                return None
            a = dict(el.attrib)
            for k in keys + ["name"]:
                if k in a:
                    a[k] = prefix + a[k]
            return a

        skipped = 0
        actuator_defaults = None
        carried = []     # (index among the attached model's actuators, its name here)
        for k, el in enumerate(e for sec in child.root.findall("actuator") for e in sec):
            a = moved(el)
            if a is None:
                skipped += 1
                continue
            carried.append((k, a.get("name")))
            new = ET.SubElement(section("actuator"), el.tag, a)
            if actuator_defaults is None:
                actuator_defaults = _actuators.read_defaults(child.root)
            self.attached_actuator_defaults[id(new)] = actuator_defaults
        for sec in child.root.findall("contact"):
            for el in sec:
                a = moved(el)
                if a is None:
                    skipped += 1
                    continue
                if el.tag == "pair":
                    own = {k: a[k] for k in a if k in refs or k == "name"}
                    a = dict(child.attrs(el, el.get("class", "main")), **own)
                    a["class"] = ATTACHED
                ET.SubElement(section("contact"), el.tag, a)
        for sec in child.root.findall("equality"):
            for el in sec:
                a = moved(el) if el.tag in ("connect", "weld") else None
                if a is None:
                    skipped += 1
                    continue
                ET.SubElement(section("equality"), el.tag, a)
        extra = sum(len(list(s)) for t in ("tendon", "sensor") for s in child.root.findall(t))
        if skipped or extra:
            self.unsupported.append(f"{what}: {skipped + extra} of the attached model's actuators, contact pairs, "
                                    "equalities, tendons and sensors not carried over (they name elements left "
                                    "behind, or jaxmbd does not model them)")
        return carried
