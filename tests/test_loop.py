"""The integration loop on the path a user takes: ``jax.vmap(simulate)``
with default arguments is a while loop that stops when the last member is
done (not max_steps masked iterations), equals a Python loop of single runs,
and is reverse-differentiable; and inputs that can only be checked inside the
trace (traced parameters, tolerances and times) give failure statuses, never
a silent success."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import models, simulate
from jaxmbd import Start, Steps, Save

MODEL = models.double_pendulum()
B = 6


def _states(seed=0):
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.normal(size=(B, 2))), jnp.asarray(rng.normal(size=(B, 2)))


def _primitives(jaxpr, out):
    for eqn in jaxpr.eqns:
        out.append((eqn.primitive.name, eqn.params))
        for sub in jax.core.subjaxprs(eqn) if hasattr(jax.core, "subjaxprs") else []:
            _primitives(sub, out)
        for v in eqn.params.values():
            for j in (v if isinstance(v, (tuple, list)) else [v]):
                inner = getattr(j, "jaxpr", None)
                if inner is not None:
                    _primitives(getattr(inner, "jaxpr", inner), out)
    return out


@pytest.mark.parametrize("method", ["rk4", pytest.param("rosenbrock", marks=pytest.mark.long)])
def test_vmap_at_default_arguments_equals_a_loop_and_stops_when_done(method):
    integ, kw = ((I.RK4(), dict(steps=Steps(dt0=0.01))) if method == "rk4"
                 else (I.RosenbrockNystrom4(), dict(steps=Steps(rtol=1e-6, atol=1e-6))))
    ts = jnp.linspace(0.0, 0.5, 6)
    run = lambda q, v: simulate(MODEL, Start(q, v), 0.5, integrator=integ, save=Save(ts=ts), **kw)  # noqa: E731
    q0, v0 = _states()
    sols = jax.jit(jax.vmap(run))(q0, v0)
    assert np.all(np.asarray(sols.status) == 0)
    for i in range(B):
        one = run(q0[i], v0[i])
        np.testing.assert_allclose(sols.qs[i], one.qs, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(sols.vs[i], one.vs, rtol=1e-13, atol=1e-13)
        assert int(one.stats["accepted"]) == int(sols.stats["accepted"][i])
    if method == "rosenbrock":  # adaptive members take different numbers of steps
        assert len(set(np.asarray(sols.stats["accepted"]).tolist())) > 1
    # the batched program loops with a while loop on "any member not done", not a scan of max_steps
    prims = _primitives(jax.make_jaxpr(jax.vmap(run))(q0, v0).jaxpr, [])
    names = [p for p, _ in prims]
    assert "while" in names
    assert all(p != "scan" or params["length"] < 1000 for p, params in prims)


@pytest.mark.long
def test_gradient_of_a_batched_loss_at_default_arguments_matches_finite_differences():
    ts = jnp.array([0.3])
    q0, v0 = _states(1)

    def loss(v, tol):
        sols = jax.vmap(lambda q, v: simulate(MODEL, Start(q, v), 0.3, integrator=I.Dopri5(),
                                              steps=Steps(rtol=tol, atol=tol), save=Save(ts=ts)))(q0, v)
        return jnp.sum(sols.qs[:, -1, 0] * jnp.arange(1.0, B + 1))

    g = jax.grad(loss)(v0, 1e-10)
    e = 1e-5
    fd = np.zeros((B, 2))
    f = jax.jit(loss)
    for i in range(B):
        for j in range(2):
            fd[i, j] = (f(v0.at[i, j].add(e), 1e-12) - f(v0.at[i, j].add(-e), 1e-12)) / (2 * e)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
    # members finish at different step counts (the finished ones wait, masked, for the last)
    n = jax.vmap(lambda q, v: simulate(MODEL, Start(q, v), 0.3, integrator=I.Dopri5(),
                                       steps=Steps(rtol=1e-10, atol=1e-10), save=Save(ts=ts)).stats["accepted"])(q0, v0)
    assert len(set(np.asarray(n).tolist())) > 1


# --- inputs checked inside the trace --------------------------------------------------------------

def _run(model, q0, v0, t0, t1, rtol, atol):
    return simulate(model, Start(q0, v0, t=t0), t1, integrator=I.RosenbrockNystrom4(),
                    steps=Steps(rtol=rtol, atol=atol))


RUN = eqx.filter_jit(eqx.filter_vmap(_run, in_axes=(eqx.if_array(0), 0, 0, 0, 0, 0, 0)))


def _batch_of_models(model, n):
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape) if eqx.is_array(x) else x, model)


@pytest.mark.long
def test_bad_traced_inputs_give_failure_statuses_per_member():
    n = 7
    ms = _batch_of_models(MODEL, n)
    ms = eqx.tree_at(lambda m: m.mass, ms, ms.mass.at[1].set(-ms.mass[1]))             # a negative mass
    ms = eqx.tree_at(lambda m: m.inertia, ms, ms.inertia.at[2].set(-ms.inertia[2]))    # a negated inertia
    ms = eqx.tree_at(lambda m: m.damping, ms, ms.damping.at[3].set(jnp.nan))           # a NaN parameter
    q0 = jnp.tile(jnp.array([0.3, -0.2]), (n, 1))
    v0 = jnp.zeros((n, 2))
    t0 = jnp.zeros(n)
    t1 = jnp.full(n, 0.2).at[4].set(-0.1)                                               # t1 < t0
    rtol = jnp.full(n, 1e-6).at[5].set(-1e-6)                                            # a negative tolerance
    atol = jnp.full(n, 1e-6).at[6].set(jnp.nan)                                          # a NaN tolerance
    sol = RUN(ms, q0, v0, t0, t1, rtol, atol)
    expected = [I.SUCCESS, I.BAD_MASS_MATRIX, I.BAD_MASS_MATRIX, I.BAD_PARAMETERS, I.BAD_TIMES, I.BAD_TOLERANCES,
                I.BAD_TOLERANCES]
    assert np.asarray(sol.status).tolist() == expected
    assert jaxmbd.status_name(I.BAD_MASS_MATRIX).startswith("invalid inertia")
    # a failed member takes no step and reports its initial state, not a silent integration
    assert np.all(np.asarray(sol.stats["accepted"])[1:] == 0) and int(sol.stats["accepted"][0]) > 0
    np.testing.assert_array_equal(np.asarray(sol.qs)[1:, -1], np.asarray(q0)[1:])
    # the same model unbatched, and a traced negative dt0 for a fixed-step method
    f = jax.jit(lambda dt0: simulate(MODEL, Start(q0[0], v0[0]), 0.2, integrator=I.RK4(), steps=Steps(dt0=dt0)))
    assert int(f(-0.01).status) == I.BAD_TIMES and int(f(0.01).status) == I.SUCCESS
    # rtol = 0 with atol > 0 is a valid (pure absolute) tolerance
    assert int(jax.jit(_run)(MODEL, q0[0], v0[0], 0.0, 0.2, 0.0, 1e-6).status) == I.SUCCESS


def test_max_steps_is_a_traced_bound_shared_by_one_program():
    """Calls that differ only in max_steps (or tolerances) share one compiled
    program, and under vmap each member has its own bound: a member whose
    bound is too small stops with status 1 after exactly that many attempts,
    the others finish."""
    kw = dict(t1=0.5, integrator=I.Dopri5())
    a = simulate(MODEL, steps=Steps(max_steps=1000, rtol=1e-6, atol=1e-6), **kw)
    compiles = []

    def listen(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        b = simulate(MODEL, steps=Steps(max_steps=4, rtol=1e-8, atol=1e-8), **kw)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert not compiles   # the first call's program
    assert int(a.status) == 0 and int(b.status) == 1
    assert int(b.stats["accepted"]) + int(b.stats["rejected"]) == 4
    r = jax.vmap(lambda n: simulate(MODEL, steps=Steps(max_steps=n), **kw))(jnp.array([3, 1000, 7]))
    np.testing.assert_array_equal(np.asarray(r.status), [1, 0, 1])
    np.testing.assert_array_equal(np.asarray(r.stats["accepted"] + r.stats["rejected"]), [3, a.stats["accepted"]
                                                                                          + a.stats["rejected"], 7])
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        simulate(MODEL, steps=Steps(max_steps=0), **kw)
    with pytest.raises(TypeError, match="max_steps must be an integer"):
        simulate(MODEL, steps=Steps(max_steps=jnp.asarray(10.0)), **kw)
