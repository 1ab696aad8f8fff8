"""Convex pairs of the narrow phase by support functions: GJK for the
distance of separated shapes, EPA for the penetration depth, both with a
static iteration count and fixed-size arrays (branch-free, vmap-able).

Shapes.  Every convex geom is a *core* swept by a sphere of radius r: a
sphere is a point (r = its radius), a capsule a segment (r = its radius);
ellipsoid, cylinder, box and mesh (the convex hull of its vertices, as MuJoCo
collides it) have r = 0.  GJK and EPA run on the cores; the radii are
subtracted at the end (exact: the signed distance of A + ball(rA) and
B + ball(rB) is the cores' signed distance minus rA + rB, inside and out).

The answer as a maximum.  With C = B - A (Minkowski difference of the cores)
and s(n) = min over c in C of n.c, the signed distance of the two cores is
max over unit n of s(n), positive (their distance) when apart, minus the
penetration depth when they overlap, and the maximizing n is the contact
normal from geom1 to geom2.  Any direction gives a lower bound s(n), so the
result is the best of several candidates: GJK's closest point v (n = v/|v|,
40 iterations, Johnson's subalgorithm by brute force over the simplex's
subsets), EPA's closest face (n = -face normal; 80 iterations on a polytope
of fixed capacity, faces recycled, the visible region found by a flood fill
from the closest face, a step that would break the polytope (round-off) ends
the expansion), and the two geoms' axes (a box face or cylinder cap in
contact, which EPA approaches slowly against a curved surface).  From the
best, at most 5 Newton steps in the tangent plane (autodiff Hessian, taken
only where it is negative definite and s grows) polish n on smooth
surfaces.  A failure of one candidate (GJK when the cores overlap, EPA when
they are apart) is never reported, and dist is never above the true
distance.

Accuracy (float64, measured in ``tests/test_contact_convex.py`` against
MuJoCo's nativeccd at tight tolerances): polytopes (box, mesh, with sphere
and capsule cores) to round-off; curved surfaces to 1e-9 in dist (the value
is second order in n's error), normal 3e-5, pos 7e-6.  Where a curved surface
exactly touches an edge or a rim (a kink of s: no Newton step, slow EPA)
dist is a lower bound within 2e-6.  float32: polytopes to round-off; curved
surfaces stop early at float32's tolerances (a lower bound within 3e-3).

Derivatives.  The search (GJK, EPA, Newton) runs on stop-gradient inputs.
The value of dist is then s(n) - rA - rB at the chosen n (support functions,
exact at n); its derivative is that of n.(b - a) for witness points a, b
held fixed in their geoms' frames (GJK's or EPA's barycentric points, the
support points after a Newton step, or for an axis candidate the other
geom's support point and its projection on the face).  This is Danskin's
derivative: exact wherever the maximizing n and the contact points are
unique, and with the contact's own point where the support along n is a
whole face (a sphere on a cylinder's cap).  It is only piecewise where the
closest features change (a box on a face: rotating it lifts an edge), and
always finite.  ``pos`` is the middle of a and b; the normal is held
constant for derivatives.  Where the closest features are not unique (a face
resting on a face) the witness point is one point of the contact patch.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp

GJK_ITERS = 40
EPA_ITERS = 80
EPA_TOL = (1e-10, 1e-5)   # EPA stops when the support point is this close (relative) to the closest face (float64, float32)
NEWTON_ITERS = 5
NEWTON_MAX_STEP = 0.3   # radians
FLOOD = 12       # flood-fill steps of EPA's visible region


# --------------------------------------------------------------------------------------------------
# support functions of the cores, in the geom frame: (local direction d (3,), size) -> local point

def _safe_unit(v, fallback):
    n2 = v @ v
    ok = n2 > jnp.finfo(v.dtype).tiny ** 0.5
    return jnp.where(ok, v / jnp.sqrt(jnp.where(ok, n2, 1.0)), fallback)


def _sup_point(d, size):
    return jnp.zeros_like(d)


def _sup_segment(d, size):
    return jnp.zeros_like(d).at[2].set(size[1] * jnp.sign(d[2]))


def _sup_box(d, size):
    return size * jnp.sign(d)


def _sup_ellipsoid(d, size):
    sd = size * d
    n2 = sd @ sd
    ok = n2 > jnp.finfo(d.dtype).tiny ** 0.5
    return jnp.where(ok, size * sd / jnp.sqrt(jnp.where(ok, n2, 1.0)), jnp.zeros_like(d))


def _sup_cylinder(d, size):
    r, h = size[0], size[1]
    dxy = d.at[2].set(0.0)
    rim = r * _safe_unit(dxy, jnp.zeros_like(d))     # no radial direction: the cap's centre (a support point too)
    return rim.at[2].set(h * jnp.sign(d[2]))


def _sup_mesh(d, verts):
    return verts[jnp.argmax(verts @ d)]


KINDS = {"sphere": 2, "capsule": 3, "ellipsoid": 4, "cylinder": 5, "box": 6, "mesh": 7}   # mjtGeom codes
_SUPPORTS = (_sup_point, _sup_segment, _sup_ellipsoid, _sup_cylinder, _sup_box)


class _Core:
    """A core in the world: (kind: mjtGeom code, may be traced; pose R, p;
    size (3,); verts (n, 3), the mesh's vertices, unused by the primitives)."""

    def __init__(self, kind, R, p, size, verts):
        self.kind, self.R, self.p, self.size, self.verts = kind, R, p, size, verts

    def radius(self):
        return jnp.where((self.kind == 2) | (self.kind == 3), self.size[0], 0.0)

    def local(self, d):
        dl = self.R.T @ d
        out = _sup_mesh(dl, self.verts)
        for code, fn in zip(range(2, 7), _SUPPORTS):
            out = jnp.where(self.kind == code, fn(dl, self.size), out)
        return out

    def world(self, local):
        return self.R @ local + self.p

    def support(self, d):
        lp = self.local(d)
        return self.world(lp), lp

    def reach(self, d):
        """h(d) - d.p: the support function about the centre."""
        return d @ (self.R @ self.local(d))


# --------------------------------------------------------------------------------------------------
# GJK: closest point of the hull of up to 4 points to the origin (brute-force Johnson: every subset)

_SUBSETS = [c for m in (1, 2, 3, 4) for c in itertools.combinations(range(4), m)]


def _affine_projection(P):
    """Projection of the origin on the affine hull of the m points P (m, 3):
    (point, barycentric weights (m,), well-conditioned?)."""
    m = P.shape[0]
    eps = jnp.finfo(P.dtype).eps
    if m == 1:
        return P[0], jnp.ones(1, P.dtype), jnp.ones((), bool)
    p0, D = P[0], P[1:] - P[:1]
    if m == 2:
        ee = D[0] @ D[0]
        ok = ee > eps * (p0 @ p0) * 1e-6 + jnp.finfo(P.dtype).tiny
        t = jnp.where(ok, -(p0 @ D[0]) / jnp.where(ok, ee, 1.0), 0.0)
        return p0 + t * D[0], jnp.stack([1 - t, t]), ok
    if m == 3:
        G = D @ D.T
        rhs = -(D @ p0)
        det = G[0, 0] * G[1, 1] - G[0, 1] ** 2
        ok = det > 1e3 * eps * G[0, 0] * G[1, 1] + jnp.finfo(P.dtype).tiny
        ds = jnp.where(ok, det, 1.0)
        mu = jnp.where(ok, jnp.stack([rhs[0] * G[1, 1] - rhs[1] * G[0, 1],
                                      rhs[1] * G[0, 0] - rhs[0] * G[0, 1]]) / ds, 0.0)
        return p0 + mu @ D, jnp.concatenate([(1 - mu.sum())[None], mu]), ok
    det3 = lambda a, b, c: a @ jnp.cross(b, c)
    det = det3(D[0], D[1], D[2])
    scale = jnp.sqrt((D[0] @ D[0]) * (D[1] @ D[1]) * (D[2] @ D[2]))
    ok = jnp.abs(det) > 1e3 * eps * scale + jnp.finfo(P.dtype).tiny
    ds = jnp.where(ok, det, 1.0)
    mu = jnp.stack([det3(-p0, D[1], D[2]), det3(D[0], -p0, D[2]), det3(D[0], D[1], -p0)]) / ds
    mu = jnp.where(ok, mu, 0.0)
    return jnp.zeros_like(p0), jnp.concatenate([(1 - mu.sum())[None], mu]), ok


def _closest_in_hull(W, mask):
    """Closest point to the origin of the hull of the points W[mask]: (v,
    weights (4,), new mask: the smallest subset whose hull holds v).  Every
    subset's projection is computed (Johnson's subalgorithm by brute force):
    the valid ones (weights >= 0) hold points of the hull, and the closest
    point of the hull is the valid one nearest the origin."""
    tie = jnp.finfo(W.dtype).eps * jnp.max(jnp.sum(W * W, -1))
    scores, vs, lams, members = [], [], [], []
    for m in (1, 2, 3, 4):
        idx = jnp.array([c for c in _SUBSETS if len(c) == m])          # (ns, m)
        v, lam, ok = jax.vmap(lambda i: _affine_projection(W[i]))(idx)
        valid = ok & jnp.all(mask[idx], -1) & jnp.all(lam >= 0, -1)
        scores.append(jnp.where(valid, jnp.sum(v * v, -1) + m * tie, jnp.inf))
        vs.append(v)
        mem = jax.nn.one_hot(idx, 4, dtype=W.dtype)                    # (ns, m, 4)
        lams.append(jnp.einsum("sm,smk->sk", lam, mem))
        members.append(jnp.any(mem > 0, axis=1))
    k = jnp.argmin(jnp.concatenate(scores))
    return jnp.concatenate(vs)[k], jnp.concatenate(lams)[k], jnp.concatenate(members)[k]


def _until_done(iters, body, state, done):
    """fori_loop(0, iters, body, state) for a body that leaves the state unchanged once done(state):
    the same result, without the iterations after it is done (a batch runs until its last member
    is).  The search runs on stop-gradient inputs, so no derivative passes through the loop."""
    def step(c):
        i, st = c
        return i + 1, body(i, st)
    return jax.lax.while_loop(lambda c: (c[0] < iters) & ~done(c[1]), step, (jnp.zeros((), jnp.int32), state))[1]


def _gjk(A, B, v0, iters):
    """GJK on C = B - A from the point v0 of C: the final (v, simplex points
    W (4, 3), their local support points on A and B, weights, mask)."""
    dt = v0.dtype
    eps = jnp.finfo(dt).eps

    def support(d):          # support of C along d: B along d minus A along -d
        b, lb = B.support(d)
        a, la = A.support(-d)
        return b - a, la, lb

    z = jnp.zeros((4, 3), dt)
    state = (v0, z, z, z, jnp.zeros(4, dt), jnp.zeros(4, bool), jnp.zeros((), bool))

    def body(_, st):
        v, W, LA, LB, lam, mask, done = st
        w, la, lb = support(-v)
        vv = v @ v
        conv = (vv - v @ w <= 1e2 * eps * vv) | (vv <= jnp.finfo(dt).tiny ** 0.5) | jnp.all(mask)
        slot = jnp.argmin(mask)
        W2, LA2, LB2 = W.at[slot].set(w), LA.at[slot].set(la), LB.at[slot].set(lb)
        v2, lam2, mask2 = _closest_in_hull(W2, mask.at[slot].set(True))
        stop = done | conv
        new = (v2, W2, LA2, LB2, lam2, mask2, stop)
        return jax.tree.map(lambda o, n: jnp.where(stop, o, n), st, new[:-1] + (stop,))
    # (the last field, done, is set to stop in both branches)
    return _until_done(iters, body, state, lambda st: st[-1])


# --------------------------------------------------------------------------------------------------
# EPA: expand a polytope inside C towards the boundary point closest to the origin

def _blow_up(A, B, W, LA, LB, mask):
    """A tetrahedron in C from GJK's final simplex (which holds the origin when
    the cores overlap): its points first, then supports along directions
    perpendicular to their affine hull, on the side where C reaches farther."""
    order = jnp.argsort(~mask, stable=True)
    W, LA, LB = W[order], LA[order], LB[order]
    k = mask.sum()
    dt = W.dtype

    def support(d):
        b, lb = B.support(d)
        a, la = A.support(-d)
        return b - a, la, lb

    for _ in range(3):
        e = W[1] - W[0]
        axis = jnp.zeros(3, dt).at[jnp.argmin(jnp.abs(e))].set(1.0)
        d2 = _safe_unit(jnp.cross(e, axis), jnp.array([0.0, 1.0, 0.0], dt))
        d3 = _safe_unit(jnp.cross(W[1] - W[0], W[2] - W[0]), d2)
        d = jnp.where(k <= 1, jnp.array([1.0, 0.0, 0.0], dt), jnp.where(k == 2, d2, d3))
        wp, lap, lbp = support(d)
        wm, lam_, lbm = support(-d)
        plus = jnp.abs(d @ (wp - W[0])) >= jnp.abs(d @ (wm - W[0]))
        w, la, lb = (jnp.where(plus, x, y) for x, y in ((wp, wm), (lap, lam_), (lbp, lbm)))
        slot = jnp.minimum(k, 3)
        add = k < 4
        W = jnp.where(add, W.at[slot].set(w), W)
        LA = jnp.where(add, LA.at[slot].set(la), LA)
        LB = jnp.where(add, LB.at[slot].set(lb), LB)
        k = jnp.where(add, k + 1, k)
    return W, LA, LB


def _face_planes(V, F):
    a, b, c = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
    nrm = jnp.cross(b - a, c - a)
    n2 = jnp.sum(nrm * nrm, -1)
    scale = jnp.maximum(jnp.sum((b - a) ** 2, -1), jnp.sum((c - a) ** 2, -1))
    ok = n2 > 1e2 * jnp.finfo(V.dtype).eps * scale ** 2 + jnp.finfo(V.dtype).tiny
    n = nrm / jnp.sqrt(jnp.where(ok, n2, 1.0))[:, None]
    return n, jnp.sum(n * a, -1), ok


def _epa_init(W, LA, LB, iters):
    """EPA's state: the tetrahedron W (4, 3) with its faces wound outward, room
    for iters more vertices."""
    dt = W.dtype
    nv_max = 4 + iters
    nf_max = 2 * nv_max
    det = (W[1] - W[0]) @ jnp.cross(W[2] - W[0], W[3] - W[0])
    F0 = jnp.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], jnp.int32)
    F0 = jnp.where(det > 0, F0, F0[:, [0, 2, 1]])
    F = jnp.zeros((nf_max, 3), jnp.int32).at[:4].set(F0)
    fvalid = jnp.zeros(nf_max, bool).at[:4].set(True)
    V = jnp.zeros((nv_max, 3), dt).at[:4].set(W)
    VA = jnp.zeros((nv_max, 3), dt).at[:4].set(LA)
    VB = jnp.zeros((nv_max, 3), dt).at[:4].set(LB)
    # owner[i, j]: the face with the directed edge i -> j
    owner = jnp.zeros((nv_max, nv_max), jnp.int32)
    for f in range(4):
        for e in range(3):
            owner = owner.at[F0[f, e], F0[f, (e + 1) % 3]].set(f)
    return V, VA, VB, F, fvalid, owner, jnp.zeros((), bool), jnp.zeros(4, jnp.int32)


def _epa_step(A, B, it, st, scale):
    """One expansion: the closest face's support point replaces the faces it
    sees (flood fill from the closest face), joined to their horizon."""
    V, VA, VB, F, fvalid, owner, done, info = st
    dt = V.dtype
    nv_max, nf_max = V.shape[0], F.shape[0]
    eps = jnp.finfo(dt).eps
    tol_vis = 1e2 * eps * scale
    nv = 4 + it
    n, d, ok = _face_planes(V, F)
    f = jnp.argmin(jnp.where(fvalid & ok, d, jnp.inf))
    b, lb = B.support(n[f])
    a, la = A.support(-n[f])
    w = b - a
    conv = n[f] @ w - d[f] <= (EPA_TOL[1] if dt == jnp.float32 else EPA_TOL[0]) * scale
    e_from, e_to = F, jnp.roll(F, -1, axis=1)
    nbr = owner[e_to, e_from]
    # the faces w sees, connected to f through seen faces (a flood fill from f)
    cand = fvalid & (jnp.sum(n * (w[None] - V[F[:, 0]]), -1) > tol_vis)
    vis = jax.lax.fori_loop(0, FLOOD, lambda _, vis: vis | (cand & jnp.any(vis[nbr], axis=1)),
                            jnp.zeros(nf_max, bool).at[f].set(True))
    hor = (vis[:, None] & ~vis[nbr]).ravel()
    nh = hor.sum()
    keep = fvalid & ~vis
    slots = jnp.nonzero(~keep, size=nf_max, fill_value=nf_max)[0]
    hidx = jnp.nonzero(hor, size=3 * nf_max, fill_value=0)[0]
    t = jnp.arange(3 * nf_max)
    slot_t = jnp.where(t < nh, slots[jnp.minimum(t, nf_max - 1)], nf_max).astype(jnp.int32)
    i, j = e_from.ravel()[hidx], e_to.ravel()[hidx]
    newF = jnp.stack([i, j, jnp.full_like(i, nv)], -1)
    F2 = F.at[slot_t].set(newF, mode="drop")
    fvalid2 = keep.at[slot_t].set(True, mode="drop")
    owner2 = owner.at[jnp.where(t < nh, i, nv_max), j].set(slot_t, mode="drop")
    owner2 = owner2.at[jnp.where(t < nh, j, nv_max), nv].set(slot_t, mode="drop")
    owner2 = owner2.at[jnp.where(t < nh, nv, nv_max), i].set(slot_t, mode="drop")
    # sanity, else stop here: a closed polytope has 2 V - 4 faces, and the horizon is one
    # simple loop (every vertex starts at most one of its edges)
    starts = jnp.zeros(nv_max + 1, jnp.int32).at[jnp.where(hor, e_from.ravel(), nv_max)].add(1)
    V2 = V.at[nv].set(w)
    n2, d2, ok2 = _face_planes(V2, F2)
    sane = ((fvalid2.sum() == 2 * (nv + 1) - 4) & (nh >= 3) & (jnp.max(starts[:nv_max]) <= 1)
            & jnp.all(jnp.where(fvalid2 & ok2, d2, 0.0) >= -tol_vis))      # the origin stays inside
    stop = done | conv | ~sane | (nv >= nv_max)
    info = jnp.where(done, info, jnp.stack([it, conv, sane, nh]).astype(jnp.int32))
    new = (V2, VA.at[nv].set(la), VB.at[nv].set(lb), F2, fvalid2, owner2, stop, info)
    old = (V, VA, VB, F, fvalid, owner, stop, info)
    return jax.tree.map(lambda o, x: jnp.where(stop, o, x), old, new)


def _epa(A, B, W, LA, LB, iters):
    """EPA from the tetrahedron W: the closest face's (normal, distance of
    its plane, vertex indices, vertices, local support points on A and B)."""
    scale = jnp.max(jnp.abs(W)) + jnp.finfo(W.dtype).tiny
    st = _until_done(iters, lambda it, st: _epa_step(A, B, it, st, scale), _epa_init(W, LA, LB, iters),
                     lambda st: st[6])
    V, VA, VB, F, fvalid, owner, _, info = st
    n, d, ok = _face_planes(V, F)
    f = jnp.argmin(jnp.where(fvalid & ok, d, jnp.inf))
    return n[f], d[f], F[f], V[F[f]], VA[F[f]], VB[F[f]]


def _triangle_weights(T, q):
    """Barycentric weights of the point q in the plane of the triangle T (3, 3)."""
    v0, v1 = T[1] - T[0], T[2] - T[0]
    r = q - T[0]
    G = jnp.array([[v0 @ v0, v0 @ v1], [v0 @ v1, v1 @ v1]])
    det = G[0, 0] * G[1, 1] - G[0, 1] ** 2
    ok = det > jnp.finfo(T.dtype).tiny
    ds = jnp.where(ok, det, 1.0)
    b = jnp.array([r @ v0, r @ v1])
    mu = jnp.where(ok, jnp.stack([b[0] * G[1, 1] - b[1] * G[0, 1], b[1] * G[0, 0] - b[0] * G[0, 1]]) / ds,
                   jnp.full(2, 1 / 3, T.dtype))
    return jnp.concatenate([(1 - mu.sum())[None], mu])


# --------------------------------------------------------------------------------------------------
# the pair function

def s_of_sg(A, B, n):
    """s(n) = min over C = B - A of n.c for the cores A, B."""
    return n @ (B.p - A.p) - A.reach(n) - B.reach(-n)


def _tangents(n):
    e = jnp.zeros_like(n).at[jnp.argmin(jnp.abs(n))].set(1.0)
    t1 = _safe_unit(jnp.cross(n, e), e)
    return t1, jnp.cross(n, t1)


def _newton(s, n, s0):
    """Polish the maximizer of s on the unit sphere: Newton steps in the
    tangent plane (gradient and Hessian by autodiff) where the Hessian is
    negative definite, each step halved up to 3 times and taken only if s
    grows (so a polytope's piecewise-linear s, or a kink, leaves n as it is)."""
    def step(_, ns):
        n, sn, _ = ns
        sn_in = sn
        t1, t2 = _tangents(n)
        f = lambda th: s(_safe_unit(n + th[0] * t1 + th[1] * t2, n))
        th0 = jnp.zeros(2, n.dtype)
        g = jax.grad(f)(th0)
        H = jax.hessian(f)(th0)
        det = H[0, 0] * H[1, 1] - H[0, 1] * H[1, 0]
        nd = (det > 0) & (H[0, 0] < 0)
        ds = jnp.where(nd, det, 1.0)
        delta = jnp.where(nd, -jnp.stack([H[1, 1] * g[0] - H[0, 1] * g[1], H[0, 0] * g[1] - H[1, 0] * g[0]]) / ds, 0.0)
        norm = jnp.sqrt(delta @ delta)
        delta = delta * jnp.minimum(1.0, NEWTON_MAX_STEP / jnp.where(norm > 0, norm, 1.0))
        for alpha in (1.0, 0.5, 0.25, 0.125):
            m = _safe_unit(n + alpha * (delta[0] * t1 + delta[1] * t2), n)
            sm = s(m)
            better = sm > sn
            n, sn = jnp.where(better, m, n), jnp.where(better, sm, sn)
        return n, sn, ~(sn > sn_in)
    # a step that does not improve s leaves n as it was, and so would every later one: stop there
    return _until_done(NEWTON_ITERS, step, (n, s0, jnp.zeros((), bool)), lambda ns: ns[2])[0]


def convex(kind1, R1, p1, size1, verts1, kind2, R2, p2, size2, verts2):
    """The deepest (or closest) point pair of two convex geoms: (dist, pos
    (3,), normal (3,) from geom1 to geom2).  kind: mjtGeom code (2 sphere, 3
    capsule, 4 ellipsoid, 5 cylinder, 6 box, 7 mesh), which may be traced (one
    compiled function then serves every pair type); size: geom_size (3,);
    verts: a mesh's vertices (n, 3) in the geom frame (any array for the
    primitives)."""
    sg = jax.lax.stop_gradient
    A = _Core(kind1, *map(sg, (R1, p1, size1, verts1)))
    B = _Core(kind2, *map(sg, (R2, p2, size2, verts2)))
    dt = p1.dtype
    ex = jnp.array([1.0, 0.0, 0.0], dt)
    v0 = sg(p2 - p1)
    v0 = jnp.where(v0 @ v0 > 0, v0, ex)
    v, W, LA, LB, lam, mask, _ = _gjk(A, B, v0, GJK_ITERS)
    n_gjk = _safe_unit(v, _safe_unit(v0, ex))
    T, TA, TB = _blow_up(A, B, W, LA, LB, mask)
    u, du, _, Tf, TAf, TBf = _epa(A, B, T, TA, TB, EPA_ITERS)
    n_epa = -u
    w_epa = _triangle_weights(Tf, du * u)
    # differentiable evaluation of s(n) at both directions; keep the larger
    Ad, Bd = _Core(kind1, R1, p1, size1, verts1), _Core(kind2, R2, p2, size2, verts2)

    def s_of(n):
        return n @ (p2 - p1) - Ad.reach(n) - Bd.reach(-n)
    # candidate directions: GJK's, EPA's, and the geoms' axes (the normal of a box face or a
    # cylinder cap in contact, where EPA converges slowly against a curved surface)
    cands = jnp.concatenate([n_gjk[None], n_epa[None], sg(R1.T), -sg(R1.T), sg(R2.T), -sg(R2.T)])
    sc = jax.vmap(lambda n: s_of_sg(A, B, n))(cands)
    scale = jnp.max(jnp.abs(T)) + jnp.finfo(dt).tiny
    tol = 1e4 * jnp.finfo(dt).eps * scale
    k = jnp.argmax(sc - jnp.where(jnp.arange(14) >= 2, tol, 0.0))     # an axis must do better than round-off
    n0, s0 = cands[k], sc[k]
    use_epa = k == 1
    n = _newton(lambda n: s_of_sg(A, B, n), n0, s0)
    refined = s_of_sg(A, B, n) > s0 + tol
    # witness points (local, held constant): barycentric weights of GJK's or EPA's support points;
    # after a Newton step (a smooth surface) the support points along n; for an axis of geom1
    # (a face of it), geom2's support point and its projection on the face, and vice versa
    z1, z3 = jnp.zeros(1, dt), jnp.zeros((1, 3), dt)
    wts = jnp.where(use_epa, jnp.concatenate([w_epa, z1]), lam)
    la = wts @ jnp.where(use_epa, jnp.concatenate([TAf, z3]), LA)
    lb = wts @ jnp.where(use_epa, jnp.concatenate([TBf, z3]), LB)
    sa, sb = A.local(n), B.local(-n)
    sn = s_of_sg(A, B, n)
    on_b = B.R.T @ (A.world(sa) + sn * n - B.p)
    on_a = A.R.T @ (B.world(sb) - sn * n - A.p)
    axis1, axis2 = (k >= 2) & (k < 8), k >= 8
    la = sg(jnp.where(refined, sa, jnp.where(axis1, on_a, jnp.where(axis2, sa, la))))
    lb = sg(jnp.where(refined, sb, jnp.where(axis1, sb, jnp.where(axis2, on_b, lb))))
    a = Ad.world(la) + Ad.radius() * n
    b = Bd.world(lb) - Bd.radius() * n
    # the value: s(n) (the support functions, exact at n); the derivative: of n.(b - a), the
    # witness points moving with their bodies (Danskin's derivative with the contact's own
    # point of a face where the support point along n is not unique: a sphere on a cylinder's cap)
    d_w = n @ (b - a)
    dist = d_w + sg(s_of(n) - Ad.radius() - Bd.radius() - d_w)
    return dist, 0.5 * (a + b), n


def convex_pair(kind1, kind2):
    """The pair function (R1, p1, size1, R2, p2, size2) -> (dist (1,), pos (1,
    3), normal (1, 3)) of two convex geom types (names); a mesh's size is its
    vertex array."""
    k1, k2 = KINDS[kind1], KINDS[kind2]

    def pair(R1, p1, s1, R2, p2, s2):
        z = jnp.zeros((1, 3), p1.dtype)
        a = (s1, z) if kind1 != "mesh" else (z[0], s1)
        b = (s2, z) if kind2 != "mesh" else (z[0], s2)
        dist, pos, n = convex(k1, R1, p1, *a, k2, R2, p2, *b)
        return dist[None], pos[None], n[None]

    pair.__name__ = f"{kind1}_{kind2}"
    pair.__doc__ = f"1 candidate: the deepest (or closest) point pair of {kind1} and {kind2} by GJK/EPA."
    return pair
