"""The supervisor on failures that are not verl's own errors (issue 32 items 4-5): the runs disk filling up
mid-run, and verl killed from outside (SIGKILL / SIGTERM nobody here ordered). The real supervisor process with
the fake verl of tests/fake_verl.py; the disk-full run has a real small tmpfs as its runs dir (root only)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dapo_ops.agent import runfiles
from dapo_ops.core import classify, features, ladder
from supervisor_helpers import FAST, new_run, run_to_end


def _run(tmp_path: Path, fake: dict, *, steps: int = 6, supervisor: dict | None = None) -> Path:
    workdir = tmp_path / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    return new_run(
        tmp_path, steps=steps, workdir=workdir, files={"fake.json": fake}, supervisor=dict(FAST, **(supervisor or {}))
    )


def test_external_sigkill_is_its_own_verdict_with_evidence_and_the_resume(tmp_path):
    """``kill -9`` of verl's driver (exit 137, nothing in the log, the OOM-kill counter unchanged): the run stops
    with a verdict that says it was killed from outside, what the host showed (the counter, dmesg or why dmesg is
    not readable), and `inv launch --resume <run_id>`; not the old 'unclassified crash' without try: lines."""
    counter = tmp_path / "memory.events"
    counter.write_text("oom 0\noom_kill 4\n")
    run_dir = _run(
        tmp_path,
        {
            "step_time": 0.03,
            "exit_at": 3,
            "exit_code": 137,
            "final_text": "(TaskRunner pid=1) INFO: generating sequences",
        },
        supervisor={"oom_counter_files": [str(counter)]},
    )
    rec = run_to_end(run_dir)
    rid = rec["run_id"]
    assert rec["status"] == "failed" and len(rec["attempts"]) == 1  # not retried: nobody here ordered the kill
    v = rec["verdict"]
    assert (v["cls"], v["detail"]["cause"], v["detail"]["external"]) == ("crash-other", "sigkill", True)
    assert "killed from outside" in v["action"] and "--resume" in v["hint"]
    assert "%s oom_kill 4 -> 4 during the attempt: not the kernel OOM killer" % counter in v["evidence"]
    assert any(e.startswith("dmesg") for e in v["evidence"])
    d = rec["decision"]
    assert (
        d["ended"] == "failed: killed from outside (SIGKILL, exit 137) with no error in the log: not retried "
        "at step 2/6"
    )
    assert any("dmesg" in s and "memory.events" in s for s in d["suggestions"])
    assert any(s.startswith("then `inv launch -H local --resume %s`" % rid) for s in d["suggestions"])


def test_external_sigterm_and_the_policy_are_in_the_ladder():
    """143 with no error in the log is the same verdict; a 137 after a traceback stays the crash it was."""
    v = classify.classify("step:4 - a:1\n(TaskRunner pid=1) INFO: saving\n", exit_code=143)
    assert (v.cls, v.detail.get("cause"), v.detail.get("external")) == ("crash-other", "sigterm", True)
    assert "SIGTERM" in v.hint
    d = ladder.decide(
        features.resolve(None),
        v.cls,
        v.detail,
        0,
        2,
        {},
        {"run_id": "20260101-000000-abcd", "hosts": ["h1", "h2"], "mode": "dapo", "trainer_mode": "sync"},
    )
    assert d.action == "stop" and d.reason.startswith("killed from outside (SIGTERM, exit 143)")
    assert d.suggestions[-1].startswith("then `inv launch -H h1,h2 --mode sync --resume 20260101-000000-abcd`")
    crash = classify.classify("step:4 - a:1\nTraceback (most recent call last):\nValueError: x\n", exit_code=137)
    assert crash.detail.get("external") is None
    assert ladder.decide(features.resolve(None), crash.cls, crash.detail, 0, 2, {}, {}).reason.startswith(
        "unclassified crash"
    )


@pytest.fixture
def small_runs_dir(tmp_path):
    """A 2 MiB tmpfs as the runs dir (needs root, as the sandbox does)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(runs)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        yield runs
    finally:
        subprocess.run(["umount", "-l", str(runs)], check=False)


def test_disk_full_mid_run_ends_in_a_disk_full_verdict_with_run_json_intact(tmp_path, small_runs_dir):
    """verl's output fills the runs dir (a 2 MiB tmpfs) mid-run: the supervisor survives ENOSPC, stops verl, and
    the final run.json (whole, valid) says `disk full` with the path and the fix; no run.json.tmp, no traceback."""
    run_dir = _run(tmp_path, {"step_time": 0.01, "noise_lines": 100, "save_freq": 0}, steps=100000)
    rec = run_to_end(run_dir, timeout=120)
    assert rec["status"] == "failed", rec["status"]
    v = rec["verdict"]
    assert (v["cls"], v["detail"]["cause"], v["detail"]["path"]) == ("crash-other", "disk-full", str(small_runs_dir))
    assert rec["decision"]["ended"].startswith(
        "failed: disk full: %s has no space left: not retried at step " % small_runs_dir
    )
    assert any("df -h %s" % small_runs_dir in s for s in rec["decision"]["suggestions"])
    assert any("--resume %s" % rec["run_id"] in s for s in rec["decision"]["suggestions"])
    assert len(rec["attempts"]) == 1 and rec["pids"]["verl_pgid"] is None
    assert json.loads((run_dir / "run.json").read_text())["status"] == "failed"  # whole, valid JSON
    assert not (run_dir / "run.json.tmp").exists() and not (run_dir / ".space-reserve").exists()
    sup_log = (run_dir / "supervisor.log").read_text(errors="replace")
    assert "Traceback" not in sup_log
    assert runfiles.read_lock(small_runs_dir) is None
