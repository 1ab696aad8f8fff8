"""What a Jacobian of the rigid-body dynamics costs, against one evaluation and against
Pinocchio's analytical derivatives (Carpentier and Mansard, RSS 2018) of the same robot on
the same machine: the gymnasium ant (free base, 8 hinges), float64.

jaxmbd, per member of a batch (``jax.jit(jax.vmap(f))``): the ABA (``forward_dynamics``,
the default method), its Jacobian in the 2 nv tangent directions as the implicit integrators
build it (``ChartODE.config`` for the positions, one ``jax.jacfwd``), a user's plain
``jax.jacfwd`` of ``forward_dynamics`` in (q, v) (nq + nv directions), the RNEA and its
Jacobian in the 2 nv tangent directions, the kinematics (``kinematics_and_axes``: the bodies'
world poses and the DoFs' world axes, what the contact rows are built from) and its Jacobian in
the nv position tangent directions; each beside the same Jacobian by forward-mode autodiff of the
passes without the derivative rules.  Pinocchio: ``aba``,
``computeABADerivatives``, ``rnea``, ``computeRNEADerivatives``, one call at a time from Python
(each call's Python overhead, about 1 µs, included).

    python bench/derivatives.py [--batch 64] [--no-write]
Writes bench/results/derivatives_<backend>.md."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).parent))

import jaxmbd  # noqa: E402
from jaxmbd.aba import _aba_passes  # noqa: E402
from jaxmbd.inputs import Inputs  # noqa: E402
from jaxmbd.dynamics import forward_dynamics  # noqa: E402
from jaxmbd.odes import ChartODE  # noqa: E402
from jaxmbd.rnea import _rnea_passes, rnea  # noqa: E402
from jaxmbd import kinematics as K  # noqa: E402
from jaxmbd.kinematics import kinematics_and_axes  # noqa: E402

from common import machine, per_call, write_result  # noqa: E402


def ant_path():
    import gymnasium
    return Path(gymnasium.__file__).parent / "envs/mujoco/assets/ant.xml"


def states(m, batch, seed=0):
    rng = np.random.default_rng(seed)
    q = np.repeat(np.asarray(m.q0)[None], batch, 0)
    q[:, 3:7] = rng.normal(size=(batch, 4))
    q[:, 3:7] /= np.linalg.norm(q[:, 3:7], axis=1, keepdims=True)
    q[:, 7:] += rng.uniform(-0.5, 0.5, (batch, m.nq - 7))
    return jnp.asarray(q), jnp.asarray(rng.normal(size=(batch, m.nv)))


def tangent_jac(m, f):
    """f's Jacobian in the nv position tangents and the nv velocities, one jacfwd (as the integrators)."""
    def g(q, v):
        ode = ChartODE(m, q)
        return jax.jacfwd(lambda z: f(ode.config(z[:m.nv]), z[m.nv:]))(jnp.concatenate([jnp.zeros(m.nv), v]))
    return g


def position_jac(m, f):
    """f's Jacobian in the nv position tangents alone (f of q only: the kinematics)."""
    def g(q, v):
        ode = ChartODE(m, q)
        return jax.jacfwd(lambda z: f(ode.config(z), v))(jnp.zeros(m.nv))
    return g


def pinocchio_rows(path, target):
    import pinocchio as pin
    pm = pin.buildModelFromMJCF(str(path))
    pd = pm.createData()
    rng = np.random.default_rng(1)
    q, v, x = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq)), rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    calls = {"ABA": lambda: pin.aba(pm, pd, q, v, x),
             "ABA derivatives (computeABADerivatives)": lambda: pin.computeABADerivatives(pm, pd, q, v, x),
             "RNEA": lambda: pin.rnea(pm, pd, q, v, x),
             "RNEA derivatives (computeRNEADerivatives)": lambda: pin.computeRNEADerivatives(pm, pd, q, v, x)}
    return {k: per_call(f, target, 3, sync=lambda r: r) for k, f in calls.items()}, pin.__version__, pm.nv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--target", type=float, default=0.5)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    path = ant_path()
    m = dataclasses.replace(jaxmbd.load_mjcf(str(path), warn=False), forces=None)
    B = a.batch
    q, v = states(m, B)
    tau = jnp.asarray(np.random.default_rng(2).normal(size=(B, m.nv)))

    aba = lambda q, v, t: forward_dynamics(m, q, v, t)                         # noqa: E731
    aba_plain = lambda q, v, t: _aba_passes(m, q, v, t, None)[0]              # noqa: E731
    rn = lambda q, v, t: rnea(m, q, v, t)                                      # noqa: E731
    rn_plain = lambda q, v, t: _rnea_passes(m, q, v, t, None)                 # noqa: E731
    kin = lambda q, v, t: kinematics_and_axes(m, q)                            # noqa: E731
    kin_plain = lambda q, v, t: K._poses_axes_value(m, K.joint_state(m, q))   # noqa: E731

    rhs = lambda q, v, t: ChartODE(m, q, Inputs(tau=t)).g(0.0, jnp.zeros(m.nv), v)  # noqa: E731
    rhs_jac = lambda q, v, t: ChartODE(m, q, Inputs(tau=t)).g_and_jac(0.0, jnp.zeros(m.nv), v)  # noqa: E731

    def with_tau(jacf, f):
        return lambda q, v, t: jacf(m, lambda q, v: f(q, v, t))(q, v)

    def user_jac(f):
        return lambda q, v, t: jax.jacfwd(f, argnums=(0, 1))(q, v, t)

    cases = [("ABA (forward_dynamics)", aba, "ABA"),
             ("its Jacobian, 2 nv tangent directions (the integrators' path)", with_tau(tangent_jac, aba), "ABA"),
             ("the same by forward mode of the passes, no rules", with_tau(tangent_jac, aba_plain), "ABA"),
             ("a user's jax.jacfwd of forward_dynamics in (q, v)", user_jac(aba), "ABA"),
             ("the implicit integrators' right-hand side g (ChartODE.g)", rhs, "g"),
             ("its value and Jacobians (ChartODE.g_and_jac)", rhs_jac, "g"),
             ("RNEA", rn, "RNEA"),
             ("its Jacobian, 2 nv tangent directions", with_tau(tangent_jac, rn), "RNEA"),
             ("the same by forward mode of the passes, no rules", with_tau(tangent_jac, rn_plain), "RNEA"),
             ("kinematics (poses and world axes, kinematics_and_axes)", kin, "kin"),
             ("its Jacobian, nv position tangent directions", with_tau(position_jac, kin), "kin"),
             ("the same by forward mode of the pass, no rule", with_tau(position_jac, kin_plain), "kin")]
    t_of, rows = {}, []
    for name, f, base in cases:
        fb = jax.jit(jax.vmap(f))
        t0 = time.perf_counter()
        jax.block_until_ready(fb(q, v, tau))
        comp = time.perf_counter() - t0
        t = per_call(lambda: fb(q, v, tau), a.target, 3) / B
        t_of.setdefault(base, t)
        rows.append((name, t, t / t_of[base], comp))
        print(f"{name}: {t * 1e6:.1f} µs ({t / t_of[base]:.1f}x), first call {comp:.1f} s", flush=True)
    pin_t, pin_version, pin_nv = pinocchio_rows(path, a.target)

    lines = [f"# Rigid-body derivatives: the ant (nv = {m.nv}), batch {B}, against Pinocchio", "",
             f"`python bench/derivatives.py --batch {B}`; float64, `--xla_cpu_multi_thread_eigen=false`; median "
             "of 3 timing loops of about 0.5 s each; jaxmbd per member = per batched call / batch, random "
             "orientations, joint angles, velocities and forces.", "",
             "| jaxmbd | per member (µs) | ratio | first call (s) |", "|---|---|---|---|"]
    for name, t, r, comp in rows:
        lines.append(f"| {name} | {t * 1e6:.1f} | {r:.1f}x | {comp:.1f} |")
    lines += ["", f"Pinocchio {pin_version} on the same file (nv = {pin_nv}), one call at a time from Python:", "",
              "| Pinocchio | per call (µs) | ratio |", "|---|---|---|"]
    for name, t in pin_t.items():
        base = pin_t["ABA"] if name.startswith("ABA") else pin_t["RNEA"]
        lines.append(f"| {name} | {t * 1e6:.1f} | {t / base:.1f}x |")
    jac = rows[1][1]
    lines += ["", f"The ABA's Jacobian (integrators' path) per member against Pinocchio's derivatives per call: "
              f"{jac / pin_t['ABA derivatives (computeABADerivatives)']:.1f}x the time.", "", *machine()]
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_write:
        write_result(Path(__file__).parent / "results", "derivatives", text)


if __name__ == "__main__":
    main()
