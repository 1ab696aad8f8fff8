"""Spring-damper between two joint coordinates (or one coordinate and the
ground): with d = q_j - q_i and d' its rate, the force -(k (d - ref) + c d')
acts on DoF j and its opposite on DoF i (e.g. a torsional spring between two
planar bodies' angles).  Joints with scalar coordinates only.  Potential:
½ k (d - ref)²."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..checks import scalar
from .base import JointElement, f64, make


class CoordinateSpringDamper(JointElement):
    """``CoordinateSpringDamper(joint, index=0, other=None, other_index=0, stiffness=, damping=, reference=)``;
    joints are named by their body.  After binding, ``dofs`` = ((i, j), ...), i = -1 for the ground."""
    dofs: tuple = eqx.field(static=True)
    stiffness: jax.Array
    damping: jax.Array
    reference: jax.Array

    def __init__(self, joint, *, other=None, index=0, other_index=0, stiffness=0.0, damping=0.0, reference=0.0):
        what = f"coordinate spring on {joint!r}"
        k, c = scalar(stiffness, f"{what}: stiffness"), scalar(damping, f"{what}: damping")
        if k < 0 or c < 0:
            raise ValueError(f"{what}: stiffness and damping must be non-negative")
        self.dofs = ((joint, int(index), other, int(other_index)),)
        self.stiffness, self.damping = f64([k]), f64([c])
        self.reference = f64([scalar(reference, f"{what}: reference")])

    def bind(self, ctx):
        (joint, k, other, ko), = self.dofs

        def dof(name, kk):
            first, n, jt = ctx.joint(name, "coordinate spring")
            if not np.all(ctx.topo.dof_qadr[first:first + n] >= 0):
                raise ValueError(f"coordinate spring: joint {name!r} ({jt}) has no scalar coordinates")
            if not 0 <= kk < n:
                raise ValueError(f"coordinate spring: joint {name!r} has no coordinate {kk}")
            return first + kk
        pair = (-1 if other is None else dof(other, ko), dof(joint, k))
        return make(type(self), dofs=(pair,), stiffness=self.stiffness, damping=self.damping,
                    reference=self.reference)

    def couplings(self, topo):
        return tuple((j,) if i < 0 else (i, j) for i, j in self.dofs)

    def _d(self, model, q, v=None):
        qadr = model.topo.dof_qadr
        i = np.array([p[0] for p in self.dofs], np.int64)
        j = np.array([p[1] for p in self.dofs], np.int64)
        ground = jnp.asarray(i < 0)
        d = q[qadr[j]] - jnp.where(ground, 0.0, q[qadr[np.maximum(i, 0)]])
        dd = None if v is None else v[j] - jnp.where(ground, 0.0, v[np.maximum(i, 0)])
        return i, j, ground, d, dd

    def force(self, model, q, v):
        i, j, ground, d, dd = self._d(model, q, v)
        f = -(self.stiffness * (d - self.reference) + self.damping * dd)
        tau = jnp.zeros(model.nv, jnp.result_type(q, v, float)).at[j].add(f)
        return tau.at[np.maximum(i, 0)].add(jnp.where(ground, 0.0, -f))

    def energy(self, model, q, m=None):
        d = self._d(model, q)[3]
        return jnp.sum(0.5 * self.stiffness * (d - self.reference) ** 2)
