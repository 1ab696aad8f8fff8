"""URDF collision geometry: ``load_urdf(..., collisions="floor" |
"all")`` turns each link's ``<collision>`` box, sphere, cylinder and mesh
into collision geoms and adds a floor.  Checked against MuJoCo's own URDF
import (the geoms' types, sizes and world poses at random joint angles) and
against closed-form distances to the floor."""

import os

import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd import contact_forces
from jaxmbd.forces.contact import Contact
from jaxmbd.kinematics import forward_kinematics
from test_mjcf_robots import SHAPES, write_stl

URDF = """<robot name="arm">
  <link name="base">
    <inertial><mass value="2"/><inertia ixx="0.02" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision name="base_box"><origin xyz="0 0 0.05" rpy="0.1 0 0.2"/><geometry><box size="0.3 0.2 0.1"/></geometry></collision>
  </link>
  <link name="upper">
    <inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 0.2" rpy="0 0 0"/><geometry><cylinder radius="0.04" length="0.4"/></geometry></collision>
    <collision><origin xyz="0 0 0.4"/><geometry><sphere radius="0.06"/></geometry></collision>
  </link>
  <link name="fore">
    <inertial><mass value="0.5"/><inertia ixx="0.005" iyy="0.005" izz="0.005" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0.1 0 0" rpy="0 1.2 0.3"/><geometry><mesh filename="package://armpkg/meshes/box.stl" scale="1 1 2"/></geometry></collision>
  </link>
  <link name="tool">
    <collision><origin xyz="0 0 0.05"/><geometry><sphere radius="0.03"/></geometry></collision>
  </link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper"/><child link="fore"/><origin xyz="0 0 0.4"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
  <joint name="tool_mount" type="fixed"><parent link="fore"/><child link="tool"/><origin xyz="0.2 0 0"/></joint>
</robot>
"""


@pytest.fixture(scope="module")
def urdf_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("urdf")
    os.makedirs(root / "armpkg" / "meshes")
    os.makedirs(root / "armpkg" / "urdf")
    write_stl(str(root / "armpkg" / "meshes" / "box.stl"), *SHAPES["box"])
    path = root / "armpkg" / "urdf" / "arm.urdf"
    path.write_text(URDF)
    # MuJoCo resolves mesh files by their base name next to the file: a copy for it
    mj_dir = root / "mj"
    os.makedirs(mj_dir)
    write_stl(str(mj_dir / "box.stl"), *SHAPES["box"])
    (mj_dir / "arm.urdf").write_text(URDF.replace("package://armpkg/meshes/box.stl", "box.stl"))
    return str(path), str(mj_dir / "arm.urdf")


def _contact(m):
    return [e for e in m.forces if isinstance(e, Contact)][0]


def _world_geoms(model, q):
    c = _contact(model)
    kin = forward_kinematics(model, jnp.asarray(q))
    out = []
    for g, host in enumerate(c.geom_body):
        Rb = np.eye(3) if host < 0 else np.asarray(kin.rot[host])
        pb = np.zeros(3) if host < 0 else np.asarray(kin.pos[host])
        out.append((c.geom_type[g], Rb @ np.asarray(c.geom_rot[g]), pb + Rb @ np.asarray(c.geom_pos[g])))
    return out


def test_collision_geoms_are_mujoco_s(urdf_path):
    """Every collision geom of the URDF (box, cylinder, spheres, a scaled mesh
    behind a package:// path, one on a fixed-joint link) equals MuJoCo's URDF
    import: type, size, and world position and axes at random joint angles
    (1e-9; MuJoCo keeps mesh vertices in float32 and re-centres the mesh, so
    a mesh's hull is compared in the world, 1e-6)."""
    model = jaxmbd.load_urdf(urdf_path[0], collisions="floor", warn=False)
    c = _contact(model)
    assert c.geom_names[0] == "floor" and c.geom_type == ("plane", "box", "cylinder", "sphere", "mesh", "sphere")
    mj = mujoco.MjModel.from_xml_path(urdf_path[1])
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(0)
    names = list(model.joint_names)
    for _ in range(5):
        d.qpos[:] = rng.uniform(-1.5, 1.5, mj.nq)
        mujoco.mj_forward(mj, d)
        q = np.array([d.qpos[mj.joint(n).qposadr[0]] for n in names])
        ours = _world_geoms(model, q)[1:]
        assert len(ours) == mj.ngeom
        for g, (t, R, p) in enumerate(ours):
            k = next(k for k in range(mj.ngeom) if np.abs(d.geom_xpos[k] - p).max() < 1e-6
                     or t == "mesh" and mj.geom_type[k] == mujoco.mjtGeom.mjGEOM_MESH)
            assert mujoco.mjtGeom(mj.geom_type[k]).name.lower().endswith(t), (t, mj.geom_type[k])
            if t != "mesh":
                np.testing.assert_allclose(p, d.geom_xpos[k], atol=1e-9)
                np.testing.assert_allclose(np.asarray(c.geom_size[g + 1])[:{"box": 3, "cylinder": 2, "sphere": 1}[t]],
                                           mj.geom_size[k][:{"box": 3, "cylinder": 2, "sphere": 1}[t]], rtol=1e-12)
                if t != "sphere":
                    np.testing.assert_allclose(R, d.geom_xmat[k].reshape(3, 3), atol=1e-9)
            else:
                mid = mj.geom_dataid[k]
                V = mj.mesh_vert[mj.mesh_vertadr[mid]:mj.mesh_vertadr[mid] + mj.mesh_vertnum[mid]].astype(float)
                theirs = V @ d.geom_xmat[k].reshape(3, 3).T + d.geom_xpos[k]
                mine = np.asarray(c.mesh_verts[0])[:c.mesh_nvert[0]] @ R.T + p
                dd = np.linalg.norm(mine[:, None] - theirs[None], axis=2)
                assert dd.min(1).max() < 1e-6 and dd.min(0).max() < 1e-6


@pytest.mark.long
def test_the_floor_and_which_pairs(urdf_path):
    """"floor": every geom of a moving link against the floor and nothing else
    (the base is welded to the world: its box is static); "all": the floor
    and MuJoCo's pair rules among the links: no link with its parent, the
    fixed-joint tool is part of the forearm, and, as in MuJoCo, a link
    hinged to a base welded to the world does touch the base (the parent
    filter never applies to the world).  A sphere's distance to the floor is
    its centre's height less its radius (exact)."""
    moving = ("upper_collision0", "upper_collision1", "fore_collision0", "tool_collision0")
    floor = jaxmbd.load_urdf(urdf_path[0], collisions="floor", warn=False)
    assert sorted(_contact(floor).pair_list()) == sorted(("floor", g) for g in moving)
    full = jaxmbd.load_urdf(urdf_path[0], collisions="all", warn=False)
    pairs = set(_contact(full).pair_list())
    expect = {("floor", g) for g in moving} | {("base_box", g) for g in moving}
    assert {tuple(sorted(p)) for p in pairs} == {tuple(sorted(p)) for p in expect}
    q = np.array([0.7, -0.4])
    f = contact_forces(full, jnp.asarray(q), jnp.zeros(2))
    geoms = _world_geoms(full, q)
    for g, r in (("upper_collision1", 0.06), ("tool_collision0", 0.03)):
        i = _contact(full).pair_list().index(("floor", g))
        j = int(np.flatnonzero(np.asarray(f["pair"]) == i)[0])
        z = geoms[_contact(full).geom_names.index(g)][2][2]
        np.testing.assert_allclose(float(f["dist"][j]), z - r, atol=1e-12)


def test_bad_collision_input_and_the_warning(urdf_path):
    with pytest.raises(ValueError, match="collisions='bogus'"):
        jaxmbd.load_urdf(urdf_path[0], collisions="bogus")
    with pytest.raises(ValueError, match="link 'tool' collision #0: unknown geometry <torus>"):
        jaxmbd.load_urdf(URDF.replace('<sphere radius="0.03"/>', "<torus/>"), collisions="floor")
    with pytest.raises(ValueError, match="link 'upper' collision #1.*positive size"):
        jaxmbd.load_urdf(URDF.replace('<sphere radius="0.06"/>', '<sphere radius="-0.06"/>'), collisions="floor")
    with pytest.warns(UserWarning, match="collision meshes whose files were not found"):
        m = jaxmbd.load_urdf(URDF, collisions="floor")          # a string: no directory to look in
    assert "fore_collision0" not in _contact(m).geom_names
    with pytest.warns(UserWarning, match=r"contacts \(5 collision geometries"):
        jaxmbd.load_urdf(URDF)
