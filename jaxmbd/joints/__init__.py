"""Joint types: one registry of everything the package knows about each.

Each joint connects a *joint frame* J (placed in the parent body frame) to the
child body frame B.  A joint type's ``jcalc`` returns, for one joint,

* ``(R, p)``: the pose of B relative to J (``x_J = R x_B + p``);
* ``S``: the motion subspace, (6, nv), in B coordinates, so the velocity of B
  relative to J is ``v_J = S @ qd`` (RBDA §4.4);
* ``cJ``: the apparent derivative ``S̊ @ qd`` in B coordinates, i.e. the rate
  of change of the entries of S along the motion, times qd (zero when S is
  constant in B).

Joint types and their coordinates (MuJoCo's conventions where MuJoCo has the
joint, so states pass between the two unchanged):

==========  ===  ===  ============================================================
type        nq   nv   coordinates
==========  ===  ===  ============================================================
revolute     1    1   angle about ``axis`` through ``anchor`` (MuJoCo hinge)
prismatic    1    1   displacement along ``axis`` (MuJoCo slide)
helical      1    1   angle about ``axis``; translation ``pitch * angle`` along it
spherical    4    3   q = quaternion (w, x, y, z); v = angular velocity in B (ball)
free         7    6   q = [position in J, quaternion]; v = [linear velocity of the
                      origin of B in J coordinates, angular velocity in B] (free)
planar       3    3   q = v-integral = [x, y, theta]: translation in J's xy-plane,
                      then rotation theta about z
universal    2    2   q = [q1, q2]: rotation q1 about J's x axis, then q2 about the
                      moved y axis (MuJoCo: two hinges, axes x then y, in one body)
fixed        0    0   welded: merged into the parent body when the model is built
==========  ===  ===  ============================================================

The registry
------------
Every type is a :class:`JointType` (a frozen dataclass, one per file of this
package: ``revolute.py``, ``prismatic.py``, ...) registered with
:func:`register`.  The rest of the package only asks the registry
(:func:`get`, or the module-level functions and tables below: ``canonical``,
``neutral``, ``integrate``, ``qdot``, ``difference``, ``normalize``,
``JCALC``, ``NQ``, ``NV``, ...): the builder's checks, the topology's
coordinate tables, forward kinematics and every dynamics algorithm, the
unrolled ABA, the integrators' chart, the model generators, the MJCF and URDF
loaders and the cost model.

Adding a joint type
-------------------
Write one file here, say ``mytype.py``, defining ``MYTYPE = JointType(...)``
with at least ``name``, ``nq``, ``nv`` and ``jcalc`` (the pose, motion
subspace and cJ above, written for one joint with jax.numpy, so it traces
under jit, vmap and grad).  If its coordinates are scalars with q̇ = v
(``scalar_coords=True``, nq = nv) the configuration-manifold functions
(neutral, integrate, qdot, difference, normalize) default to the vector-space
ones; otherwise give all five, say which velocity DoFs are 3-DoF rotation
vectors (``rotation_blocks``, for the integrators' chart) and where unit
quaternions sit in q (``quaternions``, for validation).  Optionally give a
closed form for the unrolled ABA (``unrolled``, see ``revolute.py``); without
one it goes through ``jcalc``.  Then import it at the bottom of this file and
pass it to :func:`register`.  ``universal.py`` is a worked example (a
2-DoF joint with scalar coordinates, plus a closed form for the unrolled
ABA).  Nothing else needs editing:
``tests/test_joint_registry.py`` checks every registered type's pieces
against each other and the algorithms against each other on a tree with it.
``register`` refuses a type with a piece missing or inconsistent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np


from .base import JointType  # noqa: E402  (the description; one per type file)


# --- vector-space defaults (scalar coordinates, q̇ = v) -------------------------

def _vector_neutral(nq):
    return lambda dtype=jnp.float64: jnp.zeros(nq, dtype)


def _vector_integrate(q, v, dt):
    return q + v * dt


def _vector_qdot(q, v):
    return v


def _vector_difference(q0, q1):
    return q1 - q0


def _vector_normalize(q):
    return q


_MANIFOLD = ("neutral", "integrate", "qdot", "difference", "normalize")

_REGISTRY: dict = {}   # name -> JointType, in registration order
_ALIASES: dict = {}    # alias -> name


def _complete(jt: JointType) -> JointType:
    """Check a type's pieces and fill in the defaults; raises ValueError/TypeError."""
    what = f"joint type {getattr(jt, 'name', jt)!r}"
    if not isinstance(jt, JointType):
        raise TypeError(f"register expects a JointType, got {type(jt).__name__}")
    if not isinstance(jt.name, str) or not jt.name.isidentifier():
        raise ValueError(f"{what}: name must be an identifier-like string")
    for k in ("nq", "nv"):
        x = getattr(jt, k)
        if not isinstance(x, (int, np.integer)) or isinstance(x, bool) or x < 0:
            raise ValueError(f"{what}: {k} must be a non-negative integer, got {x!r}")
    if jt.nv > jt.nq:
        raise ValueError(f"{what}: nv ({jt.nv}) exceeds nq ({jt.nq})")
    fill = {}
    if jt.welded:
        if jt.nq:
            raise ValueError(f"{what}: a type without DoFs must have nq = 0")
        if jt.jcalc is not None or jt.unrolled is not None:
            raise ValueError(f"{what}: a type without DoFs is welded: it takes no jcalc or unrolled form")
    elif not callable(jt.jcalc):
        raise ValueError(f"{what}: missing jcalc(q, v, axis, anchor, pitch) -> (R, p, S, cJ)")
    if jt.scalar_coords:
        if jt.nq != jt.nv:
            raise ValueError(f"{what}: scalar coordinates need nq = nv (got {jt.nq}, {jt.nv})")
        defaults = dict(neutral=_vector_neutral(jt.nq), integrate=_vector_integrate, qdot=_vector_qdot,
                        difference=_vector_difference, normalize=_vector_normalize)
        for k in _MANIFOLD:
            if getattr(jt, k) is None:
                fill[k] = defaults[k]
        if jt.position_coords is None:
            fill["position_coords"] = tuple((k, k) for k in range(jt.nv))
    else:
        if jt.welded:
            for k in _MANIFOLD:
                if getattr(jt, k) is None:
                    fill[k] = (_vector_neutral(0) if k == "neutral" else
                               {"integrate": _vector_integrate, "qdot": _vector_qdot,
                                "difference": _vector_difference, "normalize": _vector_normalize}[k])
        else:
            missing = [k for k in _MANIFOLD if not callable(getattr(jt, k))]
            if missing:
                raise ValueError(f"{what}: its coordinates are not scalars with q̇ = v (scalar_coords=False), "
                                 f"so it must define {', '.join(missing)}")
        if jt.position_coords is None:
            fill["position_coords"] = ()
    for k in _MANIFOLD:
        f = fill.get(k, getattr(jt, k))
        if not callable(f):
            raise ValueError(f"{what}: {k} must be callable")
    pc = fill.get("position_coords", jt.position_coords)
    if any(not (0 <= d < jt.nv and 0 <= c < jt.nq) for d, c in pc):
        raise ValueError(f"{what}: position_coords {pc} out of range (nv={jt.nv}, nq={jt.nq})")
    if any(not 0 <= b <= jt.nv - 3 for b in jt.rotation_blocks):
        raise ValueError(f"{what}: rotation_blocks {jt.rotation_blocks} out of range (nv={jt.nv})")
    if any(not 0 <= b <= jt.nq - 4 for b in jt.quaternions):
        raise ValueError(f"{what}: quaternions {jt.quaternions} out of range (nq={jt.nq})")
    if jt.scalar_coords and (jt.rotation_blocks or jt.quaternions):
        raise ValueError(f"{what}: scalar coordinates cannot hold rotation blocks or quaternions")
    if jt.unrolled is not None and not callable(jt.unrolled):
        raise ValueError(f"{what}: unrolled must be callable or None")
    if jt.mjcf is not None and not isinstance(jt.mjcf, str):
        raise ValueError(f"{what}: mjcf must be a name or None")
    if isinstance(jt.urdf, str) or not all(isinstance(u, str) for u in jt.urdf):
        raise ValueError(f"{what}: urdf must be a tuple of names")
    return dataclasses.replace(jt, **fill) if fill else jt


def register(jt: JointType) -> JointType:
    """Add a joint type to the registry (after checking it is complete); returns
    the registered (completed) type."""
    jt = _complete(jt)
    taken = set(_REGISTRY) | set(_ALIASES)
    for n in (jt.name,) + tuple(jt.aliases):
        if n in taken:
            raise ValueError(f"joint type {jt.name!r}: the name {n!r} is already registered")
    for key, fmt in (("mjcf", lambda t: (t.mjcf,) if t.mjcf else ()), ("urdf", lambda t: t.urdf)):
        clash = set(fmt(jt)) & {n for t in _REGISTRY.values() for n in fmt(t)}
        if clash:
            raise ValueError(f"joint type {jt.name!r}: {key} name(s) {sorted(clash)} already map to another type")
    _REGISTRY[jt.name] = jt
    for a in jt.aliases:
        _ALIASES[a] = jt.name
    return jt


def unregister(name: str) -> None:
    """Remove a registered type (for tests)."""
    jt = _REGISTRY.pop(name)
    for a in jt.aliases:
        _ALIASES.pop(a, None)


def canonical(jtype) -> str:
    """The canonical name of a joint type given by name, alias or JointType
    (unknown names are returned unchanged)."""
    if isinstance(jtype, JointType):
        return jtype.name
    return _ALIASES.get(jtype, jtype)


def is_registered(jtype) -> bool:
    return isinstance(jtype, (str, JointType)) and canonical(jtype) in _REGISTRY


def get(jtype) -> JointType:
    """The registered JointType for a name or alias."""
    try:
        return _REGISTRY[canonical(jtype)]
    except (KeyError, TypeError):
        raise ValueError(f"unknown joint type {jtype!r}; expected one of {', '.join(_REGISTRY)}") from None


def registered() -> tuple:
    """Every registered JointType, in registration order."""
    return tuple(_REGISTRY.values())


class _Names(Sequence):
    """Live tuple-like view: names of the registered types satisfying ``pred``."""

    def __init__(self, pred=lambda t: True):
        self._pred = pred

    def _names(self):
        return tuple(n for n, t in _REGISTRY.items() if self._pred(t))

    def __getitem__(self, i):
        return self._names()[i]

    def __len__(self):
        return len(self._names())

    def __contains__(self, x):
        return x in self._names()

    def __repr__(self):
        return repr(self._names())


class _Table(Mapping):
    """Live dict-like view: name -> ``value(type)`` over the registered types satisfying ``pred``."""

    def __init__(self, value, pred=lambda t: True):
        self._value, self._pred = value, pred

    def __getitem__(self, name):
        t = _REGISTRY.get(name)
        if t is None or not self._pred(t):
            raise KeyError(name)
        return self._value(t)

    def __iter__(self):
        return (n for n, t in _REGISTRY.items() if self._pred(t))

    def __len__(self):
        return sum(1 for _ in self)

    def __repr__(self):
        return repr(dict(self.items()))


# Tables (live views of the registry)
JOINT_TYPES = _Names()
ALIASES = _ALIASES
NQ = _Table(lambda t: t.nq)
NV = _Table(lambda t: t.nv)
SCALAR_COORDS = _Names(lambda t: t.scalar_coords)  # springs and limits apply per coordinate
USES_AXIS = _Names(lambda t: t.uses_axis)
USES_ANCHOR = _Names(lambda t: t.uses_anchor)
JCALC = _Table(lambda t: t.jcalc, lambda t: not t.welded)  # the types a moving body can have


# --- configuration manifold, per joint ----------------------------------------

def neutral(jtype, dtype=jnp.float64):
    """The reference configuration (zero angles, identity quaternions)."""
    return get(jtype).neutral(dtype)


def neutral_np(jtype) -> np.ndarray:
    """The reference configuration as a NumPy float64 array (also inside a jit trace)."""
    with jax.ensure_compile_time_eval():
        return np.asarray(get(jtype).neutral(jnp.float64), np.float64)


def integrate(jtype, q, v, dt):
    """q ⊕ v dt for one joint.  Quaternions are advanced by the exact exponential
    of the body-frame rotation vector and renormalised."""
    return get(jtype).integrate(q, v, dt)


def qdot(jtype, q, v):
    """Time derivative of the coordinates, q̇ = G(q) v (quaternion rate ½ q ⊗ (0, ω))."""
    return get(jtype).qdot(q, v)


def difference(jtype, q0, q1):
    """The velocity v with integrate(q0, v, 1) = q1 (q1 ⊖ q0)."""
    return get(jtype).difference(q0, q1)


def normalize(jtype, q):
    return get(jtype).normalize(q)


def jcalc(jtype):
    """The type's jcalc(q, v, axis, anchor, pitch) -> (R, p, S, cJ)."""
    return get(jtype).jcalc


# --- per-topology tables --------------------------------------------------------

def rotation_dofs(topo) -> np.ndarray:
    """(k, 3) DoF indices of every rotation-vector triple (ball joints, free-joint rotations)."""
    out = [a + b + np.arange(3) for jt, a in zip(topo.jtype, topo.v_adr) for b in get(jt).rotation_blocks]
    return np.array(out, np.int64).reshape(-1, 3)


def coordinate_of_dof(topo) -> np.ndarray:
    """(nv,) the q index whose magnitude scales DoF k's position error (the
    coordinate itself for scalar joints and free-joint translations), -1 for rotation DoFs."""
    idx = np.full(topo.nv, -1, np.int64)
    for jt, qa, va in zip(topo.jtype, topo.q_adr, topo.v_adr):
        for d, c in get(jt).position_coords:
            idx[va + d] = qa + c
    return idx


def quaternion_slices(jtype, q_adr=0):
    """The q slices holding unit quaternions, for a joint whose coordinates start at q_adr."""
    return [slice(q_adr + o, q_adr + o + 4) for o in get(jtype).quaternions]


# --- the built-in types (registration order = joint-group order) ----------------

from .revolute import REVOLUTE  # noqa: E402
from .prismatic import PRISMATIC  # noqa: E402
from .helical import HELICAL  # noqa: E402
from .spherical import SPHERICAL  # noqa: E402
from .free import FREE  # noqa: E402
from .planar import PLANAR  # noqa: E402
from .fixed import FIXED  # noqa: E402
from .universal import UNIVERSAL  # noqa: E402

for _t in (REVOLUTE, PRISMATIC, HELICAL, SPHERICAL, FREE, PLANAR, FIXED, UNIVERSAL):
    register(_t)
del _t
