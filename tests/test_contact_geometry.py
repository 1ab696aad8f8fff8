"""The contact narrow phase (jaxmbd.contact.geometry) against MuJoCo's
``mj_forward`` contacts, and the static pair selection (jaxmbd.contact.pairs)
against the pairs MuJoCo collides.

Scenes: two geoms in MJCF (a plane in the world body, the others on free
bodies) at random poses; each geom's ``margin`` makes MuJoCo report a contact
when dist < margin, so both penetrating and separated poses are compared.
Every MuJoCo contact must be one of ours (dist, pos and normal within the
tolerance), and, for the pair types where our candidates are MuJoCo's, our
candidates with dist < margin must be as many as MuJoCo reports (plane-box:
MuJoCo keeps at most 4).  The exact pair types agree to 1e-9 (measured:
3e-14 at worst, capsule-capsule)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from contact_util import random_contacts, scene
from jaxmbd.contact import collide, collide_batch, contact_frame, geometry

N_POSES = 200
MARGIN = 0.05      # each geom's; MuJoCo reports a contact when dist < the sum of the two (checked)


def _size3(s, n):
    return np.broadcast_to(np.r_[s, [0.0] * (3 - len(s))], (n, 3))


_batched = jax.jit(collide_batch, static_argnums=(0, 1))


def _ours_and_mujoco(t1, s1, t2, s2, seed, spread, margin=MARGIN):
    m = scene(t1, s1, t2, s2, margin)
    (R1, p1, R2, p2), cons = random_contacts(m, N_POSES, seed, spread)
    c = _batched(t1, t2, (R1, p1), _size3(s1, len(R1)), (R2, p2), _size3(s2, len(R1)))
    return jax.tree.map(np.asarray, c), cons


def _match(c, cons, tol):
    """Worst over MuJoCo's contacts of the error of the closest of our
    candidates (max of |Δdist|, |Δpos|∞, |Δnormal|∞)."""
    worst = 0.0
    for i, cl in enumerate(cons):
        for g, dist, pos, frame, margin in cl:
            assert g == (0, 1) and margin == 2 * MARGIN
            err = np.maximum(np.abs(c.dist[i] - dist), np.maximum(np.abs(c.pos[i] - pos).max(-1),
                                                                   np.abs(c.frame[i, :, 0] - frame[0]).max(-1)))
            worst = max(worst, err.min())
    assert worst < tol, worst
    return worst


def _deepest_agree(c, cons, margin, tol):
    """Where our deepest candidate is within the margin MuJoCo reports a
    contact, and the deepest distances agree (and vice versa)."""
    for i, cl in enumerate(cons):
        ours = c.dist[i].min()
        assert (ours < margin) == bool(cl), (i, ours, cl)
        if cl:
            assert abs(min(x[1] for x in cl) - ours) < tol, (i, ours, cl)


EXACT = [  # (type1, size1, type2, size2, spread of the random positions, MuJoCo's cap on the count)
    ("plane", (1,), "sphere", (0.3,), 0.6, None),
    ("plane", (1,), "capsule", (0.2, 0.4), 0.6, None),
    ("plane", (1,), "box", (0.2, 0.3, 0.4), 0.6, 4),
    ("plane", (1,), "ellipsoid", (0.2, 0.3, 0.4), 0.5, None),
    ("sphere", (0.3,), "sphere", (0.2,), 0.4, None),
    ("sphere", (0.3,), "capsule", (0.2, 0.5), 0.5, None),
    ("capsule", (0.3, 0.4), "capsule", (0.2, 0.5), 0.6, None),
    ("sphere", (0.3,), "box", (0.2, 0.3, 0.4), 0.4, None),
]


@pytest.mark.parametrize("t1,s1,t2,s2,spread,cap", EXACT, ids=[f"{a[0]}-{a[2]}" for a in EXACT])
def test_exact_pairs_equal_mujoco(t1, s1, t2, s2, spread, cap):
    """dist, pos and normal equal MuJoCo's to 1e-9, and the candidates within
    the margin are exactly the contacts MuJoCo reports (capped as MuJoCo)."""
    c, cons = _ours_and_mujoco(t1, s1, t2, s2, seed=1, spread=spread)
    _match(c, cons, 1e-9)
    counts = (c.dist < 2 * MARGIN).sum(-1)
    if cap:
        counts = np.minimum(counts, cap)
    assert list(counts) == [len(cl) for cl in cons]
    # not vacuous: penetrating and separated poses both occur
    pen = sum(any(x[1] < 0 for x in cl) for cl in cons)
    assert 0.1 * N_POSES < pen < 0.9 * N_POSES, pen
    assert (c.dist >= 2 * MARGIN).any()


def test_sphere_box_inside_equals_mujoco():
    """Sphere centres inside the box (the nearest-face branch), to 1e-9."""
    c, cons = _ours_and_mujoco("sphere", (0.05,), "box", (0.3, 0.4, 0.5), seed=2, spread=0.25)
    _match(c, cons, 1e-9)
    assert sum(any(x[1] < -0.05 for x in cl) for cl in cons) > 0.3 * N_POSES


def test_plane_cylinder_contains_mujoco():
    """MuJoCo's four plane-cylinder contacts (the deeper cap's rim point and
    two at +-120 degrees, the other cap's rim point) are among our six, to
    1e-9; the deepest agree."""
    c, cons = _ours_and_mujoco("plane", (1,), "cylinder", (0.2, 0.4), seed=3, spread=0.6)
    _match(c, cons, 1e-9)
    _deepest_agree(c, cons, 2 * MARGIN, 1e-9)


def _rot(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


DEGENERATE = [  # (type1, size1, pose1, type2, size2, pose2): poses where a direction is not unique
    ("capsule", (0.1, 0.3), (np.eye(3), np.zeros(3)), "capsule", (0.1, 0.3), (np.eye(3), np.array([0.15, 0, 0.1]))),
    ("capsule", (0.1, 0.3), (np.eye(3), np.zeros(3)), "capsule", (0.1, 0.3), (np.eye(3), np.array([0.0, 0, 0.1]))),
    ("capsule", (0.1, 1e-20), (np.eye(3), np.zeros(3)), "capsule", (0.1, 1e-20), (np.eye(3), np.array([0.1, 0, 0]))),
    ("capsule", (0.1, 0.3), (np.eye(3), np.zeros(3)), "capsule", (0.1, 0.3), (_rot([1, 0, 0], np.pi / 2), np.zeros(3))),
    ("sphere", (0.1,), (np.eye(3), np.zeros(3)), "sphere", (0.2,), (np.eye(3), np.zeros(3))),
    ("sphere", (0.1,), (np.eye(3), np.zeros(3)), "capsule", (0.2, 0.3), (np.eye(3), np.array([0, 0, 0.1]))),
    ("sphere", (0.1,), (np.eye(3), np.zeros(3)), "box", (0.2, 0.3, 0.4), (np.eye(3), np.zeros(3))),
    ("sphere", (0.1,), (np.eye(3), np.array([0.2, 0.3, 0.4])), "box", (0.2, 0.3, 0.4), (np.eye(3), np.zeros(3))),
    ("plane", (0,), (np.eye(3), np.zeros(3)), "cylinder", (0.2, 0.3), (np.eye(3), np.array([0, 0, 0.2]))),
    ("plane", (0,), (np.eye(3), np.zeros(3)), "box", (0.2, 0.3, 0.4), (np.eye(3), np.array([0, 0, 0.2]))),
]


@jax.jit(static_argnums=(0, 1))
def _value_and_grad(t1, t2, R1, p1, R2, p2, s1, s2):
    def f(R1, p1, R2, p2):
        c = collide(t1, t2, (R1, p1), s1, (R2, p2), s2)
        return jnp.sum(c.dist) + jnp.sum(jnp.sin(c.pos)) + jnp.sum(jnp.sin(c.frame))
    return jax.value_and_grad(f, argnums=(0, 1, 2, 3))(R1, p1, R2, p2)


@pytest.mark.parametrize("t1,s1,P1,t2,s2,P2", DEGENERATE, ids=lambda x: x if isinstance(x, str) else "")
def test_gradients_finite_at_degenerate_poses(t1, s1, P1, t2, s2, P2):
    """Parallel, crossing and zero-length capsule axes, coincident centres, a
    sphere centred in a box or on its corner, an upright cylinder: value and
    gradient (every output with respect to both poses) are finite, and the
    distance equals MuJoCo's there."""
    args = tuple(jnp.asarray(x) for x in (*P1, *P2))
    val, grads = _value_and_grad(t1, t2, *args, jnp.asarray(_size3(s1, 1)[0]), jnp.asarray(_size3(s2, 1)[0]))
    assert np.isfinite(val) and all(np.isfinite(g).all() for g in grads), grads
    # the deepest distance at the degenerate pose is still MuJoCo's
    m = scene(t1, s1, t2, s2, margin=0.0)
    d = __import__("mujoco").MjData(m)
    if t1 == "plane":
        qpos = list(P2[1]) + [1, 0, 0, 0]
    else:
        quat = np.zeros(4)
        __import__("mujoco").mju_mat2Quat(quat, np.ravel(P2[0]))
        qpos = list(P1[1]) + [1, 0, 0, 0] + list(P2[1]) + list(quat)
    d.qpos[:] = qpos
    __import__("mujoco").mj_forward(m, d)
    c = collide(t1, t2, (d.geom_xmat[0].reshape(3, 3), d.geom_xpos[0]), np.r_[s1, [0.0] * (3 - len(s1))],
                (d.geom_xmat[1].reshape(3, 3), d.geom_xpos[1]), np.r_[s2, [0.0] * (3 - len(s2))])
    assert d.ncon > 0 and abs(min(d.contact.dist[:d.ncon]) - float(c.dist.min())) < 1e-12


def test_float32():
    """float32 inputs give float32 outputs that agree with MuJoCo's (float64)
    to float32 round-off (2e-5 on lengths of order 1)."""
    for t1, s1, t2, s2, spread, _ in EXACT:
        m = scene(t1, s1, t2, s2, MARGIN)
        (R1, p1, R2, p2), cons = random_contacts(m, 50, 4, spread)
        f32 = lambda x: np.asarray(x, np.float32)
        c = _batched(t1, t2, (f32(R1), f32(p1)), f32(_size3(s1, len(R1))), (f32(R2), f32(p2)),
                     f32(_size3(s2, len(R1))))
        assert c.dist.dtype == c.pos.dtype == c.frame.dtype == jnp.float32
        _match(jax.tree.map(np.asarray, c), cons, 2e-5)


def test_frame_is_orthonormal_and_right_handed():
    n = np.random.default_rng(0).normal(size=(1000, 3))
    n = np.concatenate([n / np.linalg.norm(n, axis=1, keepdims=True), np.eye(3), -np.eye(3)])
    F = np.asarray(jax.vmap(contact_frame)(jnp.asarray(n)))
    assert np.abs(F @ F.transpose(0, 2, 1) - np.eye(3)).max() < 1e-14
    assert np.abs(np.linalg.det(F) - 1).max() < 1e-14 and np.abs(F[:, 0] - n).max() == 0


def test_swapped_order_flips_the_normal():
    rng = np.random.default_rng(5)
    R, p = _rot(rng.normal(size=3), 1.0), rng.normal(size=3) * 0.2
    a = collide("sphere", "capsule", (np.eye(3), np.zeros(3)), np.r_[0.2, 0, 0], (R, p), np.r_[0.1, 0.3, 0])
    b = collide(geometry.TYPES.index("capsule"), "sphere", (R, p), np.r_[0.1, 0.3, 0], (np.eye(3), np.zeros(3)),
                np.r_[0.2, 0, 0])
    assert np.allclose(a.dist, b.dist) and np.allclose(a.pos, b.pos) and np.allclose(a.frame[:, 0], -b.frame[:, 0])
