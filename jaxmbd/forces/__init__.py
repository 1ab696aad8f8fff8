"""Force elements: small objects, one file per kind, that a model carries
(``model.forces``, built by :meth:`jaxmbd.ModelBuilder.add_force` and its
named helpers), so every dynamics function includes them through
:func:`jaxmbd.passive_force` (and so ``bias_force``, ``inverse_dynamics``,
``forward_dynamics``, ``simulate``) and :func:`jaxmbd.potential_energy`
includes their potential.

=============================  =====================================  ==============================
element                        file                                   builder helper
=============================  =====================================  ==============================
:class:`PointSpringDamper`     ``point_spring.py``                    ``add_spring``
:class:`CoordinateSpringDamper` ``coordinate_spring.py``              ``add_coordinate_spring``
:class:`JointForce`            ``joint_force.py``                     ``add_joint_force``
:class:`RotationalSpringDamper` ``rotational_spring.py``              ``add_rotational_spring``
:class:`Tire`                  ``tire.py`` (+ ``add_road_bump``)      ``add_tire``
:class:`LinearBushing`         ``bushing.py``                         ``add_force(LinearBushing(...))``
:class:`JointLimit`            ``joint_limit.py`` (``soft.py``, ``law.py``) ``add_joint_limit``
:class:`FrictionLoss`          ``friction_loss.py`` (``soft.py``)     ``add_friction_loss``
:class:`Contact`               ``contact.py`` (geometry: ``contact/``) ``add_geom``, ``add_contact_pair``
:class:`GravityCompensation`   ``gravcomp.py``                        ``add_body(gravcomp=...)``
:class:`JointCoupling`         ``joint_coupling.py`` (``soft.py``)    ``add_joint_coupling``, ``add_tendon_coupling``
:class:`FixedTendons`          ``tendon.py``                          ``add_fixed_tendon``
:class:`TendonRows`            ``tendon.py`` (``soft.py``)            ``add_fixed_tendon(range=, frictionloss=)``
:class:`SpatialTendons`        ``spatial_tendon.py``                  ``add_spatial_tendon``
=============================  =====================================  ==============================

Actuators (``actuator.py``, :class:`Actuators`, ``ModelBuilder.add_actuator``)
are joint-space force elements whose input is the control vector ``ctrl``:
the model carries them apart (``model.actuators``), since they are not
passive; :func:`jaxmbd.actuator_force` evaluates them and ``simulate(...,
ctrl=...)`` integrates with them.

The interface (:mod:`jaxmbd.forces.base`): an element is created with body
and joint names, bound to the built tree's indices (``bind``), says which
DoFs it couples (``couplings``: the sparse iteration matrix stays exact
with them) and is either a :class:`PoseElement` (``measure`` of the body
poses, ``law`` of the conjugate forces, one shared kinematics pass and
Jacobian) or a :class:`JointElement` (``force`` on the joint coordinates).

Adding a kind of force element = one new file with its class, plus its
export here; ``ModelBuilder.add_force(element)`` adds it to a model."""

import jax
import jax.numpy as jnp

from . import base as _base
from .base import BuildContext, ForceElement, JointElement, PoseElement, couplings, elements, measures_of  # noqa: F401
from .actuator import Actuators
from .bushing import LinearBushing
from .coordinate_spring import CoordinateSpringDamper
from .joint_force import JointForce
from .joint_limit import JointLimit
from .friction_loss import FrictionLoss
from .gravcomp import GravityCompensation
from .joint_coupling import JointCoupling
from .tendon import FixedTendons, TendonRows
from .spatial_tendon import SpatialTendons
from . import soft  # noqa: F401
from .joint_limit import joint_limit_penetrations as _joint_limit_penetrations
from .contact import Contact
from . import law  # noqa: F401
from .point_spring import PointSpringDamper
from .rotational_spring import RotationalSpringDamper
from .tire import Tire, road_height
from .tire import tire_forces as _tire_forces

# The public evaluations compile once per model (called eagerly, each ran every operation as its own
# program); the dynamics use the plain functions inside their own programs.
generalized_force = jax.jit(_base.generalized_force)
potential = jax.jit(_base.potential)
joint_limit_penetrations = jax.jit(_joint_limit_penetrations)
tire_forces = jax.jit(_tire_forces)


@jax.jit
def spring_lengths(model, q):
    """(ns,) current lengths of the point-to-point springs."""
    L = measures_of(model, q, PointSpringDamper)
    return jnp.zeros((0,), jnp.result_type(q, float)) if L is None else L


def without(model, *classes):
    """The model (or mechanism) with its force elements of the given classes removed, e.g.
    ``without(model, JointLimit)`` for the smooth dynamics alone (what MuJoCo calls the
    dynamics without constraints).  The returned model is a new pytree with its own programs."""
    import equinox as eqx
    tree = getattr(model, "tree", model)
    kept = tuple(e for e in elements(tree) if not isinstance(e, classes))
    new_tree = eqx.tree_at(lambda m: m.forces, tree, kept or None, is_leaf=lambda x: x is None)
    return eqx.tree_at(lambda m: m.tree, model, new_tree) if tree is not model else new_tree


def has_forces(model) -> bool:
    return bool(elements(model))


def __getattr__(name):
    if name == "contact_forces":
        raise AttributeError("jaxmbd.forces.contact_forces is jaxmbd.contact_forces (the contacts at a state "
                             "are reported above the dynamics, which compute their soft forces)")
    raise AttributeError(f"module 'jaxmbd.forces' has no attribute {name!r}")


__all__ = ["Actuators", "ForceElement", "PoseElement", "JointElement", "BuildContext", "generalized_force", "potential",
           "couplings", "elements", "PointSpringDamper", "CoordinateSpringDamper", "JointForce",
           "RotationalSpringDamper", "Tire", "LinearBushing", "JointLimit", "FrictionLoss", "GravityCompensation", "JointCoupling", "FixedTendons", "TendonRows", "SpatialTendons", "soft", "joint_limit_penetrations", "law", "Contact", "road_height", "tire_forces", "spring_lengths", "has_forces", "without"]
