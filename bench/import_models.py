"""Import check over real model files: every gymnasium MJCF asset and the
example-robot-data URDFs (fixed and floating base): load, compare with MuJoCo
or Pinocchio (worst relative errors of H, bias/ID and forward dynamics over
random states), then ``jaxmbd info FILE`` and a short ``jaxmbd simulate FILE``
on the command line.

    .venv/bin/python bench/import_models.py [--states 20] [--no-cli] [--out bench/results/import_cpu.md]

The comparison helpers are the tests' (tests/test_mjcf.py, tests/test_urdf.py).
"""

import argparse
import glob
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
import warnings


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def cli(args):
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "jaxmbd"] + args, capture_output=True, text=True)
    return r.returncode, time.perf_counter() - t0, (r.stderr.strip().splitlines() or [""])[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", type=int, default=20)
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import mujoco
    import pinocchio  # noqa: F401  (fail early when absent)

    import jaxmbd
    import test_mjcf
    import test_urdf
    rows = []
    tmp = tempfile.mkdtemp()

    def run_cli(path, extra=()):
        if a.no_cli:
            return "-"
        rc1, t1, e1 = cli(["info", path, *extra])
        rc2, t2, e2 = cli(["simulate", path, *extra, "--batch", "2", "--t1", "0.01", "--saves", "2", "--chunks",
                           "1", "--no-plot", "--out", os.path.join(tmp, "run.npz")])
        return "ok" if rc1 == rc2 == 0 else f"info rc={rc1} {e1} / simulate rc={rc2} {e2}"

    gym = os.path.join(sysconfig.get_paths()["purelib"], "gymnasium", "envs", "mujoco", "assets")
    for path in sorted(glob.glob(os.path.join(gym, "*.xml"))):
        name = os.path.basename(path)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = jaxmbd.load_mjcf(path)
                mj = test_mjcf.smooth_only(mujoco.MjModel.from_xml_path(path))
            test_mjcf.check_layout(model, mj)
            w = test_mjcf.compare_with_mujoco(model, mj, n=a.states)
            res = f"{w[0]:.1e} | {w[1]:.1e} | {w[3]:.1e}"
        except Exception as e:  # report, keep going (paths relative to the assets directory)
            res, model = f"error: {str(e).replace(gym + os.sep, '')}", None
        rows.append(("MuJoCo", name, "", model.nv if model else "-", res, run_cli(path)))
        print(rows[-1], flush=True)

    robots = test_urdf.robots_dir()
    for path in sorted(glob.glob(os.path.join(robots, "*", "*", "*.urdf"))):
        name = os.path.relpath(path, robots)
        for floating in (False, True):
            try:
                P = test_urdf.PinPair(path, floating)
                w = test_urdf.compare_with_pinocchio(P, a.states)
                res, nv = f"{w[0]:.1e} | {w[1]:.1e} | {w[2]:.1e}", P.model.nv
            except Exception as e:  # paths relative to the robots directory
                res, nv = f"error: {str(e).replace(robots + os.sep, '')[:160]}", "-"
            rows.append(("Pinocchio", name, "floating" if floating else "fixed", nv, res,
                         run_cli(path, ["--floating-base"] if floating else [])))
            print(rows[-1], flush=True)
    lines = ["| reference | file | base | nv | H | bias / ID | FD | CLI info + simulate |", "|---|---|---|---|---|---|---|---|"]
    for ref, name, base, nv, res, c in rows:
        cells = res.split(" | ") if not res.startswith("error") else [res, "", ""]
        lines.append(f"| {ref} | {name} | {base} | {nv} | " + " | ".join(cells) + f" | {c} |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(f"# Import check ({a.states} random states per model; worst relative errors)\n\n{text}\n")


if __name__ == "__main__":
    main()
