"""Contact geometry: the narrow phase (:mod:`.geometry`: candidate contacts
between two geoms) and the static, build-time choice of the geom pairs to
test (:mod:`.pairs`: MuJoCo's contype/conaffinity, parent and weld
filtering, ``<pair>`` and ``<exclude>``)."""

from .geometry import (Contacts, collide, collide_batch, contact_frame, num_contacts,  # noqa: F401
                       supported_pairs, type_name)
from .hfield import HField  # noqa: F401
