"""Model import: MJCF (MuJoCo) and URDF.  Both loaders build through
:class:`jaxmbd.ModelBuilder`, so imported and built-in models share one
validation path."""

from .mjcf import MJCFImport, load_mjcf
from .urdf import URDFImport, load_urdf

__all__ = ["load_mjcf", "load_urdf", "MJCFImport", "URDFImport"]
