"""The bound behind :func:`jaxmbd.simulate`'s ``DIVERGED`` status: an energy
balance that every correct run of the model keeps, checked at every step.

The measured energy is H = T + V_g + U_j: the bodies' kinetic energy T (no
armature) and gravity's potential V_g, both from one forward-kinematics
pass, and the potential U_j of what acts on the coordinates alone (joint
springs and joint-space force elements: coordinate springs, penalty joint
limits, a constant joint force's -f q on scalar coordinates); not contact,
whose narrow phase it would repeat, nor the elements between body points,
whose measures it would.  Along a run the loop also accumulates

    W(t) = ∫ P dt,  X(t) = ∫ |P| dt,  P = τ_applied · v,

by the trapezoid rule over each accepted step, with τ_applied the
generalized force of what is applied from outside: ``Inputs.tau``, the
actuators (at ``Inputs.ctrl``) and a constant joint force on a ball or free
joint (which has no potential in U_j).  Its power is evaluated once per step,
at the step's end (the start's is carried over).

The balance.  Gravity and the springs in U_j only trade energy with T;
joint and contact damping, friction and friction loss, the soft law's
damping and ideal loop constraints do no positive work; so H(t) - H0 - W(t)
can grow only by what the parts of the model that H leaves out release from
where the run started:

* the elements between body points (springs, bushings): at most their
  potential at the start, U_p0 (floored at 0);
* a contact that starts penetrating: not counted, since its narrow phase would
  be compiled once more for the start (a robot scene's program grows by about
  40%); a start a centimetre in the floor, as robot files' keyframes have it,
  releases far less than the tolerance's M g L below, but a body started
  deep inside another can be stopped as diverged (give a larger
  ``divergence_factor``, or None);
* a row of MuJoCo's soft constraint (:mod:`jaxmbd.forces.soft`) on the joints
  (a joint limit) that starts violated by x0 = -r > 0: the part of the row's
  force that comes from the violation is f = K d(x) x / (A + R(x)) with
  R = (1 - d)/d · Â and A ≥ 0 (A = J H⁻¹ Jᵀ), so f ≤ K d² x / ((1 - d) Â);
  d²/(1 - d) grows with d, and d on [0, x0] stays below d_hi = max(d(0),
  d(x0)) (the impedance is monotone between dmin and dmax), so f ≤ K d_hi² x
  / ((1 - d_hi) Â) on the way out, and the energy the row can release is at
  most that linear spring's, S = ½ K d_hi² x0² / ((1 - d_hi) Â): MuJoCo's
  resting spring at the start's impedance, a bound that holds whatever
  the configuration does to A (for the exact spring energy at A = Â it is
  1/(1 - d) times too large: 20x at MuJoCo's default dmax = 0.95).  The
  row's damping -B J v dissipates, and the part of its force that cancels
  the other forces (-a₀) does no more work than they do.

With A0 = U_p0 + S0 (S0: the sum of the two constraint terms) a step is
diverged when

    H(t) - H0 - W(t) > A0 + ``factor`` × (E0 + X(t)),
    E0 = T0 + U0 + M g L,

with M the total mass, g = max(|gravity|, G_REF), L the model's length scale
at q0 (the diagonal of the box around every body origin, joint anchor and
centre of mass, plus twice the largest radius of gyration) and U0 the
elastic potential at the start (U_j and U_p, floored at 0).  The second term
is the tolerance: an integration error (of the energy of the motion, or of
the work exchanged with the inputs, X) that stays within ``factor`` times
the energy scale is drift, not divergence.  The default ``factor`` = 1
(``DIVERGENCE_FACTOR``) allows a passive model an error equal to its kinetic
energy at the start plus the work of lifting it by its own size; correct
explicit runs at their usual steps keep far below it (measured: RK4 at 10 ms
on the pendulum released from horizontal gains at most 2e-9 E0 over 3 s; a
ball dropped on MuJoCo's soft floor under RK4 at 20 ms, or on a penalty floor
at 2 ms, never rises above its start; a motor spinning up a light link under
RK4 at 1 ms keeps H - H0 - W at round-off, the trapezoid rule being exact for
its linear power), whereas a method that is unstable at its step size
gains energy at a growing rate: RK4 at 1 ms on a stiff direct-form contact
(solref -1e7 -10, h √K = 3.2) throws a ball dropped from 0.3 m to 1 m at the
first bounce, a gain of 4 E0 (E0 = 1.5 J for that ball).  A hinge started
1.5 rad past its soft limit gains 32 J on its way back (the limit's A0 is
4.9 kJ: the bound is loose by the 1/(1 - d) of its derivation and the row's
damping).  The bound needs no per-model tuning;
``Steps(divergence_factor=None)`` turns the check off.

The reference (H0, A0, E0, and the running W and X) is a
:class:`DivergenceReference`; :func:`jaxmbd.simulate` returns it at the end
of a run (``Solution.reference``) and takes it back in
``Start(reference=...)``, so a run continued piece by piece (``jaxmbd
simulate``'s chunks) is held to the first piece's balance instead of
re-basing it at every piece.  The check costs one forward-kinematics pass
and one evaluation of the applied force per step; the start's stored
energy is measured once, when a run starts, from the joint-space rows only."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .forces.base import JointElement, PoseElement, potential as element_potential, soft_elements
from .forces.contact import Contact
from .forces.joint_force import JointForce
from .kinematics import body_inertias, forward_kinematics

DIVERGENCE_FACTOR = 1.0
"""simulate's default ``divergence_factor``: the multiple of the energy scale E0 + X(t) the unexplained
energy gain may reach beyond the start's stored energy (module docstring)."""
G_REF = 9.80665
"""Standard gravity (m/s²): the least acceleration the energy scale uses."""


class DivergenceReference(eqx.Module):
    """The reference of a run's energy balance (module docstring): H0 the energy at the start, allowance
    A0 (what the start's stored energy can release), scale E0, and the running work W and exchanged
    work X of the applied forces up to ``Solution.t``.  Leaves are scalars (a leading batch axis in a
    rollout).  ``DivergenceReference.unset()`` (every leaf NaN) stands for "take the start's own"; a
    run started from it is the run started without one, in the same compiled program."""
    H0: jax.Array
    allowance: jax.Array
    scale: jax.Array
    work: jax.Array
    exchanged: jax.Array

    @staticmethod
    def unset(batch=None, dtype=None):
        """A reference that stands for the start's own (NaN leaves; shape (batch,) or scalars)."""
        shape = () if batch is None else (int(batch),)
        nan = jnp.full(shape, jnp.nan, dtype or jnp.result_type(float))
        return DivergenceReference(nan, nan, nan, nan, nan)


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


def _free_joint_forces(tree):
    """The constant joint forces' values on DoFs without a scalar coordinate (ball, free joints), as
    (dof indices, values) pairs: they have no potential in U_j, so their work is counted in W."""
    out = []
    for e in tree.forces or ():
        if isinstance(e, JointForce):
            dofs = np.asarray(e.dofs, np.int64)
            sel = np.flatnonzero(np.asarray(tree.topo.dof_qadr)[dofs] < 0)
            if sel.size:
                out.append((dofs[sel], e.value[sel]))
    return out


def driven(tree, inputs):
    """Whether anything applied from outside does work (static): inputs (:class:`jaxmbd.Inputs`),
    actuators, a constant joint force on a ball or free joint."""
    return inputs.given or tree.actuators is not None or bool(_free_joint_forces(tree))


def power(tree, inputs, t, q, v, mech=None):
    """P = τ_applied · v at (t, q, v) (tree order; ``mech``: a mechanism whose inputs read its own
    order), not differentiated."""
    t, q, v = jax.lax.stop_gradient((t, q, v))
    tau = inputs.force(tree, t, q, v, mech)
    for dofs, val in _free_joint_forces(tree):
        tau = tau.at[dofs].add(val)
    return jax.lax.stop_gradient(jnp.dot(tau, v))


def stored_energy(tree, q0, v0):
    """S0: an upper bound of the energy the soft joint-space rows (joint limits) can release from
    their state at the start (module docstring): per violated row, ½ K d_hi² x0² / ((1 - d_hi) Â).
    Contacts are left out: their narrow phase would be compiled once more for the start (it makes a
    robot scene's program about 40% larger); a start a centimetre in the floor releases far less than
    the tolerance's M g L.  Zero (no operation) for a model without such rows."""
    from .forces import soft
    q0, v0 = jax.lax.stop_gradient((q0, v0))
    S = jnp.zeros((), jnp.result_type(q0, float))
    joint_rows = [e for e in soft_elements(tree) if not isinstance(e, Contact)]
    if not joint_rows:
        return S
    for e in joint_rows:
        N = e.soft_rows(tree, q0, v0)[0]
        if not N.r.shape[0]:
            continue
        x = jnp.maximum(-N.r, 0.0)
        d = jnp.maximum(soft.impedance(jnp.zeros_like(x), N.solimp), soft.impedance(x, N.solimp))
        K, _ = soft.ref_coefficients(N.solref, N.solimp)
        iw = jnp.maximum(N.invweight, soft.MINVAL)
        S = S + jnp.sum(jnp.where(x > 0, 0.5 * K * d * d * x * x / ((1.0 - d) * iw), 0.0))
    return jax.lax.stop_gradient(S)


def reference(tree, q0, v0):
    """The :class:`DivergenceReference` of a run starting at (q0, v0) (W = X = 0); not differentiated."""
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
    pose = _without(tree, lambda e: isinstance(e, PoseElement))
    Up0 = jnp.maximum(element_potential(pose, q0), 0.0) if pose.forces is not None else jnp.zeros_like(M)
    U0 = jnp.maximum(Uj0 + Up0, 0.0)
    S0 = stored_energy(tree, q0, v0)
    zero = jnp.zeros_like(M)
    return DivergenceReference(H0=T0 + Vg0 + Uj0, allowance=Up0 + S0, scale=T0 + U0 + M * g * L,
                               work=zero, exchanged=zero)
