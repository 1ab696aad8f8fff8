"""HMMWV14: the stiff 14-body vehicle of D. Negrut's thesis ("On the implicit
integration of differential-algebraic equations of multibody dynamics",
University of Iowa, 1998; §3.4.3.5 and §5.2-5.3, Table 5), rebuilt with
Project Chrono's public HMMWV masses, inertias and hardpoints
(github.com/projectchrono/chrono: ``src/chrono_models/vehicle/hmmwv/`` and
``data/vehicle/hmmwv/``; the hardpoints are the inch values of
``suspension/HMMWV_DoubleWishbone.cpp``).  The thesis gives the bodies, the
joint types and counts, the bushing and tire constants and the scenario; its masses, inertias
and hardpoints are in a report that is not public (Serban, Negrut and Haug,
"HMMWV multibody models", Tech. Rep. R-211, CCAD, University of Iowa), hence
Chrono's.

Bodies: chassis (free), per corner an upper control arm (UCA), a lower
control arm (LCA) and a "spindle" (upright, spindle, wheel and tire merged),
and the steering rack.  Joint-coordinate tree (our choice; the thesis gives
only the counts, which every choice of the kind meets): chassis →
UCA (revolute about the UCA hinge), UCA → spindle (spherical at the UCA
ball joint), chassis → LCA (revolute about x), chassis → rack (prismatic
along y).  Cut joints: the LCA ball joint (3 equations) and the tie rod /
toe link (a distance constraint; front to the rack, rear to the chassis).
27 coordinates, 16 constraint equations, 11 DOF.

``stiffened=True`` is the thesis's simulated model: each UCA hangs on
a spherical joint at its back pivot plus two bushing spring-dampers
(k = 2e7 N/m, c = 2e6 N s/m) at the lever fraction β along the hinge line,
and the rack is welded to the chassis: 34 coordinates, 16 equations, 18
DOF.  β = 0.3162 puts the dominant eigenvalue of the linearization near
the thesis's -2.6e5 (-2.585e5 by an independent NumPy linearization).

Force elements: linear suspension springs with Chrono's linear rates and
free lengths chosen so that Chrono's design geometry is the static
equilibrium (Chrono's own free lengths lift the vehicle far above it),
linear shocks (Chrono's damping coefficients), the bushings, and one tire per
spindle (the thesis's vertical spring-damper k = 296325 N/m, c = 3502 N s/m;
Chrono's unloaded radius r0 = 0.4699 m) against a flat road with a
0.1 m half-cylinder bump ``bump_distance`` ahead of the front wheel centres.
The default initial state is the static equilibrium on flat ground moving
forward at 10 mph (4.4704 m/s) with no driving force.

Frames: Chrono's ISO axes (x forward, y left, z up); every body frame is
parallel to the chassis reference frame C in the design configuration and
sits at the body's inboard joint; the chassis frame is C itself.

Chrono's arm moments (UCA 0.03, 0.03, 0.06276; LCA 0.4, 0.4, 0.8938 kg m²) break the triangle
inequality slightly (Chrono marks its small-body inertias as placeholders);
they are kept as given (``strict_inertia=False``; the mass matrix stays
positive definite).
"""

from __future__ import annotations

import numpy as np

from ..builder import ModelBuilder

IN = 0.0254
SUSP_X = {"F": 1.688965, "R": -1.688965}

# left-side hardpoints in inches, suspension frame (Chrono's HMMWV_DoubleWishbone.cpp, exact values)
HARDPOINTS_IN = {
    "F": dict(SPINDLE=(-1.59, 35.815, -1.035), UPRIGHT=(-1.59, 29.5675, -1.035),
              UCA_F=(-1.8864, 17.5575, 9.6308), UCA_B=(-10.5596, 18.8085, 7.6992), UCA_U=(-2.088, 28.17, 8.484),
              UCA_CM=(-4.155, 23.176, 8.575), LCA_F=(8.79, 12.09, 0.0), LCA_B=(-8.79, 12.09, 0.0),
              LCA_U=(-1.40, 30.965, -4.65), LCA_CM=(0.0, 21.528, -2.325), SHOCK_C=(4.095, 19.598, 12.722),
              SHOCK_A=(3.827, 21.385, -1.835), SPRING_C=(4.095, 20.07, 7.775), SPRING_A=(3.827, 21.385, -1.835),
              TIEROD_C=(-9.855, 17.655, 2.135), TIEROD_U=(-6.922, 32.327, -0.643)),
    "R": dict(SPINDLE=(1.40, 35.815, -1.035), UPRIGHT=(1.40, 29.5675, -1.035),
              UCA_F=(13.7445, 18.1991, 8.9604), UCA_B=(3.0355, 18.1909, 8.8096), UCA_U=(1.40, 28.17, 8.5),
              UCA_CM=(4.895, 23.183, 8.692), LCA_F=(8.79, 12.09, 0.0), LCA_B=(-8.79, 12.09, 0.0),
              LCA_U=(1.40, 30.965, -4.65), LCA_CM=(0.0, 21.527, -2.325), SHOCK_C=(-4.095, 19.598, 12.722),
              SHOCK_A=(-3.827, 21.415, -1.511), SPRING_C=(-4.095, 19.747, 10.098),
              SPRING_A=(-3.827, 21.385, -1.835), TIEROD_C=(8.79, 16.38, 2.31), TIEROD_U=(6.704, 32.327, -0.365)),
}

# Chrono's masses (kg) and inertias (kg m² about the COM, chassis-parallel axes, left side): HMMWV_Chassis,
# HMMWV_DoubleWishbone, HMMWV_Wheel, the HMMWV tire models and HMMWV_RackPinion
CHASSIS = dict(mass=2086.52, com=(0.056, 0.0, 0.213), inertia=(1078.52, 2955.66, 3570.20))
UCA_MASS, LCA_MASS = 5.813, 23.965
UCA_MOMENTS, LCA_MOMENTS = (0.03, 0.03, 0.06276), (0.4, 0.4, 0.8938)    # in the arm frame (ChDoubleWishbone.cpp)
# merged spindle: upright, spindle, wheel, tire (Chrono adds wheel and tire to its spindle body)
UPRIGHT = dict(mass=19.45, inertia=(0.1656, 0.1934, 0.04367))
SPINDLE = dict(mass=14.705, inertia=(0.04117, 0.07352, 0.04117))
WHEEL = dict(mass=18.8, inertia=(0.4634, 0.6243, 0.4634))
TIRE = dict(mass=37.6, inertia=(3.84, 6.69, 3.84))
RACK = dict(mass=9.072, com=(1.24498, 0.0, 0.101322), inertia=(1.0, 1.0, 1.0))

# force elements
SPRING_K = {"F": 167062.0, "R": 369149.0}          # N/m (Chrono's linear rates)
SPRING_L0 = {"F": 0.319415, "R": 0.337587}         # m, free lengths that make the design the static equilibrium
SHOCK_C = {"F": 19015.5692, "R": 36725.2201}       # N s/m
TIRE_K, TIRE_C, TIRE_R0 = 296325.0, 3502.0, 0.4699
BUSHING_K, BUSHING_C, BUSHING_L0 = 2.0e7, 2.0e6, 0.1
BUMP_RADIUS = 0.05
SPEED = 4.4704                                      # 10 mph
GRAVITY = 9.81

# the baseline's static equilibrium on flat ground (chassis pitch nose-down about +y): the starting pose of
# the solve below
EQ_PITCH = 4.067e-4
EQ_ORIGIN = (-0.00009, 0.0, 0.474860)

# Static equilibria on flat ground (mechanism order, v = 0), computed with
# jaxmbd.static_equilibrium (6 Newton steps from the pose above,
# max |a| 2e-12 baseline, 2e-9 stiffened); tests/test_vehicle.py checks that
# they are at rest and consistent.  The baseline's agrees with an independent
# NumPy/SciPy static solve of the same model (chassis COM z 0.687838 m, pitch
# 0.0233°, tire loads 6518.8 and 6121.0 N); the stiffened one (β = 0.3162) has
# that solve's pitch 0.0286°, COM z 0.687164 m (that solve: 0.687649 m).
EQ_BASELINE = (
    -9e-05, -1.9677444174290755e-14, 0.47486090166715733, 0.9999999793251576, -5.184763585452714e-12,
    0.00020334621613003976, 2.5497071635199857e-08, 1.1504341678586428e-06, 0.9999999999998748,
    -4.882249522454457e-07, 1.5962667942303602e-08, -1.0921748679821467e-07, -1.1504341677269751e-06,
    0.9999999999998748, 4.882249525141226e-07, 1.5962668640011698e-08, 1.0921748352274151e-07,
    2.3553044827761635e-06, 0.9999999999995269, -9.722781004709331e-07, 1.1997152131967998e-08,
    -2.36809193662092e-08, -2.355304482869988e-06, 0.9999999999995269, 9.722781006633744e-07,
    1.1997152856198067e-08, 2.3680919089674478e-08, 6.505621862825727e-07, -6.505621862783058e-07,
    1.306056710161401e-06, -1.306056710283283e-06, 5.76416593586421e-16)

EQ_STIFFENED = (
    -9e-05, 1.0754243285316782e-15, 0.47467768806806543, 0.9999999687589604, 1.7936642178260864e-14,
    0.0002499641537749022, -7.176280699904827e-11, 0.9999959768044288, 0.0006857718744285484,
    -7.779781112722389e-05, 0.0027513704572870194, 0.999993376256746, -0.002448672412638681,
    0.0023408800974391154, -0.001331062139360814, 0.9999959768044288, -0.0006857718744276236,
    -7.779781112632374e-05, -0.0027513704572857236, 0.9999933762567461, 0.0024486724126373096,
    0.002340880097437146, 0.0013310621393603595, 0.9999999583715984, -1.3363160652835597e-05,
    2.1293106754629744e-05, -0.00028744535293456265, 0.9999999387639963, -2.7360005215855555e-05,
    -0.0002491070287876047, 0.00024427263849035333, 0.9999999583715984, 1.3363160652775651e-05,
    2.129310675388361e-05, 0.0002874453529347112, 0.9999999387639963, 2.7360005215768202e-05,
    -0.0002491070287873159, -0.00024427263849036276, 0.00023882161479077597, -0.00023882161479040075,
    -2.9977723988289185e-05, 2.9977723988284177e-05)

CORNERS = (("RF", "F", -1), ("LF", "F", 1), ("RR", "R", -1), ("LR", "R", 1))


def hardpoints(axle, side):
    """Hardpoints of one corner in the chassis frame C (m); side +1 left, -1 right."""
    out = {}
    for k, p in HARDPOINTS_IN[axle].items():
        x = np.array(p, float) * IN + np.array([SUSP_X[axle], 0.0, 0.0])
        x[1] *= side
        out[k] = x
    return out


def _unit(x):
    return x / np.linalg.norm(x)


def _arm_inertia(moments, hp, prefix, side):
    """Chrono's arm inertia (moments in the arm frame: u along F - B, w the
    arm-plane normal) in chassis-parallel axes."""
    F, B, U = hp[prefix + "_F"], hp[prefix + "_B"], hp[prefix + "_U"]
    w = _unit(np.cross(B - U, F - U))
    u = _unit(F - B)
    A = np.stack([u, np.cross(w, u), w], axis=1)
    return A @ np.diag(moments) @ A.T


def _merged_spindle(hp):
    """Mass, COM (C) and inertia about the COM of upright + spindle + wheel + tire."""
    parts = [(UPRIGHT, hp["UPRIGHT"]), (SPINDLE, hp["SPINDLE"]), (WHEEL, hp["SPINDLE"]), (TIRE, hp["SPINDLE"])]
    m = sum(p["mass"] for p, _ in parts)
    c = sum(p["mass"] * x for p, x in parts) / m
    I = np.zeros((3, 3))
    for p, x in parts:
        d = x - c
        I += np.diag(p["inertia"]) + p["mass"] * (d @ d * np.eye(3) - np.outer(d, d))
    return m, c, I


def _bushing_directions(hp, side):
    """(e1, e2): the UCA-plane normal with e1_z > 0 and the outboard in-plane
    direction perpendicular to the hinge axis (the thesis gives no bushing geometry; our choice)."""
    F, B, U = hp["UCA_F"], hp["UCA_B"], hp["UCA_U"]
    u = _unit(F - B)
    e1 = _unit(np.cross(F - B, U - B))
    if e1[2] < 0:
        e1 = -e1
    e2 = _unit(np.cross(e1, u))
    if e2[1] * side < 0:
        e2 = -e2
    return e1, e2


def _origins(hp, stiffened):
    """Body-frame origins (in C) of a corner's UCA, spindle and LCA: their inboard joints."""
    o_uca = hp["UCA_B"] if stiffened else 0.5 * (hp["UCA_F"] + hp["UCA_B"])
    return o_uca, hp["UCA_U"], 0.5 * (hp["LCA_F"] + hp["LCA_B"])


def _rot_y(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def hmmwv14(stiffened=False, *, beta=0.3162, bump_distance=2.25, speed=SPEED, bump=True):
    """The 14-body HMMWV as a :class:`jaxmbd.Mechanism` (see the module docstring).

    stiffened: the thesis's stiff variant (bushed UCAs, rack welded; 18 DOF)
    instead of the baseline (revolute UCAs, free rack; 11 DOF).  beta: the
    bushings' lever fraction along the UCA hinge line (0.3162 gives the
    thesis's dominant eigenvalue, 1 the physical front bushing).
    The initial state is the static equilibrium on a flat road (for
    another beta: the design pose on the baseline's chassis pose, not at
    rest; ``jaxmbd.static_equilibrium`` settles it) with every body
    moving forward at ``speed``.
    bump_distance: the bump's centre line ahead of the front wheel centres
    at t = 0 (m); bump=False: a flat road.  speed: the initial forward
    speed of every body (m/s).

    Coordinates: chassis free joint (position of C, quaternion; velocity:
    linear in world axes, angular in C), then per corner RF, LF, RR, LR the
    UCA (angle, or quaternion when stiffened), the spindle (quaternion
    relative to the UCA), then the LCAs' angles, then the rack slide
    (baseline only); ``mech.tree.joint_names`` lists them."""
    b = ModelBuilder(gravity=(0.0, 0.0, -GRAVITY))
    b.add_body("chassis", "world", "free", mass=CHASSIS["mass"], com=CHASSIS["com"], inertia=CHASSIS["inertia"])
    hps = {name: hardpoints(axle, side) for name, axle, side in CORNERS}
    for name, axle, side in CORNERS:
        hp = hps[name]
        Iu = _arm_inertia(UCA_MOMENTS, hp, "UCA", side)
        o_uca, o_sp, _ = _origins(hp, stiffened)
        if stiffened:
            b.add_body(f"uca_{name}", "chassis", "spherical", pos=o_uca, mass=UCA_MASS, com=hp["UCA_CM"] - o_uca,
                       inertia=Iu, strict_inertia=False)
        else:
            b.add_body(f"uca_{name}", "chassis", "revolute", axis=hp["UCA_F"] - hp["UCA_B"], pos=o_uca,
                       mass=UCA_MASS, com=hp["UCA_CM"] - o_uca, inertia=Iu, strict_inertia=False)
        ms, cs, Is = _merged_spindle(hp)
        b.add_body(f"spindle_{name}", f"uca_{name}", "spherical", pos=o_sp - o_uca, mass=ms, com=cs - o_sp,
                   inertia=Is)
    for name, axle, side in CORNERS:
        hp = hps[name]
        o_lca = _origins(hp, stiffened)[2]
        b.add_body(f"lca_{name}", "chassis", "revolute", axis=(1.0, 0.0, 0.0), pos=o_lca, mass=LCA_MASS,
                   com=hp["LCA_CM"] - o_lca, inertia=_arm_inertia(LCA_MOMENTS, hp, "LCA", side), strict_inertia=False)
    rack_o = np.array(RACK["com"])
    b.add_body("rack", "chassis", "fixed" if stiffened else "prismatic",
               axis=None if stiffened else (0.0, 1.0, 0.0), pos=rack_o, mass=RACK["mass"],
               inertia=RACK["inertia"])
    for name, axle, side in CORNERS:
        hp = hps[name]
        o_uca, o_sp, o_lca = _origins(hp, stiffened)
        # cut joints: the LCA ball joint and the tie rod / toe link
        b.add_loop("point", f"spindle_{name}", f"lca_{name}", pos_a=hp["LCA_U"] - o_sp, pos_b=hp["LCA_U"] - o_lca,
                   name=f"balljoint_{name}")
        L = float(np.linalg.norm(hp["TIEROD_U"] - hp["TIEROD_C"]))
        if axle == "F":
            b.add_loop("distance", "rack", f"spindle_{name}", pos_a=hp["TIEROD_C"] - rack_o,
                       pos_b=hp["TIEROD_U"] - o_sp, distance=L, name=f"tierod_{name}")
        else:
            b.add_loop("distance", "chassis", f"spindle_{name}", pos_a=hp["TIEROD_C"],
                       pos_b=hp["TIEROD_U"] - o_sp, distance=L, name=f"toelink_{name}")
        # suspension spring and shock (chassis end first)
        b.add_spring("chassis", hp["SPRING_C"], f"lca_{name}", hp["SPRING_A"] - o_lca, stiffness=SPRING_K[axle],
                     rest_length=SPRING_L0[axle], name=f"spring_{name}")
        b.add_spring("chassis", hp["SHOCK_C"], f"lca_{name}", hp["SHOCK_A"] - o_lca, damping=SHOCK_C[axle],
                     name=f"shock_{name}")
        if stiffened:
            T = hp["UCA_B"] + beta * (hp["UCA_F"] - hp["UCA_B"])
            for e in _bushing_directions(hp, side):
                b.add_spring(f"uca_{name}", T - o_uca, "chassis", T + BUSHING_L0 * e, stiffness=BUSHING_K,
                             damping=BUSHING_C, rest_length=BUSHING_L0, name=f"bushing_{name}")
        b.add_tire(f"spindle_{name}", hp["SPINDLE"] - o_sp, stiffness=TIRE_K, damping=TIRE_C, radius=TIRE_R0,
                   name=f"tire_{name}")
    # initial state: the baseline's static equilibrium, everything moving forward
    R = _rot_y(EQ_PITCH)
    quat = np.array([np.cos(EQ_PITCH / 2), 0.0, np.sin(EQ_PITCH / 2), 0.0])
    if bump:
        x_front = EQ_ORIGIN[0] + (R @ hps["LF"]["SPINDLE"])[0]
        b.add_road_bump(x_front + bump_distance, BUMP_RADIUS)
    mech0 = b.build()
    tree = mech0.tree
    if not stiffened:
        q0 = np.array(EQ_BASELINE)
    elif beta == 0.3162:
        q0 = np.array(EQ_STIFFENED)
    else:   # the design pose on the baseline's chassis pose: settle it with jaxmbd.static_equilibrium
        q0 = np.array(tree.q0)
        q0[:7] = np.concatenate([EQ_ORIGIN, quat])
    v0 = np.zeros(tree.nv)
    v0[0] = speed
    b.set_initial_state(q0, v0)
    return b.build()


__all__ = ["hmmwv14", "hardpoints"]
