"""Shared pieces of the model loaders: XML parsing with load-time errors,
number parsing, rotations and the inertia of primitive shapes."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import numpy as np


def parse_xml(src, kind):
    """(root element, base directory or None, a one-line label of the source)
    from a path or an XML string.

    Any parse or I/O failure becomes one ValueError naming the source."""
    text = None
    if isinstance(src, (bytes, bytearray)):
        src = bytes(src).decode("utf-8", errors="replace")
    if isinstance(src, str) and src.lstrip().startswith("<"):
        text, where, base = src, f"{kind} string", None
    else:
        path = os.fspath(src)
        where = path if path.isprintable() and len(path) < 300 else repr(path)[:300]
        base = os.path.dirname(os.path.abspath(path)) if "\0" not in path else None
        try:
            with open(path, "rb") as f:
                text = f.read()
        except (OSError, ValueError) as e:  # ValueError: e.g. a NUL in the path
            raise ValueError(f"{where}: cannot read {kind} file ({getattr(e, 'strerror', None) or e})") from None
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ValueError(f"{where}: malformed XML ({e})") from None
    except (ValueError, TypeError) as e:  # e.g. embedded NUL
        raise ValueError(f"{where}: malformed XML ({e})") from None
    return root, base, where


def numbers(text, n, what, allow=None):
    """Parse ``n`` finite numbers (n=None: any count) from an attribute string."""
    if text is None:
        return None
    parts = str(text).split()
    try:
        a = np.array([float(x) for x in parts], dtype=np.float64)
    except ValueError:
        raise ValueError(f"{what}: expected numbers, got {text!r}") from None
    if n is not None and a.size != n and not (allow and a.size in allow):
        raise ValueError(f"{what}: expected {n} numbers, got {a.size} ({text!r})")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: contains NaN or inf ({text!r})")
    return a


def number(text, what):
    return None if text is None else float(numbers(text, 1, what)[0])


# --- rotations (quaternions are w, x, y, z) ------------------------------------

def quat_mul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
                     w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def quat_axis_angle(axis, angle):
    axis = np.asarray(axis, np.float64)
    return np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis / np.linalg.norm(axis)])


def quat_to_rot(q):
    w, x, y, z = np.asarray(q, np.float64) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def rot_to_quat(R):
    """Rotation matrix -> unit quaternion (Shepperd's method, w >= 0)."""
    t = np.trace(R)
    if t > 0:
        s = 2.0 * math.sqrt(1.0 + t)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(max(1.0 + R[i, i] - R[j, j] - R[k, k], 0.0))
        q = [0.0] * 4
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q = np.array(q)
    return q if q[0] >= 0 else -q


def z_to_vec(v):
    """The minimal rotation taking +z to the direction of v (a quaternion)."""
    v = np.asarray(v, np.float64)
    n = np.linalg.norm(v)
    if n < 1e-14:
        raise ValueError("zero direction vector")
    v = v / n
    axis = np.cross([0.0, 0.0, 1.0], v)
    s = np.linalg.norm(axis)
    if s < 1e-14:
        return np.array([1.0, 0, 0, 0]) if v[2] > 0 else np.array([0.0, 1.0, 0, 0])
    return quat_axis_angle(axis / s, math.atan2(s, v[2]))


def rpy_to_rot(rpy):
    """URDF roll-pitch-yaw (fixed axes x, y, z): R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def skew(c):
    return np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])


# --- inertia of primitive solids (about the centroid, in the shape's frame) ------

def solid_volume_inertia(kind, size):
    """(volume, diagonal inertia per unit mass) of a uniform solid.

    size (MuJoCo's geom size): sphere (r), capsule and cylinder (r, half-length),
    box (three half-sizes), ellipsoid (three semi-axes).  The capsule is a
    cylinder plus two hemispheres (each hemisphere's centroid sits 3r/8 past its
    flat face; parallel-axis theorem)."""
    if kind == "sphere":
        r = size[0]
        return 4.0 / 3.0 * math.pi * r ** 3, np.full(3, 0.4 * r * r)
    if kind == "ellipsoid":
        a, b, c = size[:3]
        return 4.0 / 3.0 * math.pi * a * b * c, np.array([b * b + c * c, a * a + c * c, a * a + b * b]) / 5.0
    if kind == "box":
        a, b, c = size[:3]
        return 8.0 * a * b * c, np.array([b * b + c * c, a * a + c * c, a * a + b * b]) / 3.0
    if kind == "cylinder":
        r, h = size[0], 2.0 * size[1]
        return math.pi * r * r * h, np.array([(3 * r * r + h * h) / 12, (3 * r * r + h * h) / 12, r * r / 2])
    if kind == "capsule":
        r, h = size[0], 2.0 * size[1]
        v_cyl, v_sph = math.pi * r * r * h, 4.0 / 3.0 * math.pi * r ** 3
        vol = v_cyl + v_sph
        fc, fs = v_cyl / vol, v_sph / vol  # mass fractions
        axial = fc * r * r / 2 + fs * 0.4 * r * r
        # hemispheres about their own centroids: (2/5 - 9/64) r^2, centroids at h/2 + 3r/8
        lateral = fc * (3 * r * r + h * h) / 12 + fs * ((0.4 - 9 / 64) * r * r + (h / 2 + 3 * r / 8) ** 2)
        return vol, np.array([lateral, lateral, axial])
    raise ValueError(f"no inertia formula for {kind}")


def shell_area_inertia(kind, size):
    """(area, diagonal inertia per unit mass) of a thin uniform shell over the
    surface of a sphere, box, cylinder (with its end discs) or capsule (size as
    in :func:`solid_volume_inertia`): the area-weighted mean second moments
    <x^2>, <y^2>, <z^2> of the surface patches, combined as I_xx = <y^2> + <z^2>."""
    if kind == "sphere":
        r = size[0]
        parts = [(4.0 * math.pi * r * r, np.full(3, r * r / 3.0))]
    elif kind == "box":
        h = np.asarray(size[:3], np.float64)
        parts = []
        for n in range(3):   # the two faces normal to axis n
            t = [i for i in range(3) if i != n]
            mom = np.empty(3)
            mom[n] = h[n] ** 2
            mom[t] = h[t] ** 2 / 3.0
            parts.append((8.0 * h[t[0]] * h[t[1]], mom))
    elif kind in ("cylinder", "capsule"):
        r, hl = size[0], size[1]
        parts = [(4.0 * math.pi * r * hl, np.array([r * r / 2, r * r / 2, hl * hl / 3]))]   # the tube
        if kind == "cylinder":   # two discs at z = +-hl
            parts.append((2.0 * math.pi * r * r, np.array([r * r / 4, r * r / 4, hl * hl])))
        else:   # two hemispherical caps on z = +-hl: z = hl + u, <u> = r/2, <u^2> = r^2/3
            parts.append((4.0 * math.pi * r * r, np.array([r * r / 3, r * r / 3, hl * hl + hl * r + r * r / 3])))
    else:
        raise ValueError(f"no shell inertia formula for {kind}")
    area = sum(A for A, _ in parts)
    mom = sum(A * m for A, m in parts) / area
    return area, np.array([mom[1] + mom[2], mom[0] + mom[2], mom[0] + mom[1]])
