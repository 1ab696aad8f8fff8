"""What :func:`jaxmbd.simulate`'s loop needs to know about the thing it
integrates, as a small set of hooks: a kinematic tree (:class:`TreeSystem`)
or a mechanism with loop constraints (:class:`MechanismSystem`).

Hooks: ``check`` (eager, at trace time), ``start`` (the initial state in the
system's internal order and the partition state), ``ode_at`` (the ODE of a
step, :mod:`jaxmbd.odes`), ``independent`` (the integrated part of a
velocity), ``record`` (what is saved at a save time), ``initial_own`` and
``after_step`` (the system's own loop state, and what happens after each
attempt: a mechanism renews its coordinate partition; they see only what
they are given, never the loop's state), ``stats`` (the system's counters),
``tree`` (the
model whose parameters are checked inside the trace), ``overflow`` (whether
a state exceeds a force element's static capacity: contact),
``energy_reference``, ``energy``, ``driven`` and ``power`` (the divergence
check, :mod:`jaxmbd.divergence`; of the tree, in the tree's order for a
mechanism too).  The loop itself
(:mod:`jaxmbd.simulate`) never asks which kind it has."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from . import dae, divergence
from .constraints import Mechanism, phi_jacobian_tree, phi_tree
from .constraints import _check as _check_mechanism
from .forces.base import overflow as _overflow
from typing import NamedTuple

from .integrators.base import CONSTRAINT_FAILURE, AbstractImplicit
from .kinematics import _check as _check_tree
from .odes import ChartODE, ConstrainedChartODE


class AfterStep(NamedTuple):
    """What a system gives back after an attempt: its partition state, the
    integrator's cache (renewed with the partition), its own loop state, and
    whether it failed the run (with the status)."""
    part: Partition | None
    cache: object
    own: object
    failed: jax.Array
    status: jax.Array


class Record(NamedTuple):
    """What is saved at a save time (:meth:`TreeSystem.record`; None where not asked for or not
    modelled): positions and velocities, the user's observation, a mechanism's constraint
    residuals (max |Φ|, max |Φ_q v|) and multipliers."""
    q: jax.Array | None = None
    v: jax.Array | None = None
    obs: object = None
    res: jax.Array | None = None
    lam: jax.Array | None = None


class Partition(NamedTuple):
    """A mechanism's coordinate partition (the loop's partition state): the dependent and
    independent columns of Φ_q, cond(Φ_u) when it was chosen, and how many times it was renewed."""
    dep: jax.Array
    ind: jax.Array
    cond0: jax.Array
    partitions: jax.Array


class StepReport(NamedTuple):
    """What a system is told after an attempt (:meth:`TreeSystem.after_step`): the partition state,
    the system's own loop state, the velocity at the step start, the step's ODE and integrator,
    whether the step was accepted, the new positions and their record, the integrator's cache and
    the time at the step start."""
    part: Partition | None
    own: object
    v: jax.Array
    ode: object
    integrator: object
    accept: jax.Array
    q_new: jax.Array
    rec: Record
    cache: object
    t: jax.Array


class _OnTheTree:
    """The hooks evaluated on ``self.tree``, in the tree's order: the contact overflow and the
    divergence check's (:mod:`jaxmbd.divergence`)."""

    def overflow(self, q):
        """Whether the state q exceeds a force element's static capacity (a traced bool); None when
        no element can (:func:`jaxmbd.forces.base.overflow`)."""
        return _overflow(self.tree, q)

    def energy_reference(self, q0, v0):
        """The :class:`jaxmbd.divergence.DivergenceReference` of a run starting at (q0, v0)."""
        return divergence.reference(self.tree, q0, v0)

    def energy(self, q, v):
        return divergence.energy(self.tree, q, v)

    @property
    def driven(self):
        """Whether anything applied from outside does work (static): then ``power`` is counted."""
        return divergence.driven(self.tree, self.inputs)

    def power(self, t, q, v):
        """The applied forces' power τ_applied · v at (t, q, v) (tree order)."""
        return divergence.power(self.tree, self.inputs, t, q, v, None if self.tree is self.model else self.model)


class TreeSystem(_OnTheTree):
    """A kinematic tree: the ODE is the tree's on its chart (:class:`jaxmbd.odes.ChartODE`)."""
    extra_stats = ()

    def __init__(self, model, inputs, solver):
        self.model, self.inputs, self.dynamics = model, inputs, solver.dynamics
        self.tree = model

    def check(self, q0, v0, integrator, multipliers):
        _check_tree(self.model, q0, v0)
        self.inputs.check(self.model)
        if multipliers:
            raise ValueError("multipliers=True needs a model with loop constraints")

    def start(self, q0, v0, assemble_initial):
        """(q0, v0 inside, partition state (None: a tree has none), bad: the start cannot be
        integrated)."""
        return q0, v0, None, jnp.array(False)

    def ode_at(self, q, part, reverse_only=False):
        return ChartODE(self.model, q, self.inputs, self.dynamics, reverse_only)

    def independent(self, part, x):
        return x

    def record(self, q, v, states, observe, t0, part0) -> Record:
        return Record(q=q if states else None, v=v if states else None,
                      obs=None if observe is None else observe(self.model, q, v))

    def initial_own(self, rec0):
        """The system's own loop state at the start (None: nothing)."""
        return None

    def stats(self, part):
        """The system's counters, from its partition state."""
        return {}

    def max_residuals(self, own):
        return None

    def after_step(self, a: StepReport) -> AfterStep:
        """An :class:`AfterStep` after the attempt ``a``."""
        return AfterStep(a.part, a.cache, a.own, jnp.array(False), jnp.array(0, jnp.int32))


class MechanismSystem(_OnTheTree):
    """A mechanism: the state-space ODE on the independent coordinates
    (:class:`jaxmbd.odes.ConstrainedChartODE`), the coordinate partition
    renewed when cond(Φ_u) grows past ``dae.REPARTITION_FACTOR`` times its
    value at partitioning, the constraint residuals recorded."""
    extra_stats = ("partitions",)

    def __init__(self, mech, inputs, solver):
        self.mech, self.inputs, self.solver = mech, inputs, solver.constraints
        self.model, self.tree = mech, mech.tree

    def check(self, q0, v0, integrator, multipliers):
        mech = self.mech
        _check_mechanism(mech, q0, v0)
        self.inputs.check(mech.tree)
        if isinstance(integrator, AbstractImplicit) and integrator.linear_solver != "dense":
            raise ValueError("linear_solver='sparse' is for kinematic trees; mechanisms use the dense iteration "
                             "matrix of their independent coordinates")
        if mech.rows_undecided:
            raise ValueError(mech.rows_undecided)
        if mech.start_issue and q0 is mech.q0:      # the run starts from the mechanism's own q0
            raise ValueError(mech.start_issue)
        if mech.n_active >= mech.nv:
            raise ValueError(f"{mech.n_active} independent constraint equations (of {mech.nc}) for {mech.nv} "
                             "coordinates: no degree of freedom is left, nothing to integrate")
        self.multipliers = multipliers

    def start(self, q0, v0, assemble_initial):
        mech = self.mech
        if assemble_initial:
            q0, v0, info = dae.assemble(mech, q0, v0, iterations=8)
            bad_assembly = info["residual"] > 1e-9
            if not mech.dropped_rows:   # with redundant rows Φ_q is rank-deficient by construction
                bad_assembly = bad_assembly | (info["status"] != 0)
        else:
            bad_assembly = jnp.array(False)
        q0, v0 = mech.to_tree(q0), mech.to_tree(v0)   # inside: tree order
        P = dae.partition(mech.rows(phi_jacobian_tree(mech, q0)))
        part0 = Partition(P["dep"], P["ind"], P["cond0"], jnp.zeros((), jnp.int32))
        return q0, v0, part0, ~P["ok"] | bad_assembly

    def ode_at(self, q, part, reverse_only=False):
        return ConstrainedChartODE(self.mech, q, part.dep, part.ind, self.inputs, self.solver, reverse_only)

    def independent(self, part, x):
        return x[part.ind]

    def record(self, q, v, states, observe, t0, part0) -> Record:
        mech = self.mech
        G = phi_jacobian_tree(mech, q)
        res = jnp.stack([jnp.max(jnp.abs(phi_tree(mech, q))), jnp.max(jnp.abs(G @ v))])
        lam = None
        if self.multipliers:
            tau = self.ode_at(q, part0).tau(t0, q, v)  # constant or state-dependent control only
            lam = mech.expand_rows(dae.accel_tree(mech, q, v, tau, self.solver)[1])
        q, v = mech.from_tree(q), mech.from_tree(v)
        return Record(q=q if states else None, v=v if states else None,
                      obs=None if observe is None else observe(mech, q, v), res=res, lam=lam)

    def initial_own(self, rec0):
        """The largest constraint residuals over the accepted steps (drift)."""
        return rec0.res

    def stats(self, part):
        return {"partitions": part.partitions}

    def max_residuals(self, own):
        return own

    def after_step(self, a: StepReport) -> AfterStep:
        # the thesis's partition check: renew it when cond(Φ_u) > 1.25 cond0 (after accepted steps)
        part = a.part
        G1 = self.mech.rows(phi_jacobian_tree(self.mech, a.q_new))
        worse = a.accept & (jnp.linalg.cond(G1[:, part.dep]) > dae.REPARTITION_FACTOR * part.cond0)
        P1 = dae.partition(G1)
        part = Partition(jnp.where(worse, P1["dep"], part.dep), jnp.where(worse, P1["ind"], part.ind),
                         jnp.where(worse, P1["cond0"], part.cond0), part.partitions + worse)
        fresh = a.integrator.init_cache(a.ode, a.t, self.independent(part, a.v))
        cache = jax.tree_util.tree_map(lambda x, y: jnp.where(worse, x, y), fresh, a.cache)
        drift = jnp.where(a.accept, jnp.maximum(a.own, a.rec.res), a.own)
        failed = worse & ~P1["ok"]
        return AfterStep(part, cache, drift, failed, jnp.where(failed, CONSTRAINT_FAILURE, 0).astype(jnp.int32))


def system_of(model, inputs, solver):
    """The system hooks for a model, its :class:`jaxmbd.Inputs` and
    :class:`jaxmbd.Solver`: a :class:`MechanismSystem` for a
    :class:`jaxmbd.Mechanism`, else a :class:`TreeSystem`."""
    if isinstance(model, Mechanism):
        return MechanismSystem(model, inputs, solver)
    return TreeSystem(model, inputs, solver)
