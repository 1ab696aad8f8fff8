"""MJCF ``<tendon>``: fixed tendons (their joints and coefficients, ``stiffness``, ``damping``,
``springlength``, ``range`` with ``limited`` and ``solreflimit``/``solimplimit``, ``frictionloss``
with ``solreffriction``/``solimpfriction``, and the ``<default><tendon>`` class values) into the builder
(:mod:`jaxmbd.forces.tendon`); spatial tendons and a limit ``margin`` are named in the warning.

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

from . import _common as C
from .mjcf_base import MJCFError, _over


class Tendons:
    def _add_tendons(self):
        """Fixed tendons into the builder (their names in ``self.fixed_tendons``, for the actuators'
        tendon transmissions); returns the warning's lines."""
        body_of = {kw.get("joint_name"): kw["name"] for kw in self._planned}
        spatial, margins, penalty = [], [], []
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
                if lim not in ("true", "false", "auto"):
                    raise MJCFError(f"{what}: limited={lim!r}: expected true, false or auto")
                if lim == "auto" and "range" in a and not self.autolimits:
                    raise MJCFError(f"{what}: range without limited; set <compiler autolimits='true'> or "
                                    "limited explicitly (as MuJoCo requires)")
                rng = C.numbers(a.get("range", "0 0"), 2, f"{what}: range")
                if lim == "true" and not rng[0] < rng[1]:
                    raise MJCFError(f"{what}: a limited tendon needs range lower < upper")
                limited = (lim == "true" or (lim == "auto" and "range" in a and rng[0] < rng[1])) and self.limits_on
                if limited and num("margin") != 0:
                    margins.append(name)
                fl = num("frictionloss") if self.flags.get("frictionloss") != "disable" else 0.0
                if self.law == "penalty" and (limited or fl > 0):     # soft rows only
                    penalty.append(name)
                    limited, fl = False, 0.0
                try:
                    self.builder.add_fixed_tendon(
                        name, joints, coef, stiffness=num("stiffness"), damping=num("damping"), springlength=sl,
                        range=rng if limited else None,
                        solref_limit=self._solref(self._solref_attr(a.get("solreflimit"), f"{what}: solreflimit")),
                        solimp_limit=self._solimp(a.get("solimplimit"), f"{what}: solimplimit"),
                        frictionloss=fl,
                        solref_friction=self._solref(self._solref_attr(a.get("solreffriction"),
                                                                       f"{what}: solreffriction")),
                        solimp_friction=self._solimp(a.get("solimpfriction"), f"{what}: solimpfriction"))
                except ValueError as e:
                    raise MJCFError(f"{what}: {e}") from None
                self.fixed_tendons.add(name)
        notes = []
        for label, names in (("spatial tendons", spatial), ("tendon limit margins", margins),
                             ("tendon limits and friction loss under law='penalty'", penalty)):
            if names:
                notes.append(f"{label} ({len(names)}: {', '.join(names)})")
        return notes
