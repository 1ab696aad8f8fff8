"""Command line: ``jaxmbd [model]`` prints a summary of a built-in model and
times one forward-dynamics evaluation."""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

MODELS = {
    "humanoid30": lambda: __import__("jaxmbd").models.humanoid30(),
    "chain30": lambda: __import__("jaxmbd").models.chain(30),
    "binary_tree5": lambda: __import__("jaxmbd").models.binary_tree(5),
    "grid_tree4": lambda: __import__("jaxmbd").models.grid_tree(4),
}


def main(argv=None):
    import jaxmbd

    p = argparse.ArgumentParser(prog="jaxmbd", description=__doc__)
    p.add_argument("model", nargs="?", default="humanoid30", choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=1024, help="batch size for the vmapped timing")
    args = p.parse_args(argv)

    model = MODELS[args.model]()
    print(f"jaxmbd {jaxmbd.__version__}  model {args.model}: {model.summary()}")
    print(f"device: {jax.devices()[0]}  dtype: {jnp.zeros(()).dtype}")
    rng = np.random.default_rng(0)
    q = jaxmbd.normalize_q(model, jaxmbd.neutral_q(model) + 0.3 * jnp.asarray(rng.normal(size=model.nq)))
    v = jnp.asarray(rng.normal(size=model.nv))
    tau = jnp.zeros(model.nv)
    for method in ("aba", "crba"):
        fd = jax.jit(lambda q, v, t, m=method: jaxmbd.forward_dynamics(model, q, v, t, method=m))
        t0 = time.perf_counter()
        qdd = fd(q, v, tau).block_until_ready()
        t_compile = time.perf_counter() - t0
        reps = 200
        t0 = time.perf_counter()
        for _ in range(reps):
            qdd = fd(q, v, tau)
        qdd.block_until_ready()
        t_run = (time.perf_counter() - t0) / reps
        bfd = jax.jit(jax.vmap(fd))
        Q = jnp.broadcast_to(q, (args.batch, model.nq))
        V = jnp.broadcast_to(v, (args.batch, model.nv))
        T = jnp.zeros((args.batch, model.nv))
        bfd(Q, V, T).block_until_ready()
        t0 = time.perf_counter()
        for _ in range(10):
            out = bfd(Q, V, T)
        out.block_until_ready()
        t_batch = (time.perf_counter() - t0) / 10
        res = jnp.abs(jaxmbd.inverse_dynamics(model, q, v, qdd) - tau).max()
        print(f"forward_dynamics[{method}]: compile {t_compile:.2f} s, one call {t_run * 1e6:.1f} us, "
              f"batch {args.batch}: {t_batch * 1e3:.2f} ms ({args.batch / t_batch:,.0f} evals/s); "
              f"|ID(FD(tau)) - tau| = {float(res):.1e}")
    print(f"qdd[:6] = {np.array2string(np.asarray(qdd[:6]), precision=4)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
