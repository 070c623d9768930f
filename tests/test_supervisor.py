"""The supervisor's state machine with a fake verl (tests/fake_verl.py). Pure: no hosts.

Each test runs the real ``python3 -m dapo_ops.agent.supervisor <run_dir>`` as a subprocess (own signals,
own process groups) with ``--command-factory fake_verl:factory`` in place of overrides.build_command.
"""

import json
import os
import re
import signal
from pathlib import Path

import pytest

from dapo_ops.agent import runfiles
from dapo_ops.agent.supervisor import machine
from dapo_ops.agent.procs import own_processes
from dapo_ops.agent.supervisor.checkpoints import TRACKER_NAME, latest_checkpoint
from dapo_ops.agent.supervisor.config import parse_env_file
from dapo_ops.agent.supervisor.machine import Supervisor
from dapo_ops.core.logformat import parse_metrics_line, parse_swanlab_url, swanlab_run_id
from supervisor_helpers import FAST, new_run, run_to_end, start, wait_for  # noqa: F401 (run_to_end: other tests)


def make_run(
    tmp_path,
    fake,
    *,
    steps=6,
    user_features=None,
    max_oom_retries=2,
    hang_timeout_s=1800,
    secret=None,
    extra=None,
    run_id=None,
):
    """A run of fake verl (tests/fake_verl.py, behaviour ``fake`` -> fake.json) in ``<tmp_path>/work``."""
    workdir = tmp_path / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    return new_run(
        tmp_path,
        steps=steps,
        workdir=workdir,
        user_features=user_features,
        secret=secret,
        run_id=run_id,
        settings={"gpu_memory_utilization": 0.6, "max_prompt_length": 2048, "max_response_length": 8192},
        files={"fake.json": fake},
        max_oom_retries=max_oom_retries,
        hang_timeout_s=hang_timeout_s,
        env={"FAKE_ENV": "1"},
        **(extra or {}),
    )


def steps_per_attempt(train_log: str):
    """{attempt: [step numbers]} from train.log, using the delimiter lines."""
    out, cur = {}, None
    for line in re.split(r"[\r\n]", train_log):
        m = re.match(r"===== dapo-ops attempt (\d+) start ", line)
        if m:
            cur = int(m.group(1))
            out[cur] = []
            continue
        parsed = parse_metrics_line(line)
        if parsed and cur is not None:
            out[cur].append(parsed[0])
    return out


def no_marker_processes(run_id):
    return not own_processes(None, ("DAPO_OPS_RUN_ID=%s" % run_id).encode())


# ---------------------------------------------------------------------------- pure parsing


def test_parse_metrics_line_numpy2_tqdm_and_ansi():
    line = (
        "Training Progress:  50%|#####     | 3/6 [00:01<00:01,  3.00it/s]step:3 - actor/pg_loss:np.float64(-0.0123)"
        " - critic/score/mean:0.25 - timing_s/step:123.456 - perf/throughput:np.int64(12) - x:nan - "
        "flag:np.True_ - training/global_step:3"
    )
    step, m = parse_metrics_line(line)
    assert step == 3
    assert m["actor/pg_loss"] == pytest.approx(-0.0123) and m["critic/score/mean"] == 0.25
    assert m["timing_s/step"] == pytest.approx(123.456) and m["perf/throughput"] == 12.0
    assert m["x"] != m["x"]  # nan kept
    assert "flag" not in m
    assert parse_metrics_line("\x1b[36m(TaskRunner pid=1)\x1b[0m step:7 - a:1")[0] == 7
    assert parse_metrics_line("timing_s/step:12.0 - a:1") is None
    assert parse_metrics_line("training/global_step:3") is None
    assert parse_metrics_line("the step:3 of the plan") is None


def test_swanlab_url_and_env_file():
    url = "https://swanlab.cn/@me/dapo/runs/abcdefghijklmnopqrstu"
    assert parse_swanlab_url("(TaskRunner pid=9) swanlab: \U0001f680 View run x at " + url) == url
    assert swanlab_run_id(url) == "abcdefghijklmnopqrstu"
    env = parse_env_file("# c\nexport A=1\nB='two words'\nbad line\nC=\"x=y\"\n")
    assert env == {"A": "1", "B": "two words", "C": "x=y"}


def test_latest_checkpoint_falls_back_from_torn_save(tmp_path):
    ck = tmp_path / "ck"
    (ck / "global_step_2" / "actor").mkdir(parents=True)
    (ck / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt").write_text("x")
    (ck / "global_step_3" / "transfer_queue").mkdir(parents=True)  # rotated by verl: actor/ deleted, the rest stays
    (ck / "global_step_3" / "data.pt").write_text("x")
    (ck / "global_step_4").mkdir()  # torn: empty
    (ck / TRACKER_NAME).write_text("4")
    assert latest_checkpoint(str(ck)) == 2
    assert (ck / TRACKER_NAME).read_text() == "2"
    assert latest_checkpoint(str(tmp_path / "none")) is None


def _ckpt(root, step, complete=True):
    d = root / ("global_step_%d" % step)
    (d / "transfer_queue").mkdir(parents=True)
    (d / "data.pt").write_text("x")
    if complete:
        (d / "actor").mkdir()
        (d / "actor" / "model_world_size_1_rank_0.pt").write_text("x")


def test_prune_keeps_max_actor_ckpt_to_keep_across_attempts_never_the_resumed_one(tmp_path):
    """verl's rotation list starts empty at every attempt (checkpoint_manager.py:59) and removes only actor/:
    before each attempt the supervisor keeps the resumed checkpoint + the newest complete older ones up to keep,
    and removes rotation leftovers, older ones, and saves newer than the tracker (torn)."""
    from dapo_ops.agent.supervisor.checkpoints import prune_checkpoints

    ck = tmp_path / "ck"
    for n in (2, 4, 6, 8, 10):
        _ckpt(ck, n)
    _ckpt(ck, 5, complete=False)  # rotated by an earlier attempt: data.pt + transfer_queue/ left
    _ckpt(ck, 12)  # saved after the tracker's step: cut off before the tracker was written
    (ck / TRACKER_NAME).write_text("10")
    step = latest_checkpoint(str(ck))
    assert step == 10
    assert prune_checkpoints(str(ck), 2, step) == [2, 4, 5, 6, 12]
    assert sorted(p.name for p in ck.glob("global_step_*")) == ["global_step_10", "global_step_8"]
    assert prune_checkpoints(str(ck), 1, 10) == [8] and (ck / "global_step_10" / "actor").is_dir()
    assert prune_checkpoints(str(ck), None, 10) == [] and prune_checkpoints(str(ck), 1, None) == []


def test_supervisor_prunes_before_the_retry(tmp_path):
    """Attempt 1 saves steps 1-3 and OOMs at 4; before attempt 2 resumes from 3, max_actor_ckpt_to_keep=1 leaves
    global_step_3 only (fake verl, like verl, forgets its rotation list between attempts)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    run_dir = new_run(
        tmp_path,
        steps=6,
        workdir=workdir,
        files={"fake.json": {"step_time": 0.03, "oom_at": 4, "oom_unless": ["offload"], "save_freq": 1}},
        settings={
            "gpu_memory_utilization": 0.6,
            "max_prompt_length": 2048,
            "max_response_length": 8192,
            "max_actor_ckpt_to_keep": 1,
        },
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded" and rec["attempts"][1]["resumed_from"] == 3, rec
    assert "data_order_restarts" not in rec["attempts"][1]  # fake verl saved data.pt, as verl does
    ck = run_dir / "checkpoints"
    log = (run_dir / "supervisor.log").read_text()
    assert (
        "checkpoints: kept global_step_3 (max_actor_ckpt_to_keep=1, resuming from global_step_3); deleted "
        "global_step_1, global_step_2" in log
    ), log
    # and at the end the run keeps its newest save only: attempt 2's own rotation never saw global_step_3
    assert sorted(p.name for p in ck.glob("global_step_*")) == ["global_step_6"]
    assert "(max_actor_ckpt_to_keep=1, the run ended at global_step_6); deleted global_step_3" in log, log


def test_supervisor_records_a_resume_without_verls_dataloader_state(tmp_path):
    """A checkpoint without data.pt resumes the weights and the step but verl restarts the data from its beginning
    (trainer_base.py:892-898): the supervisor said 'resumed_from: 3' as if nothing were lost."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    fake = {"step_time": 0.03, "oom_at": 4, "oom_unless": ["offload"], "save_freq": 1, "no_data_pt": True}
    run_dir = new_run(
        tmp_path,
        steps=6,
        workdir=workdir,
        files={"fake.json": fake},
        settings={"gpu_memory_utilization": 0.6, "max_prompt_length": 2048, "max_response_length": 8192},
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded" and rec["attempts"][1]["resumed_from"] == 3, rec
    assert rec["attempts"][1]["data_order_restarts"] is True and "data_order_restarts" not in rec["attempts"][0]
    assert "attempt 2 resumes from global_step_3 without data.pt" in (run_dir / "supervisor.log").read_text()


# ---------------------------------------------------------------------------- state machine


def test_success_records_progress_and_releases_lock(tmp_path):
    run_dir = make_run(tmp_path, {"step_time": 0.05, "oom_at": None}, secret={"FAKE_SECRET_PROBE": "s3cr3t-value"})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec
    assert rec["step"] == 6 and rec["total_steps"] == 6 and rec["attempt"] == 1
    assert [f["source"] for f in rec["features"]] == ["default"] * 4
    assert rec["metrics"]["critic/score/mean"] == pytest.approx(0.6)
    assert rec["metrics"]["response_length/mean"] == 812.0 and rec["metrics"]["perf/throughput"] == 1234.5
    assert len(rec["step_times"]) == 6 and rec["last_progress_at"] and rec["ended_at"]
    assert rec["verdict"]["cls"] == "success" and rec["decision"]["action"] == "done"
    a = rec["attempts"][0]
    assert a["exit_code"] == 0 and a["step_reached"] == 6 and a["resumed_from"] is None and a["log"] == "attempt-1.log"
    log = (run_dir / "train.log").read_text()
    assert re.search(
        r"^===== dapo-ops attempt 1 start \S+ features=dynamic_batch,flash_attn,gradient_checkpointing,"
        r"remove_padding =====$",
        log,
        re.M,
    )
    assert re.search(r"^===== dapo-ops attempt 1 end exit=0 class=success =====$", log, re.M)
    # secrets reached verl's environment, then vanished from disk and never reached run.json
    assert "secret-probe-present" in log
    assert not (run_dir / "secret.env").exists()
    assert "s3cr3t-value" not in (run_dir / "run.json").read_text()
    assert runfiles.read_lock(run_dir.parent) is None
    link = tmp_path / "work" / "train.log"
    assert link.is_symlink() and link.resolve() == (run_dir / "train.log").resolve()


def test_device_oom_escalates_offload_and_resumes_from_checkpoint(tmp_path):
    run_dir = make_run(
        tmp_path, {"step_time": 0.05, "oom_at": 4, "oom_unless": ["offload"], "save_freq": 2, "spawn_child": True}
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec
    assert [a["n"] for a in rec["attempts"]] == [1, 2]
    a1, a2 = rec["attempts"]
    assert a1["verdict"]["cls"] == "oom-device" and a1["killed_by"] == "oom" and a1["step_reached"] == 3
    assert a1["verdict"]["detail"]["phase"] == "unknown"  # the OOM phase reaches run.json (a phase-less frame: the
    # unknown-phase ladder adds offload; an update-phase OOM is tested in test_memladder_supervisor.py)
    assert a2["resumed_from"] == 2
    src = {f["name"]: f["source"] for f in a2["features"]}
    assert src["offload"] == "oom-retry-1"
    steps = steps_per_attempt((run_dir / "train.log").read_text())
    assert steps[1] == [1, 2, 3]
    assert steps[2] == [3, 4, 5, 6]  # nothing before the checkpoint (2) is redone
    assert (run_dir / "attempt-1.log").exists() and (run_dir / "attempt-2.log").exists()
    # the setsid'ed grandchild (a Ray worker stand-in) of each attempt is gone too
    assert no_marker_processes(rec["run_id"])


PTA_LINE = "[ERROR] 2026-12-07-10:00:00 (PID:17682, Device:0, RankID:0) ERR00006 PTA memory error"


def test_an_oom_is_judged_on_the_drivers_report_that_comes_after_a_workers_own_line(tmp_path):
    """torch_npu's worker prints its bare ``ERR00006 PTA memory error`` before the driver's report, whose frames tell
    the phase: the stop 1 s (``oom_grace_s``) after the first OOM line lost them, so an update-phase OOM went to the
    unknown-phase ladder (offload). The stop waits for Hydra's last report line (``oom_report_wait_s`` at most)."""
    fake = {
        "step_time": 0.03,
        "oom_at": 3,
        "oom_unless": ["offload"],
        "oom_first_line": PTA_LINE,
        "oom_report_after_s": 1.5,  # > FAST's oom_grace_s 0.3
        "oom_frame": '  File "/verl/verl/workers/engine_workers.py", line 1, in update_actor',
        "save_freq": 1,
    }
    run_dir = make_run(tmp_path, fake, steps=3, max_oom_retries=0)
    rec = run_to_end(run_dir)
    a1 = rec["attempts"][0]
    assert a1["killed_by"] == "oom" and a1["verdict"]["cls"] == "oom-device", a1
    assert a1["verdict"]["detail"]["phase"] == "update", a1["verdict"]["detail"]


def test_an_oom_with_no_drivers_report_is_stopped_after_oom_report_wait_s(tmp_path):
    """The other ranks hang in a collective and no report comes: the attempt is still stopped as an OOM, at
    ``oom_report_wait_s`` after its OOM line (not at the hang timeout)."""
    fake = {"step_time": 0.03, "oom_at": 2, "oom_unless": ["offload"], "oom_no_report": True}
    run_dir = make_run(
        tmp_path, fake, steps=3, max_oom_retries=0, extra={"supervisor": {**FAST, "oom_report_wait_s": 2}}
    )
    rec = run_to_end(run_dir)
    a1 = rec["attempts"][0]
    assert a1["killed_by"] == "oom" and a1["verdict"]["cls"] == "oom-device", a1
    assert "device OOM line in attempt 1" in (run_dir / "supervisor.log").read_text()


def test_oom_with_offload_escalates_to_recompute(tmp_path):
    run_dir = make_run(tmp_path, {"step_time": 0.03, "oom_at": 3, "oom_unless": ["offload", "recompute"]})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec
    names = [sorted(f["name"] for f in a["features"]) for a in rec["attempts"]]
    assert len(names) == 3
    assert "offload" in names[1] and "recompute" not in names[1]
    assert "recompute" in names[2]
    src = {f["name"]: f["source"] for f in rec["features"]}
    assert src["offload"] == "oom-retry-1" and src["recompute"] == "oom-retry-2"


def test_oom_always_stops_after_max_retries_with_suggestions(tmp_path):
    run_dir = make_run(tmp_path, {"step_time": 0.03, "oom_at": 3, "oom_always": True}, max_oom_retries=2)
    rec = run_to_end(run_dir)
    assert rec["status"] == "failed"
    assert len(rec["attempts"]) == 3
    d = rec["decision"]
    assert d["action"] == "stop" and d["suggestions"]
    assert [t["class"] for t in d["tried"]] == ["oom-device"] * 3
    assert d["tried"][-1]["step_reached"] == 2 and "offload" in d["tried"][-1]["features"]
    for k in (1, 2, 3):
        assert (run_dir / ("attempt-%d.log" % k)).stat().st_size > 0
    assert (run_dir / "checkpoints" / "global_step_2").is_dir()


def test_host_oom_137_never_adds_offload(tmp_path):
    run_dir = make_run(tmp_path, {"step_time": 0.03, "exit_at": 2, "exit_code": 137, "final_text": "Killed"})
    rec = run_to_end(run_dir)
    assert rec["status"] == "failed"
    assert rec["attempts"][0]["exit_code"] == 137
    assert rec["verdict"]["cls"] == "oom-host"
    assert all("offload" not in [f["name"] for f in a["features"]] for a in rec["attempts"])


def test_sigkill_with_cgroup_oom_kill_counter_is_host_oom_and_rolls_back_offload(tmp_path):
    """A bare 137 is not an OOM; 137 plus a grown cgroup ``oom_kill`` counter is (what docker's OOMKilled
    would say, read from inside the container). Ladder-added offload is rolled back, never added."""
    counter = tmp_path / "memory.events"
    counter.write_text("oom 0\noom_kill 0\n")
    run_dir = make_run(
        tmp_path,
        {"step_time": 0.03, "exit_at": 2, "exit_code": 137, "final_text": "", "oom_counter": str(counter)},
        extra={"supervisor": dict(FAST, oom_counter_files=[str(counter)])},
    )
    rec = run_to_end(run_dir)
    a1 = rec["attempts"][0]
    assert a1["exit_code"] == 137 and a1["oom_kills"] == 1
    assert a1["verdict"]["cls"] == "oom-host"
    assert rec["status"] == "failed"
    assert all("offload" not in [f["name"] for f in a["features"]] for a in rec["attempts"])


def test_kv_cache_shortage_changes_rollout_memory_not_offload(tmp_path):
    text = (
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
        "when initializing the engine."
    )
    run_dir = make_run(tmp_path, {"step_time": 0.03, "kv_text": text})
    rec = run_to_end(run_dir)
    assert rec["attempts"][0]["verdict"]["cls"] == "oom-kv-cache"
    assert rec["status"] == "succeeded", rec
    a2 = rec["attempts"][1]
    assert a2["setting_changes"]["gpu_memory_utilization"] != 0.6
    assert "offload" not in [f["name"] for f in a2["features"]]


def test_config_error_is_not_retried(tmp_path):
    run_dir = make_run(tmp_path, {"config_error": "actor_rollout_ref.actor.no_such_key"})
    rec = run_to_end(run_dir)
    assert rec["status"] == "failed" and len(rec["attempts"]) == 1
    assert rec["verdict"]["cls"] == "config-error"
    assert "\n" not in rec["verdict"]["action"]


def test_hang_is_detected_and_group_stopped(tmp_path):
    run_dir = make_run(tmp_path, {"step_time": 0.03, "hang_at": 2, "spawn_child": True}, hang_timeout_s=1.5)
    rec = run_to_end(run_dir)
    assert rec["status"] == "failed"
    assert rec["verdict"]["cls"] == "hang"
    assert all(a["killed_by"] == "hang" for a in rec["attempts"])
    assert no_marker_processes(rec["run_id"])


def test_sigterm_stops_run_and_its_group(tmp_path):
    run_dir = make_run(tmp_path, {"step_time": 0.5, "spawn_child": True}, steps=100)
    p = start(run_dir)
    try:
        wait_for(lambda: (runfiles.read_run(run_dir) or {}).get("step"))
        rec = runfiles.read_run(run_dir)
        assert rec["status"] == "running" and rec["pids"]["verl_pgid"]
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    rec = runfiles.read_run(run_dir)
    assert rec["status"] == "stopped"
    assert no_marker_processes(rec["run_id"])
    assert runfiles.read_lock(run_dir.parent) is None


def test_second_run_on_same_runs_dir_is_refused(tmp_path):
    first = make_run(tmp_path, {"step_time": 0.5}, steps=100)
    p = start(first)
    try:
        wait_for(lambda: (runfiles.read_run(first) or {}).get("status") == "running")
        second = make_run(tmp_path, {"step_time": 0.01}, steps=2)
        rec = run_to_end(second)
        assert rec["status"] == "failed"
        assert rec["verdict"]["detail"]["active_run"] == first.name
        assert first.name in rec["verdict"]["action"]
        assert rec["attempts"] == []
    finally:
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=30)


def test_swanlab_link_recorded_and_reused_on_retry(tmp_path):
    url = "https://swanlab.example/@u/p/runs/abcdefghijklmnopqrstu"
    run_dir = make_run(tmp_path, {"step_time": 0.03, "oom_at": 3, "swanlab_url": url})
    rec = run_to_end(run_dir)
    assert rec["swanlab_url"] == url
    a2 = (run_dir / "attempt-2.log").read_text()
    assert "SWANLAB_RUN_ID=abcdefghijklmnopqrstu" in a2


def test_offline_swanlab_link_names_every_attempts_dir_in_one_sync(tmp_path):
    """Issue 44 major 1: an offline run with one OOM retry wrote two swanlab dirs (one per process, swanlab 0.10
    sdk/cmd/init.py ``run-<timestamp>-<id>``) and run.json kept only the first: following ``inv status`` uploaded
    the part before the retry. Now ONE ``swanlab sync`` names both, in attempt order."""
    run_dir = make_run(tmp_path, {"step_time": 0.03, "oom_at": 3, "swanlab_offline": "/s"})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded", rec.get("verdict")
    assert len(rec["attempts"]) == 2
    dirs = rec["swanlab_url"].removeprefix("swanlab sync ").split()
    assert [d.split("_")[0] for d in dirs] == ["/s/run-20260101", "/s/run-20260102"], rec["swanlab_url"]
    assert len({d.rsplit("-", 1)[1] for d in dirs}) == 1  # one SwanLab run id for both attempts


def test_notifier_failure_never_crashes_the_run(tmp_path):
    notify = {
        "on_escalation": True,
        "on_success": True,
        "webhooks": [{"kind": "generic", "url_env": "DAPO_NOTIFY_URL_0"}],
        "timeout_s": 1,
    }
    run_dir = make_run(
        tmp_path,
        {"step_time": 0.03, "oom_at": 3},
        extra={"notify": notify},
        secret={"DAPO_NOTIFY_URL_0": "http://127.0.0.1:9/hook"},
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded"
    assert "notification" in (run_dir / "supervisor.log").read_text()


def test_sigterm_while_waiting_to_retry_marks_stopped(tmp_path):
    run_dir = make_run(tmp_path, {"step_time": 0.03, "oom_at": 2}, extra={"supervisor": dict(FAST, retry_delay_s=30)})
    p = start(run_dir)
    try:
        wait_for(lambda: (runfiles.read_run(run_dir) or {}).get("status") == "retrying")
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    rec = runfiles.read_run(run_dir)
    assert rec["status"] == "stopped" and len(rec["attempts"]) == 1
    assert rec["attempts"][0]["verdict"]["cls"] == "oom-device"
    assert runfiles.read_lock(run_dir.parent) is None


def test_unbuildable_command_fails_with_one_line_config_error(tmp_path):
    # save_freq 0: the real builder refuses the spec (runspec.check_spec); a missing key would not do it since the
    # supervisor completes a spec from the defaults table (runfiles.read_spec)
    run_dir = make_run(tmp_path, {"step_time": 0.03})
    spec = json.loads((run_dir / "spec.json").read_text())
    spec["settings"]["save_freq"] = 0
    runfiles.write_json_atomic(run_dir / "spec.json", spec)
    rec = run_to_end(run_dir, factory="dapo_ops.core.overrides:build_command")
    assert rec["status"] == "failed" and rec["attempts"] == []
    assert rec["verdict"]["cls"] == "config-error" and "\n" not in rec["verdict"]["action"]
    assert "save_freq=0 is invalid" in rec["verdict"]["action"] + rec["verdict"].get("reason", "")
    assert runfiles.read_lock(run_dir.parent) is None


def test_character_split_across_reads_is_decoded_whole(tmp_path):
    """A metrics line whose UTF-8 bytes arrive in two reads (split inside a character) parses intact."""
    run_dir = make_run(tmp_path, {"step_time": 0.01, "noise_lines": 3, "split_utf8": True})
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded" and rec["step"] == 6
    assert rec["metrics"]["val-core/数学/acc/mean@1"] == 0.5
    assert "\ufffd" not in (run_dir / "train.log").read_text(encoding="utf-8")


def test_host_oom_after_ladder_offload_rolls_offload_back(tmp_path):
    """Device OOM adds offload; offload then exhausts host RAM (137 + oom_kill): the ladder removes the offload it
    added and retries once (failure-classes.md section 4), and the run finishes without it."""
    counter = tmp_path / "memory.events"
    counter.write_text("oom 0\noom_kill 0\n")
    run_dir = make_run(
        tmp_path,
        {
            "step_time": 0.03,
            "oom_at": 2,
            "oom_unless": ["offload"],
            "save_freq": 2,
            "exit_at": 3,
            "exit_code": 137,
            "exit_if_feature": "offload",
            "final_text": "",
            "oom_counter": str(counter),
        },
        extra={"supervisor": dict(FAST, oom_counter_files=[str(counter)])},
    )
    rec = run_to_end(run_dir)
    assert [a["verdict"]["cls"] for a in rec["attempts"]] == ["oom-device", "oom-host", "success"], rec["decision"]
    assert feature_names(rec["attempts"][1]) >= {"offload"}
    assert "offload" not in feature_names(rec["attempts"][2])
    assert rec["status"] == "succeeded"


def feature_names(attempt):
    return {f["name"] for f in attempt["features"]}


def test_verl_gets_the_tracker_secret_but_not_the_notifier_webhooks(tmp_path):
    run_dir = make_run(
        tmp_path,
        {"steps": 1},
        secret={
            "SWANLAB_API_KEY": "sk-xyz",
            "DAPO_NOTIFY_URL_0": "https://hooks.example/T0K3N",
            "DAPO_NOTIFY_SIGN_0": "s1gn",
        },
    )
    sup = Supervisor(str(run_dir))
    sup._load()
    env = sup._child_env(1)
    assert env["SWANLAB_API_KEY"] == "sk-xyz" and env["FAKE_ENV"] == "1"
    assert not any(k.startswith("DAPO_NOTIFY_") for k in env)
    assert sup.secret_env["DAPO_NOTIFY_URL_0"] == "https://hooks.example/T0K3N"  # the notifier still has it
    assert not (run_dir / "secret.env").exists()  # read once, then deleted


def test_supervisor_log_redacts_secrets_but_not_token_budgets(tmp_path):
    run_dir = make_run(tmp_path, {"steps": 1}, secret={"SWANLAB_API_KEY": "sk-abcdef"})
    sup = Supervisor(str(run_dir))
    sup._load()
    shown = sup._redact_argv(
        [
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480",
            "actor_rollout_ref.rollout.max_num_batched_tokens=10240",
            "+ray_kwargs.ray_init.runtime_env.env_vars.HF_TOKEN=hf_xyz",
            "x=sk-abcdef",
        ]
    )
    assert shown == [
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480",
        "actor_rollout_ref.rollout.max_num_batched_tokens=10240",
        "+ray_kwargs.ray_init.runtime_env.env_vars.HF_TOKEN=***",
        "x=***",
    ]


def test_verl_does_not_get_the_bundle_on_its_pythonpath(tmp_path, monkeypatch):
    """The supervisor's own import path (the directory holding dapo_ops/, what remote/bundle.py puts on PYTHONPATH)
    is dropped from verl's PYTHONPATH; the rest of it stays."""
    run_dir = make_run(tmp_path, {"steps": 1})
    bundle = str(Path(machine.__file__).resolve().parents[3])
    assert (Path(bundle) / "dapo_ops" / "agent" / "supervisor" / "__init__.py").is_file()
    sup = Supervisor(str(run_dir))
    sup._load()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([bundle, "/opt/site"]))
    assert sup._child_env(1)["PYTHONPATH"] == "/opt/site"
    monkeypatch.setenv("PYTHONPATH", bundle + "/")
    assert "PYTHONPATH" not in sup._child_env(1)


def test_data_that_runs_out_ends_failed_with_the_true_verdict_never_succeeded(tmp_path):
    """verl's V1 loop ends at its epoch limit with exit 0 before the planned steps (trainer_base.py:467): the run is
    recorded failed, data-ran-out, with the ending line naming the step, the total and the epochs (issue 42 item 4);
    on main's code it was ``succeeded``."""
    run_dir = make_run(tmp_path, {"step_time": 0.02, "oom_at": None, "data_steps": 3, "save_freq": 1})
    rec = run_to_end(run_dir)
    assert rec["status"] == "failed", rec
    assert rec["verdict"]["cls"] == "data-ran-out" and rec["verdict"]["detail"]["epochs"] == 3
    assert rec["step"] == 3 and rec["total_steps"] == 6 and rec["attempt"] == 1  # never retried
    assert rec["decision"]["ended"] == "failed: ended at step 3 of 6: the training data ran out after 3 epochs"
    assert "--override trainer.total_epochs=6" in rec["decision"]["suggestions"][0]
    log = (run_dir / "train.log").read_text()
    assert re.search(r"^===== dapo-ops attempt 1 end exit=0 class=data-ran-out =====$", log, re.M)
