"""The MJCF compiler's shared names: its error, the attribute-merging rule of MuJoCo's parser, and
the tags, attributes and option values the stages check against."""

from __future__ import annotations

from .. import joints as jtypes
from ..mujoco_defaults import SOLID_TYPES


def joint_types():
    """MJCF joint type -> jaxmbd joint type (from the joint registry, ``JointType.mjcf``)."""
    return {t.mjcf: t.name for t in jtypes.registered() if t.mjcf}


SOLIDS = SOLID_TYPES
TOP_LEVEL = {"compiler", "option", "size", "visual", "statistic", "default", "custom", "asset", "worldbody",
             "contact", "equality", "tendon", "actuator", "sensor", "keyframe", "extension", "deformable"}
NOT_MODELLED = {"deformable": "deformables",
                "extension": "plugins"}
ORIENTATIONS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")
PARTIAL = ("size", "friction", "solref", "solimp", "solreflimit", "solimplimit", "solreffriction")
KEY_ATTRS = ("name", "time", "qpos", "qvel", "act", "ctrl", "mpos", "mquat")
IGNORED_IN_BODY = {"site", "camera", "light"}
ATTACHED = "\x00attached"   # the empty default class of elements an <attach> brought (their values are explicit)
MUJOCO_INTEGRATORS = ("Euler", "RK4", "implicit", "implicitfast")   # <option integrator>'s values


class MJCFError(ValueError):
    """A document jaxmbd cannot load (a ValueError)."""


def _over(base, own):
    """Attributes ``own`` over the inherited ``base``, as MuJoCo's parser applies them: an
    orientation in ``own`` replaces any in ``base`` (whatever the forms), and numbers given in part
    for a :data:`PARTIAL` attribute replace the leading entries of the inherited ones."""
    out = dict(base)
    if any(k in own for k in ORIENTATIONS):
        for k in ORIENTATIONS:
            out.pop(k, None)
    for k, v in own.items():
        if k in PARTIAL and k in out:
            old, new = out[k].split(), v.split()
            if len(new) < len(old):
                v = " ".join(new + old[len(new):])
        out[k] = v
    return out
