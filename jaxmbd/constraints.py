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

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from . import spatial
from .kinematics import forward_kinematics, integrate_q

ROWS = {"point": 3, "point_planar": 2, "revolute": 5, "prismatic": 5, "weld": 6, "distance": 1,
        "point_on_line": 2}
KINDS = tuple(ROWS)


class Mechanism(eqx.Module):
    """A kinematic tree (``tree``, a :class:`jaxmbd.Model`) with loop-closure
    constraints, in its own coordinate order.

    Static: the constraint kinds and bodies, the coordinate order, the
    independent rows and the build's findings about them (``rows_undecided``,
    ``start_issue``: see :func:`redundant_rows`).  Traced:
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
    # why the active rows could not be decided (nearly redundant rows), and why a run cannot start
    # from q0 (no assembly near it, or a singular configuration): messages naming the rows, None when
    # all is well; set by ModelBuilder.build (constraints.redundant_rows), refused by simulate
    rows_undecided: str = eqx.field(static=True, default=None)
    start_issue: str = eqx.field(static=True, default=None)

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
        issues = "".join(f"; {m}" for m in (self.rows_undecided, self.start_issue) if m)
        return (f"{self.tree.summary()}; {len(self.loops)} loop constraints, nc={self.nc}{red}, "
                f"{self.nv - self.n_active} DoF{issues}")

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
    x, y = Ra[:, 0], Ra[:, 1]
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
def _pose_rows(kind):
    """The rows of one constraint kind and their derivative with respect to (δθa, δpa, δθb, δpb),
    with the frames moved as R → (I + [δθ]x) R (a world rotation; its derivative at zero is the
    exponential's) and p → p + δp: one small compiled program per kind, shared by every mechanism."""
    def f(Ra, pa, Rb, pb, dist, plane):
        def rows(x):
            return _rows(kind, Ra + spatial.skew(x[0:3]) @ Ra, pa + x[3:6], Rb + spatial.skew(x[6:9]) @ Rb,
                         pb + x[9:12], dist, plane)
        x0 = jnp.zeros(12, Ra.dtype)
        return rows(x0), jax.jacfwd(rows)(x0)
    return jax.jit(f)


def host_phi_and_jacobian(mech, q_tree):
    """(Φ (nc,), Φ_q (nc, nv)) at a concrete tree-ordered q, in NumPy, for build-time decisions
    (assembly, the redundant rows): the frames' world Jacobians from
    :func:`jaxmbd.kinematics.host_kinematics` times each constraint's derivative with respect to
    its two frames.  Equal to :func:`phi_tree` and :func:`phi_jacobian_tree`
    (tests/test_redundant_loops.py), without a compiled program per mechanism."""
    from .kinematics import host_kinematics, host_point_jacobians
    tree = mech.tree
    R, p, w, u = host_kinematics(tree, q_tree)
    res, out = [], []

    def frame(b, Rl, pl):
        Rf, pf = (Rl, pl) if b < 0 else (R[b] @ Rl, p[b] + R[b] @ pl)
        ang, lin = host_point_jacobians(tree, w, u, [b], pf[None])
        return Rf, pf, ang[0], lin[0]
    arrays = [np.asarray(x, np.float64) for x in (mech.loop_rot_a, mech.loop_pos_a, mech.loop_rot_b,
                                                  mech.loop_pos_b, mech.loop_distance, mech.loop_plane)]
    for i, (kind, a, b) in enumerate(c[:3] for c in mech.loops):
        Ra, pa, Ja, La = frame(a, arrays[0][i], arrays[1][i])
        Rb, pb, Jb, Lb = frame(b, arrays[2][i], arrays[3][i])
        r, D = (np.asarray(x) for x in _pose_rows(kind)(Ra, pa, Rb, pb, arrays[4][i], arrays[5][i]))
        res.append(r)
        out.append(D[:, 0:3] @ Ja + D[:, 3:6] @ La + D[:, 6:9] @ Jb + D[:, 9:12] @ Lb)
    if not out:
        return np.zeros(0), np.zeros((0, tree.nv))
    return np.concatenate(res), np.concatenate(out)


def host_phi_jacobian(mech, q_tree):
    """Φ_q (nc, nv) at a concrete tree-ordered q, in NumPy (see :func:`host_phi_and_jacobian`)."""
    return host_phi_and_jacobian(mech, q_tree)[1]


# --- build time: the redundant rows ----------------------------------------------------------
#
# A loop closed by more equations than it removes freedoms (a planar loop closed by a 3-row point
# constraint, MJCF's <connect>) has a Jacobian of lower rank than its row count on the constraint
# manifold: some rows are implied by the others there, and the dynamics use an independent subset
# (the augmented matrix is singular otherwise).  Off the manifold the same rows need not be
# dependent: where a loop is open, p_A - p_B ≠ 0, and a rotation of a body carrying the whole loop
# moves the gap in the direction the closed loop cannot move (a Cassie leg's plantar loop under its
# hip joints), so the rank is decided on the manifold: at q0 assembled and at a few configurations
# on the manifold near it (q0 moved along the null space of Φ_q and assembled again).  Assembly is
# Gauss-Newton with minimum-norm least-squares steps (the iteration of jaxmbd.dae.assemble and of
# the LU projection method of Cardenal, Duff and Jiménez, here through the SVD so that redundant rows
# are allowed); the rank is read from the singular values of the row-scaled Φ_q relative to the
# largest, the rank near q0 being the largest found (a lower rank at q0 itself is a singular
# configuration).  The rows dropped are chosen from the left null vectors of Φ_q (the dependencies)
# by column-pivoted QR, at q0 assembled or, where q0 is singular, at a configuration around it of
# the rank near q0: each dependency drops the row with the largest coefficient in it
# (see _independent).

DEPENDENT_TOL = 1e-9       # σ / σ_max of the row-scaled Φ_q at or below this: a dependent direction
INDEPENDENT_TOL = 1e-6     # at or above this: an independent one; in between: undecided (refused)
ASSEMBLY_TOL = 1e-12       # |Φ|∞ of an assembled configuration, relative to 1 + |q|∞
SAMPLES = 3                # configurations on the manifold near q0 (besides q0 itself)
SAMPLE_STEP = 0.1          # their distance from q0 along the null space of Φ_q (largest coordinate)
RESTARTS = 4               # Gauss-Newton restarts from q0 moved by random steps (up to 0.05), where it stalls
ANCHOR_TOL = 1e-5          # m (rad): the largest gap at q0 that no joint closes which the build takes up
                           # by moving the constraint's frame on body B (close_by_anchors)


def row_labels(mech) -> list:
    """A label per constraint row: the constraint's name and row, its kind, its two bodies and
    what the row measures (world components of p_A - p_B for the position rows)."""
    comps = {"point": ("x", "y", "z"), "point_planar": ("e1", "e2"),
             "revolute": ("x", "y", "z", "x_A.z_B", "y_A.z_B"),
             "prismatic": ("x_A.d", "y_A.d", "x_A.z_B", "y_A.z_B", "x_A.y_B"),
             "weld": ("x", "y", "z", "rx", "ry", "rz"), "distance": ("|d|",), "point_on_line": ("x_A.d", "y_A.d")}
    names = mech.tree.body_names
    out = []
    for (kind, a, b), name in zip((c[:3] for c in mech.loops), mech.loop_names):
        ba, bb = ("world" if i < 0 else names[i] for i in (a, b))
        out += [f"{name}[{k}] ({kind} {ba!r}-{bb!r}, {comp})" for k, comp in enumerate(comps[kind])]
    return out


def _scaled(G):
    """Φ_q with each row divided by its norm (rows of negligible norm, DEPENDENT_TOL x the largest,
    set to zero)."""
    n = np.linalg.norm(G, axis=1)
    zero = n <= DEPENDENT_TOL * max(float(n.max(initial=0.0)), 1e-300)
    return np.where(zero[:, None], 0.0, G / np.where(zero, 1.0, n)[:, None])


def _singular(G):
    """(singular values of the row-scaled G relative to the largest, padded with zeros to one per
    row; its left singular vectors; its right singular vectors)."""
    U, s, Vt = np.linalg.svd(_scaled(G))
    s = np.concatenate([s, np.zeros(G.shape[0] - s.shape[0])])
    return s / max(float(s.max(initial=0.0)), 1e-300), U, Vt


def host_assemble(mech, q_tree, iterations=30):
    """Gauss-Newton on Φ(q) = 0 from a concrete tree-ordered q (NumPy, build time): minimum-norm
    least-squares steps (SVD, so redundant rows are allowed), halved while they do not reduce |Φ|.
    Returns (q, |Φ|∞, converged: |Φ|∞ <= ASSEMBLY_TOL (1 + |q|∞))."""
    from .kinematics import host_integrate_q
    q = np.asarray(q_tree, np.float64)
    r, G = host_phi_and_jacobian(mech, q)
    for _ in range(iterations):
        if float(np.abs(r).max(initial=0.0)) <= ASSEMBLY_TOL * (1.0 + np.abs(q).max()):
            break
        dx = -np.linalg.lstsq(G, r, rcond=1e-10)[0]
        for _ in range(12):
            qn = host_integrate_q(mech.tree, q, dx)
            rn, Gn = host_phi_and_jacobian(mech, qn)
            if np.linalg.norm(rn) < np.linalg.norm(r):
                break
            dx = 0.5 * dx
        else:
            break
        q, r, G = qn, rn, Gn
    res = float(np.abs(r).max(initial=0.0))
    return q, res, res <= ASSEMBLY_TOL * (1.0 + np.abs(q).max())


def close_by_anchors(mech):
    """Where Gauss-Newton from q0 leaves loops open by gaps that no joint motion closes and that
    are at most ANCHOR_TOL (a file's sites that coincide to its printed digits only, which MuJoCo's
    soft equality pulls together): the mechanism with those point and weld constraints' frames on
    body B moved onto their frames A at the least-squares configuration, which the least-squares
    residual leaves only in directions the joints cannot move (it is orthogonal to the range of
    Φ_q).  Build time, NumPy.  Returns (mechanism, ((loop name, gap), ...)), or (None, ()) when that
    does not close every loop."""
    from .kinematics import host_kinematics
    tree = mech.tree
    q, res, ok = host_assemble(mech, np.asarray(tree.q0, np.float64))
    if ok or res > ANCHOR_TOL:
        return None, ()
    R, p, _, _ = host_kinematics(tree, q)
    r = host_phi_and_jacobian(mech, q)[0]
    pos_b, rot_b = np.array(mech.loop_pos_b, np.float64), np.array(mech.loop_rot_b, np.float64)
    pos_a, rot_a = np.asarray(mech.loop_pos_a, np.float64), np.asarray(mech.loop_rot_a, np.float64)
    tol = ASSEMBLY_TOL * (1.0 + np.abs(q).max())
    shifts, at = [], 0

    def pose(b):
        return (np.eye(3), np.zeros(3)) if b < 0 else (R[b], p[b])
    for i, c in enumerate(mech.loops):
        kind, a, b = c[:3]
        gap = float(np.abs(r[at:at + ROWS[kind]]).max(initial=0.0))
        at += ROWS[kind]
        if gap <= tol:
            continue
        if kind not in ("point", "weld"):
            return None, ()
        (RA, pA), (RB, pB) = pose(a), pose(b)
        pos_b[i] = RB.T @ (pA + RA @ pos_a[i] - pB)
        if kind == "weld":
            rot_b[i] = RB.T @ RA @ rot_a[i]
        shifts.append((mech.loop_names[i], gap))
    moved = dataclasses.replace(mech, loop_pos_b=jnp.asarray(pos_b), loop_rot_b=jnp.asarray(rot_b))
    if not host_assemble(moved, q)[2]:
        return None, ()
    return moved, tuple(shifts)


def _rows_in(labels, u, share=0.1):
    """The labels of the rows that take part in a left singular direction u."""
    u = np.abs(u)
    return ", ".join(labels[i] for i in np.flatnonzero(u >= share * u.max()))


def redundant_rows(mech, seed=0):
    """Decide which constraint rows the dynamics use (build time, NumPy): the rows dependent
    everywhere on the constraint manifold near q0 are dropped.

    Returns (active, q, undecided, start): the active rows (a tuple of row indices, None when every
    row is independent); q0 assembled (tree order); and two messages, None when all is well, naming
    the rows concerned.  The rank is the largest of the row-scaled Φ_q's at q0 assembled and at
    SAMPLES configurations on the manifold around it (see the comment above); the rows are chosen
    at q0 assembled, or at a configuration around it of that rank.

    * ``undecided``: a relative singular value between DEPENDENT_TOL and INDEPENDENT_TOL at the
      configurations around q0: rows nearly but not exactly dependent (a loop meant to be planar
      whose joint axes are parallel only to the digits of a file), whose exact constraint would lock
      a loop that a soft one lets move.  The rows are then chosen with the dependent tolerance.
    * ``start``: Gauss-Newton from q0 does not close every loop (a run from q0, which assembles it
      first, would fail).  The rank is then decided where Gauss-Newton from q0 moved by small random
      steps closes them (q0 at a singular configuration stalls it), else where it ended, off the
      manifold, where the rows hold only by chance.  Or q0 assembled is a singular configuration:
      rows dependent there but not at the configurations around it (a dead point), where no subset
      of the rows is independent at the start.

    The choice is made once, for the configurations near q0: the rows of a point constraint are world
    components, so a planar loop whose plane turns far from where it was at q0 (a floating base
    yawing by a quarter turn) can make the kept rows dependent; the run then stops with the
    constraint-failure status."""
    from .kinematics import host_integrate_q
    tree = mech.tree
    labels = row_labels(mech)
    rng = np.random.default_rng(seed)
    q0 = np.asarray(tree.q0, np.float64)
    q, res, ok = host_assemble(mech, q0)
    undecided = start = None
    if not ok:
        r = host_phi_and_jacobian(mech, q)[0]
        worst = ", ".join(labels[i] for i in np.argsort(-np.abs(r))[:3])
        start = (f"the loop constraints cannot be assembled from the initial configuration q0: |Φ| = {res:.3g} after "
                 f"Gauss-Newton from it (largest rows: {worst}); give a consistent initial state "
                 "(ModelBuilder.set_initial_state) or check the constraint frames")
        for _ in range(RESTARTS):
            q, _, ok = host_assemble(mech, host_integrate_q(tree, q0, rng.uniform(-0.05, 0.05, tree.nv)))
            if ok:
                break
    G0 = host_phi_and_jacobian(mech, q)[1]
    s0, U0, V0 = _singular(G0)
    rank0 = int(np.sum(s0 > DEPENDENT_TOL))
    N = V0[rank0:].T                        # the null space of Φ_q at q: the manifold's tangents
    rank, G, W = rank0, G0, U0[:, rank0:]
    for _ in range(SAMPLES if ok and N.shape[1] else 0):
        dx = N @ rng.standard_normal(N.shape[1])
        dx *= SAMPLE_STEP / max(float(np.abs(dx).max()), 1e-300)
        for _ in range(4):
            qs, _, ok_s = host_assemble(mech, host_integrate_q(tree, q, dx))
            if ok_s:
                break
            dx = 0.5 * dx
        if not ok_s:
            continue
        Gs = host_phi_and_jacobian(mech, qs)[1]
        s, U, _ = _singular(Gs)
        grey = np.flatnonzero((s > DEPENDENT_TOL) & (s < INDEPENDENT_TOL))
        if grey.size and undecided is None:
            undecided = (f"cannot decide the rank of the loop constraints: near q0 the row-scaled constraint Jacobian "
                         f"has a singular value {s[grey[0]]:.2g} x the largest, neither dependent "
                         f"(<= {DEPENDENT_TOL:g}) nor independent (>= {INDEPENDENT_TOL:g}), in rows "
                         f"{_rows_in(labels, U[:, grey[0]])}: nearly redundant constraints (joint axes or anchors "
                         "that make a loop almost, but not exactly, planar?); make them exactly redundant or "
                         "clearly independent")
        ranks = int(np.sum(s > DEPENDENT_TOL))
        if ranks > rank:
            rank, G, W = ranks, Gs, U[:, ranks:]
    if rank0 < rank and start is None:
        P = U0[:, rank0:] - W @ (W.T @ U0[:, rank0:])      # the dependencies at q0 that are not generic
        start = (f"the initial configuration q0 is a singular configuration of the loop constraints: rows "
                 f"{_rows_in(labels, P[:, np.argmax(np.linalg.norm(P, axis=0))])} are dependent there (rank "
                 f"{rank0}) but not at configurations near it (rank {rank}); start away from it "
                 "(ModelBuilder.set_initial_state)")
    if rank == mech.nc:
        return None, q, undecided, start
    return _independent(G, W), q, undecided, start


def _independent(G, W):
    """The rows kept, given the left null vectors W (nc, k) of the row-scaled Φ_q G: rows of negligible
    norm are dropped, and for each remaining dependency the row with the largest coefficient in it,
    the coefficients taken on the unscaled rows (column-pivoted QR of them): where two rows are
    parallel, the one a rotation of the loop keeps expressible the longer (a planar loop whose plane
    is tilted by a small angle from a world plane drops its row across the plane, not a row in it)."""
    n = np.linalg.norm(G, axis=1)
    zero = np.flatnonzero(n <= DEPENDENT_TOL * max(float(n.max(initial=0.0)), 1e-300))
    live = np.setdiff1d(np.arange(G.shape[0]), zero)
    k = W.shape[1] - zero.size
    drop = set(int(i) for i in zero)
    if k > 0:
        piv = scipy.linalg.qr((W[live] / n[live, None]).T, pivoting=True, mode="r")[1]
        drop |= set(int(i) for i in live[piv[:k]])
    return tuple(i for i in range(G.shape[0]) if i not in drop)


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
