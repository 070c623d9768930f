"""``make test``'s ``--dist loadgroup`` really sends an ``xdist_group`` to one worker (tests/conftest.py
``_suffix_xdist_groups``): a nested pytest run of a tiny project, three grouped tests sharing a module fixture among
ungrouped ones, on three workers; the module fixture must be set up once, on one worker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

PROJECT_TEST = """
import os
import pytest

@pytest.fixture(scope="module")
def shared():
    with open(os.environ["SETUPS"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "") + "\\n")
    yield

@pytest.mark.xdist_group("g")
def test_1(shared): pass
def test_o1(): pass
@pytest.mark.xdist_group("g")
def test_2(shared): pass
def test_o2(): pass
@pytest.mark.xdist_group(name="g")
def test_3(shared): pass
"""

PROJECT_CONFTEST = f"""
import importlib.util
import sys
spec = importlib.util.spec_from_file_location("dapo_conftest", {str(CONFTEST)!r})
mod = importlib.util.module_from_spec(spec)
sys.modules["dapo_conftest"] = mod
spec.loader.exec_module(mod)

def pytest_collection_modifyitems(config, items):
    mod._suffix_xdist_groups(config, items)
"""


def test_an_xdist_group_runs_on_one_worker_and_shares_its_module_fixture(tmp_path):
    (tmp_path / "test_a.py").write_text(PROJECT_TEST)
    (tmp_path / "test_b.py").write_text("def test_b1(): pass\ndef test_b2(): pass\ndef test_b3(): pass\n")
    (tmp_path / "conftest.py").write_text(PROJECT_CONFTEST)
    setups = tmp_path / "setups"
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup", "-v"],
        cwd=tmp_path,
        env={**os.environ, "SETUPS": str(setups)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    workers = {
        line.split("]")[0].lstrip("[")
        for line in res.stdout.splitlines()
        if re.search(r"PASSED test_a\.py::test_[123]\b", line)
    }
    assert len(workers) == 1, res.stdout
    assert setups.read_text().split() == sorted(workers), (setups.read_text(), res.stdout)
