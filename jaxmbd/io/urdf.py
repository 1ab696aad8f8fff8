"""URDF import.

Each link becomes a body whose frame is the URDF link frame; the joint's
``<origin>`` places it in the parent link's frame and the joint axis is given
in it (URDF puts the joint frame at the child link frame).  Joint types:

===========  ===============================================================
revolute,    ``revolute`` about ``axis`` (q = angle; continuous joints are
continuous   not wrapped, unlike Pinocchio's (cos, sin) coordinates)
prismatic    ``prismatic`` along ``axis``
fixed        welded: merged into the parent (the link stays a named frame)
floating     ``free``: q = [position, quaternion w x y z] in the parent link
             frame, v = [linear velocity in the parent frame, angular in the
             link frame] (MuJoCo's free joint)
planar       ``planar`` in the joint frame's xy-plane; the axis (plane normal)
             must be z
===========  ===============================================================

Bodies are added depth-first from the root, children in document order of
their joints (the order urdfdom and Pinocchio use).  URDF joint names are kept
as they are (``model.joint_names``); fixed joints are merged and not listed.
``floating_base=True`` gives the root link a free joint named ``root_joint``.

Joint limits: each revolute or prismatic joint's ``<limit lower upper>``
becomes a stop at each end (:class:`jaxmbd.forces.JointLimit`): MuJoCo's
soft constraint with its default ``solreflimit``/``solimplimit`` and the
DoF's ``dof_invweight0`` at the reference configuration
(:mod:`jaxmbd.forces.soft`), as MuJoCo imports a URDF.

Collisions (``collisions="floor"`` or ``"all"``): each link's ``<collision>``
box, sphere, cylinder (MuJoCo's: radius and half the length), capsule or
mesh (the convex hull of an STL/OBJ file's scaled vertices; ``package://``
paths are looked up among the URDF directory's ancestors) becomes a
collision geom with MuJoCo's default contact parameters, and a plane
``floor`` (z = 0, normal +z) joins the world.

Not modelled, listed once in a warning: Coulomb friction
(``<dynamics friction>``), collision geometry unless asked for, transmissions, and
mimic joints, which stay independent DoFs (as Pinocchio does unless asked to
couple them); ``URDFImport.mimic`` records them.  ``<dynamics damping>`` is
joint damping.  Mesh and other geometry never enter the dynamics: the inertia
is the link's ``<inertial>`` (a link without one is massless).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import joints as jtypes
from ..builder import ModelBuilder
from ..model import Model
from . import _common as C


def joint_types():
    """URDF joint type -> jaxmbd joint type (from the joint registry, ``JointType.urdf``)."""
    return {u: t.name for t in jtypes.registered() for u in t.urdf}


class URDFError(ValueError):
    """A document jaxmbd cannot load (a ValueError)."""


@dataclass
class URDFImport:
    """The model and what ``load_urdf`` read besides it: ``mimic`` (joint ->
    (mimicked joint, multiplier, offset)), ``joint_range`` (joint -> (lower,
    upper)), ``unsupported`` (what the warning listed)."""

    model: Model
    mimic: dict = field(default_factory=dict)
    joint_range: dict = field(default_factory=dict)
    unsupported: list = field(default_factory=list)


COLLISIONS = (None, "floor", "all")


def load_urdf(path, floating_base: bool = False, *, return_info: bool = False, warn: bool = True,
              gravity=(0.0, 0.0, -9.81), collisions=None):
    """Load a URDF file (or the XML text itself) as a :class:`Model`.

    floating_base: put a free joint between the world and the root link
    (otherwise the root link is welded to the world).  collisions: None (the
    ``<collision>`` elements are listed in the warning), ``"floor"`` (each
    link's collision geometry becomes a collision geom, and a plane
    ``floor`` through the origin with normal +z is added: the links touch the
    floor, not each other) or ``"all"`` (the floor, and the links touch each
    other by MuJoCo's rules: not a link and its parent).  Raises ValueError
    naming the element for malformed documents, missing links, cycles,
    unknown joint types and non-physical inertias.  ``return_info=True``
    returns a :class:`URDFImport`.
    """
    if collisions not in COLLISIONS:
        raise URDFError(f"collisions={collisions!r}: expected one of {COLLISIONS}")
    root, base, where = C.parse_xml(path, "URDF")
    try:
        info = _load(root, bool(floating_base), gravity, collisions, base)
    except ValueError as e:
        raise URDFError(f"{where}: {e}") from None
    if warn and info.unsupported:
        warnings.warn(f"{where}: not modelled by jaxmbd (ignored): {'; '.join(info.unsupported)}",
                      UserWarning, stacklevel=2)
    return info if return_info else info.model


def _origin(el, what):
    o = el.find("origin")
    if o is None:
        return np.eye(3), np.zeros(3)
    xyz = C.numbers(o.get("xyz", "0 0 0"), 3, f"{what}: origin xyz")
    rpy = C.numbers(o.get("rpy", "0 0 0"), 3, f"{what}: origin rpy")
    return C.rpy_to_rot(rpy), xyz


def _link_inertia(link, name):
    what = f"link {name!r}"
    el = link.find("inertial")
    if el is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    R, c = _origin(el, f"{what} inertial")
    m_el = el.find("mass")
    if m_el is None or m_el.get("value") is None:
        raise URDFError(f"{what}: <inertial> without <mass value=...>")
    m = C.number(m_el.get("value"), f"{what}: mass")
    i_el = el.find("inertia")
    if i_el is None:
        raise URDFError(f"{what}: <inertial> without <inertia>")
    keys = ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
    v = {k: C.number(i_el.get(k, "0"), f"{what}: inertia {k}") for k in keys}
    I = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]], [v["ixz"], v["iyz"], v["izz"]]])
    if m < 0:
        raise URDFError(f"{what}: negative mass {m}")
    return m, c, R @ I @ R.T


def _find_file(filename, base):
    """The path of a collision mesh file: absolute, relative to the URDF's directory, or
    ``package://pkg/rest`` (``pkg`` searched among the URDF directory's ancestors and their
    children); None if not found."""
    import os
    if filename.startswith("file://"):
        filename = filename[len("file://"):]
    if filename.startswith("package://"):
        pkg, _, rest = filename[len("package://"):].partition("/")
        d = base
        while d:
            for cand in (os.path.join(d, rest) if os.path.basename(d) == pkg else None, os.path.join(d, pkg, rest)):
                if cand and os.path.isfile(cand):
                    return cand
            up = os.path.dirname(d)
            d = None if up == d else up
        return None
    if os.path.isabs(filename):
        return filename if os.path.isfile(filename) else None
    if base and os.path.isfile(os.path.join(base, filename)):
        return os.path.join(base, filename)
    return None


def _shape(el, what, base, faces=False):
    """(kind, size, extra keywords, R, p) of a <collision> or <visual> element's geometry (box:
    half sizes; cylinder and capsule: MuJoCo's radius and half-length; sphere; mesh: its file's
    vertices, scaled, and with ``faces`` its faces), or None for a mesh file not found."""
    from . import mesh as _mesh
    R, p = _origin(el, what)
    g = el.find("geometry")
    shape = g[0] if g is not None and len(g) else None
    if shape is None:
        raise URDFError(f"{what}: <geometry> without a shape")
    kw, kind, size = {}, shape.tag, ()
    if kind == "box":
        size = 0.5 * C.numbers(shape.get("size"), 3, f"{what}: box size")
    elif kind == "sphere":
        size = (C.number(shape.get("radius"), f"{what}: sphere radius"),)
    elif kind in ("cylinder", "capsule"):
        size = (C.number(shape.get("radius"), f"{what}: {kind} radius"),
                0.5 * C.number(shape.get("length"), f"{what}: {kind} length"))
    elif kind == "mesh":
        path = _find_file(shape.get("filename", ""), base)
        if path is None:
            return None
        try:
            V, F, _ = _mesh.read_mesh(path)
        except _mesh.MeshError as e:
            raise URDFError(f"{what}: {e}") from None
        scale = C.numbers(shape.get("scale", "1 1 1"), 3, f"{what}: mesh scale")
        kw["vertices"] = np.asarray(V, float) * scale
        if faces:
            F = np.asarray(F)
            kw["faces"] = (F[:, [0, 2, 1]] if np.prod(scale) < 0 else F) if len(F) else None
    else:
        raise URDFError(f"{what}: unknown geometry <{kind}>")
    return kind, size, kw, R, p


def _add_collisions(b, links, mode, base, unsupported):
    """Each link's <collision> as a collision geom (:func:`_shape`; a mesh collides as the convex
    hull of its vertices), and the floor."""
    ct, ca = (2, 1) if mode == "floor" else (1, 1)            # "floor": robot geoms meet the floor only
    b.add_geom("world", "plane", name="floor", contype=1, conaffinity=2 if mode == "floor" else 1)
    missing, taken = [], {"floor"}
    for lname, link in links.items():
        for i, el in enumerate(link.findall("collision")):
            what = f"link {lname!r} collision #{i}"
            shape = _shape(el, what, base)
            if shape is None:
                missing.append(el.find("geometry")[0].get("filename", ""))
                continue
            kind, size, kw, R, p = shape
            name = el.get("name")
            if not name or name in taken:
                name = f"{lname}_collision{i}"
            taken.add(name)
            try:
                b.add_geom(lname, kind, size, pos=p, quat=C.rot_to_quat(R), name=name, contype=ct,
                           conaffinity=ca, **kw)
            except ValueError as e:
                raise URDFError(f"{what}: {e}") from None
    if missing:
        unsupported.append(f"collision meshes whose files were not found ({len(missing)}: "
                           f"{', '.join(sorted(set(missing))[:5])})")


def _add_visuals(b, root, links, base, with_floor):
    """Each link's <visual> as a drawn geom (:meth:`jaxmbd.ModelBuilder.add_visual`) in its
    material's colour (the element's own ``<material><color>``, else the robot's material of that
    name, else MuJoCo's grey); a link whose visuals cannot be read (mesh files not found or of a
    format jaxmbd does not read) is drawn by its collision geometry.  With contacts, the floor."""
    from . import mesh as _mesh
    from ..visuals import DEFAULT_RGBA, FLOOR_RGBA
    named = {}
    for m in root.findall("material"):
        c = m.find("color")
        if m.get("name") and c is not None and c.get("rgba"):
            named[m.get("name")] = C.numbers(c.get("rgba"), 4, f"material {m.get('name')!r}: rgba")
    if with_floor:
        b.add_visual("world", "plane", rgba=FLOOR_RGBA, name="floor")
    for lname, link in links.items():
        drawn = 0
        for tag in ("visual", "collision"):
            if drawn:
                break
            for i, el in enumerate(link.findall(tag)):
                what = f"link {lname!r} {tag} #{i}"
                try:
                    shape = _shape(el, what, base, faces=True)
                except (URDFError, _mesh.MeshError):
                    shape = None
                if shape is None:
                    continue
                kind, size, kw, R, p = shape
                mat = el.find("material")
                rgba = DEFAULT_RGBA
                if mat is not None:
                    c = mat.find("color")
                    if c is not None and c.get("rgba"):
                        rgba = C.numbers(c.get("rgba"), 4, f"{what}: material color")
                    elif mat.get("name") in named:
                        rgba = named[mat.get("name")]
                b.add_visual(lname, kind, size, pos=p, quat=C.rot_to_quat(R), rgba=np.clip(rgba, 0, 1),
                             name=f"{lname}_{tag}{i}",
                             **kw)
                drawn += 1


def _load(root, floating_base, gravity, collisions=None, base=None):
    if root.tag != "robot":
        raise URDFError(f"root element is <{root.tag}>, expected <robot>")
    links = {}
    for el in root.findall("link"):
        name = el.get("name")
        if not name:
            raise URDFError("a <link> without a name")
        if name in links:
            raise URDFError(f"duplicate link {name!r}")
        links[name] = el
    if not links:
        raise URDFError("no <link> elements")
    parent_of, children, jnames = {}, {n: [] for n in links}, set()
    unsupported, mimic, joint_range = [], {}, {}
    friction, limited, degenerate = [], [], []
    for el in root.findall("joint"):
        name = el.get("name")
        if not name:
            raise URDFError("a <joint> without a name")
        if name in jnames:
            raise URDFError(f"duplicate joint {name!r}")
        jnames.add(name)
        what = f"joint {name!r}"
        jt = el.get("type")
        if jt not in joint_types():
            raise URDFError(f"{what}: unknown joint type {jt!r}; expected one of {', '.join(joint_types())}")
        p, c = el.find("parent"), el.find("child")
        if p is None or c is None or not p.get("link") or not c.get("link"):
            raise URDFError(f"{what}: needs <parent link=...> and <child link=...>")
        p, c = p.get("link"), c.get("link")
        for role, ln in (("parent", p), ("child", c)):
            if ln not in links:
                raise URDFError(f"{what}: {role} link {ln!r} is not defined")
        if c in parent_of:
            raise URDFError(f"{what}: link {c!r} already has a parent joint ({parent_of[c][0]!r}): "
                            "the links do not form a tree")
        if p == c:
            raise URDFError(f"{what}: joins link {p!r} to itself")
        parent_of[c] = (name, p)
        children[p].append(el)
        lim = el.find("limit")
        if lim is not None and jtypes.get(joint_types()[jt]).uses_axis:
            lo = C.number(lim.get("lower", "0"), f"{what}: limit lower")
            hi = C.number(lim.get("upper", "0"), f"{what}: limit upper")
            joint_range[name] = (lo, hi)
            if jt in ("revolute", "prismatic"):     # a continuous joint's limit is ignored (URDF spec)
                if lo < hi:
                    limited.append((name, lo, hi))
                else:
                    degenerate.append(name)
        dyn = el.find("dynamics")
        if dyn is not None and C.number(dyn.get("friction", "0"), f"{what}: friction"):
            friction.append(name)
        mm = el.find("mimic")
        if mm is not None:
            mimic[name] = (mm.get("joint"), C.number(mm.get("multiplier", "1"), f"{what}: mimic multiplier"),
                           C.number(mm.get("offset", "0"), f"{what}: mimic offset"))
    roots = [n for n in links if n not in parent_of]
    if not roots:
        raise URDFError("every link has a parent: the joints form a cycle")
    if len(roots) > 1:
        raise URDFError(f"{len(roots)} root links ({', '.join(map(repr, roots[:5]))}): "
                        "the links are not connected into one tree")
    root_link = roots[0]

    b = ModelBuilder(gravity=gravity)
    q0 = []
    m, c, I = _link_inertia(links[root_link], root_link)
    if root_link == "world":
        if floating_base:
            raise URDFError("the root link is named 'world': it cannot float")
        top = "world"
    else:
        if floating_base:
            rj = "root_joint"
            while rj in jnames:
                rj += "_"
            b.add_body(root_link, "world", "free", mass=m, com=c, inertia=I, joint_name=rj, strict_inertia=False)
            q0.append(np.array([0, 0, 0, 1.0, 0, 0, 0]))
        else:
            b.add_body(root_link, "world", "fixed", mass=m, com=c, inertia=I, strict_inertia=False)
        top = root_link
    seen = {root_link}
    stack = [(el, top) for el in reversed(children[root_link])]
    while stack:  # depth-first pre-order, children in document order of their joints
        el, parent_body = stack.pop()
        child = _add_joint(b, el, parent_body, links, seen, q0)
        stack.extend((e, child) for e in reversed(children[child]))
    unreachable = [n for n in links if n not in seen]
    if unreachable:
        raise URDFError(f"links {', '.join(map(repr, unreachable[:5]))} are not connected to the root "
                        f"{root_link!r} (a cycle)")
    if degenerate:
        unsupported.append(f"joint limits with lower >= upper ({', '.join(degenerate)}; not enforced)")
    if friction:
        unsupported.append(f"joint Coulomb friction ({', '.join(friction)})")
    if mimic:
        unsupported.append(f"mimic joints, kept as independent DoFs ({', '.join(mimic)})")
    ncoll = len(root.findall("link/collision"))
    if collisions is not None:
        _add_collisions(b, links, collisions, base, unsupported)
    elif ncoll:
        unsupported.append(f"contacts ({ncoll} collision geometries; load_urdf(..., collisions='floor' "
                           "or 'all') adds them)")
    _add_visuals(b, root, links, base, collisions is not None)
    ntr = len(root.findall("transmission"))
    if ntr:
        unsupported.append(f"transmissions ({ntr})")
    b.set_initial_state(q0=np.concatenate(q0) if q0 else np.zeros(0))
    model = b.build()
    if limited:
        _add_limits(b, model, limited)
        model = b.build()
    if b.inertia_notes:
        unsupported.append("the triangle-inequality check of inertias (violated, used as given: "
                           + ", ".join(b.inertia_notes) + ")")
    return URDFImport(model=model, mimic=mimic, joint_range=joint_range, unsupported=unsupported)


def _add_limits(b, model, limited):
    """A :class:`jaxmbd.forces.JointLimit` per limited revolute/prismatic joint: MuJoCo's soft
    constraint with its default solreflimit/solimplimit and the DoF's ``dof_invweight0`` at the
    reference configuration (:mod:`jaxmbd.forces.soft`), as MuJoCo does on importing a URDF."""
    names = list(model.joint_names)
    for name, lo, hi in limited:
        dof = int(model.joint_dof_adr[names.index(name)])
        b.add_joint_limit(model.topo.names[int(model.topo.dof_body[dof])], lo, hi)


def _add_joint(b, el, parent_body, links, seen, q0):
    """Add the child link of joint ``el`` under ``parent_body``; returns its name."""
    name = el.get("name")
    what = f"joint {name!r}"
    jt = joint_types()[el.get("type")]
    spec = jtypes.get(jt)
    child = el.find("child").get("link")
    if child in seen:
        raise URDFError(f"{what}: link {child!r} is reached twice (a cycle)")
    seen.add(child)
    R, p = _origin(el, what)
    ax_el = el.find("axis")
    axis = C.numbers(ax_el.get("xyz", "1 0 0") if ax_el is not None else "1 0 0", 3, f"{what}: axis")
    kw = {}
    if spec.uses_axis:
        if np.linalg.norm(axis) < 1e-12:
            raise URDFError(f"{what}: axis is zero")
        kw["axis"] = axis
    if el.get("type") == "planar":
        n = axis / max(np.linalg.norm(axis), 1e-300)
        if not np.allclose(n, [0, 0, 1], atol=1e-9):
            raise URDFError(f"{what}: a planar joint's axis must be 0 0 1 (the joint frame's z), got {axis}")
    dyn = el.find("dynamics")
    if dyn is not None and not spec.welded:
        kw["damping"] = C.number(dyn.get("damping", "0"), f"{what}: damping")
    m, c, I = _link_inertia(links[child], child)
    b.add_body(child, parent_body, jt, pos=p, quat=C.rot_to_quat(R), mass=m, com=c, inertia=I, strict_inertia=False,
               joint_name=name, **kw)
    q0.append(jtypes.neutral_np(jt))
    return child
