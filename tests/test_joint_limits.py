"""Joint limits: the compliant stop of jaxmbd.forces.JointLimit
with the law of jaxmbd.forces.law, from the builder, MJCF and URDF."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd.forces import JointLimit, law
from jaxmbd import Steps, Save

mujoco = pytest.importorskip("mujoco")


def _arm(push, stiffness, exponent, width, damping=2.0):
    """One hinge (inertia 1 about it, no gravity) pushed by a constant torque into its upper limit 0.5."""
    b = jaxmbd.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_body("arm", "world", "revolute", axis=(0, 0, 1), mass=1.0, com=(0, 0, 0), inertia=(1.0, 1.0, 1.0),
               damping=damping)
    b.add_joint_force("arm", push)
    b.add_joint_limit("arm", -0.5, 0.5, stiffness=stiffness, damping=3.0, exponent=exponent, width=width)
    b.set_initial_state(np.array([0.3]), np.array([2.0]))
    return b.build()


@pytest.mark.parametrize("exponent,width", [(1.0, 1e-3), (1.5, 0.0)])
def test_a_joint_pushed_into_its_limit_settles_at_the_predicted_penetration(exponent, width):
    """k δ^p = τ at rest past the upper bound (δ beyond the onset width): the
    run ends there to 1e-8, having hit the stop at 2 rad/s."""
    push, k = 40.0, 1.0e4
    m = _arm(push, k, exponent, width)
    sol = jaxmbd.simulate(m, t1=20.0, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-10, atol=1e-10),
                          save=Save(ts=jnp.array([0.2, 20.0])))
    assert int(sol.status) == 0, jaxmbd.status_name(sol.status)
    delta = (push / k) ** (1.0 / exponent)
    assert delta > width
    np.testing.assert_allclose(float(sol.qs[-1, 0]) - 0.5, delta, rtol=1e-8)
    assert abs(float(sol.vs[-1, 0])) < 1e-9


def test_the_limit_force_is_the_negative_gradient_of_its_energy_and_never_pulls():
    """The elastic part of the stop is -dU/dq (damping off at q̇ = 0), on both
    sides, inside the onset ramp and past it; with any rate the force pushes
    back into the range or is zero (never pulls)."""
    for p, w in ((1.0, 0.01), (1.5, 0.0), (1.0, 0.0)):
        m = jaxmbd.forces.without(_arm(0.0, 1e3, p, w), jaxmbd.forces.JointForce)
        qs = jnp.array([-0.53, -0.505, -0.2, 0.2, 0.503, 0.52])
        f = jax.vmap(lambda q: jaxmbd.passive_force(m, q[None], jnp.zeros(1))[0])(qs)
        dU = jax.vmap(jax.grad(lambda q: jaxmbd.potential_energy(m, q[None])))(qs)
        np.testing.assert_allclose(f, -dU, rtol=1e-12, atol=1e-12)
        assert float(jnp.abs(f[2:4]).max()) == 0.0                   # inside the range: nothing
        rates = jnp.linspace(-50.0, 50.0, 41)
        fu = jax.vmap(lambda v: jaxmbd.passive_force(m, jnp.array([0.52]), v[None])[0] + 2.0 * v)(rates)
        fl = jax.vmap(lambda v: jaxmbd.passive_force(m, jnp.array([-0.52]), v[None])[0] + 2.0 * v)(rates)
        assert float(fu.max()) <= 0.0 and float(fl.min()) >= 0.0
        assert float(fu.min()) < 0.0 and float(fl.max()) > 0.0


def test_the_restitution_of_the_stop_equals_the_hunt_crossley_value():
    """A hinge thrown at its stop (no damping elsewhere, p = 1, w = 0) leaves
    it at e v_in with e from φ(v_out) = φ(v_in), φ(u) = u - ln(1 + c u)/c,
    to 1e-6 (law.restitution), and never gains energy."""
    b = jaxmbd.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_body("arm", "world", "revolute", axis=(0, 0, 1), mass=1.0, com=(0, 0, 0), inertia=(1.0, 1.0, 2.0))
    b.add_joint_limit("arm", -0.5, 0.5, stiffness=1e4, damping=0.3)
    b.set_initial_state(np.array([0.4]), np.array([1.5]))
    m = b.build()
    sol = jaxmbd.simulate(m, t1=0.5, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-11, atol=1e-11),
                          save=Save(ts=jnp.linspace(0.0, 0.5, 201)))
    assert int(sol.status) == 0
    e = law.restitution(1.5, 0.3)
    assert 0.5 < e < 0.9
    np.testing.assert_allclose(-float(sol.vs[-1, 0]), e * 1.5, rtol=1e-6)
    E = jax.vmap(lambda q, v: jaxmbd.kinetic_energy(m, q, v) + jaxmbd.potential_energy(m, q))(sol.qs, sol.vs)
    assert float(jnp.max(jnp.diff(E))) <= 1e-9 * float(E[0])


LIMITED = """<mujoco><option timestep="0.002"/>
<default><joint limited="true" solreflimit="0.03 0.8"/></default>
<worldbody><body name="a" pos="0 0 1"><joint name="h1" axis="0 1 0" range="-30 45"/>
  <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05"/>
  <body name="b" pos="0 0 -0.5"><joint name="s1" type="slide" axis="1 0 0" range="-0.1 0.2"
      solreflimit="0.001 1" solimplimit="0.8 0.9 0.01"/>
    <geom type="box" size="0.1 0.1 0.1"/>
    <body name="c" pos="0 0 -0.2"><joint name="h2" axis="1 0 0" range="-1 1" limited="false"/>
      <joint name="h3" axis="0 0 1" range="-20 20"/>
      <geom type="sphere" size="0.1"/></body></body></body>
</worldbody></mujoco>"""


def test_mjcf_limits_are_soft_rows_with_mujocos_parameters():
    """Each limited hinge/slide joint gets a soft-constraint row (jaxmbd.forces.soft) with its
    solreflimit (refsafe raises τ = 0.001 to twice the timestep), its solimplimit (MuJoCo's defaults
    for the missing numbers) and MuJoCo's dof_invweight0 as Â; an unlimited joint has none."""
    info = jaxmbd.load_mjcf(LIMITED, return_info=True, warn=False)
    m = info.model
    mj = mujoco.MjModel.from_xml_string(LIMITED)
    lim, = [e for e in m.forces if isinstance(e, JointLimit)]
    assert lim.dofs == (0, 1, 3) and lim.law == "soft"
    np.testing.assert_allclose(lim.invweight, mj.dof_invweight0[[0, 1, 3]], rtol=1e-10)
    np.testing.assert_allclose(lim.solref, mj.jnt_solref[[0, 1, 3]] * [[1, 1], [0, 1], [1, 1]] + [[0, 0], [0.004, 0],
                                                                                                  [0, 0]], rtol=1e-14)
    np.testing.assert_allclose(lim.solimp, mj.jnt_solimp[[0, 1, 3]], rtol=1e-14)
    np.testing.assert_allclose(lim.lower, mj.jnt_range[[0, 1, 3], 0], rtol=1e-14)
    np.testing.assert_allclose(lim.upper, mj.jnt_range[[0, 1, 3], 1], rtol=1e-14)


@pytest.mark.parametrize("path", ["humanoid.xml", "ant.xml", LIMITED])
def test_the_active_limits_are_mujocos(path):
    """At random states the set of joints past a bound (jaxmbd: a positive
    penetration) is the set of MuJoCo's active joint-limit rows."""
    from test_mjcf import gym_asset
    src = path if path.startswith("<") else gym_asset(path)
    m = jaxmbd.load_mjcf(src, warn=False)
    mj = mujoco.MjModel.from_xml_string(src) if path.startswith("<") else mujoco.MjModel.from_xml_path(src)
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    d = mujoco.MjData(mj)
    lim, = [e for e in m.forces if isinstance(e, JointLimit)]
    dof_joint = {int(mj.jnt_dofadr[j]): j for j in range(mj.njnt)}
    rng = np.random.default_rng(1)
    pen = jax.jit(jax.vmap(lambda q: jaxmbd.forces.joint_limit_penetrations(m, q)))
    qs = np.asarray(jax.vmap(lambda x: jaxmbd.integrate_q(m, jnp.asarray(mj.qpos0), x))(
        jnp.asarray(0.6 * rng.normal(size=(20, m.nv)))))
    P = np.asarray(pen(qs))
    seen = 0
    for q, p in zip(qs, P):
        d.qpos[:] = q
        mujoco.mj_forward(mj, d)
        theirs = {int(d.efc_id[i]) for i in range(d.nefc)
                  if d.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT}
        ours = {dof_joint[lim.dofs[r]] for r in range(len(lim.dofs)) if p[r].max() > 0}
        assert ours == theirs
        seen += len(ours)
    assert seen > 10


def test_urdf_limits_become_stops():
    doc = """<robot name="r"><link name="base"/>
    <link name="l1"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
    <link name="l2"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
    <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
      <limit lower="-1" upper="1.2" effort="1" velocity="1"/></joint>
    <joint name="j2" type="continuous"><parent link="l1"/><child link="l2"/><axis xyz="0 0 1"/>
      <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""
    m = jaxmbd.load_urdf(doc, warn=False)
    lim, = [e for e in m.forces if isinstance(e, JointLimit)]
    assert lim.dofs == (0,)                                   # the continuous joint's limit is ignored
    np.testing.assert_allclose([lim.lower[0], lim.upper[0]], [-1.0, 1.2])
    H = np.asarray(jaxmbd.mass_matrix(m, m.q0))
    assert lim.law == "soft"            # MuJoCo's default solreflimit/solimplimit, Â = (H⁻¹)_00 at q0
    np.testing.assert_allclose(lim.invweight[0], np.linalg.inv(H)[0, 0], rtol=1e-12)
    np.testing.assert_allclose(lim.solref[0], [0.02, 1.0], rtol=0)
    np.testing.assert_allclose(lim.solimp[0], [0.9, 0.95, 0.001, 0.5, 2.0], rtol=0)


@pytest.mark.parametrize("kw,msg", [
    (dict(lower=1.0, upper=1.0), "lower .* must be below upper"),
    (dict(stiffness=0.0), "needs stiffness > 0"),
    (dict(damping=-1.0), "needs stiffness > 0"),
    (dict(exponent=0.5), "needs stiffness > 0"),
    (dict(joint="ball"), "limits are for hinge .* not spherical"),
    (dict(joint="nowhere"), "body 'nowhere' is not defined"),
])
def test_bad_limits_are_refused_naming_the_joint(kw, msg):
    b = jaxmbd.ModelBuilder()
    b.add_body("arm", "world", "revolute", axis=(0, 0, 1), mass=1.0, com=(0, 0, 0), inertia=(1, 1, 1))
    b.add_body("ball", "arm", "spherical", mass=1.0, com=(0, 0, 0), inertia=(1, 1, 1))
    args = dict(joint="arm", lower=-1.0, upper=1.0, stiffness=10.0)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        b.add_joint_limit(args.pop("joint"), args.pop("lower"), args.pop("upper"), **args)
        b.build()


@pytest.mark.long
def test_limits_work_under_vmap_and_grad():
    """Batched stiffness (vmap) and the gradient of the settled angle w.r.t. the stiffness
    (-δ/(p k) for the power law) through an adaptive run."""
    m = _arm(40.0, 1e4, 1.5, 0.0, damping=20.0)
    kw = dict(t1=3.0, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-10, atol=1e-10))

    def final(k):
        lim_i = [i for i, e in enumerate(m.forces) if isinstance(e, JointLimit)][0]
        mk = eqx.tree_at(lambda mm: mm.forces[lim_i].stiffness, m, jnp.reshape(k, (1,)))
        return jaxmbd.simulate(mk, **kw).qs[-1, 0]
    ks = jnp.array([1e4, 2e4])
    qs = jax.vmap(final)(ks)
    np.testing.assert_allclose(qs - 0.5, (40.0 / ks) ** (1 / 1.5), rtol=1e-7)
    g = jax.grad(final)(1e4)
    delta = (40.0 / 1e4) ** (1 / 1.5)
    np.testing.assert_allclose(g, -delta / (1.5 * 1e4), rtol=1e-5)
    assert math.isfinite(float(g))
