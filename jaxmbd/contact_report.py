"""The contacts of a model at a state, as a report (:func:`contact_forces`): every candidate
contact's distance, point, normal, penetration and forces, the soft law's forces from the same
solve as :func:`jaxmbd.forward_dynamics`.  Above the dynamics: it reads the force elements and
the dynamics, and neither imports it."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .dynamics import free_dynamics, soft_stage
from .forces.base import elements
from .forces.contact import Contact


def contact_forces(model, q, v, ctrl=None, tau=None):
    """The model's contacts at (q, v) (for ``observe`` inside a run, or after it): a dict of
    per-candidate arrays (dist, pos, normal, penetration, normal_force, friction_force (on geom 2,
    world), friction_moment, and the static pair, body1, body2 indices) plus ``pairs`` (geom name
    pairs, indexed by ``pair``); None when the model has no contacts.

    The soft law's forces (pairs from solref/solimp, :mod:`jaxmbd.forces.soft`) depend on what else
    acts: they are those of ``forward_dynamics`` with the actuators at ``ctrl`` (default: every
    control zero) and the joint torques ``tau`` (default zero).  Tree coordinates for a mechanism's
    loop-free tree; the loop constraints are not applied here."""
    tree = getattr(model, "tree", model)
    el = [e for e in elements(tree) if isinstance(e, Contact)]
    if not el:
        return None
    qt = model.to_tree(q) if tree is not model else q
    vt = model.to_tree(v) if tree is not model else v
    qt, vt = jnp.asarray(qt), jnp.asarray(vt)
    extra = jnp.zeros(tree.nv, jnp.result_type(qt, vt, float)) if tau is None else jnp.asarray(tau)
    if tree is not model and tau is not None:
        extra = model.to_tree(extra)
    if tree.actuators is not None:
        u = jnp.zeros(tree.nu, extra.dtype) if ctrl is None else jnp.asarray(ctrl)
        extra = extra + tree.actuators.generalized_force(tree.nv, qt, vt, u, tree)
    out = _evaluate(el[0], tree, qt, vt, extra)
    out["pairs"] = el[0].pair_list()
    return out


@jax.jit
def _evaluate(el, tree, q, v, tau):
    """One compiled program per model (an eager call ran every narrow-phase operation on its own)."""
    out = el.evaluate(tree, q, v)
    out.pop("tau")
    if not el.has_soft:
        return out
    sol, (_, _, extras) = soft_stage(tree, q, v, free_dynamics(tree, q, v, tau))
    (n0, kn), (t0, kt), c = [(a, b, x) for e, a, b, x in extras if isinstance(e, Contact)][0]
    k = c["pos"].shape[0]
    if el.cone == "pyramidal" and el.fdim:
        fd = el.fdim
        fe = sol.fN[n0:n0 + kn].reshape(k, fd, 2)
        mu = el.friction[c["pair"]]
        mud = jnp.stack([mu[:, 0], mu[:, 0], mu[:, 1], mu[:, 2], mu[:, 2]], 1)[:, :fd]
        fN, fT = jnp.sum(fe, axis=(1, 2)), mud * (fe[..., 0] - fe[..., 1])
    else:
        fN, fT = sol.fN[n0:n0 + kn], sol.fT[t0:t0 + kt].reshape(k, -1)
    frame = jnp.stack([c["normal"], c["tangent"], jnp.cross(c["normal"], c["tangent"])], 1)
    fd = fT.shape[1]
    pad = jnp.concatenate([fT, jnp.zeros((k, 5 - fd), fT.dtype)], axis=1)
    F = pad[:, :1] * frame[:, 1] + pad[:, 1:2] * frame[:, 2]
    M = pad[:, 2:3] * frame[:, 0] + pad[:, 3:4] * frame[:, 1] + pad[:, 4:5] * frame[:, 2]
    idx = c["index"]
    soft = el.soft[out["pair"]][idx] > 0
    out["normal_force"] = out["normal_force"].at[idx].set(jnp.where(soft, fN, out["normal_force"][idx]))
    out["friction_force"] = out["friction_force"].at[idx].set(jnp.where(soft[:, None], F, out["friction_force"][idx]))
    out["friction_moment"] = out["friction_moment"].at[idx].set(
        jnp.where(soft[:, None], M, out["friction_moment"][idx]))
    return out
