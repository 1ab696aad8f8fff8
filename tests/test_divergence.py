"""The divergence status: a method that is unstable at its step size stops
with DIVERGED and keeps its last sound state, per member under vmap; stable
steps and legitimately fast motion (a pendulum released from horizontal, a
body thrown upward, a slider pushed hard) are not flagged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import divergence
from jaxmbd import integrators as I
from jaxmbd.simulate import simulate
from jaxmbd import Start, Inputs, Steps, Solver

K, X0 = 1.0e4, 0.1        # a 1 kg slider on a spring: ω = 100 rad/s
UNSTABLE, STABLE = 0.032, 1.0e-3   # RK4 is stable for h ω < 2.83


def slider(k=K):
    b = jaxmbd.ModelBuilder()
    b.add_body("slider", joint="prismatic", axis=(1, 0, 0), mass=1.0, stiffness=k)
    b.set_initial_state([X0], [0.0])
    return b.build()


def energy(m, q, v):
    return float(jaxmbd.kinetic_energy(m, q, v) + jaxmbd.potential_energy(m, q))


def test_unstable_step_stops_with_diverged_and_keeps_a_sound_state():
    """RK4 at h ω = 3.2 multiplies the amplitude by 2.27 a step: without the
    check the run reports success at 1e9 m; with it, DIVERGED and a final
    state whose energy is within the bound, at the time it was reached."""
    m = slider()
    bad = simulate(m, t1=1.0, integrator=I.RK4(), steps=Steps(dt0=UNSTABLE, divergence_factor=None))
    assert int(bad.status) == I.SUCCESS and abs(float(bad.qs[-1, 0])) > 1e6   # what the check prevents
    r = simulate(m, t1=1.0, integrator=I.RK4(), steps=Steps(dt0=UNSTABLE))
    assert int(r.status) == I.DIVERGED and jaxmbd.status_name(r.status).startswith("diverged")
    q, v = np.asarray(r.qs[-1]), np.asarray(r.vs[-1])
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(v)) and 0.0 < float(r.t) < 0.5
    # the kept state is within the bound: energy gain <= 10 x (U0 + M g L), U0 = 50 J, M g L < 3 J
    assert energy(m, q, v) - 0.5 * K * X0 ** 2 <= 10 * (0.5 * K * X0 ** 2 + 3.0)
    assert abs(q[0]) < 1.0
    # the run is the unchecked one up to where it stopped
    n = int(r.stats["accepted"])
    assert n >= 1 and float(r.t) == pytest.approx(n * UNSTABLE)
    same = simulate(m, t1=n * UNSTABLE, integrator=I.RK4(), steps=Steps(dt0=UNSTABLE, divergence_factor=None))
    np.testing.assert_allclose(q, same.qs[-1], rtol=1e-12)


def test_stable_step_succeeds_and_batch_members_keep_their_own_status():
    """Under vmap over the step size, the unstable members stop with DIVERGED
    and the stable ones run to t1, each as it does alone."""
    m = slider()
    dts = jnp.array([STABLE, UNSTABLE, STABLE, UNSTABLE])
    x0 = jnp.array([0.1, 0.1, 0.05, 0.02])
    run = jax.jit(jax.vmap(lambda x, h: simulate(m, Start(x[None], jnp.zeros(1)), 1.0, integrator=I.RK4(),
                                                 steps=Steps(dt0=h))))
    r = run(x0, dts)
    assert r.status.tolist() == [I.SUCCESS, I.DIVERGED, I.SUCCESS, I.DIVERGED]
    assert np.all(np.isfinite(np.asarray(r.qs)))
    np.testing.assert_allclose(r.t[jnp.array([0, 2])], 1.0, rtol=1e-12)
    # stable members: the spring's energy is kept (RK4's own dissipation only)
    for i in (0, 2):
        e = energy(m, r.qs[i, -1], r.vs[i, -1])
        assert e == pytest.approx(0.5 * K * float(x0[i]) ** 2, rel=1e-3)
    for i in range(4):
        alone = simulate(m, Start(x0[i][None], jnp.zeros(1)), 1.0, integrator=I.RK4(), steps=Steps(dt0=dts[i]))
        assert int(alone.status) == int(r.status[i]) and float(alone.t) == pytest.approx(float(r.t[i]), rel=1e-12)
        np.testing.assert_allclose(alone.qs[-1], r.qs[i, -1], rtol=1e-10, atol=1e-14)


def test_ball_on_a_plane_diverges_at_a_large_step_only():
    """A sphere dropped on a plane with the penalty law at MuJoCo's resting depth (a stiff spring):
    RK4 at 20 ms is kicked up by the contact (DIVERGED at the impact), at 2 ms it settles (SUCCESS),
    in one vmapped call.  MuJoCo's soft constraint (the default law) bounds the contact's stiffness
    and damping (ω = 1/τ), so the same step succeeds with it."""
    def ball(law):
        b = jaxmbd.ModelBuilder()
        b.add_body("ball", joint="free", mass=1.0, inertia=np.eye(3) * 0.004, pos=(0, 0, 0.3))
        b.add_geom("world", "plane", name="floor", contype=0)
        b.add_geom("ball", "sphere", 0.1, name="ball")
        b.set_contact_options(law=law)
        return b.build()
    m = ball("penalty")
    r = jax.vmap(lambda h: simulate(m, t1=1.0, integrator=I.RK4(), steps=Steps(dt0=h), solver=Solver(adjoint="none")))(jnp.array([0.002, 0.02]))
    assert r.status.tolist() == [I.SUCCESS, I.DIVERGED]
    soft = simulate(ball("soft"), t1=1.0, integrator=I.RK4(), steps=Steps(dt0=0.02), solver=Solver(adjoint="none"))
    assert int(soft.status) == I.SUCCESS and abs(float(soft.qs[-1, 2]) + 0.2) < 2e-3
    np.testing.assert_allclose(r.qs[0, -1, 2], -0.2, atol=2e-3)        # resting on the floor
    assert 0.15 < float(r.t[1]) < 0.3 and abs(float(r.qs[1, -1, 2])) < 0.3   # stopped at the impact


def test_fast_legitimate_motion_is_not_flagged():
    """A pendulum released from horizontal (its bob reaches 4.4 m/s), a body
    thrown up at 50 m/s and spinning, falling back past its start (adaptive
    steps), and a slider pushed by twice its weight for 2 s (driven: the
    bound grows with time) all succeed; the last one is within a factor of 4
    of the scale, so a factor of 2 flags it."""
    p = jaxmbd.models.pendulum()
    r = simulate(p, Start(jnp.array([np.pi / 2]), jnp.zeros(1)), 3.0, integrator=I.RK4(), steps=Steps(dt0=1e-3))
    assert int(r.status) == I.SUCCESS and float(jnp.abs(r.vs[-1, 0])) > 0.1

    b = jaxmbd.ModelBuilder()
    b.add_body("stone", joint="free", mass=2.0, inertia=(0.01, 0.02, 0.03))
    stone = b.build()
    v0 = jnp.array([1.0, 0.0, 50.0, 20.0, 5.0, 1.0])
    r = simulate(stone, Start(stone.q0, v0), 12.0, integrator=I.Dopri5(), steps=Steps(rtol=1e-8, atol=1e-8))
    assert int(r.status) == I.SUCCESS and float(r.qs[-1, 2]) < -100.0

    m = slider(k=0.0)
    push = jnp.array([2 * 9.81])
    r = simulate(m, t1=2.0, integrator=I.RK4(), inputs=Inputs(tau=push), steps=Steps(dt0=1e-2))
    assert int(r.status) == I.SUCCESS
    np.testing.assert_allclose(r.vs[-1, 0], 2 * 9.81 * 2.0, rtol=1e-12)
    r2 = simulate(m, t1=2.0, integrator=I.RK4(), inputs=Inputs(tau=push),
                  steps=Steps(dt0=1e-2, divergence_factor=2.0))
    assert int(r2.status) == I.DIVERGED


def test_energy_scale_of_a_pendulum():
    """E0 = M g L with L the rod plus the bob's radius of gyration; passive: no τ² term; driven: ½ M g²."""
    p = jaxmbd.models.pendulum()
    H0, E0, c = divergence.energy_scale(p, jnp.array([np.pi / 2]), jnp.zeros(1), False)
    assert float(H0) == pytest.approx(0.0, abs=1e-12)        # the bob level with the pivot
    assert float(E0) == pytest.approx(9.81 * 1.0, rel=1e-2) and float(c) == 0.0
    _, _, c = divergence.energy_scale(p, jnp.array([np.pi / 2]), jnp.zeros(1), True)
    assert float(c) == pytest.approx(0.5 * 9.81 ** 2)


def test_gradient_through_the_checked_loop_and_bad_factors_are_refused():
    """d x(t)/d x0 of the spring is cos(ω t) (to RK4's error) with the check in the loop."""
    m = slider()

    def final_x(x0):
        return simulate(m, Start(x0[None], jnp.zeros(1)), 0.05, integrator=I.RK4(), steps=Steps(dt0=STABLE)).qs[-1, 0]
    assert float(jax.grad(final_x)(jnp.asarray(X0))) == pytest.approx(np.cos(100 * 0.05), rel=1e-4)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="divergence_factor"):
            simulate(m, integrator=I.RK4(), steps=Steps(dt0=STABLE, divergence_factor=bad))
    with pytest.raises(TypeError, match="divergence_factor"):
        simulate(m, integrator=I.RK4(), steps=Steps(dt0=STABLE, divergence_factor=True))
