"""jaxmbd.enable_compilation_cache: a second process loads the programs the
first one compiled instead of compiling them.  The cache is process-wide and
stays on once turned on, so every run that turns it on is a subprocess."""

import os
import subprocess
import sys

import pytest

import jaxmbd

# Compiles something before turning the cache on (as a notebook may), then a
# program into a first directory (argv[1]), then moves the cache to the
# directory of the test (argv[2], or by default JAXMBD_CACHE_DIR) and compiles a
# jaxmbd program; prints (that directory, programs that asked the cache, of
# them loaded from it).
SCRIPT = r"""
import sys
import jax, jax.numpy as jnp
import equinox as eqx
from jax._src import monitoring
import jaxmbd

jax.jit(jnp.sin)(1.0).block_until_ready()
jaxmbd.enable_compilation_cache(sys.argv[1], min_compile_time_s=0.0)
jax.jit(jnp.cos)(1.0).block_until_ready()
events = []
monitoring.register_event_listener(lambda event, **kw: events.append(event))
path = jaxmbd.enable_compilation_cache(*sys.argv[2:], min_compile_time_s=0.0)
m = jaxmbd.models.double_pendulum()
eqx.filter_jit(jaxmbd.forward_dynamics)(m, m.q0, m.v0, jnp.ones(m.nv)).block_until_ready()
print(path, events.count("/jax/compilation_cache/compile_requests_use_cache"),
      events.count("/jax/compilation_cache/cache_hits"))
"""


def _run(args, env):
    r = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, JAX_PLATFORMS="cpu", **env))
    assert r.returncode == 0, r.stderr[-3000:]
    path, asked, hits = r.stdout.split()
    return path, int(asked), int(hits)


def _entries(d):
    return sorted(f for f in os.listdir(d) if f.endswith("-cache"))


def test_a_second_process_loads_the_first_ones_programs(tmp_path):
    cache = tmp_path / "cache"
    # first process: the directory by argument; its programs are compiled and written there, not
    # in the directory it used before (a program compiled twice in it, under two jit wrappers,
    # is loaded the second time)
    path, asked, hits = _run([str(tmp_path / "before1"), str(cache)], {"JAXMBD_CACHE_DIR": str(tmp_path / "unused")})
    assert path == str(cache) and hits < asked, (path, asked, hits)
    written = _entries(cache)
    assert len(_entries(tmp_path / "before1")) == 1 and written, (_entries(tmp_path / "before1"), written)
    assert not (tmp_path / "unused").exists()
    # second process: the directory by the environment variable; every program is loaded
    path2, asked2, hits2 = _run([str(tmp_path / "before2")], {"JAXMBD_CACHE_DIR": str(cache)})
    assert path2 == str(cache) and (asked2, hits2) == (asked, asked), (asked, asked2, hits2)
    assert _entries(cache) == written


def test_a_directory_that_cannot_be_made_is_an_error_and_changes_nothing(tmp_path):
    import jax
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        jaxmbd.enable_compilation_cache(tmp_path / "file" / "cache")
    assert jax.config.jax_compilation_cache_dir is None


def test_the_default_directory_follows_the_environment(monkeypatch, tmp_path):
    from jaxmbd.runtime import cache_dir
    monkeypatch.delenv("JAXMBD_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == str(tmp_path / "xdg" / "jaxmbd" / "jax")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == str(tmp_path / "home" / ".cache" / "jaxmbd" / "jax")
    monkeypatch.setenv("JAXMBD_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == str(tmp_path / "mine")
