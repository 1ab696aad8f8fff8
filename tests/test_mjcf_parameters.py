"""MJCF contact and limit parameters as MuJoCo's parser reads them (numbers given in part, an
element's orientation over its class's, joint actuator-force ranges without actuators), the one
check of every compliant law's solref/solimp, and the warning's lines for the options jaxmbd's
contact law does not take."""

import warnings

import numpy as np
import pytest

import jaxmbd
from jaxmbd.builder import ModelBuilder

mujoco = pytest.importorskip("mujoco")


@pytest.fixture
def spy(monkeypatch):
    """What the loader hands to the builder: {geom name: add_geom keywords}, {(geom1, geom2):
    add_contact_pair keywords} and [(solref, solimp)] of the joint limits, in order."""
    from jaxmbd.io.mjcf import _Compiler
    rec = dict(geoms={}, pairs={}, limits=[])
    add_geom, add_pair, apply_limits = ModelBuilder.add_geom, ModelBuilder.add_contact_pair, _Compiler._apply_limits

    def geom(self, body, type, size=(), **kw):
        rec["geoms"][kw.get("name")] = dict(kw, type=type, size=np.asarray(size, float))
        return add_geom(self, body, type, size, **kw)

    def pair(self, g1, g2, **kw):
        rec["pairs"][(g1, g2)] = kw
        return add_pair(self, g1, g2, **kw)

    def limits(self):
        rec["limits"].extend((d["solref"], d["solimp"]) for d in self.limited)
        return apply_limits(self)
    monkeypatch.setattr(ModelBuilder, "add_geom", geom)
    monkeypatch.setattr(ModelBuilder, "add_contact_pair", pair)
    monkeypatch.setattr(_Compiler, "_apply_limits", limits)
    return rec


def load_both(xml):
    mj = mujoco.MjModel.from_xml_string(xml)     # MuJoCo accepts the document
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jaxmbd.load_mjcf(xml), mj


def same_rotation(q1, q2):
    q1, q2 = np.asarray(q1, float), np.asarray(q2, float)
    q1, q2 = q1 / np.linalg.norm(q1), q2 / np.linalg.norm(q2)
    return abs(abs(q1 @ q2) - 1.0) < 1e-12


PARTIAL = """<mujoco>
  <default>
    <geom solref="0.05 0.5" solimp="0.1 0.2 0.003 0.4 3" friction="0.7 0.01 0.002"/>
    <default class="half"><geom solref="0.01" solimp="0.5"/></default>
    <default class="box"><geom type="box" size="0.3 0.2 0.1"/></default>
    <default class="lim"><joint solreflimit="0.03 0.7" solimplimit="0.8 0.9 0.01 0.2 4"/></default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" solref="0.01" solimp="0.5 0.6" friction="0.4"/>
    <body name="a" pos="0 0 1">
      <freejoint/>
      <geom name="ga" size="0.1" class="half"/>
      <geom name="gb" class="box" size="0.05" pos="0.3 0 0" solimp="0.3 0.4 0.005 0.6" solref="0.04"/>
      <body name="b" pos="0 0 -0.3">
        <joint name="j1" axis="0 1 0" range="-30 30" solreflimit="0.01" solimplimit="0.5 0.6 0.01"/>
        <geom name="gc" size="0.05" contype="0" conaffinity="0"/>
        <body name="c" pos="0 0 -0.3">
          <joint name="j2" axis="0 1 0" range="-30 30" class="lim" solreflimit="0.05" solimplimit="0.3"/>
          <geom name="gd" size="0.05" contype="0" conaffinity="0"/>
        </body>
      </body>
    </body>
  </worldbody>
  <contact><pair geom1="floor" geom2="ga" solref="0.03" solimp="0.7 0.8" friction="0.9 0.9"/></contact>
</mujoco>
"""


def test_numbers_given_in_part_complete_as_in_mujoco(spy):
    """solref, solimp, solreflimit, solimplimit, friction and size given in part: their leading
    numbers over the class's (or MuJoCo's defaults), exactly MuJoCo's geom_solref, geom_solimp,
    geom_friction, geom_size, pair_* and jnt_solref/jnt_solimp."""
    model, mj = load_both(PARTIAL)
    for name, kw in spy["geoms"].items():
        g = mj.geom(name).id
        np.testing.assert_array_equal(kw["solref"], mj.geom_solref[g], err_msg=name)
        np.testing.assert_array_equal(kw["solimp"], mj.geom_solimp[g], err_msg=name)
        np.testing.assert_array_equal(kw["friction"], mj.geom_friction[g], err_msg=name)
        n = {"plane": 0, "sphere": 1, "box": 3}[kw["type"]]
        np.testing.assert_array_equal(kw["size"][:n], mj.geom_size[g][:n], err_msg=name)
    assert set(spy["geoms"]) == {"floor", "ga", "gb"}
    assert spy["geoms"]["gb"]["solref"].tolist() == [0.04, 0.5]       # the class's damping ratio
    assert spy["geoms"]["gb"]["size"].tolist() == [0.05, 0.2, 0.1]     # the class's last two sizes
    (kw,) = spy["pairs"].values()
    np.testing.assert_array_equal(kw["solref"], mj.pair_solref[0])
    np.testing.assert_array_equal(kw["solimp"], mj.pair_solimp[0])
    np.testing.assert_array_equal(np.asarray(kw["friction"]), mj.pair_friction[0][[0, 2, 3]])
    assert len(spy["limits"]) == 2
    for (solref, solimp), j in zip(spy["limits"], ("j1", "j2")):
        np.testing.assert_array_equal(solref, mj.jnt_solref[mj.joint(j).id])
        np.testing.assert_array_equal(solimp, mj.jnt_solimp[mj.joint(j).id])
    assert spy["limits"][1][0].tolist() == [0.05, 0.7]


ORIENT = """<mujoco>
  <default>
    <geom type="box" size="0.3 0.1 0.05" euler="0 90 0"/>
    <default class="q"><geom quat="0 1 0 0"/></default>
    <default class="z"><geom zaxis="1 1 0"/><default class="zq"><geom axisangle="0 0 1 30"/></default></default>
  </default>
  <worldbody>
    <body name="a" pos="0 0 1">
      <freejoint/>
      <geom name="own_quat" quat="0.5 0.5 0.5 0.5"/>
      <geom name="own_euler" class="q" euler="30 0 0"/>
      <geom name="own_xyaxes" class="z" xyaxes="0 1 0 -1 0 0" pos="0.1 0 0"/>
      <geom name="nested" class="zq" pos="0 0.1 0"/>
      <geom name="inherited" class="q" pos="0 0 0.1"/>
      <geom name="from_to" type="capsule" size="0.02" fromto="0 0 0 0.2 0.1 0"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_an_elements_orientation_replaces_its_classs(spy):
    """A geom's own quat/euler/xyaxes/fromto over a class's other orientation (and a class's over its
    parent class's): MuJoCo's geom_quat, and the body's inertia (the mass matrix) is MuJoCo's."""
    model, mj = load_both(ORIENT)
    assert len(spy["geoms"]) == mj.ngeom == 6
    for name, kw in spy["geoms"].items():
        assert same_rotation(kw["quat"], mj.geom_quat[mj.geom(name).id]), name
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    M = np.zeros((mj.nv, mj.nv))
    mujoco.mj_fullM(mj, d, M)
    np.testing.assert_allclose(np.asarray(jaxmbd.mass_matrix(model, model.q0)), M, rtol=1e-10, atol=1e-14)


NO_ACTUATORS = """<mujoco>
  <worldbody>
    <body name="a">
      <joint name="h" axis="0 1 0" damping="0.3" actuatorfrcrange="-1 1" {}/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("limited", ["", 'actuatorfrclimited="true"'])
def test_actuator_force_range_without_actuators_loads(limited):
    """Nothing to clamp: the model's dynamics are MuJoCo's (mass matrix and forward dynamics)."""
    xml = NO_ACTUATORS.format(limited)
    model, mj = load_both(xml)
    assert mj.jnt_actfrclimited[0] and model.nu == 0
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:], d.qfrc_applied[:] = 0.4, -1.2, 0.7
    mujoco.mj_forward(mj, d)
    M = np.zeros((1, 1))
    mujoco.mj_fullM(mj, d, M)
    q, v = np.array([0.4]), np.array([-1.2])
    np.testing.assert_allclose(np.asarray(jaxmbd.mass_matrix(model, q)), M, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(jaxmbd.forward_dynamics(model, q, v, np.array([0.7]))), d.qacc,
                               rtol=1e-10)


# --- one check of every compliant law's parameters --------------------------------------------

BALL = """<mujoco>
  <default><default class="bad"><geom {attr}/></default></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="ball" pos="0 0 1"><freejoint/><geom name="{name}" size="0.1" {own}/>
      <body name="arm"><joint name="hinge" range="-1 1" {joint}/><geom name="g2" size="0.05" pos="0 0 -0.3"/></body>
    </body>
  </worldbody>
  <contact><pair geom1="floor" geom2="g2" {pair}/></contact>
</mujoco>
"""
BAD_LAW = [
    ('solref="-0.02 1"', "mixed signs"),
    ('solref="-500"', "mixed signs"),                  # MuJoCo completes it to "-500 1"
    ('solref="0.02 -1"', "the damping ratio must be positive"),
    ('solref="0.02 0"', "the damping ratio must be positive"),
    ('solref="0.02 1 3"', "expected 1 to 2 numbers"),
    ('solimp="0.9 0.95 0.001 0.5 2 7"', "expected 1 to 5 numbers"),
]
CLAMPED = [('solimp="1.5 0.95 0.001"', "dmin 1.5"), ('solimp="0.9 -0.1 0.001"', "dmax -0.1"),
           ('solimp="0.9 0.95 -0.001"', "width -0.001"), ('solimp="0.9 0.95 0.001 1.2"', "midpoint 1.2"),
           ('solimp="0.9 0.95 0.001 0.5 0.5"', "power 0.5")]


def doc(attr="", name="g1", own="", joint="", pair=""):
    return BALL.format(attr=attr or 'rgba="1 0 0 1"', name=name, own=own, joint=joint, pair=pair)


@pytest.mark.parametrize("attr,msg", BAD_LAW, ids=[a for a, _ in BAD_LAW])
def test_a_bad_solref_or_solimp_is_an_error_naming_the_element(attr, msg):
    """On a geom (its own or from its class), a pair and a joint limit: a ValueError naming the
    element and the attribute.  (MuJoCo accepts all but the last, and reads "-0.02 1" as a
    stiffness of 0.02 with a negative damping: a ball falls through the floor.)"""
    key = attr.split("=")[0]
    cases = [(doc(own=attr), f"geom 'g1': {key}"),
             (doc(attr=attr, own='class="bad"'), f"geom 'g1': {key}"),
             (doc(pair=attr), f"<pair 'floor' 'g2'>: {key}"),
             (doc(joint=attr.replace(key, key + "limit")), f"joint 'hinge' (in body 'arm'): {key}limit")]
    for xml, where in cases:
        if "1 3" not in attr and "2 7" not in attr:
            mujoco.MjModel.from_xml_string(xml)
        with pytest.raises(ValueError) as e:
            jaxmbd.load_mjcf(xml, warn=False)
        assert where in str(e.value) and msg in str(e.value), str(e.value)


@pytest.mark.parametrize("attr,moved", CLAMPED, ids=[a for a, _ in CLAMPED])
def test_solimp_outside_its_ranges_loads_as_in_mujoco_and_is_named(attr, moved):
    """MuJoCo compiles any solimp and clamps it where it uses it: the file loads, keeps the values
    (jaxmbd.forces.soft clamps them the same way) and the warning names the element."""
    key = attr.split("=")[0]
    for xml, where in [(doc(own=attr), f"geom 'g1' {key}"), (doc(pair=attr), f"<pair 'floor' 'g2'> {key}"),
                       (doc(joint=attr.replace(key, key + "limit")), f"joint 'hinge' (in body 'arm') {key}limit")]:
        mujoco.MjModel.from_xml_string(xml)
        info = jaxmbd.load_mjcf(xml, warn=False, return_info=True)
        line = [u for u in info.unsupported if u.startswith("solimp outside")]
        assert len(line) == 1 and f"{where} ({moved})" in line[0], info.unsupported


@pytest.mark.parametrize("attr", ['solref="-1000 -10"', 'solref="-1000 0"', 'solimp="0 1 0 0 1"',
                                  'solref="0.001 0.3" solimp="0.99 0.9 0.02 1 6"'])
def test_valid_edge_values_load(attr):
    """The direct form, dmin/dmax/midpoint at 0 and 1, width 0, power 1: accepted, as MuJoCo does."""
    for xml in (doc(own=attr), doc(pair=attr), doc(joint=attr.replace("solref", "solreflimit")
                                                   .replace("solimp", "solimplimit"))):
        mujoco.MjModel.from_xml_string(xml)
        jaxmbd.load_mjcf(xml, warn=False)


def test_the_builder_checks_solref_and_solimp_the_same_way():
    b = ModelBuilder()
    b.add_body("ball", joint="free", mass=1.0, inertia=np.eye(3) * 0.004)
    b.add_geom("world", "plane", name="floor")
    b.add_geom("ball", "sphere", [0.1], name="ok", solref=(-1000.0, -10.0))
    with pytest.raises(ValueError, match=r"geom 'g': solref = '-0.02 1': mixed signs"):
        b.add_geom("ball", "sphere", [0.1], name="g", solref=(-0.02, 1.0))
    with pytest.raises(ValueError, match=r"geom 'g': solimp: expected 5 numbers"):
        b.add_geom("ball", "sphere", [0.1], name="g", solimp=(0.9, 0.95, 0.001, 0.5, 2.0, 1.0))
    with pytest.raises(ValueError, match=r"contact pair 'floor'-'ok': solref = '0.02 0'"):
        b.add_contact_pair("floor", "ok", solref=(0.02, 0.0))
    with pytest.raises(ValueError, match=r"contact pair 'floor'-'ok': solimp: contains NaN"):
        b.add_contact_pair("floor", "ok", solimp=(0.9, np.nan, 0.001, 0.5, 2.0))
    b.add_contact_pair("floor", "ok", solimp=(0.9, 2.0, 0.001, 0.5, 2.0))   # clamped where used, as in MuJoCo


# --- options the contact law does not take: in the warning ---------------------------------------

OPTIONS = """<mujoco>
  <option impratio="10" cone="pyramidal" noslip_iterations="3" o_solref="0.01 1">
    <flag override="enable" spring="disable" damper="disable" sleep="enable"/>
  </option>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="ball" pos="0 0 1"><freejoint/><geom name="b" size="0.1"/></body>
  </worldbody>
  <contact><pair geom1="floor" geom2="b" solreffriction="0.02 1"/></contact>
</mujoco>
"""


def test_ignored_contact_options_and_flags_are_named_in_the_warning():
    mujoco.MjModel.from_xml_string(OPTIONS)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        jaxmbd.load_mjcf(OPTIONS)
    (msg,) = [str(x.message) for x in w]
    assert "impratio" not in msg and "cone" not in msg     # the soft law takes them
    for what in ("<option noslip_iterations='3'>",
                 "<flag override='enable'> (contact parameter override: o_solref='0.01 1')",
                 "pair solreffriction (<pair 'floor' 'b'>", "<flag spring='disable'>", "<flag damper='disable'>",
                 "<flag sleep='enable'>"):
        assert what in msg, (what, msg)
    plain = OPTIONS.split("<worldbody>")[0].split("<option")[0] + "<worldbody>" + OPTIONS.split("<worldbody>")[1]
    plain = plain.replace(' solreffriction="0.02 1"', "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # nothing ignored: no warning at all
        jaxmbd.load_mjcf(plain)
    # without anything that collides, the contact options change nothing: not listed
    still = OPTIONS.replace('<geom name="floor" type="plane" size="5 5 0.1"/>', "").replace(
        '<contact><pair geom1="floor" geom2="b" solreffriction="0.02 1"/></contact>', "").replace(
        'size="0.1"/>', 'size="0.1" contype="0" conaffinity="0"/>')
    info = jaxmbd.load_mjcf(still, return_info=True, warn=False)
    assert not any("impratio" in u or "cone" in u for u in info.unsupported), info.unsupported
    assert "<flag spring='disable'> (joint stiffness is kept)" in info.unsupported
