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


def best_of(c, *args, long=5.0):
    """(best wall time, result) of c(*args), waited for: one run, and two more when it took under
    ``long`` seconds (a long first run is its own steady state)."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(c(*args))
    best = time.perf_counter() - t0
    if best < long:
        for _ in range(2):
            t0 = time.perf_counter()
            out = jax.block_until_ready(c(*args))
            best = min(best, time.perf_counter() - t0)
    return best, out


def compiled_best_of(f, *args, long=5.0):
    """(best wall time, seconds to trace, lower and compile, result) of the jitted f on args
    (:func:`compiled`, then :func:`best_of`)."""
    t_c, c = compiled(f, *args)
    best, out = best_of(c, *args, long=long)
    return best, t_c, out


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
        f"environment: {threads or 'no thread settings'}; XLA flags added by jaxmbd: "
        f"{jaxmbd.runtime.xla_flags_added or 'none'}",
    ]


def jaxmbd_commit():
    """The git commit (and whether modified) of the jaxmbd imported, or "unknown"."""
    import subprocess
    where = Path(jaxmbd.__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev + (" with uncommitted changes" if dirty else "")) if rev else "unknown"


def mjx_subprocess(write_xml, states, steps, timeout, contacts=False):
    """Run bench/mjx_rollout.py in MJX's own environment ($MJX_PYTHON, default
    .venv-mjx): ``write_xml(path)`` writes the model, ``states`` (q, v and
    optionally ctrl) the batch.  Returns its OUT.json as a dict, or None when
    MJX is absent, fails or times out (reported)."""
    import json
    import subprocess
    import tempfile
    here = Path(__file__).resolve().parent
    py = os.environ.get("MJX_PYTHON", str(here.parent / ".venv-mjx" / "bin" / "python"))
    if not Path(py).exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        xp, sp, op = (os.path.join(tmp, n) for n in ("m.xml", "s.npz", "o.json"))
        write_xml(xp)
        np.savez(sp, **states)
        env = dict(os.environ)  # MJX on XLA's default CPU setup (one device), whatever the caller forces
        env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split()
                                    if not f.startswith("--xla_force_host_platform_device_count"))
        args = [py, str(here / "mjx_rollout.py"), xp, sp, str(steps), op] + (["contacts"] if contacts else [])
        try:
            r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"MJX: no result within {timeout} s at batch {len(states['q'])}", flush=True)
            return None
        if r.returncode != 0:
            print("MJX failed:\n" + r.stderr[-2000:], flush=True)
            return None
        return json.loads(Path(op).read_text())
