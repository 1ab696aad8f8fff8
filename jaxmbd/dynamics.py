"""The dynamics of a tree as compositions of the kernels: every generalized
force (joint damping and springs, the force elements), inverse dynamics with
them, the bias force, forward dynamics by the ABA, the unrolled ABA or the
CRBA with the factorization rule, and the potential energy.

The kernels below (:mod:`jaxmbd.rnea`, :mod:`jaxmbd.crba`, :mod:`jaxmbd.aba`,
:mod:`jaxmbd.aba_unrolled`, :mod:`jaxmbd.ltdl`) know rigid bodies only; the
force elements (:mod:`jaxmbd.forces`) enter here."""

from __future__ import annotations

import functools
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from . import aba_unrolled, cost, ltdl
from .aba import aba
from .crba import mass_matrix, mass_matrix_compact, mass_matrix_compact_at
from .forces import soft
from .forces.base import generalized_force as element_forces, potential as element_potential
from .kinematics import _check, forward_kinematics, kinematics_and_axes
from .rnea import rnea, rnea_at


@jax.jit
def passive_force(model, q, v):
    """Joint damping and spring forces, -b v - k (q - q_ref), plus the
    model's force elements (``model.forces``: point and coordinate
    spring-dampers, constant joint forces), shape (nv,)."""
    topo = model.topo
    tau = -model.damping * v
    sel = topo.dof_qadr >= 0
    if sel.any():
        qa = jnp.where(sel, topo.dof_qadr, 0)
        spring = -model.stiffness * (q[qa] - model.spring_ref[qa])
        tau = tau + jnp.where(jnp.asarray(sel), spring, 0.0)
    if model.forces is not None:
        tau = tau + element_forces(model, q, v)
    return tau



def check_ctrl(model, ctrl, what="ctrl"):
    """Raise a ValueError unless ctrl fits the model's actuators: None, a
    callable, or an array of shape (nu,) (checked where its shape is known)."""
    nu = model.nu
    if ctrl is None or callable(ctrl):
        if ctrl is not None and nu == 0:
            raise ValueError(f"{what}: the model has no actuators (nu = 0); leave {what} None")
        return
    shape = jnp.shape(ctrl)
    if nu == 0 and shape != (0,):
        raise ValueError(f"{what}: the model has no actuators (nu = 0); leave {what} None")
    if shape != (nu,):
        raise ValueError(f"{what} has shape {shape}, expected ({nu},): one control per actuator (nu = {nu})")


@jax.jit
def actuator_force(model, q, v, ctrl):
    """The actuators' generalized force for the controls ``ctrl`` (nu,),
    MuJoCo's ``qfrc_actuator``, shape (nv,): controls clamped to their
    ``ctrlrange``, forces gain·ctrl + bias clamped to their ``forcerange``,
    mapped through the joint transmissions and clamped per joint to its
    actuator-force range (:mod:`jaxmbd.forces.actuator`).  Zero for a model
    without actuators (then ctrl has shape (0,))."""
    q, v, ctrl = jnp.asarray(q), jnp.asarray(v), jnp.asarray(ctrl)
    _check(model, q, v)
    check_ctrl(model, ctrl)
    dt = jnp.result_type(q, v, ctrl, float)
    if model.actuators is None:
        return jnp.zeros(model.nv, dt)
    return model.actuators.generalized_force(model.nv, q.astype(dt), v.astype(dt), ctrl.astype(dt), model)


@jax.jit
def inverse_dynamics(model, q, v, a, f_ext=None):
    """Joint forces tau with H(q) a + C(q, v) = tau (armature, damping, springs included)."""
    return rnea(model, q, v, a, f_ext) + model.armature * a - passive_force(model, q, v)


def inverse_dynamics_at(model, q, v, a, kin_axes):
    """:func:`inverse_dynamics` without external forces, its RNEA from ``kin_axes`` =
    ``kinematics_and_axes(model, q)`` (``rnea.rnea_at``: in world coordinates where the tree is small
    enough)."""
    return rnea_at(model, q, v, a, kin_axes) + model.armature * a - passive_force(model, q, v)


@jax.jit
def bias_force(model, q, v, f_ext=None):
    """C(q, v): Coriolis, centrifugal, gravity, damping and spring forces, (nv,)."""
    return rnea(model, q, v, jnp.zeros_like(v), f_ext) - passive_force(model, q, v)


@jax.jit
def potential_energy(model, q):
    """Gravity (-Σ m_i g·c_i, zero at the world origin), joint springs ½ k (q - q_ref)²
    and the force elements' potential (``jaxmbd.forces.potential``)."""
    kin = forward_kinematics(model, q)
    c = kin.pos + jnp.einsum("nij,nj->ni", kin.rot, model.com)
    U = -jnp.sum(model.mass * (c @ model.gravity))
    sel = model.topo.dof_qadr >= 0
    if sel.any():
        qa = model.topo.dof_qadr[sel]
        U = U + 0.5 * jnp.sum(model.stiffness[sel] * (q[qa] - model.spring_ref[qa]) ** 2)
    if model.forces is not None:
        U = U + element_potential(model, q)
    return U


# In bench/results/ltdl_cpu.md (2-core CPU, float64) the batch-minor sparse
# factor + solve from compact H beats dense Cholesky at batch >= 64 on every
# branched tree (humanoid30 2.2-7x, grids 1.7-13x, binary trees 1.5-55x); at
# batch 1 both are dispatch-bound and sparse is 0.5-3x of dense.  On chains
# (no branch-induced sparsity, predicted speed-up 1) it loses at small
# batches (chain100 0.2-0.5x at B <= 64).  So: sparse wherever the operation
# counts predict any real gain, dense for chains.
SPARSE_MIN_PREDICTED_SPEEDUP = 2.0


@functools.lru_cache(maxsize=None)
def _auto_factorization(topo):
    sparse = cost.predicted_factor_solve_speedup(topo) >= SPARSE_MIN_PREDICTED_SPEEDUP
    return "sparse" if sparse else "dense"


def factorization_for(model):
    """What ``factorization="auto"`` picks for this topology: "sparse" or "dense"."""
    return _auto_factorization(model.topo)


@partial(jax.jit, static_argnames=("method", "factorization"))
def forward_dynamics(model, q, v, tau, f_ext=None, method="aba", factorization="auto"):
    """Joint accelerations qdd with H(q) qdd + C(q, v) = tau.

    method: "aba" (articulated-body algorithm, O(n)), "aba_unrolled" (the
    same algorithm with its spatial algebra written out in scalars,
    jaxmbd.aba_unrolled: the same numbers, faster for large batches on a GPU,
    bench/results/throughput_gpu.md) or "crba" (H from the CRBA, then a
    factorization of H).  factorization (method="crba" only):
    "sparse" (branch-sparse LᵀDL, jaxmbd.ltdl), "dense" (Cholesky) or "auto"
    (sparse where Featherstone's (2005) operation counts predict at least a 2x gain,
    i.e. every branched tree; dense for chains: bench/results/ltdl_cpu.md).  f_ext:
    optional (n, 6) body-frame spatial forces on the bodies.

    With soft rows (contacts, joint limits, friction loss: :func:`soft_stage`), H is formed and
    factored for the rows' response anyway, so the accelerations without the rows come from that
    factor and the RNEA's bias force for "aba" and "crba" alike (the same numbers to round-off,
    without a second pass of forward dynamics; without ``f_ext``, the RNEA in world coordinates from
    the rows' kinematics, ``rnea.rnea_at``); "aba_unrolled" keeps its own first stage.
    """
    q, v, tau = jnp.asarray(q), jnp.asarray(v), jnp.asarray(tau)
    _check(model, q, v)
    if tau.shape != (model.nv,):
        raise ValueError(f"tau has shape {tau.shape}, expected ({model.nv},)")
    if not soft.has_rows(model):
        return _free_dynamics(model, q, v, tau, f_ext, method, factorization)
    if method == "aba_unrolled":
        return soft_stage(model, q, v, _free_dynamics(model, q, v, tau, f_ext, method, factorization))[0].a
    _check_method(method, factorization)
    if f_ext is not None:
        return soft_stage(model, q, v, None, tau - bias_force(model, q, v, f_ext))[0].a
    kin_axes = kinematics_and_axes(model, q)      # the rows', H's and the bias force's kinematics
    bias = inverse_dynamics_at(model, q, v, jnp.zeros_like(v), kin_axes)
    return soft_stage(model, q, v, None, tau - bias, kin_axes)[0].a


def _check_method(method, factorization):
    """A ValueError for an unknown method, or an unknown factorization with method="crba"."""
    if method not in ("aba", "aba_unrolled", "crba"):
        raise ValueError(f"unknown forward-dynamics method {method!r}; expected 'aba', 'aba_unrolled' or 'crba'")
    if method == "crba" and factorization not in ("auto", "sparse", "dense"):
        raise ValueError(f"unknown factorization {factorization!r}; expected 'auto', 'sparse' or 'dense'")


def _factored(model, q, kin_axes=None):
    """The stage's work at q that precedes its rows: (kinematics_and_axes, H's LᵀDL factor)."""
    kin_axes = kinematics_and_axes(model, q) if kin_axes is None else kin_axes
    return kin_axes, ltdl.factor(model, mass_matrix_compact_at(model, q, kin_axes))


def soft_stage(model, q, v, a_free, free_force=None, kin_axes=None):
    """(:class:`jaxmbd.forces.soft.Solution`, rows) of the model's soft-constraint rows (contacts, joint
    limits and friction loss from MuJoCo's solref/solimp) at (q, v) for the accelerations a_free
    without them, with H factored by the branch-sparse LᵀDL (plain array operations: no LAPACK
    call inside a batched loop).  With ``a_free=None``, the accelerations without the rows come from
    that factor and ``free_force`` = τ - C(q, v): one more solve instead of a forward-dynamics pass
    (``forward_dynamics`` takes this route for every method but "aba_unrolled").  ``kin_axes``:
    ``kinematics_and_axes(model, q)`` where the caller has them."""
    kin_axes, F = _factored(model, q, kin_axes)
    if a_free is None:
        a_free = ltdl.solve(model, F, free_force)
    return soft.dynamics(model, q, v, a_free, lambda X: ltdl.solve(model, F, X), kin_axes)


def soft_configuration(model, q, kin_axes=None):
    """The soft stage's work of the configuration alone, split as (arrays, static) by
    ``equinox.partition``: H's LᵀDL factor and the rows at q with zero velocities (a row's
    velocity is J v).  :func:`soft_accelerations` completes the stage for a velocity.  ``kin_axes``:
    ``kinematics_and_axes(model, q)`` where the caller has them."""
    kin_axes, F = _factored(model, q, kin_axes)
    N, T, _ = soft.rows(model, q, jnp.zeros(model.nv, jnp.result_type(q, float)), kin_axes)
    return eqx.partition((F, N, T, kin_axes[1]), lambda x: isinstance(x, jax.Array))


def soft_accelerations(model, v, a_free, arrays, static):
    """The accelerations with the soft rows for the velocity v and the accelerations a_free without
    them, from :func:`soft_configuration`'s parts: the values of :func:`soft_stage`."""
    F, N, T, axes = eqx.combine(arrays, static)
    N, T = N._replace(vel=soft.row_map(N, axes).apply(v)), T._replace(vel=soft.row_map(T, axes).apply(v))
    return soft.solve(N, T, a_free, lambda X: ltdl.solve(model, F, X), axes).a


def free_dynamics(model, q, v, tau, method="aba"):
    """The accelerations without the soft rows (``forward_dynamics``' first stage, unchecked)."""
    return _free_dynamics(model, q, v, tau, None, method, "auto")


def _free_dynamics(model, q, v, tau, f_ext, method, factorization):
    _check_method(method, factorization)
    if method == "aba":
        return aba(model, q, v, tau + passive_force(model, q, v), f_ext)
    if method == "aba_unrolled":
        return aba_unrolled.aba(model, q, v, tau + passive_force(model, q, v), f_ext)
    if factorization == "auto":                     # method == "crba"
        factorization = factorization_for(model)
    rhs = tau - bias_force(model, q, v, f_ext)
    if factorization == "sparse":
        return ltdl.factor_solve(model, mass_matrix_compact(model, q), rhs)
    return jsl.cho_solve(jsl.cho_factor(mass_matrix(model, q)), rhs)
