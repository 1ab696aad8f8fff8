"""MuJoCo references for the contact tests: two geoms at random poses in a
small MJCF scene (a plane in the world body, other geoms on free bodies), and
the contacts MuJoCo reports for each pose."""

import mujoco as mj
import numpy as np


def _geom_xml(name, t, size, margin, extra=""):
    if t == "plane":
        return f'<geom name="{name}" type="plane" size="0 0 1" margin="{margin}"/>'
    if t == "mesh":
        return (f'<body name="{name}b"><freejoint/><geom name="{name}" type="mesh" mesh="{name}m" '
                f'margin="{margin}"/></body>')
    return (f'<body name="{name}b"><freejoint/><geom name="{name}" type="{t}" '
            f'size="{" ".join(map(str, size))}" margin="{margin}"/></body>')


def scene(t1, size1, t2, size2, margin, meshes=None):
    """Two geoms "a" (id 0) and "b" (id 1); meshes: {"a": verts, "b": verts}."""
    asset = ""
    for name, v in (meshes or {}).items():
        asset += f'<mesh name="{name}m" vertex="{" ".join(map(str, np.ravel(v)))}"/>'
    xml = (f'<mujoco><option><flag gravity="disable"/></option><asset>{asset}</asset><worldbody>'
           f'{_geom_xml("a", t1, size1, margin)}{_geom_xml("b", t2, size2, margin)}</worldbody></mujoco>')
    return mj.MjModel.from_xml_string(xml)


def random_quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def random_rotations(rng, n):
    """n random rotation matrices (n, 3, 3) (uniform quaternions, MuJoCo's conversion)."""
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    R = np.zeros((n, 9))
    for i in range(n):
        mj.mju_quat2Mat(R[i], q[i])
    return R.reshape(n, 3, 3)


def random_contacts(m, n, seed, spread, center_spread=None):
    """n random poses of the scene's geoms (the plane, if any, gets a random
    pose too) and MuJoCo's contacts at each (mj_forward).  Returns
    (R1, p1, R2, p2) arrays (n, ...) from geom_xmat/geom_xpos, and per pose a
    list of (geom ids, dist, pos, frame (3, 3), includemargin)."""
    rng = np.random.default_rng(seed)
    d = mj.MjData(m)
    R1, p1, R2, p2, out = [], [], [], [], []
    plane = m.geom_type[0] == mj.mjtGeom.mjGEOM_PLANE
    for _ in range(n):
        if plane:
            m.geom_pos[0] = rng.uniform(-spread, spread, 3)
            m.geom_quat[0] = random_quat(rng)
        qpos = []
        for _ in range(m.nbody - 1):
            qpos += list(rng.uniform(-spread, spread, 3)) + list(random_quat(rng))
        if plane:  # put the geom near the plane
            qpos[:3] = m.geom_pos[0] + rng.uniform(-spread, spread, 3)
        d.qpos[:] = qpos
        mj.mj_forward(m, d)
        R1.append(d.geom_xmat[0].reshape(3, 3).copy()); p1.append(d.geom_xpos[0].copy())
        R2.append(d.geom_xmat[1].reshape(3, 3).copy()); p2.append(d.geom_xpos[1].copy())
        out.append([(tuple(c.geom), c.dist, c.pos.copy(), c.frame.reshape(3, 3).copy(), c.includemargin)
                    for c in d.contact[:d.ncon]])
    return tuple(np.array(x) for x in (R1, p1, R2, p2)), out


def jacobian_tau(el, model, q, v):
    """The generalized force of every candidate pair of the Contact element ``el`` by the
    per-contact Jacobians (an independent route to Contact.evaluate's tau): the bodies' rotation
    and position Jacobians by forward-mode autodiff of the kinematics, each contact's point
    Jacobians from them, and tau = Σ Jvᵀ F + Jrᵀ M over the forces evaluate reports."""
    import jax
    import jax.numpy as jnp
    from jaxmbd.kinematics import forward_kinematics, integrate_q

    def poses(x):
        kin = forward_kinematics(model, integrate_q(model, q, x))
        return kin.rot, kin.pos
    (dR, dP), (R, P) = jax.jacfwd(lambda x: (poses(x), poses(x)), has_aux=True)(jnp.zeros(model.nv, q.dtype))
    A = jnp.einsum("nijk,nlj->nkil", dR, R)                     # R' Rᵀ per direction: skew of ω
    Jw = jnp.moveaxis(0.5 * jnp.stack([A[..., 2, 1] - A[..., 1, 2], A[..., 0, 2] - A[..., 2, 0],
                                       A[..., 1, 0] - A[..., 0, 1]], axis=-1), 1, 2)   # (n, 3, nv)
    out = el.evaluate(model, q, v)
    nv = model.nv
    zeros = jnp.zeros((1, 3, nv), q.dtype)
    JPw, Jww = jnp.concatenate([zeros, dP]), jnp.concatenate([zeros, Jw])
    Pw = jnp.concatenate([jnp.zeros((1, 3), q.dtype), P])
    pos = out["pos"]

    def point_jac(i):
        r = pos - Pw[i]
        return JPw[i] + jnp.moveaxis(jnp.cross(jnp.moveaxis(Jww[i], 1, 2), r[:, None, :]), 1, 2), Jww[i]
    i1, i2 = jnp.asarray(out["body1"]) + 1, jnp.asarray(out["body2"]) + 1
    Jp1, Jr1 = point_jac(i1)
    Jp2, Jr2 = point_jac(i2)
    F = out["normal_force"][:, None] * out["normal"] + out["friction_force"]
    return jnp.einsum("cin,ci->n", Jp2 - Jp1, F) + jnp.einsum("cin,ci->n", Jr2 - Jr1, out["friction_moment"])
