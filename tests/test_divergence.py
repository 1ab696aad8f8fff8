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
    check the run reports success at 1e9 m; with it, DIVERGED at the first
    step (its energy x5.2, a gain of 4.2 U0 > U0 + M g L).  With a factor of
    10 the run goes on while the gain stays within 10 (U0 + M g L): it stops
    later, on a state within the bound, at the time it was reached."""
    m = slider()
    bad = simulate(m, t1=1.0, integrator=I.RK4(), steps=Steps(dt0=UNSTABLE, divergence_factor=None))
    assert int(bad.status) == I.SUCCESS and abs(float(bad.qs[-1, 0])) > 1e6   # what the check prevents
    r = simulate(m, t1=1.0, integrator=I.RK4(), steps=Steps(dt0=UNSTABLE))
    assert int(r.status) == I.DIVERGED and jaxmbd.status_name(r.status).startswith("diverged")
    assert float(r.t) == 0.0 and float(r.qs[-1, 0]) == X0
    r = simulate(m, t1=1.0, integrator=I.RK4(), steps=Steps(dt0=UNSTABLE, divergence_factor=10.0))
    assert int(r.status) == I.DIVERGED
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


@pytest.mark.long
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
    # the work of the push, accumulated by the trapezoid rule, is the kinetic energy F² t² / (2 m)
    np.testing.assert_allclose(r.reference.work, (2 * 9.81 * 2.0) ** 2 / 2, rtol=1e-12)
    np.testing.assert_allclose(r.reference.exchanged, r.reference.work, rtol=1e-12)


def test_reference_of_a_pendulum():
    """H0 = 0 with the bob level with the pivot; E0 = M g L with L the rod plus the bob's radius of
    gyration; nothing stored (no contact, limit or spring), no work yet."""
    p = jaxmbd.models.pendulum()
    ref = divergence.reference(p, jnp.array([np.pi / 2]), jnp.zeros(1))
    assert float(ref.H0) == pytest.approx(0.0, abs=1e-12)
    assert float(ref.scale) == pytest.approx(9.81 * 1.0, rel=1e-2)
    assert float(ref.allowance) == 0.0 and float(ref.work) == 0.0 and float(ref.exchanged) == 0.0
    assert not divergence.driven(p, jaxmbd.Inputs()) and divergence.driven(p, jaxmbd.Inputs(tau=jnp.ones(1)))


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


# --- runs whose energy legitimately grows, and one whose energy is spurious (MuJoCo as the oracle) -------------

mujoco = pytest.importorskip("mujoco")

HINGE = """<mujoco model="arm"><option timestep="0.001" integrator="RK4"/>
  <worldbody>
    <body name="upper_arm" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" range="-45 45" limited="true"/>
      <geom name="upper_arm" type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03" mass="1"/>
    </body>
  </worldbody>
</mujoco>"""

LINK = """<mujoco model="spinner"><option timestep="0.001" integrator="RK4" gravity="0 0 0"/>
  <worldbody>
    <body name="link">
      <joint name="spin" type="hinge" axis="0 0 1"/>
      <geom name="link" type="capsule" fromto="0 0 0 0.2 0 0" size="0.01" mass="0.1"/>
    </body>
  </worldbody>
  <actuator><motor name="spin" joint="spin" gear="1" ctrlrange="-1 1"/></actuator>
</mujoco>"""

STIFF_BALL = """<mujoco model="ball"><option timestep="0.001" integrator="RK4"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="ball" pos="0 0 0.3">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.1" mass="1" solref="-1e7 -10"/>
    </body>
  </worldbody>
</mujoco>"""


def _mujoco_run(xml, q0, times, ctrl=None):
    """MuJoCo's qpos, qvel at the given times (multiples of the file's timestep) from q0 at rest."""
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    d.qpos[:] = q0
    if ctrl is not None:
        d.ctrl[:] = ctrl
    steps = np.rint(np.asarray(times) / mj.opt.timestep).astype(int)
    out = []
    for k in range(1, steps[-1] + 1):
        mujoco.mj_step(mj, d)
        if k in steps:
            out.append((d.qpos.copy(), d.qvel.copy()))
    return mj, out


def test_a_hinge_started_past_its_limit_runs_to_the_end_as_mujocos():
    """The arm starts 1.5 rad past its 45° limit (MuJoCo's soft limit pushes it back): RK4 at 1 ms with
    the default check succeeds and agrees with MuJoCo's RK4 at the same step along the way.  The energy
    it gains from the limit is more than the drift tolerance E0 (so without the stored energy of the
    violated row in the allowance it would be DIVERGED) and less than that allowance."""
    m = jaxmbd.load_mjcf(HINGE, warn=False)
    q0 = np.pi / 4 + 1.5
    ts = np.array([0.02, 0.05, 0.1, 0.3, 1.0])
    r = simulate(m, Start(jnp.array([q0]), jnp.zeros(1)), 1.0, integrator=I.RK4(),
                 steps=Steps(dt0=1e-3), save=jaxmbd.Save(ts=jnp.asarray(ts)))
    assert int(r.status) == I.SUCCESS, jaxmbd.status_name(r.status)
    _, theirs = _mujoco_run(HINGE, [q0], ts)
    np.testing.assert_allclose(r.qs[:, 0], [q[0] for q, _ in theirs], atol=1e-8)
    np.testing.assert_allclose(r.vs[:, 0], [v[0] for _, v in theirs], atol=1e-6)
    ref = r.reference
    gain = max(float(divergence.energy(m, q, v)) - float(ref.H0) for q, v in zip(r.qs, r.vs))
    assert float(ref.scale) < gain < float(ref.allowance)


def test_a_motor_spinning_up_a_light_link_is_not_diverged():
    """1 N m on a 0.1 kg link (no gravity): ω = τ t / I exactly (RK4, constant torque), as MuJoCo's run;
    the accumulated work W equals the kinetic energy ½ I ω², so the balance H - H0 - W stays at round-off
    though the energy grows as t² without bound."""
    m = jaxmbd.load_mjcf(LINK, warn=False)
    r = simulate(m, t1=2.0, integrator=I.RK4(), inputs=Inputs(ctrl=jnp.ones(1)), steps=Steps(dt0=1e-3))
    assert int(r.status) == I.SUCCESS, jaxmbd.status_name(r.status)
    mj, [(q_mj, v_mj)] = _mujoco_run(LINK, [0.0], [2.0], ctrl=[1.0])
    inertia = float(mj.dof_M0[0])                   # MuJoCo's own mass matrix entry of the hinge
    np.testing.assert_allclose(r.vs[-1, 0], 1.0 * 2.0 / inertia, rtol=1e-10)
    np.testing.assert_allclose(r.vs[-1, 0], v_mj[0], rtol=1e-10)
    np.testing.assert_allclose(r.qs[-1, 0], q_mj[0], rtol=1e-9)
    np.testing.assert_allclose(r.reference.work, 0.5 * inertia * float(r.vs[-1, 0]) ** 2, rtol=1e-10)


def test_a_stiff_contact_bounce_is_diverged_and_a_continued_run_keeps_its_balance():
    """A ball on a legal stiff direct-form contact (solref -1e7 -10, √K h = 3.2) under RK4 at 1 ms: the
    unchecked run (a factor too large to matter, the same program) is thrown from 0.3 m to above 0.9 m
    at the first bounce; the checked run stops at that bounce (~0.2 s) with DIVERGED, never above its
    start.  Continued in two pieces (the first piece's reference passed on), it stops at the same step."""
    m = jaxmbd.load_mjcf(STIFF_BALL, warn=False)
    ts = jnp.linspace(0.05, 0.6, 12)
    run = jax.jit(lambda f, t0, q, v, ref, ts: simulate(
        m, Start(q, v, t0, reference=ref), ts[-1], integrator=I.RK4(), steps=Steps(dt0=1e-3, divergence_factor=f),
        save=jaxmbd.Save(ts=ts), solver=Solver(adjoint="none")))
    unset = divergence.DivergenceReference.unset()
    free = run(1e12, 0.0, m.q0, m.v0, unset, ts)
    assert int(free.status) == I.SUCCESS and float(free.qs[:, 2].max()) > 0.9
    r = run(1.0, 0.0, m.q0, m.v0, unset, ts)
    assert int(r.status) == I.DIVERGED
    assert 0.19 < float(r.t) < 0.25 and float(r.qs[:, 2].max()) <= 0.3
    first = run(1.0, 0.0, m.q0, m.v0, unset, jnp.linspace(0.01, 0.12, 12))     # before the bounce
    assert int(first.status) == I.SUCCESS
    rest = run(1.0, 0.12, first.qs[-1], first.vs[-1], first.reference, jnp.linspace(0.17, 0.72, 12))
    assert int(rest.status) == I.DIVERGED and float(rest.t) == pytest.approx(float(r.t), abs=1e-9)
    assert float(rest.reference.H0) == float(first.reference.H0) == float(r.reference.H0)


@pytest.mark.long
def test_the_command_stops_the_stiff_bounce_in_its_chunks(tmp_path, capsys):
    """``jaxmbd simulate`` runs rollout chunk by chunk; the first chunk's energy balance is passed on to
    the later ones (not re-based at each chunk's start), so the bounce is DIVERGED at the first impact:
    the saved heights never pass 0.5 m (re-based, the ball was let through to 2.6 m)."""
    from jaxmbd import cli
    xml = tmp_path / "ball.xml"
    xml.write_text(STIFF_BALL)
    out = tmp_path / "run.npz"
    assert cli.main(["simulate", str(xml), "--integrator", "rk4", "--dt0", "0.001", "--t1", "2", "--batch", "1",
                     "--chunks", "10", "--no-plot", "--out", str(out), "--no-compile-cache"]) == 0
    text = capsys.readouterr().out
    assert "failures: diverged" in text and "use a smaller --dt0" in text, text
    z = np.load(out)
    assert z["status"].tolist() == [I.DIVERGED]
    heights = z["qs"][0, :, 2]
    assert np.isfinite(heights[0]) and np.nanmax(heights) < 0.5
