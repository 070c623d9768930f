"""The chaos soak's seed-fixed smoke (bench/soak.py, issue 31): two episodes on one sandbox host, drawn with seed
67 from a device OOM and a SIGKILLed supervisor (the kinds' shuffled cycle draws each once: episode 1 a device OOM
in compute_log_prob that is never avoided -> ``failed: oom-device`` after 3 attempts; episode 2 the supervisor
SIGKILLed at step 2 of 10 (0.27 s a step), whose verl finishes -> the ``inv stop`` the tool names), every invariant
checked after each. (Seed 31 of the old draw gave the same two; under the cycle it draws the kill first, at step 2 of
8 runs of 0.26 s, which can end before the harness sees step 2: skipped, which this test refuses. Seed 67 did too:
the full-suite runs of 2026-12-02 session 5 skipped the kill, 3 times of 3 on one branch. In ``--quick`` mode the stand-in now holds after
the fault's step until the harness has acted: the scenario ``gate``, opened by ``Soak.inject``.) The full soak (14 fault kinds, 3 hosts, 30 minutes) is
``make soak``; this keeps its harness and its invariants working in CI at the cost of about a minute of one worker.
"""

from __future__ import annotations

import pytest

from conftest import repo_module
from test_launch_bench import RETRY_DELAY_S

pytestmark = [pytest.mark.bench, pytest.mark.soak_smoke]


def _soak():
    return repo_module("bench/soak.py")


def test_soak_smoke_two_faults_hold_every_invariant(sandbox, tmp_path):
    """The invariants and verdicts do not depend on how long a retry waits: the CLI's inventory gives h1 the retry
    delay of test_launch_bench.py's tests (``RETRY_DELAY_S``, not the NPU's 10 s) for the OOM episode's two retries."""
    out = tmp_path / "soak.md"
    tuned = sandbox.tuned_inventory(tmp_path / "hosts-tuned.toml", {"h1": {"retry_delay_s": RETRY_DELAY_S}})
    rc = _soak().main(
        [
            "--seed",
            "67",
            "--episodes",
            "2",
            "--hosts",
            "1",
            "--kinds",
            "oom,kill-supervisor",
            "--quick",
            "--bench-id",
            sandbox.id,
            "--keep",
            "--inventory",
            str(tuned),
            "--out",
            str(out),
        ]
    )
    report = out.read_text()
    assert rc == 0, report
    assert "| oom | 1 |" in report and "| kill-supervisor | 1 |" in report, report
