"""The LU-based projection method (jaxmbd.linalg) against QR/pinv, its own
identities, the report's slider-crank and flop model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmbd import linalg

SIZES = [(117, 105), (170, 161), (181, 180), (385, 361), (574, 526)]  # the report's Table 4.1

lstsq = jax.jit(linalg.lstsq_lu)
minnorm = jax.jit(linalg.minnorm_lu)


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


@pytest.mark.parametrize("m, n", SIZES)
def test_least_squares_and_minimum_norm_agree_with_qr_and_pinv(m, n):
    rng = np.random.default_rng(m)
    A = rng.standard_normal((m, n))
    b = rng.standard_normal(m)
    s = lstsq(A, b)
    assert int(s.status) == linalg.OK
    x_ref = np.linalg.lstsq(A, b, rcond=None)[0]
    assert _rel(s.x, x_ref) < 1e-12
    np.testing.assert_allclose(s.aux, b - A @ np.asarray(s.x), atol=1e-12)
    assert np.linalg.norm(A.T @ np.asarray(s.aux)) < 1e-10 * np.linalg.norm(A) * np.linalg.norm(b)
    # minimum norm on the transpose: n equations in m unknowns
    c = rng.standard_normal(n)
    t = minnorm(A.T, c)
    assert int(t.status) == linalg.OK
    assert _rel(t.x, np.linalg.pinv(A.T) @ c) < 1e-12
    np.testing.assert_allclose(A.T @ np.asarray(t.x), c, atol=1e-11)
    np.testing.assert_allclose(t.x, -A @ np.asarray(t.aux), atol=1e-11)  # x = -Aᵀᵀ y, the augmented system


def test_null_space_identities_and_the_residual_projector():
    rng = np.random.default_rng(0)
    A, b = rng.standard_normal((117, 105)), rng.standard_normal(117)
    F = linalg.lu_projection(A)
    N = np.asarray(linalg.null_space(F))
    S = np.eye(12) + np.asarray(F.J) @ np.asarray(F.J).T
    np.testing.assert_allclose(A.T @ N, 0.0, atol=1e-12)
    np.testing.assert_allclose(N.T @ N, S, atol=1e-12)
    np.testing.assert_allclose(np.asarray(F.S_chol) @ np.asarray(F.S_chol).T, S, atol=1e-12)
    r = linalg.lstsq_lu(A, b).aux
    np.testing.assert_allclose(r, N @ np.linalg.solve(S, N.T @ b), atol=1e-12)
    # the minimum-norm solution has no component along null(A) ... i.e. Nᵀ x = 0 for Aᵀ x = c
    x = linalg.minnorm_lu(A.T, rng.standard_normal(105)).x
    np.testing.assert_allclose(N.T @ np.asarray(x), 0.0, atol=1e-11)


def test_consistent_right_hand_side_and_square_case():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((30, 25))
    x_true = rng.standard_normal(25)
    s = linalg.lstsq_lu(A, A @ x_true)
    np.testing.assert_allclose(s.x, x_true, rtol=1e-12)
    np.testing.assert_allclose(s.aux, 0.0, atol=1e-13)
    Q = rng.standard_normal((25, 25))
    for f in (linalg.lstsq_lu, linalg.minnorm_lu):
        np.testing.assert_allclose(f(Q, x_true).x, np.linalg.solve(Q, x_true), rtol=1e-11)


def test_general_augmented_system_and_the_mass_scaled_kkt_system():
    rng = np.random.default_rng(2)
    m, n = 14, 10
    T = rng.standard_normal((m, n))
    c1, c2 = rng.standard_normal(m), rng.standard_normal(n)
    y1, y2 = linalg.augmented_solve(linalg.lu_projection(T), c1, c2)
    K = np.block([[np.eye(m), T], [T.T, np.zeros((n, n))]])
    np.testing.assert_allclose(np.concatenate([y1, y2]), np.linalg.solve(K, np.concatenate([c1, c2])), atol=1e-12)
    # the equations of motion's KKT system [[M, Φᵀ], [Φ, 0]] through M = RᵀR and T = R⁻ᵀ Φᵀ
    B = rng.standard_normal((m, m))
    M = B @ B.T + m * np.eye(m)
    Phi = rng.standard_normal((n, m))
    Q, gam = rng.standard_normal(m), rng.standard_normal(n)
    R = np.linalg.cholesky(M).T
    Tm = np.linalg.solve(R.T, Phi.T)
    z, lam = linalg.augmented_solve(linalg.lu_projection(Tm), np.linalg.solve(R.T, Q), gam)
    qdd = np.linalg.solve(R, np.asarray(z))
    want = np.linalg.solve(np.block([[M, Phi.T], [Phi, np.zeros((n, n))]]), np.concatenate([Q, gam]))
    np.testing.assert_allclose(np.concatenate([qdd, lam]), want, atol=1e-11)


def _slider_crank(q, L=1.0, f=0.5):
    x, y, s, phi = q
    Phi = jnp.stack([x**2 + y**2 - L**2, (x - s) ** 2 + y**2 - L**2, x - L * jnp.cos(phi), y - L * jnp.sin(phi),
                     x - f])
    return Phi


def test_slider_crank_assembly_converges_quadratically():
    """Gauss-Newton with least-squares steps on the report's redundant slider-crank (5 equations, 4 unknowns)."""
    q = jnp.array([0.4, 0.8, 0.9, 1.0])
    jac = jax.jacfwd(_slider_crank)
    norms = []
    for _ in range(5):
        Phi = _slider_crank(q)
        norms.append(float(jnp.linalg.norm(Phi)))
        s = linalg.lstsq_lu(jac(q), -Phi)
        assert int(s.status) == linalg.OK
        q = q + s.x
    np.testing.assert_allclose(q, [0.5, np.sqrt(3) / 2, 1.0, np.pi / 3], atol=1e-14)
    # 1.5e-2, 1.3e-4, 5.8e-9, 1.6e-16 after the first step, as a NumPy prototype of the same iteration
    # gives: quadratic
    e = norms[1:]
    np.testing.assert_allclose(e[:3], [1.5e-2, 1.3e-4, 5.8e-9], rtol=0.1)
    assert e[3] < 1e-14
    assert e[2] <= 2.0 * e[1] ** 2 / e[0] ** 2 * e[1] + 1e-15  # e_{k+1} / e_k^2 does not grow


def test_rank_deficiency_is_a_status_and_the_output_stays_finite():
    # the slider-crank's singular position (x, y, s, phi) = (0, 1, 0, pi/2): rank 3
    J = jax.jacfwd(_slider_crank)(jnp.array([0.0, 1.0, 0.0, np.pi / 2]))
    assert np.linalg.matrix_rank(np.asarray(J)) == 3
    s = linalg.lstsq_lu(J, jnp.ones(5))
    assert int(s.status) == linalg.RANK_DEFICIENT and bool(jnp.all(jnp.isfinite(s.x)))
    t = linalg.minnorm_lu(J.T, jnp.ones(4))
    assert int(t.status) == linalg.RANK_DEFICIENT and bool(jnp.all(jnp.isfinite(t.x)))


@pytest.mark.long
def test_batched_and_differentiable():
    rng = np.random.default_rng(3)
    A = jnp.asarray(rng.standard_normal((8, 12, 9)))
    b = jnp.asarray(rng.standard_normal((8, 12)))
    xs = jax.vmap(lstsq)(A, b).x
    for i in range(8):
        np.testing.assert_allclose(xs[i], lstsq(A[i], b[i]).x, rtol=1e-13, atol=1e-14)
    # gradients against the QR solution's gradients and against central differences
    w = jnp.asarray(rng.standard_normal(9))
    f = lambda A, b: jnp.dot(w, linalg.lstsq_lu(A, b).x)  # noqa: E731
    g = lambda A, b: jnp.dot(w, jnp.linalg.lstsq(A, b)[0])  # noqa: E731
    gA, gb = jax.grad(f, argnums=(0, 1))(A[0], b[0])
    hA, hb = jax.grad(g, argnums=(0, 1))(A[0], b[0])
    np.testing.assert_allclose(gA, hA, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(gb, hb, rtol=1e-9, atol=1e-11)
    E = jnp.asarray(rng.standard_normal((12, 9)))
    h = 1e-6
    fd = (f(A[0] + h * E, b[0]) - f(A[0] - h * E, b[0])) / (2 * h)
    np.testing.assert_allclose(jnp.sum(gA * E), fd, rtol=1e-7)
    u = jnp.asarray(rng.standard_normal(12))
    fm = lambda C, c: jnp.dot(u, linalg.minnorm_lu(C, c).x)  # noqa: E731
    gC = jax.grad(fm)(A[0].T, b[0][:9])
    E2 = jnp.asarray(rng.standard_normal((9, 12)))
    fd2 = (fm(A[0].T + h * E2, b[0][:9]) - fm(A[0].T - h * E2, b[0][:9])) / (2 * h)
    np.testing.assert_allclose(jnp.sum(gC * E2), fd2, rtol=1e-7)


@pytest.mark.parametrize("cond", [1e2, 1e4, 1e6, 1e8])
def test_accuracy_follows_qr_not_the_normal_equations(cond):
    """Dense 120 x 105 matrices with singular values logspaced to 1/cond, consistent b:
    the error stays within 10x of QR's: it grows like cond, as QR's does, not like cond²
    (normal equations).  (Cardenal, Duff and Jiménez give no error figures; the bound is ours.)"""
    rng = np.random.default_rng(int(np.log10(cond)))
    m, n = 120, 105
    U, _ = np.linalg.qr(rng.standard_normal((m, m)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = U[:, :n] @ np.diag(np.logspace(0, -np.log10(cond), n)) @ V.T
    x_true = rng.standard_normal(n)
    b = A @ x_true
    err = _rel(linalg.lstsq_lu(A, b).x, x_true)
    Q, R = np.linalg.qr(A)
    err_qr = _rel(np.linalg.solve(R, Q.T @ b), x_true)
    err_ne = _rel(np.linalg.solve(A.T @ A, A.T @ b), x_true)
    assert err <= 10 * max(err_qr, 1e-15), (err, err_qr)
    if cond >= 1e6:
        assert err_ne > 100 * err  # the normal equations lose cond² (the comparison can fail)


def test_flop_model_reproduces_the_reports_ratios():
    n = 1e6  # leading order
    for rho, prop, pw in [(1.05, 0.556, 1.036), (1.10, 0.612, 1.070), (1.15, 0.668, 1.101)]:
        f = linalg.flops(rho * n, n)
        assert abs(f["projection"] / f["normal_equations"] - prop) < 1e-3
        assert abs(f["peters_wilkinson"] / f["normal_equations"] - pw) < 1e-3
    # break-even with the normal equations near m/n = 1.442
    rhos = np.linspace(1.3, 1.6, 3001)
    r = [linalg.flops(x * n, n)["projection"] / linalg.flops(x * n, n)["normal_equations"] for x in rhos]
    assert abs(rhos[int(np.argmin(np.abs(np.array(r) - 1)))] - 1.442) < 2e-3


def test_bad_input():
    with pytest.raises(ValueError, match="must be tall"):
        linalg.lu_projection(jnp.ones((3, 4)))
    with pytest.raises(ValueError, match="must be wide"):
        linalg.minnorm_lu(jnp.ones((4, 3)), jnp.ones(4))
    with pytest.raises(ValueError, match="b has shape"):
        linalg.lstsq_lu(jnp.ones((4, 3)), jnp.ones(3))
    with pytest.raises(ValueError, match="2-d matrix"):
        linalg.lstsq_lu(jnp.ones((2, 4, 3)), jnp.ones(4))
