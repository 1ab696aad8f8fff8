"""MJCF ``<tendon>``: fixed tendons (their joints and coefficients, ``stiffness``, ``damping``,
``springlength``, ``range`` with ``limited`` and ``solreflimit``/``solimplimit``, ``frictionloss``
with ``solreffriction``/``solimpfriction``, and the ``<default><tendon>`` class values) into the builder
(:mod:`jaxmbd.forces.tendon`); spatial tendons (sites, wrapping spheres and cylinders, pulleys,
``stiffness``, ``damping``, ``springlength``, ``range`` and ``frictionloss`` as on a fixed tendon:
:mod:`jaxmbd.forces.spatial_tendon`); a limit ``margin`` is named in the warning.

A part of the MJCF compiler (:mod:`jaxmbd.io.mjcf`): a mixin of its ``_Compiler``, whose state it shares."""

from __future__ import annotations

from . import _common as C
from .mjcf_base import MJCFError, _over


class Tendons:
    def _add_tendons(self):
        """Fixed and spatial tendons into the builder (their names in ``self.fixed_tendons`` and
        ``self.spatial_tendons``, for the actuators' tendon transmissions); returns the warning's lines."""
        body_of = {kw.get("joint_name"): kw["name"] for kw in self._planned}
        margins, penalty = [], []
        for sec in self.root.findall("tendon"):
            for el in sec:
                name = el.get("name")
                what = f"<tendon><{el.tag} name={name!r}>"
                if el.tag == "spatial":
                    self._add_spatial(el, name, what, margins, penalty)
                    continue
                if el.tag != "fixed":
                    raise MJCFError(f"{what}: unknown tendon element")
                a = self._tendon_attrs(el, name, what, "fixed")
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
                sl = _springlength(a, what)
                rows = self._tendon_rows(a, name, what, margins, penalty)
                try:
                    self.builder.add_fixed_tendon(name, joints, coef, stiffness=num("stiffness"),
                                                  damping=num("damping"), springlength=sl, **rows)
                except ValueError as e:
                    raise MJCFError(f"{what}: {e}") from None
                self.fixed_tendons.add(name)
        notes = []
        for label, names in (("tendon limit margins", margins),
                             ("tendon limits and friction loss under law='penalty'", penalty)):
            if names:
                notes.append(f"{label} ({len(names)}: {', '.join(names)})")
        return notes

    def _tendon_attrs(self, el, name, what, kind):
        """A tendon element's attributes over its default class's; it must be named."""
        cls = el.get("class", "main")
        if cls not in self.classes:
            raise MJCFError(f"{what}: unknown default class {cls!r}")
        if not name:
            raise MJCFError(f"{what}: jaxmbd needs the {kind} tendon's name")
        return _over(self.classes[cls].get("tendon", {}), el.attrib)

    def _tendon_rows(self, a, name, what, margins, penalty):
        """add_fixed_tendon / add_spatial_tendon keywords of a tendon's limit and friction loss, as
        MuJoCo reads them (a limit's margin noted in ``margins``; under the penalty law, which has
        no soft rows, the tendon noted in ``penalty`` and its rows left out)."""
        num = lambda k: C.number(a.get(k, "0"), f"{what}: {k}")  # noqa: E731
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
        return dict(range=rng if limited else None,
                    solref_limit=self._solref(self._solref_attr(a.get("solreflimit"), f"{what}: solreflimit")),
                    solimp_limit=self._solimp(a.get("solimplimit"), f"{what}: solimplimit"),
                    frictionloss=fl,
                    solref_friction=self._solref(self._solref_attr(a.get("solreffriction"),
                                                                   f"{what}: solreffriction")),
                    solimp_friction=self._solimp(a.get("solimpfriction"), f"{what}: solimpfriction"))

    def _add_spatial(self, el, name, what, margins, penalty):
        """A spatial tendon into the builder (:meth:`jaxmbd.ModelBuilder.add_spatial_tendon`): its
        sites, wrapping spheres and cylinders (with side sites) and pulleys, stiffness, damping,
        springlength, range and friction loss (see :meth:`_tendon_rows`)."""
        a = self._tendon_attrs(el, name, what, "spatial")
        geoms = {g["name"]: g for g in self.geom_records if g.get("name")}
        path = []
        for item in el:
            if item.tag == "site":
                path.append(item.get("site"))
            elif item.tag == "pulley":
                path.append(("pulley", C.number(item.get("divisor", "1"), f"{what}: pulley divisor")))
            elif item.tag == "geom":
                g = geoms.get(item.get("geom"))
                if g is None:
                    raise MJCFError(f"{what}: no geom named {item.get('geom')!r}")
                kind, size, pos, R = self._geom_shape(g["a"], g["what"])
                if kind not in ("sphere", "cylinder"):
                    raise MJCFError(f"{what}: a tendon wraps spheres and cylinders, not the {kind} "
                                    f"{item.get('geom')!r} (MuJoCo refuses it too)")
                Rb, pb = g["R"] @ R, g["p"] + g["R"] @ pos
                path.append(dict(wrap=kind, body=self.builder_name.get(g["body"], g["body"]), radius=size[0],
                                 pos=pb, quat=C.rot_to_quat(Rb), sidesite=item.get("sidesite")))
            else:
                raise MJCFError(f"{what}: unknown element <{item.tag}>")
        num = lambda k: C.number(a.get(k, "0"), f"{what}: {k}")  # noqa: E731
        sl = _springlength(a, what)
        self._add_sites()
        rows = self._tendon_rows(a, name, what, margins, penalty)
        try:
            self.builder.add_spatial_tendon(name, path, stiffness=num("stiffness"), damping=num("damping"),
                                            springlength=sl, **rows)
        except ValueError as e:
            raise MJCFError(f"{what}: {e}") from None
        self.spatial_tendons.add(name)


def _springlength(a, what):
    """A tendon's springlength (one value or a dead band), or None for MuJoCo's "-1": the length at qpos0."""
    if "springlength" not in a:
        return None
    sl = C.numbers(a["springlength"], None, f"{what}: springlength")
    if sl.size == 1 and sl[0] == -1 or sl.size == 2 and sl[0] == -1 and sl[1] == -1:
        return None
    return sl
