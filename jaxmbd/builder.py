"""The ModelBuilder: a kinematic tree assembled body by body, its geoms, force
elements, actuators and loops, compiled by :meth:`ModelBuilder.build` into a
:class:`~jaxmbd.model.Model`."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import joints
from . import mujoco_defaults as MJ
from .checks import axis_frame as _axis_frame, quat_rot as _quat_rot, scalar as _scalar, vec as _vec
from .checks import solimp as _solimp, solref as _solref
from .model import Model
from .topology import Topology


def _check_inertia(I, what, strict=True, notes=None):
    """Validate a 3x3 rotational inertia.  strict=False (imported files):
    positive semi-definite is enough (a point mass has zero inertia), and a
    violated triangle inequality, common in CAD-exported URDFs that Pinocchio
    accepts, is noted in ``notes`` instead of raised."""
    I = np.asarray(I, dtype=np.float64)
    if I.shape == (3,):
        I = np.diag(I)
    elif I.shape == (6,):  # MuJoCo fullinertia order: xx yy zz xy xz yz
        xx, yy, zz, xy, xz, yz = I
        I = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    if I.shape != (3, 3):
        raise ValueError(f"{what}: inertia must be 3 (diagonal), 6 (xx yy zz xy xz yz) or 3x3 numbers, got shape {I.shape}")
    if not np.all(np.isfinite(I)):
        raise ValueError(f"{what}: inertia contains NaN or inf")
    scale = max(np.abs(I).max(), 1e-300)
    if np.abs(I - I.T).max() > 1e-9 * scale:
        raise ValueError(f"{what}: inertia tensor is not symmetric")
    I = 0.5 * (I + I.T)
    ev = np.linalg.eigvalsh(I)
    if strict and ev[0] <= 0:
        raise ValueError(f"{what}: inertia tensor is not positive definite (principal moments {ev})")
    # imported files: tolerate round-off, relative to the tensor or (for a numerically
    # zero tensor, e.g. iCub's 1e-20 entries) absolutely, 1e-15 kg m² being no inertia at all
    if not strict and ev[0] < -max(1e-9 * scale, 1e-15):
        raise ValueError(f"{what}: inertia tensor is not positive semi-definite (principal moments {ev})")
    if ev[0] + ev[1] < ev[2] * (1 - 1e-9):
        msg = f"principal moments {ev} violate the triangle inequality (I1 + I2 >= I3)"
        if strict:
            raise ValueError(f"{what}: {msg}; no rigid body has this inertia")
        if notes is not None:
            notes.append(what)
    return I


def _to_spatial(m, c, Ic):
    C = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    return np.block([[Ic + m * C @ C.T, m * C], [m * C.T, m * np.eye(3)]])


def _from_spatial(Is):
    m = Is[3, 3]
    if m == 0.0:  # massless (a frame that only carries a joint): no COM, no inertia
        return 0.0, np.zeros(3), np.zeros((3, 3))
    C = Is[:3, 3:] / m
    c = np.array([C[2, 1], C[0, 2], C[1, 0]])
    Ic = Is[:3, :3] - m * C @ C.T
    return m, c, 0.5 * (Ic + Ic.T)


def _transform_spatial(Is, R, p):
    """Spatial inertia given in child coords -> parent coords (child pose R, p)."""
    E = R.T
    P = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
    X = np.block([[E, np.zeros((3, 3))], [-E @ P, E]])  # parent -> child motion transform
    return X.T @ Is @ X


def _friction_condim(friction, condim, what):
    """A geom's or contact pair's (slide, torsion, roll) friction, checked with its condim."""
    fr = _vec(friction, 3, f"{what}: friction")
    if np.any(fr < 0):
        raise ValueError(f"{what}: friction must be non-negative, got {tuple(fr)}")
    if condim not in (1, 3, 4, 6):
        raise ValueError(f"{what}: condim {condim!r} is not 1, 3, 4 or 6")
    return fr


class ModelBuilder:
    """Assemble a kinematic tree body by body, then :meth:`build` a :class:`Model`.

    >>> b = ModelBuilder()
    >>> b.add_body("link1", parent="world", joint="revolute", axis=(0, 0, 1),
    ...            pos=(0, 0, 1), mass=1.0, com=(0.5, 0, 0), inertia=(0.01, 0.1, 0.1))
    >>> model = b.build()

    Each body is placed by ``pos``/``quat`` (w, x, y, z) relative to its parent's
    body frame: that is the joint frame; the joint then moves the body relative
    to it.  Bodies may be added in any order; ``build`` numbers them so that
    parents come first (keeping the given order where it already is).

    ``mass=0`` (with zero or no inertia) makes a massless frame, allowed as
    long as something with mass moves below it.  ``strict_inertia=False``
    (used by the URDF loader) accepts a positive semi-definite inertia that
    breaks the triangle inequality, recording the body in
    ``builder.inertia_notes`` instead of raising.
    """

    def __init__(self, gravity=(0.0, 0.0, -9.81)):
        self.gravity = _vec(gravity, 3, "gravity")
        self._bodies = []           # add_body's records, in the order given
        self._names = set()         # their names
        self.inertia_notes = []     # bodies accepted with strict_inertia=False despite a non-physical inertia
        self._visuals = []          # add_visual's geoms (drawn only; jaxmbd.visuals)
        self._visual_meshes = {}    # their meshes by key
        self._forces = []           # force element specifications (add_force and the add_* helpers)
        self._bumps = []            # road bumps (x, r) for tires
        self._geoms = []            # collision geoms (add_geom)
        self._pairs = []            # explicit contact pairs (add_contact_pair)
        self._excludes = []         # excluded body pairs (exclude_contact)
        self._contact_opts = {}     # set_contact_options
        self._actuators = []        # actuator specifications (add_actuator)
        self._actuator_limits = {}  # joint -> actuator force range (set_actuator_force_range)
        self._loops = []            # loop constraints (add_loop)
        self._init = (None, None)   # set_initial_state's (q0, v0)
        self._sites = {}            # name -> (body, R, p): frames fixed in a body (add_site)
        self._site_shapes = {}      # name -> (type, size (3,)): their volumes (touch sensors)
        self._simple = {}           # body -> its joints: MuJoCo's simple sliding bodies (set_simple_body)
        self._spatial = []          # spatial tendon records (add_spatial_tendon)
        self._tendons = {}          # name -> fixed tendon record (add_fixed_tendon)
        self._tendon_couplings = []  # (tendon1, tendon2, polycoef, solref, solimp) (add_tendon_coupling)
        self._sensors = []          # sensor specifications (add_sensor), in sensordata's order
        self.contact_skipped = []   # ((type1, type2), n_pairs) dropped by skip_unsupported at the last build
        self.loop_anchor_shifts = []   # ((loop name, gap), ...) closed by moving anchors at the last build

    def add_body(self, name: str, parent: str = "world", joint: str = "revolute", *,
                 axis: Sequence[float] | None = None, pitch: float = 0.0,
                 anchor=(0.0, 0.0, 0.0), pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
                 mass: float = 1.0, com=(0.0, 0.0, 0.0), inertia=None,
                 damping=0.0, armature=0.0, stiffness=0.0, spring_ref=None, strict_inertia=True,
                 joint_name: str | None = None, gravcomp: float = 0.0, mocap: bool = False) -> "ModelBuilder":
        """Add a body and its inboard joint.

        ``mass=0`` makes a massless body (its ``inertia`` must then be zero or
        omitted): a frame that only carries a joint, e.g. one of several joints
        that MJCF puts in one body.  ``build`` checks that something with mass
        hangs below every massless moving body.  ``inertia`` defaults to
        1e-2 * identity for a body with mass.  ``joint_name`` names the joint
        (``model.joint_names``); it defaults to the body name.  ``gravcomp``: MuJoCo's gravity
        compensation, an upward force of that fraction of the body's weight at its centre of mass
        (1 cancels gravity on the body; :class:`jaxmbd.forces.gravcomp.GravityCompensation`).
        ``mocap=True``: a mocap body (MuJoCo's ``mocap="true"``), a child of the world with a
        ``fixed`` joint whose pose is an input (``model.mocap``, :func:`jaxmbd.set_mocap`; ``pos``
        and ``quat`` its initial pose); bodies welded below it move with it, and its geoms collide
        with the moving bodies as the world's do.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"body name must be a non-empty string, got {name!r}")
        if name == "world":
            raise ValueError("body name 'world' is reserved for the fixed base")
        if name in self._names:
            raise ValueError(f"duplicate body name {name!r}")
        what = f"body {name!r}"
        if not joints.is_registered(joint):
            raise ValueError(f"{what}: unknown joint type {joint!r}; expected one of "
                             f"{', '.join(joints.JOINT_TYPES)}")
        jspec = joints.get(joint)
        jt = jspec.name
        nv = jspec.nv
        if jspec.uses_axis:
            if axis is None:
                raise ValueError(f"{what}: a {jt} joint needs an axis")
            ax = _vec(axis, 3, f"{what}: joint axis")
            nrm = np.linalg.norm(ax)
            if nrm < 1e-12:
                raise ValueError(f"{what}: joint axis is zero")
            ax = ax / nrm
        else:
            ax = np.array([0.0, 0.0, 1.0])
        pitch = _scalar(pitch, f"{what}: pitch")
        if pitch != 0.0 and not jspec.uses_pitch:
            raise ValueError(f"{what}: pitch is only meaningful for "
                             f"{' and '.join(t.name for t in joints.registered() if t.uses_pitch)} joints (joint is {jt})")
        anc = _vec(anchor, 3, f"{what}: joint anchor")
        if not jspec.uses_anchor and np.any(anc != 0):
            raise ValueError(f"{what}: a {jt} joint takes no anchor (its motion is about the body origin)")
        p = _vec(pos, 3, f"{what}: pos")
        q = _vec(quat, 4, f"{what}: quat")
        if np.linalg.norm(q) < 1e-12:
            raise ValueError(f"{what}: quat is zero")
        R = _quat_rot(q / np.linalg.norm(q))
        m = _scalar(mass, f"{what}: mass")
        if m < 0:
            raise ValueError(f"{what}: mass must be positive (or 0 for a massless frame), got {m}")
        c = _vec(com, 3, f"{what}: com")
        if m == 0:
            if inertia is not None and np.any(np.asarray(inertia, dtype=np.float64) != 0):
                raise ValueError(f"{what}: a massless body (mass 0) must have zero inertia")
            Ic = np.zeros((3, 3))
        else:
            Ic = _check_inertia((1e-2, 1e-2, 1e-2) if inertia is None else inertia, what, strict_inertia,
                                self.inertia_notes)
        jname = name if joint_name is None else joint_name
        if not isinstance(jname, str) or not jname:
            raise ValueError(f"{what}: joint_name must be a non-empty string, got {joint_name!r}")

        def per_dof(x, label, nonneg=True):
            a = np.broadcast_to(np.asarray(x, dtype=np.float64), (nv,)).copy() if np.ndim(x) == 0 \
                else _vec(x, nv, f"{what}: {label}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{what}: {label} contains NaN or inf")
            if nonneg and np.any(a < 0):
                raise ValueError(f"{what}: {label} must be non-negative, got {a}")
            return a

        damp = per_dof(damping, "damping")
        arm = per_dof(armature, "armature")
        stiff = per_dof(stiffness, "stiffness")
        if np.any(stiff != 0) and not jspec.scalar_coords:
            raise ValueError(f"{what}: stiffness is supported for joints with scalar coordinates "
                             f"({', '.join(joints.SCALAR_COORDS)}), not {jt}")
        ref = np.zeros(jspec.nq) if spring_ref is None else per_dof(spring_ref, "spring_ref", nonneg=False)
        gc = _scalar(gravcomp, f"{what}: gravcomp")
        if jspec.welded and np.any(np.concatenate([damp, arm, stiff])):
            raise ValueError(f"{what}: a fixed joint has no DoF for damping/armature/stiffness")
        if mocap and (parent not in ("world", None) or not jspec.welded):
            raise ValueError(f"{what}: a mocap body is a child of the world with a fixed joint "
                             f"(got parent {parent!r}, joint {jt!r}; MuJoCo refuses it too)")
        self._bodies.append(dict(name=name, parent=parent, jtype=jt, axis=ax, pitch=pitch, anchor=anc,
                                 R=R, p=p, mass=m, com=c, inertia=Ic, damping=damp, armature=arm,
                                 stiffness=stiff, spring_ref=ref, joint_name=jname, gravcomp=gc,
                                 mocap=bool(mocap), quat=q / np.linalg.norm(q)))
        self._names.add(name)
        return self

    def _order(self):
        """Stable topological order (parents first); errors on unknown parents and cycles."""
        by_name = {b["name"]: b for b in self._bodies}
        for b in self._bodies:
            if b["parent"] != "world" and b["parent"] not in by_name:
                raise ValueError(f"body {b['name']!r}: parent {b['parent']!r} is not defined")
        placed, order = {"world"}, []
        remaining = list(self._bodies)
        while remaining:
            nxt = [b for b in remaining if b["parent"] in placed]
            if not nxt:
                # every remaining body waits on another remaining one: a cycle
                b = remaining[0]
                seen, cur = [b["name"]], by_name[b["parent"]]
                while cur["name"] not in seen:
                    seen.append(cur["name"])
                    cur = by_name[cur["parent"]]
                cyc = seen[seen.index(cur["name"]):] + [cur["name"]]
                raise ValueError("cycle in the body tree: " + " -> ".join(cyc))
            # keep insertion order: take the first ready body, then rescan
            b = nxt[0]
            order.append(b)
            placed.add(b["name"])
            remaining.remove(b)
        return order

    def _mocap_bodies(self, order):
        """({body name: its mocap body's index} for the mocap bodies and the bodies welded below
        them, [the mocap bodies' records]); a ValueError for a body with a joint below one."""
        of, mocap = {}, []
        for b in order:
            if b.get("mocap"):
                of[b["name"]] = len(mocap)
                mocap.append(b)
            elif b["parent"] in of:
                if not joints.get(b["jtype"]).welded:
                    raise ValueError(f"body {b['name']!r}: a {b['jtype']} joint below the mocap body "
                                     f"{mocap[of[b['parent']]]['name']!r} is not supported (only welded bodies)")
                of[b["name"]] = of[b["parent"]]
        return of, mocap

    def _check_not_mocap(self, of, body, what):
        if body in of:
            raise ValueError(f"{what}: body {body!r} is (welded to) a mocap body, whose moving pose "
                             "this element does not follow (not supported)")

    # --- force elements and loop constraints -----------------------------------------

    def _point_owner(self, body, what):
        if body == "world" or body is None:
            return "world"
        if not isinstance(body, str) or body not in self._names:
            raise ValueError(f"{what}: body {body!r} is not defined")
        return body

    def add_force(self, element) -> "ModelBuilder":
        """Add a force element (:mod:`jaxmbd.forces`: a ``ForceElement``
        created with body and joint names; they are resolved when the model
        is built).  The named helpers below are shorthands for it."""
        from .forces import ForceElement
        if not isinstance(element, ForceElement):
            raise TypeError(f"add_force takes a jaxmbd.forces element, got {type(element).__name__}")
        self._forces.append(element)
        return self

    def add_spring(self, body_a, point_a, body_b, point_b, *, stiffness=0.0, damping=0.0, rest_length=0.0,
                   force=0.0, name=None) -> "ModelBuilder":
        """A point-to-point spring-damper (:class:`jaxmbd.forces.PointSpringDamper`):
        tension k (L - rest_length) + c L' + force between ``point_a`` of
        ``body_a`` and ``point_b`` of ``body_b`` (body coordinates; world
        coordinates for "world")."""
        from .forces import PointSpringDamper
        return self.add_force(PointSpringDamper(body_a, point_a, body_b, point_b, stiffness=stiffness,
                                                damping=damping, rest_length=rest_length, force=force, name=name))

    def add_rotational_spring(self, body_a, body_b, *, axis, axis_b=None, stiffness=0.0, damping=0.0,
                              reference=0.0, name=None) -> "ModelBuilder":
        """A rotational spring-damper between two bodies about a common axis
        (:class:`jaxmbd.forces.RotationalSpringDamper`)."""
        from .forces import RotationalSpringDamper
        return self.add_force(RotationalSpringDamper(body_a, body_b, axis=axis, axis_b=axis_b, stiffness=stiffness,
                                                     damping=damping, reference=reference, name=name))

    def add_tire(self, body, center, *, stiffness, damping=0.0, radius, name=None) -> "ModelBuilder":
        """A tire (:class:`jaxmbd.forces.Tire`): a vertical spring-damper between the
        wheel centre ``center`` (body coordinates) and the road, unloaded radius
        ``radius`` (bumps with :meth:`add_road_bump`)."""
        from .forces import Tire
        return self.add_force(Tire(body, center, stiffness=stiffness, damping=damping, radius=radius, name=name))

    def add_road_bump(self, x, radius) -> "ModelBuilder":
        """A half-cylinder bump across the road (axis along world y) centred
        at world ``x``, of the given radius; the tires see it enveloped."""
        x, r = _scalar(x, "road bump: x"), _scalar(radius, "road bump: radius")
        if not r > 0:
            raise ValueError(f"road bump: radius must be positive, got {r}")
        self._bumps.append((x, r))
        return self

    def add_coordinate_spring(self, joint, *, other=None, index=0, other_index=0, stiffness=0.0, damping=0.0,
                              reference=0.0) -> "ModelBuilder":
        """A spring-damper on d = q[joint][index] - q[other][other_index] (the
        ground when ``other`` is None; :class:`jaxmbd.forces.CoordinateSpringDamper`);
        joints are named by their body."""
        from .forces import CoordinateSpringDamper
        return self.add_force(CoordinateSpringDamper(joint, other=other, index=index, other_index=other_index,
                                                     stiffness=stiffness, damping=damping, reference=reference))

    def add_joint_force(self, joint, value) -> "ModelBuilder":
        """A constant generalized force on a joint's DoFs (e.g. a motor torque;
        :class:`jaxmbd.forces.JointForce`); joints are named by their body."""
        from .forces import JointForce
        if joint not in self._names:
            raise ValueError(f"joint force: body {joint!r} is not defined")
        return self.add_force(JointForce(joint, value))

    def add_joint_limit(self, joint, lower, upper, *, stiffness=None, damping=0.0, exponent=1.0,
                        width=0.0, viscous=0.0, solref=None, solimp=None) -> "ModelBuilder":
        """A compliant stop at each end of a hinge or slide joint's range
        (:class:`jaxmbd.forces.JointLimit`); joints are named by their body.  Without ``stiffness``:
        MuJoCo's soft constraint with ``solref``/``solimp`` (:mod:`jaxmbd.forces.soft`; defaults
        MuJoCo's); with it, the penalty law of :mod:`jaxmbd.forces.law` (stiffness, damping, exponent,
        width, viscous)."""
        from .forces import JointLimit
        if joint not in self._names:
            raise ValueError(f"joint limit: body {joint!r} is not defined")
        if stiffness is None:
            return self.add_force(JointLimit(joint, lower, upper, solref=solref, solimp=solimp))
        return self.add_force(JointLimit(joint, lower, upper, stiffness=stiffness, damping=damping,
                                         exponent=exponent, width=width, viscous=viscous, solref=solref,
                                         solimp=solimp))

    def add_friction_loss(self, joint, loss, *, solref=None, solimp=None) -> "ModelBuilder":
        """Dry friction of at most ``loss`` (N m or N) on each DoF of a joint (MuJoCo's
        ``frictionloss``; :class:`jaxmbd.forces.FrictionLoss`, a soft-constraint row per DoF);
        joints are named by their body."""
        from .forces import FrictionLoss
        if joint not in self._names:
            raise ValueError(f"friction loss: body {joint!r} is not defined")
        return self.add_force(FrictionLoss(joint, loss, solref=solref, solimp=solimp))

    def add_joint_coupling(self, joint1, joint2=None, *, polycoef=(0.0, 1.0, 0.0, 0.0, 0.0), solref=None,
                           solimp=None) -> "ModelBuilder":
        """Hold hinge or slide ``joint1`` to a polynomial of ``joint2``: q1 - q1₀ = c₀ + c₁ x + ... + c₄ x⁴,
        x = q2 - q2₀ (q₀: the model's q0), or to q1₀ + c₀ without ``joint2`` (MuJoCo's ``<equality
        joint>``, a soft row: :class:`jaxmbd.forces.joint_coupling.JointCoupling`); joints are named by
        their body."""
        from .forces.joint_coupling import JointCoupling
        for j in (joint1, joint2):
            if j is not None and j not in self._names:
                raise ValueError(f"joint coupling: body {j!r} is not defined")
        return self.add_force(JointCoupling(joint1, joint2, polycoef=polycoef, solref=solref, solimp=solimp))

    # -- collision geometry and contact (jaxmbd.forces.contact) --------------------------------------
    GEOM_SIZES = MJ.GEOM_SIZE_COUNT

    def add_geom(self, body, type, size=(), *, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), name=None,
                 contype=1, conaffinity=1, condim=MJ.CONDIM, friction=MJ.FRICTION, solref=MJ.SOLREF,
                 solimp=MJ.SOLIMP, margin=0.0, priority=0, solmix=1.0,
                 vertices=None, maxhullvert=None, elevation=None) -> "ModelBuilder":
        """A collision geom on ``body`` ("world" for static geometry), in MuJoCo's conventions: ``type``
        plane (normal +z of its frame), sphere (radius), capsule and cylinder (radius, half-length along
        z), box (half-sizes), ellipsoid (semi-axes), or mesh (no size; ``vertices`` (n, 3) in the geom
        frame, colliding as their convex hull, as MuJoCo's meshes do: several contacts against a plane,
        a box or another mesh, one against the curved primitives, see :mod:`jaxmbd.contact.geometry`);
        the geom frame at ``pos``/``quat`` (w x y z) in the body frame.  Which pairs can touch follows MuJoCo's rules (contype/conaffinity bitmasks, no
        contact within a body or between a body and its parent, ``add_contact_pair`` and
        ``exclude_contact``); a pair's parameters combine its geoms' as MuJoCo does (priority, max of
        condim and friction, solmix-weighted solref/solimp, summed margins) and map to the force law by
        :func:`jaxmbd.forces.law.from_mujoco` (see :mod:`jaxmbd.forces.contact`); ``solref`` and ``solimp``
        are checked by :func:`jaxmbd.checks.solref` and :func:`jaxmbd.checks.solimp`.  friction: (slide,
        torsion, roll); condim 1 (frictionless), 3 (sliding), 4 (+ torsion) or 6 (+ rolling).
        ``maxhullvert`` (a mesh): the vertex limit of the hull it collides as (MuJoCo's mesh attribute,
        -1: the full hull; None: :data:`jaxmbd.forces.contact.MAXHULLVERT_DEFAULT`, 64), the hull of
        a subset of the vertices (:func:`jaxmbd.contact.geometry.make_mesh`); the narrow phase's work
        on a mesh grows with its hull's size.  A height field (MuJoCo's ``hfield``): ``size`` (rx, ry,
        top, base) and ``elevation`` (nrow, ncol), nrow and ncol >= 2, row r at y = -ry + 2 ry r /
        (nrow - 1), column c at x = -rx + 2 rx c / (ncol - 1); the elevations are normalized to [0, 1]
        as MuJoCo does (minus their minimum, over their range) and scaled by top; the solid reaches down
        to z = -base (:mod:`jaxmbd.contact.hfield`)."""
        geoms = self._geoms
        gname = name if name is not None else f"geom{len(geoms)}"
        what = f"geom {gname!r}"
        if any(g["name"] == gname for g in geoms):
            raise ValueError(f"{what}: the name is taken")
        if body != "world" and body not in self._names:
            raise ValueError(f"{what}: body {body!r} is not defined")
        if type not in self.GEOM_SIZES and type not in ("mesh", "hfield"):
            raise ValueError(f"{what}: unknown geom type {type!r}; expected one of "
                             f"{', '.join(self.GEOM_SIZES)}, mesh, hfield")
        if (type == "hfield") != (elevation is not None):
            raise ValueError(f"{what}: " + ("a height field needs its elevation" if type == "hfield"
                                            else f"elevation is for height fields, not a {type}"))
        hfield = None
        if type == "hfield":
            from .contact import hfield as H
            s4 = H.check_size(size, what)
            hfield = (H.normalize(H.check_data(elevation, what)), s4)
            size = s4[:3]
        if (type == "mesh") != (vertices is not None):
            raise ValueError(f"{what}: " + ("a mesh needs its vertices" if type == "mesh"
                                            else f"vertices are for meshes, not a {type}"))
        if type == "mesh":
            from .contact.geometry import make_mesh
            if np.size(size):
                raise ValueError(f"{what}: a mesh takes its vertices, not a size")
            vertices = make_mesh(vertices, what=what).verts      # the hull's vertices (checked)
            if maxhullvert is not None and int(maxhullvert) != -1 and int(maxhullvert) < 4:
                raise ValueError(f"{what}: maxhullvert must be -1 (no limit) or at least 4, got {maxhullvert}")
        elif maxhullvert is not None:
            raise ValueError(f"{what}: maxhullvert is for meshes, not a {type}")
        need = self.GEOM_SIZES.get(type, 3 if type == "hfield" else 0)
        sz = np.atleast_1d(np.asarray(size, float)) if need else np.zeros(0)
        if sz.shape != (need,) or not np.all(np.isfinite(sz)) or np.any(sz <= 0):
            raise ValueError(f"{what}: a {type} needs {need} positive size(s), got {size!r}")
        fr = _friction_condim(friction, condim, what)
        if margin < 0:
            raise ValueError(f"{what}: margin must be non-negative")
        for key, val in (("contype", contype), ("conaffinity", conaffinity)):
            if int(val) != val or val < 0:
                raise ValueError(f"{what}: {key} must be a non-negative integer bitmask")
        q = _vec(quat, 4, f"{what}: quat")
        if np.linalg.norm(q) < 1e-12:
            raise ValueError(f"{what}: quat is zero")
        q = q / np.linalg.norm(q)
        geoms.append(dict(name=gname, body=body, type=type, size=np.pad(sz, (0, 3 - need)),
                          R=_quat_rot(q), p=_vec(pos, 3, f"{what}: pos"), contype=int(contype),
                          conaffinity=int(conaffinity), condim=int(condim), friction=fr,
                          solref=_solref(solref, f"{what}: solref"), solimp=_solimp(solimp, f"{what}: solimp"),
                          margin=float(margin), priority=int(priority), solmix=float(solmix), vertices=vertices,
                          maxhullvert=None if maxhullvert is None else int(maxhullvert), hfield=hfield))
        return self

    def add_contact_pair(self, geom1, geom2, *, condim=MJ.CONDIM, friction=MJ.FRICTION, solref=MJ.SOLREF,
                         solimp=MJ.SOLIMP, margin=0.0, stiffness=None, damping=None,
                         exponent=None, width=None, viscous=None) -> "ModelBuilder":
        """An explicit contact pair (MuJoCo's ``<pair>``: it collides whatever the geoms' bitmasks and
        exclusions, with these parameters instead of the geoms' mix).  ``stiffness`` (N/m^p),
        ``damping`` (s/m, Hunt-Crossley), ``exponent`` p, ``width`` (m), ``viscous`` (N s/m) set the
        law directly instead of the solref mapping (:mod:`jaxmbd.forces.law`); ``solref`` and ``solimp``
        are checked as :meth:`add_geom`'s."""
        what = f"contact pair {geom1!r}-{geom2!r}"
        for key, val, ok in (("stiffness", stiffness, lambda x: x > 0), ("damping", damping, lambda x: x >= 0),
                             ("exponent", exponent, lambda x: x >= 1), ("width", width, lambda x: x >= 0),
                             ("viscous", viscous, lambda x: x >= 0)):
            if val is not None and not (np.isfinite(val) and ok(val)):
                raise ValueError(f"{what}: {key} {val!r} is out of range")
        fr = _friction_condim(friction, condim, what)
        self._pairs.append(dict(
            geom1=geom1, geom2=geom2, condim=condim, friction=fr, solref=_solref(solref, f"{what}: solref"),
            solimp=_solimp(solimp, f"{what}: solimp"), margin=float(margin), stiffness=stiffness,
            damping=damping, exponent=exponent, width=width, viscous=viscous))
        return self

    def exclude_contact(self, body1, body2) -> "ModelBuilder":
        """No contact between the geoms of these two bodies (MuJoCo's ``<exclude>``)."""
        self._excludes.append((body1, body2))
        return self

    def set_contact_options(self, *, smoothing_velocity=None, filterparent=None, timestep=None,
                            skip_unsupported=None, body_alias=None, capacity=None, impratio=None,
                            rows=None, law=None, cone=None) -> "ModelBuilder":
        """smoothing_velocity (m/s, default 0.01): the friction law's regularization (explicit
        steps up to about 2 ms stay stable on friction; smaller values creep less and are
        stiffer: an implicit integrator's work); filterparent (default True): MuJoCo's parent filter; timestep: MuJoCo's refsafe rule (a solref time
        constant below twice it is raised to it; None: solref as given); skip_unsupported (default
        False: an error): drop candidate pairs whose geom types the narrow phase lacks (listed in
        ``builder.contact_skipped`` after ``build``); body_alias: {body: body} naming bodies that
        count as one for the parent filter and exclusions (the massless chain of a multi-joint MJCF
        body counts as that body); capacity: the broad phase's capacity per group of pairs of two
        geom types (None: the default rule of :func:`jaxmbd.forces.contact_broadphase.capacities`; "all": no
        broad phase; an int for every group; a dict {(type1, type2): int}); impratio (default 1):
        MuJoCo's ratio of frictional to normal impedance (the soft law's frictional rows have the
        normal row's regularizer divided by it); rows: how many candidate contacts (the deepest)
        enter the soft law's solve (default :func:`jaxmbd.forces.contact_rows.default_rows`: from the model's pairs, per tree the contacts its geoms can make with the world's at once, at least 8;
        more within their margin at once stops a run with ``CONTACT_OVERFLOW``); law: "soft" (the
        default: pairs given by solref/solimp are MuJoCo's soft constraints, :mod:`jaxmbd.forces.soft`)
        or "penalty" (every pair by the penalty law, solref/solimp mapped by
        :func:`jaxmbd.forces.law.from_mujoco`; pairs given a stiffness always are); cone: the soft
        law's friction cones, "pyramidal" (the default, as MuJoCo's) or "elliptic"."""
        opts = self._contact_opts
        if cone is not None:
            if cone not in ("pyramidal", "elliptic"):
                raise ValueError(f"contact cone {cone!r}: expected 'pyramidal' or 'elliptic'")
            opts["cone"] = cone
        if law is not None:
            if law not in ("soft", "penalty"):
                raise ValueError(f"contact law {law!r}: expected 'soft' or 'penalty'")
            opts["law"] = law
        if impratio is not None:
            if not impratio > 0:
                raise ValueError(f"contact impratio must be positive, got {impratio}")
            opts["impratio"] = float(impratio)
        if rows is not None:
            if not (isinstance(rows, (int, np.integer)) and rows >= 1):
                raise ValueError(f"contact rows must be an int >= 1, got {rows!r}")
            opts["rows"] = int(rows)
        if capacity is not None:
            opts["capacity"] = capacity
        if body_alias is not None:
            opts["body_alias"] = dict(body_alias)
        if skip_unsupported is not None:
            opts["skip_unsupported"] = bool(skip_unsupported)
        if smoothing_velocity is not None:
            if not smoothing_velocity > 0:
                raise ValueError("contact smoothing_velocity must be positive")
            opts["smoothing"] = float(smoothing_velocity)
        if filterparent is not None:
            opts["filterparent"] = bool(filterparent)
        if timestep is not None:
            opts["timestep"] = float(timestep)
        return self

    def add_fixed_tendon(self, name: str, joints, coef, *, stiffness=0.0, damping=0.0, springlength=None,
                         range=None, solref_limit=None, solimp_limit=None, frictionloss=0.0, solref_friction=None,
                         solimp_friction=None) -> "ModelBuilder":
        """A fixed tendon (MuJoCo's ``<tendon><fixed>``): length L = Σ coefᵢ qᵢ over hinge and slide
        ``joints`` (named by their body), with a spring of ``stiffness`` about ``springlength`` (one
        number, or two: a dead band; None: L at q0) and ``damping`` on L'; ``range`` (lo, hi): a soft
        limit row at each end (``solref_limit``, ``solimp_limit``); ``frictionloss``: a soft
        friction-loss row (``solref_friction``, ``solimp_friction``); MuJoCo's defaults for the
        soft parameters (:mod:`jaxmbd.forces.tendon`).  ``add_actuator(None, tendon=name)`` drives it."""
        what = f"tendon {name!r}"
        if not isinstance(name, str) or not name:
            raise ValueError(f"tendon name must be a non-empty string, got {name!r}")
        if name in self._tendons:
            raise ValueError(f"duplicate tendon name {name!r}")
        joints = tuple(joints)
        if not joints:
            raise ValueError(f"{what}: needs at least one joint")
        for j in joints:
            if j not in self._names:
                raise ValueError(f"{what}: body {j!r} is not defined")
        c = np.asarray(coef, np.float64).reshape(-1)
        if c.shape != (len(joints),) or not np.all(np.isfinite(c)):
            raise ValueError(f"{what}: one finite coefficient per joint expected, got {coef!r}")
        k, b = _scalar(stiffness, f"{what}: stiffness"), _scalar(damping, f"{what}: damping")
        if k < 0 or b < 0:
            raise ValueError(f"{what}: stiffness and damping must be >= 0")
        sl = None
        if springlength is not None:
            sl = np.asarray(springlength, np.float64).reshape(-1)
            if sl.size == 1:
                sl = np.repeat(sl, 2)
            if sl.shape != (2,) or not np.all(np.isfinite(sl)) or sl[0] > sl[1]:
                raise ValueError(f"{what}: springlength is one number or an increasing pair, got {springlength!r}")
        self._tendons[name] = dict(joints=joints, coef=c, stiffness=k, damping=b, springlength=sl,
                                   **_tendon_rows(what, range, frictionloss, solref_limit, solimp_limit,
                                                  solref_friction, solimp_friction))
        return self

    def add_tendon_coupling(self, tendon1, tendon2=None, *, polycoef=(0.0, 1.0, 0.0, 0.0, 0.0), solref=None,
                            solimp=None) -> "ModelBuilder":
        """Hold fixed tendon ``tendon1``'s length to a polynomial of ``tendon2``'s, as
        :meth:`add_joint_coupling` holds joints (MuJoCo's ``<equality tendon>``, a soft row)."""
        from .forces.joint_coupling import _soft
        what = f"tendon coupling of {tendon1!r}"
        for t in (tendon1, tendon2):
            if t is not None and t not in self._tendons:
                raise ValueError(f"{what}: no tendon named {t!r} (add_fixed_tendon first)")
        if tendon1 == tendon2:
            raise ValueError(f"{what}: a tendon cannot be coupled to itself")
        self._tendon_couplings.append((tendon1, tendon2) + _soft(polycoef, solref, solimp, what))
        return self

    def add_actuator(self, joint, kind="motor", *, name=None, gear=1.0, kp=None, kv=None, dampratio=None,
                     gainprm=None, biasprm=None, gaintype="fixed", biastype="none", ctrlrange=None,
                     forcerange=None, jointinparent=False, active=True, ctrllimited=None,
                     tendon=None, site=None) -> "ModelBuilder":
        """An actuator on a joint (named as in ``model.joint_names``: the body
        name unless ``joint_name`` was given), as MuJoCo defines it
        (:mod:`jaxmbd.forces.actuator`): its input is one entry of ``ctrl``,
        in the order the actuators are added.

        kind: "motor" (force = ctrl), "position" (kp (ctrl - L) - kv L',
        defaults kp 1, kv 0), "velocity" (kv (ctrl - L'), default kv 1),
        "damper" (-kv L' ctrl; needs a non-negative ctrlrange) or "general"
        (gainprm, biasprm: up to 3 numbers, gaintype "fixed"/"affine",
        biastype "none"/"affine").  dampratio (position and affine-bias
        general actuators, instead of kv): kv = 2 dampratio sqrt(kp m) with
        m the mass the actuator sees at ``q0``, as MuJoCo compiles it.
        gear: 1 to 6 numbers (MuJoCo's gear;
        hinge/slide use the first, ball joints the first 3, free joints all
        6); jointinparent: the rotational gear is in the parent's frame.
        ctrlrange / forcerange: (lo, hi) with lo < hi clamps the control /
        the actuator force (None: no clamp); ``ctrllimited=False`` keeps a
        ctrlrange without clamping (MuJoCo's disabled ``clampctrl``; a
        damper needs its range).  ``tendon``: the transmission through a fixed
        tendon (:meth:`add_fixed_tendon`; ``joint`` None), its coefficients times
        the gear's first number.  ``site``: the transmission at a site
        (:meth:`add_site`; ``joint`` None), MuJoCo's ``site`` without
        ``refsite``: the gear is a force (first 3) and a torque (last 3) along
        the site's axes, applied at the site; its length is 0.  ``active=False`` or
        ``joint=None`` (no transmission): the actuator keeps its ctrl slot and
        exerts no force (MuJoCo's disabled actuator groups; actuators a
        loader does not model).  Numbers are checked here, the
        joint when the model is built; both raise ``ValueError`` naming the
        actuator."""
        from .forces.actuator import actuator_spec
        self._actuators.append(actuator_spec(
            joint, kind, name=name, gear=gear, kp=kp, kv=kv, dampratio=dampratio, gainprm=gainprm, biasprm=biasprm, gaintype=gaintype,
            biastype=biastype, ctrlrange=ctrlrange, forcerange=forcerange, jointinparent=jointinparent,
            active=active, ctrllimited=ctrllimited, tendon=tendon, site=site))
        return self

    def set_actuator_force_range(self, joint, force_range) -> "ModelBuilder":
        """Clamp the total actuator force on a hinge or slide joint to
        ``force_range`` = (lo, hi), lo < hi (MuJoCo's joint ``actuatorfrcrange``)."""
        from .forces.actuator import check_range
        self._actuator_limits[joint] = check_range(
            force_range, f"joint {joint!r}", "actuator force range")
        return self

    def add_loop(self, kind, body_a, body_b="world", *, pos_a=(0.0, 0.0, 0.0), quat_a=(1.0, 0.0, 0.0, 0.0),
                 pos_b=(0.0, 0.0, 0.0), quat_b=(1.0, 0.0, 0.0, 0.0), axis=None, axis_b=None, distance=None,
                 normal=(0.0, 0.0, 1.0), name=None) -> "ModelBuilder":
        """A loop-closure constraint between frame A on ``body_a`` and frame B
        on ``body_b`` ("world" for the ground); kinds and equations in
        :mod:`jaxmbd.constraints`.

        Frames are placed by ``pos_*``/``quat_*`` in their body's coordinates
        (world coordinates on the world).  ``axis`` (revolute, prismatic,
        point_on_line) gives z_A in body a's coordinates instead of
        ``quat_a``; ``axis_b`` gives z_B (revolute; default: the same vector
        in body b's coordinates).  ``distance`` (distance constraints) must
        be positive.  ``normal``: the plane normal of ``point_planar``
        (world coordinates)."""
        from .constraints import KINDS
        loops = self._loops
        what = f"loop constraint {name or len(loops)} ({kind})"
        if kind not in KINDS:
            raise ValueError(f"{what}: unknown constraint kind {kind!r}; expected one of {', '.join(KINDS)}")
        a, b = self._point_owner(body_a, what), self._point_owner(body_b, what)
        if a == b:
            raise ValueError(f"{what}: both frames are on {a!r}")
        pa, pb = _vec(pos_a, 3, f"{what}: pos_a"), _vec(pos_b, 3, f"{what}: pos_b")

        def rot(quat, label):
            qv = _vec(quat, 4, f"{what}: {label}")
            if np.linalg.norm(qv) < 1e-12:
                raise ValueError(f"{what}: {label} is zero")
            return _quat_rot(qv / np.linalg.norm(qv))

        def from_axis(ax, label):
            return _axis_frame(_vec(ax, 3, f"{what}: {label}"), f"{what}: {label}")

        Ra, Rb = rot(quat_a, "quat_a"), rot(quat_b, "quat_b")
        if axis is not None:
            if kind not in ("revolute", "prismatic", "point_on_line"):
                raise ValueError(f"{what}: axis applies to revolute, prismatic and point_on_line constraints")
            Ra = from_axis(axis, "axis")
            if kind == "revolute":
                Rb = from_axis(axis if axis_b is None else axis_b, "axis_b")
        elif axis_b is not None:
            raise ValueError(f"{what}: axis_b needs axis")
        d = 0.0
        if kind == "distance":
            if distance is None:
                raise ValueError(f"{what}: a distance constraint needs distance=")
            d = _scalar(distance, f"{what}: distance")
            if not d > 0:
                raise ValueError(f"{what}: distance must be positive, got {d}")
        elif distance is not None:
            raise ValueError(f"{what}: distance applies to distance constraints only")
        nrm = _vec(normal, 3, f"{what}: normal")
        if np.linalg.norm(nrm) < 1e-12:
            raise ValueError(f"{what}: normal is zero")
        plane = from_axis(nrm, "normal")[:, :2].T
        if kind == "point_planar" and np.allclose(np.abs(nrm / np.linalg.norm(nrm)), [0, 0, 1]):
            plane = np.array([[1.0, 0, 0], [0, 1.0, 0]])  # the x and y components, in that order
        loops.append(dict(kind=kind, a=a, b=b, Ra=Ra, pa=pa, Rb=Rb, pb=pb, d=d, plane=plane,
                          name=name or f"loop{len(loops)}"))
        return self

    def _force_elements(self, topo, frames):
        """The bound force elements (merged per class), or None if there are none."""
        from .forces import BuildContext
        from .forces.base import bind_all
        specs = self._forces
        bumps = self._bumps
        ctx = BuildContext(topo, frames, bumps)
        out = bind_all(specs, ctx)
        if bumps and not ctx.bumps_used:
            raise ValueError("road bumps were added but no tire sees them (add_tire)")
        if self._spatial:
            from .forces.spatial_tendon import build
            out = tuple(out or ()) + (build(self._spatial, ctx, self._sites),)
        return out or None

    def add_spatial_tendon(self, name: str, path, *, stiffness=0.0, damping=0.0, springlength=None, range=None,
                           solref_limit=None, solimp_limit=None, frictionloss=0.0, solref_friction=None,
                           solimp_friction=None) -> "ModelBuilder":
        """A spatial tendon (MuJoCo's ``<tendon><spatial>``; :mod:`jaxmbd.forces.spatial_tendon`):
        ``path`` a sequence of site names (:meth:`add_site`), wrapping geoms ``dict(wrap="sphere" or
        "cylinder", body=, radius=, pos=, quat=, sidesite=None)`` each between two sites, and
        ``("pulley", divisor)`` (the segments after it count 1/divisor).  The tension
        -stiffness·(L - springlength) (zero inside a dead band when ``springlength`` is (low, high);
        None: the length at the model's q0) - damping·L̇ acts along the path.  ``range`` and
        ``frictionloss`` (with their soft parameters) add soft rows as on a fixed tendon
        (:meth:`add_fixed_tendon`), their Jacobian ∂L/∂q at the state."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"spatial tendon name must be a non-empty string, got {name!r}")
        what = f"spatial tendon {name!r}"
        if name in self._tendons or any(t["name"] == name for t in self._spatial):
            raise ValueError(f"{what}: duplicate tendon name")
        steps, last = [], None
        for item in path:
            if isinstance(item, str):
                steps.append(("site", item))
                kind = "site"
            elif isinstance(item, tuple) and len(item) == 2 and item[0] == "pulley":
                d = _scalar(item[1], f"{what}: pulley divisor")
                if not d > 0:
                    raise ValueError(f"{what}: a pulley's divisor must be positive, got {d}")
                steps.append(("pulley", d))
                kind = "pulley"
            elif isinstance(item, dict) and item.get("wrap") in ("sphere", "cylinder"):
                if last != "site":
                    raise ValueError(f"{what}: a wrapping geom must follow a site")
                r = _scalar(item.get("radius"), f"{what}: wrap radius")
                if not r > 0:
                    raise ValueError(f"{what}: a wrapping geom's radius must be positive, got {r}")
                qv = _vec(item.get("quat", (1.0, 0.0, 0.0, 0.0)), 4, f"{what}: wrap quat")
                steps.append((item["wrap"], item.get("body", "world"), _quat_rot(qv / np.linalg.norm(qv)),
                              _vec(item.get("pos", (0.0, 0.0, 0.0)), 3, f"{what}: wrap pos"), r,
                              item.get("sidesite")))
                kind = "wrap"
            else:
                raise ValueError(f"{what}: a path item is a site name, a wrap dict or ('pulley', divisor), "
                                 f"got {item!r}")
            if last == "wrap" and kind != "site":
                raise ValueError(f"{what}: a wrapping geom must be followed by a site")
            last = kind
        if not steps or steps[0][0] != "site" or last != "site":
            raise ValueError(f"{what}: the path starts and ends at a site")
        k, c = _scalar(stiffness, f"{what}: stiffness"), _scalar(damping, f"{what}: damping")
        if k < 0 or c < 0:
            raise ValueError(f"{what}: stiffness and damping must be non-negative")
        if springlength is None:
            spring = None
        else:
            sl = np.atleast_1d(np.asarray(springlength, np.float64))
            if sl.size not in (1, 2) or (sl.size == 2 and sl[0] > sl[1]):
                raise ValueError(f"{what}: springlength is one length or a band (low <= high)")
            spring = (float(sl[0]), float(sl[-1]))
        self._spatial.append(dict(name=name, path=tuple(steps), stiffness=k, damping=c, spring=spring,
                                  **_tendon_rows(what, range, frictionloss, solref_limit, solimp_limit,
                                                 solref_friction, solimp_friction)))
        return self

    def _resolved_tendons(self, topo):
        """{name: (dofs, coefficients)} of the fixed tendons on the built tree (jaxmbd.forces.tendon)."""
        from .forces import BuildContext
        from .forces.tendon import resolve
        return resolve(self._tendons, BuildContext(topo, self._frames_of(None)))

    def _actuator_elements(self, topo, resolved):
        """The model's actuators (jaxmbd.forces.Actuators), or None if there are none."""
        from .forces import BuildContext
        from .forces.actuator import bind
        joint_bodies = {b["joint_name"]: b["name"] for b in self._bodies}
        ctx = BuildContext(topo, self._frames_of(None))
        return bind(self._actuators, self._actuator_limits, joint_bodies, ctx, resolved, self._sites,
                    tuple(t["name"] for t in self._spatial))

    def _with_tendons(self, model, resolved):
        """The model with its FixedTendons element (jaxmbd.forces.tendon) for the tendons with a spring
        or damping, its TendonRows and its tendon couplings, and the SpatialTendonRows of its spatial
        tendons with a range or a friction loss."""
        if not self._tendons and not self._spatial:
            return model
        from .crba import host_mass_matrix
        from .forces.spatial_tendon import rows_element as spatial_rows
        H0 = np.asarray(host_mass_matrix(model, model.q0))      # the rows' Â
        rows = spatial_rows(model, self._spatial, H0) if self._spatial else None
        if rows is not None:
            model = dataclasses.replace(model, forces=tuple(model.forces or ()) + (rows,))
        if not self._tendons:
            return model
        from .forces.joint_coupling import JointCoupling, tendon_rows
        from .forces.tendon import element, rows_element
        topo = model.topo
        els = (element(self._tendons, resolved, topo.nv, np.asarray(model.q0), topo.dof_qadr),
               rows_element(self._tendons, resolved, topo.nv, H0))
        forces = list(model.forces or ()) + [e for e in els if e is not None]
        coupled = tendon_rows(self._tendon_couplings, resolved, topo.nv)
        if coupled is not None:      # one JointCoupling element per model: joints' and tendons' rows
            i = next((i for i, e in enumerate(forces) if isinstance(e, JointCoupling)), None)
            if i is None:
                forces.append(coupled)
            else:
                forces[i] = JointCoupling.merge([forces[i], coupled])
        return dataclasses.replace(model, forces=tuple(forces) or None)

    def set_simple_body(self, body: str, joints) -> "ModelBuilder":
        """Mark ``body`` as one of MuJoCo's "simple" bodies with slide joints only (its compiler's
        ``body_simple`` 2: inertial frame on the body frame, no child bodies, parent the world or a
        jointless child of it, axis-aligned slides): MuJoCo then takes 1/mass, not the mass matrix,
        as its ``body_invweight0`` and the ``dof_invweight0`` of its ``joints``, which set the soft
        rows' regularization (:mod:`jaxmbd.forces.soft`).  The MJCF loader marks such bodies."""
        names = {b["name"] for b in self._bodies}
        if body not in names:
            raise ValueError(f"set_simple_body: body {body!r} is not defined")
        self._simple[body] = tuple(joints)
        return self

    def _simple_weights(self, model):
        """({host index: 1/mass}, {DoF: 1/mass}) of the simple bodies (set_simple_body)."""
        bodies, dofs = {}, {}
        for name, jnames in self._simple.items():
            i = model.topo.names.index(name)
            w = 1.0 / max(float(model.mass[i]), 1e-15)
            bodies[i] = w
            for j in jnames:
                k = model.joint_names.index(j)
                for d in range(int(model.topo.nv_body[k])):
                    dofs[int(model.topo.v_adr[k]) + d] = w
        return bodies, dofs

    def add_site(self, name: str, body: str, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), *,
                 type: str = "sphere", size=(0.005, 0.005, 0.005)) -> "ModelBuilder":
        """A named frame fixed in ``body`` ("world" for the fixed base) at ``pos`` with orientation
        ``quat`` (w, x, y, z) in the body's frame, as MuJoCo's ``<site>``: what frame sensors,
        gyros, velocimeters, accelerometers and force/torque sensors read (:meth:`add_sensor`).
        ``type`` (sphere, capsule, ellipsoid, cylinder, box) and ``size`` (MuJoCo's: radius,
        half-length, half-extents) give the volume a touch sensor reads."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"site name must be a non-empty string, got {name!r}")
        if name in self._sites:
            raise ValueError(f"duplicate site name {name!r}")
        qv = _vec(quat, 4, f"site {name!r}: quat")
        if not np.linalg.norm(qv) > 0:
            raise ValueError(f"site {name!r}: quat must be nonzero")
        from .sensors import SITE_TYPES
        if type not in SITE_TYPES:
            raise ValueError(f"site {name!r}: type {type!r}: expected one of {', '.join(SITE_TYPES)}")
        sz = np.asarray(size, np.float64).ravel()
        if sz.size > 3 or sz.size == 0 or not np.all(np.isfinite(sz)) or np.any(sz < 0):
            raise ValueError(f"site {name!r}: size takes 1 to 3 non-negative numbers, got {size!r}")
        self._sites[name] = (body, _quat_rot(qv / np.linalg.norm(qv)), _vec(pos, 3, f"site {name!r}: pos"))
        self._site_shapes[name] = (type, np.r_[sz, np.full(3 - sz.size, 0.005)])
        return self

    def add_sensor(self, kind: str, *, name: str | None = None, joint=None, actuator=None, site=None,
                   body=None, obj=None, objtype=None, ref=None, reftype=None, cutoff=0.0, tendon=None,
                   placeholder_dim: int | None = None) -> "ModelBuilder":
        """A sensor, in ``model.sensors`` and :func:`jaxmbd.sensors.sensordata` in the order added
        (the kinds and their values: :mod:`jaxmbd.sensors`).  Its target by kind: ``joint``
        (jointpos, jointvel, ballquat, ballangvel, jointactuatorfrc), ``actuator`` (actuatorpos,
        actuatorvel, actuatorfrc), ``tendon`` (tendonpos, tendonvel: a fixed or spatial tendon), ``site`` (gyro, velocimeter, accelerometer, touch, force, torque), ``body`` (subtreecom,
        subtreelinvel, subtreeangmom; "world" for the whole model), ``obj`` with ``objtype`` "site",
        "xbody" or "body" (the frame kinds), and optionally ``ref`` with ``reftype`` (positions and
        orientations in that frame).  ``cutoff`` > 0 clamps the values as MuJoCo does.
        ``placeholder_dim``: a slot of that many zeros for a kind jaxmbd does not model (the MJCF
        loader keeps MuJoCo's layout with them)."""
        from . import sensors as S
        what = f"sensor {name!r} ({kind})" if name else f"sensor #{len(self._sensors)} ({kind})"
        if placeholder_dim is None and kind not in S.DIMS:
            raise ValueError(f"{what}: unknown kind; expected one of {', '.join(S.DIMS)}")
        need = {**{k: ("joint", joint) for k in S.JOINT_KINDS}, **{k: ("actuator", actuator) for k in S.ACTUATOR_KINDS},
                **{k: ("tendon", tendon) for k in S.TENDON_KINDS},
                **{k: ("site", site) for k in S.SITE_KINDS}, **{k: ("body", body) for k in S.SUBTREE_KINDS},
                **{k: ("obj", obj) for k in S.FRAME_KINDS}}
        if placeholder_dim is None and need[kind][1] is None:
            raise ValueError(f"{what}: needs {need[kind][0]}=")
        if placeholder_dim is None and kind in S.FRAME_KINDS and objtype is None:
            raise ValueError(f"{what}: needs objtype= ({', '.join(S.OBJTYPES)})")
        if ref is not None and reftype is None:
            raise ValueError(f"{what}: ref= needs reftype= ({', '.join(S.OBJTYPES)})")
        c = _scalar(cutoff, f"{what}: cutoff")
        if c < 0:
            raise ValueError(f"{what}: cutoff must be >= 0 (0: none), got {c}")
        if placeholder_dim is not None and not (isinstance(placeholder_dim, int) and placeholder_dim > 0):
            raise ValueError(f"{what}: placeholder_dim must be a positive int")
        if name is not None and any(sp["name"] == name for sp in self._sensors):
            raise ValueError(f"duplicate sensor name {name!r}")
        self._sensors.append(dict(kind=kind, name=name, joint=joint, actuator=actuator, tendon=tendon,
                                  obj=site if kind in S.SITE_KINDS else obj, objtype=objtype, body=body, ref=ref,
                                  reftype=reftype, cutoff=c, placeholder=placeholder_dim is not None,
                                  dim=placeholder_dim))
        return self

    def _sensor_record(self, topo, eff, joint_names, actuator_names, resolved):
        """The built model's :class:`jaxmbd.sensors.Sensors`, or None without sensors."""
        if not self._sensors:
            return None
        from .sensors import bind
        frames = dict(eff)
        frames["world"] = ("world", np.eye(3), np.zeros(3))
        for n, (b, _, _) in self._sites.items():
            if b not in frames:
                raise ValueError(f"site {n!r}: no body named {b!r}")
        body_geoms = {}
        for i, g in enumerate(self._geoms):
            body_geoms.setdefault(g["body"], []).append(i)
        return bind(self._sensors, topo, joint_names, frames, self._sites, actuator_names,
                    {b["name"]: b["com"] for b in self._bodies}, resolved, self._site_shapes, body_geoms,
                    tuple(t["name"] for t in self._spatial))

    def build(self, coordinate_order=None):
        """Validate and build.  Returns a :class:`Model` for a plain tree, or a
        :class:`jaxmbd.constraints.Mechanism` when loop constraints were
        added or ``coordinate_order`` is given: a list of joint names (body
        names by default) fixing the order of the coordinates (every joint
        with scalar coordinates; default: the tree's order).

        Loops whose frames at q0 are apart by gaps that no joint motion closes, of at most
        ``jaxmbd.constraints.ANCHOR_TOL`` (a file's sites that agree to its printed digits only),
        are closed by moving their frame on the second body (point and weld constraints), as
        MuJoCo's soft equality pulls them together; ``builder.loop_anchor_shifts`` names them."""
        self.loop_anchor_shifts = []
        loops = self._loops
        if not loops and coordinate_order is None:
            return self._build_tree()
        init = self._init
        perm = None
        if coordinate_order is not None:
            # build the tree with the default state, then map the user-order state
            self._init = (None, None)
            try:
                tree = self._build_tree()
            finally:
                self._init = init
            perm = self._coordinate_perm(tree, coordinate_order)
        else:
            tree = self._build_tree()
        return self._mechanism(tree, loops, perm, init)

    def _coordinate_perm(self, tree, order):
        topo = tree.topo
        order = list(order)
        if sorted(order) != sorted(tree.joint_names):
            missing = sorted(set(tree.joint_names) - set(order))
            extra = sorted(set(order) - set(tree.joint_names))
            raise ValueError(f"coordinate_order must list every joint once (missing {missing}, unknown {extra})")
        perm = []
        for name in order:
            j = tree.joint_names.index(name)
            if not joints.get(topo.jtype[j]).scalar_coords:
                raise ValueError(f"coordinate_order: joint {name!r} ({topo.jtype[j]}) has no scalar coordinates; "
                                 "a coordinate order is supported for joints with scalar coordinates only")
            perm.extend(range(topo.q_adr[j], topo.q_adr[j] + topo.nq_body[j]))
        return tuple(int(p) for p in perm)

    def _mechanism(self, tree, loops, perm, init):
        from .constraints import Mechanism
        f64 = jnp.float64
        eff = self._frames_of(tree)
        index = {n: i for i, n in enumerate(tree.body_names)}

        def attach(body, R, p):
            if body == "world":
                return -1, R, p
            host, Ro, po = eff[body]
            if host == "world":
                return -1, Ro @ R, po + Ro @ p
            return index[host], Ro @ R, po + Ro @ p
        specs, Ras, pas, Rbs, pbs = [], [], [], [], []
        for c in loops:
            ia, Ra, pa = attach(c["a"], c["Ra"], c["pa"])
            ib, Rb, pb = attach(c["b"], c["Rb"], c["pb"])
            if ia == ib:
                raise ValueError(f"loop constraint {c['name']!r}: both frames move with the same body "
                                 f"({c['a']!r}, {c['b']!r})")
            specs.append((c["kind"], ia, ib))
            Ras.append(Ra), pas.append(pa), Rbs.append(Rb), pbs.append(pb)
        k = len(loops)
        arr = lambda xs, shape: jnp.asarray(np.array(xs, float).reshape((k,) + shape), f64)  # noqa: E731
        q0u, v0u = init if init is not None else (None, None)
        perm_np = None if perm is None else np.asarray(perm)
        inv = None if perm is None else np.argsort(perm_np)
        tq0, tv0 = np.asarray(tree.q0), np.asarray(tree.v0)
        if q0u is not None:
            if q0u.shape != (tree.nq,) or not np.all(np.isfinite(q0u)):
                raise ValueError(f"initial q0: expected {tree.nq} finite numbers, got shape {q0u.shape}")
            tq0 = q0u if inv is None else q0u[inv]
        if v0u is not None:
            if v0u.shape != (tree.nv,) or not np.all(np.isfinite(v0u)):
                raise ValueError(f"initial v0: expected {tree.nv} finite numbers, got shape {v0u.shape}")
            tv0 = v0u if inv is None else v0u[inv]
        tree = eqx.tree_at(lambda m: (m.q0, m.v0), tree, (jnp.asarray(tq0, f64), jnp.asarray(tv0, f64)))
        uq0 = tq0 if perm_np is None else tq0[perm_np]
        uv0 = tv0 if perm_np is None else tv0[perm_np]
        mech = Mechanism(tree=tree, loops=tuple(specs), loop_names=tuple(c["name"] for c in loops),
                         loop_rot_a=arr(Ras, (3, 3)), loop_pos_a=arr(pas, (3,)), loop_rot_b=arr(Rbs, (3, 3)),
                         loop_pos_b=arr(pbs, (3,)), loop_distance=arr([c["d"] for c in loops], ()),
                         loop_plane=arr([c["plane"] for c in loops], (2, 3)), perm=perm,
                         q0=jnp.asarray(uq0, f64), v0=jnp.asarray(uv0, f64))
        return self._redundancy(mech)

    def _redundancy(self, mech):
        """Find the redundant constraint rows (a planar loop closed by a 3-row
        point constraint has one) and let the dynamics use only independent
        rows: their choice, made once here, is static.  The rank is that of
        Φ_q on the constraint manifold near q0 (q0 assembled and configurations
        around it; :func:`jaxmbd.constraints.redundant_rows`).  Nearly redundant
        rows, a q0 that cannot be assembled (beyond the anchors' gaps of ``build``) and a q0 at a
        singular configuration are recorded (``rows_undecided``, ``start_issue``: messages naming the
        rows) and refused by simulate before anything is compiled."""
        from .constraints import close_by_anchors, redundant_rows
        if mech.nc == 0:
            return mech
        keep, _, undecided, start = redundant_rows(mech)
        if start is not None:   # micrometre gaps the joints cannot close: taken up by the anchors on B
            moved, shifts = close_by_anchors(mech)
            if moved is not None:
                keep2, _, undecided2, start2 = redundant_rows(moved)
                if start2 is None:
                    mech, keep, undecided, start = moved, keep2, undecided2, None
                    self.loop_anchor_shifts = list(shifts)
        return dataclasses.replace(mech, active_rows=keep, rows_undecided=undecided, start_issue=start)

    def _frames_of(self, tree):
        """name -> (moving host body or "world", R_off, p_off) for every body added."""
        eff = {"world": ("world", np.eye(3), np.zeros(3))}
        for b in self._order():
            host, Ro, po = eff[b["parent"]]
            if joints.get(b["jtype"]).welded:
                eff[b["name"]] = (host, Ro @ b["R"], po + Ro @ b["p"])
            else:
                eff[b["name"]] = (b["name"], np.eye(3), np.zeros(3))
        return eff

    def _build_tree(self) -> Model:
        if not self._bodies:
            raise ValueError("model has no bodies")
        order = self._order()
        # Merge welded (fixed-joint) bodies into their nearest moving ancestor.
        eff = {"world": ("world", np.eye(3), np.zeros(3))}  # name -> (moving body, R_off, p_off)
        moving, spatial_I = [], {}
        for b in order:
            host, Ro, po = eff[b["parent"]]
            R = Ro @ b["R"]
            p = po + Ro @ b["p"]
            if joints.get(b["jtype"]).welded:
                eff[b["name"]] = (host, R, p)
                if host != "world":
                    spatial_I[host] = spatial_I[host] + _transform_spatial(
                        _to_spatial(b["mass"], b["com"], b["inertia"]), R, p)
            else:
                eff[b["name"]] = (b["name"], np.eye(3), np.zeros(3))
                nb = dict(b, parent=host, R=R, p=p)
                moving.append(nb)
                spatial_I[b["name"]] = _to_spatial(b["mass"], b["com"], b["inertia"])
        if not moving:
            raise ValueError("model has no moving bodies (every joint is fixed)")
        names = [b["name"] for b in moving]
        index = {n: i for i, n in enumerate(names)}
        jnames = [b["joint_name"] for b in moving]
        if len(set(jnames)) != len(jnames):
            dup = sorted({n for n in jnames if jnames.count(n) > 1})
            raise ValueError(f"duplicate joint name(s) {', '.join(map(repr, dup))}")
        parent = [-1 if b["parent"] == "world" else index[b["parent"]] for b in moving]
        topo = Topology(names, parent, [b["jtype"] for b in moving])
        mass, com, inertia = [], [], []
        for n in names:
            m, c, Ic = _from_spatial(spatial_I[n])
            mass.append(m), com.append(c), inertia.append(Ic)
        # a massless moving body needs mass below it, else its DoFs have no inertia
        subtree_mass = np.array(mass)
        for i in range(len(names) - 1, -1, -1):
            if topo.parent[i] >= 0:
                subtree_mass[topo.parent[i]] += subtree_mass[i]
        for i, n in enumerate(names):
            if subtree_mass[i] <= 0:
                raise ValueError(f"body {n!r}: massless moving body with nothing of mass below it "
                                 "(its joint would have no inertia: the mass matrix is singular)")
        frames = [(b["name"],) + eff[b["name"]] for b in order if eff[b["name"]][0] != "world"]
        f64 = jnp.float64
        cat = lambda key: jnp.asarray(np.concatenate([b[key] for b in moving]), f64)
        tendons = self._resolved_tendons(topo)
        model = Model(
            topo=topo,
            frame_names=tuple(f[0] for f in frames),
            frame_body=tuple(index[f[1]] for f in frames),
            tree_rot=jnp.asarray(np.stack([b["R"] for b in moving]), f64),
            tree_pos=jnp.asarray(np.stack([b["p"] for b in moving]), f64),
            axis=jnp.asarray(np.stack([b["axis"] for b in moving]), f64),
            anchor=jnp.asarray(np.stack([b["anchor"] for b in moving]), f64),
            pitch=jnp.asarray(np.array([b["pitch"] for b in moving]), f64),
            mass=jnp.asarray(np.array(mass), f64),
            com=jnp.asarray(np.stack(com), f64),
            inertia=jnp.asarray(np.stack(inertia), f64),
            gravity=jnp.asarray(self.gravity, f64),
            damping=cat("damping"), armature=cat("armature"), stiffness=cat("stiffness"),
            spring_ref=jnp.asarray(np.concatenate([b["spring_ref"] if joints.get(b["jtype"]).nq else np.zeros(0)
                                                   for b in moving]), f64),
            frame_rot=jnp.asarray(np.stack([f[2] for f in frames]), f64),
            frame_pos=jnp.asarray(np.stack([f[3] for f in frames]), f64),
            q0=jnp.asarray(self._initial_q(topo), f64),
            v0=jnp.asarray(self._initial_v(topo), f64),
            joint_names=tuple(jnames),
            forces=self._force_elements(topo, self._frames_of(None)),
            actuators=self._actuator_elements(topo, tendons),
        )
        model = _with_spatial_springs(model)
        mocap_of, mocap = self._mocap_bodies(order)
        if mocap:
            from .model import Mocap
            model = dataclasses.replace(model, mocap=Mocap(
                names=tuple(b["name"] for b in mocap), pos=jnp.asarray(np.stack([b["p"] for b in mocap]), f64),
                quat=jnp.asarray(np.stack([b["quat"] for b in mocap]), f64)))
            for sp in self._sensors:
                for x in (sp["obj"], sp["body"], sp["ref"]):
                    x = self._sites[x][0] if x in self._sites else x
                    self._check_not_mocap(mocap_of, x, f"sensor {sp['name'] or sp['kind']!r}")
            for c in self._loops:
                for key in ("a", "b"):
                    self._check_not_mocap(mocap_of, c[key], f"loop constraint {c['a']!r}-{c['b']!r}")
            for t in self._spatial:
                for step in t["path"]:
                    body = self._sites.get(step[1], (step[1],))[0] if step[0] == "site" else \
                        step[1] if step[0] != "pulley" else None
                    self._check_not_mocap(mocap_of, body, f"spatial tendon {t['name']!r}")
        model = self._with_gravcomp(model, order, eff, index)
        model = self._with_tendons(model, tendons)
        sensors = self._sensor_record(topo, eff, tuple(jnames),
                                      list(model.actuators.names) if model.actuators is not None else [], tendons)
        if sensors is not None:
            model = dataclasses.replace(model, sensors=sensors)
        if model.actuators is not None:
            from .forces.actuator import resolve_dampratios
            model = resolve_dampratios(model, self._actuators)
        self.contact_skipped = []
        if self._geoms:
            model = self._with_contact(model, order, eff, index)
        visuals = self._visual_record(eff, index)
        if visuals is not None:
            model = dataclasses.replace(model, visual_data=visuals)
        return _fill_invweights(model, self._simple_weights(model)[1])

    def _with_gravcomp(self, model, order, eff, index):
        """The model with its GravityCompensation element (jaxmbd.forces.gravcomp) if a body has a
        nonzero gravcomp: each body's share on its moving host."""
        if not any(b["gravcomp"] for b in order):
            return model
        from .forces.gravcomp import rows
        parts = []
        for b in order:
            host, Ro, po = eff[b["name"]]
            if host != "world":
                parts.append((index[host], b["gravcomp"], b["mass"], po + Ro @ b["com"]))
        el = rows(parts, np.asarray(model.mass))
        if el is None:
            return model
        return dataclasses.replace(model, forces=(model.forces or ()) + (el,))

    def _visual_record(self, eff, index):
        """The built model's :class:`jaxmbd.visuals.Visuals`: the ``add_visual`` geoms, or else the
        collision geoms (``add_geom``) coloured by body; None when there are neither."""
        from . import visuals as V
        given = bool(self._visuals)
        items = self._visuals if given else [
            dict(name=g["name"], body=g["body"], type=g["type"], size=g["size"], R=g["R"], p=g["p"],
                 rgba=None, group=0, mesh=None if g["vertices"] is None else f"hull:{g['name']}",
                 vertices=g["vertices"]) for g in self._geoms]
        if not items:
            return None
        meshes = dict(self._visual_meshes)
        for it in items:
            if it["type"] == "hfield":      # a height field drawn as the mesh of its grid
                from .contact.hfield import surface_mesh
                g = next(g for g in self._geoms if g["name"] == it["name"])
                it.update(type="mesh", size=np.zeros(3), mesh=f"hfield:{it['name']}")
                meshes[it["mesh"]] = surface_mesh(*g["hfield"])
        geoms = []
        for it in items:
            host, Ro, po = eff[it["body"]]
            body = -1 if host == "world" else index[host]
            rgba = it["rgba"]
            if rgba is None:
                rgba = V.FLOOR_RGBA if body < 0 else V.PALETTE[body % len(V.PALETTE)]
            if it["mesh"] is not None and it["mesh"] not in meshes:   # a collision hull drawn as itself
                meshes[it["mesh"]] = (it["vertices"], V.mesh_faces(it["vertices"]))
            geoms.append(V.VisualGeom(
                name=it["name"], body=body, type=it["type"], size=tuple(float(x) for x in it["size"]),
                pos=tuple(float(x) for x in po + Ro @ it["p"]), rot=tuple(float(x) for x in (Ro @ it["R"]).ravel()),
                rgba=tuple(rgba), group=int(it["group"]), mesh=it["mesh"]))
        return V.Visuals(geoms, {k: meshes[k] for k in {g.mesh for g in geoms if g.mesh is not None}})

    def add_visual(self, body, type, size=(), *, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), rgba=None,
                   group=0, name=None, mesh=None, vertices=None, faces=None) -> "ModelBuilder":
        """A geom that is only drawn (:mod:`jaxmbd.view`), on ``body`` ("world" for the scene), in
        :meth:`add_geom`'s conventions for ``type``, ``size``, ``pos`` and ``quat`` (a plane's size: its
        x and y half-sizes, or none for as large as the scene).  ``rgba``: its colour in [0, 1] (None:
        the body's colour); ``group``: MuJoCo's geom group (0-5; the viewer shows 0-2 at first, as
        MuJoCo's does).  A mesh: ``vertices`` (n, 3) in the geom frame and ``faces`` (m, 3) vertex
        indices (None: the vertices' convex hull), shared by every geom that names the same ``mesh``.
        Once any visual geom is given, the collision geoms (:meth:`add_geom`) are no longer drawn
        for themselves."""
        from . import visuals as V
        gname = name if name is not None else f"visual{len(self._visuals)}"
        what = f"visual geom {gname!r}"
        if body != "world" and body not in self._names:
            raise ValueError(f"{what}: body {body!r} is not defined")
        if type not in V.GEOM_TYPES:
            raise ValueError(f"{what}: unknown geom type {type!r}; expected one of {', '.join(V.GEOM_TYPES)}")
        if type == "mesh":
            if vertices is None and mesh not in self._visual_meshes:
                raise ValueError(f"{what}: a mesh needs its vertices (or the name of a mesh given before)")
            key = mesh if mesh is not None else gname
            if vertices is not None:
                Vt = np.asarray(vertices, np.float64)
                if Vt.ndim != 2 or Vt.shape[1] != 3 or len(Vt) < 4 or not np.all(np.isfinite(Vt)):
                    raise ValueError(f"{what}: vertices must be an (n >= 4, 3) array of finite numbers")
                F = V.mesh_faces(Vt) if faces is None else np.asarray(faces)
                if F.ndim != 2 or F.shape[1] != 3 or F.size == 0 or F.min() < 0 or F.max() >= len(Vt):
                    raise ValueError(f"{what}: faces must be an (m, 3) array of vertex indices")
                self._visual_meshes[key] = (Vt, F)
            sz = np.zeros(3)
        elif type == "plane":
            sz = np.pad(np.atleast_1d(np.asarray(size, np.float64))[:2], (0, 1)) if np.size(size) else np.zeros(3)
            if sz.shape != (3,) or not np.all(np.isfinite(sz)) or np.any(sz < 0):
                raise ValueError(f"{what}: a plane's size is its x and y half-sizes (>= 0), got {size!r}")
            key = None
        else:
            need = self.GEOM_SIZES[type]
            s = np.atleast_1d(np.asarray(size, np.float64))
            if s.shape != (need,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
                raise ValueError(f"{what}: a {type} needs {need} positive size(s), got {size!r}")
            sz, key = np.pad(s, (0, 3 - need)), None
        q = _vec(quat, 4, f"{what}: quat")
        if np.linalg.norm(q) < 1e-12:
            raise ValueError(f"{what}: quat is zero")
        group = int(group)
        if not 0 <= group <= 5:
            raise ValueError(f"{what}: group must be 0-5 (MuJoCo's geom groups), got {group}")
        self._visuals.append(dict(name=gname, body=body, type=type, size=sz, R=_quat_rot(q / np.linalg.norm(q)),
                                  p=_vec(pos, 3, f"{what}: pos"),
                                  rgba=None if rgba is None else V.check_rgba(rgba, what), group=group, mesh=key))
        return self

    def _with_contact(self, model, order, eff, index):
        """The model with its Contact element (jaxmbd.forces.contact.make_contact)."""
        from .forces.contact import make_contact
        hostidx = lambda name: -1 if eff[name][0] == "world" else index[eff[name][0]]  # noqa: E731
        mocap_of, mocap = self._mocap_bodies(order)
        geoms = []
        for g in self._geoms:
            _, Ro, po = eff[g["body"]]
            R, p = Ro @ g["R"], po + Ro @ g["p"]
            k = mocap_of.get(g["body"], -1)
            if k >= 0:      # on its mocap body's frame
                _, Rm, pm = eff[mocap[k]["name"]]
                R, p = Rm.T @ R, Rm.T @ (p - pm)
            geoms.append(dict(g, host=hostidx(g["body"]), R=R, p=p, mocap=k))
        bodies = [(b["name"], b["parent"], hostidx(b["name"])) for b in order]
        opts = dict(self._contact_opts, invweight_override=self._simple_weights(model)[0])
        el, self.contact_skipped = make_contact(model, geoms, bodies, self._pairs, self._excludes, opts)
        if el is None:
            return model
        return dataclasses.replace(model, forces=(model.forces or ()) + (el,))

    def set_initial_state(self, q0=None, v0=None) -> "ModelBuilder":
        """The model's default initial state ``model.q0``/``model.v0`` (in the
        order of the built model's coordinates; checked at build time)."""
        self._init = (None if q0 is None else np.asarray(q0, np.float64),
                      None if v0 is None else np.asarray(v0, np.float64))
        return self

    def _initial_q(self, topo):
        q0 = self._init[0]
        if q0 is None:
            with jax.ensure_compile_time_eval():  # a model may be built inside jit
                return np.concatenate([np.asarray(joints.neutral(jt)) for jt in topo.jtype])
        if q0.shape != (topo.nq,) or not np.all(np.isfinite(q0)):
            raise ValueError(f"initial q0: expected {topo.nq} finite numbers, got shape {q0.shape}")
        for jt, a in zip(topo.jtype, topo.q_adr):
            for sl in joints.quaternion_slices(jt, a):
                quat = q0[sl]
                if abs(np.linalg.norm(quat) - 1.0) > 1e-6:
                    raise ValueError(f"initial q0: the quaternion at q[{a}] is not unit ({quat})")
        return q0

    def _initial_v(self, topo):
        v0 = self._init[1]
        if v0 is None:
            return np.zeros(topo.nv)
        if v0.shape != (topo.nv,) or not np.all(np.isfinite(v0)):
            raise ValueError(f"initial v0: expected {topo.nv} finite numbers, got shape {v0.shape}")
        return v0


def _fill_invweights(model, override=None):
    """The model with every soft joint row's unset ``invweight`` (NaN) set to MuJoCo's
    ``dof_invweight0``: (H⁻¹)_ii at the model's q0, or ``override[dof]`` (simple bodies' 1/mass)
    (elements with a ``filled(model, dof_invweight0)`` method fill themselves)."""
    from .forces.base import SoftRows, elements
    els = elements(model)
    todo = [i for i, e in enumerate(els) if isinstance(e, SoftRows) and e.has_soft and hasattr(e, "invweight")
            and hasattr(e, "dofs") and np.isnan(np.asarray(e.invweight)).any()]
    if not todo:
        return model
    from .forces.base import make
    from .forces.contact import inverse_weights
    dof_iw = np.array(inverse_weights(model, model.q0)[1])
    for d, w in (override or {}).items():
        dof_iw[d] = w
    new = list(els)
    for i in todo:
        e = els[i]
        if hasattr(e, "filled"):      # an element that fills its own (jaxmbd.forces.joint_coupling)
            new[i] = e.filled(model, dof_iw)
            continue
        iw = np.asarray(e.invweight, np.float64)
        iw = np.where(np.isnan(iw), dof_iw[np.asarray(e.dofs, np.int64)], iw)
        new[i] = make(type(e), **dict({f.name: getattr(e, f.name) for f in dataclasses.fields(e)},
                                      invweight=jnp.asarray(iw)))
    return dataclasses.replace(model, forces=tuple(new))


def _tendon_rows(what, range, frictionloss, solref_limit, solimp_limit, solref_friction, solimp_friction):
    """A tendon's checked limit and friction-loss parameters (MuJoCo's defaults where None)."""
    from .forces.soft import check_solimp, check_solref
    rng = None
    if range is not None:
        rng = _vec(range, 2, f"{what}: range")
        if not rng[0] < rng[1]:
            raise ValueError(f"{what}: range must be increasing, got {range!r}")
    fl = _scalar(frictionloss, f"{what}: frictionloss")
    if fl < 0:
        raise ValueError(f"{what}: frictionloss must be >= 0")
    soft = {key: check(MJ.SOLREF if val is None and "ref" in key else MJ.SOLIMP if val is None else val,
                       f"{what}: {key}")
            for key, val, check in (("solref_limit", solref_limit, check_solref),
                                    ("solimp_limit", solimp_limit, check_solimp),
                                    ("solref_friction", solref_friction, check_solref),
                                    ("solimp_friction", solimp_friction, check_solimp))}
    return dict(range=rng, frictionloss=fl, **soft)


def _with_spatial_springs(model):
    """The model with its spatial tendons' unset spring lengths (NaN) at their lengths at q0 (MuJoCo's
    ``springlength="-1"``)."""
    from .forces.spatial_tendon import SpatialTendons
    els = list(model.forces or ())
    for i, e in enumerate(els):
        if isinstance(e, SpatialTendons) and np.isnan(np.asarray(e.spring)).any():
            from .forces.base import make
            from .kinematics import forward_kinematics
            L0 = np.asarray(e.measure(model, forward_kinematics(model, model.q0)))
            sp = np.asarray(e.spring, np.float64)
            sp = np.where(np.isnan(sp), L0[:, None], sp)
            els[i] = make(SpatialTendons, **dict({f.name: getattr(e, f.name) for f in dataclasses.fields(e)},
                                                 spring=jnp.asarray(sp)))
            return dataclasses.replace(model, forces=tuple(els))
    return model
