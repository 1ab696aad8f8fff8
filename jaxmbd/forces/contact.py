"""Contact between collision geoms: the force element that turns the narrow
phase of :mod:`jaxmbd.contact` into generalized forces, with the smooth law
of :mod:`jaxmbd.forces.law`.

Structure is static, numbers are traced.  The geoms' bodies and types and
the candidate pairs (chosen once when the model is built, by MuJoCo's rules:
:func:`jaxmbd.contact.pairs.select_pairs`) are static index tables, so a
batched kernel does a fixed amount of work; the geoms' poses on their bodies,
their sizes and every law parameter of every pair (stiffness, exponent,
damping, onset width, friction, smoothing velocity, margin) are arrays that
``vmap`` and ``grad`` reach.

Broad phase (:meth:`Contact.select`).  Pairs are grouped by their two geom
types.  A group has a static capacity K (:func:`capacities`: by default all
its pairs when it has few, else about twice the pairs within reach at ``q0``
plus headroom): the narrow phase runs on the K pairs whose bounding spheres
(or sphere and plane) are closest, so shapes stay static under jit, vmap and
grad and a batch does bounded work, as MJX's and MuJoCo Warp's contact
capacities do.  While no group has more pairs within reach than its
capacity, the forces equal the all-pairs evaluation exactly (a pair left out
cannot touch); a state where one does is reported
(:meth:`Contact.overflow`, :func:`jaxmbd.simulate`'s status
``CONTACT_OVERFLOW``), never silently dropped.

The narrow phase gives a fixed number of candidate contacts per pair (one
for two spheres, eight for a box on a plane, ...), with n the normal from
geom 1 to geom 2 and dist the signed distance:

* penetration δ = margin - dist, its rate δ̇ = -n·(v₂ - v₁) (the relative
  velocity of the two bodies' material points at the contact point);
* normal force f_n = law.normal_force(δ, δ̇, k, p, c, w, b) ≥ 0 pushing geom 2
  along +n and geom 1 along -n;
* friction (law.friction_force, basis-free): sliding against the tangential
  slip velocity (coefficient μ₁), torsion against the relative spin about n
  (μ₂, a length; condim ≥ 4), rolling against the relative angular velocity
  in the tangent plane (μ₃, a length; condim 6), all inside one elliptic cone;
* the generalized force of the equal and opposite wrenches without any
  contact Jacobian: the bodies' world twists come from the DoFs' world axes
  (one forward pass), the wrenches are summed per body at the world origin
  and mapped to joint space by the subtree sums of the RNEA's backward pass
  (:func:`jaxmbd.kinematics.kinematics_and_axes`; Featherstone, Rigid Body
  Dynamics Algorithms, §5.3).  Every quantity is an exact function of q and
  v, so the iteration matrices and gradients through contact are exact.

A contact on the world and one body depends only on the DoFs that move the
body (its path to the root): the tree's branch pattern, so the sparse
iteration matrix stays exact.  Two moving bodies couple their paths: the
element declares it (``couplings``) and the sparse matrix adds it exactly."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..contact import geometry as G
from ..contact.convex import KINDS as _KINDS, convex as _convex
from ..kinematics import forward_kinematics, kinematics_and_axes
from .base import JointElement, dofs_of_bodies, make
from .law import friction_force, normal_force, normal_potential

FRICTION_DIMS = {1: 0, 3: 1, 4: 2, 6: 3}   # condim -> how many of (slide, torsion, roll) act
FRICTION_ROWS = {1: 0, 3: 2, 4: 3, 6: 5}   # condim -> the soft law's frictional rows per contact


class Contact(JointElement):
    """The contacts of a model (built by :meth:`jaxmbd.ModelBuilder.build` from ``add_geom``,
    ``add_contact_pair`` and ``exclude_contact``; not created directly).

    Static: ``geom_names``, ``geom_body`` (moving host index, -1 the world), ``geom_type`` (type
    names), ``groups`` ((type1, type2, ((g1, g2), ...)), ...), ``capacity`` (per group: how many of
    its pairs the narrow phase sees, see :meth:`select`), ``geom_mesh`` (a mesh geom's index into
    the mesh arrays, -1 for the primitives) and ``mesh_nvert``, ``mesh_nplane``, ``mesh_nedge`` (each
    mesh's hull vertex, plane and edge counts).  Traced, per geom: ``geom_rot`` (ng, 3, 3) and
    ``geom_pos`` (ng, 3) on the host, ``geom_size`` (ng, 3), ``geom_rbound`` (ng,) the radius of a
    sphere about the geom's origin that holds it (0 for a plane), ``geom_half`` (ng, 3) the half
    extents of a box about the geom's origin, along its axes, that holds it; per mesh: ``mesh_verts`` (nm, V, 3),
    ``mesh_planes`` (nm, F, 4) and ``mesh_edges`` (nm, E, 2, 3) of its collision hull in the geom frame
    (:class:`jaxmbd.contact.geometry.Mesh`; the planes and edges are the vertices' hull at build time:
    scale or move a mesh through all three together).  The collision hull has at most ``maxhullvert``
    vertices (the geom's, else :data:`MAXHULLVERT_DEFAULT`; the mass properties do not use it).  The
    arrays are stored padded to the model's largest hull, and each group of pairs gets them cut to its
    own largest (:meth:`mesh_of`); per pair
    (in group order): ``stiffness``, ``exponent``, ``damping``, ``width``, ``viscous``, ``friction`` (np, 3:
    slide, torsion, roll; zero beyond the pair's condim), ``smoothing`` (m/s), ``margin``."""
    geom_names: tuple = eqx.field(static=True)
    geom_body: tuple = eqx.field(static=True)
    geom_type: tuple = eqx.field(static=True)
    groups: tuple = eqx.field(static=True)
    capacity: tuple = eqx.field(static=True)
    geom_mesh: tuple = eqx.field(static=True)
    mesh_nvert: tuple = eqx.field(static=True)
    mesh_nplane: tuple = eqx.field(static=True)
    mesh_nedge: tuple = eqx.field(static=True)
    geom_rot: jax.Array
    geom_pos: jax.Array
    geom_size: jax.Array
    geom_rbound: jax.Array
    geom_half: jax.Array
    mesh_verts: jax.Array
    mesh_planes: jax.Array
    mesh_edges: jax.Array
    stiffness: jax.Array
    exponent: jax.Array
    damping: jax.Array
    width: jax.Array
    viscous: jax.Array
    friction: jax.Array
    smoothing: jax.Array
    margin: jax.Array
    law: str = eqx.field(static=True)          # "penalty", "soft" or "mixed": which pairs use :mod:`.soft`
    rows: int = eqx.field(static=True)         # soft law: how many candidates enter the solve (deepest first)
    fdim: int = eqx.field(static=True)         # soft law: frictional rows per contact (0, 2, 3 or 5)
    soft: jax.Array = None                     # (np,) 1 where the pair follows the soft law
    solref: jax.Array = None                   # (np, 2)
    solimp: jax.Array = None                   # (np, 5)
    invweight: jax.Array = None                # (np,): the two bodies' translational body_invweight0, summed
    impratio: jax.Array = None                 # (): frictional over normal impedance (MuJoCo's impratio)
    cone: str = eqx.field(static=True, default="pyramidal")   # soft law: "pyramidal" or "elliptic"
    geom_hfield: tuple = eqx.field(static=True, default=())     # per geom: its height field's index, -1 none
    hfield_dims: tuple = eqx.field(static=True, default=())     # per height field: (nrow, ncol)
    hfield_window: tuple = eqx.field(static=True, default=())   # ((type1, type2), (kr, kc)) per hfield group
    hfield_data: jax.Array = None              # (nh, R, C) normalized elevations, padded
    hfield_size: jax.Array = None              # (nh, 4): rx, ry, top, base

    def bind(self, ctx):   # built bound (ModelBuilder._contact_element)
        return self

    @classmethod
    def merge(cls, elements):
        if len(elements) != 1:
            raise ValueError("a model has one Contact element")
        return elements[0]

    @property
    def n_pairs(self):
        return sum(len(g[2]) for g in self.groups)

    def pair_list(self):
        """((geom1 name, geom2 name), ...) in the order of the per-pair arrays."""
        return tuple((self.geom_names[a], self.geom_names[b]) for _, _, rows in self.groups for a, b in rows)

    def couplings(self, topo):
        out = set()
        for _, _, rows in self.groups:
            for a, b in rows:
                ba, bb = self.geom_body[a], self.geom_body[b]
                if ba >= 0 and bb >= 0:
                    out.add(dofs_of_bodies(topo, (ba, bb)))
        return tuple(sorted(out))

    # -- geometry ----------------------------------------------------------------------------------
    def mesh_of(self, g, among=None):
        """The batched :class:`jaxmbd.contact.geometry.Mesh` of the mesh geoms g (indices, static or
        traced), padded to the largest hull among the static geom indices ``among`` (default g
        itself): the stored arrays cut (their padding repeats a hull's first vertex, plane and edge,
        so the cut keeps every hull whole), so a group's narrow phase works at the size of its own
        hulls, not the model's largest."""
        gmesh = np.asarray(self.geom_mesh, np.int64)
        nvert = np.asarray(self.mesh_nvert, np.int64)
        ref = gmesh[np.asarray(g if among is None else among, np.int64)]
        nv = int(nvert[ref].max(initial=1))
        nf = int(np.asarray(self.mesh_nplane, np.int64)[ref].max(initial=1))
        ne = int(np.asarray(self.mesh_nedge, np.int64)[ref].max(initial=1))
        if isinstance(g, jax.Array):
            m = jnp.asarray(gmesh)[g]
            valid = jnp.arange(nv)[None, :] < jnp.asarray(nvert)[m][:, None]
        else:
            m = gmesh[np.asarray(g, np.int64)]
            valid = np.arange(nv)[None, :] < nvert[m][:, None]
        return G.Mesh(self.mesh_verts[m, :nv], self.mesh_planes[m, :nf], valid, self.mesh_edges[m, :ne])

    def hfield_of(self, g, key):
        """The batched :class:`jaxmbd.contact.hfield.HField` of the height-field geoms g (indices, static
        or traced) for the group of type pair ``key`` (its static cell window)."""
        from ..contact.hfield import HField
        window = dict(self.hfield_window)[key]
        ghf, dims = np.asarray(self.geom_hfield, np.int64), np.asarray(self.hfield_dims, np.int32).reshape(-1, 2)
        h = jnp.asarray(ghf)[g] if isinstance(g, jax.Array) else ghf[np.asarray(g, np.int64)]
        return HField(self.hfield_data[h], self.hfield_size[h], jnp.asarray(dims)[h],
                      jnp.zeros((np.shape(h)[0],) + tuple(window), self.hfield_size.dtype))

    def geom_poses(self, kin):
        """(R (ng, 3, 3), p (ng, 3)): every geom's world pose from the bodies' (a :class:`Kinematics`)."""
        hosts = np.asarray(self.geom_body, np.int64)
        b = jnp.asarray(np.maximum(hosts, 0))
        world = jnp.asarray(hosts < 0)
        Rb = jnp.where(world[:, None, None], jnp.eye(3, dtype=kin.rot.dtype), kin.rot[b])
        pb = jnp.where(world[:, None], 0.0, kin.pos[b])
        return Rb @ self.geom_rot, pb + jnp.einsum("gij,gj->gi", Rb, self.geom_pos)

    def pair_bounds(self, Rg, pg):
        """Per group, a lower bound (np_g,) of each pair's signed distance minus its margin: the larger
        of the gaps of the geoms' bounding spheres and of their bounding boxes (a separating-axis test
        over the boxes' 15 axes), or against a plane the gap of the bounding box.  The projections of
        two convex sets on any unit axis are at most their signed distance apart (its negative, the
        penetration depth, is the least overlap over all axes), so a pair whose bound is positive has
        no candidate within its margin and its force is zero (the narrow phase's candidates are never
        closer than the geoms themselves)."""
        if not self.groups:
            return []
        rows, plane, splits = _pair_tables(self.groups)
        gap = jnp.zeros(len(rows), pg.dtype)
        # every pair of a kind in one pass (a few operations, not a few per group)
        on_plane, apart = np.flatnonzero(plane), np.flatnonzero(~plane)
        if len(on_plane):
            a, b = rows[on_plane, 0], rows[on_plane, 1]
            n, R2 = Rg[a][:, :, 2], Rg[b]
            reach = jnp.sum(self.geom_half[b] * jnp.abs(jnp.sum(n[..., None] * R2, 1)), -1)
            gap = gap.at[on_plane].set(jnp.sum(n * (pg[b] - pg[a]), -1) - reach)
        if len(apart):
            a, b = rows[apart, 0], rows[apart, 1]
            d = pg[b] - pg[a]
            sphere = jnp.sqrt(jnp.sum(d * d, -1) + 1e-300) - self.geom_rbound[a] - self.geom_rbound[b]
            box = _box_gap(Rg[a], self.geom_half[a], Rg[b], self.geom_half[b], d)
            gap = gap.at[apart].set(jnp.maximum(sphere, box))
        return jnp.split(jax.lax.stop_gradient(gap - self.margin), splits)

    @property
    def culled(self):
        """Whether any group keeps fewer pairs than it has (a broad phase runs)."""
        return any(k < len(rows) for (_, _, rows), k in zip(self.groups, self.capacity))

    def select(self, Rg, pg):
        """The broad phase: per group, the geom pairs the narrow phase sees ((K, 2) geom indices and
        (K,) pair indices, K = ``capacity``); whether any group has more pairs within reach (bound
        ≤ 0, :meth:`pair_bounds`) than its capacity; and per group whether any pair is within reach
        (None for a group taken whole).  A group whose capacity is its pair count is taken whole
        (static indices, no bound computed); another keeps its K pairs of lowest bound.  While no
        group overflows, every pair left out has a positive bound and so zero force: the forces
        equal the all-pairs evaluation, and stay continuous as pairs enter and leave the kept set
        (a pair enters before its bound reaches zero)."""
        sel, reach, overflow, start = [], [], jnp.array(False), 0
        bounds = self.pair_bounds(Rg, pg) if self.culled else [None] * len(self.groups)
        for (_, _, rows), k, b in zip(self.groups, self.capacity, bounds):
            rows = np.asarray(rows, np.int64).reshape(-1, 2)
            n = len(rows)
            if k >= n:
                sel.append((rows, np.arange(start, start + n)))
                reach.append(None)
            else:
                idx = jax.lax.top_k(-b, k)[1]
                sel.append((jnp.asarray(rows)[idx], start + idx))
                within = b <= 0
                overflow = overflow | (jnp.sum(within) > k)
                reach.append(jnp.any(within))
            start += n
        return sel, overflow, reach

    @property
    def n_candidates(self):
        """How many candidate contacts the narrow phase gives (static)."""
        def size(t, geoms, key):     # a mesh side's count depends only on its group's padded hull sizes (static)
            if t == "hfield":
                return self.hfield_shape(key)
            if t != "mesh":
                return None
            m = np.asarray(self.geom_mesh, np.int64)[np.asarray(geoms, np.int64)]
            nv = int(np.asarray(self.mesh_nvert)[m].max())
            nf = int(np.asarray(self.mesh_nplane)[m].max())
            ne = int(np.asarray(self.mesh_nedge)[m].max())
            return G.Mesh(np.zeros((nv, 3)), np.zeros((nf, 4)), np.ones(nv, bool), np.zeros((ne, 2, 3)))
        total = 0
        for (t1, t2, rows), k in zip(self.groups, self.capacity):
            r = np.asarray(rows, np.int64).reshape(-1, 2)
            total += k * G.num_contacts(t1, t2, size(t1, r[:, 0], (t1, t2)), size(t2, r[:, 1], (t1, t2)))
        return total

    def hfield_shape(self, key):
        """A stand-in :class:`jaxmbd.contact.hfield.HField` with the static window of the group of type
        pair ``key`` (what :func:`jaxmbd.contact.geometry.num_contacts` needs)."""
        from ..contact.hfield import HField
        return HField(np.zeros((2, 2)), np.ones(4), np.array([2, 2]), np.zeros(dict(self.hfield_window)[key]))

    @property
    def can_overflow(self):
        """Whether a state can overflow a capacity: a culled group, or more soft candidates than
        ``rows``."""
        return self.culled or (self.has_soft and self.n_candidates > self.rows)

    def overflow(self, model, q):
        """Whether at q the broad phase finds more pairs within reach than a group's capacity, or
        more of the soft pairs' candidates are within their margin than the solve's ``rows`` (then
        :func:`jaxmbd.simulate` stops the member with status ``CONTACT_OVERFLOW``)."""
        kin = forward_kinematics(model, q)
        out = jnp.array(False)
        if self.culled:
            out = self.select(*self.geom_poses(kin))[1]
        if self.has_soft and self.n_candidates > self.rows:
            out = out | self.soft_candidates(kin)["overflow"]
        return out

    def candidates(self, model, q):
        """The candidate contacts at q of the pairs the broad phase keeps: dict of dist (nc,), pos
        (nc, 3), normal (nc, 3), tangent (nc, 3) (the first tangent of MuJoCo's contact frame,
        :func:`jaxmbd.contact.contact_frame`), pair (nc,) (index into the per-pair arrays), body1, body2 (nc,)
        host indices (-1 the world).  A culled group none of whose pairs is within reach
        (:meth:`pair_bounds`) skips its narrow phase: its candidates report dist 1e9 (never in
        contact; their force is zero either way)."""
        return self._candidates(forward_kinematics(model, q))

    def _candidates(self, kin):
        Rg, pg = self.geom_poses(kin)
        sel, _, reachable = self.select(Rg, pg)
        hosts = np.asarray(self.geom_body, np.int64)
        xp = jnp if self.culled else np     # without a broad phase every index stays static

        def shape(g, t, among, key):     # the geoms' sizes, or their Mesh or HField (batched)
            if t == "hfield":
                return self.hfield_of(g, key)
            return self.geom_size[g] if t != "mesh" else self.mesh_of(g, among)
        units, merged = [], []    # (narrow phase, its arguments, g1, g2, pair indices, reach)
        for (t1, t2, all_rows), (rows, pidx), reach in zip(self.groups, sel, reachable):
            g1, g2 = rows[:, 0], rows[:, 1]
            if (t1, t2) in _CONVEX_PRIMITIVES:
                merged.append((t1, t2, g1, g2, pidx, reach))
                continue
            every = np.asarray(all_rows, np.int64).reshape(-1, 2)
            args = ((Rg[g1], pg[g1]), shape(g1, t1, every[:, 0], (t1, t2)), (Rg[g2], pg[g2]),
                    shape(g2, t2, every[:, 1], (t1, t2)))
            units.append((lambda a, t1=t1, t2=t2: G.collide_batch(t1, t2, *a), args, g1, g2, pidx, reach))
        if merged:     # the GJK/EPA pairs of every type in one narrow phase (the types traced: one program)
            g1, g2, pidx = (xp.concatenate([xp.asarray(m[i]) for m in merged]) for i in (2, 3, 4))
            k1, k2 = (np.concatenate([np.full(len(m[2]), _KINDS[m[i]], np.int32) for m in merged]) for i in (0, 1))
            reaches = [m[5] for m in merged]
            reach = None if any(r is None for r in reaches) else jnp.any(jnp.stack(reaches))
            args = (k1, Rg[g1], pg[g1], self.geom_size[g1], k2, Rg[g2], pg[g2], self.geom_size[g2])
            units.append((_convex_batch, args, g1, g2, pidx, reach))
        dist, pos, nrm, tan, pair, b1, b2 = [], [], [], [], [], [], []
        for narrow, args, g1, g2, pidx, reach in units:
            if reach is None:
                c = narrow(args)
            else:   # a culled group none of whose pairs is within reach: no narrow phase (skipped unless batched)
                c = jax.lax.cond(reach, narrow, lambda a, f=narrow: _far(jax.eval_shape(f, a)), args)
            n, k = c.dist.shape
            dist.append(c.dist.reshape(-1))
            pos.append(c.pos.reshape(-1, 3))
            nrm.append(c.frame[..., 0, :].reshape(-1, 3))
            tan.append(c.frame[..., 1, :].reshape(-1, 3))
            rep = lambda x: xp.repeat(xp.asarray(x), k)  # noqa: E731
            pair.append(rep(pidx))
            b1.append(rep(xp.asarray(hosts)[g1]))
            b2.append(rep(xp.asarray(hosts)[g2]))
        cat = xp.concatenate
        return dict(dist=jnp.concatenate(dist), pos=jnp.concatenate(pos), normal=jnp.concatenate(nrm),
                    tangent=jnp.concatenate(tan), pair=cat(pair), body1=cat(b1), body2=cat(b2))

    # -- forces -----------------------------------------------------------------------------------
    def evaluate(self, model, q, v):
        """Every candidate contact the broad phase keeps at (q, v): the candidates of
        :meth:`candidates` plus ``normal_force`` (nc,), ``friction_force`` (nc, 3, world, on geom 2),
        ``friction_moment`` (nc, 3) and the generalized force ``tau`` (nv,).

        No contact Jacobian is formed: the bodies' world twists are A (axes * v) and the contact
        wrenches, summed per body at the world origin, map to joint space as
        sum(axes * (Aᵀ W), -1) (:func:`jaxmbd.kinematics.kinematics_and_axes`)."""
        kin, axes = kinematics_and_axes(model, q)
        c = self._candidates(kin)
        A = jnp.asarray(model.topo.support, axes.dtype)                  # (n, nv)
        twist = A @ (axes * v[:, None])                                   # (n, 6): ω, velocity at the origin
        twist = jnp.concatenate([jnp.zeros((1, 6), twist.dtype), twist])  # index 0: the world
        i1, i2 = c["body1"] + 1, c["body2"] + 1
        x = c["pos"]
        rel = twist[i2] - twist[i1]
        wrel = rel[:, :3]
        vrel = rel[:, 3:] + jnp.cross(wrel, x)
        n = c["normal"]
        pr = c["pair"]
        delta = self.margin[pr] - c["dist"]
        vn = jnp.sum(n * vrel, -1)
        fn = normal_force(delta, -vn, self.stiffness[pr], self.exponent[pr], self.damping[pr], self.width[pr],
                          self.viscous[pr])
        if self.law != "penalty":    # the soft pairs' forces come from jaxmbd.forces.soft
            fn = jnp.where(self.soft[pr] > 0, 0.0, fn)
        slip = vrel - vn[:, None] * n
        wn = jnp.sum(n * wrel, -1)
        roll = wrel - wn[:, None] * n
        mu = self.friction[pr]
        u = jnp.concatenate([slip, wn[:, None], roll], axis=1)                       # (nc, 7)
        mu7 = jnp.concatenate([jnp.repeat(mu[:, :1], 3, 1), mu[:, 1:2], jnp.repeat(mu[:, 2:3], 3, 1)], axis=1)
        f7 = friction_force(fn, u, mu7, self.smoothing[pr])
        F = fn[:, None] * n + f7[:, :3]
        M = f7[:, 3:4] * n + f7[:, 4:]
        w = jnp.concatenate([jnp.cross(x, F) + M, F], axis=1)                       # on geom 2, about the origin
        nb = model.topo.n_bodies
        onehot = (jnp.arange(1, nb + 1)[:, None] == i2[None, :]).astype(w.dtype) \
            - (jnp.arange(1, nb + 1)[:, None] == i1[None, :]).astype(w.dtype)      # (n, nc)
        W = onehot @ w                                                               # (n, 6) per body
        tau = jnp.sum(axes * (A.T @ W), -1)
        return dict(c, normal_force=fn, friction_force=f7[:, :3], friction_moment=M, tau=tau,
                    penetration=delta)

    def force(self, model, q, v):
        """The penalty pairs' generalized force (zero where every pair follows the soft law: those
        forces are the constraint stage's, :mod:`jaxmbd.forces.soft`)."""
        if self.law == "soft":
            return jnp.zeros(model.nv, jnp.result_type(q, v, float))
        return self.evaluate(model, q, v)["tau"]

    def energy(self, model, q, m=None):
        """The elastic energy of every penalty contact (law.normal_potential of its penetration): the
        normal force's potential, since the penetration is a function of q alone.  The soft law's
        forces depend on the accelerations and have no potential (zero here)."""
        if self.law == "soft":
            return jnp.zeros((), jnp.result_type(q, float))
        c = self.candidates(model, q)
        pr = c["pair"]
        e = normal_potential(self.margin[pr] - c["dist"], self.stiffness[pr], self.exponent[pr], self.width[pr])
        if self.law == "mixed":
            e = jnp.where(self.soft[pr] > 0, 0.0, e)
        return jnp.sum(e)

    # -- the soft law's rows (jaxmbd.forces.soft) ---------------------------------------------------
    @property
    def has_soft(self):
        return self.law != "penalty"

    def soft_candidates(self, kin):
        """The candidates that enter the soft solve: the ``rows`` deepest of the soft pairs' candidates
        (all of them when there are fewer), as a dict like :meth:`candidates` plus ``index`` (their
        positions among all candidates), ``penetration`` and ``overflow`` (more candidates within
        their margin than ``rows``).  A candidate left out is never within its margin while there is
        no overflow, so the forces are those of all candidates."""
        c = self._candidates(kin)
        pr = c["pair"]
        delta = self.margin[pr] - c["dist"]
        if self.law == "mixed":
            delta = jnp.where(self.soft[pr] > 0, delta, -G._FAR)
        nc = delta.shape[0]
        k = min(self.rows, nc)
        if k < nc:
            idx = jax.lax.top_k(jax.lax.stop_gradient(delta), k)[1]
            overflow = jnp.sum(delta > 0) > k
        else:
            idx = np.arange(nc)
            overflow = jnp.array(False)
        out = {key: jnp.asarray(val)[idx] for key, val in c.items()}
        return dict(out, index=idx, penetration=delta[idx], overflow=overflow)

    def soft_rows(self, model, q, v, kin, axes):
        """(NormalRows, FrictionRows, candidates) of the soft pairs' contacts at (q, v)
        (:mod:`jaxmbd.forces.soft`): per kept candidate one normal row n·(v₂ - v₁) at the contact point,
        and ``fdim`` frictional rows (two sliding, one torsional, two rolling; a row beyond the pair's
        condim has μ = 0 and stays off).  Rows are formed from the DoFs' world axes: the point
        velocity of a body's DoF j is vⱼ + ωⱼ × x on the DoFs that move it."""
        from . import soft as S
        c = self.soft_candidates(kin)
        x, n, pr = c["pos"], c["normal"], c["pair"]
        k = x.shape[0]
        sup = jnp.asarray(np.concatenate([np.zeros((1, model.nv)), np.asarray(model.topo.support, float)]),
                          axes.dtype)
        P = sup[c["body2"] + 1] - sup[c["body1"] + 1]                        # (k, nv): ±1 on the moving DoFs
        w, v0 = axes[:, :3], axes[:, 3:]

        def lin(u):
            return P * (u @ v0.T + jnp.cross(x, u) @ w.T)

        def ang(u):
            return P * (u @ w.T)
        Jn = lin(n)
        solref, solimp, iw = self.solref[pr], self.solimp[pr], self.invweight[pr]
        N = S.NormalRows(Jn, -c["penetration"], Jn @ v, solref, solimp, iw)
        fd = self.fdim
        if fd == 0:
            return N, _no_friction_rows(model.nv, Jn.dtype), c
        t1 = c["tangent"]                                  # MuJoCo's contact frame (G.contact_frame)
        t2 = jnp.cross(n, t1)
        mu = self.friction[pr]
        dirs = [(lin(t1), mu[:, 0]), (lin(t2), mu[:, 0]), (ang(n), mu[:, 1]), (ang(t1), mu[:, 2]),
                (ang(t2), mu[:, 2])][:fd]
        if self.cone == "pyramidal":
            return self._pyramid_rows(N, dirs, mu[:, 0], v), _no_friction_rows(model.nv, Jn.dtype), c
        JT = jnp.stack([d[0] for d in dirs], 1).reshape(k * fd, model.nv)          # contact-major
        muT = jnp.stack([d[1] for d in dirs], 1).reshape(-1)
        d = S.impedance(jnp.abs(N.r), solimp)
        _, B = S.ref_coefficients(solref, solimp)
        Rn = jnp.maximum((1.0 - d) / d * N.invweight, S.MINVAL)
        mu0 = jnp.repeat(mu[:, :1], fd, 1).reshape(-1)
        ratio = jnp.where((muT > 0) & (mu0 > 0), mu0 / jnp.where(muT > 0, muT, 1.0), 1.0)   # rows off: any R > 0
        RT = jnp.repeat(Rn / self.impratio, fd) * ratio ** 2
        on = jnp.repeat(S.activation(-N.r, S.onset_width(solref, solimp)), fd) * (muT > 0)
        T = S.FrictionRows(JT, JT @ v, jnp.repeat(B, fd), RT, on, muT, np.repeat(np.arange(k), fd),
                           jnp.zeros(k * fd, JT.dtype), np.repeat(np.arange(k), fd))
        return N, T, c

    def _pyramid_rows(self, N, dirs, mu0, v):
        """MuJoCo's pyramidal cone: each contact's normal row N and frictional directions (J_j, μ_j)
        become 2 fdim unilateral rows, the cone's edges J_n ± μ_j J_j, all at the contact's
        distance, with R = 2 μ₀² (1 + μ₀²) R_n / impratio (μ₀ the sliding friction, R_n the
        elliptic normal row's regularizer: MuJoCo's, checked against its efc_R in
        tests/test_friction_cones.py).  The normal force is the edges' sum and friction j is
        μ_j (f₊ - f₋).  A contact without friction (condim 1) keeps its plain normal row; edges of
        directions beyond a contact's condim are off."""
        from . import soft as S
        k, fd = N.J.shape[0], len(dirs)
        Jd = jnp.stack([d[0] for d in dirs], 1)                           # (k, fd, nv)
        mud = jnp.stack([d[1] for d in dirs], 1)                          # (k, fd)
        Je = jnp.stack([N.J[:, None] + mud[..., None] * Jd, N.J[:, None] - mud[..., None] * Jd], 2)
        plain = (mu0 <= 0)[:, None] & (jnp.arange(fd) == 0)[None, :]      # a frictionless contact's normal row
        on = jnp.stack([(mud > 0) | plain, mud > 0], 2).astype(Je.dtype).reshape(-1)
        rscale = jnp.where(mu0 > 0, 2.0 * mu0 ** 2 * (1.0 + mu0 ** 2) / self.impratio, 1.0)
        rep = lambda x: jnp.repeat(x, 2 * fd, axis=0)  # noqa: E731
        Je = Je.reshape(k * fd * 2, -1)
        return S.NormalRows(Je, rep(N.r), Je @ v, rep(N.solref), rep(N.solimp), rep(N.invweight), rep(rscale), on)


def _no_friction_rows(nv, dtype):
    from . import soft as S
    return S.FrictionRows(jnp.zeros((0, nv), dtype), *(jnp.zeros(0, dtype),) * 5, np.zeros(0, np.int64),
                          jnp.zeros(0, dtype), np.zeros(0, np.int64))


_CONVEX_PRIMITIVES = {k for k in G._CONVEX if "mesh" not in k}   # the primitive pairs of the generic GJK/EPA


def _convex_batch(args):
    """The GJK/EPA narrow phase (:func:`jaxmbd.contact.convex.convex`) of pairs of any primitive types
    (mjtGeom codes k1, k2 per pair, traced): Contacts with one candidate per pair."""
    k1, R1, p1, s1, k2, R2, p2, s2 = args
    z = jnp.zeros((1, 3), p1.dtype)
    d, pos, n = jax.vmap(lambda *x: _convex(x[0], x[1], x[2], x[3], z, x[4], x[5], x[6], x[7], z))(
        jnp.asarray(k1), R1, p1, s1, jnp.asarray(k2), R2, p2, s2)
    return G.Contacts(d[:, None], pos[:, None], jax.vmap(G.contact_frame)(n)[:, None])


def _pair_tables(groups):
    """(rows (np, 2) geom indices of every pair in group order, (np,) whether its first geom is a plane,
    the group boundaries for ``split``), static."""
    rows = np.concatenate([np.asarray(r, np.int64).reshape(-1, 2) for _, _, r in groups])
    plane = np.concatenate([np.full(len(r), t1 == "plane") for t1, _, r in groups])
    return rows, plane, np.cumsum([len(r) for _, _, r in groups])[:-1]


def _box_gap(R1, e1, R2, e2, d):
    """(k,) the largest gap between the projections of two boxes (rotations R (k, 3, 3) with their axes
    as columns, half extents e (k, 3), centres d = p2 - p1 apart) on their 15 separating axes: a lower
    bound of the boxes' signed distance (axes of near-parallel edges, whose cross product vanishes, are
    left out).  In box 1's frame, with C = R1ᵀ R2 and t = R1ᵀ d (Gottschalk, Lin and Manocha, "OBBTree",
    SIGGRAPH 1996, Table 1): the axes u_i, w_j and u_i x w_j, the last of length
    (C[i+1, j]² + C[i+2, j]²)^½, every product written out (forming the 15 world axes first and
    projecting both boxes on them took several times as long on a CPU)."""
    C = sum(R1[:, m, :, None] * R2[:, m, None, :] for m in range(3))           # (k, 3, 3)
    t = sum(R1[:, m, :] * d[:, m, None] for m in range(3))                     # (k, 3)
    aC = jnp.abs(C)
    gap1 = jnp.abs(t) - e1 - jnp.sum(aC * e2[:, None, :], -1)                             # axes u_i
    gap2 = jnp.abs(jnp.sum(C * t[:, :, None], 1)) - jnp.sum(aC * e1[:, :, None], 1) - e2  # axes w_j
    i1, i2 = np.array([1, 2, 0]), np.array([2, 0, 1])                         # u_i x w_j, [i, j]
    dist = jnp.abs(t[:, i2, None] * C[:, i1, :] - t[:, i1, None] * C[:, i2, :])
    r1 = e1[:, i1, None] * aC[:, i2, :] + e1[:, i2, None] * aC[:, i1, :]
    r2 = e2[:, None, i1] * aC[:, :, i2] + e2[:, None, i2] * aC[:, :, i1]
    norm2 = C[:, i1, :] ** 2 + C[:, i2, :] ** 2
    ok = norm2 > 1e-12
    gap3 = jnp.where(ok, (dist - r1 - r2) / jnp.sqrt(jnp.where(ok, norm2, 1.0)), -jnp.inf).reshape(-1, 9)
    return jnp.max(jnp.concatenate([gap1, gap2, gap3], axis=1), axis=1)


def _far(shapes):
    """Candidates that never touch, of the shapes of a narrow phase's result: dist
    :data:`jaxmbd.contact.geometry._FAR`, the frame the identity."""
    d, p, f = shapes
    return G.Contacts(jnp.full(d.shape, G._FAR, d.dtype), jnp.zeros(p.shape, p.dtype),
                      jnp.broadcast_to(jnp.eye(3, dtype=f.dtype), f.shape))


def bounding_half_extents(gtype, size, verts=None):
    """The half extents of a box about a geom's origin, along the geom's axes, that holds the geom
    (zeros for a plane, whose bound is the half-space test)."""
    size = np.asarray(size, np.float64)
    r, h = size[0], size[1]
    table = {"plane": (0.0, 0.0, 0.0), "sphere": (r, r, r), "capsule": (r, r, h + r), "cylinder": (r, r, h),
             "ellipsoid": tuple(size), "box": tuple(size)}
    if gtype == "mesh":
        return np.max(np.abs(np.asarray(verts, np.float64)), axis=0)
    if gtype == "hfield":          # size: rx, ry, top, base (the height field's own four)
        return np.array([size[0], size[1], max(size[2], size[3])], np.float64)
    if gtype not in table:
        raise ValueError(f"no bounding box for geom type {gtype!r}")
    return np.asarray(table[gtype], np.float64)


def bounding_radius(gtype, size, verts=None):
    """The radius of a sphere about a geom's origin that holds the geom (0 for a plane, which the
    broad phase treats as a half-space)."""
    size = np.asarray(size, np.float64)
    if gtype == "plane":
        return 0.0
    if gtype == "sphere":
        return float(size[0])
    if gtype == "capsule":
        return float(size[0] + size[1])
    if gtype == "cylinder":
        return float(np.hypot(size[0], size[1]))
    if gtype == "ellipsoid":
        return float(np.max(size))
    if gtype == "box":
        return float(np.linalg.norm(size))
    if gtype == "mesh":
        return float(np.max(np.linalg.norm(np.asarray(verts, np.float64), axis=1)))
    if gtype == "hfield":
        return float(np.linalg.norm(bounding_half_extents(gtype, size)))
    raise ValueError(f"no bounding radius for geom type {gtype!r}")


def build_contact(names, hosts, types, rot, pos, size, groups, params, meshes=(), maxhullvert=(), capacity=None,
                  hfields=()):
    """The bound Contact element from build-time tables (``ModelBuilder``): params: dict of per-pair
    arrays in group order (stiffness, exponent, damping, width, friction (np, 3), smoothing, margin);
    meshes: the hull vertex array of every mesh geom, in geom order (None for the primitives);
    maxhullvert: per geom, the collision hull's vertex limit (-1: none; None or missing:
    :data:`MAXHULLVERT_DEFAULT`; :func:`jaxmbd.contact.geometry.make_mesh`); capacity: per group,
    how many pairs the narrow phase sees (None: all); hfields: per geom, a height field's (normalized
    elevation (nrow, ncol), size (rx, ry, top, base)) (None for the other types)."""
    f = lambda x: jnp.asarray(np.asarray(x, np.float64))  # noqa: E731
    meshes = list(meshes) + [None] * (len(names) - len(meshes))
    caps = list(maxhullvert) + [None] * (len(names) - len(maxhullvert))
    hull_of = {i: G.make_mesh(m, what=f"geom {n!r}", maxhullvert=MAXHULLVERT_DEFAULT if c is None else c)
               for i, (n, m, c) in enumerate(zip(names, meshes, caps)) if m is not None}
    hulls = list(hull_of.values())
    nv = max([len(h.verts) for h in hulls], default=1)
    nf = max([len(h.planes) for h in hulls], default=1)
    ne = max([len(h.edges) for h in hulls], default=1)
    padded = [G.pad_mesh(h, nv, nf, ne) for h in hulls]
    geom_mesh, k = [], 0
    for m in meshes:
        geom_mesh.append(-1 if m is None else k)
        k += m is not None
    hfields = list(hfields) + [None] * (len(names) - len(hfields))
    size4 = [s if h is None else h[1] for s, h in zip(size, hfields)]
    rbound = [bounding_radius(t, s, hull_of[i].verts if i in hull_of else None)
              for i, (t, s) in enumerate(zip(types, size4))]
    half = [bounding_half_extents(t, s, hull_of[i].verts if i in hull_of else None)
            for i, (t, s) in enumerate(zip(types, size4))]
    hf = _hfield_tables(types, hfields, groups, rbound)
    if capacity is None:
        capacity = tuple(len(rows) for _, _, rows in groups)
    return make(Contact, geom_names=tuple(names), geom_body=tuple(int(h) for h in hosts),
                geom_type=tuple(types), groups=tuple(groups), capacity=tuple(int(c) for c in capacity),
                geom_mesh=tuple(geom_mesh), mesh_nvert=tuple(len(h.verts) for h in hulls),
                mesh_nplane=tuple(len(h.planes) for h in hulls), mesh_nedge=tuple(len(h.edges) for h in hulls),
                mesh_verts=f(np.stack([p.verts for p in padded]) if padded else np.zeros((0, 1, 3))),
                mesh_planes=f(np.stack([p.planes for p in padded]) if padded else np.zeros((0, 1, 4))),
                mesh_edges=f(np.stack([p.edges for p in padded]) if padded else np.zeros((0, 1, 2, 3))),
                geom_rot=f(rot), geom_pos=f(pos), geom_size=f(size), geom_rbound=f(rbound),
                geom_half=f(np.reshape(half, (-1, 3))),
                **{k: f(params[k]) for k in ("stiffness", "exponent", "damping", "width", "viscous", "friction",
                                              "smoothing", "margin")},
                **_soft_fields(params), **hf)


def _hfield_tables(types, hfields, groups, rbound):
    """The height-field fields of a Contact: per geom its field's index (-1: none), per field its
    (nrow, ncol), the padded elevations and sizes, and per group with a height field the static cell
    window that holds any pose of its largest other geom (:func:`jaxmbd.contact.hfield.window_size`)."""
    from ..contact.hfield import window_size
    index, fields = [], []
    for h in hfields:
        index.append(-1 if h is None else len(fields))
        if h is not None:
            fields.append((np.asarray(h[0], np.float64), np.asarray(h[1], np.float64)))
    R = max([d.shape[0] for d, _ in fields], default=2)
    C = max([d.shape[1] for d, _ in fields], default=2)
    data = np.zeros((len(fields), R, C))
    for k, (d, _) in enumerate(fields):
        data[k, :d.shape[0], :d.shape[1]] = d
    windows = []
    for t1, t2, rows in groups:
        if t1 != "hfield":
            continue
        kr = kc = 1
        for a, b in rows:
            d, sz = fields[index[a]]
            w = window_size(sz, d.shape[0], d.shape[1], rbound[b])
            kr, kc = max(kr, w[0]), max(kc, w[1])
        windows.append(((t1, t2), (kr, kc)))
    return dict(geom_hfield=tuple(index), hfield_dims=tuple(d.shape for d, _ in fields),
                hfield_window=tuple(windows), hfield_data=jnp.asarray(data),
                hfield_size=jnp.asarray(np.asarray([s for _, s in fields], np.float64).reshape(-1, 4)))


SOFT_ROWS_FLOOR = 8       # the soft law's rows (candidate contacts in the solve, the deepest): at least this many
TREE_ROWS = 24            # a tree's share of the default rows: its contacts, up to this many; half of a larger count
SELF_ROWS = 4             # a tree's contacts between its own geoms (a limb across another), at most, by default
BETWEEN_ROWS = 8          # a tree's contacts with another tree (a box on a box), at most, by default
FACE_DEPTH = 0.01         # m: a mesh's vertices this close to a supporting plane count as touching it (default_rows)
PLANE_CONTACTS = {"sphere": 1, "capsule": 2, "ellipsoid": 1, "cylinder": 3, "box": 4}   # against a plane, at once
PAIR_CONTACTS = {("box", "box"): 8, ("capsule", "box"): 2}   # other pairs of primitives: 1 (the others' narrow phase)
MAXCONPAIR = 50           # MuJoCo's most contacts of one geom pair (mjMAXCONPAIR): a height-field pair's bound


def pair_contacts(el, t1, t2, g1, g2):
    """The most of the pair's candidate contacts that are within their margin at once, as the
    default rows count them (:func:`default_rows`): against a plane a sphere or an ellipsoid 1, a
    capsule 2 (lying down), a cylinder 3 (on a cap: three rim points, as MuJoCo's), a box 4 (a face
    down, MuJoCo's count), a mesh the hull vertices within :data:`FACE_DEPTH` of the plane in its worst
    pose, over the hull's face normals (:func:`face_vertices`; MuJoCo keeps 4 of them, here every
    vertex is a candidate); box-box 8 (the face-face polygon's vertices, MuJoCo's 8), capsule-box 2
    (lying on a face, MuJoCo's 2); box-mesh and mesh-mesh the two faces' vertices (a box face 4); a
    height field the cells under the geom, at most :data:`MAXCONPAIR` (MuJoCo's limit per pair); the
    other pairs 1 (one closest-point candidate).  Never more than the pair's candidates
    (:func:`jaxmbd.contact.geometry.num_contacts`).  tests/test_contact_rows.py checks the table
    against MuJoCo's ``ncon`` of each pair in its worst pose and against the narrow phase."""
    cap = _per_pair(el, t1, t2, (g1, g2))
    if t1 == "hfield":
        return min(cap, MAXCONPAIR)
    faces = [4 if t == "box" else face_vertices(el, g) if t == "mesh" else 0 for t, g in ((t1, g1), (t2, g2))]
    if t1 == "plane":
        n = faces[1] if t2 == "mesh" else PLANE_CONTACTS[t2]
    elif "mesh" in (t1, t2) and t1 in ("box", "mesh"):
        n = faces[0] + faces[1]
    else:
        n = PAIR_CONTACTS.get((t1, t2), 1)
    return min(n, cap)


def face_vertices(el, g, depth=FACE_DEPTH):
    """The most hull vertices of mesh geom g within ``depth`` of a plane the hull rests on, over its
    face normals (a face of n vertices resting on a floor: n candidates within the margin)."""
    mesh = el.mesh_of(np.array([g]))
    verts = np.asarray(mesh.verts)[0][np.asarray(mesh.valid)[0]]
    planes = np.asarray(mesh.planes)[0]
    h = verts @ planes[:, :3].T                                  # (V, F): heights along each face normal
    return int(np.max(np.sum(h >= h.max(0, keepdims=True) - depth, 0)))


def default_rows(el, topo):
    """How many candidate contacts (the deepest) enter the soft law's solve unless the model says,
    from the model's pairs.  Per tree T (a body whose parent is the world, with its descendants; a
    free body, a robot): W the contacts its geoms can make at once with the world's geoms (a floor),
    summed over its pairs with them (:func:`pair_contacts`: a sphere 1, a capsule 2, a box 4 on a
    plane), plus S those between its own geoms (at most :data:`SELF_ROWS`); the tree's share is
    W + S while that is at most :data:`TREE_ROWS` (a free box: 4; a small humanoid that fell over
    touches with most of its geoms), else the larger of TREE_ROWS and half of W + S (a tree lying
    on a floor touches it with the geoms of one side; docs/contact.md has the falls it is
    calibrated on).  Between trees: each tree's largest
    count with another tree (at most :data:`BETWEEN_ROWS`: a box resting on a box), summed and
    halved (a contact is two trees'). The rows: the shares and that term summed, at least
    :data:`SOFT_ROWS_FLOOR` and at most the soft candidates.  Only pairs that follow the soft law
    count; pairs through a world-welded body count as the world's.

    The built-in quadruped scene (25 geoms that touch the floor: W = 67, S = 4; its falls from
    random poses and controls make at most about 20 contacts) gets 36, a free box 8, the humanoid of
    tests/test_robots_on_floors.py (W = 23) 24.  The solve's cost
    grows with its rows (docs/contact.md, "What the rows cost"); more candidates within their margin at
    once than the rows stop a run with ``CONTACT_OVERFLOW`` (set them with
    ``load_mjcf(..., contact_rows=...)`` or ``set_contact_options(rows=...)``)."""
    parent = topo.parent

    def tree(h):               # the root body of host h's tree; -1 the world
        while h >= 0 and parent[h] >= 0:
            h = parent[h]
        return h
    hosts = el.geom_body
    soft = np.asarray(el.soft) > 0
    world, own, between = {}, {}, {}
    i = 0
    for t1, t2, rows in el.groups:
        for a, b in rows:
            if soft[i]:
                ta, tb = tree(hosts[a]), tree(hosts[b])
                n = pair_contacts(el, t1, t2, a, b)
                if ta < 0 or tb < 0:
                    if ta != tb:
                        world[max(ta, tb)] = world.get(max(ta, tb), 0) + n
                elif ta == tb:
                    own[ta] = own.get(ta, 0) + n
                else:
                    key = (min(ta, tb), max(ta, tb))
                    between[key] = between.get(key, 0) + n
            i += 1
    total = 0
    for t in set(world) | set(own):
        c = world.get(t, 0) + min(own.get(t, 0), SELF_ROWS)
        total += c if c <= TREE_ROWS else max(TREE_ROWS, -(-c // 2))
    most = {}
    for (ta, tb), n in between.items():
        for t in (ta, tb):
            most[t] = max(most.get(t, 0), min(n, BETWEEN_ROWS))
    total += -(-sum(most.values()) // 2)
    return max(SOFT_ROWS_FLOOR, min(total, el.n_candidates))


def _soft_fields(params):
    """The soft-law fields of a Contact from build-time per-pair arrays (params: ``soft`` (np,) flags,
    ``solref`` (np, 2), ``solimp`` (np, 5), ``invweight`` (np,), ``condim`` (np,), optional ``impratio``
    and ``rows``; all missing: every pair a penalty pair)."""
    f = lambda x: jnp.asarray(np.asarray(x, np.float64))  # noqa: E731
    n = len(np.asarray(params["margin"]))
    soft = np.asarray(params.get("soft", np.zeros(n)), float)
    law = "penalty" if not soft.any() else ("soft" if soft.all() else "mixed")
    condim = np.asarray(params.get("condim", np.full(n, 3)), np.int64)
    fdim = int(max([FRICTION_ROWS[int(c)] for c, s in zip(condim, soft) if s] or [0]))
    cone = params.get("cone", "pyramidal")
    if cone not in ("pyramidal", "elliptic"):
        raise ValueError(f"contact cone {cone!r}: expected 'pyramidal' or 'elliptic'")
    return dict(law=law, rows=int(params.get("rows") or SOFT_ROWS_FLOOR), fdim=fdim, soft=f(soft), cone=cone,
                solref=f(params.get("solref", np.tile(GEOM_DEFAULTS["solref"], (n, 1)))).reshape(n, 2),
                solimp=f(params.get("solimp", np.tile(GEOM_DEFAULTS["solimp"], (n, 1)))).reshape(n, 5),
                invweight=f(params.get("invweight", np.ones(n))), impratio=f(params.get("impratio", 1.0)))


def contact_overflow(tree, q):
    """Whether the contacts at q (tree coordinates) overflow a capacity (:meth:`Contact.overflow`);
    None when the tree has no contacts or none can overflow (nothing to check: no operation added)."""
    from .base import elements
    el = [e for e in elements(tree) if isinstance(e, Contact)]
    if not el or not el[0].can_overflow:
        return None
    return el[0].overflow(tree, q)


def contact_forces(model, q, v, ctrl=None, tau=None):
    """The model's contacts at (q, v) (for ``observe`` inside a run, or after it): a dict of
    per-candidate arrays (dist, pos, normal, penetration, normal_force, friction_force (on geom 2,
    world), friction_moment, and the static pair, body1, body2 indices) plus ``pairs`` (geom name
    pairs, indexed by ``pair``); None when the model has no contacts.

    The soft law's forces (pairs from solref/solimp, :mod:`jaxmbd.forces.soft`) depend on what else
    acts: they are those of ``forward_dynamics`` with the actuators at ``ctrl`` (default: every
    control zero) and the joint torques ``tau`` (default zero).  Tree coordinates for a mechanism's
    loop-free tree; the loop constraints are not applied here."""
    from .base import elements
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
        extra = extra + tree.actuators.generalized_force(tree.nv, qt, vt, u)
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
    from ..dynamics import _free_dynamics, soft_stage
    sol, (_, _, extras) = soft_stage(tree, q, v, _free_dynamics(tree, q, v, tau, None, "aba", "auto"))
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


# --- building the element from the builder's tables ------------------------------------------------

GEOM_DEFAULTS = dict(contype=1, conaffinity=1, condim=3, friction=(1.0, 0.005, 0.0001), solref=(0.02, 1.0),
                     solimp=(0.9, 0.95, 0.001, 0.5, 2.0), margin=0.0, priority=0, solmix=1.0)
PAIR_DEFAULT_FRICTION = (1.0, 0.005, 0.0001)
MAXHULLVERT_DEFAULT = 64     # the collision hull's vertex limit of a mesh geom that sets none (MuJoCo: no limit)
SMOOTHING_DEFAULT = 1e-2      # m/s: below it friction is viscous (law.friction_force); explicit steps up to ~2 ms stay stable


def inverse_weights(model, q):
    """MuJoCo's ``body_invweight0`` (translational) and ``dof_invweight0`` at q, as the solref mapping
    uses them (:func:`jaxmbd.forces.law.from_mujoco`): (body (n,), dof (nv,)): a body's is the mean of the
    diagonal of J H⁻¹ Jᵀ for J the Jacobian of its centre of mass and the DoF's (H⁻¹)_ii (armature
    included).

    Evaluated on the host (build-time data, never traced) by :func:`jaxmbd.crba.host_mass_matrix`.
    tests/test_contact_mjcf.py checks it against jax.jacfwd of the forward kinematics and the CRBA."""
    from ..crba import host_mass_matrix
    H, Jc = host_mass_matrix(model, q, com_jacobians=True)
    Hinv = np.linalg.inv(H)
    A = np.einsum("nik,kl,njl->nij", Jc, Hinv, Jc)
    return np.trace(A, axis1=1, axis2=2) / 3.0, np.diagonal(Hinv).copy()


def _mix(g1, g2):
    """MuJoCo's combination of two geoms' contact parameters (a dynamic pair)."""
    if g1["priority"] != g2["priority"]:
        hi = g1 if g1["priority"] > g2["priority"] else g2
        return dict(condim=hi["condim"], friction=np.asarray(hi["friction"], float),
                    solref=np.asarray(hi["solref"], float), solimp=np.asarray(hi["solimp"], float))
    s1, s2 = g1["solmix"], g2["solmix"]
    mix = 0.5 if s1 + s2 < 1e-15 else s1 / (s1 + s2)
    r1, r2 = np.asarray(g1["solref"], float), np.asarray(g2["solref"], float)
    solref = mix * r1 + (1 - mix) * r2 if (r1[0] > 0 and r2[0] > 0) else np.minimum(r1, r2)
    return dict(condim=max(g1["condim"], g2["condim"]),
                friction=np.maximum(np.asarray(g1["friction"], float), np.asarray(g2["friction"], float)),
                solref=solref, solimp=mix * np.asarray(g1["solimp"], float) + (1 - mix) * np.asarray(g2["solimp"], float))


def make_contact(model, geoms, bodies, pairs, excludes, options):
    """The Contact element of a built tree.

    geoms: dicts (name, body, type, size, R, p on the host, host index, plus GEOM_DEFAULTS keys and
    optional law overrides); bodies: (name, parent name, host index) of every builder body in order;
    pairs: explicit pairs (dicts with geom1, geom2 names and optional parameters); excludes: (body1,
    body2) names; options: smoothing, filterparent, refsafe timestep (or None)."""
    from ..contact.pairs import select_pairs
    from .law import from_mujoco
    alias = options.get("body_alias", {})
    canon = lambda name: alias.get(name, name)  # noqa: E731
    bid, par_of, host_of = {"world": 0}, {}, {}
    for name, par, host in bodies:
        c = canon(name)
        if c not in bid:                      # the first of an aliased chain carries its parent
            bid[c] = len(bid)
            par_of[c] = canon(par)
        if c == name:
            host_of[c] = host
    parent = np.zeros(len(bid), int)
    weld = np.zeros(len(bid), int)
    for c in par_of:
        parent[bid[c]] = bid[par_of[c]]
        host = host_of.get(c, -1)
        weld[bid[c]] = 0 if host < 0 else bid[canon(model.topo.names[host])]
    bid.update({name: bid[canon(name)] for name, _, _ in bodies})
    gidx = {g["name"]: i for i, g in enumerate(geoms)}
    tcode = {t: i for i, t in enumerate(G.TYPES)}
    epairs = []
    for p in pairs:
        for key in ("geom1", "geom2"):
            if p[key] not in gidx:
                raise ValueError(f"contact pair {p['geom1']!r}-{p['geom2']!r}: geom {p[key]!r} is not defined")
        epairs.append((gidx[p["geom1"]], gidx[p["geom2"]]))
    ex = []
    for b1, b2 in excludes:
        for b in (b1, b2):
            if b not in bid:
                raise ValueError(f"contact exclude {b1!r}-{b2!r}: body {b!r} is not defined")
        ex.append((bid[b1], bid[b2]))
    ps = select_pairs([bid[g["body"]] for g in geoms], [tcode[g["type"]] for g in geoms],
                      [g["contype"] for g in geoms], [g["conaffinity"] for g in geoms], parent, weld,
                      epairs, ex, filterparent=options.get("filterparent", True))
    supported = set(G.supported_pairs())
    missing = sorted({k for k in ps.groups if k not in supported and k[::-1] not in supported})
    if missing and not options.get("skip_unsupported"):
        raise ValueError("contact between " + ", ".join(f"{a} and {b}" for a, b in missing)
                         + " geoms is not supported yet (exclude those pairs or change the geoms)")
    options["skipped"] = [(k, len(ps.groups[k])) for k in missing]
    for k in missing:
        del ps.groups[k]
    hosts = [g["host"] for g in geoms]
    iw = np.zeros(len(model.topo.names) + 1)
    iw[1:] = np.asarray(inverse_weights(model, model.q0)[0])
    rows = {k: [] for k in ("stiffness", "exponent", "damping", "width", "viscous", "friction", "smoothing",
                            "margin", "soft", "solref", "solimp", "invweight", "condim")}
    groups = []
    for key, idx in ps.groups.items():
        groups.append((key[0], key[1], tuple((int(a), int(b)) for a, b in idx)))
        for (a, b), src in zip(idx, ps.explicit[key]):
            g1, g2 = geoms[a], geoms[b]
            if src >= 0:
                p = pairs[src]
                par = dict(condim=p.get("condim", 3), friction=np.asarray(p.get("friction", PAIR_DEFAULT_FRICTION)),
                           solref=np.asarray(p.get("solref", GEOM_DEFAULTS["solref"])),
                           solimp=np.asarray(p.get("solimp", GEOM_DEFAULTS["solimp"])))
                margin = p.get("margin", 0.0)
                law = {k: p[k] for k in ("stiffness", "damping", "exponent", "width", "viscous")
                       if p.get(k) is not None}
                if "stiffness" in law:     # a law given directly: the unspecified parts plain
                    law = dict(dict(exponent=1.0, damping=0.0, width=0.0, viscous=0.0), **law)
            else:
                par = _mix(g1, g2)
                margin = g1["margin"] + g2["margin"]
                law = {}
            m_eff = 1.0 / max(iw[hosts[a] + 1] + iw[hosts[b] + 1], 1e-300)
            solref = par["solref"]
            if options.get("timestep") is not None and solref[0] > 0:
                solref = np.array([max(solref[0], 2 * options["timestep"]), solref[1]])
            k, pexp, c, w, bv = from_mujoco(solref, par["solimp"], m_eff)
            rows["stiffness"].append(law.get("stiffness", k))
            rows["exponent"].append(law.get("exponent", pexp))
            rows["damping"].append(law.get("damping", c))
            rows["width"].append(law.get("width", w))
            rows["viscous"].append(law.get("viscous", bv))
            fr = np.zeros(3)
            nd = FRICTION_DIMS.get(int(par["condim"]))
            if nd is None:
                raise ValueError(f"contact {g1['name']!r}-{g2['name']!r}: condim {par['condim']} is not 1, 3, 4 or 6")
            fr[:nd] = np.asarray(par["friction"], float)[:nd]
            rows["friction"].append(fr)
            rows["smoothing"].append(options.get("smoothing", SMOOTHING_DEFAULT))
            rows["margin"].append(margin)
            rows["soft"].append(0.0 if "stiffness" in law or options.get("law") == "penalty" else 1.0)
            rows["solref"].append(np.asarray(solref, float))
            rows["solimp"].append(np.asarray(par["solimp"], float))
            rows["invweight"].append(max(iw[hosts[a] + 1] + iw[hosts[b] + 1], 1e-300))
            rows["condim"].append(int(par["condim"]))
    if not groups:
        return None
    el = build_contact([g["name"] for g in geoms], hosts, [g["type"] for g in geoms],
                       np.stack([g["R"] for g in geoms]), np.stack([g["p"] for g in geoms]),
                       np.stack([g["size"] for g in geoms]), groups,
                       dict({k: np.asarray(v, float) for k, v in rows.items()}, impratio=options.get("impratio", 1.0),
                            cone=options.get("cone", "pyramidal"), rows=options.get("rows") or SOFT_ROWS_FLOOR),
                       [g.get("vertices") for g in geoms], [g.get("maxhullvert") for g in geoms],
                       hfields=[g.get("hfield") for g in geoms])
    cap = capacities(el, model, options.get("capacity"))
    if cap != el.capacity:
        el = _replace(el, capacity=cap)
    if options.get("rows") or not el.has_soft:
        return el
    return _replace(el, rows=default_rows(el, model.topo))


def _replace(el, **fields):
    """The Contact element el with ``fields`` replaced."""
    return make(Contact, **dict({f.name: getattr(el, f.name) for f in dataclasses.fields(Contact)}, **fields))


def with_contact_options(model, rows=None, capacity=None):
    """The model (a tree or a Mechanism) with its contact element's soft-solve ``rows`` and broad-phase
    ``capacity`` replaced, as ``ModelBuilder.set_contact_options(rows=..., capacity=...)`` sets them
    when a model is built (capacity: an int per group or "all", :func:`capacities`; None keeps
    either).  A ValueError if the model has no contacts."""
    from .base import elements
    tree = getattr(model, "tree", model)
    found = [e for e in elements(tree) if isinstance(e, Contact)] if getattr(tree, "forces", None) else []
    if not found:
        raise ValueError("the model has no contacts")
    el = found[0]
    new = _replace(el, **({} if rows is None else {"rows": int(rows)}),
                   **({} if capacity is None else {"capacity": capacities(el, tree, capacity)}))
    tree = eqx.tree_at(lambda m: m.forces, tree, tuple(new if e is el else e for e in tree.forces))
    return tree if getattr(model, "tree", None) is None else eqx.tree_at(lambda m: m.tree, model, tree)


CAPACITY_FLOOR = {True: 16, False: 8}   # groups against a plane (closed-form narrow phase), the others
CANDIDATE_BUDGET = 64                    # a group's floor keeps at most about this many candidate contacts


def capacities(el, model, spec=None):
    """Per group of ``el``, the broad phase's capacity (how many of its pairs the narrow phase sees).

    spec None (the default rule): a group keeps all its pairs when it has at most 16 (against a
    plane) or 8 (any other types) and at most 64 candidate contacts (a box-box pair has 33: a floor
    of 2); a larger group keeps that floor plus 2 c pairs, c its pairs within reach (bound ≤ 0,
    :meth:`Contact.pair_bounds`) at the model's ``q0``, and never more than it has.  "all": every pair (no broad phase).  An int: that many per group (at most its pair
    count).  A dict {(type1, type2): int} sets the groups it names (MuJoCo's type order, e.g.
    ("plane", "sphere")); the others follow the default rule."""
    from ..kinematics import host_kinematics
    sizes = [len(rows) for _, _, rows in el.groups]
    if isinstance(spec, str):
        if spec != "all":
            raise ValueError(f"contact capacity {spec!r}: expected None, 'all', an int or a dict")
        return tuple(sizes)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"contact capacity must be at least 1, got {spec}")
        return tuple(min(int(spec), n) for n in sizes)
    if spec is not None and not isinstance(spec, dict):
        raise ValueError(f"contact capacity {spec!r}: expected None, 'all', an int or a dict")
    spec = dict(spec or {})
    known = {(t1, t2) for t1, t2, _ in el.groups}
    for key, k in spec.items():
        if tuple(key) not in known:
            raise ValueError(f"contact capacity for {key!r}: the model has no {key[0]}-{key[1]} pairs "
                             f"(its groups: {sorted(known)})")
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"contact capacity for {key!r} must be an int >= 1, got {k!r}")
    R, p, _, _ = host_kinematics(model, model.q0)
    hosts = np.asarray(el.geom_body, np.int64)
    Rb = np.where((hosts < 0)[:, None, None], np.eye(3), R[np.maximum(hosts, 0)])
    pb = np.where((hosts < 0)[:, None], 0.0, p[np.maximum(hosts, 0)])
    Rg = jnp.asarray(Rb @ np.asarray(el.geom_rot))
    pg = jnp.asarray(pb + np.einsum("gij,gj->gi", Rb, np.asarray(el.geom_pos)))
    bounds = el.pair_bounds(Rg, pg)
    out = []
    for (t1, t2, rows), b in zip(el.groups, bounds):
        n = len(rows)
        if (t1, t2) in spec:
            out.append(min(int(spec[(t1, t2)]), n))
            continue
        floor = min(CAPACITY_FLOOR[t1 == "plane"], max(2, CANDIDATE_BUDGET // _per_pair(el, t1, t2, rows[0])))
        within = int(np.sum(np.asarray(b) <= 0))
        out.append(n if n <= floor else min(n, floor + 2 * within))
    return tuple(out)


def _per_pair(el, t1, t2, row):
    """The narrow phase's candidate count for a pair of these types (the pair ``row`` for a mesh's)."""
    def size(g, t):
        if t == "hfield":
            return el.hfield_shape((t1, t2))
        if t != "mesh":
            return None
        mesh = el.mesh_of(np.array([g]))
        return G.Mesh(*(np.asarray(x)[0] for x in mesh))
    return G.num_contacts(t1, t2, size(row[0], t1), size(row[1], t2))
