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
from jaxmbd import Start, Inputs, Steps, Save, Solver


@pytest.fixture(autouse=True)
def _no_home_cache(tmp_path_factory, monkeypatch):
    """No test writes the user's compilation cache: subprocesses get a
    temporary one, in-process runs (``main``) must pass --no-compile-cache
    (JAX's cache, once on, stays on for the whole pytest process)."""
    import jax
    monkeypatch.setenv("JAXMBD_CACHE_DIR", str(tmp_path_factory.mktemp("jax_cache")))
    yield
    assert jax.config.jax_compilation_cache_dir is None, "an in-process run turned the compilation cache on"


def main(args):
    """cli.main in-process, without the persistent compilation cache."""
    return cli.main([*args, "--no-compile-cache"] if args[0] == "simulate" else args)


def command_env(**extra):
    """The environment of a subprocess running ``python -m jaxmbd`` from a test's own directory
    (tests/conftest.py): this checkout's jaxmbd first on the path, JAX on the CPU."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(jaxmbd.__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=path, **extra)


def test_info(capsys):
    assert main(["info", "grid_tree4"]) == 0
    out = capsys.readouterr().out
    assert "16 bodies" in out and "nv=16" in out and "D0 = " in out and "speed-up" in out


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("simulate", "info", "bench"):
        assert cmd in out


def test_simulate_writes_npz_and_png_matching_a_direct_rollout(tmp_path, capsys):
    out = str(tmp_path / "run.npz")
    args = ["simulate", "double_pendulum", "--batch", "3", "--t1", "0.2", "--saves", "8", "--chunks", "4",
            "--dt0", "0.005", "--seed", "1", "--out", out]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "members: 3" in text and "failures: none" in text and "throughput" in text
    d = np.load(out)
    assert d["qs"].shape == (3, 8, 2) and np.all(d["status"] == 0)
    np.testing.assert_allclose(d["ts"], np.linspace(0, 0.2, 9)[1:], rtol=1e-15)
    assert os.path.exists(str(tmp_path / "run.png")) and not os.path.exists(out + ".parts")
    # the same members simulated in one piece
    m = jaxmbd.models.double_pendulum()
    q0, v0 = cli._initial_states(m, 3, 1, 0.3)
    r = jaxmbd.rollout(m, Start(jnp.asarray(q0), jnp.asarray(v0)), 0.2, integrator=I.RK4(), steps=Steps(dt0=0.005),
                       save=Save(ts=jnp.asarray(d["ts"])))
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
    (["simulate", "pendulum", "--contact-rows", "0"], "--contact-rows must be >= 1"),
    (["simulate", "pendulum", "--contact-capacity", "some"], "--contact-capacity must be an integer >= 1 or 'all'"),
    (["simulate", "pendulum", "--contact-rows", "4"], "pendulum has no contacts"),
    (["info", "no_such_model"], "unknown model"),
])
def test_bad_input_is_one_line_and_exit_2(args, msg, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmbd: error:") and msg in err and "\n" not in err


def test_inputs_are_checked_before_the_outputs(tmp_path, capsys):
    """With the default output unusable (a directory named jaxmbd_run.npz in the working
    directory), every bad input is still reported as itself; only a good command meets the output."""
    assert os.getcwd() == str(tmp_path)    # tests/conftest.py: each test in its own directory
    (tmp_path / "jaxmbd_run.npz").mkdir()
    (tmp_path / "empty.xml").write_text("<mujoco/>")
    for args, msg in ((["no_such_model"], "unknown model 'no_such_model'"),
                      (["empty.xml"], "empty.xml: no bodies in <worldbody>"),
                      (["missing.urdf"], "no such model file"),
                      (["pendulum", "--keyframe", "home"], "pendulum has no keyframes"),
                      (["pendulum", "--ctrl", "1"], "has no actuators"),
                      (["pendulum", "--batch", "0"], "--batch"),
                      (["pendulum"], "jaxmbd_run.npz is a directory")):
        assert main(["simulate", *args]) == 2
        assert msg in one_line_error(capsys), args


def test_model_file_and_resume_without_a_run(tmp_path, capsys):
    f = tmp_path / "robot.xml"
    f.write_text("<mujoco/>")
    assert main(["simulate", str(f)]) == 2
    assert "robot.xml: no bodies in <worldbody>" in capsys.readouterr().err
    assert main(["simulate", str(tmp_path / "missing.urdf")]) == 2
    assert "no such model file" in capsys.readouterr().err
    assert main(["simulate", "pendulum", "--resume", "--out", str(tmp_path / "x.npz")]) == 2
    assert "no unfinished run" in capsys.readouterr().err


KILLED = {
    "stiff_double_pendulum": ["--integrator", "dopri5", "--rtol", "1e-4", "--atol", "1e-4"],
    "quadruped": ["--integrator", "rk4", "--dt0", "1e-3"],          # the built-in contact scene
}


@pytest.mark.long
@pytest.mark.parametrize("model", [pytest.param(k, marks=pytest.mark.slow) if k == "quadruped" else k for k in KILLED])
def test_killed_run_resumes_without_losing_or_duplicating(model, tmp_path, capsys):
    """Start a chunked run in a subprocess, SIGKILL it after a few chunks,
    resume it, and compare with an uninterrupted run: identical arrays,
    every save time exactly once.  On the quadruped (the built-in contact
    scene) the summary reports its contacts."""
    common = ["simulate", model, *KILLED[model], "--batch", "2", "--t1", "1.2", "--saves", "24", "--chunks", "24",
              "--no-plot", "--no-compile-cache"]
    out = str(tmp_path / "killed.npz")
    env = command_env()
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
    capsys.readouterr()
    assert main([*common, "--out", ref]) == 0
    text = capsys.readouterr().out
    if model == "quadruped":
        assert "contacts: " in text and "2/2 members touched" in text, text
    a, b = np.load(out), np.load(ref)
    assert a["ts"].size == 24 and np.all(np.diff(a["ts"]) > 0)
    for k in ("ts", "qs", "vs", "status", "accepted", "rejected"):
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_bench_runs(capsys):
    assert main(["bench", "pendulum", "--batch", "2", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count("steps/s") == 3 and "aba_unrolled" in out


@pytest.mark.long
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
        assert main(["info", path]) == 0
        out = capsys.readouterr().out
        assert "DoF" in out or "nv" in out
        npz = tmp_path / (os.path.basename(path) + ".npz")
        assert main(["simulate", path, "--batch", "2", "--t1", "0.004", "--saves", "2", "--chunks", "1",
                     "--out", str(npz), "--no-plot"]) == 0
        with np.load(npz) as d:
            assert np.all(np.isfinite(d["qs"]))
    capsys.readouterr()
    bad = tmp_path / "broken.urdf"
    bad.write_text("<robot><link name='a'>")
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken.urdf" in err[0]


# --- never mix or lose data ------------------------------------------------------------------

PENDULUM_XML = """<mujoco model="pend">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="arm">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""


def small(model, out, *extra):
    return ["simulate", model, "--batch", "2", "--t1", "0.05", "--saves", "5", "--chunks", "5", "--dt0", "0.005",
            "--no-plot", "--out", str(out), *extra]


def interrupted(monkeypatch, capsys, args, after):
    """Run args in-process and Ctrl-C it after `after` chunks: an unfinished run."""
    progress = cli._progress

    def progress_then_ctrl_c(done, *rest):
        progress(done, *rest)
        if done == after:
            raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(cli, "_progress", progress_then_ctrl_c)
        assert main(args) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "--resume" in err
    parts = args[args.index("--out") + 1] + ".parts"
    done = sorted(f for f in os.listdir(parts) if f.startswith("chunk_"))
    assert done == [f"chunk_{c:05d}.npz" for c in range(after)]
    return parts


def one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmbd: error:") and "\n" not in err, err
    return err


def test_resume_refuses_a_changed_model_file_or_setting(tmp_path, monkeypatch, capsys):
    """An edited model file (same path), or any changed setting, is refused by
    --resume, naming what differs; the unchanged command resumes, and its result
    equals an uninterrupted run's."""
    xml = tmp_path / "robot.xml"
    xml.write_text(PENDULUM_XML)
    out = tmp_path / "run.npz"
    interrupted(monkeypatch, capsys, small(str(xml), out), after=2)
    xml.write_text(PENDULUM_XML.replace("-9.81", "-1.62"))
    assert main(small(str(xml), out, "--resume")) == 2
    err = one_line_error(capsys)
    assert "robot.xml" in err and "gravity" in err and "--overwrite" in err
    xml.write_text(PENDULUM_XML)
    for flag, value in (("--seed", "1"), ("--dt0", "0.0025"), ("--t1", "0.1"), ("--rtol", "1e-5")):
        args = small(str(xml), out, "--resume")
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
        assert main(args) == 2
        assert f"{flag.lstrip('-')}: " in one_line_error(capsys)
    assert main(small(str(xml), out, "--resume", "--integrator", "euler")) == 2
    assert "integrator: 'rk4' -> 'euler'" in one_line_error(capsys)
    assert main(small(str(xml), out, "--resume")) == 0
    assert "resuming at chunk 2/5" in capsys.readouterr().out
    assert main(small(str(xml), tmp_path / "whole.npz")) == 0
    a, b = np.load(out), np.load(tmp_path / "whole.npz")
    for k in ("ts", "qs", "vs", "status", "accepted"):
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_built_in_model_is_identified_by_its_parameters(tmp_path, monkeypatch, capsys):
    """A built-in model whose numbers changed (e.g. a new jaxmbd) is not resumed."""
    import equinox as eqx
    out = tmp_path / "run.npz"
    interrupted(monkeypatch, capsys, small("pendulum", out), after=1)
    pendulum = cli.MODELS["pendulum"]
    heavier = lambda m: eqx.tree_at(lambda p: p.mass, pendulum(m), pendulum(m).mass * 2)  # noqa: E731
    monkeypatch.setitem(cli.MODELS, "pendulum", heavier)
    assert main(small("pendulum", out, "--resume")) == 2
    assert "model parameters mass" in one_line_error(capsys)


def test_existing_outputs_are_kept_without_overwrite(tmp_path, monkeypatch, capsys):
    """Re-running a command does not delete an unfinished run's chunks nor
    replace a finished run; --overwrite does."""
    out = tmp_path / "run.npz"
    parts = interrupted(monkeypatch, capsys, small("pendulum", out), after=3)
    assert main(small("pendulum", out)) == 2
    err = one_line_error(capsys)
    assert "unfinished run" in err and "--resume" in err and "--overwrite" in err
    assert len([f for f in os.listdir(parts) if f.startswith("chunk_")]) == 3
    assert main(small("pendulum", out, "--resume", "--overwrite")) == 2
    one_line_error(capsys)
    assert main(small("pendulum", out, "--resume")) == 0
    capsys.readouterr()
    first = np.load(out)["qs"]
    assert main(small("pendulum", out, "--seed", "3")) == 2
    assert "run.npz exists" in one_line_error(capsys) and np.array_equal(np.load(out)["qs"], first)
    # the plot is an output too
    os.remove(out)
    (tmp_path / "run.png").write_bytes(b"png")
    args = small("pendulum", out)
    args.remove("--no-plot")
    assert main(args) == 2
    assert "run.png exists" in one_line_error(capsys)
    assert main(small("pendulum", out, "--seed", "3", "--overwrite")) == 0
    assert not np.array_equal(np.load(out)["qs"], first) and not os.path.exists(parts)


def test_the_default_output_replaces_the_previous_default_run(tmp_path, capsys):
    """The README's first command run twice in one directory: the second run replaces the first's
    jaxmbd_run.npz, .png and .html and says so in one line; an --out given, or a file at the default path
    that is not a run, is still refused; an unfinished run there is kept."""
    args = ["simulate", "pendulum", "--batch", "2", "--t1", "0.01", "--saves", "2", "--chunks", "1"]
    npz, png = tmp_path / "jaxmbd_run.npz", tmp_path / "jaxmbd_run.png"
    assert main(args) == 0
    assert "replaced" not in capsys.readouterr().out
    first = np.load(npz)["qs"]
    png.write_bytes(b"the previous plot")
    assert main([*args, "--seed", "1"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "replaced" in ln]
    assert lines == ["replaced jaxmbd_run.npz, jaxmbd_run.png and jaxmbd_run.html of the previous run (the default "
                     "--out; give --out to keep a run's files)"]
    second = np.load(npz)["qs"]
    assert not np.array_equal(first, second) and png.read_bytes().startswith(b"\x89PNG")
    assert main([*args, "--out", "jaxmbd_run.npz"]) == 2
    assert "jaxmbd_run.npz exists; use --overwrite" in one_line_error(capsys)
    assert np.array_equal(np.load(npz)["qs"], second)
    npz.write_text("not a run")
    assert main(args) == 2
    assert "jaxmbd_run.npz exists; use --overwrite" in one_line_error(capsys)
    npz.unlink()
    assert main(args) == 2     # a plot without its run is not replaced either
    assert "jaxmbd_run.png exists" in one_line_error(capsys)
    png.unlink()
    (tmp_path / "jaxmbd_run.npz.parts").mkdir()
    assert main(args) == 2
    assert "holds an unfinished run; continue it with --resume" in one_line_error(capsys)


def test_output_paths_are_checked_before_any_simulation(tmp_path, monkeypatch, capsys):
    def no_work(*args, **kw):
        raise AssertionError("work started before the output paths were checked")
    monkeypatch.setattr(cli, "_initial_states", no_work)
    monkeypatch.setattr(jaxmbd, "rollout", no_work)
    (tmp_path / "adir").mkdir()
    (tmp_path / "file").write_text("")
    (tmp_path / "r.npz.parts").write_text("")
    (tmp_path / "p.png").mkdir()
    for out, msg in ((tmp_path / "adir", "is a directory"),
                     (tmp_path / "missing" / "r.npz", "does not exist"),
                     (tmp_path / "file" / "r.npz", "file is not a directory"),
                     (tmp_path / "r.npz", "not a directory")):
        assert main(small("pendulum", out)) == 2
        assert msg in one_line_error(capsys)
    for out, msg in ((tmp_path / "p.npz", "p.png would overwrite a directory"),
                     (tmp_path / "x.png", "the plot would overwrite it")):
        args = small("pendulum", out)
        args.remove("--no-plot")
        assert main(args) == 2
        assert msg in one_line_error(capsys)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong shape"])
def test_damaged_chunk_is_reported_before_computing(damage, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run.npz"
    parts = interrupted(monkeypatch, capsys, small("pendulum", out), after=3)
    chunk = os.path.join(parts, "chunk_00001.npz")
    if damage == "garbage":
        open(chunk, "wb").write(bytes(range(256)) * 4)
    elif damage == "truncated":
        data = open(chunk, "rb").read()
        open(chunk, "wb").write(data[:len(data) // 2])
    else:
        with np.load(chunk) as z:
            d = dict(z)
        np.savez_compressed(chunk, **dict(d, qs=d["qs"][:, :, :0]))
    with monkeypatch.context() as m:
        m.setattr(jaxmbd, "rollout", lambda *a, **k: pytest.fail("computed before checking the chunks"))
        assert main(small("pendulum", out, "--resume")) == 2
    err = one_line_error(capsys)
    assert "chunk_00001.npz is damaged" in err and "--resume" in err and "--overwrite" in err
    os.remove(chunk)
    assert main(small("pendulum", out, "--resume")) == 0
    assert "resuming at chunk 1/5" in capsys.readouterr().out
    assert main(small("pendulum", tmp_path / "whole.npz")) == 0
    np.testing.assert_array_equal(np.load(out)["qs"], np.load(tmp_path / "whole.npz")["qs"])


# --- compilation cache ---------------------------------------------------------------------------

def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("JAXMBD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cli.cache_dir() == str(tmp_path / "jaxmbd" / "jax")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cli.cache_dir() == str(tmp_path / "home" / ".cache" / "jaxmbd" / "jax")
    monkeypatch.setenv("JAXMBD_CACHE_DIR", str(tmp_path / "mine"))
    assert cli.cache_dir() == str(tmp_path / "mine")


@pytest.mark.long
def test_compile_cache_is_written_unless_turned_off(tmp_path):
    """The command keeps compiled programs in JAXMBD_CACHE_DIR; --no-compile-cache
    writes nothing; both give the same numbers."""
    runs = {}
    for name, flags in (("on", []), ("off", ["--no-compile-cache"])):
        cache = tmp_path / f"cache_{name}"
        env = command_env(JAXMBD_CACHE_DIR=str(cache))
        out = tmp_path / f"{name}.npz"
        r = subprocess.run([sys.executable, "-m", "jaxmbd", *small("pendulum", out, *flags)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs[name] = (sorted(os.listdir(cache)) if cache.exists() else [], np.load(out)["qs"])
    assert any(f.endswith("-cache") for f in runs["on"][0]), runs["on"][0]
    assert runs["off"][0] == []
    np.testing.assert_array_equal(runs["on"][1], runs["off"][1])


# --- Ctrl-C ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("when", ["importing", "compiling"])
def test_ctrl_c_is_one_line_at_any_moment(when, tmp_path):
    """SIGINT while Python imports JAX, or while XLA compiles the rollout
    (which holds the main thread for seconds): exactly one line on stderr, no
    traceback, exit status 130, at once."""
    out = tmp_path / "run.npz"
    args = small("pendulum", out, "--no-compile-cache")
    args[args.index("--t1") + 1] = "1000"  # still running when the signal comes, however fast the machine
    env = command_env(PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "jaxmbd", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if when == "compiling":  # the line before the chunk loop; tracing, then XLA's compile, follow
        for line in proc.stdout:
            if line.startswith("2 members"):
                break
    if when == "importing":  # once jaxlib's libraries are being mapped, jax is importing (the handler is set)
        t_wait = time.perf_counter()
        while time.perf_counter() - t_wait < 60 and proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/maps") as f:
                    if "jaxlib" in f.read():
                        break
            except OSError:
                time.sleep(0.2)
                break
            time.sleep(0.005)
    else:
        time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    t = time.perf_counter()
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("jaxmbd: interrupted") and proc.returncode == 130
    assert time.perf_counter() - t < 2.0 and not out.exists()


SERVO_XML = """<mujoco model="servo">
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="arm" pos="0 0 0.6">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-1 1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1"/>
      <geom name="tip" type="sphere" pos="0 0 -0.5" size="0.05" mass="0.5"/>
    </body>
  </worldbody>
  <actuator><position name="servo" joint="hinge" kp="40" dampratio="1"/></actuator>
</mujoco>
"""


@pytest.mark.long
def test_an_mjcf_scene_runs_with_its_floor_limits_and_actuators(tmp_path, capsys):
    """jaxmbd simulate FILE.xml --ctrl: the loaded scene's actuators get the
    constant input (the result equals jaxmbd.rollout with that ctrl, and the
    servo moves the arm toward it); a wrong --ctrl is one clear error."""
    xml = tmp_path / "servo.xml"
    xml.write_text(SERVO_XML)
    out = tmp_path / "run.npz"
    args = ["simulate", str(xml), "--batch", "2", "--t1", "0.5", "--saves", "5", "--chunks", "1", "--dt0", "0.002",
            "--no-plot", "--out", str(out)]
    assert main([*args, "--ctrl", "0.4"]) == 0
    text = capsys.readouterr().out
    assert "1 actuators, ctrl 0.4" in text and "contacts:" in text, text
    d = np.load(out)
    model = jaxmbd.load_mjcf(str(xml), warn=False)
    q0, v0 = cli._initial_states(model, 2, 0, 0.1)
    r = jaxmbd.rollout(model, Start(jnp.asarray(q0), jnp.asarray(v0)), 0.5, integrator=I.RK4(),
                       inputs=Inputs(ctrl=jnp.array([0.4])), steps=Steps(dt0=0.002),
                       save=Save(ts=jnp.asarray(d["ts"])), solver=Solver(adjoint="none"))
    np.testing.assert_allclose(d["qs"], np.asarray(r.qs), rtol=0, atol=1e-12)
    assert np.all(np.abs(d["qs"][:, -1, 0] - 0.4) < np.abs(q0[:, 0] - 0.4))
    for bad, msg in ((["--ctrl", "1", "2"], "--ctrl needs 1 or 1 finite numbers"),
                     (["--ctrl", "nan"], "--ctrl needs")):
        assert main([*args, "--overwrite", *bad]) == 2
        assert msg in one_line_error(capsys)
    assert main(small("pendulum", tmp_path / "p.npz", "--ctrl", "1")) == 2
    assert "has no actuators" in one_line_error(capsys)


@pytest.mark.long
def test_keyframe_starts_every_member_from_it(tmp_path, capsys):
    """--keyframe NAME: every member starts at the keyframe's qpos and qvel, its ctrl held as the
    inputs (the result equals jaxmbd.rollout from that state with that ctrl); --ctrl overrides the
    keyframe's ctrl; an unknown name lists the keyframes; a model without keyframes says so."""
    xml = tmp_path / "servo_key.xml"
    xml.write_text(SERVO_XML.replace("</actuator>", "</actuator>\n  <keyframe><key name='raised' qpos='0.3' "
                                     "qvel='-0.5' ctrl='0.6'/><key qpos='-0.2'/></keyframe>"))
    out = tmp_path / "run.npz"
    args = ["simulate", str(xml), "--batch", "2", "--t1", "0.1", "--saves", "2", "--chunks", "1", "--dt0", "0.002",
            "--no-plot", "--out", str(out), "--overwrite"]
    model = jaxmbd.load_mjcf(str(xml), warn=False)
    assert list(model.keyframes) == ["raised", "key1"]
    for name, extra, ctrl, note in (("raised", [], 0.6, "ctrl of keyframe 'raised'"),
                                    ("key1", ["--ctrl", "-0.3"], -0.3, "ctrl -0.3")):
        assert main([*args, "--keyframe", name, *extra]) == 0
        text = capsys.readouterr().out
        assert note in text and f"from keyframe {name!r}" in text, text
        k = model.keyframes[name]
        q0, v0 = np.tile(k.qpos, (2, 1)), np.tile(k.qvel, (2, 1))
        r = jaxmbd.rollout(model, Start(jnp.asarray(q0), jnp.asarray(v0)), 0.1, integrator=I.RK4(),
                           inputs=Inputs(ctrl=jnp.array([ctrl])), steps=Steps(dt0=0.002),
                           save=Save(ts=jnp.asarray(np.load(out)["ts"])), solver=Solver(adjoint="none"))
        np.testing.assert_allclose(np.load(out)["qs"], np.asarray(r.qs), rtol=0, atol=1e-12)
    assert model.keyframes["key1"].qvel.tolist() == [0.0] and model.keyframes["raised"].qvel.tolist() == [-0.5]
    assert main([*args, "--keyframe", "home"]) == 2
    assert "--keyframe 'home': " in (err := one_line_error(capsys)) and "(its keyframes: raised, key1)" in err
    assert main(small("pendulum", tmp_path / "p.npz", "--keyframe", "home")) == 2
    assert "--keyframe 'home': pendulum has no keyframes" in one_line_error(capsys)


STIFF_SLIDER_XML = """<mujoco model="stiff_slider">
  {option}
  <worldbody>
    <body name="s">
      <joint name="x" type="slide" axis="1 0 0" stiffness="10000"/>
      <geom type="sphere" size="0.05" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_a_diverged_run_says_what_to_change_and_a_file_s_small_timestep_is_the_default(tmp_path, capsys):
    """RK4 at 32 ms on a 100 rad/s spring: the members end DIVERGED (not
    success) and the summary names the remedies the command accepts; without
    --dt0 the file's <option timestep> (below 1 ms) is the step, and runs."""
    xml = tmp_path / "slider.xml"
    xml.write_text(STIFF_SLIDER_XML.format(option=""))
    out = tmp_path / "run.npz"
    args = ["simulate", str(xml), "--batch", "2", "--t1", "0.32", "--saves", "2", "--chunks", "1", "--no-plot",
            "--out", str(out)]
    assert main([*args, "--dt0", "0.032"]) == 0
    text = capsys.readouterr().out
    assert np.all(np.load(out)["status"] == I.DIVERGED)
    assert "failures: diverged" in text and "use a smaller --dt0 (e.g. 0.008)" in text, text
    assert "--integrator rosenbrock" in text
    xml.write_text(STIFF_SLIDER_XML.format(option='<option timestep="0.0005"/>'))
    assert main([*args, "--overwrite"]) == 0
    text = capsys.readouterr().out
    assert "failures: none" in text, text
    assert text.splitlines()[0] == ("rk4: the file asks MuJoCo for Euler and the model has no joint damping: an "
                                    "explicit method (fixed step dt0 = 0.0005 s: the file's <option timestep>, "
                                    "below 1 ms)")


# --- robot files: the file's <option>, the method it asks for, contacts, failures ------------------

ROBOT_XML = """<mujoco model="tiny quadruped">
  <compiler angle="radian" autolimits="true"/>
  <option {option}/>
  <default>
    <default class="robot">
      <joint axis="0 1 0" damping="{damping}" armature="0.01" range="-1 1"/>
      <position kp="1000" dampratio="1" forcerange="-60 60" ctrlrange="-1 1"/>
      <default class="visual">
        <geom contype="0" conaffinity="0" group="2"/>
      </default>
      <default class="collision">
        <geom group="3"/>
        <default class="foot">
          <geom type="sphere" size="0.03" friction="0.8 0.02 0.01"/>
        </default>
      </default>
    </default>
  </default>
  <worldbody>
    <body name="base" pos="0 0 0.3" childclass="robot">
      <freejoint/>
      <geom class="collision" type="box" size="0.2 0.1 0.05" mass="4"/>
      {legs}
    </body>
  </worldbody>
  <actuator>
    {servos}
  </actuator>
  <keyframe>
    <key name="home" qpos="0 0 0.279 1 0 0 0 0 0 0 0" ctrl="0 0 0 0"/>
  </keyframe>
</mujoco>
"""
LEG = """<body name="{n}" pos="{x} {y} -0.05">
        <joint name="{n}_hip"/>
        <geom class="visual" type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.3"/>
        <geom class="foot" pos="0 0 -0.2" mass="0.05"/>
      </body>"""
LEGS = {"FL": (0.15, 0.1), "FR": (0.15, -0.1), "RL": (-0.15, 0.1), "RR": (-0.15, -0.1)}
SCENE_XML = """<mujoco model="tiny quadruped scene">
  <include file="robot.xml"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05"/>
  </worldbody>
</mujoco>
"""


def robot_scene(tmp_path, option, damping=1.0):
    """A Menagerie-style pair of files: scene.xml (a floor) includes robot.xml (its <option>, collision
    classes, four legs on stiff position servos, a keyframe 'home' with the feet 1 mm in the floor)."""
    (tmp_path / "robot.xml").write_text(ROBOT_XML.format(
        option=option, damping=damping,
        legs="\n      ".join(LEG.format(n=n, x=x, y=y) for n, (x, y) in LEGS.items()),
        servos="\n    ".join(f'<position class="robot" name="{n}" joint="{n}_hip"/>' for n in LEGS)))
    (tmp_path / "scene.xml").write_text(SCENE_XML)
    return str(tmp_path / "scene.xml")


class Stop(Exception):
    pass


def first_rollout(monkeypatch, args):
    """Run the command up to its first rollout: what it passes (model, integrator, steps)."""
    seen = {}

    def stop(model, start, t1, *, integrator, steps, **kw):
        seen.update(model=model, integrator=integrator, steps=steps)
        raise Stop
    with monkeypatch.context() as m:
        m.setattr(jaxmbd, "rollout", stop)
        with pytest.raises(Stop):
            main([*args, "--no-plot", "--overwrite"])
    return seen


def method_of(monkeypatch, capsys, args):
    """(the integrator and Steps the command passes to its first rollout, its first line)."""
    seen = first_rollout(monkeypatch, args)
    return seen["integrator"], seen["steps"], capsys.readouterr().out.splitlines()[0]


def test_a_robot_file_s_included_options_set_the_step_and_the_method(tmp_path, monkeypatch, capsys):
    """scene.xml includes robot.xml, whose <option> gives the timestep and the integrator: the
    loader reads them as MuJoCo does (checked against MuJoCo's compiled model), and the command's
    defaults follow them: rosenbrock where MuJoCo integrates implicitly (implicit, implicitfast,
    Euler with joint damping), rk4 at the file's step for RK4, rk4 at the file's step below 1 ms for
    Euler without damping; --integrator and a built-in model keep RK4 at 1 ms."""
    mujoco = pytest.importorskip("mujoco")
    cases = [('timestep="0.0005"', 0.0, I.RK4, 0.0005, "the file asks MuJoCo for Euler and the model has no "
              "joint damping: an explicit method (fixed step dt0 = 0.0005 s: the file's <option timestep>, below "
              "1 ms)"),
             ('timestep="0.0005" integrator="implicitfast"', 0.0, I.RosenbrockNystrom4, None,
              "the file asks MuJoCo for implicitfast (adaptive steps, rtol = 1e-06, atol = 1e-06)"),
             ('integrator="implicit"', 0.0, I.RosenbrockNystrom4, None, "the file asks MuJoCo for implicit"),
             ('timestep="0.004"', 1.0, I.RosenbrockNystrom4, None,
              "the file asks MuJoCo for Euler, which integrates the joints' damping implicitly"),
             ('timestep="0.004" integrator="RK4"', 1.0, I.RK4, 0.004,
              "the file asks MuJoCo for RK4 (fixed step dt0 = 0.004 s: the file's <option timestep>)"),
             ('timestep="0.004"', 0.0, I.RK4, 0.001, "(fixed step dt0 = 0.001 s: 1 ms, the default step)")]
    kinds = {mujoco.mjtIntegrator.mjINT_EULER: "Euler", mujoco.mjtIntegrator.mjINT_RK4: "RK4",
             mujoco.mjtIntegrator.mjINT_IMPLICIT: "implicit", mujoco.mjtIntegrator.mjINT_IMPLICITFAST: "implicitfast"}
    args = ["simulate", str(tmp_path / "scene.xml"), "--batch", "1", "--t1", "0.5", "--keyframe", "home"]
    for option, damping, cls, dt0, why in cases:
        scene = robot_scene(tmp_path, option, damping)
        ref = mujoco.MjModel.from_xml_path(scene)
        info = jaxmbd.load_mjcf(scene, return_info=True, warn=False)
        assert (info.timestep, info.integrator) == (ref.opt.timestep, kinds[ref.opt.integrator]), option
        integrator, steps, first = method_of(monkeypatch, capsys, args)
        assert type(integrator) is cls and first.startswith(f"{cls.name}: ") and why in first, (option, first)
        assert (None if steps.dt0 is None else float(steps.dt0)) == dt0, option
        if dt0 is None:
            assert float(steps.rtol) == 1e-6 and float(steps.atol) == 1e-6
    integrator, steps, first = method_of(monkeypatch, capsys, [*args, "--integrator", "euler"])
    assert type(integrator) is I.SemiImplicitEuler and float(steps.dt0) == 0.001, first
    assert first == "euler: given by --integrator euler (fixed step dt0 = 0.001 s: 1 ms, the default step)"
    integrator, steps, first = method_of(monkeypatch, capsys, ["simulate", "pendulum", "--batch", "1"])
    assert type(integrator) is I.RK4 and float(steps.dt0) == 0.001
    assert first == "rk4: the default for built-in models (fixed step dt0 = 0.001 s: 1 ms, the default step)"
    (tmp_path / "robot.xml").write_text(ROBOT_XML.replace("<option {option}/>", '<option integrator="euler"/>'))
    assert main(args) == 2
    assert "<option integrator='euler'>: expected one of Euler, RK4, implicit, implicitfast" in one_line_error(capsys)


@pytest.mark.long
def test_a_robot_file_with_stiff_servos_stands_with_the_default_method(tmp_path, capsys):
    """The acceptance case: a Menagerie-style robot (integrator="implicitfast", position servos at
    kp = 1000, feet 1 mm in the floor at its keyframe) runs 1 s from its keyframe with the command's
    defaults, ends with status success, and stands where MuJoCo's own run of the file stands."""
    mujoco = pytest.importorskip("mujoco")
    scene = robot_scene(tmp_path, 'timestep="0.002" integrator="implicitfast"')
    assert main(["simulate", scene, "--keyframe", "home", "--batch", "1", "--t1", "1", "--no-plot"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("rosenbrock: the file asks MuJoCo for implicitfast"), text
    assert "failures: none" in text, text
    with np.load(tmp_path / "jaxmbd_run.npz") as d:
        assert d["status"].tolist() == [0] and d["t_end"].tolist() == [1.0]
        q_end = d["qs"][0, -1]
    m = mujoco.MjModel.from_xml_path(scene)
    data = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, data, 0)
    mujoco.mj_step(m, data, nstep=500)
    assert abs(data.time - 1.0) < 1e-9
    np.testing.assert_allclose(q_end[2], data.qpos[2], atol=1e-5)   # the base's height, standing on 4 feet
    np.testing.assert_allclose(q_end[7:], data.qpos[7:], atol=1e-4)  # the hips, held by the servos


@pytest.mark.long
def test_each_member_s_steps_are_counted_once(tmp_path, capsys):
    """A member that fails in the first chunk is run again in every later chunk (and discarded):
    the reported steps of every member equal those of the member run alone, chunk by chunk, until
    it fails; the failed member's line names it, the time it reached, its status and the option."""
    model = jaxmbd.models.double_pendulum()
    batch, seed, scale, t1, chunks = 2, 0, 4.0, 0.4, 4
    q0, v0 = cli._initial_states(model, batch, seed, scale)
    edges = np.linspace(0.0, t1, chunks + 1)
    f64 = lambda x: jnp.asarray(np.asarray(x, np.float64))  # noqa: E731

    def alone(b, max_steps):
        """Member b alone, chunk after chunk as the command runs them: [(accepted, rejected, t, status)]."""
        q, v, out = q0[b:b + 1], v0[b:b + 1], []
        for c in range(chunks):
            r = jaxmbd.rollout(model, Start(f64(q), f64(v), f64(edges[c])), f64(edges[c + 1]), integrator=I.Dopri5(),
                               steps=Steps(rtol=jnp.asarray(1e-10), atol=jnp.asarray(1e-10),
                                           max_steps=jnp.asarray(max_steps, jnp.int32)),
                               save=Save(ts=f64(edges[c + 1:c + 2])), solver=Solver(adjoint="none"))
            out.append((int(r.stats["accepted"][0]), int(r.stats["rejected"][0]), float(r.t[0]), int(r.status[0])))
            if out[-1][3]:
                return out
            q, v = np.asarray(r.qs[:, -1]), np.asarray(r.vs[:, -1])
        return out
    attempts = [[a + r for a, r, _, _ in alone(b, 100_000)] for b in range(batch)]
    hard = int(np.argmax([a[0] for a in attempts]))
    easy = 1 - hard
    assert max(attempts[easy]) < attempts[hard][0], attempts     # one max_steps stops one member only
    max_steps = (max(attempts[easy]) + attempts[hard][0]) // 2
    out = tmp_path / "run.npz"
    assert main(["simulate", "double_pendulum", "--integrator", "dopri5", "--rtol", "1e-10", "--atol", "1e-10",
                 "--batch", str(batch), "--seed", str(seed), "--init-scale", str(scale), "--t1", str(t1), "--saves",
                 str(chunks), "--chunks", str(chunks), "--max-steps", str(max_steps), "--no-plot", "--out",
                 str(out)]) == 0
    text = capsys.readouterr().out
    d = np.load(out)
    ref = {b: alone(b, max_steps) for b in range(batch)}
    assert [ref[b][-1][3] for b in range(batch)] == d["status"].tolist()
    assert d["status"][hard] == I.MAX_STEPS and d["status"][easy] == 0 and len(ref[hard]) == 1
    for b in range(batch):
        assert d["accepted"][b] == sum(x[0] for x in ref[b]) and d["rejected"][b] == sum(x[1] for x in ref[b]), b
        assert d["t_end"][b] == ref[b][-1][2]
    assert f"accepted steps: {int(d['accepted'].sum()):,} " in text
    assert "failures: max_steps reached: 1;" in text, text
    assert (f"max_steps reached (member {hard} at t = {ref[hard][-1][2]:.4g} s): more than --max-steps "
            f"({max_steps}) step attempts in one chunk: raise --max-steps or --chunks, or an implicit method "
            "(--integrator rosenbrock or --integrator sdirk4)") in text, text


TWO_BOXES_XML = """<mujoco model="two boxes">
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <body name="a" pos="-0.3 0 0.3"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
    <body name="b" pos="0.3 0 0.3"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
  </worldbody>
  <keyframe><key name="rest" qpos="-0.3 0 0.0995 1 0 0 0 0.3 0 0.0995 1 0 0 0"/></keyframe>
</mujoco>
"""


@pytest.mark.long
def test_contact_rows_and_capacity_options_reach_the_model(tmp_path, monkeypatch):
    """--contact-rows and --contact-capacity set the soft solve's rows and the broad phase's
    capacities of the model the command runs; at rest, two boxes have 8 corners in the floor, so
    4 rows overflow, and so does a capacity of 1 plane-box pair (of 2); the advice for
    CONTACT_OVERFLOW names the option that overflowed."""
    from jaxmbd.integrators.base import CONTACT_OVERFLOW
    xml = tmp_path / "boxes.xml"
    xml.write_text(TWO_BOXES_XML)
    args = ["simulate", str(xml), "--keyframe", "rest", "--batch", "1", "--integrator", "euler"]
    model = first_rollout(monkeypatch, args)["model"]
    el = cli._contact_element(model)
    assert el.rows == 16 and el.capacity == (2, 1) and [g[:2] for g in el.groups] == [("plane", "box"), ("box", "box")]
    q = jnp.asarray(model.keyframes["rest"].qpos)
    assert int(jnp.sum(el.candidates(model, q)["dist"] < 0)) == 8
    options = cli._parser().parse_args(["simulate", "--contact-rows", "4"])
    for given, rows, capacity, named, other in ((["--contact-rows", "4"], 4, (2, 1), "--contact-rows (now 4",
                                                 "--contact-capacity"),
                                                (["--contact-capacity", "1"], 16, (1, 1), "--contact-capacity (now "
                                                 "plane-box 1 of 2 pairs", None)):
        run = first_rollout(monkeypatch, [*args, *given])["model"]
        el = cli._contact_element(run)
        assert (el.rows, el.capacity) == (rows, capacity), given
        assert bool(el.overflow(run, q)), given
        advice = cli._failure_advice(options, run, CONTACT_OVERFLOW, 1)[1]
        assert named in advice and (other is None or other not in advice), advice
    all_pairs = first_rollout(monkeypatch, [*args, "--contact-capacity", "all", "--contact-rows", "8"])["model"]
    assert (cli._contact_element(all_pairs).rows, cli._contact_element(all_pairs).capacity) == (8, (2, 1))
