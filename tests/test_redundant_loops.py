"""Mechanisms with redundant loop constraints: planar loops closed
by 3-row point constraints (a four-bar, a parallel gripper, a Cassie-like
leg).  The redundant rows are found when the mechanism is built; the
dynamics use the independent rows, every row stays satisfied."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I, models
from jaxmbd import Start, Steps, Save

Z, Y = (0.0, 0.0, 1.0), (0.0, 1.0, 0.0)


def _inertia(m, L):
    return (1e-4 * m, m * L * L / 12, m * L * L / 12)


def four_bar_point():
    """models.four_bar's linkage, closed by a 3-row point constraint (rank 2) instead of its planar point."""
    ref = models.four_bar()
    b = jaxmbd.ModelBuilder(gravity=(0.0, -9.81, 0.0))
    for name, parent, pos, L in (("crank", "world", (0, 0, 0), 1.0), ("coupler", "crank", (1.0, 0, 0), 3.0),
                                 ("rocker", "world", (3.0, 0, 0), 2.5)):
        b.add_body(name, parent, "revolute", axis=Z, pos=pos, mass=1.0, com=(L / 2, 0, 0),
                   inertia=(1e-12, 1.0 * L * L / 12, 1.0 * L * L / 12))
    b.add_loop("point", "coupler", "rocker", pos_a=(3.0, 0, 0), pos_b=(2.5, 0, 0), name="pin")
    b.set_initial_state(np.asarray(ref.q0), np.zeros(3))
    return b.build(), ref


def gripper():
    """Two parallelogram fingers (two links each, a plate on the first link's tip pinned to the second's):
    2 DoF, 6 rows of rank 4."""
    b = jaxmbd.ModelBuilder(gravity=(0.0, -9.81, 0.0))
    th = -1.2
    q0 = []
    for side, x0 in (("l", -0.3), ("r", 0.2)):
        b.add_body(f"{side}1", "world", "revolute", axis=Z, pos=(x0, 0, 0), mass=0.2, com=(0.25, 0, 0),
                   inertia=_inertia(0.2, 0.5))
        b.add_body(f"{side}2", "world", "revolute", axis=Z, pos=(x0 + 0.1, 0, 0), mass=0.2, com=(0.25, 0, 0),
                   inertia=_inertia(0.2, 0.5))
        b.add_body(f"{side}plate", f"{side}1", "revolute", axis=Z, pos=(0.5, 0, 0), mass=0.3, com=(0.05, 0, 0),
                   inertia=_inertia(0.3, 0.1))
        b.add_loop("point", f"{side}plate", f"{side}2", pos_a=(0.1, 0, 0), pos_b=(0.5, 0, 0), name=f"{side}pin")
        q0 += [th, th, -th]
        th = -th - math.pi
    b.set_initial_state(np.array([q0[0], q0[1], q0[2], q0[3], q0[4], q0[5]]), np.zeros(6))
    return b.build()


def cassie_leg():
    """A planar leg in the xz-plane, its knee driven through a four-bar as Cassie's is: hip, knee, a
    short crank on the thigh and a push rod from the crank's tip pinned to the shin: 2 DoF, rank 2 of 3."""
    b = jaxmbd.ModelBuilder()
    b.add_body("thigh", "world", "revolute", axis=Y, pos=(0, 0, 1.0), mass=2.0, com=(0, 0, -0.25),
               inertia=(0.04, 0.04, 1e-3))
    b.add_body("shin", "thigh", "revolute", axis=Y, pos=(0, 0, -0.5), mass=1.0, com=(0, 0, -0.25),
               inertia=(0.02, 0.02, 1e-3))
    b.add_body("crank", "thigh", "revolute", axis=Y, pos=(0.08, 0, -0.1), mass=0.1, com=(0.03, 0, 0),
               inertia=(1e-6, 3e-5, 3e-5))
    b.add_body("rod", "crank", "revolute", axis=Y, pos=(0.06, 0, 0), mass=0.1, com=(0, 0, -0.22),
               inertia=(2e-3, 2e-3, 1e-5))
    b.add_loop("point", "rod", "shin", pos_a=(0, 0, -0.45), pos_b=(0.14, 0, -0.05), name="push rod")
    b.set_initial_state(np.array([0.3, -0.5, 0.2, -0.2]), np.zeros(4))
    mech = b.build()
    q, _, info = jaxmbd.assemble(mech, mech.q0)
    assert float(info["residual"]) < 1e-12
    return eqx.tree_at(lambda m: m.q0, mech, q)


@pytest.fixture(scope="module")
def mechs():
    fb, ref = four_bar_point()
    return dict(four_bar=fb, gripper=gripper(), leg=cassie_leg(), ref=ref)


def test_the_redundant_rows_are_found_when_built(mechs):
    fb, gr, leg = mechs["four_bar"], mechs["gripper"], mechs["leg"]
    assert (fb.nc, fb.n_active, fb.dropped_rows) == (3, 2, (2,))          # the z row of the pin
    assert (gr.nc, gr.n_active, gr.dropped_rows) == (6, 4, (2, 5))
    assert (leg.nc, leg.n_active, leg.dropped_rows) == (3, 2, (1,))       # the y row, across the leg's plane
    assert "1 redundant rows" in fb.summary() and fb.summary().endswith("1 DoF")
    assert mechs["ref"].dropped_rows == ()                              # the 2-row form has none


def _augmented_lstsq(mech, q, v, tau):
    """The accelerations from numpy's least squares on the full augmented system (every row)."""
    qt, vt = mech.to_tree(q), mech.to_tree(v)
    H = np.asarray(jaxmbd.mass_matrix(mech.tree, qt))
    c = np.asarray(jaxmbd.bias_force(mech.tree, qt, vt))
    G = np.asarray(jaxmbd.constraint_jacobian(mech, q))
    tc = np.asarray(jaxmbd.constraint_bias(mech, q, v))
    K = np.block([[H, G.T], [G, np.zeros((G.shape[0], G.shape[0]))]])
    sol = np.linalg.lstsq(K, np.concatenate([np.asarray(tau) - c, tc]), rcond=1e-12)[0]
    return sol[:mech.nv], G


@pytest.mark.parametrize("name", [pytest.param("four_bar", marks=pytest.mark.long),
                                  pytest.param("gripper", marks=pytest.mark.long), "leg"])
def test_accelerations_equal_the_full_augmented_solve(mechs, name):
    mech = mechs[name]
    rng = np.random.default_rng(3)
    q, v, _ = jaxmbd.assemble(mech, mech.q0, jnp.asarray(rng.normal(size=mech.nv)))
    tau = jnp.asarray(rng.normal(size=mech.nv))
    want, G = _augmented_lstsq(mech, q, v, tau)
    for method in ("schur", "dense"):
        a, lam = jaxmbd.constrained_dynamics(mech, q, v, tau, method=method)
        np.testing.assert_allclose(a, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
        assert np.all(np.asarray(lam)[list(mech.dropped_rows)] == 0)       # the documented choice
        assert np.all(np.isfinite(np.asarray(lam)))
    if name == "four_bar":   # the 2-row formulation of the same linkage: same motion, same constraint force
        ref = mechs["ref"]
        a2, lam2 = jaxmbd.constrained_dynamics(ref, q, v, tau)
        np.testing.assert_allclose(a, a2, rtol=1e-10, atol=1e-12)
        G2 = np.asarray(jaxmbd.constraint_jacobian(ref, q))
        np.testing.assert_allclose(G.T @ np.asarray(lam), G2.T @ np.asarray(lam2), rtol=1e-9, atol=1e-9)


@pytest.mark.slow
def test_a_one_second_run_keeps_every_row_satisfied(mechs):
    fb, ref = mechs["four_bar"], mechs["ref"]
    kw = dict(t1=1.0, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-8, atol=1e-8),
              save=Save(ts=jnp.linspace(0, 1.0, 11)))
    sol, sol2 = jaxmbd.simulate(fb, **kw), jaxmbd.simulate(ref, **kw)
    assert int(sol.status) == 0 and int(sol2.status) == 0
    assert float(jnp.max(sol.max_residuals)) <= 1e-10
    assert float(jnp.max(sol.residuals)) <= 1e-10
    np.testing.assert_allclose(sol.qs, sol2.qs, rtol=0, atol=1e-6)
    assert float(jnp.ptp(sol.qs[:, 0])) > 0.5                              # it moves


@pytest.mark.slow
def test_a_batch_of_256_grippers_and_gradients(mechs):
    gr = mechs["gripper"]
    B = 256
    rng = np.random.default_rng(0)
    v0 = np.zeros((B, gr.nv))
    v0[:, 0] = rng.uniform(-1, 1, B)     # crank rates; the others follow from Φ_q v = 0 (assembly)
    v0[:, 3] = rng.uniform(-1, 1, B)
    kw = dict(t1=0.2, integrator=I.RK4(), steps=Steps(dt0=0.01))
    r = jaxmbd.rollout(gr, Start(v=jnp.asarray(v0)), **kw)
    assert np.all(np.asarray(r.status) == 0)
    assert float(jnp.max(r.max_residuals)) <= 1e-10

    def final_angle(mass):
        m = eqx.tree_at(lambda m: m.tree.mass, gr, gr.tree.mass.at[2].set(mass))
        return jaxmbd.simulate(m, **kw).qs[-1, 0]
    g = jax.grad(final_angle)(0.3)
    eps = 1e-5
    fd = (final_angle(0.3 + eps) - final_angle(0.3 - eps)) / (2 * eps)
    assert abs(float(fd)) > 1e-6
    np.testing.assert_allclose(g, fd, rtol=1e-6)


T_LOOPS = 0.25       # seconds of motion per run
_REFERENCE = {}


def _reference_end_state(mechs, name):
    """Dopri5 at 1e-11: the reference final state of each mechanism, computed once."""
    if name not in _REFERENCE:
        _REFERENCE[name] = jaxmbd.simulate(mechs[name], t1=T_LOOPS, integrator=I.Dopri5(),
                                           steps=Steps(rtol=1e-11, atol=1e-11)).qs[-1]
    return _REFERENCE[name]


@pytest.mark.slow
@pytest.mark.parametrize("integrator", [I.RosenbrockNystrom4(), I.SDIRK4(), I.Trapezoidal(), I.DescriptorSDIRK4(),
                                        I.DescriptorTrapezoidal(), I.RK4()], ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("name", ["four_bar", "gripper", "leg"])
def test_every_integrator_on_every_redundant_loop(mechs, name, integrator):
    """Each mechanism with each implicit integrator and RK4 (fixed step) for
    T_LOOPS s: success, every row (dropped ones included) at round-off at every
    step, the end state equal to a tight Dopri5 run, zero multipliers on the
    dropped rows."""
    mech = mechs[name]
    kw = dict(steps=Steps(dt0=1e-3)) if isinstance(integrator, I.RK4) else dict(steps=Steps(rtol=1e-7, atol=1e-7))
    sol = jaxmbd.simulate(mech, t1=T_LOOPS, integrator=integrator, save=Save(multipliers=True), **kw)
    assert int(sol.status) == 0, jaxmbd.status_name(sol.status)
    assert float(jnp.max(sol.max_residuals)) <= 1e-10
    want = _reference_end_state(mechs, name)
    assert float(jnp.max(jnp.abs(sol.qs[-1] - mech.q0))) > 0.05               # it moves
    np.testing.assert_allclose(sol.qs[-1], want, atol=1e-4)
    assert np.all(np.asarray(sol.lams)[:, list(mech.dropped_rows)] == 0)


MJCF_FOUR_BAR = """<mujoco><option gravity="0 -9.81 0"/>
<worldbody>
 <body name="crank"><joint name="j1" type="hinge" axis="0 0 1"/>
  <geom type="capsule" fromto="0 0 0 1 0 0" size="0.02" mass="1"/>
  <body name="coupler" pos="1 0 0"><joint name="j2" type="hinge" axis="0 0 1"/>
   <geom type="capsule" fromto="0 0 0 3 0 0" size="0.02" mass="1"/></body></body>
 <body name="rocker" pos="3 0 0"><joint name="j3" type="hinge" axis="0 0 1"/>
  <geom type="capsule" fromto="0 0 0 2.5 0 0" size="0.02" mass="1"/></body>
</worldbody>
<equality><connect body1="coupler" body2="rocker" anchor="3 0 0" solref="0.0002 1" solimp="0.9999 0.9999 0.001"/>
</equality></mujoco>"""


HARD = 'solref="0.0002 1" solimp="0.9999 0.9999 0.001"'


def _link(name, pos, mass, com, inertia, children=""):
    return (f'<body name="{name}" pos="{pos}"><joint name="{name}" type="hinge" axis="{{axis}}"/>'
            f'<inertial pos="{com}" mass="{mass}" diaginertia="{inertia}"/>{children}</body>')


def _fmt(*xs):
    return " ".join(repr(float(x)) for x in xs)


def _gripper_finger(side, x0):
    return (_link(f"{side}1", _fmt(x0, 0, 0), 0.2, "0.25 0 0", _fmt(*_inertia(0.2, 0.5)),
                  _link(f"{side}plate", "0.5 0 0", 0.3, "0.05 0 0", _fmt(*_inertia(0.3, 0.1))))
            + _link(f"{side}2", _fmt(x0 + 0.1, 0, 0), 0.2, "0.25 0 0", _fmt(*_inertia(0.2, 0.5))))


# the gripper and the leg of the builders above, written as MJCF: each loop is closed at
# qpos0 = 0, where MuJoCo (and jaxmbd's loader) place the <connect> anchor on body2
MJCF_GRIPPER = ('<mujoco><option gravity="0 -9.81 0"/><worldbody>'
                + (_gripper_finger("l", -0.3) + _gripper_finger("r", 0.2)).replace("{axis}", "0 0 1")
                + f'</worldbody><equality><connect body1="lplate" body2="l2" anchor="0.1 0 0" {HARD}/>'
                f'<connect body1="rplate" body2="r2" anchor="0.1 0 0" {HARD}/></equality></mujoco>')
MJCF_LEG = ('<mujoco><worldbody>'
            + _link("thigh", "0 0 1", 2.0, "0 0 -0.25", "0.04 0.04 0.001",
                    _link("shin", "0 0 -0.5", 1.0, "0 0 -0.25", "0.02 0.02 0.001")
                    + _link("crank", "0.08 0 -0.1", 0.1, "0.03 0 0", "1e-6 3e-5 3e-5",
                            _link("rod", "0.06 0 0", 0.1, "0 0 -0.22", "0.002 0.002 1e-5"))).replace("{axis}", "0 1 0")
            + f'</worldbody><equality><connect body1="rod" body2="shin" anchor="0 0 -0.45" {HARD}/></equality>'
            '</mujoco>')
# an approximate configuration of each (assembled before comparing); joint order as in the file
_TH = -1.2
MJCF_CASES = {"four_bar": (MJCF_FOUR_BAR, (3, 2), np.asarray(models.four_bar().q0), [1.0, 0.0, 0.0]),
              "gripper": (MJCF_GRIPPER, (6, 4), np.array([_TH, -_TH, _TH, -_TH - math.pi, _TH + math.pi,
                                                           -_TH - math.pi]), [1.0, 0, 0, -0.5, 0, 0]),
              "leg": (MJCF_LEG, (3, 2), np.array([0.3, -0.5, 0.2, -0.2]), [0.7, -1.0, 0.0, 0.0])}


@pytest.mark.parametrize("name", [n if n == "leg" else pytest.param(n, marks=pytest.mark.long)  # long but leg
                                  for n in MJCF_CASES])
def test_mujoco_agrees_on_loops_closed_by_connect(name):
    """The four-bar, the gripper and the leg closed by MJCF's <connect>
    (3 rows each, rank 2): MuJoCo's constrained acceleration (stiff, nearly
    hard equality) equals jaxmbd's to the softness MuJoCo keeps (relative
    1e-3); jaxmbd's equals its own full augmented solve to 1e-10."""
    import mujoco
    xml, (nc, n_active), q_guess, v_guess = MJCF_CASES[name]
    mech = jaxmbd.load_mjcf(xml, warn=False)
    assert (mech.nc, mech.n_active) == (nc, n_active)
    q, v, _ = jaxmbd.assemble(mech, jnp.asarray(q_guess), jnp.asarray(v_guess))
    assert float(jnp.max(jnp.abs(jaxmbd.constraint_residual(mech, q)))) < 1e-12
    a, _ = jaxmbd.constrained_dynamics(mech, q, v)
    want, _ = _augmented_lstsq(mech, q, v, jnp.zeros(mech.nv))
    np.testing.assert_allclose(a, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())
    mj = mujoco.MjModel.from_xml_string(xml)
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:] = np.asarray(q), np.asarray(v)
    mujoco.mj_forward(mj, d)
    assert np.abs(d.efc_pos).max() < 1e-9            # MuJoCo sees the same closed loop
    np.testing.assert_allclose(d.qacc, a, rtol=1e-3, atol=1e-3 * float(jnp.abs(a).max()))
    if name == "leg":    # the builder's leg: the same joints in the same order
        leg = cassie_leg()
        np.testing.assert_allclose(jaxmbd.constrained_dynamics(leg, q, v)[0], a, rtol=1e-10, atol=1e-12)


def test_a_mechanism_with_no_motion_left_is_refused_before_compiling():
    """Time to error: a linkage whose independent constraint rows leave no
    DoF (a four-bar whose crank is also pinned to the world) is refused when
    simulate traces it (an eager check: no program is compiled), with the cause named."""
    b = jaxmbd.ModelBuilder(gravity=(0.0, -9.81, 0.0))
    for name, parent, pos in (("crank", "world", (0, 0, 0)), ("coupler", "crank", (1.0, 0, 0)),
                              ("rocker", "world", (3.0, 0, 0))):
        b.add_body(name, parent, "revolute", axis=Z, pos=pos, mass=1.0, com=(0.5, 0, 0), inertia=(0.1, 0.1, 0.1))
    b.add_loop("point", "coupler", "rocker", pos_a=(3.0, 0, 0), pos_b=(2.5, 0, 0))
    b.add_loop("point", "crank", "world", pos_a=(1.0, 0, 0), pos_b=(math.cos(1.0), math.sin(1.0), 0.0))
    m = b.build()
    assert (m.nc, m.n_active, m.nv) == (6, 3, 3)     # the pinned crank tip adds one independent row
    with pytest.raises(ValueError, match="no degree of freedom is left"):
        jaxmbd.simulate(m, t1=0.1, integrator=I.RK4(), steps=Steps(dt0=0.01))


@pytest.mark.long
def test_the_host_constraint_jacobian_equals_the_traced_one():
    """host_phi_and_jacobian (build time, NumPy: used to find the redundant rows without compiling a
    program per mechanism) against Φ (phi_tree) and jax.jacfwd of it (phi_jacobian_tree), for every
    constraint kind, on a random tree with a floating base, spherical and helical joints, at a random
    configuration."""
    from jaxmbd.constraints import KINDS, host_phi_and_jacobian, host_phi_jacobian, phi_jacobian_tree, phi_tree
    from jaxmbd.kinematics import host_integrate_q, integrate_q, normalize_q
    from jaxmbd.models import random_tree_builder
    n = 16
    b = random_tree_builder(5, n, joint_types=("revolute", "prismatic", "spherical", "helical"), root_joint="free")
    names = [f"b{i}" for i in range(n)]
    rng = np.random.default_rng(3)
    for i, kind in enumerate(sorted(KINDS)):
        a, c = names[2 * i + 1], ("world" if i % 3 == 0 else names[2 * i + 2])
        kw = dict(pos_a=tuple(rng.uniform(-0.3, 0.3, 3)), pos_b=tuple(rng.uniform(-0.3, 0.3, 3)))
        if kind == "distance":
            kw["distance"] = 0.7
        if kind in ("revolute", "prismatic", "point_on_line"):
            kw["axis"] = tuple(rng.normal(size=3))
        if kind in ("weld", "prismatic"):
            quat = np.r_[1.0, rng.uniform(-0.2, 0.2, 3)]
            kw["quat_b"] = tuple(quat / np.linalg.norm(quat))
        b.add_loop(kind, a, c, **kw)
    mech = b.build()
    tree = mech.tree
    q = normalize_q(tree, tree.q0 + 0.5 * jax.random.normal(jax.random.PRNGKey(2), (tree.nq,)))
    G = np.asarray(phi_jacobian_tree(mech, q))
    assert G.shape[0] == mech.nc and len({k for k, *_ in mech.loops}) == len(KINDS)
    np.testing.assert_allclose(host_phi_jacobian(mech, q), G, rtol=0, atol=1e-12 * np.abs(G).max())
    np.testing.assert_allclose(host_phi_and_jacobian(mech, q)[0], phi_tree(mech, q), rtol=0, atol=1e-14)
    dx = np.random.default_rng(4).normal(size=tree.nv)
    np.testing.assert_allclose(host_integrate_q(tree, q, dx), integrate_q(tree, q, dx), rtol=0, atol=1e-14)
