"""The README's code and the notebooks run as written."""

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_tour_runs():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_starts_with_the_two_commands():
    lines = [l for l in (ROOT / "README.md").read_text().splitlines() if l.strip()]
    cmds = [l for l in lines[:8] if not l.startswith(("#", "`"))]
    assert "pip install ." in cmds[1] and "jaxmbd" in cmds[1].split("&&")[-1]
    assert "'.[test]'" in cmds[2] and "pytest" in cmds[2]


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = json.loads(path.read_text())
    ns = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), str(path.name), "exec"), ns)
