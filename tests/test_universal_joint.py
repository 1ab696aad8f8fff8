"""The universal joint (jaxmbd/joints/universal.py) against MuJoCo, which
models it as two hinges in one body (axes x then y, body frame), and in
simulation (energy conservation of an undamped pendulum on one)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import Steps, Save

RTOL = 1e-10


def _f(x):
    return " ".join(f"{float(v):.17g}" for v in np.ravel(x))


def _unit(v):
    return v / np.linalg.norm(v)


def _body(rng, length=0.4):
    m = rng.uniform(0.5, 2.0)
    A = rng.normal(size=(3, 3))
    Q, _ = np.linalg.qr(A)
    I_c = Q @ np.diag(rng.uniform(0.02, 0.04, 3)) @ Q.T  # principal moments obey I1 + I2 >= I3
    return dict(mass=m, com=rng.uniform(-0.2, 0.2, 3) * length + np.array([0, 0, -0.5 * length]),
                inertia=I_c, pos=rng.uniform(-0.1, 0.1, 3) + np.array([0, 0, -length]),
                quat=_unit(np.array([1.0, 0, 0, 0]) + 0.4 * rng.normal(size=4)))


def _inertial(b):
    I = b["inertia"]
    return (f'<inertial pos="{_f(b["com"])}" mass="{b["mass"]:.17g}" '
            f'fullinertia="{_f([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]])}"/>')


def _pair(seed=0):
    """jaxmbd: hinge base -> universal -> hinge tip, and a second universal on
    the base; MuJoCo: the same bodies, each universal as two hinges."""
    rng = np.random.default_rng(seed)
    base, u, tip, side = (_body(rng) for _ in range(4))
    a_base, a_tip = _unit(rng.normal(size=3)), _unit(rng.normal(size=3))
    anc_tip = rng.uniform(-0.05, 0.05, 3)
    b = jaxmbd.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("base", "world", "revolute", axis=a_base, **base)
    b.add_body("u", "base", "universal", **u)
    b.add_body("tip", "u", "revolute", axis=a_tip, anchor=anc_tip, **tip)
    b.add_body("side", "base", "universal", **side)
    model = b.build()

    def body(name, spec, joints, inner=""):
        return (f'<body name="{name}" pos="{_f(spec["pos"])}" quat="{_f(spec["quat"])}">{_inertial(spec)}'
                f'{joints}{inner}</body>')
    two_hinges = '<joint type="hinge" axis="1 0 0"/><joint type="hinge" axis="0 1 0"/>'
    xml = f"""<mujoco>
  <compiler angle="radian" inertiafromgeom="false" boundmass="0" boundinertia="0"/>
  <option gravity="0 0 -9.81"><flag contact="disable" constraint="disable"/></option>
  <worldbody>
    {body("base", base, f'<joint type="hinge" axis="{_f(a_base)}"/>',
          body("u", u, two_hinges,
               body("tip", tip, f'<joint type="hinge" axis="{_f(a_tip)}" pos="{_f(anc_tip)}"/>'))
          + body("side", side, two_hinges))}
  </worldbody>
</mujoco>"""
    return model, xml


def _relerr(a, b):
    return np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(np.asarray(b)).max(), 1e-300)


def test_matches_mujoco_two_hinges():
    mujoco = pytest.importorskip("mujoco")
    model, xml = _pair()
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    assert mj.nq == model.nq == 6 and mj.nv == model.nv == 6
    assert model.topo.jtype == ("revolute", "universal", "revolute", "universal")

    @jax.jit
    def dyn(q, v, tau):
        return dict(M=jaxmbd.mass_matrix(model, q), bias=jaxmbd.bias_force(model, q, v),
                    aba=jaxmbd.forward_dynamics(model, q, v, tau, method="aba"),
                    crba=jaxmbd.forward_dynamics(model, q, v, tau, method="crba"),
                    unrolled=jaxmbd.forward_dynamics(model, q, v, tau, method="aba_unrolled"),
                    kin=jaxmbd.forward_kinematics(model, q))

    rng = np.random.default_rng(1)
    for _ in range(4):
        q, v, tau = rng.uniform(-1.5, 1.5, 6), rng.normal(size=6), rng.normal(size=6)
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, v, tau
        mujoco.mj_forward(mj, d)
        M = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, d, M)
        o = dyn(jnp.asarray(q), jnp.asarray(v), jnp.asarray(tau))
        assert _relerr(o["M"], M) < RTOL
        assert _relerr(o["bias"], d.qfrc_bias) < RTOL
        for method in ("aba", "crba", "unrolled"):
            assert _relerr(o[method], d.qacc) < RTOL, method
        for i, name in enumerate(model.body_names):
            bid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, name)
            np.testing.assert_allclose(o["kin"].pos[i], d.xpos[bid], atol=1e-12)
            np.testing.assert_allclose(o["kin"].rot[i], d.xmat[bid].reshape(3, 3), atol=1e-12)


def _pendulum():
    b = jaxmbd.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body("bob", "world", "universal", quat=_unit(np.array([1.0, 0.2, -0.1, 0.3])), mass=1.3,
               com=(0.05, -0.03, -0.6), inertia=((0.03, 0.002, -0.001), (0.002, 0.025, 0.003), (-0.001, 0.003, 0.02)))
    return b.set_initial_state([0.4, -0.7], [1.1, 0.8]).build()


def _energy(m, q, v):
    return jaxmbd.kinetic_energy(m, q, v) + jaxmbd.potential_energy(m, q)


def test_simulate_conserves_energy():
    m = _pendulum()
    E = jax.jit(jax.vmap(lambda q, v: _energy(m, q, v)))
    ts = jnp.linspace(0.0, 2.0, 9)
    sol = jaxmbd.simulate(m, t1=2.0, integrator=I.Dopri5(), steps=Steps(rtol=1e-10, atol=1e-10, max_steps=20000),
                          save=Save(ts=ts))
    assert int(sol.status) == 0
    e = np.asarray(E(sol.qs, sol.vs))
    assert np.abs(e - e[0]).max() < 1e-7 * max(abs(e[0]), 1.0)
    assert np.ptp(np.asarray(sol.qs[:, 1])) > 0.1  # both angles move
    # a few fixed RK4 steps run and stay close to the adaptive solution
    rk = jaxmbd.simulate(m, t1=0.05, integrator=I.RK4(), steps=Steps(dt0=0.005), save=Save(ts=jnp.array([0.0, 0.05])))
    ref = jaxmbd.simulate(m, t1=0.05, integrator=I.Dopri5(), steps=Steps(rtol=1e-12, atol=1e-12),
                          save=Save(ts=jnp.array([0.0, 0.05])))
    assert int(rk.status) == 0
    np.testing.assert_allclose(rk.qs[-1], ref.qs[-1], atol=1e-7)
    e_rk = np.asarray(E(rk.qs, rk.vs))
    assert abs(e_rk[-1] - e_rk[0]) < 1e-6


def test_batched_and_differentiable():
    """Members on the unrolled ABA's trailing axis (its closed form) equal the
    vmapped array ABA; the gradient of the energy matches central differences."""
    from jaxmbd import aba_unrolled
    from jaxmbd.aba import aba as aba_array
    model, _ = _pair(2)
    rng = np.random.default_rng(3)
    Q, V, T = (jnp.asarray(rng.uniform(-1.5, 1.5, (5, 6))) for _ in range(3))
    ref = jax.jit(jax.vmap(lambda q, v, t: aba_array(model, q, v, t)))(Q, V, T)
    got = jax.jit(lambda Q, V, T: aba_unrolled.aba_batch(model, Q, V, T))(Q, V, T)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
    E = jax.jit(lambda q: _energy(model, q, V[0]))
    g = jax.jit(jax.grad(lambda q: _energy(model, q, V[0])))(Q[0])
    h, eye = 1e-6, np.eye(6)
    fd = np.array([(E(Q[0] + h * eye[k]) - E(Q[0] - h * eye[k])) / (2 * h) for k in range(6)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)


def test_inverse_dynamics_in_world_coordinates_with_universal_joints():
    """rnea_at carries each joint's velocity-product term (the universal joint's includes the
    correction of its two chained axes) into world coordinates: it equals the level-recursive RNEA."""
    from jaxmbd.rnea import rnea, rnea_at
    model, _ = _pair(3)
    rng = np.random.default_rng(3)
    q, v, a = (jnp.asarray(rng.normal(size=model.nv)) for _ in range(3))
    ref = np.asarray(rnea(model, q, v, a))
    np.testing.assert_allclose(rnea_at(model, q, v, a), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
