"""The ``jaxmbd`` command.

  jaxmbd simulate [MODEL] --batch N --t1 T --integrator NAME ...   batched rollout, saved to .npz (+ .png)
  jaxmbd info MODEL                                                topology and predicted operation counts
  jaxmbd bench [MODEL] --batch N ...                               RK4 rollout throughput (steps/s)

MODEL is a built-in model's name or an MJCF (.xml) or URDF (.urdf) file
(``--floating-base`` puts a URDF robot on a free joint).  ``jaxmbd`` alone
runs ``jaxmbd simulate`` with its defaults (the humanoid,
64 randomized initial states).  Bad input gives one line on stderr and exit
status 2."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np

MODELS = {
    "humanoid30": lambda m: m.humanoid30(),
    "chain30": lambda m: m.chain(30),
    "binary_tree5": lambda m: m.binary_tree(5),
    "grid_tree4": lambda m: m.grid_tree(4),
    "pendulum": lambda m: m.pendulum(),
    "double_pendulum": lambda m: m.double_pendulum(),
    "stiff_double_pendulum": lambda m: m.stiff_double_pendulum(),
    "stiff_chain10": lambda m: m.stiff_chain(10),
    "spinning_body": lambda m: m.spinning_body(),
    "andrews_squeezer": lambda m: m.andrews_squeezer(),
    "slider_crank": lambda m: m.slider_crank(),
    "four_bar": lambda m: m.four_bar(),
    "cartesian_double_pendulum": lambda m: m.cartesian_double_pendulum(),
    "hmmwv14": lambda m: m.hmmwv14(),
    "hmmwv14_stiff": lambda m: m.hmmwv14(stiffened=True),
}
INTEGRATORS = {
    "rk4": "RK4", "euler": "SemiImplicitEuler", "dopri5": "Dopri5", "rosenbrock": "RosenbrockNystrom4",
    "sdirk4": "SDIRK4", "trapezoidal": "Trapezoidal", "infl_sdirk": "DescriptorSDIRK4",
    "infl_trap": "DescriptorTrapezoidal",
}
FIXED_STEP = ("rk4", "euler")
MODEL_HELP = f"built-in model ({', '.join(sorted(MODELS))}) or an MJCF (.xml) / URDF (.urdf) file"


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""


def _load_model(name, floating_base=False):
    """A built-in model by name, or an MJCF (.xml) / URDF (.urdf) file.  The
    loader's warning (what it does not model) is printed as one line."""
    import warnings

    import jaxmbd
    if name in MODELS:
        return MODELS[name](jaxmbd.models)
    ext = os.path.splitext(name)[1].lower()
    if ext in (".xml", ".mjcf", ".urdf"):
        if not os.path.isfile(name):
            raise UsageError(f"{name}: no such model file")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                model = (jaxmbd.load_urdf(name, floating_base=floating_base) if ext == ".urdf"
                         else jaxmbd.load_mjcf(name))
            except ValueError as e:
                raise UsageError(str(e)) from None
        for w in caught:
            print(f"jaxmbd: warning: {w.message}", file=sys.stderr)
        return model
    if os.path.exists(name):
        raise UsageError(f"{name}: unknown model file type (expected .xml for MJCF or .urdf)")
    raise UsageError(f"unknown model {name!r}; built-in models: {', '.join(sorted(MODELS))}, "
                     "or an MJCF (.xml) / URDF (.urdf) file")


def _initial_states(model, batch, seed, scale):
    """Randomized initial states around the model's own: q0 ⊕ scale·N(0, 1), v = scale·N(0, 1)."""
    import jax
    import jax.numpy as jnp

    import jaxmbd
    rng = np.random.default_rng(seed)
    dq = scale * rng.standard_normal((batch, model.nv))
    v = scale * rng.standard_normal((batch, model.nv)) + np.asarray(model.v0)
    if isinstance(model, jaxmbd.Mechanism):
        # perturb in the tree, then project onto the constraints (jaxmbd.assemble)
        tq0 = model.to_tree(jnp.asarray(model.q0))
        q = jax.vmap(lambda d: model.from_tree(jaxmbd.integrate_q(model.tree, tq0, model.to_tree(d))))(jnp.asarray(dq))
        q, v, info = jax.vmap(lambda qq, vv: jaxmbd.assemble(model, qq, vv))(q, jnp.asarray(v))
        if not np.all(np.asarray(info["residual"]) < 1e-9):
            raise UsageError("could not assemble the randomized initial states (try a smaller --init-scale)")
    else:
        q0 = jnp.asarray(model.q0)
        q = jax.vmap(lambda d: jaxmbd.integrate_q(model, q0, d))(jnp.asarray(dq))
    q, v = np.asarray(q), np.asarray(v)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
        raise UsageError("non-finite initial state (check --init-scale)")
    return q, v


# --- simulate -------------------------------------------------------------------------------

def _settings(args):
    keys = ("model", "floating_base", "batch", "t1", "integrator", "rtol", "atol", "dt0", "saves", "chunks", "seed", "init_scale",
            "max_steps")
    return {k: getattr(args, k) for k in keys}


def _check_simulate_args(a):
    if a.batch < 1:
        raise UsageError(f"--batch must be >= 1, got {a.batch}")
    if not (math.isfinite(a.t1) and a.t1 > 0):
        raise UsageError(f"--t1 must be a positive time, got {a.t1}")
    if not (math.isfinite(a.rtol) and math.isfinite(a.atol)) or a.rtol < 0 or a.atol < 0 or a.rtol + a.atol <= 0:
        raise UsageError(f"impossible tolerances rtol={a.rtol}, atol={a.atol} (need rtol, atol >= 0, not both 0)")
    if 0 < a.rtol < 1e-14 or (a.rtol == 0 and a.atol < 1e-300):
        raise UsageError(f"rtol={a.rtol} is below what float64 can deliver (>= 1e-14)")
    if a.dt0 is not None and not (math.isfinite(a.dt0) and 0 < a.dt0 <= a.t1):
        raise UsageError(f"--dt0 must be in (0, t1], got {a.dt0}")
    if a.integrator in FIXED_STEP and a.dt0 is None:
        a.dt0 = min(1e-3, a.t1)
    if a.saves < 1 or a.chunks < 1:
        raise UsageError("--saves and --chunks must be >= 1")
    if a.chunks > a.saves:
        raise UsageError(f"--chunks ({a.chunks}) cannot exceed --saves ({a.saves})")
    if a.max_steps < 1:
        raise UsageError("--max-steps must be >= 1")
    if not (math.isfinite(a.init_scale) and a.init_scale >= 0):
        raise UsageError(f"--init-scale must be a finite number >= 0, got {a.init_scale}")


def _atomic_savez(path, **arrays):
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


def _progress(done, total, t, t1, steps, elapsed, tty):
    width = 30
    fill = int(width * done / total)
    line = (f"[{'#' * fill}{'.' * (width - fill)}] chunk {done}/{total}  t = {t:.4g}/{t1:.4g}  "
            f"steps {steps:,}  {elapsed:.1f} s")
    if tty:
        sys.stderr.write("\r" + line + ("\n" if done == total else ""))
    else:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def cmd_simulate(a):
    import jax.numpy as jnp

    import jaxmbd
    from jaxmbd import integrators
    from jaxmbd.integrators.base import STATUS_NAMES

    _check_simulate_args(a)
    model = _load_model(a.model, a.floating_base)
    method = getattr(integrators, INTEGRATORS[a.integrator])()
    out = a.out
    parts = out + ".parts"
    settings = _settings(a)
    per = int(math.ceil(a.saves / a.chunks))
    n_save = per * a.chunks
    ts_all = np.linspace(0.0, a.t1, n_save + 1)[1:]

    q, v = _initial_states(model, a.batch, a.seed, a.init_scale)
    status = np.zeros(a.batch, np.int32)
    done_chunks = 0
    if a.resume:
        meta = os.path.join(parts, "settings.json")
        if not os.path.exists(meta):
            raise UsageError(f"--resume: no unfinished run at {parts}")
        with open(meta) as f:
            old = json.load(f)
        if old != settings:
            diff = ", ".join(f"{k}: {old.get(k)!r} -> {settings.get(k)!r}" for k in settings if old.get(k) != settings[k])
            raise UsageError(f"--resume: settings differ from the unfinished run ({diff})")
        while os.path.exists(os.path.join(parts, f"chunk_{done_chunks:05d}.npz")):
            done_chunks += 1
        if done_chunks:
            last = np.load(os.path.join(parts, f"chunk_{done_chunks - 1:05d}.npz"))
            q, v, status = last["q_end"], last["v_end"], last["status"]
        print(f"resuming at chunk {done_chunks}/{a.chunks} (t = {ts_all[done_chunks * per - 1] if done_chunks else 0.0:.4g})")
    else:
        if os.path.exists(parts):
            shutil.rmtree(parts)
        os.makedirs(parts)
        with open(os.path.join(parts, "settings.json"), "w") as f:
            json.dump(settings, f)

    print(f"jaxmbd {jaxmbd.__version__}: {a.model} ({model.summary()})")
    print(f"{a.batch} members, t1 = {a.t1}, {INTEGRATORS[a.integrator]}, rtol = {a.rtol}, atol = {a.atol}"
          + (f", dt0 = {a.dt0}" if a.dt0 else "") + f", {n_save} save points in {a.chunks} chunks")
    kw = dict(integrator=method, rtol=jnp.asarray(a.rtol), atol=jnp.asarray(a.atol), max_steps=a.max_steps,
              adjoint="none")
    if a.dt0 is not None:
        kw["dt0"] = jnp.asarray(a.dt0)
    tty = sys.stderr.isatty()
    walls, steps_total = [], 0
    drift = np.zeros(2)
    f64 = lambda x: jnp.asarray(np.asarray(x, np.float64))  # noqa: E731 - same types every chunk: one compile
    t_start = time.perf_counter()
    for c in range(done_chunks, a.chunks):
        ts = ts_all[c * per:(c + 1) * per]
        ta = 0.0 if c == 0 else ts_all[c * per - 1]
        w0 = time.perf_counter()
        r = jaxmbd.rollout(model, f64(q), f64(v), t0=f64(ta), t1=f64(ts[-1]), saveat=f64(ts), **kw)
        qs, vs = np.array(r.qs), np.array(r.vs)
        walls.append(time.perf_counter() - w0)
        st = np.asarray(r.status)
        alive = status == 0
        newly = alive & (st != 0)
        status = np.where(alive, st, status).astype(np.int32)
        dead = status != 0
        # saves a failed member did not reach (all of them if it failed in an earlier chunk) are NaN; see status
        reached = (ts[None, :] <= np.asarray(r.t)[:, None]) & (alive & (st == 0) | newly)[:, None]
        qs[~reached], vs[~reached] = np.nan, np.nan
        acc, rej = np.asarray(r.stats["accepted"]), np.asarray(r.stats["rejected"])
        if r.residuals is not None:
            res = np.asarray(r.residuals)[reached]
            drift = np.maximum(drift, res.max(0) if res.size else 0.0)
        steps_total += int(acc[alive].sum())
        q = np.where(dead[:, None], q, qs[:, -1])
        v = np.where(dead[:, None], v, vs[:, -1])
        _atomic_savez(os.path.join(parts, f"chunk_{c:05d}.npz"), ts=ts, qs=qs, vs=vs, q_end=q, v_end=v,
                      status=status, accepted=acc, rejected=rej)
        _progress(c + 1, a.chunks, float(ts[-1]), a.t1, steps_total, time.perf_counter() - t_start, tty)

    # assemble
    chunks = [np.load(os.path.join(parts, f"chunk_{c:05d}.npz")) for c in range(a.chunks)]
    ts = np.concatenate([ch["ts"] for ch in chunks])
    qs = np.concatenate([ch["qs"] for ch in chunks], axis=1)
    vs = np.concatenate([ch["vs"] for ch in chunks], axis=1)
    accepted = np.sum([ch["accepted"] for ch in chunks], axis=0)
    rejected = np.sum([ch["rejected"] for ch in chunks], axis=0)
    status = chunks[-1]["status"]
    assert np.all(np.diff(ts) > 0) and ts.size == n_save
    _atomic_savez(out, ts=ts, qs=qs, vs=vs, status=status, accepted=accepted, rejected=rejected,
                  settings=np.array(json.dumps(settings)), nq=np.array(model.nq), nv=np.array(model.nv))
    shutil.rmtree(parts)

    # summary
    print(f"members: {a.batch}; accepted steps: {int(accepted.sum()):,} (mean {accepted.mean():.1f} per member); "
          f"rejected: {int(rejected.sum()):,}")
    fails = {STATUS_NAMES[int(s)]: int(np.sum(status == s)) for s in np.unique(status) if s != 0}
    if fails:
        bad = np.flatnonzero(status != 0)
        print("failures: " + ", ".join(f"{k}: {v}" for k, v in fails.items())
              + f" (members {bad[:10].tolist()}{'...' if bad.size > 10 else ''}; their saves after the failure are NaN)")
    else:
        print("failures: none")
    if isinstance(model, jaxmbd.Mechanism):
        print(f"constraint drift (this run's chunks): max |Φ| = {drift[0]:.1e}, max |Φ_q v| = {drift[1]:.1e} "
              f"({model.nc} constraint equations)")
    else:
        print("constraint drift: n/a (kinematic tree, no loop constraints)")
    if walls:
        # the first chunk includes compilation; estimate it as the excess over the later chunks' mean
        compile_s = max(walls[0] - (np.mean(walls[1:]) if len(walls) > 1 else 0.0), 0.0)
        sps = steps_total / max(sum(walls) - compile_s, 1e-9)
        print(f"throughput: {sps:,.0f} member-steps/s; compile (first chunk minus a typical chunk): "
              f"{compile_s:.2f} s; wall {sum(walls):.2f} s")
    print(f"wrote {out}")
    if not a.no_plot:
        png = os.path.splitext(out)[0] + ".png"
        _plot(png, ts, qs, a.model)
        print(f"wrote {png}")
    return 0


def _plot(path, ts, qs, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    k = min(qs.shape[2], 6)
    fig, axes = plt.subplots(k, 1, figsize=(7, 1.6 * k + 0.6), sharex=True, squeeze=False)
    for i in range(k):
        ax = axes[i, 0]
        for b in range(min(qs.shape[0], 8)):
            ax.plot(ts, qs[b, :, i], lw=0.8)
        ax.set_ylabel(f"q[{i}]")
    axes[-1, 0].set_xlabel("t (s)")
    fig.suptitle(f"{title}: first {k} coordinates, first {min(qs.shape[0], 8)} members")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- info, bench ---------------------------------------------------------------------------

def cmd_info(a):
    from jaxmbd import cost
    import jaxmbd
    model = _load_model(a.model, a.floating_base)
    print(f"{a.model}: {model.summary()}")
    if isinstance(model, jaxmbd.Mechanism):
        kinds = ", ".join(f"{n} ({k[0]})" for n, k in zip(model.loop_names, model.loops))
        print(f"loop constraints: {kinds}; coordinates: {', '.join(model.joint_names)}")
        print("the tree (cut open at the loop constraints):")
        model = model.tree
    r = cost.analyze(model)
    print(f"D0 = {r.D0}, D1 = {r.D1}, D2 = {r.D2} (expanded graph), nnz(H) = {r.nnz}")
    fmt = lambda c: f"{c[0]}m + {c[1]}a"  # noqa: E731
    print(f"predicted operations: CRBA {fmt(r.crba)}, LTDL factor {fmt(r.factor_ltdl)}, solve {fmt(r.solve_ltdl)}, "
          f"dense factor {fmt(r.factor_dense)}, RNEA {fmt(r.rnea)}, ABA {fmt(r.aba)}")
    print(f"predicted factor+solve speed-up sparse over dense: {cost.predicted_factor_solve_speedup(model):.2f}x")
    return 0


def rk4_rollout_rate(model, q, v, steps, dt, dynamics, shard=False):
    """RK4 rollout throughput of a batch (q, v): (member-steps per second, best
    of 2 timed runs after a warm-up; seconds to compile; final positions).
    shard: spread the batch over every JAX device (rollout's ``shard``)."""
    import jax

    import jaxmbd
    from jaxmbd import integrators
    f = jax.jit(lambda q, v: jaxmbd.rollout(model, q, v, t1=dt * steps, integrator=integrators.RK4(), dt0=dt,
                                            max_steps=steps + 1, adjoint="none", dynamics=dynamics,
                                            shard=shard).qs)
    best, t_compile, out = compile_and_time(f, q, v)
    return q.shape[0] * steps / best, t_compile, np.asarray(out)


def compile_and_time(f, *args):
    """(best of 2 wall times after a warm-up, seconds to lower and compile,
    the result) for the jitted f on args."""
    t0 = time.perf_counter()
    c = f.lower(*args).compile()
    t_compile = time.perf_counter() - t0
    c(*args).block_until_ready()
    best = np.inf
    for _ in range(2):
        t0 = time.perf_counter()
        out = c(*args).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return best, t_compile, out


def cmd_bench(a):
    import jax
    import jax.numpy as jnp

    import jaxmbd
    model = _load_model(a.model, a.floating_base)
    if isinstance(model, jaxmbd.Mechanism):
        raise UsageError(f"{a.model} has loop constraints; jaxmbd bench measures kinematic trees "
                         "(use jaxmbd simulate, or bench/dae.py)")
    print(f"jaxmbd {jaxmbd.__version__} on {jax.devices()[0]}: {a.model}, RK4, dt = {a.dt0}, "
          f"{a.steps} steps per member")
    for B in a.batch:
        if B < 1:
            raise UsageError(f"--batch must be >= 1, got {B}")
        q, v = (jnp.asarray(x) for x in _initial_states(model, B, 0, 0.1))
        for method in ("aba", "aba_unrolled", "crba"):
            rate, comp, _ = rk4_rollout_rate(model, q, v, a.steps, a.dt0, method)
            print(f"batch {B:6d} {method:12s}: {rate:12,.0f} steps/s  (compile {comp:.2f} s)")
    print("for the comparison with MuJoCo, see bench/throughput.py")
    return 0


# --- entry point -------------------------------------------------------------------------------

def _parser():
    p = argparse.ArgumentParser(prog="jaxmbd", description="Differentiable, batched multibody dynamics in JAX.")
    sub = p.add_subparsers(dest="cmd", metavar="{simulate,info,bench}")
    s = sub.add_parser("simulate", help="batched rollout of a model, saved to .npz (and a .png plot)")
    s.add_argument("model", nargs="?", default="humanoid30", help=MODEL_HELP)
    s.add_argument("--batch", type=int, default=64, help="members (randomized initial states)")
    s.add_argument("--t1", type=float, default=1.0, help="end time (s)")
    s.add_argument("--integrator", default="rk4", choices=sorted(INTEGRATORS))
    s.add_argument("--rtol", type=float, default=1e-6)
    s.add_argument("--atol", type=float, default=1e-6)
    s.add_argument("--dt0", type=float, default=None, help="step (fixed-step methods; default 1e-3) or first step")
    s.add_argument("--saves", type=int, default=100, help="save points, uniform in (0, t1]")
    s.add_argument("--chunks", type=int, default=10, help="time chunks; each is written when done")
    s.add_argument("--max-steps", type=int, default=100_000, help="step attempts per member and chunk")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--init-scale", type=float, default=0.3, help="spread of the random initial states")
    s.add_argument("--out", default="jaxmbd_run.npz")
    s.add_argument("--resume", action="store_true", help="continue an interrupted run with the same settings")
    s.add_argument("--no-plot", action="store_true")
    s.set_defaults(func=cmd_simulate)
    i = sub.add_parser("info", help="topology and predicted operation counts of a model")
    i.add_argument("model", help=MODEL_HELP)
    i.set_defaults(func=cmd_info)
    b = sub.add_parser("bench", help="RK4 rollout throughput (steps/s) at several batch sizes")
    b.add_argument("model", nargs="?", default="humanoid30", help=MODEL_HELP)
    b.add_argument("--batch", type=int, nargs="+", default=[1, 64, 1024])
    b.add_argument("--steps", type=int, default=100)
    b.add_argument("--dt0", type=float, default=1e-3)
    b.set_defaults(func=cmd_bench)
    for sp in (s, i, b):
        sp.add_argument("--floating-base", action="store_true",
                        help="URDF files: a free joint between the world and the root link")
    return p


def _single_threaded_eigen():
    """XLA:CPU's multithreaded Eigen pool is reported to wedge on vmapped
    programs (all threads parked, no progress), which single-threaded Eigen
    avoids; a long batch run must not hang, so the command runs that way
    unless the user's XLA_FLAGS say otherwise.  Takes effect only before JAX's backend
    starts, which importing jaxmbd does not do."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()


def main(argv=None):
    _single_threaded_eigen()
    p = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("simulate", "info", "bench", "-h", "--help"):
        argv = ["simulate"] + argv
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as e:
        print(f"jaxmbd: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\njaxmbd: interrupted; finished chunks are kept, continue with --resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
