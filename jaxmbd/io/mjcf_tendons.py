"""MJCF ``<tendon>``: fixed tendons (their joints and coefficients, ``stiffness``, ``damping``,
``springlength``, with the ``<default><tendon>`` class values) into the builder
(:mod:`jaxmbd.forces.tendon`); what jaxmbd does not model of them (spatial tendons, tendon limits,
tendon friction loss) is named in the warning.

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

from . import _common as C
from .mjcf_base import MJCFError, _over


class Tendons:
    def _add_tendons(self):
        """Fixed tendons into the builder (their names in ``self.fixed_tendons``, for the actuators'
        tendon transmissions); returns the warning's lines."""
        body_of = {kw.get("joint_name"): kw["name"] for kw in self._planned}
        spatial, limited, friction = [], [], []
        for sec in self.root.findall("tendon"):
            for el in sec:
                name = el.get("name")
                what = f"<tendon><{el.tag} name={name!r}>"
                if el.tag == "spatial":
                    spatial.append(name or "(unnamed)")
                    continue
                if el.tag != "fixed":
                    raise MJCFError(f"{what}: unknown tendon element")
                cls = el.get("class", "main")
                if cls not in self.classes:
                    raise MJCFError(f"{what}: unknown default class {cls!r}")
                a = _over(self.classes[cls].get("tendon", {}), el.attrib)
                if not name:
                    raise MJCFError(f"{what}: jaxmbd needs the fixed tendon's name")
                joints, coef = [], []
                for j in el:
                    if j.tag != "joint":
                        raise MJCFError(f"{what}: a fixed tendon holds <joint> elements, not <{j.tag}>")
                    jn = j.get("joint")
                    if jn not in body_of:
                        raise MJCFError(f"{what}: no joint named {jn!r}")
                    joints.append(body_of[jn])
                    coef.append(C.number(j.get("coef", "1"), f"{what}: coef"))
                num = lambda k: C.number(a.get(k, "0"), f"{what}: {k}")  # noqa: E731
                sl = None
                if "springlength" in a:
                    sl = C.numbers(a["springlength"], None, f"{what}: springlength")
                    if sl.size == 1 and sl[0] == -1 or sl.size == 2 and sl[0] == -1 and sl[1] == -1:
                        sl = None      # MuJoCo's "from qpos0"
                lim = a.get("limited", "auto")
                if lim == "true" or (lim == "auto" and "range" in a and self.autolimits):
                    limited.append(name)
                if num("frictionloss") > 0:
                    friction.append(name)
                try:
                    self.builder.add_fixed_tendon(name, joints, coef, stiffness=num("stiffness"),
                                                  damping=num("damping"), springlength=sl)
                except ValueError as e:
                    raise MJCFError(f"{what}: {e}") from None
                self.fixed_tendons.add(name)
        notes = []
        for label, names in (("spatial tendons", spatial), ("tendon limits", limited),
                             ("tendon friction loss", friction)):
            if names:
                notes.append(f"{label} ({len(names)}: {', '.join(names)})")
        return notes
