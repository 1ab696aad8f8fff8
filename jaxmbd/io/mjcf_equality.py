"""MJCF ``<equality>``: connect and weld constraints as the mechanism's loop constraints (site or body frames), joint
couplings and couplings of fixed tendons as soft rows (:mod:`jaxmbd.forces.joint_coupling`), the others read and
listed.

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

import numpy as np

from . import _common as C
from .mjcf_base import MJCFError, _over


MODELLED = ("connect", "weld", "joint", "tendon")


class Equality:
    def _add_couplings(self):
        """<equality><joint> and <equality><tendon> (fixed tendons): couplings, soft rows as MuJoCo's
        (ModelBuilder.add_joint_coupling, add_tendon_coupling), with the <default><equality> class
        values under the element's own; returns the warning's lines (couplings of spatial tendons)."""
        body_of = {kw.get("joint_name"): kw["name"] for kw in self._planned}
        skipped = []
        for sec in self.root.findall("equality"):
            for el in sec:
                if el.tag == "tendon":
                    skipped += self._add_tendon_coupling(el)
                    continue
                if el.tag != "joint":
                    continue
                cls = el.get("class", "main")
                if cls not in self.classes:
                    raise MJCFError(f"<equality><joint>: unknown default class {cls!r}")
                a = _over(self.classes[cls].get("equality", {}), el.attrib)
                if a.get("active", "true") == "false":
                    continue
                what = f"<equality><joint joint1={a.get('joint1')!r}>"
                if "joint1" not in a:
                    raise MJCFError(f"{what}: joint1 is required")
                joints = [a["joint1"]] + ([a["joint2"]] if "joint2" in a else [])
                for j in joints:
                    if j not in body_of:
                        raise MJCFError(f"{what}: no joint named {j!r}")
                poly = self._leading(a.get("polycoef"), (0.0, 1.0, 0.0, 0.0, 0.0), f"{what}: polycoef")
                solref = self._solref(self._solref_attr(a.get("solref"), f"{what}: solref"))
                solimp = self._solimp(a.get("solimp"), f"{what}: solimp")
                try:
                    self.builder.add_joint_coupling(body_of[joints[0]], body_of[joints[1]] if len(joints) > 1 else None,
                                                    polycoef=poly, solref=solref, solimp=solimp)
                except ValueError as e:
                    raise MJCFError(f"{what}: {e}") from None
        if skipped:
            return [f"tendon equality constraints on spatial tendons ({len(skipped)}: {', '.join(skipped)})"]
        return []

    def _add_tendon_coupling(self, el):
        cls = el.get("class", "main")
        if cls not in self.classes:
            raise MJCFError(f"<equality><tendon>: unknown default class {cls!r}")
        a = _over(self.classes[cls].get("equality", {}), el.attrib)
        if a.get("active", "true") == "false":
            return []
        what = f"<equality><tendon tendon1={a.get('tendon1')!r}>"
        if "tendon1" not in a:
            raise MJCFError(f"{what}: tendon1 is required")
        names = [a["tendon1"]] + ([a["tendon2"]] if "tendon2" in a else [])
        if any(t not in self.fixed_tendons for t in names):
            return [a.get("name") or a["tendon1"]]
        try:
            self.builder.add_tendon_coupling(
                names[0], names[1] if len(names) > 1 else None,
                polycoef=self._leading(a.get("polycoef"), (0.0, 1.0, 0.0, 0.0, 0.0), f"{what}: polycoef"),
                solref=self._solref(self._solref_attr(a.get("solref"), f"{what}: solref")),
                solimp=self._solimp(a.get("solimp"), f"{what}: solimp"))
        except ValueError as e:
            raise MJCFError(f"{what}: {e}") from None
        return []

    def _read_equality(self):
        out = []
        for sec in self.root.findall("equality"):
            for el in sec:
                d = dict(type=el.tag, **el.attrib)
                out.append(d)
        other = [d for d in out if d["type"] not in MODELLED]
        inactive = [d for d in out if d["type"] in MODELLED and d.get("active", "true") == "false"]
        if other:
            kinds = sorted({d["type"] for d in other})
            self.unsupported.append(f"equality constraints ({len(other)}: {', '.join(kinds)}; "
                                    "recorded in MJCFImport.equality)")
        if inactive:
            self.unsupported.append(f"inactive equality constraints ({len(inactive)}; not added)")
        return out

    def _add_loops(self, model):
        """<connect>/<weld> between bodies -> loop constraints, placed at qpos0 as MuJoCo
        places them: connect's anchor is in body1's frame and its body2 point is where
        that anchor is at qpos0; weld (relpose with a zero quaternion, the default)
        keeps the bodies' relative pose at qpos0, or the given relpose (body2 in body1).
        Between sites (site1/site2), as in MuJoCo, the two sites' positions (connect) or
        frames (weld) coincide; torquescale only weights MuJoCo's rows."""
        from ..kinematics import frame_pose
        n = 0
        for d in self.equality:
            kind = d["type"]
            if kind not in ("connect", "weld") or d.get("active", "true") == "false":
                continue
            what = f"<{kind} {' '.join(f'{k}={v!r}' for k, v in d.items() if k != 'type')}>"
            if "site1" in d or "site2" in d:
                # the two sites' positions (connect) or frames (weld) coincide, as in MuJoCo;
                # the constraint need not hold at qpos0
                if "site1" not in d or "site2" not in d:
                    raise MJCFError(f"{what}: site-based constraints need both site1 and site2")
                for key in ("body1", "body2", "anchor", "relpose"):
                    if key in d:
                        raise MJCFError(f"{what}: {key} cannot be combined with site1/site2")
                (b1, p1, R1), (b2, p2, R2) = (self._site_frame(d[k], what) for k in ("site1", "site2"))
                if b1 == b2:
                    raise MJCFError(f"{what}: both sites are on {b1!r}")
                kw = dict(pos_a=p1, pos_b=p2)
                if kind == "weld":
                    kw.update(quat_a=C.rot_to_quat(R1), quat_b=C.rot_to_quat(R2))
                self.builder.add_loop("point" if kind == "connect" else "weld", b1, b2, name=d.get("name"), **kw)
                n += 1
                continue
            if "body1" not in d:
                raise MJCFError(f"{what}: body1 is required")
            b1, b2 = d["body1"], d.get("body2", "world")
            for b in (b1, b2):
                if b != "world" and b not in self.builder._names:
                    raise MJCFError(f"{what}: no body named {b!r}")
            if b1 == b2:
                raise MJCFError(f"{what}: body1 and body2 are the same body")

            def pose(b):
                if b == "world":
                    return np.eye(3), np.zeros(3)
                R, p = frame_pose(model, model.q0, b)
                return np.asarray(R), np.asarray(p)
            (R1, p1), (R2, p2) = pose(b1), pose(b2)
            if kind == "connect":
                if "anchor" not in d:
                    raise MJCFError(f"{what}: anchor is required")
                anchor = C.numbers(d["anchor"], 3, f"{what} anchor")
                pw = p1 + R1 @ anchor
                self.builder.add_loop("point", b1, b2, pos_a=anchor, pos_b=R2.T @ (pw - p2),
                                      name=d.get("name"))
            else:
                rel = C.numbers(d.get("relpose", "0 1 0 0 0 0 0"), 7, f"{what} relpose")
                if np.any(rel[3:] != 0):
                    qa = rel[3:] / np.linalg.norm(rel[3:])
                    pa = rel[:3]
                else:   # body2's frame expressed in body1's, at qpos0
                    qa, pa = C.rot_to_quat(R1.T @ R2), R1.T @ (p2 - p1)
                self.builder.add_loop("weld", b1, b2, pos_a=pa, quat_a=qa, name=d.get("name"))
            n += 1
        return n

