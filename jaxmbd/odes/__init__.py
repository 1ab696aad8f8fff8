"""What is integrated, apart from how: the equations of motion as ODE
objects behind one interface (:class:`AbstractODE`: g, its Jacobians, dg/dt,
the iteration matrix, the step's finish), which every integrator of
:mod:`jaxmbd.integrators` takes.

* :class:`ChartODE` (``chart.py``): a kinematic tree on its configuration
  manifold, in the local chart of each step; its branch-sparse iteration
  matrix (exact with cross-branch force elements).
* :class:`ConstrainedChartODE` (``constrained.py``): a mechanism with loop
  constraints, on its independent coordinates; also a
  :class:`DescriptorODE` (the (q̈, λ) residual).

The integrators import only :mod:`jaxmbd.odes.base`."""

from .base import AbstractODE, DescriptorODE, IterationMatrix, solve_first_order
from .chart import ChartODE, SparseIterationMatrix, right_jacobian, right_jacobian_inv
from .constrained import ConstrainedChartODE

__all__ = ["AbstractODE", "DescriptorODE", "IterationMatrix", "solve_first_order", "ChartODE",
           "SparseIterationMatrix", "right_jacobian", "right_jacobian_inv", "ConstrainedChartODE"]
