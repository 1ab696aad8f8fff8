"""Loop-closure constraints and the :class:`Mechanism`: a kinematic tree plus
holonomic, scleronomic constraints Φ(q) = 0 between frames on two bodies.

Each constraint joins frame A, fixed on body ``a``, to frame B, fixed on body
``b`` (either may be the world).  With (R_A, p_A), (R_B, p_B) their world
poses and x_A, y_A, z_A the columns of R_A:

=================  ====  ========================================================
kind               rows  Φ
=================  ====  ========================================================
``point``          3     p_A - p_B  (spherical joint)
``point_planar``   2     E (p_A - p_B), E the two world axes across ``normal``
                         (default z: the x and y components); a planar revolute
``revolute``       5     p_A - p_B;  x_A·z_B, y_A·z_B  (z_A ∥ z_B)
``prismatic``      5     x_A·d, y_A·d (d = p_B - p_A along z_A); x_A·z_B,
                         y_A·z_B; x_A·y_B (no twist)
``weld``           6     p_A - p_B;  log(R_Aᵀ R_B)ᵛ (the rotation vector)
``distance``       1     |p_B - p_A| - d
``point_on_line``  2     x_A·d, y_A·d  (p_B on the line through p_A along z_A)
=================  ====  ========================================================

Derivatives are taken with respect to the tangent coordinates of the tree
(the joint velocities): ``Φ_q`` is (nc, nv) with dΦ/dt = Φ_q v, and the
acceleration-level right-hand side is ``τ = -(Φ_q v)_q v``, computed as
-d²/ds² Φ(q ⊕ s v) at s = 0 (along q ⊕ s v the joint velocity is constant).

A :class:`Mechanism` also fixes the order of its coordinates: by default the
tree's; ``ModelBuilder.build(coordinate_order=...)`` lists joints in another
order (trees whose joints all have scalar coordinates), as the test-set
coordinates of Andrews' squeezer need.  Its ``q`` and ``v`` are always in
that order.  Tree functions (``forward_dynamics``, ``mass_matrix``, ...) take
``mech.tree`` with tree-ordered coordinates ``mech.to_tree(q)``; the
constrained dynamics are :func:`constrained_dynamics`.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import spatial
from .kinematics import forward_kinematics, integrate_q

ROWS = {"point": 3, "point_planar": 2, "revolute": 5, "prismatic": 5, "weld": 6, "distance": 1,
        "point_on_line": 2}
KINDS = tuple(ROWS)


class Mechanism(eqx.Module):
    """A kinematic tree (``tree``, a :class:`jaxmbd.Model`) with loop-closure
    constraints, in its own coordinate order.

    Static: the constraint kinds and bodies, the coordinate order.  Traced:
    the tree's parameters, the constraint frames (loop_rot_a/pos_a on body a,
    loop_rot_b/pos_b on body b, world coordinates for the world), the
    distances and the planar-point axes.  ``q0``/``v0``: the default
    (consistent) initial state, in the mechanism's coordinate order."""
    tree: object
    loops: tuple = eqx.field(static=True)          # ((kind, a, b), ...), body indices, -1 = world
    loop_names: tuple = eqx.field(static=True)
    loop_rot_a: jax.Array                           # (k, 3, 3)
    loop_pos_a: jax.Array                           # (k, 3)
    loop_rot_b: jax.Array
    loop_pos_b: jax.Array
    loop_distance: jax.Array                        # (k,)
    loop_plane: jax.Array                           # (k, 2, 3) world axes of point_planar rows
    perm: tuple = eqx.field(static=True, default=None)   # q_user = q_tree[perm] (None: tree order)
    q0: jax.Array = None
    v0: jax.Array = None
    # the constraint rows the dynamics use when some are redundant (None: all); set by ModelBuilder.build
    active_rows: tuple = eqx.field(static=True, default=None)

    # --- sizes and names ---------------------------------------------------------
    @property
    def nq(self) -> int:
        return self.tree.nq

    @property
    def nv(self) -> int:
        return self.tree.nv

    @property
    def nu(self) -> int:
        """Number of actuators (the tree's; ``ctrl`` has this length)."""
        return self.tree.nu

    @property
    def nc(self) -> int:
        """Number of scalar constraint equations."""
        return int(sum(ROWS[k[0]] for k in self.loops))

    @property
    def n_active(self) -> int:
        """The rank of Φ_q: the number of independent constraint rows the dynamics use."""
        return self.nc if self.active_rows is None else len(self.active_rows)

    @property
    def dropped_rows(self) -> tuple:
        """The redundant constraint rows (implied by the others; still satisfied and reported)."""
        if self.active_rows is None:
            return ()
        keep = set(self.active_rows)
        return tuple(i for i in range(self.nc) if i not in keep)

    def rows(self, x):
        """The independent rows of an (nc, ...) array (all of them when none is redundant)."""
        return x if self.active_rows is None else x[np.asarray(self.active_rows, np.int64)]

    def expand_rows(self, lam):
        """Multipliers of the independent rows -> (nc,) with zeros on the redundant rows."""
        if self.active_rows is None:
            return lam
        return jnp.zeros(lam.shape[:-1] + (self.nc,), lam.dtype).at[..., np.asarray(self.active_rows)].set(lam)

    @property
    def n_bodies(self) -> int:
        return self.tree.n_bodies

    @property
    def keyframes(self) -> dict:
        """The tree's keyframes (:attr:`jaxmbd.Model.keyframes`) with qpos and qvel in the
        mechanism's coordinate order."""
        kf = self.tree.keyframes
        if self.perm is None:
            return kf
        p = np.asarray(self.perm)
        return {n: k._replace(qpos=k.qpos[p], qvel=k.qvel[p]) for n, k in kf.items()}

    @property
    def body_names(self) -> tuple:
        return self.tree.body_names

    @property
    def joint_names(self) -> tuple:
        names = self.tree.joint_names
        if self.perm is None:
            return names
        # scalar joints only: one coordinate per joint except planar (3)
        order = _joint_order(self.tree, self.perm)
        return tuple(names[j] for j in order)

    @property
    def joint_qpos_adr(self) -> np.ndarray:
        return self._adr(self.tree.topo.q_adr)

    @property
    def joint_dof_adr(self) -> np.ndarray:
        return self._adr(self.tree.topo.v_adr)

    def _adr(self, adr):
        if self.perm is None:
            return adr.copy()
        inv = np.argsort(np.asarray(self.perm))
        order = _joint_order(self.tree, self.perm)
        return np.array([inv[adr[j]] for j in order], np.int64)

    @property
    def topo(self):
        raise TypeError("this model is a Mechanism (a tree with loop constraints and its own coordinate order): "
                        "tree functions take mech.tree with tree-ordered coordinates mech.to_tree(q); "
                        "for the constrained dynamics use jaxmbd.constrained_dynamics")

    def summary(self) -> str:
        red = f" ({self.nc - self.n_active} redundant rows: {list(self.dropped_rows)})" if self.dropped_rows else ""
        return (f"{self.tree.summary()}; {len(self.loops)} loop constraints, nc={self.nc}{red}, "
                f"{self.nv - self.n_active} DoF")

    # --- coordinate order ------------------------------------------------------
    def to_tree(self, x):
        """Coordinates (q, v or a per-DoF force; last axis) from the mechanism's order to the tree's."""
        if self.perm is None:
            return x
        return jnp.asarray(x)[..., np.argsort(np.asarray(self.perm))]

    def from_tree(self, x):
        """Inverse of :meth:`to_tree`."""
        if self.perm is None:
            return x
        return jnp.asarray(x)[..., np.asarray(self.perm)]


def _joint_order(tree, perm):
    """Joint indices in the user coordinate order (perm maps user coordinate -> tree coordinate)."""
    q_adr = tree.topo.q_adr
    owner = np.searchsorted(q_adr, np.asarray(perm), side="right") - 1
    out = []
    for j in owner:
        if not out or out[-1] != j:
            out.append(int(j))
    return out


# --- Φ and its derivatives (tree order) ----------------------------------------------

def _frames(mech, q_tree):
    """World poses of every constraint's frames A and B: (Ra, pa, Rb, pb), each (k, ...)."""
    kin = forward_kinematics(mech.tree, q_tree)
    dt = kin.pos.dtype

    def pose(bodies, Rl, pl):
        b = np.array(bodies, np.int64)
        idx = np.maximum(b, 0)
        R = jnp.einsum("kij,kjl->kil", kin.rot[idx], Rl.astype(dt))
        p = kin.pos[idx] + jnp.einsum("kij,kj->ki", kin.rot[idx], pl.astype(dt))
        world = jnp.asarray(b < 0)
        return jnp.where(world[:, None, None], Rl.astype(dt), R), jnp.where(world[:, None], pl.astype(dt), p)
    Ra, pa = pose([c[1] for c in mech.loops], mech.loop_rot_a, mech.loop_pos_a)
    Rb, pb = pose([c[2] for c in mech.loops], mech.loop_rot_b, mech.loop_pos_b)
    return Ra, pa, Rb, pb


def _rows(kind, Ra, pa, Rb, pb, dist, plane):
    d = pb - pa
    x, y, z = Ra[:, 0], Ra[:, 1], Ra[:, 2]
    if kind == "point":
        return pa - pb
    if kind == "point_planar":
        return plane @ (pa - pb)
    if kind == "revolute":
        zb = Rb[:, 2]
        return jnp.concatenate([pa - pb, jnp.stack([x @ zb, y @ zb])])
    if kind == "prismatic":
        return jnp.stack([x @ d, y @ d, x @ Rb[:, 2], y @ Rb[:, 2], x @ Rb[:, 1]])
    if kind == "weld":
        return jnp.concatenate([pa - pb, spatial.rotation_vector(Ra.T @ Rb)])
    if kind == "distance":
        return jnp.sqrt(jnp.sum(d * d))[None] - dist
    if kind == "point_on_line":
        return jnp.stack([x @ d, y @ d])
    raise ValueError(f"unknown constraint kind {kind!r}")


def phi_tree(mech, q_tree):
    """Φ(q) (nc,) for tree-ordered q."""
    if not mech.loops:
        return jnp.zeros((0,), jnp.result_type(q_tree, float))
    Ra, pa, Rb, pb = _frames(mech, q_tree)
    out = [_rows(c[0], Ra[i], pa[i], Rb[i], pb[i], mech.loop_distance[i], mech.loop_plane[i])
           for i, c in enumerate(mech.loops)]
    return jnp.concatenate(out)


def phi_jacobian_tree(mech, q_tree):
    """Φ_q (nc, nv) with respect to the tangent coordinates (tree order)."""
    x0 = jnp.zeros(mech.nv, jnp.result_type(q_tree, float))
    return jax.jacfwd(lambda x: phi_tree(mech, integrate_q(mech.tree, q_tree, x)))(x0)


def phi_bias_tree(mech, q_tree, v_tree):
    """τ = -(Φ_q v)_q v (nc,), so that Φ_q a = τ keeps dΦ/dt = 0 (tree order)."""

    def phi_s(s):
        return phi_tree(mech, integrate_q(mech.tree, q_tree, s * v_tree))

    def dphi(s):
        return jax.jvp(phi_s, (s,), (jnp.ones_like(s),))[1]
    s0 = jnp.zeros((), jnp.result_type(q_tree, v_tree, float))
    return -jax.jvp(dphi, (s0,), (jnp.ones_like(s0),))[1]


@functools.lru_cache(maxsize=None)
def _pose_jacobian(kind):
    """∂(rows)/∂(δθa, δpa, δθb, δpb) for one constraint kind, with the frames moved as
    R → (I + [δθ]x) R (a world rotation; its derivative at zero is the exponential's) and p → p + δp:
    one small compiled program per kind, shared by every mechanism."""
    def f(Ra, pa, Rb, pb, dist, plane):
        def rows(x):
            return _rows(kind, Ra + spatial.skew(x[0:3]) @ Ra, pa + x[3:6], Rb + spatial.skew(x[6:9]) @ Rb,
                         pb + x[9:12], dist, plane)
        return jax.jacfwd(rows)(jnp.zeros(12, Ra.dtype))
    return jax.jit(f)


def host_phi_jacobian(mech, q_tree):
    """Φ_q (nc, nv) at a concrete tree-ordered q, in NumPy, for build-time decisions (the redundant
    rows): the frames' world Jacobians from :func:`jaxmbd.kinematics.host_kinematics` times each
    constraint's derivative with respect to its two frames.  Equal to :func:`phi_jacobian_tree`
    (tests/test_redundant_loops.py), without a compiled program per mechanism."""
    from .kinematics import host_kinematics, host_point_jacobians
    tree = mech.tree
    R, p, w, u = host_kinematics(tree, q_tree)
    out = []

    def frame(b, Rl, pl):
        Rf, pf = (Rl, pl) if b < 0 else (R[b] @ Rl, p[b] + R[b] @ pl)
        ang, lin = host_point_jacobians(tree, w, u, [b], pf[None])
        return Rf, pf, ang[0], lin[0]
    arrays = [np.asarray(x, np.float64) for x in (mech.loop_rot_a, mech.loop_pos_a, mech.loop_rot_b,
                                                  mech.loop_pos_b, mech.loop_distance, mech.loop_plane)]
    for i, (kind, a, b) in enumerate(c[:3] for c in mech.loops):
        Ra, pa, Ja, La = frame(a, arrays[0][i], arrays[1][i])
        Rb, pb, Jb, Lb = frame(b, arrays[2][i], arrays[3][i])
        D = np.asarray(_pose_jacobian(kind)(Ra, pa, Rb, pb, arrays[4][i], arrays[5][i]))
        out.append(D[:, 0:3] @ Ja + D[:, 3:6] @ La + D[:, 6:9] @ Jb + D[:, 9:12] @ Lb)
    return np.concatenate(out) if out else np.zeros((0, tree.nv))


def independent_rows(G, tol=1e-9):
    """Indices of a maximal set of linearly independent rows of G (NumPy,
    at build time): rows are taken in order and kept when their component
    orthogonal to the rows kept so far exceeds tol times the largest row
    norm (Gram-Schmidt, twice for round-off).  Earlier rows are preferred."""
    G = np.asarray(G, np.float64)
    scale = max(float(np.linalg.norm(G, axis=1).max(initial=0.0)), 1e-300)
    basis, keep = [], []
    for i, g in enumerate(G):
        r = g.copy()
        for _ in range(2):
            for b in basis:
                r -= (r @ b) * b
        n = np.linalg.norm(r)
        if n > tol * scale:
            basis.append(r / n)
            keep.append(i)
    return tuple(keep)


def _check(mech, q, v=None):
    if not isinstance(mech, Mechanism):
        raise TypeError(f"expected a jaxmbd Mechanism (a model with loop constraints), got {type(mech).__name__}")
    if q.shape != (mech.nq,):
        raise ValueError(f"q has shape {q.shape}, expected ({mech.nq},); use jax.vmap for batches")
    if v is not None and v.shape != (mech.nv,):
        raise ValueError(f"v has shape {v.shape}, expected ({mech.nv},); use jax.vmap for batches")


@jax.jit
def constraint_residual(mech, q):
    """Φ(q), shape (nc,), for q in the mechanism's coordinate order."""
    q = jnp.asarray(q)
    _check(mech, q)
    return phi_tree(mech, mech.to_tree(q))


@jax.jit
def constraint_jacobian(mech, q):
    """Φ_q(q), shape (nc, nv), columns in the mechanism's coordinate order
    (derivatives with respect to the tangent coordinates: dΦ/dt = Φ_q v)."""
    q = jnp.asarray(q)
    _check(mech, q)
    return mech.from_tree(phi_jacobian_tree(mech, mech.to_tree(q)))


@jax.jit
def constraint_bias(mech, q, v):
    """τ(q, v) = -(Φ_q v)_q v, shape (nc,): the constraint acceleration
    equation is Φ_q a = τ."""
    q, v = jnp.asarray(q), jnp.asarray(v)
    _check(mech, q, v)
    return phi_bias_tree(mech, mech.to_tree(q), mech.to_tree(v))
