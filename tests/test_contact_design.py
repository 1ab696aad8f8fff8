"""A design optimization through contact (jaxmbd.design's hopper): the leg
spring and damper of a hopping leg dropped onto a floor, chosen with optax
so that it bounces back to a target apex height, and checked by an
independent integrator.

Every check compares with Dopri5 runs (explicit, no Jacobians: nothing in
common with the Rosenbrock runs that are differentiated) saved every
millisecond.  The design parameters are traced, so each integrator compiles
once for the module."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxmbd
from jaxmbd import design
from jaxmbd import integrators as I
from jaxmbd import Start, Steps, Save

BASE = design.hopper()
START = jnp.log(jnp.array([400.0, 8.0]))     # log(N/m), log(N s/m): a soft, heavily damped leg
TARGET = 0.55                                 # apex of the centre of mass (m); the start reaches 0.38
T1 = 0.75
DENSE = jnp.linspace(0.0, T1, 751)            # every millisecond
T_TOUCH = float(design.hopper_touchdown_time(BASE))


def _model(theta):
    k, c = jnp.exp(theta)
    return design.hopper_design(k, c, BASE)


@jax.jit
def _dense_run(theta, tol):
    """Dopri5 at tolerance tol: the ballistic apex, the centre of mass's
    height and the foot's gap above the floor every millisecond."""
    m = _model(theta)

    def observe(m, q, v):
        gap = q[0] - design.HOPPER_LEG + q[1] - design.HOPPER_FOOT
        return design.ballistic_apex(m, q, v), design.center_of_mass(m, q, v)[0][2], gap
    sol = jaxmbd.simulate(m, Start(m.q0, m.v0), T1, integrator=I.Dopri5(),
                          steps=Steps(rtol=tol, atol=tol, max_steps=100_000),
                          save=Save(ts=DENSE, observe=observe, states=False))
    return sol.obs, sol.status


def _independent_apex(theta, tol=1e-11):
    """(the ballistic apex after touchdown, the highest point of the dense
    centre-of-mass path after touchdown, refined by the parabola through the
    three samples around it: exact in flight, where the path is a parabola)."""
    (e, z, _), status = _dense_run(theta, tol)
    assert int(status) == 0, jaxmbd.status_name(status)
    after = np.asarray(DENSE) >= T_TOUCH
    e, z = np.asarray(e), np.asarray(z)
    i = int(np.argmax(np.where(after, z, -np.inf)))
    y0, y1, y2 = z[i - 1:i + 2]
    return float(np.max(e[after])), y1 - (y0 - y2) ** 2 / (8 * (y0 - 2 * y1 + y2))


@jax.jit
def _rosenbrock_apex(theta, tol):
    return design.apex_height(_model(theta), T1, rtol=tol)


@pytest.mark.long
def test_the_apex_is_the_highest_point_of_an_independent_dense_run():
    """At the start design and at a stiff, lightly damped one, the apex that
    design.apex_height computes (adaptive Rosenbrock, tol 1e-8, 48 samples of
    the ballistic apex) equals the highest point of the centre of mass in a
    Dopri5 run saved every millisecond (1e-7 m); the foot touches down at
    hopper_touchdown_time; the start misses the target by more than 0.1 m."""
    for theta in (START, jnp.log(jnp.array([3000.0, 1.0]))):
        apex, status = _rosenbrock_apex(theta, 1e-8)
        assert int(status) == 0, jaxmbd.status_name(status)
        ballistic, highest = _independent_apex(theta)
        np.testing.assert_allclose(float(apex), highest, atol=1e-7)
        np.testing.assert_allclose(ballistic, highest, atol=1e-9)
    (_, _, gap), _ = _dense_run(START, 1e-9)
    first = float(DENSE[int(np.argmax(np.asarray(gap) <= 0))])
    assert T_TOUCH <= first < T_TOUCH + 1e-3
    assert TARGET - float(_rosenbrock_apex(START, 1e-8)[0]) > 0.1


@pytest.fixture(scope="module")
def optimized():
    """design.optimize with optax.polyak_sgd on |apex - target|: the
    minimum-norm Newton step for apex = target (one equation, two
    parameters); the loss runs adaptive Rosenbrock at tol 1e-8."""
    def loss(theta):
        apex, _ = design.apex_height(_model(theta), T1, rtol=1e-8)
        return jnp.abs(apex - TARGET)
    return design.optimize(loss, START, optax.polyak_sgd(max_learning_rate=3.0), steps=7)


@pytest.mark.slow
def test_the_gradient_at_the_start_equals_central_differences(optimized):
    """d apex / d log(k, c) at the start by jax.grad through the adaptive
    Rosenbrock run (the optimizer's first gradient, sign(apex - target)
    times it) equals central differences (step 1e-3 in log k, log c) of
    Dopri5 runs at tol 1e-11 to 1e-4 relative."""
    eps = 1e-3
    fd = np.array([(_independent_apex(START.at[i].add(eps))[0] - _independent_apex(START.at[i].add(-eps))[0])
                   / (2 * eps) for i in range(2)])
    assert np.all(np.abs(fd) > 0.05)               # the apex rises with k and falls with c
    grad = -np.asarray(optimized.grad0)            # the start is below the target: loss = target - apex
    np.testing.assert_allclose(grad, fd, rtol=1e-4)


@pytest.mark.slow
def test_the_optimized_leg_reaches_the_target_in_an_independent_simulation(optimized):
    """From a 17 cm miss the optimizer converges (|apex - target| < 1e-8 m
    in its own runs) to a stiffer, less damped leg, and Dopri5 at tol 1e-11
    (no shared code path with the differentiated Rosenbrock runs but the
    model) finds the centre of mass's highest point after the bounce within
    1e-6 m of the target."""
    hist = np.asarray(optimized.history)
    assert hist[0] > 0.1 and float(optimized.loss) < 1e-8, hist
    k, c = np.exp(np.asarray(optimized.params))
    assert k > 1.5 * 400.0 and c < 0.5 * 8.0, (k, c)
    ballistic, highest = _independent_apex(optimized.params)
    assert abs(highest - TARGET) < 1e-6, (highest, k, c)
    assert abs(ballistic - TARGET) < 1e-6
