"""MJCF (MuJoCo XML) import: the kinematic and inertial subset, compiled as MuJoCo does.

Conventions (so that states move between jaxmbd and MuJoCo unchanged):

* bodies are added depth-first in document order, so joints, ``qpos`` and
  ``qvel`` come in MuJoCo's order with MuJoCo's layouts (hinge/slide: one
  number; ball: quaternion w x y z / body-frame angular velocity; free:
  position and quaternion / world-frame linear and body-frame angular
  velocity);
* a body with several joints (MuJoCo allows any number of hinges and slides
  and one ball) becomes a chain of massless jaxmbd bodies, one per joint, that
  coincide with the MJCF body at the reference pose; the last one carries the
  mass and the MJCF body's name, the others are named ``"body/joint"``.  Each
  joint acts in the frame left by the joints before it, as in MuJoCo's
  kinematics, so the chain is exact;
* a joint ``ref`` is folded into the placement, so ``q = ref`` is the pose
  written in the file, as in MuJoCo (``model.q0`` is MuJoCo's ``qpos0``);
* bodies without joints are welded to their parent; geoms of the world body
  are ignored.

Inertia: ``<inertial>`` (without diaginertia/fullinertia: a point mass) or,
per ``<compiler inertiafromgeom>``, the geoms of the body: sphere, capsule,
cylinder, box and ellipsoid (``fromto``, ``mass`` or ``density``;
``shellinertia`` except on ellipsoids) and meshes (STL/OBJ files or inline
vertices, per ``<mesh inertia>``; see :mod:`jaxmbd.io.mesh`); geoms with zero
mass or density, or outside ``inertiagrouprange``, are skipped.  Then
``boundmass``/``boundinertia`` and ``settotalmass``.  ``<joint
springdamper>`` sets stiffness and damping as MuJoCo's compiler does.

Contacts, joint limits and joint friction loss are MuJoCo's soft constraints
(:mod:`jaxmbd.forces.soft`) with the file's ``solref``/``solimp``: a limited
hinge or slide joint (``limited``, or ``range`` with ``autolimits``) gets
:class:`jaxmbd.forces.JointLimit` with ``solreflimit``/``solimplimit``, a
joint with ``frictionloss`` gets :class:`jaxmbd.forces.FrictionLoss` with
``solreffriction``/``solimpfriction``, both with the DoF's ``dof_invweight0``
at qpos0; ``<option cone>`` picks the contacts' friction cones (pyramidal unless
the file says elliptic, as in MuJoCo) and ``<option impratio>`` scales their
frictional rows' regularizer (MuJoCo's ``refsafe`` rule applied: a time constant below twice the timestep is raised
to it; ``<flag limit="disable">``, ``frictionloss="disable"`` and
``constraint="disable"`` turn them off).  Ball-joint limits and limit
margins are not modelled.

Actuators: see :mod:`jaxmbd.io.mjcf_actuator` (motor, position, velocity,
damper and general actuators on joints; the others keep their ctrl slot,
exert no force and are listed in the warning).

Keyframes: every ``<key>`` is ``model.keyframes[name]`` (:class:`jaxmbd.model.Keyframe`: time,
qpos, qvel, ctrl, act in MuJoCo's layout), in document order; an unnamed key is named
``key<i>`` (``i`` its index among the keys, MuJoCo's key id; ``_`` appended while that name is
taken).  As in MuJoCo, a missing or short qpos, qvel, ctrl or act is completed from qpos0 or zeros,
the quaternions of ball and free joints are normalized (a zero one becomes the identity), and a
longer one is an error; mocap poses (mpos, mquat) are checked and listed in the warning.

Inheritance (``<default>`` classes), as MuJoCo's parser applies it: an element's orientation
(quat, axisangle, euler, xyaxes or zaxis) replaces its class's, whichever form either uses; numbers
given in part for ``size``, ``friction``, ``solref``, ``solimp``, ``solreflimit``, ``solimplimit``
and ``solreffriction`` replace the leading entries of the inherited ones (then MuJoCo's defaults).
``solref``/``solimp`` of geoms, pairs and joint limits are checked by
:func:`jaxmbd.checks.solref` (an error naming the element) and :func:`jaxmbd.checks.solimp` (any
finite numbers, as MuJoCo; values MuJoCo clamps where it uses them are named in the warning).

Composition and files: ``<include>`` (files from the main file's directory, then from the including
file's); asset files from the main file's directory and ``meshdir``/``assetdir`` wherever they are
named; ``<attach>`` with ``<asset><model>`` (:meth:`_Compiler._attach_models`).  A primitive geom
naming a mesh is fitted to it as MuJoCo fits it (:func:`jaxmbd.io.mesh.fit_primitive`,
``<compiler fitaabb>``, ``fitscale``).

Not modelled (listed once in a warning, never dropped silently):
tendons, sensors, ball-joint limits, fluid forces,
gravity compensation, mocap bodies, and equality constraints other
than ``connect``/``weld`` (returned in ``MJCFImport.equality``); options and flags that change
MuJoCo's contacts or dynamics but not jaxmbd's (``noslip_iterations``, ``<flag override>`` with its ``o_*`` values, pair
``solreffriction``, ``<flag spring/damper/equality="disable">``, ``<flag
sleep/speculative/ipc="enable">``).  ``connect``
and ``weld`` between bodies or sites become loop constraints (``point`` and
``weld``; the model is then a :class:`jaxmbd.Mechanism`).  Height-field and
SDF geoms cannot give an inertia: a body that needs one is an error (give it an ``<inertial>``).
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from .. import joints as jtypes
from .. import checks as _checks
from ..builder import ModelBuilder
from ..model import Model
from ..mujoco_defaults import FRICTION, GEOM_TYPES, PAIR_FRICTION, SOLID_TYPES, SOLIMP, SOLREF
from . import _common as C
from . import mesh as _mesh
from ..contact import geometry as _geometry
from . import mjcf_actuator as _actuators


def joint_types():
    """MJCF joint type -> jaxmbd joint type (from the joint registry, ``JointType.mjcf``)."""
    return {t.mjcf: t.name for t in jtypes.registered() if t.mjcf}


SOLIDS = SOLID_TYPES
TOP_LEVEL = {"compiler", "option", "size", "visual", "statistic", "default", "custom", "asset", "worldbody",
             "contact", "equality", "tendon", "actuator", "sensor", "keyframe", "extension", "deformable"}
NOT_MODELLED = {"tendon": "tendons",
                "sensor": "sensors", "deformable": "deformables",
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


@dataclass
class MJCFImport:
    """Everything ``load_mjcf`` read besides the model itself.

    equality: the ``<equality>`` constraints, as dicts (type, name, body1/2 or
    joint1/2, anchor, relpose, active); connect and weld are in the model as
    loop constraints, the others are not modelled.  joint_range: joint
    name -> (lower, upper) in radians / metres for limited joints (hinge and
    slide limits are in the model as :class:`jaxmbd.forces.JointLimit`).  unsupported: what the warning listed.  mesh_geoms: one
    dict per mesh geom that collides or gives its body mass (world geoms
    included):
    ``body``, ``name``, ``mesh``, the geom frame in the body frame (``pos``,
    ``quat`` w x y z), ``hull``, the vertices of the mesh's convex hull in
    that frame (the mesh file's coordinates after ``scale``, ``refpos`` and
    ``refquat``; MuJoCo re-centres meshes, jaxmbd does not; the full hull:
    a mesh geom collides as at most ``maxhullvert`` of its vertices, by
    default jaxmbd's :data:`jaxmbd.forces.contact.MAXHULLVERT_DEFAULT`) and
    ``maxhullvert`` (-1 where the mesh sets none).  option: the ``<option>`` attributes as MuJoCo
    reads them, every ``<option>`` of the document and of the files it includes merged in document
    order (text as written; ``<flag>`` left out); timestep and integrator: the step and the method
    they ask MuJoCo for, with MuJoCo's defaults where the file gives none (0.002 and ``"Euler"``;
    one of :data:`MUJOCO_INTEGRATORS`).  Plain metadata beside the model, not part of its pytree.
    """

    model: Model
    equality: list = field(default_factory=list)
    joint_range: dict = field(default_factory=dict)
    unsupported: list = field(default_factory=list)
    mesh_geoms: list = field(default_factory=list)
    option: dict = field(default_factory=dict)
    timestep: float = 0.002
    integrator: str = "Euler"


def load_mjcf(path_or_xml_string, *, return_info: bool = False, warn: bool = True, contact_capacity=None,
              law: str = "soft", contact_rows=None):
    """Load an MJCF model (a path, or the XML text itself) as a :class:`Model`
    (a :class:`jaxmbd.Mechanism` when it has active connect/weld equality
    constraints).

    Raises ValueError (naming the element) for anything malformed or outside
    the subset in a way that would change the dynamics.  Elements jaxmbd does
    not model are listed once in a ``UserWarning`` (``warn=False``: no warning;
    the list is in ``MJCFImport.unsupported``).  ``return_info=True`` returns
    an :class:`MJCFImport` instead of the bare model.  ``contact_capacity``: the contact broad
    phase's capacities (``ModelBuilder.set_contact_options(capacity=...)``; None: the default rule
    of :func:`jaxmbd.forces.contact_broadphase.capacities`, "all": every candidate pair every time).
    ``law``: "soft" (MuJoCo's soft constraints for contacts, limits and friction loss,
    :mod:`jaxmbd.forces.soft`) or "penalty" (contacts and limits by the penalty law at MuJoCo's
    resting depth, :func:`jaxmbd.forces.law.from_mujoco`: forces of the state alone, as the
    sparse iteration matrix and the descriptor form need; friction loss is then not modelled).
    ``contact_rows``: how many candidate contacts (the deepest) enter the soft law's solve
    (``ModelBuilder.set_contact_options(rows=...)``; None: derived from the model's pairs, what its
    trees' geoms can touch at once, :func:`jaxmbd.forces.contact_rows.default_rows`).  The solve's cost grows with its rows (docs/contact.md).
    """
    if law not in ("soft", "penalty"):
        raise ValueError(f"law {law!r}: expected 'soft' or 'penalty'")
    root, base, where = C.parse_xml(path_or_xml_string, "MJCF")
    try:
        info = _Compiler(root, base, contact_capacity, law, contact_rows).run()
    except MJCFError as e:
        raise MJCFError(f"{where}: {e}") from None
    except ValueError as e:  # from the builder: same single path of validation
        raise MJCFError(f"{where}: {e}") from None
    if warn and info.unsupported:
        warnings.warn(f"{where}: not modelled by jaxmbd (ignored): {'; '.join(info.unsupported)}",
                      UserWarning, stacklevel=2)
    return info if return_info else info.model


# ------------------------------------------------------------------------------------------

def _expand_includes(el, base, here=None, depth=0):
    """Replace every ``<include file>`` under ``el`` by the included file's children, as MuJoCo does:
    the file is looked up from the main file's directory ``base`` first, then from the directory
    of the file that names it (``here``).  Asset files named in included files are looked up from
    the main file's directory too (:meth:`_Compiler._asset_path`)."""
    if depth > 16:
        raise MJCFError("<include> nested too deeply")
    base = base or os.getcwd()
    out = []
    for child in list(el):
        if child.tag == "include":
            fname = child.get("file")
            if not fname:
                raise MJCFError("<include> without a file attribute")
            path = fname if os.path.isabs(fname) else os.path.join(base, fname)
            if here is not None and not os.path.isfile(path) and os.path.isfile(os.path.join(here, fname)):
                path = os.path.join(here, fname)
            inc, _, _ = C.parse_xml(path, "MJCF")
            incdir = os.path.dirname(os.path.abspath(path))
            _expand_includes(inc, base, incdir, depth + 1)
            out.extend(list(inc))
        else:
            _expand_includes(child, base, here, depth)
            out.append(child)
    el[:] = out


class _Compiler:
    def __init__(self, root, base, contact_capacity=None, law="soft", contact_rows=None):
        self.contact_capacity = contact_capacity
        self.contact_rows = contact_rows
        self.law = law
        if root.tag != "mujoco":
            raise MJCFError(f"root element is <{root.tag}>, expected <mujoco>")
        _expand_includes(root, base)
        self.root = root
        self.base = base or os.getcwd()
        self.unsupported = []
        self.solimp_notes = []
        self.compiler = {}
        for el in root.findall("compiler"):
            self.compiler.update(el.attrib)
        comp = self.compiler
        angle = comp.get("angle", "degree")
        if angle not in ("degree", "radian"):
            raise MJCFError(f"<compiler angle={angle!r}>: expected 'degree' or 'radian'")
        self.deg = angle == "degree"
        self.eulerseq = comp.get("eulerseq", "xyz")
        if len(self.eulerseq) != 3 or any(c not in "xyzXYZ" for c in self.eulerseq):
            raise MJCFError(f"<compiler eulerseq={self.eulerseq!r}>: expected three of x y z X Y Z")
        self.from_geom = comp.get("inertiafromgeom", "auto")
        if self.from_geom not in ("auto", "true", "false"):
            raise MJCFError(f"<compiler inertiafromgeom={self.from_geom!r}>: expected auto, true or false")
        self.autolimits = comp.get("autolimits", "true") == "true"
        self.group_range = C.numbers(comp.get("inertiagrouprange", "0 5"), 2, "<compiler inertiagrouprange>")
        self.boundmass = C.number(comp.get("boundmass", "0"), "<compiler boundmass>")
        self.boundinertia = C.number(comp.get("boundinertia", "0"), "<compiler boundinertia>")
        self.totalmass = C.number(comp.get("settotalmass", "-1"), "<compiler settotalmass>")
        self.fitaabb = comp.get("fitaabb", "false") == "true"
        self._fits = {}
        if comp.get("coordinate", "local") != "local":
            raise MJCFError("<compiler coordinate='global'> is not supported (MuJoCo dropped it too)")
        if comp.get("balanceinertia", "false") == "true":
            self.unsupported.append("compiler balanceinertia")
        for el in root:
            if el.tag not in TOP_LEVEL:
                raise MJCFError(f"unknown top-level element <{el.tag}>")
        self._read_defaults()
        self._read_meshes()
        self.attached_actuator_defaults = {}   # id of an attached actuator element -> its model's defaults
        self.attached_keys = []                # the attached models' keyframes (_attach_keys)
        self._attach_models()
        self._read_hfields()

    # -- mesh assets ---------------------------------------------------------------------
    def _read_meshes(self):
        """<asset><mesh>: name -> attributes and file path.  Every mesh file must
        exist (MuJoCo reads them all, used or not); a file is parsed only when a
        geom needs its mass properties or hull."""
        comp = self.compiler
        mdir = comp.get("meshdir", comp.get("assetdir", ""))
        self.meshes, self._mesh_cache, self._mesh_props, self._hulls = {}, {}, {}, {}
        self.mesh_notes = set()
        self.mesh_geoms = []
        for asset in self.root.findall("asset"):
            for el in asset.findall("mesh"):
                a = self.attrs(el, "main")
                f = a.get("file")
                name = a.get("name") or (os.path.splitext(os.path.basename(f))[0] if f else None)
                what = f"<mesh name={name!r}>"
                if not name:
                    raise MJCFError("<mesh> without a name or a file")
                if name in self.meshes:
                    raise MJCFError(f"{what}: duplicate mesh name")
                if f:
                    if comp.get("strippath", "false") == "true":
                        f = os.path.basename(f)
                    path = self._asset_path(f, mdir)
                    if not os.path.isfile(path):
                        raise MJCFError(f"{what}: cannot open mesh file {path!r}")
                    a["_path"] = path
                elif "vertex" not in a:
                    raise MJCFError(f"{what}: needs a file or vertex data (builtin meshes are not supported)")
                mode = a.get("inertia", "legacy")
                if mode not in _mesh.INERTIA_MODES:
                    raise MJCFError(f"{what}: inertia={mode!r}: expected one of {', '.join(_mesh.INERTIA_MODES)}")
                self.meshes[name] = a

    # -- <attach>: model composition ----------------------------------------------------------
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
                        done[mname] = _Compiler(root, base, self.contact_capacity, self.law, self.contact_rows)
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

    def _asset_path(self, f, adir):
        """The path of an asset file as MuJoCo finds it: from the main file's directory and the
        compiler's asset directory ``adir``, whichever file (included or not) names it."""
        return f if os.path.isabs(f) else os.path.normpath(os.path.join(self.base, adir, f))
    def _read_hfields(self):
        """<asset><hfield>: name -> (normalized elevation (nrow, ncol), row 0 at -y; size (4,)), as
        MuJoCo compiles them: from ``elevation`` (nrow x ncol numbers, the first row at +y), from a
        file (MuJoCo's binary format, or a PNG image; looked up in ``meshdir``), or zeros (nrow and
        ncol alone); normalized to [0, 1] (:func:`jaxmbd.contact.hfield.normalize`)."""
        from ..contact import hfield as H
        comp = self.compiler
        hdir = comp.get("meshdir", comp.get("assetdir", ""))
        self.hfields = {}
        for asset in self.root.findall("asset"):
            for el in asset.findall("hfield"):
                a = self.attrs(el, "main")
                f = a.get("file")
                name = a.get("name") or (os.path.splitext(os.path.basename(f))[0] if f else None)
                what = f"<hfield name={name!r}>"
                if not name:
                    raise MJCFError("<hfield> without a name or a file")
                if name in self.hfields:
                    raise MJCFError(f"{what}: duplicate hfield name")
                try:
                    size = H.check_size(C.numbers(a.get("size", ""), None, f"{what}: size"), what)
                    nrow = int(C.number(a.get("nrow", "0"), f"{what}: nrow"))
                    ncol = int(C.number(a.get("ncol", "0"), f"{what}: ncol"))
                    if f:
                        if nrow or ncol or "elevation" in a:
                            raise MJCFError(f"{what}: a file gives the grid: nrow, ncol and elevation must be left out")
                        if comp.get("strippath", "false") == "true":
                            f = os.path.basename(f)
                        path = self._asset_path(f, hdir)
                        data = H.read_file(path, what)
                    else:
                        if nrow < 2 or ncol < 2:
                            raise MJCFError(f"{what}: needs a file, or nrow and ncol (at least 2 each)")
                        if "elevation" in a:
                            data = C.numbers(a["elevation"], None, f"{what}: elevation")
                            if data.size != nrow * ncol:
                                raise MJCFError(f"{what}: elevation has {data.size} numbers, nrow x ncol = "
                                                f"{nrow * ncol}")
                            data = data.reshape(nrow, ncol)[::-1]          # its first row is at +y
                        else:
                            data = np.zeros((nrow, ncol))
                    self.hfields[name] = (H.normalize(H.check_data(data, what)), size)
                except ValueError as e:
                    raise MJCFError(str(e)) from None

    def _mesh_data(self, name, what):
        """(vertices, faces) of a mesh asset in its geom's frame: the file's
        vertices (float32, as MuJoCo stores them) moved by refpos/refquat, then
        scaled; faces turned over by a mirroring scale."""
        if name in self._mesh_cache:
            return self._mesh_cache[name]
        if name not in self.meshes:
            raise MJCFError(f"{what}: no mesh asset named {name!r}")
        a = self.meshes[name]
        mwhat = f"<mesh name={name!r}>"
        try:
            if "_path" in a:
                V, F, notes = _mesh.read_mesh(a["_path"])
                self.mesh_notes.update(f"{os.path.basename(a['_path'])}: {n}" for n in notes)
            else:
                V = _mesh._f32(C.numbers(a["vertex"], None, f"{mwhat}: vertex"))
                if V.size % 3 or V.size < 12:
                    raise MJCFError(f"{mwhat}: vertex needs at least 4 points (3 numbers each)")
                V = V.reshape(-1, 3)
                F = np.zeros((0, 3), np.int64)
                if "face" in a:
                    F = C.numbers(a["face"], None, f"{mwhat}: face")
                    if F.size == 0 or F.size % 3 or np.any(F != np.round(F)) or F.min() < 0 or F.max() >= len(V):
                        raise MJCFError(f"{mwhat}: face must be triples of vertex indices")
                    F = F.astype(np.int64).reshape(-1, 3)
        except _mesh.MeshError as e:
            raise MJCFError(f"{mwhat}: {e}") from None
        refpos = C.numbers(a.get("refpos", "0 0 0"), 3, f"{mwhat}: refpos")
        refquat = C.numbers(a.get("refquat", "1 0 0 0"), 4, f"{mwhat}: refquat")
        if np.linalg.norm(refquat) < 1e-12:
            raise MJCFError(f"{mwhat}: refquat is zero")
        scale = C.numbers(a.get("scale", "1 1 1"), 3, f"{mwhat}: scale")
        V = ((V - refpos) @ C.quat_to_rot(refquat)) * scale
        if np.prod(scale) < 0:
            F = F[:, [0, 2, 1]]
        self._mesh_cache[name] = (V, F)
        return V, F

    def _mesh_mass(self, name, what):
        """(measure, centre, inertia per unit density) of a mesh asset, per its inertia mode."""
        if name not in self._mesh_props:
            a = self.meshes.get(name, {})
            mode = a.get("inertia", "legacy")
            hullvert = C.number(a.get("maxhullvert", "-1"), f"<mesh name={name!r}>: maxhullvert")
            if mode == "convex" and int(hullvert) != -1:
                raise MJCFError(f"{what}: mesh {name!r} has maxhullvert and inertia='convex': MuJoCo's "
                                "vertex-limited hull is not reproduced (give the body an <inertial>)")
            try:
                V, F = self._mesh_data(name, what)
                self._mesh_props[name] = _mesh.mass_properties(V, F, mode)
            except (_mesh.MeshError, MJCFError) as e:
                if name not in self.meshes:
                    raise
                raise MJCFError(f"{what}: mesh {name!r}: {e} (its mass properties are needed: give the "
                                "body an <inertial>, or the geom mass='0')") from None
        return self._mesh_props[name]

    def _hull(self, mesh, what):
        """The vertices of a mesh asset's convex hull (in its geom frame), or None where jaxmbd cannot
        read the mesh (noted in the warning)."""
        if mesh not in self._hulls:
            try:
                V, _ = self._mesh_data(mesh, what)
            except MJCFError as e:
                if mesh not in self.meshes:
                    raise
                self.mesh_notes.add(f"no hull kept for mesh {mesh!r} ({str(e).split(': ', 1)[-1]})")
                return None
            try:
                self._hulls[mesh] = _mesh.hull_vertices(V)
            except Exception:  # flat or degenerate: keep every vertex
                self._hulls[mesh] = V
        return self._hulls[mesh]

    def _record_mesh_geom(self, body, a, gname, what, Rf, pf):
        """Keep the convex hull of a mesh geom that collides or carries mass.  A mesh
        jaxmbd cannot read is an error only where its mass is needed (_mesh_mass);
        here it is noted in the warning."""
        if self._hull(a["mesh"], what) is None:
            return
        R = Rf @ C.quat_to_rot(self.orientation(a, what))
        p = pf + Rf @ C.numbers(a.get("pos", "0 0 0"), 3, f"{what}: pos")
        maxhullvert = int(C.number(self.meshes[a["mesh"]].get("maxhullvert", "-1"), f"{what}: maxhullvert"))
        self.mesh_geoms.append(dict(body=body, name=gname, mesh=a["mesh"], pos=p, quat=C.rot_to_quat(R),
                                    hull=self._hulls[a["mesh"]], maxhullvert=maxhullvert))

    # -- defaults ----------------------------------------------------------------
    def _read_defaults(self):
        self.classes = {"main": {}}

        def visit(el, name, inherited):
            own = {tag: dict(v) for tag, v in inherited.items()}
            for child in el:
                if child.tag == "default":
                    continue
                own[child.tag] = _over(own.get(child.tag, {}), child.attrib)
            if name in self.classes and name != "main":
                raise MJCFError(f"<default class={name!r}> defined twice")
            if name == "main":
                for tag, v in own.items():
                    self.classes["main"][tag] = _over(self.classes["main"].get(tag, {}), v)
            else:
                self.classes[name] = own
            for child in el:
                if child.tag == "default":
                    cname = child.get("class")
                    if not cname:
                        raise MJCFError("nested <default> without a class name")
                    visit(child, cname, own)

        for el in self.root.findall("default"):
            visit(el, el.get("class", "main"), self.classes["main"])

    def attrs(self, el, cls):
        """The element's attributes over its default class's (MuJoCo's inheritance); a primitive geom
        naming a mesh comes fitted to it (:meth:`_fit`)."""
        c = el.get("class", cls)
        if c not in self.classes:
            raise MJCFError(f"<{el.tag} name={el.get('name')!r}>: unknown default class {c!r}")
        a = _over(self.classes[c].get(el.tag, {}), el.attrib)
        if el.tag == "geom" and "mesh" in a and a.get("type", "sphere") in _mesh.FIT_TYPES:
            a = self._fit(a, f"geom {el.get('name')!r}" if el.get("name") else "a geom")
        return a

    def _fit(self, a, what):
        """A primitive geom naming a mesh, as MuJoCo compiles it: the primitive fitted to the mesh
        (:func:`jaxmbd.io.mesh.fit_primitive`, ``<compiler fitaabb>``, the geom's ``fitscale``), placed
        in the mesh's principal frame; the mesh reference is dropped (its size, pos and quat replaced)."""
        name, kind = a["mesh"], a.get("type", "sphere")
        if "fromto" in a:
            raise MJCFError(f"{what}: fromto cannot be used with a mesh (MuJoCo refuses it too)")
        key = (name, kind, a.get("fitscale", "1"))
        if key not in self._fits:
            measure, com, unit = self._mesh_mass(name, f"{what}: a {kind} fitted to mesh {name!r}")
            V, _ = self._mesh_data(name, what)
            fitscale = C.number(a.get("fitscale", "1"), f"{what}: fitscale")
            self._fits[key] = _mesh.fit_primitive(kind, V, measure, com, unit, self.fitaabb, fitscale)
        size, mpos, mquat = self._fits[key]
        q = self.orientation(a, what)
        pos = C.numbers(a.get("pos", "0 0 0"), 3, f"{what}: pos") + C.quat_to_rot(q) @ mpos
        out = {k: v for k, v in a.items() if k not in ORIENTATIONS and k != "mesh"}
        out.update(size=" ".join(repr(float(x)) for x in size), pos=" ".join(repr(float(x)) for x in pos),
                   quat=" ".join(repr(float(x)) for x in C.quat_mul(q, mquat)))
        return out

    # -- numbers and orientations ------------------------------------------------------
    def angle(self, x):
        return math.radians(x) if self.deg else x

    def orientation(self, a, what):
        keys = [k for k in ("quat", "axisangle", "euler", "xyaxes", "zaxis") if k in a]
        if len(keys) > 1:
            raise MJCFError(f"{what}: more than one orientation ({', '.join(keys)})")
        if not keys:
            return np.array([1.0, 0.0, 0.0, 0.0])
        k = keys[0]
        if k == "quat":
            q = C.numbers(a[k], 4, f"{what}: quat")
            if np.linalg.norm(q) < 1e-12:
                raise MJCFError(f"{what}: quat is zero")
            return q / np.linalg.norm(q)
        if k == "axisangle":
            v = C.numbers(a[k], 4, f"{what}: axisangle")
            if np.linalg.norm(v[:3]) < 1e-12:
                raise MJCFError(f"{what}: axisangle axis is zero")
            return C.quat_axis_angle(v[:3], self.angle(v[3]))
        if k == "euler":
            v = C.numbers(a[k], 3, f"{what}: euler")
            q = np.array([1.0, 0.0, 0.0, 0.0])
            for ch, ang in zip(self.eulerseq, v):
                r = C.quat_axis_angle(np.eye(3)["xyz".index(ch.lower())], self.angle(ang))
                q = C.quat_mul(q, r) if ch.islower() else C.quat_mul(r, q)  # intrinsic / extrinsic
            return q
        if k == "xyaxes":
            v = C.numbers(a[k], 6, f"{what}: xyaxes")
            x, y = v[:3], v[3:]
            if np.linalg.norm(x) < 1e-12:
                raise MJCFError(f"{what}: xyaxes x axis is zero")
            x = x / np.linalg.norm(x)
            y = y - (y @ x) * x
            if np.linalg.norm(y) < 1e-12:
                raise MJCFError(f"{what}: xyaxes y axis is parallel to x")
            y = y / np.linalg.norm(y)
            return C.rot_to_quat(np.stack([x, y, np.cross(x, y)], axis=1))
        v = C.numbers(a[k], 3, f"{what}: zaxis")
        if np.linalg.norm(v) < 1e-12:
            raise MJCFError(f"{what}: zaxis is zero")
        return C.z_to_vec(v)

    # -- the body tree -----------------------------------------------------------------
    def run(self):
        root = self.root
        opt = {}
        flags = {}
        for el in root.findall("option"):
            opt.update(el.attrib)
            for f in el.findall("flag"):
                flags.update(f.attrib)
        gravity = C.numbers(opt.get("gravity", "0 0 -9.81"), 3, "<option gravity>")
        if flags.get("gravity") == "disable":
            gravity = np.zeros(3)
        if any(C.number(opt.get(k, "0"), f"<option {k}>") != 0 for k in ("density", "viscosity")) \
                or C.numbers(opt.get("wind", "0 0 0"), 3, "<option wind>").any():
            self.unsupported.append("fluid forces (option density/viscosity/wind)")
        self.contacts_on = flags.get("contact") != "disable" and flags.get("constraint") != "disable"
        self.limits_on = flags.get("limit") != "disable" and flags.get("constraint") != "disable"
        self.refsafe = flags.get("refsafe") != "disable"
        self.filterparent = flags.get("filterparent") != "disable"
        self.override = flags.get("override") == "enable"
        self.opt, self.flags = opt, flags
        self.timestep = C.number(opt.get("timestep", "0.002"), "<option timestep>")
        self.integrator = opt.get("integrator", "Euler")
        if self.integrator not in MUJOCO_INTEGRATORS:
            raise MJCFError(f"<option integrator={self.integrator!r}>: expected one of "
                            f"{', '.join(MUJOCO_INTEGRATORS)} (MuJoCo refuses it too)")
        self.impratio = C.number(opt.get("impratio", "1"), "<option impratio>")
        self.cone = opt.get("cone", "pyramidal")
        if self.cone not in ("pyramidal", "elliptic"):
            raise MJCFError(f"<option cone={self.cone!r}>: expected pyramidal or elliptic")
        if not self.impratio > 0:
            raise MJCFError(f"<option impratio> must be positive, got {self.impratio}")
        self.collision_geoms = 0
        for tag, label in NOT_MODELLED.items():
            n = sum(len(list(el)) for el in root.findall(tag))
            if n:
                self.unsupported.append(f"{label} ({n})")
        self.equality = self._read_equality()

        self.builder = ModelBuilder(gravity=gravity)
        self.q0 = []
        self.body_names, self.joint_names = set(), set()
        self.joint_attrs = {}
        self.joint_range, self.limited = {}, []
        self.frictionloss = []
        self.springdampers = []   # (joint name, time constant, damping ratio)
        self.bodies = []  # (name, mass-carrying builder kwargs) for settotalmass
        self.geom_records, self.body_seq, self.builder_name = [], 0, {"world": "world"}
        self.chain_alias = {}
        self._name_bodies()
        self.sites = {}
        self._planned = []
        for wb in root.findall("worldbody"):
            for item, (R, p), cls in self._items(wb, (np.eye(3), np.zeros(3)), "main"):
                if item.tag == "body":
                    self._body(item, "world", R, p, cls, top=True)
                elif item.tag == "geom":   # no mass; the hulls of colliding mesh geoms are kept
                    a = self.attrs(item, cls)
                    gw = f"world geom {item.get('name')!r}"
                    self.geom_records.append(dict(body="world", a=a, name=item.get("name"), what=gw, R=R, p=p,
                                                  key=(0, len(self.geom_records))))
                    if a.get("type") == "mesh" and "mesh" in a and (
                            C.number(a.get("contype", "1"), f"{gw}: contype")
                            or C.number(a.get("conaffinity", "1"), f"{gw}: conaffinity")):
                        self._record_mesh_geom("world", a, item.get("name"), gw, R, p)
                elif item.tag == "site":
                    self._site(item, "world", (R, p), cls)
                elif item.tag in ("camera", "light"):
                    continue
                else:
                    raise MJCFError(f"<{item.tag}> is not allowed in <worldbody>")
        if not self._planned:
            raise MJCFError("no bodies in <worldbody>")
        self._finish_masses()
        for kw in self._planned:
            self.builder.add_body(**kw)
        if self.springdampers:
            self._apply_springdampers(gravity)
        if self.contacts_on:
            self._add_contacts()
        if self.limited and self.limits_on:
            self._apply_limits()
        if self.mesh_notes:
            self.unsupported.append(f"mesh files ({'; '.join(sorted(self.mesh_notes))})")
        if self.frictionloss and self.law == "penalty":
            self.unsupported.append("joint frictionloss under law='penalty' ("
                                    + ", ".join(d["joint"] for d in self.frictionloss) + ")")
        elif self.frictionloss and flags.get("frictionloss") != "disable" and flags.get("constraint") != "disable":
            body_of = {kw.get("joint_name"): kw["name"] for kw in self._planned}
            for d in self.frictionloss:
                self.builder.add_friction_loss(body_of[d["joint"]], d["loss"], solref=self._solref(d["solref"]),
                                               solimp=d["solimp"])
        self.unsupported.extend(_actuators.read(self, opt, flags))   # MJCFError from ValueError in load_mjcf
        self._add_visuals()
        self.builder.set_initial_state(q0=np.concatenate(self.q0) if self.q0 else np.zeros(0))
        model = self.builder.build()
        if self._add_loops(model):
            model = self.builder.build()
        skipped = self.builder.contact_skipped
        if skipped:
            self.unsupported.append("contacts between " + ", ".join(f"{a} and {b} geoms ({n} pairs)"
                                                                    for (a, b), n in skipped))
        self.unsupported.extend(self._flag_notes())
        noslip = C.number(opt.get("noslip_iterations", "0"), "<option noslip_iterations>")
        if noslip > 0:
            self.unsupported.append(f"<option noslip_iterations='{noslip:g}'>: jaxmbd does not run MuJoCo's noslip "
                                    "post-processing of the friction forces")
        if self.solimp_notes:
            self.unsupported.append("solimp outside MuJoCo's ranges, clamped where used as MuJoCo clamps it "
                                    "(dmin, dmax, midpoint to [1e-4, 0.9999], width >= 0, power >= 1): "
                                    + ", ".join(dict.fromkeys(self.solimp_notes)))
        model = self._with_keyframes(model)
        return MJCFImport(model=model, equality=self.equality, joint_range=self.joint_range,
                          unsupported=self.unsupported, mesh_geoms=self.mesh_geoms, option=dict(opt),
                          timestep=self.timestep, integrator=self.integrator)

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

    def _attached_key_elements(self, model):
        """The attached models' keyframes as full <key> elements of this model (qpos0 and zeros but for
        the joints and actuators that came along)."""
        out = []
        if not self.attached_keys:
            return out
        tree = getattr(model, "tree", model)
        names, acts = list(tree.joint_names), list(model.actuators.names) if model.nu else []
        for k in self.attached_keys:
            qpos, qvel, ctrl = np.array(model.q0, np.float64), np.zeros(model.nv), np.zeros(model.nu)
            for j, v in k["qpos"].items():
                if j in names:
                    adr = int(tree.joint_qpos_adr[names.index(j)])
                    qpos[adr:adr + v.size] = v
            for j, v in k["qvel"].items():
                if j in names:
                    adr = int(tree.joint_dof_adr[names.index(j)])
                    qvel[adr:adr + v.size] = v
            for a, v in k["ctrl"].items():
                if a in acts:
                    ctrl[acts.index(a)] = v
            fmt = lambda x: " ".join(repr(float(y)) for y in x)  # noqa: E731
            attrs = dict(time=k["time"], qpos=fmt(qpos), qvel=fmt(qvel))
            if model.nu:
                attrs["ctrl"] = fmt(ctrl)
            if k["name"] is not None:
                attrs["name"] = k["name"]
            out.append(ET.Element("key", attrs))
        return out

    def _with_keyframes(self, model):
        """The model with its keyframes (``Model.keyframe_data``): every ``<key>`` as MuJoCo compiles it,
        then default keys (qpos0, zeros) up to ``<size nkey>``, as MuJoCo allocates them."""
        keys = [el for sec in self.root.findall("keyframe") for el in sec] + self._attached_key_elements(model)
        size = {}
        for el in self.root.findall("size"):
            size.update(el.attrib)
        nkey = int(C.number(size.get("nkey", "-1"), "<size nkey>"))
        keys += [ET.Element("key")] * max(nkey - len(keys), 0)
        if not keys:
            return model
        tree = getattr(model, "tree", model)   # a mechanism from the loader keeps the tree's (MuJoCo's) order
        qpos0 = np.asarray(model.q0, np.float64)
        nmocap = sum(b.get("mocap", "false") == "true" for b in self.root.iter("body"))
        sizes = dict(qpos=(qpos0, "nq"), qvel=(np.zeros(model.nv), "nv"), ctrl=(np.zeros(model.nu), "nu"),
                     act=(np.zeros(self.n_act), "na"), mpos=(np.zeros(3 * nmocap), "3 x nmocap"),
                     mquat=(np.zeros(4 * nmocap), "4 x nmocap"))
        taken = {el.get("name") for el in keys if el.get("name")}
        data, names, mocap = [], set(), []
        for i, el in enumerate(keys):
            name = el.get("name")
            what = f"<key name={name!r}>" if name else f"<key> #{i}"
            if el.tag != "key":
                raise MJCFError(f"<keyframe>: unknown element <{el.tag}>")
            for k in el.attrib:
                if k not in KEY_ATTRS:
                    raise MJCFError(f"{what}: unknown attribute {k!r}")
            if name:
                if name in names:
                    raise MJCFError(f"{what}: duplicate keyframe name")
            else:
                name = f"key{i}"
                while name in taken or name in names:
                    name += "_"
            names.add(name)
            vals = {}
            for k, (default, label) in sizes.items():
                v = np.array(default, np.float64)
                if k in el.attrib:
                    got = C.numbers(el.get(k), None, f"{what}: {k}")
                    if got.size > v.size:
                        raise MJCFError(f"{what}: {k} has {got.size} numbers, more than the model's {label} = "
                                        f"{v.size} (MuJoCo refuses it too)")
                    v[:got.size] = got
                vals[k] = v
            q = vals["qpos"]
            for jt, adr in zip(tree.topo.jtype, tree.topo.q_adr):
                for sl in jtypes.quaternion_slices(jt, adr):
                    n = np.linalg.norm(q[sl])
                    q[sl] = q[sl] / n if n > 1e-15 else np.array([1.0, 0.0, 0.0, 0.0])   # as MuJoCo does
            if "mpos" in el.attrib or "mquat" in el.attrib:
                mocap.append(name)
            data.append((name, C.number(el.get("time", "0"), f"{what}: time"))
                        + tuple(tuple(float(x) for x in vals[k]) for k in ("qpos", "qvel", "ctrl", "act")))
        if mocap:
            self.unsupported.append(f"keyframe mocap poses ({', '.join(mocap)}; mocap bodies are welded)")
        data = tuple(data)
        if tree is model:
            return dataclasses.replace(model, keyframe_data=data)
        return dataclasses.replace(model, tree=dataclasses.replace(tree, keyframe_data=data))

    def _apply_springdampers(self, gravity):
        """<joint springdamper="timeconst dampratio">, as MuJoCo compiles it: with m the
        joint's effective mass at qpos0 (1 / diagonal of the inverse mass matrix,
        armature included), stiffness = m / (timeconst * dampratio)^2 and
        damping = 2 m / timeconst, replacing the joint's stiffness and damping."""
        masses = self._effective_masses([j for j, _, _ in self.springdampers])
        by_joint = {kw.get("joint_name"): kw for kw in self._planned}
        for (jname, tc, zeta), m in zip(self.springdampers, masses):
            by_joint[jname].update(stiffness=m / (tc * zeta) ** 2, damping=2.0 * m / tc)
        self.builder = ModelBuilder(gravity=gravity)
        for kw in self._planned:
            self.builder.add_body(**kw)

    @staticmethod
    def _leading(text, default, what):
        """1 to len(default) numbers, completed from ``default`` (MuJoCo's reading of a vector given in part)."""
        vals = np.array(default, np.float64)
        if text is not None:
            got = C.numbers(text, None, what)
            if not 1 <= got.size <= vals.size:
                raise MJCFError(f"{what}: expected 1 to {vals.size} numbers, got {text!r}")
            vals[:got.size] = got
        return vals

    def _solimp(self, text, what):
        """solimp (1 to 5 numbers; MuJoCo's defaults for the missing ones), checked; entries outside
        MuJoCo's ranges are kept (clamped where used, as MuJoCo does) and named in the warning."""
        si = _checks.solimp(self._leading(text, SOLIMP, what), what)
        moved = _checks.solimp_clamped(si)
        if moved:
            self.solimp_notes.append(f"{what.replace(': solimp', ' solimp')} ({', '.join(moved)})")
        return si

    def _solref_attr(self, text, what):
        """solref (1 or 2 numbers; MuJoCo's defaults for the missing one), checked."""
        return _checks.solref(self._leading(text, SOLREF, what), what)

    def _solref(self, solref):
        """solref with MuJoCo's refsafe rule: a time constant below twice the timestep is raised to it."""
        tc, dr = float(solref[0]), float(solref[1])
        if tc > 0 and self.refsafe:
            tc = max(tc, 2.0 * self.timestep)
        return tc, dr

    def _effective_masses(self, joints):
        """1 / (H⁻¹)_ii at qpos0 for the DoF of each named scalar joint (MuJoCo's A_ii of a joint row
        there; armature included), from the bodies planned so far."""
        from ..forces.contact import inverse_weights
        self.builder.set_initial_state(q0=np.concatenate(self.q0) if self.q0 else np.zeros(0))
        model = self.builder.build()
        dof_iw = np.asarray(inverse_weights(model, model.q0)[1])
        names = list(model.joint_names)
        return [1.0 / dof_iw[int(model.joint_dof_adr[names.index(j)])] for j in joints]

    def _apply_limits(self):
        """Limited hinge and slide joints get a :class:`jaxmbd.forces.JointLimit`: MuJoCo's soft
        constraint with solreflimit/solimplimit (:mod:`jaxmbd.forces.soft`), its Â the DoF's
        dof_invweight0 at qpos0; ball-joint limits and limit margins stay in the warning."""
        scalar = [d for d in self.limited if d["kind"] in ("hinge", "slide")]
        other = [d["joint"] for d in self.limited if d["kind"] not in ("hinge", "slide")]
        if other:
            self.unsupported.append(f"ball-joint limits ({', '.join(other)})")
        margins = [d["joint"] for d in scalar if d["margin"] != 0]
        if margins:
            self.unsupported.append(f"joint limit margins ({', '.join(margins)})")
        if not scalar:
            return
        body_of = {kw.get("joint_name"): kw["name"] for kw in self._planned}
        if self.law == "penalty":
            from ..forces.law import from_mujoco
            masses = self._effective_masses([d["joint"] for d in scalar])
            for d, m in zip(scalar, masses):
                k, p, c, w, b = from_mujoco(self._solref(d["solref"]), d["solimp"], m)
                self.builder.add_joint_limit(body_of[d["joint"]], d["lower"], d["upper"], stiffness=k, damping=c,
                                             exponent=p, width=w, viscous=b)
            return
        for d in scalar:
            self.builder.add_joint_limit(body_of[d["joint"]], d["lower"], d["upper"],
                                         solref=self._solref(d["solref"]), solimp=d["solimp"])

    def _read_equality(self):
        out = []
        for sec in self.root.findall("equality"):
            for el in sec:
                d = dict(type=el.tag, **el.attrib)
                out.append(d)
        other = [d for d in out if d["type"] not in ("connect", "weld")]
        inactive = [d for d in out if d["type"] in ("connect", "weld") and d.get("active", "true") == "false"]
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
        if a.get("mocap", "false") == "true":
            self.unsupported.append(f"mocap body {name!r} (welded)")
        if C.number(a.get("gravcomp", "0"), f"{what}: gravcomp"):
            self.unsupported.append(f"gravity compensation (body {name!r})")
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
        mass, com, inertia = self._inertia(name, inertial, geoms)
        body = dict(mass=mass, com=com, inertia=inertia)
        self.bodies.append(body)
        last = self._joints(name, parent, R, p, joints, body, top)
        self.builder_name[name] = last
        for child, frame, icls in children:
            self._body(child, last, frame[0], frame[1], icls)

    def _joints(self, name, parent, R, p, joints, body, top):
        """Plan the builder bodies of one MJCF body; returns the name of the last."""
        what = f"body {name!r}"
        quat = C.rot_to_quat(R)
        if not joints:
            self._planned.append(dict(name=name, parent=parent, joint="fixed", pos=p, quat=quat, body=body))
            return name
        specs = []
        for k, (el, cls) in enumerate(joints):
            if el.tag == "freejoint":
                a = dict(el.attrib, type="free")
            else:
                a = self.attrs(el, cls)
            jt = a.get("type", "hinge")
            jname = a.get("name") or (name if len(joints) == 1 else f"{name}:{k}")
            jwhat = f"joint {jname!r} (in body {name!r})"
            known = joint_types()
            if jt not in known:
                names = list(known)
                raise MJCFError(f"{jwhat}: unknown joint type {jt!r}; expected "
                                f"{', '.join(names[:-1])} or {names[-1]}")
            if jname in self.joint_names:
                if a.get("name"):
                    raise MJCFError(f"duplicate joint name {jname!r}")
                while jname in self.joint_names:
                    jname += "_"
            self.joint_names.add(jname)
            self.joint_attrs[jname] = (jt, a)     # for the actuators (mjcf_actuator)
            specs.append((jname, jwhat, known[jt], a))
        if any(jtypes.get(s[2]).floating for s in specs):
            if len(specs) > 1:
                raise MJCFError(f"{what}: a free joint must be the body's only joint")
            if not top:
                raise MJCFError(f"{what}: a free joint is only allowed in a child of <worldbody> (as in MuJoCo)")
        cur_parent = parent
        for k, (jname, jwhat, jt, a) in enumerate(specs):
            lastk = k == len(specs) - 1
            bname = name if lastk else f"{name}/{jname}"
            while not lastk and bname in self.taken_names:
                bname += "_"
            self.taken_names.add(bname)
            if not lastk:
                self.chain_alias[bname] = name     # one MuJoCo body (its parent filter, its exclusions)
            kw = self._joint_kwargs(jwhat, jt, a)
            ref = kw.pop("ref")
            if k == 0:
                Rp, pp = R, p
            else:
                Rp, pp = np.eye(3), np.zeros(3)
            spec = jtypes.get(jt)
            if spec.floating:
                self.q0.append(np.concatenate([pp, C.rot_to_quat(Rp)]))
                Rp, pp = np.eye(3), np.zeros(3)
            elif not spec.scalar_coords:
                self.q0.append(jtypes.neutral_np(jt))
            else:
                self.q0.append(np.array([ref]))
                # fold the reference into the placement: the joint moves by q - ref (MuJoCo's qpos0)
                if ref != 0.0:
                    ax = kw["axis"] / np.linalg.norm(kw["axis"])
                    if a.get("type", "hinge") == "hinge":
                        Rr = C.quat_to_rot(C.quat_axis_angle(ax, -ref))
                        anc = kw["anchor"]
                        pp = pp + Rp @ (anc - Rr @ anc)
                        Rp = Rp @ Rr
                    else:
                        pp = pp - ref * (Rp @ ax)
            self._planned.append(dict(name=bname, parent=cur_parent, joint=jt, pos=pp, quat=C.rot_to_quat(Rp),
                                      joint_name=jname, body=body if lastk else None, **kw))
            cur_parent = bname
        return cur_parent

    def _joint_kwargs(self, jwhat, jt, a):
        def num(key, default="0"):
            return C.number(a.get(key, default), f"{jwhat}: {key}")

        kw = dict(damping=num("damping"), armature=num("armature"), stiffness=num("stiffness"))
        spec, mt = jtypes.get(jt), a.get("type", "hinge")
        sd = C.numbers(a.get("springdamper", "0 0"), 2, f"{jwhat}: springdamper")
        if np.any(sd != 0):
            if np.any(sd <= 0):
                raise MJCFError(f"{jwhat}: springdamper values must both be positive (as in MuJoCo), got {sd}")
            if jt not in ("revolute", "prismatic"):
                raise MJCFError(f"{jwhat}: springdamper on a {jt} joint is not supported "
                                "(jaxmbd has joint stiffness for hinge and slide joints only)")
            self.springdampers.append((jwhat.split("'")[1], float(sd[0]), float(sd[1])))
        is_angle = mt == "hinge"
        conv = self.angle if is_angle else (lambda x: x)
        ref = conv(num("ref"))
        if spec.uses_axis:
            kw["axis"] = C.numbers(a.get("axis", "0 0 1"), 3, f"{jwhat}: axis")
            if np.linalg.norm(kw["axis"]) < 1e-12:
                raise MJCFError(f"{jwhat}: axis is zero")
            kw["spring_ref"] = conv(num("springref"))
        if spec.uses_anchor:
            kw["anchor"] = C.numbers(a.get("pos", "0 0 0"), 3, f"{jwhat}: pos")
        kw["ref"] = ref
        if num("frictionloss"):
            if num("frictionloss") < 0:
                raise MJCFError(f"{jwhat}: frictionloss must be >= 0, got {num('frictionloss')}")
            self.frictionloss.append(dict(joint=jwhat.split("'")[1], loss=num("frictionloss"),
                                          solref=C.numbers(a.get("solreffriction", "0.02 1"), 2,
                                                           f"{jwhat}: solreffriction"),
                                          solimp=self._solimp(a.get("solimpfriction"), f"{jwhat}: solimpfriction")))
        rng = a.get("range")
        limited = a.get("limited", "auto")
        if limited not in ("true", "false", "auto"):
            raise MJCFError(f"{jwhat}: limited={limited!r}: expected true, false or auto")
        if rng is not None:
            r = C.numbers(rng, 2, f"{jwhat}: range")
            if limited == "true" or (limited == "auto" and self.autolimits):
                if r[0] > r[1]:
                    raise MJCFError(f"{jwhat}: range lower bound exceeds the upper ({rng!r})")
                jname = jwhat.split("'")[1]
                lo, hi = (self.angle(r[0]), self.angle(r[1])) if mt in ("hinge", "ball") else r
                self.joint_range[jname] = (float(lo), float(hi))
                self.limited.append(dict(joint=jname, kind=mt, lower=float(lo), upper=float(hi),
                                         solref=self._solref_attr(a.get("solreflimit"), f"{jwhat}: solreflimit"),
                                         solimp=self._solimp(a.get("solimplimit"), f"{jwhat}: solimplimit"),
                                         margin=num("margin")))
        elif limited == "true":
            raise MJCFError(f"{jwhat}: limited='true' without a range")
        return kw

    # -- inertia --------------------------------------------------------------------------
    def _inertia(self, name, inertial, geoms):
        """(mass, com, 3x3 inertia about the com, body axes) of one MJCF body."""
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
            return m, c, R @ I @ R.T
        if self.from_geom == "false" or (inertial is None and not geoms):
            return 0.0, np.zeros(3), np.zeros((3, 3))
        parts = []
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
        m = sum(p[0] for p in parts)
        if m <= 0:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        c = sum(p[0] * p[1] for p in parts) / m
        I = np.zeros((3, 3))
        for mg, cg, Ig in parts:
            d = cg - c
            I += Ig + mg * ((d @ d) * np.eye(3) - np.outer(d, d))
        return m, c, I

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
            kw.update(mass=b["mass"], com=b["com"], inertia=b["inertia"])
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
