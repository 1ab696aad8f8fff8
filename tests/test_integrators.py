"""Integrators: coefficients, L-stability, empirical orders, Jacobians, the
thesis's stiff test problems against independent references, batching,
failure statuses and gradients."""

from fractions import Fraction as Fr

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import integrators as I
from jaxmbd import models, simulate
from jaxmbd.integrators import rosenbrock as ros
from jaxmbd.integrators import sdirk
from jaxmbd.integrators.base import Attempt
from jaxmbd.odes import AbstractODE, ChartODE, right_jacobian, right_jacobian_inv
from jaxmbd import Start, Inputs, Steps, Save, Solver

# --- coefficients ------------------------------------------------------------------


def test_rosenbrock_order_conditions_and_derived_coefficients():
    E, A, b, bh = ros._E, ros._A, ros._B, ros._BHAT
    e = E[0, 0]
    beta = A + E - np.diag(np.diag(E))          # β_ij = a_ij + e_ij (j < i)
    bp = np.tril(beta, -1).sum(1)                # β'_i
    a = A.sum(1)
    conds = [b.sum() - 1, b @ bp - (0.5 - e), b @ a ** 2 - 1 / 3, b @ np.tril(beta, -1) @ bp - (1 / 6 - e + e * e),
             b @ a ** 3 - 0.25, b @ (a * (A @ bp)) - (1 / 8 - e / 3), b @ np.tril(beta, -1) @ a ** 2 - (1 / 12 - e / 3),
             b[3] * beta[3, 2] * beta[2, 1] * bp[1] - (1 / 24 - e / 2 + 1.5 * e * e - e ** 3)]
    np.testing.assert_allclose(conds, 0.0, atol=2e-15)
    # embedded order 3 (conditions 1-4 with b̂), and (4.65)-(4.68)
    np.testing.assert_allclose([bh.sum() - 1, bh @ bp - (0.5 - e), bh @ a ** 2 - 1 / 3,
                                bh @ np.tril(beta, -1) @ bp - (1 / 6 - e + e * e)], 0.0, atol=2e-15)
    assert A[3, 2] == 0 and np.allclose(A[3], A[2]) and b[2] == 0 and A[1, 0] == 2 * e
    np.testing.assert_allclose(a[2], (0.2 - a[1] / 4) / (0.25 - a[1] / 3), rtol=1e-14)
    # derived set against Negrut's thesis (4.72)-(4.81), with its misprints corrected (w21 = 2.0, printed
    # 0.2E0; d41 printed with an extra digit)
    k = ros.derived()
    np.testing.assert_allclose(k["W"][1, 0], 2.0, rtol=1e-14)
    np.testing.assert_allclose([k["W"][2, 0], k["W"][2, 1]], [1.86794814949823713234476, 0.234445568517238850023220],
                               rtol=1e-13)
    np.testing.assert_allclose(k["C"][1:, 0], [-7.13764994334997983036926, 2.58092366650965771448805,
                                               -2.13711526650661911680637], rtol=1e-13)
    np.testing.assert_allclose(k["D"][3, :3], [0.00376509435555616579897538, -0.109762486758103255675398,
                                               -0.228031035973133829477744], rtol=1e-11)
    np.testing.assert_allclose(k["T"][2, 0], 0.789509162815638629626980, rtol=1e-13)
    np.testing.assert_allclose(k["s"], [2.25556622860456524372884, 0.287055063194157607662630,
                                        0.435311963379983213402707, 1.09350765640324780321482], rtol=1e-13)
    np.testing.assert_allclose(k["ev"], [0.187167068076981509470170, 0.048373711126624809706137,
                                         0.071938617944591505140960, 0.726950528467092658905657], rtol=1e-12)
    np.testing.assert_allclose(k["ep"], [0.15784684756137586944780, -0.027040406278447759351824,
                                         -0.124559686414702049774897, 0.416408937531437856529265], rtol=1e-12)
    np.testing.assert_allclose(k["p"][[0, 1, 3]], [1.59275081940958534207490, 0.195938266310250609693329,
                                                   0.626378747320742177841171], rtol=1e-13)


def test_sdirk_tableau_is_exact():
    A, b, bh = sdirk.A_FR, sdirk.B_FR, sdirk.BHAT_FR
    c = [sum(r) for r in A]
    Ac = [sum(A[i][j] * c[j] for j in range(5)) for i in range(5)]
    AAc = [sum(A[i][j] * Ac[j] for j in range(5)) for i in range(5)]
    dot = lambda x, y: sum(p * q for p, q in zip(x, y))
    order4 = [dot(b, [1] * 5), dot(b, c), dot(b, [x * x for x in c]), dot(b, Ac), dot(b, [x ** 3 for x in c]),
              dot(b, [x * y for x, y in zip(c, Ac)]), dot(b, [sum(A[i][j] * c[j] ** 2 for j in range(5))
                                                              for i in range(5)]), dot(b, AAc)]
    assert order4 == [1, Fr(1, 2), Fr(1, 3), Fr(1, 6), Fr(1, 4), Fr(1, 8), Fr(1, 12), Fr(1, 24)]
    assert [dot(bh, [1] * 5), dot(bh, c), dot(bh, [x * x for x in c]), dot(bh, Ac)] == [1, Fr(1, 2), Fr(1, 3), Fr(1, 6)]
    assert dot(bh, [x ** 3 for x in c]) != Fr(1, 4)
    # d = b A^-1 = e5 (stiffly accurate): R(inf) = 1 - b A^-1 1 = 0
    assert [dot(b, [sdirk.AINV_FR[i][j] for i in range(5)]) for j in range(5)] == [0, 0, 0, 0, 1]
    assert sdirk.ALPHA_FR[1][0] == Fr(15, 8)
    np.testing.assert_allclose(sdirk.ALPHA[2, :2], [1577061 / 922880, -23427 / 115360], rtol=1e-15)
    np.testing.assert_allclose(sdirk.DBAR, [-0.68040000504753, 1.55896194452522, -13.5589300312891,
                                            15.4852257695852, 1.0], rtol=1e-12)
    np.testing.assert_allclose(sdirk.C, [4 / 15, 23 / 30, 17 / 30, 707 / 1931, 1.0], rtol=1e-14)


class _Damped(AbstractODE):
    """Stub chart ODE y'' = λ y' (a velocity mode with eigenvalue λ)."""

    def __init__(self, lam):
        self.lam = lam
        self.time_dependent = False

    def g(self, t, y, yd):
        return self.lam * yd

    def g_and_jac(self, t, y, yd, cotangent_rank=None):
        n = y.shape[0]
        return self.g(t, y, yd), jnp.zeros((n, n)), self.lam * jnp.eye(n)

    def g_t(self, t, y, yd):
        return jnp.zeros_like(y)


@pytest.mark.parametrize("method, limit", [(I.RosenbrockNystrom4(), 0.0), (I.SDIRK4(), 0.0),
                                           (I.Trapezoidal(), -1.0)])
def test_stiff_limit_of_the_amplification(method, limit):
    """y' = λ y with h λ -> -inf: y1/y0 -> 0 (L-stable) or -1 (trapezoidal)."""
    v0 = jnp.ones(1)
    sc = (jnp.ones(1), jnp.ones(1))
    for hl in (-1e6, -1e9):
        att = method.attempt(_Damped(hl), 0.0, v0, 1.0, sc)
        assert isinstance(att, Attempt) and bool(att.ok)
        np.testing.assert_allclose(att.yd[0], limit, atol=1e-5 if hl == -1e6 else 1e-7)


def test_rosenbrock_raw_estimate_of_a_stiff_mode_and_the_filter():
    """Digest T4: the raw estimate y1 - ŷ1 tends to a non-zero constant,
    (R - R̂)(inf) ≈ +0.367 times y0; the Shampine filter sends it to 0."""
    v0, sc = jnp.ones(1), (jnp.ones(1), jnp.ones(1))
    raw = I.RosenbrockNystrom4(filtered=False).attempt(_Damped(-1e9), 0.0, v0, 1.0, sc)
    filt = I.RosenbrockNystrom4().attempt(_Damped(-1e9), 0.0, v0, 1.0, sc)
    np.testing.assert_allclose(raw.err_yd[0], 0.367, atol=2e-3)
    assert abs(float(filt.err_yd[0])) < 1e-8


# --- the chart ---------------------------------------------------------------------------


def test_so3_right_jacobian():
    rng = np.random.default_rng(0)
    for phi in [rng.normal(size=3), 1e-6 * rng.normal(size=3), np.zeros(3)]:
        phi = jnp.asarray(phi)
        np.testing.assert_allclose(right_jacobian(phi) @ right_jacobian_inv(phi), np.eye(3), atol=1e-14)
        # w = Jr(φ) φ' for R(φ) = exp([φ]x): compare with the rotation-matrix derivative
        dphi = jnp.asarray(rng.normal(size=3))
        from jaxmbd.spatial import skew
        expm = lambda p: jax.scipy.linalg.expm(skew(p))
        R, dR = jax.jvp(expm, (phi,), (dphi,))
        W = R.T @ dR
        w = jnp.array([W[2, 1], W[0, 2], W[1, 0]])
        np.testing.assert_allclose(right_jacobian(phi) @ dphi, w, atol=1e-12)


def _ball_pendulum():
    b = jaxmbd.ModelBuilder(gravity=(0, 0, -9.81))
    b.add_body("ball", "world", "spherical", mass=1.0, com=(0.3, 0.1, -0.5), inertia=(0.02, 0.03, 0.04))
    b.add_body("arm", "ball", "revolute", axis=(0, 1, 0), pos=(0.2, 0.0, -0.6), mass=0.5, com=(0.0, 0.0, -0.3),
               inertia=(0.01, 0.01, 0.005), damping=0.1)
    q0 = np.array([np.cos(0.3), np.sin(0.3) * 0.6, np.sin(0.3) * 0.8, 0.0, 0.4])
    return b.set_initial_state(q0, [0.5, -1.0, 2.0, 1.5]).build()


@pytest.mark.long
def test_chart_jacobians_match_finite_differences():
    m = _ball_pendulum()
    ode = ChartODE(m, m.q0)
    g, gj = jax.jit(ode.g), jax.jit(ode.g_and_jac)
    rng = np.random.default_rng(1)
    for y in (jnp.zeros(m.nv), jnp.asarray(0.3 * rng.normal(size=m.nv))):
        yd = jnp.asarray(rng.normal(size=m.nv))
        g0, J1, J2 = gj(0.0, y, yd)
        eps, E = 1e-6, np.eye(m.nv)
        fd1 = np.stack([(g(0.0, y + eps * E[j], yd) - g(0.0, y - eps * E[j], yd)) / (2 * eps)
                        for j in range(m.nv)], 1)
        fd2 = np.stack([(g(0.0, y, yd + eps * E[j]) - g(0.0, y, yd - eps * E[j])) / (2 * eps)
                        for j in range(m.nv)], 1)
        assert np.abs(J1 - fd1).max() <= 1e-8 * np.abs(fd1).max()
        assert np.abs(J2 - fd2).max() <= 1e-8 * np.abs(fd2).max()
    # the finite-difference option (for comparison) agrees to FD accuracy
    from jaxmbd.integrators.rosenbrock import fd_jacobian
    _, F1, F2 = jax.jit(lambda y, yd: fd_jacobian(ode, 0.0, y, yd))(y, yd)
    assert np.abs(F1 - J1).max() <= 1e-5 * np.abs(J1).max() and np.abs(F2 - J2).max() <= 1e-5 * np.abs(J2).max()
    # at y = 0 the chart ODE is the forward dynamics itself
    np.testing.assert_allclose(ode.g(0.0, jnp.zeros(m.nv), m.v0),
                               jaxmbd.forward_dynamics(m, m.q0, m.v0, jnp.zeros(m.nv)), rtol=1e-13)


# --- empirical orders --------------------------------------------------------------------

ORDER_CASES = {
    "SemiImplicitEuler": (I.SemiImplicitEuler(), 1, (400, 800, 1600)),
    "RK4": (I.RK4(), 4, (40, 80, 160)),
    "Dopri5": (I.Dopri5(adaptive_steps=False), 5, (30, 60, 120)),
    "RosenbrockNystrom4": (I.RosenbrockNystrom4(adaptive_steps=False), 4, (40, 80, 160)),
    "SDIRK4": (I.SDIRK4(adaptive_steps=False), 4, (40, 80, 160)),
    "Trapezoidal": (I.Trapezoidal(adaptive_steps=False), 2, (40, 80, 160)),
}


@pytest.fixture(scope="module")
def ball_reference():
    m = _ball_pendulum()
    ref = simulate(m, t1=0.5, integrator=I.Dopri5(), steps=Steps(rtol=1e-13, atol=1e-13, max_steps=4096))
    assert int(ref.status) == 0
    return m, ref


def _state_error(m, sol, ref):
    dq = jaxmbd.difference_q(m, ref.qs[-1], sol.qs[-1])
    return float(jnp.max(jnp.abs(jnp.concatenate([dq, sol.vs[-1] - ref.vs[-1]]))))


@pytest.mark.parametrize("name", [n if n == "RK4" else pytest.param(n, marks=pytest.mark.long)  # long but RK4
                                  for n in sorted(ORDER_CASES)])
def test_empirical_order(name, ball_reference):
    """Fixed steps on a ball-and-hinge pendulum (rotations go through the chart):
    log-log slope of the final-state error within 0.3 of the method's order."""
    m, ref = ball_reference
    method, order, ns = ORDER_CASES[name]
    errs = []
    for n in ns:
        sol = simulate(m, t1=0.5, integrator=method,
                       steps=Steps(dt0=jnp.asarray(0.5 / n), rtol=jnp.asarray(1e-13), atol=jnp.asarray(1e-13),
                                   max_steps=2048))
        assert int(sol.status) == 0 and int(sol.stats["accepted"]) == n
        errs.append(_state_error(m, sol, ref))
    slope = np.polyfit(np.log(0.5 / np.array(ns)), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.3, (errs, slope)


# methods that iterate on a mechanism's (q̈, λ): their orders on the four-bar (fixed steps, tight Newton
# tolerances) against a tight adaptive Rosenbrock run of the same mechanism
DESCRIPTOR_ORDER_CASES = {
    "DescriptorTrapezoidal": (I.DescriptorTrapezoidal(adaptive_steps=False), 2, (160, 320, 640)),
    "DescriptorSDIRK4": (I.DescriptorSDIRK4(adaptive_steps=False), 4, (80, 160, 320)),
}


def test_every_registered_integrator_has_an_order_case():
    """The order tests cover the package's registry: a method registered in
    jaxmbd.integrators without an order case here fails this test."""
    registered = {cls.__name__ for cls in I.REGISTRY.values()}
    assert set(ORDER_CASES) | set(DESCRIPTOR_ORDER_CASES) == registered
    assert not set(ORDER_CASES) & set(DESCRIPTOR_ORDER_CASES)
    for name, cls in I.REGISTRY.items():   # descriptor methods take mechanisms only: their cases use one
        assert cls.descriptor == (cls.__name__ in DESCRIPTOR_ORDER_CASES), name


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(DESCRIPTOR_ORDER_CASES))
def test_empirical_order_of_the_descriptor_methods(name):
    """Fixed steps on the four-bar over 0.5 s: log-log slope of the
    final-state error (coordinates and rates) within 0.3 of the method's
    order."""
    m = models.four_bar()
    T = 0.5
    ref = simulate(m, t1=T, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-13, atol=1e-13, max_steps=20000))
    assert int(ref.status) == 0
    method, order, ns = DESCRIPTOR_ORDER_CASES[name]
    errs = []
    for n in ns:
        sol = simulate(m, t1=T, integrator=method, steps=Steps(dt0=jnp.asarray(T / n), rtol=jnp.asarray(1e-12),
                                                               atol=jnp.asarray(1e-12), max_steps=2048))
        assert int(sol.status) == 0 and int(sol.stats["accepted"]) == n
        errs.append(float(jnp.max(jnp.abs(jnp.concatenate([sol.qs[-1] - ref.qs[-1], sol.vs[-1] - ref.vs[-1]])))))
    slope = np.polyfit(np.log(T / np.array(ns)), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.3, (errs, slope)


# --- the thesis's stiff problems against independent references ------------------------

def _pendulum_closed_form(k1=400.0, C1=15.0, k2=3.0e5, c2=5.0e4, phi0=-np.pi / 12):
    """The stiff double pendulum's equations in absolute angles (θ1, ψ = θ1 + φ),
    derived by hand from the Lagrangian (no jaxmbd code), returned as a
    first-order RHS in (θ1, φ, θ̇1, φ̇) for scipy."""
    L1, L2, m1, m2, g = 1.0, 1.5, 3.0, 0.3, 9.81
    a, J1, J2 = 2 * L1, m1 * (2 * L1) ** 2 / 12, m2 * (2 * L2) ** 2 / 12

    def rhs(t, x):
        th, phi, dth, dphi = x
        psi, dpsi = th + phi, dth + dphi
        cs, sn = np.cos(psi - th), np.sin(psi - th)
        M = np.array([[m1 * L1 ** 2 + J1 + m2 * a * a, m2 * a * L2 * cs], [m2 * a * L2 * cs, m2 * L2 ** 2 + J2]])
        cor = np.array([-m2 * a * L2 * sn * dpsi ** 2, m2 * a * L2 * sn * dth ** 2])
        grav = np.array([(m1 * L1 + m2 * a) * g * np.cos(th), m2 * g * L2 * np.cos(psi)])
        tau1 = -k1 * (th - 1.5 * np.pi) - C1 * dth
        tau2 = -k2 * (phi - phi0) - c2 * dphi
        dd = np.linalg.solve(M, np.array([tau1 - tau2, tau2]) - cor - grav)
        return np.array([dth, dphi, dd[0], dd[1] - dd[0]])
    return rhs


@pytest.fixture(scope="module")
def pendulum_reference():
    from scipy.integrate import solve_ivp
    m = models.stiff_double_pendulum()
    ts = np.linspace(0.0, 2.0, 41)[1:]
    x0 = np.concatenate([np.asarray(m.q0), np.asarray(m.v0)])
    r = solve_ivp(_pendulum_closed_form(), (0.0, 2.0), x0, method="Radau", t_eval=ts, rtol=1e-11, atol=1e-11)
    assert r.status == 0
    return m, jnp.asarray(ts), r.y.T


@pytest.mark.long
def test_stiff_double_pendulum_model_matches_the_closed_form():
    m = models.stiff_double_pendulum()
    rhs = _pendulum_closed_form()
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.normal(size=4) * [1, 0.3, 3, 3]
        a = jaxmbd.forward_dynamics(m, x[:2], x[2:], jnp.zeros(2))
        np.testing.assert_allclose(a, rhs(0.0, x)[2:], rtol=1e-10)
    # dominant eigenvalue about -1e5 (the thesis's §5.1)
    _, J1, J2 = ChartODE(m, m.q0).g_and_jac(0.0, jnp.zeros(2), m.v0)
    G = np.block([[np.zeros((2, 2)), np.eye(2)], [np.asarray(J1), np.asarray(J2)]])
    lam = np.linalg.eigvals(G).real.min()
    assert -1.2e5 < lam < -0.8e5


TOLS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
IMPLICIT = (("sdirk", I.SDIRK4()), ("ros", I.RosenbrockNystrom4()), ("trap", I.Trapezoidal()))


def _protocol(m, ts, ref, method, T=2.0):
    """Max error of the first coordinate and its rate over the grid for each
    tolerance (rtol = atol, the thesis's protocol), and accepted steps."""
    out = []
    for tol in TOLS:
        sol = simulate(m, t1=T, integrator=method,
                       steps=Steps(rtol=jnp.asarray(tol), atol=jnp.asarray(tol), max_steps=40000), save=Save(ts=ts))
        assert int(sol.status) == 0
        out.append((float(np.abs(sol.qs[:, 0] - ref[:, 0]).max()),
                    float(np.abs(sol.vs[:, 0] - ref[:, m.nv]).max()), int(sol.stats["accepted"])))
    return np.array(out)


def _check_protocol(res):
    tol = np.array(TOLS)
    for name, r in res.items():
        assert np.all(r[:, :2] <= 10 * tol[:, None]), (name, r[:, :2] / tol[:, None])
        assert np.all(np.diff(r[:, 0]) < 0) and np.all(np.diff(r[:, 1]) < 0), (name, r)


@pytest.mark.long
def test_stiff_double_pendulum_protocol(pendulum_reference):
    """T = 2 s, tol 1e-2 .. 1e-6, 40 save points: the errors of θ1 and θ̇1 stay
    within 10x the tolerance and decrease with it, for SDIRK4,
    Rosenbrock-Nyström and the trapezoidal rule (default tol_factor); the
    filtered Rosenbrock's accepted steps at 1e-5 are within 2x of SDIRK4's."""
    m, ts, ref = pendulum_reference
    res = {name: _protocol(m, ts, ref, method) for name, method in IMPLICIT}
    _check_protocol(res)
    i5 = TOLS.index(1e-5)
    assert res["ros"][i5, 2] <= 2 * res["sdirk"][i5, 2], (res["ros"][:, 2], res["sdirk"][:, 2])


@pytest.mark.slow
def test_stiff_chain_protocol():
    """stiff_chain(3) (dominant eigenvalue below -1e5) over the same protocol
    against scipy's Radau at 1e-11 on jaxmbd's own forward dynamics: errors
    of the first joint angle and rate within 10x the tolerance and
    decreasing.  Four save points, so that the tolerance, not the save grid,
    sets the steps."""
    from scipy.integrate import solve_ivp
    m = models.stiff_chain(3)
    nv = m.nv
    _, J1, J2 = ChartODE(m, m.q0).g_and_jac(0.0, jnp.zeros(nv), m.v0)
    G = np.block([[np.zeros((nv, nv)), np.eye(nv)], [np.asarray(J1), np.asarray(J2)]])
    assert np.linalg.eigvals(G).real.min() < -1e5
    f = jax.jit(lambda x: jnp.concatenate([x[nv:], jaxmbd.forward_dynamics(m, x[:nv], x[nv:], jnp.zeros(nv))]))
    jac = jax.jit(jax.jacfwd(lambda x: jnp.concatenate([x[nv:], jaxmbd.forward_dynamics(m, x[:nv], x[nv:],
                                                                                         jnp.zeros(nv))])))
    T, ts = 2.0, np.linspace(0.0, 2.0, 5)[1:]
    r = solve_ivp(lambda t, x: np.asarray(f(x)), (0.0, T), np.concatenate([m.q0, m.v0]), method="Radau",
                  t_eval=ts, rtol=1e-11, atol=1e-11, jac=lambda t, x: np.asarray(jac(x)))
    assert r.status == 0
    _check_protocol({name: _protocol(m, jnp.asarray(ts), r.y.T, method, T) for name, method in IMPLICIT})


@pytest.mark.long
def test_kept_factorization_and_held_steps():
    """SDIRK4 and the trapezoidal rule keep J and the LU while h is unchanged
    and Newton contracts fast: with a fixed step they factor a few times
    instead of every step, and the solution agrees with fresh factorizations;
    the controller holds h for growth factors in [1, 1.2]."""
    m = models.stiff_chain(3)  # released at rest, straight: no stiff transient for fixed steps
    x0 = (jnp.zeros(3), jnp.zeros(3))
    for cls in (I.SDIRK4, I.Trapezoidal):
        kw = dict(t1=0.3, steps=Steps(rtol=1e-6, atol=1e-6, dt0=0.01), save=Save(ts=jnp.array([0.1, 0.3])))
        a = simulate(m, x0, integrator=cls(adaptive_steps=False), **kw)
        b = simulate(m, x0, integrator=cls(adaptive_steps=False, keep_factorization=False), **kw)
        assert int(a.status) == 0 and int(b.status) == 0
        assert int(b.stats["lu_factorizations"]) == int(b.stats["accepted"]) == 30
        assert int(a.stats["lu_factorizations"]) <= 10, a.stats
        assert int(a.stats["jacobian_evals"]) == int(a.stats["lu_factorizations"])
        np.testing.assert_allclose(a.qs, b.qs, atol=1e-5)
        np.testing.assert_allclose(a.vs, b.vs, atol=1e-4)
    c = I.Controller()
    h = jnp.asarray(0.1)
    for err, held in ((0.9 ** 4 / 1.1 ** 4, True), (0.9 ** 4 / 1.5 ** 4, False), (2.0, False)):
        assert (float(c.propose(h, err, 3, False, hold=True)) == 0.1) == held
        assert float(c.propose(h, err, 3, False)) != 0.1


def test_sdirk_dense_output():
    """The continuous extension: Σ_j d̄_ji = (0,0,0,0,1) (y1 at θ = 1), the
    order-3 conditions for the weights B(θ) = b̄(θ) A at several θ, and an
    observed order of about 4 for the local error at θ = 1/2 (x'' = -x)."""
    np.testing.assert_allclose(sdirk.DENSE.sum(0), [0, 0, 0, 0, 1], atol=1e-12)
    for th in (0.3, 0.5, 0.8):
        Bw = np.asarray(sdirk.dense_weights(th)) @ sdirk.A
        c = sdirk.C
        np.testing.assert_allclose([Bw.sum(), Bw @ c, Bw @ c ** 2, Bw @ sdirk.A @ c],
                                   [th, th ** 2 / 2, th ** 3 / 3, th ** 3 / 6], atol=1e-12)

    class _Osc(AbstractODE):
        time_dependent = False

        def g(self, t, y, yd):  # x'' = -x with x = 1 + y
            return -1.0 - y

        def g_and_jac(self, t, y, yd, cotangent_rank=None):
            n = y.shape[0]
            return self.g(t, y, yd), -jnp.eye(n), jnp.zeros((n, n))

        def g_t(self, t, y, yd):
            return jnp.zeros_like(y)

    method = I.SDIRK4(keep_factorization=False, dense_predictor=False)
    errs = []
    hs = (0.2, 0.1, 0.05)
    for h in hs:  # x = cos t, y = x - 1; the Newton solve is linear, hence exact
        sc = (jnp.full(1, 1e-12), jnp.full(1, 1e-12))
        cache = method.init_cache(None, 0.0, jnp.zeros(1))
        att = method.attempt(_Osc(), 0.0, jnp.zeros(1), h, sc, cache)
        mid = sdirk.dense_output(att.cache.zs, 0.5)
        errs.append(abs(float(mid[0]) - (np.cos(h / 2) - 1)))
        np.testing.assert_allclose(sdirk.dense_output(att.cache.zs, 1.0)[0], att.y[0], rtol=1e-13)
    p = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert 3.7 < p < 4.6, (p, errs)


@pytest.mark.long
def test_tol_factor_is_validated_and_applied():
    for cls in (I.RosenbrockNystrom4, I.SDIRK4, I.Trapezoidal):
        for bad in (0.0, -1.0, 2.0, "x"):
            with pytest.raises(ValueError, match="tol_factor"):
                cls(tol_factor=bad)
    m = models.stiff_double_pendulum()
    kw = dict(t1=0.5, save=Save(ts=jnp.array([0.5])))
    a = simulate(m, integrator=I.RosenbrockNystrom4(tol_factor=0.1), steps=Steps(rtol=1e-4, atol=1e-4), **kw)
    b = simulate(m, integrator=I.RosenbrockNystrom4(tol_factor=1.0), steps=Steps(rtol=1e-5, atol=1e-5), **kw)
    np.testing.assert_array_equal(a.qs, b.qs)
    assert int(a.stats["accepted"]) == int(b.stats["accepted"])


# --- batching, statuses, gradients, conservation -------------------------------------------

@pytest.mark.long
def test_vmap_equals_loop_and_a_failing_member_is_isolated():
    m = models.double_pendulum()
    rng = np.random.default_rng(0)
    B = 64
    q0 = jnp.asarray(rng.normal(size=(B, 2)))
    v0 = jnp.asarray(rng.normal(size=(B, 2))).at[5].set(jnp.array([1e200, -1e200]))  # member 5 blows up
    run = lambda q, v: simulate(m, Start(q, v), 0.3, integrator=I.RosenbrockNystrom4(),
                                steps=Steps(rtol=1e-6, atol=1e-6, max_steps=256))
    sols = jax.vmap(run)(q0, v0)
    assert int(sols.status[5]) == I.NONFINITE
    ok = np.delete(np.arange(B), 5)
    assert np.all(np.asarray(sols.status)[ok] == 0)
    assert np.all(np.isfinite(np.asarray(sols.qs)[ok]))
    for i in (0, 17, 63):
        one = run(q0[i], v0[i])
        np.testing.assert_allclose(sols.qs[i], one.qs, rtol=1e-12, atol=1e-12)
        assert int(one.stats["accepted"]) == int(sols.stats["accepted"][i])
    # the forward-only while loop gives the same runs
    fast = jax.vmap(lambda q, v: simulate(m, Start(q, v), 0.3, integrator=I.RosenbrockNystrom4(),
                                          steps=Steps(rtol=1e-6, atol=1e-6, max_steps=256),
                                          solver=Solver(adjoint="none")))(q0, v0)
    np.testing.assert_array_equal(fast.status, sols.status)
    np.testing.assert_allclose(fast.qs[ok], sols.qs[ok], rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(fast.stats["accepted"], sols.stats["accepted"])


def test_statuses_and_bad_input():
    m = models.double_pendulum()
    sol = simulate(m, Start(jnp.array([1.0, 0.0]), jnp.zeros(2)), 1.0, integrator=I.RK4(),
                   steps=Steps(dt0=0.01, max_steps=10))
    assert int(sol.status) == I.MAX_STEPS and jaxmbd.status_name(sol.status) == "max_steps reached"
    assert float(sol.t) == pytest.approx(0.1)
    assert int(sol.stats["accepted"]) == 10
    with pytest.raises(ValueError, match="give dt0"):
        simulate(m, integrator=I.RK4())
    with pytest.raises(TypeError, match="integrator"):
        simulate(m, integrator="rk4", steps=Steps(dt0=0.1))
    with pytest.raises(ValueError, match="must be greater than t0"):
        simulate(m, Start(t=1.0), 1.0, integrator=I.Dopri5())
    with pytest.raises(ValueError, match="non-decreasing"):
        simulate(m, t1=1.0, integrator=I.Dopri5(), save=Save(ts=jnp.array([0.5, 0.2])))
    with pytest.raises(ValueError, match="after t1"):
        simulate(m, t1=1.0, integrator=I.Dopri5(), save=Save(ts=jnp.array([0.5, 2.0])))
    with pytest.raises(ValueError, match="dt0 must be positive"):
        simulate(m, integrator=I.RK4(), steps=Steps(dt0=-0.1))
    with pytest.raises(ValueError, match="unknown adjoint"):
        simulate(m, integrator=I.RK4(), steps=Steps(dt0=0.1), solver=Solver(adjoint="backsolve"))
    with pytest.raises(ValueError, match="save times"):
        simulate(m, integrator=I.Dopri5(), save=Save(ts=jnp.ones((2, 2))))
    with pytest.raises(ValueError, match="initial q0"):
        jaxmbd.ModelBuilder().add_body("a", "world", "revolute", axis=(0, 0, 1)).set_initial_state([1.0, 2.0]).build()


@pytest.mark.long
@pytest.mark.parametrize("method, kw", [(I.RK4(), dict(dt0=0.02)),
                                        pytest.param(I.RosenbrockNystrom4(), dict(rtol=1e-7, atol=1e-7),
                                                     marks=pytest.mark.slow)])
def test_gradients_match_finite_differences(method, kw):
    """d(loss of the final state)/d(spring constant, initial velocity), fixed-step
    and adaptive, against central differences (relative 1e-5)."""
    m = models.double_pendulum()
    m = eqx_tree_set(m, "stiffness", jnp.array([3.0, 5.0]))
    m = eqx_tree_set(m, "damping", jnp.array([0.1, 2.0]))
    q0, v0 = jnp.array([0.4, -0.2]), jnp.array([0.3, 0.5])

    def run(k, v):
        mm = eqx_tree_set(m, "stiffness", m.stiffness.at[1].set(k))
        return simulate(mm, Start(q0, v), 0.4, integrator=method, steps=Steps(max_steps=256, **kw))

    def loss(k, v):
        sol = run(k, v)
        return jnp.sum(sol.qs[-1] ** 2) + 0.1 * jnp.sum(sol.vs[-1] ** 2)

    k0 = jnp.asarray(5.0)
    assert int(run(k0, v0).status) == 0
    gk, gv = jax.grad(loss, argnums=(0, 1))(k0, v0)
    eps = 1e-5
    fk = (loss(k0 + eps, v0) - loss(k0 - eps, v0)) / (2 * eps)
    fv = np.array([(loss(k0, v0.at[j].add(eps)) - loss(k0, v0.at[j].add(-eps))) / (2 * eps) for j in range(2)])
    np.testing.assert_allclose(gk, fk, rtol=1e-5)
    np.testing.assert_allclose(gv, fv, rtol=1e-5)


def test_reverse_only_jacobian_pullback_equals_reverse_over_forward():
    """The loop's cheaper pullback of (g, ∂g/∂y, ∂g/∂y') (n JVPs along the rows
    of J̄ instead of the transpose of the 2n-column forward Jacobian) gives the
    same cotangents for the point and for parameters g closes over (floats
    and an integer index array), under jit and vmap."""
    from jaxmbd.odes.base import value_and_jacobians
    rng = np.random.default_rng(3)
    A = jnp.asarray(rng.normal(size=(5, 5)))
    idx = jnp.array([4, 0, 3, 1, 2])
    Wt = jnp.asarray(rng.normal(size=(5, 5)))

    def loss(p, y, yd, reverse_only):
        def g(y, yd):
            return jnp.tanh(p[0] * A @ y) + jnp.sin(p[1] * yd[idx]) * jnp.cos(y).sum() + p[2] * y * yd ** 2
        g0, J1, J2 = value_and_jacobians(g, y, yd, reverse_only)
        return jnp.sum(g0 ** 2) + jnp.sum(jnp.sin(J1) * Wt) + jnp.sum(J2 @ J1 @ Wt) + jnp.sum(J2 * J2.T)

    grad = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1, 2)), in_axes=(None, 0, 0, None)), static_argnums=3)
    p = jnp.array([0.7, 1.3, 0.4])
    y, yd = jnp.asarray(rng.normal(size=(3, 5))), jnp.asarray(rng.normal(size=(3, 5)))
    for new, old in zip(grad(p, y, yd, True), grad(p, y, yd, False)):
        assert float(jnp.max(jnp.abs(old))) > 1e-2
        np.testing.assert_allclose(new, old, rtol=1e-12, atol=1e-12)
    # the values are the plain ones
    g = lambda y, yd: jnp.tanh(A @ y) * yd  # noqa: E731
    for a, b in zip(value_and_jacobians(g, y[0], yd[0], True), value_and_jacobians(g, y[0], yd[0])):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("rank", [None, 3])
def test_held_configuration_work_gives_the_same_jacobians_and_pullbacks(rank):
    """value_and_jacobians(..., held=h): g(y, y', h(y)) with h's value held in the y'-directions
    (what ChartODE does with the contact rows and H's factors) gives the values and Jacobians of the
    plain call on y ↦ g(y, y', h(y)), and the same gradients through its forward and its
    reverse-only forms (point and closed-over parameters, under jit and vmap)."""
    from jaxmbd.odes.base import value_and_jacobians
    rng = np.random.default_rng(4)
    A = jnp.asarray(rng.normal(size=(5, 5)))
    idx = jnp.array([4, 0, 3, 1, 2])
    Wt = jnp.asarray(rng.normal(size=(5, 5)))

    def parts(p):
        def held(y):
            return {"c": jnp.cos(p[0] * A @ y), "s": jnp.sin(y).sum()}

        def g(y, yd, h):
            return jnp.tanh(h["c"] * p[1]) * yd[idx] + h["s"] * jnp.sin(p[2] * yd) + y * yd ** 2
        return held, g

    def loss(p, y, yd, mode):
        held, g = parts(p)
        if mode == "plain":
            out = value_and_jacobians(lambda y, yd: g(y, yd, held(y)), y, yd)
        else:
            out = value_and_jacobians(g, y, yd, mode == "reverse", rank if mode == "reverse" else None, held=held)
        g0, J1, J2 = out
        return jnp.sum(g0 ** 2) + jnp.sum(jnp.sin(J1) * Wt) + jnp.sum(J2 @ J1 @ Wt) + jnp.sum(J2 * J2.T)

    p = jnp.array([0.7, 1.3, 0.4])
    y, yd = jnp.asarray(rng.normal(size=(3, 5))), jnp.asarray(rng.normal(size=(3, 5)))
    held, g = parts(p)
    plain = value_and_jacobians(lambda y, yd: g(y, yd, held(y)), y[0], yd[0])
    for mode in (False, True):
        for a, b in zip(value_and_jacobians(g, y[0], yd[0], mode, held=held), plain):
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)
    grad = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1, 2)), in_axes=(None, 0, 0, None)), static_argnums=3)
    ref = grad(p, y, yd, "plain")
    for mode in ("forward", "reverse"):
        for new, old in zip(grad(p, y, yd, mode), ref):
            assert float(jnp.max(jnp.abs(old))) > 1e-2
            if rank is None or mode == "forward":
                np.testing.assert_allclose(new, old, rtol=1e-11, atol=1e-12)
    if rank is not None:   # a rank-3 promise on this loss (J̄ of full rank) is false: the pullback differs
        wrong = grad(p, y, yd, "reverse")
        assert float(jnp.max(jnp.abs(wrong[1] - ref[1]))) > 1e-6


@pytest.mark.parametrize("with_held", [False, True])
def test_an_inner_piece_with_its_own_jacobians_gives_the_same_jacobians_and_pullbacks(with_held):
    """value_and_jacobians(..., inner=(u, u_model)): g(y, y', p, u(y, y')) with u's first-order
    model supplied by the caller (ChartODE's free accelerations, a₀ - H⁻¹ ∂R̃ (y₁ - y, ...)) gives
    the values and Jacobians of the plain call and the same gradients through its forward and
    reverse-only forms; a model whose slope is off by a little gives Jacobians off by as much (the
    model is used, not u)."""
    from jaxmbd.odes.base import value_and_jacobians
    rng = np.random.default_rng(6)
    A = jnp.asarray(rng.normal(size=(5, 5)))
    Wt = jnp.asarray(rng.normal(size=(5, 5)))

    def parts(p, skew=0.0):
        held = (lambda y: jnp.cos(p[0] * A @ y)) if with_held else None

        def u(y, yd):
            return jnp.sin(p[1] * y) * yd + A @ (yd * yd)

        def u_and_jac(y, yd, y1, yd1, p1):
            J = jax.jacfwd(lambda z: u(z[:5], z[5:]))(jnp.concatenate([y, yd]))
            return u(y, yd) + (J[:, :5] + skew) @ (y1 - y) + J[:, 5:] @ (yd1 - yd)

        def g(y, yd, h, uu):
            c = h if with_held else jnp.cos(p[0] * A @ y)
            return jnp.tanh(uu * p[2]) * c + y * yd ** 2
        return held, u, u_and_jac, g

    def plain_g(p):
        held, u, _, g = parts(p)
        return lambda y, yd: g(y, yd, held(y) if with_held else None, u(y, yd))

    def loss(p, y, yd, mode):
        held, u, uj, g = parts(p)
        if mode == "plain":
            out = value_and_jacobians(plain_g(p), y, yd)
        else:
            out = value_and_jacobians(g, y, yd, mode == "reverse", held=held, inner=(u, uj))
        g0, J1, J2 = out
        return jnp.sum(g0 ** 2) + jnp.sum(jnp.sin(J1) * Wt) + jnp.sum(J2 @ J1 @ Wt) + jnp.sum(J2 * J2.T)

    p = jnp.array([0.7, 1.3, 0.4])
    y, yd = jnp.asarray(rng.normal(size=(3, 5))), jnp.asarray(rng.normal(size=(3, 5)))
    held, u, uj, g = parts(p)
    plain = value_and_jacobians(plain_g(p), y[0], yd[0])
    for mode in (False, True):
        for a, b in zip(value_and_jacobians(g, y[0], yd[0], mode, held=held, inner=(u, uj)), plain):
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-14)
    held, u, uj, g = parts(p, skew=1e-6)
    off = value_and_jacobians(g, y[0], yd[0], held=held, inner=(u, uj))[1]
    assert float(jnp.max(jnp.abs(off - plain[1]))) > 1e-8
    grad = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1, 2)), in_axes=(None, 0, 0, None)), static_argnums=3)
    ref = grad(p, y, yd, "plain")
    for mode in ("forward", "reverse"):
        for new, old in zip(grad(p, y, yd, mode), ref):
            assert float(jnp.max(jnp.abs(old))) > 1e-2
            np.testing.assert_allclose(new, old, rtol=1e-11, atol=1e-12)


def test_low_rank_pullback_equals_the_full_one_and_a_false_bound_is_wrong():
    """cotangent_rank=k pulls J̄ back with k JVPs: for a cotangent of rank <= k
    the same cotangents as the n-JVP pullback (point and parameters), and a
    bound below the cotangent's rank gives a different (wrong) gradient, so
    the equality is not vacuous."""
    from jaxmbd.odes.base import value_and_jacobians
    rng = np.random.default_rng(5)
    n = 7
    A = jnp.asarray(rng.normal(size=(n, n)))
    Lt = jnp.asarray(rng.normal(size=(3, n)))
    R = jnp.asarray(rng.normal(size=(3, 2 * n)))

    def loss(p, y, yd, rank, reverse_only=True):
        def g(y, yd):
            return jnp.tanh(p[0] * A @ y) * (1.0 + p[1] * yd ** 2) + jnp.sin(yd).sum()
        g0, J1, J2 = value_and_jacobians(g, y, yd, reverse_only, rank)
        J = jnp.concatenate([J1, J2], 1)
        return jnp.sum(g0 ** 2) + jnp.sum(jnp.sin(Lt @ J @ R.T))  # J̄ = Ltᵀ C R: rank <= 3

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)), static_argnums=(3, 4))
    p = jnp.array([0.7, 1.3])
    y, yd = jnp.asarray(rng.normal(size=n)), jnp.asarray(rng.normal(size=n))
    full = grad(p, y, yd, None)
    plain = grad(p, y, yd, None, False)
    for k in (3, 5):
        for a, b, c in zip(grad(p, y, yd, k), full, plain):
            assert float(jnp.max(jnp.abs(b))) > 1e-2
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)
            np.testing.assert_allclose(a, c, rtol=1e-11, atol=1e-12)
    wrong = grad(p, y, yd, 2)
    assert float(jnp.max(jnp.abs(wrong[1] - full[1]))) > 1e-3 * float(jnp.max(jnp.abs(full[1])))


def test_rosenbrock_attempt_uses_its_jacobians_with_a_cotangent_of_rank_at_most_its_bound():
    """RosenbrockNystrom4 promises (cotangent_rank = 5) that its attempt's
    outputs depend on J1, J2 so that any cotangent of them pulls back to a J̄
    of rank <= 5, whatever n: the J̄ of random output cotangents, taken by
    perturbing the Jacobians the attempt is given, has rank 5 on a 7-DoF
    chain (σ6 / σ1 at rounding level)."""
    from jaxmbd.odes.base import value_and_jacobians
    m = models.stiff_chain(7)
    n = m.nv
    v0 = jnp.asarray(np.random.default_rng(2).normal(size=n))
    method = I.RosenbrockNystrom4()
    assert method.cotangent_rank == 5 < n

    class Perturbed(ChartODE):
        def g_and_jac(self, t, y, yd, cotangent_rank=None):
            g0, J1, J2 = value_and_jacobians(lambda y, yd: self.g(t, y, yd), y, yd)
            return g0, J1 + self.E1, J2 + self.E2

    def outputs(E):
        ode = Perturbed(m, m.q0)
        ode.E1, ode.E2 = E[:, :n], E[:, n:]
        scale = (jnp.ones(n), jnp.ones(n))
        att = method.attempt(ode, jnp.asarray(0.0), v0, jnp.asarray(2e-3), scale)
        return jnp.concatenate([att.y, att.yd, att.err_y, att.err_yd])

    @jax.jit
    def cotangents(ws):
        _, pull = jax.vjp(outputs, jnp.zeros((n, 2 * n)))
        return jax.vmap(lambda w: pull(w)[0])(ws)
    Jbars = cotangents(jnp.asarray(np.random.default_rng(4).normal(size=(3, 4 * n))))
    for Jbar in np.asarray(Jbars):
        sv = np.linalg.svd(Jbar, compute_uv=False)
        assert sv[4] > 1e-8 * sv[0] and sv[5] < 1e-13 * sv[0], sv


@pytest.mark.long
def test_the_rank_bound_pullback_gives_the_full_pullback_s_gradient_through_the_loop():
    """Through the loop (a long check): the gradient with RosenbrockNystrom4's
    5-JVP pullback equals the one with the full n-JVP pullback on a 7-DoF
    chain."""
    m = models.stiff_chain(7)
    n = m.nv
    v0 = jnp.asarray(np.random.default_rng(2).normal(size=n))

    class FullPullback(I.RosenbrockNystrom4):
        cotangent_rank = None

    q0 = jnp.asarray(m.q0) + 0.05

    def loss(v, method):
        sol = simulate(m, Start(q0, v), 0.02, integrator=method, steps=Steps(rtol=1e-7, atol=1e-7))
        return jnp.sum(sol.qs[-1] ** 2) + jnp.sum(sol.vs[-1] * jnp.arange(n))

    low = jax.jit(jax.grad(lambda v: loss(v, I.RosenbrockNystrom4())))(v0)
    full = jax.jit(jax.grad(lambda v: loss(v, FullPullback())))(v0)
    assert float(jnp.max(jnp.abs(full))) > 1e-2
    np.testing.assert_allclose(low, full, rtol=1e-9, atol=1e-12 * float(jnp.max(jnp.abs(full))))


@pytest.mark.long
def test_gradient_through_the_loop_with_the_model_as_a_traced_argument():
    """The loop's Jacobian pullback with every model array traced (its integer
    topology arrays too, which the forward pass's tracers must not carry into
    the checkpointed reverse pass): the same gradient as with the model held
    constant, and equal to central differences."""
    m = models.double_pendulum()
    q0, v0 = jnp.array([0.4, -0.2]), jnp.array([0.3, 0.5])

    def loss(k, mm):
        mm = eqx_tree_set(mm, "stiffness", jnp.array([3.0, 1.0]) * k)
        sol = simulate(mm, Start(q0, v0), 0.1, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-9, atol=1e-9))
        return jnp.sum(sol.qs[-1] ** 2)

    k = jnp.asarray(2.0)
    traced = jax.jit(jax.grad(loss))(k, m)
    held = jax.jit(jax.grad(lambda k: loss(k, m)))(k)
    np.testing.assert_allclose(traced, held, rtol=1e-13)
    f = jax.jit(loss)
    fd = (f(k + 1e-5, m) - f(k - 1e-5, m)) / 2e-5
    assert abs(float(traced)) > 1e-3
    np.testing.assert_allclose(traced, fd, rtol=1e-5)


def eqx_tree_set(model, field, value):
    import equinox as eqx
    return eqx.tree_at(lambda mm: getattr(mm, field), model, value)


@pytest.mark.long
def test_spinning_body_conserves_energy_and_momentum():
    """Free body about its intermediate axis (the flip): kinetic energy and world
    angular momentum conserved to the tolerance; the spin axis flips."""
    m = models.spinning_body()
    ts = jnp.linspace(0.0, 8.0, 17)
    sol = simulate(m, t1=8.0, integrator=I.RosenbrockNystrom4(), steps=Steps(rtol=1e-9, atol=1e-9, max_steps=4096),
                   save=Save(ts=ts))
    assert int(sol.status) == 0
    Ic = np.diag([1.0, 2.0, 3.0])

    def invariants(q, v):
        w = np.asarray(v[3:])
        qw, qx, qy, qz = np.asarray(q[3:7])
        R = np.array([[1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy)],
                      [2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx)],
                      [2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)]])
        return 0.5 * w @ Ic @ w, R @ Ic @ w
    E0, L0 = invariants(sol.qs[0], sol.vs[0])
    for q, v in zip(sol.qs, sol.vs):
        E, L = invariants(q, v)
        assert abs(E - E0) < 1e-6 * E0 and np.abs(L - L0).max() < 1e-6 * np.abs(L0).max()
        np.testing.assert_allclose(jaxmbd.kinetic_energy(m, q, v), 0.5 * 0.1 ** 2 + E0, rtol=1e-6)
    assert float(jnp.min(sol.vs[:, 4])) < -1.0  # ω_y changed sign: the Dzhanibekov flip


@pytest.mark.slow
def test_sparse_iteration_matrix_equals_the_dense_one():
    """Π = H + h γ ∂R/∂v + h² γ² ∂R/∂q factored by the branch-sparse LU solves
    S u = r exactly like the dense S = I - h γ J2 - h² γ² J1, and J1 x matches;
    a Rosenbrock run with either solver gives the same trajectory."""
    from jaxmbd.odes import IterationMatrix, SparseIterationMatrix
    import equinox as eqx
    m = models.binary_tree(3)
    m = eqx.tree_at(lambda mm: (mm.stiffness, mm.damping), m, (jnp.linspace(10.0, 80.0, m.nv),
                                                               jnp.linspace(0.5, 4.0, m.nv)))
    ctrl = lambda t, q, v, p: -p * jnp.sin(q) * (1.0 + t) - 0.3 * v * jnp.cos(q)  # state- and time-dependent
    rng = np.random.default_rng(0)
    q0, v0 = jnp.asarray(0.5 * rng.normal(size=m.nq)), jnp.asarray(rng.normal(size=m.nv))
    ode = ChartODE(m, q0, jaxmbd.Inputs(tau=ctrl, params=2.0))
    t, hg = 0.3, 0.05
    g0, J1, J2 = ode.g_and_jac(t, jnp.zeros(m.nv), v0)
    dense = IterationMatrix.build(J1, J2, hg)
    sparse = SparseIterationMatrix.build(ode, t, v0, g0, hg)
    r, x = jnp.asarray(rng.normal(size=m.nv)), jnp.asarray(rng.normal(size=m.nv))
    np.testing.assert_allclose(sparse.solve_S(r), dense.solve_S(r), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sparse.J1mv(x), J1 @ x, rtol=1e-10, atol=1e-10)
    for cls in (I.RosenbrockNystrom4, I.SDIRK4, I.Trapezoidal):
        runs = [simulate(m, Start(q0, v0), 0.02, integrator=cls(linear_solver=ls, adaptive_steps=False),
                         inputs=Inputs(tau=ctrl, params=2.0),
                         steps=Steps(dt0=0.005, max_steps=8, rtol=1e-6, atol=1e-6)) for ls in ("dense", "sparse")]
        assert int(runs[0].status) == 0 and int(runs[1].status) == 0
        np.testing.assert_allclose(runs[1].qs, runs[0].qs, rtol=1e-9, atol=1e-10, err_msg=cls.__name__)
    # a ball joint (its chart's own terms are in the sparse matrix): the same run with either solver
    runs = [simulate(_ball_pendulum(), t1=0.1, integrator=I.RosenbrockNystrom4(linear_solver=ls),
                     steps=Steps(dt0=0.05))
            for ls in ("dense", "sparse")]
    assert int(runs[0].status) == 0 and int(runs[1].status) == 0
    np.testing.assert_allclose(runs[1].qs, runs[0].qs, rtol=1e-9, atol=1e-10)
