"""The reverse pass of an adaptive run (``Solver(adjoint="checkpoint")``, jaxmbd.simulate): the run
records its accepted steps and the reverse pass replays them, so the gradient is that of the
discrete solution the run computed, at any tolerance and any number of checkpoints.

- a box thrown rolling onto a floor (penalty law, impacts, sliding, rolling): ``jax.grad`` of its
  final position with respect to the throw's speed equals central differences of tight runs within
  1e-3 relative at rtol = atol = 1e-6, 1e-8 and 1e-10;
- a tumbling throw at 1e-10, whose steps' error estimates cancel to a few digits: the gradient with
  100 checkpoints equals forward-mode differentiation of the same run (a reverse pass that
  recomputed the steps' decisions between checkpoints was off by 5 times the derivative);
- the go2-class quadruped landing from 10 cm (soft contacts): the gradient with respect to a link
  mass and the contacts' friction equals central differences within 1e-3 at the same three
  tolerances (slow);
- a run with more accepted steps than ``Solver(replay_steps=)`` gets a NaN gradient; bad values are
  refused at construction."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import Solver, Start, Steps, simulate
from jaxmbd.integrators import RK4, RosenbrockNystrom4
from test_friction_cones import box_scene

Q0 = jnp.array([0, 0, 0.2, 1, 0, 0, 0.])
@functools.cache
def _box():
    return jaxmbd.load_mjcf(box_scene("elliptic"), law="penalty", warn=False)


def _final_x(spin, tol, solver=Solver(), t1=0.6):
    """x of the box (10 cm, 0.8 kg, μ = 0.6, penalty law) thrown at vx from 0.2 m with ``spin``, at t1."""
    model = _box()

    def final_x(vx):
        v0 = jnp.concatenate([jnp.stack([vx, 0.0, 0.0]), jnp.asarray(spin)])
        sol = simulate(model, Start(Q0, v0), t1, integrator=RosenbrockNystrom4(),
                       steps=Steps(rtol=tol, atol=tol, max_steps=200_000), solver=solver)
        return sol.qs[-1, 0]
    return final_x


@pytest.mark.long
def test_the_gradient_of_a_rolling_throw_converges_as_the_tolerance_tightens():
    """Rolling forward (6 rad/s about y), the box lands, slides and rolls: x at 0.6 s, dx/dvx = 1.3485.  The
    reference is the central difference (h = 1e-4) of runs at 1e-11; the gradients at 1e-6, 1e-8 and
    1e-10 are within 1e-3 of it, and closer as the tolerance tightens."""
    spin = jnp.array([0.0, 6.0, 0.0])
    f = jax.jit(_final_x(spin, 1e-11, Solver(adjoint="none")))
    ref = float((f(1.5 + 1e-4) - f(1.5 - 1e-4)) / 2e-4)
    grad = jax.jit(lambda vx, tol: jax.grad(_final_x(spin, tol))(vx))
    errors = [abs(float(grad(1.5, tol)) - ref) / abs(ref) for tol in (1e-6, 1e-8, 1e-10)]
    assert max(errors) < 1e-3, (ref, errors)
    assert errors[2] < errors[0], errors


@pytest.mark.long
def test_the_reverse_pass_differentiates_the_run_it_replays():
    """Tumbling (3, -5, 2) rad/s for 0.8 s at 1e-10 (14,600 attempts): the gradient with 100
    checkpoints equals forward-mode differentiation of the same run to 1e-8 relative, and central
    differences (h = 1e-4, the same tolerance) within 1e-3."""
    spin = jnp.array([3.0, -5.0, 2.0])
    g = float(jax.jit(jax.grad(_final_x(spin, 1e-10, t1=0.8)))(1.5))
    forward = _final_x(spin, 1e-10, Solver(adjoint="none"), t1=0.8)
    d = float(jax.jit(lambda x: jax.jvp(forward, (x,), (1.0,))[1])(1.5))
    f = jax.jit(forward)
    fd = float((f(1.5 + 1e-4) - f(1.5 - 1e-4)) / 2e-4)
    assert abs(g - d) < 1e-8 * abs(d), (g, d)
    assert abs(g - fd) < 1e-3 * abs(fd), (g, fd)


def test_a_run_longer_than_the_replay_record_has_a_nan_gradient():
    """A pendulum-like free fall of 40 fixed steps: replay_steps=40 gives the gradient of
    (forward-mode's), replay_steps=39 gives NaN; replay_steps < 1 is refused."""
    b = jaxmbd.ModelBuilder()
    b.add_body("ball", "world", "free", mass=1.0, com=(0, 0, 0), inertia=(0.1, 0.1, 0.1))
    model = b.build()

    def z(vz, solver):
        v0 = jnp.zeros(6).at[2].set(vz).at[3].set(1.0)
        sol = simulate(model, Start(model.q0, v0), 0.4, integrator=RK4(), steps=Steps(dt0=0.01), solver=solver)
        return sol.qs[-1, 2]
    full = jax.grad(z)(0.3, Solver(replay_steps=40))
    np.testing.assert_allclose(full, 0.4, rtol=1e-12)          # z = z0 + vz t - g t²/2
    assert np.isnan(jax.grad(z)(0.3, Solver(replay_steps=39)))
    with pytest.raises(ValueError, match="replay_steps"):
        Solver(replay_steps=0)


@pytest.mark.slow
def test_the_gradient_of_a_quadruped_landing_converges_as_the_tolerance_tightens():
    """The built-in go2-class quadruped (soft contacts, 36 rows, position servos at its home keyframe)
    dropped from 10 cm above the keyframe: the gradient of its base's final x + z at 0.3 s with
    respect to the trunk's mass and to the contacts' friction (both as scale factors: 8.939e-4 and
    6.768e-3) equals the central differences of 1e-10 runs within 1e-3 relative at rtol = atol =
    1e-6, 1e-8 and 1e-10.  The mass's difference takes h = 1e-2: at h = 1e-4 it is 1.8e-7, within
    a few times the runs' own error, and 0.4% off; the friction's takes h = 1e-4."""
    import equinox as eqx
    from jaxmbd import Inputs
    from jaxmbd.forces.contact import Contact
    m = jaxmbd.load_mjcf(str(jaxmbd.models.quadruped_scene_path()), warn=False)
    ci = next(i for i, f in enumerate(m.forces) if isinstance(f, Contact))
    key = m.keyframes["home"]
    q0 = jnp.asarray(key.qpos).at[2].add(0.1)

    def loss(p, tol, solver=Solver()):
        scaled = eqx.tree_at(lambda m: (m.mass, m.forces[ci].friction), m,
                             (m.mass.at[1].multiply(p[0]), m.forces[ci].friction * p[1]))
        sol = simulate(scaled, Start(q0, jnp.zeros(m.nv)), 0.3, integrator=RosenbrockNystrom4(),
                       inputs=Inputs(ctrl=jnp.asarray(key.ctrl)), steps=Steps(rtol=tol, atol=tol), solver=solver)
        return sol.qs[-1, 0] + sol.qs[-1, 2], sol.status
    p0 = jnp.ones(2)
    f = jax.jit(lambda p: loss(p, 1e-10, Solver(adjoint="none")))
    steps = np.array([1e-2, 1e-4])
    runs = [[f(p0 + e), f(p0 - e)] for e in steps[:, None] * np.eye(2)]
    assert all(int(status) == 0 for pair in runs for _, status in pair)
    ref = np.array([float(plus[0] - minus[0]) for plus, minus in runs]) / (2 * steps)
    grad = jax.jit(jax.grad(lambda p, tol: loss(p, tol)[0]))
    for tol in (1e-6, 1e-8, 1e-10):
        g = np.asarray(grad(p0, tol))
        assert np.all(np.abs(g - ref) < 1e-3 * np.abs(ref)), (tol, g, ref)
