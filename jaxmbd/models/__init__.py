"""Built-in mechanisms.

Geometry and inertias are generic (fixed pseudo-random draws, so every call
returns the same model): link offsets, joint axes and inertia tensors are not
aligned with the coordinate axes, so no term of the dynamics vanishes by
accident.  Functions named ``*_builder`` return the :class:`ModelBuilder`
(useful to add bodies or to export the same mechanism elsewhere).

Model files: ``assets/quadruped_scene.xml`` (:func:`quadruped_scene_path`,
:func:`load_quadruped_scene`) is a robot scene written the way MuJoCo
Menagerie writes them, for loading, comparing with MuJoCo and benchmarking
a real-robot-sized contact problem.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .. import joints
from ..builder import ModelBuilder

# the joint types random trees draw by default (JointType.random_trees)
_DEFAULT_TYPES = tuple(t.name for t in joints.registered() if t.random_trees)


def _rng(seed):
    if isinstance(seed, np.random.Generator):
        return seed
    if hasattr(seed, "dtype") and getattr(seed, "shape", ()) != ():  # a JAX PRNG key
        seed = int(np.asarray(seed).ravel()[-1])
    return np.random.default_rng(seed)


def _unit(rng, n=3):
    v = rng.normal(size=n)
    return v / np.linalg.norm(v)


def _rand_rot(rng):
    q = _unit(rng, 4)
    w, x, y, z = q
    return q, np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def generic_body(rng, length=0.3, mass_range=(0.5, 2.0)):
    """Random but well-conditioned body: a box of random size, rotated, off-centre."""
    m = rng.uniform(*mass_range)
    a, b, c = rng.uniform(0.3, 1.0, size=3) * length
    diag = m / 12.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    _, R = _rand_rot(rng)
    return dict(mass=m, com=rng.uniform(-0.5, 0.5, 3) * length + np.array([0.0, 0.0, -0.5 * length]),
                inertia=R @ np.diag(diag) @ R.T)


def _placement(rng, length=0.3):
    quat, _ = _rand_rot(rng)
    # mostly small rotations: a recognisable mechanism, yet nothing axis-aligned
    quat = np.array([1.0, 0.0, 0.0, 0.0]) + 0.3 * quat
    return dict(pos=rng.uniform(-0.3, 0.3, 3) * length + np.array([0.0, 0.0, -length]),
                quat=quat / np.linalg.norm(quat))


def _add_link(b, rng, name, parent, joint, **kw):
    jt = joints.get(joint)
    axis = _unit(rng) if jt.uses_axis else None
    extra = dict(axis=axis)
    if jt.uses_pitch:
        extra["pitch"] = float(rng.uniform(0.02, 0.1))
    if jt.uses_anchor:
        extra["anchor"] = rng.uniform(-0.05, 0.05, 3)
    if jt.floating:
        extra.update(pos=np.zeros(3), quat=np.array([1.0, 0, 0, 0]))
    else:
        extra.update(_placement(rng))
    extra.update(generic_body(rng))
    extra.update(kw)
    b.add_body(name, parent, joint, **extra)


def chain_builder(n, joint="revolute", floating=False, seed=1):
    """A serial chain of n bodies; with floating=True the first joint is free."""
    rng = _rng(seed)
    b = ModelBuilder()
    for i in range(n):
        jt = "free" if (floating and i == 0) else joint
        _add_link(b, rng, f"link{i}", "world" if i == 0 else f"link{i - 1}", jt)
    return b


def chain(n, joint="revolute", floating=False, seed=1):
    """Serial chain of n bodies on `joint` joints (free first joint if floating)."""
    return chain_builder(n, joint, floating, seed).build()


def humanoid30_builder(seed=30):
    """Featherstone's 30-DoF humanoid/quadruped (IJRR 24(6), 2005, §6, Fig. 6): a torso on
    a free (6-DoF) joint with four serial limbs of six revolute links each."""
    rng = _rng(seed)
    b = ModelBuilder()
    b.add_body("torso", "world", "free", **generic_body(rng, length=0.5, mass_range=(8.0, 12.0)))
    for limb in range(4):
        parent = "torso"
        for t in range(6):
            name = f"limb{limb}_link{t}"
            _add_link(b, rng, name, parent, "revolute")
            parent = name
    return b


def humanoid30(seed=30):
    """25 bodies, 24 revolute joints + 1 free joint: nq = 31, nv = 30."""
    return humanoid30_builder(seed).build()


def binary_tree_builder(levels, joint="revolute", seed=2):
    rng = _rng(seed)
    b = ModelBuilder()
    for i in range(1, 2 ** levels):  # heap order: parent(i) = i // 2
        _add_link(b, rng, f"node{i}", "world" if i == 1 else f"node{i // 2}", joint)
    return b


def binary_tree(levels, joint="revolute", seed=2):
    """Balanced binary tree of 2**levels - 1 bodies in heap order."""
    return binary_tree_builder(levels, joint, seed).build()


def grid_tree_builder(m, joint="revolute", seed=3):
    rng = _rng(seed)
    b = ModelBuilder()
    for r in range(m):
        for c in range(m):
            parent = "world" if (r, c) == (0, 0) else (f"g{r - 1}_{c}" if r > 0 else f"g{r}_{c - 1}")
            _add_link(b, rng, f"g{r}_{c}", parent, joint)
    return b


def grid_tree(m, joint="revolute", seed=3):
    """Spanning tree of an m x m grid rooted at a corner; node (r, c) has depth
    r + c + 1, i.e. every node lies on a shortest path to the root."""
    return grid_tree_builder(m, joint, seed).build()


def side_branch_chain_builder(m, joint="revolute", seed=4):
    rng = _rng(seed)
    b = ModelBuilder()
    for k in range(m):
        _add_link(b, rng, f"main{k}", "world" if k == 0 else f"main{k - 1}", joint)
        _add_link(b, rng, f"leaf{k}", f"main{k}", joint)
    return b


def side_branch_chain(m, joint="revolute", seed=4):
    """A chain of m bodies with one leaf on each: 2m bodies (Featherstone, IJRR 24(6), 2005, Table 2)."""
    return side_branch_chain_builder(m, joint, seed).build()


def random_tree_builder(key, n, joint_types=_DEFAULT_TYPES, root_joint=None, p_fixed=0.0):
    """Random tree of n moving bodies for tests.

    Each body's parent is drawn uniformly from the bodies before it (or the
    world).  Joint types are drawn from `joint_types`; `root_joint` (e.g.
    "free") forces the first body's joint.  With p_fixed > 0, welded bodies
    are inserted at random (they are merged away by ``build``).
    """
    rng = _rng(key)
    b = ModelBuilder()
    names = []
    k = 0
    while len(names) < n:
        i = len(names)
        if i == 0:
            parent = "world"
        else:
            j = int(rng.integers(-1, i)) if root_joint is None else int(rng.integers(0, i))
            parent = "world" if j < 0 else names[j]
        jt = root_joint if (i == 0 and root_joint) else str(rng.choice(joint_types))
        if p_fixed and rng.uniform() < p_fixed:
            k += 1
            wname = f"weld{k}"
            _add_link(b, rng, wname, parent, "fixed")
            parent = wname
        name = f"b{i}"
        _add_link(b, rng, name, parent, jt)
        names.append(name)
    return b


def random_tree(key, n, joint_types=_DEFAULT_TYPES, root_joint=None, p_fixed=0.0):
    return random_tree_builder(key, n, joint_types, root_joint, p_fixed).build()


def pendulum(length=1.0, mass=1.0, gravity=9.81):
    """A point-like mass on a massless-looking rod, revolute about y; q = 0 hangs down."""
    b = ModelBuilder(gravity=(0.0, 0.0, -gravity))
    r = 1e-3 * length
    b.add_body("bob", "world", "revolute", axis=(0, 1, 0), mass=mass, com=(0, 0, -length),
               inertia=(0.4 * mass * r * r,) * 3)
    return b.build()


def double_pendulum(l1=1.0, l2=1.0, m1=1.0, m2=1.0, gravity=9.81):
    """Two point-like masses on revolute joints about y."""
    b = ModelBuilder(gravity=(0.0, 0.0, -gravity))
    r = 1e-3
    b.add_body("upper", "world", "revolute", axis=(0, 1, 0), mass=m1, com=(0, 0, -l1),
               inertia=(0.4 * m1 * r * r,) * 3)
    b.add_body("lower", "upper", "revolute", axis=(0, 1, 0), pos=(0, 0, -l1), mass=m2,
               com=(0, 0, -l2), inertia=(0.4 * m2 * r * r,) * 3)
    return b.build()


def _rod_inertia(mass, length, thin=1e-3):
    """COM inertia of a slender rod along x (a small Ixx keeps it physical)."""
    j = mass * length ** 2 / 12.0
    return (thin * j, j, j)


def stiff_double_pendulum(phi0=-math.pi / 12):
    """The stiff double pendulum of D. Negrut's thesis (University of Iowa,
    1998, §5.1, Tables 18-19), in joint coordinates: planar (x-y, gravity
    9.81 along -y), revolute about z.

    q[0] = θ1, the absolute angle of body 1 (from +x); q[1] = θ2 - θ1, the
    angle of body 2 relative to body 1.  Table 18: half-lengths L1 = 1,
    L2 = 1.5 (joint-to-COM distances), masses 3 and 0.3; rotational
    spring-dampers k1 = 400, C1 = 15 (ground-body 1) and k2 = 3e5, c2 = 5e4
    (body 1-body 2).  Table 19 initial state: θ1 = 2π, θ2 = 23π/12, θ̇1 = 0,
    θ̇2 = 10.  Not in the thesis, so chosen here: gravity 9.81, slender rods
    (J1 = 1, J2 = 0.225), spring free angles 3π/2 (hanging) and ``phi0`` =
    -π/12 (the initial relative angle); with them the motion matches the
    thesis's description (θ̇1 between about -10 and 7, θ1 about 4 to 6) and
    the dominant eigenvalue is about -1e5, as the thesis states."""
    L1, L2, m1, m2 = 1.0, 1.5, 3.0, 0.3
    b = ModelBuilder(gravity=(0.0, -9.81, 0.0))
    b.add_body("body1", "world", "revolute", axis=(0, 0, 1), mass=m1, com=(L1, 0, 0),
               inertia=_rod_inertia(m1, 2 * L1), stiffness=400.0, damping=15.0, spring_ref=3 * math.pi / 2)
    b.add_body("body2", "body1", "revolute", axis=(0, 0, 1), pos=(2 * L1, 0, 0), mass=m2, com=(L2, 0, 0),
               inertia=_rod_inertia(m2, 2 * L2), stiffness=3.0e5, damping=5.0e4, spring_ref=phi0)
    b.set_initial_state([2 * math.pi, 23 * math.pi / 12 - 2 * math.pi], [0.0, 10.0])
    return b.build()


def stiff_chain(n, length=0.5, mass=1.0, stiffness=1.0e4, damping=2.0e3):
    """A planar chain of n uniform links (revolute about z, gravity along -y):
    the first joint swings freely (light damping 0.05), the n-1 others carry
    stiff, heavily damped springs (free angle 0).  It swings like a pendulum
    while its internal modes are stiff: with the defaults the dominant
    eigenvalue of the linearised dynamics lies below -1e5 (the damped tip
    link).  Initial state: horizontal along +x, every internal joint bent by
    0.1 rad, the tip joint moving at 1 rad/s."""
    if n < 2:
        raise ValueError("stiff_chain needs n >= 2 links")
    b = ModelBuilder(gravity=(0.0, -9.81, 0.0))
    parent = "world"
    for i in range(n):
        b.add_body(f"link{i}", parent, "revolute", axis=(0, 0, 1), pos=(length if i else 0.0, 0, 0),
                   mass=mass, com=(length / 2, 0, 0), inertia=_rod_inertia(mass, length),
                   stiffness=stiffness if i else 0.0, damping=damping if i else 0.05)
        parent = f"link{i}"
    q0 = np.full(n, 0.1)
    q0[0] = 0.0
    v0 = np.zeros(n)
    v0[-1] = 1.0
    b.set_initial_state(q0, v0)
    return b.build()


def spinning_body(inertia=(1.0, 2.0, 3.0), omega=(0.01, 2.0, 0.01), mass=1.0):
    """A free rigid body without gravity spinning about (nearly) its
    intermediate principal axis (body frame): the Dzhanibekov flip.  Kinetic
    energy and world angular momentum are conserved."""
    b = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_body("body", "world", "free", mass=mass, inertia=inertia)
    b.set_initial_state([0, 0, 0, 1, 0, 0, 0], [0.1, 0.0, 0.0, *omega])
    return b.build()


ASSETS = Path(__file__).resolve().parent / "assets"


def quadruped_scene_path():
    """Path (str) of ``assets/quadruped_scene.xml``: a go2-class quadruped
    (12 DoF on a free base, about 15 kg) on a floor plane, written the way
    MuJoCo Menagerie writes robot files: ``<default>`` classes, visual geoms
    (group 2, contype/conaffinity 0) beside collision geoms (group 3) on every
    link, position servos with ctrl and force ranges, limited joints with
    armature, damping and frictionloss, a ``home`` keyframe, and the scene
    (floor, light, textures) in a file that includes the robot
    (``assets/quadruped.xml``), as Menagerie's ``scene.xml`` does.  Primitive
    geoms stand in for meshes: 61 geoms (26 collide), 267 candidate geom pairs
    by MuJoCo's rules.  The file's pose (``qpos0``; the hip and knee joints carry
    a ``ref``) stands with the feet 0.6 mm above the floor; the keyframe
    ``home`` is the same pose with the feet about 1 cm into it (MuJoCo's soft
    contacts push it up)."""
    return str(ASSETS / "quadruped_scene.xml")


def load_quadruped_scene(warn=False, **kw):
    """:func:`jaxmbd.load_mjcf` of :func:`quadruped_scene_path` (``kw`` goes to
    ``load_mjcf``; the file loads without a warning).  The ``home`` keyframe is
    ``model.keyframes["home"]``."""
    from ..io.mjcf import load_mjcf
    return load_mjcf(quadruped_scene_path(), warn=warn, **kw)


from .mechanisms import (andrews_squeezer, slider_crank, four_bar, cartesian_double_pendulum,  # noqa: E402
                         SQUEEZER, SQUEEZER_Q0, CARTESIAN_PENDULUM)
from .vehicle import hmmwv14  # noqa: E402
from .quadruped import quadruped, quadruped_builder  # noqa: E402

__all__ = ["quadruped", "quadruped_builder", "quadruped_scene_path", "load_quadruped_scene", "hmmwv14", "andrews_squeezer", "slider_crank", "four_bar", "cartesian_double_pendulum", "stiff_double_pendulum", "stiff_chain", "spinning_body", "humanoid30", "chain", "binary_tree", "grid_tree", "side_branch_chain", "random_tree",
           "pendulum", "double_pendulum", "generic_body", "humanoid30_builder", "chain_builder",
           "binary_tree_builder", "grid_tree_builder", "side_branch_chain_builder",
           "random_tree_builder"]
