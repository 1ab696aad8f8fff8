"""Gradient-based design optimization, thin over optax.

:func:`optimize` runs any optax optimizer (Adam, L-BFGS with its line search)
on a differentiable loss of a parameter pytree; everything else is ordinary
JAX: build the model from the parameters with ``eqx.tree_at``, simulate,
compare.  :func:`double_pendulum_design` and :func:`tip_path` are a worked
example (see tests/test_design.py): recover the link lengths and
joint-spring constants of a double pendulum from the path its tip follows."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import models
from .integrators import RK4
from .kinematics import forward_kinematics
from .simulate import simulate


class OptimizeResult(NamedTuple):
    params: object         # the final parameters (same pytree as params0)
    loss: jax.Array        # the final loss
    history: jax.Array     # (steps,) loss before each update
    grad_norm: jax.Array   # gradient norm at the final parameters


def optimize(loss: Callable, params0, optimizer, steps: int = 200) -> OptimizeResult:
    """Minimise ``loss(params)`` from ``params0`` with an optax optimizer
    (e.g. ``optax.adam(0.05)`` or ``optax.lbfgs()``): ``steps`` updates in
    one jitted ``lax.scan``.  Optimizers with a line search (``optax.lbfgs``)
    get the value and ``value_fn`` they need.  (L-BFGS converges in fewer
    steps but compiles the loss's gradient again inside its line search.)"""
    value_and_grad = jax.value_and_grad(loss)

    def step(carry, _):
        params, state = carry
        value, grad = value_and_grad(params)
        updates, state = optimizer.update(grad, state, params, value=value, grad=grad, value_fn=loss)
        return (optax.apply_updates(params, updates), state), value

    @jax.jit
    def run(params0):
        (params, _), hist = jax.lax.scan(step, (params0, optimizer.init(params0)), None, length=steps)
        value, grad = value_and_grad(params)
        gn = optax.tree.norm(grad)
        return params, value, hist, gn

    params, value, hist, gn = run(params0)
    return OptimizeResult(params, value, hist, gn)


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
    sol = simulate(model, q0, v0, 0.0, ts[-1], integrator=RK4(), dt0=dt, saveat=ts, max_steps=max_steps)
    lower = model.body_id("lower")

    def tip(q):
        k = forward_kinematics(model, q)
        return k.pos[lower] + k.rot[lower] @ model.com[lower]
    return jax.vmap(tip)(sol.qs), sol.status


__all__ = ["optimize", "OptimizeResult", "double_pendulum_design", "tip_path"]
