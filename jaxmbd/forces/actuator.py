"""Actuators as MuJoCo defines them: joint-space force elements whose input
is a control vector ``ctrl`` (nu,), one number per actuator.

Actuator i acts on one joint (its transmission) with a gear vector g (six
numbers, MuJoCo's ``gear``).  Its moment arm m over the joint's DoFs is g[0]
on a hinge or slide joint, g[0:3] on a ball joint (body-frame angular
velocity) and g[0:6] on a free joint (world-frame linear, body-frame angular
velocity).  With ``jointinparent`` the rotational part of g is given in the
parent's frame: the moment is Rᵀ g_rot, R the joint's rotation.  The
actuator's length L is g[0] q on a scalar joint, g[0:3] · r on a ball joint
(r the rotation vector of its quaternion, angle in [-π, π]) and 0 on a free
joint; its velocity is L' = m · v.  Then, per actuator,

    u   = clamp(ctrl, ctrlrange)                 if ctrl_limited
    f   = gain u + bias,    gain = g0 [+ g1 L + g2 L'] (affine gain),
                            bias = 0 or b0 + b1 L + b2 L' (affine bias)
    f   = clamp(f, forcerange)                   if force_limited

A site transmission (MuJoCo's ``site`` without ``refsite``) applies the
wrench g at the site, its force g[0:3] and torque g[3:6] along the site's
axes: with the site's world rotation R and its (6, nv) Jacobian [J_ω; J_p]
(angular velocity; the site's velocity), m = J_pᵀ R g[0:3] + J_ωᵀ R g[3:6]
over every DoF that moves the site, L = 0 (MuJoCo's actuator_length) and
L' = m · v.  A transmission through a spatial tendon of length ℓ(q)
(:mod:`jaxmbd.forces.spatial_tendon`) has L = g[0] ℓ and m = g[0] ∂ℓ/∂q
over every DoF (MuJoCo's ``ten_J``, here by forward mode in the nv tangent
directions).

and the generalized force is Σ_i m_i f_i (MuJoCo's ``qfrc_actuator``),
clamped per DoF to the joint's actuator-force range where one is set
(MuJoCo's ``actuatorfrcrange``, hinge and slide joints).  The shortcuts:

=========  =====================  ============================  ==========
kind       gain (fixed)           bias (affine)                 defaults
=========  =====================  ============================  ==========
motor      1                      none                          -
position   kp                     (0, -kp, -kv)                 kp 1, kv 0
velocity   kv                     (0, 0, -kv)                   kv 1
damper     (0, 0, -kv), affine    none; ctrlrange >= 0 required  kv 0
general    gainprm[:3]            biasprm[:3] (or none)         -
=========  =====================  ============================  ==========

Structure is static (the DoFs a transmission moves, the gain and bias
types, which ranges apply); the numbers (gear, gain, bias, the ranges) are
traced arrays, so ``jax.grad`` and ``vmap`` reach them like any model
parameter.  Activation dynamics (``intvelocity``, ``cylinder``, ``muscle``,
filters), ``refsite``, slider-crank and body transmissions are not
modelled."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import joints, spatial
from ..checks import scalar
from ..kinematics import kinematics_and_axes
from .spatial_tendon import length_and_jacobian

KINDS = ("motor", "position", "velocity", "damper", "general")
GAIN_TYPES = ("fixed", "affine")
BIAS_TYPES = ("none", "affine")


def _numbers(x, n_max, what):
    a = np.atleast_1d(np.asarray(x, np.float64))
    if a.ndim != 1 or not 1 <= a.size <= n_max:
        raise ValueError(f"{what}: expected 1 to {n_max} numbers, got shape {np.shape(x)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: contains NaN or inf: {a}")
    return a


def check_range(rng, what, label):
    """A (lo, hi) range with lo < hi (MuJoCo refuses an empty range), or None."""
    if rng is None:
        return None
    r = _numbers(rng, 2, f"{what}: {label}")
    if r.size != 2:
        raise ValueError(f"{what}: {label} needs 2 numbers (lo, hi), got {r.size}")
    if not r[0] < r[1]:
        raise ValueError(f"{what}: {label} lower bound {r[0]} must be below the upper {r[1]}")
    return r


def actuator_spec(joint, kind="motor", *, name=None, gear=1.0, kp=None, kv=None, dampratio=None, gainprm=None,
                  biasprm=None, gaintype="fixed", biastype="none", ctrlrange=None, forcerange=None,
                  jointinparent=False, active=True, ctrllimited=None, tendon=None, site=None):
    """A checked, name-based description of one actuator (what
    :meth:`jaxmbd.ModelBuilder.add_actuator` stores until the model is built)."""
    what = f"actuator {name!r}" if name else (f"actuator on tendon {tendon!r}" if tendon is not None else
                                              f"actuator at site {site!r}" if site is not None else
                                              f"actuator on joint {joint!r}")
    if site is not None:
        if joint is not None or tendon is not None:
            raise ValueError(f"{what}: a site cannot share its transmission with a joint or a tendon")
        if not isinstance(site, str) or not site:
            raise ValueError(f"{what}: the site is named by a non-empty string, got {site!r}")
        if jointinparent:
            raise ValueError(f"{what}: jointinparent applies to joint transmissions")
    elif tendon is not None:
        if joint is not None:
            raise ValueError(f"{what}: a joint and a tendon cannot both be its transmission")
        if not isinstance(tendon, str) or not tendon:
            raise ValueError(f"{what}: the tendon is named by a non-empty string, got {tendon!r}")
        if jointinparent:
            raise ValueError(f"{what}: jointinparent applies to joint transmissions")
    elif joint is None:   # no transmission: keeps a ctrl slot, exerts no force (an MJCF actuator not modelled)
        active = False
    elif not isinstance(joint, str) or not joint:
        raise ValueError(f"{what}: the joint is named by a non-empty string, got {joint!r}")
    if kind not in KINDS:
        raise ValueError(f"{what}: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    g, gv = np.zeros(6), _numbers(gear, 6, f"{what}: gear")
    g[:gv.size] = gv
    own = dict(kp=kp, kv=kv, dampratio=dampratio, gainprm=gainprm, biasprm=biasprm)
    allowed = {"motor": (), "position": ("kp", "kv", "dampratio"), "velocity": ("kv",), "damper": ("kv",),
               "general": ("gainprm", "biasprm", "dampratio")}[kind]
    extra = sorted(k for k, v in own.items() if v is not None and k not in allowed)
    if extra:
        raise ValueError(f"{what}: {', '.join(extra)} do not apply to a {kind} actuator")
    if kind != "general" and (gaintype != "fixed" or biastype != "none"):
        raise ValueError(f"{what}: gaintype and biastype apply to general actuators only")

    def gain_number(x, default, label, signed=False):   # MuJoCo takes any kp and velocity kv, not a negative kv
        v = default if x is None else scalar(x, f"{what}: {label}")
        if v < 0 and not signed:
            raise ValueError(f"{what}: {label} cannot be negative, got {v}")
        return v
    if dampratio is not None:
        if kv is not None:
            raise ValueError(f"{what}: kv and dampratio cannot both be given")
        dampratio = gain_number(dampratio, 0.0, "dampratio")
        if kind == "general" and biastype != "affine":
            raise ValueError(f"{what}: dampratio needs biastype 'affine' (it sets biasprm[2])")
    gain, bias = np.zeros(3), np.zeros(3)
    if kind == "motor":
        gain[0] = 1.0
    elif kind == "position":
        k, c = gain_number(kp, 1.0, "kp", signed=True), gain_number(kv, 0.0, "kv")
        gain[0], bias[1], bias[2], biastype = k, -k, -c, "affine"
    elif kind == "velocity":
        c = gain_number(kv, 1.0, "kv", signed=True)
        gain[0], bias[2], biastype = c, -c, "affine"
    elif kind == "damper":
        gain[2], gaintype = -gain_number(kv, 0.0, "kv"), "affine"
    else:
        if gaintype not in GAIN_TYPES:
            raise ValueError(f"{what}: gaintype {gaintype!r} is not modelled; expected one of {', '.join(GAIN_TYPES)}")
        if biastype not in BIAS_TYPES:
            raise ValueError(f"{what}: biastype {biastype!r} is not modelled; expected one of {', '.join(BIAS_TYPES)}")
        gp = _numbers(1.0 if gainprm is None else gainprm, 3, f"{what}: gainprm")
        gain[:gp.size] = gp
        if biasprm is not None:
            bp = _numbers(biasprm, 3, f"{what}: biasprm")
            bias[:bp.size] = bp
    if dampratio is not None and gain[0] < 0:
        raise ValueError(f"{what}: dampratio needs a non-negative gain (kp), got {gain[0]}")
    cr = check_range(ctrlrange, what, "ctrlrange")
    ctrllimited = cr is not None if ctrllimited is None else bool(ctrllimited)
    if ctrllimited and cr is None:
        raise ValueError(f"{what}: ctrllimited needs a ctrlrange")
    if kind == "damper" and (cr is None or cr[0] < 0):
        raise ValueError(f"{what}: a damper needs a non-negative ctrlrange (its control scales the damping)")
    fr = check_range(forcerange, what, "forcerange")
    return dict(name=name, joint=joint, tendon=tendon, site=site, kind=kind, what=what, gear=g, gain=gain, bias=bias, dampratio=dampratio,
                gain_affine=gaintype == "affine", bias_affine=biastype == "affine",
                ctrlrange=cr, ctrl_limited=ctrllimited, forcerange=fr, in_parent=bool(jointinparent),
                active=bool(active))


class Actuators(eqx.Module):
    """The model's nu actuators, vectorized (see the module docstring).

    Static, per actuator: ``names``, ``kinds``, ``joints`` (joint names),
    ``dofs`` (six DoF indices, the first ``ndof`` of which the joint moves:
    1 hinge/slide, 3 ball, 6 free, 0 for an actuator that keeps its ctrl
    slot but exerts no force), ``qadr`` (the coordinate of a scalar joint or
    the quaternion of a ball/free joint), ``in_parent``, ``gain_affine``,
    ``bias_affine``, ``ctrl_limited``, ``force_limited``, ``active``; per
    clamped DoF: ``limit_dofs``.  Traced: ``gear`` (nu, 6), ``gain`` (nu, 3),
    ``bias`` (nu, 3), ``ctrlrange`` and ``forcerange`` (nu, 2; zero where not
    limited), ``limit_range`` (k, 2).  Site transmissions: ``site`` (static, per
    actuator: the moving body that carries its site, -1 for none or the
    world) and ``site_rot`` (nu, 3, 3), ``site_pos`` (nu, 3), the site's frame
    on that body.  Spatial-tendon transmissions: ``spatial`` (static, per
    actuator: the tendon's index in the model's
    :class:`jaxmbd.forces.spatial_tendon.SpatialTendons`, -1 for none).  Both
    need the model (``forces(..., model=)``)."""
    names: tuple = eqx.field(static=True)
    kinds: tuple = eqx.field(static=True)
    joints: tuple = eqx.field(static=True)
    dofs: tuple = eqx.field(static=True)
    ndof: tuple = eqx.field(static=True)
    qadr: tuple = eqx.field(static=True)
    in_parent: tuple = eqx.field(static=True)
    gain_affine: tuple = eqx.field(static=True)
    bias_affine: tuple = eqx.field(static=True)
    ctrl_limited: tuple = eqx.field(static=True)
    force_limited: tuple = eqx.field(static=True)
    active: tuple = eqx.field(static=True)
    limit_dofs: tuple = eqx.field(static=True)
    gear: jax.Array
    gain: jax.Array
    bias: jax.Array
    ctrlrange: jax.Array
    forcerange: jax.Array
    limit_range: jax.Array
    tendon: tuple = eqx.field(static=True, default=None)   # per actuator: drives a fixed tendon
    slot_qadr: tuple = eqx.field(static=True, default=None)   # per actuator: its six DoFs' coordinates
    site: tuple = eqx.field(static=True, default=None)        # per actuator: its site's moving body, or -1
    site_rot: jax.Array = None
    site_pos: jax.Array = None
    spatial: tuple = eqx.field(static=True, default=None)     # per actuator: its spatial tendon's index, or -1

    @property
    def nu(self) -> int:
        return len(self.names)

    def moments(self, q):
        """(nu, 6) moment arms over each actuator's ``dofs`` (zero past ``ndof``)."""
        nd = np.asarray(self.ndof)
        m = self.gear * jnp.asarray(np.arange(6)[None, :] < nd[:, None], self.gear.dtype)
        for n, off in ((3, 0), (6, 3)):      # jointinparent: the rotational gear is in the parent's frame
            sel = np.flatnonzero(np.asarray(self.in_parent, bool) & (nd == n))
            if sel.size:
                qa = np.asarray(self.qadr)[sel] + off
                quats = q[qa[:, None] + np.arange(4)]
                R = jax.vmap(spatial.quat_to_rot)(quats)
                m = m.at[sel, off:off + 3].set(jnp.einsum("kji,kj->ki", R, m[sel, off:off + 3]))
        return m

    def lengths(self, q, model=None):
        """(nu,) MuJoCo's actuator_length: g0 q (hinge, slide), g[:3]·rotvec (ball), 0 (free), Σ gᵢ qᵢ
        over a fixed tendon's joints, g0 ℓ on a spatial tendon (needs ``model``), 0 at a site."""
        L = self._joint_lengths(q)
        if self.spatial_sel.size:
            L = L.at[self.spatial_sel].set(self._spatial_moments(model, q)[0])
        return L

    def _joint_lengths(self, q):
        nd, qa = np.asarray(self.ndof), np.maximum(np.asarray(self.qadr), 0)
        td = np.zeros(len(nd), bool) if self.tendon is None else np.asarray(self.tendon, bool)
        L = jnp.where(jnp.asarray((nd == 1) & ~td), self.gear[:, 0] * q[qa], 0.0)
        if td.any():
            sel = np.flatnonzero(td)
            mask = np.arange(6)[None, :] < nd[sel][:, None]
            qi = np.asarray(self.slot_qadr, np.int64)[sel]
            L = L.at[sel].set(jnp.sum(jnp.where(jnp.asarray(mask), self.gear[sel] * q[qi], 0.0), -1))
        ball = np.flatnonzero((nd == 3) & ~td)
        if ball.size:
            quats = q[qa[ball][:, None] + np.arange(4)]
            r = jax.vmap(lambda u: spatial.quat_log(u / jnp.sqrt(jnp.sum(u * u))))(quats)
            L = L.at[ball].set(jnp.sum(self.gear[ball, :3] * r, -1))
        return L

    @property
    def spatial_sel(self):
        """The indices of the actuators on a spatial tendon (static)."""
        return np.zeros(0, np.int64) if self.spatial is None else np.flatnonzero(np.asarray(self.spatial) >= 0)

    @property
    def dense(self):
        """The indices of the actuators whose moment reaches every DoF (sites, spatial tendons), sorted."""
        return np.sort(np.concatenate([self.sites, self.spatial_sel]))

    def _spatial_moments(self, model, q):
        """((k,) lengths, (k, nv) moments) of the actuators on spatial tendons (:attr:`spatial_sel`)."""
        if model is None:
            raise ValueError("actuators on a spatial tendon need the model: forces(q, v, ctrl, model=)")
        L, J = length_and_jacobian(model, q)
        sel = self.spatial_sel
        k = np.asarray(self.spatial, np.int64)[sel]
        g = self.gear[sel, 0]
        return g * L[k], g[:, None] * J[k]

    def dense_moments(self, model, q):
        """(k, nv) the moments of the actuators in :attr:`dense` (in order) over every DoF."""
        return self._dense(model, q)[0]

    def _dense(self, model, q):
        """(the moments of :attr:`dense`, the lengths of :attr:`spatial_sel` or None)."""
        parts, lengths = [], None
        if self.sites.size:
            parts.append((self.sites, self.site_moments(model, q)))
        if self.spatial_sel.size:
            lengths, M = self._spatial_moments(model, q)
            parts.append((self.spatial_sel, M))
        rows = np.concatenate([p[0] for p in parts])
        return jnp.concatenate([p[1] for p in parts])[np.argsort(rows)], lengths

    @property
    def sites(self):
        """The indices of the actuators with a site transmission (static)."""
        return np.zeros(0, np.int64) if self.site is None else np.flatnonzero(np.asarray(self.site) >= 0)

    def site_moments(self, model, q):
        """(k, nv) the moment arms of the k site transmissions (:attr:`sites`, in order) over every
        DoF: J_pᵀ R g[0:3] + J_ωᵀ R g[3:6] at the site's world pose (R, p)."""
        sel = self.sites
        if model is None:
            raise ValueError("actuators with a site transmission need the model: forces(q, v, ctrl, model=)")
        kin, Sw = kinematics_and_axes(model, q)            # Sw: (nv, 6) [ω; v at the world origin]
        b = np.asarray(self.site, np.int64)[sel]
        Rb = kin.rot[b]
        R = Rb @ self.site_rot[sel]
        p = kin.pos[b] + jnp.einsum("kij,kj->ki", Rb, self.site_pos[sel])
        force = jnp.einsum("kij,kj->ki", R, self.gear[sel, :3])
        torque = jnp.einsum("kij,kj->ki", R, self.gear[sel, 3:])
        # the site's velocity is v_O + ω × p, so a DoF's share of the power is S_v·F + S_ω·(p × F + T)
        arm = force @ Sw[:, 3:].T + (spatial.cross(p, force) + torque) @ Sw[:, :3].T
        return arm * jnp.asarray(np.asarray(model.topo.support)[b], arm.dtype)

    def velocities(self, q, v, model=None):
        """(nu,) MuJoCo's actuator_velocity L' = m · v."""
        return self._transmission(q, v, model)[3]

    def forces(self, q, v, ctrl, model=None):
        """((nu,) the scalar actuator forces (MuJoCo's actuator_force), (nu, 6) the moments over each
        actuator's ``dofs``; those of site and spatial-tendon transmissions are zero there:
        :meth:`dense_moments`).  ``model``: needed by site and spatial-tendon transmissions."""
        f, m = self._forces(q, v, ctrl, model)[:2]
        return f, m

    def state(self, nv, q, v, ctrl, model=None):
        """(lengths, velocities, forces, generalized force) from one evaluation of the
        transmissions (what sensordata reads)."""
        f, m, ms, L, Ld = self._forces(q, v, ctrl, model)
        return L, Ld, f, self._generalized(nv, f, m, ms)

    def _transmission(self, q, v, model):
        """(moments over ``dofs``, moments of :attr:`dense` or None, lengths, velocities)."""
        m = self.moments(q)
        L = self._joint_lengths(q)
        Ld = jnp.sum(m * v[np.asarray(self.dofs, np.int64)], -1)
        ms = None
        if self.dense.size:
            ms, spatial_lengths = self._dense(model, q)
            Ld = Ld.at[self.dense].set(ms @ v)
            if spatial_lengths is not None:
                L = L.at[self.spatial_sel].set(spatial_lengths)
        return m, ms, L, Ld

    def _forces(self, q, v, ctrl, model):
        m, ms, L, Ld = self._transmission(q, v, model)
        u = jnp.where(jnp.asarray(self.ctrl_limited), jnp.clip(ctrl, self.ctrlrange[:, 0], self.ctrlrange[:, 1]), ctrl)
        gain = self.gain[:, 0] + jnp.where(jnp.asarray(self.gain_affine), self.gain[:, 1] * L + self.gain[:, 2] * Ld, 0.0)
        bias = jnp.where(jnp.asarray(self.bias_affine), self.bias[:, 0] + self.bias[:, 1] * L + self.bias[:, 2] * Ld,
                         0.0)
        f = gain * u + bias
        f = jnp.where(jnp.asarray(self.force_limited), jnp.clip(f, self.forcerange[:, 0], self.forcerange[:, 1]), f)
        return jnp.where(jnp.asarray(self.active), f, 0.0), m, ms, L, Ld

    def generalized_force(self, nv, q, v, ctrl, model=None):
        """(nv,) Σ_i m_i f_i, clamped on the DoFs with an actuator-force range.  ``model``: needed by
        site and spatial-tendon transmissions."""
        f, m, ms = self._forces(q, v, ctrl, model)[:3]
        return self._generalized(nv, f, m, ms)

    def _generalized(self, nv, f, m, ms):
        tau = jnp.zeros(nv, f.dtype).at[np.asarray(self.dofs, np.int64)].add(m * f[:, None])
        if ms is not None:
            tau = tau + f[self.dense] @ ms
        if self.limit_dofs:
            k = np.asarray(self.limit_dofs, np.int64)
            tau = tau.at[k].set(jnp.clip(tau[k], self.limit_range[:, 0], self.limit_range[:, 1]))
        return tau


def resolve_dampratios(model, specs):
    """The model with the damping of every actuator given a ``dampratio``
    set as MuJoCo's compiler sets it: kv = 2 ζ sqrt(kp m), m = 1 / (rᵀ H⁻¹ r)
    the mass the actuator sees at ``model.q0`` (r its moment arm over the
    DoFs, H the joint-space mass matrix, armature included), kp = gain[0];
    bias[2] = -kv."""
    zeta = np.array([np.nan if s["dampratio"] is None else s["dampratio"] for s in specs])
    sel = np.flatnonzero(np.isfinite(zeta))
    if not sel.size:
        return model
    from ..crba import host_mass_matrix
    act = model.actuators
    Minv = np.linalg.inv(host_mass_matrix(model, model.q0))
    with jax.ensure_compile_time_eval():
        mom = np.asarray(act.moments(model.q0))
        gain = np.asarray(act.gain)
    bias = np.asarray(act.bias).copy()
    dense_rows = {}       # site and spatial-tendon transmissions: moments over every DoF
    if act.dense.size:
        with jax.ensure_compile_time_eval():
            dense_rows = dict(zip(act.dense.tolist(), np.asarray(act.dense_moments(model, model.q0))))
    for i in sel:
        r = np.zeros(model.nv)
        np.add.at(r, np.asarray(act.dofs[i]), mom[i])
        r = r + dense_rows.get(int(i), 0.0)
        mass = 1.0 / (r @ Minv @ r)
        bias[i, 2] = -2.0 * zeta[i] * np.sqrt(gain[i, 0] * mass)
    return eqx.tree_at(lambda m: m.actuators.bias, model, jnp.asarray(bias, jnp.float64))


def bind(specs, limits, joint_bodies, ctx, tendons=None, sites=None, spatial=()):
    """The :class:`Actuators` of the built tree, or None when there are none.

    specs: :func:`actuator_spec` dicts; limits: {joint name: (lo, hi)}
    actuator-force ranges; joint_bodies: {joint name: body name};
    ctx: :class:`jaxmbd.forces.BuildContext`; tendons: {name: (dofs, coefficients)} the fixed
    tendons (:func:`jaxmbd.forces.tendon.resolve`), which a tendon transmission drives through its
    coefficients times the gear's first number (at most 6 joints); sites: {name: (body name, R, p)}
    the frames a site transmission acts at (:meth:`jaxmbd.ModelBuilder.add_site`); spatial: the
    spatial tendons' names, in the order of the model's SpatialTendons."""
    tendons, sites = tendons or {}, sites or {}
    if not specs:
        if limits:
            raise ValueError(f"actuator force ranges on {', '.join(map(repr, limits))}, but the model has no actuators")
        return None

    def joint_of(jname, what):
        if jname not in joint_bodies:
            raise ValueError(f"{what}: joint {jname!r} is not defined")
        first, n, jt = ctx.joint(joint_bodies[jname], what)
        return first, n, jt
    dofs, ndof, qadr, on_tendon = [], [], [], []
    site_body, site_rot, site_pos, on_spatial = [], [], [], []
    for s in specs:
        on_spatial.append(spatial.index(s["tendon"]) if s.get("tendon") in spatial else -1)
        on_tendon.append(s.get("tendon") is not None and on_spatial[-1] < 0)
        sb, sR, sp = -1, np.eye(3), np.zeros(3)
        if s.get("site") is not None:
            if s["site"] not in sites:
                raise ValueError(f"{s['what']}: no site named {s['site']!r}")
            body, R, p = sites[s["site"]]
            sb, Rh, ph = ctx.body(body, f"{s['what']}: site {s['site']!r}")
            sR, sp = Rh @ R, ph + Rh @ p
        site_body.append(sb), site_rot.append(sR), site_pos.append(sp)
        if on_tendon[-1]:
            if s["tendon"] not in tendons:
                raise ValueError(f"{s['what']}: no tendon named {s['tendon']!r}")
            td, c = tendons[s["tendon"]]
            if len(td) > 6:
                raise ValueError(f"{s['what']}: a tendon transmission over more than 6 joints is not modelled")
            s["gear"] = np.concatenate([s["gear"][0] * c, np.zeros(6 - len(td))])
            dofs.append(tuple(td) + (td[0],) * (6 - len(td))), ndof.append(len(td)), qadr.append(-1)
            continue
        if s["joint"] is None:    # a site or spatial-tendon transmission, or none
            dofs.append((0,) * 6), ndof.append(0), qadr.append(-1)
            continue
        first, n, jt = joint_of(s["joint"], s["what"])
        spec = joints.get(jt)
        ball = n == 3 and spec.quaternions == (0,)
        free = n == 6 and spec.floating
        if not ((n == 1 and spec.scalar_coords) or ball or free):
            raise ValueError(f"{s['what']}: a transmission through a {jt} joint is not modelled "
                             "(hinge, slide, ball and free joints are)")
        dofs.append(tuple(first + (k if k < n else 0) for k in range(6)))
        ndof.append(n)
        qadr.append(int(ctx.topo.q_adr[ctx.topo.names.index(joint_bodies[s["joint"]])]))
    on_site = any(b >= 0 for b in site_body)
    names = []
    for i, s in enumerate(specs):
        nm = s["name"] or f"actuator{i}"
        if nm in names:
            raise ValueError(f"duplicate actuator name {nm!r}")
        names.append(nm)
    lim_dofs, lim_rng = [], []
    for jname, rng in limits.items():
        first, n, jt = joint_of(jname, f"actuator force range of joint {jname!r}")
        if n != 1 or not joints.get(jt).scalar_coords:
            raise ValueError(f"actuator force range of joint {jname!r}: only hinge and slide joints "
                             f"(one scalar DoF) take one, not {jt}")
        lim_dofs.append(first)
        lim_rng.append(rng)
    arr = lambda key: jnp.asarray(np.stack([s[key] for s in specs]), jnp.float64)  # noqa: E731
    rng = lambda key: jnp.asarray(np.stack([np.zeros(2) if s[key] is None else s[key] for s in specs]),  # noqa: E731
                                  jnp.float64)
    return Actuators(
        names=tuple(names), kinds=tuple(s["kind"] for s in specs), joints=tuple(s["joint"] for s in specs),
        dofs=tuple(dofs), ndof=tuple(ndof), qadr=tuple(qadr), in_parent=tuple(s["in_parent"] for s in specs),
        gain_affine=tuple(s["gain_affine"] for s in specs), bias_affine=tuple(s["bias_affine"] for s in specs),
        ctrl_limited=tuple(s["ctrl_limited"] for s in specs),
        force_limited=tuple(s["forcerange"] is not None for s in specs),
        active=tuple(s["active"] for s in specs), limit_dofs=tuple(lim_dofs), tendon=tuple(on_tendon),
        slot_qadr=tuple(tuple(int(ctx.topo.dof_qadr[k]) for k in d) for d in dofs),
        gear=arr("gear"), gain=arr("gain"), bias=arr("bias"), ctrlrange=rng("ctrlrange"),
        forcerange=rng("forcerange"), limit_range=jnp.asarray(np.array(lim_rng, float).reshape(-1, 2), jnp.float64),
        site=tuple(site_body) if on_site else None,
        site_rot=jnp.asarray(np.stack(site_rot), jnp.float64) if on_site else None,
        site_pos=jnp.asarray(np.stack(site_pos), jnp.float64) if on_site else None,
        spatial=tuple(on_spatial) if any(k >= 0 for k in on_spatial) else None)
