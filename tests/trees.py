"""A few small random trees that between them use every joint type, plus
parameter perturbation that keeps the topology (so compiled code is reused)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd
from jaxmbd import models

ALL_TYPES = ("revolute", "prismatic", "helical", "spherical", "planar")

# topology seed -> (n, root joint); together these contain all seven joint types
TOPOLOGIES = {
    0: (6, "free"),
    1: (6, None),
    2: (5, "spherical"),
    3: (5, "planar"),
}


@functools.lru_cache(maxsize=None)
def base_tree(seed):
    n, root = TOPOLOGIES[seed]
    b = models.random_tree_builder(seed, n, joint_types=ALL_TYPES, root_joint=root, p_fixed=0.25)
    return b.build()


def _rot(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def perturb(model, seed, passive=True):
    """Same topology, new physical parameters (valid inertias, unit axes)."""
    rng = np.random.default_rng(seed)
    n, nv = model.n_bodies, model.nv
    scale = rng.uniform(0.5, 2.0, n)
    R = np.stack([_rot(rng) for _ in range(n)])
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    upd = dict(
        mass=model.mass * scale,
        inertia=jnp.einsum("nij,njk,nlk->nil", R, model.inertia * scale[:, None, None], R),
        com=model.com + rng.uniform(-0.05, 0.05, (n, 3)),
        axis=jnp.asarray(axis),
        anchor=jnp.where(jnp.any(model.anchor != 0, axis=1, keepdims=True),
                         model.anchor + rng.uniform(-0.05, 0.05, (n, 3)), 0.0),
        tree_pos=model.tree_pos + rng.uniform(-0.05, 0.05, (n, 3)),
        tree_rot=jnp.einsum("nij,njk->nik", model.tree_rot, np.stack([_rot(rng) for _ in range(n)])),
    )
    if passive:
        scalar = model.topo.dof_qadr >= 0
        upd.update(damping=jnp.asarray(rng.uniform(0, 0.3, nv)),
                   armature=jnp.asarray(rng.uniform(0, 0.1, nv)),
                   stiffness=jnp.asarray(np.where(scalar, rng.uniform(0, 2.0, nv), 0.0)),
                   spring_ref=jnp.asarray(rng.uniform(-0.3, 0.3, model.nq)))
    for k, val in upd.items():
        model = eqx_set(model, k, jnp.asarray(val, jnp.float64))
    return model


def eqx_set(model, name, value):
    import equinox as eqx
    return eqx.tree_at(lambda m: getattr(m, name), model, value)


def random_state(model, seed, scale=0.8):
    rng = np.random.default_rng(seed)
    q = jaxmbd.normalize_q(model, jaxmbd.neutral_q(model) + scale * jnp.asarray(rng.normal(size=model.nq)))
    v = jnp.asarray(rng.normal(size=model.nv))
    tau = jnp.asarray(rng.normal(size=model.nv))
    return q, v, tau


def ancestor_pattern(model):
    """Boolean (nv, nv): True where (i, j) is on the branch-induced pattern."""
    nv = model.nv
    P = np.zeros((nv, nv), bool)
    for k in range(nv):
        j = k
        while j >= 0:
            P[k, j] = P[j, k] = True
            j = model.dof_parent[j]
    return P
