"""The Model: static topology and traced physical parameters (built by :mod:`jaxmbd.builder`)."""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import numpy as np

from .topology import Topology


class Keyframe(NamedTuple):
    """One stored state of a model (an MJCF ``<key>``), in MuJoCo's layout: ``qpos`` (nq,), ``qvel``
    (nv,), ``ctrl`` (nu,) and ``act`` (na: MuJoCo's activation states, which jaxmbd does not model),
    ``mpos`` (nmocap, 3) and ``mquat`` (nmocap, 4) the mocap bodies' poses (:func:`set_mocap`),
    read-only float64 arrays, and ``time``."""
    time: float
    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray
    act: np.ndarray
    mpos: np.ndarray = None       # (filled by the model's keyframes; None only in a Keyframe made by hand)
    mquat: np.ndarray = None


def _keyframe(time, qpos, qvel, ctrl, act, mpos=(), mquat=()):
    def arr(x, shape=None):
        a = np.array(x, np.float64)
        if shape is not None:
            a = a.reshape(shape)
        a.setflags(write=False)
        return a
    return Keyframe(float(time), arr(qpos), arr(qvel), arr(ctrl), arr(act), arr(mpos, (-1, 3)),
                    arr(mquat, (-1, 4)))


class Mocap(eqx.Module):
    """A model's mocap bodies (MuJoCo's ``mocap="true"``): bodies fixed to the world whose pose is
    an input, ``pos`` (nmocap, 3) and ``quat`` (nmocap, 4, w x y z; normalized where it is used) as
    MuJoCo's ``mocap_pos`` and ``mocap_quat``, in the order the bodies were added; ``names`` static.
    Their geoms collide with the moving bodies as the world's do (at rest: a mocap body has no
    velocity, as in MuJoCo); change the pose with :func:`set_mocap`."""
    names: tuple = eqx.field(static=True)
    pos: jax.Array
    quat: jax.Array

    def rotations(self):
        """(nmocap, 3, 3) the bodies' orientations (their quaternions normalized)."""
        import jax.numpy as jnp
        from .spatial import quat_to_rot
        q = self.quat / jnp.linalg.norm(self.quat, axis=-1, keepdims=True)
        return jax.vmap(quat_to_rot)(q)


def set_mocap(model, pos=None, quat=None):
    """The model (or mechanism) with its mocap bodies at ``pos`` (nmocap, 3) and ``quat``
    (nmocap, 4, w x y z), as setting MuJoCo's ``mocap_pos`` and ``mocap_quat``; None keeps a part.
    A keyframe's poses: ``set_mocap(model, key.mpos, key.mquat)``.  Traced values are fine (the
    poses are model leaves: ``jax.grad`` and ``vmap`` reach them).  A ValueError for a model
    without mocap bodies or arrays of another shape."""
    import dataclasses
    import jax.numpy as jnp
    tree = getattr(model, "tree", model)
    mc = tree.mocap
    if mc is None:
        raise ValueError("set_mocap: the model has no mocap bodies")
    n = len(mc.names)
    new = {}
    for key, x, k in (("pos", pos, 3), ("quat", quat, 4)):
        if x is None:
            continue
        x = jnp.asarray(x, jnp.float64)
        if x.size != n * k:
            raise ValueError(f"set_mocap: {key} has shape {x.shape}, expected ({n}, {k}) for the mocap bodies "
                             f"{', '.join(mc.names)}")
        new[key] = x.reshape(n, k)
    out = dataclasses.replace(tree, mocap=dataclasses.replace(mc, **new))
    return out if tree is model else dataclasses.replace(model, tree=out)


class Model(eqx.Module):
    """A kinematic tree.

    ``topo``, ``frame_names``/``frame_body``, ``joint_names`` and ``keyframe_data``
    are static and hashable; every other field is a JAX array (traced), so ``jax.vmap`` over stacked models and
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
    ``forces``: the force elements; ``actuators``: the actuators, whose input
    is the control vector ``ctrl`` (nu,) (:func:`jaxmbd.actuator_force`).
    ``sensors``: what :func:`jaxmbd.sensors.sensordata` reports (:class:`jaxmbd.sensors.Sensors`).
    ``mocap``: the mocap bodies' poses (:class:`Mocap`, :func:`set_mocap`), or None.
    ``keyframes``: named stored states (:class:`Keyframe`; an MJCF file's ``<key>``s), static.
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
    forces: tuple = None  # the force elements (jaxmbd.forces), merged per class, or None (none)
    actuators: object = None  # jaxmbd.forces.Actuators (inputs: ctrl), or None (none)
    # ((name, time, qpos, qvel, ctrl, act, mpos, mquat), ...) as tuples of floats (hashable): see ``keyframes``
    keyframe_data: tuple = eqx.field(static=True, default=())
    sensors: object = None  # jaxmbd.sensors.Sensors (what sensordata reports), or None (none)
    mocap: object = None    # Mocap: the mocap bodies' poses (inputs, set_mocap), or None (none)
    # how the model looks (jaxmbd.visuals.Visuals: geoms, colours, meshes; never computed with), or None
    visual_data: object = eqx.field(static=True, default=None)

    @property
    def nq(self) -> int:
        return self.topo.nq

    @property
    def keyframes(self) -> dict:
        """name -> :class:`Keyframe`, in the order the keys were given (an MJCF file's ``<key>``
        elements: ``list(model.keyframes.values())[i]`` is MuJoCo's key ``i``); {} when none."""
        return {k[0]: _keyframe(*k[1:]) for k in self.keyframe_data}

    @property
    def nv(self) -> int:
        return self.topo.nv

    @property
    def n_bodies(self) -> int:
        return self.topo.n_bodies

    @property
    def nu(self) -> int:
        """Number of actuators (the length of ``ctrl``; :mod:`jaxmbd.forces.actuator`)."""
        return 0 if self.actuators is None else self.actuators.nu

    @property
    def nc(self) -> int:
        """Number of scalar constraint equations: 0 for a tree (see :class:`jaxmbd.Mechanism`)."""
        return 0

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
