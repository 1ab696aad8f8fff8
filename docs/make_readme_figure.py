"""Makes the README's picture: the default job (``jaxmbd`` with no arguments: 64 built-in
quadrupeds dropped onto a floor) run in a temporary folder, and a frame of its web page as headless
Chromium draws it (``docs/default_job.png``), beside the job's own plot (``docs/default_job_plot.png``).

    python docs/make_readme_figure.py [--t 0.3]

Needs Chromium (Debian: ``apt-get install chromium``)."""

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--t", type=float, default=0.3, help="the time of the frame (s)")
    a = p.parse_args()
    from jaxmbd.browser import Page
    from jaxmbd.cli import main as jaxmbd
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "jaxmbd_run.npz")
        if jaxmbd(["simulate", "--out", out, "--no-compile-cache"]) != 0:
            sys.exit("the default job failed")
        import numpy as np
        ts = np.load(out)["ts"]
        with Page(os.path.join(d, "jaxmbd_run.html"), width=1100, height=620) as page:
            dt = ts[-1] - ts[-2]
            page.seek(a.t, 0.0, ts[-1] - ts[0] + dt)
            png = page.screenshot()
        with open(os.path.join(HERE, "default_job.png"), "wb") as f:
            f.write(png)
        shutil.copy(os.path.join(d, "jaxmbd_run.png"), os.path.join(HERE, "default_job_plot.png"))
    print("wrote docs/default_job.png and docs/default_job_plot.png")


if __name__ == "__main__":
    main()
