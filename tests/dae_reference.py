"""Independent NumPy/SciPy reference implementations used as test oracles.

Nothing here imports JAX or jaxmbd: every formula is written out by hand from

* the IVP test set's problem ``andrews`` (Bari/CWI Test Set for IVP Solvers,
  ``andrews.f``; Hairer and Wanner, Solving ODEs II, Sect. VII.7, eq. (7.11)):
  Andrews' squeezing mechanism in the test set's formulation (7 angles, 6 loop
  constraints), and
* D. Negrut, "On the implicit integration of differential-algebraic equations
  of multibody dynamics", PhD thesis, University of Iowa, 1998 (the "thesis"):
  the planar double pendulum in Cartesian coordinates (§5.1, Tables 18-19),
  generalized coordinate partitioning (§3.1, (3.5)-(3.17)) and the integration
  Jacobians J1 = d(vdd)/d(v), J2 = d(vdd)/d(vdot) by the chain-rule formulas
  (3.38)-(3.45), (3.88)-(3.99) and by Appendix A.

Where the thesis's scanned equations carry misprints, the formulas here are the
corrected ones (each checked numerically, e.g. against complex-step
derivatives); the thesis leaves some pendulum data open, and those values are
chosen here (see :func:`cpend_params`).

Run ``python3 tests/dae_reference.py`` for the self-checks.  The module holds
no pytest tests; test modules import it (``tests/`` is on ``sys.path`` via
``conftest.py``).

Sign conventions (both systems): equations of motion ``M qdd + G^T lam = f``
(squeezer) and ``M qdd + Phi_q^T lam = Q^A`` (pendulum), i.e. ``-G^T lam`` is
the generalized constraint force.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np
import scipy.integrate
import scipy.linalg

# =============================================================================
# 1. Andrews' squeezing mechanism (the IVP test set's andrews.f)
# =============================================================================

#: The test set's parameter values (SI units).  ``lo`` is the spring rest
#: length (``l0`` in the test set); ``I1..I7`` are centroidal inertias.
SQUEEZER_PARAMS = {
    "m1": 0.04325, "m2": 0.00365, "m3": 0.02373, "m4": 0.00706,
    "m5": 0.07050, "m6": 0.00706, "m7": 0.05498,
    "I1": 2.194e-6, "I2": 4.410e-7, "I3": 5.255e-6, "I4": 5.667e-7,
    "I5": 1.169e-5, "I6": 5.667e-7, "I7": 1.912e-5,
    "xa": -0.06934, "ya": -0.00227,
    "xb": -0.03635, "yb": 0.03273,
    "xc": 0.014, "yc": 0.072,
    "rr": 0.007, "ra": 0.00092,
    "d": 0.028, "da": 0.0115,
    "ss": 0.035, "sa": 0.01874, "sb": 0.01043,
    "sc": 0.018, "sd": 0.02,
    "e": 0.02, "ea": 0.01421,
    "zt": 0.04, "ta": 0.02308, "tb": 0.00916,
    "u": 0.04, "ua": 0.01228, "ub": 0.00449,
    "zf": 0.02, "fa": 0.01421,
    "mom": 0.033, "c0": 4530.0, "lo": 0.07785,
}

SQUEEZER_NAMES = ("beta", "Theta", "gamma", "Phi", "delta", "Omega", "epsilon")
SQUEEZER_T_END = 0.03


class _SqueezerParams(dict):
    """A fully resolved parameter dict (defaults merged with overrides)."""


def _sp(p=None):
    """Merge the optional override dict ``p`` into :data:`SQUEEZER_PARAMS`."""
    if isinstance(p, _SqueezerParams):
        return p
    out = _SqueezerParams(SQUEEZER_PARAMS)
    if p:
        unknown = set(p) - set(SQUEEZER_PARAMS)
        if unknown:
            raise KeyError(f"unknown squeezer parameter(s): {sorted(unknown)}")
        out.update({k: float(v) for k, v in p.items()})
    return out


def squeezer_q0():
    """Consistent initial angles (the test set's), order (beta, Theta, gamma, Phi, delta, Omega, epsilon)."""
    return np.array([
        -0.0617138900142764496358948458001,
        0.0,
        0.455279819163070380255912382449,
        0.222668390165885884674473185609,
        0.487364979543842550225598953530,
        -0.222668390165885884674473185609,
        1.23054744454982119249735015568,
    ])


def squeezer_w0():
    """Initial accelerations w0 = q''(0) for qd = 0 (the test set's consistent initial values)."""
    return np.array([14222.4439199541138705911625887, -10666.8329399655854029433719415,
                     0.0, 0.0, 0.0, 0.0, 0.0])


def squeezer_lambda0():
    """Initial multipliers (the test set's consistent initial values).

    Sign/order (the test set's g and its equations of motion): the constraints are
    g = (E2 - E3, E2 - E4, E2 - E6), each as (x, y), and the equations of motion
    read M q'' = f - G^T lam.  Hence at the cut joint E of loop k = 1, 2, 3 the
    force on body 2 is -(lam[2k-2], lam[2k-1]) and the force on body 3 / 4 / 6
    is +(lam[2k-2], lam[2k-1]).  A model whose loop constraints are written as
    E_k - E2, or in another order, has multipliers differing by sign/permutation.
    """
    return np.array([98.5668703962410896057654982170, -6.12268834425566265503114393122,
                     0.0, 0.0, 0.0, 0.0])


def squeezer_M(q, p=None):
    """Mass matrix M(q), 7x7 (the test set's)."""
    P = _sp(p)
    _, th, _, ph, _, om, _ = q
    m2, m4, m6 = P["m2"], P["m4"], P["m6"]
    rr, da, zt, u = P["rr"], P["da"], P["zt"], P["u"]
    eea = P["e"] - P["ea"]
    zfa = P["zf"] - P["fa"]
    cth, sph, som = math.cos(th), math.sin(ph), math.sin(om)
    M = np.zeros((7, 7))
    M[0, 0] = P["m1"] * P["ra"] ** 2 + m2 * (rr ** 2 - 2 * da * rr * cth + da ** 2) + P["I1"] + P["I2"]
    M[0, 1] = M[1, 0] = m2 * (da ** 2 - da * rr * cth) + P["I2"]
    M[1, 1] = m2 * da ** 2 + P["I2"]
    M[2, 2] = P["m3"] * (P["sa"] ** 2 + P["sb"] ** 2) + P["I3"]
    M[3, 3] = m4 * eea ** 2 + P["I4"]
    M[3, 4] = M[4, 3] = m4 * (eea ** 2 + zt * eea * sph) + P["I4"]
    M[4, 4] = (m4 * (zt ** 2 + 2 * zt * eea * sph + eea ** 2) + P["m5"] * (P["ta"] ** 2 + P["tb"] ** 2)
               + P["I4"] + P["I5"])
    M[5, 5] = P["m6"] * zfa ** 2 + P["I6"]
    M[5, 6] = M[6, 5] = m6 * (zfa ** 2 - u * zfa * som) + P["I6"]
    M[6, 6] = (m6 * (zfa ** 2 - 2 * u * zfa * som + u ** 2) + P["m7"] * (P["ua"] ** 2 + P["ub"] ** 2)
               + P["I6"] + P["I7"])
    return M


def squeezer_spring_point(q, p=None):
    """World position of the spring point D on body 3 (closed form from the tree of body frames)."""
    P = _sp(p)
    ga = q[2]
    cg, sg = math.cos(ga), math.sin(ga)
    return np.array([P["xb"] + P["sd"] * cg + P["sc"] * sg, P["yb"] + P["sd"] * sg - P["sc"] * cg])


def squeezer_f(q, qd, p=None):
    """Force vector f(q, q') = applied forces - Coriolis/centrifugal terms (the test set's f).

    Includes the driving torque ``mom`` on beta and the linear spring from D
    (body 3) to the ground point C, generalized onto gamma.
    """
    P = _sp(p)
    be, th, ga, ph, de, om, ep = q
    bd, thd, _, phd, ded, omd, epd = qd
    m2, m4, m6 = P["m2"], P["m4"], P["m6"]
    rr, da, zt, u = P["rr"], P["da"], P["zt"], P["u"]
    sc, sd = P["sc"], P["sd"]
    eea = P["e"] - P["ea"]
    zfa = P["zf"] - P["fa"]
    cg, sg = math.cos(ga), math.sin(ga)
    xd = P["xb"] + sd * cg + sc * sg
    yd = P["yb"] + sd * sg - sc * cg
    dx, dy = xd - P["xc"], yd - P["yc"]
    L = math.hypot(dx, dy)
    fac = -P["c0"] * (L - P["lo"]) / L
    Fx, Fy = fac * dx, fac * dy
    sth, cph, com = math.sin(th), math.cos(ph), math.cos(om)
    return np.array([
        P["mom"] - m2 * da * rr * thd * (thd + 2 * bd) * sth,
        m2 * da * rr * bd ** 2 * sth,
        Fx * (sc * cg - sd * sg) + Fy * (sd * cg + sc * sg),
        m4 * zt * eea * ded ** 2 * cph,
        -m4 * zt * eea * phd * (phd + 2 * ded) * cph,
        -m6 * u * zfa * epd ** 2 * com,
        m6 * u * zfa * omd * (omd + 2 * epd) * com,
    ])


def squeezer_g(q, p=None):
    """Position constraints g(q) = (E2 - E3, E2 - E4, E2 - E6), 6 entries (the test set's g)."""
    P = _sp(p)
    be, th, ga, ph, de, om, ep = q
    rr, d, ss, e, zt, zf, u = P["rr"], P["d"], P["ss"], P["e"], P["zt"], P["zf"], P["u"]
    ex = rr * math.cos(be) - d * math.cos(be + th)
    ey = rr * math.sin(be) - d * math.sin(be + th)
    return np.array([
        ex - ss * math.sin(ga) - P["xb"],
        ey + ss * math.cos(ga) - P["yb"],
        ex - e * math.sin(ph + de) - zt * math.cos(de) - P["xa"],
        ey + e * math.cos(ph + de) - zt * math.sin(de) - P["ya"],
        ex - zf * math.cos(om + ep) - u * math.sin(ep) - P["xa"],
        ey - zf * math.sin(om + ep) + u * math.cos(ep) - P["ya"],
    ])


def squeezer_G(q, p=None):
    """Constraint Jacobian G = dg/dq, 6x7 (the test set's)."""
    P = _sp(p)
    be, th, ga, ph, de, om, ep = q
    rr, d, ss, e, zt, zf, u = P["rr"], P["d"], P["ss"], P["e"], P["zt"], P["zf"], P["u"]
    sb, cb = math.sin(be), math.cos(be)
    sbt, cbt = math.sin(be + th), math.cos(be + th)
    spd, cpd = math.sin(ph + de), math.cos(ph + de)
    soe, coe = math.sin(om + ep), math.cos(om + ep)
    G = np.zeros((6, 7))
    G[0::2, 0] = -rr * sb + d * sbt
    G[0::2, 1] = d * sbt
    G[1::2, 0] = rr * cb - d * cbt
    G[1::2, 1] = -d * cbt
    G[0, 2] = -ss * math.cos(ga)
    G[1, 2] = -ss * math.sin(ga)
    G[2, 3] = -e * cpd
    G[2, 4] = -e * cpd + zt * math.sin(de)
    G[3, 3] = -e * spd
    G[3, 4] = -e * spd - zt * math.cos(de)
    G[4, 5] = zf * soe
    G[4, 6] = zf * soe - u * math.cos(ep)
    G[5, 5] = -zf * coe
    G[5, 6] = -zf * coe - u * math.sin(ep)
    return G


def squeezer_gamma(q, qd, p=None):
    """Velocity-product term gamma(q, q') with g'' = G q'' + gamma (derived from the test set's g)."""
    P = _sp(p)
    be, th, ga, ph, de, om, ep = q
    bd, thd, gad, phd, ded, omd, epd = qd
    rr, d, ss, e, zt, zf, u = P["rr"], P["d"], P["ss"], P["e"], P["zt"], P["zf"], P["u"]
    w2 = (bd + thd) ** 2
    ax = -rr * math.cos(be) * bd ** 2 + d * math.cos(be + th) * w2
    ay = -rr * math.sin(be) * bd ** 2 + d * math.sin(be + th) * w2
    w4 = (phd + ded) ** 2
    w6 = (omd + epd) ** 2
    return np.array([
        ax + ss * math.sin(ga) * gad ** 2,
        ay - ss * math.cos(ga) * gad ** 2,
        ax + zt * math.cos(de) * ded ** 2 + e * math.sin(ph + de) * w4,
        ay + zt * math.sin(de) * ded ** 2 - e * math.cos(ph + de) * w4,
        ax + u * math.sin(ep) * epd ** 2 + zf * math.cos(om + ep) * w6,
        ay - u * math.cos(ep) * epd ** 2 + zf * math.sin(om + ep) * w6,
    ])


def squeezer_accel(q, qd, p=None):
    """Accelerations and multipliers from the index-1 augmented system (M, f, G and gamma above).

    Solves ``[M G^T; G 0] [w; lam] = [f; -gamma]``; returns ``(w, lam)`` with
    ``w = q''`` (7,) and ``lam`` (6,) in the sign/order of :func:`squeezer_lambda0`.
    """
    P = _sp(p)
    q = np.asarray(q, dtype=float)
    qd = np.asarray(qd, dtype=float)
    G = squeezer_G(q, P)
    A = np.zeros((13, 13))
    A[:7, :7] = squeezer_M(q, P)
    A[:7, 7:] = G.T
    A[7:, :7] = G
    rhs = np.concatenate([squeezer_f(q, qd, P), -squeezer_gamma(q, qd, P)])
    sol = np.linalg.solve(A, rhs)
    return sol[:7], sol[7:]


def _squeezer_rhs(P):
    def rhs(t, y):
        w, _ = squeezer_accel(y[:7], y[7:], P)
        return np.concatenate([y[7:], w])
    return rhs


def squeezer_reference(ts, rtol=1e-11, atol=1e-11, method="Radau", p=None, return_sol=False):
    """Reference trajectory of the index-1 ODE (14 states), q(0) = q0, q'(0) = 0.

    Integrates ``y = (q, q')``, ``y' = (q', w(q, q'))`` with ``w`` from
    :func:`squeezer_accel` using ``scipy.integrate.solve_ivp`` (``t_eval=ts``,
    ``dense_output=False``) on ``[0, max(ts)]``; ``ts`` must lie in ``[0, 0.03]``
    and be increasing.  Returns ``(q, qd)`` of shape ``(len(ts), 7)``.  Interior
    points of ``ts`` come from the solver's interpolant; the last point is a
    step endpoint.  ``p`` overrides :data:`SQUEEZER_PARAMS` (e.g. ``{"c0": 5000.0}``).
    With ``return_sol=True`` the ``solve_ivp`` result is returned as a third item.
    """
    ts = np.atleast_1d(np.asarray(ts, dtype=float))
    if ts.size == 0 or ts[0] < 0 or ts[-1] > SQUEEZER_T_END + 1e-15 or np.any(np.diff(ts) < 0):
        raise ValueError("ts must be non-empty, increasing and within [0, 0.03]")
    P = _sp(p)
    y0 = np.concatenate([squeezer_q0(), np.zeros(7)])
    t_end = float(ts[-1])
    if t_end == 0.0:
        out = (np.tile(y0[:7], (ts.size, 1)), np.zeros((ts.size, 7)))
        return out + (None,) if return_sol else out
    sol = scipy.integrate.solve_ivp(_squeezer_rhs(P), (0.0, t_end), y0, method=method, t_eval=ts,
                                    dense_output=False, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"squeezer reference integration failed: {sol.message}")
    q, qd = sol.y[:7].T.copy(), sol.y[7:].T.copy()
    return (q, qd, sol) if return_sol else (q, qd)


@functools.lru_cache(maxsize=None)
def squeezer_reference_cached(rtol=1e-11, atol=1e-11, method="Radau", **overrides):
    """Cached reference at ``ts = linspace(0, 0.03, 11)`` (t = 0 plus 10 points up to 0.03).

    Computed once per process per argument set (Radau, rtol = atol = 1e-11 by
    default; keyword overrides of :data:`SQUEEZER_PARAMS` such as ``c0=5000.0``
    are allowed).  Returns read-only arrays ``(ts, q, qd)``; ``q[-1], qd[-1]``
    is the state at t = 0.03.
    """
    ts = np.linspace(0.0, SQUEEZER_T_END, 11)
    q, qd = squeezer_reference(ts, rtol=rtol, atol=atol, method=method, p=overrides or None)
    for a in (ts, q, qd):
        a.setflags(write=False)
    return ts, q, qd


# =============================================================================
# 2. Planar double pendulum in Cartesian coordinates (the thesis's §5.1)
# =============================================================================
#
# q = (x1, y1, th1, x2, y2, th2); L1, L2 are half-lengths (joint-to-CM
# distances); ground pivot at the origin, body-1/body-2 joint at body-1 local
# (+L1, 0) = body-2 local (-L2, 0) (the only reading with which Table 19's
# positions are consistent).  Data from Table 18; gravity, slender-rod inertias
# and RSDA free angles, which the thesis does not give, are chosen here.

def cpend_params():
    """Pendulum data (the thesis's Table 18, plus the values chosen here)."""
    L1, L2, m1, m2 = 1.0, 1.5, 3.0, 0.3
    return {
        "L1": L1, "L2": L2, "m1": m1, "m2": m2,
        "J1": m1 * (2 * L1) ** 2 / 12.0, "J2": m2 * (2 * L2) ** 2 / 12.0,
        "g": 9.81,
        "k1": 400.0, "C1": 15.0, "th1_free": 1.5 * math.pi,
        "k2": 3.0e5, "c2": 5.0e4, "phi0": -math.pi / 12.0,
    }


_CP = cpend_params()


def cpend_Phi(q):
    """Constraints Phi(q), 4 entries, for the joints above (ground pivot, body-1/body-2 joint)."""
    x1, y1, t1, x2, y2, t2 = q
    L1, L2 = _CP["L1"], _CP["L2"]
    c1, s1, c2, s2 = math.cos(t1), math.sin(t1), math.cos(t2), math.sin(t2)
    return np.array([
        x1 - L1 * c1,
        y1 - L1 * s1,
        x1 + L1 * c1 - x2 + L2 * c2,
        y1 + L1 * s1 - y2 + L2 * s2,
    ])


def cpend_Phiq(q):
    """Constraint Jacobian Phi_q, 4x6."""
    t1, t2 = q[2], q[5]
    L1, L2 = _CP["L1"], _CP["L2"]
    c1, s1, c2, s2 = math.cos(t1), math.sin(t1), math.cos(t2), math.sin(t2)
    return np.array([
        [1.0, 0.0, L1 * s1, 0.0, 0.0, 0.0],
        [0.0, 1.0, -L1 * c1, 0.0, 0.0, 0.0],
        [1.0, 0.0, -L1 * s1, -1.0, 0.0, -L2 * s2],
        [0.0, 1.0, L1 * c1, 0.0, -1.0, L2 * c2],
    ])


def cpend_M():
    """Constant diagonal mass matrix diag(m1, m1, J1, m2, m2, J2)."""
    P = _CP
    return np.diag([P["m1"], P["m1"], P["J1"], P["m2"], P["m2"], P["J2"]])


def _rsda_torques(q, qd):
    """(T1, T2): generalized torques on th1 and th2 from both RSDAs (free angles and signs chosen here)."""
    P = _CP
    t1, t2 = q[2], q[5]
    w1, w2 = qd[2], qd[5]
    T_g1 = -P["k1"] * (t1 - P["th1_free"]) - P["C1"] * w1           # ground -> body 1
    T_12 = -P["k2"] * (t2 - t1 - P["phi0"]) - P["c2"] * (w2 - w1)   # body 1 -> body 2
    return T_g1 - T_12, T_12


def cpend_QA(q, qd):
    """Applied generalized forces Q^A(q, qd), 6 entries: gravity (-y) and the two RSDAs."""
    P = _CP
    T1, T2 = _rsda_torques(q, qd)
    return np.array([0.0, -P["m1"] * P["g"], T1, 0.0, -P["m2"] * P["g"], T2])


def cpend_tau(q, qd):
    """tau(q, qd) = -(Phi_q qd)_q qd, 4 entries (the thesis's (2.4))."""
    t1, t2 = q[2], q[5]
    w1, w2 = qd[2], qd[5]
    L1, L2 = _CP["L1"], _CP["L2"]
    c1, s1, c2, s2 = math.cos(t1), math.sin(t1), math.cos(t2), math.sin(t2)
    return np.array([
        -L1 * c1 * w1 ** 2,
        -L1 * s1 * w1 ** 2,
        L1 * c1 * w1 ** 2 + L2 * c2 * w2 ** 2,
        L1 * s1 * w1 ** 2 + L2 * s2 * w2 ** 2,
    ])


# --- hand-written "basic derivatives" (the thesis's (Mqdd)_q, (Phi_q^T lam)_q, ...) ---

def _cp_Phiq_x_q(q, x):
    """(Phi_q x)_q for a fixed vector x (4x6); used with x = qd and x = qdd."""
    t1, t2 = q[2], q[5]
    L1, L2 = _CP["L1"], _CP["L2"]
    c1, s1, c2, s2 = math.cos(t1), math.sin(t1), math.cos(t2), math.sin(t2)
    a1, a2 = x[2], x[5]
    D = np.zeros((4, 6))
    D[0, 2] = L1 * c1 * a1
    D[1, 2] = L1 * s1 * a1
    D[2, 2] = -L1 * c1 * a1
    D[2, 5] = -L2 * c2 * a2
    D[3, 2] = -L1 * s1 * a1
    D[3, 5] = -L2 * s2 * a2
    return D


def _cp_PhiqT_lam_q(q, lam):
    """(Phi_q^T lam)_q for fixed lam (6x6)."""
    t1, t2 = q[2], q[5]
    L1, L2 = _CP["L1"], _CP["L2"]
    c1, s1, c2, s2 = math.cos(t1), math.sin(t1), math.cos(t2), math.sin(t2)
    l1, l2, l3, l4 = lam
    D = np.zeros((6, 6))
    D[2, 2] = L1 * (c1 * l1 + s1 * l2 - c1 * l3 - s1 * l4)
    D[5, 5] = -L2 * (c2 * l3 + s2 * l4)
    return D


def _cp_tau_q(q, qd):
    """tau_q (4x6)."""
    t1, t2 = q[2], q[5]
    w1, w2 = qd[2], qd[5]
    L1, L2 = _CP["L1"], _CP["L2"]
    c1, s1, c2, s2 = math.cos(t1), math.sin(t1), math.cos(t2), math.sin(t2)
    D = np.zeros((4, 6))
    D[0, 2] = L1 * s1 * w1 ** 2
    D[1, 2] = -L1 * c1 * w1 ** 2
    D[2, 2] = -L1 * s1 * w1 ** 2
    D[2, 5] = -L2 * s2 * w2 ** 2
    D[3, 2] = L1 * c1 * w1 ** 2
    D[3, 5] = L2 * c2 * w2 ** 2
    return D


def _cp_tau_qd(q, qd):
    """tau_qdot (4x6)."""
    t1, t2 = q[2], q[5]
    w1, w2 = qd[2], qd[5]
    L1, L2 = _CP["L1"], _CP["L2"]
    c1, s1, c2, s2 = math.cos(t1), math.sin(t1), math.cos(t2), math.sin(t2)
    D = np.zeros((4, 6))
    D[0, 2] = -2 * L1 * c1 * w1
    D[1, 2] = -2 * L1 * s1 * w1
    D[2, 2] = 2 * L1 * c1 * w1
    D[2, 5] = 2 * L2 * c2 * w2
    D[3, 2] = 2 * L1 * s1 * w1
    D[3, 5] = 2 * L2 * s2 * w2
    return D


def _cp_QA_q(q, qd):
    """Q^A_q (6x6): only the RSDA stiffnesses (gravity is constant)."""
    k1, k2 = _CP["k1"], _CP["k2"]
    D = np.zeros((6, 6))
    D[2, 2], D[2, 5] = -k1 - k2, k2
    D[5, 2], D[5, 5] = k2, -k2
    return D


def _cp_QA_qd(q, qd):
    """Q^A_qdot (6x6): the RSDA dampings."""
    C1, c2 = _CP["C1"], _CP["c2"]
    D = np.zeros((6, 6))
    D[2, 2], D[2, 5] = -C1 - c2, c2
    D[5, 2], D[5, 5] = c2, -c2
    return D


def _cp_Mqdd_q(q, qdd):
    """(M qdd)_q: zero, the Cartesian mass matrix is constant."""
    return np.zeros((6, 6))


def cpend_consistent_state(th1=2 * math.pi, th2=23 * math.pi / 12, th1d=0.0, th2d=10.0):
    """Consistent (q, qd) from the angles and angular rates (Cartesian coordinates recovered).

    The defaults are Table 19's angles with the angular rates chosen here
    (th1d = 0, th2d = 10); Table 19's printed xd2 = yd2 = 0 is not consistent.
    """
    L1, L2 = _CP["L1"], _CP["L2"]
    c1, s1, c2, s2 = math.cos(th1), math.sin(th1), math.cos(th2), math.sin(th2)
    x1, y1 = L1 * c1, L1 * s1
    x2, y2 = x1 + L1 * c1 + L2 * c2, y1 + L1 * s1 + L2 * s2
    x1d, y1d = -L1 * s1 * th1d, L1 * c1 * th1d
    x2d = x1d - L1 * s1 * th1d - L2 * s2 * th2d
    y2d = y1d + L1 * c1 * th1d + L2 * c2 * th2d
    return (np.array([x1, y1, th1, x2, y2, th2]), np.array([x1d, y1d, th1d, x2d, y2d, th2d]))


def _cp_aug_matrix(q):
    Pq = cpend_Phiq(q)
    A = np.zeros((10, 10))
    A[:6, :6] = cpend_M()
    A[:6, 6:] = Pq.T
    A[6:, :6] = Pq
    return A


def cpend_accel(q, qd):
    """(qdd, lam) from the augmented system (2.6): [[M, Phi_q^T], [Phi_q, 0]] [qdd; lam] = [Q^A; tau]."""
    sol = np.linalg.solve(_cp_aug_matrix(q), np.concatenate([cpend_QA(q, qd), cpend_tau(q, qd)]))
    return sol[:6], sol[6:]


def full_pivot_partition(Phi_q):
    """Generalized coordinate partitioning by Gaussian elimination with full pivoting (the thesis's §3.1).

    Works on a copy of the m x n Jacobian with physical row/column swaps.  At
    step k the pivot is the first maximum of |A[k:, k:]| in row-major order
    (``np.argmax``) of the *current, already swapped* matrix.  Returns
    ``(dep, ind)``: ``dep`` the pivot columns (original indices) in pivot order,
    ``ind`` the remaining columns in increasing order.

    At the pendulum's initial configuration (:func:`cpend_consistent_state`
    defaults) this returns dep = (5, 1, 3, 0) = (th2, y1, x2, x1) and
    ind = (2, 4) = (th1, y2), i.e. the independent set (y2, th1), not
    (th1, th2).  Before sorting, the non-pivot columns are left in the order
    (y2, th1).  The ties there are exact (entries +-1,
    cos(2 pi) == 1.0), so the tie-breaking rule matters: a variant without
    physical swaps (masked argmax on the original ordering) picks the same
    independent set but the pivot order (th2, x1, y1, x2).
    """
    A = np.array(Phi_q, dtype=float, copy=True)
    m, n = A.shape
    cols = np.arange(n)
    for k in range(m):
        sub = np.abs(A[k:, k:])
        i, j = np.unravel_index(np.argmax(sub), sub.shape)
        i += k
        j += k
        if sub[i - k, j - k] == 0.0:
            raise np.linalg.LinAlgError("constraint Jacobian is rank deficient")
        A[[k, i], :] = A[[i, k], :]
        A[:, [k, j]] = A[:, [j, k]]
        cols[[k, j]] = cols[[j, k]]
        A[k + 1:, k:] -= np.outer(A[k + 1:, k] / A[k, k], A[k, k:])
    dep = cols[:m].copy()
    ind = np.sort(cols[m:])
    return dep, ind


def thesis_J1_J2(q, qd, ind, dep):
    """Integration Jacobians J1 = d(vdd)/dv, J2 = d(vdd)/d(vdot) by the thesis's formulas (3.38)-(3.45), (3.88)-(3.99).

    Uses H (3.89), J (3.38), L (3.39, corrected), N (3.40), R (3.41), S (3.42),
    W (3.99), M^ (3.16), M^ J1 (3.93) and M^ J2 (3.98), with all basic
    derivatives written out analytically for the pendulum.  (q, qd) must be
    consistent; qdd and lam come from :func:`cpend_accel`.  Rows/columns of
    J1, J2 follow the order of ``ind``.  Returns ``(J1, J2)``.
    """
    u, v = np.asarray(dep), np.asarray(ind)
    q = np.asarray(q, float)
    qd = np.asarray(qd, float)
    qdd, lam = cpend_accel(q, qd)
    M = cpend_M()
    Pq = cpend_Phiq(q)
    Phi_u, Phi_v = Pq[:, u], Pq[:, v]
    lu = scipy.linalg.lu_factor(Phi_u)
    sol = lambda b: scipy.linalg.lu_solve(lu, b)        # Phi_u^{-1} b

    Pqd_q = _cp_Phiq_x_q(q, qd)        # (Phi_q qd)_q
    Pqdd_q = _cp_Phiq_x_q(q, qdd)      # (Phi_q qdd)_q
    PTl_q = _cp_PhiqT_lam_q(q, lam)    # (Phi_q^T lam)_q
    Mqdd_q = _cp_Mqdd_q(q, qdd)        # (M qdd)_q
    tq, tqd = _cp_tau_q(q, qd), _cp_tau_qd(q, qd)
    Qq, Qqd = _cp_QA_q(q, qd), _cp_QA_qd(q, qd)

    Muu, Muv, Mvu, Mvv = M[np.ix_(u, u)], M[np.ix_(u, v)], M[np.ix_(v, u)], M[np.ix_(v, v)]

    H = -sol(Phi_v)                                                            # (3.89)
    J = -sol(Pqd_q[:, u] @ H + Pqd_q[:, v])                                    # (3.38)
    L = sol((tq[:, u] - Pqdd_q[:, u]) @ H + tq[:, v] + tqd[:, u] @ J - Pqdd_q[:, v])   # (3.39) [C]
    N = sol(tqd[:, u] @ H + tqd[:, v])                                         # (3.40)
    R = ((Mqdd_q[np.ix_(u, u)] + PTl_q[np.ix_(u, u)] - Qq[np.ix_(u, u)]) @ H
         + Mqdd_q[np.ix_(u, v)] + PTl_q[np.ix_(u, v)] - Qq[np.ix_(u, v)]
         - Qqd[np.ix_(u, u)] @ J + Muu @ L)                                    # (3.41)
    S = -(Qqd[np.ix_(u, u)] @ H + Qqd[np.ix_(u, v)] - Muu @ N)                 # (3.42)
    W = Qqd[np.ix_(v, u)] @ H + Qqd[np.ix_(v, v)] - Mvu @ N                    # (3.99)
    Mhat = Mvv + Mvu @ H + H.T @ (Muv + Muu @ H)                               # (3.16)
    MJ1 = (Qq[np.ix_(v, v)] + Qq[np.ix_(v, u)] @ H + Qqd[np.ix_(v, u)] @ J
           - (Mvu @ L + H.T @ R + PTl_q[np.ix_(v, u)] @ H + PTl_q[np.ix_(v, v)]
              + Mqdd_q[np.ix_(v, v)] + Mqdd_q[np.ix_(v, u)] @ H))              # (3.93)
    MJ2 = W - H.T @ S                                                          # (3.98)
    J1 = np.linalg.solve(Mhat, MJ1)
    J2 = np.linalg.solve(Mhat, MJ2)
    return J1, J2


def appendix_A_J1_J2(q, qd, ind, dep):
    """J1, J2 via the thesis's Appendix A: one augmented matrix, 2*ndof solves.

    J1 column k: q_{v_k} = [h_k; 1_k] (A.2), qd_{v_k} = [-Phi_u^{-1}(Phi_q qd)_q q_{v_k}; 0] (A.3),
    Q^P (A.5, corrected), tau^P (A.7), solve (A.8).  J2 column k: qd_{vd_k} = [h_k; 1_k] (A.10),
    Q^V, tau^V (A.11), solve (A.12).  Same argument conventions as :func:`thesis_J1_J2`.
    """
    u, v = np.asarray(dep), np.asarray(ind)
    q = np.asarray(q, float)
    qd = np.asarray(qd, float)
    qdd, lam = cpend_accel(q, qd)
    Pq = cpend_Phiq(q)
    Phi_u, Phi_v = Pq[:, u], Pq[:, v]
    H = -np.linalg.solve(Phi_u, Phi_v)
    Pqd_q = _cp_Phiq_x_q(q, qd)
    KQ = _cp_Mqdd_q(q, qdd) + _cp_PhiqT_lam_q(q, lam) - _cp_QA_q(q, qd)
    Kt = _cp_Phiq_x_q(q, qdd) - _cp_tau_q(q, qd)
    Qqd, tqd = _cp_QA_qd(q, qd), _cp_tau_qd(q, qd)
    nd = v.size
    dq = np.zeros((6, nd))                 # columns q_{v_k} (also qd_{vd_k})
    dq[u, :] = H
    dq[v, np.arange(nd)] = 1.0
    dqd = np.zeros((6, nd))                # columns qd_{v_k}
    dqd[u, :] = -np.linalg.solve(Phi_u, Pqd_q @ dq)
    rhs1 = np.vstack([Qqd @ dqd - KQ @ dq, tqd @ dqd - Kt @ dq])     # (A.5), (A.7)
    rhs2 = np.vstack([Qqd @ dq, tqd @ dq])                            # (A.11)
    lu = scipy.linalg.lu_factor(_cp_aug_matrix(q))
    X = scipy.linalg.lu_solve(lu, np.hstack([rhs1, rhs2]))
    return X[v, :nd], X[v, nd:]


def cpend_recover(q_guess, v, vdot, ind, dep, tol=1e-15, maxit=50):
    """Recover a consistent (q, qd) from independent (v, vdot) (the thesis's §3.1, (3.12)).

    Dependent positions by Newton on Phi(u, v) = 0 starting from ``q_guess``;
    dependent velocities from Phi_u ud = -Phi_v vdot.
    """
    u, ind = np.asarray(dep), np.asarray(ind)
    q = np.array(q_guess, float)
    q[ind] = v
    for _ in range(maxit):
        r = cpend_Phi(q)
        du = np.linalg.solve(cpend_Phiq(q)[:, u], r)
        q[u] -= du
        if np.max(np.abs(du)) <= tol * (1.0 + np.max(np.abs(q[u]))):
            break
    Pq = cpend_Phiq(q)
    qd = np.zeros(6)
    qd[ind] = vdot
    qd[u] = -np.linalg.solve(Pq[:, u], Pq[:, ind] @ np.asarray(vdot, float))
    return q, qd


def cpend_ss_accel(q_guess, v, vdot, ind, dep):
    """State-space acceleration map (v, vdot) -> vdd (the thesis's (3.85)): recover, then solve (2.6)."""
    q, qd = cpend_recover(q_guess, v, vdot, ind, dep)
    return cpend_accel(q, qd)[0][np.asarray(ind)]


def fd_J1_J2(q, qd, ind, dep, h=1e-6):
    """Central finite differences of :func:`cpend_ss_accel` (oracle for J1, J2)."""
    ind = np.asarray(ind)
    v0, vd0 = q[ind].copy(), qd[ind].copy()
    nd = ind.size
    J1, J2 = np.zeros((nd, nd)), np.zeros((nd, nd))
    for k in range(nd):
        e = np.zeros(nd)
        e[k] = h
        J1[:, k] = (cpend_ss_accel(q, v0 + e, vd0, ind, dep) - cpend_ss_accel(q, v0 - e, vd0, ind, dep)) / (2 * h)
        J2[:, k] = (cpend_ss_accel(q, v0, vd0 + e, ind, dep) - cpend_ss_accel(q, v0, vd0 - e, ind, dep)) / (2 * h)
    return J1, J2


# =============================================================================
# 3. Self-checks
# =============================================================================

def _relmax(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _fd_jac(fun, x, h=1e-7):
    x = np.asarray(x, float)
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = h
        cols.append((fun(x + e) - fun(x - e)) / (2 * h))
    return np.stack(cols, axis=-1)


def _selftest():
    failures = []

    def check(name, value, limit):
        ok = value <= limit
        print(f"  [{'ok' if ok else 'FAIL'}] {name}: {value:.3e} (limit {limit:.0e})")
        if not ok:
            failures.append(name)

    np.set_printoptions(precision=15, linewidth=140)
    rng = np.random.default_rng(1234)
    print("Andrews' squeezer (IVP test set)")
    q0 = squeezer_q0()
    check("|g(q0)|_max", float(np.max(np.abs(squeezer_g(q0)))), 1e-14)
    check("rank G(q0) == 6 (0 = yes)", float(np.linalg.matrix_rank(squeezer_G(q0)) != 6), 0.0)
    for trial in range(3):
        qr = q0 + 0.3 * rng.standard_normal(7)
        qdr = 50.0 * rng.standard_normal(7)
        check(f"G vs FD of g (random q #{trial})",
              float(np.max(np.abs(squeezer_G(qr) - _fd_jac(squeezer_g, qr, 1e-6)))), 1e-9)
        # gamma = (G qd)_q qd
        gam_fd = _fd_jac(lambda x: squeezer_G(x) @ qdr, qr, 1e-6) @ qdr
        check(f"gamma vs FD (G qd)_q qd (#{trial})", _relmax(squeezer_gamma(qr, qdr), gam_fd), 1e-8)
        # f velocity terms = -(Mdot qd - dT/dq), spring term = -dV/dgamma
        dM = _fd_jac(lambda x: squeezer_M(x), qr, 1e-6)          # dM[i, j, k] = dM_ij / dq_k
        Mdot_qd = np.einsum("ijk,k,j->i", dM, qdr, qdr)
        dTdq = 0.5 * np.einsum("ijk,i,j->k", dM, qdr, qdr)
        spring = lambda x: 0.5 * SQUEEZER_PARAMS["c0"] * (
            np.hypot(*(squeezer_spring_point(x) - [SQUEEZER_PARAMS["xc"], SQUEEZER_PARAMS["yc"]]))
            - SQUEEZER_PARAMS["lo"]) ** 2
        Qsp = -_fd_jac(lambda x: np.array([spring(x)]), qr, 1e-7)[0]
        f_expect = Qsp - Mdot_qd + dTdq
        f_expect[0] += SQUEEZER_PARAMS["mom"]
        check(f"f vs Lagrange (FD of M, spring energy) (#{trial})", _relmax(squeezer_f(qr, qdr), f_expect), 1e-7)
    w, lam = squeezer_accel(q0, np.zeros(7))
    check("w(q0) vs w0 (rel)", _relmax(w, squeezer_w0()), 1e-12)
    check("lambda(q0) vs lambda0 (rel)", _relmax(lam, squeezer_lambda0()), 1e-12)

    ts = np.linspace(0.0, SQUEEZER_T_END, 11)
    t0 = time.perf_counter()
    qR, qdR, solR = squeezer_reference(ts, return_sol=True)
    tR = time.perf_counter() - t0
    t0 = time.perf_counter()
    qD, qdD, solD = squeezer_reference(ts, rtol=1e-13, atol=1e-13, method="DOP853", return_sol=True)
    tD = time.perf_counter() - t0
    print(f"  Radau 1e-11: {tR:.2f} s, nfev={solR.nfev}, njev={solR.njev}, nlu={solR.nlu}")
    print(f"  DOP853 1e-13: {tD:.2f} s, nfev={solD.nfev}")
    relq = np.abs(qR[-1] - qD[-1]) / np.maximum(np.abs(qD[-1]), 1e-300)
    relqd = np.abs(qdR[-1] - qdD[-1]) / np.maximum(np.abs(qdD[-1]), 1e-300)
    print("  t = 0.03, Radau 1e-11:")
    for k, name in enumerate(SQUEEZER_NAMES):
        print(f"    {name:8s} q = {qR[-1, k]: .15e}   qd = {qdR[-1, k]: .15e}")
    print("  t = 0.03, DOP853 1e-13:")
    for k, name in enumerate(SQUEEZER_NAMES):
        print(f"    {name:8s} q = {qD[-1, k]: .15e}   qd = {qdD[-1, k]: .15e}")
    print("  per-angle rel diff:", relq)
    print("  per-rate  rel diff:", relqd)
    check("Radau vs DOP853 at t=0.03: max rel diff of angles", float(relq.max()), 1e-8)
    check("Radau vs DOP853 at t=0.03: max rel diff of rates", float(relqd.max()), 1e-6)
    scale_q = np.max(np.abs(qD), axis=0)
    scale_qd = np.max(np.abs(qdD), axis=0)
    check("Radau vs DOP853 on the 11-point grid: angles (rel to component max)",
          float(np.max(np.abs(qR - qD) / scale_q)), 1e-8)
    check("Radau vs DOP853 on the 11-point grid: rates (rel to component max)",
          float(np.max(np.abs(qdR - qdD) / scale_qd)), 1e-6)
    check("|g| along the Radau reference", float(max(np.max(np.abs(squeezer_g(x))) for x in qR)), 1e-12)
    check("Omega + Phi along the reference (mirror symmetry)", float(np.max(np.abs(qR[:, 5] + qR[:, 3]))), 1e-9)

    print("Planar double pendulum in Cartesian coordinates (Negrut's thesis, section 5.1)")
    q, qd = cpend_consistent_state()
    check("|Phi(q0)|", float(np.max(np.abs(cpend_Phi(q)))), 1e-14)
    check("|Phi_q qd|", float(np.max(np.abs(cpend_Phiq(q) @ qd))), 1e-13)
    check("Table 19 x2, y2 (3.4488887, -0.388228)", float(np.max(np.abs(q[3:5] - [3.4488887, -0.388228]))), 1e-6)
    dep, ind = full_pivot_partition(cpend_Phiq(q))
    names = ("x1", "y1", "th1", "x2", "y2", "th2")
    print(f"  full-pivot partition at q0: dep = {[names[i] for i in dep]}, ind = {[names[i] for i in ind]}")
    check("partition picks ind = (th1, y2), i.e. (y2, th1) (0 = yes)", float(list(ind) != [2, 4]), 0.0)
    # basic derivative checks against finite differences
    qr, qdr = cpend_consistent_state(4.1, 3.3, -2.0, 7.0)
    qddr = rng.standard_normal(6)
    lamr = rng.standard_normal(4)
    check("(Phi_q qdd)_q vs FD", float(np.max(np.abs(_cp_Phiq_x_q(qr, qddr) - _fd_jac(lambda x: cpend_Phiq(x) @ qddr, qr)))), 1e-7)
    check("Phi_q vs FD", float(np.max(np.abs(cpend_Phiq(qr) - _fd_jac(cpend_Phi, qr)))), 1e-8)
    check("(Phi_q qd)_q vs FD", float(np.max(np.abs(_cp_Phiq_x_q(qr, qdr) - _fd_jac(lambda x: cpend_Phiq(x) @ qdr, qr)))), 1e-7)
    check("(Phi_q^T lam)_q vs FD", float(np.max(np.abs(_cp_PhiqT_lam_q(qr, lamr) - _fd_jac(lambda x: cpend_Phiq(x).T @ lamr, qr)))), 1e-7)
    check("tau vs -(Phi_q qd)_q qd", float(np.max(np.abs(cpend_tau(qr, qdr) + _cp_Phiq_x_q(qr, qdr) @ qdr))), 1e-12)
    check("tau_q vs FD", float(np.max(np.abs(_cp_tau_q(qr, qdr) - _fd_jac(lambda x: cpend_tau(x, qdr), qr)))), 1e-6)
    check("tau_qd vs FD", float(np.max(np.abs(_cp_tau_qd(qr, qdr) - _fd_jac(lambda x: cpend_tau(qr, x), qdr)))), 1e-6)
    check("Q^A_q vs FD (rel)", _relmax(_cp_QA_q(qr, qdr), _fd_jac(lambda x: cpend_QA(x, qdr), qr, 1e-6)), 1e-8)
    check("Q^A_qd vs FD (rel)", _relmax(_cp_QA_qd(qr, qdr), _fd_jac(lambda x: cpend_QA(qr, x), qdr, 1e-6)), 1e-8)
    qdd0, lam0 = cpend_accel(q, qd)
    check("augmented solve: Phi_q qdd = tau", float(np.max(np.abs(cpend_Phiq(q) @ qdd0 - cpend_tau(q, qd)))), 1e-9)

    states = [("initial state, full-pivot partition", q, qd, ind, dep)]
    depr, indr = full_pivot_partition(cpend_Phiq(qr))
    states.append(("state (4.1, 3.3, -2, 7), its full-pivot partition", qr, qdr, indr, depr))
    states.append(("initial state, ind = (th1, th2)", q, qd, np.array([2, 5]), np.array([0, 1, 3, 4])))
    states.append(("state (4.1, 3.3, -2, 7), ind = (th1, th2)", qr, qdr, np.array([2, 5]), np.array([0, 1, 3, 4])))
    for label, qs, qds, ii, dd in states:
        print(f"  {label}: ind = {[names[i] for i in ii]}")
        T1, T2 = thesis_J1_J2(qs, qds, ii, dd)
        A1, A2 = appendix_A_J1_J2(qs, qds, ii, dd)
        F1, F2 = fd_J1_J2(qs, qds, ii, dd)
        check("    J1 chain rule vs Appendix A (rel)", _relmax(T1, A1), 1e-10)
        check("    J2 chain rule vs Appendix A (rel)", _relmax(T2, A2), 1e-10)
        check("    J1 chain rule vs central FD (rel)", _relmax(T1, F1), 1e-6)
        check("    J2 chain rule vs central FD (rel)", _relmax(T2, F2), 1e-6)
        vdd = cpend_ss_accel(qs, qs[ii], qds[ii], ii, dd)
        check("    ss-accel map reproduces qdd_ind (rel)", _relmax(vdd, cpend_accel(qs, qds)[0][ii]), 1e-12)
    T1, T2 = thesis_J1_J2(q, qd, ind, dep)
    print("  J1 (initial state, ind=(th1, y2)):\n", T1)
    print("  J2 (initial state, ind=(th1, y2)):\n", T2)

    print("ALL CHECKS PASSED" if not failures else f"FAILED: {failures}")
    return not failures


if __name__ == "__main__":
    import sys
    sys.exit(0 if _selftest() else 1)
