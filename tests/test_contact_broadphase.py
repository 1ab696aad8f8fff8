"""The contact element's structure: the generalized force from body wrenches by the tree's
subtree sums (no contact Jacobian) equals the per-contact Jacobian route, and the broad phase
with static capacities gives the all-pairs forces while it does not overflow, reports when it
does, and stays continuous as pairs enter and leave the kept set."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd.forces.base import overflow as contact_overflow
from jaxmbd.forces.contact import Contact
from jaxmbd.forces.contact_broadphase import capacities
from contact_util import jacobian_tau
from jaxmbd import Start, Steps

# the closed-form primitives on free, ball, hinge and slide joints (the force after the narrow phase
# does not depend on the pair's types); geoms on two branches touch each other
MIXED = """
<mujoco><option gravity="0 0 -9.81"/>
<worldbody>
  <geom name="floor" type="plane" size="0 0 1"/>
  <body name="base" pos="0 0 0.3"><freejoint/>
    <geom name="base_box" type="box" size="0.15 0.1 0.05"/>
    <geom name="base_cap" type="capsule" size="0.04 0.1" pos="0 0 0.08" euler="0 90 0"/>
    <body name="armA" pos="0.15 0 0"><joint name="ballA" type="ball"/>
      <geom name="a_sph" type="sphere" size="0.06" pos="0.1 0 -0.05"/>
      <body name="armA2" pos="0.2 0 0"><joint name="hingeA" type="hinge" axis="0 1 0"/>
        <geom name="a_box" type="box" size="0.04 0.03 0.05" pos="0.05 0 -0.1"/>
        <geom name="a_cap" type="capsule" size="0.03 0.05" pos="0.1 0 -0.15"/>
      </body>
    </body>
    <body name="armB" pos="-0.15 0 0"><joint name="hingeB" type="hinge" axis="0 1 0"/>
      <geom name="b_cap" type="capsule" size="0.03 0.08" pos="-0.05 0 -0.1"/>
      <body name="armB2" pos="-0.1 0 -0.1"><joint name="slideB" type="slide" axis="0 0 1"/>
        <geom name="b_box" type="box" size="0.04 0.04 0.04" pos="0 0 -0.1"/>
      </body>
    </body>
  </body>
  <body name="ball" pos="0.3 0 0.1"><freejoint/><geom name="ball" type="sphere" size="0.1"/></body>
</worldbody></mujoco>"""


def _element(m):
    return [e for e in m.forces if isinstance(e, Contact)][0]


@pytest.fixture(scope="module")
def mixed():
    return jaxmbd.load_mjcf(MIXED, warn=False, contact_capacity="all", law="penalty")


def _random_states(m, n, seed):
    """States with many contacts active: the bodies pressed into the floor and into each other."""
    rng = np.random.default_rng(seed)
    qs, vs = [], []
    for _ in range(n):
        q = np.asarray(m.q0).copy()
        q[:3] += rng.uniform(-0.05, 0.05, 3) - np.array([0, 0, 0.2])
        qq = rng.normal(size=4) * np.array([1, 0.2, 0.2, 0.2]) + np.array([3, 0, 0, 0])
        q[3:7] = qq / np.linalg.norm(qq)
        q[7:] += rng.normal(size=len(q) - 7) * 0.3
        qs.append(q)
        vs.append(rng.normal(size=m.nv))
    return jnp.asarray(np.array(qs)), jnp.asarray(np.array(vs))


def test_the_structural_force_equals_the_per_contact_jacobians(mixed):
    el = _element(mixed)
    types = {(a, b) for a, b, _ in el.groups}
    assert {("plane", "box"), ("plane", "sphere"), ("plane", "capsule"), ("sphere", "sphere"),
            ("capsule", "box"), ("box", "box"), ("capsule", "capsule")} <= types
    assert any(ba >= 0 and bb >= 0 for _, _, rows in el.groups for a, b in rows
               for ba, bb in [(el.geom_body[a], el.geom_body[b])])          # body-to-body pairs
    qs, vs = _random_states(mixed, 6, 0)

    @jax.jit
    @jax.vmap
    def both(q, v):
        out = el.evaluate(mixed, q, v)
        return out["tau"], jacobian_tau(el, mixed, q, v), out["normal_force"]
    new, old, fn = both(qs, vs)
    assert np.all(np.sum(np.asarray(fn) > 0, axis=1) >= 2) and np.sum(np.asarray(fn) > 0) >= 40
    scale = np.max(np.abs(np.asarray(old)), axis=1, keepdims=True)
    assert np.all(scale > 1.0)
    assert np.all(np.abs(np.asarray(new) - np.asarray(old)) <= 1e-12 * scale)


# --- the broad phase -----------------------------------------------------------------------------

def _balls(n, capacity=None):
    """n free balls (radius 0.1) in a row on a floor: n plane-sphere pairs, n(n-1)/2 sphere-sphere."""
    bodies = "".join(f'<body name="b{i}" pos="{0.25 * i} 0 0.098"><freejoint/>'
                     f'<geom name="g{i}" type="sphere" size="0.1"/></body>' for i in range(n))
    xml = (f'<mujoco><worldbody><geom name="floor" type="plane" size="0 0 1"/>{bodies}</worldbody></mujoco>')
    return jaxmbd.load_mjcf(xml, warn=False, contact_capacity=capacity, law="penalty")


def test_the_default_capacity_follows_the_rule():
    m = _balls(7)
    el = _element(m)
    sizes = {(a, b): len(r) for a, b, r in el.groups}
    assert sizes == {("plane", "sphere"): 7, ("sphere", "sphere"): 21}
    cap = dict(zip([(a, b) for a, b, _ in el.groups], el.capacity))
    # the plane group is small (<= 16): all of it; no two balls touch at q0: max(8, 2 * 0 + 4)
    assert cap == {("plane", "sphere"): 7, ("sphere", "sphere"): 8}
    assert capacities(el, m, "all") == tuple(sizes[(a, b)] for a, b, _ in el.groups)
    assert capacities(el, m, {("sphere", "sphere"): 3}) == (7, 3)
    # a box-box pair has 33 candidates: the floor keeps 64 // 33 -> 2 pairs; a pair within reach adds 2
    boxes = "".join(f'<body name="x{i}" pos="{0.5 * i} 0 1"><freejoint/><geom name="x{i}" type="box" '
                    f'size="0.1 0.1 0.1"/></body>' for i in range(5))
    boxes += '<body name="x5" pos="0.05 0.05 1.15"><freejoint/><geom name="x5" type="box" size="0.1 0.1 0.1"/></body>'
    mb = jaxmbd.load_mjcf(f"<mujoco><worldbody>{boxes}</worldbody></mujoco>", warn=False)
    eb = _element(mb)
    assert [(a, b, len(r)) for a, b, r in eb.groups] == [("box", "box", 15)] and eb.capacity == (4,)
    with pytest.raises(ValueError, match="no box-box pairs"):
        capacities(el, m, {("box", "box"): 3})
    with pytest.raises(ValueError, match="at least 1"):
        capacities(el, m, 0)


def _pile(m, gap, seed=0):
    """States of the balls: k of them squeezed together around x = 0 (pairs within reach), the others
    spread apart; gap < 0 overlaps the neighbours."""
    rng = np.random.default_rng(seed)
    q = np.asarray(m.q0).reshape(-1, 7).copy()
    q[:, 0] = np.arange(len(q)) * (0.2 + gap)
    q[:, 1] = rng.uniform(-1e-3, 1e-3, len(q))
    return jnp.asarray(q.reshape(-1))


@pytest.mark.long
def test_within_capacity_the_forces_are_the_all_pairs_forces_and_beyond_it_the_run_stops():
    m = _balls(7, {("sphere", "sphere"): 8})
    full = _balls(7, "all")
    el, el_full = _element(m), _element(full)
    rng = np.random.default_rng(1)
    v = jnp.asarray(rng.normal(size=m.nv))
    tau = jax.jit(lambda q, v: el.evaluate(m, q, v)["tau"])
    tau_full = jax.jit(lambda q, v: el_full.evaluate(full, q, v)["tau"])
    over = jax.jit(lambda q: contact_overflow(m, q))
    # the first 5 balls touch their neighbours (4 pairs within reach), the rest apart
    q = np.array(_pile(m, 0.3)).reshape(-1, 7)
    q[:5, 0] = np.arange(5) * 0.19
    q = jnp.asarray(q.reshape(-1))
    a, b = tau(q, v), tau_full(q, v)
    assert not bool(over(q)) and np.max(np.abs(b)) > 1.0
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-12 * np.max(np.abs(b)))
    # all 7 in a tight cluster: every pair within reach of its bounding sphere, 21 > 8
    qc = np.array(q).reshape(-1, 7)
    qc[:, 0] = np.arange(7) * 0.01
    qc = jnp.asarray(qc.reshape(-1))
    assert bool(over(qc))
    sol = jaxmbd.simulate(m, Start(qc, jnp.zeros(m.nv)), 0.01, integrator=I.RK4(), steps=Steps(dt0=1e-3))
    assert int(sol.status) == I.CONTACT_OVERFLOW
    assert jaxmbd.status_name(int(sol.status)).startswith("contact capacity exceeded")
    # within capacity, a run is the all-pairs run
    s1 = jaxmbd.simulate(m, Start(q, jnp.zeros(m.nv)), 0.02, integrator=I.RK4(), steps=Steps(dt0=1e-3))
    s2 = jaxmbd.simulate(full, Start(q, jnp.zeros(m.nv)), 0.02, integrator=I.RK4(), steps=Steps(dt0=1e-3))
    assert int(s1.status) == I.SUCCESS == int(s2.status)
    np.testing.assert_allclose(np.asarray(s1.qs), np.asarray(s2.qs), rtol=0, atol=1e-12)


@pytest.mark.long
def test_the_force_is_continuous_as_pairs_enter_and_leave_the_kept_set():
    """Ball 0 sweeps along the row of the others with capacity 2 for the sphere-sphere pairs: the kept
    pairs change along the path (checked), the force equals the all-pairs force at every point, and
    so it is as continuous as the law: its jumps between neighbouring points are bounded by the
    all-pairs force's."""
    m = _balls(5, {("sphere", "sphere"): 2})
    full = _balls(5, "all")
    el, el_full = _element(m), _element(full)
    q0 = np.array(_pile(m, 0.6)).reshape(-1, 7)
    xs = np.linspace(-0.3, 3.3, 721)
    qs = np.repeat(q0[None], len(xs), 0)
    qs[:, 0, 0], qs[:, 0, 2] = xs, 0.098 + 0.15          # ball 0 passes over the others, grazing them
    qs = jnp.asarray(qs.reshape(len(xs), -1))
    v = jnp.zeros(m.nv).at[0].set(0.3)
    f = jax.jit(jax.vmap(lambda q: el.evaluate(m, q, v)["tau"]))(qs)
    g = jax.jit(jax.vmap(lambda q: el_full.evaluate(full, q, v)["tau"]))(qs)
    Rg_pg = jax.jit(jax.vmap(lambda q: el.geom_poses(jaxmbd.kinematics.forward_kinematics(m, q))))(qs)
    kept = jax.vmap(lambda R, p: el.select(R, p)[0][1][1])(*Rg_pg)      # the sphere-sphere pair indices
    changes = np.sum(np.any(np.diff(np.sort(np.asarray(kept), axis=1), axis=0) != 0, axis=1))
    assert changes >= 3
    assert not np.any(jax.vmap(lambda q: contact_overflow(m, q))(qs))
    assert np.max(np.abs(g)) > 1.0                                        # the sweep touches the balls
    np.testing.assert_allclose(np.asarray(f), np.asarray(g), rtol=0, atol=1e-12 * np.max(np.abs(g)))
    jumps, jumps_full = np.max(np.abs(np.diff(f, axis=0))), np.max(np.abs(np.diff(g, axis=0)))
    assert jumps <= jumps_full * (1 + 1e-9)


def test_gradients_through_the_broad_phase_equal_the_all_pairs_gradients():
    m = _balls(6, {("sphere", "sphere"): 3})
    full = _balls(6, "all")
    el, el_full = _element(m), _element(full)
    q = np.array(_pile(m, 0.3)).reshape(-1, 7)
    q[:3, 0] = np.arange(3) * 0.19
    q = jnp.asarray(q.reshape(-1))
    v = jnp.asarray(np.random.default_rng(3).normal(size=m.nv))
    w = jnp.asarray(np.random.default_rng(4).normal(size=m.nv))
    loss = lambda e, mm: (lambda q, v: jnp.dot(w, e.evaluate(mm, q, v)["tau"]))  # noqa: E731
    ga = jax.jit(jax.grad(loss(el, m), argnums=(0, 1)))(q, v)
    gb = jax.jit(jax.grad(loss(el_full, full), argnums=(0, 1)))(q, v)
    for a, b in zip(ga, gb):
        assert np.max(np.abs(b)) > 1.0
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-10 * np.max(np.abs(b)))


@pytest.mark.long
def test_a_run_stops_at_the_first_state_that_overflows_and_never_steps_from_one():
    """Seven balls in a row slide together (neighbours 0.05 m apart closing at 0.5 m/s): their six
    neighbour pairs come within reach together, beyond a capacity of 3.  The run stops with
    CONTACT_OVERFLOW on the first state that overflows, after progress; every saved state before it
    is within capacity (no step started from an overflowing state), and the state it ends on
    overflows."""
    m = _balls(7, {("sphere", "sphere"): 3})
    v = np.zeros(m.nv)
    v[0::6] = -(np.arange(7) - 3) * 0.5                  # free joints: linear velocity first
    ts = jnp.linspace(0.0, 0.2, 201)
    sol = jaxmbd.simulate(m, Start(m.q0, jnp.asarray(v)), 0.2, integrator=I.RK4(),
                          steps=Steps(dt0=1e-3), save=jaxmbd.Save(ts=ts))
    assert int(sol.status) == I.CONTACT_OVERFLOW
    t_end = float(sol.t)
    assert 0.1 <= t_end < 0.2                           # the floor's friction slows them a little
    over = np.asarray(jax.vmap(lambda q: contact_overflow(m, q))(sol.qs))
    before = np.asarray(ts) < t_end - 1e-12
    assert not over[before].any() and before.sum() > 50
    assert over[~before].all()


def test_the_bounds_never_exceed_a_pair_s_distance(mixed):
    """The broad phase's bound (bounding spheres and boxes, or box and plane) is positive only for
    pairs whose every candidate lies beyond the margin (zero force), and at most the nearest
    candidate's distance where the geoms overlap (there the narrow phase is exact; apart, some pairs'
    candidates, box-box's corners against faces, underestimate the distance); and it is tight enough
    to matter: the box test beats the spheres on some pairs."""
    el = _element(mixed)
    qs, _ = _random_states(mixed, 24, 5)
    qs = qs.at[:, 2].add(0.15)          # near contact rather than deep in it: the bounds' gaps vary in sign

    @jax.jit
    @jax.vmap
    def both(q):
        kin = jaxmbd.kinematics.forward_kinematics(mixed, q)
        Rg, pg = el.geom_poses(kin)
        c = el.narrow_phase(kin)
        nearest = jnp.full(el.n_pairs, jnp.inf).at[c["pair"]].min(c["dist"])
        return jnp.concatenate(el.pair_bounds(Rg, pg)), nearest - el.margin
    bound, dist = map(np.asarray, both(qs))
    assert np.all((bound <= 0) | (dist > 0))
    assert np.all(np.where(dist < 0, bound <= dist + 1e-12, True))
    assert np.any((bound > 0) & (dist < 0.05)) and np.any(dist < 0)
    el_spheres = jax.tree_util.tree_map(lambda x: x, el)
    import equinox as eqx
    loose = eqx.tree_at(lambda e: e.geom_half, el_spheres, el.geom_half * 1e3)   # boxes that never bind
    kin = jaxmbd.kinematics.forward_kinematics(mixed, qs[0])
    tight = np.concatenate(el.pair_bounds(*el.geom_poses(kin)))
    spheres = np.concatenate(loose.pair_bounds(*el.geom_poses(kin)))
    nonplane = np.concatenate([np.full(len(r), a != "plane") for a, _, r in el.groups])
    assert np.any(tight[nonplane] > spheres[nonplane] + 1e-3)


def test_the_box_gap_is_the_largest_gap_of_the_corners_projections():
    """The separating-axis bound of two boxes, formed in box 1's frame, equals the brute-force form:
    the 8 corners of each box projected on the 15 world axes (both boxes' axes and the normalized
    cross products of their edges, near-parallel edge pairs left out), the largest gap between the
    two intervals; over random poses, aligned boxes and boxes turned about one shared axis (where the
    edge axes degenerate)."""
    from scipy.spatial.transform import Rotation
    from jaxmbd.forces.contact_broadphase import _box_gap
    rng = np.random.default_rng(3)
    k = 300
    R1 = Rotation.random(k, random_state=4).as_matrix()
    R2 = Rotation.random(k, random_state=5).as_matrix()
    R2[:40] = R1[:40]
    R2[40:80] = R1[40:80] @ Rotation.from_rotvec(np.c_[np.zeros((40, 2)), rng.normal(size=40)]).as_matrix()
    e1, e2 = rng.uniform(0.01, 0.1, (k, 3)), rng.uniform(0.01, 0.1, (k, 3))
    d = rng.normal(size=(k, 3)) * 0.12
    signs = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, 8).T           # (8, 3)
    want = np.empty(k)
    for i in range(k):
        c1 = (signs * e1[i]) @ R1[i].T
        c2 = d[i] + (signs * e2[i]) @ R2[i].T
        axes = list(R1[i].T) + list(R2[i].T)
        for a in R1[i].T:
            for b in R2[i].T:
                x = np.cross(a, b)
                if np.linalg.norm(x) > 1e-6:
                    axes.append(x / np.linalg.norm(x))
        want[i] = max(max((c2 @ u).min() - (c1 @ u).max(), (c1 @ u).min() - (c2 @ u).max()) for u in axes)
    got = np.asarray(jax.jit(_box_gap)(R1, e1, R2, e2, d))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)
    assert np.any(want > 0) and np.any(want < 0)


GJK_SCENE = """
<mujoco><worldbody>
  <body name="a" pos="0 0 0"><freejoint/><geom name="cyl" type="cylinder" size="0.1 0.15"/></body>
  <body name="b" pos="0.15 0 0.1"><freejoint/><geom name="sph" type="sphere" size="0.08"/></body>
  <body name="c" pos="-0.1 0.1 0"><freejoint/><geom name="cap" type="capsule" size="0.05 0.1"/></body>
  <body name="d" pos="0 -0.2 0.05"><freejoint/><geom name="box" type="box" size="0.1 0.08 0.06"/></body>
</worldbody></mujoco>"""


@pytest.mark.long
def test_the_gjk_pairs_of_every_type_share_one_narrow_phase_with_the_per_type_results():
    """The GJK/EPA pairs of several type pairs (sphere-cylinder, capsule-cylinder, cylinder-box) run as
    one batch with the types traced: the candidates equal each pair's own narrow phase."""
    from jaxmbd.contact import geometry as G
    m = jaxmbd.load_mjcf(GJK_SCENE, warn=False)
    el = _element(m)
    assert {("sphere", "cylinder"), ("capsule", "cylinder"), ("cylinder", "box")} <= {(a, b) for a, b, _ in el.groups}
    rng = np.random.default_rng(7)
    q = np.array(m.q0).reshape(-1, 7)
    q[:, :3] += rng.uniform(-0.03, 0.03, (4, 3))
    qq = rng.normal(size=(4, 4))
    q[:, 3:] = qq / np.linalg.norm(qq, axis=1, keepdims=True)
    q = jnp.asarray(q.reshape(-1))
    kin = jaxmbd.kinematics.forward_kinematics(m, q)
    c = jax.jit(lambda q: el.candidates(m, q))(q)
    Rg, pg = el.geom_poses(kin)
    pairs = [(a, b) for _, _, rows in el.groups for a, b in rows]
    types = [(t1, t2) for t1, t2, rows in el.groups for _ in rows]
    checked = 0
    for i, ((a, b), (t1, t2)) in enumerate(zip(pairs, types)):
        if "cylinder" not in (t1, t2):
            continue
        ref = G.collide(t1, t2, (Rg[a], pg[a]), el.geom_size[a], (Rg[b], pg[b]), el.geom_size[b])
        k = int(np.flatnonzero(np.asarray(c["pair"]) == i)[0])
        np.testing.assert_allclose(float(c["dist"][k]), float(ref.dist[0]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.asarray(c["normal"][k]), np.asarray(ref.frame[0, 0]), rtol=0, atol=1e-12)
        checked += 1
    assert checked == 3 and np.min(np.asarray(c["dist"])) < 0
