"""Fixed joint (weld): no DoF; the body is merged into its parent when the model is built."""

from __future__ import annotations

from .base import JointType

FIXED = JointType(name="fixed", nq=0, nv=0, aliases=("weld",), urdf=("fixed",))
