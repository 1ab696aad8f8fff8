"""The common interface of the integrators, the step-size controller and the
simplified-Newton iteration shared by the implicit methods."""

from __future__ import annotations

import abc
import inspect
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..odes.base import IterationMatrix

# status codes, per batch member
SUCCESS, MAX_STEPS, STEP_UNDERFLOW, NEWTON_FAILURE, NONFINITE, CONSTRAINT_FAILURE = 0, 1, 2, 3, 4, 5
# invalid input found inside the trace (traced values that cannot be checked before it); nothing is integrated
BAD_MASS_MATRIX, BAD_PARAMETERS, BAD_TOLERANCES, BAD_TIMES = 6, 7, 8, 9
# the sparse iteration matrix met a coupling between branches that nothing declared (e.g. a control)
SPARSE_COUPLING = 10
# the contact broad phase found more geom pairs within reach than a group's capacity
CONTACT_OVERFLOW = 11
# a step gained energy that neither the applied forces' work nor the start's stored energy explains, beyond the
# drift tolerance (jaxmbd.divergence): the method is unstable at its step
DIVERGED = 12
STATUS_NAMES = {SUCCESS: "success", MAX_STEPS: "max_steps reached", STEP_UNDERFLOW: "step size underflow",
                NEWTON_FAILURE: "Newton failure", NONFINITE: "non-finite state",
                CONSTRAINT_FAILURE: "constraint failure (rank-deficient constraint Jacobian or no assembly)",
                BAD_MASS_MATRIX: "invalid inertia: a body's mass or inertia, or an armature, is negative "
                                 "(the mass matrix would not be positive definite)",
                BAD_PARAMETERS: "non-finite model parameter",
                BAD_TOLERANCES: "invalid tolerances (rtol, atol must be finite, >= 0 and not both 0; "
                                "divergence_factor finite and > 0)",
                BAD_TIMES: "invalid times (t1 <= t0, dt0 <= 0, save times decreasing or outside [t0, t1], or "
                           "non-finite)",
                SPARSE_COUPLING: "linear_solver='sparse': a force couples DoFs on different branches of the tree "
                                 "that no force element declares (e.g. a control); use linear_solver='dense'",
                CONTACT_OVERFLOW: "contact capacity exceeded: more geom pairs within reach than the broad phase keeps "
                                  "for their types, or more contacts within their margin than the soft "
                                  "constraints' rows; raise it (load_mjcf(contact_capacity=...), "
                                  "ModelBuilder.set_contact_options(capacity=..., rows=...))",
                DIVERGED: "diverged: the state gained energy that the applied forces' work and the start's stored "
                          "energy do not explain, beyond divergence_factor times the model's energy scale "
                          "(jaxmbd.divergence): the method is unstable at this step; use a smaller step or an "
                          "implicit adaptive method"}


class Attempt(NamedTuple):
    """One step attempt in the chart: the new chart state, the local error
    estimates (zero for methods without one), whether the implicit solve
    converged, and the work done.  ``exact``: the iteration matrix's
    ``exact`` flag (None for methods without one or a dense matrix; False
    stops the run with status ``SPARSE_COUPLING``)."""
    y: jax.Array
    yd: jax.Array
    err_y: jax.Array
    err_yd: jax.Array
    ok: jax.Array
    rhs: jax.Array
    jac: jax.Array
    lu: jax.Array
    newton: jax.Array
    cache: object = None
    exact: object = None


REGISTRY: dict = {}
"""Every concrete integrator of :mod:`jaxmbd.integrators`, by its ``name``
(the CLI's ``--integrator``); filled as the classes are defined."""


class AbstractIntegrator(eqx.Module):
    """A one-step method for y'' = g(t, y, y') (see ``chart.ChartODE``).

    Subclasses define ``name`` (the registry's and the CLI's name),
    ``order`` (of the solution), ``error_order`` (q, the order of the
    embedded estimate; the step-size exponent is 1/(q+1); None for
    fixed-step methods) and ``attempt(ode, t, v0, h, scale, cache)``.
    Error-controlled methods derive from :class:`AbstractAdaptive`, methods
    with an iteration matrix from :class:`AbstractImplicit`; ``descriptor``:
    the method iterates on a mechanism's (q̈, λ) and takes mechanisms only.

    Methods that carry data from step to step (a reusable factorization, the
    stages for a predictor) return it as ``Attempt.cache``; ``init_cache``
    gives its initial value (same structure) and ``commit(cache, accepted)``
    is called after each attempt.  ``holds_step``: the controller keeps h
    when it would change by a factor in [1, 1.2], so that the factorization
    can be kept (c1 = 1.0, c2 = 1.2 of Hairer and Wanner's RADAU5 and SDIRK4
    codes, as in D. Negrut's thesis, University of Iowa, 1998, §4.2.1)."""
    name: ClassVar[str]
    order: ClassVar[int]
    error_order: ClassVar[int | None] = None
    holds_step: ClassVar[bool] = False
    descriptor: ClassVar[bool] = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.__module__.startswith("jaxmbd.integrators.") and not inspect.isabstract(cls) \
                and not cls.__name__.startswith("Abstract"):
            if "name" not in cls.__dict__:
                raise TypeError(f"integrator {cls.__name__} must define its registry name (name: ClassVar[str])")
            REGISTRY[cls.name] = cls

    @property
    def adaptive(self) -> bool:
        """Whether simulate controls the step size (error-controlled and not built with adaptive_steps=False)."""
        return False

    @property
    def tolerance_factor(self) -> float:
        """The factor simulate applies to rtol and atol."""
        return 1.0

    @abc.abstractmethod
    def attempt(self, ode, t, v0, h, scale, cache=None) -> Attempt:
        """One step attempt from (y = 0, y' = v0) at t with step h; ``scale``
        = (sy, sv), the error scales of Newton's convergence test."""

    def init_cache(self, ode, t, v0):
        return None

    def commit(self, cache, accepted):
        return cache


class AbstractAdaptive(AbstractIntegrator):
    """An error-controlled method: ``adaptive_steps`` (False: fixed steps of
    dt0) and ``tol_factor`` (the factor on rtol and atol) are its fields."""
    adaptive_steps: eqx.AbstractVar[bool]
    tol_factor: eqx.AbstractVar[float]

    @property
    def adaptive(self) -> bool:
        return self.error_order is not None and bool(self.adaptive_steps)

    @property
    def tolerance_factor(self) -> float:
        return float(self.tol_factor)


class AbstractImplicit(AbstractAdaptive):
    """An implicit or linearly implicit method with an iteration matrix:
    ``linear_solver`` is "dense" or "sparse" (the branch-sparse LᵀDL of a
    kinematic tree)."""
    linear_solver: eqx.AbstractVar[str]


def check_tol_factor(name, tol_factor):
    try:
        ok = 0.0 < float(tol_factor) <= 1.0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name}: tol_factor must be a number in (0, 1], got {tol_factor!r}")


def check_tableau(name, A, b, c=None, strictly_lower=False):
    """Frozen tableau checks at construction: shapes, finiteness, (strictly)
    lower-triangular A, c = row sums of A when given."""
    A, b = np.asarray(A, float), np.asarray(b, float)
    s = len(b)
    if A.shape != (s, s) or not np.all(np.isfinite(A)) or not np.all(np.isfinite(b)):
        raise ValueError(f"{name}: malformed tableau")
    k = 0 if strictly_lower else 1
    if np.any(np.triu(A, k) != 0):
        raise ValueError(f"{name}: A is not {'strictly ' if strictly_lower else ''}lower triangular")
    if c is not None and not np.allclose(np.asarray(c, float), A.sum(1), rtol=0, atol=1e-15):
        raise ValueError(f"{name}: c is not the row sums of A")


# --- norms and step-size control (Negrut's thesis §4.2.1, (4.6)-(4.8)) ------------

def rms(x):
    """Root mean square; its derivative at x = 0 is taken as 0 (not NaN: an
    error estimate that is exactly zero, e.g. at rest, must not poison gradients)."""
    if not x.size:
        return jnp.zeros((), x.dtype)
    ms = jnp.mean(x * x)
    pos = ms > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, ms, 1.0)), 0.0)


class Controller(eqx.Module):
    """h_new = h min(facmax, max(facmin, safety err^(-1/(q+1)))); facmax = 1
    right after a rejection (Shampine-Watts); h <= h_max.  With ``hold``
    (methods that can keep their factorization) h is kept when
    hold_low <= h_new/h <= hold_high (RADAU5's c1 = 1, c2 = 1.2)."""
    safety: float = 0.9
    facmin: float = 0.2
    facmax: float = 5.0
    h_max: float = jnp.inf
    hold_low: float = 1.0
    hold_high: float = 1.2

    def propose(self, h, err, q, after_reject, hold=False):
        err = jnp.maximum(err, 1e-10)
        fac = self.safety * err ** (-1.0 / (q + 1))
        fmax = jnp.where(after_reject, 1.0, self.facmax)
        fac = jnp.clip(fac, self.facmin, fmax)
        if hold:
            fac = jnp.where((fac >= self.hold_low) & (fac <= self.hold_high), 1.0, fac)
        return jnp.minimum(h * fac, self.h_max)


# --- the structured linear solve -------------------------------------------------

def check_linear_solver(linear_solver):
    if linear_solver not in ("dense", "sparse"):
        raise ValueError(f"unknown linear_solver {linear_solver!r}; expected 'dense' or 'sparse'")


# --- simplified Newton with convergence control (Negrut's thesis §4.5.2, (4.89)-(4.91); H&W's SDIRK4)

NEWTON_MAX = 7
KAPPA = 0.03


def newton(residual, solve, x0, scale, max_iter=NEWTON_MAX, kappa=KAPPA, eta_old=1.0):
    """Solve residual(x) = 0 with x <- x - solve(residual(x)).

    Stops when η ‖δ‖ <= κ (η = θ/(1-θ), θ the contraction rate; η_0 from the
    previous solve), fails when θ >= 0.99 or when the rate predicts no
    convergence within max_iter.  The loop is a bounded scan whose finished
    iterations are skipped (reverse-differentiable).  Returns (x, converged,
    iterations, η, θ) with θ the last contraction rate (0 after one iteration)."""
    uround = jnp.finfo(x0.dtype).eps

    def body(c, k):
        x, done, ok, it, eta, dn_old, th = c

        def run(c):
            x, done, ok, it, eta, dn_old, _ = c
            d = solve(residual(x))
            # the rates only steer the iteration: not differentiated (dn / dn_old has an infinite
            # derivative where a previous update was exactly zero, and 0 * inf poisons gradients)
            dn = rms(jax.lax.stop_gradient(d / scale))
            x_new = x - d
            theta = jnp.where(k > 0, dn / jnp.maximum(dn_old, 1e-300), 0.0)
            eta_k = jnp.where(k > 0, theta / jnp.maximum(1.0 - theta, 1e-12), eta)
            fail = (k > 0) & ((theta >= 0.99) | (theta ** (max_iter - 1 - k) / jnp.maximum(1.0 - theta, 1e-12)
                                                 * dn > kappa))
            conv = (eta_k * dn <= kappa) | (dn <= 10 * uround)
            fin = jnp.all(jnp.isfinite(x_new))
            # a diverging or non-finite update is not taken: the failed solve returns its last sound
            # iterate, so nothing downstream (a rejected step, the next stages) evaluates the model at
            # an absurd state, whose derivatives (0 * inf in the reverse pass) would poison gradients
            x = jnp.where(fin & ~(fail & ~conv), x_new, x)
            return (x, conv | fail | ~fin, conv & fin, it + 1, eta_k, dn, theta)
        return jax.lax.cond(done, lambda c: c, run, c), None

    eta0 = jnp.maximum(eta_old, uround) ** 0.8
    init = (x0, jnp.array(False), jnp.array(False), jnp.array(0), eta0, jnp.array(1.0, x0.dtype),
            jnp.array(0.0, x0.dtype))
    (x, _, ok, it, eta, _, theta), _ = jax.lax.scan(body, init, jnp.arange(max_iter))
    return x, ok, it, eta, theta


# --- keeping the factorization across steps (Negrut's thesis §4.2.1, H&W's SDIRK4 code) ---------

THETA_KEEP = 1e-3  # H&W THET: keep J and the LU while Newton contracts at least this fast


class Kept(NamedTuple):
    """A dense iteration matrix carried to the next step, with the step size
    it was built for, the slowest Newton rate seen with it, and whether it
    may be used (False at the start)."""
    M: IterationMatrix
    h: jax.Array
    theta: jax.Array
    valid: jax.Array

    @staticmethod
    def empty(n, dtype):
        z = jnp.zeros((n, n), dtype)
        M = IterationMatrix((z, jnp.zeros((n,), jnp.int32)), z, jnp.zeros((), dtype))
        return Kept(M, jnp.zeros((), dtype), jnp.array(jnp.inf, dtype), jnp.array(False))

    @staticmethod
    def after(M, h, ok, theta):
        """The record of a step just attempted with M: usable next if Newton converged."""
        h = jnp.asarray(h, theta.dtype)
        return Kept(M, h, jnp.where(ok, theta, jnp.inf), ok)


def step_iteration_matrix(ode, t, v0, h, hg, linear_solver, kept=None, need_g0=False):
    """The iteration matrix for this step, and whether it is fresh.

    With ``kept`` (dense solver only) the kept matrix is reused when it is
    valid, was built for exactly this h and Newton converged with
    θ <= THETA_KEEP; else (and without ``kept``) a fresh Jacobian and LU.
    Returns (g0, M, fresh: bool array); g0 = g at the step start, or None
    when it is not needed and the kept matrix is reused."""
    if kept is None:
        g0, M = ode.iteration_matrix(t, v0, hg, linear_solver)
        return g0, M, jnp.array(True)
    y0 = jnp.zeros_like(v0)

    def fresh(_):
        g0, J1, J2 = ode.g_and_jac(t, y0, v0)
        return (g0 if need_g0 else None), IterationMatrix.build(J1, J2, hg)

    def reuse(_):
        return (ode.g(t, y0, v0) if need_g0 else None), kept.M
    use = kept.valid & (h == kept.h) & (kept.theta <= THETA_KEEP)
    g0, M = jax.lax.cond(use, reuse, fresh, None)
    return g0, M, ~use
