"""Stalls and a killed supervisor on the sandbox (issue 29): real SSH + docker exec + the verl stand-in.

1. The stand-in hangs mid-run with its processes alive (cue ``stall``: a child Python process stands in for a Ray
   worker): `inv status` shows `stalled` (no ETA) before the supervisor acts; the supervisor writes the py-spy dumps of
   the driver and the worker into the run dir, stops the attempt, retries once (the cue fires once) and finishes.
2. The supervisor is SIGKILLed mid-run: verl goes on; `inv status --json` (and `--all`) shows the step verl really
   reached (read from the attempt's own log, not train.log's), and `inv stop` records it.
"""

from __future__ import annotations

import json
import re
import time

import pytest

import test_launch_bench
from test_launch_bench import inv, launch, read_run, wait_end

pytestmark = pytest.mark.bench
host_ready = test_launch_bench.host_ready  # the fixture: inputs on the host, a clean host, the scenario cue


def _status_json(prep, host) -> dict:
    res = inv(prep, "status", "-H", host, "--json", timeout=120)
    rows = json.loads(res.stdout)
    return rows[0]


def test_stall_shows_stalled_then_stack_dumps_and_one_retry(sandbox, host_ready):
    host_ready("h1", {"step_time": 1.0, "failure": {"kind": "stall", "step": 4, "times": 1}})
    res, rid = launch(host_ready, "h1", "--steps", "6", "--framework", "fsdp", "--hang-timeout", "60")
    assert res.returncode == 0, res.stderr
    seen_stalled = None
    end = time.time() + 200
    while time.time() < end:
        rec = read_run(sandbox, "h1", rid)
        if rec.get("status") in ("succeeded", "failed", "stopped") or len(rec.get("attempts") or []) > 1:
            break
        row = _status_json(host_ready, "h1")
        if row.get("stalled_s") is not None:
            seen_stalled = row
            break
        time.sleep(2)
    assert seen_stalled is not None, "status never said stalled before the supervisor acted"
    assert seen_stalled["eta_s"] is None and seen_stalled["state"] == "running"
    table = inv(host_ready, "status", "-H", "h1").stdout
    assert "stalled" in table
    rec = wait_end(sandbox, "h1", rid, timeout=300)
    assert rec["status"] == "succeeded" and len(rec["attempts"]) == 2, rec.get("decision")
    a1 = rec["attempts"][0]
    assert a1["killed_by"] in ("hang", "stall") and a1["verdict"]["cls"] == "hang"
    stacks = (sandbox.runs_dir("h1") / rid / a1["stacks"]).read_text()
    assert "(driver)" in stacks and "(actor)" in stacks, stacks[:2000]
    assert "all_reduce (torch/distributed/distributed_c10d.py" in stacks  # the stand-in ranks' stacks, by py-spy
    roles = {e["role"] for e in a1["verdict"]["detail"]["stacks"]}
    assert "actor" in roles and a1["verdict"]["detail"]["cause"] == "collective"  # every rank in the collective


def test_killed_supervisor_status_shows_the_step_verl_reached(sandbox, host_ready):
    host_ready("h2", {"step_time": 0.5})
    res, rid = launch(host_ready, "h2", "--steps", "40", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    end = time.time() + 120
    while (read_run(sandbox, "h2", rid).get("step") or 0) < 2 and time.time() < end:
        time.sleep(0.5)
    rec = read_run(sandbox, "h2", rid)
    sandbox.exec("h2", "kill -9 %d" % rec["pids"]["supervisor"], check=True)
    alog = sandbox.runs_dir("h2") / rid / "attempt-1.log"
    frozen = read_run(sandbox, "h2", rid)["step"]  # after the kill: the supervisor may have written a step since rec

    def verl_step():
        steps = [int(m) for m in re.findall(r"step:(\d+) - ", alog.read_text(errors="replace"))]
        return max(steps or [0])

    end = time.time() + 120
    while verl_step() < frozen + 4 and time.time() < end:
        time.sleep(0.5)
    before = verl_step()  # verl goes on during the status call: bound the step status read from both sides
    row = _status_json(host_ready, "h2")
    reached = verl_step()
    assert before >= frozen + 4
    assert row["state"] == "supervisor-dead" and before - 1 <= row["step"] <= reached and row["step"] > frozen + 2, row
    assert row["log_read"].endswith("attempt-1.log")
    assert read_run(sandbox, "h2", rid)["step"] == frozen  # run.json (and train.log) stayed where the supervisor died
    # status --all and stop read the attempt's log too (a new user's trial: both said run.json's step)
    rows = json.loads(inv(host_ready, "status", "-H", "h2", "--all", "--json", timeout=120).stdout)
    (listed,) = [r for r in rows if r["run_id"] == rid]
    assert listed["state"] == "supervisor-dead" and listed["step"] >= reached, listed
    inv(host_ready, "stop", "-H", "h2", timeout=120)
    assert read_run(sandbox, "h2", rid)["step"] >= reached and read_run(sandbox, "h2", rid)["status"] == "stopped"
    sandbox.exec("h2", "kill -9 -%d" % rec["pids"]["verl_pgid"], check=False)
