"""The linear bushing (jaxmbd/forces/bushing.py), the worked example of a
force element added as one file: closed forms on a slider and a hinge, the
generalized force against its potential, dissipation, and exactness of the
branch-sparse iteration matrix when it joins two branches."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import forces, models
from jaxmbd.forces import LinearBushing


def test_closed_forms_on_a_slider_and_a_hinge():
    """A body sliding along x and one turning about z, each held to the world
    by a bushing: the generalized forces are -k_x x - c_x ẋ and
    -k_rz θ - c_rz θ̇ (frame A = the world frame at the rest position)."""
    b = jaxmbd.ModelBuilder(gravity=(0, 0, 0))
    b.add_body("slider", "world", "prismatic", axis=(1, 0, 0), mass=2.0)
    b.add_body("rotor", "world", "revolute", axis=(0, 0, 1), pos=(0, 1, 0), mass=1.0)
    k = np.array([100.0, 200.0, 300.0, 4.0, 5.0, 6.0])
    c = np.array([1.0, 2.0, 3.0, 0.4, 0.5, 0.6])
    b.add_force(LinearBushing("world", "slider", stiffness=k, damping=c))
    b.add_force(LinearBushing("world", "rotor", pos_a=(0, 1, 0), stiffness=k, damping=c))
    m = b.build()
    assert len(m.forces) == 1 and m.forces[0].stiffness.shape == (2, 6)   # merged into one element
    q, v = jnp.array([0.3, 0.7]), jnp.array([-1.5, 2.0])
    f = jaxmbd.passive_force(m, q, v)
    np.testing.assert_allclose(f, [-k[0] * 0.3 - c[0] * -1.5, -k[5] * 0.7 - c[5] * 2.0], rtol=1e-12)
    U = jaxmbd.potential_energy(m, q)
    assert float(U) == pytest.approx(0.5 * k[0] * 0.3 ** 2 + 0.5 * k[5] * 0.7 ** 2, rel=1e-12)


def _two_branches():
    b = models.binary_tree_builder(3)
    b.add_force(LinearBushing("node4", "node7", pos_a=(0.1, 0.0, 0.05), quat_a=(0.9, 0.1, 0.3, 0.2),
                              pos_b=(0.0, 0.1, 0.0), stiffness=(3e3, 2e3, 1e3, 20.0, 30.0, 40.0),
                              damping=(30.0, 20.0, 10.0, 0.2, 0.3, 0.4)))
    return b.build()


def test_conservative_part_is_minus_the_gradient_and_damping_dissipates():
    m = _two_branches()
    rng = np.random.default_rng(4)
    q, v = jnp.asarray(0.5 * rng.normal(size=m.nq)), jnp.asarray(rng.normal(size=m.nv))
    m0 = eqx.tree_at(lambda mm: mm.forces[0].damping, m, m.forces[0].damping * 0)
    gU = jax.grad(lambda x: forces.potential(m0, jaxmbd.integrate_q(m0, q, x)))(jnp.zeros(m.nv))
    f0 = forces.generalized_force(m0, q, v)
    assert float(jnp.abs(gU).max()) > 1.0
    np.testing.assert_allclose(f0, -gU, rtol=1e-10, atol=1e-10 * float(jnp.abs(gU).max()))
    assert float((forces.generalized_force(m, q, v) - f0) @ v) < 0


@pytest.mark.long
def test_the_sparse_iteration_matrix_stays_exact_across_branches():
    from jaxmbd.odes import ChartODE, IterationMatrix, SparseIterationMatrix
    m = _two_branches()
    assert any(set(g) >= {m.body_id("node4"), m.body_id("node7")} for g in forces.couplings(m))
    rng = np.random.default_rng(5)
    q0, v0, r = (jnp.asarray(0.3 * rng.normal(size=m.nq)), jnp.asarray(rng.normal(size=m.nv)),
                 jnp.asarray(rng.normal(size=m.nv)))

    @jax.jit
    def both(q0, v0, r):
        ode = ChartODE(m, q0)
        g0, J1, J2 = ode.g_and_jac(0.0, jnp.zeros_like(v0), v0)
        sp = SparseIterationMatrix.build(ode, 0.0, v0, g0, 0.02)
        return sp.solve_S(r), IterationMatrix.build(J1, J2, 0.02).solve_S(r), sp.exact
    xs, xd, exact = both(q0, v0, r)
    assert bool(exact)
    np.testing.assert_allclose(xs, xd, rtol=1e-12, atol=1e-12 * float(jnp.abs(xd).max()))


def test_validation():
    with pytest.raises(ValueError, match="non-negative"):
        LinearBushing("a", "world", stiffness=-1.0)
    with pytest.raises(ValueError, match="both frames"):
        LinearBushing("a", "a")
    with pytest.raises(ValueError, match="6 numbers"):
        LinearBushing("a", "world", damping=(1.0, 2.0))
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "revolute", axis=(0, 0, 1))
    b.add_body("w", "a", "fixed")
    b.add_force(LinearBushing("a", "w"))
    with pytest.raises(ValueError, match="same body"):
        b.build()
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "revolute", axis=(0, 0, 1))
    b.add_force(LinearBushing("a", "ghost"))
    with pytest.raises(ValueError, match="'ghost' is not defined"):
        b.build()
