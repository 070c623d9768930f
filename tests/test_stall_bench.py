"""Stalls and a killed supervisor on the sandbox (issue 29): real SSH + docker exec + the verl stand-in.

1. The stand-in hangs mid-run with its processes alive (cue ``stall``: a child Python process stands in for a Ray
   worker): `inv status` shows `stalled` (no ETA) before the supervisor acts; the supervisor writes the py-spy dumps of
   the driver and the worker into the run dir, stops the attempt, retries once (the cue fires once) and finishes.
2. (issue 42) A stall right after step 1 of a run with fast steps is called at the limit the run's own step 1 gives
   (5 x its ``timing_s/step``, floored at ``stall_floor_s``), far below HANG_TIMEOUT; its dumps show one actor rank
   parked outside the collective the other waits in (``collective-missing``): one retry, and the run finishes.
3. (issue 42) Every reward worker parked in the user's ``compute_score``: the verdict names that frame and the run
   stops (no blind retry).
4. The supervisor is SIGKILLed mid-run: verl goes on; `inv status --json` (and `--all`) shows the step verl really
   reached (read from the attempt's own log, not train.log's), and `inv stop` records it.
"""

from __future__ import annotations

import json
import re
import time

import pytest

import test_launch_bench
from dapo_ops.agent.supervisor import stall
from dapo_ops.core import defaults
from dapo_ops.core.classify import storm
from test_launch_bench import inv, launch, read_run, wait_end

pytestmark = pytest.mark.bench
host_ready = test_launch_bench.host_ready  # the fixture: inputs on the host, a clean host, the scenario cue


def _stall_floor(prep, seconds: float, host: str = "h1") -> float:
    """Run ``host`` at a stall floor of ``seconds`` for this test: the host tunable a user sets in hosts.toml
    (``[hosts.<name>.supervisor] stall_floor_s``, dapo_ops/agent/supervisor/config.py; the default 60 s,
    ``stall.STALL_FLOOR_S``) in the fixture's copy of the sandbox's inventory (``prep.tune``), so each stall is called
    in ``seconds`` instead of a minute of CI. Returns ``seconds``."""
    prep.tune(host, stall_floor_s=seconds)
    return seconds


def _status_json(prep, host) -> dict:
    res = inv(prep, "status", "-H", host, "--json", timeout=120)
    rows = json.loads(res.stdout)
    return rows[0]


def test_stall_shows_stalled_then_stack_dumps_and_one_retry(sandbox, host_ready):
    host_ready("h1", {"step_time": 1.0, "failure": {"kind": "stall", "step": 4, "times": 1}})
    _stall_floor(host_ready, 30.0)  # the supervisor calls a stall at 30 s; status says "no step for .." below it
    res, rid = launch(host_ready, "h1", "--steps", "6", "--framework", "fsdp", "--hang-timeout", "60")
    assert res.returncode == 0, res.stderr
    seen_stalled = None
    end = time.time() + 200
    while time.time() < end:
        rec = read_run(sandbox, "h1", rid)
        if rec.get("status") in ("succeeded", "failed", "stopped") or len(rec.get("attempts") or []) > 1:
            break
        row = _status_json(host_ready, "h1")
        # status calls a stall only at the supervisor's own limit (one threshold): below it, "no step for .."
        assert row.get("stalled_s") is None or row["stalled_s"] >= row.get("stall_after_s", 30.0), row
        if row.get("no_step_s") is not None and row.get("stalled_s") is None:
            seen_stalled = row
            break
        time.sleep(2)
    assert seen_stalled is not None, "status never said 'no step for ..' before the supervisor acted"
    assert seen_stalled["eta_s"] is None and seen_stalled["state"] == "running"
    rec = wait_end(sandbox, "h1", rid, timeout=300)
    assert rec["status"] == "succeeded" and len(rec["attempts"]) == 2, rec.get("decision")
    a1 = rec["attempts"][0]
    assert a1["killed_by"] in ("hang", "stall") and a1["verdict"]["cls"] == "hang"
    stacks = (sandbox.runs_dir("h1") / rid / a1["stacks"]).read_text()
    assert "(driver)" in stacks and "(actor)" in stacks, stacks[:2000]
    assert "all_reduce (torch/distributed/distributed_c10d.py" in stacks  # the stand-in ranks' stacks, by py-spy
    roles = {e["role"] for e in a1["verdict"]["detail"]["stacks"]}
    assert "actor" in roles and a1["verdict"]["detail"]["cause"] == "collective"  # every rank in the collective


def test_a_stall_right_after_step_1_is_called_at_step_1s_limit_and_a_missing_rank_retries_once(sandbox, host_ready):
    failure = {"kind": "stall", "step": 2, "times": 1, "ranks": 2, "missing": 1}
    host_ready("h1", {"step_time": 0.3, "failure": failure})
    floor = _stall_floor(host_ready, 20.0)
    res, rid = launch(host_ready, "h1", "--steps", "4", "--framework", "fsdp")  # HANG_TIMEOUT: the default 1800 s
    assert res.returncode == 0, res.stderr
    rec = wait_end(sandbox, "h1", rid, timeout=400)
    assert rec["status"] == "succeeded" and len(rec["attempts"]) == 2, rec.get("decision")
    a1 = rec["attempts"][0]
    d = a1["verdict"]["detail"]
    assert a1["killed_by"] == "stall" and a1["verdict"]["cls"] == "hang" and d["stall_by"] == "silence", d
    assert d["step"] == 1 and len(d["step_s"]) == 1  # called before step 2: only step 1 sized it
    # the limit step 1 gave: 5 x its 0.3 s of work is below the floor, so the host's floor, not HANG_TIMEOUT
    assert d["stall_after_s"] == floor < stall.STALL_FLOOR_S < defaults.SPEC["hang_timeout_s"], d
    assert d["idle_s"] >= d["stall_after_s"]
    assert d["cause"] == "collective-missing" and d["frame"].startswith("all_reduce (torch/distributed/"), d
    assert len(d["missing"]) == 1 and "generate_sequences (rollout_worker.py:" in d["missing"][0], d["missing"]
    assert a1["verdict"]["action_kind"] == "retry-once"
    assert "for 1 rank(s) that never joined" in a1["verdict"]["action"]


def test_every_reward_worker_in_user_code_stops_naming_the_frame(sandbox, host_ready):
    host_ready("h1", {"step_time": 0.3, "failure": {"kind": "stall", "step": 2, "times": 1, "where": "user"}})
    _stall_floor(host_ready, 20.0)
    res, rid = launch(host_ready, "h1", "--steps", "4", "--framework", "fsdp")
    assert res.returncode == 0, res.stderr
    rec = wait_end(sandbox, "h1", rid, timeout=300)
    assert rec["status"] == "failed" and len(rec["attempts"]) == 1, rec.get("decision")
    v = rec["attempts"][0]["verdict"]
    d = v["detail"]
    assert v["cls"] == "hang" and d["cause"] == "workload" and d["wait_kind"] == "user", d
    assert d["frame"].startswith("compute_score (my_reward.py:"), d["frame"]  # real py-spy on the parked workers
    assert len(d["roles"].get("reward") or []) == 2, d
    assert v["action_kind"] == "stop" and d["frame"] in v["action"] and "no blind retry" in v["action"], v["action"]


def test_a_start_up_stuck_on_the_ray_head_is_stopped_as_network_not_a_hang(sandbox, host_ready):
    """The new-user trial (tests/test_live_fatal.py): the stand-in's ``network`` cue prints Ray's GCS loop for ever,
    never a step. HANG_TIMEOUT is the default 30 min; each attempt is stopped once the line repeats as a storm (10
    times over 60 s, or 50 times over 10 s: core/classify/storm.py; ``killed_by`` ``fatal``) with the classifier's
    verdict (network, the head's address) and policy: one retry after cleanup, then stop, and `inv status` names the
    address."""
    # the loop's line every 0.2 s instead of Ray's ~5 s: the supervisor's own rules (storm.MIN_REPEATS = 50 repeats
    # over at least MIN_SPAN_S = 10 s) call each attempt at 10 s instead of Ray's minute of the slow rule (10 in 60 s)
    host_ready("h1", {"failure": {"kind": "network", "head": "198.51.140.99", "every_s": 0.2}})
    res, rid = launch(host_ready, "h1", "--steps", "12", "--framework", "fsdp", "--save-freq", "2")
    assert res.returncode == 0, res.stderr
    rec = wait_end(sandbox, "h1", rid, timeout=600)
    assert rec["status"] == "failed" and [a["killed_by"] for a in rec["attempts"]] == ["fatal", "fatal"], rec
    for a in rec["attempts"]:
        v = a["verdict"]
        assert (v["cls"], v["detail"]["cause"], v["detail"]["address"]) == ("network", "ray-head", "198.51.140.99:6379")
        assert v["detail"]["repeated"]["count"] >= storm.SLOW_REPEATS and "attempt stopped" in v["action"], v
    assert rec["decision"]["action"] == "stop" and "network again after one retry" in rec["decision"]["reason"]
    table = inv(host_ready, "status", "-H", "h1").stdout
    assert "198.51.140.99:6379" in table, table


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
