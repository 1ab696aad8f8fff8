"""The ``jaxmbd`` command: simulate (chunked, resumable), info, bench, bad input."""

import os
import signal
import subprocess
import sys
import time

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmbd
from jaxmbd import cli
from jaxmbd import integrators as I


def test_info(capsys):
    assert cli.main(["info", "grid_tree4"]) == 0
    out = capsys.readouterr().out
    assert "16 bodies" in out and "nv=16" in out and "D0 = " in out and "speed-up" in out


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("simulate", "info", "bench"):
        assert cmd in out


def test_simulate_writes_npz_and_png_matching_a_direct_rollout(tmp_path, capsys):
    out = str(tmp_path / "run.npz")
    args = ["simulate", "double_pendulum", "--batch", "3", "--t1", "0.2", "--saves", "8", "--chunks", "4",
            "--dt0", "0.005", "--seed", "1", "--out", out]
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "members: 3" in text and "failures: none" in text and "throughput" in text
    d = np.load(out)
    assert d["qs"].shape == (3, 8, 2) and np.all(d["status"] == 0)
    np.testing.assert_allclose(d["ts"], np.linspace(0, 0.2, 9)[1:], rtol=1e-15)
    assert os.path.exists(str(tmp_path / "run.png")) and not os.path.exists(out + ".parts")
    # the same members simulated in one piece
    m = jaxmbd.models.double_pendulum()
    q0, v0 = cli._initial_states(m, 3, 1, 0.3)
    r = jaxmbd.rollout(m, jnp.asarray(q0), jnp.asarray(v0), t1=0.2, integrator=I.RK4(), dt0=0.005,
                       saveat=jnp.asarray(d["ts"]))
    np.testing.assert_allclose(d["qs"], r.qs, atol=1e-9)
    np.testing.assert_allclose(d["vs"], r.vs, atol=1e-8)
    assert int(d["accepted"].sum()) == int(r.stats["accepted"].sum())


@pytest.mark.parametrize("args, msg", [
    (["simulate", "no_such_model"], "unknown model"),
    (["simulate", "pendulum", "--rtol", "-1"], "impossible tolerances"),
    (["simulate", "pendulum", "--init-scale", "inf"], "init-scale"),
    (["simulate", "pendulum", "--batch", "0"], "--batch"),
    (["simulate", "pendulum", "--t1", "nan"], "--t1"),
    (["simulate", "pendulum", "--chunks", "5", "--saves", "2"], "--chunks"),
    (["info", "no_such_model"], "unknown model"),
])
def test_bad_input_is_one_line_and_exit_2(args, msg, capsys):
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmbd: error:") and msg in err and "\n" not in err


def test_model_file_and_resume_without_a_run(tmp_path, capsys):
    f = tmp_path / "robot.xml"
    f.write_text("<mujoco/>")
    assert cli.main(["simulate", str(f)]) == 2
    assert "robot.xml: no bodies in <worldbody>" in capsys.readouterr().err
    assert cli.main(["simulate", str(tmp_path / "missing.urdf")]) == 2
    assert "no such model file" in capsys.readouterr().err
    assert cli.main(["simulate", "pendulum", "--resume", "--out", str(tmp_path / "x.npz")]) == 2
    assert "no unfinished run" in capsys.readouterr().err


def test_killed_run_resumes_without_losing_or_duplicating(tmp_path):
    """Start a chunked run in a subprocess, SIGKILL it after a few chunks,
    resume it, and compare with an uninterrupted run: identical arrays,
    every save time exactly once."""
    common = ["simulate", "stiff_double_pendulum", "--integrator", "dopri5", "--batch", "2", "--t1", "1.2",
              "--saves", "24", "--chunks", "24", "--rtol", "1e-4", "--atol", "1e-4", "--no-plot"]
    out = str(tmp_path / "killed.npz")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen([sys.executable, "-m", "jaxmbd", *common, "--out", out], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    third = os.path.join(out + ".parts", "chunk_00002.npz")
    deadline = time.time() + 300
    while not os.path.exists(third) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    done = sorted(p for p in os.listdir(out + ".parts") if p.startswith("chunk_") and p.endswith(".npz")
                  and ".tmp" not in p)
    assert 3 <= len(done) < 24 and not os.path.exists(out)
    r = subprocess.run([sys.executable, "-m", "jaxmbd", *common, "--out", out, "--resume"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"resuming at chunk {len(done)}/24" in r.stdout
    ref = str(tmp_path / "whole.npz")
    assert cli.main([*common, "--out", ref]) == 0
    a, b = np.load(out), np.load(ref)
    assert a["ts"].size == 24 and np.all(np.diff(a["ts"]) > 0)
    for k in ("ts", "qs", "vs", "status", "accepted", "rejected"):
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_bench_runs(capsys):
    assert cli.main(["bench", "pendulum", "--batch", "2", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count("steps/s") == 3 and "aba_unrolled" in out


def test_model_files_from_the_command_line(tmp_path, capsys):
    """An MJCF shipped with gymnasium and a URDF from example-robot-data: info, then a short simulate."""
    gym = pytest.importorskip("gymnasium")
    import glob
    hopper = os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets", "hopper.xml")
    ur5 = glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "cmeel.prefix", "share",
                                 "example-robot-data", "robots", "ur_description", "urdf", "ur5_robot.urdf"))
    if not ur5:
        pytest.skip("example-robot-data is not installed")
    assert os.path.exists(hopper)
    for path in (hopper, ur5[0]):
        assert cli.main(["info", path]) == 0
        out = capsys.readouterr().out
        assert "DoF" in out or "nv" in out
        npz = tmp_path / (os.path.basename(path) + ".npz")
        assert cli.main(["simulate", path, "--batch", "2", "--t1", "0.004", "--saves", "2", "--chunks", "1",
                         "--out", str(npz), "--no-plot"]) == 0
        with np.load(npz) as d:
            assert np.all(np.isfinite(d["qs"]))
    capsys.readouterr()
    bad = tmp_path / "broken.urdf"
    bad.write_text("<robot><link name='a'>")
    assert cli.main(["info", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken.urdf" in err[0]
