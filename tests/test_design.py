"""Design optimization: recover a double pendulum's link lengths and spring
constants from its tip path, and verify the optimum with an independent
integrator."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy.integrate import solve_ivp

import jaxmbd
from jaxmbd import design

TRUE = dict(lengths=jnp.array([0.8, 1.2]), stiffness=jnp.array([2.0, 5.0]))
Q0, V0 = jnp.array([0.6, -0.4]), jnp.zeros(2)
TS = np.linspace(0.1, 1.0, 10)


def _radau_tip_path(params):
    """The tip path by scipy's Radau at 1e-12 (an integrator independent of jaxmbd's)."""
    m = design.double_pendulum_design(**params)
    f = jax.jit(lambda x: jnp.concatenate([x[2:], jaxmbd.forward_dynamics(m, x[:2], x[2:], jnp.zeros(2))]))
    r = solve_ivp(lambda t, x: np.asarray(f(x)), (0.0, TS[-1]), np.concatenate([Q0, V0]), method="Radau",
                  t_eval=TS, rtol=1e-12, atol=1e-12)
    assert r.status == 0
    lower = m.body_id("lower")
    tip = jax.vmap(lambda q: (lambda k: k.pos[lower] + k.rot[lower] @ m.com[lower])(jaxmbd.forward_kinematics(m, q)))
    return np.asarray(tip(jnp.asarray(r.y[:2].T)))


@pytest.mark.slow
def test_lbfgs_recovers_the_design_and_an_independent_simulation_confirms_it():
    target = jnp.asarray(_radau_tip_path(TRUE))

    def loss(theta):  # log-parameters keep lengths and stiffnesses positive
        p = jax.tree_util.tree_map(jnp.exp, theta)
        path, _ = design.tip_path(design.double_pendulum_design(**p), Q0, V0, jnp.asarray(TS), dt=0.01)
        return jnp.mean(jnp.sum((path - target) ** 2, -1))

    theta0 = dict(lengths=jnp.zeros(2), stiffness=jnp.zeros(2))  # l = k = 1
    res = design.optimize(loss, theta0, optax.lbfgs(), steps=40)
    assert float(res.history[0]) > 1e-3
    assert float(res.loss) < 1e-13, res.history[::5]
    found = jax.tree_util.tree_map(jnp.exp, res.params)
    # RK4 at dt = 0.01 against the Radau target: the optimum moves by the discretization error only
    np.testing.assert_allclose(found["lengths"], TRUE["lengths"], rtol=1e-5)
    np.testing.assert_allclose(found["stiffness"], TRUE["stiffness"], rtol=1e-4)
    # verification by an independent forward simulation of the found design
    np.testing.assert_allclose(_radau_tip_path(found), target, atol=1e-6)


def test_optimize_passes_the_line_search_what_it_needs():
    """optax.lbfgs (zoom line search: value and value_fn) on Rosenbrock's function reaches (1, 1)."""
    f = lambda p: (1 - p["x"]) ** 2 + 100 * (p["y"] - p["x"] ** 2) ** 2  # noqa: E731
    res = design.optimize(f, dict(x=jnp.asarray(-1.2), y=jnp.asarray(1.0)), optax.lbfgs(), steps=60)
    np.testing.assert_allclose([res.params["x"], res.params["y"]], [1.0, 1.0], atol=1e-8)
    assert float(res.grad_norm) < 1e-6 and res.history.shape == (60,)
