"""Static, build-time selection of the geom pairs to collide, by MuJoCo's rules.

MuJoCo collides (documentation, "Collision detection"; checked against
``mj_collision`` in ``tests/test_contact_geometry.py``):

* the explicit pairs (``<contact><pair>``), always, whatever their geoms'
  contype/conaffinity, bodies or exclusions; and
* every other pair of geoms g1, g2 ("dynamic" pairs) that passes all of
  - the bitmask test ``(contype1 & conaffinity2) or (contype2 & conaffinity1)``;
  - different weld roots (``body_weldid``): geoms of one body, or of bodies
    welded together (no joint between them), never collide; every geom of the
    world body and of bodies welded to it has weld root 0, so static geoms
    never collide with each other;
  - the parent filter (on unless ``filterparent`` is disabled): no pair whose
    weld roots are parent and child, where the parent of a weld root w is
    ``weld[parent[w]]``, and a pair with weld root 0 (the world) is never
    filtered: the world's geoms (a floor) do collide with the bodies whose
    parent is the world;
  - no ``<exclude>`` of the two bodies (``exclude_signature``: ``b1 << 16 |
    b2``);
  - the pair is not an explicit pair already (then only the explicit one);
  - not both planes or height fields (MuJoCo has no collision function for
    them).

Here no bounding-volume test is made: the pairs are the static candidates,
and the narrow phase gives each a fixed number of contacts whose distance the
force law turns into zero force when separated.

The geoms of a pair are ordered as MuJoCo orders a contact's geoms: the lower
``mjtGeom`` type first (plane < hfield < sphere < capsule < ellipsoid <
cylinder < box < mesh), the lower geom id first between equal types, so the
narrow phase's normal (geom1 -> geom2) is MuJoCo's ``contact.frame[0]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .geometry import TYPES

DSBL_CONTACT, DSBL_FILTERPARENT = 16, 1024   # mjtDisableBit values (the tests check them against mujoco)
_FLAT = (0, 1)                                # plane, hfield: no plane-plane collision


@dataclass(frozen=True)
class PairSet:
    """Selected geom pairs, grouped by type pair.

    groups: {(type1 name, type2 name): int array (n, 2) of geom ids (geom1,
    geom2)}, type1 <= type2 in MuJoCo's order, rows sorted.  explicit: the
    same keys, int array (n,): the ``<pair>`` index of each row, or -1 for a
    dynamic pair.  Every array is NumPy (static data for a batched kernel).
    """
    groups: dict
    explicit: dict

    def all_pairs(self):
        """Every selected pair, as a sorted list of (geom1, geom2) tuples."""
        return sorted((int(a), int(b)) for g in self.groups.values() for a, b in g)

    def __len__(self):
        return sum(len(g) for g in self.groups.values())


def _ordered(types, a, b):
    """(geom1, geom2) arrays with the lower (type, id) first."""
    swap = (types[a] > types[b]) | ((types[a] == types[b]) & (a > b))
    return np.where(swap, b, a), np.where(swap, a, b)


def select_pairs(geom_body, geom_type, geom_contype, geom_conaffinity, body_parent, body_weld,
                 pairs=(), exclude=(), filterparent=True, contact=True):
    """The geom pairs MuJoCo collides, as a :class:`PairSet`.

    geom_body, geom_type (``mjtGeom`` ints), geom_contype, geom_conaffinity:
    (ngeom,) per geom.  body_parent, body_weld: (nbody,) per body (body 0 is
    the world; weld = the body's weld root, MuJoCo's ``body_weldid``).
    pairs: explicit (g1, g2) geom pairs, in ``<pair>`` order.  exclude:
    (body1, body2) pairs.  filterparent, contact: MuJoCo's flags (False when
    disabled).
    """
    gb, gt = np.asarray(geom_body, int), np.asarray(geom_type, int)
    ct, ca = np.asarray(geom_contype, np.int64), np.asarray(geom_conaffinity, np.int64)
    parent, weld = np.asarray(body_parent, int), np.asarray(body_weld, int)
    pairs = np.asarray(pairs, int).reshape(-1, 2)
    n = len(gb)
    if not (len(gt) == len(ct) == len(ca) == n and len(parent) == len(weld)):
        raise ValueError("geom and body tables of unequal lengths")
    if n and (gb.min() < 0 or gb.max() >= len(parent)):
        raise ValueError("a geom's body id is out of range")
    if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
        raise ValueError("an explicit pair names a geom id out of range")
    bad = sorted({TYPES[t] if 0 <= t < len(TYPES) else t for t in gt if not 0 <= t < len(TYPES)})
    if bad:
        raise ValueError(f"unknown geom types {bad}")

    a, b = np.triu_indices(n, 1)
    keep = ((ct[a] & ca[b]) != 0) | ((ct[b] & ca[a]) != 0)
    w1, w2 = weld[gb[a]], weld[gb[b]]
    keep &= w1 != w2
    if filterparent:
        pw1, pw2 = weld[parent[w1]], weld[parent[w2]]
        keep &= (w1 == 0) | (w2 == 0) | ((w1 != pw2) & (w2 != pw1))
    excl = {(min(x, y), max(x, y)) for x, y in np.asarray(exclude, int).reshape(-1, 2)}
    if excl:
        b1, b2 = np.minimum(gb[a], gb[b]), np.maximum(gb[a], gb[b])
        keep &= np.array([(x, y) not in excl for x, y in zip(b1, b2)], bool)
    keep &= ~(np.isin(gt[a], _FLAT) & np.isin(gt[b], _FLAT))
    if not contact:
        keep[:] = False
    a, b = a[keep], b[keep]

    e1, e2 = _ordered(gt, pairs[:, 0], pairs[:, 1])
    explicit = {(int(x), int(y)): k for k, (x, y) in enumerate(zip(e1, e2))}
    g1, g2 = _ordered(gt, a, b)
    dyn = np.array([(int(x), int(y)) not in explicit for x, y in zip(g1, g2)], bool)
    g1 = np.concatenate([g1[dyn], e1]).astype(np.int32)
    g2 = np.concatenate([g2[dyn], e2]).astype(np.int32)
    src = np.concatenate([np.full(dyn.sum(), -1), np.arange(len(e1))]).astype(np.int32)

    groups, expl = {}, {}
    for t1, t2 in sorted(set(zip(gt[g1].tolist(), gt[g2].tolist()))):
        sel = (gt[g1] == t1) & (gt[g2] == t2)
        order = np.lexsort((g2[sel], g1[sel]))
        key = (TYPES[t1], TYPES[t2])
        groups[key] = np.stack([g1[sel][order], g2[sel][order]], axis=1)
        expl[key] = src[sel][order]
    return PairSet(groups, expl)


def from_mujoco(m):
    """:func:`select_pairs` on a compiled ``mujoco.MjModel`` (its tables
    ``geom_bodyid``, ``geom_type``, ``geom_contype``, ``geom_conaffinity``,
    ``body_parentid``, ``body_weldid``, ``pair_geom1/2``,
    ``exclude_signature`` and the disable flags)."""
    sig = np.asarray(m.exclude_signature, np.int64)
    flags = int(m.opt.disableflags)
    return select_pairs(m.geom_bodyid, m.geom_type, m.geom_contype, m.geom_conaffinity, m.body_parentid,
                        m.body_weldid, np.stack([m.pair_geom1, m.pair_geom2], axis=1),
                        np.stack([sig >> 16, sig & 0xFFFF], axis=1),
                        filterparent=not flags & DSBL_FILTERPARENT, contact=not flags & DSBL_CONTACT)
