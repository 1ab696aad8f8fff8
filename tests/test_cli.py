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
    (["info", "no_such_model"], "unknown model"),
])
def test_bad_input_is_one_line_and_exit_2(args, msg, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jaxmbd: error:") and msg in err and "\n" not in err


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


def test_output_paths_are_checked_before_any_work(tmp_path, monkeypatch, capsys):
    def no_work(*args, **kw):
        raise AssertionError("work started before the output paths were checked")
    monkeypatch.setattr(cli, "_load_model", no_work)
    monkeypatch.setattr(cli, "_enable_compile_cache", no_work)
    (tmp_path / "adir").mkdir()
    (tmp_path / "file").write_text("")
    (tmp_path / "r.npz.parts").write_text("")
    (tmp_path / "p.png").mkdir()
    for out, msg in ((tmp_path / "adir", "is a directory"),
                     (tmp_path / "missing" / "r.npz", "does not exist"),
                     (tmp_path / "file" / "r.npz", "file is not a directory"),
                     (tmp_path / "r.npz", "not a directory")):
        assert cli.main(small("pendulum", out)) == 2
        assert msg in one_line_error(capsys)
    for out, msg in ((tmp_path / "p.npz", "p.png would overwrite a directory"),
                     (tmp_path / "x.png", "the plot would overwrite it")):
        args = small("pendulum", out)
        args.remove("--no-plot")
        assert cli.main(args) == 2
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


def test_compile_cache_is_written_unless_turned_off(tmp_path):
    """The command keeps compiled programs in JAXMBD_CACHE_DIR; --no-compile-cache
    writes nothing; both give the same numbers."""
    runs = {}
    for name, flags in (("on", []), ("off", ["--no-compile-cache"])):
        cache = tmp_path / f"cache_{name}"
        env = dict(os.environ, JAX_PLATFORMS="cpu", JAXMBD_CACHE_DIR=str(cache))
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
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
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
    assert "dt0 = 0.0005" in text and "failures: none" in text, text
    assert cli._mjcf_timestep(str(xml)) == 0.0005 and cli._mjcf_timestep("pendulum") is None
