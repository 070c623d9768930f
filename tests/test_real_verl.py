"""Real verl 0.9.1 is the oracle: its logs (tests/fixtures/real-verl/, full stdout+stderr of runs on an H200,
see tests/fixtures/real-verl/README.md) replayed through the supervisor's log parsing, the status view, the
classifier's entry points and the whole supervisor (a fake verl that replays the real bytes).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from dapo_ops.core import classify
from dapo_ops.agent import runprobe as remote_probe
from dapo_ops.control.status import rows as statusview
from dapo_ops.core.logformat import SAVE_RE, parse_metrics_line
import supervisor_helpers
from supervisor_helpers import new_run

FIX = Path(__file__).resolve().parent / "fixtures" / "real-verl"

# run -> (steps printed, Total training steps, resumed from, saves started, exit code of the real run)
RUNS = {
    "verl-run-1-grpo-3steps.log": ([1, 2, 3], 3, None, [1, 2, 3], 0),
    "verl-run-2-resume.log": ([4], 4, 3, [4], 0),
    "verl-run-3-oom.log": ([], 3, None, [], 1),
    "verl-run-4-offload.log": ([1, 2, 3], 3, None, [], 0),  # save_freq -1
    "verl-run-5-dapo-async-3steps.log": ([1, 2, 3], 3, None, [1, 2, 3], 0),
    "verl-run-6-dapo-async-resume.log": ([4], 4, 3, [4], 0),
    "verl-run-7-big-update-oom-offload.log": ([], 1, None, [], 1),
    "verl-run-8-big-fix-micro4-offload.log": ([1], 1, None, [], 0),
}


def text(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8", errors="replace")


def lines(name: str) -> list[str]:
    return re.split(r"[\r\n]", text(name))


def test_fixtures_are_real_and_small():
    for name in RUNS:
        p = FIX / name
        assert p.stat().st_size < 1 << 20
        assert "\x1b[36m(TaskRunnerV1 pid=" in p.read_text(errors="replace")  # Ray's cyan actor prefix


@pytest.mark.parametrize("name", sorted(RUNS))
def test_supervisor_parsing_reads_real_logs(name):
    want_steps, want_total, want_resume, want_saves, _ = RUNS[name]
    steps, totals, resumes, saves = supervisor_helpers.log_facts(lines(name))
    assert steps == want_steps
    assert totals == [want_total]
    assert resumes == ([want_resume] if want_resume is not None else [])
    assert saves == want_saves


def test_real_save_line_comes_before_its_step_line():
    order = [
        ("save", int(m.group(1)))
        if (m := SAVE_RE.search(ln))
        else ("step", parse_metrics_line(ln)[0])
        if parse_metrics_line(ln)
        else None
        for ln in lines("verl-run-1-grpo-3steps.log")
    ]
    order = [x for x in order if x]
    assert order == [("save", 1), ("step", 1), ("save", 2), ("step", 2), ("save", 3), ("step", 3)]


def test_real_metrics_values():
    pm = [parse_metrics_line(ln) for ln in lines("verl-run-1-grpo-3steps.log")]
    step, metrics = [x for x in pm if x][-1]
    assert step == 3 and metrics["training/global_step"] == 3.0
    assert metrics["timing_s/step"] > 0 and "critic/score/mean" in metrics
    assert "perf/max_memory_allocated_gb" in metrics or any(k.endswith("max_memory_allocated_gb") for k in metrics)


@pytest.mark.parametrize(
    "name, step, bar",
    [
        ("verl-run-1-grpo-3steps.log", 3, (3, 3)),
        ("verl-run-2-resume.log", 4, (4, 4)),
        ("verl-run-7-big-update-oom-offload.log", None, (0, 1)),
    ],
)
def test_status_view_tail_of_real_logs(name, step, bar):
    t = statusview.parse_tail(text(name)[-(64 << 10) :])  # what the probe reads: the last 64 KiB
    assert t.step == step
    assert (t.bar_step, t.bar_total) == bar
    assert t.swanlab_url is None  # console logger only: no SwanLab line


def test_resumed_bar_starts_at_k_of_n():
    bars = [ln for ln in lines("verl-run-2-resume.log") if "Training Progress:" in ln]
    assert "3/4 [00:00<?, ?it/s]" in bars[0]


@pytest.mark.parametrize("name", [n for n, v in RUNS.items() if v[4] == 0])
def test_classifier_success_without_a_finished_line(name):
    """No "training finished" line in real verl: exit 0 + the 100 % bar + 'Final validation metrics'."""
    body = text(name)
    assert "Final validation metrics" in body and "finished" not in body.lower().split("final validation")[-1]
    v = classify.classify(body, exit_code=0, planned_total=RUNS[name][1])
    assert v.cls == "success" and v.action_kind == "done"


def test_classifier_real_update_oom_is_device_oom():
    v = classify.classify(text("verl-run-7-big-update-oom-offload.log"), exit_code=1)
    assert v.cls == "oom-device" and v.action_kind == "escalate-memory"
    assert any("CUDA out of memory" in e for e in v.evidence)


def test_classifier_real_weight_sync_oom_is_an_oom():
    v = classify.classify(text("verl-run-3-oom.log"), exit_code=1)
    assert v.cls == "oom-device" and v.action_kind == "escalate-memory"
    assert any("cumem_allocator.cpp:163" in e for e in v.evidence)


def test_classifier_real_weight_sync_oom_phase():
    """vLLM's sleep-mode wake-up inside update_weights: a weight-sync OOM, not a KV-cache shortage."""
    v = classify.classify(text("verl-run-3-oom.log"), exit_code=1)
    assert v.cls == "oom-device" and v.detail.get("phase") == "weight-sync"


def test_classifier_real_update_oom_phase():
    """run-7's frames name update_actor / train_batch (verl/workers/engine_workers.py:714)."""
    v = classify.classify(text("verl-run-7-big-update-oom-offload.log"), exit_code=1)
    assert v.detail.get("phase") == "update"


def test_every_real_oom_line_is_seen_by_the_per_line_check():
    for name in ("verl-run-3-oom.log", "verl-run-7-big-update-oom-offload.log"):
        assert any(classify.is_device_oom_line(ln) for ln in lines(name)), name
    for name in ("verl-run-1-grpo-3steps.log", "verl-run-8-big-fix-micro4-offload.log"):
        assert not any(classify.is_device_oom_line(ln) for ln in lines(name)), name


# ---------------------------------------------------------------------------- the supervisor replaying them


def make_run(tmp_path, attempts: list[dict], *, steps: int, extra: dict | None = None):
    """A run of replay_verl (tests/replay_verl.py): attempt k replays ``attempts[k-1]`` (-> replay.json)."""
    return new_run(
        tmp_path,
        steps=steps,
        workdir=tmp_path,
        container="",
        disabled_features=[],
        settings={"gpu_memory_utilization": 0.9, "max_prompt_length": 128, "max_response_length": 64},
        files={"replay.json": {"attempts": attempts}},
        **(extra or {}),
    )


def run_to_end(run_dir, timeout=90):
    # no nvidia-smi on PATH: device memory is not recorded
    return supervisor_helpers.run_to_end(run_dir, timeout, factory="replay_verl:factory", path="/usr/bin:/bin")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_supervisor_real_oom_then_real_success(tmp_path):
    """Attempt 1 replays the real update-phase OOM (run 7) and hangs; attempt 2 replays the real fix (run 8).
    The attempt's own leaked Ray daemon (clean env, setsid) is stopped; another run's one is not."""
    run_dir = make_run(
        tmp_path,
        [
            {"log": str(FIX / "verl-run-7-big-update-oom-offload.log"), "hang": True, "leak": True},
            {"log": str(FIX / "verl-run-8-big-fix-micro4-offload.log"), "exit": 0},
        ],
        steps=1,
    )
    rec = run_to_end(run_dir)
    leak = json.loads((run_dir / "leak-1.json").read_text())
    try:
        assert rec["status"] == "succeeded", (run_dir / "supervisor.log").read_text()
        a1, a2 = rec["attempts"]
        assert a1["killed_by"] == "oom" and a1["verdict"]["cls"] == "oom-device"
        assert a1["ray_tmpdir"] == f"/tmp/dray/{rec['run_id']}.1" and a2["ray_tmpdir"].endswith(".2")
        assert a1["oom_line_at"] <= a1["ended_at"] <= a2["started_at"]
        assert not _alive(leak["own"]), "the attempt's Ray daemon survived its attempt"
        assert _alive(leak["other"]), "another run's Ray daemon was killed"
        assert a2["verdict"]["cls"] == "success" and a2["step_reached"] == 1
        assert rec["total_steps"] == 1 and rec["step"] == 1
        # the ladder's fix is a feature or a setting rung, both with source oom-retry-1 (dapo_ops/core/ladder.py)
        rungs = (a2.get("setting_changes") or {}).get("memory_rungs") or []
        assert any(f["source"] == "oom-retry-1" for f in a2["features"]) or any(
            r.get("source") == "oom-retry-1" for r in rungs
        )
        assert rec["metrics"].get("timing_s/step", 0) > 0
        # the status view over the probe's answer (the same code `inv status` runs on the host)
        probe = remote_probe.probe_status(str(run_dir.parent), rec["run_id"])
        row = statusview.build_row("dev", probe)
        assert (row.state, row.step, row.total, row.attempt) == ("succeeded", 1, 1, 2)
        assert [a["cls"] for a in row.attempts] == ["oom-device", "success"]
    finally:
        for pid in leak.values():
            if _alive(pid):
                os.kill(pid, 9)


def test_supervisor_real_resume_log(tmp_path):
    run_dir = make_run(tmp_path, [{"log": str(FIX / "verl-run-2-resume.log"), "exit": 0}], steps=4)
    rec = run_to_end(run_dir)
    a1 = rec["attempts"][0]
    assert rec["status"] == "succeeded" and a1["resumed_from"] == 3 and a1["saved_step"] == 4
    assert rec["total_steps"] == 4 and rec["step"] == 4
    probe = remote_probe.probe_status(str(run_dir.parent), rec["run_id"])
    row = statusview.build_row("dev", probe)
    assert (row.state, row.step, row.total, row.percent) == ("succeeded", 4, 4, 100.0)
    assert row.swanlab_url is None
