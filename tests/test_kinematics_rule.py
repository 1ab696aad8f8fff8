"""The kinematics' derivative rule (``kinematics._poses_axes``): body poses and the DoFs' world axes
moved by the bodies' world twists, summed over ancestors, instead of forward mode through the
root-to-leaves pass.  Every check compares with plain forward mode of the pass itself
(``_poses_axes_value``), on random trees of every joint type, a floating base and a mechanism's
spanning tree."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmbd import kinematics as K
from jaxmbd.kinematics import forward_kinematics, frame_jacobian, kinematics_and_axes

from test_rnea_partials import TREES, random_state, rel

TOL = 1e-10
PARAMS = ("tree_rot", "tree_pos", "axis", "anchor", "pitch")


def plain(model, q):
    """The poses and axes by the pass, differentiated as written (no rule)."""
    return K._poses_axes_value(model, K.joint_state(model, q))


def ruled(model, q):
    kin, axes = kinematics_and_axes(model, q)
    return kin.rot, kin.pos, axes


def worst(a, b):
    return max(rel(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


@pytest.mark.parametrize("k", range(len(TREES)))
def test_the_rule_equals_plain_forward_mode_in_jacfwd_jacrev_and_vmap(k):
    model = TREES[k]
    q, v, _ = random_state(model, k + 60)
    # every direction of q, off the unit quaternions too
    ref = jax.jit(jax.jacfwd(lambda q: plain(model, q)))(q)
    assert worst(jax.jit(jax.jacfwd(lambda q: ruled(model, q)))(q), ref) < TOL
    assert worst(jax.jit(jax.jacrev(lambda q: ruled(model, q)))(q), ref) < TOL
    # the values are the pass's to the bit
    assert all(np.array_equal(a, b) for a, b in zip(ruled(model, q), plain(model, q)))
    # batched jvp
    qs = jnp.stack([random_state(model, 70 + i)[0] for i in range(3)])
    dq = jnp.asarray(np.random.default_rng(k).normal(size=qs.shape))
    got = jax.jit(jax.vmap(lambda q, d: jax.jvp(lambda q: ruled(model, q), (q,), (d,))[1]))(qs, dq)
    want = jax.jit(jax.vmap(lambda q, d: jax.jvp(lambda q: plain(model, q), (q,), (d,))[1]))(qs, dq)
    assert worst(got, want) < TOL


@pytest.mark.parametrize("k", [0, len(TREES) - 2])
def test_gradients_in_the_joint_frames_pass_through_the_rule(k):
    """The model's joint parameters, the joint frames' rotations included (their tangents are not
    rotations: the rule's E is any 3 x 3 matrix)."""
    model = TREES[k]
    q, _, _ = random_state(model, k + 80)
    w = [jnp.asarray(np.random.default_rng(i).normal(size=x.shape)) for i, x in enumerate(plain(model, q))]
    loss = lambda f: lambda m: sum(jnp.sum(wi * x) for wi, x in zip(w, f(m, q)))   # noqa: E731
    got, want = jax.jit(jax.grad(loss(ruled)))(model), jax.jit(jax.grad(loss(plain)))(model)
    for name in PARAMS:
        assert rel(getattr(got, name), getattr(want, name)) < TOL, name


def test_second_derivatives_through_the_rule_equal_plain_forward_mode():
    model = TREES[len(TREES) - 2]          # free base, universal, ball and helical joints
    q, _, _ = random_state(model, 90)
    ref = jax.jit(jax.jacfwd(jax.jacfwd(lambda q: plain(model, q))))(q)
    for outer in (jax.jacfwd, jax.jacrev):
        assert worst(jax.jit(outer(jax.jacfwd(lambda q: ruled(model, q))))(q), ref) < TOL


@pytest.mark.parametrize("k", [0, len(TREES) - 2])
def test_velocities_and_point_jacobians_built_on_the_rule(k):
    """forward_kinematics' body velocities (world twists in body coordinates) equal the pass's
    velocities, and their derivatives plain forward mode of the pass; a point Jacobian's too."""
    model = TREES[k]
    q, v, _ = random_state(model, k + 100)
    scan_vel = lambda q, v: K._forward(model, K.joint_state(model, q, v)).vel   # noqa: E731
    assert rel(forward_kinematics(model, q, v).vel, scan_vel(q, v)) < 1e-13
    got = jax.jit(jax.jacfwd(lambda q, v: forward_kinematics(model, q, v).vel, argnums=(0, 1)))(q, v)
    assert worst(got, jax.jit(jax.jacfwd(scan_vel, argnums=(0, 1)))(q, v)) < TOL
    body = model.n_bodies - 1
    point = jnp.array([0.1, -0.2, 0.3])

    def jac_plain(q):
        rot, pos, axes = plain(model, q)
        mask = jnp.asarray(model.topo.support[body], axes.dtype)[:, None]
        pw = pos[body] + rot[body] @ point
        return jnp.concatenate([(axes[:, :3] * mask).T, ((axes[:, 3:] + jnp.cross(axes[:, :3], pw)) * mask).T])
    assert rel(frame_jacobian(model, q, body, point), jac_plain(q)) < 1e-13
    assert rel(jax.jit(jax.jacfwd(lambda q: frame_jacobian(model, q, body, point)))(q),
               jax.jit(jax.jacfwd(jac_plain))(q)) < TOL


_RULE = K.pose_tangents


def _no_ancestors(topo, js, rot, pos, d, ancestors=None):
    return _RULE(topo, js, rot, pos, d, np.eye(topo.n_bodies))


def _fixed_axes(topo, js, rot, pos, d, ancestors=None):
    return _RULE(topo, js, rot, pos, (d[0], d[1], jnp.zeros_like(d[2])))


def _no_translation(topo, js, rot, pos, d, ancestors=None):
    return _RULE(topo, js, rot, pos, (d[0], jnp.zeros_like(d[1]), d[2]))


@pytest.mark.parametrize("wrong", [_no_ancestors, _fixed_axes, _no_translation])
def test_a_wrong_rule_fails_the_comparison(wrong, monkeypatch):
    """The comparison above can fail: each of these breaks one term of the rule (the sum over
    ancestors; the axes' own change with q, as a universal joint's; the joints' translations)."""
    model, q, ref = _wrong_rule_case()
    rule = lambda q: K._poses_axes(model, q)      # noqa: E731  (each jax.jit of it traces anew)
    monkeypatch.setattr(K, "pose_tangents", wrong)
    assert worst(jax.jit(jax.jacfwd(rule))(q), ref) > 1e-3


@functools.cache
def _wrong_rule_case():
    """(model, q, the plain Jacobian) of the wrong rules' test, computed once; the right rule's
    agreement there is checked too, so a failure above is the wrong rule's."""
    model = TREES[len(TREES) - 2]
    q, _, _ = random_state(model, 110)
    ref = jax.jit(jax.jacfwd(lambda q: plain(model, q)))(q)
    assert worst(jax.jit(jax.jacfwd(lambda q: K._poses_axes(model, q)))(q), ref) < TOL
    return model, q, ref
