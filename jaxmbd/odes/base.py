"""What the integrators integrate: the interface every ODE of jaxmbd offers,
and the dense iteration matrix built from it.

An ODE here is a second-order system y'' = g(t, y, y') on R^n written in a
local chart around the step's start (y = 0 there, y'(0) = the start's
rate); see :mod:`jaxmbd.odes.chart`.  An integrator (:mod:`jaxmbd.integrators`)
sees only this interface: it never imports a physics module, and a new
kind of equations (a tree, a constrained mechanism, a system with contact)
is a new subclass here, not an edit of the methods.

Capabilities are marker classes, checked with ``isinstance``:
:class:`DescriptorODE` for the (q̈, λ) residual the descriptor-form codes
iterate on."""

from __future__ import annotations

import abc

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np


def value_and_jacobians(g, y, yd, reverse_only=False, cotangent_rank=None, held=None, inner=None):
    """(g(y, y'), ∂g/∂y, ∂g/∂y') by forward mode (:func:`_value_and_jacobians`).

    ``held`` (optional): a function of y alone whose arrays g takes as a third argument,
    g(y, y', held(y)): the work of the configuration (contact rows, the mass matrix's factors).
    The Jacobian then takes the y-directions through held and g, and the y'-directions through g
    with held's value fixed, so that work carries tangents for the n position directions only
    and is done once.

    ``inner`` (optional): a pair (u, u_model) for a piece of g that has a cheaper first-order model
    than forward mode through it: u(y, y') its value and u_model(y, y', y₁, y₁', p₁) a function of
    (y₁, y₁') equal to u(y, y') at (y₁, y₁') = (y, y') with u's first derivatives there, given
    p₁ = held(y₁) (None without ``held``); g then takes u's value as a fourth argument,
    g(y, y', p, u(y, y')) with p = held(y).  The forward Jacobians push the tangents through g with
    u replaced by its model; the pullback of ``reverse_only`` uses u itself.

    ``reverse_only=True`` (the default loop, ``adjoint="checkpoint"``, which
    only reverse mode differentiates) gives the same values with a cheaper
    reverse pass: the pullback is the gradient of ḡ·g(z) + ⟨J̄, J(z)⟩ with ḡ
    and J̄ held constant, and ⟨J̄, J⟩ = Σ_i (J J̄ᵢᵀ)_i is the trace of n JVPs
    of g along the rows J̄ᵢ of the n x 2n cotangent, not the transpose of
    the forward Jacobian's 2n columns.  Forward mode through that form
    raises (a ``jax.custom_vjp``).

    ``cotangent_rank=k`` (with ``reverse_only``) promises that the caller
    uses the Jacobians so that their cotangent J̄ has rank at most k: each
    solve with, or product by, a matrix made from J contributes one
    rank-one term r̄ bᵀ, and terms that share r̄ merge
    (:class:`jaxmbd.integrators.RosenbrockNystrom4`: k = 5, whatever n).
    The pullback then takes k JVPs instead of n: J̄ = Q Qᵀ J̄ with Q an
    orthonormal basis of the range of J̄ Ω (a fixed 2n x k sketch; the
    range finder is exact when rank J̄ <= k), and
    ⟨J̄, J⟩ = Σ_j q_jᵀ J (J̄ᵀ q_j).  A wrong promise gives wrong gradients,
    so only a caller whose structure a test checks may make it."""
    if reverse_only:
        return _value_and_jacobians_rev(g, y, yd, cotangent_rank, held, inner)
    return _value_and_jacobians(g, y, yd, held, inner)


def _sketch(m, k, dtype):
    """A fixed m x k Gaussian test matrix for the range finder of the pullback."""
    return jnp.asarray(np.random.default_rng(20261125).standard_normal((m, k)), dtype)


def _value_and_jacobians(g, y, yd, held=None, inner=None):
    """(g, ∂g/∂y, ∂g/∂y'): without ``held`` or ``inner``, one forward-mode pass over [y; y']
    (2n directions); with them, the n y-directions through held and g, then the n y'-directions
    through g alone at held's value, with ``inner``'s piece linearized (:func:`value_and_jacobians`).
    The same numbers either way."""
    n = y.shape[0]
    if inner is not None:
        hold = held if held is not None else (lambda y: None)

        def at_y1(y1):
            p = hold(y1)
            out = g(y1, yd, p, inner[1](y, yd, y1, yd, p))
            return out, (out, p)
        J1, (g0, p0) = jax.jacfwd(at_y1, has_aux=True)(y)
        J2 = jax.jacfwd(lambda yd1: g(y, yd1, p0, inner[1](y, yd, y, yd1, p0)))(yd)
        return g0, J1, J2
    if held is None:
        def both(z):
            out = g(z[:n], z[n:])
            return out, out
        J, g0 = jax.jacfwd(both, has_aux=True)(jnp.concatenate([y, yd]))
        return g0, J[:, :n], J[:, n:]

    def at_y(y):
        p = held(y)
        out = g(y, yd, p)
        return out, (out, p)
    J1, (g0, p0) = jax.jacfwd(at_y, has_aux=True)(y)
    J2 = jax.jacfwd(lambda yd: g(y, yd, p0))(yd)
    return g0, J1, J2


def _converted(f, *example):
    """f closure-converted (equinox) as (call(*args, leaves), leaves, diff): every array f closes
    over an explicit input; diff marks the floating tracers (the ones that get cotangents)."""
    fc = eqx.filter_closure_convert(f, *example)
    dyn, static = eqx.partition(fc, eqx.is_array)
    leaves, tdef = jax.tree_util.tree_flatten(dyn)
    diff = [isinstance(x, jax.core.Tracer) and jnp.issubdtype(x.dtype, jnp.inexact) for x in leaves]

    def call(*args):
        *a, lv = args
        return eqx.combine(jax.tree_util.tree_unflatten(tdef, list(lv)), static)(*a)
    return call, leaves, diff


def _value_and_jacobians_rev(g, y, yd, rank=None, held=None, inner=None):
    """(g(y, y'), ∂g/∂y, ∂g/∂y') with the pullback of :func:`value_and_jacobians` (k =
    ``rank`` JVPs when it is below n, else n).  Every
    array g, held and inner close over becomes an explicit input of the ``custom_vjp``
    (floating tracers get cotangents, integer ones and constants none), so no
    tracer of the forward pass leaks into the reverse one."""
    n = y.shape[0]
    parts = {}                                    # name -> (call, leaves, diff)
    if held is not None:
        parts["h"] = _converted(held, y)
    ph = jax.eval_shape(lambda y: parts["h"][0](y, parts["h"][1]), y) if held is not None else None
    if inner is not None:
        parts["u"] = _converted(inner[0], y, yd)
        parts["uj"] = _converted(inner[1], y, yd, y, yd, ph)
        pu = jax.eval_shape(lambda y, yd: parts["u"][0](y, yd, parts["u"][1]), y, yd)
        parts["g"] = _converted(g, y, yd, ph, pu)
    else:
        parts["g"] = _converted(g, y, yd, *(() if held is None else (ph,)))
    names, bounds, leaves, diff = list(parts), [0], [], []
    for nm in names:
        leaves += list(parts[nm][1])
        diff += parts[nm][2]
        bounds.append(len(leaves))

    def funcs(leaves):
        """name -> the function with its slice of the leaves."""
        out = {}
        for i, nm in enumerate(names):
            call, lv = parts[nm][0], leaves[bounds[i]:bounds[i + 1]]
            out[nm] = (lambda call, lv: lambda *a: call(*a, lv))(call, lv)
        return out

    def full(y, yd, leaves):
        f = funcs(leaves)
        if held is None and inner is None:
            return f["g"](y, yd)
        p = f["h"](y) if held is not None else None
        if inner is None:
            return f["g"](y, yd, p)
        return f["g"](y, yd, p, f["u"](y, yd))

    @jax.custom_vjp
    def value_and_jac(y, yd, *leaves):
        f = funcs(leaves)
        return _value_and_jacobians(f["g"], y, yd, f.get("h"), None if inner is None else (f["u"], f["uj"]))

    def fwd(y, yd, *leaves):
        return value_and_jac(y, yd, *leaves), (y, yd, leaves)

    def bwd(res, cts):
        y, yd, leaves = res
        gbar, J1bar, J2bar = cts
        Jbar = jnp.concatenate([J1bar, J2bar], axis=1)
        if rank is not None and rank < Jbar.shape[0]:
            # J̄ = Q B with B = Qᵀ J̄: k tangents (the rows of B), the outputs weighted by Q's columns
            Q, _ = jnp.linalg.qr(Jbar @ _sketch(Jbar.shape[1], rank, Jbar.dtype))
            tangents, weights = Q.T @ Jbar, Q.T
        else:
            tangents, weights = Jbar, None

        def pairing(y, yd, dl):
            it = iter(dl)
            lv = [next(it) if d else x for x, d in zip(leaves, diff)]

            def along(w):
                return jax.jvp(lambda y, yd: full(y, yd, lv), (y, yd), (w[:n], w[n:]))
            g0, JW = jax.vmap(along, out_axes=(None, 0))(tangents)
            paired = jnp.trace(JW) if weights is None else jnp.vdot(weights, JW)
            return jnp.vdot(gbar, g0) + paired
        ybar, ydbar, dbar = jax.grad(pairing, argnums=(0, 1, 2))(y, yd, [x for x, d in zip(leaves, diff) if d])
        it = iter(dbar)
        return (ybar, ydbar, *[next(it) if d else None for d in diff])

    value_and_jac.defvjp(fwd, bwd)
    return value_and_jac(y, yd, *leaves)


class AbstractODE(abc.ABC):
    """y'' = g(t, y, y') in the chart of the step start.

    Subclasses define :meth:`g`, :meth:`finish` and
    :meth:`position_magnitude`, and set ``time_dependent`` (whether g
    depends on t).  The Jacobians, dg/dt and the iteration matrix have
    default implementations by forward-mode autodiff of :meth:`g`."""
    time_dependent: bool = False
    # whether the Jacobians are only differentiated in reverse mode (simulate's adjoint="checkpoint"
    # builds its ODEs so): their pullback is the cheaper one, see value_and_jacobians
    reverse_only: bool = False

    @abc.abstractmethod
    def g(self, t, y, yd):  # pragma: no cover - interface
        """y'' at (t, y, y')."""

    def g_and_jac(self, t, y, yd, cotangent_rank=None):
        """g and its Jacobians J1 = dg/dy, J2 = dg/dy' (forward-mode autodiff);
        ``cotangent_rank``: see :func:`value_and_jacobians`.  An ODE whose g has work of the
        configuration alone may pass it as ``held`` (:class:`jaxmbd.odes.ChartODE` does)."""
        return value_and_jacobians(lambda y, yd: self.g(t, y, yd), y, yd, self.reverse_only, cotangent_rank)

    def g_t(self, t, y, yd):
        """dg/dt (zero unless ``time_dependent``)."""
        if not self.time_dependent:
            return jnp.zeros_like(y)
        return jax.jvp(lambda s: self.g(s, y, yd), (t,), (jnp.ones_like(t),))[1]

    def iteration_matrix(self, t, v0, hg, linear_solver="dense", cotangent_rank=None):
        """(g at the step start, the factored iteration matrix for h γ = hg).
        The default is dense (:class:`IterationMatrix`); an ODE that knows its
        structure may offer more ``linear_solver`` choices.  ``cotangent_rank``:
        the caller's bound on the rank of the Jacobians' cotangent (see
        :func:`value_and_jacobians`)."""
        if linear_solver != "dense":
            raise ValueError(f"linear_solver={linear_solver!r} is not available for {type(self).__name__}; "
                             "use 'dense'")
        g0, J1, J2 = self.g_and_jac(t, jnp.zeros_like(v0), v0, cotangent_rank)
        return g0, IterationMatrix.build(J1, J2, hg)

    def finish(self, y, yd):  # pragma: no cover - interface
        """Chart point -> the state (q, v) on the manifold."""
        raise NotImplementedError

    def position_magnitude(self, q):  # pragma: no cover - interface
        """Per-DoF magnitude of the position, for the relative error scale."""
        raise NotImplementedError


class DescriptorODE(AbstractODE):
    """An ODE whose unknowns can also be iterated in descriptor form: the
    full chart accelerations and the multipliers z = [q̈; λ] (the thesis's
    Descriptor Form codes, :class:`jaxmbd.integrators.DescriptorSDIRK4`).

    ``nv`` (full DoFs) and ``ind`` (the independent ones) are attributes;
    :meth:`descriptor_start` and :meth:`descriptor_residual` define Ψ."""
    nv: int
    ind: jax.Array

    @abc.abstractmethod
    def descriptor_start(self, t, v0, beta, gh):  # pragma: no cover - interface
        """(z0, a0, ok, LU of ∂Ψ/∂z, λ weights) at the step start."""

    @abc.abstractmethod
    def descriptor_residual(self, t, ytil, ydtil, beta, gh, z, iters=None):  # pragma: no cover - interface
        """Ψ(z) at the state y = ỹ + β a, y' = ỹ' + γh a, a = z[ind]."""


def solve_first_order(M, r1, r2):
    """(I - h γ G)^-1 [r1; r2] through S, for either iteration matrix M:
    x_v = S^-1 (r2 + h γ J1 r1), x_p = r1 + h γ x_v."""
    xv = M.solve_S(r2 + M.hg * M.J1mv(r1))
    return r1 + M.hg * xv, xv


class IterationMatrix(NamedTuple):
    """LU of S = I - h γ J2 - h² γ² J1, the Nyström form of (I - h γ G),
    G = [[0, I], [J1, J2]] (Negrut's thesis, (3.87) and Proposition 1 of §3.4;
    Π = M S as in (4.82)): Π = M S has the pattern of M.

    ``exact``: None (a dense matrix is always the one asked for); the
    sparse form (:class:`jaxmbd.odes.chart.SparseIterationMatrix`) carries a
    flag there instead."""
    lu: tuple
    J1: jax.Array
    hg: jax.Array

    @property
    def exact(self):
        return None

    @staticmethod
    def build(J1, J2, hg):
        n = J1.shape[0]
        S = jnp.eye(n, dtype=J1.dtype) - hg * J2 - hg * hg * J1
        return IterationMatrix(jsl.lu_factor(S), J1, hg)

    def solve_S(self, r):
        return jsl.lu_solve(self.lu, r)

    def J1mv(self, x):
        return self.J1 @ x

    def solve_first_order(self, r1, r2):
        return solve_first_order(self, r1, r2)
