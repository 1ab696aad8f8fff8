"""The viewer (jaxmbd.view): the saved page holds the model's geoms with their sizes, colours and
groups and the bodies' poses at the saved states (forward kinematics to 1e-9, read back from the
page's scene); in a headless Chromium with no network the page renders the geoms where the
camera puts them, and moving its time slider changes the picture where a body moved and nowhere
else."""

import io
import os

import jax
import numpy as np
import pytest

import jaxmbd
from jaxmbd.browser import Page, find_chromium
from jaxmbd.view import read_page, view

ARM = """
<mujoco model="arm">
  <compiler angle="radian"/>
  <asset>
    <material name="red" rgba="0.85 0.1 0.1 1"/>
    <material name="blue" rgba="0.1 0.2 0.9 1"/>
    <mesh name="wedge" vertex="0 0 0  0.12 0 0  0 0.12 0  0 0 0.12  0.12 0.12 0.12"
          face="0 2 1  0 1 3  0 3 2  1 2 4  1 4 3  2 3 4"/>
  </asset>
  <default>
    <default class="visual"><geom contype="0" conaffinity="0" group="2"/></default>
    <default class="collision"><geom group="3"/></default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.05" rgba="0.9 0.9 0.9 1"/>
    <body name="base" pos="0 0 0.05">
      <geom class="visual" type="cylinder" size="0.08 0.05" material="blue"/>
      <body name="upper" pos="0 0 0.05">
        <joint name="shoulder" axis="0 1 0" range="-2 2"/>
        <geom class="visual" type="capsule" fromto="0 0 0 0 0 0.4" size="0.04" material="red"/>
        <geom class="collision" type="capsule" fromto="0 0 0 0 0 0.4" size="0.045"/>
        <body name="lower" pos="0 0 0.4">
          <joint name="elbow" axis="0 1 0" range="-2 2"/>
          <geom class="visual" type="box" pos="0 0 0.15" size="0.03 0.03 0.15" rgba="0.1 0.7 0.2 1"/>
          <geom class="visual" type="mesh" mesh="wedge" pos="0 0 0.3" rgba="0.9 0.7 0.1 1"/>
          <geom class="visual" type="ellipsoid" pos="0 0 -0.02" size="0.05 0.04 0.03" rgba="0.6 0.2 0.8 1"/>
          <geom class="collision" type="sphere" pos="0 0 0.32" size="0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><position joint="shoulder" kp="50"/><position joint="elbow" kp="20"/></actuator>
  <keyframe><key name="home" qpos="0.3 -0.6" ctrl="0.3 -0.6"/></keyframe>
</mujoco>
"""


def _free_box_model():
    """A free body with one geom of every primitive type and a mesh, a hinged child, a floor."""
    b = jaxmbd.ModelBuilder()
    b.add_body("body", "world", "free", pos=(0, 0, 0.5), mass=1.0, inertia=(0.01, 0.01, 0.01))
    b.add_body("arm", "body", "revolute", axis=(0, 1, 0), pos=(0.2, 0, 0), mass=0.2, com=(0.1, 0, 0),
               inertia=(0.001, 0.001, 0.001))
    b.add_geom("world", "plane")
    b.add_geom("body", "box", (0.1, 0.05, 0.02), name="box")
    b.add_geom("body", "sphere", (0.03,), pos=(0, 0.1, 0), name="ball")
    b.add_geom("body", "cylinder", (0.02, 0.04), pos=(0, -0.1, 0), quat=(0.9, 0.3, 0.1, 0.0), name="can")
    b.add_geom("body", "ellipsoid", (0.03, 0.02, 0.01), pos=(-0.1, 0, 0), name="egg")
    b.add_geom("arm", "capsule", (0.01, 0.08), pos=(0.1, 0, 0), quat=(0.7071, 0, 0.7071, 0), name="stick")
    b.add_geom("arm", "mesh", vertices=np.array([[0, 0, 0], [0.05, 0, 0], [0, 0.05, 0], [0, 0, 0.05]]),
               pos=(0.2, 0, 0), name="tet")
    return b.build()


def _random_states(model, B, T, seed=0):
    rng = np.random.default_rng(seed)
    q = np.tile(np.asarray(model.q0), (B, T, 1)) + 0.3 * rng.standard_normal((B, T, model.nq))
    if model.topo.jtype[0] == "free":
        quat = q[..., 3:7]
        q[..., 3:7] = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    return q


def _scene_at(msgs, time):
    """Each node's state after the messages recorded up to ``time``: name -> dict."""
    nodes = {}
    for t, m in msgs:
        if t > time + 1e-12 or "name" not in m:
            continue
        n = nodes.setdefault(m["name"], {"position": (0.0, 0.0, 0.0), "wxyz": (1.0, 0.0, 0.0, 0.0)})
        if m["type"] == "SetPositionMessage":
            n["position"] = tuple(m["position"])
        elif m["type"] == "SetOrientationMessage":
            n["wxyz"] = tuple(m["wxyz"])
        elif m["type"] == "SetSceneNodeVisibilityMessage":
            n["visible"] = m["visible"]
        elif m["type"] == "RemoveSceneNodeMessage":
            nodes.pop(m["name"])
        elif "props" in m:
            n.update(kind=m["type"], props=m["props"])
    return nodes


def _rot(wxyz):
    w, x, y, z = wxyz
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _check_page(model, v):
    """The page's scene against the model: geoms (type by extent, size, colour, group visibility,
    pose on the body) and body frames at every save (forward kinematics, to 1e-9)."""
    msgs = read_page(v.html())
    tree = getattr(model, "tree", model)
    n = tree.topo.n_bodies
    vis = tree.visual_data
    assert vis is not None and len(v.geoms) == len(vis.geoms)
    t0 = v.ts[0]
    fk = jax.jit(lambda q: jaxmbd.forward_kinematics(tree, getattr(model, "to_tree", lambda x: x)(q)))
    for ti, t in enumerate(v.ts):
        scene = _scene_at(msgs, t - t0)
        for k, m in enumerate(v.members):
            np.testing.assert_allclose(scene[f"/member{m}"]["position"], v.offsets[k], atol=1e-12)
            kin = fk(v.qs[k, ti])
            for i in range(n):
                node = scene[f"/member{m}/body{i}"]
                np.testing.assert_allclose(node["position"], np.asarray(kin.pos[i]), rtol=0, atol=1e-9)
                np.testing.assert_allclose(_rot(node["wxyz"]), np.asarray(kin.rot[i]), rtol=0, atol=1e-9)
    scene = _scene_at(msgs, 0.0)
    checked = 0
    for j, g in enumerate(vis.geoms):
        if g.type == "plane":
            node = scene[f"/world/geom{j}"]
            if g.size[0] > 0:
                assert node["props"]["width"] == pytest.approx(2 * g.size[0])
                assert node["props"]["height"] == pytest.approx(2 * g.size[1])
            continue
        for m in v.members:
            where = "world" if g.body < 0 else f"body{g.body}"
            node = scene[f"/member{m}/{where}/geom{j}"]
            assert node["kind"] == "MeshMessage"
            assert node.get("visible", True) == (g.group <= 2)
            assert tuple(node["props"]["color"]) == tuple(int(round(255 * c)) for c in g.rgba[:3])
            np.testing.assert_allclose(node["position"], g.pos, atol=1e-12)
            np.testing.assert_allclose(_rot(node["wxyz"]), np.reshape(g.rot, (3, 3)), atol=1e-12)
            V = node["props"]["vertices"].reshape(-1, 3).astype(np.float64)
            F = node["props"]["faces"].reshape(-1, 3)
            assert F.max() < len(V)
            s = np.asarray(g.size)
            ext = np.abs(V).max(0)
            tol = 1e-6 + 0.02 * np.max(s)      # float32 vertices; a tessellated curve stays within 2% of its size
            if g.type == "box":
                np.testing.assert_allclose(ext, s, atol=1e-6)
            elif g.type == "sphere":
                np.testing.assert_allclose(np.linalg.norm(V, axis=1), s[0], atol=1e-6)
            elif g.type == "ellipsoid":
                np.testing.assert_allclose(np.sum((V / s) ** 2, 1), 1.0, atol=1e-5)
            elif g.type == "cylinder":
                np.testing.assert_allclose(ext[2], s[1], atol=1e-6)
                assert np.max(np.linalg.norm(V[:, :2], axis=1)) == pytest.approx(s[0], abs=1e-6)
            elif g.type == "capsule":
                np.testing.assert_allclose(ext[2], s[1] + s[0], atol=tol)
                assert np.max(np.linalg.norm(V[:, :2], axis=1)) == pytest.approx(s[0], abs=tol)
            elif g.type == "mesh":
                np.testing.assert_allclose(V, vis.meshes[g.mesh][0], atol=0)
            checked += 1
    assert checked >= len(v.members) * sum(g.type != "plane" for g in vis.geoms)
    return msgs


def test_page_holds_the_geoms_and_the_bodies_poses_at_the_saved_states():
    """A builder model (every geom type, a free body and a hinge) and an MJCF arm (materials,
    classes, a mesh asset, a hidden collision group): each geom with its size, colour and pose on
    its body, each body frame at the forward kinematics of every save of every member."""
    m = _free_box_model()
    qs = _random_states(m, 3, 4)
    v = view(m, qs=qs, ts=[0.0, 0.1, 0.25, 0.4])
    msgs = _check_page(m, v)
    assert sum(1 for _, x in msgs if x["type"] == "MeshMessage") == 3 * 6
    assert not np.allclose(v.offsets[0], v.offsets[1])          # side by side
    v2 = view(m, qs=qs[:, :2], ts=[0.0, 1.0], members=[2, 0], layout="overlay")
    assert v2.members == [2, 0] and np.all(v2.offsets == 0)
    _check_page(m, v2)

    arm = jaxmbd.load_mjcf(ARM)
    byname = {g.name: g for g in arm.visual_data.geoms}
    red = [g for g in arm.visual_data.geoms if g.type == "capsule" and g.group == 2]
    assert red and red[0].rgba == (0.85, 0.1, 0.1, 1.0)         # the material's colour
    assert byname["floor"].size[:2] == (1.0, 1.0)
    assert sorted(g.group for g in arm.visual_data.geoms).count(3) == 2
    key = arm.keyframes["home"]
    qs = np.stack([np.linspace(0, 1, 3)[:, None] * key.qpos, -np.linspace(0, 1, 3)[:, None] * key.qpos])
    _check_page(arm, view(arm, qs=qs, ts=[0.0, 0.5, 1.0]))


def test_a_solution_and_a_model_without_geoms():
    """A Solution (batched or not) is taken as it is; a model with no geoms is drawn as sticks
    and balls, which ride on its bodies; bad arguments are named."""
    m = jaxmbd.models.double_pendulum()
    sol = jaxmbd.simulate(m, None, 0.2, integrator=jaxmbd.integrators.RK4(), steps=jaxmbd.Steps(dt0=0.01),
                          save=jaxmbd.Save(ts=np.linspace(0.05, 0.2, 4)))
    v = view(m, sol)
    assert v.qs.shape == (1, 4, m.nq) and {g.body for g in v.geoms} == {0, 1}
    msgs = read_page(v.html())
    scene = _scene_at(msgs, 0.15)
    kin = jaxmbd.forward_kinematics(m, sol.qs[-1])
    np.testing.assert_allclose(scene["/member0/body1"]["position"], np.asarray(kin.pos[1]), atol=1e-9)
    qs = np.asarray(sol.qs)[None].repeat(2, 0)
    qs[1, 2:] = np.nan                               # a member that failed after its second save
    v = view(m, qs=qs, ts=sol.ts)
    np.testing.assert_array_equal(v.qs[1, 2], v.qs[1, 1])
    with pytest.raises(ValueError, match="shape"):
        view(m, qs=np.zeros((3, m.nq + 1)))
    with pytest.raises(ValueError, match="members"):
        view(m, sol, members=[3])
    with pytest.raises(ValueError, match="layout"):
        view(m, sol, layout="ring")
    b = jaxmbd.ModelBuilder()
    b.add_body("a", "world", "revolute", axis=(0, 0, 1), mass=1.0, inertia=(0.1, 0.1, 0.1))
    for args, kw, match in ((("a", "cone", (1,)), {}, "unknown geom type"),
                            (("a", "box", (1, 2)), {}, "3 positive size"),
                            (("a", "sphere", (1,)), {"rgba": (1, 0, 0)}, "rgba"),
                            (("a", "sphere", (1,)), {"group": 7}, "group"),
                            (("nobody", "sphere", (1,)), {}, "not defined"),
                            (("a", "mesh"), {}, "vertices")):
        with pytest.raises(ValueError, match=match):
            b.add_visual(*args, **kw)


def test_the_page_is_self_contained():
    """Nothing in the page is fetched from elsewhere: no script, style or image source names a
    host (the browser tests below also open it with every network request refused)."""
    page = view(jaxmbd.models.pendulum()).html()
    import re
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "__VISER_EMBED_DATA__" in page


# -- in a browser --------------------------------------------------------------------------------

def _need_chromium():
    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium: .ci/run installs Debian's chromium package")
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)")


def _project(v, P, w, h):
    """Pixel (x, y) of world points P (..., 3) under the page's first camera (+z up)."""
    c = v.camera
    f = np.asarray(c.look_at) - c.position
    f /= np.linalg.norm(f)
    r = np.cross(f, [0.0, 0.0, 1.0])
    r /= np.linalg.norm(r)
    u = np.cross(r, f)
    d = np.asarray(P) - c.position
    x, y, z = d @ r, d @ u, d @ f
    t = np.tan(c.fov / 2)
    return np.stack([w / 2 * (1 + x / (z * t * w / h)), h / 2 * (1 - y / (z * t))], -1)


def _footprint(v, k, ti, bodies, w, h, pad=4):
    """Pixel box (x0, y0, x1, y1) of the geoms of ``bodies`` of member k at save ti."""
    from jaxmbd.view import _primitive
    pts = []
    for g in v.geoms:
        if g.body not in bodies or g.group > 2:
            continue
        V = v.meshes[g.mesh][0] if g.type == "mesh" else _primitive(g.type, g.size)[0]
        local = np.asarray(V, np.float64) @ np.reshape(g.rot, (3, 3)).T + g.pos
        pts.append(local @ v.rot[k, ti, g.body].T + v.pos[k, ti, g.body] + v.offsets[k])
    xy = _project(v, np.concatenate(pts), w, h)
    return xy.min(0) - pad, xy.max(0) + pad


def _image(png):
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def _shots(v, times, tmp_path, tries=4):
    """(canvas size, [(time shown, picture)] at ``times``).  The pictures count once the first
    time's picture, taken again after the others, is the same: a page still fading its scene in
    (its frames can stall for seconds on a loaded machine) gives another, and all are taken again."""
    path = tmp_path / "view.html"
    v.save(path)
    with Page(path, width=960, height=600) as page:
        page.wait_for("document.querySelector('canvas') !== null")
        size = page.evaluate("(() => { const r = document.querySelector('canvas').getBoundingClientRect(); "
                             "return [r.width, r.height]; })()")
        for _ in range(tries):
            out = [(page.seek(t, 0.0, v.duration), _image(page.screenshot())) for t in times]
            page.seek(times[0], 0.0, v.duration)
            if not np.any(np.abs(_image(page.screenshot()) - out[0][1]) > 24):
                break
    return size, out


def _frame_at(v, shown):
    """The save whose state the page shows at time ``shown`` on its slider."""
    return int(np.searchsorted(v.ts - v.ts[0], shown + 1e-9) - 1)


def _changed_only_inside(a, b, boxes, h):
    """Pixels that differ between two pictures (the canvas, above the playback bar) lie inside the
    boxes, and some do."""
    diff = np.any(np.abs(a - b) > 24, -1)[:int(h)]
    ys, xs = np.nonzero(diff)
    assert len(xs) > 50, "nothing moved in the picture"
    inside = np.zeros(len(xs), bool)
    for lo, hi in boxes:
        inside |= (xs >= lo[0]) & (xs <= hi[0]) & (ys >= lo[1]) & (ys <= hi[1])
    out = ~inside
    where = f" (x {xs[out].min()}-{xs[out].max()}, y {ys[out].min()}-{ys[out].max()})" if out.any() else ""
    assert inside.mean() > 0.995, f"{out.sum()} of {len(xs)} changed pixels outside where the bodies moved{where}"


def _hue_close(pixel, rgba):
    """The pixel's colour is the geom's, shaded: its channels are ordered as the geom's are."""
    want = np.asarray(rgba[:3])
    p = np.asarray(pixel, float)
    return np.argmax(p) == np.argmax(want) and (p.max() - p.min()) > 40


@pytest.mark.long
def test_a_built_in_model_renders_and_the_slider_moves_only_what_moved(tmp_path):
    """The built-in quadruped, two members side by side; member 0's torso rises between the
    saves, member 1 stands still: not blank; the torso is drawn in its colour where the camera
    puts it; moving the time slider changes pixels only around member 0's bodies."""
    _need_chromium()
    m = jaxmbd.models.quadruped()
    qs = np.tile(np.asarray(m.q0), (2, 3, 1))
    qs[0, 1:, 2] += 0.15
    qs[0, 2, 2] += 0.05
    v = view(m, qs=qs, ts=[0.0, 0.5, 1.0])
    (w, h), [(s0, a), (s1, b)] = _shots(v, [0.2, 0.7], tmp_path)
    f0, f1 = _frame_at(v, s0), _frame_at(v, s1)
    assert (f0, f1) == (0, 1)
    for img in (a, b):
        assert np.mean(np.any(img[:int(h)] < 235, -1)) > 0.05           # not blank
    torso = v.geoms[[g.body for g in v.geoms].index(0)]
    for k in range(2):
        x, y = _project(v, v.pos[k, f1, 0] + v.offsets[k] + np.asarray(torso.pos), w, h)
        assert _hue_close(b[int(y), int(x)], torso.rgba), (k, b[int(y), int(x)])
    n = m.topo.n_bodies
    boxes = [_footprint(v, 0, f, range(n), w, h) for f in (f0, f1)]
    _changed_only_inside(a, b, boxes, h)


@pytest.mark.long
def test_an_mjcf_robot_renders_in_its_colours_and_the_slider_moves_its_links(tmp_path):
    """The MJCF arm: its links in their materials' and rgba colours where the camera puts them;
    when only the elbow turns between the saves, only the lower link's pixels change."""
    _need_chromium()
    arm = jaxmbd.load_mjcf(ARM)
    qs = np.array([[[0.4, -0.3], [0.4, -0.3], [0.4, 1.2]]])
    v = view(arm, qs=qs, ts=[0.0, 0.4, 0.8])
    (w, h), [(s0, a), (s1, b)] = _shots(v, [0.5, 1.0], tmp_path)
    f0, f1 = _frame_at(v, s0), _frame_at(v, s1)
    assert (f0, f1) == (1, 2)
    upper = arm.topo.names.index("upper")
    lower = arm.topo.names.index("lower")
    for img, f in ((a, f0), (b, f1)):
        assert np.mean(np.any(img[:int(h)] < 235, -1)) > 0.02
        for g in arm.visual_data.geoms:
            if g.group != 2 or g.type not in ("capsule", "box"):
                continue
            centre = v.rot[0, f, g.body] @ np.asarray(g.pos) + v.pos[0, f, g.body]
            x, y = _project(v, centre + v.offsets[0], w, h)
            assert _hue_close(img[int(y), int(x)], g.rgba), (g.name, img[int(y), int(x)], g.rgba)
    boxes = [_footprint(v, 0, f, {lower}, w, h) for f in (f0, f1)]
    assert upper != lower
    _changed_only_inside(a, b, boxes, h)


def test_the_command_writes_the_page_and_views_a_resumed_run(tmp_path, monkeypatch, capsys):
    """``jaxmbd simulate`` writes the run's page beside its .npz; ``jaxmbd view`` draws a finished
    run (here one that was interrupted and resumed) from its .npz: the body frames at the saved
    states equal forward kinematics; bad input is one line and exit status 2."""
    from test_cli import PENDULUM_XML, interrupted, one_line_error, small

    from jaxmbd.cli import main
    xml = tmp_path / "robot.xml"
    xml.write_text(PENDULUM_XML)
    out = tmp_path / "run.npz"
    interrupted(monkeypatch, capsys, small(str(xml), out), after=2)
    assert main(small(str(xml), out, "--resume")) == 0
    assert "wrote " + str(tmp_path / "run.html") in capsys.readouterr().out
    assert main(["view", str(out), "--out", str(tmp_path / "again.html"), "--layout", "overlay"]) == 0
    assert "again.html (2 of 2 members, 5 saves" in capsys.readouterr().out
    model = jaxmbd.load_mjcf(str(xml), warn=False)
    run = np.load(out)
    for page in ("run.html", "again.html"):
        msgs = read_page((tmp_path / page).read_text())
        last = _scene_at(msgs, float(run["ts"][-1] - run["ts"][0]))
        for m in range(2):
            kin = jaxmbd.forward_kinematics(model, run["qs"][m, -1])
            np.testing.assert_allclose(last[f"/member{m}/body0"]["position"], np.asarray(kin.pos[0]), atol=1e-9)
            np.testing.assert_allclose(_rot(last[f"/member{m}/body0"]["wxyz"]), np.asarray(kin.rot[0]), atol=1e-9)
    assert main(["view", str(out), "--out", str(tmp_path / "again.html")]) == 2
    assert "exists" in one_line_error(capsys)
    assert main(["view", str(tmp_path / "nothing.npz")]) == 2
    assert "no such run file" in one_line_error(capsys)
    assert main(["view", str(xml)]) == 2
    assert "not a run" in one_line_error(capsys)


URDF = """<robot name="two">
  <material name="teal"><color rgba="0.1 0.6 0.6 1"/></material>
  <link name="base">
    <inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><box size="0.2 0.1 0.05"/></geometry><material name="teal"/></visual>
  </link>
  <link name="arm">
    <inertial><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><origin xyz="0 0 0.1"/><geometry><mesh filename="arm.dae"/></geometry></visual>
    <collision><origin xyz="0 0 0.1"/><geometry><cylinder radius="0.02" length="0.2"/></geometry></collision>
  </link>
  <link name="tip">
    <inertial><mass value="0.1"/><inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><sphere radius="0.03"/></geometry><material name="own"><color rgba="0.9 0.2 0.1 1"/></material></visual>
  </link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="j2" type="fixed"><parent link="arm"/><child link="tip"/><origin xyz="0 0 0.2"/></joint>
</robot>
"""


def test_urdf_visuals_and_the_live_server(tmp_path):
    """A URDF's <visual>s are drawn in their materials' colours (named or inline); a link whose
    visual mesh cannot be read is drawn by its collision geometry; the welded tip rides on its
    host.  ``View.serve`` starts a live server whose time slider moves the body frames."""
    path = tmp_path / "two.urdf"
    path.write_text(URDF)
    m = jaxmbd.load_urdf(str(path), floating_base=True, warn=False)
    g = {x.name: x for x in m.visual_data.geoms}
    assert set(g) == {"base_visual0", "arm_collision0", "tip_visual0"}
    assert g["base_visual0"].type == "box" and g["base_visual0"].size == pytest.approx((0.1, 0.05, 0.025))
    assert g["base_visual0"].rgba == pytest.approx((0.1, 0.6, 0.6, 1.0))
    assert g["arm_collision0"].type == "cylinder" and g["arm_collision0"].size[:2] == pytest.approx((0.02, 0.1))
    assert g["tip_visual0"].rgba == pytest.approx((0.9, 0.2, 0.1, 1.0))
    arm = m.topo.names.index("arm")
    assert g["tip_visual0"].body == arm and g["tip_visual0"].pos == pytest.approx((0.0, 0.0, 0.2))
    qs = np.tile(np.asarray(m.q0), (3, 1))
    qs[:, 2] += [0.0, 0.5, 1.0]
    v = view(m, qs=qs, ts=[0.0, 1.0, 2.0])
    server = v.serve(port=0)
    try:
        frame = server.scene._handle_from_node_name["/member0/body0"]
        assert frame.position[2] == pytest.approx(qs[0, 2])
        assert v._slider.max == pytest.approx(2.0)
        v._set(v._frames, 2, server.scene)          # what the slider's callback does at t = 2
        assert frame.position[2] == pytest.approx(qs[2, 2])
    finally:
        server.stop()


@pytest.mark.long
def test_contact_points_and_forces_are_drawn():
    """contacts=True: each save's active contacts as points, and their normal forces as segments
    along the normal, the model's weight half a metre long, equal to jaxmbd.contact_forces
    at that state; a save with no contact draws none."""
    from jaxmbd import contact_forces
    b = jaxmbd.ModelBuilder()
    b.add_body("ball", "world", "free", mass=2.0, inertia=(0.008, 0.008, 0.008))
    b.add_geom("ball", "sphere", (0.1,))
    b.add_geom("world", "plane")
    m = b.build()
    qs = np.tile(np.asarray(m.q0), (2, 1))
    qs[0, :3] = (0.3, -0.2, 0.099)            # 1 mm in the floor
    qs[1, :3] = (0.0, 0.0, 0.5)               # in the air
    v = view(m, qs=qs, ts=[0.0, 1.0], contacts=True)
    msgs = read_page(v.html())
    c = contact_forces(m, qs[0], np.zeros(m.nv))
    on = np.asarray(c["normal_force"]) > 0
    assert on.sum() == 1
    f = float(np.asarray(c["normal_force"])[on][0])
    weight = 2.0 * 9.81
    for t, expect in ((0.0, True), (1.0, False)):
        scene = _scene_at(msgs, t)
        pts = scene["/member0/contacts/points"]["props"]["points"].reshape(-1, 3)
        segs = scene["/member0/contacts/forces"]["props"]["points"].reshape(-1, 2, 3)
        if expect:
            np.testing.assert_allclose(pts[0], np.asarray(c["pos"])[on][0], atol=1e-3)   # float16 points
            np.testing.assert_allclose(segs[0, 1] - segs[0, 0], [0, 0, 0.5 * f / weight], atol=1e-5)
        else:
            assert np.allclose(segs[:, 1] - segs[:, 0], 0)
    with pytest.raises(ValueError, match="no contacts"):
        view(jaxmbd.models.pendulum(), contacts=True)
