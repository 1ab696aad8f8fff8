"""The description of a joint type (its registry entry); see :mod:`jaxmbd.joints`."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional


@dataclasses.dataclass(frozen=True)
class JointType:
    """Everything the package knows about one joint type.

    name, aliases: the canonical name and other names accepted by the builder.
    nq, nv: sizes of the joint's coordinates and velocity.
    jcalc(q, v, axis, anchor, pitch) -> (R, p, S, cJ): see the module docstring;
        None only for a welded type (nv = 0).
    uses_axis / uses_anchor / uses_pitch: which of the model's per-joint
        parameters the type reads (the builder requires an axis where
        uses_axis, and rejects an anchor or a pitch the type ignores).
    scalar_coords: coordinates are scalars with q̇ = v (springs, coordinate
        orders and coordinate springs apply per coordinate).
    floating: the joint gives the full 6-DoF pose (a floating base).
    rotation_blocks: offsets in v of 3-DoF rotation-vector blocks (body-frame
        angular velocities integrated on SO(3); the integrators' chart).
    position_coords: (DoF offset, q offset) pairs: the coordinate whose
        magnitude scales that DoF's position error; defaults to every
        coordinate of a scalar-coordinate type, else none.
    quaternions: offsets in q of unit quaternions (w, x, y, z).
    neutral(dtype) -> (nq,): the reference configuration.
    integrate(q, v, dt) -> q ⊕ v dt; qdot(q, v) -> q̇; difference(q0, q1) -> v
        with integrate(q0, v, 1) = q1; normalize(q) -> q with unit quaternions.
        All five default to the vector-space ones for scalar_coords types.
    unrolled(g) -> (R, p, cJ, S columns): optional closed form for
        ``jaxmbd.aba_unrolled`` (g is its per-group context; the component
        algebra is ``jaxmbd.spatial_unrolled``); without one the
        unrolled ABA evaluates ``jcalc``.
    random_trees: drawn by ``jaxmbd.models.random_tree`` by default.
    mjcf: MuJoCo's name for the joint (None: MJCF has none).
    urdf: URDF names that load as this type (empty: URDF has none).
    """

    name: str
    nq: int
    nv: int
    jcalc: Optional[Callable] = None
    aliases: tuple = ()
    uses_axis: bool = False
    uses_anchor: bool = False
    uses_pitch: bool = False
    scalar_coords: bool = False
    floating: bool = False
    rotation_blocks: tuple = ()
    position_coords: Optional[tuple] = None
    quaternions: tuple = ()
    neutral: Optional[Callable] = None
    integrate: Optional[Callable] = None
    qdot: Optional[Callable] = None
    difference: Optional[Callable] = None
    normalize: Optional[Callable] = None
    unrolled: Optional[Callable] = None
    random_trees: bool = False
    mjcf: Optional[str] = None
    urdf: tuple = ()

    @property
    def welded(self) -> bool:
        """No degree of freedom: the body is merged into its parent at build time."""
        return self.nv == 0
