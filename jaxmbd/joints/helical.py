"""Helical (screw) joint: an angle about ``axis`` through ``anchor`` and a
translation ``pitch * angle`` along it."""

from __future__ import annotations

from .base import JointType
from .revolute import jcalc, unrolled

HELICAL = JointType(
    name="helical", nq=1, nv=1, jcalc=jcalc, aliases=("screw",),
    uses_axis=True, uses_anchor=True, uses_pitch=True, scalar_coords=True, unrolled=unrolled,
    random_trees=True,
)
