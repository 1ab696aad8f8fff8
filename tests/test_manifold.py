"""The configuration manifold: integrate_q, difference_q, qdot, normalize_q,
checked against SciPy's rotations (an independent implementation)."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxmbd
from trees import TOPOLOGIES, base_tree, random_state


@pytest.mark.parametrize("topo", sorted(TOPOLOGIES))
def test_difference_inverts_integrate(topo):
    m = base_tree(topo)
    q0, v, _ = random_state(m, topo)
    q1 = jaxmbd.integrate_q(m, q0, v, 0.3)
    np.testing.assert_allclose(jaxmbd.difference_q(m, q0, q1), 0.3 * v, atol=1e-12)
    np.testing.assert_allclose(jaxmbd.integrate_q(m, q0, jaxmbd.difference_q(m, q0, q1), 1.0), q1, atol=1e-12)
    # q̇ = G(q) v is the derivative of the exponential map at t = 0
    _, dq = jax.jvp(lambda t: jaxmbd.integrate_q(m, q0, v, t), (0.0,), (1.0,))
    np.testing.assert_allclose(dq, jaxmbd.qdot(m, q0, v), atol=1e-12)


def _quat(q):  # (w, x, y, z) -> scipy
    return Rotation.from_quat(np.asarray(q), scalar_first=True)


def test_quaternion_joints_against_scipy():
    m = base_tree(0)  # free root, plus a spherical joint somewhere
    t = m.topo
    q0, v, _ = random_state(m, 1)
    dt = 0.7
    q1 = np.asarray(jaxmbd.integrate_q(m, q0, v, dt))
    kinds = set()
    for i, jt in enumerate(t.jtype):
        qa, va = int(t.q_adr[i]), int(t.v_adr[i])
        if jt == "spherical":
            quat0, quat1, w = q0[qa:qa + 4], q1[qa:qa + 4], v[va:va + 3]
        elif jt == "free":
            quat0, quat1, w = q0[qa + 3:qa + 7], q1[qa + 3:qa + 7], v[va + 3:va + 6]
            np.testing.assert_allclose(q1[qa:qa + 3], q0[qa:qa + 3] + dt * v[va:va + 3], atol=1e-14)
        else:
            continue
        kinds.add(jt)
        # body-frame angular velocity: R1 = R0 exp([w dt]x)
        expected = (_quat(quat0) * Rotation.from_rotvec(np.asarray(w) * dt)).as_matrix()
        np.testing.assert_allclose(_quat(quat1).as_matrix(), expected, atol=1e-12)
        assert abs(np.linalg.norm(quat1) - 1) < 1e-14
    assert kinds == {"free", "spherical"}


def test_normalize_and_neutral():
    m = base_tree(0)
    q = jaxmbd.neutral_q(m) * 3.0 + 0.1
    qn = np.asarray(jaxmbd.normalize_q(m, q))
    for i, jt in enumerate(m.topo.jtype):
        qa = int(m.topo.q_adr[i])
        if jt == "spherical":
            assert abs(np.linalg.norm(qn[qa:qa + 4]) - 1) < 1e-15
        elif jt == "free":
            assert abs(np.linalg.norm(qn[qa + 3:qa + 7]) - 1) < 1e-15
            np.testing.assert_array_equal(qn[qa:qa + 3], np.asarray(q)[qa:qa + 3])
    # the neutral configuration of a model is its reference pose: every body at its placement
    kin = jaxmbd.forward_kinematics(m, jaxmbd.neutral_q(m))
    np.testing.assert_allclose(kin.pos[0], m.tree_pos[0], atol=1e-15)


def test_float64_default_and_opt_out():
    code = "import jax, jaxmbd; print(jax.config.jax_enable_x64)"
    run = lambda env: subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                     check=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k not in ("JAXMBD_X64", "JAX_ENABLE_X64")}
    assert run(env) == "True"
    assert run(dict(env, JAXMBD_X64="0")) == "False"
