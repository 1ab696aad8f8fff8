"""Model load and build time, as a user meets it: each row in a fresh Python process (imports
excluded, first-time compiles included), for this checkout and optionally an older commit (in a
git worktree) in the same run, beside the peers' own loaders (MuJoCo ``MjModel.from_xml_path``,
Pinocchio ``buildModelFromUrdf``).

    python bench/load_time.py [--before REV] [--repeats 1] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

# (label, kind, argument): kind mjcf/urdf loads a file, "model" calls a jaxmbd.models function
ROWS = [
    ("ant.xml (MJCF, contact, motors)", "mjcf", "ant.xml"),
    ("humanoid.xml (MJCF, contact, motors)", "mjcf", "humanoid.xml"),
    ("talos_reduced.urdf (URDF, limits)", "urdf", "talos_data/robots/talos_reduced.urdf"),
    ("solo12.urdf (URDF, limits)", "urdf", "solo_description/robots/solo12.urdf"),
    ("quadruped() (built in, dampratio actuators)", "model", "jaxmbd.models.quadruped:quadruped"),
    ("andrews_squeezer() (closed loops)", "model", "jaxmbd.models.mechanisms:andrews_squeezer"),
    ("hmmwv14() (closed loops, 2 builds)", "model", "jaxmbd.models.vehicle:hmmwv14"),
]

CHILD = r"""
import json, sys, time, warnings
sys.path.insert(0, {tests!r})
import jax
jax.config.update("jax_enable_x64", True)
import jaxmbd, importlib
kind, arg = {kind!r}, {arg!r}
if kind == "mjcf":
    from test_mjcf import gym_asset
    path = gym_asset(arg)
elif kind == "urdf":
    from test_urdf import robots_dir
    import os
    path = os.path.join(robots_dir(), arg)
t = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if kind == "mjcf":
        m = jaxmbd.load_mjcf(path, warn=False)
    elif kind == "urdf":
        m = jaxmbd.load_urdf(path, floating_base=True, warn=False)
    else:
        mod, fn = arg.split(":")
        m = getattr(importlib.import_module(mod), fn)()
jaxmbd_s = time.perf_counter() - t
peer = None
if kind == "mjcf":
    import mujoco
    t = time.perf_counter(); mujoco.MjModel.from_xml_path(path); peer = time.perf_counter() - t
elif kind == "urdf":
    import pinocchio as pin
    t = time.perf_counter(); pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()); peer = time.perf_counter() - t
print(json.dumps(dict(jaxmbd=jaxmbd_s, peer=peer)))
"""


def run_row(src_root, kind, arg):
    code = CHILD.format(tests=str(ROOT / "tests"), kind=kind, arg=arg)
    env = dict(os.environ, PYTHONPATH=str(src_root))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=src_root,
                         timeout=900)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default=None, help="an older commit to time beside this checkout")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from common import machine, write_result
    trees = [("this checkout", ROOT)]
    tmp = None
    if a.before:
        tmp = tempfile.mkdtemp()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", tmp, a.before], check=True,
                       capture_output=True)
        trees.append((f"before ({a.before})", Path(tmp)))
    try:
        res = {}
        for label, kind, arg in ROWS:
            for name, root in trees:
                best = min((run_row(root, kind, arg) for _ in range(a.repeats)), key=lambda r: r["jaxmbd"])
                res[(label, name)] = best
                print(f"{label:48s} {name:24s} {best['jaxmbd']:7.2f} s  peer {best['peer']}", flush=True)
    finally:
        if tmp:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", tmp], capture_output=True)
    cols = [n for n, _ in trees]
    lines = ["# Model load and build time (fresh process per row; imports excluded, first compiles included)", "",
             *(f"- {l}" for l in machine()), f"- command: python bench/load_time.py {' '.join(sys.argv[1:])}",
             f"- best of {a.repeats}; peer: MuJoCo MjModel.from_xml_path (MJCF rows), Pinocchio "
             "buildModelFromUrdf with a free-flyer root (URDF rows)", "",
             "| model | " + " | ".join(f"jaxmbd, {c} (s)" for c in cols) + " | peer (s) |",
             "|---|" + "---|" * (len(cols) + 1)]
    for label, _, _ in ROWS:
        peer = res[(label, cols[0])]["peer"]
        lines.append(f"| {label} | " + " | ".join(f"{res[(label, c)]['jaxmbd']:.2f}" for c in cols)
                     + f" | {'-' if peer is None else f'{peer:.3f}'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        print("wrote", write_result(a.out, "load_time", text))


if __name__ == "__main__":
    main()
