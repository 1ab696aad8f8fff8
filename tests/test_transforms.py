"""jit, vmap and grad: gradients checked numerically (forward and reverse mode,
order 2), with respect to states and model parameters; vmap equals a loop; jit
equals no-jit; new parameters on the same topology do not recompile."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxmbd
from jaxmbd import models
from trees import eqx_set, perturb, random_state


@pytest.fixture(scope="module")
def small():
    """Three bodies: free root, ball, helical — every term of the algorithms.

    Inertias are scaled up so third derivatives (which set the finite-difference
    error of the order-2 checks) stay moderate: d^3(1/I)/dI^3 = -6/I^4.
    """
    b = models.random_tree_builder(21, 3, joint_types=("spherical", "helical", "revolute"), root_joint="free")
    m = perturb(b.build(), 5)
    m = eqx_set(m, "inertia", m.inertia * 30.0)
    q, v, tau = random_state(m, 5)
    return m, q, v, tau


def _fk(m, q, v):
    k = jaxmbd.forward_kinematics(m, q, v)
    return jnp.concatenate([k.rot.ravel(), k.pos.ravel(), k.vel.ravel()])


FUNCS = {
    "fk": lambda m, q, v, tau: _fk(m, q, v),
    "rnea": lambda m, q, v, tau: jaxmbd.inverse_dynamics(m, q, v, tau),
    "crba": lambda m, q, v, tau: jaxmbd.mass_matrix(m, q).ravel(),
    "aba": lambda m, q, v, tau: jaxmbd.forward_dynamics(m, q, v, tau, method="aba"),
}


PARAMS = ("mass", "com", "inertia", "axis", "tree_pos", "damping")


@pytest.mark.long
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("aba", "crba", "rnea") else n
                                  for n in sorted(FUNCS)])
def test_grads(small, name):
    """Order-2 forward and reverse derivatives w.r.t. the state and the model."""
    m, q, v, tau = small
    f = FUNCS[name]

    def g(q, v, tau, *params):
        mm = m
        for k, x in zip(PARAMS, params):
            mm = eqx_set(mm, k, x)
        return f(mm, q, v, tau)
    args = (q, v, tau) + tuple(getattr(m, k) for k in PARAMS)
    check_grads(g, args, order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5, eps=1e-4)


@pytest.mark.long
def test_aba_derivatives_through_the_rnea_equal_those_of_its_passes(small):
    """The ABA's derivative rule (implicit function through the RNEA, H⁻¹ from
    the primal's articulated inertias; jaxmbd.aba.aba) equals autodiff through the three passes
    themselves, in forward and reverse mode, with respect to the state, the
    torques, external forces and the mass parameters (second order: test_grads
    below, -m slow)."""
    from jaxmbd.aba import _aba_passes, aba
    m, q, v, tau = small
    fe = jnp.asarray(np.random.default_rng(3).normal(size=(m.n_bodies, 6)))

    def via(f):
        def g(q, v, tau, fe, mass, com, inertia):
            mm = eqx_set(eqx_set(eqx_set(m, "mass", mass), "com", com), "inertia", inertia)
            return f(mm, q, v, tau, fe)
        return g
    args = (q, v, tau, fe, m.mass, m.com, m.inertia)
    argnums = tuple(range(len(args)))
    ref = jax.jit(jax.jacfwd(via(lambda *a: _aba_passes(*a)[0]), argnums))(*args)
    for mode in (jax.jacfwd, jax.jacrev):
        got = jax.jit(mode(via(aba), argnums))(*args)
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * float(jnp.abs(b).max()))


def test_grad_of_quaternion_maps_at_identity():
    """exp/log of rotations have finite, correct gradients at zero rotation."""
    m = models.random_tree(0, 1, root_joint="spherical")
    q0 = jaxmbd.neutral_q(m)
    J = jax.jacfwd(lambda v: jaxmbd.integrate_q(m, q0, v, 1.0))(jnp.zeros(3))
    np.testing.assert_allclose(J, np.vstack([np.zeros(3), 0.5 * np.eye(3)]), atol=1e-15)
    Jd = jax.jacrev(lambda q: jaxmbd.difference_q(m, q0, q))(q0)
    assert np.all(np.isfinite(Jd))
    np.testing.assert_allclose(Jd[:, 1:], 2 * np.eye(3), atol=1e-12)


def test_vmap_equals_loop_over_states_and_models(small):
    m, q, v, tau = small
    ms = [perturb(m, s) for s in range(3)]
    states = [random_state(m, s) for s in range(3)]
    batched_model = jax.tree.map(lambda *x: jnp.stack(x), *ms)
    Q, V, T = (jnp.stack(x) for x in zip(*states))
    for name, f in FUNCS.items():
        out = jax.vmap(f)(batched_model, Q, V, T)
        loop = jnp.stack([f(mi, *si) for mi, si in zip(ms, states)])
        np.testing.assert_allclose(out, loop, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.long
def test_jit_equals_nojit(small):
    m, q, v, tau = small
    for name, f in FUNCS.items():
        with jax.disable_jit():
            ref = f(m, q, v, tau)
        np.testing.assert_allclose(jax.jit(f)(m, q, v, tau), ref, rtol=1e-12, atol=1e-13, err_msg=name)


def test_new_parameters_do_not_recompile(small):
    m, q, v, tau = small
    jaxmbd.mass_matrix(m, q)
    before = jaxmbd.mass_matrix._cache_size()
    for s in range(3):
        jaxmbd.mass_matrix(perturb(m, 100 + s), q)
    assert jaxmbd.mass_matrix._cache_size() == before


def test_float32_opt_out_keeps_input_precision(small):
    m, q, v, tau = small
    m32 = jax.tree.map(lambda x: x.astype(jnp.float32), m)
    qdd = jaxmbd.forward_dynamics(m32, q.astype(jnp.float32), v.astype(jnp.float32), tau.astype(jnp.float32))
    assert qdd.dtype == jnp.float32
    np.testing.assert_allclose(qdd, jaxmbd.forward_dynamics(m, q, v, tau), rtol=1e-3, atol=1e-3)


@pytest.mark.long
def test_other_public_functions_batch_and_differentiate(small):
    """Jacobians, energies, the Coriolis matrix and the sparse factor under vmap and grad."""
    from jaxmbd import ltdl
    m, q, v, tau = small
    states = [random_state(m, s) for s in range(2)]
    Q, V = jnp.stack([s[0] for s in states]), jnp.stack([s[1] for s in states])
    frame = m.frame_names[-1]
    fns = {
        "jacobian": lambda q, v: jaxmbd.frame_jacobian(m, q, frame, (0.1, 0.0, 0.0)),
        "coriolis": lambda q, v: jaxmbd.coriolis_matrix(m, q, v),
        "ltdl": lambda q, v: ltdl.solve(m, ltdl.factor(m, jaxmbd.mass_matrix_compact(m, q)), v),
        "manifold": lambda q, v: jaxmbd.difference_q(m, q, jaxmbd.integrate_q(m, q, v, 0.1)),
    }
    for name, f in fns.items():
        np.testing.assert_allclose(jax.vmap(f)(Q, V), jnp.stack([f(*s[:2]) for s in states]),
                                   rtol=1e-12, atol=1e-12, err_msg=name)
    energy = lambda q, v: jaxmbd.kinetic_energy(m, q, v) + jaxmbd.potential_energy(m, q)
    check_grads(energy, (q, v), order=1, modes=("rev",), atol=1e-6, rtol=1e-6)
    check_grads(lambda q: jaxmbd.point_jacobian(m, q, frame), (q,), order=1, modes=("fwd",), atol=1e-6, rtol=1e-6)
