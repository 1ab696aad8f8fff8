"""The Jacobians the integrators take with contact are exact: at random states with active contacts,
for every pair of geom types the narrow phase has and every joint type, with and without contacts
between branches, ChartODE's Jacobians (with the soft law the rows and H's factors are held:
computed once, differentiated in the position directions only) equal one forward-mode pass of the
whole right-hand side over [y; y'] to 1e-10 of their scale; with the penalty law the branch-sparse
iteration matrix equals the dense one to 1e-12."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxmbd
from jaxmbd.contact.geometry import supported_pairs
from jaxmbd.odes import ChartODE, SparseIterationMatrix
from jaxmbd.odes.base import AbstractODE

jax.config.update("jax_enable_x64", True)

SIZES = {"sphere": (0.06,), "capsule": (0.04, 0.06), "ellipsoid": (0.07, 0.05, 0.04),
         "cylinder": (0.05, 0.05), "box": (0.05, 0.04, 0.06)}
DEPTH = 5e-3            # the penetration the states are placed at (m)
PAIRS = sorted(k for k in supported_pairs() if "hfield" not in k)


def _hull_points(seed):
    """14 points on a slightly irregular ellipsoid: a small convex mesh."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(14, 3))
    return 0.05 * u / np.linalg.norm(u, axis=1, keepdims=True) * np.array([1.2, 1.0, 0.8])


def _geom(b, body, kind, name, seed):
    if kind == "mesh":
        b.add_geom(body, "mesh", name=name, vertices=_hull_points(seed), condim=3)
    else:
        b.add_geom(body, kind, SIZES[kind], name=name, condim=3)


def _pair_scene(type1, type2):
    """Geom ``type2`` on a free body "a"; geom ``type1`` on the floor (a plane) or on body "b", the
    end of a slide-hinge chain on another branch (a contact between branches)."""
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "free", mass=0.8, inertia=(2e-3, 3e-3, 4e-3))
    _geom(b, "a", type2, "ga", 1)
    if type1 == "plane":
        b.add_geom("world", "plane", name="floor")
    else:
        b.add_body("slider", "world", "prismatic", axis=(0, 0, 1), mass=0.5, inertia=(1e-3,) * 3)
        b.add_body("b", "slider", "revolute", axis=(1, 0, 0), mass=0.6, com=(0.01, 0.0, 0.02),
                   inertia=(2e-3, 1e-3, 3e-3))
        _geom(b, "b", type1, "gb", 2)
    b.set_contact_options(rows=64)
    return b.build()


def _placed(m, type1, seed):
    """A random state whose one pair is DEPTH into contact: random orientations (and for the chain
    random coordinates), body a moved along a random direction from b's origin until its deepest
    candidate is at -DEPTH (bisection on the narrow phase's distance)."""
    rng = np.random.default_rng(seed)
    quat = Rotation.from_rotvec(rng.normal(size=3)).as_quat(scalar_first=True)
    if type1 == "plane":
        u, origin, chain = np.array([0.0, 0.0, 1.0]), np.zeros(3), []
    else:
        s, th = 0.1 * rng.normal(), rng.normal()
        u, origin, chain = rng.normal(size=3), np.array([0.0, 0.0, s]), [s, th]
        u /= np.linalg.norm(u)
    dist = lambda q: float(jnp.min(jaxmbd.contact_forces(m, q, jnp.zeros(m.nv))["dist"]))   # noqa: E731
    q_at = lambda t: jnp.asarray(np.concatenate([origin + t * u, quat, chain]))   # noqa: E731
    return q_at(_bisect(dist, q_at, 0.0, 0.5)), jnp.asarray(0.02 * rng.normal(size=m.nv))   # slow: every row pushes


@jax.jit
def _plain(m, q, y, v):
    """One forward-mode pass of ChartODE's g over [y; y']: (g, J1, J2)."""
    return AbstractODE.g_and_jac(ChartODE(m, q), 0.0, y, v)


@jax.jit
def _jacobians(m, q, y, v):
    """(held, plain): ChartODE.g_and_jac and :func:`_plain`."""
    return ChartODE(m, q).g_and_jac(0.0, y, v), _plain(m, q, y, v)


def _assert_same(held, plain, tol):
    for name, a, b in zip(("g", "J1", "J2"), held, plain):
        scale = float(jnp.max(jnp.abs(b)))
        assert scale > 0 and np.all(np.isfinite(np.asarray(a))), name
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=tol * scale, err_msg=name)


@pytest.mark.long
@pytest.mark.parametrize("type1, type2", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_the_jacobians_are_exact_for_every_pair_type(type1, type2):
    m = _pair_scene(type1, type2)
    q, v = _placed(m, type1, seed=PAIRS.index((type1, type2)))
    c = jaxmbd.contact_forces(m, q, v)
    assert float(jnp.max(c["normal_force"])) > 0                 # the contact is active
    y = jnp.asarray(np.random.default_rng(7).normal(size=m.nv)) * 1e-3     # away from the chart's origin
    held, plain = _jacobians(m, q, y, v)
    # the contact does enter the position Jacobian: without it J1 differs
    free = _plain(dataclasses.replace(m, forces=None), q, y, v)
    assert float(jnp.max(jnp.abs(plain[1] - free[1]))) > 1e-3 * float(jnp.max(jnp.abs(plain[1])))
    _assert_same(held, plain, 1e-10)



def _joint_scene(law):
    """Every joint type touching a floor: a chain prismatic (z) - revolute - helical - spherical -
    universal ending in a capsule, a sphere on a planar joint (its plane vertical) and a free box,
    which can also touch the capsule (a contact between branches)."""
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "plane", name="floor")
    b.add_body("p", "world", "prismatic", axis=(0, 0, 1), mass=0.5, inertia=(1e-3,) * 3)
    b.add_body("r", "p", "revolute", axis=(0, 1, 0), mass=0.4, com=(0.05, 0, 0), inertia=(1e-3, 2e-3, 2e-3))
    b.add_body("h", "r", "helical", axis=(1, 0, 0), pitch=0.02, pos=(0.1, 0, 0), mass=0.3, com=(0.04, 0, 0.01),
               inertia=(1e-3,) * 3)
    b.add_body("s", "h", "spherical", pos=(0.1, 0, 0), mass=0.3, com=(0.05, 0.01, 0), inertia=(1e-3, 2e-3, 1e-3))
    b.add_body("u", "s", "universal", pos=(0.1, 0, 0), mass=0.2, com=(0.05, 0, 0), inertia=(5e-4, 1e-3, 1e-3))
    b.add_geom("u", "capsule", (0.03, 0.05), pos=(0.06, 0, 0), quat=(0.7071068, 0, 0.7071068, 0), name="tip")
    b.add_body("pl", "world", "planar", pos=(0.0, 1.0, 0.0), quat=(0.7071068, 0.7071068, 0, 0), mass=0.5,
               com=(0.02, 0, 0), inertia=(1e-3, 1e-3, 2e-3))
    b.add_geom("pl", "sphere", (0.05,), pos=(0.03, 0, 0), name="ball")
    b.add_body("box", "world", "free", mass=0.7, inertia=(2e-3, 3e-3, 2e-3))
    b.add_geom("box", "box", (0.05, 0.04, 0.03), name="box")
    b.set_contact_options(rows=64, law=law)
    return b.build()


def _pair_dist(m, q, pair):
    c = jaxmbd.contact_forces(m, q, jnp.zeros(m.nv))
    k = [tuple(p) for p in c["pairs"]].index(pair)
    return float(jnp.min(jnp.where(c["pair"] == k, c["dist"], jnp.inf)))


def _bisect(dist, q_at, lo, hi):
    """t in (lo, hi) with dist(q_at(t)) = -DEPTH (a deepest candidate's distance; separated at hi)."""
    assert dist(q_at(hi)) > 0 > dist(q_at(lo))
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if dist(q_at(mid)) < -DEPTH else (lo, mid)
    return lo


def _joint_state(m, cross, seed):
    """Random joint coordinates and velocities; the chain lowered, the planar sphere and the box placed
    DEPTH into the floor; the box moved against the capsule (``cross``) or left away from it."""
    rng = np.random.default_rng(seed)
    q = np.asarray(jaxmbd.neutral_q(m), float).copy()
    adr = lambda name: int(m.topo.q_adr[m.body_id(name)])   # noqa: E731
    q[adr("r")], q[adr("h")] = 0.4 + 0.2 * rng.normal(), rng.normal()
    q[adr("s"):adr("s") + 4] = Rotation.from_rotvec([0.3 * rng.normal(), 0.6, 0.3 * rng.normal()]).as_quat(
        scalar_first=True)
    q[adr("u"):adr("u") + 2] = 0.4 * rng.normal(size=2)
    q[adr("pl"):adr("pl") + 3] = [0.1 * rng.normal(), 0.5, rng.normal()]
    box = adr("box")
    q[box:box + 3] = [-1.0, -1.0, 0.5]
    q[box + 3:box + 7] = Rotation.from_rotvec(0.2 * rng.normal(size=3)).as_quat(scalar_first=True)

    def at(i):
        def q_at(t):
            out = q.copy()
            out[i] = t
            return jnp.asarray(out)
        return q_at
    for name, i in (("tip", adr("p")), ("ball", adr("pl") + 1), ("box", box + 2)):
        q[i] = _bisect(lambda q: _pair_dist(m, q, ("floor", name)), at(i), -0.6, 0.6)
    if cross:       # along the floor towards the capsule's contact with it
        c = jaxmbd.contact_forces(m, jnp.asarray(q), jnp.zeros(m.nv))
        k = [tuple(p) for p in c["pairs"]].index(("floor", "tip"))
        tip = np.asarray(c["pos"])[int(np.argmin(np.where(np.asarray(c["pair"]) == k, np.asarray(c["dist"]), np.inf)))]
        start = q[box:box + 2].copy()

        def q_at(t):
            out = q.copy()
            out[box:box + 2] = tip[:2] + t * (start - tip[:2])
            return jnp.asarray(out)
        q = np.asarray(q_at(_bisect(lambda q: _pair_dist(m, q, ("tip", "box")), q_at, 0.0, 1.0)))
    return jnp.asarray(q), jnp.asarray(0.02 * rng.normal(size=m.nv))


@jax.jit
def _sparse_and_dense(m, q, v, r, x):
    """S⁻¹ r by the branch-sparse iteration matrix, J1 x by it and by the dense J1, its flag, the dense
    J1 and the dense S = I - hγ J2 - (hγ)² J1 (hγ = 0.02)."""
    ode = ChartODE(m, q)
    g0, J1, J2 = ode.g_and_jac(0.0, jnp.zeros_like(v), v)
    sparse = SparseIterationMatrix.build(ode, 0.0, v, g0, 0.02)
    S = jnp.eye(m.nv) - 0.02 * J2 - 0.02 * 0.02 * J1          # the dense iteration matrix
    return sparse.solve_S(r), sparse.J1mv(x), J1 @ x, sparse.exact, J1, S


@pytest.mark.long
@pytest.mark.parametrize("cross", [False, True], ids=["floor-only", "between-branches"])
def test_the_jacobians_are_exact_for_every_joint_type(cross):
    """Prismatic, revolute, helical, spherical, universal, planar and free joints, every body on the
    floor, with the box also against the capsule's chain or not: the soft law's held Jacobians equal
    the plain forward-mode pass (1e-10), and with the penalty law the branch-sparse iteration matrix's
    J1 x equals the dense one (1e-12) and the dense S applied to the sparse S⁻¹ r gives r back (a
    normwise backward error below 1e-13; S's condition number here, about 4e5, amplifies round-off
    in any two solves, so their solutions are not compared directly)."""
    m = _joint_scene("soft")
    assert set(m.topo.jtype) >= {"prismatic", "revolute", "helical", "spherical", "universal", "planar", "free"}
    q, v = _joint_state(m, cross, seed=3 + cross)
    c = jaxmbd.contact_forces(m, q, v)
    names = [tuple(p) for p in c["pairs"]]
    force = {p: float(jnp.max(jnp.where(c["pair"] == k, c["normal_force"], 0.0))) for k, p in enumerate(names)}
    assert all(force[("floor", g)] > 0 for g in ("tip", "ball", "box")), force
    assert (force[("tip", "box")] > 0) == cross, force
    y = jnp.asarray(np.random.default_rng(5).normal(size=m.nv)) * 1e-3
    _assert_same(*_jacobians(m, q, y, v), 1e-10)
    if cross:       # and where the tree is too large for the world-coordinate sums (the level passes instead)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(jaxmbd.crba, "WORLD_SUM_MAX_PAIRS", 0)
            from jaxmbd.rnea import world_form
            assert not world_form(m.topo)
            held = jax.jit(lambda q, y, v: ChartODE(m, q).g_and_jac(0.0, y, v))(q, y, v)
        _assert_same(held, _plain(m, q, y, v), 1e-10)

    pm = _joint_scene("penalty")
    rng = np.random.default_rng(11)
    r, x = jnp.asarray(rng.normal(size=m.nv)), jnp.asarray(rng.normal(size=m.nv))
    xs, J1s, J1d, exact, J1, S = _sparse_and_dense(pm, q, v, r, x)
    assert bool(exact)
    if cross:       # the contact between branches puts entries off H's branch pattern (Woodbury-corrected)
        HJ = np.abs(np.asarray(jaxmbd.mass_matrix(pm, q) @ J1))
        on = np.zeros((m.nv, m.nv), bool)
        on[m.topo.M_rows, m.topo.M_cols] = True
        assert HJ[~(on | on.T)].max() > 1e-3 * HJ.max()
    S_norm = float(jnp.max(jnp.sum(jnp.abs(S), axis=1)))
    np.testing.assert_allclose(np.asarray(S @ xs), np.asarray(r), rtol=0,
                               atol=1e-13 * S_norm * float(jnp.max(jnp.abs(xs))))
    np.testing.assert_allclose(np.asarray(J1s), np.asarray(J1d), rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(J1d))))
