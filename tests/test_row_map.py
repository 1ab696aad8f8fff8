"""The soft rows' Jacobian as a map (jaxmbd.forces.soft.RowMap): a contact row is a spatial direction ρ at
its bodies, so J z is ρ · (the bodies' relative twist) and Jᵀ f sums the rows' spatial forces up the
tree, and the forces' derivative rule takes the tangents of ρ and of the DoF axes instead of J's.

- the map's J, J z and Jᵀ f equal the formed matrix's (the rows of contacts, limits and friction loss
  together; elliptic and pyramidal cones);
- the accelerations and their derivatives (jacfwd, jacrev, under vmap, and the integrators' held
  Jacobians) equal those of the same rows given as formed matrices, differentiated by plain forward
  mode through J, to 1e-10: a chain (prismatic, revolute, spherical) with a capsule and a ball on a
  floor, a free box on the floor against the ball (a contact between branches), condim 3 and 6, a
  violated joint limit and friction loss;
- a rule that drops the axes' tangent, or the rows' directions' tangent, fails that comparison."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxmbd
from jaxmbd.forces import soft
from jaxmbd.odes import ChartODE

jax.config.update("jax_enable_x64", True)


@functools.cache
def _scene(cone):
    b = jaxmbd.ModelBuilder()
    b.add_geom("world", "plane", name="floor")
    b.add_body("p", "world", "prismatic", axis=(0, 0, 1), mass=0.5, inertia=(1e-3,) * 3)
    b.add_body("r", "p", "revolute", axis=(0, 1, 0), mass=0.4, com=(0.05, 0, 0), inertia=(1e-3, 2e-3, 2e-3))
    b.add_geom("r", "capsule", (0.03, 0.05), pos=(0.1, 0, 0), quat=(0.7071068, 0, 0.7071068, 0), name="tip",
               condim=3)
    b.add_body("s", "r", "spherical", pos=(0.2, 0, 0), mass=0.3, com=(0.03, 0.01, 0), inertia=(1e-3, 2e-3, 1e-3))
    b.add_geom("s", "sphere", (0.04,), pos=(0.05, 0, 0), name="ball", condim=6)
    b.add_body("box", "world", "free", mass=0.7, inertia=(2e-3, 3e-3, 2e-3))
    b.add_geom("box", "box", (0.05, 0.04, 0.03), name="box", condim=3)
    b.add_joint_limit("r", -0.5, 0.02)
    b.add_friction_loss("p", 0.5)
    b.set_contact_options(rows=24, cone=cone)
    return b.build()


def _states(m, n, seed=0):
    """States near one where the capsule and the ball are in the floor, the box in the floor and
    against the ball, and the revolute joint past its limit; random velocities."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = np.zeros(m.nq)
        q[0], q[1] = 0.026 + 1e-3 * rng.normal(), 0.05 + 0.01 * rng.normal()
        q[2:6] = Rotation.from_rotvec(0.1 * rng.normal(size=3)).as_quat(scalar_first=True)
        q[6:9] = [0.336 + 1e-3 * rng.normal(), 0.0, 0.026]
        q[9:13] = Rotation.from_rotvec(0.05 * rng.normal(size=3)).as_quat(scalar_first=True)
        out.append((jnp.asarray(q), jnp.asarray(0.1 * rng.normal(size=m.nv))))
    return out


def _matrices_only(rows):
    """soft.rows with every RowGeometry dropped: the rows as formed matrices J."""
    def given(*a, **k):
        N, T, extras = rows(*a, **k)
        return N._replace(geo=None), T._replace(geo=None), extras
    return given


def _derivatives(m, which, q, v):
    f = lambda q, v: jaxmbd.forward_dynamics(m, q, v, jnp.zeros(m.nv))  # noqa: E731
    if which == "held":       # the integrators' Jacobians (the rows held, differentiated in q only)
        return ChartODE(m, q).g_and_jac(0.0, jnp.zeros(m.nv), v)
    return (f(q, v), *(jax.jacfwd if which == "jacfwd" else jax.jacrev)(f, (0, 1))(q, v))


def _run(cone, n, which):
    qs, vs = (jnp.stack(x) for x in zip(*_states(_scene(cone), n)))
    return jax.jit(jax.vmap(functools.partial(_derivatives, _scene(cone), which)))(qs, vs)


@functools.cache
def _formed(cone, n, which):
    """:func:`_run` with the rows as formed matrices, differentiated by plain forward mode through J."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(soft, "rows", _matrices_only(soft.rows))
        return _run(cone, n, which)


def _both(cone, n, which, patch=None):
    """(with the row map, with formed matrices) of the accelerations and their derivatives
    (:func:`_derivatives`) at the first n of :func:`_states`, vmapped; ``patch(mp)`` changes the rule
    under test."""
    with pytest.MonkeyPatch.context() as mp:
        if patch is not None:
            patch(mp)
        ours = _run(cone, n, which)
    return ours, _formed(cone, n, which)


def _worst(ours, plain):
    return max(float(jnp.max(jnp.abs(a - b))) / float(jnp.max(jnp.abs(b))) for a, b in zip(ours, plain))


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_the_map_is_the_rows_matrix(cone):
    m = _scene(cone)
    for q, v in _states(m, 2):      # every contact and the limit act (the states of the tests below)
        c = jaxmbd.contact_forces(m, q, v)
        names = [tuple(p) for p in c["pairs"]]
        force = {p: float(jnp.max(jnp.where(c["pair"] == k, c["normal_force"], 0.0))) for k, p in enumerate(names)}
        assert all(force[p] > 0 for p in (("floor", "tip"), ("floor", "ball"), ("floor", "box"), ("ball", "box"))), force
        assert float(q[1]) > 0.02
    kin_axes = jaxmbd.kinematics.kinematics_and_axes(m, q)
    N, T, _ = soft.rows(m, q, v, kin_axes)
    assert N.geo is not None and (cone == "pyramidal" or T.geo is not None)
    op = soft.joined_map(N, T, kin_axes[1])
    J = jnp.concatenate([N.J, T.J])
    assert op.plain is not None and float(jnp.max(jnp.abs(op.plain))) == 1.0   # the limit's and friction loss's
    rng = np.random.default_rng(1)
    z, f = jnp.asarray(rng.normal(size=m.nv)), jnp.asarray(rng.normal(size=J.shape[0]))
    scale = float(jnp.max(jnp.abs(J)))
    np.testing.assert_allclose(op.matrix(), J, rtol=0, atol=1e-14 * scale)
    np.testing.assert_allclose(op.apply(z), J @ z, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(op.apply_T(f), J.T @ f, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(jnp.concatenate([N.vel, T.vel]), J @ v, rtol=0, atol=1e-13 * scale)


@pytest.mark.parametrize("which", ["jacfwd", "jacrev", "held"])
@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_the_derivatives_are_those_of_the_formed_rows(cone, which):
    ours, plain = _both(cone, 2, which)
    assert _worst(ours, plain) < 1e-10


@pytest.mark.parametrize("wrong", ["axes held in J^T f", "directions held in J z"])
def test_a_wrong_rule_fails(wrong):
    sg = jax.lax.stop_gradient

    def patch(mp):
        if wrong == "axes held in J^T f":
            at = soft.RowMap.apply_T
            mp.setattr(soft.RowMap, "apply_T", lambda self, f: at(self._replace(axes=sg(self.axes)), f))
        else:
            at = soft.RowMap.apply
            mp.setattr(soft.RowMap, "apply", lambda self, z: at(
                self if self.rho is None else self._replace(rho=sg(self.rho)), z))
    ours, plain = _both("elliptic", 2, "held", patch)
    assert _worst(ours, plain) > 1e-6
