"""Keeping a long-running process healthy: compiled programs hold memory
mappings until they are freed.

XLA's CPU backend keeps a few memory mappings (``/proc/self/maps`` entries)
for every compiled kernel, until the program that owns it is freed, and JAX
keeps every program it compiled in its caches.  A process that compiles many
distinct programs (a long notebook, a parameter sweep over models, a test
suite) can reach the kernel's per-process limit (``vm.max_map_count``,
65,530 by default on Linux), and then the next compile aborts inside XLA's
JIT linker.  :func:`release_compiled_programs` frees JAX's caches when the
process holds more than a threshold of mappings; calling it between
independent pieces of work bounds the count.  Freed programs are compiled
again if they are needed again (results are unchanged)."""

from __future__ import annotations

import gc
import os

import jax

DEFAULT_THRESHOLD = 40_000
"""Mappings above which :func:`release_compiled_programs` frees the caches:
well below Linux's default limit of 65,530, with room for one large compile."""


def memory_mappings() -> int | None:
    """The number of memory mappings this process holds (Linux), else None."""
    try:
        with open(f"/proc/{os.getpid()}/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def max_memory_mappings() -> int | None:
    """The kernel's per-process limit on memory mappings (Linux), else None."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def release_compiled_programs(threshold: int | None = DEFAULT_THRESHOLD) -> bool:
    """Free JAX's compiled programs (``jax.clear_caches()`` and a garbage
    collection) if this process holds more than ``threshold`` memory mappings,
    or always with ``threshold=None``.  Returns whether it freed them.  On
    systems without ``/proc`` it frees only with ``threshold=None``."""
    if threshold is not None:
        n = memory_mappings()
        if n is None or n <= threshold:
            return False
    jax.clear_caches()
    gc.collect()
    return True


__all__ = ["release_compiled_programs", "memory_mappings", "max_memory_mappings", "DEFAULT_THRESHOLD"]
