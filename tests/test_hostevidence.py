"""A multi-host attempt's evidence as the supervisor on the head gathers it (agent/supervisor/hostevidence.py,
issue 29 item 5), without a cluster: the head's files read in-process, the workers' answer from the ``evidence
cluster`` op replaced by a stand-in Python (the real op runs against a real 2-host Ray cluster in
tests/test_multihost_bench.py)."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

from dapo_ops.agent.supervisor import hostevidence, record
from dapo_ops.core import first_error

WATCHDOG = (
    "[rank0]:[E1204 14:46:40.1 ProcessGroupHCCL.cpp:543] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkHCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800011 milliseconds "
    "before timing out.\n"
)
H2_PLOG = (
    "[INFO] HCCL(7,python):%s.000.000 [hccl_comm.cc:80] [7][HcclComm][Init] rankSize[16], userRank[9]\n"
    "[ERROR] HCCL(7,python):%s.000.100 [hccl_comm.cc:115] [7][HcclComm][Init]errNo[0x0000000005000007] hccl "
    "initialize failed\n"
)

# what the `evidence cluster` op does on the head, for h2 (answers) and h3 (does not), without Ray
FAKE_OP = """#!%s
import json, os, sys, time
sys.path.insert(0, %r)
from dapo_ops.agent import evidence
run_dir, since = sys.argv[4], float(sys.argv[5])
stamp = time.strftime("%%Y-%%m-%%d-%%H:%%M:%%S", time.localtime(time.time() - 60))
found = evidence.parse({"host": "c2", "utc_offset_s": time.localtime().tm_gmtoff, "ray_logs": [],
                        "plog_texts": [{"file": "plog-7_1.log", "path": "/root/ascend/log/debug/plog/plog-7_1.log",
                                        "mtime": time.time(), "text": %r %% (stamp, stamp)}], "errors": []})
evidence.write(run_dir, "h2", found)
print(json.dumps({"answered": ["h2"], "lost": [{"name": "h3", "address": "a3", "why": "did not answer within 1 s"}]}))
"""


def _spec(python):
    return {
        "python": python,
        "ray": {
            "head": "192.0.2.1",
            "port": 6379,
            "nodes": [
                {"name": "h1", "address": "a1"},
                {"name": "h2", "address": "a2"},
                {"name": "h3", "address": "a3"},
            ],
        },
    }


def _fake_python(tmp_path, text):
    p = tmp_path / "python"
    p.write_text(text)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


def test_every_host_is_collected_the_lost_one_named_and_the_worker_rank_that_failed_first_named(tmp_path, monkeypatch):
    logs = tmp_path / "ray" / "session_latest" / "logs"
    logs.mkdir(parents=True)
    (logs / "worker-aa-01000000-4001.err").write_text(":job_id:01000000\n" + WATCHDOG)  # the head, now
    (logs / "worker-old-01000000-4000.err").write_text("Traceback (most recent call last):\nValueError: old\n")
    os.utime(logs / "worker-old-01000000-4000.err", (1000.0, 1000.0))  # before the attempt
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no plog of the head
    run_dir = tmp_path / "run"
    (run_dir / "evidence" / "h3").mkdir(parents=True)  # an earlier attempt's answer is not taken for this one's
    (run_dir / "evidence" / "h3" / "evidence.json").write_text("{}")
    python = _fake_python(tmp_path, FAKE_OP % (sys.executable, str(Path(__file__).resolve().parents[1]), H2_PLOG))
    got = hostevidence.collect(_spec(python), str(run_dir), time.time() - 30, wait_s=20)
    assert got["hosts"] == ["h1", "h2"], got
    assert got["lost"] == [{"name": "h3", "address": "a3", "why": "did not answer within 1 s"}], got
    # h2's HCCL init failed a minute before the head's rank 0 timed out: h2, rank 9 (its init line named it)
    assert (got["earliest"]["host"], got["earliest"]["rank"], got["earliest"]["cls"]) == ("h2", 9, "hccl-timeout")
    assert got["line"].startswith("earliest error: host h2 rank 9 at ") and got["line"].endswith(
        "no evidence from h3 (lost: its files stay on that host)"
    ), got["line"]
    head = json.loads((run_dir / "evidence" / "h1" / "evidence.json").read_text())
    assert [lg["name"] for lg in head["ray_logs"]] == ["worker-aa-01000000-4001.err"]  # the old log is not read
    assert "Watchdog caught" in (run_dir / "evidence" / "h1" / "ray-worker-logs.txt").read_text()
    assert not (run_dir / "evidence" / "h3").exists()
    # the head's watchdog line alone is an error too (it says no "error"), rank 0
    alone = first_error.earliest({"h1": head})
    assert (alone["host"], alone["rank"], alone["tier"]) == ("h1", 0, first_error.COLLECTIVE), alone
    # the verdict, run.json's decision and the ending line (status, watch, the failure notice) name it
    verdict = {"cls": "crash-other", "action": "unclassified crash", "detail": {}}
    hostevidence.apply(verdict, got)
    assert (verdict["detail"]["error_host"], verdict["detail"]["error_rank"]) == ("h2", 9)
    rec = {"attempts": [], "step": 1, "total_steps": 4}
    record.end_run(rec, "failed", verdict, {"action": "stop", "reason": "unclassified crash"})
    assert rec["decision"]["ended"] == "failed: unclassified crash at step 1/4; " + got["line"]
    assert rec["decision"]["evidence"] == got["line"]


def test_a_collector_that_does_not_answer_in_time_is_killed_and_every_worker_named_lost(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.setattr(hostevidence, "CHILD_EXTRA_S", 0.0)
    python = _fake_python(tmp_path, "#!/bin/sh\nexec sleep 600\n")  # ray.init blocked on a dead head
    got = hostevidence.collect(_spec(python), str(tmp_path / "run"), time.time(), wait_s=0.5)
    assert got["hosts"] == ["h1"] and [x["name"] for x in got["lost"]] == ["h2", "h3"], got
    assert got["lost"][0]["why"] == "the Ray collector did not finish within 0 s", got
    assert got["earliest"] is None and got["line"] == "no evidence from h2, h3 (lost: its files stay on that host)"


def test_a_single_host_run_collects_nothing(tmp_path):
    assert hostevidence.collect({"ray": None}, str(tmp_path), 0.0, 1.0) is None
    assert not (tmp_path / "evidence").exists()


def test_a_ray_worker_log_line_of_torch_npu_is_dated_by_its_own_time_not_the_files_mtime():
    """The Ray worker log's evidence line is torch_npu's own ``[ERROR] <time> (PID:.., RankID:9) ...``: it is dated
    by that time, so the verdict's line says when (it read "host h2 rank 9 (worker-...err: ...)" with no time when
    the file's mtime ordered it first; a fresh-clone .ci/run of 2026-12-07)."""
    from dapo_ops.core import first_error

    line = "[ERROR] 2026-12-07-02:26:18 (PID:207, Device:1, RankID:9) ERR02200 DIST call hccl api failed."
    found = {"ray_logs": [{"name": "worker-1.err", "mtime": 1.0, "text": line + "\n"}]}
    [f] = [x for x in first_error.findings("h2", found) if x["source"] == "worker-1.err"]
    assert f["time"] == "2026-12-07-02:26:18" and f["ts"] > 1.0 and f["rank"] == 9
    assert first_error.summary_line(f, []).startswith("earliest error: host h2 rank 9 at 2026-12-07-02:26:18 ")
