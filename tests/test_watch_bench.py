"""End to end with the real ``launch`` and the real supervisor running the verl stand-in in the sandbox:
``watch`` through a device OOM (attempt 2 with offload) to success, ``status`` and ``logs --errors`` of that
run, and ``stop`` of a live run (the supervisor stops its own verl process group)."""

from __future__ import annotations

import json
import time

import pytest

from test_launch_bench import host_ready, launch, wait_end  # noqa: F401 - host_ready is a fixture
from test_status_bench import cli, container_pids

pytestmark = pytest.mark.bench


def test_watch_oom_escalation_to_success_then_status_and_errors(sandbox, host_ready):  # noqa: F811
    host_ready(
        "h1",
        {
            "step_time": 1.0,
            "failure": {"kind": "oom-device", "step": 4, "avoid_with": ["offload"], "hang_s": 120, "phase": "none"},
        },
    )
    res, rid = launch(host_ready, "h1", "--steps", "6", "--save-freq", "2", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    w = cli(sandbox, "-H", "h1", "watch", "--interval", "0.5", timeout=300)
    assert w.returncode == 0, (w.stdout, w.stderr)
    lines = w.stdout.splitlines()
    assert lines[0].startswith("h1: run %s " % rid)
    esc = [ln for ln in lines if "attempt 2 started" in ln]
    assert len(esc) == 1 and "OOM escalation: +offload" in esc[0] and "after oom-device" in esc[0]
    assert lines[-1] == "h1: finished: succeeded at step 6/6"

    rows = json.loads(cli(sandbox, "-H", "h1", "status", "--json", check=0).stdout)
    r = rows[0]
    assert (r["run_id"], r["state"], r["attempt"], r["step"], r["total"]) == (rid, "succeeded", 2, 6, 6)
    assert [f["name"] for f in r["features"] if f["oom_added"]] == ["offload"]
    assert r["supervisor_alive"] is False and not r["stale"]

    errs = cli(sandbox, "-H", "h1", "logs", "--errors", check=0).stdout
    assert "===== %s attempt 1: oom-device =====" % rid in errs
    assert any(ln.startswith(">> ") and "out of memory" in ln for ln in errs.splitlines())
    assert "attempt 2:" not in errs


def test_stop_real_supervisor(sandbox, host_ready):  # noqa: F811
    host_ready("h1", {"step_time": 2.0})
    res, rid = launch(host_ready, "h1", "--steps", "50", "--save-freq", "2", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    rd = sandbox.runs_dir("h1") / rid
    deadline = time.time() + 180
    while True:  # running with a verl process group, past the checkpoint at step 2
        rec = json.loads((rd / "run.json").read_text())
        if rec.get("status") == "running" and (rec.get("pids") or {}).get("verl_pgid") and (rec.get("step") or 0) >= 3:
            break
        assert time.time() < deadline, rec
        time.sleep(0.5)
    sup, pgid = rec["pids"]["supervisor"], rec["pids"]["verl_pgid"]
    out = cli(sandbox, "-H", "h1", "stop", check=0).stdout
    assert "h1: run %s running -> stopped (SIGTERM supervisor pid %d)" % (rid, sup) in out
    rec = wait_end(sandbox, "h1", rid, timeout=60)
    assert rec["status"] == "stopped"
    assert sup not in container_pids(sandbox, "h1") and pgid not in container_pids(sandbox, "h1")
    assert (rd / "train.log").stat().st_size > 0 and (rd / "checkpoints" / "global_step_2").is_dir()
    assert "already stopped" in cli(sandbox, "-H", "h1", "stop", check=0).stdout
    w = cli(sandbox, "-H", "h1", "watch", "--interval", "0.2")
    assert w.returncode == 5 and "stopped by the operator at step" in w.stderr


def test_oom_forever_watch_status_and_errors_say_failed_with_the_suggestions(sandbox, host_ready):  # noqa: F811
    host_ready("h1", {"step_time": 0.3, "failure": {"kind": "oom-device", "step": 2, "avoid_with": [], "hang_s": 1}})
    res, rid = launch(
        host_ready, "h1", "--steps", "6", "--save-freq", "1", "--framework", "fsdp", "--max-oom-retries", "2"
    )
    assert res.returncode == 0, res.stderr
    w = cli(sandbox, "-H", "h1", "watch", "--interval", "0.5", timeout=300)
    assert w.returncode == 1, (w.stdout, w.stderr)
    rec = json.loads((sandbox.runs_dir("h1") / rid / "run.json").read_text())
    ended = rec["decision"]["ended"]
    assert (
        ended.startswith("failed: device OOM")
        and "after 2 OOM retries" in ended
        and ended.endswith("at step %s/6" % rec["step"])
    ), ended
    sugg = rec["decision"]["suggestions"]
    assert sugg
    fin = w.stdout[w.stdout.index("h1: finished:") :].splitlines()
    assert fin[0] == "h1: finished: %s (oom-device)" % ended
    assert fin[1 : 1 + len(sugg)] == ["h1:   try: %s" % s for s in sugg]
    assert w.stderr.strip().startswith("h1: run %s %s" % (rid, ended))
    # mid-run, a watch that polls between the verdict and the next attempt prints the retry it sees (what the
    # supervisor is doing then); once the run has failed for good, no line offers that retry any more
    assert "retry from the last checkpoint" not in w.stdout[w.stdout.index("h1: finished:") :] + w.stderr

    row = json.loads(cli(sandbox, "-H", "h1", "status", "--json", check=0).stdout)[0]
    assert (row["state"], row["ended"], row["suggestions"]) == ("failed", ended, sugg)
    assert "retry" not in row["hint"]
    table = cli(sandbox, "-H", "h1", "status", check=0).stdout
    assert "h1 %s: %s" % (rid, ended) in table and ("  try: " + sugg[0])[:60] in table
    assert "retry from the last checkpoint" not in table

    errs = cli(sandbox, "-H", "h1", "logs", "--errors", check=0).stdout
    assert "===== %s %s =====" % (rid, ended) in errs and "try: " + sugg[0] in errs
