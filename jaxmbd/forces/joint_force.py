"""A constant generalized force on a joint's DoFs (e.g. a motor torque).
Potential -f q on DoFs with scalar coordinates (none elsewhere)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .base import JointElement, f64, make


class JointForce(JointElement):
    """``JointForce(joint, value)``: 1 value (every DoF of the joint) or one per DoF;
    joints are named by their body.  After binding, ``dofs``: the DoF indices."""
    dofs: tuple = eqx.field(static=True)
    value: jax.Array

    def __init__(self, joint, value):
        val = np.atleast_1d(np.asarray(value, float))
        if not np.all(np.isfinite(val)):
            raise ValueError(f"joint force on {joint!r}: not finite")
        self.dofs = (joint,)
        self.value = f64(val)

    def bind(self, ctx):
        joint, = self.dofs
        first, n, _ = ctx.joint(joint, "joint force")
        if self.value.size not in (1, n):
            raise ValueError(f"joint force on {joint!r}: expected 1 or {n} values, got {self.value.size}")
        return make(type(self), dofs=tuple(range(first, first + n)), value=jnp.broadcast_to(self.value, (n,)))

    def couplings(self, topo):
        return ()

    def force(self, model, q, v):
        return jnp.zeros(model.nv, jnp.result_type(q, v, float)).at[np.array(self.dofs, np.int64)].add(self.value)

    def energy(self, model, q, m=None):
        dofs = np.array(self.dofs, np.int64)
        qadr = model.topo.dof_qadr[dofs]
        sel = qadr >= 0
        if not sel.any():
            return jnp.zeros((), q.dtype)
        return -jnp.sum(self.value[np.flatnonzero(sel)] * q[qadr[sel]])
