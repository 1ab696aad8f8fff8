"""The Model (static topology + traced physical parameters) and its builder."""

from __future__ import annotations

import math
from typing import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import joints
from .topology import Topology


class Model(eqx.Module):
    """A kinematic tree.

    ``topo`` and ``frame_names``/``frame_body`` are static and hashable; every
    other field is a JAX array (traced), so ``jax.vmap`` over stacked models and
    ``jax.grad`` with respect to any physical parameter work.

    Per body i (n bodies, regular numbering ``parent[i] < i``):
      tree_rot (n,3,3), tree_pos (n,3): joint frame J in the parent body frame.
      axis (n,3): unit joint axis in J (revolute, prismatic, helical).
      anchor (n,3): a point on the axis / the ball centre, in body coordinates.
      pitch (n,): helical pitch (translation per radian).
      mass (n,), com (n,3) body coordinates, inertia (n,3,3) about the COM.
    Per DoF (nv): damping, armature, stiffness; per coordinate (nq): spring_ref.
    gravity (3,): acceleration due to gravity in world coordinates.
    Frames: every named body (welded ones included) is a frame attached to a
    moving body ``frame_body[f]`` at pose (frame_rot[f], frame_pos[f]).
    """

    topo: Topology = eqx.field(static=True)
    frame_names: tuple = eqx.field(static=True)
    frame_body: tuple = eqx.field(static=True)
    tree_rot: jax.Array
    tree_pos: jax.Array
    axis: jax.Array
    anchor: jax.Array
    pitch: jax.Array
    mass: jax.Array
    com: jax.Array
    inertia: jax.Array
    gravity: jax.Array
    damping: jax.Array
    armature: jax.Array
    stiffness: jax.Array
    spring_ref: jax.Array
    frame_rot: jax.Array
    frame_pos: jax.Array
    q0: jax.Array = None   # default initial state (the problem's own for test problems,
    v0: jax.Array = None   # else the neutral configuration at rest)
    joint_names: tuple = eqx.field(static=True, default=None)  # one per moving body's joint

    @property
    def nq(self) -> int:
        return self.topo.nq

    @property
    def nv(self) -> int:
        return self.topo.nv

    @property
    def n_bodies(self) -> int:
        return self.topo.n_bodies

    @property
    def dof_parent(self) -> np.ndarray:
        """Expanded per-DoF parent array (MuJoCo's dof_parentid), -1 for the root."""
        return self.topo.dof_parent.copy()

    @property
    def body_names(self) -> tuple:
        return self.topo.names

    @property
    def joint_qpos_adr(self) -> np.ndarray:
        """First index in q of each joint (MuJoCo's jnt_qposadr), in model order."""
        return self.topo.q_adr.copy()

    @property
    def joint_dof_adr(self) -> np.ndarray:
        """First index in v of each joint (MuJoCo's jnt_dofadr), in model order."""
        return self.topo.v_adr.copy()

    def joint_id(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(f"no joint named {name!r}") from None

    def body_id(self, name: str) -> int:
        try:
            return self.topo.names.index(name)
        except ValueError:
            raise KeyError(f"no moving body named {name!r}") from None

    def frame_id(self, name: str) -> int:
        try:
            return self.frame_names.index(name)
        except ValueError:
            raise KeyError(f"no body or frame named {name!r}") from None

    def summary(self) -> str:
        t = self.topo
        counts = {}
        for j in t.jtype:
            counts[j] = counts.get(j, 0) + 1
        js = ", ".join(f"{v} {k}" for k, v in counts.items())
        return (f"{t.n_bodies} bodies ({js}), nq={t.nq}, nv={t.nv}, depth={t.max_depth}, "
                f"{t.n_levels} node levels of width <= {t.level_width}, nnz(H)={t.nM * 2 - t.nv}")


# --- builder -----------------------------------------------------------------

def _vec(x, n, what):
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{what}: expected {n} numbers, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: contains NaN or inf: {a}")
    return a


def _scalar(x, what):
    try:
        a = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: expected a number, got {x!r}") from None
    if not math.isfinite(a):
        raise ValueError(f"{what}: is {a}")
    return a


def _quat_rot(q):
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


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
    if not strict and ev[0] < -1e-9 * scale:
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
        self._bodies = []
        self._names = set()
        self.inertia_notes = []  # bodies accepted with strict_inertia=False despite a non-physical inertia

    def add_body(self, name: str, parent: str = "world", joint: str = "revolute", *,
                 axis: Sequence[float] | None = None, pitch: float = 0.0,
                 anchor=(0.0, 0.0, 0.0), pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
                 mass: float = 1.0, com=(0.0, 0.0, 0.0), inertia=None,
                 damping=0.0, armature=0.0, stiffness=0.0, spring_ref=None, strict_inertia=True,
                 joint_name: str | None = None) -> "ModelBuilder":
        """Add a body and its inboard joint.

        ``mass=0`` makes a massless body (its ``inertia`` must then be zero or
        omitted): a frame that only carries a joint, e.g. one of several joints
        that MJCF puts in one body.  ``build`` checks that something with mass
        hangs below every massless moving body.  ``inertia`` defaults to
        1e-2 * identity for a body with mass.  ``joint_name`` names the joint
        (``model.joint_names``); it defaults to the body name.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"body name must be a non-empty string, got {name!r}")
        if name == "world":
            raise ValueError("body name 'world' is reserved for the fixed base")
        if name in self._names:
            raise ValueError(f"duplicate body name {name!r}")
        what = f"body {name!r}"
        jt = joints.canonical(joint) if isinstance(joint, str) else joint
        if jt not in joints.JOINT_TYPES:
            raise ValueError(f"{what}: unknown joint type {joint!r}; expected one of "
                             f"{', '.join(joints.JOINT_TYPES)}")
        nv = joints.NV[jt]
        if jt in joints.USES_AXIS:
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
        if pitch != 0.0 and jt != "helical":
            raise ValueError(f"{what}: pitch is only meaningful for helical joints (joint is {jt})")
        anc = _vec(anchor, 3, f"{what}: joint anchor")
        if jt not in joints.USES_ANCHOR and np.any(anc != 0):
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
        if np.any(stiff != 0) and jt not in joints.SCALAR_COORDS:
            raise ValueError(f"{what}: stiffness is supported for joints with scalar coordinates "
                             f"({', '.join(joints.SCALAR_COORDS)}), not {jt}")
        ref = np.zeros(joints.NQ[jt]) if spring_ref is None else per_dof(spring_ref, "spring_ref", nonneg=False)
        if jt == "fixed" and np.any(np.concatenate([damp, arm, stiff])):
            raise ValueError(f"{what}: a fixed joint has no DoF for damping/armature/stiffness")
        self._bodies.append(dict(name=name, parent=parent, jtype=jt, axis=ax, pitch=pitch, anchor=anc,
                                 R=R, p=p, mass=m, com=c, inertia=Ic, damping=damp, armature=arm,
                                 stiffness=stiff, spring_ref=ref, joint_name=jname))
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

    def build(self) -> Model:
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
            if b["jtype"] == "fixed":
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
        return Model(
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
            spring_ref=jnp.asarray(np.concatenate([b["spring_ref"] if joints.NQ[b["jtype"]] else np.zeros(0)
                                                   for b in moving]), f64),
            frame_rot=jnp.asarray(np.stack([f[2] for f in frames]), f64),
            frame_pos=jnp.asarray(np.stack([f[3] for f in frames]), f64),
            q0=jnp.asarray(self._initial_q(topo), f64),
            v0=jnp.asarray(self._initial_v(topo), f64),
            joint_names=tuple(jnames),
        )

    def set_initial_state(self, q0=None, v0=None) -> "ModelBuilder":
        """The model's default initial state ``model.q0``/``model.v0`` (in the
        order of the built model's coordinates; checked at build time)."""
        self._init = (None if q0 is None else np.asarray(q0, np.float64),
                      None if v0 is None else np.asarray(v0, np.float64))
        return self

    def _initial_q(self, topo):
        q0 = getattr(self, "_init", (None, None))[0]
        if q0 is None:
            with jax.ensure_compile_time_eval():  # a model may be built inside jit
                return np.concatenate([np.asarray(joints.neutral(jt)) for jt in topo.jtype])
        if q0.shape != (topo.nq,) or not np.all(np.isfinite(q0)):
            raise ValueError(f"initial q0: expected {topo.nq} finite numbers, got shape {q0.shape}")
        for jt, a in zip(topo.jtype, topo.q_adr):
            if jt in ("spherical", "free"):
                quat = q0[a + (3 if jt == "free" else 0): a + (7 if jt == "free" else 4)]
                if abs(np.linalg.norm(quat) - 1.0) > 1e-6:
                    raise ValueError(f"initial q0: the quaternion at q[{a}] is not unit ({quat})")
        return q0

    def _initial_v(self, topo):
        v0 = getattr(self, "_init", (None, None))[1]
        if v0 is None:
            return np.zeros(topo.nv)
        if v0.shape != (topo.nv,) or not np.all(np.isfinite(v0)):
            raise ValueError(f"initial v0: expected {topo.nv} finite numbers, got shape {v0.shape}")
        return v0
