"""Inputs that are traced (jit, vmap) and wrong are a status before any step, never a silent value:
a divergence factor that is not finite and > 0, save times outside [t0, t1] or out of order."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import Save, Start, Steps


def _slider():
    b = jaxmbd.ModelBuilder()
    b.add_body("slider", joint="prismatic", axis=(1, 0, 0), mass=1.0, stiffness=100.0)
    b.set_initial_state([0.1], [0.0])
    return b.build()


def test_a_traced_factor_that_is_not_finite_and_positive_is_bad_tolerances():
    """Under jit and vmap: NaN, inf, 0 and -1 stop the member before its first step with BAD_TOLERANCES
    (the check is not silently off); 1 runs to the end."""
    m = _slider()
    run = jax.jit(jax.vmap(lambda f: jaxmbd.simulate(m, t1=0.1, integrator=I.RK4(),
                                                     steps=Steps(dt0=1e-3, divergence_factor=f))))
    r = run(jnp.array([jnp.nan, jnp.inf, 0.0, -1.0, 1.0]))
    assert r.status.tolist() == [I.BAD_TOLERANCES] * 4 + [I.SUCCESS]
    assert r.stats["accepted"].tolist() == [0, 0, 0, 0, 100]
    assert "divergence_factor" in jaxmbd.status_name(I.BAD_TOLERANCES)


def test_traced_save_times_outside_the_run_or_out_of_order_are_bad_times():
    """t1 = 0.1: save times past t1 (the run would integrate past it), before t0 (q0 would be labelled
    with them) or decreasing give BAD_TIMES before any step; save times within [t0, t1], t1 itself
    included, run; the state at 0.05 is the spring's closed form x0 cos(ω t) (RK4's error)."""
    m = _slider()
    run = jax.jit(jax.vmap(lambda ts: jaxmbd.simulate(m, Start(m.q0, m.v0, 0.0), 0.1, integrator=I.RK4(),
                                                      steps=Steps(dt0=1e-3), save=Save(ts=ts))))
    ts = jnp.array([[0.05, 0.2], [-0.05, 0.05], [0.07, 0.05], [0.05, jnp.nan], [0.05, 0.1], [0.0, 0.1]])
    r = run(ts)
    assert r.status.tolist() == [I.BAD_TIMES] * 4 + [I.SUCCESS] * 2
    assert r.stats["accepted"][:4].tolist() == [0] * 4 and float(r.t[0]) == 0.0
    np.testing.assert_allclose(r.qs[4, 0, 0], 0.1 * np.cos(10.0 * 0.05), rtol=1e-8)
    assert "outside [t0, t1]" in jaxmbd.status_name(I.BAD_TIMES)
