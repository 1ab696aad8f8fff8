"""The unrolled ABA (jaxmbd.aba_unrolled): the same accelerations as the
array-form ABA and as inverse dynamics (RNEA, independent code) on trees of
every joint type, members on the trailing axis equal to vmap, gradients equal
to the array form's, and rollouts with dynamics="aba_unrolled"."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import aba_unrolled, models
from jaxmbd import integrators as I
from jaxmbd.aba import aba as aba_array
from jaxmbd.dynamics import passive_force
from jaxmbd import Start, Steps, Solver

ALL_TYPES = ("revolute", "prismatic", "helical", "spherical", "free", "planar")


@pytest.fixture(scope="module")
def trees():
    out = [models.random_tree(jax.random.PRNGKey(k), 7, joint_types=ALL_TYPES, root_joint=root)
           for k, root in ((0, None), (1, "free"), (2, "spherical"))]
    seen = set()
    for m in out:
        seen |= set(m.topo.jtype)
    assert seen == set(ALL_TYPES)
    return out


def _states(m, B, seed):
    rng = np.random.default_rng(seed)
    dq = 0.7 * rng.standard_normal((B, m.nv))
    q = jax.vmap(lambda d: jaxmbd.integrate_q(m, m.q0, d))(jnp.asarray(dq))
    return q, jnp.asarray(rng.standard_normal((B, m.nv))), jnp.asarray(rng.standard_normal((B, m.nv))), \
        jnp.asarray(rng.standard_normal((B, m.topo.n_bodies, 6)))


@pytest.mark.slow  # five programs for each of the trees (58 s); the two tests below check a tree by default
def test_equals_array_aba_and_inverts_rnea(trees):
    for k, m in enumerate(trees):
        q, v, tau, fe = _states(m, 4, k)
        fd = jax.jit(jax.vmap(lambda q, v, t: jaxmbd.forward_dynamics(m, q, v, t, method="aba_unrolled")))
        a = fd(q, v, tau)
        ref = jax.jit(jax.vmap(lambda q, v, t: jaxmbd.forward_dynamics(m, q, v, t, method="aba")))(q, v, tau)
        np.testing.assert_allclose(a, ref, rtol=1e-10, atol=1e-10)
        # independent: inverse dynamics of the result gives the applied forces back
        back = jax.jit(jax.vmap(lambda q, v, a: jaxmbd.inverse_dynamics(m, q, v, a)))(q, v, a)
        np.testing.assert_allclose(back, tau, rtol=0, atol=1e-9)
        # external body forces
        af = jax.jit(jax.vmap(lambda q, v, t, f: aba_unrolled.aba(m, q, v, t, f)))(q, v, tau, fe)
        rf = jax.jit(jax.vmap(lambda q, v, t, f: aba_array(m, q, v, t, f)))(q, v, tau, fe)
        np.testing.assert_allclose(af, rf, rtol=1e-10, atol=1e-10)
        assert float(jnp.max(jnp.abs(af - a))) > 1e-3  # the forces do act


def test_members_on_the_trailing_axis_equal_vmap(trees):
    m = trees[1]
    q, v, tau, fe = _states(m, 5, 7)
    want = jax.jit(jax.vmap(lambda q, v, t, f: aba_unrolled.aba(m, q, v, t, f)))(q, v, tau, fe)
    got = jax.jit(lambda q, v, t, f: aba_unrolled.aba_batch(m, q, v, t, f))(q, v, tau, fe)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.long
def test_gradients_equal_the_array_form(trees):
    m = trees[2]
    q, v, tau, _ = _states(m, 1, 3)
    q, v, tau = q[0], v[0], tau[0]

    def loss(impl, q, v, mass):
        mm = eqx.tree_at(lambda t: t.mass, m, mass)
        a = impl(mm, q, v, tau + passive_force(mm, q, v))
        return jnp.sum(jnp.sin(a))

    g1 = jax.jit(jax.grad(lambda q, v, ms: loss(aba_unrolled.aba, q, v, ms), argnums=(0, 1, 2)))(q, v, m.mass)
    g2 = jax.jit(jax.grad(lambda q, v, ms: loss(aba_array, q, v, ms), argnums=(0, 1, 2)))(q, v, m.mass)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8)
        # finite: padding slots once divided by zero here (spherical root), 0 * inf in the VJP
        assert np.all(np.isfinite(a)) and float(np.max(np.abs(a))) > 0
    # and against central differences along a random direction (v and the masses)
    rng = np.random.default_rng(0)
    dv, dm = rng.standard_normal(m.nv), rng.standard_normal(m.mass.shape)
    f = jax.jit(jax.vmap(lambda s: loss(aba_unrolled.aba, q, v + s * dv, m.mass + s * dm)))
    h = 1e-6
    fp, fm = f(jnp.array([h, -h]))
    fd = (fp - fm) / (2 * h)
    np.testing.assert_allclose(jnp.dot(g1[1], dv) + jnp.dot(g1[2], dm), fd, rtol=1e-5)


@pytest.mark.long
def test_rollout_with_unrolled_dynamics():
    m = models.humanoid30()
    q, v, _, _ = _states(m, 3, 11)
    kw = dict(t1=0.01, integrator=I.RK4(), steps=Steps(dt0=1e-3))
    a = jaxmbd.rollout(m, Start(q, 0.3 * v), solver=Solver(dynamics="aba_unrolled"), **kw)
    b = jaxmbd.rollout(m, Start(q, 0.3 * v), solver=Solver(dynamics="aba"), **kw)
    np.testing.assert_allclose(a.qs, b.qs, rtol=1e-12, atol=1e-12)
    assert np.all(np.asarray(a.status) == 0)


def test_unknown_method_is_named():
    m = models.double_pendulum()
    with pytest.raises(ValueError, match="aba_unrolled"):
        jaxmbd.forward_dynamics(m, m.q0, m.v0, jnp.zeros(2), method="abba")
