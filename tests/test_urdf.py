"""URDF import against Pinocchio reading the same file.

Real robots from the example-robot-data package (arms, quadrupeds, a
humanoid), fixed and floating base: the mass matrix, inverse dynamics and
forward dynamics equal Pinocchio's (crba, rnea, aba) to 1e-9 relative at
random states.  Pinocchio's free flyer and continuous joints use other
coordinates than jaxmbd (q: quaternion x y z w, continuous joints as
(cos, sin); v: the base's linear velocity in the base frame, where jaxmbd
and MuJoCo use the world frame), so states and forces are converted exactly
rather than compared only in blocks.
"""

import glob
import os
import sysconfig

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd

pin = pytest.importorskip("pinocchio")

RTOL = 1e-9


def robots_dir():
    d = os.path.join(sysconfig.get_paths()["purelib"], "cmeel.prefix", "share", "example-robot-data", "robots")
    if not os.path.isdir(d):
        pytest.skip("example-robot-data is not installed")
    return d


ROBOTS = [  # (file under robots/, floating base)
    ("ur_description/urdf/ur5_robot.urdf", False),
    ("panda_description/urdf/panda.urdf", False),
    ("solo_description/robots/solo12.urdf", True),
    ("anymal_c_simple_description/urdf/anymal.urdf", True),
    ("talos_data/robots/talos_reduced.urdf", True),
    ("romeo_description/urdf/romeo_small.urdf", True),
]


def relerr(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


class PinPair:
    """jaxmbd model + Pinocchio model of one file, with the maps between
    their coordinates (joints matched by name)."""

    def __init__(self, path, floating):
        # the smooth dynamics (Pinocchio has no joint limits)
        self.model = jaxmbd.forces.without(jaxmbd.load_urdf(path, floating_base=floating, warn=False),
                                           jaxmbd.forces.JointLimit)
        self.pm = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
                   else pin.buildModelFromUrdf(path))
        self.pd = self.pm.createData()
        pm, m = self.pm, self.model
        assert pm.nv == m.nv and pm.njoints - 1 == len(m.joint_names)
        assert sorted(pm.names[1:]) == sorted(m.joint_names)
        self.joints = []  # (kind, jaxmbd q adr, jaxmbd v adr, pin q adr, pin v adr, nv)
        for j in range(1, pm.njoints):
            k = m.joint_id(pm.names[j])
            kind = m.topo.jtype[k]
            if kind == "revolute" and pm.nqs[j] == 2:
                kind = "continuous"
            self.joints.append((kind, int(m.joint_qpos_adr[k]), int(m.joint_dof_adr[k]),
                                pm.idx_qs[j], pm.idx_vs[j], pm.nvs[j]))

    def to_pin(self, q, v, a=None):
        """jaxmbd (q, v, a) -> Pinocchio's, and T with v_pin = T v (force map: tau = Tᵀ tau_pin)."""
        qp, vp, T = np.zeros(self.pm.nq), np.zeros(self.pm.nv), np.zeros((self.pm.nv, self.pm.nv))
        ap = None if a is None else np.zeros(self.pm.nv)
        for kind, qa, va, pq, pv, n in self.joints:
            if kind == "free":
                quat = q[qa + 3:qa + 7]
                Rt = np.asarray(jaxmbd.spatial.quat_to_rot(jnp.asarray(quat))).T
                qp[pq:pq + 7] = np.concatenate([q[qa:qa + 3], quat[1:], quat[:1]])
                vw, w = v[va:va + 3], v[va + 3:va + 6]
                vp[pv:pv + 6] = np.concatenate([Rt @ vw, w])
                T[pv:pv + 3, va:va + 3] = Rt
                T[pv + 3:pv + 6, va + 3:va + 6] = np.eye(3)
                if a is not None:  # d/dt (Rᵀ v_world) = Rᵀ a_world - ω × (Rᵀ v_world)
                    ap[pv:pv + 6] = np.concatenate([Rt @ a[va:va + 3] - np.cross(w, Rt @ vw), a[va + 3:va + 6]])
            else:
                if kind == "continuous":
                    qp[pq:pq + 2] = np.cos(q[qa]), np.sin(q[qa])
                else:
                    qp[pq:pq + n] = q[qa:qa + n]
                vp[pv:pv + n] = v[va:va + n]
                T[pv:pv + n, va:va + n] = np.eye(n)
                if a is not None:
                    ap[pv:pv + n] = a[va:va + n]
        return qp, vp, ap, T


def compare_with_pinocchio(P, n=10, seed=0):
    """Worst relative errors (H, inverse dynamics, forward dynamics) over n random states."""
    m = P.model
    rng = np.random.default_rng(seed)
    q = np.asarray(jax.vmap(lambda x: jaxmbd.integrate_q(m, m.q0, x))(jnp.asarray(rng.normal(size=(n, m.nv)))))
    v, a, tau = (rng.normal(size=(n, m.nv)) for _ in range(3))
    # Pinocchio's aba/rnea have no joint damping: hand jaxmbd the damping force back
    f = jax.jit(jax.vmap(lambda q, v, a, tau: (
        jaxmbd.mass_matrix(m, q), jaxmbd.rnea(m, q, v, a),
        jaxmbd.forward_dynamics(m, q, v, tau + m.damping * v))))
    M, tau_id, qdd = (np.asarray(x) for x in f(q, v, a, tau))
    worst = np.zeros(3)
    for k in range(n):
        qp, vp, ap, T = P.to_pin(q[k], v[k], a[k])
        Mp = pin.crba(P.pm, P.pd, qp)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        tau_p = np.linalg.solve(T.T, tau[k])  # the same generalized force in Pinocchio's coordinates
        qdd_p = pin.aba(P.pm, P.pd, qp, vp, tau_p)
        _, _, qdd_as_p, _ = P.to_pin(q[k], v[k], qdd[k])
        worst = np.maximum(worst, [relerr(M[k], T.T @ Mp @ T),
                                   relerr(tau_id[k], T.T @ pin.rnea(P.pm, P.pd, qp, vp, ap)),
                                   relerr(qdd_as_p, qdd_p)])
    return worst


@pytest.mark.parametrize("rel,floating", [r if r == ROBOTS[0] else pytest.param(*r, marks=pytest.mark.long)  # long but UR5
                                          for r in ROBOTS], ids=[os.path.basename(r[0]) for r in ROBOTS])
def test_robot_matches_pinocchio(rel, floating):
    P = PinPair(os.path.join(robots_dir(), rel), floating)
    worst = compare_with_pinocchio(P)
    assert np.all(worst < RTOL), dict(zip(["M", "rnea", "aba"], worst))


def test_joint_names_and_order_follow_the_file():
    path = os.path.join(robots_dir(), "ur_description/urdf/ur5_robot.urdf")
    m = jaxmbd.load_urdf(path, warn=False)
    pm = pin.buildModelFromUrdf(path)
    assert m.joint_names == tuple(pm.names[1:])  # same depth-first document order as Pinocchio
    np.testing.assert_array_equal(m.joint_dof_adr, np.arange(6))
    # welded links stay frames
    assert "tool0" in m.frame_names and "tool0" not in m.body_names


@pytest.mark.long
def test_every_example_robot_loads_or_raises_a_clear_error():
    """All URDFs of example-robot-data: a model with finite dynamics, or one ValueError."""
    paths = sorted(glob.glob(os.path.join(robots_dir(), "*", "*", "*.urdf")))
    assert len(paths) > 30
    loaded = 0
    for p in paths:
        try:
            try:
                m = jaxmbd.load_urdf(p, floating_base=True, warn=False)
            except ValueError as e:  # arms whose root link is 'world' are fixed-base by construction
                if "cannot float" not in str(e):
                    raise
                m = jaxmbd.load_urdf(p, floating_base=False, warn=False)
        except ValueError as e:
            assert os.path.basename(p) in str(e) and "\n" not in str(e)
            continue
        loaded += 1
        adr = np.asarray(m.joint_dof_adr)
        assert adr[0] == 0 and np.all(np.diff(adr) > 0) and adr[-1] < m.nv
    assert loaded >= 0.8 * len(paths)


MINI = """<robot name="r">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>
  </inertial></link>
  <link name="l1"><inertial><origin xyz="0 0 0.1" rpy="0.1 0.2 0.3"/><mass value="1"/>
    <inertia ixx="0.01" iyy="0.02" izz="0.015" ixy="0.001" ixz="0" iyz="0.0005"/></inertial></link>
  <link name="l2"><inertial><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
  </inertial></link>
  {extra_links}
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.2" rpy="0 0.5 0"/>
    <axis xyz="0 1 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="j2" type="{j2type}"><parent link="{j2parent}"/><child link="l2"/><axis xyz="1 0 0"/></joint>
  {extra_joints}
</robot>"""


def _mini(**kw):
    d = dict(extra_links="", extra_joints="", j2type="prismatic", j2parent="l1")
    d.update(kw)
    return MINI.format(**d)


def test_mini_robot_loads_with_the_right_structure():
    info = jaxmbd.load_urdf(_mini(), return_info=True, warn=False)
    m = info.model
    assert m.joint_names == ("j1", "j2") and m.body_names == ("l1", "l2")
    assert info.joint_range == {"j1": (-1.0, 1.0)}
    mf = jaxmbd.load_urdf(_mini(), floating_base=True, warn=False)
    assert mf.joint_names == ("root_joint", "j1", "j2") and mf.nq == 9 and mf.nv == 8


@pytest.mark.parametrize("doc,msg", [
    ("<robot><link", "malformed XML"),
    ("<mujoco/>", "expected <robot>"),
    (_mini(j2parent="nowhere"), "joint 'j2': parent link 'nowhere' is not defined"),
    (_mini(j2type="universal"), "joint 'j2': unknown joint type 'universal'"),
    (_mini(extra_joints='<joint name="j3" type="fixed"><parent link="l2"/><child link="l1"/></joint>'),
     "joint 'j3': link 'l1' already has a parent joint"),
    (_mini(extra_links='<link name="a"/><link name="b"/>',
           extra_joints='<joint name="ja" type="fixed"><parent link="a"/><child link="b"/></joint>'
                        '<joint name="jb" type="fixed"><parent link="b"/><child link="a"/></joint>'),
     "not connected"),
    (_mini().replace('ixx="0.01" iyy="0.02" izz="0.015"', 'ixx="0.01" iyy="0.02" izz="-0.05"'),
     "body 'l1': inertia tensor is not positive semi-definite"),
    (_mini().replace('<mass value="1"/>', '<mass value="-1"/>'), "link 'l1': negative mass"),
    (_mini(j2type="planar"), "planar joint's axis must be 0 0 1"),
    (_mini().replace('<axis xyz="0 1 1"/>', '<axis xyz="0 0 0"/>'), "joint 'j1': axis is zero"),
    (_mini().replace('name="l2"', 'name="l1"', 1), "duplicate link 'l1'"),
])
def test_bad_urdf_raises_one_clear_value_error(doc, msg):
    with pytest.raises(ValueError) as e:
        jaxmbd.load_urdf(doc, warn=False)
    assert msg in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_mimic_and_limits_are_reported():
    doc = _mini(extra_links='<link name="l3"><inertial><mass value="0.1"/>'
                            '<inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link>',
                extra_joints='<joint name="j3" type="continuous"><parent link="l2"/><child link="l3"/>'
                             '<axis xyz="0 0 1"/><mimic joint="j1" multiplier="2"/></joint>')
    with pytest.warns(UserWarning, match="mimic joints, kept as independent DoFs \\(j3\\)"):
        info = jaxmbd.load_urdf(doc, return_info=True)
    assert info.mimic == {"j3": ("j1", 2.0, 0.0)}
    assert info.model.nv == 3


def test_triangle_inequality_violations_are_used_as_given_with_a_warning():
    """CAD-exported URDFs (romeo, ANYmal) break I1 + I2 >= I3; Pinocchio uses them as given, so
    jaxmbd does too, and says so in the loader's one warning."""
    doc = _mini().replace('ixx="0.01" iyy="0.02" izz="0.015"', 'ixx="0.01" iyy="0.02" izz="0.05"')
    with pytest.warns(UserWarning, match=r"triangle-inequality check of inertias \(violated, used as given: body 'l1'"):
        m = jaxmbd.load_urdf(doc)
    assert m.n_bodies >= 1


def test_round_off_inertias_load_and_real_indefinite_ones_do_not():
    """iCub's URDF has a numerically zero inertia (entries ~1e-20, one principal
    moment -1.4e-20): it loads, as in Pinocchio; a genuinely indefinite one
    (principal moment -3.5e-8 of 9e-8, as on TIAGo's antenna) is one clear error."""
    tiny = ('<link name="l3"><inertial><mass value="0.1"/><inertia ixx="0" iyy="0" izz="0" ixy="1.35525e-20" '
            'ixz="0" iyz="0"/></inertial></link>')
    j3 = '<joint name="j3" type="fixed"><parent link="l2"/><child link="l3"/></joint>'
    m = jaxmbd.load_urdf(_mini(extra_links=tiny, extra_joints=j3), warn=False)
    assert m.nv == 2
    bad = tiny.replace('ixx="0" iyy="0" izz="0" ixy="1.35525e-20"', 'ixx="3.5e-8" iyy="3.5e-8" izz="9e-8" ixy="5e-8"')
    with pytest.raises(ValueError, match="l3.*positive semi-definite"):
        jaxmbd.load_urdf(_mini(extra_links=bad, extra_joints=j3), warn=False)
