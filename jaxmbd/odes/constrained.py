"""The constrained mechanism's equations for the integrators: the
state-space ODE on the independent coordinates (D. Negrut, "On the implicit
integration of differential-algebraic equations of multibody dynamics", PhD
thesis, University of Iowa, 1998: (3.15)-(3.17), (3.85)-(3.87)), and the
descriptor residual (3.76) of the (q̈, λ) codes (§3.3).

:class:`ConstrainedChartODE` lives in the local chart of the tree at the
step start, so every integrator of :mod:`jaxmbd.integrators` applies to it:
given the independent chart coordinates y and rates y', the dependent ones
are recovered by Newton on Φ = 0 and one linear solve (see
:mod:`jaxmbd.dae` for why that differentiates exactly), then the
constrained accelerations are computed and their independent part
returned.  Its Jacobians J1 = ∂y''/∂y and J2 = ∂y''/∂y' come from
forward-mode autodiff through the recovery (the thesis's Appendix A, as a
JVP).  As a :class:`~jaxmbd.odes.base.DescriptorODE` it also gives the
residual Ψ(q̈, λ) = [H q̈ + Φ_qᵀ λ - (τ - C); Φ_q q̈ - τ_c] at the recovered
state, which ``DescriptorSDIRK4``/``DescriptorTrapezoidal`` iterate on."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from ..constraints import _check, phi_bias_tree, phi_jacobian_tree, phi_tree
from ..crba import mass_matrix
from ..dae import NEWTON_ITERS, RECOVERY_TOL, accel_tree, partition
from ..dynamics import bias_force
from ..kinematics import normalize_q
from .base import DescriptorODE, value_and_jacobians
from ..inputs import NO_INPUTS, Inputs
from .chart import ChartODE, right_jacobian_inv


class ConstrainedChartODE(DescriptorODE):
    """y'' = g(t, y, y') for the independent chart coordinates of a mechanism
    around a consistent tree-ordered configuration q0 (see the module
    docstring).  The functions of ``inputs`` (a :class:`jaxmbd.Inputs`) and
    the saved states use the mechanism's coordinate order; everything inside
    is in tree order.  ``reverse_only``: as :class:`jaxmbd.odes.ChartODE`'s."""

    def __init__(self, mech, q0, dep, ind, inputs=None, method="schur", reverse_only=False):
        self.mech, self.q0, self.dep, self.ind = mech, q0, dep, ind
        self.chart = ChartODE(mech.tree, q0)
        self.model = mech.tree
        self.inputs = NO_INPUTS if inputs is None else inputs
        self.method = method
        self.reverse_only = reverse_only
        self.R = self.chart.R
        self.time_dependent = self.inputs.time_dependent
        self.nv = mech.nv
        if self.dep.shape[0]:
            # the tangent plane at the step start: x_dep ≈ -Φ_u⁻¹ Φ_v y, Newton's starting guess
            G0 = jax.jacfwd(self.phi_x)(jnp.zeros(self.nv, jnp.result_type(q0, float)))
            self._H0 = -jnp.linalg.solve(G0[:, dep], G0[:, ind])

    def _tangent_guess(self, y):
        return self._H0 @ y

    # -- chart, recovery --------------------------------------------------------------
    def phi_x(self, x):
        return self.mech.rows(phi_tree(self.mech, self.chart.config(x)))

    def _x(self, y, xd):
        return jnp.zeros(self.nv, y.dtype).at[self.ind].set(y).at[self.dep].set(xd)

    def recover(self, y, guess=None, iters=NEWTON_ITERS):
        """Dependent chart coordinates for independent ones y.

        NEWTON_ITERS Newton steps on Φ(x_dep, y) = 0 from the tangent-plane
        guess -Φ_u⁻¹ Φ_v y (step start), each with the full
        Jacobian Φ_x (one forward-mode pass over the tree gives Φ and Φ_x).
        The steps are ordinary differentiable operations, so derivatives
        with respect to y (and model parameters) are those of the converged
        iteration: the implicit-function derivatives, to every order.
        ``iters=0`` keeps the tangent-plane guess: exact, with exact first
        derivatives, at the chart origin y = 0 only (see :meth:`g_and_jac`).
        Returns (x (nv,), Φ_x there (nc, nv), ok)."""
        m = self.dep.shape[0]
        if m == 0:
            return self._x(y, jnp.zeros(0, y.dtype)), jnp.zeros((0, self.nv), y.dtype), jnp.array(True)
        xd0 = self._tangent_guess(y) if guess is None else guess

        def val_jac(x):
            J, r = jax.jacfwd(lambda z: (self.phi_x(z),) * 2, has_aux=True)(x)
            return r, J

        def it(carry, i):
            # iterations 0..iters-1 are Newton steps; the last one only evaluates Φ and Φ_x at
            # the result (exact velocity recovery): one traced copy of Φ's Jacobian, not two
            xd, _, _ = carry
            r, J = val_jac(self._x(y, xd))
            step = xd - jnp.linalg.solve(J[:, self.dep], r)
            return (jnp.where(i < iters, step, xd), r, J), None
        if iters:
            r0, J0 = jnp.zeros(m, y.dtype), jnp.zeros((m, self.nv), y.dtype)
            xd, r, J = jax.lax.scan(it, (xd0, r0, J0), jnp.arange(iters + 1))[0]
        else:
            xd = xd0
            r, J = val_jac(self._x(y, xd))
        res = jnp.max(jnp.abs(r)) if m else jnp.zeros((), y.dtype)
        ok = jnp.isfinite(res) & jnp.all(jnp.isfinite(xd)) & (res <= RECOVERY_TOL * (1.0 + jnp.max(jnp.abs(self.q0))))
        return self._x(y, xd), J, ok

    def chart_velocity(self, Gx, yd):
        """Full chart rates x' from the independent ones (Φ_x x' = 0)."""
        if self.dep.shape[0] == 0:
            return jnp.zeros(self.nv, yd.dtype).at[self.ind].set(yd)
        xd_dep = -jnp.linalg.solve(Gx[:, self.dep], Gx[:, self.ind] @ yd)
        return jnp.zeros(self.nv, yd.dtype).at[self.ind].set(yd).at[self.dep].set(xd_dep)

    def state(self, y, yd, iters=NEWTON_ITERS):
        """(q, v, x, x', ok, G): the full tree-ordered state for independent
        (y, y'), and Φ_q there when the chart's Jacobian is it (scalar joints)."""
        x, Gx, ok = self.recover(y, iters=iters)
        xd = self.chart_velocity(Gx, yd)
        G = Gx if not len(self.R) else None
        return self.chart.config(x), self.chart.velocity(x, xd), x, xd, ok, G

    def tau(self, t, q, v):
        """The applied generalized force (tree order; :meth:`jaxmbd.Inputs.force`)."""
        return self.inputs.force(self.model, t, q, v, self.mech)

    def accel_full(self, t, y, yd, iters=NEWTON_ITERS):
        """(x'' (nv,), a (nv,), λ, ok) at independent (y, y')."""
        q, v, x, xd, ok, G = self.state(y, yd, iters)
        a, lam = accel_tree(self.mech, q, v, self.tau(t, q, v), self.method, G)
        xdd = self._chart_accel(x, xd, a)
        return xdd, a, lam, ok

    def _chart_accel(self, x, xd, a):
        ch = self.chart
        if not len(self.R):
            return a
        _, corr = jax.jvp(lambda xx: ch.velocity(xx, xd), (x,), (xd,))
        r = a - corr
        return r.at[self.R].set(jnp.einsum("kij,kj->ki", right_jacobian_inv(x[self.R]), r[self.R]))

    # -- the ChartODE interface the integrators use --------------------------------
    def g(self, t, y, yd, iters=NEWTON_ITERS):
        xdd, _, _, ok = self.accel_full(t, y, yd, iters)
        return jnp.where(ok, xdd[self.ind], jnp.nan)

    def g_and_jac(self, t, y, yd, cotangent_rank=None):
        """g and J1 = ∂g/∂y, J2 = ∂g/∂y' by forward-mode autodiff, at the
        chart origin y = 0 (the step start, where every integrator forms
        its Jacobians).  There the recovery needs no Newton step: the
        tangent-plane guess x_dep = -Φ_u⁻¹ Φ_v y is exact at y = 0 and so
        is its derivative, the implicit-function derivative -Φ_u⁻¹ Φ_v
        (and its derivatives with respect to q0 and model parameters, so
        gradients through the Jacobians stay exact).  Skipping the five
        Newton steps makes the Jacobian about 5x cheaper on the HMMWV."""
        return value_and_jacobians(lambda y, yd: self.g(t, y, yd, iters=0), y, yd, self.reverse_only,
                                   cotangent_rank)

    def finish(self, y, yd):
        q, v, _, _, ok, _ = self.state(y, yd)
        q = normalize_q(self.model, q)
        return jnp.where(ok, q, jnp.nan), jnp.where(ok, v, jnp.nan)

    def position_magnitude(self, q):
        return self.chart.position_magnitude(q)[self.ind]

    # -- the descriptor form (DescriptorODE) ----------------------------------------
    def descriptor_residual(self, t, ytil, ydtil, beta, gh, z, iters=None):
        """Ψ(z) of (3.76) at the state given by the independent accelerations
        a = z[ind]: y = ỹ + β a, y' = ỹ' + γh a (recovered to the full state)."""
        nv = self.nv
        xdd, lam = z[:nv], z[nv:]
        a = xdd[self.ind]
        y, yd = ytil + beta * a, ydtil + gh * a
        q, v, x, xd, ok, G = self.state(y, yd) if iters is None else self.state(y, yd, iters)
        tree = self.model
        if G is None:      # rotation DoFs: Φ_q in joint velocities, and v̇ from the chart accelerations
            G = self.mech.rows(phi_jacobian_tree(self.mech, q))
            vdot = jax.jvp(self.chart.velocity, (x, xd), (xd, xdd))[1]
        else:
            vdot = xdd
        r1 = mass_matrix(tree, q) @ vdot + G.T @ lam - (self.tau(t, q, v) - bias_force(tree, q, v))
        r2 = G @ vdot - self.mech.rows(phi_bias_tree(self.mech, q, v))
        r = jnp.concatenate([r1, r2])
        return jnp.where(ok, r, jnp.nan)

    def descriptor_start(self, t, v0, beta, gh):
        """z0 = [q̈0; λ0] at the step start, its independent part a0, the LU of
        ∂Ψ/∂z there (for the formula's β, γh) and the Newton scale weights."""
        from ..forces import soft
        if soft.has_rows(self.model):
            raise ValueError("the descriptor form's residual is the inverse dynamics, which the model's "
                             "soft-constraint rows (contacts, limits, friction loss from solref) do not enter; "
                             "use a state-space integrator for this model")
        y0 = jnp.zeros_like(v0)
        xdd0, _, lam0, ok0 = self.accel_full(t, y0, v0)
        z0 = jnp.concatenate([xdd0, lam0])
        a0 = xdd0[self.ind]
        # the residual map whose state at z0 is the step start itself (the chart
        # origin, where the recovery's tangent-plane guess and its derivatives are exact)
        J = jax.jacfwd(lambda z: self.descriptor_residual(t, -beta * a0, v0 - gh * a0, beta, gh, z, iters=0))(z0)
        lu = jsl.lu_factor(J)
        # λ_j is measured by the largest acceleration change it causes, |H⁻¹ Φ_qᵀ e_j|∞ (at the step start)
        q0, _, _, _, _, G0 = self.state(y0, v0)
        G0 = self.mech.rows(phi_jacobian_tree(self.mech, q0)) if G0 is None else G0
        W = jnp.linalg.solve(mass_matrix(self.model, q0), G0.T)
        lam_w = jnp.max(jnp.abs(W), axis=0)
        return z0, a0, ok0, lu, lam_w


@partial(jax.jit, static_argnames=("iterations",))
def static_equilibrium(mech, q=None, iterations=8, tau=None):
    """A configuration at rest near q (mechanism order; default ``mech.q0``)
    where the constrained accelerations vanish: Newton on the state-space
    ODE's independent accelerations, g(y, 0) = 0, with the Jacobian
    ∂g/∂y from forward-mode autodiff (through the position recovery) and
    least-squares steps, so neutral directions (a free-floating body's
    horizontal position and heading, which no force restores) stay where
    they are.  q must satisfy the constraints (see :func:`assemble`); tau:
    a constant generalized force (mechanism order), default zero.
    Returns (q, info) with info = dict(residual_history (max |g| before each
    step), residual (max |a| at the result, all coordinates))."""
    q = mech.q0 if q is None else jnp.asarray(q)
    _check(mech, q)
    control = None if tau is None else jnp.asarray(tau, q.dtype)
    inputs = Inputs(tau=control)

    def step(qt, _):
        P = partition(mech.rows(phi_jacobian_tree(mech, qt)))
        ode = ConstrainedChartODE(mech, qt, P["dep"], P["ind"], inputs)
        y0 = jnp.zeros(P["ind"].shape[0], q.dtype)
        g0, J1, _ = ode.g_and_jac(jnp.zeros((), q.dtype), y0, y0)
        dy = jnp.linalg.lstsq(J1, -g0, rcond=1e-10)[0]
        qn, _ = ode.finish(dy, y0)
        return qn, jnp.max(jnp.abs(g0))
    qt, hist = jax.lax.scan(step, mech.to_tree(q), None, length=iterations)
    a, _ = accel_tree(mech, qt, jnp.zeros(mech.nv, q.dtype),
                      jnp.zeros(mech.nv, q.dtype) if tau is None else mech.to_tree(control))
    return mech.from_tree(qt), dict(residual_history=hist, residual=jnp.max(jnp.abs(a)))
