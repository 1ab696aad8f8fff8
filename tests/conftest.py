import os
import sys

# Tests are dominated by XLA compile time, not run time: ask the CPU backend for
# less optimisation (same numerics, faster compiles), and skip the verifier XLA:CPU
# runs on every kernel it emits (5-15% less compile time, bench/results/compile_flags_cpu.md;
# a check of XLA's own code generator, not of ours).  Single-threaded Eigen:
# XLA:CPU's multithreaded Eigen pool is reported to wedge on vmapped graphs
# (PyAutoFit#1528; benchmark runs of jaxmbd also hung, all threads in a futex
# wait), and the tests run one xdist worker per core anyway.  Set before JAX
# starts.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true "
                      "--xla_cpu_multi_thread_eigen=false --xla_cpu_emitter_verification_level=0")

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import settings  # noqa: E402

# Few, deterministic examples: each one compiles a new topology.
settings.register_profile("jaxmbd", max_examples=8, deadline=None, derandomize=True, print_blob=True)
settings.load_profile("jaxmbd")


# --- which checks run when, from their measured durations.  tests/durations.tsv holds each test's
# call time, measured as its header says; a test measured at LONG_S seconds or more is marked long
# (not in the default run; .ci/run runs it after it), one at SLOW_S or more slow (not in CI: before
# a release, pytest -m slow).  JAXMBD_TEST_DURATIONS=<file> appends each test's call time to <file>
# (the table's format).  The cheapest case of a parametrized test is not marked long by the
# table if it takes under KEEP_S, so most tests keep a case in the default run; of its cases the
# table makes long, the cheapest runs in the long pass and the others are slow, so CI's long pass
# holds one case of each test.  Marks written on a test hold as well; a test missing from the
# table keeps only those.
LONG_S = 10.0
KEEP_S = 20.0
SLOW_S = 60.0


def _durations():
    path = os.path.join(os.path.dirname(__file__), "durations.tsv")
    table = {}
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                seconds, nodeid = line.rstrip("\n").split("\t")
                table[nodeid] = float(seconds)
    return table


_RECORD = os.environ.get("JAXMBD_TEST_DURATIONS")   # a path: append each test's call time there


def pytest_runtest_logreport(report):
    if _RECORD and report.when == "call" and not os.environ.get("PYTEST_XDIST_WORKER"):
        with open(_RECORD, "a") as f:
            f.write(f"{report.duration:.1f}\t{report.nodeid}\n")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    table = _durations()
    cheapest = {}
    for item in items:     # a case the table does not list took under LONG_S: it is the cheaper
        if "[" in item.nodeid:
            base = item.nodeid.split("[", 1)[0]
            if base not in cheapest or table.get(item.nodeid, 0.0) < table.get(cheapest[base], 0.0):
                cheapest[base] = item.nodeid
    cheapest = set(cheapest.values())
    long_cases = {}          # a parametrized test's cases the table makes long: its cheapest one
    for item in items:       # stays long, the others are slow (a release's run, not CI's)
        t = table.get(item.nodeid)
        if "[" in item.nodeid and t is not None and t < SLOW_S and _long(t, item.nodeid in cheapest):
            long_cases.setdefault(item.nodeid.split("[", 1)[0], []).append((t, item.nodeid))
    second = {nodeid for cases in long_cases.values() for _, nodeid in sorted(cases)[1:]}
    for item in items:
        t = table.get(item.nodeid)
        if t is None:
            continue
        if t >= SLOW_S or item.nodeid in second:
            item.add_marker(pytest.mark.slow)
        if _long(t, item.nodeid in cheapest):
            item.add_marker(pytest.mark.long)


def _long(t, cheapest):
    return t >= KEEP_S or (t >= LONG_S and not cheapest)


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path, monkeypatch):
    """Every test runs in its own empty directory (its tmp_path), so none reads or writes the
    checkout: the command's default outputs (jaxmbd_run.npz, .png), or a stale file left there by
    a run of the README's first command, stay out of the tests."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _bound_memory_mappings():
    """Keep the worker's memory mappings bounded: XLA:CPU holds about three per
    compiled kernel until its program is freed, and a worker that reached the
    kernel's vm.max_map_count (65,530) aborted inside XLA's JIT linker on its
    next compile (tests/test_runtime.py reproduces it).  After every test,
    compiled programs are freed once the worker holds more than 40,000
    mappings (jaxmbd.release_compiled_programs), so programs shared between
    the tests of a module are kept until then."""
    yield
    import jaxmbd
    jaxmbd.release_compiled_programs()


# --- optional compile profile: JAXMBD_TEST_PROFILE=<dir> writes, per worker, one
# JSON line per test with the seconds spent tracing, lowering and compiling
# (and compile seconds saved by persistent-cache hits).
_PROFILE_DIR = os.environ.get("JAXMBD_TEST_PROFILE")
if _PROFILE_DIR:
    import json
    import time as _time
    from jax._src import monitoring as _monitoring

    _acc = {}

    def _listener(event, duration, **kw):
        key = event.rsplit("/", 1)[-1]
        _acc[key] = _acc.get(key, 0.0) + duration
        _acc[key + "_n"] = _acc.get(key + "_n", 0) + 1

    _monitoring.register_event_duration_secs_listener(_listener)

    @pytest.fixture(autouse=True)
    def _profile(request):
        _acc.clear()
        t = _time.perf_counter()
        yield
        rec = dict(test=request.node.nodeid, wall=_time.perf_counter() - t, **_acc)
        os.makedirs(_PROFILE_DIR, exist_ok=True)
        with open(os.path.join(_PROFILE_DIR, f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(rec) + "\n")
