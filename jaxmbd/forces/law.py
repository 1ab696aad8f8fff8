"""The smooth compliant force law shared by contacts and joint limits, and
its mapping from MuJoCo's ``solref``/``solimp``.

Normal force (a Hunt-Crossley spring-damper that never pulls).  With the
penetration δ (metres or radians; positive when the surfaces overlap) and
its rate δ̇:

    f_n = k · ramp_w(δ)^p · ramp_ε(1 + c δ̇)

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
* ``ramp_ε`` (the same cubic with ε = 1e-3) keeps the damping factor from
  going negative: the force never pulls, and the law stays C¹.  It changes
  the force only while 1 + c δ̇ < ε (surfaces separating faster than 1/c).
  The damping part always removes energy (its power is ≤ 0).

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

MuJoCo's ``solref``/``solimp`` (:func:`from_mujoco`).  MuJoCo's soft
constraint makes the violation r of a constraint row obey
r̈ + d (b ṙ + k r) = (1 - d) a₀ (a₀: the unconstrained acceleration), with
b = 2/(dmax τ), k = d/(dmax τ ζ)² for ``solref = (τ, ζ)`` (direct form
``(-K, -B)``: b = B/dmax, k = K d/dmax²) and the impedance d rising from
dmin to dmax over solimp's width.  At full impedance (d = dmax) the row is
a spring-damper per unit effective mass with K = 1/(τ ζ)² and B = 2/τ
(direct form: K, B).  The law keeps that time constant and damping:
p = 1, k = m K, c = B / g (so the damping at the penetration that carries
the weight under the gravity g, k δ c = m g c, is MuJoCo's m B), and the
onset width w = solimp's width.  The effective mass m is fixed when the
model is built (contacts: the body's mass, or the reduced mass of two
bodies; joint limits: 1/(H⁻¹)_ii at the reference configuration, MuJoCo's
A_ii there).  Differences from MuJoCo's convex soft-constraint model: the
force is an explicit function of the state, not the solution of MuJoCo's
optimization; MuJoCo's constraint also cancels the fraction d of the
unconstrained acceleration (the (1 - d) a₀ term), so a body at rest sinks
deeper here (g/K instead of MuJoCo's (1 - d) g/(d k)); friction is smooth
(creep below v_s) where MuJoCo's is a cone constraint; MuJoCo's impedance
curve (dmin, midpoint, power) has no counterpart beyond the onset width."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

EPS_DAMPING = 1e-3     # the width of the damping factor's ramp (dimensionless)
G_DEFAULT = 9.81       # the gravity used by the MuJoCo mapping when the model has none


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


def normal_force(delta, delta_dot, k, p, c, w):
    """f_n ≥ 0 of the Hunt-Crossley law (module docstring); broadcasts."""
    return k * _pow(ramp(delta, w), p) * ramp(1.0 + c * delta_dot, EPS_DAMPING)


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
    den = jnp.sqrt(jnp.sum(w * w, axis=-1, keepdims=True) + (mu0 * v_smooth[..., None]) ** 2 + 1e-300)
    return -fn[..., None] * mu * w / den


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


def from_mujoco(solref, solimp, m_eff, gravity=G_DEFAULT):
    """(k, p, c, w) of the law for MuJoCo's ``solref`` (2) and ``solimp`` (5) and an effective mass
    (module docstring): MuJoCo's time constant and damping at full impedance (the damping at
    the penetration that carries the weight under ``gravity``), solimp's width as the onset."""
    tc, dr = float(solref[0]), float(solref[1])
    width = float(solimp[2])
    if tc > 0:
        K, B = (1.0 / (tc * dr) ** 2 if dr > 0 else 0.0), 2.0 / tc
    else:
        K, B = -tc, -dr
    g = float(gravity) if gravity > 0 else G_DEFAULT
    k = m_eff * K
    c = B / g
    return k, 1.0, c, width
