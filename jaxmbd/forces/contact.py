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

The broad phase (:mod:`jaxmbd.forces.contact_broadphase`) picks, per group of
pairs of two geom types, the pairs the narrow phase sees (a static capacity:
bounded work under jit and vmap, the all-pairs forces exactly while no group
overflows, and an overflow reported as ``CONTACT_OVERFLOW``, never silently
dropped).  The soft law's rows of the contacts are built in
:mod:`jaxmbd.forces.contact_rows`; the contacts at a state as a report,
:func:`jaxmbd.contact_forces`.

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
from .. import mujoco_defaults as MJ
from ..kinematics import forward_kinematics, kinematics_and_axes
from . import contact_broadphase as broad, contact_rows as rows_of
from .base import JointElement, SoftRows, dofs_of_bodies, make
from .law import friction_force, normal_force, normal_potential

FRICTION_DIMS = {1: 0, 3: 1, 4: 2, 6: 3}   # condim -> how many of (slide, torsion, roll) act


class Contact(SoftRows, JointElement):
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
    geom_mocap: tuple = eqx.field(static=True, default=())     # per geom: its mocap body's index, -1 none (or ())

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
        """(R (ng, 3, 3), p (ng, 3)): every geom's world pose from the bodies' (a :class:`Kinematics`;
        a mocap body's geoms from its pose there, ``kin.mocap``)."""
        return self.place(kin.rot, kin.pos, kin.mocap, jnp)

    def place(self, rot, pos, mocap, xp):
        """The geoms' world poses from their hosts' (rot (n, 3, 3), pos (n, 3)) and the mocap
        bodies' ((m, 3, 3), (m, 3)) or None, in ``xp`` (jax.numpy, or numpy at build time)."""
        hosts = np.asarray(self.geom_body, np.int64)
        b = np.maximum(hosts, 0)
        world = (hosts < 0)
        Rb = xp.where(world[:, None, None], xp.eye(3, dtype=rot.dtype), rot[b])
        pb = xp.where(world[:, None], 0.0, pos[b])
        mid = np.asarray(self.geom_mocap, np.int64)
        if mid.size and (mid >= 0).any():
            if mocap is None:
                raise ValueError("the contact geoms of mocap bodies need the model's mocap poses (model.mocap)")
            on = mid >= 0
            Rm, pm = mocap
            Rb = xp.where(on[:, None, None], Rm[np.maximum(mid, 0)], Rb)
            pb = xp.where(on[:, None], pm[np.maximum(mid, 0)], pb)
        R, p = xp.asarray(self.geom_rot), xp.asarray(self.geom_pos)
        return Rb @ R, pb + xp.einsum("gij,gj->gi", Rb, p)

    def pair_bounds(self, Rg, pg):
        """Per group, a lower bound of each pair's signed distance minus its margin
        (:func:`jaxmbd.forces.contact_broadphase.pair_bounds`)."""
        return broad.pair_bounds(self, Rg, pg)

    @property
    def culled(self):
        """Whether any group keeps fewer pairs than it has (a broad phase runs)."""
        return any(k < len(rows) for (_, _, rows), k in zip(self.groups, self.capacity))

    def select(self, Rg, pg):
        """The broad phase: per group, the geom pairs the narrow phase sees, whether a group has more
        pairs within reach than its capacity, and per group whether any pair is within reach
        (:func:`jaxmbd.forces.contact_broadphase.select`)."""
        return broad.select(self, Rg, pg)

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
        return self.narrow_phase(forward_kinematics(model, q))

    def narrow_phase(self, kin):
        """:meth:`candidates` from the bodies' poses (a :class:`jaxmbd.kinematics.Kinematics`)."""
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
        c = self.narrow_phase(kin)
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
        """The candidates that enter the soft solve (:func:`jaxmbd.forces.contact_rows.soft_candidates`)."""
        return rows_of.soft_candidates(self, kin)

    def soft_rows(self, model, q, v, kin, axes):
        """(NormalRows, FrictionRows, candidates) of the soft pairs' contacts at (q, v)
        (:func:`jaxmbd.forces.contact_rows.soft_rows`)."""
        return rows_of.soft_rows(self, model, q, v, kin, axes)


_CONVEX_PRIMITIVES = {k for k in G._CONVEX if "mesh" not in k}   # the primitive pairs of the generic GJK/EPA


def _convex_batch(args):
    """The GJK/EPA narrow phase (:func:`jaxmbd.contact.convex.convex`) of pairs of any primitive types
    (mjtGeom codes k1, k2 per pair, traced): Contacts with one candidate per pair."""
    k1, R1, p1, s1, k2, R2, p2, s2 = args
    z = jnp.zeros((1, 3), p1.dtype)
    d, pos, n = jax.vmap(lambda *x: _convex(x[0], x[1], x[2], x[3], z, x[4], x[5], x[6], x[7], z))(
        jnp.asarray(k1), R1, p1, s1, jnp.asarray(k2), R2, p2, s2)
    return G.Contacts(d[:, None], pos[:, None], jax.vmap(G.contact_frame)(n)[:, None])


def _far(shapes):
    """Candidates that never touch, of the shapes of a narrow phase's result: dist
    :data:`jaxmbd.contact.geometry._FAR`, the frame the identity."""
    d, p, f = shapes
    return G.Contacts(jnp.full(d.shape, G._FAR, d.dtype), jnp.zeros(p.shape, p.dtype),
                      jnp.broadcast_to(jnp.eye(3, dtype=f.dtype), f.shape))


def build_contact(names, hosts, types, rot, pos, size, groups, params, meshes=(), maxhullvert=(), capacity=None,
                  hfields=(), mocap=()):
    """The bound Contact element from build-time tables (``ModelBuilder``): params: dict of per-pair
    arrays in group order (stiffness, exponent, damping, width, friction (np, 3), smoothing, margin);
    meshes: the hull vertex array of every mesh geom, in geom order (None for the primitives);
    maxhullvert: per geom, the collision hull's vertex limit (-1: none; None or missing:
    :data:`MAXHULLVERT_DEFAULT`; :func:`jaxmbd.contact.geometry.make_mesh`); capacity: per group,
    how many pairs the narrow phase sees (None: all); hfields: per geom, a height field's (normalized
    elevation (nrow, ncol), size (rx, ry, top, base)) (None for the other types); mocap: per geom, its
    mocap body's index (-1: none; rot and pos are then on that body), or () when there are none."""
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
    rbound = [broad.bounding_radius(t, s, hull_of[i].verts if i in hull_of else None)
              for i, (t, s) in enumerate(zip(types, size4))]
    half = [broad.bounding_half_extents(t, s, hull_of[i].verts if i in hull_of else None)
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
                **_soft_fields(params), **hf,
                geom_mocap=tuple(int(m) for m in mocap) if any(m >= 0 for m in mocap) else ())


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


def _soft_fields(params):
    """The soft-law fields of a Contact from build-time per-pair arrays (params: ``soft`` (np,) flags,
    ``solref`` (np, 2), ``solimp`` (np, 5), ``invweight`` (np,), ``condim`` (np,), optional ``impratio``
    and ``rows``; all missing: every pair a penalty pair)."""
    f = lambda x: jnp.asarray(np.asarray(x, np.float64))  # noqa: E731
    n = len(np.asarray(params["margin"]))
    soft = np.asarray(params.get("soft", np.zeros(n)), float)
    law = "penalty" if not soft.any() else ("soft" if soft.all() else "mixed")
    condim = np.asarray(params.get("condim", np.full(n, 3)), np.int64)
    fdim = int(max([rows_of.FRICTION_ROWS[int(c)] for c, s in zip(condim, soft) if s] or [0]))
    cone = params.get("cone", "pyramidal")
    if cone not in ("pyramidal", "elliptic"):
        raise ValueError(f"contact cone {cone!r}: expected 'pyramidal' or 'elliptic'")
    return dict(law=law, rows=int(params.get("rows") or rows_of.SOFT_ROWS_FLOOR), fdim=fdim, soft=f(soft), cone=cone,
                solref=f(params.get("solref", np.tile(GEOM_DEFAULTS["solref"], (n, 1)))).reshape(n, 2),
                solimp=f(params.get("solimp", np.tile(GEOM_DEFAULTS["solimp"], (n, 1)))).reshape(n, 5),
                invweight=f(params.get("invweight", np.ones(n))), impratio=f(params.get("impratio", 1.0)))


# --- building the element from the builder's tables ------------------------------------------------

GEOM_DEFAULTS = MJ.GEOM
PAIR_DEFAULT_FRICTION = MJ.FRICTION
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
    """The Contact element of a built tree (None without pairs) and the pairs it skipped: a list of
    ((type1, type2), number of pairs) whose geom types the narrow phase lacks, dropped with
    ``skip_unsupported`` (empty otherwise).

    geoms: dicts (name, body, type, size, R, p on the host, host index, plus GEOM_DEFAULTS keys and
    optional law overrides); bodies: (name, parent name, host index) of every builder body in order;
    pairs: explicit pairs (dicts with geom1, geom2 names and optional parameters); excludes: (body1,
    body2) names; options: smoothing, filterparent, refsafe timestep (or None), invweight_override
    ({host index: body_invweight0}: MuJoCo's simple bodies, ModelBuilder.set_simple_body)."""
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
    skipped = [(k, len(ps.groups[k])) for k in missing]
    for k in missing:
        del ps.groups[k]
    hosts = [g["host"] for g in geoms]
    iw = np.zeros(len(model.topo.names) + 1)
    iw[1:] = np.asarray(inverse_weights(model, model.q0)[0])
    for host, w in options.get("invweight_override", {}).items():   # MuJoCo's simple bodies: 1/mass
        iw[host + 1] = w
    rows = {k: [] for k in ("stiffness", "exponent", "damping", "width", "viscous", "friction", "smoothing",
                            "margin", "soft", "solref", "solimp", "invweight", "condim")}
    groups = []
    for key, idx in ps.groups.items():
        groups.append((key[0], key[1], tuple((int(a), int(b)) for a, b in idx)))
        for (a, b), src in zip(idx, ps.explicit[key]):
            g1, g2 = geoms[a], geoms[b]
            if src >= 0:
                p = pairs[src]
                par = dict(condim=p.get("condim", MJ.CONDIM), friction=np.asarray(p.get("friction", PAIR_DEFAULT_FRICTION)),
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
        return None, skipped
    el = build_contact([g["name"] for g in geoms], hosts, [g["type"] for g in geoms],
                       np.stack([g["R"] for g in geoms]), np.stack([g["p"] for g in geoms]),
                       np.stack([g["size"] for g in geoms]), groups,
                       dict({k: np.asarray(v, float) for k, v in rows.items()}, impratio=options.get("impratio", 1.0),
                            cone=options.get("cone", "pyramidal"), rows=options.get("rows") or rows_of.SOFT_ROWS_FLOOR),
                       [g.get("vertices") for g in geoms], [g.get("maxhullvert") for g in geoms],
                       hfields=[g.get("hfield") for g in geoms], mocap=[g.get("mocap", -1) for g in geoms])
    cap = broad.capacities(el, model, options.get("capacity"))
    if cap != el.capacity:
        el = _replace(el, capacity=cap)
    if options.get("rows") or not el.has_soft:
        return el, skipped
    return _replace(el, rows=rows_of.default_rows(el, model.topo)), skipped


def _replace(el, **fields):
    """The Contact element el with ``fields`` replaced."""
    return make(Contact, **dict({f.name: getattr(el, f.name) for f in dataclasses.fields(Contact)}, **fields))


def with_contact_options(model, rows=None, capacity=None):
    """The model (a tree or a Mechanism) with its contact element's soft-solve ``rows`` and broad-phase
    ``capacity`` replaced, as ``ModelBuilder.set_contact_options(rows=..., capacity=...)`` sets them
    when a model is built (capacity: an int per group or "all", :func:`jaxmbd.forces.contact_broadphase.capacities`; None keeps
    either).  A ValueError if the model has no contacts."""
    from .base import elements
    tree = getattr(model, "tree", model)
    found = [e for e in elements(tree) if isinstance(e, Contact)] if getattr(tree, "forces", None) else []
    if not found:
        raise ValueError("the model has no contacts")
    el = found[0]
    new = _replace(el, **({} if rows is None else {"rows": int(rows)}),
                   **({} if capacity is None else {"capacity": broad.capacities(el, tree, capacity)}))
    tree = eqx.tree_at(lambda m: m.forces, tree, tuple(new if e is el else e for e in tree.forces))
    return tree if getattr(model, "tree", None) is None else eqx.tree_at(lambda m: m.tree, model, tree)


