"""MJCF keyframes: ``model.keyframes`` holds every ``<key>`` as MuJoCo compiles it (its
``key_time``, ``key_qpos``, ``key_qvel``, ``key_ctrl`` and ``key_act``), as static metadata that
leaves jit and vmap of the model alone."""

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd

mujoco = pytest.importorskip("mujoco")


def mj_keys(mj):
    """[(name or None, time, qpos, qvel, ctrl, act)] of a MuJoCo model's keyframes."""
    return [(mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_KEY, i), mj.key_time[i], mj.key_qpos[i], mj.key_qvel[i],
             mj.key_ctrl[i], mj.key_act[i]) for i in range(mj.nkey)]


def assert_keys_equal(model, mj, names=None):
    """model.keyframes equals MuJoCo's keys, in MuJoCo's order; named keys keep their names
    (``names``: the expected names of all, unnamed ones included)."""
    ours = list(model.keyframes.items())
    theirs = mj_keys(mj)
    assert len(ours) == len(theirs) == mj.nkey
    for i, ((name, k), (mname, time, qpos, qvel, ctrl, act)) in enumerate(zip(ours, theirs)):
        if mname:
            assert name == mname
        if names is not None:
            assert name == names[i]
        assert k.time == time
        np.testing.assert_allclose(k.qpos, qpos, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(k.qvel, qvel)
        np.testing.assert_array_equal(k.ctrl, ctrl)
        np.testing.assert_array_equal(k.act, act)
        assert k.qpos.shape == (model.nq,) and k.qvel.shape == (model.nv,) and k.ctrl.shape == (model.nu,)


def gym_assets():
    gym = pytest.importorskip("gymnasium")
    d = os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".xml"))


def test_every_gymnasium_asset_has_mujocos_keyframes():
    """Every gymnasium MJCF asset that both load: the same keyframes (none: ``{}``)."""
    both = with_keys = 0
    for path in gym_assets():
        try:
            mj = mujoco.MjModel.from_xml_path(path)
        except Exception:   # noqa: BLE001 - an asset MuJoCo itself refuses is not a comparison
            continue
        model = jaxmbd.load_mjcf(path, warn=False)
        both += 1
        if mj.nkey == 0:
            assert model.keyframes == {}, path
        with_keys += mj.nkey > 0
        assert_keys_equal(model, mj)
    assert both >= 12
    assert with_keys >= 2     # humanoid and humanoidstandup: <size nkey="5"> and no <key>: 5 default keys


# free joint, ball joint, a hinge with a ref (qpos0 != 0), a slide; stateless and stateful actuators
DOC = """<mujoco>
  <worldbody>
    <body name="base" pos="0 0 1"><freejoint name="root"/><geom size="0.1"/>
      <body name="arm" pos="0 0 -0.2"><joint name="ball" type="ball"/><geom size="0.05" pos="0 0 -0.2"/>
        <body name="fore" pos="0 0 -0.4"><joint name="elbow" axis="0 1 0" ref="30"/>
          <geom size="0.05" pos="0 0 -0.2"/>
          <body name="slider"><joint name="s" type="slide" axis="1 0 0" ref="0.1"/><geom size="0.03"/></body>
        </body>
      </body>
    </body>
    <body name="target" mocap="true" pos="1 0 0"/>
  </worldbody>
  <actuator>
    <motor joint="elbow"/>
    <position joint="elbow" kp="10" timeconst="0.05"/>
    <intvelocity joint="s" actrange="-1 1"/>
    <velocity joint="s"/>
  </actuator>
  <keyframe>
    <key name="home" qpos="0 0 1.5 1 0 0 0 1 0 0 0 0.2 0.3"/>
    <key qpos="0.1 0.2"/>
    <key name="key1" ctrl="1 2"/>
    <key time="2.5" qvel="1 2 3 4 5 6 7 8 9" act="0.5"/>
    <key name="tilted" qpos="0 0 1 2 0 0 0 0 0 0 0" ctrl="0.1 0.2 0.3 0.4" act="0.1 0.2"/>
    <key name="moved" mpos="2 0 0" mquat="0 1 0 0"/>
    <key/>
  </keyframe>
  <size nkey="9"/>
</mujoco>
"""


def test_partial_named_and_unnamed_keys_match_mujoco():
    """Missing or short qpos/qvel/ctrl/act are completed from qpos0 and zeros, quaternions are
    normalized (a zero one becomes the identity), unnamed keys are ``key<i>`` (with ``_`` while taken),
    mocap poses are MuJoCo's (the bodies' own where a key gives none), and ``<size nkey>`` adds
    default keys."""
    mj = mujoco.MjModel.from_xml_string(DOC)
    assert (mj.nkey, mj.na, mj.nu) == (9, 2, 4)
    info = jaxmbd.load_mjcf(DOC, return_info=True, warn=False)
    model = info.model
    assert_keys_equal(model, mj, ["home", "key1_", "key1", "key3", "tilted", "moved", "key6", "key7", "key8"])
    k = model.keyframes
    np.testing.assert_array_equal(k["key1"].qpos, mj.qpos0)
    np.testing.assert_allclose(k["key1"].qpos, np.asarray(model.q0), rtol=0, atol=0)
    np.testing.assert_array_equal(k["tilted"].qpos[3:7], [1, 0, 0, 0])    # "2 0 0 0" normalized
    np.testing.assert_array_equal(k["tilted"].qpos[7:11], [1, 0, 0, 0])   # "0 0 0 0": the identity
    assert k["key3"].time == 2.5 and k["home"].time == 0.0
    for i, key in enumerate(k.values()):
        np.testing.assert_array_equal(key.mpos.ravel(), mj.key_mpos[i])
        np.testing.assert_allclose(key.mquat.ravel(), mj.key_mquat[i], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(k["moved"].mpos, [[2, 0, 0]])
    assert not any("mocap" in u for u in info.unsupported), info.unsupported
    assert not any(u.startswith("keyframes") for u in info.unsupported)
    with pytest.raises(ValueError):
        k["home"].qpos[0] = 1.0     # read-only


def test_the_built_in_scene_has_mujocos_home_keyframe():
    path = jaxmbd.models.quadruped_scene_path()
    mj = mujoco.MjModel.from_xml_path(path)
    model = jaxmbd.load_mjcf(path, warn=False)
    assert list(model.keyframes) == ["home"]
    assert_keys_equal(model, mj)
    home = model.keyframes["home"]
    assert home.qpos[2] == pytest.approx(0.2776) and home.qpos[2] < float(model.q0[2])


LOOP = """<mujoco>
  <worldbody>
    <body name="a" pos="0 0 1"><joint name="ja" axis="0 1 0"/><geom type="capsule" size="0.05" fromto="0 0 0 0.5 0 0"/>
      <body name="b" pos="0.5 0 0"><joint name="jb" axis="0 1 0"/><geom type="capsule" size="0.05" fromto="0 0 0 0 0 -0.5"/></body>
    </body>
  </worldbody>
  <equality><connect body1="b" body2="world" anchor="0 0 -0.5"/></equality>
  <keyframe><key name="bent" qpos="0.1 -0.2" qvel="0.5"/></keyframe>
</mujoco>
"""


def test_a_mechanism_has_its_keyframes_in_mujocos_layout():
    mj = mujoco.MjModel.from_xml_string(LOOP)
    model = jaxmbd.load_mjcf(LOOP, warn=False)
    assert isinstance(model, jaxmbd.Mechanism)
    assert_keys_equal(model, mj)
    assert model.tree.keyframes["bent"].qpos.tolist() == [0.1, -0.2]


def test_keyframes_are_static_metadata_for_jit_and_vmap():
    """Two loads of one file have equal, hashable structures (one compile for both), a jitted and a
    vmapped function of the model run, and the numbers equal the model's without keyframes."""
    m1 = jaxmbd.load_mjcf(DOC, warn=False)
    m2 = jaxmbd.load_mjcf(DOC, warn=False)
    bare = jaxmbd.load_mjcf(DOC.split("<keyframe>")[0] + "</mujoco>", warn=False)
    assert bare.keyframes == {} and len(m1.keyframes) == 9
    s1, s2 = jax.tree_util.tree_structure(m1), jax.tree_util.tree_structure(m2)
    assert s1 == s2 and hash(s1) == hash(s2)
    assert s1 != jax.tree_util.tree_structure(bare)

    traces = []

    @jax.jit
    def mass(model, q):
        traces.append(1)
        return jaxmbd.mass_matrix(model, q)
    q = jnp.asarray(m1.keyframes["home"].qpos)
    H1, H2 = mass(m1, q), mass(m2, q)
    assert len(traces) == 1
    np.testing.assert_array_equal(H1, H2)
    np.testing.assert_allclose(H1, jaxmbd.mass_matrix(bare, q), rtol=0, atol=1e-14)
    stacked = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), m1, m2)
    Hs = jax.vmap(lambda m: jaxmbd.mass_matrix(m, q))(stacked)
    np.testing.assert_allclose(Hs[1], H1, rtol=0, atol=1e-14)


BAD_KEYS = [
    ('<key name="long" qpos="0 0 1 1 0 0 0 1 0 0 0 0.5 0.1 9"/>', "<key name='long'>: qpos has 14 numbers, more "
                                                                  "than the model's nq = 13"),
    ('<key name="fast" qvel="1 2 3 4 5 6 7 8 9 10 11 12"/>', "<key name='fast'>: qvel has 12 numbers, "
                                                            "more than the model's nv = 11"),
    ('<key ctrl="1 2 3 4 5"/>', "<key> #0: ctrl has 5 numbers, more than the model's nu = 4"),
    ('<key name="a" act="1 2 3"/>', "<key name='a'>: act has 3 numbers, more than the model's na = 2"),
    ('<key name="m" mpos="1 2 3 4"/>', "<key name='m'>: mpos has 4 numbers"),
    ('<key name="x"/><key name="x"/>', "<key name='x'>: duplicate keyframe name"),
    ('<key name="y" qpos="1 nan"/>', "<key name='y'>: qpos: contains NaN"),
]


@pytest.mark.parametrize("key,msg", BAD_KEYS, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(BAD_KEYS)])
def test_bad_keys_are_errors_naming_the_key(key, msg):
    doc = DOC.split("<keyframe>")[0] + f"<keyframe>{key}</keyframe></mujoco>"
    if "nan" not in key:        # MuJoCo refuses these too (it accepts a NaN, with a warning)
        with pytest.raises(ValueError):
            mujoco.MjModel.from_xml_string(doc)
    with pytest.raises(ValueError) as e:
        jaxmbd.load_mjcf(doc, warn=False)
    assert msg in str(e.value), str(e.value)


def test_keyframes_are_no_longer_in_the_warning():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        jaxmbd.load_mjcf(LOOP)
    assert not any("keyframe" in str(x.message) for x in w)
