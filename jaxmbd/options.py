"""The small option objects of :func:`jaxmbd.simulate` and
:func:`jaxmbd.rollout`: where a run starts (:class:`Start`), how it steps
(:class:`Steps`), what it saves (:class:`Save`) and how its equations are
solved and differentiated (:class:`Solver`); what is applied is
:class:`jaxmbd.Inputs`.

Each checks what it can at construction (values known then; traced values
are checked inside the trace and reported as a status)."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

from .divergence import DIVERGENCE_FACTOR
from .integrators.base import Controller

MAX_STEPS_DEFAULT = 100_000
"""Steps' default bound on step attempts: a safety bound, not a cost (the loop stops when done)."""
DEFAULT_CHECKPOINTS = 100
"""Loop states kept by the reverse pass of ``adjoint="checkpoint"`` (default of ``Solver(checkpoints=)``)."""
DYNAMICS = ("aba", "aba_unrolled", "crba")


def concrete(x):
    """x as a NumPy array if it is known now (not a tracer), else None."""
    try:
        return None if isinstance(x, jax.core.Tracer) else np.asarray(x, dtype=float)
    except Exception:  # noqa: BLE001 - anything that is not a plain array is checked later, in the trace
        return None


class Start(eqx.Module):
    """The initial state and time of a run.

    q, v: positions (nq,) and velocities (nv,), None for the model's own
      ``model.q0`` / ``model.v0`` (in a rollout: (B, nq), (B, nv)).
    t: the initial time (default 0).
    assemble: for a mechanism (:class:`jaxmbd.Mechanism`), project (q, v)
      onto the loop constraints first (:func:`jaxmbd.assemble`; a consistent
      state is left as it is).  Ignored for a kinematic tree.
    reference: the divergence check's energy balance to continue
      (:class:`jaxmbd.divergence.DivergenceReference`, a previous run's
      ``Solution.reference``; leaves (B,) in a rollout), so that a run
      continued piece by piece is held to its first piece's balance; None,
      or ``DivergenceReference.unset()`` (the same compiled program), for
      the balance of this start."""
    q: object = None
    v: object = None
    t: object = 0.0
    assemble: bool = eqx.field(default=True, static=True)
    reference: object = None

    @staticmethod
    def of(start) -> "Start":
        """A Start from None, a Start, or a tuple (q, v) / (q, v, t)."""
        if start is None:
            return Start()
        if isinstance(start, Start):
            return start
        if isinstance(start, tuple) and 1 <= len(start) <= 3:
            return Start(*start)
        raise TypeError(f"start must be None, a jaxmbd.Start or a tuple (q0, v0), got {type(start).__name__}")


class Steps(eqx.Module):
    """How a run steps and which steps it accepts.

    dt0: the step of a fixed-step method (``SemiImplicitEuler``, ``RK4``, or
      an adaptive one built with ``adaptive_steps=False``), and the first
      step of an adaptive one (None: Hairer-Wanner's starting-step estimate).
    rtol, atol: scaled RMS error per step over positions and velocities with
      sc = atol + rtol max(|x0|, |x1|) (D. Negrut, PhD thesis, University of Iowa, 1998, §4.2.1, (4.6)-(4.7)); |x| is the
      coordinate's magnitude for scalar joints and 0 for rotation vectors.
      Both are first multiplied by the integrator's ``tolerance_factor``
      (Rosenbrock 0.15, SDIRK4 0.5, Trapezoidal 0.3, else 1), calibrated so
      that the global error of the thesis's validation problem stays within
      a few times the requested tolerance.
    max_steps: a safety bound on step attempts (accepted + rejected); it does
      not set the cost: the loop stops when the run is done, and under vmap
      when the last member is done.
    controller: the step-size controller (:class:`jaxmbd.integrators.Controller`).
    divergence_factor: every step whose state would be accepted is first
      checked for energy that the model cannot have gained
      (:mod:`jaxmbd.divergence`): H = T + V_g + U_j, less the work W of the
      applied forces, may grow by the energy the start stores in contacts,
      limits and springs (A0) plus ``divergence_factor`` times the energy
      scale (E0 plus the work exchanged, X); a step past it stops the run
      with status 12 (``DIVERGED``).  Default 1; None: no check.  A traced
      value that is not finite and > 0 stops the run before its first step
      with status 8 (``BAD_TOLERANCES``).  It costs a forward-kinematics
      pass and an evaluation of the applied force per step."""
    dt0: object = None
    rtol: object = 1.0e-6
    atol: object = 1.0e-6
    max_steps: object = MAX_STEPS_DEFAULT
    controller: Controller = Controller()
    divergence_factor: object = DIVERGENCE_FACTOR

    def __check_init__(self):
        c = None if self.dt0 is None else concrete(self.dt0)
        if c is not None and not (c > 0):
            raise ValueError(f"dt0 must be positive, got {c}")
        m = self.max_steps
        known = isinstance(m, (int, np.integer)) and not isinstance(m, bool)
        if known and m < 1:
            raise ValueError(f"max_steps must be >= 1, got {m}")
        if not (known or (hasattr(m, "dtype") and np.issubdtype(m.dtype, np.integer))):
            raise TypeError(f"max_steps must be an integer, got {m!r}")
        f = self.divergence_factor
        if f is not None:
            if isinstance(f, bool):
                raise TypeError(f"divergence_factor must be a number or None, got {f!r}")
            c = concrete(f)
            if c is not None and not (c.ndim == 0 and np.isfinite(c) and c > 0):
                raise ValueError(f"divergence_factor must be a finite number > 0 or None, got {f!r}")


class Save(eqx.Module):
    """What a run records.

    ts: increasing save times in [t0, t1] (default: t1 only); steps are
      shortened to land on them; the run ends at the last one.
    observe: optional ``observe(model, q, v) -> pytree``, recorded at the
      save times inside the loop (``Solution.obs``).
    states: keep (q, v) at the save times (``Solution.qs``, ``vs``); with
      ``states=False`` only ``observe`` is kept, so the loop carries no
      (S, nq) trajectory buffer (large batches, many save times).
    multipliers: a mechanism's constraint multipliers λ (``Solution.lams``).
    step_history: record the end time and size of the first ``step_history``
      accepted steps (``Solution.steps``)."""
    ts: object = None
    observe: object = None
    states: bool = eqx.field(default=True, static=True)
    multipliers: bool = eqx.field(default=False, static=True)
    step_history: int = eqx.field(default=0, static=True)

    def __check_init__(self):
        if not self.states and self.observe is None:
            raise ValueError("Save(states=False) needs an observe function (nothing would be saved)")
        if isinstance(self.step_history, bool) or int(self.step_history) < 0:
            raise ValueError(f"step_history must be an integer >= 0, got {self.step_history!r}")
        if self.observe is not None and not callable(self.observe):
            raise TypeError(f"observe must be a function observe(model, q, v), got {type(self.observe).__name__}")


class Solver(eqx.Module):
    """How the equations are solved and the run differentiated.

    dynamics: "aba" (default), "aba_unrolled" or "crba" (the forward-dynamics
      method, :func:`jaxmbd.forward_dynamics`).
    constraints: a mechanism's constrained accelerations: "schur" (the
      factorization of H and the Schur complement) or "dense" (the augmented
      matrix).
    adjoint: "checkpoint" (default) or "none".  Both are a while loop that
      runs as many steps as the run needs.  "checkpoint" is reverse-mode
      differentiable (``jax.grad``) with bounded memory: the reverse pass
      replays the run's accepted steps, keeps ``checkpoints`` copies of the
      loop state and recomputes the steps between them (online binomial
      checkpointing, Stumm and Walther 2010; ``equinox.internal.while_loop``),
      so a gradient costs a few forward runs.  "none" is forward-mode
      differentiable only (``jax.jvp``, ``jax.jacfwd``; ``jax.grad`` raises).
    checkpoints: the loop states the reverse pass keeps (default 100).
    replay_steps: the most accepted steps a reverse pass can replay (default
      100,000, as ``Steps.max_steps``).  The forward run of a gradient records
      every accepted step's size (8 bytes each in float64, this many per
      batch member), and the reverse pass differentiates those steps replayed,
      so that its recomputed segments follow the run exactly; a run with more
      accepted steps gets a NaN gradient.  Runs that are not differentiated
      record nothing."""
    dynamics: str = eqx.field(default="aba", static=True)
    constraints: str = eqx.field(default="schur", static=True)
    adjoint: str = eqx.field(default="checkpoint", static=True)
    checkpoints: int = eqx.field(default=DEFAULT_CHECKPOINTS, static=True)
    replay_steps: int = eqx.field(default=MAX_STEPS_DEFAULT, static=True)

    def __check_init__(self):
        if self.dynamics not in DYNAMICS:
            raise ValueError(f"unknown dynamics {self.dynamics!r}; expected one of {', '.join(DYNAMICS)}")
        if self.constraints not in ("schur", "dense"):
            raise ValueError(f"unknown constraint solver {self.constraints!r}; expected 'schur' or 'dense'")
        if self.adjoint not in ("checkpoint", "none"):
            raise ValueError(f"unknown adjoint {self.adjoint!r}; expected 'checkpoint' or 'none'")
        if isinstance(self.checkpoints, bool) or int(self.checkpoints) < 1:
            raise ValueError(f"checkpoints must be >= 1, got {self.checkpoints!r}")
        if isinstance(self.replay_steps, bool) or int(self.replay_steps) < 1:
            raise ValueError(f"replay_steps must be >= 1, got {self.replay_steps!r}")
