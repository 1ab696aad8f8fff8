"""A quadruped on a floor: the built-in contact scene (``jaxmbd simulate quadruped_scene``).

A box torso on a free joint and four legs, each a hip (abduction about the
torso's x axis, flexion about y) and a knee (about y), every joint with a
range (a compliant stop) and a position servo (MuJoCo's ``position``
actuator, kp and a critical damping ratio) whose zero control holds the
joint at 0: legs straight down.  Collision geoms: the torso box, a capsule
per thigh and shin, a sphere per foot, and the floor plane; the robot's geoms
touch the floor only (contype/conaffinity bitmasks), with MuJoCo's default
solref/solimp mapped to the compliant law.  Dimensions and masses are round
numbers of a 15 kg dog-sized robot, not any particular machine."""

from __future__ import annotations

import numpy as np

from ..builder import ModelBuilder

TORSO = (0.25, 0.12, 0.05)        # box half-sizes (m)
THIGH, SHIN = 0.2, 0.2            # segment lengths (m)
FOOT = 0.03                       # foot sphere radius (m)
HIPS = {"fl": (0.2, 0.12), "fr": (0.2, -0.12), "hl": (-0.2, 0.12), "hr": (-0.2, -0.12)}
STAND_HEIGHT = THIGH + SHIN + FOOT        # torso centre above the floor with straight legs (m)


def _box_inertia(m, h):
    a, b, c = (2 * np.asarray(h)) ** 2
    return (m * (b + c) / 12, m * (a + c) / 12, m * (a + b) / 12)


def _rod(m, length, r):
    t = m * (3 * r * r + length * length) / 12
    return (t, t, m * r * r / 2)


def quadruped_builder(kp=300.0, dampratio=1.0, drop=0.05):
    """The builder of :func:`quadruped` (add geoms, actuators or forces before building)."""
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_geom("world", "plane", name="floor", contype=1, conaffinity=2)
    b.add_body("torso", "world", "free", mass=10.0, com=(0, 0, 0), inertia=_box_inertia(10.0, TORSO))
    robot = dict(contype=2, conaffinity=1)
    b.add_geom("torso", "box", TORSO, name="torso", **robot)
    for leg, (x, y) in HIPS.items():
        b.add_body(f"{leg}_hip", "torso", "revolute", axis=(1, 0, 0), pos=(x, y, 0.0), mass=0.3,
                   com=(0, 0, 0), inertia=(2e-4, 2e-4, 2e-4))
        b.add_body(f"{leg}_thigh", f"{leg}_hip", "revolute", axis=(0, 1, 0), mass=1.0, com=(0, 0, -THIGH / 2),
                   inertia=_rod(1.0, THIGH, 0.03))
        b.add_body(f"{leg}_shin", f"{leg}_thigh", "revolute", axis=(0, 1, 0), pos=(0, 0, -THIGH), mass=0.5,
                   com=(0, 0, -SHIN / 2), inertia=_rod(0.5, SHIN, 0.02))
        b.add_geom(f"{leg}_thigh", "capsule", (0.03, THIGH / 2), pos=(0, 0, -THIGH / 2), name=f"{leg}_thigh",
                   **robot)
        b.add_geom(f"{leg}_shin", "capsule", (0.02, SHIN / 2), pos=(0, 0, -SHIN / 2), name=f"{leg}_shin", **robot)
        b.add_geom(f"{leg}_shin", "sphere", (FOOT,), pos=(0, 0, -SHIN), name=f"{leg}_foot", **robot)
        for joint, lo, hi in ((f"{leg}_hip", -0.6, 0.6), (f"{leg}_thigh", -1.2, 1.2), (f"{leg}_shin", -2.4, 0.3)):
            b.add_joint_limit(joint, lo, hi, **_limit_law())
            b.add_actuator(joint, "position", kp=kp, dampratio=dampratio, ctrlrange=(lo, hi))
    b.set_initial_state(np.array([0.0, 0.0, STAND_HEIGHT + drop, 1.0, 0.0, 0.0, 0.0] + [0.0] * 12))
    return b


def _limit_law():
    """A stiff, well-damped stop (N m/rad, N m s/rad): the servos stay well inside it."""
    return dict(stiffness=2e3, viscous=20.0)


def quadruped(kp=300.0, dampratio=1.0, drop=0.05):
    """A 12-joint quadruped standing on straight legs over a floor plane, its
    torso ``drop`` metres above its standing height (see the module)."""
    return quadruped_builder(kp, dampratio, drop).build()
