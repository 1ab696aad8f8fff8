"""MJCF import against MuJoCo compiling the same file.

Real models (the gymnasium package's MuJoCo assets) and a feature-dense
document: the mass matrix, bias force, passive force and forward dynamics
equal MuJoCo's to 1e-9 relative at 20 random states each, with MuJoCo's
contacts, constraints (limits, frictionloss, equality), actuators, fluid
forces and tendon springs switched off (jaxmbd does not model them; the
loader says so in its warning).  qpos/qvel are passed unchanged.
"""

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd

mujoco = pytest.importorskip("mujoco")

RTOL = 1e-9
N_STATES = 20


def gym_asset(name):
    gym = pytest.importorskip("gymnasium")
    path = os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets", name)
    if not os.path.exists(path):
        pytest.skip(f"gymnasium has no {name}")
    return path


GYM = ["ant", "half_cheetah", "hopper", "humanoid", "humanoidstandup", "inverted_double_pendulum",
       "inverted_pendulum", "point", "pusher", "reacher", "swimmer", "walker2d"]


def smooth_only(mj):
    """MuJoCo without what jaxmbd does not model: contacts, constraints,
    actuators, fluid forces and tendon springs/dampers."""
    D = mujoco.mjtDisableBit
    mj.opt.disableflags |= D.mjDSBL_CONTACT | D.mjDSBL_CONSTRAINT | D.mjDSBL_ACTUATION
    mj.opt.density, mj.opt.viscosity = 0.0, 0.0
    mj.opt.wind[:] = 0.0
    mj.tendon_stiffness[:] = 0.0
    mj.tendon_damping[:] = 0.0
    return mj


def relerr(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


@jax.jit
def _jaxmbd_terms(model, q, v, tau):
    one = lambda q, v, tau: (jaxmbd.mass_matrix(model, q), jaxmbd.bias_force(model, q, v),  # noqa: E731
                             jaxmbd.passive_force(model, q, v), jaxmbd.forward_dynamics(model, q, v, tau))
    return jax.vmap(one)(q, v, tau)


def compare_with_mujoco(model, mj, seed=0, n=N_STATES):
    """Worst relative errors (M, bias, passive, qacc) over n random states, of the
    smooth dynamics (joint limits and contacts are constraints in MuJoCo: not in its
    qfrc_passive)."""
    model = jaxmbd.forces.without(model, jaxmbd.forces.JointLimit, jaxmbd.forces.Contact)
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(seed)
    q0 = jnp.asarray(mj.qpos0)
    dq = 0.5 * rng.normal(size=(n, model.nv))
    q = np.asarray(jax.vmap(lambda x: jaxmbd.integrate_q(model, q0, x))(jnp.asarray(dq)))
    v = rng.normal(size=(n, model.nv))
    tau = rng.normal(size=(n, model.nv))
    M, bias, passive, qacc = (np.asarray(x) for x in _jaxmbd_terms(model, q, v, tau))
    worst = np.zeros(4)
    for k in range(n):
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q[k], v[k], tau[k]
        mujoco.mj_forward(mj, d)
        Mm = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, d, Mm)
        errs = [relerr(M[k], Mm), relerr(bias[k], d.qfrc_bias - d.qfrc_passive),
                relerr(passive[k], d.qfrc_passive) if np.abs(d.qfrc_passive).max() > 0
                else np.abs(passive[k]).max(), relerr(qacc[k], d.qacc)]
        worst = np.maximum(worst, errs)
    return worst


def check_layout(model, mj):
    """Same joints, names, addresses, DoF tree and reference configuration."""
    assert (model.nq, model.nv) == (mj.nq, mj.nv)
    np.testing.assert_array_equal(model.dof_parent, mj.dof_parentid)
    np.testing.assert_array_equal(model.joint_qpos_adr, mj.jnt_qposadr)
    np.testing.assert_array_equal(model.joint_dof_adr, mj.jnt_dofadr)
    for j in range(mj.njnt):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j)
        if name:
            assert model.joint_names[j] == name
    np.testing.assert_allclose(model.q0, mj.qpos0, atol=1e-12)


@pytest.mark.parametrize("name", [n if n == "humanoidstandup" else pytest.param(n, marks=pytest.mark.long)  # long but one
                                  for n in GYM])
def test_gymnasium_model_matches_mujoco(name):
    path = gym_asset(name + ".xml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = jaxmbd.load_mjcf(path)
        mj = smooth_only(mujoco.MjModel.from_xml_path(path))
    check_layout(model, mj)
    np.testing.assert_allclose(model.gravity, mj.opt.gravity, rtol=0, atol=0)
    worst = compare_with_mujoco(model, mj)
    assert np.all(worst < RTOL), dict(zip(["M", "bias", "passive", "qacc"], worst))


FEATURES = """
<mujoco model="features">
  <compiler angle="degree" eulerseq="zYx" autolimits="true" boundmass="0.05"/>
  <option gravity="0.3 -0.2 -9.7"/>
  <default>
    <joint damping="0.3" armature="0.02"/>
    <geom density="700"/>
    <default class="limb">
      <joint axis="0 1 0" stiffness="2" springref="10" range="-40 40"/>
      <geom type="capsule" size="0.04"/>
    </default>
    <default class="heavy">
      <geom density="2500"/>
    </default>
  </default>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body name="base" pos="0.1 0.2 1.0" euler="10 20 30">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.1 0.05" euler="5 -7 12"/>
      <geom type="ellipsoid" size="0.05 0.08 0.03" pos="0.1 0 0.1" class="heavy"/>
      <body name="arm" pos="0.2 0 0" axisangle="1 1 0 30" childclass="limb">
        <joint name="shoulder_z" axis="0 0 1" pos="0.01 0.02 0" ref="15"/>
        <joint name="shoulder_y" pos="0.01 0.02 0"/>
        <joint name="shoulder_slide" type="slide" axis="1 0.5 0" ref="0.05" springref="0.01" stiffness="5"/>
        <geom fromto="0 0 0 0.3 0.05 -0.1"/>
        <body name="forearm" pos="0.3 0.05 -0.1" xyaxes="0 1 0 -1 0 0.2">
          <joint name="elbow" axis="1 0 0"/>
          <geom type="cylinder" fromto="0 0 0 0.25 0 0" size="0.03" mass="0.4"/>
          <body name="hand" zaxis="0.2 0.3 1" pos="0.25 0 0">
            <joint name="wrist" type="ball" pos="0 0 0.01" damping="0.1" stiffness="0" range="0 40"/>
            <inertial pos="0.02 0.01 0.03" mass="0.3" fullinertia="0.002 0.003 0.0025 0.0001 -0.0002 0.00015"/>
            <geom type="sphere" size="0.05"/>
          </body>
        </body>
      </body>
      <frame pos="0 0.3 0" euler="0 0 90">
        <body name="leg" pos="0 0 -0.1" quat="0.9 0.1 -0.2 0.3">
          <joint name="hip" type="hinge" axis="0 1 0" ref="-20" stiffness="3"/>
          <inertial pos="0 0 -0.15" quat="0.8 0.2 0.1 0.1" mass="1.2" diaginertia="0.01 0.012 0.004"/>
          <body name="foot" pos="0 0 -0.3">
            <geom type="box" fromto="0 0 0 0.1 0 -0.02" size="0.03"/>
            <geom type="sphere" size="0.02" group="4"/>
            <geom type="sphere" size="0.5" group="7"/>
          </body>
        </body>
      </frame>
    </body>
    <body name="pendulum" pos="1 0 1">
      <joint name="swing" axis="1 0 0" pos="0 0 0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.02"/>
      <body name="bob" pos="0 0 -0.4">
        <joint name="bob_slide" type="slide" axis="0 0 1"/>
        <geom type="sphere" size="0.03"/>
      </body>
    </body>
  </worldbody>
  <equality>
    <connect body1="hand" body2="pendulum" anchor="0 0 0"/>
  </equality>
</mujoco>
"""


def test_feature_document_matches_mujoco():
    """Orientation forms, euler sequences, default classes and childclass,
    frames, several joints in one body, joint ref/springref/stiffness, geom
    inertia (box, ellipsoid, capsule, cylinder, sphere, fromto, density, mass,
    group range), explicit inertials, boundmass, gravity."""
    info = jaxmbd.load_mjcf(FEATURES, return_info=True, warn=False)
    assert isinstance(info.model, jaxmbd.Mechanism) and info.model.nc == 3   # the <connect>
    model = info.model.tree   # the tree's dynamics against MuJoCo's with constraints disabled
    mj = smooth_only(mujoco.MjModel.from_xml_string(FEATURES))
    check_layout(model, mj)
    assert model.joint_names[:4] == ("root", "shoulder_z", "shoulder_y", "shoulder_slide")
    assert [e["type"] for e in info.equality] == ["connect"]
    assert info.joint_range["shoulder_z"] == pytest.approx((np.radians(-40), np.radians(40)))
    worst = compare_with_mujoco(model, mj, seed=1)
    assert np.all(worst < RTOL), worst
    # body poses (the frames of the MJCF bodies) equal MuJoCo's
    d = mujoco.MjData(mj)
    q = np.asarray(jaxmbd.normalize_q(model, jnp.asarray(mj.qpos0) + 0.3))
    d.qpos[:] = q
    mujoco.mj_kinematics(mj, d)
    for b in range(1, mj.nbody):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, b)
        R, p = jaxmbd.frame_pose(model, q, name)
        np.testing.assert_allclose(p, d.xpos[b], atol=1e-12)
        np.testing.assert_allclose(R, d.xmat[b].reshape(3, 3), atol=1e-12)


def test_radian_and_inertia_modes_match_mujoco():
    doc = """<mujoco><compiler angle="radian" inertiafromgeom="{mode}" settotalmass="{tm}"/>
      <worldbody><body name="a" euler="0.1 0.2 0.3"><joint name="j" axis="1 1 0" ref="0.4"/>
        <inertial pos="0 0 -0.1" mass="2" diaginertia="0.1 0.2 0.25"/>
        <geom type="capsule" fromto="0 0 0 0 0.1 -0.3" size="0.05"/>
        <body name="b" pos="0 0 -0.3"><joint name="k" type="ball"/>
          <geom type="ellipsoid" size="0.1 0.05 0.07" quat="1 0.2 0.3 0.1"/></body>
      </body></worldbody></mujoco>"""
    for mode, tm in (("auto", -1), ("true", -1), ("true", 7.5), ("auto", 3.0)):
        xml = doc.format(mode=mode, tm=tm)
        model = jaxmbd.load_mjcf(xml, warn=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mj = smooth_only(mujoco.MjModel.from_xml_string(xml))
        check_layout(model, mj)
        assert np.sum(np.asarray(model.mass)) == pytest.approx(mj.body_mass.sum(), rel=1e-12)
        worst = compare_with_mujoco(model, mj, n=5)
        assert np.all(worst < RTOL), (mode, tm, worst)


def test_warning_lists_what_is_not_modelled_once():
    path = gym_asset("humanoid.xml")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        jaxmbd.load_mjcf(path)
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    assert msgs == []     # its fixed tendons, motors, limits and contacts are all modelled
    text = open(path).read().replace("</tendon>", '<spatial name="sp" limited="true" range="0 1"><site site="s0"/><site site="s1"/></spatial>'
                                     '</tendon><equality><tendon name="tie" tendon1="sp"/></equality>'
                                     "<sensor><magnetometer name=\"feel\" site=\"s0\"/></sensor>")
    text = text.replace('<body name="torso" pos="0 0 1.4">',
                        '<body name="torso" pos="0 0 1.4"><site name="s0"/><site name="s1" pos="0 0 0.1"/>')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        jaxmbd.load_mjcf(text)
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    assert len(msgs) == 1
    assert "tendon equality constraints on spatial tendons (1: tie)" in msgs[0] and "feel" in msgs[0]
    for what in ("actuator", "limit", "contact"):      # modelled: Actuators, JointLimit, Contact
        assert what not in msgs[0], what
    info = jaxmbd.load_mjcf(FEATURES, return_info=True, warn=False)
    assert not any("equality" in u for u in info.unsupported)   # connect is modelled (a loop constraint)


def test_several_joints_in_one_body_become_a_massless_chain():
    model = jaxmbd.load_mjcf(FEATURES, warn=False).tree
    names = model.body_names
    assert names[1:4] == ("arm/shoulder_z", "arm/shoulder_y", "arm")
    m = np.asarray(model.mass)
    assert m[1] == 0 and m[2] == 0 and m[3] > 0
    assert model.frame_id("arm") >= 0


BAD = [
    ("<mujoco><worldbody><body", "malformed XML"),
    ("<robot/>", "expected <mujoco>"),
    ("<mujoco><worldbody><body name='a'><joint type='universal'/><geom size='.1'/></body></worldbody></mujoco>",
     "joint 'a' (in body 'a'): unknown joint type 'universal'"),
    ("<mujoco><worldbody><body name='a'><joint/><wheel/></body></worldbody></mujoco>", "unknown element <wheel>"),
    ("<mujoco><worldbody><body name='a'><joint/><inertial pos='0 0 0' mass='1' diaginertia='1 1 3'/>"
     "</body></worldbody></mujoco>", "triangle inequality"),
    ("<mujoco><worldbody><body name='a'><joint/><inertial pos='0 0 0' mass='-1' diaginertia='1 1 1'/>"
     "</body></worldbody></mujoco>", "body 'a': mass"),
    ("<mujoco><worldbody><body name='a'><joint/><geom size='.1'/><body name='b'><freejoint/><geom size='.1'/>"
     "</body></body></worldbody></mujoco>", "body 'b': a free joint is only allowed"),
    ("<mujoco><worldbody><body name='a' pos='1 2'><joint/><geom size='.1'/></body></worldbody></mujoco>",
     "body 'a': pos: expected 3 numbers"),
    ("<mujoco><worldbody><body name='a'><joint axis='0 0 0'/><geom size='.1'/></body></worldbody></mujoco>",
     "axis is zero"),
    ("<mujoco><worldbody><body name='a'><joint/><geom type='mesh' mesh='m'/></body></worldbody></mujoco>",
     "no mesh asset named 'm'"),
    ("<mujoco><worldbody><body name='a'><joint/></body></worldbody></mujoco>", "massless moving body"),
    ("<mujoco><worldbody><body name='a' childclass='nope'><joint/><geom size='.1'/></body></worldbody></mujoco>",
     "unknown childclass 'nope'"),
    ("<mujoco><worldbody><body name='a'><joint/><geom size='.1'/></body><body name='a'/></worldbody></mujoco>",
     "duplicate body name 'a'"),
    ("<mujoco><worldbody><body name='a'><joint type='ball' stiffness='1'/><geom size='.1'/></body></worldbody>"
     "</mujoco>", "stiffness is supported for joints with scalar coordinates"),
    ("<mujoco><worldbody><body name='a' quat='0 0 0 0'><joint/><geom size='.1'/></body></worldbody></mujoco>",
     "quat is zero"),
    ("<mujoco><worldbody/></mujoco>", "no bodies"),
]


@pytest.mark.parametrize("xml,msg", BAD, ids=[m for _, m in BAD])
def test_bad_documents_raise_one_clear_value_error(xml, msg):
    with pytest.raises(ValueError, match=None) as e:
        jaxmbd.load_mjcf(xml, warn=False)
    assert msg in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_missing_file_and_include(tmp_path):
    with pytest.raises(ValueError, match="cannot read MJCF file"):
        jaxmbd.load_mjcf(str(tmp_path / "nope.xml"))
    (tmp_path / "part.xml").write_text("<mujoco><body name='b'><joint/><geom size='.1'/></body></mujoco>")
    (tmp_path / "main.xml").write_text("<mujoco><worldbody><include file='part.xml'/></worldbody></mujoco>")
    model = jaxmbd.load_mjcf(str(tmp_path / "main.xml"))
    assert model.body_names == ("b",)


WELD_DOC = """<mujoco><worldbody>
 <body name="a" pos="0 0 1"><joint name="ja" type="ball"/><geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
  <body name="b" pos="0.4 0 0"><joint name="jb" axis="0 1 0"/><geom type="box" size="0.1 0.05 0.02" pos="0.1 0 0"/>
  </body></body>
 <body name="c" pos="0.5 0.1 1.1" euler="10 20 30"><freejoint/><geom type="sphere" size="0.05"/></body>
</worldbody><equality>{eq}</equality></mujoco>"""


@pytest.mark.parametrize("doc,nc", [
    (FEATURES, 3),
    pytest.param(WELD_DOC.format(eq='<weld body1="b" body2="c"/>'), 6, marks=pytest.mark.long),
    pytest.param(WELD_DOC.format(eq='<weld body1="c" body2="b" relpose="0.1 0.2 0.3 0.9 0.1 0.2 0.3"/>'
                                    '<connect body1="a" anchor="0 0 0" active="false"/>'), 6, marks=pytest.mark.long)])
def test_equality_constraints_become_loops_like_mujocos(doc, nc):
    """<connect>/<weld> -> loop constraints: residual and Jacobian rows equal MuJoCo's
    efc rows for connect; for weld (different row scaling) the same constraint
    manifold: MuJoCo's equality residual vanishes where jaxmbd assembled the
    mechanism, and MuJoCo's rows vanish on jaxmbd's tangent space."""
    info = jaxmbd.load_mjcf(doc, return_info=True, warn=False)
    m = info.model
    assert isinstance(m, jaxmbd.Mechanism) and m.nc == nc
    assert any("inactive" in u for u in info.unsupported) == ("active" in doc)
    mj = mujoco.MjModel.from_xml_string(doc)
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(4)
    q = jaxmbd.normalize_q(m.tree, jnp.asarray(mj.qpos0) + 0.3 * rng.standard_normal(mj.nq))
    if nc == 3:
        assert np.abs(np.asarray(jaxmbd.constraint_residual(m, m.q0))).max() < 1e-15
        d.qpos[:] = np.asarray(q)
        mujoco.mj_forward(mj, d)
        rows = [i for i in range(d.nefc) if d.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
        np.testing.assert_allclose(jaxmbd.constraint_residual(m, q), d.efc_pos[rows], atol=1e-14)
        np.testing.assert_allclose(jaxmbd.constraint_jacobian(m, q), d.efc_J.reshape(d.nefc, mj.nv)[rows],
                                   atol=1e-14)
        return
    qa, va, info_a = jaxmbd.assemble(m, q, jnp.asarray(rng.standard_normal(mj.nv)))
    assert float(info_a["residual"]) < 1e-13
    d.qpos[:] = np.asarray(qa)
    mujoco.mj_forward(mj, d)
    rows = [i for i in range(d.nefc) if d.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
    assert len(rows) == 6
    np.testing.assert_allclose(d.efc_pos[rows], 0, atol=1e-12)
    G = np.asarray(jaxmbd.constraint_jacobian(m, qa))
    N = np.linalg.svd(G)[2][np.linalg.matrix_rank(G):]
    J = d.efc_J.reshape(d.nefc, mj.nv)[rows]
    assert np.linalg.matrix_rank(G) == np.linalg.matrix_rank(J) == 6
    np.testing.assert_allclose(J @ N.T, 0, atol=1e-12)
