"""Sensors: what a robot reports, in MuJoCo's ``sensordata`` layout.

A model built with sensors (:meth:`jaxmbd.ModelBuilder.add_sensor`, or an MJCF file's
``<sensor>`` section) carries them as ``model.sensors``; :func:`sensordata` evaluates every one at
(q, v, ctrl) into one vector, each sensor's values at its address (``Sensors.adr``) as in MuJoCo's
``mjData.sensordata``.  Values are noise-free; a positive ``cutoff`` clamps a sensor's values to
[-cutoff, cutoff] (the upper bound only for ``touch``; quaternions are never clamped), as MuJoCo
does.  It is a plain function of its arguments: ``jax.jit``, ``jax.vmap`` and ``jax.grad`` apply,
and ``Save(observe=lambda m, q, v: sensordata(m, q, v, ctrl))`` records it during a run.

=====================  ====  ================================================================
kind                   dim   value
=====================  ====  ================================================================
``jointpos``           1     q of a hinge or slide joint
``jointvel``           1     its velocity
``ballquat``           4     a ball joint's quaternion (w, x, y, z), normalized
``ballangvel``         3     a ball joint's angular velocity (child coordinates)
``actuatorpos``        1     an actuator's length (gear times the joint coordinate)
``actuatorvel``        1     its rate
``actuatorfrc``        1     its scalar force (MuJoCo's ``actuator_force``)
``jointactuatorfrc``   1     the actuators' generalized force on a hinge or slide joint
``framepos``           3     a frame's origin, in the world or in a reference frame
``framequat``          4     its orientation (w, x, y, z), in the world or relative to the reference
``framexaxis`` etc.    3     its x, y or z axis, in the world or in the reference frame
``framelinvel``        3     its origin's linear velocity (world coordinates)
``frameangvel``        3     its angular velocity (world coordinates)
``gyro``               3     a site's angular velocity in the site's coordinates
``velocimeter``        3     a site's linear velocity in the site's coordinates
``accelerometer``      3     a site's linear acceleration minus gravity in the site's coordinates
                             (the accelerations of the full dynamics: actuators, soft rows)
``subtreecom``         3     the centre of mass of a body's subtree (the world body: the whole model)
``subtreelinvel``      3     its velocity
``subtreeangmom``      3     the subtree's angular momentum about its centre of mass (world)
``tendonpos``          1     a tendon's length (fixed: :mod:`jaxmbd.forces.tendon`; spatial:
                             :mod:`jaxmbd.forces.spatial_tendon`)
``tendonvel``          1     its rate
``touch``              1     the normal forces of the contacts of the site's body whose ray from the
                             contact point along the normal, away from the body, meets the site's
                             volume (its ``type`` and ``size``), summed
``force``              3     the force the parent exerts on the site's body and everything below it
                             (MuJoCo's ``cfrc_int``), in the site's coordinates
``torque``             3     the torque of that interaction about the site, in the site's coordinates
=====================  ====  ================================================================

``touch``, ``force`` and ``torque`` read the full dynamics: the contact forces of
:func:`jaxmbd.contact_forces` at the same (q, v, ctrl) and, for the last two, the accelerations of
the bodies below the site (MuJoCo's ``mj_rnePostConstraint``: their inertial forces, gravity
included, minus the contact forces on them).  They are read on kinematic trees: on a
:class:`jaxmbd.Mechanism` ``sensordata`` refuses them (a ValueError), since its loop forces are not
among the forces they sum.

Frames are MuJoCo's objects: a site (``objtype="site"``), a body's frame (``"xbody"``) or the
position of its centre of mass (``"body"``: MuJoCo's inertial frame, whose orientation follows
MuJoCo's principal-axis convention and is not offered).  Velocities and accelerations are those of
the frame's origin as a point of its body (MuJoCo's ``mj_objectVelocity`` and
``mj_objectAcceleration``; the accelerometer's is the classical acceleration, Featherstone, Rigid
Body Dynamics Algorithms, §2.11)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .mujoco_defaults import SOLID_TYPES

DIMS = {"jointpos": 1, "jointvel": 1, "ballquat": 4, "ballangvel": 3, "actuatorpos": 1, "actuatorvel": 1,
        "actuatorfrc": 1, "jointactuatorfrc": 1, "framepos": 3, "framequat": 4, "framexaxis": 3,
        "frameyaxis": 3, "framezaxis": 3, "framelinvel": 3, "frameangvel": 3, "gyro": 3, "velocimeter": 3,
        "accelerometer": 3, "subtreecom": 3, "subtreelinvel": 3, "subtreeangmom": 3, "tendonpos": 1,
        "tendonvel": 1, "touch": 1, "force": 3, "torque": 3}
TENDON_KINDS = ("tendonpos", "tendonvel")
JOINT_KINDS = ("jointpos", "jointvel", "ballquat", "ballangvel", "jointactuatorfrc")
ACTUATOR_KINDS = ("actuatorpos", "actuatorvel", "actuatorfrc")
FRAME_KINDS = ("framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis", "framelinvel", "frameangvel")
SITE_KINDS = ("gyro", "velocimeter", "accelerometer", "touch", "force", "torque")
CONTACT_KINDS = ("touch", "force", "torque")      # read the contact forces (a tree's, not a mechanism's)
SITE_TYPES = SOLID_TYPES                          # MuJoCo's site types (its sized primitives)
SUBTREE_KINDS = ("subtreecom", "subtreelinvel", "subtreeangmom")
ORIENTED = ("framequat", "framexaxis", "frameyaxis", "framezaxis")
OBJTYPES = ("site", "xbody", "body")


class Sensors(eqx.Module):
    """The model's sensors, resolved on the built tree (static but the frames' poses).

    Per sensor: ``names``, ``kinds``, ``dims``, ``adr`` (its first entry in ``sensordata``);
    ``index``: the coordinate (``jointpos``, ``ballquat``) or DoF address (the other joint kinds),
    the actuator, or the host body of the frame or subtree (-1: the world); ``ref``: the host of the
    reference frame (-2: none, -1: the world); ``placeholder``: True for a slot kept with zeros (a
    sensor of a kind jaxmbd does not model, so that the layout stays MuJoCo's).  Traced: the object's
    frame in its host ``rot`` (k, 3, 3), ``pos`` (k, 3), the reference's ``ref_rot``, ``ref_pos`` and
    ``cutoff`` (k,)."""
    names: tuple = eqx.field(static=True)
    kinds: tuple = eqx.field(static=True)
    dims: tuple = eqx.field(static=True)
    adr: tuple = eqx.field(static=True)
    index: tuple = eqx.field(static=True)
    ref: tuple = eqx.field(static=True)
    placeholder: tuple = eqx.field(static=True)
    rot: jax.Array
    coef: jax.Array      # (k, nv): a tendon sensor's coefficients over the DoFs (zeros for the others)
    pos: jax.Array
    ref_rot: jax.Array
    ref_pos: jax.Array
    cutoff: jax.Array
    site_type: tuple = eqx.field(static=True, default=())   # per sensor: its site's type (touch), else ""
    touch_geoms: tuple = eqx.field(static=True, default=())  # per sensor: the contact geoms of its site's body
    site_size: jax.Array = None                              # (k, 3) its site's size (touch)
    spatial: tuple = eqx.field(static=True, default=())      # per sensor: reads a spatial tendon (index)

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def size(self) -> int:
        """The length of ``sensordata`` (MuJoCo's ``nsensordata``)."""
        return int(sum(self.dims))

    def slot(self, name: str) -> slice:
        """The entries of the sensor ``name`` in ``sensordata``."""
        try:
            i = self.names.index(name)
        except ValueError:
            raise KeyError(f"no sensor named {name!r}") from None
        return slice(self.adr[i], self.adr[i] + self.dims[i])


def _frame(kin, host, R, p):
    """World (rotation, origin, angular velocity, origin's linear velocity) of a frame fixed at (R, p)
    in body ``host`` (-1: the world)."""
    if host < 0:
        z = jnp.zeros(3, p.dtype)
        return R, p, z, z
    Rb, pb, vb = kin.rot[host], kin.pos[host], kin.vel[host]
    w = Rb @ vb[:3]
    off = Rb @ p
    return Rb @ R, pb + off, w, Rb @ vb[3:] + jnp.cross(w, off)


def _subtree(model, kin, host):
    """(mass, world centre of mass, its velocity, angular momentum about it) of the subtree of
    ``host`` (-1: every body)."""
    anc = model.topo.ancestors
    sel = np.arange(model.n_bodies) if host < 0 else np.flatnonzero(anc[:, host])
    m = model.mass[sel]
    Rb, pb, vb = kin.rot[sel], kin.pos[sel], kin.vel[sel]
    off = jnp.einsum("kij,kj->ki", Rb, model.com[sel])
    c = pb + off
    w = jnp.einsum("kij,kj->ki", Rb, vb[:, :3])
    vc = jnp.einsum("kij,kj->ki", Rb, vb[:, 3:]) + jnp.cross(w, off)
    M = jnp.sum(m)
    C = jnp.sum(m[:, None] * c, 0) / M
    V = jnp.sum(m[:, None] * vc, 0) / M
    Iw = jnp.einsum("kij,kjl,kml->kim", Rb, model.inertia[sel], Rb)
    L = jnp.einsum("kij,kj->i", Iw, w) + jnp.sum(m[:, None] * jnp.cross(c - C[None], vc - V[None]), 0)
    return M, C, V, L


def _quat(R):
    """(w, x, y, z) of a rotation matrix by Shepperd's method: from the largest of 1 + tr R and
    1 + 2 R_ii - tr R, that component positive (w > 0 whenever tr R > 0, as MuJoCo's mju_mat2Quat;
    a quaternion and its negative are the same rotation)."""
    t = jnp.trace(R)
    d = jnp.diagonal(R)
    c = jnp.stack([1 + t, 1 + 2 * d[0] - t, 1 + 2 * d[1] - t, 1 + 2 * d[2] - t])
    k = jnp.argmax(c)
    s = 2.0 * jnp.sqrt(jnp.maximum(c[k], 1e-300))
    a, b, e = R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]
    f, g, h = R[0, 1] + R[1, 0], R[0, 2] + R[2, 0], R[1, 2] + R[2, 1]
    rows = jnp.stack([jnp.stack([c[0], a, b, e]), jnp.stack([a, c[1], f, g]),
                      jnp.stack([b, f, c[2], h]), jnp.stack([e, g, h, c[3]])])
    return rows[k] / s


def sensordata(model, q, v, ctrl=None):
    """MuJoCo's ``sensordata`` of ``model.sensors`` at (q, v) with the actuators at ``ctrl``
    ((nu,); None: zeros, MuJoCo's default), shape (model.sensors.size,); (0,) without sensors.
    A :class:`jaxmbd.Mechanism` reports those of its tree, (q, v) in the mechanism's order, its
    accelerometers from its constrained dynamics."""
    tree = getattr(model, "tree", model)
    s = tree.sensors
    q, v = jnp.asarray(q), jnp.asarray(v)
    qm, vm = q, v
    if tree is not model:     # a mechanism's coordinates, in its own order
        q, v = model.to_tree(q), model.to_tree(v)
    dt = jnp.result_type(q, v, float)
    if s is None or not s.n:
        return jnp.zeros(0, dt)
    from .kinematics import forward_kinematics
    kin = forward_kinematics(tree, q, v)
    nu = tree.nu
    ctrl = jnp.zeros(nu, dt) if ctrl is None else jnp.asarray(ctrl)
    act_f = qfrc_act = None
    if any(k in ("actuatorpos", "actuatorfrc", "actuatorvel", "jointactuatorfrc") for k in s.kinds) and nu:
        act_L, act_v, act_f, qfrc_act = tree.actuators.state(tree.nv, q, v, ctrl, tree)
    a = None        # the full dynamics' accelerations, once, for the accelerometers and force/torque
    if "accelerometer" in s.kinds or "force" in s.kinds or "torque" in s.kinds:
        a = _accelerations(model, tree, (qm, vm), q, v, ctrl)
    acc = _accelerometers(tree, s, kin, a, q, v) if "accelerometer" in s.kinds else {}
    contact = _contact_sensors(model, tree, s, q, v, ctrl, a) if any(k in CONTACT_KINDS for k in s.kinds) else {}
    out, spatial = [], None
    for i, (kind, n, idx, ref) in enumerate(zip(s.kinds, s.dims, s.index, s.ref)):
        if s.placeholder[i]:
            out.append(jnp.zeros(n, dt))
            continue
        if kind == "jointpos":
            val = q[idx:idx + 1]
        elif kind == "jointvel":
            val = v[idx:idx + 1]
        elif kind == "ballquat":
            u = q[idx:idx + 4]
            val = u / jnp.sqrt(jnp.sum(u * u))
        elif kind == "ballangvel":
            val = v[idx:idx + 3]
        elif kind == "jointactuatorfrc":
            val = jnp.zeros(1, dt) if qfrc_act is None else qfrc_act[idx:idx + 1]
        elif kind == "actuatorpos":
            val = act_L[idx:idx + 1]
        elif kind == "actuatorvel":
            val = act_v[idx:idx + 1]
        elif kind in TENDON_KINDS and s.spatial and s.spatial[i]:
            if spatial is None:
                spatial = _spatial_lengths(tree, q, v)
            val = spatial[0 if kind == "tendonpos" else 1][idx:idx + 1]
        elif kind == "tendonpos":
            val = (s.coef[i] @ q[tree.topo.dof_qadr])[None]
        elif kind == "tendonvel":
            val = (s.coef[i] @ v)[None]
        elif kind == "actuatorfrc":
            val = act_f[idx:idx + 1]
        elif kind in SUBTREE_KINDS:
            _, C, V, L = _subtree(tree, kin, idx)
            val = {"subtreecom": C, "subtreelinvel": V, "subtreeangmom": L}[kind]
        elif kind == "accelerometer":
            val = acc[i]
        elif kind in CONTACT_KINDS:
            val = contact[i]
        else:
            R, p, w, vp = _frame(kin, idx, s.rot[i], s.pos[i])
            if kind == "gyro":
                val = R.T @ w
            elif kind == "velocimeter":
                val = R.T @ vp
            elif kind == "framelinvel":
                val = vp
            elif kind == "frameangvel":
                val = w
            else:
                if ref > -2:
                    Rr, pr, _, _ = _frame(kin, ref, s.ref_rot[i], s.ref_pos[i])
                    R, p = Rr.T @ R, Rr.T @ (p - pr)
                val = {"framepos": p, "framexaxis": R[:, 0], "frameyaxis": R[:, 1],
                       "framezaxis": R[:, 2]}.get(kind)
                if kind == "framequat":
                    val = _quat(R)
        out.append(_cut(jnp.asarray(val, dt), kind, s.cutoff[i]))
    return jnp.concatenate(out)


def _spatial_lengths(tree, q, v):
    """(lengths, rates) of the model's spatial tendons (:mod:`jaxmbd.forces.spatial_tendon`)."""
    from .forces.base import velocity_of
    from .forces.spatial_tendon import SpatialTendons
    return velocity_of(tree, q, v, SpatialTendons)


def _cut(x, kind, c):
    """MuJoCo's cutoff: none for quaternions, the upper bound for touch, else both bounds."""
    if kind in ("framequat", "ballquat"):
        return x
    return jnp.where(c > 0, jnp.clip(x, -c, c), x)


def _accelerations(model, tree, mech_state, q, v, ctrl):
    """The full dynamics' accelerations (tree order) with the actuators at ``ctrl`` (a mechanism's:
    its constrained dynamics)."""
    from .dynamics import actuator_force, forward_dynamics
    tau = actuator_force(tree, q, v, ctrl) if tree.nu else jnp.zeros(tree.nv, v.dtype)
    if tree is model:
        return forward_dynamics(tree, q, v, tau)
    from .dae import constrained_dynamics
    return model.to_tree(constrained_dynamics(model, *mech_state, model.from_tree(tau))[0])


def _accelerometers(tree, s, kin, a, q, v):
    """{sensor index: its reading}: the sites' classical accelerations minus gravity, in the sites'
    coordinates, from the full dynamics' accelerations ``a`` (MuJoCo's mj_objectAcceleration on
    cacc, which starts at -gravity)."""
    from .kinematics import forward_kinematics, qdot
    sel = [i for i, k in enumerate(s.kinds) if k == "accelerometer" and not s.placeholder[i]]

    def point_velocities(qq, vv):
        kin = forward_kinematics(tree, qq, vv)
        return jnp.stack([_frame(kin, s.index[i], s.rot[i], s.pos[i])[3] for i in sel])

    _, acc = jax.jvp(point_velocities, (q, v), (qdot(tree, q, v), a))
    out = {}
    for j, i in enumerate(sel):
        R = _frame(kin, s.index[i], s.rot[i], s.pos[i])[0]
        out[i] = R.T @ (acc[j] - tree.gravity)
    return out


def _interval_quadratic(a, b, c):
    """The t interval where a t² + 2 b t + c ≤ 0 (a > 0), and whether it is nonempty."""
    disc = b * b - a * c
    r = jnp.sqrt(jnp.maximum(disc, 0.0))
    a_ = jnp.where(a > 0, a, 1.0)
    return (-b - r) / a_, (-b + r) / a_, disc >= 0


def ray_hits(kind, size, p, d):
    """Whether the ray p + t d, t ≥ 0 (site coordinates) meets the solid site ``kind`` of ``size``
    (MuJoCo's site types and sizes; the touch sensor's zone test, mju_rayGeom ≥ 0)."""
    big = 1e300
    if kind in ("sphere", "ellipsoid"):
        s = jnp.full(3, size[0]) if kind == "sphere" else size
        ps, ds = p / s, d / s
        t0, t1, ok = _interval_quadratic(ds @ ds, ps @ ds, ps @ ps - 1.0)
        return ok & (t1 >= 0) & (ds @ ds > 0) | (ps @ ps <= 1.0)
    if kind == "box":
        lo, hi = -size - p, size - p            # slab bounds on t d_i
        safe = jnp.where(d == 0, 1.0, d)
        ta, tb = lo / safe, hi / safe
        tmin = jnp.where(d == 0, jnp.where((lo <= 0) & (hi >= 0), -big, big), jnp.minimum(ta, tb))
        tmax = jnp.where(d == 0, jnp.where((lo <= 0) & (hi >= 0), big, -big), jnp.maximum(ta, tb))
        t0, t1 = jnp.max(tmin), jnp.min(tmax)
        return (t0 <= t1) & (t1 >= 0)
    r, h = size[0], size[1]
    # the infinite cylinder about z, then the slab |z| ≤ h
    a = d[0] ** 2 + d[1] ** 2
    c0, c1, ok = _interval_quadratic(a, p[0] * d[0] + p[1] * d[1], p[0] ** 2 + p[1] ** 2 - r * r)
    inside_xy = p[0] ** 2 + p[1] ** 2 <= r * r
    c0 = jnp.where(a > 0, c0, jnp.where(inside_xy, -big, big))
    c1 = jnp.where(a > 0, c1, jnp.where(inside_xy, big, -big))
    ok = jnp.where(a > 0, ok, inside_xy)
    safe = jnp.where(d[2] == 0, 1.0, d[2])
    za, zb = (-h - p[2]) / safe, (h - p[2]) / safe
    inside_z = jnp.abs(p[2]) <= h
    z0 = jnp.where(d[2] == 0, jnp.where(inside_z, -big, big), jnp.minimum(za, zb))
    z1 = jnp.where(d[2] == 0, jnp.where(inside_z, big, -big), jnp.maximum(za, zb))
    t0, t1 = jnp.maximum(c0, z0), jnp.minimum(c1, z1)
    hit = ok & (t0 <= t1) & (t1 >= 0)
    if kind == "cylinder":
        return hit
    for zc in (-h, h):                            # the capsule's end spheres
        q = p - jnp.array([0.0, 0.0, zc], p.dtype)
        s0, s1, okk = _interval_quadratic(d @ d, q @ d, q @ q - r * r)
        hit = hit | (okk & (s1 >= 0) & (d @ d > 0)) | (q @ q <= r * r)
    return hit


def _contact_sensors(model, tree, s, q, v, ctrl, a):
    """{sensor index: its reading} for touch, force and torque (see the module's table); ``a`` the
    full dynamics' accelerations (None without force and torque sensors)."""
    from .contact_report import contact_forces
    from .forces.base import elements
    from .forces.contact import Contact
    from .kinematics import forward_kinematics, qdot
    if tree is not model:
        raise ValueError("touch, force and torque sensors are read on a kinematic tree, not on a mechanism "
                         "(its loop forces are not among the contact forces they sum)")
    sel = [i for i, k in enumerate(s.kinds) if k in CONTACT_KINDS and not s.placeholder[i]]
    dt = jnp.result_type(q, v, float)
    el = next((e for e in (elements(tree) or ()) if isinstance(e, Contact)), None)
    c = contact_forces(tree, q, v, ctrl) if el is not None else None
    kin = forward_kinematics(tree, q, v)
    out = {}
    if c is not None:
        pair_geoms = np.array([row for _, _, rows in el.groups for row in rows], np.int64).reshape(-1, 2)
        g1, g2 = (jnp.asarray(pair_geoms[:, k])[c["pair"]] for k in (0, 1))
        on = c["dist"] < el.margin[c["pair"]]                        # in the solve (MuJoCo's active contacts)
        F = c["normal_force"][:, None] * c["normal"] + c["friction_force"]   # on geom 2
        M = c["friction_moment"]
    if any(s.kinds[i] in ("force", "torque") for i in sel):
        def motion(qq, vv):                   # per body: world angular velocity, centre-of-mass velocity
            k = forward_kinematics(tree, qq, vv)
            w = jnp.einsum("nij,nj->ni", k.rot, k.vel[:, :3])
            off = jnp.einsum("nij,nj->ni", k.rot, tree.com)
            return w, jnp.einsum("nij,nj->ni", k.rot, k.vel[:, 3:]) + jnp.cross(w, off), k.pos + off
        (w, vc, com), (al, ac, _) = jax.jvp(motion, (q, v), (qdot(tree, q, v), a))
        Iw = jnp.einsum("nij,njk,nlk->nil", kin.rot, tree.inertia, kin.rot)
        f_in = tree.mass[:, None] * (ac - tree.gravity[None])                               # (n, 3)
        n_in = jnp.einsum("nij,nj->ni", Iw, al) + jnp.cross(w, jnp.einsum("nij,nj->ni", Iw, w))
    anc = tree.topo.ancestors
    for i in sel:
        kind, host = s.kinds[i], s.index[i]
        R, p, _, _ = _frame(kin, host, s.rot[i], s.pos[i])
        if kind == "touch":
            if c is None:
                out[i] = jnp.zeros(1, dt)
                continue
            mine = np.zeros(len(el.geom_names), bool)
            mine[list(s.touch_geoms[i])] = True
            m1, m2 = jnp.asarray(mine)[g1], jnp.asarray(mine)[g2]
            ray = jnp.where(m2[:, None], -c["normal"], c["normal"])      # away from the sensor's body
            pl = (c["pos"] - p[None]) @ R
            hits = jax.vmap(lambda pp, dd: ray_hits(s.site_type[i], s.site_size[i], pp, dd))(pl, ray @ R)
            take = (m1 | m2) & on & (c["normal_force"] > 0) & hits
            out[i] = jnp.sum(jnp.where(take, c["normal_force"], 0.0))[None]
            continue
        sub = jnp.asarray(anc[:, host])                                 # the bodies at and below the site's
        Ft = jnp.sum(jnp.where(sub[:, None], f_in, 0.0), 0)
        Mt = jnp.sum(jnp.where(sub[:, None], n_in + jnp.cross(com - p[None], f_in), 0.0), 0)
        if c is not None:
            b1 = jnp.where(c["body1"] >= 0, sub[jnp.maximum(c["body1"], 0)], False)
            b2 = jnp.where(c["body2"] >= 0, sub[jnp.maximum(c["body2"], 0)], False)
            sgn = jnp.where(on, b2.astype(dt) - b1.astype(dt), 0.0)      # +: the force acts on the subtree
            Ft = Ft - jnp.sum(sgn[:, None] * F, 0)
            Mt = Mt - jnp.sum(sgn[:, None] * (jnp.cross(c["pos"] - p[None], F) + M), 0)
        out[i] = R.T @ (Ft if kind == "force" else Mt)
    return out


def bind(specs, topo, joint_names, frames, sites, actuator_names, body_com, tendons=None, site_shapes=None,
         body_geoms=None, spatial_names=()):
    """The :class:`Sensors` record of the builder's sensor specs on the built tree.

    ``joint_names``: one per moving body; ``frames``: body name -> (host name or "world", R, p) of the body's frame in its host;
    ``sites``: site name -> (body name, R, p) in that body's frame; ``actuator_names``: in order;
    ``body_com``: body name -> its own centre of mass in its frame; ``site_shapes``: site name ->
    (type, size (3,)); ``body_geoms``: body name -> the indices of its contact geoms."""
    site_shapes, body_geoms = site_shapes or {}, body_geoms or {}
    index_of = {n: i for i, n in enumerate(topo.names)}

    def host(name):
        h = frames[name][0]
        return -1 if h == "world" else index_of[h]

    def frame(objtype, obj, what):
        if objtype == "site":
            if obj not in sites:
                raise ValueError(f"{what}: no site named {obj!r}")
            b, R, p = sites[obj]
            _, Rh, ph = frames[b]
            return host(b), Rh @ R, ph + Rh @ p
        if obj not in frames:
            raise ValueError(f"{what}: no body named {obj!r}")
        _, Rh, ph = frames[obj]
        if objtype == "xbody":
            return host(obj), Rh, ph
        return host(obj), Rh, ph + Rh @ body_com.get(obj, np.zeros(3))

    names, kinds, dims, adr, index, ref, ph, rot, pos, rrot, rpos, cut, coefs = ([] for _ in range(13))
    stype, ssize, tgeoms, spatial = [], [], [], []
    tendons = tendons or {}
    at = 0
    for k, sp in enumerate(specs):
        kind, name = sp["kind"], sp["name"] or f"sensor{k}"
        what = f"sensor {name!r} ({kind})"
        coefs_row = np.zeros(topo.nv)
        R, p, Rr, pr, r, idx = np.eye(3), np.zeros(3), np.eye(3), np.zeros(3), -2, 0
        st, sz, tg, sp_flag = "", np.zeros(3), (), False
        if sp["placeholder"]:
            n = sp["dim"]
        else:
            n = DIMS[kind]
            if kind in JOINT_KINDS:
                j = _joint(topo, joint_names, sp["joint"], kind, what)
                idx = int(topo.q_adr[j] if kind in ("jointpos", "ballquat") else topo.v_adr[j])
            elif kind in TENDON_KINDS and sp["tendon"] in spatial_names:
                idx, sp_flag = spatial_names.index(sp["tendon"]), True
            elif kind in TENDON_KINDS:
                if sp["tendon"] not in tendons:
                    raise ValueError(f"{what}: no tendon named {sp['tendon']!r}")
                td, c = tendons[sp["tendon"]]
                row = np.zeros(topo.nv)
                row[list(td)] = c
                coefs_row = row
            elif kind in ACTUATOR_KINDS:
                if sp["actuator"] not in actuator_names:
                    raise ValueError(f"{what}: no actuator named {sp['actuator']!r}")
                idx = actuator_names.index(sp["actuator"])
            elif kind in SUBTREE_KINDS:
                b = sp["body"]
                if b != "world" and b not in frames:
                    raise ValueError(f"{what}: no body named {b!r}")
                if b != "world" and frames[b][0] != b:
                    raise ValueError(f"{what}: body {b!r} is welded to {frames[b][0]!r}; the subtree sensors "
                                     "need a moving body (or the world)")
                idx = -1 if b == "world" else index_of[b]
            else:
                objtype = "site" if kind in SITE_KINDS else sp["objtype"]
                if objtype not in OBJTYPES:
                    raise ValueError(f"{what}: objtype {objtype!r}: expected one of {', '.join(OBJTYPES)}")
                if objtype == "body" and kind in ORIENTED:
                    raise ValueError(f"{what}: the orientation of a body's inertial frame (objtype 'body') "
                                     "follows MuJoCo's principal-axis convention and is not offered; use "
                                     "'xbody' or a site")
                idx, R, p = frame(objtype, sp["obj"], what)
                if kind in CONTACT_KINDS:
                    body = sites[sp["obj"]][0]
                    if kind == "touch":
                        st, sz = site_shapes.get(sp["obj"], ("sphere", np.full(3, 0.005)))
                        if st not in SITE_TYPES:
                            raise ValueError(f"{what}: site type {st!r}: expected one of {', '.join(SITE_TYPES)}")
                        tg = tuple(int(g) for g in body_geoms.get(body, ()))
                    elif body == "world" or frames[body][0] != body:
                        raise ValueError(f"{what}: site {sp['obj']!r} is on {body!r}, which has no joint of its "
                                         "own; force and torque sensors read a moving body's interaction with "
                                         "its parent")
                if sp["ref"] is not None:
                    if kind not in ("framepos",) + ORIENTED:
                        raise ValueError(f"{what}: a reference frame is supported for positions and "
                                         "orientations, not velocities")
                    if sp["reftype"] == "body" and kind in ORIENTED:
                        raise ValueError(f"{what}: reftype 'body' (the inertial frame) is not offered for "
                                         "orientations; use 'xbody' or a site")
                    r, Rr, pr = frame(sp["reftype"], sp["ref"], what)
        names.append(name), kinds.append(kind), dims.append(n), adr.append(at), index.append(idx)
        ref.append(r), ph.append(bool(sp["placeholder"])), rot.append(R), pos.append(p)
        rrot.append(Rr), rpos.append(pr), cut.append(sp["cutoff"])
        coefs.append(coefs_row)
        stype.append(st), ssize.append(np.asarray(sz, float)), tgeoms.append(tg), spatial.append(sp_flag)
        at += n
    if len(set(names)) != len(names):
        dup = sorted({x for x in names if names.count(x) > 1})
        raise ValueError(f"duplicate sensor name(s) {', '.join(map(repr, dup))}")
    f64 = lambda x, shape: jnp.asarray(np.asarray(x, float).reshape(shape), jnp.float64)  # noqa: E731
    k = len(names)
    return Sensors(names=tuple(names), kinds=tuple(kinds), dims=tuple(dims), adr=tuple(adr), index=tuple(index),
                   ref=tuple(ref), placeholder=tuple(ph), rot=f64(rot, (k, 3, 3)), pos=f64(pos, (k, 3)),
                   ref_rot=f64(rrot, (k, 3, 3)), ref_pos=f64(rpos, (k, 3)), cutoff=f64(cut, (k,)),
                   coef=f64(coefs, (k, topo.nv)), site_type=tuple(stype), touch_geoms=tuple(tgeoms),
                   site_size=f64(ssize, (k, 3)), spatial=tuple(spatial))


def _joint(topo, joint_names, name, kind, what):
    """The moving body of the joint ``name``, checked against what the sensor reads."""
    from . import joints
    if name not in joint_names:
        raise ValueError(f"{what}: no joint named {name!r}")
    j = joint_names.index(name)
    jt = topo.jtype[j]
    ball = kind in ("ballquat", "ballangvel")
    if ball and jt != joints.canonical("ball"):
        raise ValueError(f"{what}: joint {name!r} is {jt}; {kind} reads a ball joint")
    if not ball and not (jt in joints.SCALAR_COORDS and topo.nq_body[j] == 1):
        raise ValueError(f"{what}: joint {name!r} is {jt}; {kind} reads a joint with one coordinate "
                         "(hinge or slide)")
    return j
