"""Static topology and the level-parallel tree traversals every kernel uses.

The topology is compiled once, in NumPy, when a model is built.  It is hashable
(it is a static field of :class:`jaxmbd.Model`), so changing only physical
parameters never recompiles.

Nodes.  Tree passes run over the *expanded* graph of Featherstone ("Efficient
factorization of the joint-space inertia matrix for branched kinematic trees",
IJRR 24(6), 2005, §2): one node per degree of freedom, with parent array
``dof_parent``.  A joint with k DoFs is a chain of k nodes; the joint's
transform sits on its first node, the body's inertia on its last, and the
transforms between them are identities (all of a joint's motion axes are
expressed in the child body frame).  Every node then has exactly one motion
axis, so no kernel pads joints to a common width or inverts small matrices.

Level schedule.  Nodes are grouped by depth (depth 1 = child of the world).
Level ``l`` holds every node of depth ``l + 1``, padded to the widest level
``W``.  A parent always sits one level above its children, so within a level
no node depends on another: a forward pass (root to leaves) updates a whole
level at once from the level above, and a backward pass (leaves to root) sums
each node's children from the level below.  Each pass is one ``jax.lax.scan``
over the levels: the number of sequential steps is the depth of the expanded
tree and the traced program does not grow with the number of bodies.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import joints


def depths(parent):
    """Depth of every node of a regularly numbered parent array (-1 = base): 1 for
    the base's children."""
    d = np.zeros(len(parent), np.int64)
    for i, p in enumerate(parent):
        d[i] = 1 if p < 0 else d[p] + 1
    return d


class Topology:
    """Hashable, static description of a kinematic tree (regular numbering).

    Attributes (NumPy / tuples, never traced):
      parent[i]      parent body of body i, -1 for the world; parent[i] < i.
      jtype[i]       joint type of body i's inboard joint.
      q_adr, v_adr   first index of body i's coordinates in q and v.
      depth[i]       1 for children of the world.
      dof_parent[k]  expanded (per-DoF) parent array, -1 for the root
                     (MuJoCo's dof_parentid; Featherstone 2005, §2).
      dof_body[k]    body owning DoF k.
      subtree_size[i] number of bodies in the subtree of body i (itself included).
    """

    def __init__(self, names, parent, jtype):
        self.names = tuple(names)
        self.parent = tuple(int(p) for p in parent)
        self.jtype = tuple(joints.canonical(t) for t in jtype)
        self._key = (self.names, self.parent, self.jtype)
        n = len(self.parent)
        self.n_bodies = n
        for i, p in enumerate(self.parent):
            if not -1 <= p < i:
                raise ValueError(f"topology is not regularly numbered at body {i} (parent {p})")
        nq_j = np.array([joints.get(t).nq for t in self.jtype], dtype=np.int64)
        nv_j = np.array([joints.get(t).nv for t in self.jtype], dtype=np.int64)
        self.nq_body = nq_j
        self.nv_body = nv_j
        self.q_adr = np.concatenate([[0], np.cumsum(nq_j)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
        self.v_adr = np.concatenate([[0], np.cumsum(nv_j)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
        self.nq = int(nq_j.sum())
        self.nv = int(nv_j.sum())
        parent_np = np.array(self.parent, dtype=np.int64)
        self.parent_np = parent_np

        self.depth = depths(parent_np)
        size = np.ones(n, np.int64)
        for i in range(n - 1, -1, -1):
            if parent_np[i] >= 0:
                size[parent_np[i]] += size[i]
        self.subtree_size = size

        self._build_dofs()
        self._build_levels(self.dof_parent, self.dof_depth)
        self._build_joint_groups()

    # -- hashing: equal topologies share compiled functions ------------------
    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, Topology) and self._key == other._key

    def __repr__(self):
        return f"Topology(bodies={self.n_bodies}, nq={self.nq}, nv={self.nv}, depth={self.max_depth})"

    @property
    def max_depth(self):
        return int(self.depth.max()) if self.n_bodies else 0

    # -- DoF-level tables ------------------------------------------------------
    def _build_dofs(self):
        n, nv = self.n_bodies, self.nv
        # every body has at least one DoF (welded bodies are merged at build time):
        # a joint's first DoF hangs from the parent's last, the others form a chain
        self.dof_body = np.repeat(np.arange(n), self.nv_body)
        self.body_last_dof = self.v_adr + self.nv_body - 1
        self.dof_is_first = np.zeros(nv, bool)
        self.dof_is_first[self.v_adr] = True
        self.dof_is_last = np.zeros(nv, bool)
        self.dof_is_last[self.body_last_dof] = True
        p = self.parent_np[self.dof_body]
        self.dof_parent = np.where(self.dof_is_first, np.where(p >= 0, self.body_last_dof[np.maximum(p, 0)], -1),
                                   np.arange(nv) - 1)
        self.dof_depth = depths(self.dof_parent)
        dof_parent = self.dof_parent
        # Compact per-row ancestor storage, MuJoCo's legacy qM order: row k holds
        # [H(k,k), H(k,λ(k)), H(k,λ(λ(k))), ...]; dof_Madr[k] is the diagonal.
        rows, cols, adr = [], [], []
        for k in range(nv):
            adr.append(len(rows))
            j = k
            while j >= 0:
                rows.append(k)
                cols.append(j)
                j = dof_parent[j]
        self.M_rows = np.array(rows, np.int64)
        self.M_cols = np.array(cols, np.int64)
        self.dof_Madr = np.array(adr, np.int64)
        self.nM = len(rows)
        # support[i, k] = 1 if DoF k moves body i (k on the path from the root)
        support = np.zeros((n, nv), bool)
        for i in range(n):
            p = self.parent_np[i]
            if p >= 0:
                support[i] = support[p]
            support[i, self.v_adr[i]:self.v_adr[i] + self.nv_body[i]] = True
        self.support = support
        # ancestors[i, j] = 1 if body j is body i or one of its ancestors
        anc = np.zeros((n, n), bool)
        for i in range(n):
            p = self.parent_np[i]
            if p >= 0:
                anc[i] = anc[p]
            anc[i, i] = True
        self.ancestors = anc
        # coordinate index of each DoF whose joint has scalar coordinates (q̇ = v), else -1
        qadr = np.full(nv, -1, np.int64)
        for i in range(n):
            if joints.get(self.jtype[i]).scalar_coords:
                qadr[self.v_adr[i]:self.v_adr[i] + self.nv_body[i]] = self.q_adr[i] + np.arange(self.nv_body[i])
        self.dof_qadr = qadr

    # -- level schedule ----------------------------------------------------------
    def _build_levels(self, parent, depth):
        """Per-level slot tables over the nodes (padding slots repeat the level's first slot)."""
        n = len(parent)
        L = int(depth.max()) if n else 0
        n_children = np.bincount(parent[parent >= 0], minlength=n) if n else np.zeros(0, np.int64)
        by_level = [np.flatnonzero(depth == l + 1) for l in range(L)]
        W = max((len(b) for b in by_level), default=1)
        slot = np.zeros(n, np.int64)
        for bodies in by_level:
            slot[bodies] = np.arange(len(bodies))
        C = max(int(n_children.max()) if n else 1, 1)
        lev = np.zeros((L, W), np.int64)
        par_slot = np.zeros((L, W), np.int64)
        child_slot = np.full((L, W, C), W, np.int64)  # W = an appended zero row
        for l, bodies in enumerate(by_level):
            lev[l, : len(bodies)] = bodies
            if l > 0:
                par_slot[l, : len(bodies)] = slot[parent[bodies]]
                for b in bodies:
                    p = parent[b]
                    k = int(np.sum(child_slot[l - 1, slot[p]] < W))
                    child_slot[l - 1, slot[p], k] = slot[b]
        # Padding slots replicate the level's first slot (node, parent, children):
        # they compute exactly what it computes.  Padding with an unrelated node
        # (say node 0 without its children) can divide by zero in a padding slot
        # (an intermediate node of a multi-DoF joint has no inertia of its own),
        # whose result is discarded but whose reverse-mode cotangent 0 * inf
        # made NaN gradients (a spherical or free root joint, any padded level).
        for l, bodies in enumerate(by_level):
            k = len(bodies)
            lev[l, k:] = lev[l, 0]
            par_slot[l, k:] = par_slot[l, 0]
            child_slot[l, k:] = child_slot[l, 0]
        self.n_levels = L
        self.level_width = W
        self.level_node = lev          # (L, W) node in each slot
        self.level_parent_slot = par_slot  # (L, W) parent's slot in level l-1
        self.level_child_slot = child_slot  # (L, W, C) children's slots in level l+1
        self.level_pos = np.array([(depth[i] - 1) * W + slot[i] for i in range(n)], np.int64)

    def _build_joint_groups(self):
        """Bodies grouped by joint type, with gather tables for q and v."""
        groups = []
        for jt in joints.registered():  # registration order
            t = jt.name
            bodies = np.array([i for i in range(self.n_bodies) if self.jtype[i] == t], np.int64)
            if len(bodies) == 0:
                continue
            qi = self.q_adr[bodies][:, None] + np.arange(jt.nq)[None, :]
            vi = self.v_adr[bodies][:, None] + np.arange(jt.nv)[None, :]
            groups.append((t, bodies, qi, vi))
        self.joint_groups = tuple(groups)
        # group order -> body order and DoF order (inverse permutations)
        if groups:
            b_order = np.concatenate([g[1] for g in groups])
            v_order = np.concatenate([g[3].reshape(-1) for g in groups])
        else:
            b_order = v_order = np.zeros(0, np.int64)
        self.joint_group_perm = (np.argsort(b_order), np.argsort(v_order))


# --- generic level-parallel traversals ---------------------------------------
#
# The scan carries one level (W slots), never the whole tree: a forward step
# gathers each slot's parent from the previous level's values, a backward step
# gathers each slot's children from the level below (a padded child-slot table,
# so no scatter is needed and no two slots write one place).

def _take(x, idx):
    """x[idx] along axis 0; the static tables are in bounds by construction,
    which spares XLA the clamping of every index."""
    return x.at[idx].get(mode="promise_in_bounds")


def _by_level(topo, tree):
    """(nv, ...) per-node arrays -> (L, W, ...) per-level arrays."""
    lev = jnp.asarray(topo.level_node)
    return jax.tree.map(lambda x: _take(x, lev), tree)


def _unlevel(topo, ys):
    """(L, W, ...) per-level outputs -> (nv, ...) per-node arrays."""
    pos = jnp.asarray(topo.level_pos)
    return jax.tree.map(lambda y: _take(y.reshape((-1,) + y.shape[2:]), pos), ys)


def _nonempty(topo):
    if topo.nv == 0:
        raise ValueError("model has no moving bodies")


def tree_forward(topo, fn, root, inputs):
    """Root-to-leaves pass over the nodes: ``out[k] = fn(out[dof_parent[k]], inputs[k])``.

    root: pytree of the world's values (what every depth-1 node reads as its
    parent's).  inputs: pytree of per-node arrays, leading axis nv.  ``fn`` is
    written for one node and is vmapped over a level.  Returns the per-node
    outputs (leading axis nv).
    """
    _nonempty(topo)
    W = topo.level_width
    vfn = jax.vmap(fn)
    carry0 = jax.tree.map(lambda r: jnp.broadcast_to(r, (W,) + jnp.shape(r)), root)

    def step(prev, xs):
        inp, pslot = xs
        new = vfn(jax.tree.map(lambda p: _take(p, pslot), prev), inp)
        return new, new

    _, ys = jax.lax.scan(step, carry0, (_by_level(topo, inputs), jnp.asarray(topo.level_parent_slot)))
    return _unlevel(topo, ys)


def tree_backward(topo, fn, acc, inputs):
    """Leaves-to-root pass with accumulation into parents.

    acc: pytree of per-node arrays (leading axis nv), each node's own initial
    value.  For each level, deepest first, ``up, keep = fn(acc[k], inputs[k])``
    where ``acc[k]`` already includes the sum of ``up`` over k's children; ``up``
    must have the structure and shapes of ``acc``.  Returns the per-node
    ``keep`` pytree.
    """
    _nonempty(topo)
    vfn = jax.vmap(fn)
    acc_l = _by_level(topo, acc)
    carry0 = jax.tree.map(lambda a: jnp.zeros_like(a[0]), acc_l)

    def step(up_below, xs):
        a, inp, cslot = xs
        def add_children(a_i, u):
            u = jnp.concatenate([u, jnp.zeros_like(u[:1])], axis=0)
            return a_i + jnp.sum(_take(u, cslot), axis=1)
        a = jax.tree.map(add_children, a, up_below)
        up, keep = vfn(a, inp)
        return up, keep

    _, ys = jax.lax.scan(step, carry0, (acc_l, _by_level(topo, inputs), jnp.asarray(topo.level_child_slot)),
                         reverse=True)
    return _unlevel(topo, ys)
