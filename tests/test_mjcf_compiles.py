"""Files MuJoCo 4.0 compiles load as MuJoCo compiles them.

Written in the style of robot collections (collision classes through <default class>, keyframes,
position actuators): <attach> model composition, primitives fitted to meshes, asset files named in
an <include>d file, solimp outside MuJoCo's ranges (clamped where used) and the noslip note.  Each
compares with MuJoCo compiling the same files: layout, mass matrix and bias force to 1e-9, and
where it applies the fitted geoms, actuator forces and the soft constraints' impedance.
"""

import struct
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd.forces import soft

mujoco = pytest.importorskip("mujoco")
from test_mjcf import check_layout, compare_with_mujoco, smooth_only  # noqa: E402

RTOL = 1e-9


def load(src):
    """The file loaded, its warning kept in ``.unsupported`` (every candidate contact pair kept: no
    time spent sizing the broad phase)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jaxmbd.load_mjcf(str(src), return_info=True, contact_capacity="all")


def same_dynamics(info, mj):
    check_layout(info.model, mj)
    worst = compare_with_mujoco(info.model, smooth_only(mj), n=3)
    assert worst[0] < RTOL and worst[1] < RTOL, dict(M=worst[0], bias=worst[1])


def write_stl(path, V, F):
    with open(path, "wb") as f:
        f.write(b"\0" * 80 + struct.pack("<I", len(F)))
        for t in F:
            f.write(struct.pack("<3f", 0, 0, 0) + b"".join(struct.pack("<3f", *V[i]) for i in t) + b"\0\0")


def lumpy_mesh(scale, seed=0):
    """(vertices, outward faces) of the convex hull of an uneven point cloud: no symmetry, so the
    principal frame and the fit are checked in full."""
    from scipy.spatial import ConvexHull
    P = np.random.default_rng(seed).normal(size=(30, 3)) * np.asarray(scale) + [0.01, -0.02, 0.015]
    h = ConvexHull(P)
    F = []
    for s, eq in zip(h.simplices, h.equations):
        a, b, c = P[s]
        F.append(s if np.cross(b - a, c - a) @ eq[:3] > 0 else s[[0, 2, 1]])
    return P, np.array(F)


# --- <attach> ------------------------------------------------------------------------------------

HAND = """<mujoco model="hand">
  <compiler angle="radian" meshdir="parts"/>
  <default>
    <default class="hand">
      <joint damping="0.2" armature="0.01" range="-0.6 0.9"/>
      <position kp="20" ctrlrange="-0.6 0.9"/>
      <default class="collision"><geom group="3" type="capsule" size="0.012" density="400"/></default>
      <default class="visual"><geom group="2" contype="0" conaffinity="0" density="0"/></default>
    </default>
  </default>
  <asset><mesh name="palm" file="palm.stl"/></asset>
  <worldbody>
    <body name="palm" childclass="hand" euler="0 0.3 0">
      <geom class="visual" type="mesh" mesh="palm"/>
      <geom class="collision" type="box" size="0.04 0.03 0.01"/>
      <body name="finger" pos="0.05 0 0" axisangle="0 0 1 0.4">
        <joint name="knuckle" axis="0 1 0"/>
        <geom class="collision" fromto="0 0 0 0.05 0 0"/>
        <body name="tip" pos="0.05 0 0">
          <joint name="tip" axis="0 1 0" ref="0.2"/>
          <geom class="collision" type="sphere" size="0.015"/>
        </body>
      </body>
    </body>
    <body name="other"><geom size="0.3"/></body>
  </worldbody>
  <actuator>
    <position name="knuckle" joint="knuckle" class="hand"/>
    <position name="tip" joint="tip" class="hand" kp="5"/>
  </actuator>
  <keyframe><key name="grip" qpos="0.5 0.7" qvel="0.1 -0.2" ctrl="0.4 0.6" time="2"/></keyframe>
</mujoco>
"""

ARM = """<mujoco model="arm">
  <compiler angle="degree" autolimits="true"/>
  <asset><model name="hand" file="hand/hand.xml"/></asset>
  <default>
    <default class="collision"><geom group="3" density="3000"/></default>
    <joint damping="1"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="upper" pos="0 0 0.5" euler="0 0 30">
      <joint name="shoulder" axis="0 1 0" range="-90 90"/>
      <geom class="collision" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="wrist" pos="0.3 0 0">
        <joint name="wrist" axis="1 0 0" range="-45 45"/>
        <geom class="collision" type="cylinder" size="0.02 0.02"/>
        <frame pos="0.03 0 0" euler="0 0 15">
          <attach model="hand" body="palm" prefix="right_"/>
        </frame>
      </body>
    </body>
  </worldbody>
  <actuator><position name="shoulder" joint="shoulder" kp="100" ctrlrange="-1.5 1.5"/></actuator>
  <keyframe><key name="home" qpos="0.3 0.1 0.2 0.4"/></keyframe>
</mujoco>
"""


def test_attach_loads_the_subtree_as_mujoco_composes_it(tmp_path):
    """The attached body with its own defaults (a density and damping the main file's classes would
    change), its compiler's radians inside a degree file, its mesh directory, the prefix on every
    name, its position actuators and its keyframe merged with the main file's."""
    (tmp_path / "hand" / "parts").mkdir(parents=True)
    write_stl(tmp_path / "hand" / "parts" / "palm.stl", *lumpy_mesh([0.03, 0.02, 0.01]))
    (tmp_path / "hand" / "hand.xml").write_text(HAND)
    (tmp_path / "arm.xml").write_text(ARM)
    mj = mujoco.MjModel.from_xml_path(str(tmp_path / "arm.xml"))
    info = load(tmp_path / "arm.xml")
    model = info.model
    assert model.joint_names == ("shoulder", "wrist", "right_knuckle", "right_tip")
    assert model.actuators.names == ("shoulder", "right_knuckle", "right_tip")
    assert info.joint_range["right_knuckle"] == (-0.6, 0.9)      # radians, as the hand's file says
    same_dynamics(info, mj)
    assert [mj.key(k).name for k in range(mj.nkey)] == ["home", "right_grip"]
    for k in range(mj.nkey):     # the hand's keyframe merged as MuJoCo merges it
        key = model.keyframes[mj.key(k).name]
        for field in ("qpos", "qvel", "ctrl"):
            np.testing.assert_allclose(getattr(key, field), getattr(mj, "key_" + field)[k], rtol=0, atol=1e-15)
        assert key.time == mj.key_time[k]
    mj = mujoco.MjModel.from_xml_path(str(tmp_path / "arm.xml"))     # same_dynamics switched its actuators off
    d = mujoco.MjData(mj)
    q, ctrl = np.array([0.3, -0.2, 0.5, 0.1]), np.array([0.4, -0.3, 0.6])
    d.qpos[:], d.ctrl[:] = q, ctrl
    mujoco.mj_forward(mj, d)
    got = jax.jit(jaxmbd.actuator_force)(model, jnp.asarray(q), jnp.zeros(4), jnp.asarray(ctrl))
    np.testing.assert_allclose(got, d.qfrc_actuator, rtol=1e-12, atol=1e-12)


# --- primitives fitted to meshes -------------------------------------------------------------------

FITTED = """<mujoco model="gripper">
  <compiler angle="radian" meshdir="assets" fitaabb="{aabb}"/>
  <default>
    <default class="gripper">
      <joint damping="0.5" range="-0.5 0.5"/>
      <position kp="30"/>
      <default class="collision"><geom group="3" density="800"/></default>
    </default>
  </default>
  <asset><mesh name="link" file="link.stl" scale="1 1.3 0.8"/></asset>
  <worldbody>
    <body name="base" pos="0 0 0.3" childclass="gripper">
      <freejoint/>
      <geom class="collision" type="box" mesh="link"/>
      <body name="finger" pos="0.05 0 0" euler="0.2 0.1 0.3">
        <joint name="finger" axis="0 0 1"/>
        <geom class="collision" type="capsule" mesh="link" pos="0.01 0 0" euler="0.3 -0.2 0.5" fitscale="1.2"/>
        <geom class="collision" type="cylinder" mesh="link" pos="0 0.02 0"/>
        <geom class="collision" type="sphere" mesh="link"/>
        <geom class="collision" type="ellipsoid" mesh="link" quat="0 1 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator><position name="finger" joint="finger" class="gripper"/></actuator>
  <keyframe><key name="open" qpos="0 0 0.3 1 0 0 0 0.4"/></keyframe>
</mujoco>
"""


@pytest.mark.parametrize("aabb", ["false", "true"])
def test_primitives_fitted_to_a_mesh_equal_mujocos(tmp_path, aabb):
    """box, capsule (with fitscale), cylinder, sphere and ellipsoid naming a mesh: MuJoCo's
    geom_size, geom_pos and geom_quat (up to the quaternion's sign) for both fits, and the mass
    matrix and bias force they give."""
    (tmp_path / "assets").mkdir()
    write_stl(tmp_path / "assets" / "link.stl", *lumpy_mesh([0.04, 0.02, 0.015], seed=1))
    (tmp_path / "gripper.xml").write_text(FITTED.format(aabb=aabb))
    mj = mujoco.MjModel.from_xml_path(str(tmp_path / "gripper.xml"))
    info = load(tmp_path / "gripper.xml")
    geoms = info.model.visual_data.geoms
    assert len(geoms) == mj.ngeom == 5
    for g in range(mj.ngeom):
        mine = geoms[g]
        assert mine.type == ("box", "capsule", "cylinder", "sphere", "ellipsoid")[g] and mine.mesh is None
        np.testing.assert_allclose(mine.size, mj.geom_size[g], rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(mine.pos, mj.geom_pos[g], rtol=0, atol=1e-12)
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, mj.geom_quat[g])
        np.testing.assert_allclose(mine.rot, R, rtol=0, atol=1e-12)
        q = jaxmbd.io._common.rot_to_quat(np.reshape(mine.rot, (3, 3)))
        assert min(np.abs(q - mj.geom_quat[g]).max(), np.abs(q + mj.geom_quat[g]).max()) < 1e-12
    same_dynamics(info, mj)


# --- asset files named in an included file -------------------------------------------------------

MAIN = """<mujoco model="walker">
  <compiler angle="radian" meshdir="meshes"/>
  <include file="robot/assets.xml"/>
  <default><default class="collision"><geom group="3" density="1200"/></default></default>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <include file="robot/body.xml"/>
  </worldbody>
  <actuator><position name="hip" joint="hip" kp="40"/></actuator>
  <keyframe><key name="stand" qpos="0 0 0.8 1 0 0 0 0.3"/></keyframe>
</mujoco>
"""
ASSETS = """<mujoco><asset>
  <mesh name="thigh" file="thigh.stl"/>
  <mesh name="shin" file="legs/shin.stl"/>
  <mesh name="foot" file="robot/foot.stl"/>
</asset></mujoco>
"""
BODY = """<mujoco>
  <body name="pelvis" pos="0 0 0.8"><freejoint/>
    <geom class="collision" type="mesh" mesh="thigh"/>
    <include file="robot/leg.xml"/>
  </body>
</mujoco>
"""
LEG = """<mujoco>
  <body name="shin" pos="0 0 -0.2"><joint name="hip" axis="0 1 0" range="-1 1"/>
    <geom class="collision" type="mesh" mesh="shin"/>
    <body name="foot" pos="0 0 -0.25"><geom class="collision" type="mesh" mesh="foot"/></body>
  </body>
</mujoco>
"""


def test_meshes_named_in_an_included_file_come_from_the_main_files_meshdir(tmp_path):
    """The included files live in robot/ and include each other by paths from the main file's
    directory; their meshes are looked up in the main file's meshdir (meshes/), not beside them
    (decoy files of another size in robot/ would change the masses)."""
    thigh, shin = lumpy_mesh([0.05, 0.04, 0.1], seed=2), lumpy_mesh([0.03, 0.03, 0.12], seed=3)
    (tmp_path / "meshes" / "legs").mkdir(parents=True)
    (tmp_path / "meshes" / "robot").mkdir(parents=True)
    (tmp_path / "robot" / "legs").mkdir(parents=True)
    write_stl(tmp_path / "meshes" / "thigh.stl", *thigh)
    write_stl(tmp_path / "meshes" / "legs" / "shin.stl", *shin)
    write_stl(tmp_path / "meshes" / "robot" / "foot.stl", *lumpy_mesh([0.06, 0.03, 0.02], seed=4))
    write_stl(tmp_path / "robot" / "thigh.stl", thigh[0] * 2, thigh[1])       # decoys
    write_stl(tmp_path / "robot" / "legs" / "shin.stl", shin[0] * 2, shin[1])
    (tmp_path / "robot" / "assets.xml").write_text(ASSETS)
    (tmp_path / "robot" / "body.xml").write_text(BODY)
    (tmp_path / "robot" / "leg.xml").write_text(LEG)
    (tmp_path / "walker.xml").write_text(MAIN)
    mj = mujoco.MjModel.from_xml_path(str(tmp_path / "walker.xml"))
    same_dynamics(load(tmp_path / "walker.xml"), mj)


# --- solimp outside MuJoCo's ranges -----------------------------------------------------------------

PADS = """<mujoco model="fingertip">
  <compiler angle="radian" autolimits="true"/>
  <option noslip_iterations="{noslip}"/>
  <default>
    <default class="robot">
      <joint damping="1" armature="0.01"/>
      <position kp="50" ctrlrange="-0.3 0.1"/>
      <default class="collision"><geom group="3"/>
        <default class="pad"><geom solimp="1.2 0.95 0.01 0.5 2" solref="0.01 1"/></default>
      </default>
    </default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="base" pos="0 0 0.2" childclass="robot">
      <joint name="lift" type="slide" axis="0 0 1" range="-0.3 0.1"/>
      <geom class="collision" type="box" size="0.05 0.05 0.02" mass="1"/>
      <body name="finger" pos="0 0 -0.1">
        <joint name="tip" axis="0 1 0" range="-1 1" solimplimit="-0.2 1.4 0.05"/>
        <geom name="pad" class="pad" size="0.02" mass="0.1"/>
      </body>
    </body>
  </worldbody>
  <actuator><position name="lift" joint="lift" class="robot"/></actuator>
  <keyframe><key name="pressed" qpos="-0.083 1.02"/></keyframe>
</mujoco>
"""


def test_solimp_outside_mujocos_ranges_gives_mujocos_impedance():
    """A fingertip pad with dmin = 1.2 pressed 3 mm into the floor and a joint limit with
    dmin < 0, dmax > 1, both violated: the file loads, the warning names both, and the impedance
    of each soft row equals MuJoCo's (efc_KBIP's third column) at the same state."""
    xml = PADS.format(noslip=0)
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    mujoco.mj_resetDataKeyframe(mj, d, 0)
    mujoco.mj_forward(mj, d)
    info = load(xml)
    line = [u for u in info.unsupported if u.startswith("solimp outside")]
    assert len(line) == 1 and "geom 'pad' solimp (dmin 1.2)" in line[0] \
        and "joint 'tip' (in body 'finger') solimplimit (dmin -0.2, dmax 1.4)" in line[0], info.unsupported
    model = info.model
    q = jnp.asarray(model.keyframes["pressed"].qpos)
    blocks = []      # (element kind, first row, rows), recorded while tracing

    @jax.jit
    def rows(q):
        N, _, extras = soft.rows(model, q, jnp.zeros(model.nv))
        blocks[:] = [(type(e).__name__, n0, n) for e, (n0, n), _, _ in extras]
        return N.r, soft.impedance(jnp.abs(N.r), N.solimp)

    r, imp = (np.asarray(x) for x in rows(q))
    kinds = {"Contact": mujoco.mjtConstraint.mjCNSTR_CONTACT_PYRAMIDAL,
             "JointLimit": mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT}
    seen = set()
    for kind, n0, n in blocks:
        rows = [n0 + k for k in range(n) if r[n0 + k] < 0]
        mine = [i for i in range(d.nefc) if d.efc_type[i] == kinds[kind]]
        assert len(rows) == len(mine) >= 1, (kind, rows, mine)     # a pyramidal contact: its 4 edges
        np.testing.assert_allclose(-r[rows], -d.efc_pos[mine], rtol=1e-9)
        assert (soft.MINIMP < d.efc_KBIP[mine, 2]).all() and (d.efc_KBIP[mine, 2] < soft.MAXIMP).all()
        np.testing.assert_allclose(imp[rows], d.efc_KBIP[mine, 2], rtol=1e-12)
        seen.add(kind)
    assert seen == set(kinds)


def test_noslip_is_one_line_of_the_warning():
    notes = load(PADS.format(noslip=4)).unsupported
    line = [u for u in notes if "noslip" in u]
    assert line == ["<option noslip_iterations='4'>: jaxmbd does not run MuJoCo's noslip post-processing of the "
                    "friction forces"]
    assert not any("noslip" in u for u in load(PADS.format(noslip=0)).unsupported)
