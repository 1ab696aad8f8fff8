"""The force-element interface, the context that binds an element to a built
tree, and the sums over a model's elements.

A force element is a small ``equinox.Module``.  It is created with body and
joint *names* (what :meth:`jaxmbd.ModelBuilder.add_force` takes) and bound at
build time (:meth:`ForceElement.bind`) to body and DoF *indices* of the
built tree, welded bodies resolved to the moving body that carries them.
After binding, its numbers are traced arrays (``jax.grad`` and ``vmap`` reach
them like any other model parameter) and its indices are static.

Two kinds:

* :class:`PoseElement`: acts through quantities measured on the bodies'
  poses (a spring's length, a relative angle, a wheel centre).  It gives
  ``measure(kin)`` -> m (a 1-d array of such quantities), and the
  ``law(m, ṁ)`` -> f of the forces conjugate to them; the generalized force
  is (∂m/∂x)ᵀ f with x the tree's tangent coordinates.  Every pose element
  of a model shares one kinematics pass and one forward-mode Jacobian.
* :class:`JointElement`: acts on joint coordinates directly
  (``force(model, q, v)`` -> (nv,)).

The interface's methods are abstract: an element that lacks one of its
kind's cannot be created.  An element with rows in MuJoCo's soft-constraint
stage is also a :class:`SoftRows` (contacts, joint limits, friction loss);
one whose state can exceed a static capacity says so (``can_overflow``,
:meth:`ForceElement.overflow`: the contacts).

Each element says which DoFs it couples (:meth:`ForceElement.couplings`):
sets of DoFs whose generalized forces depend on each other's coordinates.
The branch-sparse iteration matrix reads them to stay exact
(:class:`jaxmbd.odes.chart.SparseIterationMatrix`).

Elements of one class are merged into one vectorized element when the
model is built (:meth:`ForceElement.merge`), so a model with 20 springs
evaluates them as one array operation."""

from __future__ import annotations

import abc
import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics import forward_kinematics, integrate_q


# --- helpers for the element constructors (number checks: jaxmbd.checks) ------------------------------

def body_name(body, what):
    if body is None or body == "world":
        return "world"
    if not isinstance(body, str) or not body:
        raise ValueError(f"{what}: a body is named by a non-empty string, got {body!r}")
    return body


def f64(x, shape=None):
    a = np.asarray(x, np.float64)
    return jnp.asarray(a if shape is None else a.reshape(shape), jnp.float64)


def make(cls, **fields):
    """An instance of the element class ``cls`` from its field values,
    bypassing its (name-taking) constructor: how :meth:`ForceElement.bind`
    and :meth:`ForceElement.merge` build bound elements (as equinox itself
    rebuilds modules when unflattening)."""
    names = {f.name for f in dataclasses.fields(cls)}
    if set(fields) != names:
        raise TypeError(f"{cls.__name__}: fields {sorted(names)} expected, got {sorted(fields)}")
    obj = object.__new__(cls)
    for k, v in fields.items():
        object.__setattr__(obj, k, v)
    return obj


# --- binding ------------------------------------------------------------------------------

class BuildContext:
    """What an element may ask of the tree being built: where a named body
    is (its moving host body and the pose of the named frame on it), the
    DoFs of a joint, the road bumps added to the builder."""

    def __init__(self, topo, frames, road_bumps=()):
        self.topo = topo
        self._frames = frames          # name -> (host name or "world", R_off, p_off)
        self._index = {n: i for i, n in enumerate(topo.names)}
        self._bumps = tuple(road_bumps)
        self.bumps_used = False

    def body(self, name, what):
        """(moving body index, -1 for the world; R_off; p_off): the named body's frame on its host."""
        if name == "world":
            return -1, np.eye(3), np.zeros(3)
        if name not in self._frames:
            raise ValueError(f"{what}: body {name!r} is not defined")
        host, R, p = self._frames[name]
        return (-1 if host == "world" else self._index[host]), R, p

    def point(self, name, p, what):
        """(host index, the point in the host's coordinates)."""
        i, R, off = self.body(name, what)
        return i, (p if name == "world" else off + R @ p)

    def frame(self, name, Rl, what):
        """(host index, the rotation Rl of a frame on the named body, in the host's coordinates)."""
        i, R, _ = self.body(name, what)
        return i, (Rl if name == "world" else R @ Rl)

    def joint(self, name, what):
        """(first DoF, number of DoFs, joint type) of the joint of the named body."""
        if name not in self._frames:
            raise ValueError(f"{what}: body {name!r} is not defined")
        i = self._index.get(name)
        if i is None or self._frames[name][0] != name:
            raise ValueError(f"{what}: {name!r} is welded (has no joint coordinate)")
        t = self.topo
        return int(t.v_adr[i]), int(t.nv_body[i]), t.jtype[i]

    @property
    def road_bumps(self):
        """((x, radius), ...) the bumps of the road (ModelBuilder.add_road_bump)."""
        self.bumps_used = True
        return self._bumps


def dofs_of_bodies(topo, bodies):
    """The DoFs that move any of the bodies (their paths to the root), sorted."""
    sel = np.zeros(topo.nv, bool)
    for b in bodies:
        if b >= 0:
            sel |= topo.support[b]
    return tuple(int(k) for k in np.flatnonzero(sel))


# --- the interface ------------------------------------------------------------------------

class ForceElement(eqx.Module):
    """A force element; see the module docstring.  Subclasses are
    :class:`PoseElement` or :class:`JointElement`; one with rows in the soft-constraint stage is
    also a :class:`SoftRows`."""

    @abc.abstractmethod
    def bind(self, ctx: BuildContext) -> "ForceElement":  # pragma: no cover - interface
        """The element with names resolved to indices of the built tree."""

    @abc.abstractmethod
    def couplings(self, topo) -> tuple:  # pragma: no cover - interface
        """Sets of DoFs (tuples) whose generalized forces depend on each other's coordinates or rates."""

    def energy(self, model, q, m=None):
        """The element's potential at q (m: its measures there, for pose elements); 0 if it has none."""
        return jnp.zeros((), q.dtype)

    can_overflow = False   # whether a state can exceed a static capacity of the element (static)

    def overflow(self, model, q):
        """Whether at q (tree coordinates) the element exceeds a static capacity (only asked where
        ``can_overflow``): then :func:`jaxmbd.simulate` stops the member with ``CONTACT_OVERFLOW``."""
        return jnp.array(False)

    @classmethod
    def merge(cls, elements):
        """One element for several bound elements of this class: static tuples
        and arrays concatenated field by field (first axis); fields named in
        ``shared`` are taken from the first."""
        if len(elements) == 1:
            return elements[0]
        shared = getattr(cls, "shared", ())
        vals = {}
        for f in dataclasses.fields(cls):
            xs = [getattr(e, f.name) for e in elements]
            if f.name in shared:
                vals[f.name] = xs[0]
            elif isinstance(xs[0], tuple):
                vals[f.name] = sum(xs, ())
            else:
                vals[f.name] = jnp.concatenate([jnp.atleast_1d(x) for x in xs])
        return make(cls, **vals)


class PoseElement(ForceElement):
    """Acts through measures of the body poses: ``measure(model, kin)`` -> m
    (1-d), ``law(m, mdot)`` -> the conjugate forces f (same shape); the
    generalized force is (∂m/∂x)ᵀ f."""

    @abc.abstractmethod
    def measure(self, model, kin):  # pragma: no cover - interface
        """m (1-d): the measured quantities at the poses ``kin``."""

    @abc.abstractmethod
    def law(self, m, mdot):  # pragma: no cover - interface
        """f (as m): the forces conjugate to m at (m, ṁ)."""


class JointElement(ForceElement):
    """Acts on the joint coordinates: ``force(model, q, v)`` -> (nv,)."""

    @abc.abstractmethod
    def force(self, model, q, v):  # pragma: no cover - interface
        """(nv,): the generalized force at (q, v)."""


class SoftRows(ForceElement):
    """An element that can contribute rows to MuJoCo's soft-constraint stage
    (:mod:`jaxmbd.forces.soft`): ``has_soft`` (static) says whether this instance does (a contact
    or a limit may follow the penalty law instead), ``soft_rows`` gives its rows."""

    @property
    @abc.abstractmethod
    def has_soft(self) -> bool:  # pragma: no cover - interface
        """Whether the element has soft rows (static)."""

    @abc.abstractmethod
    def soft_rows(self, model, q, v, kin, axes):  # pragma: no cover - interface
        """(NormalRows, FrictionRows, extra) of the element at (q, v), from the poses ``kin`` and the
        DoFs' world ``axes`` (:func:`jaxmbd.kinematics.kinematics_and_axes`; joint rows take None)."""


def soft_elements(model) -> tuple:
    """The model's elements that have soft rows."""
    return tuple(e for e in elements(model) if isinstance(e, SoftRows) and e.has_soft)


# --- the sums over a model's elements --------------------------------------------------------

def elements(model) -> tuple:
    """The model's (bound, merged) force elements; () when it has none."""
    return () if getattr(model, "forces", None) is None else tuple(model.forces)


def overflow(model, q):
    """Whether at q (tree coordinates) any of the model's force elements exceeds a static capacity
    (:meth:`ForceElement.overflow`: a contact broad phase or soft solve with more pairs or
    candidates within reach than it has room for); None when no element can (nothing to check, no
    operation added)."""
    flags = [e.overflow(model, q) for e in elements(model) if e.can_overflow]
    if not flags:
        return None
    out = flags[0]
    for f in flags[1:]:
        out = out | f
    return out


def _pose_measures(model, q, els, v=None):
    """The measures of the pose elements at q (and, with v, their Jacobians ∂m/∂x)."""
    def meas(x):
        kin = forward_kinematics(model, integrate_q(model, q, x))
        ms = tuple(e.measure(model, kin) for e in els)
        return ms, ms
    x0 = jnp.zeros(model.nv, jnp.result_type(q, float))
    if v is None:
        return meas(x0)[0], None
    J, ms = jax.jacfwd(meas, has_aux=True)(x0)
    return ms, J


def generalized_force(model, q, v):
    """(nv,) the generalized force of every force element of the model at (q, v)."""
    dt = jnp.result_type(q, v, float)
    tau = jnp.zeros(model.nv, dt)
    els = elements(model)
    pose = [e for e in els if isinstance(e, PoseElement)]
    if pose:
        ms, Js = _pose_measures(model, q, pose, v)
        for e, m, J in zip(pose, ms, Js):
            tau = tau + e.law(m, J @ v) @ J
    for e in els:
        if isinstance(e, JointElement):
            tau = tau + e.force(model, q, v)
    return tau


def potential(model, q):
    """The potential of every elastic force element at q (see each element)."""
    U = jnp.zeros((), jnp.result_type(q, float))
    els = elements(model)
    pose = [e for e in els if isinstance(e, PoseElement)]
    if pose:
        ms, _ = _pose_measures(model, q, pose)
        for e, m in zip(pose, ms):
            U = U + e.energy(model, q, m)
    for e in els:
        if isinstance(e, JointElement):
            U = U + e.energy(model, q)
    return U


def couplings(model) -> tuple:
    """Every element's coupled DoF sets, as a hashable tuple of tuples."""
    out = []
    for e in elements(model):
        out.extend(tuple(int(k) for k in g) for g in e.couplings(model.topo))
    return tuple(out)


def measures_of(model, q, cls):
    """The measures at q of the model's element of class ``cls`` (None if it has none)."""
    for e in elements(model):
        if isinstance(e, cls):
            return e.measure(model, forward_kinematics(model, q))
    return None


def velocity_of(model, q, v, cls):
    """(measures, their rates) of the model's element of class ``cls`` at (q, v)."""
    for e in elements(model):
        if isinstance(e, cls):
            x0 = jnp.zeros(model.nv, jnp.result_type(q, v, float))
            return jax.jvp(lambda x: e.measure(model, forward_kinematics(model, integrate_q(model, q, x))),
                           (x0,), (v,))
    return None


def bind_all(specs, ctx):
    """Bind the builder's elements and merge those of one class (in order of first appearance)."""
    bound = [s.bind(ctx) for s in specs]
    groups = {}
    for e in bound:
        groups.setdefault(type(e), []).append(e)
    return tuple(cls.merge(es) for cls, es in groups.items())


def pose_of(kin, bodies):
    """Rotations and positions of the bodies (-1: the world, identity)."""
    b = jnp.asarray(np.maximum(np.asarray(bodies, np.int64), 0))
    w = jnp.asarray(np.asarray(bodies) < 0)
    R = jnp.where(w[:, None, None], jnp.eye(3, dtype=kin.rot.dtype), kin.rot[b])
    return R, jnp.where(w[:, None], 0.0, kin.pos[b])


def world_points(kin, bodies, local):
    R, p = pose_of(kin, bodies)
    return p + jnp.einsum("kij,kj->ki", R, local)
