"""The RNEA's own derivatives (jaxmbd.rnea_partials) as the forward-mode rule of
inverse dynamics, and through it of the ABA: equal to plain forward-mode autodiff of
the passes (no rule) at random states of random trees with every joint type, floating
bases, external forces and a mechanism's spanning tree, by jvp, jacfwd, jacrev (the rule's transpose) and under vmap;
a rule with one term wrong fails the same comparison; a gradient through a Rosenbrock
run whose steps use the rule equals central differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import joints, models, rnea_partials
from jaxmbd.models import mechanisms
from jaxmbd.integrators import RosenbrockNystrom4
from jaxmbd.aba import _aba_passes, aba
from jaxmbd.kinematics import kinematics_and_axes
from jaxmbd.rnea import _rnea_passes, _rnea_world_passes, rnea, rnea_at, world_form

import trees

TOL = 1e-10


def random_state(model, seed):
    """A random (q, v, a) with unit quaternions where the joints have them."""
    rng = np.random.default_rng(seed)
    q = []
    for jt in model.topo.jtype:
        x = rng.uniform(-1.2, 1.2, joints.get(jt).nq)
        for sl in joints.quaternion_slices(jt):
            x[sl] = rng.normal(size=4)
            x[sl] /= np.linalg.norm(x[sl])
        q.append(x)
    return (jnp.asarray(np.concatenate(q)), jnp.asarray(rng.normal(size=model.nv)),
            jnp.asarray(rng.normal(size=model.nv)))


def _trees():
    out = [trees.perturb(trees.base_tree(s), s + 10) for s in trees.TOPOLOGIES]
    out.append(models.random_tree(3, 7, joint_types=("universal", "revolute", "spherical", "helical"),
                                  root_joint="free"))
    out.append(mechanisms.andrews_squeezer().tree)      # a mechanism's spanning tree
    return out


TREES = _trees()


def rel(x, ref):
    return float(jnp.max(jnp.abs(x - ref)) / jnp.maximum(jnp.max(jnp.abs(ref)), 1e-300))


def rule_error(model, q, v, a, fe, partials=rnea_partials.partials):
    """The largest relative difference between the rule built from ``partials`` and plain
    forward mode of the passes, over the q, v, a and f_ext Jacobians."""
    P = partials(model, q, v, a, fe)
    J0 = jax.jacfwd(lambda *x: _rnea_passes(model, *x), argnums=(0, 1, 2, 3))(q, v, a, fe)
    T = jax.vmap(lambda dq: rnea_partials.tangent(model, q, dq), out_axes=1)(jnp.eye(model.nq))
    dfe = jax.vmap(lambda d: P.external(model, d.reshape(fe.shape)), out_axes=1)(jnp.eye(fe.size))
    mine = (P.dq @ T, P.dv, P.H, dfe.reshape(J0[3].shape))
    return max(rel(m, j) for m, j in zip(mine, J0)), rel(P.tau, _rnea_passes(model, q, v, a, fe))


@pytest.mark.parametrize("k", range(len(TREES)))
def test_the_rnea_partials_equal_forward_mode_of_the_passes(k):
    model = TREES[k]
    q, v, a = random_state(model, k)
    fe = jnp.asarray(np.random.default_rng(k + 100).normal(size=(model.n_bodies, 6)))
    err, err_tau = rule_error(model, q, v, a, fe)
    assert err < TOL and err_tau < TOL, (model.topo.jtype, err, err_tau)


@pytest.mark.parametrize("k", range(len(TREES)))
def test_jacfwd_jacrev_and_vmap_of_rnea_and_aba_use_the_rule_and_agree_with_plain_forward_mode(k):
    model = TREES[k]
    q, v, a = random_state(model, k + 20)
    fe = jnp.asarray(np.random.default_rng(k).normal(size=(model.n_bodies, 6)))
    plain = jax.jacfwd(lambda *x: _rnea_passes(model, *x), argnums=(0, 1, 2, 3))(q, v, a, fe)
    for jac in (jax.jacfwd, jax.jacrev):
        ruled = jac(lambda *x: rnea(model, *x), argnums=(0, 1, 2, 3))(q, v, a, fe)
        assert max(rel(r, p) for r, p in zip(ruled, plain)) < TOL
    # the ABA's rule is the RNEA's through the implicit-function theorem
    plain = jax.jacfwd(lambda q, v, t: _aba_passes(model, q, v, t, fe)[0], argnums=(0, 1, 2))(q, v, a)
    for jac in (jax.jacfwd, jax.jacrev):
        ruled = jac(lambda q, v, t: aba(model, q, v, t, fe), argnums=(0, 1, 2))(q, v, a)
        assert max(rel(r, p) for r, p in zip(ruled, plain)) < TOL
    # batched: vmap of jvp over states
    qs, vs, as_ = (jnp.stack(x) for x in zip(*[random_state(model, 50 + i) for i in range(3)]))
    dq = jnp.asarray(np.random.default_rng(7).normal(size=qs.shape))
    tan = jax.vmap(lambda q, v, a, d: jax.jvp(lambda q: rnea(model, q, v, a), (q,), (d,))[1])(qs, vs, as_, dq)
    ref = jax.vmap(lambda q, v, a, d: jax.jvp(lambda q: _rnea_passes(model, q, v, a, None), (q,), (d,))[1])(
        qs, vs, as_, dq)
    assert rel(tan, ref) < TOL


@pytest.mark.parametrize("k", [0, 4])
def test_the_world_coordinate_rnea_takes_the_same_rule(k):
    """rnea_at (the soft stage's and the integrators' inverse dynamics on held kinematics)."""
    model = TREES[k]
    assert world_form(model.topo)
    q, v, a = random_state(model, k + 30)
    ruled = lambda q, v, a: rnea_at(model, q, v, a, kinematics_and_axes(model, q))            # noqa: E731
    plain = lambda q, v, a: _rnea_world_passes(model, q, v, a, kinematics_and_axes(model, q))  # noqa: E731
    ref = jax.jacfwd(plain, argnums=(0, 1, 2))(q, v, a)
    for jac in (jax.jacfwd, jax.jacrev):
        assert max(rel(r, p) for r, p in zip(jac(ruled, argnums=(0, 1, 2))(q, v, a), ref)) < TOL
    grad = jax.grad(lambda m: jnp.sum(rnea_at(m, q, v, a) ** 2))(model)
    gref = jax.grad(lambda m: jnp.sum(_rnea_world_passes(m, q, v, a, kinematics_and_axes(m, q)) ** 2))(model)
    for name in ("mass", "inertia", "tree_pos", "axis"):
        assert rel(getattr(grad, name), getattr(gref, name)) < TOL, name


def test_gradients_in_the_model_parameters_pass_through_the_rule():
    model = TREES[0]
    q, v, tau = random_state(model, 3)
    grad = jax.grad(lambda m: jnp.sum(aba(m, q, v, tau) ** 2))(model)
    ref = jax.grad(lambda m: jnp.sum(_aba_passes(m, q, v, tau, None)[0] ** 2))(model)
    for name in ("mass", "com", "inertia", "axis", "tree_pos", "gravity"):
        assert rel(getattr(grad, name), getattr(ref, name)) < TOL, name


@pytest.mark.parametrize("k", [0, 4])
def test_under_jvp_the_value_is_the_plain_programs_to_the_bit(k):
    """The rules return the passes' own value as the primal (not the partials' τ, equal to round-off):
    an adaptive run differentiated in forward mode must take the very steps of the plain run, or at
    tight tolerances its controller decides otherwise and the derivative is that of another run."""
    model = TREES[k]
    q, v, a = random_state(model, k + 40)
    dq, dv, da = (jnp.ones_like(x) for x in (q, v, a))
    kin_axes = kinematics_and_axes(model, q)
    for f in (lambda q, v, a: rnea(model, q, v, a), lambda q, v, a: aba(model, q, v, a),
              lambda q, v, a: rnea_at(model, q, v, a, kin_axes)):
        assert np.array_equal(jax.jvp(f, (q, v, a), (dq, dv, da))[0], f(q, v, a))


def test_second_derivatives_through_the_rules_equal_plain_forward_mode():
    """The integrators' gradients differentiate the Jacobians once more (jvp and vjp of the rule's
    own computation): jacfwd and jacrev of jacfwd equal plain forward mode twice."""
    model = TREES[4]                       # free base, universal, ball and helical joints
    q, v, a = random_state(model, 50)
    for ruled, plain in ((lambda q, v: rnea(model, q, v, a), lambda q, v: _rnea_passes(model, q, v, a, None)),
                         (lambda q, v: aba(model, q, v, a), lambda q, v: _aba_passes(model, q, v, a, None)[0])):
        ref = jax.jacfwd(jax.jacfwd(plain, argnums=(0, 1)), argnums=(0, 1))(q, v)
        for outer in (jax.jacfwd, jax.jacrev):
            got = outer(jax.jacfwd(ruled, argnums=(0, 1)), argnums=(0, 1))(q, v)
            assert max(rel(got[i][j], ref[i][j]) for i in range(2) for j in range(2)) < TOL


def _drop_joint_terms(model, q, v, a, fe):
    """A wrong rule: the joints' own axis derivatives (D, ∂cJ) left out."""
    orig = rnea_partials._joint_locals

    def without(*args):
        wv, ga, qv, c, groups = orig(*args)
        return 0 * wv, 0 * ga, 0 * qv, c, [(b, vi, 0 * D) for b, vi, D in groups]
    rnea_partials._joint_locals = without
    try:
        return rnea_partials.partials(model, q, v, a, fe)
    finally:
        rnea_partials._joint_locals = orig


def _swap_case(model, q, v, a, fe):
    """A wrong rule: ∂τ/∂q transposed (the two branch cases exchanged)."""
    P = rnea_partials.partials(model, q, v, a, fe)
    return P._replace(dq=P.dq.T)


def _no_gyroscopic(model, q, v, a, fe):
    """A wrong rule: ∂τ/∂v without its velocity-product part (only 2 H-like terms kept)."""
    P = rnea_partials.partials(model, q, v, a, fe)
    return P._replace(dv=0.5 * P.dv)


@pytest.mark.parametrize("wrong", [_drop_joint_terms, _swap_case, _no_gyroscopic])
def test_a_wrong_rule_fails_the_comparison(wrong):
    model = TREES[0]                       # free base, ball, planar and helical joints
    q, v, a = random_state(model, 1)
    fe = jnp.asarray(np.random.default_rng(1).normal(size=(model.n_bodies, 6)))
    assert rule_error(model, q, v, a, fe)[0] < TOL
    assert rule_error(model, q, v, a, fe, wrong)[0] > 1e-4


@pytest.mark.long
def test_a_gradient_through_a_rosenbrock_run_equals_central_differences():
    """A free-floating tree (a ball-jointed and a hinged limb) under gravity, each Rosenbrock step's
    Jacobian from the rule: d(final configuration)/d(initial spin) against central differences."""
    model = models.random_tree(8, 3, joint_types=("spherical", "revolute"), root_joint="free")
    q0, _, _ = random_state(model, 4)
    v0 = 0.3 * random_state(model, 5)[1]

    def loss(s):
        sol = jaxmbd.simulate(model, jaxmbd.Start(q0, v0.at[3].add(s)), 0.3,
                              integrator=RosenbrockNystrom4(), steps=jaxmbd.Steps(rtol=1e-9, atol=1e-9))
        return jnp.sum(sol.qs[-1] * jnp.arange(1, model.nq + 1))

    g = jax.grad(loss)(0.0)
    h = 1e-4
    fd = (loss(h) - loss(-h)) / (2 * h)
    assert abs(g - fd) <= 1e-5 * max(abs(fd), 1.0), (g, fd)
