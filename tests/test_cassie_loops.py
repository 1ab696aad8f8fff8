"""Cassie-class legs from an MJCF file: two legs on a fixed pelvis, each with
hip roll, yaw and pitch, a knee, a knee spring (the shin joint, stiffness
1500), a tarsus, a heel spring (stiffness 1250), a foot crank and a foot, and
two loops closed by <connect>: the achilles rod (a ball joint on the thigh,
connected to the heel spring's tip: a spatial loop) and the plantar rod
(hinged on the foot crank, connected to the foot: a planar loop, whose
3-row connect has a row implied by the other two on the constraint
manifold, though not off it).  The redundant rows are decided where the
loops are closed; MuJoCo is the oracle for the rows and the accelerations."""

import logging

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd.constraints import host_phi_jacobian, row_labels
from jaxmbd.kinematics import host_integrate_q
from jaxmbd import Steps, Save

HARD = 'solref="0.0002 1" solimp="0.9999 0.9999 0.001"'


def _v(*x):
    return " ".join(repr(round(float(a), 12)) for a in x)


def _rod_inertia(m, d, spin=1e-5):
    """fullinertia of a thin rod of mass m along d (|d| its length), a small spin inertia added."""
    L = np.linalg.norm(d)
    u = np.asarray(d) / L
    J = m * L * L / 12 * (np.eye(3) - np.outer(u, u)) + spin * np.eye(3)
    return _v(J[0, 0], J[1, 1], J[2, 2], J[0, 1], J[0, 2], J[1, 2])


def _leg(n, s, foot_axis, sites):
    """One leg (name n, side s = ±1) in its sagittal plane (x forward, z up) below the hip pitch
    joint; returns its <body> and its two <connect>s.  The hip roll frame is tilted (0.06 rad about
    x), so that at qpos0 the plantar loop's plane is not a world plane: its implied row is a
    combination of the three world rows, none of which vanishes."""
    A = np.array([-0.05, 0.03 * s, -0.03])      # achilles rod's ball joint on the thigh (off the plane)
    K = np.array([0.06, 0.0, -0.35])            # knee, on the thigh
    S = K + [0.04, 0, -0.03]                     # knee spring (shin joint), on the knee link
    T = S + [-0.05, 0, -0.42]                    # tarsus, on the shin
    H = T + [-0.03, 0, 0.01]                     # heel spring, on the tarsus
    HT = H + [-0.08, 0, 0.03]                    # the heel spring's tip: the achilles rod's end
    C = T + [0.03, 0, -0.03]                     # foot crank, on the tarsus
    R = C + [0.05, 0, 0.0]                       # plantar rod, on the foot crank
    F = T + [0.07, 0, -0.40]                     # foot, on the tarsus
    FP = F + [0.03, 0, 0.0]                      # the plantar rod's end on the foot
    ra, rp = HT - A, FP - R

    def hinge(name, axis="0 1 0", k=0.0, c=0.5):
        return f'<joint name="{n}_{name}" type="hinge" axis="{axis}" stiffness="{k}" damping="{c}"/>'

    def inert(m, com, J):
        return f'<inertial pos="{_v(*com)}" mass="{m}" diaginertia="{_v(*J)}"/>'
    site_rod = site_foot = ""
    if sites is not None:       # the plantar rod's end and the foot's pin as sites, off by the given offsets
        site_rod = f'<site name="{n}_rod_end" pos="{_v(*(rp + sites[0]))}"/>'
        site_foot = f'<site name="{n}_foot_pin" pos="{_v(*(FP - F + sites[1]))}"/>'
    body = f"""
<body name="{n}_hip_roll" pos="0.02 {0.135 * s} 0" euler="{0.06 * s} 0 0">{hinge("hip_roll", "1 0 0", 200, 5)}
 {inert(1.8, (0, 0, -0.04), (0.0035, 0.0038, 0.0021))}
 <body name="{n}_hip_yaw" pos="0 0 -0.07">{hinge("hip_yaw", "0 0 1", 200, 5)}
  {inert(1.2, (0, 0, -0.035), (0.0024, 0.0028, 0.0008))}
  <body name="{n}_thigh" pos="0 0 -0.09">{hinge("hip_pitch", "0 1 0", 200, 5)}
   {inert(5.5, (0.03, 0, -0.15), (0.03, 0.03, 0.01))}
   <body name="{n}_achilles_rod" pos="{_v(*A)}"><joint name="{n}_achilles_rod" type="ball" damping="0.001"/>
    <inertial pos="{_v(*(ra / 2))}" mass="0.16" fullinertia="{_rod_inertia(0.16, ra)}"/></body>
   <body name="{n}_knee" pos="{_v(*K)}">{hinge("knee", k=200, c=5)}
    {inert(0.75, (0.02, 0, -0.015), (0.0014, 0.0021, 0.001))}
    <body name="{n}_shin" pos="{_v(*(S - K))}">{hinge("knee_spring", k=1500, c=0.5)}
     {inert(0.6, (-0.025, 0, -0.21), (0.0147, 0.0147, 0.0004))}
     <body name="{n}_tarsus" pos="{_v(*(T - S))}">{hinge("tarsus")}
      {inert(0.8, (0.035, 0, -0.2), (0.0136, 0.0137, 0.0004))}
      <body name="{n}_heel_spring" pos="{_v(*(H - T))}">{hinge("heel_spring", k=1250, c=0.5)}
       {inert(0.13, (-0.04, 0, 0.015), (3e-5, 2.2e-4, 2e-4))}</body>
      <body name="{n}_foot_crank" pos="{_v(*(C - T))}">{hinge("foot_crank", k=20, c=0.05)}
       {inert(0.13, (0.025, 0, 0), (2.7e-5, 5e-5, 6.3e-5))}
       <body name="{n}_plantar_rod" pos="{_v(*(R - C))}">{hinge("plantar_rod", c=0.01)}
        <inertial pos="{_v(*(rp / 2))}" mass="0.12" fullinertia="{_rod_inertia(0.12, rp)}"/>{site_rod}</body>
      </body>
      <body name="{n}_foot" pos="{_v(*(F - T))}">{hinge("foot", foot_axis, c=0.05)}
       {inert(0.15, (0.01, 0, -0.01), (1.7e-4, 1.7e-4, 3.3e-4))}{site_foot}</body>
     </body>
    </body>
   </body>
  </body>
 </body>
</body>"""
    if sites is None:
        plantar = f'<connect name="{n}_plantar" body1="{n}_plantar_rod" body2="{n}_foot" anchor="{_v(*rp)}" {HARD}/>'
    else:
        plantar = f'<connect name="{n}_plantar" site1="{n}_rod_end" site2="{n}_foot_pin" {HARD}/>'
    achilles = (f'<connect name="{n}_achilles" body1="{n}_achilles_rod" body2="{n}_heel_spring" '
                f'anchor="{_v(*ra)}" {HARD}/>')
    return body, plantar + achilles


def biped(foot_axis="0 1 0", sites=None):
    """The biped's MJCF.  foot_axis: the foot hinge's axis (tilt it to make the plantar loop
    almost planar); sites: (offset of the rod's end, offset of the foot's pin), to close the plantar
    loops by sites that miss each other at qpos0 (as in a file whose sites are rounded)."""
    legs = [_leg(n, s, foot_axis, sites) for n, s in (("left", 1), ("right", -1))]
    return ('<mujoco model="cassie-class biped"><compiler angle="radian"/><option gravity="0 0 -9.81"/>'
            '<worldbody><body name="pelvis" pos="0 0 1"><inertial pos="0.05 0 0.03" mass="10" '
            f'diaginertia="0.09 0.05 0.09"/>{legs[0][0]}{legs[1][0]}</body></worldbody>'
            f'<equality>{legs[0][1]}{legs[1][1]}</equality></mujoco>')


PLANTAR_Y = (1, 7)      # the world y rows of the two plantar connects (rows 0-2, 6-8; achilles 3-5, 9-11)
IN_PLANE = ((1.4e-6, 0.0, 0.0), (0.0, 0.0, 0.0))      # the rod's end 1.4e-6 m off, along the rod
ACROSS = ((0.0, 1.4e-6, 0.0), (0.0, 0.0, 0.0))        # ... across the loop's plane: no joint closes it
FAR_ACROSS = ((0.0, 1.4e-4, 0.0), (0.0, 0.0, 0.0))    # ... 0.14 mm across: beyond what the build takes up


@pytest.fixture(scope="module")
def mech():
    return jaxmbd.load_mjcf(biped(), warn=False)


def _mujoco(xml, q, v=None):
    """(M, qfrc_passive - qfrc_bias, the equality rows of efc_J and efc_pos, qacc) at (q, v)."""
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    d = mujoco.MjData(m)
    d.qpos[:] = np.asarray(q)
    d.qvel[:] = 0.0 if v is None else np.asarray(v)
    mujoco.mj_forward(m, d)
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    rows = [i for i in range(d.nefc) if d.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
    J = d.efc_J.reshape(d.nefc, m.nv)[rows]
    return M, d.qfrc_passive - d.qfrc_bias, J, d.efc_pos[rows].copy(), d.qacc.copy()


def test_the_rows_implied_on_the_closed_loops_are_dropped(mech):
    """The builder keeps as many rows as MuJoCo's equality Jacobian has rank at
    qpos0 (10 of 12) and drops one row of each plantar connect (its world y
    row, the one with the largest share of the dependency); the rows equal
    MuJoCo's, the kept rows are independent and the dropped ones lie in their
    span.  Off the constraint manifold (q0 moved by a small step that opens the
    loops) all 12 rows are independent: a rank taken there keeps them all."""
    M, _, J, pos, _ = _mujoco(biped(), mech.q0)
    rank = np.linalg.matrix_rank(J)
    assert (J.shape[0], rank) == (12, 10) and np.abs(pos).max() < 1e-15
    assert (mech.nc, mech.n_active, mech.dropped_rows) == (12, rank, PLANTAR_Y)
    assert mech.rows_undecided is None and mech.start_issue is None
    assert [row_labels(mech)[i].split(" ")[0] for i in PLANTAR_Y] == ["left_plantar[1]", "right_plantar[1]"]
    G = np.asarray(jaxmbd.constraint_jacobian(mech, mech.q0))
    np.testing.assert_allclose(G, J, rtol=0, atol=1e-14)
    kept = list(mech.active_rows)
    assert np.linalg.matrix_rank(J[kept]) == rank
    coef = np.linalg.lstsq(J[kept].T, J[list(PLANTAR_Y)].T, rcond=None)[0]
    np.testing.assert_allclose(J[kept].T @ coef, J[list(PLANTAR_Y)].T, rtol=0, atol=1e-12)
    dx = np.random.default_rng(7).uniform(-0.05, 0.05, mech.nv)
    off = host_phi_jacobian(mech, host_integrate_q(mech.tree, np.asarray(mech.tree.q0), dx))
    assert np.linalg.matrix_rank(off) == 12


def _exact_accelerations(M, f, J):
    """The ideal-constraint accelerations at zero velocity: least squares on the full (singular,
    consistent) augmented system [M Jᵀ; J 0] [a; λ] = [f; 0]."""
    nv, nc = M.shape[0], J.shape[0]
    K = np.block([[M, J.T], [J, np.zeros((nc, nc))]])
    return np.linalg.lstsq(K, np.concatenate([f, np.zeros(nc)]), rcond=1e-12)[0][:nv]


def test_accelerations_equal_the_ideal_constraint_solve_from_mujocos_terms(mech):
    """At rest at qpos0 (gravity only) and at a configuration with every spring
    deflected (assembled from a perturbed qpos0): jaxmbd's constrained
    accelerations equal the ideal-constraint solve built from MuJoCo's mass
    matrix, passive and bias forces and equality Jacobian to 1e-8, and MuJoCo's
    own (stiff, soft) constrained accelerations to its softness (1e-3)."""
    rng = np.random.default_rng(1)
    q1, _, info = jaxmbd.assemble(mech, mech.q0 + 0.05 * jnp.asarray(rng.standard_normal(mech.nq)))
    assert float(info["residual"]) < 1e-12
    for q in (mech.q0, jaxmbd.normalize_q(mech.tree, q1)):
        M, f, J, pos, qacc = _mujoco(biped(), q)
        assert np.abs(pos).max() < 1e-12
        want = _exact_accelerations(M, f, J)
        a, lam = jaxmbd.constrained_dynamics(mech, q, jnp.zeros(mech.nv))
        scale = np.abs(want).max()
        assert scale > 1.0                                           # gravity and the springs at work
        np.testing.assert_allclose(a, want, rtol=0, atol=1e-8 * scale)
        np.testing.assert_allclose(qacc, want, rtol=0, atol=1e-3 * scale)
        assert np.all(np.asarray(lam)[list(PLANTAR_Y)] == 0)


def test_sites_that_miss_in_the_plane_are_assembled_with_the_same_rows(mech):
    """The plantar loops closed by sites 1.4e-6 m apart at qpos0 (MuJoCo's soft
    constraints tolerate it): the rank is decided where the loops are closed,
    so the same rows are dropped, and assembly on the independent rows closes
    every row (the dropped ones included) to round-off."""
    m = jaxmbd.load_mjcf(biped(sites=IN_PLANE), warn=False)
    r0 = np.abs(np.asarray(jaxmbd.constraint_residual(m, m.q0))).max()
    assert 1e-6 < r0 < 2e-6
    assert (m.n_active, m.dropped_rows, m.rows_undecided, m.start_issue) == (10, PLANTAR_Y, None, None)
    q, v, info = jaxmbd.assemble(m, m.q0)
    assert float(info["residual"]) < 1e-12 and int(info["status"]) == jaxmbd.linalg.OK
    assert float(jnp.abs(jaxmbd.constraint_residual(m, q)).max()) < 1e-12


def _refused(m, match, caplog):
    """simulate raises while it traces the model: its program is never compiled."""
    caplog.clear()
    with jax.log_compiles(), caplog.at_level(logging.WARNING), pytest.raises(ValueError, match=match):
        jaxmbd.simulate(m, t1=0.1, integrator=I.RK4(), steps=Steps(dt0=0.01))
    assert any("_simulate" in r.getMessage() for r in caplog.records)           # it was traced ...
    assert not any("Compiling jit(_simulate" in r.getMessage() for r in caplog.records)   # ... not compiled


def _dead_point_four_bar():
    """A change-point four-bar (crank 1, coupler 2, rocker 1.5, ground 1.5) built with every link on
    the x axis: a singular configuration, where its two branches cross."""
    b = jaxmbd.ModelBuilder(gravity=(0.0, -9.81, 0.0))
    z = (0.0, 0.0, 1.0)
    for name, parent, pos, L in (("crank", "world", (0, 0, 0), 1.0), ("coupler", "crank", (1.0, 0, 0), 2.0),
                                 ("rocker", "world", (1.5, 0, 0), 1.5)):
        b.add_body(name, parent, "revolute", axis=z, pos=pos, mass=1.0, com=(L / 2, 0, 0),
                   inertia=(1e-3, L * L / 12, L * L / 12))
    b.add_loop("point_planar", "coupler", "rocker", pos_a=(2.0, 0, 0), pos_b=(1.5, 0, 0), name="pin")
    return b.build()


def test_undecidable_rows_and_starts_are_refused_before_compiling(caplog):
    """Refused by simulate when it traces the model (nothing compiled), with the rows named:

    * the foot hinge tilted by 3e-7 rad, so that the plantar loops are almost
      but not exactly planar: their rows are neither dependent nor clearly
      independent (an exact constraint would lock what a soft one lets move);
    * the plantar sites 0.14 mm apart across the loop's plane: the loops
      cannot close, so q0 cannot be assembled (1.4 µm, a file's rounding, is taken
      up by the pins' anchors and named in the warning);
    * a four-bar built at the singular configuration of a change-point
      linkage (rank 1 there, 2 on the branches through it)."""
    tilted = jaxmbd.load_mjcf(biped(foot_axis="0 1 3e-7"), warn=False)
    assert tilted.start_issue is None and "cannot decide the rank" in tilted.rows_undecided
    assert "left_plantar[" in tilted.rows_undecided or "right_plantar[" in tilted.rows_undecided
    assert "achilles" not in tilted.rows_undecided
    _refused(tilted, "cannot decide the rank of the loop constraints", caplog)
    near = jaxmbd.load_mjcf(biped(sites=ACROSS), return_info=True, warn=False)
    assert near.model.start_issue is None and near.model.rows_undecided is None
    assert any("left_plantar (1.4e-06 m)" in u and "right_plantar (1.4e-06 m)" in u for u in near.unsupported)
    across = jaxmbd.load_mjcf(biped(sites=FAR_ACROSS), warn=False)
    assert across.rows_undecided is None and "cannot be assembled" in across.start_issue
    assert "left_plantar[1]" in across.start_issue and "right_plantar[1]" in across.start_issue
    _refused(across, "cannot be assembled from the initial configuration", caplog)
    fb = _dead_point_four_bar()
    assert "singular configuration" in fb.start_issue and "pin[0]" in fb.start_issue
    assert fb.n_active == 2            # the rank on the branches
    _refused(fb, "singular configuration", caplog)


def _run(m, integrator):
    kw = dict(dt0=2e-3) if isinstance(integrator, I.RK4) else dict(rtol=1e-6, atol=1e-6)
    return jaxmbd.simulate(m, t1=1.0, integrator=integrator, steps=Steps(max_steps=20000, **kw),
                           save=Save(ts=jnp.linspace(0.0, 1.0, 11)))


@pytest.mark.long
@pytest.mark.parametrize("integrator", [I.RosenbrockNystrom4(), I.SDIRK4(), I.RK4()], ids=lambda m: type(m).__name__)
def test_one_second_from_qpos0_keeps_every_row_closed(mech, integrator):
    """1 s from qpos0 at rest under gravity (the springs load and the legs sag):
    success, |Φ| (every row, the dropped ones included) <= 1e-10 at the save
    times and at every accepted step.  With RK4 (the cheapest run; the start is
    the same for every integrator) also the biped whose plantar sites miss by
    1.4e-6 m at qpos0, assembled on the independent rows before the first step
    (the same compiled program: the two models differ in traced data only)."""
    models = (mech,) + ((jaxmbd.load_mjcf(biped(sites=IN_PLANE), warn=False),) if isinstance(integrator, I.RK4) else ())
    for m in models:
        sol = _run(m, integrator)
        assert int(sol.status) == 0, jaxmbd.status_name(sol.status)
        assert float(jnp.max(sol.max_residuals)) <= 1e-10
        phi = jax.vmap(lambda q: jaxmbd.constraint_residual(m, q))(sol.qs)
        assert float(jnp.abs(phi).max()) <= 1e-10
        assert float(jnp.abs(sol.qs - sol.qs[:1]).max()) > 1e-3             # it moves
