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
damper and general actuators on joints, fixed tendons and sites; the others keep their ctrl slot,
exert no force and are listed in the warning).

Keyframes: every ``<key>`` is ``model.keyframes[name]`` (:class:`jaxmbd.model.Keyframe`: time,
qpos, qvel, ctrl, act in MuJoCo's layout), in document order; an unnamed key is named
``key<i>`` (``i`` its index among the keys, MuJoCo's key id; ``_`` appended while that name is
taken).  As in MuJoCo, a missing or short qpos, qvel, ctrl or act is completed from qpos0 or zeros,
the quaternions of ball and free joints are normalized (a zero one becomes the identity), and a
longer one is an error; a key's mocap poses (``mpos``, ``mquat``, apply them with
:func:`jaxmbd.set_mocap`) default to the mocap bodies' own.

Mocap bodies (``mocap="true"``, fixed children of the world) are :class:`jaxmbd.model.Mocap`: their
geoms collide at the pose ``model.mocap`` holds (:func:`jaxmbd.set_mocap`); a sensor or equality
constraint on one, or a jointed body below one, is an error.

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
equalities on spatial tendons, tendon limit margins, ball-joint limits, fluid forces, the sensor kinds :mod:`jaxmbd.sensors` does not model
(their slots in ``sensordata`` are kept as zeros),
and equality constraints other
than ``connect``/``weld``/``joint`` and ``tendon`` on fixed tendons (returned in ``MJCFImport.equality``); options and flags that change
MuJoCo's contacts or dynamics but not jaxmbd's (``noslip_iterations``, ``<flag override>`` with its ``o_*`` values, pair
``solreffriction``, ``<flag spring/damper/equality="disable">``, ``<flag
sleep/speculative/ipc="enable">``).  ``connect``
and ``weld`` between bodies or sites become loop constraints (``point`` and
``weld``; the model is then a :class:`jaxmbd.Mechanism`).  Height-field and
SDF geoms cannot give an inertia: a body that needs one is an error (give it an ``<inertial>``).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..builder import ModelBuilder
from ..model import Model
from . import _common as C
from . import mjcf_actuator as _actuators
from .mjcf_assets import Assets
from .mjcf_attach import Attach
from .mjcf_base import MJCFError, MUJOCO_INTEGRATORS, NOT_MODELLED, TOP_LEVEL
from .mjcf_bodies import Bodies
from .mjcf_defaults import Defaults
from .mjcf_equality import Equality
from .mjcf_geoms import Geoms
from .mjcf_joints import Joints
from .mjcf_keyframes import Keyframes
from .mjcf_sensors import Sensors
from .mjcf_tendons import Tendons


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


class _Compiler(Defaults, Assets, Attach, Bodies, Joints, Geoms, Tendons, Equality, Keyframes, Sensors):
    """One document's compilation, in MuJoCo's stages: defaults and classes (mjcf_defaults), assets
    (mjcf_assets) and attached models (mjcf_attach); bodies and inertia (mjcf_bodies), joints
    (mjcf_joints); geoms and contacts (mjcf_geoms); actuators (mjcf_actuator); equality (mjcf_equality);
    keyframes (mjcf_keyframes); sensors (mjcf_sensors); fixed tendons (mjcf_tendons)."""

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
        self.static_top, self.simple_bodies, self.body_joints = set(), [], {}   # MuJoCo's simple bodies
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
        for last, _, jnames in self.simple_bodies:
            self.builder.set_simple_body(last, jnames)
        if self.contacts_on:
            self._add_contacts()
        if self.limited and self.limits_on:
            self._apply_limits()
        self.fixed_tendons, self.spatial_tendons = set(), set()
        self.unsupported.extend(self._add_tendons())
        if flags.get("equality") != "disable" and flags.get("constraint") != "disable":
            self.unsupported.extend(self._add_couplings())
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
        self.unsupported.extend(self._read_sensors())
        self._add_visuals()
        self.builder.set_initial_state(q0=np.concatenate(self.q0) if self.q0 else np.zeros(0))
        model = self.builder.build()
        if self._add_loops(model):
            model = self.builder.build()
        shifts = self.builder.loop_anchor_shifts
        if shifts:
            self.unsupported.append("equality constraints open at qpos0 by gaps no joint closes, closed by moving "
                                    "their frame on body2 (MuJoCo's soft equality pulls them together): "
                                    + ", ".join(f"{n} ({g:.3g} m)" for n, g in shifts))
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






























