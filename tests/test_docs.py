"""The README's and the reference pages' code and the notebooks run as written; their links resolve."""

import ast
import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.long
def test_readme_tour_runs():
    text = (ROOT / "README.md").read_text()
    blocks = PYTHON_BLOCK.findall(text)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def readme_commands():
    """The command lines of the README's first ```bash block (comments and blank lines left out)."""
    block = re.search(r"^```bash\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_readme_starts_with_the_two_commands():
    """The README's first block, before any other, holds exactly the newcomer's two commands:
    install and run the main job; install the test extra and run the default suite."""
    text = (ROOT / "README.md").read_text()
    assert text.index("```bash") < text.index("```python")
    one, two = readme_commands()
    assert one == "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/jaxmbd"
    assert two == "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest -n auto"


def test_ci_runs_the_readme_commands_from_the_readme():
    """.ci/run reads the two command lines from README.md (what it prints with
    --print-readme-commands is the README's block); run on a stand-in checkout whose README holds
    two harmless commands, it runs them with bash, in order, with the durations report asked for,
    then the long checks with the environment's pytest, and fails when a step fails, pytest's
    "no tests collected" (exit status 5) included."""
    import os
    import shutil
    import subprocess
    import tempfile
    printed = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--print-readme-commands"], capture_output=True,
                             text=True, timeout=60, check=True).stdout.splitlines()
    assert printed == readme_commands()
    with tempfile.TemporaryDirectory() as d:
        d = pathlib.Path(d)
        (d / ".ci").mkdir()
        shutil.copy(ROOT / ".ci" / "run", d / ".ci" / "run")
        (d / ".venv" / "bin").mkdir(parents=True)
        python = d / ".venv" / "bin" / "python"
        python.write_text('#!/usr/bin/env bash\necho "python $*" >> log\nexit "${PYTEST_EXIT:-0}"\n')
        python.chmod(0o755)
        readme = ("# stand-in\n\n```bash\n# 1. first\necho \"one $PYTEST_ADDOPTS\" >> log\n"
                  "# 2. second\necho two >> log && exit ${TWO_EXIT:-0}\n```\n\n```bash\necho never >> log\n```\n")
        (d / "README.md").write_text(readme)
        for env, ok in (({}, True), ({"TWO_EXIT": "5"}, False), ({"PYTEST_EXIT": "5"}, False),
                        ({"TWO_EXIT": "1"}, False)):
            (d / "log").unlink(missing_ok=True)
            r = subprocess.run(["bash", str(d / ".ci" / "run")], capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, **env))
            assert (r.returncode == 0) == ok, (env, r.stdout, r.stderr)
            assert (d / "log").read_text().splitlines() == [
                "one --durations=30", "two", "python -m pytest -n auto -m long and not slow"], env
            if "5" in env.values():
                assert "collected no tests" in r.stderr, r.stderr


DOCS = sorted((ROOT / "docs").glob("*.md"))
# pages whose blocks compile for 15 s or more on 2 cores (a mechanism under Rosenbrock, 20-26 s): long
# checks, not in the default run; the others take 2-12 s
LONG_PAGES = ("closed_loops.md",)


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.long) if p.name in LONG_PAGES else p
                                  for p in DOCS if PYTHON_BLOCK.search(p.read_text())], ids=lambda p: p.name)
def test_docs_python_blocks_run(path):
    """Every python block of a reference page runs, in order, in one namespace (a page's
    blocks may build on each other), as a reader would paste them."""
    ns = {"__name__": "__main__"}
    for i, block in enumerate(PYTHON_BLOCK.findall(path.read_text())):
        exec(compile(block, f"{path.name}[python block {i}]", "exec"), ns)


FENCE = re.compile(r"^```(.*)$")
PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *DOCS]


def test_docs_code_blocks_say_what_they_are():
    """Every fenced block of the README, bench/README.md and docs/ opens with its language:
    python (run by the tests above), or bash / text (not run), so no example escapes the tests
    by being unlabelled."""
    for path in PAGES:
        inside = False
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = FENCE.match(line)
            if not m:
                continue
            if not inside:
                assert m.group(1) in ("python", "bash", "text"), \
                    f"{path.relative_to(ROOT)}:{n}: a code block labelled {m.group(1)!r} (python, bash or text)"
            inside = not inside
        assert not inside, f"{path.relative_to(ROOT)}: an unclosed code block"


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_docs_links_resolve():
    """Every relative link of the README, bench/README.md, docs/ and bench/results/ names a file
    of the repository."""
    pages = PAGES + sorted((ROOT / "bench" / "results").glob("*.md"))
    for path in pages:
        for target in LINK.findall(path.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)}: link to {target} names no file"


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
READS_QUICK = re.compile(r"""environ(\.get\(|\[)\s*["']JAXMBD_QUICK["']""")  # os.environ.get("JAXMBD_QUICK" ...


def _code(nb):
    return ["".join(cell["source"]) for cell in nb["cells"] if cell["cell_type"] == "code"]


# slow checks: the stiff-integration notebook (the stiffened vehicle, minutes of compilation), the contact
# notebook (two reverse passes through adaptive Rosenbrock, about 7 min in quick mode) and the
# three whose quick mode still compiles for 40-70 s (closed loops, batched gradients, quickstart); the
# README tour (a long check) covers the quickstart's calls.  Every notebook is a long check but the
# branch-sparsity one, which stays in the default run.
SLOW_NOTEBOOKS = ("01_", "03_", "04_", "05_", "07_")
DEFAULT_NOTEBOOK = "02_branch_sparsity.ipynb"


def _notebook_case(p):
    if p.name == DEFAULT_NOTEBOOK:
        return p
    marks = [pytest.mark.long] + ([pytest.mark.slow] if p.name.startswith(SLOW_NOTEBOOKS) else [])
    return pytest.param(p, marks=marks)


@pytest.fixture
def compilation_cache(tmp_path, monkeypatch):
    """The notebooks turn on JAX's persistent compilation cache
    (jaxmbd.enable_compilation_cache): here in a temporary directory
    (JAXMBD_CACHE_DIR), turned off again afterwards, as the setting is
    process-wide (tests/test_cli.py checks that no test leaves it on)."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    monkeypatch.setenv("JAXMBD_CACHE_DIR", str(tmp_path / "jax_cache"))
    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")
    before = {name: getattr(jax.config, name) for name in names}
    yield tmp_path / "jax_cache"
    for name, value in before.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()


@pytest.mark.parametrize("path", [_notebook_case(p) for p in NOTEBOOKS], ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch, compilation_cache):
    """Every code cell, in order, in one namespace, as Jupyter would run them:
    cwd = notebooks/, JAXMBD_QUICK=1 (small sizes), the Agg backend; every
    figure shown (or left open) has labelled axes, and each notebook plots
    and keeps its compiled programs in JAXMBD_CACHE_DIR."""
    import matplotlib

    monkeypatch.setenv("JAXMBD_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(path.parent)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.extend(_check_labels(plt)))
    nb = json.loads(path.read_text())
    ns = {"__name__": "__main__"}
    try:
        for i, source in enumerate(_code(nb)):
            _run_cell(source, f"{path.name}[code cell {i}]", ns)
        shown.extend(_check_labels(plt))
    finally:
        plt.close("all")
    assert shown, f"{path.name} draws no plot"
    assert any(f.name.endswith("-cache") for f in compilation_cache.iterdir()), f"{path.name} cached no program"


def _run_cell(source, name, ns):
    """Run a cell as Jupyter does: its statements, then its last expression's value displayed
    (here: an object with an HTML form, such as a jaxmbd.View, renders it, and the page is not
    empty)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, name, "exec"), ns)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), name, "eval"), ns)
        if hasattr(value, "_repr_html_"):
            assert "<iframe" in value._repr_html_(), f"{name}: its displayed value renders no page"


def _check_labels(plt):
    """Every plotted axes of every open figure has an x and a y label (on it or
    on an axes it shares that axis with); colorbars are exempt.  Returns the
    figures checked."""
    figs = [plt.figure(n) for n in plt.get_fignums()]
    for fig in figs:
        for ax in fig.axes:
            if getattr(ax, "_colorbar", None) is not None or not ax.has_data():
                continue
            xs = ax.get_shared_x_axes().get_siblings(ax)
            ys = ax.get_shared_y_axes().get_siblings(ax)
            title = ax.get_title() or fig.texts and fig.texts[0].get_text() or "untitled"
            assert any(a.get_xlabel() for a in xs), f"plot {title!r}: no x-axis label"
            assert any(a.get_ylabel() for a in ys), f"plot {title!r}: no y-axis label"
    return figs


def test_notebooks_are_stored_stripped_and_honour_quick_mode():
    """No outputs or execution counts in the repository, and every notebook
    reads JAXMBD_QUICK (the docs test runs them with it set)."""
    assert NOTEBOOKS, "no notebooks found"
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        assert nb["nbformat"] == 4, path.name
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "code":
                assert cell.get("outputs") == [], f"{path.name}: cell {i} has stored outputs"
                assert cell.get("execution_count") is None, f"{path.name}: cell {i} has an execution count"
        assert any(READS_QUICK.search(src) for src in _code(nb)), f"{path.name} does not read JAXMBD_QUICK"
