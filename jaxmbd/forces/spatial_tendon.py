"""Spatial tendons (MuJoCo's ``<tendon><spatial>``): a path through sites fixed in bodies, wrapping
around spheres and cylinders, its segments scaled by pulleys; its length L(q), a spring on L (with
MuJoCo's dead band) and damping on its rate, acting through (∂L/∂x)ᵀ as every pose element does.

The wrap of a segment x0 → x1 around a sphere or cylinder of radius r (the geom's frame) follows the
construction of MuJoCo's ``mju_wrap``: in the plane of x0, x1 and the sphere's centre (a cylinder:
across its axis) the two points' tangent lines to the circle give two candidate wraps; the one
nearer a side site, else the one whose tangent points are closer together, is taken unless a
tangent line crosses the other; no wrap when the straight segment misses the circle (or passes on
the side site's side), or when either point is inside it.  Around a cylinder the wrap climbs as a
helix, the heights of the tangent points set in proportion to the path length.  A side site
inside the wrapping circle (MuJoCo's inside wrap) is not modelled."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics import forward_kinematics, integrate_q
from .base import JointElement, PoseElement, SoftRows, dofs_of_bodies, f64, make, pose_of, world_points
from .tendon import length_rows

MINVAL = 1e-15     # MuJoCo's mjMINVAL


class SpatialTendons(PoseElement):
    """The model's spatial tendons (built by :meth:`jaxmbd.ModelBuilder.add_spatial_tendon`).

    Static: ``names``; ``paths``: per tendon a tuple of steps, ("site", k) a point, ("wrap", w, s) a
    wrapping geom (its index, the side point's index or -1), ("pulley", divisor); ``point_body`` and
    ``wrap_body`` the hosts (-1: the world); ``wrap_kind`` "sphere" or "cylinder".  Traced:
    ``point_pos`` (np, 3) on the hosts, ``wrap_rot`` (nw, 3, 3), ``wrap_pos`` (nw, 3), ``wrap_radius``
    (nw,), and per tendon ``stiffness``, ``damping``, ``spring`` (k, 2): the dead band's ends."""
    names: tuple = eqx.field(static=True)
    paths: tuple = eqx.field(static=True)
    point_body: tuple = eqx.field(static=True)
    wrap_body: tuple = eqx.field(static=True)
    wrap_kind: tuple = eqx.field(static=True)
    point_pos: jax.Array
    wrap_rot: jax.Array
    wrap_pos: jax.Array
    wrap_radius: jax.Array
    stiffness: jax.Array
    damping: jax.Array
    spring: jax.Array

    def bind(self, ctx):      # built bound (ModelBuilder._spatial_tendons)
        return self

    @classmethod
    def merge(cls, elements):
        if len(elements) != 1:
            raise ValueError("a model has one SpatialTendons element")
        return elements[0]

    def couplings(self, topo):
        out = []
        for path in self.paths:
            bodies = [self.point_body[s[1]] for s in path if s[0] == "site"]
            bodies += [self.wrap_body[s[1]] for s in path if s[0] == "wrap"]
            out.append(dofs_of_bodies(topo, [b for b in bodies if b >= 0]))
        return tuple(out)

    def measure(self, model, kin):
        """(k,) the tendons' lengths."""
        P = world_points(kin, self.point_body, self.point_pos) if self.point_body else None
        if self.wrap_body:
            Rb, pb = pose_of(kin, self.wrap_body)
            WR = Rb @ self.wrap_rot
            Wp = pb + jnp.einsum("kij,kj->ki", Rb, self.wrap_pos)
        out = []
        for path in self.paths:
            total, div, j = 0.0, 1.0, 0
            while j < len(path):
                step = path[j]
                if step[0] == "pulley":
                    div = step[1]
                    j += 1
                    continue
                if j + 1 >= len(path) or path[j + 1][0] == "pulley":
                    j += 1
                    continue
                nxt = path[j + 1]
                x0 = P[step[1]]
                if nxt[0] == "site":
                    total = total + jnp.linalg.norm(P[nxt[1]] - x0) / div
                    j += 1
                    continue
                w, side = nxt[1], nxt[2]
                x1 = P[path[j + 2][1]]
                seg = _wrapped(x0, x1, WR[w], Wp[w], self.wrap_radius[w], self.wrap_kind[w],
                               None if side < 0 else P[side])
                total = total + seg / div
                j += 2
            out.append(jnp.asarray(total, kin.pos.dtype))
        return jnp.stack(out)

    def law(self, L, Ld):
        lo, hi = self.spring[:, 0], self.spring[:, 1]
        stretch = jnp.where(L > hi, L - hi, jnp.where(L < lo, L - lo, 0.0))
        return -(self.stiffness * stretch + self.damping * Ld)

    def energy(self, model, q, L=None):
        lo, hi = self.spring[:, 0], self.spring[:, 1]
        stretch = jnp.where(L > hi, L - hi, jnp.where(L < lo, L - lo, 0.0))
        return jnp.sum(0.5 * self.stiffness * stretch ** 2)


def length_and_jacobian(model, q, el=None):
    """((k,) the spatial tendons' lengths, (k, nv) their Jacobian ∂L/∂q in the tangent coordinates
    of q (MuJoCo's ten_J), by forward mode in the nv directions)."""
    if el is None:
        el = next(e for e in model.forces if isinstance(e, SpatialTendons))
    length = lambda x: el.measure(model, forward_kinematics(model, integrate_q(model, q, x)))  # noqa: E731
    x0 = jnp.zeros(model.nv, q.dtype)
    return length(x0), jax.jacfwd(length)(x0)


class SpatialTendonRows(SoftRows, JointElement):
    """The soft rows of spatial tendons, as MuJoCo's and as :class:`jaxmbd.forces.tendon.TendonRows`
    of fixed tendons: a limit row at the nearer bound of ``range`` for each ``limited`` tendon and a
    friction-loss row for each with ``friction``, their Jacobian ∂L/∂q at the state; Â
    (``invweight``) MuJoCo's ``tendon_invweight0``, J H⁻¹ Jᵀ at the model's q0.  Static: ``names``,
    ``index`` (the tendons' indices in the model's :class:`SpatialTendons`), ``dofs`` (the DoFs each
    moves), ``limited``, ``friction``."""
    names: tuple = eqx.field(static=True)
    index: tuple = eqx.field(static=True)
    dofs: tuple = eqx.field(static=True)
    limited: tuple = eqx.field(static=True)
    friction: tuple = eqx.field(static=True)
    range: jax.Array
    solref_limit: jax.Array
    solimp_limit: jax.Array
    loss: jax.Array
    solref_friction: jax.Array
    solimp_friction: jax.Array
    invweight: jax.Array

    has_soft = True

    def bind(self, ctx):
        return self

    def couplings(self, topo):
        return tuple(d for d in self.dofs if len(d) > 1)

    def force(self, model, q, v):
        return jnp.zeros(model.nv, jnp.result_type(q, v, float))

    def soft_rows(self, model, q, v, kin=None, axes=None):
        L, J = length_and_jacobian(model, q)
        k = np.asarray(self.index, np.int64)
        return length_rows(self, J[k], L[k], J[k] @ v)


def rows_element(model, tendons, H0):
    """The :class:`SpatialTendonRows` of the builder's spatial tendon records with a range or a
    friction loss (None if none), for the built ``model`` (H0: its mass matrix at q0)."""
    sel = [i for i, t in enumerate(tendons) if t["range"] is not None or t["frictionloss"] > 0]
    if not sel:
        return None
    el = next(e for e in model.forces if isinstance(e, SpatialTendons))
    with jax.ensure_compile_time_eval():
        J0 = np.asarray(length_and_jacobian(model, model.q0, el)[1])[sel]
    iw = np.einsum("ki,ki->k", J0, np.linalg.solve(H0, J0.T).T)
    t = [tendons[i] for i in sel]
    return make(SpatialTendonRows, names=tuple(x["name"] for x in t), index=tuple(sel),
                dofs=tuple(el.couplings(model.topo)[i] for i in sel),
                limited=tuple(x["range"] is not None for x in t), friction=tuple(x["frictionloss"] > 0 for x in t),
                range=f64([x["range"] if x["range"] is not None else (0.0, 0.0) for x in t]),
                solref_limit=f64([x["solref_limit"] for x in t]), solimp_limit=f64([x["solimp_limit"] for x in t]),
                loss=f64([x["frictionloss"] for x in t]), solref_friction=f64([x["solref_friction"] for x in t]),
                solimp_friction=f64([x["solimp_friction"] for x in t]), invweight=f64(iw))


def _cross2(a, b):
    return a[0] * b[1] - a[1] * b[0]


def _intersect(p1, p2, p3, p4):
    """Whether the 2-D segments p1-p2 and p3-p4 cross (parallel ones do not)."""
    det = (p4[1] - p3[1]) * (p2[0] - p1[0]) - (p4[0] - p3[0]) * (p2[1] - p1[1])
    safe = jnp.where(jnp.abs(det) < MINVAL, 1.0, det)
    a = ((p4[0] - p3[0]) * (p1[1] - p3[1]) - (p4[1] - p3[1]) * (p1[0] - p3[0])) / safe
    b = ((p2[0] - p1[0]) * (p1[1] - p3[1]) - (p2[1] - p1[1]) * (p1[0] - p3[0])) / safe
    return (jnp.abs(det) >= MINVAL) & (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)


def _arc(t0, t1, flip, r):
    """The arc from t0 to t1 on the circle of radius r: the angle between them, or its complement
    by the winding of the chosen tangent pair."""
    u0 = t0 / jnp.linalg.norm(t0)
    u1 = t1 / jnp.linalg.norm(t1)
    ang = jnp.arccos(jnp.clip(u0 @ u1, -1.0, 1.0))
    c = t0[1] * t1[0] - t0[0] * t1[1]
    ang = jnp.where((c > 0) & flip | (c < 0) & ~flip, 2 * jnp.pi - ang, ang)
    return r * ang


def _circle(d0, d1, side, r):
    """(wraps, the tangent points t0, t1, the arc length) of the 2-D segment d0 → d1 around the circle
    of radius r at the origin; ``side`` a 2-D point on the circle or None."""
    l0, l1, rr = d0 @ d0, d1 @ d1, r * r
    dif = d1 - d0
    dd = dif @ dif
    a = jnp.clip(-(dif @ d0) / jnp.where(dd < MINVAL, 1.0, dd), 0.0, 1.0)
    near = d0 + a * dif
    misses = (near @ near > rr) & (True if side is None else (side @ near >= 0))
    ok = (l0 >= rr) & (l1 >= rr) & (dd >= MINVAL) & ~misses
    s0 = jnp.sqrt(jnp.maximum(l0 - rr, 0.0))
    s1 = jnp.sqrt(jnp.maximum(l1 - rr, 0.0))
    l0s, l1s = jnp.where(l0 > 0, l0, 1.0), jnp.where(l1 > 0, l1, 1.0)
    sols, good = [], []
    for sgn in (1.0, -1.0):
        t0 = jnp.stack([d0[0] * rr + sgn * r * d0[1] * s0, d0[1] * rr - sgn * r * d0[0] * s0]) / l0s
        t1 = jnp.stack([d1[0] * rr - sgn * r * d1[1] * s1, d1[1] * rr + sgn * r * d1[0] * s1]) / l1s
        if side is None:
            g = -jnp.sum((t0 - t1) ** 2)
        else:
            m = t0 + t1
            g = (m / jnp.maximum(jnp.linalg.norm(m), MINVAL)) @ side
        sols.append((t0, t1))
        good.append(jnp.where(_intersect(d0, t0, d1, t1), -10000.0, g))
    first = good[0] > good[1]
    t0 = jnp.where(first, sols[0][0], sols[1][0])
    t1 = jnp.where(first, sols[0][1], sols[1][1])
    ok = ok & ~_intersect(d0, t0, d1, t1)
    return ok, t0, t1, _arc(t0, t1, ~first, r)


def _wrapped(x0, x1, R, c, r, kind, side):
    """The length of the path x0 → x1 around a sphere or cylinder (frame R, c, radius r), or of the
    straight segment when it does not wrap."""
    straight = jnp.linalg.norm(x1 - x0)
    p0, p1 = R.T @ (x0 - c), R.T @ (x1 - c)
    if kind == "sphere":
        a0 = p0 / jnp.linalg.norm(p0)
        n = jnp.cross(p0, p1)
        nn = jnp.linalg.norm(n)
        # (p0, p1) parallel: a normal from the axes, as MuJoCo picks it
        i = jnp.argmax(jnp.abs(a0))
        alt = jnp.ones(3, p0.dtype).at[i].set(0.0)
        n_alt = jnp.cross(a0, alt)
        n = jnp.where(nn < MINVAL, n_alt / jnp.linalg.norm(n_alt), n / jnp.where(nn < MINVAL, 1.0, nn))
        a1 = jnp.cross(n, a0)
        a1 = a1 / jnp.linalg.norm(a1)
    else:
        a0 = jnp.array([1.0, 0.0, 0.0], p0.dtype)
        a1 = jnp.array([0.0, 1.0, 0.0], p0.dtype)
    d0 = jnp.stack([p0 @ a0, p0 @ a1])
    d1 = jnp.stack([p1 @ a0, p1 @ a1])
    sd = None
    if side is not None:
        s = R.T @ (side - c)
        sd = jnp.stack([s @ a0, s @ a1])
        sd = r * sd / jnp.maximum(jnp.linalg.norm(sd), MINVAL)
    ok, t0, t1, arc = _circle(d0, d1, sd, r)
    w0 = t0[0] * a0 + t0[1] * a1
    w1 = t1[0] * a0 + t1[1] * a1
    if kind == "cylinder":
        L0 = jnp.linalg.norm(p0[:2] - w0[:2])
        L1 = jnp.linalg.norm(p1[:2] - w1[:2])
        tot = L0 + arc + L1
        z0 = p0[2] + (p1[2] - p0[2]) * L0 / tot
        z1 = p0[2] + (p1[2] - p0[2]) * (L0 + arc) / tot
        w0 = w0.at[2].set(z0)
        w1 = w1.at[2].set(z1)
        arc = jnp.sqrt(arc * arc + (z1 - z0) ** 2)
    wrapped = jnp.linalg.norm(p0 - w0) + arc + jnp.linalg.norm(w1 - p1)
    return jnp.where(ok, wrapped, straight)


def build(tendons, ctx, sites):
    """The bound SpatialTendons of the builder's records: ``tendons`` dicts (name, path, stiffness,
    damping, spring: (low, high) or None for the length at q0, filled in after the build), ``sites``
    name -> (body, R, p)."""
    point_body, point_pos, wrap_body, wrap_rot, wrap_pos, wrap_radius, wrap_kind = ([] for _ in range(7))
    index = {}

    def point(site, what):
        if site not in sites:
            raise ValueError(f"{what}: no site named {site!r}")
        if site not in index:
            b, _, p = sites[site]
            host, x = ctx.point(b, p, what)
            index[site] = len(point_body)
            point_body.append(int(host))
            point_pos.append(np.asarray(x, float))
        return index[site]

    paths = []
    for t in tendons:
        what = f"spatial tendon {t['name']!r}"
        steps = []
        for item in t["path"]:
            if item[0] == "site":
                steps.append(("site", point(item[1], what)))
            elif item[0] == "pulley":
                steps.append(("pulley", float(item[1])))
            else:
                kind, body, R, p, r, side = item
                host, Rh = ctx.frame(body, R, what)
                _, ph = ctx.point(body, p, what)
                s = -1 if side is None else point(side, what)
                steps.append(("wrap", len(wrap_body), s))
                wrap_body.append(int(host)), wrap_rot.append(np.asarray(Rh, float))
                wrap_pos.append(np.asarray(ph, float)), wrap_radius.append(float(r)), wrap_kind.append(kind)
        paths.append(tuple(steps))
    k = len(tendons)
    return make(SpatialTendons, names=tuple(t["name"] for t in tendons), paths=tuple(paths),
                point_body=tuple(point_body), wrap_body=tuple(wrap_body), wrap_kind=tuple(wrap_kind),
                point_pos=f64(np.reshape(point_pos, (-1, 3))), wrap_rot=f64(np.reshape(wrap_rot, (-1, 3, 3))),
                wrap_pos=f64(np.reshape(wrap_pos, (-1, 3))), wrap_radius=f64(np.asarray(wrap_radius, float)),
                stiffness=f64([t["stiffness"] for t in tendons]), damping=f64([t["damping"] for t in tendons]),
                spring=f64(np.reshape([(np.nan, np.nan) if t["spring"] is None else t["spring"]
                                       for t in tendons], (k, 2))))
