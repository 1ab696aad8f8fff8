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

Per candidate contact (the narrow phase gives a fixed number per pair: one
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
* the generalized force Jᵀ(F, M) of the equal and opposite wrench, with the
  bodies' Jacobians at the contact point from forward-mode autodiff of the
  kinematics (every quantity an exact function of q and v: the iteration
  matrices and gradients through contact are exact).

A contact on the world and one body depends only on the DoFs that move the
body (its path to the root): the tree's branch pattern, so the sparse
iteration matrix stays exact.  Two moving bodies couple their paths: the
element declares it (``couplings``) and the sparse matrix adds it exactly."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..contact import geometry as G
from ..kinematics import forward_kinematics, integrate_q
from .base import JointElement, dofs_of_bodies, make
from .law import friction_force, normal_force, normal_potential

FRICTION_DIMS = {1: 0, 3: 1, 4: 2, 6: 3}   # condim -> how many of (slide, torsion, roll) act


def _vee_skew(A):
    """vee of the skew part of (..., 3, 3) A: the ω with [ω]x = (A - Aᵀ)/2."""
    return 0.5 * jnp.stack([A[..., 2, 1] - A[..., 1, 2], A[..., 0, 2] - A[..., 2, 0],
                            A[..., 1, 0] - A[..., 0, 1]], axis=-1)


class Contact(JointElement):
    """The contacts of a model (built by :meth:`jaxmbd.ModelBuilder.build` from ``add_geom``,
    ``add_contact_pair`` and ``exclude_contact``; not created directly).

    Static: ``geom_names``, ``geom_body`` (moving host index, -1 the world), ``geom_type`` (type
    names), ``groups`` ((type1, type2, ((g1, g2), ...)), ...), ``geom_mesh`` (a mesh geom's index into
    the mesh arrays, -1 for the primitives) and ``mesh_nvert``, ``mesh_nplane``, ``mesh_nedge`` (each
    mesh's hull vertex, plane and edge counts).  Traced, per geom: ``geom_rot`` (ng, 3, 3) and
    ``geom_pos`` (ng, 3) on the host, ``geom_size`` (ng, 3); per mesh: ``mesh_verts`` (nm, V, 3),
    ``mesh_planes`` (nm, F, 4) and ``mesh_edges`` (nm, E, 2, 3) of its collision hull in the geom frame
    (:class:`jaxmbd.contact.geometry.Mesh`; the planes and edges are the vertices' hull at build time:
    scale or move a mesh through all three together).  The collision hull has at most ``maxhullvert``
    vertices (the geom's, else :data:`MAXHULLVERT_DEFAULT`; the mass properties do not use it).  The
    arrays are stored padded to the model's largest hull, and each group of pairs gets them cut to its
    own largest (:meth:`mesh_of`): a group's narrow phase works at the size of its hulls, not the
    model's; per pair
    (in group order): ``stiffness``, ``exponent``, ``damping``, ``width``, ``viscous``, ``friction`` (np, 3:
    slide, torsion, roll; zero beyond the pair's condim), ``smoothing`` (m/s), ``margin``."""
    geom_names: tuple = eqx.field(static=True)
    geom_body: tuple = eqx.field(static=True)
    geom_type: tuple = eqx.field(static=True)
    groups: tuple = eqx.field(static=True)
    geom_mesh: tuple = eqx.field(static=True)
    mesh_nvert: tuple = eqx.field(static=True)
    mesh_nplane: tuple = eqx.field(static=True)
    mesh_nedge: tuple = eqx.field(static=True)
    geom_rot: jax.Array
    geom_pos: jax.Array
    geom_size: jax.Array
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
    def mesh_of(self, g):
        """The batched :class:`jaxmbd.contact.geometry.Mesh` of the mesh geoms g: a static index array
        gets the hulls padded to the largest among them (the stored arrays cut: their padding repeats
        a hull's first vertex, plane and edge, so the cut keeps every hull whole); a traced one gets
        them at the stored size."""
        gmesh = np.asarray(self.geom_mesh, np.int64)
        nvert = np.asarray(self.mesh_nvert, np.int64)
        if isinstance(g, jax.Array):
            m = jnp.asarray(gmesh)[g]
            valid = jnp.arange(self.mesh_verts.shape[1])[None, :] < jnp.asarray(nvert)[m][:, None]
            return G.Mesh(self.mesh_verts[m], self.mesh_planes[m], valid, self.mesh_edges[m])
        m = gmesh[np.asarray(g, np.int64)]
        nv = int(nvert[m].max(initial=1))
        nf = int(np.asarray(self.mesh_nplane, np.int64)[m].max(initial=1))
        ne = int(np.asarray(self.mesh_nedge, np.int64)[m].max(initial=1))
        valid = np.arange(nv)[None, :] < nvert[m][:, None]
        return G.Mesh(self.mesh_verts[m, :nv], self.mesh_planes[m, :nf], valid, self.mesh_edges[m, :ne])

    def candidates(self, model, q):
        """Every candidate contact at q: dict of dist (nc,), pos (nc, 3), normal (nc, 3), pair (nc,)
        (index into the per-pair arrays), body1, body2 (nc,) static host indices."""
        kin = forward_kinematics(model, q)
        return self._candidates(kin)

    def _candidates(self, kin):
        hosts = np.asarray(self.geom_body, np.int64)
        b = jnp.asarray(np.maximum(hosts, 0))
        world = jnp.asarray(hosts < 0)
        Rb = jnp.where(world[:, None, None], jnp.eye(3, dtype=kin.rot.dtype), kin.rot[b])
        pb = jnp.where(world[:, None], 0.0, kin.pos[b])
        Rg = Rb @ self.geom_rot
        pg = pb + jnp.einsum("gij,gj->gi", Rb, self.geom_pos)
        dist, pos, nrm, pair, b1, b2 = [], [], [], [], [], []
        start = 0

        def shape(g, t):     # the geoms' sizes, or their Mesh (batched)
            if t != "mesh":
                return self.geom_size[g]
            return self.mesh_of(g)
        for t1, t2, rows in self.groups:
            rows = np.asarray(rows, np.int64).reshape(-1, 2)
            g1, g2 = rows[:, 0], rows[:, 1]
            c = G.collide_batch(t1, t2, (Rg[g1], pg[g1]), shape(g1, t1), (Rg[g2], pg[g2]), shape(g2, t2))
            n, k = c.dist.shape
            dist.append(c.dist.reshape(-1))
            pos.append(c.pos.reshape(-1, 3))
            nrm.append(c.frame[..., 0, :].reshape(-1, 3))
            pair.append(np.repeat(np.arange(start, start + n), k))
            b1.append(np.repeat(hosts[g1], k))
            b2.append(np.repeat(hosts[g2], k))
            start += n
        return dict(dist=jnp.concatenate(dist), pos=jnp.concatenate(pos), normal=jnp.concatenate(nrm),
                    pair=np.concatenate(pair), body1=np.concatenate(b1), body2=np.concatenate(b2))

    # -- forces -----------------------------------------------------------------------------------
    def _kinematics_and_jacobians(self, model, q):
        """Body rotations, positions and their Jacobians w.r.t. the tangent x at q (forward mode):
        (R, P, Jw (n, 3, nv): the world angular velocity per unit x, JP (n, 3, nv))."""
        def poses(x):
            kin = forward_kinematics(model, integrate_q(model, q, x))
            return kin.rot, kin.pos
        x0 = jnp.zeros(model.nv, jnp.result_type(q, float))

        def both(x):
            out = poses(x)
            return out, out
        (dR, dP), (R, P) = jax.jacfwd(both, has_aux=True)(x0)          # (n, 3, 3, nv), (n, 3, nv)
        Jw = jnp.moveaxis(_vee_skew(jnp.einsum("nijk,nlj->nkil", dR, R)), 1, 2)   # (n, 3, nv)
        return R, P, Jw, dP

    def evaluate(self, model, q, v):
        """Every candidate contact at (q, v): the candidates of :meth:`candidates` plus ``normal_force``
        (nc,), ``friction_force`` (nc, 3, world, on geom 2), ``friction_moment`` (nc, 3) and the
        generalized force ``tau`` (nv,)."""
        R, P, Jw, JP = self._kinematics_and_jacobians(model, q)
        c = self._candidates(_Kin(R, P))
        nv = model.nv
        zeros = jnp.zeros((1, 3, nv), JP.dtype)
        JPw, Jww = jnp.concatenate([zeros, JP]), jnp.concatenate([zeros, Jw])   # index 0: the world
        Pw = jnp.concatenate([jnp.zeros((1, 3), P.dtype), P])
        i1, i2 = c["body1"] + 1, c["body2"] + 1
        pos = c["pos"]

        def point_jac(i):   # (nc, 3, nv) of the material point of body i at pos; angular (nc, 3, nv)
            r = pos - Pw[i]
            Jw_i = Jww[i]
            return JPw[i] + jnp.moveaxis(jnp.cross(jnp.moveaxis(Jw_i, 1, 2), r[:, None, :]), 1, 2), Jw_i
        Jp1, Jr1 = point_jac(i1)
        Jp2, Jr2 = point_jac(i2)
        Jv, Jr = Jp2 - Jp1, Jr2 - Jr1
        vrel, wrel = Jv @ v, Jr @ v
        n = c["normal"]
        pr = c["pair"]
        delta = self.margin[pr] - c["dist"]
        vn = jnp.sum(n * vrel, -1)
        fn = normal_force(delta, -vn, self.stiffness[pr], self.exponent[pr], self.damping[pr], self.width[pr],
                          self.viscous[pr])
        slip = vrel - vn[:, None] * n
        wn = jnp.sum(n * wrel, -1)
        roll = wrel - wn[:, None] * n
        mu = self.friction[pr]
        u = jnp.concatenate([slip, wn[:, None], roll], axis=1)                       # (nc, 7)
        mu7 = jnp.concatenate([jnp.repeat(mu[:, :1], 3, 1), mu[:, 1:2], jnp.repeat(mu[:, 2:3], 3, 1)], axis=1)
        f7 = friction_force(fn, u, mu7, self.smoothing[pr])
        F = fn[:, None] * n + f7[:, :3]
        M = f7[:, 3:4] * n + f7[:, 4:]
        tau = jnp.einsum("cin,ci->n", Jv, F) + jnp.einsum("cin,ci->n", Jr, M)
        return dict(c, normal_force=fn, friction_force=f7[:, :3], friction_moment=M, tau=tau,
                    penetration=delta)

    def force(self, model, q, v):
        return self.evaluate(model, q, v)["tau"]

    def energy(self, model, q, m=None):
        """The elastic energy of every candidate contact (law.normal_potential of its penetration): the
        normal force's potential, since the penetration is a function of q alone."""
        c = self.candidates(model, q)
        pr = c["pair"]
        return jnp.sum(normal_potential(self.margin[pr] - c["dist"], self.stiffness[pr], self.exponent[pr],
                                        self.width[pr]))


class _Kin:
    def __init__(self, rot, pos):
        self.rot, self.pos = rot, pos


def build_contact(names, hosts, types, rot, pos, size, groups, params, meshes=(), maxhullvert=()):
    """The bound Contact element from build-time tables (``ModelBuilder``): params: dict of per-pair
    arrays in group order (stiffness, exponent, damping, width, friction (np, 3), smoothing, margin);
    meshes: the hull vertex array of every mesh geom, in geom order (None for the primitives);
    maxhullvert: per geom, the collision hull's vertex limit (-1: none; None or missing:
    :data:`MAXHULLVERT_DEFAULT`; :func:`jaxmbd.contact.geometry.make_mesh`)."""
    f = lambda x: jnp.asarray(np.asarray(x, np.float64))  # noqa: E731
    caps = list(maxhullvert) + [None] * (len(names) - len(maxhullvert))
    hulls = [G.make_mesh(m, what=f"geom {n!r}", maxhullvert=MAXHULLVERT_DEFAULT if c is None else c)
             for n, m, c in zip(names, meshes, caps) if m is not None]
    nv = max([len(h.verts) for h in hulls], default=1)
    nf = max([len(h.planes) for h in hulls], default=1)
    ne = max([len(h.edges) for h in hulls], default=1)
    padded = [G.pad_mesh(h, nv, nf, ne) for h in hulls]
    geom_mesh, k = [], 0
    for m in list(meshes) + [None] * (len(names) - len(meshes)):
        geom_mesh.append(-1 if m is None else k)
        k += m is not None
    return make(Contact, geom_names=tuple(names), geom_body=tuple(int(h) for h in hosts),
                geom_type=tuple(types), groups=tuple(groups), geom_mesh=tuple(geom_mesh),
                mesh_nvert=tuple(len(h.verts) for h in hulls), mesh_nplane=tuple(len(h.planes) for h in hulls),
                mesh_nedge=tuple(len(h.edges) for h in hulls),
                mesh_verts=f(np.stack([p.verts for p in padded]) if padded else np.zeros((0, 1, 3))),
                mesh_planes=f(np.stack([p.planes for p in padded]) if padded else np.zeros((0, 1, 4))),
                mesh_edges=f(np.stack([p.edges for p in padded]) if padded else np.zeros((0, 1, 2, 3))),
                geom_rot=f(rot), geom_pos=f(pos), geom_size=f(size),
                **{k: f(params[k]) for k in ("stiffness", "exponent", "damping", "width", "viscous", "friction",
                                              "smoothing", "margin")})


def contact_forces(model, q, v):
    """The model's contacts at (q, v) (for ``observe`` inside a run, or after it): a dict of
    per-candidate arrays (``Contact.evaluate``: dist, pos, normal, penetration, normal_force,
    friction_force, friction_moment, and the static pair, body1, body2 indices) plus ``pairs``
    (geom name pairs, indexed by ``pair``); None when the model has no contacts."""
    from .base import elements
    tree = getattr(model, "tree", model)
    el = [e for e in elements(tree) if isinstance(e, Contact)]
    if not el:
        return None
    qt = model.to_tree(q) if tree is not model else q
    vt = model.to_tree(v) if tree is not model else v
    out = _evaluate(el[0], tree, jnp.asarray(qt), jnp.asarray(vt))
    out["pairs"] = el[0].pair_list()
    return out


@jax.jit
def _evaluate(el, tree, q, v):
    """One compiled program per model (an eager call ran every narrow-phase operation on its own)."""
    out = el.evaluate(tree, q, v)
    out.pop("tau")
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
                            "margin")}
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
    if not groups:
        return None
    return build_contact([g["name"] for g in geoms], hosts, [g["type"] for g in geoms],
                         np.stack([g["R"] for g in geoms]), np.stack([g["p"] for g in geoms]),
                         np.stack([g["size"] for g in geoms]), groups,
                         {k: np.asarray(v, float) for k, v in rows.items()},
                         [g.get("vertices") for g in geoms], [g.get("maxhullvert") for g in geoms])
