import os
import sys

# Tests are dominated by XLA compile time, not run time: ask the CPU backend for
# less optimisation (same numerics, faster compiles).  Single-threaded Eigen:
# XLA:CPU's multithreaded Eigen pool is reported to wedge on vmapped graphs
# (PyAutoFit#1528; benchmark runs here also hung, all threads in a futex
# wait), and the tests run one xdist worker per core anyway.  Set before JAX
# starts.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true "
                      "--xla_cpu_multi_thread_eigen=false")

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import settings  # noqa: E402

# Few, deterministic examples: each one compiles a new topology.
settings.register_profile("jaxmbd", max_examples=8, deadline=None, derandomize=True, print_blob=True)
settings.load_profile("jaxmbd")


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
