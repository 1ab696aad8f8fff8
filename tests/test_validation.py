"""Every bad input is rejected at build time with a ValueError naming the culprit."""

import numpy as np
import pytest

import jaxmbd
from jaxmbd import ModelBuilder

GOOD = dict(mass=1.0, inertia=(0.1, 0.2, 0.25))


def one(**kw):
    args = dict(GOOD, axis=(0, 0, 1))
    args.update(kw)
    return args


@pytest.mark.parametrize("kw,msg", [
    (one(mass=0.0), r"'arm'.*massless body \(mass 0\) must have zero inertia"),
    (one(mass=-1.0), r"'arm'.*mass must be positive"),
    (one(inertia=(0.1, 0.1, -0.1)), r"'arm'.*not positive definite"),
    (one(inertia=(0.1, 0.1, 0.5)), r"'arm'.*triangle inequality"),
    (one(inertia=[[0.1, 0.05, 0], [0.0, 0.1, 0], [0, 0, 0.1]]), r"'arm'.*not symmetric"),
    (one(inertia=(0.1, 0.2)), r"'arm'.*inertia must be"),
    (one(axis=(0, 0, 0)), r"'arm'.*joint axis is zero"),
    (one(axis=(0, np.nan, 1)), r"'arm'.*axis.*NaN"),
    (one(pos=(0, np.inf, 0)), r"'arm'.*pos.*NaN or inf"),
    (one(com=(np.nan, 0, 0)), r"'arm'.*com.*NaN"),
    (one(mass=float("nan")), r"'arm'.*mass.*nan"),
    (one(inertia=(0.1, np.nan, 0.1)), r"'arm'.*inertia contains NaN"),
    (one(quat=(0, 0, 0, 0)), r"'arm'.*quat is zero"),
    (one(damping=-1.0), r"'arm'.*damping must be non-negative"),
    (one(joint="hinj"), r"'arm'.*unknown joint type 'hinj'"),
    (one(joint="spherical", stiffness=1.0), r"'arm'.*stiffness"),
    (one(joint="revolute", pitch=0.1), r"'arm'.*pitch"),
    (one(joint="prismatic", anchor=(0.1, 0, 0)), r"'arm'.*anchor"),
    (dict(GOOD, joint="revolute"), r"'arm'.*needs an axis"),
])
def test_bad_body_parameters(kw, msg):
    b = ModelBuilder()
    with pytest.raises(ValueError, match=msg):
        b.add_body("arm", "world", **kw)


def test_duplicate_names():
    b = ModelBuilder().add_body("a", "world", **one())
    with pytest.raises(ValueError, match="duplicate body name 'a'"):
        b.add_body("a", "world", **one())
    with pytest.raises(ValueError, match="'world' is reserved"):
        b.add_body("world", "world", **one())


def test_undefined_parent():
    b = ModelBuilder().add_body("a", "ghost", **one())
    with pytest.raises(ValueError, match="body 'a': parent 'ghost' is not defined"):
        b.build()


def test_cycle():
    b = ModelBuilder().add_body("root", "world", **one())
    b.add_body("a", "b", **one()).add_body("b", "a", **one())
    with pytest.raises(ValueError, match="cycle in the body tree: (a -> b -> a|b -> a -> b)"):
        b.build()
    b2 = ModelBuilder().add_body("self", "self", **one())
    with pytest.raises(ValueError, match="cycle.*self -> self"):
        b2.build()


def test_bad_gravity_and_empty():
    with pytest.raises(ValueError, match="gravity"):
        ModelBuilder(gravity=(0, 0))
    with pytest.raises(ValueError, match="no bodies"):
        ModelBuilder().build()
    b = ModelBuilder().add_body("w", "world", "fixed", **GOOD)
    with pytest.raises(ValueError, match="no moving bodies"):
        b.build()


def test_any_order_is_renumbered_regularly():
    """Children may be added before their parents; build numbers parents first."""
    b = ModelBuilder()
    b.add_body("c", "b", **one()).add_body("b", "a", **one()).add_body("a", "world", **one())
    b.add_body("d", "a", joint="spherical", **GOOD)
    m = b.build()
    assert m.body_names == ("a", "b", "c", "d")
    assert m.topo.parent == (-1, 0, 1, 0)
    assert list(m.dof_parent) == [-1, 0, 1, 0, 3, 4]


def test_wrong_state_shapes():
    m = jaxmbd.models.pendulum()
    with pytest.raises(ValueError, match=r"q has shape \(2,\), expected \(1,\)"):
        jaxmbd.mass_matrix(m, np.zeros(2))
    with pytest.raises(ValueError, match="unknown forward-dynamics method 'lu'"):
        jaxmbd.forward_dynamics(m, np.zeros(1), np.zeros(1), np.zeros(1), method="lu")
    with pytest.raises(KeyError, match="no body or frame named 'nope'"):
        jaxmbd.frame_jacobian(m, np.zeros(1), "nope")


def test_fixed_joints_are_merged():
    """A welded body adds its inertia to its parent: same dynamics as one body
    carrying the combined inertia (checked by the parallel-axis theorem here)."""
    m1, c1, I1 = 1.0, np.array([0.1, 0.0, 0.0]), np.diag([0.01, 0.02, 0.025])
    m2, c2, I2 = 2.0, np.array([0.0, 0.1, 0.0]), np.diag([0.03, 0.02, 0.04])
    off = np.array([0.0, 0.0, -0.5])
    b = ModelBuilder()
    b.add_body("arm", "world", axis=(0, 1, 0), mass=m1, com=c1, inertia=I1)
    b.add_body("tool", "arm", "fixed", pos=off, quat=(np.cos(0.3), np.sin(0.3), 0, 0), mass=m2, com=c2, inertia=I2)
    b.add_body("finger", "tool", "prismatic", axis=(1, 0, 0), mass=0.5, inertia=(1e-3, 1e-3, 1e-3))
    model = b.build()
    assert model.n_bodies == 2 and model.body_names == ("arm", "finger")
    assert model.frame_names == ("arm", "tool", "finger")
    M = m1 + m2
    R = np.array([[1, 0, 0], [0, np.cos(0.6), -np.sin(0.6)], [0, np.sin(0.6), np.cos(0.6)]])
    c2_arm = off + R @ c2
    c = (m1 * c1 + m2 * c2_arm) / M
    np.testing.assert_allclose(model.mass[0], M)
    np.testing.assert_allclose(model.com[0], c, atol=1e-15)

    def shifted(I, m, ci):
        d = ci - c
        return I + m * (d @ d * np.eye(3) - np.outer(d, d))
    np.testing.assert_allclose(model.inertia[0], shifted(I1, m1, c1) + shifted(R @ I2 @ R.T, m2, c2_arm), atol=1e-14)
    # the finger's joint frame is the tool frame
    np.testing.assert_allclose(model.tree_pos[1], off, atol=1e-15)
    R_tool, p_tool = jaxmbd.frame_pose(model, np.zeros(model.nq), "tool")
    np.testing.assert_allclose(p_tool, off, atol=1e-15)
    np.testing.assert_allclose(R_tool, R, atol=1e-15)
