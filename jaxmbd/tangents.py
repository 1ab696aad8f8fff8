"""Helpers for forward-mode rules written with ``custom_jvp(..., symbolic_zeros=True)``: the
arguments whose tangents are symbolic zeros are closed over instead of differentiated, so a rule
that receives a model, a configuration and a velocity pays only for the tangents it is given."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero


def _is_symbolic_zero(x):
    return isinstance(x, SymbolicZero)


def is_zero(t):
    """Whether every leaf of the tangent pytree ``t`` is a symbolic zero."""
    return all(_is_symbolic_zero(x) for x in jax.tree_util.tree_leaves(t, is_leaf=_is_symbolic_zero))


def instantiate(t):
    """``t`` with its symbolic zeros made arrays of zeros."""
    return jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype) if _is_symbolic_zero(x) else x, t,
                                  is_leaf=_is_symbolic_zero)


def jvp_of_nonzero(fn, primals, tangents, like):
    """The tangent of fn(*primals) from the arguments whose tangents are not symbolic zeros: the
    others are closed over, so no rule below sees instantiated zeros.  ``like``: a pytree of arrays
    of the output's shapes, for an all-zero result."""
    live = _live(primals, tangents)
    if not live:
        return jax.tree_util.tree_map(jnp.zeros_like, like)
    return _jvp_live(fn, primals, tangents, live)[1]


def value_and_jvp_of_nonzero(fn, primals, tangents):
    """(fn(*primals), its tangent) as :func:`jvp_of_nonzero`, the value from the same evaluation."""
    live = _live(primals, tangents)
    if not live:
        out = fn(*primals)
        return out, jax.tree_util.tree_map(jnp.zeros_like, out)
    return _jvp_live(fn, primals, tangents, live)


def _live(primals, tangents):
    """The positions of the primals whose tangents are not (symbolic) zeros."""
    return [i for i, t in enumerate(tangents) if primals[i] is not None and not is_zero(t)]


def _jvp_live(fn, primals, tangents, live):
    def at(*xs):
        args = list(primals)
        for i, x in zip(live, xs):
            args[i] = x
        return fn(*args)
    return jax.jvp(at, tuple(primals[i] for i in live), tuple(instantiate(tangents[i]) for i in live))
