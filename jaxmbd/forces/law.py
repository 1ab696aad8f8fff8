"""The smooth compliant force law shared by contacts and joint limits, and
its mapping from MuJoCo's ``solref``/``solimp``.

Normal force (a Hunt-Crossley spring-damper, with an optional viscous
part, that never pulls).  With the penetration δ (metres or radians;
positive when the surfaces overlap) and its rate δ̇, ρ = ramp_w(δ):

    f_n = k ρ^p · ramp_ε(1 + c δ̇ + b σ δ̇ / (k ρ^p)),  σ = ρ / max(δ, w)

i.e. k ρ^p (1 + c δ̇) + b σ δ̇ wherever that is positive, and 0 where it
would pull:

* ``k`` (stiffness, N/m^p or N m/rad^p), ``p`` (exponent: 1 linear, 1.5
  Hertz-like), ``c`` (damping, s/m or s/rad): Hunt and Crossley's form,
  whose damping grows with the penetration, so the force starts from zero
  at contact onset and the coefficient of restitution of a free impact at
  speed v_in solves φ(v_out) = φ(v_in) with φ(u) = u - ln(1 + c u)/c
  (:func:`restitution`, exact for p = 1 and any p: the phase-plane
  integral does not depend on p).
* ``ramp_w`` smooths the onset over the width ``w``: 0 for δ ≤ 0, the C¹
  cubic 2δ²/w - δ³/w² on (0, w), δ itself from w on (w = 0: max(δ, 0)).
  Past the width the law is exactly k δ^p (1 + c δ̇), so a body at rest
  sinks δ = (m g / k)^(1/p) when that exceeds w.
* ``b`` (N s/m or N m s/rad): viscous damping, constant past the onset
  width (σ = 1) and rising with the ramp inside it (σ → 0 at contact), so
  the force still starts from zero.  Unlike Hunt-Crossley damping it does
  not grow with the penetration, so a deep penetration (a joint that starts
  outside its range) recovers at the spring's own pace instead of at most
  at 1/c; the MuJoCo mapping uses it.
* ``ramp_ε`` (the same cubic with ε = 1e-3) keeps the damping factor from
  going negative: the force never pulls, and the law stays C¹.  It changes
  the force only while the damping would cancel the spring.  The damping
  part always removes energy (its power is ≤ 0).

Friction (regularized Coulomb, elliptic cone).  With u the slip rates of
the contact (2 sliding rates, m/s; with ``condim`` 4 a torsional rate,
rad/s; with 6 two rolling rates) and μ their coefficients (sliding:
dimensionless; torsional and rolling: metres, as in MuJoCo), w_i = μ_i u_i
and

    f_i = -f_n μ_i w_i / sqrt(|w|² + (μ_0 v_s)²)

(v_s: the smoothing velocity, m/s).  So Σ(f_i/μ_i)² ≤ f_n² (inside the
elliptic cone), |f| → μ f_n once the slip is much faster than v_s, and a
body on an incline below its friction angle creeps at most at
v_s tanθ / sqrt(μ² - tan²θ) (:func:`creep_speed`).

A penalty law at MuJoCo's resting depth (:func:`from_mujoco`).  Contacts,
limits and friction loss given by ``solref``/``solimp`` (the MJCF and URDF
loaders, ``ModelBuilder.add_geom``'s defaults) follow MuJoCo's soft
constraint itself (:mod:`jaxmbd.forces.soft`), whose force is set by a
reference acceleration and the row's effective mass.  :func:`from_mujoco`
maps solref/solimp to this law's parameters for users who want a penalty
law instead: at full impedance (d = dmax) MuJoCo's row at rest is a spring
f = K d² |r| / ((1 - d) Â) with K = 1/(dmax τ ζ)² (direct form: K = k/dmax²)
and Â the row's approximate inverse effective mass, so p = 1, k = m K' /
(1 - dmax) with K' = 1/(τ ζ)², m = 1/Â, viscous b = m B' / sqrt(1 - dmax)
with B' = 2/τ (MuJoCo's damping ratio), c = 0 and the onset width solimp's
width.  It keeps MuJoCo's resting penetration but not its dynamics: its
force grows with the depth (a keyframe's centimetre of penetration gives
about ten times MuJoCo's forces) and its time constant is τ sqrt(1 - dmax)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

EPS_DAMPING = 1e-3     # the width of the damping factor's ramp (dimensionless)


def ramp(x, w):
    """0 for x ≤ 0, the C¹ cubic 2x²/w - x³/w² on (0, w), x from w on (w = 0: max(x, 0))."""
    x = jnp.asarray(x)
    w = jnp.asarray(w, x.dtype)
    wsafe = jnp.where(w > 0, w, 1.0)
    cubic = x * x * (2.0 * wsafe - x) / (wsafe * wsafe)
    inner = jnp.where(x < w, cubic, x)
    return jnp.where(x <= 0, 0.0, inner)


def _pow(x, p):
    """x**p for x ≥ 0 with a finite derivative at 0 for p ≥ 1 (x = 0 gives 0)."""
    xs = jnp.where(x > 0, x, 1.0)
    return jnp.where(x > 0, xs ** p, 0.0)


def normal_force(delta, delta_dot, k, p, c, w, b=0.0):
    """f_n ≥ 0 (module docstring): k ramp_w(δ)^p ramp_ε(1 + (c + b σ / (k ramp_w(δ)^p)) δ̇) with
    σ = ramp_w(δ)/max(δ, w): Hunt-Crossley damping c (s/m) plus a viscous damping b (N s/m) that
    rises with the onset ramp and is constant past it; broadcasts."""
    rho = ramp(delta, w)
    rp = _pow(rho, p)
    pos = rho > 0
    den = k * jnp.where(pos, _pow(jnp.where(pos, rho, 1.0), jnp.asarray(p) - 1.0), 1.0) \
        * jnp.maximum(jnp.maximum(delta, w), 1e-300)
    visc = jnp.where(pos, b / jnp.where(pos, den, 1.0), 0.0)
    return k * rp * ramp(1.0 + (c + visc) * delta_dot, EPS_DAMPING)


_GL_T, _GL_W = np.polynomial.legendre.leggauss(24)   # Gauss-Legendre nodes and weights on [-1, 1]


def normal_potential(delta, k, p, w):
    """∫₀^δ k ramp_w(s)^p ds, the elastic energy of the law (any p ≥ 1, any w ≥ 0): the power law's
    closed form past the onset width, 24-point Gauss-Legendre on the cubic ramp inside it."""
    d = jnp.maximum(jnp.asarray(delta), 0.0)
    w = jnp.asarray(w, d.dtype)
    a = jnp.minimum(d, w)                                   # the part of (0, δ) inside the ramp
    p = jnp.broadcast_to(jnp.asarray(p, d.dtype), a.shape)
    shape = a.shape + (len(_GL_T),)
    t = jnp.broadcast_to(jnp.asarray(_GL_T, d.dtype), shape)
    wt = jnp.broadcast_to(jnp.asarray(_GL_W, d.dtype), shape)
    x = 0.5 * jnp.broadcast_to(a[..., None], shape) * (1.0 + t)
    ramped = _pow(ramp(x, jnp.broadcast_to(w[..., None], shape)), jnp.broadcast_to(p[..., None], shape))
    inner = 0.5 * a * jnp.sum(wt * ramped, axis=-1)
    past = (_pow(d, p + 1.0) - _pow(jnp.minimum(w, d), p + 1.0)) / (p + 1.0)
    return k * (inner + past)


def friction_force(fn, slip, mu, v_smooth):
    """The regularized elliptic-cone friction (module docstring): slip (..., m), mu (..., m), fn (...)."""
    w = mu * slip
    mu0 = mu[..., :1]
    u = jnp.sum(w * w, axis=-1, keepdims=True) + (mu0 * v_smooth[..., None]) ** 2
    # u = 0 only without friction (mu = 0, or no smoothing and no slip): the force is 0 there, and the
    # masked branch sees u = 1, so that no derivative of any order is 0 * inf (frictionless pairs,
    # condim 1, are differentiated through by the Rosenbrock methods' Jacobians)
    pos = u > 0
    den = jnp.sqrt(jnp.where(pos, u, 1.0))
    return jnp.where(pos, -fn[..., None] * mu * w / den, 0.0)


def restitution(v_in, c):
    """The coefficient of restitution of a free Hunt-Crossley impact at speed v_in > 0 with damping c
    (any k, p; w = 0): |v_out| / v_in with φ(v_out) = φ(v_in), φ(u) = u - ln(1 + c u)/c, -1/c < v_out < 0.
    Bisection in float64 (a reference for the tests and the docs, not traced)."""
    v_in, c = float(v_in), float(c)
    if c == 0:
        return 1.0

    def phi(u):
        return u - math.log1p(c * u) / c
    target = phi(v_in)
    lo, hi = -1.0 / c * (1 - 1e-16), 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if phi(mid) > target:
            lo = mid
        else:
            hi = mid
    return -0.5 * (lo + hi) / v_in


def creep_speed(theta, mu, v_smooth):
    """The speed at which regularized friction holds a block on an incline of angle theta < atan(mu)."""
    t = math.tan(theta)
    return v_smooth * t / math.sqrt(mu * mu - t * t)


def from_mujoco(solref, solimp, m_eff):
    """(k, p, c, w, b) of the law for MuJoCo's ``solref`` (2) and ``solimp`` (5) and an effective
    mass (module docstring): MuJoCo's resting penetration and damping ratio at full impedance (dmax =
    solimp[1], MuJoCo clips it to [1e-4, 0.9999]), solimp's width as the onset, viscous damping."""
    tc, dr = float(solref[0]), float(solref[1])
    dmax = float(np.clip(solimp[1], 1e-4, 0.9999))
    width = float(solimp[2])
    if tc > 0:
        K, B = (1.0 / (tc * dr) ** 2 if dr > 0 else 0.0), 2.0 / tc
    else:
        K, B = -tc, -dr
    k = m_eff * K / (1.0 - dmax)
    b = m_eff * B / math.sqrt(1.0 - dmax)
    return k, 1.0, 0.0, width, b
