"""MJCF ``<actuator>``: the actuators of a document, resolved as MuJoCo's
parser and compiler resolve them, added to the model through
:meth:`jaxmbd.ModelBuilder.add_actuator` (see :mod:`jaxmbd.forces.actuator`
for what an actuator computes).

Defaults: every actuator element in a ``<default>`` class (``motor``,
``position``, ``general``, ...) writes to the class's one actuator default,
in MuJoCo's general form (gain and bias types and parameters, gear, ranges),
and a class starts from its parent's.  An actuator element starts from its
class's default and applies its own kind: ``motor`` sets gain 1 and no
bias; ``position`` takes kp (and kv, or dampratio) from the default only
when the element last written there was a ``position`` or a ``general``
(else kp 1, kv 0); ``velocity`` takes kv from a ``velocity`` or ``general``
default (else 1); ``damper`` from a ``damper`` or an affine-gain
``general`` default (else 0); ``general`` takes the default as it is.
Numbers given in part (``gear="2 3"``) replace the leading entries only.
(Observed behaviour of MuJoCo 4.0's parser.)

Modelled: ``motor``, ``position`` (kp, kv, dampratio, inheritrange),
``velocity``, ``damper`` and ``general`` with gaintype fixed/affine, biastype
none/affine and dyntype none, through ``joint`` or ``jointinparent`` on
hinge, slide, ball and free joints, a fixed or spatial ``tendon`` or a ``site``
(without ``refsite``); ``gear``, ``ctrlrange``/``ctrllimited``,
``forcerange``/``forcelimited`` with ``<compiler autolimits>`` (auto: a
range with lo < hi is a limit; without autolimits a range needs its
``*limited`` flag); joint ``actuatorfrcrange``/``actuatorfrclimited`` (hinge,
slide; in a file without actuators there is nothing to clamp);
``<option actuatorgroupdisable>`` and the ``actuation`` and ``clampctrl``
flags.  Anything else (activation dynamics, ``intvelocity``,
``cylinder``, ``muscle``, ``adhesion``, plugins, ``refsite``, slider-crank and
body transmissions) keeps its ctrl slot, so ``ctrl`` has MuJoCo's layout, exerts
no force, and is listed in the loader's warning."""

from __future__ import annotations

import numpy as np

from . import _common as C

UNMODELLED_WHY = {   # why an actuator kind is not modelled, for the loader's warning
    "cylinder": " (its pressure is an activation state, a first-order filter of ctrl: jaxmbd has no activation states)",
    "muscle": " (its activation is a state with its own dynamics: jaxmbd has no activation states)",
    "intvelocity": " (its position target integrates ctrl: an activation state, which jaxmbd does not have)",
    "adhesion": " (its force acts through the contacts of the body's geoms, which jaxmbd's transmissions do not reach)",
}
TAGS = ("motor", "position", "velocity", "damper", "general", "intvelocity", "cylinder", "muscle", "adhesion",
        "plugin")
MODELLED = ("motor", "position", "velocity", "damper", "general")
OTHER_TRANSMISSIONS = ("tendon", "site", "body", "cranksite")
COMPANIONS = {"refsite": "site", "slidersite": "cranksite"}     # attributes that qualify a target


class ActuatorError(ValueError):
    """A malformed actuator (raised as the loader's MJCFError)."""


def _initial():
    return dict(gaintype="fixed", gainprm=np.r_[1.0, np.zeros(9)], biastype="none", biasprm=np.zeros(10),
                dyntype="none", gear=np.r_[1.0, np.zeros(5)], ctrlrange=np.zeros(2), ctrlrange_set=False,
                ctrllimited="auto", forcerange=np.zeros(2), forcerange_set=False, forcelimited="auto",
                group=0, timeconst=0.0, inheritrange=0.0, actdim=-1)


def _copy(p):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.items()}


def _partial(p, key, text, n, what):
    """Numbers given in part replace the leading entries (MuJoCo's reading)."""
    x = C.numbers(text, None, f"{what}: {key}")
    if not 1 <= x.size <= n:
        raise ActuatorError(f"{what}: {key} takes 1 to {n} numbers, got {x.size}")
    p[key][:x.size] = x


def apply(tag, a, p, last, what):
    """The general-form parameters after the element ``tag`` with
    attributes ``a`` is applied to ``p`` (its class's default, last written
    by an element of kind ``last``)."""
    p = _copy(p)
    num = lambda k: C.number(a[k], f"{what}: {k}")  # noqa: E731
    for key, n in (("gear", 6), ("gainprm", 10), ("biasprm", 10)):
        if key in a:
            _partial(p, key, a[key], n, what)
    for key in ("ctrlrange", "forcerange"):
        if key in a:
            p[key] = C.numbers(a[key], 2, f"{what}: {key}")
            p[key + "_set"] = True
    for key in ("ctrllimited", "forcelimited"):
        if key in a:
            if a[key] not in ("true", "false", "auto"):
                raise ActuatorError(f"{what}: {key}={a[key]!r}: expected true, false or auto")
            p[key] = a[key]
    if "group" in a:
        p["group"] = int(num("group"))
    if "actdim" in a:
        p["actdim"] = int(num("actdim"))
    if tag == "general":
        for key in ("gaintype", "biastype", "dyntype"):
            if key in a:
                p[key] = a[key]
    elif tag == "motor":
        p.update(gaintype="fixed", biastype="none", dyntype="none", gainprm=np.r_[1.0, np.zeros(9)],
                 biasprm=np.zeros(10))
    elif tag in ("position", "intvelocity"):
        inherit = last in ("position", "general")
        kp = num("kp") if "kp" in a else (p["gainprm"][0] if inherit else 1.0)
        b2 = p["biasprm"][2] if inherit else 0.0
        if "kv" in a and "dampratio" in a:
            raise ActuatorError(f"{what}: kv and dampratio cannot both be defined")
        if "kv" in a:
            if num("kv") < 0:
                raise ActuatorError(f"{what}: kv cannot be negative")
            b2 = -num("kv")
        if "dampratio" in a:
            if num("dampratio") < 0:
                raise ActuatorError(f"{what}: dampratio cannot be negative")
            b2 = num("dampratio")     # MuJoCo's encoding: a positive biasprm[2] is a damping ratio
        p["gainprm"], p["biasprm"] = np.r_[kp, np.zeros(9)], np.r_[0.0, -kp, b2, np.zeros(7)]
        p.update(gaintype="fixed", biastype="affine", dyntype="none" if tag == "position" else "integrator")
        if "timeconst" in a:
            p["timeconst"] = num("timeconst")
        if p["timeconst"] > 0:
            p["dyntype"] = "filterexact"
        if "inheritrange" in a:
            p["inheritrange"] = num("inheritrange")
    elif tag == "velocity":
        kv = num("kv") if "kv" in a else (p["gainprm"][0] if last in ("velocity", "general") else 1.0)
        p["gainprm"], p["biasprm"] = np.r_[kv, np.zeros(9)], np.r_[0.0, 0.0, -kv, np.zeros(7)]
        p.update(gaintype="fixed", biastype="affine", dyntype="none")
    elif tag == "damper":
        inherit = last == "damper" or (last == "general" and p["gaintype"] == "affine")
        kv = num("kv") if "kv" in a else (-p["gainprm"][2] if inherit else 0.0)
        if kv < 0:
            raise ActuatorError(f"{what}: kv cannot be negative")
        p["gainprm"] = np.r_[0.0, 0.0, -kv, np.zeros(7)]
        p.update(gaintype="affine", biastype="none", dyntype="none", ctrllimited="true")
    else:   # cylinder, muscle, adhesion, plugin: not modelled (listed by the caller)
        p["dyntype"] = tag
    return p


def activations(tag, p):
    """The number of MuJoCo activation states (its ``actuator_actnum``) of an actuator element
    ``tag`` with parameters ``p``: ``actdim`` where given, else 1 for a stateful one (cylinder,
    muscle, a position with timeconst, intvelocity, general with a dyntype), 0 for the others."""
    if p["actdim"] >= 0:
        return p["actdim"]
    if tag in ("cylinder", "muscle"):
        return 1
    if tag == "adhesion":
        return 0
    return int(p["dyntype"] not in ("none", tag))


def read_defaults(root):
    """{class: (kind of the last actuator element written, parameters)}, by
    the class nesting of ``<default>``."""
    out = {"main": (None, _initial())}

    def visit(el, name, inherited):
        last, p = inherited[0], _copy(inherited[1])
        for child in el:
            if child.tag in TAGS:
                p = apply(child.tag, child.attrib, p, last, f"<default class={name!r}> <{child.tag}>")
                last = child.tag
        out[name] = (last, p)
        for child in el:
            if child.tag == "default":
                visit(child, child.get("class"), out[name])

    for el in root.findall("default"):
        visit(el, el.get("class", "main"), out["main"])
    return out


def _limited(flag, rng, given, autolimits, what, label):
    if flag == "true":
        if not rng[0] < rng[1]:
            raise ActuatorError(f"{what}: invalid {label} {rng[0]:g} {rng[1]:g} (lower bound must be below upper)")
        return True
    if flag == "false":
        return False
    if not autolimits:
        if given:
            raise ActuatorError(f"{what}: {label} without {label[:-5]}limited; set <compiler autolimits='true'> "
                                f"or {label[:-5]}limited explicitly (as MuJoCo requires)")
        return False
    return bool(rng[0] < rng[1])


def read(comp, opt, flags):
    """Read every ``<actuator>`` section of the compiler ``comp`` (the MJCF
    loader's state) into ``comp.builder``; returns the warning notes."""
    defaults = read_defaults(comp.root)
    disabled_groups = set()
    if "actuatorgroupdisable" in opt:
        disabled_groups = {int(g) for g in C.numbers(opt["actuatorgroupdisable"], None, "<option actuatorgroupdisable>")}
    off = flags.get("actuation") == "disable"
    clamp = flags.get("clampctrl") != "disable"
    notes, n = {}, 0
    comp.n_act = 0
    for sec in comp.root.findall("actuator"):
        for el in sec:
            what = f"<{el.tag}> {n} ({el.get('name')!r})" if el.get("name") else f"<{el.tag}> {n}"
            n += 1
            if el.tag not in TAGS:
                raise ActuatorError(f"unknown actuator element <{el.tag}>")
            own = getattr(comp, "attached_actuator_defaults", {}).get(id(el), defaults)   # <attach>ed: its model's
            cls = el.get("class", "main")
            if cls not in own:
                raise ActuatorError(f"{what}: unknown default class {cls!r}")
            last, p0 = own[cls]
            p = apply(el.tag, el.attrib, p0, last, what)
            comp.n_act += activations(el.tag, p)
            kw = _one(comp, el, p, what, notes)
            kw["active"] = kw.get("active", True) and not off and p["group"] not in disabled_groups
            if not clamp:
                kw["ctrllimited"] = False
            comp.builder.add_actuator(**kw)
    gc_limited = []
    for name, (jt, a) in comp.joint_attrs.items():
        rng = a.get("actuatorfrcrange")
        what = f"joint {name!r}"
        lim = a.get("actuatorfrclimited", "auto")
        if lim not in ("true", "false", "auto"):
            raise ActuatorError(f"{what}: actuatorfrclimited={lim!r}: expected true, false or auto")
        r = np.zeros(2) if rng is None else C.numbers(rng, 2, f"{what}: actuatorfrcrange")
        if rng is None and lim == "true":
            raise ActuatorError(f"{what}: actuatorfrclimited='true' without an actuatorfrcrange")
        if lim == "true" and not r[0] < r[1]:
            raise ActuatorError(f"{what}: actuatorfrcrange lower bound must be below the upper")
        if lim == "auto" and rng is not None and not comp.autolimits:
            raise ActuatorError(f"{what}: actuatorfrcrange without actuatorfrclimited; set <compiler "
                                "autolimits='true'> or actuatorfrclimited explicitly (as MuJoCo requires)")
        limited = lim == "true" or (lim == "auto" and rng is not None and r[0] < r[1])
        # MuJoCo applies it to hinge and slide joints only; without actuators there is nothing to clamp
        if limited and jt in ("hinge", "slide") and n:
            comp.builder.set_actuator_force_range(name, r)
            if a.get("actuatorgravcomp", "false") == "true":
                gc_limited.append(name)
    out = [f"actuators ({len(v)}: {k}; they keep their ctrl slot and exert no force: {', '.join(v)})"
           for k, v in notes.items()]
    if gc_limited:
        out.append("actuatorgravcomp on joints with an actuatorfrcrange (their gravity compensation is "
                   f"a passive force, not clamped by the range: {', '.join(gc_limited)})")
    return out


def _one(comp, el, p, what, notes):
    """add_actuator keywords for one element (a placeholder when it is not modelled)."""
    a = el.attrib
    targets = [k for k in ("joint", "jointinparent") + OTHER_TRANSMISSIONS if k in a]
    if len(targets) != 1:
        raise ActuatorError(f"{what}: expected exactly one transmission target, got {targets or 'none'}")
    for extra, target in COMPANIONS.items():
        if extra in a and targets[0] != target:
            raise ActuatorError(f"{what}: {extra} needs a {target} transmission")
    why = None
    if el.tag not in MODELLED:
        why = f"<{el.tag}>" + UNMODELLED_WHY.get(el.tag, "")
    elif p["dyntype"] != "none":
        why = f"activation dynamics ({p['dyntype']})"
    elif p["gaintype"] not in ("fixed", "affine") or p["biastype"] not in ("none", "affine"):
        why = f"gaintype {p['gaintype']} / biastype {p['biastype']}"
    elif targets[0] == "tendon" and not any(a["tendon"] in getattr(comp, k, ()) for k in ("fixed_tendons",
                                                                                          "spatial_tendons")):
        why = "transmissions through tendons jaxmbd does not model"
    elif targets[0] == "site" and "refsite" in a:
        why = "site transmissions with a refsite"
    elif targets[0] not in ("joint", "jointinparent", "tendon", "site"):
        why = f"{targets[0]} transmissions"
    joint = a[targets[0]]
    if targets[0] in ("joint", "jointinparent") and joint not in comp.joint_attrs:
        raise ActuatorError(f"{what}: unknown joint {joint!r}")
    ctrlrange, ctrl_given = p["ctrlrange"], p["ctrlrange_set"]
    if p["inheritrange"] > 0 and why is None:   # the joint's range, scaled about its middle
        if "ctrlrange" in a and np.any(C.numbers(a["ctrlrange"], 2, f"{what}: ctrlrange") != 0):
            raise ActuatorError(f"{what}: ctrlrange and inheritrange cannot both be defined")
        if joint not in comp.joint_range:
            raise ActuatorError(f"{what}: inheritrange needs a limited joint ({joint!r} has no range)")
        lo, hi = comp.joint_range[joint]
        mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * p["inheritrange"]
        ctrlrange, ctrl_given = np.array([mid - half, mid + half]), True
    ctrl_lim = _limited(p["ctrllimited"], ctrlrange, ctrl_given, comp.autolimits, what, "ctrlrange")
    force_lim = _limited(p["forcelimited"], p["forcerange"], p["forcerange_set"], comp.autolimits, what,
                         "forcerange")
    name = a.get("name")
    if why is not None:
        notes.setdefault(why, []).append(name or what)
        return dict(joint=None, kind="motor", name=name, ctrlrange=ctrlrange if ctrl_lim else None)
    gp, bp = p["gainprm"][:3], p["biasprm"][:3].copy()
    dampratio = None
    if p["biastype"] == "affine" and bp[2] > 0 and gp[0] == -bp[1]:
        dampratio, bp[2] = float(bp[2]), 0.0     # MuJoCo resolves it at compile time: kv from the mass at qpos0
    kw = dict(joint=joint, name=name, gear=p["gear"], jointinparent=targets[0] == "jointinparent",
              ctrlrange=ctrlrange if ctrl_lim else None, forcerange=p["forcerange"] if force_lim else None)
    if targets[0] == "tendon":
        kw.update(joint=None, tendon=joint)
    elif targets[0] == "site":
        if joint not in comp.sites:
            raise ActuatorError(f"{what}: unknown site {joint!r}")
        comp._add_sites()
        kw.update(joint=None, site=joint)
    if el.tag == "motor":
        return dict(kw, kind="motor")
    if el.tag == "position":
        return dict(kw, kind="position", kp=gp[0], **({"kv": -bp[2]} if dampratio is None else
                                                      {"dampratio": dampratio}))
    if el.tag == "velocity":
        return dict(kw, kind="velocity", kv=gp[0])
    if el.tag == "damper":
        return dict(kw, kind="damper", kv=-gp[2])
    return dict(kw, kind="general", gainprm=gp, biasprm=bp, gaintype=p["gaintype"], biastype=p["biastype"],
                dampratio=dampratio)
