"""``simulate``: error-controlled, batched, differentiable time integration of a
kinematic tree or a mechanism with any integrator of :mod:`jaxmbd.integrators`.

One generic loop: what is integrated comes from the system hooks of
:mod:`jaxmbd.systems` (a tree or a mechanism), the step from the integrator,
the equations from :mod:`jaxmbd.odes`."""

from __future__ import annotations

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np

from .integrators.base import (BAD_MASS_MATRIX, BAD_PARAMETERS, BAD_TIMES, BAD_TOLERANCES, CONSTRAINT_FAILURE,
                               CONTACT_OVERFLOW, DIVERGED,
                               MAX_STEPS, NEWTON_FAILURE, NONFINITE, SPARSE_COUPLING, STATUS_NAMES, STEP_UNDERFLOW,
                               SUCCESS, AbstractIntegrator, Controller, rms)
from .divergence import DIVERGENCE_FACTOR
from .forces.contact import contact_overflow
from .systems import system_of

STAT_KEYS = ("accepted", "rejected", "rhs_evals", "jacobian_evals", "lu_factorizations", "newton_iterations")


class Solution(eqx.Module):
    """ts (S,), qs (S, nq), vs (S, nv) at the save times (None with
    ``keep_states=False``); obs: the pytree ``observe(model, q, v)`` at the
    save times, leading axis S (None without ``observe``); status (int: 0
    success, 1 max_steps reached, 2 step size underflow, 3 Newton failure,
    4 non-finite state, 5 constraint failure, 6-9 invalid input, 10 sparse
    coupling, 11 contact overflow, 12 diverged: see ``status_name``); stats:
    dict of counters; t: the time reached.  Save times not reached
    (status != 0) hold the last state.

    Mechanisms (closed loops) also give ``residuals`` (S, 2): |Φ(q)|∞ and
    |Φ_q v|∞ at the save times, ``max_residuals`` (2,): the same, largest
    over every accepted step, ``lams`` (S, nc): the multipliers (with
    ``multipliers=True``), and ``stats["partitions"]``: how many times the
    coordinate partition was renewed.

    ``steps`` (with ``step_history=N``): dict(t=(N,), h=(N,)), the end time
    and size of the first N accepted steps (NaN where fewer were taken):
    step-size histories for studying the integrators."""
    ts: jax.Array
    qs: jax.Array | None
    vs: jax.Array | None
    status: jax.Array
    stats: dict
    t: jax.Array
    obs: object = None
    residuals: jax.Array | None = None
    lams: jax.Array | None = None
    max_residuals: jax.Array | None = None
    steps: dict | None = None

    @property
    def ok(self):
        return self.status == SUCCESS


def status_name(status) -> str:
    return STATUS_NAMES[int(status)]


MAX_STEPS_DEFAULT = 100_000
"""simulate's default bound on step attempts: a safety bound, not a cost (the loop stops when done)."""
DEFAULT_CHECKPOINTS = 100
"""Loop states kept by the reverse pass of ``adjoint="checkpoint"`` (default of ``simulate(checkpoints=)``)."""


def _initial_step(ode, integrator, t0, q0, v0, sc_y, sc_v, span):
    """Hairer-Wanner's starting step (Solving ODEs I, II.4) from two g evaluations.

    The two evaluations are the two iterations of one ``lax.scan``, so the
    program holds one traced copy of g instead of two (on humanoid30's
    Rosenbrock ``simulate`` the second copy was 9% of the compiled kernels,
    bench/results/compile_cpu.md)."""
    y0 = jnp.zeros_like(v0)
    d0 = rms(jnp.concatenate([ode.position_magnitude(q0) / sc_y, v0 / sc_v]))

    def body(point, _):
        t, y, yd = point
        a = ode.g(t, y, yd)
        # h0 and d1 from a = a0; the second iteration's point and outputs are not used
        d1 = rms(jnp.concatenate([v0 / sc_y, a / sc_v]))
        h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / jnp.maximum(d1, 1e-300))
        h0 = jnp.minimum(h0, span)
        return (t0 + h0, h0 * v0, v0 + h0 * a), (a, h0, d1)

    _, (a, h, d) = jax.lax.scan(body, (t0, y0, v0), None, length=2)
    a0, a1, h0, d1 = a[0], a[1], h[0], d[0]
    d2 = rms(jnp.concatenate([(a0 * h0) / sc_y, (a1 - a0) / sc_v])) / h0
    p = integrator.order
    h1 = jnp.where(jnp.maximum(d1, d2) <= 1e-15, jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(jnp.maximum(d1, d2), 1e-300)) ** (1.0 / (p + 1)))
    return jnp.minimum(jnp.minimum(100 * h0, h1), span)


def _concrete(x):
    """x as a NumPy array if it is known now (not a tracer), else None."""
    try:
        return None if isinstance(x, jax.core.Tracer) else np.asarray(x, dtype=float)
    except Exception:  # noqa: BLE001 - anything that is not a plain array is checked later, in the trace
        return None


def validate_times(t0, t1, saveat=None, dt0=None):
    """Check the times known at call time (not tracers): t1 > t0, saveat finite,
    non-decreasing and within [t0, t1], dt0 > 0.  Raises ValueError."""
    t0c, t1c = _concrete(t0), _concrete(t1)
    if t0c is not None and t1c is not None and not t1c > t0c:
        raise ValueError(f"t1 = {t1c} must be greater than t0 = {t0c}")
    ts = None if saveat is None else _concrete(saveat)
    if ts is not None and ts.ndim == 1 and ts.size:
        if np.any(np.diff(ts) < 0) or not np.all(np.isfinite(ts)):
            raise ValueError("saveat must be finite and non-decreasing")
        if t0c is not None and ts[0] < t0c:
            raise ValueError(f"saveat starts at {ts[0]}, before t0 = {t0c}")
        if t1c is not None and ts[-1] > t1c * (1 + 1e-12) + 1e-300:
            raise ValueError(f"saveat ends at {ts[-1]}, after t1 = {t1c}")
    dt0c = None if dt0 is None else _concrete(dt0)
    if dt0c is not None and not (dt0c > 0):
        raise ValueError(f"dt0 must be positive, got {dt0c}")


def simulate(model, q0=None, v0=None, t0=0.0, t1=1.0, *, integrator: AbstractIntegrator, dt0=None,
             rtol=1.0e-6, atol=1.0e-6, saveat=None, control=None, ctrl=None, params=None,
             max_steps=MAX_STEPS_DEFAULT,
             controller: Controller = Controller(), dynamics="aba", adjoint="checkpoint", checkpoints=None,
             observe=None, keep_states=True, multipliers=False, constraint_solver="schur", assemble_initial=True,
             step_history=0, divergence_factor=DIVERGENCE_FACTOR) -> Solution:
    """Integrate the model from (q0, v0) at t0 to t1 (default: the model's own
    initial state ``model.q0``, ``model.v0``).

    integrator: an instance from :mod:`jaxmbd.integrators`.  Fixed-step methods
      (``SemiImplicitEuler``, ``RK4``, or an adaptive one built with
      ``adaptive_steps=False``) step by ``dt0``; adaptive ones start from
      ``dt0`` or, if None, Hairer-Wanner's starting-step estimate.
    rtol, atol: scaled RMS error per step over positions and velocities with
      sc = atol + rtol max(|x0|, |x1|) (digest negrut.md §3.6); |x| is the
      coordinate's magnitude for scalar joints and 0 for rotation vectors.
      Both are first multiplied by the integrator's ``tol_factor`` (Rosenbrock
      0.15, SDIRK4 0.5, Trapezoidal 0.3, else 1), calibrated so that the
      global error of the thesis's validation problem stays within a few times
      the requested tolerance.
    saveat: increasing save times in [t0, t1] (default [t1]); steps are shortened
      to land on them; the run ends at the last one.
    control: joint torques: None, an (nv,) array, or ``tau(t, q, v, params)``.
    ctrl: the inputs of the model's actuators (``model.actuators``, as MuJoCo's
      ``ctrl``; :func:`jaxmbd.actuator_force`): None (every control zero: the
      actuators still act, e.g. a position servo holds 0), an (nu,) array
      (constant; under ``vmap`` each member may have its own), or
      ``ctrl(t, q, v, params) -> (nu,)``.  It is evaluated inside the
      integrated equations with the model being integrated, so gradients
      reach the controls and the actuator parameters (gains, gear, ranges);
      the applied force is the control's torque plus the actuators' force.
      A wrong shape is a ValueError naming nu.
    max_steps: a safety bound on step attempts (accepted + rejected; default
      100,000); it does not set the cost: the loop stops when the run is done,
      and under vmap when the last member is done.
    dynamics: "aba", "aba_unrolled" or "crba" (forward-dynamics method,
      :func:`jaxmbd.forward_dynamics`).
    observe: optional ``observe(model, q, v) -> pytree``, recorded at the save
      times inside the loop (evaluated after every step); with
      ``keep_states=False`` only it is kept, so the loop carries no (S, nq)
      trajectory buffer (large batches, many save times).
    adjoint: "checkpoint" (default) or "none".  Both are a while loop that
      runs as many steps as the run needs.  "checkpoint" is reverse-mode
      differentiable (``jax.grad``) with bounded memory: the reverse pass keeps
      ``checkpoints`` copies of the loop state (default 100)
      and recomputes the steps between them (online binomial checkpointing,
      Stumm-Walther; ``equinox.internal.while_loop``), so a gradient costs a
      few forward runs.  The implicit methods' Jacobians take a cheaper
      pullback there: the cotangent of the n x 2n Jacobian of g is paired
      with it by n directional derivatives instead of transposing the 2n of
      the forward Jacobian, and by 5 for RosenbrockNystrom4, whose step
      leaves that cotangent of rank <= 5 whatever n
      (``jaxmbd.odes.base.value_and_jacobians``; bench/results/loop_cost_cpu.md).
      "none" is forward-mode differentiable only
      (``jax.jvp``, ``jax.jacfwd``; ``jax.grad`` raises).

    Mechanisms (models with loop constraints, :class:`jaxmbd.Mechanism`) are
    integrated as index-3 DAEs by generalized coordinate partitioning
    (digest negrut.md §1-2): the integrator advances the independent
    coordinates of the state-space ODE (:class:`jaxmbd.odes.ConstrainedChartODE`),
    the dependent ones are recovered by Newton (positions) and a linear
    solve (velocities) at every evaluation, so |Φ| and |Φ_q v| stay at
    round-off; the partition (full-pivot LU of Φ_q) is renewed when
    cond(Φ_u) grows past 1.25x its value at partitioning.  So
    ``RosenbrockNystrom4`` is the thesis's ForRosen, ``SDIRK4`` its ForSDIRK
    and ``Trapezoidal`` its SspTrap (Newton on the independent accelerations
    with the matrix M̂(I - h/2 J2 - h²/4 J1), here scaled by M̂⁻¹);
    ``integrators.DescriptorSDIRK4`` and ``DescriptorTrapezoidal`` iterate on
    (q̈, λ) instead (InflSDIRK, InflTrap).  q0, v0, control, the arguments
    of ``ctrl(t, q, v, params)`` and the saved states use the mechanism's
    coordinate order.  ``assemble_initial``
    (default True) first projects (q0, v0) onto the constraints
    (:func:`jaxmbd.assemble`; a consistent state is left as it is);
    ``multipliers=True`` saves λ; ``constraint_solver``: "schur" (the
    factorization of H and the Schur complement) or "dense" (the augmented
    matrix).

    Gradients of an adaptive run are those of the discrete solution with its
    accepted step sizes held fixed (the step-size controller is not
    differentiated, as is usual for adaptive solvers): they converge to the
    true sensitivities as the tolerance tightens.  The controller's own
    sensitivity to the error estimate, large and meaningless where a contact
    starts, would otherwise swamp them (the cube toss of tests/test_contact.py:
    81 instead of 0.167).

    step_history: record the end time and size of the first ``step_history``
    accepted steps (``Solution.steps``).

    divergence_factor: every step whose state would be accepted is first
      checked for energy that the model cannot have gained
      (:mod:`jaxmbd.divergence`).  H = T + V_g + U_j (the bodies' kinetic
      energy, gravity's potential, and the potential of joint springs and
      joint-space force elements) may grow by at most ``divergence_factor`` ×
      E(τ), E(τ) = T0 + U0 + M g L + a ½ M g² τ², where M is the total mass,
      g = max(|gravity|, 9.81 m/s²), L the model's length scale at q0 (the
      box around its body origins, joint anchors and centres of mass, plus
      twice the largest radius of gyration), T0 and U0 the initial kinetic
      and elastic (springs, force elements other than contact) energies, τ
      the time elapsed, a = 1 for a driven model (``control``, ``ctrl``,
      actuators or a constant joint force) and 0 for a passive one.  A step
      past it stops the run with status 12 (``DIVERGED``), keeping the last
      state within it.  A passive model's H grows by at most U0 (a tenth of
      the default bound), while a method that is unstable at its step size
      (an explicit one on stiff contact) creates energy until it passes.
      Default 10; a larger number for controls that legitimately inject more
      energy than a force of about 3x the model's weight, None for no
      check.  It costs a forward-kinematics pass per step.

    Returns a :class:`Solution`; failures are reported per call (per batch
    member under vmap) in ``status``, never as silent NaNs.  Inputs that may
    be traced are checked inside the trace, and a bad one makes the status a
    failure before any step is taken: a non-finite model parameter, a body
    with a negative mass or an indefinite inertia, or a negative armature
    (e.g. from an optimizer's step: the mass matrix would be indefinite),
    negative tolerances, t1 <= t0 or dt0 <= 0 (statuses 6-9,
    ``integrators.STATUS_NAMES``).  With an implicit method's
    ``linear_solver="sparse"``, a force that couples two branches of the tree
    without a force element declaring it (a control coupling them) stops the
    run with status 10 (``SPARSE_COUPLING``) instead of integrating with an
    inexact iteration matrix; declared couplings are handled exactly.  A
    state where the contact broad phase finds more geom pairs within reach
    than a group's capacity (:func:`jaxmbd.forces.contact.capacities`), or
    more contacts within their margin than the soft constraints' rows
    (``set_contact_options(rows=...)``), is
    not accepted: the run stops with status 11 (``CONTACT_OVERFLOW``),
    keeping the last state whose contacts were all evaluated.  A state past
    the divergence bound (``divergence_factor``) is not accepted either: status
    12 (``DIVERGED``), keeping the last state within it.

    Times known at call time are validated before tracing (t1 > t0, saveat
    non-decreasing within [t0, t1], dt0 > 0); Python numbers given for t0,
    t1, dt0, rtol, atol and max_steps are passed on as arrays, so calls that
    differ only in them share one compiled program."""
    validate_times(t0, t1, saveat, dt0)
    max_steps = _check_max_steps(max_steps)
    divergence_factor = _check_divergence_factor(divergence_factor)
    # Python numbers as arrays, so that calls that differ only in them share one compiled program
    if isinstance(max_steps, (int, np.integer)):
        max_steps = jnp.asarray(max_steps, jnp.int32)
    return _simulate(model, q0, v0, _arr(t0), _arr(t1), integrator, _arr(dt0), _arr(rtol), _arr(atol), saveat,
                     control, ctrl, params, max_steps, controller, dynamics, adjoint, checkpoints, observe, keep_states,
                     multipliers, constraint_solver, assemble_initial, step_history, _arr(divergence_factor))


def _check_divergence_factor(f):
    """None, or a number > 0 (checked now where it is known now; a traced one is taken as given)."""
    if f is None:
        return None
    if isinstance(f, bool):
        raise TypeError(f"divergence_factor must be a number or None, got {f!r}")
    c = _concrete(f)
    if c is not None and not (c.ndim == 0 and np.isfinite(c) and c > 0):
        raise ValueError(f"divergence_factor must be a finite number > 0 or None, got {f!r}")
    return f


def _arr(x):
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return jnp.asarray(x, jnp.result_type(float))
    return x


def _check_max_steps(max_steps):
    """max_steps must be an integer (a Python int or an integer array), >= 1 when concrete."""
    concrete = isinstance(max_steps, (int, np.integer)) and not isinstance(max_steps, bool)
    if concrete and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if not (concrete or jnp.issubdtype(jnp.result_type(max_steps), jnp.integer)):
        raise TypeError(f"max_steps must be an integer, got {max_steps!r}")
    return max_steps


@eqx.filter_jit
def _simulate(model, q0, v0, t0, t1, integrator, dt0, rtol, atol, saveat, control, ctrl, params, max_steps, controller,
              dynamics, adjoint, checkpoints, observe, keep_states, multipliers, constraint_solver,
              assemble_initial, step_history, divergence_factor=None) -> Solution:
    """The traced body of :func:`simulate` (same arguments, all given)."""
    if not isinstance(integrator, AbstractIntegrator):
        raise TypeError(f"integrator must be a jaxmbd.integrators method, got {type(integrator).__name__}")
    system = system_of(model, control, params, dynamics, constraint_solver, ctrl)
    q0 = model.q0 if q0 is None else jnp.asarray(q0)
    v0 = model.v0 if v0 is None else jnp.asarray(v0)
    system.check(q0, v0, integrator, multipliers, constraint_solver)
    dt = jnp.result_type(q0, v0, float)
    q0, v0 = q0.astype(dt), v0.astype(dt)
    t0, t1 = jnp.asarray(t0, dt), jnp.asarray(t1, dt)
    ts = jnp.atleast_1d(jnp.asarray(t1 if saveat is None else saveat, dt))
    if ts.ndim != 1:
        raise ValueError(f"saveat must be a 1-d array of times, got shape {ts.shape}")
    adaptive = integrator.adaptive
    if not adaptive and dt0 is None:
        raise ValueError(f"{type(integrator).__name__} takes fixed steps: give dt0")
    _check_max_steps(max_steps)
    if adjoint not in ("checkpoint", "none"):
        raise ValueError(f"unknown adjoint {adjoint!r}; expected 'checkpoint' or 'none'")
    if not keep_states and observe is None:
        raise ValueError("keep_states=False needs an observe function (nothing would be saved)")
    n_hist = int(step_history)
    if n_hist < 0:
        raise ValueError(f"step_history must be >= 0, got {step_history}")
    fac = integrator.tolerance_factor if adaptive else 1.0
    rtol, atol = fac * jnp.asarray(rtol, dt), fac * jnp.asarray(atol, dt)
    n_save = ts.shape[0]
    q_err = integrator.error_order
    ind = system.independent

    q0, v0, part0, bad_start = system.start(q0, v0, assemble_initial)
    if divergence_factor is not None:
        H0, e0, e2 = system.energy_scale(q0, v0)
        divergence_factor = jnp.asarray(divergence_factor, dt)

    def scales(ode, q, v, part):
        return atol + rtol * ode.position_magnitude(q), atol + rtol * jnp.abs(ind(part, v))

    def record(q, v):
        return system.record(q, v, keep_states, observe, t0, part0)

    def ode_at(q, part):
        ode = system.ode_at(q, part)
        # the checkpointed loop is differentiated in reverse mode only: its Jacobians take the cheaper pullback
        ode.reverse_only = adjoint == "checkpoint"
        return ode

    ode0 = ode_at(q0, part0)
    sy0, sv0 = scales(ode0, q0, v0, part0)
    span = jnp.maximum(ts[-1] - t0, 0.0)
    if dt0 is not None:
        h0 = jnp.asarray(dt0, dt)
    else:
        h0 = _initial_step(ode0, integrator, t0, q0, ind(part0, v0), sy0, sv0, jnp.maximum(span, 1e-12))
    h0 = jnp.minimum(h0, controller.h_max)
    if adaptive:
        # the step sizes are not differentiated (see simulate's docstring: gradients of an adaptive run)
        h0 = jax.lax.stop_gradient(h0)

    k0 = jnp.sum(ts <= t0).astype(jnp.int32)
    rec0 = record(q0, v0)
    # rows before k0 hold the initial state; the others are written once in the loop (their initial value must
    # not depend on the inputs: a buffer's overwritten entries pass their cotangent on unchanged)
    before = ts <= t0
    saved0 = jax.tree_util.tree_map(
        lambda x: jnp.where(before.reshape((-1,) + (1,) * jnp.ndim(x)), x[None], jnp.zeros_like(x)[None]), rec0)
    zero = jnp.zeros((), jnp.int32)
    nonfinite0 = ~(jnp.all(jnp.isfinite(q0)) & jnp.all(jnp.isfinite(v0)) & jnp.isfinite(h0))
    status0 = jnp.where(nonfinite0, NONFINITE, jnp.where(bad_start, CONSTRAINT_FAILURE, SUCCESS))
    over0 = contact_overflow(system.tree, q0)
    if over0 is not None:
        status0 = jnp.where((status0 == SUCCESS) & over0, CONTACT_OVERFLOW, status0)
    status0 = _input_status(system.tree, status0, rtol, atol, t0, t1, dt0)
    bad0 = status0 != SUCCESS
    stats0 = {k: zero for k in STAT_KEYS + system.extra_stats}
    state = dict(t=t0, q=q0, v=v0, h=h0, k=k0, saved=saved0, done=(k0 >= n_save) | bad0, n=zero,
                 status=status0.astype(jnp.int32), after_reject=jnp.array(False), stats=stats0,
                 cache=integrator.init_cache(ode0, t0, ind(part0, v0)), part=part0, **system.initial_extra(rec0))
    if n_hist:
        state["hist"] = dict(t=jnp.full((n_hist,), jnp.nan, dt), h=jnp.full((n_hist,), jnp.nan, dt))

    def step(s):
        part = s["part"]
        ode = ode_at(s["q"], part)
        target = ts[jnp.minimum(s["k"], n_save - 1)]
        remaining = target - s["t"]
        clipped = s["h"] * (1.0 + 1e-8) >= remaining  # no sliver step from rounding in t
        # a member that is done (under vmap it is stepped, masked, until the last one is) takes a regular
        # step instead of h = 0, so that no derivative of the masked step is infinite (0 * inf = NaN)
        h = jnp.where(clipped & ~s["done"], remaining, s["h"])
        sy, sv = scales(ode, s["q"], s["v"], part)
        att = integrator.attempt(ode, s["t"], ind(part, s["v"]), h, (sy, sv), s["cache"])
        q1, v1 = ode.finish(att.y, att.yd)
        finite = jnp.all(jnp.isfinite(q1)) & jnp.all(jnp.isfinite(v1))
        # a Newton failure with a kept (not fresh) factorization is retried at the same h with a
        # fresh one (the failed attempt leaves the kept one invalid), as the H&W codes do
        retry = ~att.ok & finite & (att.lu == 0)
        if adaptive:
            sy1, sv1 = scales(ode, q1, v1, part)
            err = rms(jnp.concatenate([att.err_y / jnp.maximum(sy, sy1), att.err_yd / jnp.maximum(sv, sv1)]))
            finite = finite & jnp.isfinite(err)
            accept = att.ok & finite & (err <= 1.0)
            proposed = controller.propose(h, err, q_err, s["after_reject"], integrator.holds_step)
            h_new = jnp.where(att.ok & finite, proposed, jnp.where(finite, 0.5 * h, 0.25 * h))
            h_new = jnp.where(accept & clipped, jnp.maximum(h_new, s["h"]), h_new)
            h_new = jnp.where(~accept & (h_new > h), h, h_new)  # after a rejection h never grows
            h_new = jax.lax.stop_gradient(jnp.where(retry, h, h_new))
        else:
            accept = att.ok & finite
            h_new = jnp.where(accept | retry, s["h"], 0.5 * h)
        # an inexact (sparse) iteration matrix stops the run before anything is accepted from it
        inexact = jnp.array(False) if att.exact is None else ~att.exact
        accept = accept & ~inexact
        over = contact_overflow(system.tree, q1)
        if over is not None:   # a state whose contacts the broad phase cannot all keep is not accepted
            over = accept & over
            accept = accept & ~over
        t_new = jnp.where(clipped, target, s["t"] + h)
        diverged = None
        if divergence_factor is not None:   # nor one past the divergence bound
            tau = t_new - t0
            gain = system.energy(q1, v1) - H0
            diverged = accept & (gain > divergence_factor * (e0 + e2 * tau * tau))
            accept = accept & ~diverged
        reached = accept & clipped
        k = s["k"]
        # write row k only (kept as it was unless this step reached its save time)
        rec = record(q1, v1)
        saved = jax.tree_util.tree_map(lambda x, b: eqxi.buffer_at_set(b, k, x, pred=reached), rec, s["saved"])
        k_new = jnp.where(reached, k + 1, k)
        h_min = 16 * jnp.finfo(dt).eps * jnp.maximum(jnp.abs(s["t"]), 1.0)
        fixed_fail = (not adaptive) & ~accept & ~retry
        underflow = ~accept & ~(h_new >= h_min)  # also catches a NaN step size
        fail_status = jnp.where(~finite, NONFINITE, jnp.where(~att.ok, NEWTON_FAILURE, STEP_UNDERFLOW))
        fail_status = jnp.where(inexact, SPARSE_COUPLING, fail_status)
        failed = underflow | fixed_fail | inexact
        if over is not None:
            fail_status = jnp.where(over, CONTACT_OVERFLOW, fail_status)
            failed = failed | over
        if diverged is not None:
            fail_status = jnp.where(diverged, DIVERGED, fail_status)
            failed = failed | diverged
        finished = accept & (k_new >= n_save)
        st = s["stats"]
        stats = dict(accepted=st["accepted"] + accept, rejected=st["rejected"] + ~accept,
                     rhs_evals=st["rhs_evals"] + att.rhs, jacobian_evals=st["jacobian_evals"] + att.jac,
                     lu_factorizations=st["lu_factorizations"] + att.lu,
                     newton_iterations=st["newton_iterations"] + att.newton)
        cache = integrator.commit(att.cache, accept)
        q_new = jnp.where(accept, q1, s["q"])
        part, cache, more_stats, extra, sys_failed, sys_status = system.after_step(
            s, ode, integrator, accept, q_new, rec, cache, s["t"])
        stats.update(more_stats)
        fail_status = jnp.where(sys_failed, sys_status, fail_status)
        failed = failed | sys_failed
        if n_hist:
            i, keep = jnp.minimum(st["accepted"], n_hist - 1), accept & (st["accepted"] < n_hist)
            extra["hist"] = dict(t=eqxi.buffer_at_set(s["hist"]["t"], i, t_new, pred=keep),
                                 h=eqxi.buffer_at_set(s["hist"]["h"], i, h, pred=keep))
        return dict(**extra, t=jnp.where(accept, t_new, s["t"]), q=q_new,
                    v=jnp.where(accept, v1, s["v"]), h=h_new, k=k_new, saved=saved,
                    done=finished | failed, n=s["n"] + 1,
                    status=jnp.where(failed, fail_status, SUCCESS).astype(jnp.int32),
                    after_reject=~accept, stats={k_: v.astype(jnp.int32) for k_, v in stats.items()},
                    cache=cache, part=part)

    def cond(s):
        return ~s["done"] & (s["n"] < max_steps)

    def buffers(s):  # written once per row, never read in the loop
        return (s["saved"], s["hist"]) if "hist" in s else s["saved"]
    if adjoint == "none":
        s = eqxi.while_loop(cond, step, state, buffers=buffers, kind="lax")
    else:
        n_ck = DEFAULT_CHECKPOINTS if checkpoints is None else int(checkpoints)
        if n_ck < 1:
            raise ValueError(f"checkpoints must be >= 1, got {checkpoints}")
        # the bound is the loop's own condition (max_steps may be traced); the reverse pass keeps n_ck states
        s = eqxi.while_loop(cond, step, state, max_steps=None, buffers=buffers, kind="checkpointed",
                            checkpoints=n_ck)
    return _solution(ts, s, n_save, record)


def _input_status(tree, status, rtol, atol, t0, t1, dt0):
    """The status of inputs that are checked inside the trace (they may be
    traced: an optimizer's step, a batch member): non-finite parameters; a body
    with a negative mass or a rotational inertia that is not positive
    semi-definite, or a negative armature (each makes the joint-space mass
    matrix indefinite or unphysical); negative or non-finite tolerances;
    t1 <= t0; dt0 <= 0.  The first failure in that order wins; ``status`` is
    kept otherwise.  Cheap elementwise tests only (no factorization): they
    cost the compiled program next to nothing."""
    leaves = jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_inexact_array))
    params_ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])) if leaves else jnp.array(True)
    Ic = 0.5 * (tree.inertia + jnp.swapaxes(tree.inertia, -1, -2))
    d = jnp.diagonal(Ic, axis1=-2, axis2=-1)
    minors = jnp.stack([d[..., i] * d[..., j] - Ic[..., i, j] ** 2 for i, j in ((0, 1), (0, 2), (1, 2))], -1)
    # Sylvester's criterion for semi-definiteness: every principal minor >= 0, each to round-off in its own
    # units (inertia, inertia², inertia³)
    s = 1e-12 * jnp.sum(jnp.abs(d), -1)
    psd = (jnp.all(d >= -s[..., None], -1) & jnp.all(minors >= -(s * s)[..., None], -1)
           & (jnp.linalg.det(Ic) >= -s ** 3))
    inertia_ok = jnp.all(tree.mass >= 0) & jnp.all(psd) & jnp.all(tree.armature >= 0)
    tol_ok = jnp.isfinite(rtol) & jnp.isfinite(atol) & (rtol >= 0) & (atol >= 0) & ((rtol > 0) | (atol > 0))
    times_ok = jnp.isfinite(t0) & jnp.isfinite(t1) & (t1 > t0)
    if dt0 is not None:
        times_ok = times_ok & (jnp.asarray(dt0) > 0) & jnp.isfinite(dt0)
    for ok, code in ((times_ok, BAD_TIMES), (tol_ok, BAD_TOLERANCES), (inertia_ok, BAD_MASS_MATRIX),
                     (params_ok, BAD_PARAMETERS)):
        status = jnp.where(ok, status, code)
    return status


def _solution(ts, s, n_save, record):
    status = jnp.where(s["done"], s["status"], MAX_STEPS).astype(jnp.int32)
    filled = jnp.arange(n_save) < s["k"]
    fill = lambda b, x: jnp.where(filled.reshape((-1,) + (1,) * jnp.ndim(x)), b, x[None])  # noqa: E731
    saved = jax.tree_util.tree_map(fill, s["saved"], record(s["q"], s["v"]))
    return Solution(ts=ts, qs=saved.get("q"), vs=saved.get("v"), status=status, stats=s["stats"], t=s["t"],
                    obs=saved.get("obs"), residuals=saved.get("res"), lams=saved.get("lam"),
                    max_residuals=s.get("drift"), steps=s.get("hist"))
