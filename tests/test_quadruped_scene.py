"""The built-in robot scene (``jaxmbd/models/assets/quadruped_scene.xml``, a
go2-class quadruped written as MuJoCo Menagerie writes robot files) against
MuJoCo compiling the same file: layout, mass matrix at qpos0, geoms and
candidate pairs, the standing pose and the loader's warning.  No simulation."""

import warnings

import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd.contact.pairs import from_mujoco
from jaxmbd.forces.contact import Contact
from test_mjcf import check_layout

FEET = ("FL", "FR", "RL", "RR")


@pytest.fixture(scope="module")
def scene():
    path = jaxmbd.models.quadruped_scene_path()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = jaxmbd.load_mjcf(path, return_info=True)
    return info, [str(w.message) for w in caught], mujoco.MjModel.from_xml_path(path)


def _contact(m):
    return [e for e in m.forces if isinstance(e, Contact)][0]


def _geom_names(mj):
    return [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_GEOM, i) or f"geom{i}" for i in range(mj.ngeom)]


def test_loads_with_only_the_expected_warning(scene):
    info, messages, _ = scene
    assert len(messages) == 0
    assert info.unsupported == []
    assert list(info.model.keyframes) == ["home"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # the built-in loader knows what is dropped: no warning
        m = jaxmbd.models.load_quadruped_scene()
    assert (m.nq, m.nv, m.nu) == (19, 18, 12)


def test_layout_and_mass_matrix_at_qpos0_match_mujoco(scene):
    info, _, mj = scene
    m = info.model
    check_layout(m, mj)
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    H = np.zeros((mj.nv, mj.nv))
    mujoco.mj_fullM(mj, d, H)
    np.testing.assert_allclose(np.asarray(jaxmbd.mass_matrix(m, m.q0)), H, rtol=0, atol=1e-10)
    assert abs(mj.body_mass.sum() - 15.205) < 1e-9 and mj.dof_armature[6:].min() == 0.01


def test_geoms_and_candidate_pairs_are_mujocos(scene):
    info, _, mj = scene
    c = _contact(info.model)
    colliding = (mj.geom_contype != 0) | (mj.geom_conaffinity != 0)
    assert mj.ngeom == 61 and colliding.sum() == 26
    names = _geom_names(mj)
    assert sorted(c.geom_names) == sorted(n for n, on in zip(names, colliding) if on)
    # the visual geoms (group 2) never collide; the colliding ones are the robot's (group 3) and the floor
    assert (colliding == (mj.geom_group != 2)).all()
    assert sorted(mj.geom_group[colliding]) == [0] + [3] * 25 and names[0] == "floor"
    theirs = sorted((names[a], names[b]) for a, b in from_mujoco(mj).all_pairs())
    assert sorted(c.pair_list()) == theirs and c.n_pairs == len(theirs) == 267


def test_standing_pose_and_home_keyframe(scene):
    """qpos0 stands with the feet 0-2 mm above the floor; ``home`` has them about 1 cm in."""
    _, _, mj = scene
    d = mujoco.MjData(mj)
    feet = [mj.geom(f).id for f in FEET]

    def clearance():
        mujoco.mj_kinematics(mj, d)
        return np.array([d.geom_xpos[g, 2] - mj.geom_size[g, 0] for g in feet])
    assert np.all((clearance() >= 0) & (clearance() <= 2e-3))
    mujoco.mj_resetDataKeyframe(mj, d, mj.key("home").id)
    np.testing.assert_allclose(clearance(), -0.0108, atol=5e-4)
    np.testing.assert_array_equal(mj.key_ctrl[0], mj.qpos0[7:])
