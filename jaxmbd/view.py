"""See a model and its runs: a 3-D scene in a web page, drawn by viser.

:func:`view` turns a model and its states (a :class:`jaxmbd.Solution`, a batch of them from
``rollout``, or arrays) into a :class:`View`: the model's geoms (``Model.visual_data``: primitives
and meshes with their colours and MuJoCo's geom groups; a model without geoms is drawn as sticks
between its joints and balls at its bodies' centres of mass), a batch's members side by side on a
grid or overlaid, a timeline with play/pause and a time slider, and optionally each member's
contact points and normal forces.  A view is shown in three ways:

- ``View.save("run.html")`` / ``View.html()``: one self-contained page that opens in a browser
  with no server and no network (the viewer's program and the scene are in the file);
- in Jupyter, a ``View`` as a cell's value (the page in an inline frame), or ``View.show()``;
- ``View.serve()``: a live viser server (a URL to open), with the time slider in its panel.

Why viser: it is maintained (monthly releases), installs from PyPI with no compiled code, ships
its browser program inside the wheel, and writes a recorded scene into one standalone HTML file;
MeshCat's Python package has had no release since 2021.

The scene's body frames carry the forward kinematics of the saved states in float64
(:func:`jaxmbd.forward_kinematics`); each member's frames sit under a member node placed on the
grid, and each geom under its body frame at its pose on the body.  ``View.screenshot`` renders
the page in a headless Chromium (:mod:`jaxmbd.browser`) to a PNG."""

from __future__ import annotations

import contextlib
import html as _html
import io
import os
from typing import NamedTuple

import numpy as np

from .visuals import PALETTE

SHOWN_GROUPS = (0, 1, 2)
"""MuJoCo's geom groups the viewer shows at first (as MuJoCo's own viewer does); the others are
in the scene, hidden."""
MAX_MEMBERS = 16
"""How many members of a batch a view draws by default (the first ones)."""


class Camera(NamedTuple):
    """The page's first camera: ``position`` and ``look_at`` in the world, ``fov`` (vertical, rad),
    +z up."""
    position: np.ndarray
    look_at: np.ndarray
    fov: float


def _rgb(rgba):
    return tuple(int(round(255 * float(c))) for c in rgba[:3])


def _wxyz(R):
    """Unit quaternion (w, x, y, z), w >= 0, of rotation matrices (..., 3, 3) (the largest of the
    four squared components decides the branch, so every branch divides by at least 1/2)."""
    R = np.asarray(R, np.float64)
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    sq = np.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1)
    k = np.argmax(sq, -1)
    s = np.sqrt(np.maximum(np.take_along_axis(sq, k[..., None], -1)[..., 0], 1e-300)) * 2.0
    d21, d02, d10 = R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]
    a01, a02, a12 = R[..., 0, 1] + R[..., 1, 0], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1]
    cand = np.stack([
        np.stack([s / 4, d21 / s, d02 / s, d10 / s], -1),
        np.stack([d21 / s, s / 4, a01 / s, a02 / s], -1),
        np.stack([d02 / s, a01 / s, s / 4, a12 / s], -1),
        np.stack([d10 / s, a02 / s, a12 / s, s / 4], -1)], -2)
    q = np.take_along_axis(cand, k[..., None, None], -2)[..., 0, :]
    return np.where(q[..., :1] < 0, -q, q)


def _primitive(gtype, size):
    """(vertices, faces) of a primitive geom in its frame (MuJoCo's axes: along z for capsules and
    cylinders)."""
    import trimesh
    if gtype == "box":
        m = trimesh.creation.box(extents=2 * np.asarray(size[:3]))
    elif gtype == "sphere":
        m = trimesh.creation.icosphere(subdivisions=3, radius=size[0])
    elif gtype == "ellipsoid":
        m = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
        m.vertices = m.vertices * np.asarray(size[:3])
    elif gtype == "cylinder":
        m = trimesh.creation.cylinder(radius=size[0], height=2 * size[1], sections=32)
    elif gtype == "capsule":
        m = trimesh.creation.capsule(height=2 * size[1], radius=size[0], count=[16, 16])
    else:
        raise ValueError(f"no primitive mesh for geom type {gtype!r}")
    return np.asarray(m.vertices, np.float32), np.asarray(m.faces, np.int32)


def _sticks(tree):
    """Visual geoms for a model that has none: a capsule from each body's joint anchor to each
    child's, and a sphere at each body's centre of mass sized by its mass."""
    from .visuals import VisualGeom
    anchor = np.asarray(tree.anchor)
    com = np.asarray(tree.com)
    mass = np.asarray(tree.mass)
    tpos = np.asarray(tree.tree_pos)
    trot = np.asarray(tree.tree_rot)
    parent = tree.topo.parent
    span = max(float(np.max(np.linalg.norm(np.concatenate([tpos, com]), axis=1))), 0.1)
    r = 0.04 * span
    eye = tuple(float(x) for x in np.eye(3).ravel())
    geoms = []
    for i in range(tree.topo.n_bodies):
        colour = PALETTE[i % len(PALETTE)]
        rad = r * (1.0 + 0.5 * np.cbrt(mass[i] / max(float(mass.max()), 1e-12)))
        geoms.append(VisualGeom(f"com{i}", i, "sphere", (float(rad), 0.0, 0.0), tuple(float(x) for x in com[i]),
                                eye, colour, 0, None))
        ends = [com[i]] + [trot[j] @ anchor[j] + tpos[j] for j in range(tree.topo.n_bodies) if parent[j] == i]
        for k, e in enumerate(ends):
            a = anchor[i]
            d = np.asarray(e) - a
            L = float(np.linalg.norm(d))
            if L < 1e-9:
                continue
            z = d / L
            x = np.cross(z, [1.0, 0, 0] if abs(z[0]) < 0.9 else [0, 1.0, 0])
            x /= np.linalg.norm(x)
            R = np.stack([x, np.cross(z, x), z], 1)
            geoms.append(VisualGeom(f"stick{i}_{k}", i, "capsule", (0.5 * r, 0.5 * L, 0.0),
                                    tuple(float(c) for c in a + 0.5 * d), tuple(float(c) for c in R.ravel()),
                                    colour, 0, None))
    return geoms


def body_poses(model, qs):
    """World positions (..., n, 3) and rotations (..., n, 3, 3) of the model's (tree's) bodies at the
    states ``qs`` (..., nq) (a mechanism's coordinates taken to its tree), float64 numpy."""
    import jax
    import jax.numpy as jnp

    from .kinematics import forward_kinematics
    tree = getattr(model, "tree", model)
    to_tree = model.to_tree if tree is not model else (lambda q: q)
    qs = np.asarray(qs, np.float64)
    flat = qs.reshape(-1, qs.shape[-1])

    @jax.jit
    def fk(q):
        kin = jax.vmap(lambda x: forward_kinematics(tree, to_tree(x)))(q)
        return kin.pos, kin.rot
    pos, rot = fk(jnp.asarray(flat))
    n = tree.topo.n_bodies
    return np.asarray(pos).reshape(qs.shape[:-1] + (n, 3)), np.asarray(rot).reshape(qs.shape[:-1] + (n, 3, 3))


def _hold(qs):
    """States with every non-finite row (a failed member's saves after its failure) replaced by
    the last finite one before it (the first finite one where none is before)."""
    qs = np.array(qs, np.float64)
    ok = np.all(np.isfinite(qs), -1)                       # (B, T)
    for b in range(qs.shape[0]):
        good = np.flatnonzero(ok[b])
        if good.size == 0:
            raise ValueError(f"member {b} has no finite state to draw")
        idx = np.maximum.accumulate(np.where(ok[b], np.arange(ok.shape[1]), -1))
        idx = np.where(idx < 0, good[0], idx)
        qs[b] = qs[b, idx]
    return qs


def view(model, solution=None, *, qs=None, ts=None, members=None, layout="grid", spacing=None, contacts=False,
         ctrl=None, title=None) -> "View":
    """A :class:`View` of ``model`` moving through saved states.

    The states: ``solution`` (a :class:`jaxmbd.Solution`, batched or not; its ``ts`` and ``qs``), or
    ``qs`` (T, nq) or (B, T, nq) with ``ts`` (T,) (default 0, 1, ...), or neither (the model at
    ``model.q0``).  ``members``: which batch members to draw (indices; default the first
    :data:`MAX_MEMBERS`).  ``layout``: "grid" (side by side, ``spacing`` metres apart; default
    from the model's size) or "overlay" (all at the origin).  ``contacts``: also draw each
    member's active contact points and normal forces (one evaluation of
    :func:`jaxmbd.contact_forces` per saved state, at the controls ``ctrl``).  A member's
    non-finite saves (after a failure) hold its last finite state."""
    if solution is not None:
        if qs is not None or ts is not None:
            raise ValueError("give a solution or qs/ts, not both")
        if solution.qs is None:
            raise ValueError("the solution has no saved states (Save(states=False)); run with states saved")
        qs, ts = solution.qs, solution.ts
    nq = model.nq
    if qs is None:
        qs = np.asarray(model.q0, np.float64)[None, None]
    qs = np.asarray(qs, np.float64)
    if qs.ndim == 1:
        qs = qs[None, None]
    elif qs.ndim == 2:
        qs = qs[None]
    if qs.ndim != 3 or qs.shape[-1] != nq:
        raise ValueError(f"states must have shape (T, {nq}) or (B, T, {nq}) for this model, got {qs.shape}")
    ts = np.arange(qs.shape[1], dtype=np.float64) if ts is None else np.asarray(ts, np.float64)
    if ts.ndim == 2:             # a batch's save times: the same for every member of a rollout
        ts = ts[0]
    if ts.shape != (qs.shape[1],) or not np.all(np.isfinite(ts)) or np.any(np.diff(ts) < 0):
        raise ValueError(f"ts must be {qs.shape[1]} non-decreasing finite times, got shape {ts.shape}")
    if members is None:
        members = range(min(qs.shape[0], MAX_MEMBERS))
    members = [int(m) for m in members]
    if not members or any(not 0 <= m < qs.shape[0] for m in members):
        raise ValueError(f"members must be indices in [0, {qs.shape[0]}), got {members}")
    if layout not in ("grid", "overlay"):
        raise ValueError(f"layout must be 'grid' or 'overlay', got {layout!r}")
    return View(model, ts, _hold(qs[members]), members, layout, spacing, contacts, ctrl, title)


class View:
    """A model's scene over time (:func:`view`): ``html()``, ``save(path)``, ``show()``,
    ``serve()``, ``screenshot(path)``; in Jupyter it shows itself.

    Read-only attributes: ``ts`` (T,), ``qs`` (B, T, nq) the drawn members' states, ``members``
    (their indices in the batch), ``offsets`` (B, 3) each member's place, ``pos`` (B, T, n, 3) and
    ``rot`` (B, T, n, 3, 3) the bodies' world poses (before the offsets), ``geoms`` (the drawn
    :class:`jaxmbd.visuals.VisualGeom` list), ``camera`` (:class:`Camera`)."""

    def __init__(self, model, ts, qs, members, layout, spacing, contacts, ctrl, title):
        self.model, self.ts, self.qs, self.members = model, ts, qs, members
        self.title = title
        tree = getattr(model, "tree", model)
        vis = tree.visual_data
        self.geoms = list(vis.geoms) if vis is not None else _sticks(tree)
        self.meshes = dict(vis.meshes) if vis is not None else {}
        self.pos, self.rot = body_poses(model, qs)
        self.wxyz = _wxyz(self.rot)                                 # (B, T, n, 4), for the scene's frames
        B = qs.shape[0]
        # each member's extent over the run: the corners of its geoms' boxes at every save
        lo, hi = self._extent()
        width = float(np.max(hi[:, :2] - lo[:, :2]))
        if spacing is None:
            spacing = 1.25 * width + 0.2
        if layout == "grid" and B > 1:
            cols = int(np.ceil(np.sqrt(B)))
            ij = np.stack([np.arange(B) % cols, np.arange(B) // cols], 1).astype(np.float64)
            self.offsets = np.concatenate([(ij - ij.mean(0)) * spacing, np.zeros((B, 1))], 1)
        else:
            self.offsets = np.zeros((B, 3))
        alo = (lo + self.offsets).min(0)
        ahi = (hi + self.offsets).max(0)
        self.extent = (alo, ahi)
        centre = 0.5 * (alo + ahi)
        size = max(float(np.linalg.norm(ahi - alo)), 0.2)
        fov = np.deg2rad(50.0)
        dist = 0.55 * size / np.sin(fov / 2)          # the box's bounding sphere in view, with a margin
        direction = np.array([1.0, -1.4, 0.9])
        self.camera = Camera(centre + dist * direction / np.linalg.norm(direction), centre, float(fov))
        self.contacts = _contact_points(model, qs, ctrl) if contacts else None

    def _extent(self):
        """(lo, hi) (B, 3): the box that holds every drawn geom (planes aside) of each member over
        the run; body origins where there are no geoms."""
        B = self.pos.shape[0]
        pts = [self.pos.reshape(B, -1, 3)]
        for g in self.geoms:
            if g.type == "plane" or g.group not in SHOWN_GROUPS:
                continue
            V = self.meshes[g.mesh][0] if g.type == "mesh" else None
            if V is None:
                s = np.asarray(g.size)
                half = {"sphere": s[[0, 0, 0]], "capsule": np.array([s[0], s[0], s[0] + s[1]]),
                        "cylinder": s[[0, 0, 1]]}.get(g.type, s)
                V = np.array([[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)]) * half
            else:
                V = np.array([[a, b, c] for a in V[:, 0][[V[:, 0].argmin(), V[:, 0].argmax()]]
                              for b in V[:, 1][[V[:, 1].argmin(), V[:, 1].argmax()]]
                              for c in V[:, 2][[V[:, 2].argmin(), V[:, 2].argmax()]]], np.float64)
            local = V @ np.reshape(g.rot, (3, 3)).T + np.asarray(g.pos)          # (8, 3) on the body
            if g.body < 0:
                pts.append(np.broadcast_to(local, (B,) + local.shape))
            else:
                R, p = self.rot[:, :, g.body], self.pos[:, :, g.body]           # (B, T, 3, 3), (B, T, 3)
                pts.append((np.einsum("btij,kj->btki", R, local) + p[:, :, None]).reshape(B, -1, 3))
        allp = np.concatenate(pts, 1)
        return allp.min(1), allp.max(1)

    @property
    def hold(self):
        """How long the page shows the last save (the last interval between saves; 1 s for one save)."""
        return float(self.ts[-1] - self.ts[-2]) if len(self.ts) > 1 and self.ts[-1] > self.ts[-2] else 1.0

    @property
    def duration(self):
        """The page's timeline, in simulated seconds: save k is shown from ``ts[k] - ts[0]`` until the
        next save, the last one for :attr:`hold`."""
        return float(self.ts[-1] - self.ts[0]) + self.hold

    # -- the scene ---------------------------------------------------------------------------------
    def _build(self, server):
        """Put the scene into a viser server; returns the body frame handles [member][body]."""
        scene = server.scene
        scene.set_up_direction("+z")
        cam = server.initial_camera
        cam.fov = self.camera.fov
        cam.position = tuple(float(x) for x in self.camera.position)
        cam.look_at = tuple(float(x) for x in self.camera.look_at)
        cam.up = (0.0, 0.0, 1.0)
        n = self.pos.shape[2]
        lo, hi = self.extent
        frames = []
        for k, m in enumerate(self.members):
            root = f"/member{m}"
            scene.add_frame(root, show_axes=False, position=tuple(float(x) for x in self.offsets[k]))
            handles = []
            for i in range(n):
                handles.append(scene.add_frame(f"{root}/body{i}", show_axes=False,
                                               position=tuple(float(x) for x in self.pos[k, 0, i]),
                                               wxyz=tuple(float(x) for x in self.wxyz[k, 0, i])))
            frames.append(handles)
        for j, g in enumerate(self.geoms):
            visible = g.group in SHOWN_GROUPS
            if g.type == "plane":
                if g.body >= 0:
                    continue      # a plane on a moving body is drawn by no one; it is rare
                sx, sy = (g.size[0], g.size[1]) if g.size[0] > 0 and g.size[1] > 0 else (
                    max(hi[0] - lo[0], 1.0) / 2 + 0.5, max(hi[1] - lo[1], 1.0) / 2 + 0.5)
                R = np.asarray(g.rot).reshape(3, 3)
                centre = np.asarray(g.pos) + (np.array([(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, 0.0])
                                              if g.size[0] <= 0 else 0.0)
                scene.add_grid(f"/world/geom{j}", width=2 * sx, height=2 * sy, plane="xy",
                               cell_size=_nice(2 * max(sx, sy) / 20), section_size=_nice(2 * max(sx, sy) / 4),
                               plane_color=_rgb(g.rgba), plane_opacity=float(g.rgba[3]) * 0.9,
                               position=tuple(float(x) for x in centre), wxyz=tuple(float(x) for x in _wxyz(R)),
                               visible=visible)
                continue
            V, F = self.meshes[g.mesh] if g.type == "mesh" else _primitive(g.type, g.size)
            kw = dict(vertices=V, faces=F, color=_rgb(g.rgba), opacity=None if g.rgba[3] >= 1 else float(g.rgba[3]),
                      position=tuple(float(x) for x in g.pos),
                      wxyz=tuple(float(x) for x in _wxyz(np.asarray(g.rot).reshape(3, 3))),
                      visible=visible, cast_shadow=False, receive_shadow=False, flat_shading=g.type in ("box", "mesh"))
            if g.body < 0:
                for k, m in enumerate(self.members):
                    scene.add_mesh_simple(f"/member{m}/world/geom{j}", **kw)
            else:
                for k, m in enumerate(self.members):
                    scene.add_mesh_simple(f"/member{m}/body{g.body}/geom{j}", **kw)
        self._contact_nodes = None
        if self.contacts is not None:
            self._contact_nodes = [self._contact_node(scene, k, 0) for k in range(len(self.members))]
        return frames

    def _contact_node(self, scene, k, t):
        """Member k's contact points (red) and normal forces (segments along the normal, the model's
        weight half a metre long) at save t."""
        pts, fs = self.contacts
        p, f = pts[k][t], fs[k][t]
        m = self.members[k]
        if len(p) == 0:
            p, f = np.zeros((1, 3)), np.zeros((1, 3))
        segs = np.stack([p, p + f], 1)
        a = scene.add_point_cloud(f"/member{m}/contacts/points", points=p.astype(np.float32),
                                  colors=(230, 40, 40), point_size=0.02)
        b = scene.add_line_segments(f"/member{m}/contacts/forces", points=segs.astype(np.float32),
                                    colors=(230, 40, 40), thickness=0.006)
        return a, b

    def _set(self, frames, t, scene=None):
        """Move every body frame to save ``t``."""
        for k, handles in enumerate(frames):
            for i, h in enumerate(handles):
                h.position = tuple(float(x) for x in self.pos[k, t, i])
                h.wxyz = tuple(float(x) for x in self.wxyz[k, t, i])
        if self.contacts is not None and scene is not None:
            for k in range(len(frames)):
                for node in self._contact_nodes[k]:
                    node.remove()
                self._contact_nodes[k] = self._contact_node(scene, k, t)

    # -- ways to show it ---------------------------------------------------------------------------
    def html(self) -> str:
        """The self-contained page: the viewer's program and the recorded scene, one frame per save
        time, played at real time (the page's speed control changes that)."""
        with _quiet():
            import viser
            server = viser.ViserServer(host="127.0.0.1", port=0, verbose=False)
        try:
            frames = self._build(server)
            rec = server.get_scene_serializer()
            for t in range(1, len(self.ts)):
                rec.insert_sleep(float(self.ts[t] - self.ts[t - 1]))
                self._set(frames, t, server.scene)
            rec.insert_sleep(self.hold)
            page = rec.as_html()
        finally:
            with _quiet():
                server.stop()
        if self.title:
            page = page.replace("<title>", f"<title>{_html.escape(self.title)} - ", 1) if "<title>" in page else page
        return page

    def save(self, path) -> str:
        """Write :meth:`html` to ``path``; returns the path."""
        page = self.html()
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, path)
        return str(path)

    def _repr_html_(self):
        page = _html.escape(self.html(), quote=True)
        return (f'<iframe srcdoc="{page}" width="100%" height="480" style="border:1px solid #ddd" '
                'allowfullscreen></iframe>')

    def show(self):
        """In Jupyter: the page in an inline frame; elsewhere: the page in the default web browser
        (from a temporary file)."""
        try:
            from IPython import get_ipython
            if get_ipython() is not None:
                from IPython.display import HTML, display
                display(HTML(self._repr_html_()))
                return
        except ImportError:
            pass
        import tempfile
        import webbrowser
        with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False, encoding="utf-8") as f:
            f.write(self.html())
        webbrowser.open("file://" + f.name)

    def serve(self, host="127.0.0.1", port=8080):
        """A live viser server showing the scene, with a time slider and a play button in its panel;
        returns the server (``server.stop()`` ends it).  Open the printed URL."""
        import threading
        import time

        import viser
        server = viser.ViserServer(host=host, port=port)
        frames = self._frames = self._build(server)
        T = len(self.ts)
        slider = server.gui.add_slider("t (s)", min=float(self.ts[0]), max=float(self.ts[-1]),
                                       step=float(max((self.ts[-1] - self.ts[0]) / max(T - 1, 1), 1e-9)),
                                       initial_value=float(self.ts[0]))
        self._slider = slider
        playing = server.gui.add_checkbox("play", initial_value=False)

        @slider.on_update
        def _(_):
            k = int(np.clip(np.searchsorted(self.ts, slider.value), 0, T - 1))
            self._set(frames, k, server.scene)

        def run():
            while not getattr(server, "_jaxmbd_stop", False):
                if playing.value and T > 1:
                    k = int(np.searchsorted(self.ts, slider.value))
                    k = 0 if k >= T - 1 else k + 1
                    slider.value = float(self.ts[k])
                    time.sleep(max(float(self.ts[min(k + 1, T - 1)] - self.ts[k]), 1 / 60))
                else:
                    time.sleep(0.05)
        threading.Thread(target=run, daemon=True).start()
        return server

    def screenshot(self, path, t=None, width=960, height=600, browser=None) -> str:
        """Render the page in a headless Chromium (:func:`jaxmbd.browser.find_chromium`, or
        ``browser``) at time ``t`` (default: the first save) and write a PNG to ``path``."""
        from .browser import Page
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            page_path = os.path.join(d, "view.html")
            self.save(page_path)
            with Page(page_path, width=width, height=height, browser=browser) as page:
                page.seek((self.ts[0] if t is None else t) - self.ts[0], 0.0, self.duration)
                png = page.screenshot()
        with open(path, "wb") as f:
            f.write(png)
        return str(path)


def _nice(x):
    """A round grid spacing near x (1, 2 or 5 times a power of ten)."""
    x = max(float(x), 1e-3)
    e = 10 ** np.floor(np.log10(x))
    return float(min((1, 2, 5, 10), key=lambda m: abs(m * e - x)) * e)


def _contact_points(model, qs, ctrl):
    """Per member and save: the active contacts' world points (k, 3) and normal force vectors
    (k, 3), scaled so the model's weight is 0.5 m long."""
    import jax
    import jax.numpy as jnp

    from .contact_report import contact_forces
    tree = getattr(model, "tree", model)
    if contact_forces(model, model.q0, model.v0) is None:
        raise ValueError("contacts=True: the model has no contacts")
    weight = float(np.sum(np.asarray(tree.mass)) * max(float(np.linalg.norm(np.asarray(tree.gravity))), 1e-9))
    nv = tree.nv
    u = None if ctrl is None else jnp.asarray(np.asarray(ctrl, np.float64))

    def one(q):
        c = contact_forces(model, q, jnp.zeros(nv), ctrl=u)
        return c["pos"], c["normal"], c["normal_force"], c["dist"]
    B, T = qs.shape[:2]
    P, N, Fn, D = [np.asarray(x) for x in jax.jit(jax.vmap(one))(jnp.asarray(qs.reshape(B * T, -1)))]
    pts, fs = [], []
    for b in range(B):
        pb, fb = [], []
        for t in range(T):
            i = b * T + t
            on = (Fn[i] > 0) & (D[i] < 0.01)
            pb.append(P[i][on])
            fb.append(N[i][on] * (0.5 * Fn[i][on] / weight)[:, None])
        pts.append(pb)
        fs.append(fb)
    return pts, fs


@contextlib.contextmanager
def _quiet():
    """viser prints a banner and a stop line on stdout; a view made for a file keeps them out."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def read_page(page):
    """A saved page's recorded scene: [(time, message dict)] in order, each binary array (mesh
    vertices, faces, points) resolved to a numpy array.  Reads what :meth:`View.html` wrote (viser's
    embedded recording: zstd-compressed msgpack, then 8-byte-aligned buffers)."""
    import base64
    import re

    import msgspec
    import zstandard
    m = re.search(r'__VISER_EMBED_DATA__="([^"]+)"', page)
    if m is None:
        raise ValueError("not a saved jaxmbd view (no embedded scene)")
    raw = base64.b64decode(m.group(1))
    size = int.from_bytes(raw[:8], "little")
    inner = zstandard.ZstdDecompressor().decompress(raw[8:], max_output_size=size)
    n = int.from_bytes(inner[:8], "little")
    rec = msgspec.msgpack.decode(inner[8:8 + n])
    buffers, off = [], 8 + n
    for length in rec["binaryBufferLengths"]:
        off += (8 - off % 8) % 8
        buffers.append(inner[off:off + length])
        off += length

    def resolve(x):
        if isinstance(x, dict):
            if "__binary_index" in x and "dtype" in x:
                return np.frombuffer(buffers[x["__binary_index"]], np.dtype(x["dtype"]))
            return {k: resolve(v) for k, v in x.items()}
        if isinstance(x, list):
            return [resolve(v) for v in x]
        return x
    return [(float(t), resolve(msg)) for t, msg in rec["messages"]]
