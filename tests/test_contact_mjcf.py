"""Contact from MJCF: the loaded collision geoms, pairs and
parameters against MuJoCo's compiled model and its contacts."""

import warnings

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd.contact.pairs import from_mujoco
from jaxmbd.forces.contact import Contact
from test_mjcf import gym_asset
from jaxmbd import Save


def _contact(m):
    tree = getattr(m, "tree", m)
    return [e for e in tree.forces if isinstance(e, Contact)][0]


def _geom_names(mj):
    return [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_GEOM, i) or f"geom{i}" for i in range(mj.ngeom)]


@pytest.fixture(scope="module", params=["ant.xml", "humanoid.xml"])
def gym(request):
    path = gym_asset(request.param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return request.param, jaxmbd.load_mjcf(path, warn=False), mujoco.MjModel.from_xml_path(path)


def test_the_candidate_pairs_are_mujocos(gym):
    """The loaded model's pairs (names) equal MuJoCo's selection on its own compiled tables."""
    _, m, mj = gym
    names = _geom_names(mj)
    theirs = sorted((names[a], names[b]) for a, b in from_mujoco(mj).all_pairs())
    assert sorted(_contact(m).pair_list()) == theirs and len(theirs) > 10


def test_the_colliding_pairs_at_rest_on_the_floor_are_mujocos(gym):
    """MuJoCo settles the robot on its floor (300 steps); there, the pairs
    jaxmbd's loaded model finds within their margin (dist < margin: MuJoCo's
    active contacts; the ant's geoms have a 1 cm margin) are the pairs in
    MuJoCo's d.contact, with the same deepest distances (1e-9)."""
    name, m, mj = gym
    d = mujoco.MjData(mj)
    mujoco.mj_resetData(mj, d)
    for _ in range(300):
        mujoco.mj_step(mj, d)
    d.qvel[:] = 0
    mujoco.mj_forward(mj, d)
    names = _geom_names(mj)
    theirs = {}
    for k in range(d.ncon):
        c = d.contact[k]
        key = (names[c.geom1], names[c.geom2])
        theirs[key] = min(theirs.get(key, np.inf), c.dist)
    el = _contact(m)
    cand = el.candidates(m, jnp.asarray(d.qpos))
    pairs = el.pair_list()
    margin = np.asarray(el.margin)
    ours = {}
    for dist, p in zip(np.asarray(cand["dist"]), cand["pair"]):
        if dist < margin[p]:
            ours[pairs[p]] = min(ours.get(pairs[p], np.inf), float(dist))
    assert set(ours) == set(theirs) and len(ours) >= 2, (name, sorted(ours), sorted(theirs))
    for key in theirs:
        assert abs(ours[key] - theirs[key]) < 1e-9, key


MIX = """<mujoco><option timestep="0.005"/>
<worldbody>
  <geom name="floor" type="plane" size="5 5 .1" friction="0.8 0.01 0.001" solref="0.03 0.9" margin="0.002"/>
  <body name="a" pos="0 0 0.2"><freejoint/>
    <geom name="ga" type="sphere" size="0.1" friction="0.5 0.02 0.0005" condim="4" solmix="3"
          solref="0.004 1.1" solimp="0.8 0.9 0.002 0.5 2" margin="0.001"/></body>
  <body name="b" pos="0.5 0 0.2"><freejoint/>
    <geom name="gb" type="box" size="0.1 0.1 0.1" friction="1.2 0.03 0.002" condim="6" priority="1"
          solref="0.05 0.7"/></body>
  <body name="c" pos="1 0 0.2"><freejoint/>
    <geom name="gc" type="capsule" fromto="0 0 0 0.2 0 0" size="0.05" condim="1"/></body>
</worldbody>
<contact><pair geom1="ga" geom2="gc" friction="0.3 0.3 0.004 0.0002 0.0002" condim="3" solref="0.02 0.5"
  margin="10"/>
  <exclude body1="b" body2="c"/></contact>
</mujoco>"""


def test_pair_parameters_mix_as_mujocos():
    """Per colliding pair (every geom overlapping its neighbours), the condim,
    friction (slide, torsion, roll, zero past condim), margin, and the stiffness
    and damping of the law from MuJoCo's runtime contact parameters (mixed
    solref with refsafe, the effective mass from body_invweight0) equal what
    MuJoCo puts in d.contact; the excluded pair is absent."""
    m = jaxmbd.load_mjcf(MIX, warn=False)
    mj = mujoco.MjModel.from_xml_string(MIX)
    mj.geom_margin[:] += 10.0          # every pair reports (the margins' sum is compared below)
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    names = _geom_names(mj)
    el = _contact(m)
    pairs = el.pair_list()
    assert ("gb", "gc") not in pairs and ("gc", "gb") not in pairs
    seen = 0
    for k in range(d.ncon):
        c = d.contact[k]
        key = (names[c.geom1], names[c.geom2])
        i = pairs.index(key)
        fr = np.zeros(3)
        nd = {1: 0, 3: 1, 4: 2, 6: 3}[int(c.dim)]
        fr[:nd] = np.asarray(c.friction)[[0, 2, 3]][:nd]
        np.testing.assert_allclose(el.friction[i], fr, rtol=1e-12, err_msg=str(key))
        dynamic = key != ("ga", "gc")           # the explicit pair keeps its own margin
        np.testing.assert_allclose(float(el.margin[i]) + (20.0 if dynamic else 0.0), c.includemargin, rtol=1e-12,
                                   err_msg=str(key))
        tc, dr = max(c.solref[0], 2 * mj.opt.timestep), c.solref[1]
        b1, b2 = mj.geom_bodyid[c.geom1], mj.geom_bodyid[c.geom2]
        meff = 1.0 / (mj.body_invweight0[b1, 0] + mj.body_invweight0[b2, 0])
        dmax = c.solimp[1]
        np.testing.assert_allclose(el.stiffness[i], meff / (tc * dr) ** 2 / (1 - dmax), rtol=1e-9, err_msg=str(key))
        np.testing.assert_allclose(el.viscous[i], meff * 2.0 / tc / np.sqrt(1 - dmax), rtol=1e-9, err_msg=str(key))
        assert float(el.damping[i]) == 0.0
        np.testing.assert_allclose(el.width[i], c.solimp[2], rtol=1e-12, err_msg=str(key))
        seen += 1
    assert seen >= 4


def test_host_mass_matrix_and_inverse_weights_equal_the_crba_and_jacfwd():
    """The host-side mass matrix and inverse weights (the solref mapping's effective masses, the
    actuators' dampratios) against an independent path: jax.jacfwd of the bodies' centres of mass
    through forward kinematics, and the CRBA's H, on a random tree with every joint type at a random
    configuration, armature included."""
    from jaxmbd.crba import host_mass_matrix, mass_matrix
    from jaxmbd.forces.contact import inverse_weights
    from jaxmbd.kinematics import forward_kinematics, integrate_q, normalize_q
    from jaxmbd.models import random_tree_builder
    b = random_tree_builder(3, 9, joint_types=("revolute", "prismatic", "spherical", "helical", "planar",
                                                "universal"), root_joint="free")
    m = b.build()
    import dataclasses
    m = dataclasses.replace(m, armature=jnp.linspace(0.0, 0.3, m.nv))
    q = normalize_q(m, m.q0 + 0.4 * jax.random.normal(jax.random.PRNGKey(1), (m.nq,)))

    def coms(x):
        kin = forward_kinematics(m, integrate_q(m, q, x))
        return kin.pos + jnp.einsum("nij,nj->ni", kin.rot, m.com)
    J = jax.jacfwd(coms)(jnp.zeros(m.nv))
    H = mass_matrix(m, q)
    np.testing.assert_allclose(host_mass_matrix(m, q), H, rtol=0, atol=1e-12 * float(jnp.abs(H).max()))
    Hinv = jnp.linalg.inv(H)
    body = jnp.trace(jnp.einsum("nik,kl,njl->nij", J, Hinv, J), axis1=1, axis2=2) / 3.0
    got_body, got_dof = inverse_weights(m, q)
    assert len(set(m.topo.jtype)) >= 6
    np.testing.assert_allclose(got_body, body, rtol=1e-12, atol=0)
    np.testing.assert_allclose(got_dof, jnp.diagonal(Hinv), rtol=1e-12, atol=0)


@pytest.mark.parametrize("geom,msg", [
    ('<geom name="x" type="foo" size="0.1"/>', "unknown geom type 'foo'"),
    ('<geom name="x" type="sphere" size="-0.1"/>', "needs 1 positive size"),
    ('<geom name="x" type="sphere" size="0.1" friction="-1 0 0"/>', "friction must be non-negative"),
    ('<geom name="x" type="sphere" size="0.1" condim="2"/>', "condim 2 is not 1, 3, 4 or 6"),
])
def test_bad_collision_geoms_are_refused_naming_the_geom(geom, msg):
    doc = f'<mujoco><worldbody><body name="b"><freejoint/>{geom}<inertial pos="0 0 0" mass="1" ' \
          f'diaginertia="1 1 1"/></body></worldbody></mujoco>'
    with pytest.raises(Exception, match=msg) as e:
        jaxmbd.load_mjcf(doc, warn=False)
    assert "'x'" in str(e.value)


def test_a_pair_or_exclude_naming_nothing_is_refused():
    base = ('<mujoco><worldbody><geom name="floor" type="plane" size="1 1 1"/><body name="b"><freejoint/>'
            '<geom name="s" type="sphere" size="0.1"/></body></worldbody><contact>{}</contact></mujoco>')
    with pytest.raises(Exception, match="geom2 'nope' is not a geom"):
        jaxmbd.load_mjcf(base.format('<pair geom1="s" geom2="nope"/>'), warn=False)
    with pytest.raises(Exception, match="body2 'nope' is not a body"):
        jaxmbd.load_mjcf(base.format('<exclude body1="b" body2="nope"/>'), warn=False)


def test_unsupported_contact_features_are_listed_in_the_warning(tmp_path):
    doc = """<mujoco><asset><hfield name="h" nrow="2" ncol="2" size="1 1 0.1 0.1"/></asset>
    <worldbody><geom type="hfield" hfield="h"/><geom name="floor" type="plane" size="1 1 1" gap="0.01"/>
    <geom name="sd" type="sdf"/>
    <body name="b"><freejoint/><geom name="s" type="sphere" size="0.1"/>
    <geom name="cyl" type="cylinder" size="0.05 0.1" pos="0 0 0.3"/></body>
    <body name="c" pos="1 0 0"><freejoint/><geom name="e" type="ellipsoid" size="0.1 0.2 0.3"/></body>
    </worldbody></mujoco>"""
    info = jaxmbd.load_mjcf(doc, return_info=True, warn=False)
    text = " | ".join(info.unsupported)
    assert "sdf geoms (1)" in text and "contact gaps (floor)" in text and "hfield" not in text
    el = _contact(info.model)
    assert ("floor", "s") in el.pair_list() and ("geom0", "s") in el.pair_list()   # height fields collide


@pytest.mark.long
def test_a_loaded_ant_stands_on_its_floor():
    """The gymnasium ant dropped onto its floor lands on its legs: the torso
    (radius 0.25) stays above 0.3, held by the feet and the joint limits, and
    at the end it folds no faster than 5 cm/s (unactuated, its legs yield
    slowly against joint damping, as MuJoCo's ant does at about 7 mm/s); no
    geom sinks 1 cm into the floor; with
    the default integrator settings of a user (Rosenbrock, tol 1e-6)."""
    m = jaxmbd.load_mjcf(gym_asset("ant.xml"), warn=False)
    sol = jaxmbd.simulate(m, t1=1.0, integrator=jaxmbd.integrators.RosenbrockNystrom4(),
                          save=Save(ts=jnp.linspace(0.0, 1.0, 11)))
    assert int(sol.status) == 0, jaxmbd.status_name(sol.status)
    z = np.asarray(sol.qs[:, 2])
    assert z.min() > 0.3 and abs(z[-1] - z[-2]) / 0.1 < 0.05
    depth = jax.vmap(lambda q, v: -jnp.min(jaxmbd.contact_forces(m, q, v)["dist"]))(sol.qs, sol.vs)
    assert float(depth.max()) < 0.01             # geometric overlap (the law acts from the 1 cm margin on)
