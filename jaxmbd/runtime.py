"""Compiled programs: kept on disk across processes, and freed in a
long-running one.

:func:`enable_compilation_cache` turns on JAX's persistent compilation
cache, so a second run of a notebook or script loads the programs the first
one compiled instead of compiling them again.

XLA's CPU backend keeps a few memory mappings (``/proc/self/maps`` entries)
for every compiled kernel, until the program that owns it is freed, and JAX
keeps every program it compiled in its caches.  A process that compiles many
distinct programs (a long notebook, a parameter sweep over models, a test
suite) can reach the kernel's per-process limit (``vm.max_map_count``,
65,530 by default on Linux), and then the next compile aborts inside XLA's
JIT linker.  :func:`release_compiled_programs` frees JAX's caches when the
process holds more than a threshold of mappings; calling it between
independent pieces of work bounds the count.  Freed programs are compiled
again if they are needed again (results are unchanged).

XLA reads its flags (``XLA_FLAGS``) once per process.  Importing jaxmbd
adds one to them for that process, :data:`YNN_REDUCE_OFF`, unless XLA_FLAGS
already set it or ``JAXMBD_XLA_FLAGS=0`` (:func:`set_xla_flags`): XLA:CPU
(jaxlib 0.10-0.11) hands reductions to YNNPACK, whose per-call cost on the
small arrays of a reverse pass through a tree's recursions is large (without
it, the gradients of batched rollouts of the ant with contact take 8-17% less
time, bench/results/contact_gradients_cpu.md; JAX issue 37465 reports the same
flag as a workaround for another program)."""

from __future__ import annotations

import errno
import gc
import os

import jax
from jax.experimental.compilation_cache import compilation_cache

CACHE_DIR_VARIABLE = "JAXMBD_CACHE_DIR"
"""The environment variable naming the compilation cache's default directory."""


def cache_dir() -> str:
    """The compilation cache's default directory: ``$JAXMBD_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/jaxmbd/jax`` (an absolute XDG_CACHE_HOME), else
    ``~/.cache/jaxmbd/jax``.  The ``jaxmbd simulate`` command uses it too."""
    if os.environ.get(CACHE_DIR_VARIABLE):
        return os.environ[CACHE_DIR_VARIABLE]
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxmbd", "jax")


def enable_compilation_cache(path: str | os.PathLike | None = None, *, min_compile_time_s: float = 0.1) -> str:
    """Keep compiled programs on disk: another process that compiles the same
    program (a notebook run again, the next run of a script) loads it instead
    of compiling it.  This is JAX's persistent compilation cache
    (``jax_compilation_cache_dir``), set up for jaxmbd.

    path: the directory (made if missing); default :func:`cache_dir`
      (``$JAXMBD_CACHE_DIR``, else ``~/.cache/jaxmbd/jax``).
    min_compile_time_s: programs that took at least this long to compile
      are kept.  JAX's own default (1 s) would leave out most of jaxmbd's
      programs, whose compiles each take a fraction of a second to seconds.

    Returns the directory.  Raises OSError when it cannot be made or
    written (nothing is changed then).  The setting is process-wide and
    holds for every later compile (programs compiled before the call are
    not written); a later call with another directory moves it there.

    To clear the cache, delete the directory (``rm -r ~/.cache/jaxmbd/jax``,
    or ``shutil.rmtree(path)``); it grows without bound otherwise.  An entry
    is keyed by the program, the JAX version, the device and the XLA flags,
    so a stale one is never loaded.  The directory is trusted code: do not
    use one that others can write (JAX's warning: they could run code in
    your process)."""
    d = cache_dir() if path is None else os.path.abspath(os.path.expanduser(os.fspath(path)))
    os.makedirs(d, exist_ok=True)
    if not os.access(d, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "not writable", d)
    jax.config.update("jax_compilation_cache_dir", d)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_s))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # JAX opens its cache once, in the directory set at the time: a second call with another
    # directory would otherwise go on writing to the first
    compilation_cache.reset_cache()
    return d


XLA_FLAGS_VARIABLE = "JAXMBD_XLA_FLAGS"
"""Set to 0 to keep jaxmbd from adding to XLA's flags (:func:`set_xla_flags`)."""

YNN_REDUCE_OFF = "--xla_cpu_experimental_ynn_fusion_type=-reduce"
"""XLA:CPU's reductions by its own code generator instead of YNNPACK (module docstring)."""

COMMAND_FLAGS = ("--xla_cpu_multi_thread_eigen=false", "--xla_cpu_emitter_verification_level=0")
"""Added for the ``jaxmbd`` command: XLA:CPU's multithreaded Eigen pool is reported to wedge on
vmapped programs (all threads parked, no progress), which single-threaded Eigen avoids, and a
long batch run must not hang; and XLA:CPU's verifier of every kernel it emits (a check of XLA's
own code generator) is skipped: 5-15% less compile time (bench/results/compile_flags_cpu.md)."""

xla_flags_added: str = ""
"""The flags :func:`set_xla_flags` added in this process ("" if none)."""


def _jaxlib_has(*texts: bytes) -> bool:
    """Whether jaxlib's XLA library holds these texts (a flag's name, its syntax in the help): an
    unknown flag in XLA_FLAGS ends the process, so only flags this jaxlib knows are added."""
    import mmap
    import jaxlib
    path = os.path.join(os.path.dirname(jaxlib.__file__), "libjax_common.so")
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return all(m.find(t) >= 0 for t in texts)
    except (OSError, ValueError):
        return False


def set_xla_flags(command: bool = False) -> str:
    """Add jaxmbd's XLA flags for this process and have XLA read them now; returns what was added.

    Adds :data:`YNN_REDUCE_OFF` (and :data:`COMMAND_FLAGS` with ``command``), each only where
    XLA_FLAGS do not already set that flag and this jaxlib knows it.  XLA reads XLA_FLAGS once, so
    this is done before JAX's backend starts (importing jaxmbd calls it; the ``jaxmbd`` command
    too) and does nothing after XLA has read its flags or with ``JAXMBD_XLA_FLAGS=0``.  The
    variable itself is left as it was, so processes started from this one do not inherit the
    flags (another Python there may have a jaxlib that rejects them)."""
    global xla_flags_added
    if os.environ.get(XLA_FLAGS_VARIABLE, "1") == "0" or xla_flags_added:
        return ""
    try:
        from jax._src import xla_bridge
        if xla_bridge.backends_are_initialized():
            return ""
        from jax._src.lib import xla_client
    except (ImportError, AttributeError):
        return ""
    user = os.environ.get("XLA_FLAGS")
    flags = user or ""
    add = []
    if "xla_cpu_experimental_ynn_fusion_type" not in flags and _jaxlib_has(
            b"xla_cpu_experimental_ynn_fusion_type", b"'+' or '-' prefix"):
        add.append(YNN_REDUCE_OFF)
    if command:
        add += [f for f in COMMAND_FLAGS if f.split("=")[0] not in flags]
    if not add:
        return ""
    os.environ["XLA_FLAGS"] = (flags + " " + " ".join(add)).strip()
    try:
        xla_client.CompileOptions()      # XLA parses XLA_FLAGS here, once for the process
        xla_flags_added = " ".join(add)
    except Exception:                    # noqa: BLE001 - the flags then stay unread; nothing changes
        pass
    finally:
        if user is None:
            del os.environ["XLA_FLAGS"]
        else:
            os.environ["XLA_FLAGS"] = user
    return xla_flags_added


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


__all__ = ["enable_compilation_cache", "cache_dir", "CACHE_DIR_VARIABLE", "release_compiled_programs", "memory_mappings",
           "max_memory_mappings", "DEFAULT_THRESHOLD", "set_xla_flags", "XLA_FLAGS_VARIABLE", "YNN_REDUCE_OFF",
           "COMMAND_FLAGS"]
