"""Build-time input checks and conversions (NumPy), shared by the model
builder and the force elements: a clear error naming what is wrong."""

from __future__ import annotations

import math

import numpy as np


def vec(x, n, what):
    """x as n finite float64 numbers."""
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{what}: expected {n} numbers, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: contains NaN or inf: {a}")
    return a


def scalar(x, what):
    """x as one finite float."""
    try:
        a = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: expected a number, got {x!r}") from None
    if not math.isfinite(a):
        raise ValueError(f"{what}: is {a}")
    return a


def quat_rot(q):
    """Rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def axis_frame(ax, what):
    """A rotation whose z column is the unit vector along ax (x chosen deterministically)."""
    n = np.linalg.norm(ax)
    if n < 1e-12:
        raise ValueError(f"{what} is zero")
    z = ax / n
    t = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = t - z * (t @ z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=1)



def solref(x, what):
    """MuJoCo's ``solref`` of a compliant law (contact or joint limit) as 2 float64 numbers, checked;
    ``what`` names the element and the attribute.

    Both numbers positive: the standard form (time constant, damping ratio).  The first negative and
    the second non-positive: the direct form (-stiffness, -damping).  Anything else is refused:
    mixed signs (MuJoCo reads ``-0.02 1`` as a stiffness of 0.02 with a negative damping), a damping
    ratio <= 0 (MuJoCo's stiffness is then infinite)."""
    a = vec(x, 2, what)
    tc, dr = float(a[0]), float(a[1])
    head = f"{what} = '{tc:g} {dr:g}'"
    if tc > 0:
        if dr <= 0:
            raise ValueError(f"{head}: in the standard form (time constant, damping ratio) the damping ratio "
                             "must be positive")
    elif dr > 0:
        raise ValueError(f"{head}: mixed signs; give the standard form (time constant > 0, damping ratio > 0) "
                         "or the direct form (-stiffness < 0, -damping <= 0)")
    return a


def solimp(x, what):
    """MuJoCo's ``solimp`` (dmin, dmax, width, midpoint, power) as 5 finite float64 numbers;
    ``what`` names the element and the attribute.  Any finite values are accepted, as MuJoCo's
    compiler accepts them: where it uses them MuJoCo clamps dmin, dmax and midpoint to
    [1e-4, 0.9999], width to >= 0 and power to >= 1, and so does :mod:`jaxmbd.forces.soft`
    (:func:`solimp_clamped` names what a clamp changes)."""
    return vec(x, 5, what)


SOLIMP_RANGES = (("dmin", 0.0, 1.0), ("dmax", 0.0, 1.0), ("width", 0.0, math.inf), ("midpoint", 0.0, 1.0),
                 ("power", 1.0, math.inf))


def solimp_clamped(x):
    """The entries of a 5-number ``solimp`` outside MuJoCo's documented ranges (dmin, dmax and
    midpoint in [0, 1], width >= 0, power >= 1), which MuJoCo's clamp moves, as ``"dmin 1.2"``
    strings (empty where every entry is in range)."""
    return [f"{label} {v:g}" for (label, lo, hi), v in zip(SOLIMP_RANGES, np.asarray(x, np.float64))
            if not lo <= v <= hi]
