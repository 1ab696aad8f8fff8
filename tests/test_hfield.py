"""Height fields (jaxmbd.contact.hfield) against MuJoCo: the elevation data MuJoCo compiles from an
attribute, its binary format and PNG images; single-state contacts with spheres, capsules, boxes and
meshes (d.contact); a ball and a box at rest in a valley, and a small quadruped standing on rough
terrain from its keyframe, each against mujoco.mj_step runs of the same file."""

import struct

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxmbd
from jaxmbd import Inputs, Save, Start, Steps
from jaxmbd.contact import geometry as G
from jaxmbd.contact.hfield import HField, window_size
from jaxmbd.forces.contact import Contact
from jaxmbd.integrators import RK4

jax.config.update("jax_enable_x64", True)


def _elevation_attr(grid):
    """MJCF elevation text of a grid whose row 0 is at -y (the attribute lists the +y row first)."""
    return " ".join(f"{v:.17g}" for v in np.asarray(grid)[::-1].ravel())


def _contact_el(m):
    return [e for e in m.forces if isinstance(e, Contact)][0]


def _scene(asset, extra="", compiler=""):
    return f"""<mujoco>{compiler}<asset>{asset}</asset><worldbody>
      <geom name="ground" type="hfield" hfield="h" pos="0.1 -0.05 0.02" euler="0 0 20"/>
      <body name="b" pos="0 0 0.5"><freejoint/><geom name="g" type="sphere" size="0.1"/></body>{extra}
    </worldbody></mujoco>"""


def _jaxmbd_field(m):
    el = _contact_el(m)
    nrow, ncol = el.hfield_dims[0]
    return np.asarray(el.hfield_data[0, :nrow, :ncol]), np.asarray(el.hfield_size[0])


def test_elevation_binary_and_png_data_are_mujocos(tmp_path):
    """The normalized grid jaxmbd reads equals MuJoCo's hfield_data (row r at y index r) from the
    elevation attribute, MuJoCo's binary file, and 8-bit grey, 16-bit grey, palette and RGB PNG images; a
    constant field is zeros."""
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    size = "1.2 0.8 0.3 0.1"
    grid = rng.uniform(-2, 5, (5, 7))
    with open(tmp_path / "f.bin", "wb") as f:
        f.write(struct.pack("ii", 6, 4) + rng.uniform(0, 3, (6, 4)).astype(np.float32).tobytes())
    Image.fromarray(rng.integers(0, 256, (5, 9)).astype(np.uint8), "L").save(tmp_path / "g.png")
    Image.fromarray(rng.integers(0, 65536, (4, 6)).astype(np.uint16)).save(tmp_path / "g16.png")
    Image.fromarray(rng.integers(0, 256, (6, 8)).astype(np.uint8), "L").convert("P").save(tmp_path / "p.png")
    Image.fromarray(rng.integers(0, 256, (7, 5, 3)).astype(np.uint8), "RGB").save(tmp_path / "c.png")
    comp = f'<compiler meshdir="{tmp_path}"/>'
    assets = [f'<hfield name="h" nrow="5" ncol="7" size="{size}" elevation="{_elevation_attr(grid)}"/>',
              f'<hfield name="h" nrow="3" ncol="4" size="{size}" elevation="{" ".join(["2"] * 12)}"/>',
              f'<hfield name="h" nrow="3" ncol="4" size="{size}"/>'] + \
        [f'<hfield name="h" file="{f}" size="{size}"/>' for f in ("f.bin", "g.png", "g16.png", "p.png", "c.png")]
    for asset in assets:
        xml = _scene(asset, compiler=comp)
        mj = mujoco.MjModel.from_xml_string(xml)
        ours, s4 = _jaxmbd_field(jaxmbd.load_mjcf(xml, warn=False))
        theirs = mj.hfield_data.reshape(mj.hfield_nrow[0], mj.hfield_ncol[0])
        assert ours.shape == theirs.shape, asset
        np.testing.assert_allclose(ours, theirs, atol=1e-6, err_msg=asset)
        np.testing.assert_allclose(s4, mj.hfield_size[0])
    assert np.abs(theirs).max() > 0.9      # the last (RGB) one is not all zeros


def test_bad_height_fields_are_reported():
    b = jaxmbd.ModelBuilder()
    with pytest.raises(ValueError, match="needs its elevation"):
        b.add_geom("world", "hfield", (1, 1, 0.1, 0.1))
    with pytest.raises(ValueError, match="4 positive numbers"):
        b.add_geom("world", "hfield", (1, 1, 0.1), elevation=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="nrow >= 2"):
        b.add_geom("world", "hfield", (1, 1, 0.1, 0.1), elevation=np.zeros((1, 3)))
    with pytest.raises(ValueError, match="elevation is for height fields"):
        b.add_geom("world", "box", (1, 1, 0.1), elevation=np.zeros((3, 3)))
    bad = {'<hfield name="h" nrow="3" ncol="3" size="1 1 0.1 0.1" elevation="1 2 3"/>': "elevation has 3 numbers",
           '<hfield name="h" file="nowhere.bin" size="1 1 0.1 0.1"/>': "cannot read",
           '<hfield name="h" nrow="3" ncol="3" size="1 1 0.1"/>': "4 positive numbers",
           '<hfield name="x" nrow="3" ncol="3" size="1 1 0.1 0.1"/>': "no hfield asset named 'h'"}
    for asset, msg in bad.items():
        with pytest.raises(jaxmbd.io.mjcf.MJCFError, match=msg):
            jaxmbd.load_mjcf(_scene(asset), warn=False)


def _field():
    rng = np.random.default_rng(1)
    nrow, ncol = 9, 11
    grid = rng.uniform(0, 1, (nrow, ncol))
    return grid, np.array([1.0, 0.8, 0.3, 0.1]), nrow, ncol


def _posed_contacts(kind, gsize, n, seed, depth=0.004, mesh=""):
    """MuJoCo's contacts and the jaxmbd narrow phase's at n random poses of a geom lowered ``depth``
    into a rough field: [(ours (dist, pos, normal) of the candidates with dist < 0, MuJoCo's), ...]."""
    grid, size, nrow, ncol = _field()
    geom = f'type="mesh" mesh="m"' if kind == "mesh" else f'type="{kind}" size="{gsize}"'
    xml = f"""<mujoco><option><flag gravity="disable"/></option><asset>{mesh}
      <hfield name="h" nrow="{nrow}" ncol="{ncol}" size="{' '.join(map(str, size))}"
              elevation="{_elevation_attr(grid)}"/></asset>
      <worldbody><geom type="hfield" hfield="h" pos="0.1 -0.05 0.02" euler="0 0 20"/>
      <body pos="0 0 0.5"><freejoint/><geom {geom}/></body></worldbody></mujoco>"""
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    data = mj.hfield_data.reshape(nrow, ncol).astype(np.float64)
    hf = HField(data, size, np.array([nrow, ncol]), np.zeros(window_size(size, nrow, ncol, mj.geom_rbound[1])))
    s2 = (G.make_mesh(mj.mesh_vert.astype(np.float64)) if kind == "mesh" else mj.geom_size[1])
    rng = np.random.default_rng(seed)
    poses, out = [], []
    for _ in range(n):
        d.qpos[:2] = rng.uniform(-0.5, 0.5), rng.uniform(-0.4, 0.4)
        q = rng.normal(size=4)
        d.qpos[3:7] = q / np.linalg.norm(q)
        lo, hi = -0.5, 1.0          # the height where it first touches, by bisection
        for _ in range(45):
            d.qpos[2] = 0.5 * (lo + hi)
            mujoco.mj_forward(mj, d)
            lo, hi = (d.qpos[2], hi) if d.ncon else (lo, d.qpos[2])
        d.qpos[2] = lo - depth
        mujoco.mj_forward(mj, d)
        poses.append((d.geom_xmat[0].reshape(3, 3).copy(), d.geom_xpos[0].copy(), d.geom_xmat[1].reshape(3, 3).copy(),
                      d.geom_xpos[1].copy()))
        out.append([(d.contact[i].dist, d.contact[i].pos.copy(), d.contact[i].frame[:3].copy()) for i in range(d.ncon)])
    R1, p1, R2, p2 = (np.stack(x) for x in zip(*poses))
    b = lambda x: jax.tree.map(lambda a: np.broadcast_to(a, (n,) + np.shape(a)), x)  # noqa: E731
    c = G.collide_batch("hfield", kind, (R1, p1), b(hf), (R2, p2), b(s2))
    res = []
    for k in range(n):
        dist = np.asarray(c.dist[k])
        on = dist < 0
        res.append(((dist[on], np.asarray(c.pos[k])[on], np.asarray(c.frame[k, :, 0])[on]), out[k]))
    return res


def _same_sets(res, tol=1e-9):
    for (d, p, n), theirs in res:
        assert len(d) == len(theirs) > 0
        for (dt, pt, nt), a, x, u in zip(theirs, d, p, n):    # both in MuJoCo's prism order
            assert abs(a - dt) < tol and np.abs(x - pt).max() < 1e-7 and np.abs(u - nt).max() < 1e-6


def test_sphere_contacts_are_mujocos():
    """A sphere 4 mm into a rough field at random poses: the same contacts as MuJoCo's d.contact, one
    per prism it penetrates, in MuJoCo's order (dist to 1e-9, pos 1e-7, normal 1e-6); under vmap
    (collide_batch); the distance's gradient is the normal's (the field pushes along it)."""
    _same_sets(_posed_contacts("sphere", "0.12", 6, 0))
    grid, size, nrow, ncol = _field()
    hf = HField(grid, size, np.array([nrow, ncol]), np.zeros((3, 3)))
    f = lambda p: jnp.min(G.collide("hfield", "sphere", (np.eye(3), np.zeros(3)), hf, (np.eye(3), p),  # noqa: E731
                                    np.array([0.12, 0, 0])).dist)
    p = jnp.array([0.13, -0.21, 0.3])
    c = G.collide("hfield", "sphere", (np.eye(3), np.zeros(3)), hf, (np.eye(3), p), np.array([0.12, 0, 0]))
    k = int(jnp.argmin(c.dist))
    np.testing.assert_allclose(jax.grad(f)(p), c.frame[k, 0], atol=1e-9)


@pytest.mark.long
def test_capsule_box_and_mesh_contacts_are_mujocos():
    """Capsules: the same contacts as MuJoCo's.  Boxes and meshes (polytopes, GJK/EPA on each prism):
    as many contacts as MuJoCo, ours the exact penetration depth of each prism (checked against the
    separating-axis depth by tests/test_contact_convex.py's machinery); MuJoCo's EPA sometimes stops
    short (a shallower depth: its value is a lower bound of the depth), so ours is never shallower,
    and where they agree the point and normal agree."""
    _same_sets(_posed_contacts("capsule", "0.05 0.1", 6, 1))
    verts = np.random.default_rng(5).normal(size=(10, 3)) * [0.08, 0.06, 0.05]
    mesh = f'<mesh name="m" vertex="{" ".join(f"{v:.9g}" for v in verts.ravel())}"/>'
    for kind, gs, extra in (("box", "0.1 0.07 0.05", ""), ("mesh", "", mesh)):
        agree = total = 0
        for (d, p, n), theirs in _posed_contacts(kind, gs, 8, 2, depth=0.0005, mesh=extra):
            assert len(d) == len(theirs) > 0
            for (dt, pt, nt), a, x, u in zip(theirs, d, p, n):
                assert a <= dt + 1e-9
                if abs(a - dt) < 1e-9:
                    agree += 1
                    assert np.abs(x - pt).max() < 1e-6 and np.abs(u - nt).max() < 1e-5
                total += 1
        assert agree >= 0.75 * total, (kind, agree, total)


def _valley():
    """A V-shaped valley along x (slope 0.2), flat along x where the bodies rest, rising at the ends."""
    yy, xx = np.meshgrid(np.linspace(-1, 1, 11), np.linspace(-1, 1, 21), indexing="ij")
    grid = np.abs(yy) * (1 + 0.3 * (xx > 0.75)) + 0.5 * np.maximum(np.abs(xx) - 0.75, 0)
    return f"""<mujoco><option timestep="0.002" cone="elliptic"/>
      <asset><hfield name="valley" nrow="11" ncol="21" size="1.0 0.5 0.1 0.05"
                     elevation="{_elevation_attr(grid)}"/></asset>
      <worldbody><geom name="ground" type="hfield" hfield="valley"/>
        <body name="ball" pos="-0.43 0 0.0826"><freejoint/><geom type="sphere" size="0.08" mass="1"/></body>
        <body name="box" pos="0.4 0 0.0575"><freejoint/><geom type="box" size="0.1 0.085 0.04" mass="2"/></body>
      </worldbody></mujoco>"""


@pytest.mark.long
def test_a_ball_and_a_box_rest_in_a_valley_where_mujoco_rests():
    """A ball and a box dropped 1 mm into a V valley of a height field (the box on its two long bottom
    edges, 8 prisms each side): after 1 s (RK4 at the file's 2 ms) both heights are within 1e-4 m of
    MuJoCo's (mj_step, its own Euler) and both bodies are at rest."""
    xml = _valley()
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    while d.time < 1.0 - 1e-9:
        mujoco.mj_step(mj, d)
    m = jaxmbd.load_mjcf(xml, warn=False, contact_rows=16)
    sol = jaxmbd.simulate(m, Start(jnp.asarray(mj.qpos0), jnp.zeros(mj.nv)), 1.0, integrator=RK4(),
                          steps=Steps(dt0=mj.opt.timestep), save=Save(ts=jnp.asarray([1.0])))
    assert int(sol.status) == 0
    q, v = np.asarray(sol.qs[-1]), np.asarray(sol.vs[-1])
    assert abs(q[2] - d.qpos[2]) < 1e-4 and abs(q[9] - d.qpos[9]) < 1e-4, (q[[2, 9]], d.qpos[[2, 9]])
    assert abs(q[2] - 0.0826) > 1e-3 and abs(q[9] - 0.0575) > 1e-3     # they did settle into the field
    assert np.abs(v).max() < 5e-3 and np.abs(d.qvel).max() < 5e-3


def _quadruped():
    """A small quadruped (floating box base, four hip-knee legs, sphere feet in a collision class,
    position servos, a ``home`` keyframe with the feet up to 2 cm in the terrain) on a rough height
    field of random bumps."""
    rng = np.random.default_rng(7)
    yy, xx = np.meshgrid(np.linspace(-1, 1, 21), np.linspace(-1, 1, 21), indexing="ij")
    grid = sum(rng.uniform(0.3, 1) * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 0.02)
               for cx, cy in rng.uniform(-0.8, 0.8, (14, 2))) + 0.15 * rng.uniform(size=xx.shape)
    leg = """
      <body name="{n}_thigh" pos="{x} {y} 0">
        <joint name="{n}_hip" class="hip"/>
        <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.6"/>
        <body name="{n}_shin" pos="0 0 -0.2">
          <joint name="{n}_knee" class="knee"/>
          <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.015" mass="0.2"/>
          <geom name="{n}_foot" class="foot" pos="0 0 -0.2"/>
        </body>
      </body>"""
    names = ("fl", "fr", "hl", "hr")
    legs = "".join(leg.format(n=n, x=x, y=y) for n, x, y in zip(names, (0.2, 0.2, -0.2, -0.2), (0.12, -0.12) * 2))
    acts = "".join(f'<position class="quad" name="{n}_{j}" joint="{n}_{j}"/>' for n in names for j in ("hip", "knee"))
    pose = " ".join(["0.6 -1.2"] * 4)
    return f"""<mujoco model="hfield quadruped">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.002" cone="elliptic"/>
  <default>
    <default class="quad">
      <joint damping="0.5" armature="0.01"/>
      <position kp="60" dampratio="1" forcerange="-30 30" inheritrange="1"/>
      <default class="hip"><joint axis="0 1 0" range="-1.2 1.2"/></default>
      <default class="knee"><joint axis="0 1 0" range="-2.4 0"/></default>
      <default class="visual"><geom contype="0" conaffinity="0" group="2"/></default>
      <default class="foot"><geom type="sphere" size="0.025" mass="0.05" friction="0.9" group="3"/></default>
    </default>
  </default>
  <asset><hfield name="rough" nrow="21" ncol="21" size="1.5 1.5 0.05 0.1" elevation="{_elevation_attr(grid)}"/></asset>
  <worldbody>
    <geom name="terrain" type="hfield" hfield="rough"/>
    <body name="base" pos="0 0 0.35" childclass="quad">
      <freejoint name="root"/>
      <geom class="visual" type="box" size="0.27 0.12 0.05" mass="6"/>{legs}
    </body>
  </worldbody>
  <actuator>{acts}</actuator>
  <keyframe><key name="home" qpos="0 0 0.35 1 0 0 0 {pose}" ctrl="{pose}"/></keyframe>
</mujoco>"""


@pytest.mark.long
def test_a_quadruped_stands_on_rough_terrain_as_mujoco():
    """From its keyframe (feet 0.5-1.8 cm in the bumps) under its ctrl, 1 s: the base height within
    5 mm and every joint within 0.05 rad of MuJoCo's run at its own timestep (RK4 at that step)."""
    from test_robots_on_floors import _mj_run
    xml = _quadruped()
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    mujoco.mj_resetDataKeyframe(mj, d, 0)
    mujoco.mj_forward(mj, d)
    assert d.ncon >= 4 and min(d.contact[i].dist for i in range(d.ncon)) < -0.01
    ts = np.linspace(0.0, 1.0, 11)
    ref = _mj_run(mj, ts)
    m = jaxmbd.load_mjcf(xml, warn=False, contact_rows=16)
    key = m.keyframes["home"]
    sol = jaxmbd.simulate(m, Start(jnp.asarray(key.qpos), jnp.asarray(key.qvel)), 1.0, integrator=RK4(),
                          steps=Steps(dt0=mj.opt.timestep), inputs=Inputs(ctrl=jnp.asarray(key.ctrl)),
                          save=Save(ts=jnp.asarray(ts)))
    assert int(sol.status) == 0
    qs = np.asarray(sol.qs)
    assert np.abs(qs[:, 2] - ref[:, 2]).max() < 0.005
    assert np.abs(qs[:, 7:] - ref[:, 7:]).max() < 0.05


def test_a_height_field_is_drawn_as_its_grid():
    """The MJCF geom and a builder's collision geom are drawn as the mesh of the grid: one vertex per
    grid point at its height (plus the base's four), two triangles per cell plus sides and base."""
    grid = np.arange(12.0).reshape(3, 4)
    m = jaxmbd.load_mjcf(_scene(f'<hfield name="h" nrow="3" ncol="4" size="2 1 0.5 0.1" '
                                f'elevation="{_elevation_attr(grid)}"/>'), warn=False)
    V, F = m.visual_data.meshes["hfield:h"]
    assert V.shape == (16, 3) and len(F) == 2 * 6 + 2 + 2 * (3 + 2) + 4
    np.testing.assert_allclose(V[:12, 2], 0.5 * grid.ravel() / 11)
    np.testing.assert_allclose(V[:12, :2].reshape(3, 4, 2)[0, :, 0], [-2, -2 / 3, 2 / 3, 2])
    b = jaxmbd.ModelBuilder()
    b.add_body("ball", parent="world", joint="free", mass=1.0, inertia=np.eye(3) * 1e-3)
    b.add_geom("ball", "sphere", 0.1)
    b.add_geom("world", "hfield", (2, 1, 0.5, 0.1), elevation=grid, name="ground")
    mb = b.build()
    assert "hfield:ground" in mb.visual_data.meshes
    assert ("hfield", "sphere") in {(t1, t2) for t1, t2, _ in _contact_el(mb).groups}
