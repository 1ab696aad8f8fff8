"""A batch of 100,000 humanoid30 members in one ``jaxmbd.rollout`` call.

Only what is observed is kept: the root body's world position at each save
time (``observe=``, ``keep_states=False``), and the members run ``--chunk``
at a time (``chunk_size=``), so memory stays bounded whatever the batch.
Records wall time, throughput and the process's peak resident memory, and
checks a few members against single ``simulate`` calls.  Writes
bench/results/large_batch_<backend>.md.

    python bench/large_batch.py [--batch 100000] [--steps 10] [--chunk 4096]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd
from jaxmbd import integrators, models
from jaxmbd import Start, Steps, Save, Solver

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import machine  # noqa: E402

DT = 1e-3


def root_position(model, q, v):
    return jaxmbd.forward_kinematics(model, q).pos[0]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=100_000)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--chunk", type=int, default=4096)
    p.add_argument("--saves", type=int, default=5, help="save points over the run")
    a = p.parse_args(argv)

    model = models.humanoid30()
    rng = np.random.default_rng(0)
    dq = jnp.asarray(0.3 * rng.standard_normal((a.batch, model.nv)))
    q0 = jax.jit(jax.vmap(lambda d: jaxmbd.integrate_q(model, model.q0, d)))(dq)
    v0 = jnp.asarray(0.3 * rng.standard_normal((a.batch, model.nv)))
    t1 = DT * a.steps
    ts = jnp.linspace(t1 / a.saves, t1, a.saves)
    kw = dict(t1=t1, integrator=integrators.RK4(), steps=Steps(dt0=DT, max_steps=a.steps + 1),
              save=Save(ts=ts, observe=root_position, states=False), solver=Solver(adjoint="none"))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    run = jax.jit(lambda q, v: jaxmbd.rollout(model, Start(q, v), chunk_size=a.chunk, shard=False, **kw))
    t0 = time.perf_counter()
    c = run.lower(q0, v0).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(c(q0, v0))
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    assert out.qs is None and out.obs.shape == (a.batch, a.saves, 3)
    n_fail = int(jnp.sum(out.status != 0))

    # a few members again, one simulate call each
    idx = rng.choice(a.batch, 8, replace=False)
    dev = 0.0
    for i in idx:
        s = jaxmbd.simulate(model, Start(q0[i], v0[i]), **kw)
        dev = max(dev, float(jnp.max(jnp.abs(s.obs - out.obs[i]))))

    full_gib = a.batch * a.saves * (model.nq + model.nv) * 8 / 2**30
    desc = machine() + [
        f"humanoid30 ({model.summary()}), RK4, dt = {DT}, {a.steps} steps, {a.saves} save points, "
        f"observe = root body position (3 numbers per save), keep_states=False, chunk_size={a.chunk}, one device"]
    rows = [
        "| members | compile (s) | run (s) | member-steps/s | peak RSS (GiB) | RSS before the run (GiB) | "
        "full trajectories would take (GiB) | failed members | max abs(obs - simulate) (8 members) |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {a.batch:,} | {t_compile:.1f} | {wall:.1f} | {a.batch * a.steps / wall:,.0f} | {rss:.2f} | {rss0:.2f} | "
        f"{full_gib:.3f} | {n_fail} | {dev:.1e} |",
    ]
    text = (f"# {a.batch:,} members in one rollout ({jax.default_backend()})\n\n" + "\n".join(f"- {x}" for x in desc)
            + "\n\n" + "\n".join(rows) + "\n")
    print(text)
    outp = HERE / "results" / f"large_batch_{jax.default_backend()}.md"
    outp.write_text(text)
    print(f"written to {outp}")


if __name__ == "__main__":
    main()
