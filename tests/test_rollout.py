"""Batched rollouts: equal to a loop of simulate, sharded equal to unsharded,
observations, gradients through a batch, bad input."""

import os
import subprocess
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import models, rollout, simulate
from jaxmbd import Start, Inputs, Steps, Save, Solver


def _setup():
    m = models.double_pendulum()
    B = 3
    q0 = jnp.array([[0.4, -0.2], [0.1, 0.3], [-0.5, 0.2]])
    v0 = jnp.array([[0.3, 0.5], [0.0, 0.0], [-1.0, 0.2]])
    ks = jnp.array([[3.0, 5.0], [1.0, 2.0], [0.0, 8.0]])
    return m, B, q0, v0, ks


@pytest.mark.parametrize("method, kw", [(I.RK4(), dict(steps=Steps(dt0=0.01))),
                                        pytest.param(I.RosenbrockNystrom4(), dict(steps=Steps(rtol=1e-6, atol=1e-6)),
                                                     marks=pytest.mark.long)])
def test_rollout_equals_a_loop_of_simulate(method, kw):
    m, B, q0, v0, ks = _setup()
    ts = jnp.array([0.1, 0.3, 0.5])
    r = rollout(m, Start(q0, v0), 0.5, integrator=method, save=Save(ts=ts), model_params={"stiffness": ks}, **kw)
    assert r.qs.shape == (B, 3, m.nq) and r.status.shape == (B,) and r.stats["accepted"].shape == (B,)
    np.testing.assert_array_equal(r.ts, ts)
    for b in range(B):
        mb = eqx.tree_at(lambda mm: mm.stiffness, m, ks[b])
        s = simulate(mb, Start(q0[b], v0[b]), 0.5, integrator=method, save=Save(ts=ts), **kw)
        np.testing.assert_allclose(r.qs[b], s.qs, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(r.vs[b], s.vs, rtol=1e-12, atol=1e-13)
        assert int(r.status[b]) == int(s.status) == 0
        assert int(r.stats["accepted"][b]) == int(s.stats["accepted"])
    # two members at a time (the last chunk padded): the same members
    c = rollout(m, Start(q0, v0), 0.5, integrator=method, save=Save(ts=ts), model_params={"stiffness": ks},
                chunk_size=2, **kw)
    np.testing.assert_allclose(c.qs, r.qs, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(c.stats["accepted"], r.stats["accepted"])


@pytest.mark.long
def test_observe_keeps_only_what_is_asked():
    m, B, q0, v0, _ = _setup()
    tip = lambda model, q, v: jaxmbd.forward_kinematics(model, q).pos[-1]  # noqa: E731
    ts = jnp.array([0.2, 0.4])
    full = rollout(m, Start(q0, v0), 0.4, integrator=I.RK4(), steps=Steps(dt0=0.01), save=Save(ts=ts))
    obs = rollout(m, Start(q0, v0), 0.4, integrator=I.RK4(), steps=Steps(dt0=0.01),
                  save=Save(ts=ts, observe=tip, states=False))
    assert obs.qs is None and obs.vs is None and obs.obs.shape == (B, 2, 3)
    want = jax.vmap(jax.vmap(lambda q: tip(m, q, None)))(full.qs)
    np.testing.assert_allclose(obs.obs, want, rtol=1e-13, atol=1e-14)
    # nothing batched: the model's own initial state, broadcast to batch_size members
    r = rollout(m, t1=0.2, integrator=I.RK4(), steps=Steps(dt0=0.01), batch_size=2)
    np.testing.assert_array_equal(r.qs[0], r.qs[1])


@pytest.mark.slow
def test_gradient_through_a_batched_rollout_matches_finite_differences():
    """d(mean loss over the batch)/d(per-member spring constants, initial velocities), adaptive Rosenbrock."""
    m, B, q0, v0, ks = _setup()
    method = I.RosenbrockNystrom4()

    def loss(ks, v0):
        r = rollout(m, Start(q0, v0), 0.3, integrator=method, steps=Steps(rtol=1e-7, atol=1e-7, max_steps=256),
                    model_params={"stiffness": ks})
        return jnp.mean(jnp.sum(r.qs[:, -1] ** 2, -1)) + 0.1 * jnp.mean(jnp.sum(r.vs[:, -1] ** 2, -1))

    assert bool(jnp.all(rollout(m, Start(q0, v0), 0.3, integrator=method,
                                steps=Steps(rtol=1e-7, atol=1e-7, max_steps=256), model_params={"stiffness": ks}).ok))
    gk, gv = jax.grad(loss, argnums=(0, 1))(ks, v0)
    eps = 1e-5
    for (b, j) in ((0, 1), (2, 0)):
        fk = (loss(ks.at[b, j].add(eps), v0) - loss(ks.at[b, j].add(-eps), v0)) / (2 * eps)
        fv = (loss(ks, v0.at[b, j].add(eps)) - loss(ks, v0.at[b, j].add(-eps))) / (2 * eps)
        np.testing.assert_allclose(gk[b, j], fk, rtol=1e-5)
        np.testing.assert_allclose(gv[b, j], fv, rtol=1e-5)


def test_bad_input():
    m, B, q0, v0, ks = _setup()
    with pytest.raises(ValueError, match="batch size"):
        rollout(m, Start(q0, v0[:2]), 0.1, integrator=I.RK4(), steps=Steps(dt0=0.01))
    with pytest.raises(ValueError, match="not a parameter field"):
        rollout(m, Start(q0, v0), 0.1, integrator=I.RK4(), steps=Steps(dt0=0.01), model_params={"springiness": ks})
    with pytest.raises(ValueError, match="nothing is batched"):
        rollout(m, t1=0.1, integrator=I.RK4(), steps=Steps(dt0=0.01))
    with pytest.raises(ValueError, match=r"q0, v0 must be"):
        rollout(m, Start(q0[:, :1], v0), 0.1, integrator=I.RK4(), steps=Steps(dt0=0.01))
    with pytest.raises(ValueError, match="must be greater than t0"):
        rollout(m, Start(q0, v0, t=1.0), 0.5, integrator=I.RK4(), steps=Steps(dt0=0.01))
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
            rollout(m, Start(q0, v0), 0.1, integrator=I.RK4(), steps=Steps(dt0=0.01), chunk_size=bad)


SHARDED = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    import jaxmbd
    from jaxmbd import integrators as I, models, rollout
    assert len(jax.devices()) == 2, jax.devices()
    m = models.double_pendulum()
    B = 5  # not a multiple of the device count: exercises the padding
    key = jax.random.PRNGKey(0)
    q0 = jax.random.normal(key, (B, 2)); v0 = jnp.zeros((B, 2))
    ks = jnp.abs(jax.random.normal(jax.random.PRNGKey(1), (B, 2))) * 5
    kw = dict(t1=0.5, integrator=I.RosenbrockNystrom4(), steps=jaxmbd.Steps(rtol=1e-6, atol=1e-6),
              save=jaxmbd.Save(ts=jnp.array([0.25, 0.5])), model_params={"stiffness": ks})
    a = rollout(m, jaxmbd.Start(q0, v0), shard=True, **kw)
    b = rollout(m, jaxmbd.Start(q0, v0), shard=False, **kw)
    assert a.qs.shape == (B, 2, 2)
    np.testing.assert_array_equal(np.asarray(a.qs), np.asarray(b.qs))
    np.testing.assert_array_equal(np.asarray(a.vs), np.asarray(b.vs))
    np.testing.assert_array_equal(np.asarray(a.stats["accepted"]), np.asarray(b.stats["accepted"]))
    assert np.all(np.asarray(a.status) == 0)
    c = rollout(m, q0, v0, shard=True, chunk_size=3, **kw)  # chunks of 4 (2 per device), 3 padded members
    np.testing.assert_allclose(np.asarray(c.qs), np.asarray(b.qs), rtol=1e-13, atol=1e-14)
    print("SHARDED-OK", len(a.qs.sharding.device_set) if hasattr(a.qs, "sharding") else "?")
""")


@pytest.mark.slow
def test_sharded_equals_unsharded_on_two_host_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2 --xla_cpu_multi_thread_eigen=false", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", SHARDED], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SHARDED-OK" in r.stdout


@pytest.mark.long
def test_batch_gradients_wrt_mass_damping_and_control_parameters():
    """Fixed-step RK4 over a batch: d(loss)/d(per-member masses, damping, control gains) vs central differences."""
    m, B, q0, v0, _ = _setup()
    masses = jnp.stack([m.mass * (1.0 + 0.1 * b) for b in range(B)])
    damp = jnp.full((B, m.nv), 0.3)
    gains = jnp.array([[0.5, -0.2], [0.0, 0.3], [1.0, 1.0]])
    control = lambda t, q, v, p: p * jnp.cos(3.0 * t) - 0.1 * p * q  # noqa: E731

    def loss(masses, damp, gains):
        r = rollout(m, Start(q0, v0), 0.2, integrator=I.RK4(), inputs=Inputs(tau=control, params=gains),
                    steps=Steps(dt0=0.01), model_params={"mass": masses, "damping": damp})
        return jnp.sum(r.qs[:, -1] ** 2) + 0.1 * jnp.sum(r.vs[:, -1] ** 2)

    grads = jax.grad(loss, argnums=(0, 1, 2))(masses, damp, gains)
    args = [masses, damp, gains]
    eps = 1e-6
    for i, idx in ((0, (1, 1)), (1, (2, 0)), (2, (0, 1)), (2, (2, 0))):
        up = list(args); up[i] = args[i].at[idx].add(eps)
        dn = list(args); dn[i] = args[i].at[idx].add(-eps)
        fd = (loss(*up) - loss(*dn)) / (2 * eps)
        np.testing.assert_allclose(grads[i][idx], fd, rtol=1e-5, atol=1e-10)


def test_observe_inside_the_loop_carries_no_trajectory_buffer():
    """simulate(observe=..., keep_states=False): the observation at the save
    times equals the observed full states, and the compiled loop carries no
    (S, nq) trajectory."""
    m, _, q0, v0, _ = _setup()
    tip = lambda model, q, v: jaxmbd.forward_kinematics(model, q).pos[-1]  # noqa: E731
    ts = jnp.linspace(0.01, 0.37, 37)
    kw = dict(t1=0.37, integrator=I.RK4(), steps=Steps(dt0=0.01), solver=Solver(adjoint="none"))
    full = simulate(m, Start(q0[0], v0[0]), save=Save(ts=ts), **kw)
    obs = simulate(m, Start(q0[0], v0[0]), save=Save(ts=ts, observe=tip, states=False), **kw)
    assert obs.qs is None and obs.vs is None and obs.obs.shape == (37, 3)
    np.testing.assert_allclose(obs.obs, jax.vmap(lambda q: tip(m, q, None))(full.qs), rtol=1e-13, atol=1e-14)
    text = str(jax.make_jaxpr(lambda q, v: simulate(m, Start(q, v), save=Save(ts=ts, observe=tip, states=False),
                                                    **kw).obs)(q0[0], v0[0]))
    assert "f64[37,3]" in text and "f64[37,2]" not in text
    with pytest.raises(ValueError, match="states=False. needs an observe"):
        simulate(m, Start(q0[0], v0[0]), save=Save(ts=ts, states=False), **kw)
