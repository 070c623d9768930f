"""Issue 42 on real verl 0.9.1 (H100 of the device tool, 2026-12-07; gpu/README.md "2026-12-07 session"): the
runs' files replayed through the project's code, no GPU.

* ``n-stall`` (gpu/n-stall.sh): the tiny model, a reward function (gpu/hang_reward.py) that never returns from its
  41st call. The live supervisor called the stall 120 s after step 1's line (output but no step line for 2 x the
  60 s limit step 1 gave), not at HANG_TIMEOUT (900 s), and dumped 30 processes with py-spy. Its verdict then read
  "no common frame" and retried: the dump reader took a thread parked in ``threading.run`` for the reward worker's
  place and called ``zmq/sugar/poll.py`` user code. The replay below runs today's reader on the same dumps.
* ``l-diverge`` (gpu/l-diverge.sh, H200, 2026-12-07 second session): the tiny model with actor lr 1e30. Attempt 1
  ran into the scenario's own HANG_TIMEOUT (240 s: the cold machine's start-up took longer, no step yet); attempt 2's
  step 1 printed ``actor/lr:1e+29`` (verl's linear warm-up, 10 steps: 1e30 x 1/10), the live health watch flagged it
  on that line, stopped the attempt and retried once from scratch (no checkpoint before step 1). The device budget
  ended while attempt 3 was starting: its own step 1 is not in the fixture.
* ``m-data-dry`` (gpu/m-data-dry.sh): 16 rows, batch 8, ``trainer.total_epochs=3``, ``--steps 10
  --allow-short-data``: verl ended after step 6 with exit 0 (verl/trainer/ppo/v1/trainer_base.py:467) and the
  supervisor's verdict was ``data-ran-out``, "ended at step 6 of 10".
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from dapo_ops.agent.supervisor import escalate, follow, record, stall
from dapo_ops.core import classify, datafeed, ladder
from dapo_ops.core.features import FeatureSet
from dapo_ops.core.logformat import parse_metrics_line

RUNS = Path(__file__).resolve().parent / "fixtures" / "real-verl" / "tool-runs"
N = RUNS / "n-stall"
M = RUNS / "m-data-dry"
L = RUNS / "l-diverge"


def _json(p: Path) -> dict:
    return json.loads(p.read_text())


def _n_entries() -> list:
    spec = _json(N / "spec.json")
    files = stall.user_files(spec["settings"]["extra_overrides"])
    assert files == ("hang_reward.py",)
    return stall.read_stacks(gzip.open(N / "stacks-attempt-1.txt.gz", "rt").read(), files)


def test_the_real_stall_after_step_1_was_called_within_minutes_not_at_hang_timeout():
    rec = _json(N / "run.json")
    live = rec["attempts"][0]["verdict"]["detail"]
    assert live["step"] == 1 and live["stall_by"] == "no-step" and rec["spec"]["hang_timeout_s"] == 900.0
    # step 1's own figures (the real train.log's step line) size the timer: 5 x timing_s/step, at least the floor
    step1 = [parse_metrics_line(x) for x in gzip.open(N / "train.log.gz", "rt") if "step:1 -" in x]
    metrics = next(p[1] for p in step1 if p is not None and p[0] == 1)
    clock = stall.StepClock(None, cap_s=900.0)
    clock.observe(metrics, metrics["timing_s/step"])
    limit = clock.limit(2, 6, {"save_freq": 1, "test_freq": -1})
    assert limit == live["stall_after_s"] == 60.0  # the floor: 5 x 11.4 s of step 1 is below it
    assert live["idle_s"] == stall.NO_STEP_FACTOR * limit <= 300.0  # called 2 minutes after step 1, not 15


def test_the_real_stall_dumps_name_the_reward_workers_frame_and_stop():
    ents = _n_entries()
    assert len(ents) == 30
    reward = [e for e in ents if e["role"] == "reward"]
    assert [(e["kind"], e["where"]) for e in reward] == [("user", "compute_score (hang_reward.py:10)")]
    runner = next(e for e in ents if e["role"] == "task-runner")
    assert runner["where"] == "_wait_for_next_poll (verl/trainer/ppo/v1/replay_buffer.py:409)"  # waits for samples
    assert not [e for e in ents if e["kind"] == "user" and e["role"] != "reward"]  # zmq / aiohttp are libraries
    merged = stall.merge_ranks(ents)
    assert merged["cause"] == "workload" and merged["frame"] == "compute_score (hang_reward.py:10)"
    v = escalate.stall_verdict(120.0, 60.0, [11.378], 1, 6, ents, "stacks-attempt-1.txt", stall_by="no-step")
    assert v["action_kind"] == "stop" and "compute_score (hang_reward.py:10)" in v["action"]
    d = ladder.decide(FeatureSet.from_json([]), "hang", v["detail"], 0, 3, {}, {})
    assert d.action == "stop"  # no blind retry into the same hang (the live run of 2026-12-07 retried)
    live = _json(N / "run.json")["attempts"][0]["verdict"]["detail"]
    assert live["cause"] == "unknown"  # what the reader said on the device before this fix


def test_the_real_data_dry_run_is_data_ran_out_never_success():
    rec = _json(M / "run.json")
    assert rec["status"] == "failed" and rec["verdict"]["cls"] == "data-ran-out" and rec["step"] == 6
    assert rec["total_steps"] == 10
    text = gzip.open(M / "train.log.gz", "rt").read()
    v = classify.classify(text, exit_code=0, planned_total=10)
    assert v.cls == "data-ran-out" and "ended at step 6 of 10" in v.action and "after 3 epochs" in v.action
    assert classify.classify(text, exit_code=0, planned_total=6).cls == "success"  # all it was asked for
    feed = datafeed.DataFeed(rows=16, train_batch_size=8, epochs=3, upper_bound=False)
    assert feed.max_steps == 6


def _scan(text: str, tmp_path: Path, watch=None) -> follow.Scanner:
    """The supervisor's scanner over one real attempt log, as follow.Follower hands it the lines."""
    rec: dict = {"total_steps": 6}
    scanner = follow.Scanner(
        rec,
        {"n": 2, "started_at": 0.0},
        record.RecordWriter(str(tmp_path)),
        follow.LinkFinder({}),
        lambda url: None,
        classify.is_device_oom_line,
        watch=watch,
    )
    scanner.scan(text.splitlines())
    return scanner


def test_the_real_absurd_lr_was_flagged_at_step_1_and_retried_once_from_scratch():
    rec, spec = _json(L / "run.json"), _json(L / "spec.json")
    a1, a2, a3 = rec["attempts"]
    # attempt 1: the scenario's HANG_TIMEOUT (240 s) is below the cold start-up: no step yet, a hang (not a flag)
    assert (a1["killed_by"], a1["step_reached"], spec["hang_timeout_s"]) == ("hang", None, 240)
    v = a2["verdict"]
    d = v["detail"]
    assert (v["cls"], v["action_kind"], a2["killed_by"]) == ("diverged", "retry-once", "diverged")
    assert (d["metric"], d["bad_step"], d["shown"], d["reason"], d["recurred"]) == ("actor/lr", 1, "1e+29", "lr", False)
    assert a3["resumed_from"] is None  # no checkpoint before step 1: the retry is from scratch
    sup = (L / "supervisor.log").read_text()
    assert "training metrics went bad in attempt 2: lr 1e+29 at step 1" in sup
    # verl's warm-up (verl/utils/torch_functional.py:785-788, current_step / num_warmup_steps): 1e30 x 1 / 10
    assert "actor_rollout_ref.actor.optim.lr_warmup_steps=10" in sup and "actor_rollout_ref.actor.optim.lr=1e30" in sup


def test_the_real_lr_line_replayed_through_the_scanner_flags_step_1_and_a_recurrence_stops(tmp_path):
    text = gzip.open(L / "attempt-2.log.gz", "rt").read()
    scanner = _scan(text, tmp_path)
    flag = scanner.bad
    assert flag is not None and (flag.metric, flag.step, flag.reason) == ("actor/lr", 1, "lr")
    assert flag.value == _json(L / "run.json")["attempts"][1]["verdict"]["detail"]["value"]
    fs = FeatureSet.from_json([])
    first = escalate.diverged_verdict(flag, None, 1, 6)
    assert first["action_kind"] == "retry-once"
    assert ladder.decide(fs, "diverged", first["detail"], 0, 3, {}, {}).action == "retry"
    # the retry runs the same schedule from scratch, so its step 1 prints the same lr: the same metric bad at the
    # same step after one retry is persistent (core/health.py persistent): stop, no third attempt
    again = _scan(text, tmp_path).bad
    assert again is not None
    second = escalate.diverged_verdict(again, flag.to_json(), 1, 6)
    assert second["detail"]["recurred"] is True and second["action_kind"] == "stop"
    assert ladder.decide(fs, "diverged", second["detail"], 0, 3, {"diverged": 1}, {}).action == "stop"


def test_the_supervisors_follow_reads_a_syslog_escaped_log_as_the_plain_one(tmp_path):
    """A verl log copied through syslog carries its colour codes with ESC written out as text (rsyslog's ``#033[``,
    ``cat -v``'s ``^[[``): the supervisor's follow reads it through the one log grammar's escape helper
    (dapo_ops/core/logformat.py ``strip_ansi``), so the step, the total, the save and the OOM line it keeps are those of
    the plain log."""
    plain = [
        "(TaskRunner pid=7) Total training steps: 6",
        "(TaskRunner pid=7) step:1 - actor/pg_loss:0.5 - training/global_step:1",
        "(TaskRunner pid=7) local_global_step_folder: /ckpt/global_step_2",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ]
    for esc in ("#033", "^["):
        escaped = [f"{esc}[36m{ln[:18]}{esc}[0m{ln[18:]}" for ln in plain[:3]]
        escaped.append(f"{esc}[31m{plain[3]}{esc}[0m")
        got, want = _scan("\n".join(escaped), tmp_path), _scan("\n".join(plain), tmp_path)
        assert got.oom_line == want.oom_line == plain[3], esc
        assert (got.rec.get("step"), got.rec.get("total_steps")) == (want.rec.get("step"), want.rec.get("total_steps"))
        assert got.rec.get("step") == 1 and got.rec.get("total_steps") == 6
        assert got.att.get("saved_step") == want.att.get("saved_step") == 2, esc
