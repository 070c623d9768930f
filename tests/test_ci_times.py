"""CI time by stage: with ``--durations`` (``.ci/run`` passes it) the suite ends with the time by test file and by
xdist worker (tests/conftest.py ``time_by_file_and_worker``); ``.ci/run`` prints each of its stages' time."""

import re
from types import SimpleNamespace as NS

from conftest import REPO, time_by_file_and_worker


def report(nodeid, when, duration, worker, start, stop):
    node = NS(gateway=NS(id=worker)) if worker else None
    return NS(nodeid=nodeid, when=when, duration=duration, node=node, start=start, stop=stop)


def test_time_by_file_sums_every_phase_and_workers_say_when_they_ended():
    reports = [
        report("test_a.py::t1", "setup", 2.0, "gw0", 100.0, 102.0),
        report("test_a.py::t1", "call", 30.0, "gw0", 102.0, 132.0),
        report("test_a.py::t1", "teardown", 1.0, "gw0", 132.0, 133.0),
        report("test_b.py::t2[x]", "call", 5.0, "gw1", 100.5, 105.5),
        report("test_b.py::t2[y]", "call", 4.0, "gw1", 105.5, 109.5),
    ]
    files, workers = time_by_file_and_worker(reports)
    assert files == [("test_a.py", 33.0, 1), ("test_b.py", 9.0, 2)]
    assert workers == [("gw0", 33.0, 100.0, 133.0), ("gw1", 9.0, 100.5, 109.5)]
    # without xdist the reports carry no node: one "main" worker
    assert time_by_file_and_worker([report("test_a.py::t", "call", 1.0, None, 5.0, 6.0)])[1] == [
        ("main", 1.0, 5.0, 6.0)
    ]


def test_ci_run_prints_its_stages_and_asks_the_suite_for_its_times():
    text = (REPO / ".ci" / "run").read_text()
    stages = re.findall(r'^stage "([^"]+)"', text, re.M)
    for want in ("apt packages", "python venv", "ruff", "complexity ratchet", "import-linter", "mypy", "make test"):
        assert any(want in s for s in stages), (want, stages)
    assert "--durations=" in text
