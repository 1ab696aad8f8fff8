"""Time integrators for the equations of motion of kinematic trees.

Every method integrates y'' = g(t, y, y') in a local chart of the
configuration manifold (:mod:`jaxmbd.odes`: the methods see only the ODE
interface of :mod:`jaxmbd.odes.base`, never the physics) and is used through
:func:`jaxmbd.simulate`:

- fixed step: :class:`SemiImplicitEuler` (order 1), :class:`RK4` (order 4);
- adaptive, explicit: :class:`Dopri5` (5(4));
- adaptive, implicit / linearly implicit, with exact autodiff Jacobians:
  :class:`RosenbrockNystrom4` (4(3), L-stable; Negrut's thesis),
  :class:`SDIRK4` (4(3), L-stable, Hairer-Wanner γ = 4/15),
  :class:`Trapezoidal` (Newmark γ = 1/2, β = 1/4; order 2, A-stable).

On a mechanism (a tree with loop constraints) ``simulate`` integrates the
independent coordinates of the state-space ODE, so the thesis's codes are:
ForRosen = :class:`RosenbrockNystrom4`, ForSDIRK = :class:`SDIRK4`, SspTrap
= :class:`Trapezoidal` (also named :data:`SspTrapezoidal`); the descriptor-form
codes iterate on (q̈, λ): InflSDIRK = :class:`DescriptorSDIRK4` (SDIRK4/16,
γ = 1/4), InflTrap = :class:`DescriptorTrapezoidal`.
"""

from .base import (BAD_MASS_MATRIX, BAD_PARAMETERS, BAD_TIMES, BAD_TOLERANCES, CONSTRAINT_FAILURE, CONTACT_OVERFLOW,
                   DIVERGED, MAX_STEPS,
                   NEWTON_FAILURE, NONFINITE, SPARSE_COUPLING, STATUS_NAMES, STEP_UNDERFLOW, SUCCESS,
                   REGISTRY, AbstractAdaptive, AbstractImplicit, AbstractIntegrator, Attempt, Controller)
from .explicit import RK4, Dopri5, SemiImplicitEuler
from .newmark import Trapezoidal
from .rosenbrock import RosenbrockNystrom4
from .sdirk import SDIRK4
from .descriptor import DescriptorSDIRK4, DescriptorTrapezoidal

SspTrapezoidal = Trapezoidal  # the thesis's SspTrap: the trapezoidal rule on a mechanism's state-space ODE

__all__ = ["REGISTRY", "AbstractIntegrator", "AbstractAdaptive", "AbstractImplicit", "Attempt", "Controller", "SemiImplicitEuler", "RK4", "Dopri5",
           "RosenbrockNystrom4", "SDIRK4", "Trapezoidal", "SspTrapezoidal", "DescriptorSDIRK4", "DescriptorTrapezoidal", "SUCCESS", "MAX_STEPS", "STEP_UNDERFLOW",
           "NEWTON_FAILURE", "NONFINITE", "CONSTRAINT_FAILURE", "BAD_MASS_MATRIX", "BAD_PARAMETERS", "BAD_TOLERANCES",
           "BAD_TIMES", "SPARSE_COUPLING", "CONTACT_OVERFLOW", "DIVERGED", "STATUS_NAMES"]
