"""Gradient-based design optimization, thin over optax.

:func:`optimize` runs any optax optimizer (Adam, L-BFGS with its line search)
on a differentiable loss of a parameter pytree; everything else is ordinary
JAX: build the model from the parameters with ``eqx.tree_at``, simulate,
compare.  Two worked examples:

* :func:`double_pendulum_design` and :func:`tip_path` (tests/test_design.py):
  recover the link lengths and joint-spring constants of a double pendulum
  from the path its tip follows.
* Through contact, :func:`hopper_design` and :func:`apex_height`
  (tests/test_contact_design.py, bench/contact_design.py,
  notebooks/07_contact.ipynb): choose the leg spring and damper of a hopping
  leg dropped onto a floor so that its centre of mass bounces back up to a
  target apex height.  The apex is a smooth function of the design
  (:func:`apex_height` says why), differentiated through an adaptive
  ``RosenbrockNystrom4`` run; with one target and two parameters,
  ``optax.polyak_sgd`` on the loss ``|apex - target|`` takes the
  minimum-norm Newton step for ``apex = target`` (Polyak's step
  ``loss / |grad|²`` times ``grad``, as long as its ``max_learning_rate``
  does not shorten it) and converges quadratically (7 steps from a 17 cm
  miss to 1e-14 m, the first ones shortened).

The hopper's gradients come from adaptive ``RosenbrockNystrom4`` runs (the
docs/contact.md says which methods' gradients through contact the tests check)."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import models
from .integrators import RK4, RosenbrockNystrom4
from .kinematics import forward_kinematics, qdot
from .builder import ModelBuilder
from .options import Save, Start, Steps
from .simulate import simulate


class OptimizeResult(NamedTuple):
    params: object         # the final parameters (same pytree as params0)
    loss: jax.Array        # the final loss
    history: jax.Array     # (steps,) loss before each update
    grad_norm: jax.Array   # gradient norm at the final parameters
    grad0: object = None   # the gradient at params0 (same pytree): the first one the optimizer used


def optimize(loss: Callable, params0, optimizer, steps: int = 200) -> OptimizeResult:
    """Minimise ``loss(params)`` from ``params0`` with an optax optimizer
    (e.g. ``optax.adam(0.05)`` or ``optax.lbfgs()``): ``steps`` updates in
    one jitted ``lax.scan``.  Optimizers with a line search (``optax.lbfgs``)
    get the value and ``value_fn`` they need (``optax.polyak_sgd`` the
    value).  (L-BFGS converges in fewer steps but compiles the loss's
    gradient again inside its line search.)  The result also carries the
    gradient at ``params0`` (``grad0``), from the same compiled program: a
    gradient check needs no second compilation."""
    value_and_grad = jax.value_and_grad(loss)

    def step(carry, first):
        params, state, grad0 = carry
        value, grad = value_and_grad(params)
        updates, state = optimizer.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        grad0 = jax.tree_util.tree_map(lambda g, g0: jnp.where(first, g, g0), grad, grad0)
        return (optax.apply_updates(params, updates), state, grad0), value

    @jax.jit
    def run(params0):
        first = jnp.arange(steps) == 0            # keep the first step's gradient: grad0
        zero = jax.tree_util.tree_map(jnp.zeros_like, params0)
        (params, _, grad0), hist = jax.lax.scan(step, (params0, optimizer.init(params0), zero), first)
        value, grad = value_and_grad(params)
        gn = optax.tree.norm(grad)
        return params, value, hist, gn, grad0

    params, value, hist, gn, grad0 = run(params0)
    return OptimizeResult(params, value, hist, gn, grad0)


def double_pendulum_design(lengths, stiffness, base=None):
    """The point-mass double pendulum (``models.double_pendulum``) with link
    lengths (l1, l2) and joint-spring constants (k1, k2) as traced values."""
    m = models.double_pendulum() if base is None else base
    l1, l2 = lengths[0], lengths[1]
    m = eqx.tree_at(lambda m: m.tree_pos, m, m.tree_pos.at[1, 2].set(-l1))
    m = eqx.tree_at(lambda m: m.com, m, m.com.at[0, 2].set(-l1).at[1, 2].set(-l2))
    return eqx.tree_at(lambda m: m.stiffness, m, jnp.asarray(stiffness, m.stiffness.dtype))


def tip_path(model, q0, v0, ts, dt=0.005, max_steps=None):
    """World position of the lower mass (its centre of mass) at the times ts,
    RK4 with step dt (max_steps: by default just enough when ts is known
    at trace time, which keeps the differentiated loop short)."""
    if max_steps is None:
        if isinstance(ts, jax.core.Tracer):
            max_steps = 4096
        else:
            t_end = np.asarray(ts, float)
            max_steps = int(math.ceil(float(t_end[-1]) / dt)) + len(t_end) + 2
    sol = simulate(model, Start(q0, v0), ts[-1], integrator=RK4(), steps=Steps(dt0=dt, max_steps=max_steps),
                   save=Save(ts=ts))
    lower = model.body_id("lower")

    def tip(q):
        k = forward_kinematics(model, q)
        return k.pos[lower] + k.rot[lower] @ model.com[lower]
    return jax.vmap(tip)(sol.qs), sol.status


# --- a worked example through contact: the hopping leg ------------------------------------------------

HOPPER_LEG = 0.3          # hip-to-foot-centre length of the unloaded leg (m)
HOPPER_FOOT = 0.03        # foot sphere radius (m)
HOPPER_MASSES = (2.0, 0.2)  # body and foot (kg)
HOPPER_HEIGHT = 0.7       # the body's starting height above the floor (m): the foot 0.37 m up


def hopper(stiffness=800.0, damping=2.0, height=HOPPER_HEIGHT):
    """A hopping leg dropped onto a floor: a 2 kg body on a vertical slide
    joint (``q[0]``: its height above the floor, m), and a 0.2 kg foot on a
    second slide joint below it (``q[1]``: the leg's extension from its
    unloaded length, m) with the leg's spring (``stiffness``, N/m, about
    zero extension) and damper (``damping``, N s/m) as the joint's own
    spring and damping.  The foot is a 3 cm sphere that meets the floor
    plane through the compliant contact law (1e6 N/m^1.5, exponent 1.5,
    Hunt-Crossley damping 2 s/m: the foot barely rebounds; friction 0.5,
    idle here since nothing moves sideways).  The leg starts unloaded and at
    rest with the body ``height`` m up, so it falls as one rigid piece until
    the foot lands (:func:`hopper_touchdown_time`)."""
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_geom("world", "plane", name="floor", contype=0)
    body, foot = HOPPER_MASSES
    b.add_body("body", "world", "prismatic", axis=(0, 0, 1), mass=body, inertia=(1e-2, 1e-2, 1e-2))
    b.add_body("foot", "body", "prismatic", axis=(0, 0, 1), pos=(0, 0, -HOPPER_LEG), mass=foot,
               inertia=(1e-4, 1e-4, 1e-4), stiffness=stiffness, damping=damping, spring_ref=0.0)
    b.add_geom("foot", "sphere", (HOPPER_FOOT,), name="foot")
    b.add_contact_pair("floor", "foot", stiffness=1e6, exponent=1.5, damping=2.0, condim=3,
                       friction=(0.5, 0.0, 0.0))
    b.set_initial_state(np.array([height, 0.0]), np.zeros(2))
    return b.build()


def hopper_design(stiffness, damping, base=None):
    """The hopper (:func:`hopper`, or ``base``) with the leg's spring constant
    (N/m) and damping (N s/m) as traced values."""
    m = hopper() if base is None else base
    m = eqx.tree_at(lambda m: m.stiffness, m, m.stiffness.at[1].set(stiffness))
    return eqx.tree_at(lambda m: m.damping, m, m.damping.at[1].set(damping))


def hopper_touchdown_time(model):
    """When the foot of the hopper, falling from ``model.q0`` at rest, first
    touches the floor (s): free fall of its initial gap (traceable)."""
    gap = model.q0[0] - HOPPER_LEG + model.q0[1] - HOPPER_FOOT
    return jnp.sqrt(2.0 * gap / -model.gravity[2])


def center_of_mass(model, q, v):
    """World position and velocity of the model's centre of mass, ((3,), (3,))."""
    def com(q):
        k = forward_kinematics(model, q)
        world = k.pos + jnp.einsum("bij,bj->bi", k.rot, model.com)
        return model.mass @ world / jnp.sum(model.mass)
    return jax.jvp(com, (q,), (qdot(model, q, v),))


def ballistic_apex(model, q, v):
    """z_c + max(ż_c, 0)² / (2 g): the height the centre of mass reaches if
    the model flies freely from (q, v) (gravity along -z).  In a flight it is
    constant while the centre of mass rises, up to the apex; at rest or on
    the way down it is z_c itself."""
    (c, cd) = center_of_mass(model, q, v)
    g = -model.gravity[2]
    return c[2] + jnp.maximum(cd[2], 0.0) ** 2 / (2.0 * g)


def apex_height(model, t1=0.75, *, rtol=1e-6, atol=None, integrator=None, dt0=None, saves=48,
                max_steps=20_000, t_from=None):
    """The apex of the hopper's centre of mass after its first bounce (m),
    and the run's status: ``max`` over ``saves`` times evenly spaced in
    [``t_from``, ``t1``] (default: the touchdown time) of
    :func:`ballistic_apex` along one run of ``simulate`` (adaptive
    ``RosenbrockNystrom4`` by default; rtol/atol may be traced; ``dt0``:
    the step of a fixed-step method).

    Why this is smooth in the design: in a flight the centre of mass is on a
    parabola, so the ballistic apex is constant while it rises and equals
    z_c (below the apex) while it falls; on the ground it is z_c while the
    centre of mass comes down, so it falls from the touchdown on, and it
    rises only while the floor pushes the rising body up (its rate is
    ż_c F_floor / (m g)).  So from the touchdown to ``t1`` its maximum is
    the plateau of the rising flight after the bounce, the apex, reached at
    every save time in that part of the flight, and the maximum's derivative
    with respect to the design is the plateau's, whichever sample holds it.
    This needs a save time in the rising flight, so ``t1`` after the
    lift-off (0.75 s: every design with stiffness above about 300 N/m and
    damping below 10 N s/m lifts off by 0.6 s and rises for more than
    50 ms; the 48 save times are 10 ms apart), and a bounce that lifts the
    centre of mass above its touchdown height; ``t_from`` must not be later
    than the lift-off.
    The run's states are not kept (``observe``), only the apex estimate at
    the save times."""
    if t_from is None:
        t_from = hopper_touchdown_time(model)
    ts = jnp.linspace(t_from, t1, saves)
    sol = simulate(model, Start(model.q0, model.v0), t1, integrator=integrator or RosenbrockNystrom4(),
                   steps=Steps(dt0=dt0, rtol=rtol, atol=rtol if atol is None else atol, max_steps=max_steps),
                   save=Save(ts=ts, observe=ballistic_apex, states=False))
    return jnp.max(sol.obs), sol.status


__all__ = ["optimize", "OptimizeResult", "double_pendulum_design", "tip_path", "hopper", "hopper_design",
           "hopper_touchdown_time", "center_of_mass", "ballistic_apex", "apex_height"]
