"""The joint-type registry (jaxmbd.joints): every registered type has all its
pieces and they agree with one another, and the algorithms agree on a small
tree of each type.  A type added to the registry is checked here with no edit
to this file."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import aba_unrolled, joints, models, spatial
from jaxmbd.aba import aba as aba_array
from jaxmbd.joints import JointType

MOVING = [t for t in joints.registered() if not t.welded]
IDS = [t.name for t in MOVING]


def _params(t, rng):
    """A joint's (axis, anchor, pitch) as the builder would store them for type t."""
    axis = rng.normal(size=3) if t.uses_axis else np.array([0.0, 0.0, 1.0])
    axis = axis / np.linalg.norm(axis)
    anchor = rng.uniform(-0.3, 0.3, 3) if t.uses_anchor else np.zeros(3)
    pitch = float(rng.uniform(0.05, 0.2)) if t.uses_pitch else 0.0
    return jnp.asarray(axis), jnp.asarray(anchor), jnp.asarray(pitch)


def _state(t, rng, scale=0.7):
    q = t.integrate(t.neutral(jnp.float64), jnp.asarray(scale * rng.normal(size=t.nv)), 1.0)
    return q, jnp.asarray(rng.normal(size=t.nv))


def _vee(W):
    return jnp.array([W[2, 1], W[0, 2], W[1, 0]])


def test_registry_lookups():
    names = [t.name for t in joints.registered()]
    assert list(joints.JOINT_TYPES) == names and len(set(names)) == len(names)
    for t in joints.registered():
        assert joints.get(t.name) is t and joints.canonical(t) == t.name
        for a in t.aliases:
            assert joints.canonical(a) == t.name and joints.get(a) is t
        assert joints.NQ[t.name] == t.nq and joints.NV[t.name] == t.nv
        assert (t.name in joints.JCALC) == (not t.welded)
        assert (t.name in joints.SCALAR_COORDS) == t.scalar_coords
    with pytest.raises(ValueError, match="unknown joint type 'nonesuch'"):
        joints.get("nonesuch")


@pytest.mark.parametrize("t", [t for t in joints.registered() if t.welded], ids=lambda t: t.name)
def test_welded_type(t):
    assert t.nq == 0 and t.jcalc is None and t.neutral(jnp.float64).shape == (0,)


@pytest.mark.parametrize("t", MOVING, ids=IDS)
def test_pieces_are_consistent(t):
    """Shapes, the manifold functions against each other, and S and cJ against
    derivatives of the joint transform (forward-mode autodiff, exact)."""
    rng = np.random.default_rng(sum(map(ord, t.name)))
    axis, anchor, pitch = _params(t, rng)
    for piece in ("jcalc", "neutral", "integrate", "qdot", "difference", "normalize"):
        assert callable(getattr(t, piece)), piece

    q0 = t.neutral(jnp.float64)
    assert q0.shape == (t.nq,) and q0.dtype == jnp.float64
    for sl in joints.quaternion_slices(t.name):
        np.testing.assert_allclose(jnp.linalg.norm(q0[sl]), 1.0, rtol=0, atol=1e-15)

    @jax.jit
    def pieces(q, v, dv):
        R, p, S, cJ = t.jcalc(q, v, axis, anchor, pitch)
        qd = t.qdot(q, v)
        # d/dt of the transform and of S along q̇ = qdot(q, v)
        (R_, p_), (Rd, pd) = jax.jvp(lambda x: t.jcalc(x, v, axis, anchor, pitch)[:2], (q,), (qd,))
        _, Sd = jax.jvp(lambda x: t.jcalc(x, v, axis, anchor, pitch)[2], (q,), (qd,))
        # q̇ against integrate: d/dh integrate(q, v, h) at h = 0
        _, qd_int = jax.jvp(lambda h: t.integrate(q, v, h), (jnp.zeros(()),), (jnp.ones(()),))
        q1 = t.integrate(q, dv, 1.0)
        return dict(R=R, p=p, S=S, cJ=cJ, qd=qd, Rd=Rd, pd=pd, Sd=Sd, qd_int=qd_int,
                    q_zero=t.integrate(q, dv, 0.0), q1=q1, back=t.difference(q, q1), norm=t.normalize(q1))

    for trial in range(3):
        q, v = _state(t, rng)
        dv = jnp.asarray(0.5 * rng.normal(size=t.nv))
        o = pieces(q, v, dv)
        assert o["R"].shape == (3, 3) and o["p"].shape == (3,)
        assert o["S"].shape == (6, t.nv) and o["cJ"].shape == (6,)
        assert o["qd"].shape == (t.nq,) and o["back"].shape == (t.nv,)
        np.testing.assert_allclose(o["R"].T @ o["R"], np.eye(3), atol=1e-13)
        np.testing.assert_allclose(o["q_zero"], q, rtol=0, atol=1e-15)           # q ⊕ 0 = q
        np.testing.assert_allclose(o["back"], dv, rtol=0, atol=1e-12)           # (q ⊕ dv) ⊖ q = dv
        np.testing.assert_allclose(o["qd"], o["qd_int"], rtol=0, atol=1e-12)    # q̇ = d/dh (q ⊕ v h)
        np.testing.assert_allclose(o["norm"], o["q1"], rtol=0, atol=1e-14)     # integrate keeps q valid
        # S v = body velocity relative to J from the transform: [vee(Rᵀ Ṙ); Rᵀ ṗ]
        vel = jnp.concatenate([_vee(o["R"].T @ o["Rd"]), o["R"].T @ o["pd"]])
        np.testing.assert_allclose(o["S"] @ v, vel, rtol=0, atol=1e-12)
        # cJ = (d/dt S) v along the motion
        np.testing.assert_allclose(o["cJ"], o["Sd"] @ v, rtol=0, atol=1e-12)
        if t.scalar_coords:
            np.testing.assert_allclose(o["qd"], v, rtol=0, atol=0)
        # rotation blocks carry the body-frame angular velocity
        for b in t.rotation_blocks:
            np.testing.assert_allclose(o["S"][:, b:b + 3], np.vstack([np.eye(3), o["S"][3:, b:b + 3]]), atol=1e-15)
        # a position coordinate moves one-to-one with its DoF
        for d, c in t.position_coords:
            e = jnp.zeros(t.nv).at[d].set(0.1)
            np.testing.assert_allclose(t.integrate(q, e, 1.0)[c] - q[c], 0.1, rtol=0, atol=1e-14)


def _tree(t):
    """A small random tree (3 bodies) whose every joint is of type t."""
    root = None if not t.floating else t.name
    return models.random_tree(11, 3, joint_types=(t.name,), root_joint=root)


def _compare_algorithms(m, seed):
    rng = np.random.default_rng(seed)
    q = jaxmbd.integrate_q(m, m.q0, jnp.asarray(0.7 * rng.normal(size=m.nv)))
    v, tau = jnp.asarray(rng.normal(size=m.nv)), jnp.asarray(rng.normal(size=m.nv))

    @jax.jit
    def run(q, v, tau):
        return dict(a=aba_array(m, q, v, tau), au=aba_unrolled.aba(m, q, v, tau),
                    M=jaxmbd.mass_matrix(m, q), bias=jaxmbd.bias_force(m, q, v),
                    ke=jaxmbd.kinetic_energy(m, q, v))
    return run(q, v, tau), v, tau


@pytest.mark.parametrize("t", [t if t.name == "prismatic" else pytest.param(t, marks=pytest.mark.long)  # long but one
                               for t in MOVING], ids=IDS)
def test_algorithms_agree_on_a_tree(t, monkeypatch):
    """Array ABA, unrolled ABA (closed form and the generic path through jcalc),
    CRBA + RNEA, and the kinetic energy agree on a tree of the type."""
    m = _tree(t)
    assert t.name in m.topo.jtype
    o, v, tau = _compare_algorithms(m, 3)
    np.testing.assert_allclose(o["au"], o["a"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(o["M"] @ o["a"] + o["bias"], tau, rtol=0, atol=1e-9)
    np.testing.assert_allclose(o["ke"], 0.5 * v @ o["M"] @ v, rtol=1e-12)
    if t.unrolled is not None:  # the generic path works for this type too
        monkeypatch.setitem(joints._REGISTRY, t.name, dataclasses.replace(t, unrolled=None))
        o2, _, _ = _compare_algorithms(m, 3)
        np.testing.assert_allclose(o2["au"], o["a"], rtol=1e-10, atol=1e-10)


def test_incomplete_type_is_refused():
    n_before = len(joints.registered())

    def jc(q, v, axis, anchor, pitch):
        return jnp.eye(3), jnp.zeros(3), jnp.zeros((6, 2)), jnp.zeros(6)

    with pytest.raises(ValueError, match="missing jcalc"):
        joints.register(JointType(name="broken", nq=2, nv=2, scalar_coords=True))
    with pytest.raises(ValueError, match="must define difference, normalize"):
        joints.register(JointType(name="broken", nq=3, nv=2, jcalc=jc, neutral=lambda d: jnp.zeros(3, d),
                                  integrate=lambda q, v, dt: q, qdot=lambda q, v: q))
    with pytest.raises(ValueError, match="scalar coordinates need nq = nv"):
        joints.register(JointType(name="broken", nq=3, nv=2, jcalc=jc, scalar_coords=True))
    with pytest.raises(ValueError, match="rotation_blocks"):
        joints.register(JointType(name="broken", nq=4, nv=2, jcalc=jc, rotation_blocks=(0,),
                                  neutral=jnp.zeros, integrate=jnp.add, qdot=jnp.add, difference=jnp.add,
                                  normalize=jnp.abs))
    with pytest.raises(ValueError, match="'revolute' is already registered"):
        joints.register(JointType(name="revolute", nq=2, nv=2, jcalc=jc, scalar_coords=True))
    with pytest.raises(ValueError, match="'hinge' is already registered"):
        joints.register(JointType(name="hinge2", nq=2, nv=2, jcalc=jc, scalar_coords=True, aliases=("hinge",)))
    with pytest.raises(TypeError, match="expects a JointType"):
        joints.register(dict(name="broken"))
    assert len(joints.registered()) == n_before and not joints.is_registered("broken")
    with pytest.raises(ValueError, match="unknown joint type 'broken'"):
        jaxmbd.ModelBuilder().add_body("b", "world", "broken")


def test_a_registered_type_is_usable_and_removable():
    """A complete type registered at run time works in the builder and the
    algorithms (here a second name for a 2-DoF scalar joint built from two revolutes)."""
    def jc(q, v, axis, anchor, pitch):
        R = spatial.axis_angle_rot(jnp.array([0.0, 0.0, 1.0]), q[0] + q[1])
        S = jnp.stack([jnp.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], q.dtype)] * 2, axis=1)
        return R, jnp.zeros(3, q.dtype), S, jnp.zeros(6, q.dtype)

    joints.register(JointType(name="twin_hinge", nq=2, nv=2, jcalc=jc, scalar_coords=True))
    try:
        t = joints.get("twin_hinge")
        assert t.position_coords == ((0, 0), (1, 1)) and t.integrate(jnp.ones(2), jnp.ones(2), 2.0)[0] == 3.0
        b = jaxmbd.ModelBuilder()
        b.add_body("a", "world", "twin_hinge", mass=1.0, com=(0.2, 0, 0), inertia=(0.1, 0.2, 0.3), armature=0.1)
        m = b.build()
        assert m.nq == m.nv == 2
        M = jaxmbd.mass_matrix(m, jnp.array([0.3, 0.4]))
        np.testing.assert_allclose(M, np.full((2, 2), 0.3 + 0.04) + 0.1 * np.eye(2), rtol=1e-12)
    finally:
        joints.unregister("twin_hinge")
    assert not joints.is_registered("twin_hinge")
