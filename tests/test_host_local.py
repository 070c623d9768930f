"""A bare host on THIS machine (``runtime = "host"``, ``transport = "local"``) driven through the real CLI against
the verl stand-in (sandbox/host_tree.sh builds its root; no docker, no SSH): preflight, launch, watch, status,
logs --errors, stop, a device-OOM cue -> retry -> success, and ``launch --resume``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from supervisor_helpers import bare_host, wait_for
from config_helpers import no_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    root = tmp_path_factory.mktemp("bare")
    tree, inv_path = bare_host(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPO_OPS_", "SWANLAB_"))}
    env.update(
        DAPO_OPS_INVENTORY=str(inv_path),
        DAPO_OPS_CONFIG=no_config(root),
        SWANLAB_MODE="disabled",
        ROLLOUT_TP="1",
        FRAMEWORK="fsdp",
    )

    class B:
        runs = tree / "dapo_runs"

        def cue(self, scenario: dict):
            scenario = {"accelerator": "gpu", "nonce": time.time(), **scenario}
            (tree / "sandbox" / "scenario.json").write_text(json.dumps(scenario))

        def inv(self, *args, timeout=120):
            return subprocess.run(
                [sys.executable, "-m", "invoke", "-r", str(REPO), *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=root,
                timeout=timeout,
            )

        def launch(self, *args):
            r = self.inv("launch", "-H", "dev", "--link-wait", "0", *args)
            assert r.returncode == 0, r.stdout + r.stderr
            rid = r.stdout.split()[1]
            return r, rid

        def record(self, rid):
            return json.loads((self.runs / rid / "run.json").read_text())

    return B()


def test_preflight_passes_on_the_bare_host(bare):
    r = bare.inv("preflight", "-H", "dev", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)["hosts"]["dev"]["checks"]}
    assert checks["host"]["status"] == "ok" and "docker" not in checks and "container" not in checks
    assert checks["devices"]["status"] == "ok" and checks["verl"]["status"] == "ok"
    # the stand-in's sample model has no attention-head counts: the memory-fit estimate warns, nothing fails
    assert all(c["status"] == "ok" or c["name"] == "memory-fit" for c in checks.values()), checks


def test_launch_watch_status_logs_on_the_bare_host(bare):
    bare.cue({"step_time": 0.2})
    r, rid = bare.launch("--steps", "3", "--save-freq", "1")
    assert "(bare host)" in r.stdout and "docker" not in r.stdout
    w = bare.inv("watch", "-H", "dev", "--run", rid, "--interval", "1")
    assert w.returncode == 0, w.stdout + w.stderr
    rows = json.loads(bare.inv("status", "-H", "dev", "--json").stdout)
    assert (rows[0]["run_id"], rows[0]["state"], rows[0]["step"], rows[0]["total"]) == (rid, "succeeded", 3, 3)
    assert rows[0]["container"] == ""
    e = bare.inv("logs", "-H", "dev", "--run", rid, "--errors")
    assert e.returncode == 0 and "no failure evidence" in e.stdout + e.stderr
    rec = bare.record(rid)
    assert rec["attempts"][0]["ray_tmpdir"] == f"/tmp/dray/{rid}.1"


def test_device_oom_cue_retries_and_succeeds_on_the_bare_host(bare):
    bare.cue({"step_time": 0.2, "failure": {"kind": "oom-device", "step": 2, "times": 1}})
    _, rid = bare.launch("--steps", "3", "--save-freq", "1")
    w = bare.inv("watch", "-H", "dev", "--run", rid, "--interval", "1")
    assert w.returncode == 0, w.stdout + w.stderr
    rec = bare.record(rid)
    a1, a2 = rec["attempts"]
    assert a1["killed_by"] == "oom" and a1["verdict"]["cls"] == "oom-device"
    assert a2["resumed_from"] == 1 and a2["verdict"]["cls"] == "success"
    # the ladder's fix is a feature or a setting rung, both with source oom-retry-1 (dapo_ops/core/ladder.py)
    rungs = (a2.get("setting_changes") or {}).get("memory_rungs") or []
    assert any(f["source"] == "oom-retry-1" for f in a2["features"]) or any(
        r.get("source") == "oom-retry-1" for r in rungs
    )
    # the OOM line, then the teardown, then the GPU retry wait (device memory back: devices.wait_before_retry, not
    # NPU's fixed delay), then attempt 2; how fast is bench/'s question
    assert a1["oom_line_at"] <= a1["ended_at"] <= a2["started_at"], (a1, a2)
    assert "release_wait_s" in a1 and "device_mem_at_retry_mib" in a1, a1


def test_stop_and_resume_on_the_bare_host(bare):
    bare.cue({"step_time": 0.5})
    _, rid = bare.launch("--steps", "40", "--save-freq", "1", "--offload")
    wait_for(lambda: (bare.record(rid).get("step") or 0) >= 2, 120, "step 2 of run %s" % rid, 0.5)
    s = bare.inv("stop", "-H", "dev", "--run", rid)
    assert s.returncode == 0, s.stdout + s.stderr
    assert bare.record(rid)["status"] == "stopped"
    saved = int((bare.runs / rid / "checkpoints" / "latest_checkpointed_iteration.txt").read_text())
    bare.cue({"step_time": 0.1})
    few = bare.inv("launch", "-H", "dev", "--steps", str(saved), "--resume", rid)  # total, not steps to add
    assert (
        few.returncode != 0 and f"checkpoint is at step {saved}, so --steps {saved} would train nothing" in few.stderr
    )
    other = bare.inv("launch", "-H", "dev", "--mode", "sync", "--resume", rid)  # checkpoints of colocate_async
    assert other.returncode != 0 and f"resume it with `inv launch -H dev --resume {rid}`" in other.stderr
    assert len(few.stderr.strip().splitlines()) == 1 and len(other.stderr.strip().splitlines()) == 1
    _, rid2 = bare.launch("--steps", str(saved + 2), "--save-freq", "1", "--resume", rid)
    assert {"name": "offload", "source": "explicit"} in bare.record(rid2)["features"]  # asked for: never removed
    w = bare.inv("watch", "-H", "dev", "--run", rid2, "--interval", "1")
    assert w.returncode == 0, w.stdout + w.stderr
    rec = bare.record(rid2)
    assert rec["ckpt_dir"] == str(bare.runs / rid / "checkpoints")
    assert rec["attempts"][0]["resumed_from"] == saved and rec["step"] == saved + 2
    log = (bare.runs / rid2 / "train.log").read_text(errors="replace")
    assert f"global_step_{saved}, setting global step to {saved}" in log
    bad = bare.inv("launch", "-H", "dev", "--resume", "20200101-000000-abcd")
    assert (
        bad.returncode != 0
        and "no run 20200101-000000-abcd on dev" in bad.stderr
        and len(bad.stderr.strip().splitlines()) == 1
    )


def test_launch_and_watch_print_json_with_the_same_exit_codes(bare):
    """issue 32 minors: ``launch --json`` (one object per host) and ``watch --json`` (one object per line: each event,
    then the outcome); ``-j`` is the short flag of JSON in every task (cli/_common.py SHORT_FLAGS)."""
    bare.cue({"step_time": 0.2})
    r = bare.inv("launch", "-H", "dev", "--link-wait", "0", "--steps", "2", "-j")
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = json.loads(r.stdout)
    rid = row["run_id"]
    # the state launch saw after its settle wait: a 2-step run at 0.2 s/step may already have ended by then
    assert (row["host"], row["container"]) == ("dev", None) and row["state"] in ("running", "succeeded"), row
    assert row["log"] == str(bare.runs / rid / "train.log") and row["log"] in json.dumps(row)
    assert row["follow"] == ["inv status -H dev", "inv logs -f -H dev"]
    w = bare.inv("watch", "-H", "dev", "--run", rid, "--interval", "1", "--json")
    assert w.returncode == 0, w.stdout + w.stderr
    lines = [json.loads(x) for x in w.stdout.splitlines()]
    assert all(e["host"] == "dev" and e["run_id"] == rid for e in lines[:-1]) and len(lines) >= 2, lines
    assert lines[0]["event"] == "change" and lines[0]["line"].startswith(f"dev: run {rid}"), lines
    assert lines[-1] == {
        "event": "outcome",
        "code": 0,
        "message": "",
        "runs": [
            {
                "host": "dev",
                "run_id": rid,
                "state": "succeeded",
                "step": 2,
                "total": 2,
                "ended": lines[-1]["runs"][0]["ended"],
                "verdict": lines[-1]["runs"][0]["verdict"],
                "suggestions": [],
            }
        ],
    }, lines[-1]
    # a run that fails: watch's exit code 1 and its one line on stderr, as without --json; the outcome says the same
    # (it fails at step 2, after launch's settle wait: a failure inside that wait is launch's own exit 1)
    bare.cue({"step_time": 3.0, "failure": {"kind": "data-error", "step": 2}})
    r = bare.inv("launch", "-H", "dev", "--link-wait", "0", "--steps", "3", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rid = json.loads(r.stdout)[0]["run_id"]
    w = bare.inv("watch", "-H", "dev", "--run", rid, "--interval", "1", "-j")
    assert w.returncode == 1, w.stdout + w.stderr
    out = json.loads(w.stdout.splitlines()[-1])
    assert (out["event"], out["code"], out["runs"][0]["state"]) == ("outcome", 1, "failed"), out
    assert out["message"] == w.stderr.strip() and out["message"].startswith(f"dev: run {rid} failed"), (out, w.stderr)
    # --json starts runs; --dry-run starts none: one line, usage exit, nothing printed on stdout
    d = bare.inv("launch", "-H", "dev", "--dry-run", "--json")
    assert d.returncode == 2 and d.stdout == "" and len(d.stderr.strip().splitlines()) == 1, d.stdout + d.stderr
