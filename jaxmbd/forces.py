"""Force elements: spring-dampers between points of two bodies, spring-dampers
between two joint coordinates, and constant joint forces.

They belong to the model (``model.forces``), so every dynamics function
includes them through :func:`jaxmbd.passive_force` (and so ``bias_force``,
``inverse_dynamics``, ``forward_dynamics``, ``simulate``) and
:func:`jaxmbd.potential_energy` includes their potential.

* Point-to-point (translational) spring-damper between point ``pa`` of body
  ``a`` and point ``pb`` of body ``b`` (the world when -1; points in body
  coordinates, or world coordinates on the world): with L = |pb - pa| and L'
  its rate, the tension ``k (L - l0) + c L' + f0`` pulls the two points
  together.  The generalized force is ``-(k (L - l0) + c L' + f0) ∂L/∂x``
  (x the tangent coordinates of the tree), obtained by autodiff.  L must stay
  positive.
* Coordinate spring-damper between DoFs i and j (scalar coordinates; i = -1
  for the ground): with d = q_j - q_i and d' its rate, the force
  ``-(k (d - ref) + c d')`` acts on j and its opposite on i (e.g. a torsional
  spring between two planar bodies' angles).
* ``joint_force``: a constant generalized force per DoF (a motor torque).
* Rotational spring-damper between body ``a`` and body ``b`` about a common
  axis: frames A (on a) and B (on b) share their z axis; θ is the z
  component of the rotation vector of R_Aᵀ R_B (the rotation angle of B
  relative to A about z while the axes stay aligned) and the torque
  ``-(k (θ - ref) + c θ')`` acts on b (its opposite on a).  The generalized
  force is ``-(k (θ - ref) + c θ') ∂θ/∂x`` (autodiff).  |θ| < π.
* Tire (a vertical spring-damper against the road, Negrut's vehicle tire):
  the wheel centre ``p`` on body ``b`` at world (x_c, y_c, z_c) deflects the
  tire by δ = r0 - (z_c - h(x_c)) with rate δ' = h'(x_c) x_c' - z_c'; the
  force ``k δ + c δ'`` acts at the wheel centre along world +z (bilateral:
  it may pull; :func:`tire_forces` reports it so lift-off can be flagged).
  Nothing acts horizontally.  The road is flat (z = 0) with half-cylinder
  bumps across it (axis along y, centre x_b, radius R), seen by each tire
  through its enveloped profile, the locus of a disc of radius r0 rolling
  over the cylinder: h(s) = √((r0 + R)² - s²) - r0 for |s| < √(2 r0 R + R²),
  s = x - x_b (continuous, with slope jumps at entry and exit).
  :func:`jaxmbd.potential_energy` counts ½ k δ², the tire's potential on a
  flat road (over a bump the vertical-only force is not conservative).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class ForceElements(eqx.Module):
    """The force elements of a model (see the module docstring).  Static:
    the body pairs and DoF pairs; traced: every number."""
    spring_bodies: tuple = eqx.field(static=True)    # ((a, b), ...) moving-body indices, -1 = world
    spring_pa: jax.Array                              # (ns, 3)
    spring_pb: jax.Array                              # (ns, 3)
    spring_k: jax.Array                               # (ns,)
    spring_c: jax.Array
    spring_l0: jax.Array
    spring_f0: jax.Array
    coupling_dofs: tuple = eqx.field(static=True)    # ((i, j), ...) DoF indices, i = -1 for the ground
    coupling_k: jax.Array                             # (nc,)
    coupling_c: jax.Array
    coupling_ref: jax.Array
    joint_force: jax.Array                            # (nv,)
    rot_bodies: tuple = eqx.field(static=True, default=())   # ((a, b), ...) rotational spring-dampers
    rot_Ra: jax.Array = None                          # (nr, 3, 3) frame A in body a (world frame on the world)
    rot_Rb: jax.Array = None                          # (nr, 3, 3)
    rot_k: jax.Array = None                           # (nr,)
    rot_c: jax.Array = None
    rot_ref: jax.Array = None
    tire_bodies: tuple = eqx.field(static=True, default=())  # (b, ...) the wheel bodies
    tire_p: jax.Array = None                          # (nt, 3) wheel centres in body coordinates
    tire_k: jax.Array = None                          # (nt,)
    tire_c: jax.Array = None
    tire_r0: jax.Array = None                         # (nt,) unloaded radii
    bump_x: jax.Array = None                          # (nb,) bump centre lines (world x)
    bump_r: jax.Array = None                          # (nb,) bump radii

    @property
    def n_springs(self):
        return len(self.spring_bodies)

    @property
    def n_couplings(self):
        return len(self.coupling_dofs)

    @property
    def n_rotational(self):
        return len(self.rot_bodies)

    @property
    def n_tires(self):
        return len(self.tire_bodies)


def road_height(x, r0, bump_x, bump_r):
    """(h, h') of the enveloped road under a wheel of radius r0 at world x
    (broadcasts over x and r0; sums the bumps, which must not overlap)."""
    x, r0 = jnp.broadcast_arrays(jnp.asarray(x), jnp.asarray(r0, jnp.result_type(x, float)))
    x, r0 = x[..., None], r0[..., None]
    bump_x = jnp.reshape(bump_x, (1,) * (x.ndim - 1) + (-1,))
    bump_r = jnp.reshape(bump_r, (1,) * (x.ndim - 1) + (-1,))
    s = x - bump_x
    big = (r0 + bump_r) ** 2
    on = s * s < 2.0 * r0 * bump_r + bump_r * bump_r
    root = jnp.sqrt(jnp.where(on, big - s * s, 1.0))        # safe where off the bump (no NaN gradients)
    h = jnp.where(on, root - r0, 0.0)
    dh = jnp.where(on, -s / root, 0.0)
    return jnp.sum(h, axis=-1), jnp.sum(dh, axis=-1)


def spring_lengths(model, q):
    """(ns,) current lengths of the point-to-point springs."""
    return _measures(model, q, model.forces)[0]


def _coupling_index(model):
    fe = model.forces
    qadr = model.topo.dof_qadr
    i = np.array([p[0] for p in fe.coupling_dofs], np.int64)
    j = np.array([p[1] for p in fe.coupling_dofs], np.int64)
    return i, j, np.where(i >= 0, qadr[np.maximum(i, 0)], -1), qadr[j]


def _measures(model, q, fe):
    """Spring lengths (ns,), rotational angles (nr,), wheel centres (nt, 3) at q."""
    from .constraints import _rotation_vector
    from .kinematics import forward_kinematics
    kin = forward_kinematics(model, q)
    out = []

    def pose(bodies):
        """Rotations and positions of the bodies (-1: the world, identity)."""
        b = jnp.asarray(np.maximum(np.asarray(bodies, np.int64), 0))
        w = jnp.asarray(np.asarray(bodies) < 0)
        R = jnp.where(w[:, None, None], jnp.eye(3, dtype=kin.rot.dtype), kin.rot[b])
        return R, jnp.where(w[:, None], 0.0, kin.pos[b])

    def world(bodies, local):
        R, p = pose(bodies)
        return p + jnp.einsum("kij,kj->ki", R, local)

    def rot(bodies, Rl):
        return jnp.einsum("kij,kjl->kil", pose(bodies)[0], Rl)
    if fe.n_springs:
        a = [p[0] for p in fe.spring_bodies]
        b = [p[1] for p in fe.spring_bodies]
        d = world(b, fe.spring_pb) - world(a, fe.spring_pa)
        out.append(jnp.sqrt(jnp.sum(d * d, axis=-1)))
    else:
        out.append(jnp.zeros(0, kin.pos.dtype))
    if fe.n_rotational:
        RA = rot([p[0] for p in fe.rot_bodies], fe.rot_Ra)
        RB = rot([p[1] for p in fe.rot_bodies], fe.rot_Rb)
        rel = jnp.einsum("kji,kjl->kil", RA, RB)
        out.append(jax.vmap(_rotation_vector)(rel)[:, 2])
    else:
        out.append(jnp.zeros(0, kin.pos.dtype))
    if fe.n_tires:
        out.append(world(list(fe.tire_bodies), fe.tire_p))
    else:
        out.append(jnp.zeros((0, 3), kin.pos.dtype))
    return tuple(out)


def tire_forces(model, q, v):
    """(nt,) vertical tire forces k δ + c δ' (negative: the tire would lift off)."""
    from .kinematics import integrate_q
    fe = model.forces
    x0 = jnp.zeros(model.nv, jnp.result_type(q, v))
    pc, dpc = jax.jvp(lambda x: _measures(model, integrate_q(model, q, x), fe)[2], (x0,), (v,))
    return _tire_law(fe, pc, dpc)


def _tire_law(fe, pc, dpc):
    h, dh = road_height(pc[:, 0], fe.tire_r0, fe.bump_x, fe.bump_r)
    delta = fe.tire_r0 - (pc[:, 2] - h)
    ddelta = dh * dpc[:, 0] - dpc[:, 2]
    return fe.tire_k * delta + fe.tire_c * ddelta


def element_force(model, q, v):
    """(nv,) generalized force of every force element at (q, v)."""
    from .kinematics import integrate_q
    fe = model.forces
    tau = jnp.broadcast_to(fe.joint_force, (model.nv,)).astype(jnp.result_type(q, v))
    if fe.n_springs or fe.n_rotational or fe.n_tires:
        x0 = jnp.zeros(model.nv, tau.dtype)
        grads, vals = jax.jacfwd(lambda x: (_measures(model, integrate_q(model, q, x), fe),) * 2,
                                 has_aux=True)(x0)
        (L, th, pc), (gL, gth, gpc) = vals, grads        # ∂/∂x: (ns, nv), (nr, nv), (nt, 3, nv)
        if fe.n_springs:
            tension = fe.spring_k * (L - fe.spring_l0) + fe.spring_c * (gL @ v) + fe.spring_f0
            tau = tau - tension @ gL
        if fe.n_rotational:
            torque = fe.rot_k * (th - fe.rot_ref) + fe.rot_c * (gth @ v)
            tau = tau - torque @ gth
        if fe.n_tires:
            fz = _tire_law(fe, pc, gpc @ v)
            tau = tau + fz @ gpc[:, 2, :]
    if fe.n_couplings:
        i, j, qi, qj = _coupling_index(model)
        qi_val = jnp.where(jnp.asarray(i >= 0), q[np.maximum(qi, 0)], 0.0)
        vi_val = jnp.where(jnp.asarray(i >= 0), v[np.maximum(i, 0)], 0.0)
        f = -(fe.coupling_k * (q[qj] - qi_val - fe.coupling_ref) + fe.coupling_c * (v[j] - vi_val))
        tau = tau.at[j].add(f)
        tau = tau.at[np.maximum(i, 0)].add(jnp.where(jnp.asarray(i >= 0), -f, 0.0))
    return tau


def element_energy(model, q):
    """Potential of the elastic force elements (and of the constant joint
    forces where the DoF has a scalar coordinate): ½ k (L - l0)² + f0 L per
    spring, ½ k (d - ref)² per coupling, ½ k (θ - ref)² per rotational
    spring, ½ k δ² per tire (exact on a flat road), -f q per constant joint
    force."""
    fe = model.forces
    U = jnp.zeros((), q.dtype)
    if fe.n_springs or fe.n_rotational or fe.n_tires:
        L, th, pc = _measures(model, q, fe)      # one kinematics pass for every element
        if fe.n_springs:
            U = U + jnp.sum(0.5 * fe.spring_k * (L - fe.spring_l0) ** 2 + fe.spring_f0 * L)
        if fe.n_rotational:
            U = U + jnp.sum(0.5 * fe.rot_k * (th - fe.rot_ref) ** 2)
        if fe.n_tires:
            h, _ = road_height(pc[:, 0], fe.tire_r0, fe.bump_x, fe.bump_r)
            U = U + jnp.sum(0.5 * fe.tire_k * (fe.tire_r0 - (pc[:, 2] - h)) ** 2)
    if fe.n_couplings:
        i, j, qi, qj = _coupling_index(model)
        qi_val = jnp.where(jnp.asarray(i >= 0), q[np.maximum(qi, 0)], 0.0)
        U = U + jnp.sum(0.5 * fe.coupling_k * (q[qj] - qi_val - fe.coupling_ref) ** 2)
    sel = model.topo.dof_qadr >= 0
    if sel.any():
        U = U - jnp.sum(fe.joint_force[sel] * q[model.topo.dof_qadr[sel]])
    return U


def has_forces(model) -> bool:
    return getattr(model, "forces", None) is not None
