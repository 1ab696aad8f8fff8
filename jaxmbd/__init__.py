"""jaxmbd: differentiable, batched multibody dynamics in JAX.

Importing jaxmbd turns on JAX's float64 mode (``jax_enable_x64``), because
multibody dynamics loses accuracy quickly in float32.  To keep JAX's default
(float32) instead, set the environment variable ``JAXMBD_X64=0`` before the
import; everything then runs in whatever precision the inputs have.

Importing jaxmbd also has XLA read its flags (``XLA_FLAGS``, which must
therefore be set before the import), with XLA:CPU's YNNPACK reductions off
(:func:`jaxmbd.runtime.set_xla_flags`; ``JAXMBD_XLA_FLAGS=0`` keeps XLA's
own defaults).
"""

import os as _os
import sys as _sys

_argv = getattr(_sys, "orig_argv", [])
_command = _os.path.basename(_sys.argv[0]) == "jaxmbd" or ["-m", "jaxmbd"] in (_argv[i:i + 2] for i in range(len(_argv)))
if _command:
    # the jaxmbd command is starting: Ctrl-C while JAX imports is one line and exit status 130, not a
    # traceback (jaxmbd.cli.main then takes over)
    import signal as _signal
    _signal.signal(_signal.SIGINT, lambda *_: (_os.write(2, b"jaxmbd: interrupted\n"), _os._exit(130)))

import jax as _jax  # noqa: E402

if _os.environ.get("JAXMBD_X64", "1") != "0":
    _jax.config.update("jax_enable_x64", True)

from .runtime import set_xla_flags as _set_xla_flags  # noqa: E402

_set_xla_flags(command=_command)

from .model import Model, set_mocap  # noqa: E402
from .builder import ModelBuilder  # noqa: E402
from .topology import Topology, tree_backward, tree_forward  # noqa: E402
from .kinematics import (  # noqa: E402
    forward_kinematics, frame_jacobian, frame_pose, point_jacobian, kinetic_energy,
    integrate_q, difference_q, qdot, normalize_q, neutral_q, joint_state,
)
from .rnea import rnea  # noqa: E402
from .crba import mass_matrix, mass_matrix_compact, compact_to_dense, composite_inertias  # noqa: E402
from .aba import aba  # noqa: E402
from .contact_report import contact_forces  # noqa: E402
from .dynamics import (  # noqa: E402
    inverse_dynamics, bias_force, passive_force, forward_dynamics, potential_energy, actuator_force,
)
from .coriolis import coriolis_matrix  # noqa: E402
from . import cost, ltdl, linalg, models, integrators, forces, constraints, dae, dynamics, odes  # noqa: E402
from .constraints import Mechanism, constraint_residual, constraint_jacobian, constraint_bias  # noqa: E402
from .dae import constrained_dynamics, assemble  # noqa: E402
from .odes.constrained import static_equilibrium  # noqa: E402
from .inputs import Inputs  # noqa: E402
from .options import Start, Steps, Save, Solver  # noqa: E402
from .simulate import simulate, Solution, status_name  # noqa: E402
from .rollout import rollout, Rollout  # noqa: E402
from .io import load_mjcf, load_urdf  # noqa: E402
from .runtime import enable_compilation_cache, release_compiled_programs  # noqa: E402
from .view import view, View  # noqa: E402
from . import sensors  # noqa: E402
from .sensors import sensordata  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Model", "ModelBuilder", "Topology", "tree_forward", "tree_backward",
    "forward_kinematics", "frame_jacobian", "frame_pose", "point_jacobian",
    "kinetic_energy", "potential_energy", "integrate_q", "difference_q", "normalize_q",
    "neutral_q", "qdot", "joint_state", "inverse_dynamics", "bias_force", "passive_force", "actuator_force", "rnea",
    "mass_matrix", "mass_matrix_compact", "compact_to_dense", "composite_inertias",
    "forward_dynamics", "aba", "coriolis_matrix", "contact_forces", "cost", "ltdl", "linalg", "models",
    "enable_compilation_cache", "release_compiled_programs", "integrators", "simulate", "Start", "Inputs", "Steps",
    "Save", "Solver", "Solution", "status_name", "rollout", "Rollout",
    "load_mjcf", "load_urdf", "forces", "constraints", "dae", "dynamics", "odes", "static_equilibrium", "Mechanism", "constraint_residual",
    "constraint_jacobian", "constraint_bias", "constrained_dynamics", "assemble", "view", "View",
    "sensors", "sensordata", "set_mocap",
]
