"""MJCF features of real robot files, against MuJoCo compiling the same file:
mesh-derived inertia (STL/OBJ, every ``<mesh inertia>`` mode), zero-mass and
visual mesh geoms, site-based ``connect``/``weld``, ``<inertial>`` without an
inertia, point masses welded in place, and ``<joint springdamper>``.

Meshes are written by the tests into a temporary directory.  MuJoCo 4.0.0
reads binary STL only, so an ASCII STL is compared with MuJoCo compiling the
binary STL of the same triangles.
"""

import os
import struct
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from test_mjcf import check_layout, compare_with_mujoco, smooth_only

mujoco = pytest.importorskip("mujoco")

RTOL = 1e-9
# MuJoCo's principal frame of a mesh (mesh_quat) is accurate to about 1e-8 only (a box
# given refquat gets a mesh_quat 3e-8 from conj(refquat); real meshes show 1e-10..1e-7),
# while the principal moments agree to round-off: where that frame is not exact, the
# full tensors are compared to this and the principal moments to RTOL
MJ_FRAME_TOL = 2e-7


# --- meshes written by the tests ----------------------------------------------------------

def _outward(V, F):
    """Orient every triangle of a closed star-shaped-about-the-centroid mesh outward."""
    c = V.mean(0)
    F = F.copy()
    a, b, d = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
    flip = np.einsum("ij,ij->i", np.cross(b - a, d - a), (a + b + d) / 3 - c) < 0
    F[flip] = F[flip][:, [0, 2, 1]]
    return F


def box_mesh():
    V = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * [0.1, 0.2, 0.3]
    V += [0.05, -0.02, 0.1]
    quads = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
    F = np.array([[q[0], q[k], q[k + 1]] for q in quads for k in (1, 2)])
    return V, _outward(V, F), quads


def icosphere():
    t = (1 + 5 ** 0.5) / 2
    V = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t], [0, 1, -t],
         [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    F = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2],
         [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5],
         [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    V = [np.array(v, float) / np.linalg.norm(v) for v in V]
    mid = {}

    def m(i, j):
        k = (min(i, j), max(i, j))
        if k not in mid:
            p = V[i] + V[j]
            V.append(p / np.linalg.norm(p))
            mid[k] = len(V) - 1
        return mid[k]
    F = [f for a, b, c in F for f in ([a, m(a, b), m(a, c)], [b, m(b, c), m(a, b)], [c, m(a, c), m(b, c)],
                                     [m(a, b), m(b, c), m(a, c)])]
    V = 0.12 * np.array(V) * [1.0, 0.8, 1.3] + [0.0, 0.03, -0.02]
    return V, _outward(V, np.array(F))


def l_shape():
    """A non-convex prism: an L-shaped section extruded along z."""
    P = np.array([[0, 0], [2, 0], [2, 1], [1, 1], [1, 3], [0, 3]], float) * 0.1
    n = len(P)
    V = np.vstack([np.c_[P, np.zeros(n)], np.c_[P, np.full(n, 0.15)]])
    F = []
    for i in range(n):
        j = (i + 1) % n
        F += [[i, j, n + j], [i, n + j, n + i]]
    for t in ([0, 1, 2], [0, 2, 3], [0, 3, 4], [0, 4, 5]):
        F += [t[::-1], [n + k for k in t]]
    return V, np.array(F)


SHAPES = {"box": box_mesh()[:2], "icosphere": icosphere(), "L": l_shape()}


def write_stl(path, V, F):
    with open(path, "wb") as f:
        f.write(b"jaxmbd test".ljust(80, b" ") + struct.pack("<I", len(F)))
        for t in F:
            a, b, c = V[t]
            f.write(struct.pack("<12fH", *np.cross(b - a, c - a), *a, *b, *c, 0))


def write_ascii_stl(path, V, F):
    with open(path, "w") as f:
        f.write("solid test\n")
        for t in F:
            f.write("  facet normal 0 0 0\n    outer loop\n")
            for p in V[t]:
                f.write("      vertex %.9g %.9g %.9g\n" % tuple(p))
            f.write("    endloop\n  endfacet\n")
        f.write("endsolid test\n")


def write_obj(path, V, F, quads=None):
    with open(path, "w") as f:
        f.write("# jaxmbd test\n")
        for v in V:
            f.write("v %.17g %.17g %.17g\n" % tuple(v))
        for t in (quads if quads is not None else F):
            f.write("f " + " ".join(f"{i + 1}/{i + 1}" for i in t) + "\n")


def write_shape(directory, shape, fmt):
    """Write a shape; returns (file for jaxmbd, file for MuJoCo)."""
    V, F = SHAPES[shape]
    stem = os.path.join(directory, shape)
    if fmt == "obj":
        write_obj(stem + ".obj", V, F, box_mesh()[2] if shape == "box" else None)   # the box with quads
        return stem + ".obj", stem + ".obj"
    write_stl(stem + ".stl", V, F)
    if fmt == "stl":
        return stem + ".stl", stem + ".stl"
    write_ascii_stl(stem + "_ascii.stl", V.astype(np.float32), F)
    return stem + "_ascii.stl", stem + ".stl"


def mj_body_inertia(mj, b):
    """MuJoCo's body inertia as a full tensor in the body frame."""
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, mj.body_iquat[b])
    R = R.reshape(3, 3)
    return R @ np.diag(mj.body_inertia[b]) @ R.T


def relerr(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


MESH_DOC = """<mujoco><compiler meshdir="{meshdir}"/>
<asset><mesh name="m" file="{file}" {mesh_attrs}/></asset>
<worldbody><body name="b" pos="0.1 0 1" euler="5 10 15"><joint axis="0 1 0"/>
  <geom type="mesh" mesh="m" pos="0.02 -0.03 0.05" euler="20 -10 35" {geom_attrs}/>
</body></worldbody></mujoco>"""


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("fmt", ["stl", "ascii_stl", "obj"])
def test_mesh_inertia_matches_mujoco(tmp_path, shape, fmt):
    """Mass, centre of mass and the full inertia tensor (body frame) of a body
    whose inertia comes from a mesh geom equal MuJoCo's compiled body_mass,
    body_ipos and body_inertia/body_iquat, for every <mesh inertia> mode
    (default: legacy), with the geom's density or mass and the mesh's scale,
    refpos and refquat (mirroring scale included)."""
    ours, theirs = write_shape(str(tmp_path), shape, fmt)
    variants = [("", ""), ('inertia="convex"', ""), ('inertia="exact"', 'density="2700"'),
                ('inertia="legacy"', 'mass="3.5"'), ('inertia="shell"', 'density="12"'),
                ('inertia="shell"', 'mass="0.4"'),
                ('inertia="exact" scale="1.5 0.5 2"', ""),
                ('inertia="convex" scale="-1 1 1" refpos="0.01 0.02 -0.03"', 'mass="2"'),
                ('inertia="legacy" refquat="0.9 0.1 -0.3 0.2" scale="0.8 1.2 1"', "")]
    for mesh_attrs, geom_attrs in variants:
        docs = [MESH_DOC.format(meshdir=str(tmp_path), file=os.path.basename(f), mesh_attrs=mesh_attrs,
                                geom_attrs=geom_attrs) for f in (ours, theirs)]
        info = jaxmbd.load_mjcf(docs[0], return_info=True, warn=False)
        mj = mujoco.MjModel.from_xml_string(docs[1])
        m = info.model
        what = (shape, fmt, mesh_attrs, geom_attrs)
        assert relerr(m.mass[0], mj.body_mass[1]) < RTOL, what
        assert relerr(m.com[0], mj.body_ipos[1]) < RTOL, what
        Imj = mj_body_inertia(mj, 1)
        assert relerr(np.linalg.eigvalsh(m.inertia[0]), np.linalg.eigvalsh(Imj)) < RTOL, what
        assert relerr(m.inertia[0], Imj) < (MJ_FRAME_TOL if "refquat" in mesh_attrs else RTOL), what
        assert len(info.mesh_geoms) == 1 and info.mesh_geoms[0]["body"] == "b"
        if fmt == "ascii_stl":
            assert any("ASCII STL" in u for u in info.unsupported)


REF_DOC = """<mujoco><compiler meshdir="{meshdir}"/>
<asset><mesh name="m" file="{file}" inertia="exact" {mesh_attrs}/></asset>
<worldbody><body name="b"><joint axis="0 1 0"/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""


@pytest.mark.parametrize("fmt", ["stl", "obj"])
def test_refquat_moves_the_mesh_inertia_exactly(tmp_path, fmt):
    """Where the test above compares with MuJoCo at MJ_FRAME_TOL (refquat:
    MuJoCo's own principal frame is off by about 3e-8), jaxmbd's refpos and
    refquat are checked here against the rigid-motion identity instead: with
    R the matrix of refquat (by scipy), the mesh frame's centre of mass is
    R^T (c0 - refpos) and its inertia R^T I0 R, to round-off; the mass and
    the principal moments equal MuJoCo's to 1e-9."""
    from scipy.spatial.transform import Rotation
    f, _ = write_shape(str(tmp_path), "L", fmt)
    w, x, y, z = 0.9, 0.1, -0.3, 0.2
    R = Rotation.from_quat([x, y, z, w]).as_matrix()
    p = np.array([0.01, 0.02, -0.03])
    docs = [REF_DOC.format(meshdir=str(tmp_path), file=os.path.basename(f), mesh_attrs=a)
            for a in ("", f'refpos="{p[0]} {p[1]} {p[2]}" refquat="{w} {x} {y} {z}"')]
    m0, m1 = (jaxmbd.load_mjcf(d, warn=False) for d in docs)
    assert relerr(m1.mass[0], m0.mass[0]) < 1e-14
    np.testing.assert_allclose(m1.com[0], R.T @ (np.asarray(m0.com[0]) - p), rtol=0, atol=1e-14)
    I0 = np.asarray(m0.inertia[0])
    assert relerr(m1.inertia[0], R.T @ I0 @ R) < 1e-12
    assert relerr(m1.inertia[0], I0) > 1e-2                  # the rotation changes the tensor
    mj = mujoco.MjModel.from_xml_string(docs[1])
    assert relerr(m1.mass[0], mj.body_mass[1]) < RTOL
    assert relerr(np.linalg.eigvalsh(m1.inertia[0]), np.sort(mj.body_inertia[1])) < RTOL
    assert relerr(m1.inertia[0], mj_body_inertia(mj, 1)) < MJ_FRAME_TOL


ARM = """<mujoco model="mesh arm">
  <compiler angle="radian" meshdir="{meshdir}"/>
  <default>
    <joint damping="0.05" armature="0.01"/>
    <default class="visual"><geom type="mesh" contype="0" conaffinity="0" group="2" density="0"/></default>
    <default class="light"><mesh inertia="exact" scale="0.9 0.9 0.9"/></default>
  </default>
  <asset>
    <mesh file="box.stl"/>
    <mesh name="ball" file="icosphere.obj" class="light"/>
    <mesh name="ell" file="L.stl" inertia="convex"/>
    <mesh name="ell_exact" file="L.obj" inertia="exact"/>
    <mesh name="skin" file="icosphere.stl"/>
  </asset>
  <worldbody>
    <geom type="mesh" mesh="box" pos="0 0 -0.5"/>
    <body name="base" pos="0 0 0.5">
      <joint name="yaw" axis="0 0 1"/>
      <geom type="mesh" mesh="box" euler="0 0.3 0"/>
      <geom type="mesh" mesh="skin" class="visual"/>
      <geom type="mesh" mesh="skin" mass="0" contype="0" conaffinity="0"/>
      <body name="upper" pos="0 0 0.35" euler="0.2 0 0">
        <joint name="shoulder" axis="0 1 0" pos="0 0 -0.05"/>
        <geom type="mesh" mesh="ell" pos="0 0 0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.3" size="0.02"/>
        <body name="fore" pos="0 0 0.35">
          <joint name="elbow" axis="0 1 0"/>
          <geom type="mesh" mesh="ball" pos="0.1 0 0" quat="0.9 0.2 0.1 0.3" density="800"/>
          <geom type="mesh" mesh="ell_exact" mass="0.7" euler="0 1.2 0"/>
          <body name="hand" pos="0.3 0 0">
            <joint name="wrist" type="ball"/>
            <geom type="mesh" mesh="ball" mass="0.2"/>
            <geom type="mesh" mesh="skin" class="visual"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def write_arm(tmp_path):
    for shape, fmt in (("box", "stl"), ("icosphere", "obj"), ("icosphere", "stl"), ("L", "stl"), ("L", "obj")):
        write_shape(str(tmp_path), shape, fmt)
    path = tmp_path / "arm.xml"
    path.write_text(ARM.format(meshdir="."))
    return str(path)


def test_mesh_arm_matches_mujoco(tmp_path):
    """A small arm whose links are meshes (all modes, STL and OBJ, a mesh default
    class, meshdir, visual and zero-mass mesh geoms, a world mesh): the mass
    matrix, bias and passive forces and forward dynamics equal MuJoCo's at
    random states; the kept hulls are MuJoCo's mesh vertices, placed alike."""
    path = write_arm(tmp_path)
    info = jaxmbd.load_mjcf(path, return_info=True, warn=False)
    model = info.model
    mj = smooth_only(mujoco.MjModel.from_xml_path(path))
    check_layout(model, mj)
    for b in range(1, mj.nbody):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, b)
        i = model.body_names.index(name)
        assert relerr(model.mass[i], mj.body_mass[b]) < RTOL
        assert relerr(model.inertia[i], mj_body_inertia(mj, b)) < RTOL
    worst = compare_with_mujoco(model, mj, seed=3, n=10)
    assert np.all(worst < RTOL), worst
    # hulls: the colliding or massive mesh geoms (not the two visual-class ones, nor the zero-mass
    # non-colliding one), in the body frame equal to MuJoCo's mesh vertices placed by geom_pos/quat
    kept = [(g["body"], g["mesh"]) for g in info.mesh_geoms]
    assert kept == [("world", "box"), ("base", "box"), ("upper", "ell"), ("fore", "ball"), ("fore", "ell_exact"),
                    ("hand", "ball")]
    for g in info.mesh_geoms:
        gid = next(k for k in range(mj.ngeom) if mj.geom_dataid[k] == mujoco.mj_name2id(
            mj, mujoco.mjtObj.mjOBJ_MESH, g["mesh"]) and (mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY,
                                                                            mj.geom_bodyid[k]) or "world") == g["body"])
        mid = mj.geom_dataid[gid]
        Vm = mj.mesh_vert[mj.mesh_vertadr[mid]:mj.mesh_vertadr[mid] + mj.mesh_vertnum[mid]].astype(float)
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, mj.geom_quat[gid])
        theirs = Vm @ R.reshape(3, 3).T + mj.geom_pos[gid]
        Rg = np.zeros(9)
        mujoco.mju_quat2Mat(Rg, g["quat"])
        ours = g["hull"] @ Rg.reshape(3, 3).T + g["pos"]
        from scipy.spatial import ConvexHull
        theirs = theirs[ConvexHull(theirs).vertices]
        d = np.linalg.norm(ours[:, None] - theirs[None], axis=2)
        assert len(ours) == len(theirs) and d.min(1).max() < 1e-6 and d.min(0).max() < 1e-6, g["mesh"]


def test_real_robot_meshes_arm_matches_mujoco():
    """An arm of seven G1 links (example-robot-data's STL meshes, a few thousand
    triangles each) in each mode: the whole-model check at random states.  The
    mass matrix agrees to 1e-9; accelerations to 2e-8, MuJoCo's principal
    frames of these meshes being accurate to about 1e-8 (see MJ_FRAME_TOL)."""
    from test_urdf import robots_dir
    root = os.path.join(robots_dir(), "g1_description", "meshes")
    links = ["left_shoulder_pitch_link", "left_shoulder_roll_link", "left_shoulder_yaw_link", "left_elbow_link",
             "left_wrist_roll_link", "left_wrist_pitch_link", "left_wrist_yaw_link"]
    for mode in ("legacy", "convex", "shell"):
        assets = "".join(f'<mesh name="{n}" file="{n}.STL" inertia="{mode}"/>' for n in links)
        body = ""
        for i, n in enumerate(reversed(links)):
            body = (f'<body name="{n}" pos="0.02 0.01 -0.1" euler="{10 * i} 5 0"><joint axis="{i % 2} 1 {i % 3}"/>'
                    f'<geom type="mesh" mesh="{n}" density="{20 if mode == "shell" else 2700}"/>{body}</body>')
        xml = f'<mujoco><compiler meshdir="{root}"/><asset>{assets}</asset><worldbody>{body}</worldbody></mujoco>'
        model = jaxmbd.load_mjcf(xml, warn=False)
        mj = smooth_only(mujoco.MjModel.from_xml_string(xml))
        check_layout(model, mj)
        worst = compare_with_mujoco(model, mj, n=5)
        assert worst[0] < RTOL and worst[1] < RTOL and worst[3] < 2e-8, (mode, worst)
    exact = xml.replace('inertia="shell"', 'inertia="exact"')
    with pytest.raises(ValueError, match="orientation"):
        mujoco.MjModel.from_xml_string(exact)
    with pytest.raises(ValueError, match="inconsistent orientation"):
        jaxmbd.load_mjcf(exact, warn=False)


def test_obj_groups_quads_and_inline_meshes_match_mujoco(tmp_path):
    """OBJ: only the first group's faces count (MuJoCo's reader; noted in the
    warning), non-planar quads are split along the shorter diagonal; inline
    <mesh vertex= face=> and vertex-only meshes (their convex hull); exact
    inertia refuses inconsistently oriented faces, as MuJoCo does."""
    V, F = SHAPES["icosphere"]
    rng = np.random.default_rng(1)
    W = V * (1 + 0.1 * rng.standard_normal(V.shape))   # twisted: no quad below is planar
    box = box_mesh()[0]
    with open(tmp_path / "g.obj", "w") as f:
        f.write("o first\n" + "".join("v %.9g %.9g %.9g\n" % tuple(v) for v in W))
        f.write("".join("f %d %d %d\n" % tuple(t + 1) for t in F[:40]))
        # quads of four vertices off any plane (the triangulation matters)
        f.write("".join("f %d %d %d %d\n" % (a + 1, b + 1, c + 1, F[k + 20][0] + 1)
                        for k, (a, b, c) in enumerate(F[40:60], 40)))
        f.write("g second\n" + "".join("f %d %d %d\n" % tuple(t + 1) for t in F[60:]))
    inline = " ".join("%.9g" % x for x in box.ravel())
    face = " ".join(str(i) for i in box_mesh()[1].ravel())
    for mesh, note in (('file="g.obj"', True), (f'vertex="{inline}" face="{face}"', False),
                       (f'vertex="{inline}"', False)):
        for mode in ("legacy", "shell", "convex"):
            xml = f"""<mujoco><compiler meshdir="{tmp_path}"/><asset><mesh name="m" {mesh} inertia="{mode}"/></asset>
              <worldbody><body name="b"><joint/><geom type="mesh" mesh="m" euler="10 20 30"/></body></worldbody>
              </mujoco>"""
            info = jaxmbd.load_mjcf(xml, return_info=True, warn=False)
            mj = mujoco.MjModel.from_xml_string(xml)
            m = info.model
            assert relerr(m.mass[0], mj.body_mass[1]) < RTOL, (mesh[:20], mode)
            assert relerr(m.com[0], mj.body_ipos[1]) < RTOL, (mesh[:20], mode)
            Imj = mj_body_inertia(mj, 1)
            assert relerr(np.linalg.eigvalsh(m.inertia[0]), np.linalg.eigvalsh(Imj)) < RTOL, (mesh[:20], mode)
            assert relerr(m.inertia[0], Imj) < MJ_FRAME_TOL, (mesh[:20], mode)
            assert any("first are ignored" in u for u in info.unsupported) == note
    write_obj(str(tmp_path / "flip.obj"), V, np.vstack([F[:-1], F[-1:, [0, 2, 1]]]))
    xml = f"""<mujoco><asset><mesh name="m" file="{tmp_path}/flip.obj" inertia="exact"/></asset>
      <worldbody><body><joint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""
    with pytest.raises(ValueError, match="orientation"):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(ValueError, match="inconsistent orientation"):
        jaxmbd.load_mjcf(xml, warn=False)


def test_visual_geoms_count_unless_massless(tmp_path):
    """As in MuJoCo, a visual geom (contype=conaffinity=0, group 1-2) has mass unless
    mass="0" or density="0"; a mesh jaxmbd cannot read is an error only where its
    mass is needed (else noted in the warning)."""
    write_stl(str(tmp_path / "L.stl"), *SHAPES["L"])
    for extra in ('contype="0" conaffinity="0" group="1" type="mesh" mesh="m"',
                  'group="2" type="mesh" mesh="m" density="0"', 'contype="0" conaffinity="0" group="2"'):
        xml = f"""<mujoco><compiler meshdir="{tmp_path}"/><asset><mesh name="m" file="L.stl"/></asset>
          <worldbody><body><joint/><geom size=".1"/><geom {extra} size=".05"/></body></worldbody></mujoco>"""
        m = jaxmbd.load_mjcf(xml, warn=False)
        mj = mujoco.MjModel.from_xml_string(xml)
        assert relerr(m.mass[0], mj.body_mass[1]) < 1e-15, extra
        assert relerr(m.inertia[0], mj_body_inertia(mj, 1)) < RTOL, extra
    (tmp_path / "x.msh").write_bytes(b"\0" * 64)   # MuJoCo's own binary format: not read by jaxmbd
    xml = f"""<mujoco><asset><mesh name="x" file="{tmp_path}/x.msh"/></asset>
      <worldbody><body><joint/><geom size=".1"/><geom type="mesh" mesh="x" mass="0"/></body></worldbody></mujoco>"""
    info = jaxmbd.load_mjcf(xml, return_info=True, warn=False)
    assert float(info.model.mass[0]) == pytest.approx(4 / 3 * np.pi * 1e-3 * 1000, rel=1e-14)
    assert any("no hull kept for mesh 'x'" in u for u in info.unsupported)
    with pytest.raises(ValueError, match="unsupported format '.msh'"):
        jaxmbd.load_mjcf(xml.replace('mass="0"', ""), warn=False)
    # a visual mesh (no collision) of a body with an <inertial> is not even read
    visual = xml.replace('<geom size=".1"/>', '<inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/>').replace(
        'mass="0"', 'contype="0" conaffinity="0"')
    info = jaxmbd.load_mjcf(visual, return_info=True, warn=False)
    assert not info.mesh_geoms and not any("mesh" in u for u in info.unsupported)


def test_missing_mesh_file_is_an_error_as_in_mujoco(tmp_path):
    """MuJoCo opens every mesh file, even one only a zero-mass visual geom uses."""
    xml = """<mujoco><asset><mesh name="v" file="{d}/nope.stl"/></asset><worldbody><body><joint/>
      <geom size="0.1"/><geom type="mesh" mesh="v" mass="0" contype="0" conaffinity="0" group="2"/>
      </body></worldbody></mujoco>""".format(d=tmp_path)
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(ValueError, match="cannot open mesh file"):
        jaxmbd.load_mjcf(xml, warn=False)
    write_stl(str(tmp_path / "nope.stl"), *SHAPES["L"])
    stripped = xml.replace("<asset>", f'<compiler strippath="true" meshdir="{tmp_path}"/><asset>').replace(
        f"{tmp_path}/nope.stl", "elsewhere/nope.stl")   # strippath: the file's directories are dropped
    for doc in (xml, stripped):
        mj = mujoco.MjModel.from_xml_string(doc)
        m = jaxmbd.load_mjcf(doc, warn=False)
        assert relerr(m.mass[0], mj.body_mass[1]) < 1e-15 and relerr(m.inertia[0], mj_body_inertia(mj, 1)) < RTOL


@pytest.mark.parametrize("geom,msg", [
    ('type="box" mesh="m" fromto="0 0 0 0 0 .1" size=".02"', "fromto cannot be used with a mesh"),   # as MuJoCo
    ('type="mesh" mesh="m" shellinertia="true"', "shellinertia"),
    ('type="ellipsoid" size=".1 .2 .3" shellinertia="true"', "shellinertia on an ellipsoid"),
    ('type="hfield"', "give the body an <inertial>"),
])
def test_mesh_refusals_are_clear(tmp_path, geom, msg):
    write_stl(str(tmp_path / "L.stl"), *SHAPES["L"])
    xml = f"""<mujoco><asset><mesh name="m" file="{tmp_path}/L.stl"/></asset>
      <worldbody><body><joint/><geom {geom}/></body></worldbody></mujoco>"""
    with pytest.raises(ValueError) as e:
        jaxmbd.load_mjcf(xml, warn=False)
    assert msg in str(e.value) and "inertiafromgeom" not in str(e.value), str(e.value)


def test_shell_inertia_of_primitives_matches_mujoco():
    """geom shellinertia="true" on spheres, boxes, cylinders and capsules (with
    fromto, density or mass): mass per unit area, as MuJoCo."""
    geoms = ['type="sphere" size="0.2" pos="0.1 0 0"', 'type="box" size="0.1 0.2 0.3" euler="10 20 30"',
             'type="cylinder" size="0.1 0.3" density="50"', 'type="capsule" fromto="0 0 0 0.3 0.1 0.2" size="0.05"',
             'type="cylinder" fromto="0 0 0 -0.2 0.1 0" size="0.07" mass="0.3"']
    for g in geoms:
        xml = f"""<mujoco><worldbody><body name="b"><joint/><geom {g} shellinertia="true"/>
          <geom type="sphere" size="0.05" pos="0 0.2 0"/></body></worldbody></mujoco>"""
        m = jaxmbd.load_mjcf(xml, warn=False)
        mj = mujoco.MjModel.from_xml_string(xml)
        assert relerr(m.mass[0], mj.body_mass[1]) < 1e-14, g
        assert relerr(m.com[0], mj.body_ipos[1]) < 1e-14, g
        assert relerr(m.inertia[0], mj_body_inertia(mj, 1)) < RTOL, g


def test_maxhullvert_with_convex_inertia_is_refused(tmp_path):
    write_stl(str(tmp_path / "L.stl"), *SHAPES["L"])
    xml = f"""<mujoco><asset><mesh name="m" file="{tmp_path}/L.stl" inertia="convex" maxhullvert="5"/></asset>
      <worldbody><body><joint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""
    with pytest.raises(ValueError, match="maxhullvert"):
        jaxmbd.load_mjcf(xml, warn=False)
    # with an <inertial>, the mesh's mass properties are not needed
    ok = xml.replace('<geom type="mesh"', '<inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/><geom type="mesh"')
    assert jaxmbd.load_mjcf(ok, warn=False).nv == 1


# --- site-based equality constraints ----------------------------------------------------------

SITE_DOC = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
 <site name="anchor" pos="0.45 0.05 1.05" euler="0 20 0"/>
 <body name="a" pos="0 0 1"><joint name="ja" type="ball"/><geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
  <site name="sa" pos="0.4 0.01 0.02" euler="10 0 20"/>
  <body name="b" pos="0.4 0 0"><joint name="jb" axis="0 1 0"/><geom type="box" size="0.1 0.05 0.02" pos="0.1 0 0"/>
   <frame pos="0.2 0 0" euler="0 0 30"><site name="sb" pos="0 0.01 0" euler="5 5 0"/></frame>
  </body></body>
 <body name="c" pos="0.5 0.1 1.1" euler="10 20 30"><freejoint/><geom type="sphere" size="0.05"/>
  <site name="sc" pos="0.01 0.02 0.03" euler="0 30 0"/></body>
</worldbody><equality>{eq}</equality></mujoco>"""


def _mj_equality(mj, d, q):
    d.qpos[:] = q
    mujoco.mj_forward(mj, d)
    rows = [i for i in range(d.nefc) if d.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
    return d.efc_pos[rows].copy(), d.efc_J.reshape(d.nefc, mj.nv)[rows].copy()


@pytest.mark.long
def test_site_equality_constraints_match_mujoco():
    """<connect>/<weld> by sites: the sites' positions (connect) or frames (weld)
    coincide, which need not hold at qpos0.  One mechanism (a connect to a
    world site, a weld between moving bodies, with torquescale): where jaxmbd
    assembles it, MuJoCo's equality residual vanishes and its Jacobian rows
    vanish on jaxmbd's tangent space; the constrained accelerations equal the
    hard-constraint solution built from MuJoCo's mass matrix, bias forces,
    Jacobian and (central differences of its Jacobian) velocity product."""
    eq, nc = '<connect site1="anchor" site2="sb"/><weld site1="sc" site2="sa" torquescale="2"/>', 9
    doc = SITE_DOC.format(eq=eq)
    m = jaxmbd.load_mjcf(doc, warn=False)
    assert isinstance(m, jaxmbd.Mechanism) and m.nc == nc
    mj = mujoco.MjModel.from_xml_string(doc)
    mj.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    d = mujoco.MjData(mj)
    r0, _ = _mj_equality(mj, d, mj.qpos0)   # neither holds at qpos0, in MuJoCo nor in jaxmbd
    assert np.abs(r0[:3]).max() > 1e-3 and np.abs(r0[3:]).max() > 1e-3
    res0 = np.asarray(jaxmbd.constraint_residual(m, m.q0))
    assert np.abs(res0[:3]).max() > 1e-3 and np.abs(res0[3:]).max() > 1e-3
    rng = np.random.default_rng(7)
    q = jaxmbd.normalize_q(m.tree, jnp.asarray(mj.qpos0) + 0.2 * rng.standard_normal(mj.nq))
    qa, va, info = jaxmbd.assemble(m, q, jnp.asarray(rng.standard_normal(mj.nv)))
    assert float(info["residual"]) < 1e-12
    qa, va = np.asarray(qa), np.asarray(va)
    r, J = _mj_equality(mj, d, qa)
    np.testing.assert_allclose(r, 0, atol=1e-12)
    G = np.asarray(jaxmbd.constraint_jacobian(m, qa))
    N = np.linalg.svd(G)[2][np.linalg.matrix_rank(G):]
    assert np.linalg.matrix_rank(G) == np.linalg.matrix_rank(J) == nc
    np.testing.assert_allclose(J @ N.T, 0, atol=1e-12)
    # accelerations: [M Jᵀ; J 0] [a; λ] = [τ - bias; -J̇ v]
    tau = rng.standard_normal(mj.nv)
    a, _ = jaxmbd.constrained_dynamics(m, jnp.asarray(qa), jnp.asarray(va), jnp.asarray(tau))
    M = np.zeros((mj.nv, mj.nv))
    d.qpos[:], d.qvel[:] = qa, va
    mujoco.mj_forward(mj, d)
    mujoco.mj_fullM(mj, d, M)
    bias = d.qfrc_bias.copy()

    def Jv(h):
        qh = qa.copy()
        mujoco.mj_integratePos(mj, qh, va, h)
        return _mj_equality(mj, d, qh)[1] @ va
    h = 1e-3
    d1, d2 = (Jv(h) - Jv(-h)) / (2 * h), (Jv(h / 2) - Jv(-h / 2)) / h
    Jdv = (4 * d2 - d1) / 3   # Richardson: O(h^4)
    K = np.block([[M, J.T], [J, np.zeros((nc, nc))]])
    ref = np.linalg.solve(K, np.concatenate([tau - bias, -Jdv]))[:mj.nv]
    assert relerr(a, ref) < 1e-8, relerr(a, ref)


def test_site_equality_errors():
    for eq, msg in (('<connect site1="sa" site2="nope"/>', "no site named 'nope'"),
                    ('<weld site1="sa" site2="sa"/>', "both sites are on 'a'")):
        with pytest.raises(ValueError, match=msg):
            jaxmbd.load_mjcf(SITE_DOC.format(eq=eq), warn=False)


# --- inertials, point masses, springdamper ------------------------------------------------

POINT_MASSES = """<mujoco><worldbody>
  <body name="stand" pos="0 0 0.5"><inertial pos="0 0 0" mass="3"/></body>
  <body name="frame" pos="0 0 1"><inertial pos="0.1 0 0" mass="0" diaginertia="0 0 0"/></body>
  <body name="arm" pos="0 0 1"><joint axis="0 1 0" pos="0 0 0.05"/>
    <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
    <body name="tip" pos="0.4 0 0"><inertial pos="0.02 0 0.01" mass="0.5"/></body>
    <body name="tool" pos="0.2 0 0" euler="0 30 0">
      <inertial pos="0 0 0.05" quat="0.9 0.1 0.2 0.3" mass="0.2" diaginertia="0 0 0"/></body>
  </body></worldbody></mujoco>"""


def test_point_masses_and_inertials_without_inertia_match_mujoco():
    """<inertial> without diaginertia/fullinertia is a point mass (zero inertia),
    accepted on bodies welded to the world or to a moving body, as in MuJoCo."""
    model = jaxmbd.load_mjcf(POINT_MASSES, warn=False)
    mj = smooth_only(mujoco.MjModel.from_xml_string(POINT_MASSES))
    check_layout(model, mj)
    assert np.asarray(model.mass).sum() == pytest.approx(mj.body_mass[mj.body_dofnum > 0].sum()
                                                         + mj.body_mass[[4, 5]].sum(), rel=1e-15)
    worst = compare_with_mujoco(model, mj, n=5)
    assert np.all(worst < RTOL), worst


def test_moving_point_mass_is_refused_as_in_mujoco():
    xml = '<mujoco><worldbody><body name="p"><joint/><inertial pos="0 0 0" mass="1"/></body></worldbody></mujoco>'
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(ValueError, match="body 'p': a moving body with mass needs a positive-definite inertia"):
        jaxmbd.load_mjcf(xml, warn=False)


SPRINGDAMPER = """<mujoco><worldbody><body pos="0 0 1">
  <joint name="a" axis="1 0 0" springdamper="0.3 0.7" stiffness="5" damping="1"/><geom size=".1" pos="0 0 -.3"/>
  <body pos="0 0.2 0"><geom type="capsule" fromto="0 0 0 0.5 0.2 0" size=".05"/>
    <joint name="b" axis="1 0 0" pos="0.1 0 0" armature="0.01" springdamper="0.5 0.3" springref="0.2"/>
    <body><joint name="c" type="slide" axis="0 1 1" springdamper="0.2 1.5"/><geom size=".1"/>
      <body><joint name="d" axis="0 0 1" stiffness="2" damping="0.1"/><geom type="box" size=".1 .05 .02"/></body>
    </body></body></body></worldbody></mujoco>"""


def test_springdamper_matches_mujoco():
    """springdamper="timeconst dampratio" sets stiffness and damping from the
    joint's effective mass at qpos0, replacing stiffness/damping, as MuJoCo."""
    model = jaxmbd.load_mjcf(SPRINGDAMPER, warn=False)
    mj = smooth_only(mujoco.MjModel.from_xml_string(SPRINGDAMPER))
    assert relerr(model.stiffness, mj.jnt_stiffness) < RTOL
    assert relerr(model.damping, mj.dof_damping) < RTOL
    worst = compare_with_mujoco(model, mj, n=5)
    assert np.all(worst < RTOL), worst


@pytest.mark.parametrize("joint,msg", [('type="ball" springdamper="0.5 0.3"', "springdamper on a spherical joint"),
                                       ('springdamper="0.5 0"', "must both be positive")])
def test_springdamper_refusals(joint, msg):
    xml = f'<mujoco><worldbody><body><joint {joint}/><geom size=".1"/></body></worldbody></mujoco>'
    with pytest.raises(ValueError, match=msg):
        jaxmbd.load_mjcf(xml, warn=False)


def test_unmodelled_items_stay_in_the_one_warning(tmp_path):
    write_arm(tmp_path)
    write_ascii_stl(str(tmp_path / "a.stl"), *SHAPES["box"])
    xml = (tmp_path / "arm.xml").read_text().replace('<mesh file="box.stl"/>', '<mesh file="a.stl" name="box"/>')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        jaxmbd.load_mjcf(xml.replace('meshdir="."', f'meshdir="{tmp_path}"'))
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    assert len(msgs) == 1 and "ASCII STL" in msgs[0], msgs
    assert "mesh geoms" not in msgs[0], msgs           # mesh geoms collide (their hulls): not listed
