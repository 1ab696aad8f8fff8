"""Helpers shared by the benchmark scripts: timing loops, compile timing and
the machine description recorded with every result."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd


def per_call(fn, target, repeats, sync=jax.block_until_ready, warmup=True):
    """Median seconds per call of fn(); each repeat loops long enough to last
    about `target` seconds, waiting (sync) for every call's result.  A call
    longer than `target` is timed `repeats` times."""
    def loop(n):
        t0 = time.perf_counter()
        for _ in range(n):
            sync(fn())
        return time.perf_counter() - t0

    if warmup:
        loop(1)
    n, t = 1, loop(1)
    while t < target:
        n = max(2 * n, int(n * 1.2 * target / max(t, 1e-7)))
        t = loop(n)
    return statistics.median([t] + [loop(n) for _ in range(repeats - 1)]) / n


def compiled(f, *args):
    """(seconds to trace, lower and compile f for args, the compiled function)."""
    t0 = time.perf_counter()
    c = jax.jit(f).lower(*args).compile()
    return time.perf_counter() - t0, c


def write_result(out_dir, name, text):
    """Write a result table to ``out_dir/<name>_<backend>.md``; returns the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}_{jax.default_backend()}.md"
    path.write_text(text)
    print(f"written to {path}")
    return path


def machine(versions=""):
    """Lines describing this machine and software; `versions` adds peers' versions."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    dev = jax.devices()[0]
    threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS") if k in os.environ}
    return [
        f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"host: {platform.node()} ({platform.system()} {platform.machine()})",
        f"cpu: {cpu}, {os.cpu_count()} logical cores ({len(os.sched_getaffinity(0))} usable), "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min) at start",
        f"jax {jax.__version__}, backend {jax.default_backend()}, device {dev.device_kind} ({dev.platform}), "
        f"dtype {jnp.zeros(()).dtype}",
        f"jaxmbd {jaxmbd.__version__}{versions}, numpy {np.__version__}, python {platform.python_version()}",
        f"environment: {threads or 'no thread settings'}",
    ]
