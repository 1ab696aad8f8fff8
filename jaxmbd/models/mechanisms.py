"""Closed-loop mechanisms: Andrews' squeezer (the seven-body mechanism), a
slider-crank, a four-bar linkage and Negrut's planar double pendulum in
Cartesian coordinates.  All are planar (motion in the world xy-plane,
rotations about z) and return a :class:`jaxmbd.constraints.Mechanism`."""

from __future__ import annotations

import math

import numpy as np

from ..builder import ModelBuilder

# Andrews' squeezer: the parameters of the IVP test set's problem ``andrews`` (Bari/CWI Test Set for IVP
# Solvers, andrews.f; the same values as Hairer-Wanner II §VII.7), SI units
SQUEEZER = dict(
    m1=0.04325, m2=0.00365, m3=0.02373, m4=0.00706, m5=0.07050, m6=0.00706, m7=0.05498,
    i1=2.194e-6, i2=4.410e-7, i3=5.255e-6, i4=5.667e-7, i5=1.169e-5, i6=5.667e-7, i7=1.912e-5,
    xa=-0.06934, ya=-0.00227, xb=-0.03635, yb=0.03273, xc=0.014, yc=0.072,
    d=0.028, da=0.0115, e=0.02, ea=0.01421, rr=0.007, ra=0.00092, l0=0.07785, ss=0.035,
    sa=0.01874, sb=0.01043, sc=0.018, sd=0.02, ta=0.02308, tb=0.00916, u=0.04, ua=0.01228,
    ub=0.00449, zf=0.02, zt=0.04, fa=0.01421, mom=0.033, c0=4530.0)

# the test set's consistent initial angles (β, Θ, γ, Φ, δ, Ω, ε) (andrews.f)
SQUEEZER_Q0 = (-0.0617138900142764496358948458001, 0.0, 0.455279819163070380255912382449,
               0.222668390165885884674473185609, 0.487364979543842550225598953530,
               -0.222668390165885884674473185609, 1.23054744454982119249735015568)


def _planar_inertia(i):
    return (i, i, i)  # only the z component acts in planar motion


def andrews_squeezer(**params):
    """The seven-body mechanism (Schiehlen; Hairer-Wanner II §VII.7; the IVP
    test set's ``andrews``): 7 planar bodies on 7 revolute tree joints, 3 cut
    joints at E (6 equations), a spring from D to the ground point C and a
    driving torque on the crank; no gravity.  1 degree of freedom.

    ``q`` is the test set's (β, Θ, γ, Φ, δ, Ω, ε) in that order, so results
    compare directly with published references; ``model.q0`` and
    ``model.v0`` are the test set's consistent initial state.  The loop
    equations are the test set's g (E on body 2 minus E on bodies 3, 4, 6;
    x then y), so the multipliers have its signs.  Keyword arguments
    override the parameters (``SQUEEZER``, e.g. ``c0=5000.0``)."""
    unknown = set(params) - set(SQUEEZER)
    if unknown:
        raise ValueError(f"andrews_squeezer: unknown parameter(s) {sorted(unknown)}")
    p = dict(SQUEEZER, **params)
    z = (0.0, 0.0, 1.0)
    b = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    # the mechanism as a tree (4 subtrees on the ground, cut at E): body frames at their inboard joint,
    # coordinates relative to the parent
    b.add_body("beta", "world", "revolute", axis=z, mass=p["m1"], com=(p["ra"], 0, 0),
               inertia=_planar_inertia(p["i1"]))
    b.add_body("Theta", "beta", "revolute", axis=z, pos=(p["rr"], 0, 0), mass=p["m2"], com=(-p["da"], 0, 0),
               inertia=_planar_inertia(p["i2"]))
    b.add_body("gamma", "world", "revolute", axis=z, pos=(p["xb"], p["yb"], 0), mass=p["m3"],
               com=(p["sb"], -p["sa"], 0), inertia=_planar_inertia(p["i3"]))
    b.add_body("delta", "world", "revolute", axis=z, pos=(p["xa"], p["ya"], 0), mass=p["m5"],
               com=(p["ta"], p["tb"], 0), inertia=_planar_inertia(p["i5"]))
    b.add_body("Phi", "delta", "revolute", axis=z, pos=(p["zt"], 0, 0), mass=p["m4"],
               com=(0, -(p["e"] - p["ea"]), 0), inertia=_planar_inertia(p["i4"]))
    b.add_body("epsilon", "world", "revolute", axis=z, pos=(p["xa"], p["ya"], 0), mass=p["m7"],
               com=(-p["ub"], -p["ua"], 0), inertia=_planar_inertia(p["i7"]))
    b.add_body("Omega", "epsilon", "revolute", axis=z, pos=(0, -p["u"], 0), mass=p["m6"],
               com=(p["zf"] - p["fa"], 0, 0), inertia=_planar_inertia(p["i6"]))
    E2 = (-p["d"], 0, 0)
    b.add_loop("point_planar", "Theta", "gamma", pos_a=E2, pos_b=(0, -p["ss"], 0), name="E23")
    b.add_loop("point_planar", "Theta", "Phi", pos_a=E2, pos_b=(0, -p["e"], 0), name="E24")
    b.add_loop("point_planar", "Theta", "Omega", pos_a=E2, pos_b=(p["zf"], 0, 0), name="E26")
    b.add_spring("gamma", (p["sd"], -p["sc"], 0), "world", (p["xc"], p["yc"], 0), stiffness=p["c0"],
                 rest_length=p["l0"])
    b.add_joint_force("beta", p["mom"])
    b.set_initial_state(np.array(SQUEEZER_Q0), np.zeros(7))
    return b.build(coordinate_order=("beta", "Theta", "gamma", "Phi", "delta", "Omega", "epsilon"))


def slider_crank(crank=0.1, rod=0.3, m_crank=1.0, m_rod=1.0, m_slider=0.5, gravity=9.81, angle0=0.3):
    """A crank (hinge at the origin, about z), a connecting rod and a slider
    on the world x-axis; the rod's end is pinned to the slider by a planar
    point constraint (2 equations).  q = (crank angle, rod angle relative
    to the crank, slider position); 1 degree of freedom; gravity along -y.
    ``model.q0`` is the assembled configuration at crank angle ``angle0``."""
    if not (rod > crank > 0):
        raise ValueError("slider_crank: need rod > crank > 0")
    z = (0.0, 0.0, 1.0)
    b = ModelBuilder(gravity=(0.0, -gravity, 0.0))
    b.add_body("crank", "world", "revolute", axis=z, mass=m_crank, com=(crank / 2, 0, 0),
               inertia=_planar_inertia(m_crank * crank ** 2 / 12))
    b.add_body("rod", "crank", "revolute", axis=z, pos=(crank, 0, 0), mass=m_rod, com=(rod / 2, 0, 0),
               inertia=_planar_inertia(m_rod * rod ** 2 / 12))
    b.add_body("slider", "world", "prismatic", axis=(1, 0, 0), mass=m_slider, inertia=(1e-3, 1e-3, 1e-3))
    b.add_loop("point_planar", "rod", "slider", pos_a=(rod, 0, 0), name="pin")
    # closed form: crank tip C = r e(a); the slider at x with |x - C| = l on y = 0
    cy = crank * math.sin(angle0)
    x = crank * math.cos(angle0) + math.sqrt(rod ** 2 - cy ** 2)
    phi = math.atan2(-cy, x - crank * math.cos(angle0))      # absolute rod angle
    b.set_initial_state(np.array([angle0, phi - angle0, x]), np.zeros(3))
    return b.build()


def four_bar(crank=1.0, coupler=3.0, rocker=2.5, ground=3.0, angle0=1.0, masses=(1.0, 1.0, 1.0),
             gravity=9.81):
    """A planar four-bar: crank from the origin, coupler on the crank's tip,
    rocker from the ground point (``ground``, 0); the coupler's tip is
    pinned to the rocker's tip (planar point constraint).  q = (crank angle,
    coupler angle relative to the crank, rocker angle); 1 degree of freedom;
    slender uniform links; gravity along -y.  ``model.q0``: the open
    assembly at crank angle ``angle0``."""
    z = (0.0, 0.0, 1.0)
    b = ModelBuilder(gravity=(0.0, -gravity, 0.0))
    for name, parent, pos, L, m in (("crank", "world", (0, 0, 0), crank, masses[0]),
                                    ("coupler", "crank", (crank, 0, 0), coupler, masses[1]),
                                    ("rocker", "world", (ground, 0, 0), rocker, masses[2])):
        b.add_body(name, parent, "revolute", axis=z, pos=pos, mass=m, com=(L / 2, 0, 0),
                   inertia=_planar_inertia(m * L ** 2 / 12))
    b.add_loop("point_planar", "coupler", "rocker", pos_a=(coupler, 0, 0), pos_b=(rocker, 0, 0), name="pin")
    A = np.array([crank * math.cos(angle0), crank * math.sin(angle0)])
    D = np.array([ground, 0.0])
    dist = np.linalg.norm(D - A)
    if not abs(coupler - rocker) < dist < coupler + rocker:
        raise ValueError("four_bar: the links cannot close at this crank angle")
    # intersection of the circles |X - A| = coupler and |X - D| = rocker (the upper one)
    a = (coupler ** 2 - rocker ** 2 + dist ** 2) / (2 * dist)
    h = math.sqrt(coupler ** 2 - a ** 2)
    e = (D - A) / dist
    X = A + a * e + h * np.array([-e[1], e[0]])
    th2 = math.atan2(X[1] - A[1], X[0] - A[0])
    th3 = math.atan2(X[1] - D[1], X[0] - D[0])
    b.set_initial_state(np.array([angle0, th2 - angle0, th3]), np.zeros(3))
    return b.build()


# Negrut's stiff double pendulum in Cartesian coordinates (thesis §5.1, Table 18; gravity, free angles and
# inertias, which the thesis does not give, as in models.stiff_double_pendulum)
CARTESIAN_PENDULUM = dict(L1=1.0, m1=3.0, k1=400.0, C1=15.0, L2=1.5, m2=0.3, k2=3.0e5, c2=5.0e4, gravity=9.81,
                          phi0=-math.pi / 12, free1=1.5 * math.pi)


def cartesian_double_pendulum(theta1=2 * math.pi, theta2=23 * math.pi / 12, omega1=0.0, omega2=10.0, **params):
    """The thesis's planar double pendulum in the Cartesian formulation
    (every joint a constraint): two slender rods, each attached to the
    ground by a planar joint, q = (x1, y1, θ1, x2, y2, θ2) (centre and angle
    of each rod); revolute joints as planar point constraints: rod 1's end
    (-L1, 0) at the origin, rod 1's (L1, 0) at rod 2's (-L2, 0).  n = 6,
    m = 4.  Rotational spring-dampers: k1, C1 between the ground and rod 1
    (free angle 3π/2), k2, c2 between the rods (free angle φ0 = -π/12);
    gravity along -y.  The initial state: the thesis's Table 19 angles and
    angular rates with consistent centre positions and velocities.
    L1, L2 are half-lengths (joint to centre): the only reading of Table 18
    with which Table 19's initial positions satisfy the constraints."""
    unknown = set(params) - set(CARTESIAN_PENDULUM)
    if unknown:
        raise ValueError(f"cartesian_double_pendulum: unknown parameter(s) {sorted(unknown)}")
    p = dict(CARTESIAN_PENDULUM, **params)
    L1, L2, m1, m2 = p["L1"], p["L2"], p["m1"], p["m2"]
    b = ModelBuilder(gravity=(0.0, -p["gravity"], 0.0))
    b.add_body("rod1", "world", "planar", mass=m1, inertia=_planar_inertia(m1 * (2 * L1) ** 2 / 12))
    b.add_body("rod2", "world", "planar", mass=m2, inertia=_planar_inertia(m2 * (2 * L2) ** 2 / 12))
    b.add_loop("point_planar", "rod1", "world", pos_a=(-L1, 0, 0), name="ground_pin")
    b.add_loop("point_planar", "rod1", "rod2", pos_a=(L1, 0, 0), pos_b=(-L2, 0, 0), name="elbow")
    b.add_coordinate_spring("rod1", index=2, stiffness=p["k1"], damping=p["C1"], reference=p["free1"])
    b.add_coordinate_spring("rod2", index=2, other="rod1", other_index=2, stiffness=p["k2"], damping=p["c2"],
                            reference=p["phi0"])
    c1, s1, c2, s2 = math.cos(theta1), math.sin(theta1), math.cos(theta2), math.sin(theta2)
    x1, y1 = L1 * c1, L1 * s1
    x2, y2 = 2 * L1 * c1 + L2 * c2, 2 * L1 * s1 + L2 * s2
    v1 = (-L1 * s1 * omega1, L1 * c1 * omega1)
    v2 = (-2 * L1 * s1 * omega1 - L2 * s2 * omega2, 2 * L1 * c1 * omega1 + L2 * c2 * omega2)
    b.set_initial_state(np.array([x1, y1, theta1, x2, y2, theta2]),
                        np.array([v1[0], v1[1], omega1, v2[0], v2[1], omega2]))
    return b.build()


__all__ = ["andrews_squeezer", "slider_crank", "four_bar", "cartesian_double_pendulum", "SQUEEZER",
           "SQUEEZER_Q0", "CARTESIAN_PENDULUM"]
