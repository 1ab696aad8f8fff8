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
from typing import NamedTuple

import numpy as np

from .inputs import NO_INPUTS, Inputs
from .integrators.base import (BAD_MASS_MATRIX, BAD_PARAMETERS, BAD_TIMES, BAD_TOLERANCES, CONSTRAINT_FAILURE,
                               CONTACT_OVERFLOW, DIVERGED, MAX_STEPS, NEWTON_FAILURE, NONFINITE, SPARSE_COUPLING,
                               STATUS_NAMES, STEP_UNDERFLOW, SUCCESS, AbstractIntegrator, Attempt, rms)
from .options import Save, Solver, Start, Steps
from .options import concrete as _concrete
from .systems import Partition, Record, StepReport, system_of

STAT_KEYS = ("accepted", "rejected", "rhs_evals", "jacobian_evals", "lu_factorizations", "newton_iterations")


class Stats(NamedTuple):
    """The loop's counters (int32 scalars): steps accepted and rejected, right-hand-side and
    Jacobian evaluations, LU factorizations, Newton iterations, and a mechanism's partition renewals
    (None for a tree).  :class:`Solution` reports them as a dict (:meth:`as_dict`)."""
    accepted: jax.Array
    rejected: jax.Array
    rhs_evals: jax.Array
    jacobian_evals: jax.Array
    lu_factorizations: jax.Array
    newton_iterations: jax.Array
    partitions: jax.Array | None = None

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in sorted(self._fields) if getattr(self, k) is not None}


class Solution(eqx.Module):
    """ts (S,), qs (S, nq), vs (S, nv) at the save times (None with
    ``Save(states=False)``); obs: the pytree ``observe(model, q, v)`` at the
    save times, leading axis S (None without ``observe``); status (int: 0
    success, 1 max_steps reached, 2 step size underflow, 3 Newton failure,
    4 non-finite state, 5 constraint failure, 6-9 invalid input, 10 sparse
    coupling, 11 contact overflow, 12 diverged: see ``status_name``); stats:
    dict of counters; t: the time reached.  Save times not reached
    (status != 0) hold the last state.

    Mechanisms (closed loops) also give ``residuals`` (S, 2): |Φ(q)|∞ and
    |Φ_q v|∞ at the save times, ``max_residuals`` (2,): the same, largest
    over every accepted step, ``lams`` (S, nc): the multipliers (with
    ``Save(multipliers=True)``), and ``stats["partitions"]``: how many times the
    coordinate partition was renewed.

    ``steps`` (with ``Save(step_history=N)``): dict(t=(N,), h=(N,)), the end time
    and size of the first N accepted steps (NaN where fewer were taken):
    step-size histories for studying the integrators.

    ``reference``: the divergence check's energy balance at ``t``
    (:class:`jaxmbd.divergence.DivergenceReference`; None without the
    check), to pass on in ``Start(reference=...)`` when the run is continued."""
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
    reference: object = None

    @property
    def ok(self):
        return self.status == SUCCESS


def status_name(status) -> str:
    return STATUS_NAMES[int(status)]


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


def validate_times(t0, t1, ts=None, dt0=None):
    """Check the times known at call time (not tracers): t1 > t0, save times finite,
    non-decreasing and within [t0, t1], dt0 > 0.  Raises ValueError."""
    t0c, t1c = _concrete(t0), _concrete(t1)
    if t0c is not None and t1c is not None and not t1c > t0c:
        raise ValueError(f"t1 = {t1c} must be greater than t0 = {t0c}")
    ts = None if ts is None else _concrete(ts)
    if ts is not None and ts.ndim == 1 and ts.size:
        if np.any(np.diff(ts) < 0) or not np.all(np.isfinite(ts)):
            raise ValueError("save times must be finite and non-decreasing")
        if t0c is not None and ts[0] < t0c:
            raise ValueError(f"save times start at {ts[0]}, before t0 = {t0c}")
        if t1c is not None and ts[-1] > t1c * (1 + 1e-12) + 1e-300:
            raise ValueError(f"save times end at {ts[-1]}, after t1 = {t1c}")
    dt0c = None if dt0 is None else _concrete(dt0)
    if dt0c is not None and not (dt0c > 0):
        raise ValueError(f"dt0 must be positive, got {dt0c}")


def simulate(model, start=None, t1=1.0, *, integrator: AbstractIntegrator, inputs: Inputs = NO_INPUTS,
             steps: Steps = Steps(), save: Save = Save(), solver: Solver = Solver()) -> Solution:
    """Integrate the model from ``start`` to t1.

    start: a :class:`jaxmbd.Start` (q, v, t, assemble), a tuple (q0, v0), or
      None for the model's own initial state ``model.q0``, ``model.v0`` at t = 0.
    integrator: an instance from :mod:`jaxmbd.integrators`.  Fixed-step
      methods (``SemiImplicitEuler``, ``RK4``, or an adaptive one built with
      ``adaptive_steps=False``) step by ``steps.dt0``; adaptive ones start
      from it or, if None, from Hairer-Wanner's starting-step estimate.
    inputs: what is applied (:class:`jaxmbd.Inputs`: joint torques, actuator
      inputs, their parameters).
    steps: step sizes, tolerances, bounds (:class:`jaxmbd.Steps`).
    save: what is recorded, and when (:class:`jaxmbd.Save`).
    solver: the forward-dynamics method, a mechanism's constraint solver and
      the adjoint (:class:`jaxmbd.Solver`).

    Mechanisms (models with loop constraints, :class:`jaxmbd.Mechanism`) are
    integrated as index-3 DAEs by generalized coordinate partitioning
    (Negrut's thesis, ch. 2 and 3; Wehage and Haug 1982): the integrator
    advances the independent coordinates of the state-space ODE
    (:class:`jaxmbd.odes.ConstrainedChartODE`), the dependent ones are
    recovered by Newton (positions) and a linear solve (velocities) at every
    evaluation, so |Φ| and |Φ_q v| stay at round-off; the partition
    (full-pivot LU of Φ_q) is renewed when cond(Φ_u) grows past 1.25x its
    value at partitioning.  So ``RosenbrockNystrom4`` is the thesis's
    ForRosen, ``SDIRK4`` its ForSDIRK and ``Trapezoidal`` its SspTrap;
    ``integrators.DescriptorSDIRK4`` and ``DescriptorTrapezoidal`` iterate on
    (q̈, λ) instead (InflSDIRK, InflTrap).  States, inputs' functions and
    saved states use the mechanism's coordinate order.

    Gradients of an adaptive run are those of the discrete solution with its
    accepted step sizes held fixed (the step-size controller is not
    differentiated, as is usual for adaptive solvers): they converge to the
    true sensitivities as the tolerance tightens.  The controller's own
    sensitivity to the error estimate, large and meaningless where a contact
    starts, would otherwise swamp them.  With ``Solver(adjoint="checkpoint")``
    the run records its accepted steps' sizes and the reverse pass replays
    them (:func:`_adjoint_run`), so the gradient is that of the run the call
    returned at any tolerance (``Solver.replay_steps`` bounds the record), and
    the implicit methods' Jacobians take a cheaper pullback: the cotangent of
    the n x 2n Jacobian of g is paired with it by n directional derivatives
    instead of transposing the 2n of the forward Jacobian, and by 5 for
    RosenbrockNystrom4, whose step leaves that cotangent of rank <= 5 whatever
    n (``jaxmbd.odes.base.value_and_jacobians``).

    Returns a :class:`Solution`; failures are reported per call (per batch
    member under vmap) in ``status``, never as silent NaNs.  Inputs that may
    be traced are checked inside the trace, and a bad one makes the status a
    failure before any step is taken: a non-finite model parameter, a body
    with a negative mass or an indefinite inertia, or a negative armature,
    negative tolerances, t1 <= t0 or dt0 <= 0 (statuses 6-9,
    ``integrators.STATUS_NAMES``).  With an implicit method's
    ``linear_solver="sparse"``, a force that couples two branches of the tree
    without a force element declaring it stops the run with status 10
    (``SPARSE_COUPLING``).  A state where the contact broad phase finds more
    geom pairs within reach than a group's capacity
    (:func:`jaxmbd.forces.contact_broadphase.capacities`), or more contacts within their
    margin than the soft constraints' rows (``set_contact_options(rows=...)``),
    is not stepped from: the run stops there with status 11
    (``CONTACT_OVERFLOW``), that state its last.  Every step's start is
    checked (the initial state included; the state a run ends on is not), so
    every step taken starts from a state whose contacts were all evaluated.  A
    state past the divergence bound (``Steps.divergence_factor``,
    :mod:`jaxmbd.divergence`) is not accepted: status 12 (``DIVERGED``),
    keeping the last state within it.

    Times known at call time are validated before tracing (t1 > t0, save
    times non-decreasing within [t0, t1], dt0 > 0); traced ones are checked
    inside the trace, and save times that are not finite, decrease or lie
    outside [t0, t1] give status 9 (``BAD_TIMES``) before any step.  Python numbers given for
    times, tolerances and bounds are passed on as arrays, so calls that
    differ only in them share one compiled program."""
    start = Start.of(start)
    for name, value, kind in (("inputs", inputs, Inputs), ("steps", steps, Steps), ("save", save, Save),
                              ("solver", solver, Solver)):
        if not isinstance(value, kind):
            raise TypeError(f"{name} must be a jaxmbd.{kind.__name__}, got {type(value).__name__}")
    validate_times(start.t, t1, save.ts, steps.dt0)
    # Python numbers as arrays, so that calls that differ only in them share one compiled program
    max_steps = steps.max_steps
    if isinstance(max_steps, (int, np.integer)):
        max_steps = jnp.asarray(max_steps, jnp.int32)
    steps = Steps(_arr(steps.dt0), _arr(steps.rtol), _arr(steps.atol), max_steps, steps.controller,
                  _arr(steps.divergence_factor))
    start = Start(start.q, start.v, _arr(start.t), start.assemble, start.reference)
    return _simulate(model, start, _arr(t1), integrator, inputs, steps, save, solver)


def _arr(x):
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return jnp.asarray(x, jnp.result_type(float))
    return x


class LoopState(eqx.Module):
    """The state of simulate's loop: time, state, step size, the next save
    row k, the rows saved, done / status, attempts n, whether the last attempt
    was rejected, the counters, the integrator's cache, the system's
    partition state and its own state (:mod:`jaxmbd.systems`), the
    step-size history (None unless ``Save.step_history``), the
    divergence check's running work: dict(W, X, P) (the work and exchanged
    work of the applied forces, their power at the state; None without the
    check or without anything applied), and the accepted steps' sizes, negated
    where the step reached a save time (None unless the run is recorded for its
    reverse pass: :func:`_adjoint_run`)."""
    t: jax.Array
    q: jax.Array
    v: jax.Array
    h: jax.Array
    k: jax.Array
    saved: Record
    done: jax.Array
    n: jax.Array
    status: jax.Array
    after_reject: jax.Array
    stats: Stats
    cache: object
    part: Partition | None
    own: object
    hist: dict | None
    work: dict | None
    steps_taken: jax.Array | None = None


class Tried(NamedTuple):
    """One attempt: the integrator's :class:`Attempt`, the new state, whether
    it is finite (error estimate included), whether the error allows
    accepting it, whether a Newton failure is retried with a fresh matrix,
    and the next step size."""
    att: Attempt
    q1: jax.Array
    v1: jax.Array
    finite: jax.Array
    accept: jax.Array
    retry: jax.Array
    h_new: jax.Array


class Verdict(NamedTuple):
    """What the loop decides about one attempt, and the divergence check's running work after it
    (None without the check or without anything applied)."""
    accept: jax.Array
    failed: jax.Array
    status: jax.Array
    work: dict | None = None


@eqx.filter_jit
def _simulate(model, start, t1, integrator, inputs, steps, save, solver) -> Solution:
    """The traced body of :func:`simulate` (arguments converted)."""
    if not isinstance(integrator, AbstractIntegrator):
        raise TypeError(f"integrator must be a jaxmbd.integrators method, got {type(integrator).__name__}")
    if solver.adjoint == "none":
        return _run((model, start, t1, integrator, inputs, steps, save), solver)[0]
    inputs, save = _closure_converted(model, start, inputs, save)
    return _adjoint_run((model, start, t1, integrator, inputs, steps, save), solver, solver.replay_steps)


def _closure_converted(model, start, inputs, save):
    """The user's functions (``Inputs.tau``, ``Inputs.ctrl``, ``Save.observe``) with the traced values
    they close over made leaves of their own (``equinox.filter_closure_convert``), so that the
    reverse pass of :func:`_adjoint_run` reaches them as it reaches its arguments."""
    q0 = jnp.asarray(model.q0 if start.q is None else start.q)
    v0 = jnp.asarray(model.v0 if start.v is None else start.v)
    dt = jnp.result_type(q0, v0, float)
    t, q, v = jnp.zeros((), dt), jnp.zeros(q0.shape, dt), jnp.zeros(v0.shape, dt)
    convert = lambda f, *a: eqx.filter_closure_convert(f, *a) if callable(f) else f  # noqa: E731
    inputs = Inputs(convert(inputs.tau, t, q, v, inputs.params), convert(inputs.ctrl, t, q, v, inputs.params),
                    inputs.params)
    return inputs, eqx.tree_at(lambda s: s.observe, save, convert(save.observe, model, q, v),
                               is_leaf=lambda x: x is None)


def _buffers(save, record):
    """The loop state's parts that are written once per row and never read in the loop (decided by
    structure, not by the leaves): the saved rows, the step history, the record of the steps taken."""
    return lambda s: (s.saved,) + ((s.hist,) if save.step_history else ()) + ((s.steps_taken,) if record else ())


def _run(args, solver, record=0):
    """The adaptive loop's (Solution, final LoopState); with ``record`` > 0 the state keeps the sizes of
    the first ``record`` accepted steps (``steps_taken``)."""
    run = _Run(*args, solver)
    s = eqxi.while_loop(run.cond, run.step, run.initial(record), buffers=_buffers(run.save, record), kind="lax")
    return run.solution(s), s


@eqx.filter_custom_vjp
def _adjoint_run(args, solver, record):
    """The adaptive loop, differentiated in reverse mode by replaying its accepted steps.

    The step-size controller's decisions (each step's size, its acceptance) are functions of error
    estimates that cancel to a few digits at tight tolerances, so a reverse pass that recomputes the
    loop between checkpoints can take other decisions than the run it differentiates (round-off
    differs between compiled programs) and pull cotangents back along a path whose segments no
    longer meet at the checkpoints: at rtol = atol = 1e-10 a tumbling box's gradient was off by its
    own size.  Here the run records the size of every accepted step; the reverse pass replays those
    steps alone (no error estimate, no rejection) in equinox's checkpointed loop and differentiates
    the replay, whose recomputed segments meet exactly: the gradient is that of the discrete
    solution with the run's accepted step sizes held fixed."""
    return _run(args, solver)[0]


@_adjoint_run.def_fwd
def _adjoint_run_fwd(perturbed, args, solver, record):
    sol, s = _run(args, solver, record)
    return sol, (s.steps_taken, s.stats.accepted)


@_adjoint_run.def_bwd
def _adjoint_run_bwd(res, g, perturbed, args, solver, record):
    taken, n = res

    def replay(args):
        run = _Run(*args, solver)
        s0 = run.initial()
        s = eqxi.while_loop(lambda s: s.n < n, lambda s: run.replay_step(s, taken, n), s0, max_steps=None,
                            buffers=_buffers(run.save, 0), kind="checkpointed", checkpoints=solver.checkpoints)
        return run.solution(s)
    out, pullback = eqx.filter_vjp(replay, args)
    g = jax.tree_util.tree_map(lambda o, c: (jnp.zeros_like(o) if c is None else c) if eqx.is_inexact_array(o)
                               else None, out, g)
    # a run with more accepted steps than the record holds (Solver.replay_steps) has no replay: its
    # gradient is NaN, not a wrong number
    short = n > taken.shape[0]
    return jax.tree_util.tree_map(lambda x: jnp.where(short, jnp.nan, x), pullback(g)[0])


class _Run:
    """One run's fixed context, built inside the trace: the system, the
    integrator, the save times, the scaled tolerances and the divergence
    bound; ``initial``, ``step``, ``cond`` and ``solution`` are the loop's."""

    def __init__(self, model, start, t1, integrator, inputs, steps, save, solver):
        self.system = system = system_of(model, inputs, solver)
        self.integrator, self.save, self.steps = integrator, save, steps
        q0 = model.q0 if start.q is None else jnp.asarray(start.q)
        v0 = model.v0 if start.v is None else jnp.asarray(start.v)
        system.check(q0, v0, integrator, save.multipliers)
        dt = self.dtype = jnp.result_type(q0, v0, float)
        self.q0, self.v0 = q0.astype(dt), v0.astype(dt)
        self.t0, self.t1 = jnp.asarray(start.t, dt), jnp.asarray(t1, dt)
        ts = jnp.atleast_1d(jnp.asarray(self.t1 if save.ts is None else save.ts, dt))
        if ts.ndim != 1:
            raise ValueError(f"save times must be a 1-d array, got shape {ts.shape}")
        self.ts, self.n_save = ts, ts.shape[0]
        self.adaptive = integrator.adaptive
        if not self.adaptive and steps.dt0 is None:
            raise ValueError(f"{type(integrator).__name__} takes fixed steps: give dt0, the step (Steps(dt0=...))")
        fac = integrator.tolerance_factor if self.adaptive else 1.0
        self.rtol, self.atol = fac * jnp.asarray(steps.rtol, dt), fac * jnp.asarray(steps.atol, dt)
        self.ind = system.independent
        self.assemble = start.assemble
        self.reverse_only = solver.adjoint == "checkpoint"
        self.factor = None if steps.divergence_factor is None else jnp.asarray(steps.divergence_factor, dt)
        self.start_reference = start.reference
        self.counts_work = self.factor is not None and system.driven

    def scales(self, ode, q, v, part):
        return self.atol + self.rtol * ode.position_magnitude(q), self.atol + self.rtol * jnp.abs(self.ind(part, v))

    def record(self, q, v):
        return self.system.record(q, v, self.save.states, self.save.observe, self.t0, self.part0)

    def ode_at(self, q, part):
        # the checkpointed loop is differentiated in reverse mode only: its Jacobians take the cheaper pullback
        return self.system.ode_at(q, part, self.reverse_only)

    def initial(self, record=0) -> LoopState:
        system, integrator, ts, dt = self.system, self.integrator, self.ts, self.dtype
        q0, v0, part0, bad_start = system.start(self.q0, self.v0, self.assemble)
        self.part0 = part0
        work = None
        if self.factor is not None:
            ref = system.energy_reference(q0, v0)
            given = self.start_reference
            if given is not None:   # a continued run keeps its first piece's balance (NaN: unset)
                given = jax.tree_util.tree_map(lambda x: jnp.asarray(x, dt), given)
                keep = jnp.isfinite(given.H0)
                ref = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), given, ref)
            self.ref = ref
            if self.counts_work:
                work = dict(W=ref.work, X=ref.exchanged, P=system.power(self.t0, q0, v0))
        ode0 = self.ode_at(q0, part0)
        h0 = self.first_step(ode0, q0, v0, part0)
        k0 = jnp.sum(ts <= self.t0).astype(jnp.int32)
        rec0 = self.record(q0, v0)
        # rows before k0 hold the initial state; the others are written once in the loop (their initial value must
        # not depend on the inputs: a buffer's overwritten entries pass their cotangent on unchanged)
        before = ts <= self.t0
        saved0 = jax.tree_util.tree_map(
            lambda x: jnp.where(before.reshape((-1,) + (1,) * jnp.ndim(x)), x[None], jnp.zeros_like(x)[None]), rec0)
        zero = jnp.zeros((), jnp.int32)
        nonfinite0 = ~(jnp.all(jnp.isfinite(q0)) & jnp.all(jnp.isfinite(v0)) & jnp.isfinite(h0))
        status0 = jnp.where(nonfinite0, NONFINITE, jnp.where(bad_start, CONSTRAINT_FAILURE, SUCCESS))
        status0 = _input_status(system.tree, status0, self.rtol, self.atol, self.t0, self.t1, self.steps.dt0,
                                ts, self.factor)
        stats0 = Stats(*(zero,) * len(STAT_KEYS), **{k: zero for k in system.extra_stats})
        n_hist = self.save.step_history
        hist = None if not n_hist else dict(t=jnp.full((n_hist,), jnp.nan, dt), h=jnp.full((n_hist,), jnp.nan, dt))
        taken = jnp.zeros((record,), dt) if record else None
        return LoopState(t=self.t0, q=q0, v=v0, h=h0, k=k0, saved=saved0, steps_taken=taken,
                         done=(k0 >= self.n_save) | (status0 != SUCCESS), n=zero, status=status0.astype(jnp.int32),
                         after_reject=jnp.array(False), stats=stats0,
                         cache=integrator.init_cache(ode0, self.t0, self.ind(part0, v0)), part=part0,
                         own=system.initial_own(rec0), hist=hist, work=work)

    def first_step(self, ode0, q0, v0, part0):
        sy0, sv0 = self.scales(ode0, q0, v0, part0)
        span = jnp.maximum(self.ts[-1] - self.t0, 0.0)
        if self.steps.dt0 is not None:
            h0 = jnp.asarray(self.steps.dt0, self.dtype)
        else:
            h0 = _initial_step(ode0, self.integrator, self.t0, q0, self.ind(part0, v0), sy0, sv0,
                               jnp.maximum(span, 1e-12))
        h0 = jnp.minimum(h0, self.steps.controller.h_max)
        if self.adaptive:
            # the step sizes are not differentiated (see simulate's docstring: gradients of an adaptive run)
            h0 = jax.lax.stop_gradient(h0)
        return h0

    def cond(self, s):
        return ~s.done & (s.n < self.steps.max_steps)

    def step(self, s: LoopState) -> LoopState:
        part = s.part
        ode = self.ode_at(s.q, part)
        target = self.ts[jnp.minimum(s.k, self.n_save - 1)]
        remaining = target - s.t
        clipped = s.h * (1.0 + 1e-8) >= remaining  # no sliver step from rounding in t
        # a member that is done (under vmap it is stepped, masked, until the last one is) takes a regular
        # step instead of h = 0, so that no derivative of the masked step is infinite (0 * inf = NaN)
        h = jnp.where(clipped & ~s.done, remaining, s.h)
        tried = self.attempt(s, ode, h, clipped)
        t_new = jnp.where(clipped, target, s.t + h)
        # the start state's contacts (one traced check in the loop covers the initial state and every
        # accepted one)
        verdict = self.judge(s, tried, t_new, self.system.overflow(s.q))
        return self._advance(s, ode, tried, h, t_new, verdict.accept & clipped, verdict)

    def replay_step(self, s: LoopState, taken, n) -> LoopState:
        """Step s.n of the recorded run's accepted steps ``taken`` (their sizes, negated where the step
        reached a save time; ``n`` of them): the same step without error estimate or rejection; a
        step that reached its save time lands on it (h = target - t, as the run's)."""
        part = s.part
        ode = self.ode_at(s.q, part)
        active = s.n < n
        size = taken[jnp.clip(s.n, 0, jnp.maximum(n - 1, 0))]
        target = self.ts[jnp.minimum(s.k, self.n_save - 1)]
        reached = (size < 0) & active
        # past the record (a masked member under vmap) the last size again, never h = 0 (as in step)
        h = jnp.where(reached, target - s.t, jnp.abs(size))
        att = self.integrator.attempt(ode, s.t, self.ind(part, s.v), h, self.scales(ode, s.q, s.v, part), s.cache)
        q1, v1 = ode.finish(att.y, att.yd)
        tried = Tried(att, q1, v1, jnp.array(True), active, jnp.array(False), h)
        t_new = jnp.where(reached, target, s.t + h)
        work = self.judge(s, tried, t_new).work
        return self._advance(s, ode, tried, h, t_new, reached, Verdict(active, jnp.array(False), SUCCESS, work))

    def _advance(self, s, ode, tried, h, t_new, reached, verdict) -> LoopState:
        """The loop state after an attempt of size h ending at t_new: ``verdict`` says whether it is
        accepted (and the run's failure), ``reached`` whether it reached its save time."""
        part, att, q1, v1 = s.part, tried.att, tried.q1, tried.v1
        accept = verdict.accept
        # write row k only (kept as it was unless this step reached its save time)
        rec = self.record(q1, v1)
        saved = jax.tree_util.tree_map(lambda x, b: eqxi.buffer_at_set(b, s.k, x, pred=reached), rec, s.saved)
        k_new = jnp.where(reached, s.k + 1, s.k)
        finished = accept & (k_new >= self.n_save)
        st = s.stats
        stats = dict(accepted=st.accepted + accept, rejected=st.rejected + ~accept,
                     rhs_evals=st.rhs_evals + att.rhs, jacobian_evals=st.jacobian_evals + att.jac,
                     lu_factorizations=st.lu_factorizations + att.lu,
                     newton_iterations=st.newton_iterations + att.newton)
        cache = self.integrator.commit(att.cache, accept)
        q_new = jnp.where(accept, q1, s.q)
        after = self.system.after_step(StepReport(part, s.own, s.v, ode, self.integrator, accept, q_new, rec, cache,
                                                  s.t))
        stats.update(self.system.stats(after.part))
        fail_status = jnp.where(after.failed, after.status, verdict.status)
        failed = verdict.failed | after.failed
        hist = s.hist
        if hist is not None:
            n_hist = self.save.step_history
            i, keep = jnp.minimum(st.accepted, n_hist - 1), accept & (st.accepted < n_hist)
            hist = dict(t=eqxi.buffer_at_set(hist["t"], i, t_new, pred=keep),
                        h=eqxi.buffer_at_set(hist["h"], i, h, pred=keep))
        taken = s.steps_taken
        if taken is not None:
            n_rec = taken.shape[0]
            size = jax.lax.stop_gradient(jnp.where(reached, -h, h))
            taken = eqxi.buffer_at_set(taken, jnp.minimum(st.accepted, n_rec - 1), size,
                                       pred=accept & (st.accepted < n_rec))
        return LoopState(t=jnp.where(accept, t_new, s.t), q=q_new, v=jnp.where(accept, v1, s.v), h=tried.h_new, k=k_new,
                         saved=saved, done=finished | failed, n=s.n + 1,
                         status=jnp.where(failed, fail_status, SUCCESS).astype(jnp.int32), after_reject=~accept,
                         stats=Stats(**{k_: v.astype(jnp.int32) for k_, v in stats.items()}), cache=after.cache,
                         part=after.part, own=after.own, hist=hist, steps_taken=taken,
                         work=None if s.work is None else jax.tree_util.tree_map(
                             lambda a, b: jnp.where(accept, a, b), verdict.work, s.work))

    def attempt(self, s, ode, h, clipped) -> Tried:
        """The integrator's attempt at step h, its error against the tolerances
        and the next step size."""
        part = s.part
        sy, sv = self.scales(ode, s.q, s.v, part)
        att = self.integrator.attempt(ode, s.t, self.ind(part, s.v), h, (sy, sv), s.cache)
        q1, v1 = ode.finish(att.y, att.yd)
        finite = jnp.all(jnp.isfinite(q1)) & jnp.all(jnp.isfinite(v1))
        # a Newton failure with a kept (not fresh) factorization is retried at the same h with a
        # fresh one (the failed attempt leaves the kept one invalid), as the H&W codes do
        retry = ~att.ok & finite & (att.lu == 0)
        if self.adaptive:
            sy1, sv1 = self.scales(ode, q1, v1, part)
            err = rms(jnp.concatenate([att.err_y / jnp.maximum(sy, sy1), att.err_yd / jnp.maximum(sv, sv1)]))
            finite = finite & jnp.isfinite(err)
            accept = att.ok & finite & (err <= 1.0)
            proposed = self.steps.controller.propose(h, err, self.integrator.error_order, s.after_reject,
                                                     self.integrator.holds_step)
            h_new = jnp.where(att.ok & finite, proposed, jnp.where(finite, 0.5 * h, 0.25 * h))
            h_new = jnp.where(accept & clipped, jnp.maximum(h_new, s.h), h_new)
            h_new = jnp.where(~accept & (h_new > h), h, h_new)  # after a rejection h never grows
            h_new = jax.lax.stop_gradient(jnp.where(retry, h, h_new))
        else:
            accept = att.ok & finite
            h_new = jnp.where(accept | retry, s.h, 0.5 * h)
        return Tried(att, q1, v1, finite, accept, retry, h_new)

    def judge(self, s, tried: Tried, t_new, over=None) -> Verdict:
        """Whether the attempt is accepted, and whether it ends the run with which status:
        a non-finite state, a Newton failure, a step too small, an inexact (sparse) iteration matrix,
        a contact overflow at the step's start (``over``: None where no contact can overflow), a
        divergence."""
        att = tried.att
        # an inexact (sparse) iteration matrix stops the run before anything is accepted from it
        inexact = jnp.array(False) if att.exact is None else ~att.exact
        accept = tried.accept & ~inexact
        if over is not None:   # no step from a state whose contacts the broad phase cannot all keep
            accept = accept & ~over
        diverged = work = None
        if self.factor is not None:   # nor a step that ends past the divergence bound
            ref = self.ref
            W, X = ref.work, ref.exchanged
            if s.work is not None:    # the applied forces' work over the step (trapezoid)
                half = 0.5 * jax.lax.stop_gradient(t_new - s.t)
                P1 = self.system.power(t_new, tried.q1, tried.v1)
                P0 = s.work["P"]
                W, X = s.work["W"] + half * (P0 + P1), s.work["X"] + half * (jnp.abs(P0) + jnp.abs(P1))
                work = dict(W=W, X=X, P=P1)
            gain = self.system.energy(tried.q1, tried.v1) - ref.H0 - W
            diverged = accept & ~(gain <= ref.allowance + self.factor * (ref.scale + X))
            accept = accept & ~diverged
        h_min = 16 * jnp.finfo(self.dtype).eps * jnp.maximum(jnp.abs(s.t), 1.0)
        fixed_fail = (not self.adaptive) & ~accept & ~tried.retry
        underflow = ~accept & ~(tried.h_new >= h_min)  # also catches a NaN step size
        status = jnp.where(~tried.finite, NONFINITE, jnp.where(~att.ok, NEWTON_FAILURE, STEP_UNDERFLOW))
        status = jnp.where(inexact, SPARSE_COUPLING, status)
        failed = underflow | fixed_fail | inexact
        for cause, code in ((over, CONTACT_OVERFLOW), (diverged, DIVERGED)):
            if cause is not None:
                status = jnp.where(cause, code, status)
                failed = failed | cause
        return Verdict(accept, failed, status, work)

    def solution(self, s: LoopState) -> Solution:
        status = jnp.where(s.done, s.status, MAX_STEPS).astype(jnp.int32)
        filled = jnp.arange(self.n_save) < s.k
        fill = lambda b, x: jnp.where(filled.reshape((-1,) + (1,) * jnp.ndim(x)), b, x[None])  # noqa: E731
        saved = jax.tree_util.tree_map(fill, s.saved, self.record(s.q, s.v))
        reference = None
        if self.factor is not None:
            reference = self.ref if s.work is None else eqx.tree_at(
                lambda r: (r.work, r.exchanged), self.ref, (s.work["W"], s.work["X"]))
        return Solution(ts=self.ts, qs=saved.q, vs=saved.v, status=status, stats=s.stats.as_dict(), t=s.t,
                        obs=saved.obs, residuals=saved.res, lams=saved.lam,
                        max_residuals=self.system.max_residuals(s.own), steps=s.hist, reference=reference)


def _input_status(tree, status, rtol, atol, t0, t1, dt0, ts=None, factor=None):
    """The status of inputs that are checked inside the trace (they may be
    traced: an optimizer's step, a batch member): non-finite parameters; a body
    with a negative mass or a rotational inertia that is not positive
    semi-definite, or a negative armature (each makes the joint-space mass
    matrix indefinite or unphysical); negative or non-finite tolerances, a
    divergence factor that is not finite and > 0; t1 <= t0; dt0 <= 0; save
    times ``ts`` not finite, decreasing, or outside [t0, t1] (t1 to a
    relative 1e-12, as :func:`validate_times`).  The first failure in that order wins; ``status`` is
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
    if factor is not None:
        tol_ok = tol_ok & jnp.isfinite(factor) & (factor > 0)
    times_ok = jnp.isfinite(t0) & jnp.isfinite(t1) & (t1 > t0)
    if ts is not None:
        end = t1 + 1e-12 * jnp.abs(t1)
        times_ok = (times_ok & jnp.all(jnp.isfinite(ts)) & jnp.all(ts >= t0) & jnp.all(ts <= end)
                    & jnp.all(ts[1:] >= ts[:-1]))
    if dt0 is not None:
        times_ok = times_ok & (jnp.asarray(dt0) > 0) & jnp.isfinite(dt0)
    for ok, code in ((times_ok, BAD_TIMES), (tol_ok, BAD_TOLERANCES), (inertia_ok, BAD_MASS_MATRIX),
                     (params_ok, BAD_PARAMETERS)):
        status = jnp.where(ok, status, code)
    return status
