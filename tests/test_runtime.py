"""The memory-mapping bound (jaxmbd.runtime): XLA:CPU keeps about three memory
mappings per compiled kernel until its program is freed; a process at the
kernel's vm.max_map_count aborts in XLA's JIT linker on its next compile.
The trigger is reproduced in a subprocess whose mapping table is filled to
near the limit; with release_compiled_programs between compiles the count
stays under its threshold, without it the count grows past it."""

import os
import subprocess
import sys

import pytest

from jaxmbd.runtime import max_memory_mappings, memory_mappings

pytestmark = pytest.mark.skipif(memory_mappings() is None or max_memory_mappings() is None,
                                reason="needs /proc (Linux)")

SCRIPT = r"""
import ctypes, mmap, sys
import jax, jax.numpy as jnp
from jaxmbd.runtime import max_memory_mappings, memory_mappings, release_compiled_programs
guard, free, margin, n_max = (int(a) for a in sys.argv[1:])
jax.jit(jnp.sin)(1.0)  # start the backend first
limit = max_memory_mappings()
# fill the table until only `free` entries are left: alternate protections so the kernel cannot merge them
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
page = mmap.PAGESIZE
while memory_mappings() < limit - free:
    # one anonymous region whose every other page is made read-only: one mapping (VMA) per page
    n = limit - free - memory_mappings()
    base = libc.mmap(None, n * page, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert base not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    for j in range(1, n, 2):
        if libc.mprotect(base + j * page, page, mmap.PROT_READ) != 0:
            break
threshold = limit - margin
peak = memory_mappings()
kept = []  # the programs stay alive, as in a test module or a notebook
for i in range(n_max):
    kept.append(jax.jit(lambda x, i=i: jnp.sin(x) * i + jnp.cos(x)))
    kept[-1](jnp.ones(3)).block_until_ready()
    peak = max(peak, memory_mappings())
    if guard:
        release_compiled_programs(threshold)
    elif peak > threshold + 30:
        break
print(peak, threshold, i + 1)
"""


def _run(guard, n):
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(guard), "1500", "1100", str(n)], capture_output=True,
                       text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 0, r.stderr[-2000:]
    return [int(x) for x in r.stdout.split()]


@pytest.mark.long
def test_compiled_programs_hold_mappings_and_the_release_bounds_them():
    # without the release, compiling grows the table past the threshold (the way to the crash) ...
    peak, threshold, n = _run(guard=0, n=400)
    if peak <= threshold:
        pytest.skip(f"compiled programs hold too few mappings here to approach the limit ({peak} <= {threshold})")
    # ... with it, the same compiles stay within one program of the threshold, far from the limit
    peak_g, threshold_g, n_g = _run(guard=1, n=n)
    assert n_g == n and peak_g <= threshold_g + 30, (peak_g, threshold_g)


YNN_SCRIPT = """
import os, sys
import jax, jax.numpy as jnp
import jaxmbd
from jaxmbd import runtime
f = jax.jit(lambda x: jnp.sum(x * x, axis=1))
text = f.lower(jnp.ones((64, 512))).compile().as_text()
print(repr(runtime.xla_flags_added), os.environ.get("XLA_FLAGS"), "__ynn_fusion" in text)
"""


def _import_flags(**env):
    e = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAXMBD_XLA_FLAGS")}
    e.update(JAX_PLATFORMS="cpu", **env)
    r = subprocess.run([sys.executable, "-c", YNN_SCRIPT], capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    added, flags, ynn = r.stdout.split()[-3:]
    return eval(added), flags, ynn == "True"


def test_importing_jaxmbd_turns_off_ynnpack_reductions_for_its_process_only():
    from jaxmbd.runtime import YNN_REDUCE_OFF, _jaxlib_has
    if not _jaxlib_has(b"xla_cpu_experimental_ynn_fusion_type", b"'+' or '-' prefix"):
        pytest.skip("this jaxlib has no YNNPACK fusion flag")
    added, flags, ynn = _import_flags(JAXMBD_XLA_FLAGS="0")
    assert added == "" and flags == "None"
    if not ynn:
        pytest.skip("this XLA does not hand the test's reduction to YNNPACK")
    added, flags, ynn = _import_flags()
    assert added == YNN_REDUCE_OFF and not ynn
    assert flags == "None"               # the variable is left as it was: child processes do not inherit the flag
    # a user's own setting of the flag wins (here: YNNPACK fusions as XLA's default)
    added, flags, ynn = _import_flags(XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=+reduce")
    assert added == "" and flags == "--xla_cpu_experimental_ynn_fusion_type=+reduce" and ynn
