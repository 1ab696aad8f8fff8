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
