"""tests/durations.tsv, the measured call times that decide which checks are long and slow
(tests/conftest.py): every entry names a test that exists, once, with a duration."""

import os
import re

import conftest

HERE = os.path.dirname(__file__)


def test_every_entry_names_an_existing_test_once():
    seen = set()
    with open(os.path.join(HERE, "durations.tsv")) as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    assert len(lines) > 100
    for line in lines:
        seconds, nodeid = line.split("\t")
        assert float(seconds) >= 0, line
        assert nodeid not in seen, f"{nodeid} is listed twice"
        seen.add(nodeid)
        path, name = nodeid.split("::", 1)
        src = os.path.join(HERE, os.pardir, path)
        assert os.path.exists(src), f"{nodeid}: no file {path}"
        func = re.split(r"[\[:]", name)[0]
        assert re.search(rf"def {re.escape(func)}\(", open(src).read()), f"{nodeid}: no test {func} in {path}"
    assert conftest._durations() == {n: float(s) for s, n in (x.split("\t") for x in lines)}
