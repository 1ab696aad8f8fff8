"""The force-element interface: add_force takes elements only; elements of
one class are merged into one vectorized element; each declares the DoFs it
couples."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import forces, models


def test_add_force_takes_elements_only():
    b = jaxmbd.ModelBuilder()
    with pytest.raises(TypeError, match="jaxmbd.forces element"):
        b.add_force(lambda q, v: 0.0)


def test_elements_of_one_class_are_merged_and_declare_their_couplings():
    b = models.binary_tree_builder(3)
    b.add_spring("node4", (0.1, 0, 0), "node5", (0.1, 0, 0), stiffness=10.0)
    b.add_joint_force("node2", 0.5)
    b.add_spring("node6", (0, 0.1, 0), "world", (1.0, 0, 0), stiffness=20.0, damping=1.0)
    b.add_coordinate_spring("node3", other="node2", stiffness=3.0)
    m = b.build()
    kinds = [type(e).__name__ for e in m.forces]
    assert kinds == ["PointSpringDamper", "JointForce", "CoordinateSpringDamper"]
    springs = m.forces[0]
    assert springs.bodies == ((m.body_id("node4"), m.body_id("node5")), (m.body_id("node6"), -1))
    np.testing.assert_array_equal(springs.stiffness, [10.0, 20.0])
    ids = {n: m.body_id(n) for n in ("node1", "node2", "node3", "node4", "node5", "node6")}
    groups = forces.couplings(m)
    assert set(groups[0]) == {ids["node1"], ids["node2"], ids["node4"], ids["node5"]}   # both leaves' paths
    assert set(groups[1]) == {ids["node1"], ids["node3"], ids["node6"]}
    assert groups[2] == (ids["node2"], ids["node3"])
    L = forces.spring_lengths(m, jaxmbd.neutral_q(m))
    assert L.shape == (2,) and float(jnp.min(L)) > 0


def test_an_element_missing_a_method_of_its_kind_is_refused_and_soft_rows_are_a_class():
    """The interface's methods are abstract: a JointElement without ``force`` (or any element without
    ``couplings``) cannot be created, not even by the binding path; the soft-constraint rows are a
    capability class whose ``has_soft`` follows the instance's law."""
    from jaxmbd.forces.base import JointElement, SoftRows, make, soft_elements

    class NoForce(JointElement):
        def bind(self, ctx):
            return self

        def couplings(self, topo):
            return ()

    class NoCouplings(JointElement):
        def bind(self, ctx):
            return self

        def force(self, model, q, v):
            return jnp.zeros(model.nv)
    for cls, missing in ((NoForce, "force"), (NoCouplings, "couplings")):
        with pytest.raises(TypeError, match=missing):
            cls()
        with pytest.raises(TypeError, match=missing):
            make(cls)

    def built(**kw):
        b = jaxmbd.ModelBuilder()
        b.add_body("link", "world", "revolute", axis=(0, 1, 0), mass=1.0, com=(0, 0, -0.5),
                   inertia=(0.01, 0.01, 0.01))
        return b.add_joint_limit("link", -0.5, 0.5, **kw).build()
    soft, penalty = built(), built(stiffness=1e3)
    (lim_soft,), (lim_pen,) = forces.elements(soft), forces.elements(penalty)
    assert isinstance(lim_soft, SoftRows) and isinstance(lim_pen, SoftRows)
    assert soft_elements(soft) == (lim_soft,) and soft_elements(penalty) == ()
    assert forces.soft.has_rows(soft) and not forces.soft.has_rows(penalty)
