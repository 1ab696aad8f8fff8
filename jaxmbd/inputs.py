"""What is applied to a model while it is integrated: joint torques and the
actuators' inputs, with the parameters of both (one lane from
:func:`jaxmbd.simulate` down to the equations of :mod:`jaxmbd.odes`)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .dynamics import check_ctrl


def actuation(model, t, q, v, ctrl, params, user=None):
    """(nv,) the actuators' generalized force at (t, q, v) (zero without
    actuators) for ctrl: None (every control zero, as MuJoCo's default
    ``ctrl``), an (nu,) array, or ``ctrl(t, q, v, params)`` -> (nu,), called
    with ``user(q)``, ``user(v)`` when the caller's coordinate order differs
    (a mechanism's)."""
    if model.actuators is None:
        return jnp.zeros(model.nv, q.dtype)
    if ctrl is None:
        u = jnp.zeros(model.nu, q.dtype)
    elif callable(ctrl):
        u = jnp.asarray(ctrl(t, q, v, params) if user is None else ctrl(t, user(q), user(v), params), q.dtype)
        check_ctrl(model, u, "ctrl(t, q, v, params)")
    else:
        u = jnp.asarray(ctrl, q.dtype)
    return model.actuators.generalized_force(model.nv, q, v, u, model)


class Inputs(eqx.Module):
    """Everything applied to the model during a run.

    tau: joint torques (generalized forces, nv): None (zero), an (nv,) array
      (constant) or ``tau(t, q, v, params) -> (nv,)``.
    ctrl: the inputs of the model's actuators (``model.actuators``, as
      MuJoCo's ``ctrl``; :func:`jaxmbd.actuator_force`): None (every input
      zero: the actuators still act, e.g. a position servo holds 0), an (nu,)
      array (constant) or ``ctrl(t, q, v, params) -> (nu,)``.
    params: any pytree, passed to both functions; gradients reach it.

    The applied force is tau plus the actuators' force, evaluated inside the
    integrated equations, so gradients reach the inputs and the actuators'
    parameters (gains, gear, ranges).  Functions and states use the model's
    own coordinate order (a mechanism's, for a :class:`jaxmbd.Mechanism`)."""
    tau: object = None
    ctrl: object = None
    params: object = None

    @property
    def time_dependent(self) -> bool:
        """Whether the applied force depends on time or state (a function was given)."""
        return callable(self.tau) or callable(self.ctrl)

    @property
    def given(self) -> bool:
        """Whether anything is applied beyond the model's own forces."""
        return self.tau is not None or self.ctrl is not None

    def check(self, tree):
        """Eager shape checks against the tree (a ValueError naming nu)."""
        check_ctrl(tree, self.ctrl)

    def force(self, tree, t, q, v, mech=None):
        """(nv,) the applied generalized force at (t, q, v) in tree order: tau
        plus the actuators' force.  With ``mech`` (a mechanism, q and v in
        tree order) the functions are called and tau is read in the
        mechanism's order."""
        c, nv = self.tau, tree.nv
        if c is None:
            tau = jnp.zeros(nv, q.dtype)
        elif mech is None:
            tau = (jnp.asarray(c(t, q, v, self.params), q.dtype) if callable(c)
                   else jnp.broadcast_to(jnp.asarray(c, q.dtype), (nv,)))
        elif callable(c):
            tau = mech.to_tree(jnp.asarray(c(t, mech.from_tree(q), mech.from_tree(v), self.params), q.dtype))
        else:
            tau = mech.to_tree(jnp.broadcast_to(jnp.asarray(c, q.dtype), (nv,)))
        if tree.actuators is None:    # (the program of a model without actuators is unchanged)
            return tau
        return tau + actuation(tree, t, q, v, self.ctrl, self.params, None if mech is None else mech.from_tree)


NO_INPUTS = Inputs()
