"""Force elements: spring-dampers between points of two bodies, spring-dampers
between two joint coordinates, and constant joint forces.

They belong to the model (``model.forces``), so every dynamics function
includes them through :func:`jaxmbd.passive_force` (and so ``bias_force``,
``inverse_dynamics``, ``forward_dynamics``, ``simulate``) and
:func:`jaxmbd.potential_energy` includes their potential.

* Point-to-point (translational) spring-damper between point ``pa`` of body
  ``a`` and point ``pb`` of body ``b`` (the world when -1; points in body
  coordinates, or world coordinates on the world): with L = |pb - pa| and L'
  its rate, the tension ``k (L - l0) + c L' + f0`` pulls the two points
  together.  The generalized force is ``-(k (L - l0) + c L' + f0) ∂L/∂x``
  (x the tangent coordinates of the tree), obtained by autodiff.  L must stay
  positive.
* Coordinate spring-damper between DoFs i and j (scalar coordinates; i = -1
  for the ground): with d = q_j - q_i and d' its rate, the force
  ``-(k (d - ref) + c d')`` acts on j and its opposite on i (e.g. a torsional
  spring between two planar bodies' angles).
* ``joint_force``: a constant generalized force per DoF (a motor torque).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class ForceElements(eqx.Module):
    """The force elements of a model (see the module docstring).  Static:
    the body pairs and DoF pairs; traced: every number."""
    spring_bodies: tuple = eqx.field(static=True)    # ((a, b), ...) moving-body indices, -1 = world
    spring_pa: jax.Array                              # (ns, 3)
    spring_pb: jax.Array                              # (ns, 3)
    spring_k: jax.Array                               # (ns,)
    spring_c: jax.Array
    spring_l0: jax.Array
    spring_f0: jax.Array
    coupling_dofs: tuple = eqx.field(static=True)    # ((i, j), ...) DoF indices, i = -1 for the ground
    coupling_k: jax.Array                             # (nc,)
    coupling_c: jax.Array
    coupling_ref: jax.Array
    joint_force: jax.Array                            # (nv,)

    @property
    def n_springs(self):
        return len(self.spring_bodies)

    @property
    def n_couplings(self):
        return len(self.coupling_dofs)


def _points_world(model, q, bodies, local):
    """World positions of points given in body coordinates (body -1: world coordinates)."""
    from .kinematics import forward_kinematics
    kin = forward_kinematics(model, q)
    b = jnp.asarray(np.maximum(np.asarray(bodies, np.int64), 0))
    world = jnp.asarray(np.asarray(bodies) < 0)[:, None]
    pw = kin.pos[b] + jnp.einsum("kij,kj->ki", kin.rot[b], local)
    return jnp.where(world, local, pw)


def spring_lengths(model, q):
    """(ns,) current lengths of the point-to-point springs."""
    fe = model.forces
    a = [p[0] for p in fe.spring_bodies]
    b = [p[1] for p in fe.spring_bodies]
    d = _points_world(model, q, b, fe.spring_pb) - _points_world(model, q, a, fe.spring_pa)
    return jnp.sqrt(jnp.sum(d * d, axis=-1))


def _coupling_index(model):
    fe = model.forces
    qadr = model.topo.dof_qadr
    i = np.array([p[0] for p in fe.coupling_dofs], np.int64)
    j = np.array([p[1] for p in fe.coupling_dofs], np.int64)
    return i, j, np.where(i >= 0, qadr[np.maximum(i, 0)], -1), qadr[j]


def element_force(model, q, v):
    """(nv,) generalized force of every force element at (q, v)."""
    from .kinematics import integrate_q
    fe = model.forces
    tau = jnp.broadcast_to(fe.joint_force, (model.nv,)).astype(jnp.result_type(q, v))
    if fe.n_springs:
        def lengths(x):
            return spring_lengths(model, integrate_q(model, q, x))
        x0 = jnp.zeros(model.nv, tau.dtype)
        grad, L = jax.jacfwd(lambda x: (lengths(x),) * 2, has_aux=True)(x0)   # ∂L/∂x (ns, nv), L
        tension = fe.spring_k * (L - fe.spring_l0) + fe.spring_c * (grad @ v) + fe.spring_f0
        tau = tau - tension @ grad
    if fe.n_couplings:
        i, j, qi, qj = _coupling_index(model)
        qi_val = jnp.where(jnp.asarray(i >= 0), q[np.maximum(qi, 0)], 0.0)
        vi_val = jnp.where(jnp.asarray(i >= 0), v[np.maximum(i, 0)], 0.0)
        f = -(fe.coupling_k * (q[qj] - qi_val - fe.coupling_ref) + fe.coupling_c * (v[j] - vi_val))
        tau = tau.at[j].add(f)
        tau = tau.at[np.maximum(i, 0)].add(jnp.where(jnp.asarray(i >= 0), -f, 0.0))
    return tau


def element_energy(model, q):
    """Potential of the elastic force elements (and of the constant joint
    forces where the DoF has a scalar coordinate): ½ k (L - l0)² + f0 L per
    spring, ½ k (d - ref)² per coupling, -f q per constant joint force."""
    fe = model.forces
    U = jnp.zeros((), q.dtype)
    if fe.n_springs:
        L = spring_lengths(model, q)
        U = U + jnp.sum(0.5 * fe.spring_k * (L - fe.spring_l0) ** 2 + fe.spring_f0 * L)
    if fe.n_couplings:
        i, j, qi, qj = _coupling_index(model)
        qi_val = jnp.where(jnp.asarray(i >= 0), q[np.maximum(qi, 0)], 0.0)
        U = U + jnp.sum(0.5 * fe.coupling_k * (q[qj] - qi_val - fe.coupling_ref) ** 2)
    sel = model.topo.dof_qadr >= 0
    if sel.any():
        U = U - jnp.sum(fe.joint_force[sel] * q[model.topo.dof_qadr[sel]])
    return U


def has_forces(model) -> bool:
    return getattr(model, "forces", None) is not None
