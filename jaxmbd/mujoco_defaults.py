"""MuJoCo's defaults and names, in one table that the loaders, the builder, the force elements and the
contact geometry read (values of MuJoCo's XML reference and ``mjmodel.h``; a leaf: it imports nothing)."""

GEOM_TYPES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh")   # mjtGeom order
SOLID_TYPES = ("sphere", "capsule", "cylinder", "box", "ellipsoid")        # primitives sized by numbers
GEOM_SIZE_COUNT = {"plane": 0, "sphere": 1, "capsule": 2, "cylinder": 2, "box": 3, "ellipsoid": 3}
DRAWN_TYPES = ("plane", "sphere", "capsule", "cylinder", "box", "ellipsoid", "mesh")   # what the viewer draws

SOLREF = (0.02, 1.0)                          # (time constant s, damping ratio) of every soft row
SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)         # (d0, dwidth, width m, midpoint, power)
FRICTION = (1.0, 0.005, 0.0001)               # a geom's (slide, torsion, roll)
PAIR_FRICTION = (1.0, 1.0, 0.005, 0.0001, 0.0001)   # a <pair>'s (slide1, slide2, torsion, roll1, roll2)
CONDIM = 3
GEOM = dict(contype=1, conaffinity=1, condim=CONDIM, friction=FRICTION, solref=SOLREF, solimp=SOLIMP, margin=0.0,
            priority=0, solmix=1.0)
