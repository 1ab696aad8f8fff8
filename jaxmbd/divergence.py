"""The bound behind :func:`jaxmbd.simulate`'s ``DIVERGED`` status: a gain of
mechanical energy that no legitimate run of the model makes, derived from
the model and the initial state when the run starts.

The measured energy is H = T + V_g + U_j: the bodies' kinetic energy T (no
armature) and gravity's potential V_g, both from one forward-kinematics
pass, and the potential U_j of what acts on the coordinates alone (joint
springs and joint-space force elements: coordinate springs, joint limits, a
constant joint force's -f q); not contact, whose narrow phase it would
repeat, nor the elements between body points, whose measures it would.
With M the total mass, g = max(|gravity|, G_REF), L the model's length
scale at q0 (the diagonal of the box around every body origin, joint anchor
and centre of mass, plus twice the largest radius of gyration), T0 and U0
the kinetic energy and the elastic potential at the start (joint springs
and force elements other than contact, floored at 0), and τ the time
elapsed, the scale is

    E(τ) = T0 + U0 + M g L + a ½ M g² τ²,

with a = 1 for a driven model (a control, actuators, or a constant joint
force: they inject energy) and a = 0 for a passive one.  A step is diverged
when H(t) - H(t0) > ``factor`` × E(τ) (default ``DIVERGENCE_FACTOR`` = 10).

Why it holds: gravity and the springs only trade energy with T, damping and
contact dissipate, so a passive model's H grows by no more than the initial
potential of what H leaves out: the elements between body points (within
U0) and contact (none for a start clear of it); the gain stays below E(τ),
a tenth of the bound.  The τ² term allows a driven model the work of a
force of up to about 3x its weight (10x the energy) acting the whole time.
An unstable method, e.g. an explicit one at too large a step on stiff
contact, creates energy at every bounce and passes the bound, where
checking speeds alone would let a body that was kicked up and flies slowly
at a great height pass.  Controls or actuators that inject more (a large
torque spinning a light link for long) need a larger factor, or no check
(``simulate(divergence_factor=None)``).  The check costs one
forward-kinematics pass per step."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .forces.base import JointElement, PoseElement, potential as element_potential
from .forces.contact import Contact
from .forces.joint_force import JointForce
from .kinematics import body_inertias, forward_kinematics

DIVERGENCE_FACTOR = 10.0
"""simulate's default ``divergence_factor``: the multiple of the energy scale E(τ) the energy gain may reach."""
G_REF = 9.80665
"""Standard gravity (m/s²): the least acceleration the energy scale uses."""


def _without(tree, keep):
    """The tree with only the force elements for which keep(element) holds."""
    if tree.forces is None:
        return tree
    kept = tuple(e for e in tree.forces if keep(e))
    return eqx.tree_at(lambda t: t.forces, tree, kept or None, is_leaf=lambda x: x is None)


def _kinetic_and_gravity(tree, q, v):
    """(T, V_g, the kinematics, the centres of mass) at (q, v)."""
    kin = forward_kinematics(tree, q, v)
    T = 0.5 * jnp.einsum("ni,nij,nj->", kin.vel, body_inertias(tree), kin.vel)
    com = kin.pos + jnp.einsum("nij,nj->ni", kin.rot, tree.com)
    return T, -jnp.sum(tree.mass * (com @ tree.gravity)), kin, com


def _joint_potential(tree, q):
    """U_j: the joint springs and the joint-space force elements other than contact."""
    U = jnp.zeros((), q.dtype)
    sel = tree.topo.dof_qadr >= 0
    if sel.any():
        qa = tree.topo.dof_qadr[sel]
        U = U + 0.5 * jnp.sum(tree.stiffness[sel] * (q[qa] - tree.spring_ref[qa]) ** 2)
    joint_only = _without(tree, lambda e: isinstance(e, JointElement) and not isinstance(e, Contact))
    if joint_only.forces is not None:
        U = U + element_potential(joint_only, q)
    return U


def energy(tree, q, v):
    """H = T + V_g + U_j at (q, v), not differentiated (it only decides a status)."""
    q, v = jax.lax.stop_gradient((q, v))
    T, Vg, _, _ = _kinetic_and_gravity(tree, q, v)
    return T + Vg + _joint_potential(tree, q)


def driven(tree, inputs):
    """Whether anything but the initial state can put energy in: inputs (:class:`jaxmbd.Inputs`),
    actuators, a constant joint force."""
    forces = tree.forces or ()
    return (inputs.given or tree.actuators is not None
            or any(isinstance(e, JointForce) for e in forces))


def energy_scale(tree, q0, v0, is_driven):
    """(H0, E0, c): the energy H at the start and the scale E(τ) = E0 + c τ² (module docstring);
    not differentiated."""
    tree, q0, v0 = jax.lax.stop_gradient((tree, q0, v0))
    T0, Vg0, kin, com = _kinetic_and_gravity(tree, q0, v0)
    anchor = kin.pos + jnp.einsum("nij,nj->ni", kin.rot, tree.anchor)
    pts = jnp.concatenate([kin.pos, com, anchor])
    box = jnp.linalg.norm(jnp.max(pts, 0) - jnp.min(pts, 0))
    m = tree.mass
    tr = jnp.trace(tree.inertia, axis1=-2, axis2=-1)
    gyr = jnp.sqrt(jnp.where(m > 0, jnp.maximum(tr, 0.0) / (2.0 * jnp.where(m > 0, m, 1.0)), 0.0))
    L = box + 2.0 * jnp.max(gyr)
    M = jnp.sum(m)
    g = jnp.maximum(jnp.linalg.norm(tree.gravity), G_REF)
    Uj0 = _joint_potential(tree, q0)
    # contact's potential is left out: a start clear of contact has none, and its narrow phase would be
    # compiled once more for it
    pose = _without(tree, lambda e: isinstance(e, PoseElement))
    U0 = jnp.maximum(Uj0 + (element_potential(pose, q0) if pose.forces is not None else 0.0), 0.0)
    c = 0.5 * M * g * g if is_driven else jnp.zeros_like(M)
    return T0 + Vg0 + Uj0, T0 + U0 + M * g * L, c
