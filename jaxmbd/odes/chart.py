"""The equations of motion as a second-order ODE in a local chart.

Each step starts a fresh chart at its initial configuration q0:
``q(y) = integrate_q(model, q0, y)`` with y in R^nv and y = 0 at the start
of the step.  For joints with scalar coordinates (revolute, prismatic,
helical, planar, the translation of a free joint) y is the coordinate
increment and y' is the joint velocity.  For a rotation (ball joint, the
rotation of a free joint) y is the body-frame rotation vector, and the
body-frame angular velocity is ``w = Jr(y) y'`` with the right Jacobian of
SO(3).  So

    y'' = g(t, y, y') = Jr(y)^-1 (a - (dJr(y)[y']) y'),  a = forward dynamics(q(y), Jr(y) y', tau),

a smooth ODE on R^nv to which every method applies with its full order (a
Runge-Kutta-Munthe-Kaas construction).  Jr(0) = I, so y'(0) = v0, and at
y = 0 the Jacobians of g are those of the forward dynamics in the tangent
space.  After the step, ``q1 = q(y1)`` (renormalised) and ``v1 = Jr(y1) y1'``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import forces, joints, kinematics, ltdl
from ..crba import compact_to_dense, mass_matrix_compact, mass_matrix_compact_at
from ..dynamics import (forward_dynamics, free_dynamics, inverse_dynamics, inverse_dynamics_at, soft_accelerations,
                        soft_configuration)
from ..inputs import NO_INPUTS, actuation  # noqa: F401 - actuation is re-exported
from ..spatial import skew
from .base import AbstractODE, solve_first_order, value_and_jacobians

_SMALL = 1e-4  # below this angle (rad) the SO(3) series are used


def _coeffs(phi):
    """Safe (theta², c1, c2, c3) with c1 = (1 - cos θ)/θ², c2 = (θ - sin θ)/θ³,
    c3 = 1/θ² - (1 + cos θ)/(2 θ sin θ)."""
    t2 = jnp.sum(phi * phi, axis=-1)
    small = t2 < _SMALL ** 2
    t2s = jnp.where(small, 1.0, t2)  # double-where: no NaN gradients at 0
    t = jnp.sqrt(t2s)
    c1 = jnp.where(small, 0.5 - t2 / 24.0, (1.0 - jnp.cos(t)) / t2s)
    c2 = jnp.where(small, 1.0 / 6.0 - t2 / 120.0, (t - jnp.sin(t)) / (t2s * t))
    c3 = jnp.where(small, 1.0 / 12.0 + t2 / 720.0, 1.0 / t2s - (1.0 + jnp.cos(t)) / (2.0 * t * jnp.sin(t)))
    return c1, c2, c3


def right_jacobian(phi):
    """Jr(φ) = I - c1 [φ]x + c2 [φ]x², so that w_body = Jr(φ) φ' for R = R0 exp([φ]x)."""
    K = jax.vmap(skew)(phi) if phi.ndim > 1 else skew(phi)
    c1, c2, _ = _coeffs(phi)
    I = jnp.broadcast_to(jnp.eye(3, dtype=phi.dtype), K.shape)
    return I - c1[..., None, None] * K + c2[..., None, None] * (K @ K)


def right_jacobian_inv(phi):
    """Jr(φ)^-1 = I + ½ [φ]x + c3 [φ]x²."""
    K = jax.vmap(skew)(phi) if phi.ndim > 1 else skew(phi)
    _, _, c3 = _coeffs(phi)
    I = jnp.broadcast_to(jnp.eye(3, dtype=phi.dtype), K.shape)
    return I + 0.5 * K + c3[..., None, None] * (K @ K)


class ChartODE(AbstractODE):
    """y'' = g(t, y, y') around q0 for a model and what is applied to it.

    inputs: a :class:`jaxmbd.Inputs` (joint torques, actuator inputs and
    their parameters; default none); the applied force is
    :meth:`jaxmbd.Inputs.force`.  ``linear_solver="sparse"`` in
    :meth:`iteration_matrix`: :class:`SparseIterationMatrix`.  ``reverse_only``: the Jacobians
    are only differentiated in reverse mode (:func:`jaxmbd.odes.base.value_and_jacobians`)."""

    def __init__(self, model, q0, inputs=None, dynamics="aba", reverse_only=False):
        self.model, self.q0, self.dynamics = model, q0, dynamics
        self.inputs = NO_INPUTS if inputs is None else inputs
        self.reverse_only = reverse_only
        self.R = joints.rotation_dofs(model.topo)
        self.time_dependent = self.inputs.time_dependent

    def velocity(self, y, yd):
        """Joint velocity v = Jr(y) y' (identity on scalar DoFs)."""
        if not len(self.R):
            return yd
        w = jnp.einsum("kij,kj->ki", right_jacobian(y[self.R]), yd[self.R])
        return yd.at[self.R].set(w)

    def config(self, y):
        return kinematics.integrate_q(self.model, self.q0, y)

    def tau(self, t, q, v):
        """The applied generalized force (:meth:`jaxmbd.Inputs.force`)."""
        return self.inputs.force(self.model, t, q, v)

    def accel(self, t, q, v):
        return forward_dynamics(self.model, q, v, self.tau(t, q, v), method=self.dynamics)

    def rotation_terms(self, y, yd, a):
        """g from the joint accelerations a at (y, y'): Jr(y)⁻¹ (a - dJr(y)[y'] y')
        on the rotation DoFs, a elsewhere."""
        if not len(self.R):
            return a
        _, corr = jax.jvp(lambda yy: self.velocity(yy, yd), (y,), (yd,))
        r = a - corr
        return r.at[self.R].set(jnp.einsum("kij,kj->ki", right_jacobian_inv(y[self.R]), r[self.R]))

    def g(self, t, y, yd):
        q, v = self.config(y), self.velocity(y, yd)
        return self.rotation_terms(y, yd, self.accel(t, q, v))

    def g_and_jac(self, t, y, yd, cotangent_rank=None):
        """g, J1 = dg/dy and J2 = dg/dy'.  The free accelerations a (without the soft rows) solve
        R̃ = ID(q(y), v(y, y'), a) - τ(t, q, v) = 0, so their Jacobians are -H⁻¹ ∂R̃/∂(y, y') at
        fixed a (the implicit-function theorem; Carpentier and Mansard's route to the ABA's
        derivatives): the forward passes of the Jacobian carry a's first-order model
        a₀ - H⁻¹ (R̃(y₁, y₁', a₀) - R̃(y, y', a₀)) (:meth:`free_model`) instead of the forward dynamics,
        so a's tangents cost a JVP of the inverse dynamics and one LᵀDL solve per direction.  The
        work of the configuration alone is the ``held`` piece of
        :func:`jaxmbd.odes.base.value_and_jacobians`, done once and differentiated in the nv position
        directions only: the kinematics (which the inverse dynamics then takes in world coordinates,
        ``rnea.rnea_at``, and so carries no tangents of its own) and, with soft rows (contacts, limits,
        friction loss), H's factors and the rows (``soft_configuration``)."""
        from ..forces import soft
        from ..rnea import world_form
        own = type(self).g is ChartODE.g and type(self).accel is ChartODE.accel   # g not redefined
        if not own:
            return super().g_and_jac(t, y, yd, cotangent_rank)
        model, static = self.model, []
        rows, world = soft.has_rows(model), world_form(model.topo)
        inner = (lambda y, yd: self.free_accelerations(t, y, yd),
                 lambda y, yd, y1, yd1, p: self.free_model(t, y, yd, y1, yd1, None if p is None else p[0]))
        if not rows and not world:
            return value_and_jacobians(lambda y, yd, _, a: self.rotation_terms(y, yd, a), y, yd,
                                       self.reverse_only, cotangent_rank, inner=inner)

        def held(y):
            q = self.config(y)
            kin_axes = kinematics.kinematics_and_axes(model, q)
            if not rows:
                return kin_axes if world else None, None
            arrays, st = soft_configuration(model, q, kin_axes)
            static[:] = [st]
            return kin_axes if world else None, arrays

        def g(y, yd, p, a):
            if not rows:
                return self.rotation_terms(y, yd, a)
            v = self.velocity(y, yd)
            return self.rotation_terms(y, yd, soft_accelerations(model, v, a, p[1], static[0]))
        return value_and_jacobians(g, y, yd, self.reverse_only, cotangent_rank, held=held, inner=inner)

    def free_accelerations(self, t, y, yd):
        """The accelerations at (y, y') without the soft rows (``dynamics.free_dynamics``)."""
        q, v = self.config(y), self.velocity(y, yd)
        return free_dynamics(self.model, q, v, self.tau(t, q, v), self.dynamics)

    def residual(self, t, y, yd, a, kin_axes=None):
        """R̃ = ID(q(y), v(y, y'), a) - τ(t, q, v): the inverse dynamics residual in the chart; with
        ``kin_axes`` (``kinematics_and_axes`` at q(y)), the inverse dynamics in world coordinates from
        them (``rnea.rnea_at``)."""
        q, v = self.config(y), self.velocity(y, yd)
        ID = inverse_dynamics(self.model, q, v, a) if kin_axes is None else \
            inverse_dynamics_at(self.model, q, v, a, kin_axes)
        return ID - self.tau(t, q, v)

    def free_model(self, t, y, yd, y1, yd1, kin_axes1=None):
        """The free accelerations' first-order model about (y, y') at (y₁, y₁'):
        a₀ - H⁻¹ (R̃(y₁, y₁', a₀) - R̃(y, y', a₀)), a₀ = -H⁻¹ R̃(y, y', 0) the accelerations at (y, y')
        and H, its factor, taken there.  Its value at (y, y') is a₀ and its first derivatives in
        (y₁, y₁') are a's, -H⁻¹ ∂R̃/∂(y, y') (see :meth:`g_and_jac`); every piece is a function of
        (y, y') and the model, so derivatives of those Jacobians are exact too.  ``kin_axes1``: the
        kinematics at q(y₁) where the caller has them (the inverse dynamics then takes them)."""
        model = self.model
        kin0 = None if kin_axes1 is None else kinematics.kinematics_and_axes(model, self.config(y))
        F = ltdl.factor(model, mass_matrix_compact_at(model, self.config(y), kin0))
        a0 = -ltdl.solve(model, F, self.residual(t, y, yd, jnp.zeros_like(yd), kin0))    # H⁻¹ (τ - C)
        d = self.residual(t, y1, yd1, a0, kin_axes1) - self.residual(t, y, yd, a0, kin0)
        return a0 - ltdl.solve(model, F, d)

    def iteration_matrix(self, t, v0, hg, linear_solver="dense", cotangent_rank=None):
        """(g at the step start, the iteration matrix for h γ = hg): dense (J1, J2
        by ``jacfwd``, LU of S) or branch-sparse (:class:`SparseIterationMatrix`)."""
        if linear_solver != "sparse":
            return super().iteration_matrix(t, v0, hg, linear_solver, cotangent_rank)
        g0 = self.g(t, jnp.zeros_like(v0), v0)
        return g0, SparseIterationMatrix.build(self, t, v0, g0, hg)

    def finish(self, y, yd):
        """Chart point -> (q, v) on the manifold."""
        q = kinematics.normalize_q(self.model, self.config(y))
        return q, self.velocity(y, yd)

    def position_magnitude(self, q):
        """Per-DoF |coordinate| used by the relative error scale (0 for rotation DoFs)."""
        idx = joints.coordinate_of_dof(self.model.topo)
        return jnp.where(idx >= 0, jnp.abs(q[np.maximum(idx, 0)]), 0.0)


@functools.lru_cache(maxsize=None)
def _branch_pattern(topo) -> np.ndarray:
    """(nv, nv) bool: j is i, an ancestor or a descendant of i (H's branch-induced pattern)."""
    on = np.zeros((topo.nv, topo.nv), bool)
    on[topo.M_rows, topo.M_cols] = True
    return on | on.T


@functools.lru_cache(maxsize=None)
def _cross_branch(topo, groups) -> tuple[np.ndarray, np.ndarray]:
    """For the coupling groups the force elements declare (DoF sets whose
    forces depend on each other's coordinates): the DoFs of every group that
    couples two branches (sorted), and the (nv, nv) mask of the entries off
    the branch pattern that no group explains (they must be zero)."""
    on = _branch_pattern(topo)
    explained = np.zeros_like(on)
    cross = set()
    for g in groups:
        g = np.asarray(g, np.int64)
        if len(g) and not on[np.ix_(g, g)].all():
            cross.update(int(k) for k in g)
            explained[np.ix_(g, g)] = True
    return np.array(sorted(cross), np.int64), ~on & ~explained


class SparseIterationMatrix(NamedTuple):
    """The iteration matrix in its branch-sparse form.  With the inverse
    dynamics residual in the chart, R̃(y, y') = ID(q(y), v(y, y'), a) - τ(t, q, v),

        Π = H S = H + h γ ∂R̃/∂y' + h² γ² (∂R̃/∂y - H L),

    at the step start (y = 0, a = g0; Negrut's thesis, Proposition 1).  On scalar
    coordinates the chart is q0 + y and L = 0.  On a rotation (ball joint,
    the rotation of a free joint) v = Jr(y) y' and g = Jr(y)⁻¹(a - dJr[y'] y'),
    so ∂g/∂y = -H⁻¹ ∂R̃/∂y + L with L the derivative of
    y ↦ Jr(y)⁻¹(g0 - dJr(y)[y'] y') at 0: a 3x3 block per rotation, which
    keeps H L inside H's pattern (∂g/∂y' = -H⁻¹ ∂R̃/∂y' since Jr(0) = I and
    the correction's y'-derivative vanishes at 0).  The tree's own forces
    give Π H's branch-induced pattern (τ_i depends only on the q, v
    of i's ancestors and subtree at fixed accelerations), so that part, Π_b,
    is factored by the non-symmetric level-scan kernel
    ``ltdl.factor(kind="lu")`` without fill-in, and H by LᵀDL.  S⁻¹ r =
    Π⁻¹ H r and J1 x = -H⁻¹ (∂R̃/∂y x) + L x; J1 is never formed.

    Force elements that couple two branches (a spring between two bodies on
    different branches) declare the DoFs they couple
    (:func:`jaxmbd.forces.couplings`); their entries off the pattern, E on
    the set C of those DoFs, are added exactly as a low-rank correction
    (Woodbury): with U = I[:, C] and Z = Π_b⁻¹ U (|C| solves per step),
    Π⁻¹ = Π_b⁻¹ - Z (I + E Uᵀ Z)⁻¹ E Uᵀ Π_b⁻¹.  Any other entry off the
    pattern (a control that couples two branches: nothing declares it) is
    found in the Jacobian, which is formed whole, and makes ``exact`` False;
    :func:`jaxmbd.simulate` then stops the run with status 10
    (``SPARSE_COUPLING``) instead of integrating with the wrong matrix."""
    Pi: object      # ltdl.Factor (lu) of Π_b
    Hc: jax.Array   # compact H
    HF: object      # ltdl.Factor (ltdl) of H
    model: object
    Rq_mv: object   # x -> ∂R̃/∂y x
    L: object       # the rotation charts' local term of ∂g/∂y, (nv, nv); None without rotations
    hg: jax.Array
    C: np.ndarray   # the cross-branch DoFs (static), possibly empty
    Z: jax.Array    # Π_b⁻¹ U, (nv, |C|)
    K: tuple        # LU of I + E Uᵀ Z, (|C|, |C|)
    E: jax.Array    # the off-pattern entries on C x C
    exact: jax.Array

    @staticmethod
    def build(ode, t, v0, a0, hg):
        model, q0 = ode.model, ode.q0
        topo = model.topo
        from ..forces import soft
        if soft.has_rows(model):
            raise ValueError("linear_solver='sparse' builds the iteration matrix from the inverse dynamics, "
                             "which the model's soft-constraint rows (contacts, limits, friction loss from "
                             "solref; jaxmbd.forces.soft) do not enter: use linear_solver='dense'")

        def R_chart(y):
            return ode.residual(t, y, v0, a0)
        y0 = jnp.zeros_like(v0)
        Rq = jax.jacfwd(R_chart)(y0)
        Rv = jax.jacfwd(lambda v: ode.residual(t, y0, v, a0))(v0)
        Hc = mass_matrix_compact(model, q0)
        A = hg * Rv + hg * hg * Rq
        if len(ode.R):
            L = jax.jacfwd(lambda y: ode.rotation_terms(y, v0, a0))(y0)
            A = A - hg * hg * (compact_to_dense(model, Hc) @ L)
        else:
            L = None
        lo = A[topo.M_rows, topo.M_cols] + Hc
        up = A[topo.M_cols, topo.M_rows] + Hc
        Pi = ltdl.factor(model, jnp.concatenate([lo, up]), kind="lu")
        Rq_mv = lambda x: jax.jvp(R_chart, (y0,), (x,))[1]  # noqa: E731
        C, unexplained = _cross_branch(topo, forces.couplings(model))
        exact = ~jnp.any(jnp.where(jnp.asarray(unexplained), A, 0.0) != 0) if unexplained.any() \
            else jnp.array(True)
        if len(C):
            off = ~_branch_pattern(topo)[np.ix_(C, C)]
            E = jnp.where(jnp.asarray(off), A[np.ix_(C, C)], 0.0)
            U = jnp.zeros((topo.nv, len(C)), A.dtype).at[C, np.arange(len(C))].set(1.0)
            Z = ltdl.solve(model, Pi, U)
            K = jax.scipy.linalg.lu_factor(jnp.eye(len(C), dtype=A.dtype) + E @ Z[C])
        else:
            E = Z = jnp.zeros((0,), A.dtype)
            K = ()
        return SparseIterationMatrix(Pi, Hc, ltdl.factor(model, Hc), model, Rq_mv, L, hg, C, Z, K, E, exact)

    def solve_Pi(self, r):
        """Π⁻¹ r: the branch-sparse solve, corrected for the declared cross-branch couplings."""
        x = ltdl.solve(self.model, self.Pi, r)
        if not len(self.C):
            return x
        return x - self.Z @ jax.scipy.linalg.lu_solve(self.K, self.E @ x[self.C])

    def solve_S(self, r):
        return self.solve_Pi(ltdl.mul_H(self.model, self.Hc, r))

    def J1mv(self, x):
        out = -ltdl.solve(self.model, self.HF, self.Rq_mv(x))
        return out if self.L is None else out + self.L @ x

    def solve_first_order(self, r1, r2):
        return solve_first_order(self, r1, r2)
