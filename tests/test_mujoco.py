"""Agreement with MuJoCo (an independent C implementation) on the same mechanism.

Trees of hinge, slide, ball and free joints, gravity on, contacts off. The
jaxmbd model and the MJCF are written from the same builder spec, in MuJoCo's
depth-first DoF order, so qpos/qvel pass unchanged.
"""

import numpy as np
import pytest

import jax.numpy as jnp
import jaxmbd
from jaxmbd import models

mujoco = pytest.importorskip("mujoco")
from mjcf_util import builder_to_mjcf, depth_first  # noqa: E402

RTOL = 1e-10  # the required agreement; observed agreement is ~1e-15

CASES = [
    ("free_root_mixed", dict(key=0, n=7, joint_types=("revolute", "prismatic", "spherical"), root_joint="free")),
    ("hinge_tree", dict(key=1, n=8, joint_types=("revolute",))),
    ("ball_slide", dict(key=2, n=6, joint_types=("spherical", "prismatic"))),
    ("ball_root", dict(key=3, n=7, joint_types=("revolute", "prismatic", "spherical"), root_joint="spherical")),
    ("welded", dict(key=4, n=6, joint_types=("revolute", "spherical"), root_joint="free", p_fixed=0.4)),
]


def _pair(spec):
    b = depth_first(models.random_tree_builder(**spec))
    # armature enters H's diagonal in both; damping is in jaxmbd's bias, MuJoCo's passive force
    for body in b._bodies:
        body["armature"] = body["armature"] + 0.05
    model = b.build()
    mj = mujoco.MjModel.from_xml_string(builder_to_mjcf(b))
    return model, mj


def _relerr(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(np.asarray(b)).max(), 1e-300)


@pytest.mark.parametrize("name,spec", [c if c[0] == "hinge_tree" else pytest.param(*c, marks=pytest.mark.long)
                                       for c in CASES], ids=[c[0] for c in CASES])  # long but hinge_tree
def test_matches_mujoco(name, spec):
    model, mj = _pair(spec)
    d = mujoco.MjData(mj)
    assert mj.nq == model.nq and mj.nv == model.nv
    np.testing.assert_array_equal(mj.dof_parentid, model.dof_parent)
    rng = np.random.default_rng(spec["key"])
    for _ in range(3):
        q = np.asarray(jaxmbd.normalize_q(model, jaxmbd.neutral_q(model) + 0.7 * rng.normal(size=model.nq)))
        v = rng.normal(size=model.nv)
        tau = rng.normal(size=model.nv)
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, v, tau
        mujoco.mj_forward(mj, d)
        M = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, d, M)
        assert _relerr(jaxmbd.mass_matrix(model, q), M) < RTOL
        assert _relerr(jaxmbd.bias_force(model, q, v), d.qfrc_bias) < RTOL
        for method in ("aba", "crba"):
            qdd = jaxmbd.forward_dynamics(model, q, v, jnp.asarray(tau), method=method)
            assert _relerr(qdd, d.qacc) < RTOL, method
        # inverse dynamics: MuJoCo's mj_inverse from the same acceleration
        d.qacc[:] = rng.normal(size=model.nv)
        mujoco.mj_inverse(mj, d)
        tau_id = jaxmbd.inverse_dynamics(model, q, v, jnp.asarray(d.qacc))
        assert _relerr(tau_id, d.qfrc_inverse) < RTOL


def test_body_poses_and_jacobian_match_mujoco():
    model, mj = _pair(CASES[0][1])
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(7)
    q = np.asarray(jaxmbd.normalize_q(model, jaxmbd.neutral_q(model) + 0.7 * rng.normal(size=model.nq)))
    d.qpos[:] = q
    mujoco.mj_forward(mj, d)
    kin = jaxmbd.forward_kinematics(model, q)
    for i, name in enumerate(model.body_names):
        bid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, name)
        np.testing.assert_allclose(kin.pos[i], d.xpos[bid], atol=1e-12)
        np.testing.assert_allclose(kin.rot[i], d.xmat[bid].reshape(3, 3), atol=1e-12)
        point = rng.normal(size=3) * 0.1
        jacp, jacr = np.zeros((3, mj.nv)), np.zeros((3, mj.nv))
        mujoco.mj_jac(mj, d, jacp, jacr, d.xpos[bid] + d.xmat[bid].reshape(3, 3) @ point, bid)
        J = jaxmbd.frame_jacobian(model, q, name, point)
        np.testing.assert_allclose(J[3:], jacp, atol=1e-12)
        np.testing.assert_allclose(J[:3], jacr, atol=1e-12)


def test_external_forces_match_mujoco_xfrc_applied():
    """f_ext (body frame, moment about the body origin) against MuJoCo's
    xfrc_applied (world frame, force and torque at the body's COM)."""
    model, mj = _pair(CASES[0][1])
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(3)
    q = np.asarray(jaxmbd.normalize_q(model, jaxmbd.neutral_q(model) + 0.7 * rng.normal(size=model.nq)))
    v = rng.normal(size=model.nv)
    d.qpos[:], d.qvel[:] = q, v
    kin = jaxmbd.forward_kinematics(model, q)
    f_ext = np.zeros((model.n_bodies, 6))
    for i, name in enumerate(model.body_names):
        bid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, name)
        force, torque = rng.normal(size=3), rng.normal(size=3)
        d.xfrc_applied[bid] = np.concatenate([force, torque])
        R, p = np.asarray(kin.rot[i]), np.asarray(kin.pos[i])
        com_w = p + R @ np.asarray(model.com[i])
        f_ext[i] = np.concatenate([R.T @ (torque + np.cross(com_w - p, force)), R.T @ force])
    mujoco.mj_forward(mj, d)
    qdd = jaxmbd.forward_dynamics(model, q, v, jnp.zeros(model.nv), f_ext=jnp.asarray(f_ext))
    assert _relerr(qdd, d.qacc) < RTOL
    qdd_crba = jaxmbd.forward_dynamics(model, q, v, jnp.zeros(model.nv), f_ext=jnp.asarray(f_ext), method="crba")
    assert _relerr(qdd_crba, d.qacc) < RTOL
    # and inverse dynamics gives back zero joint forces at that acceleration
    tau = jaxmbd.inverse_dynamics(model, q, v, qdd, f_ext=jnp.asarray(f_ext))
    assert np.abs(np.asarray(tau)).max() < 1e-9
