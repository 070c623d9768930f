"""One analyzer (issue 42 item 6): the live supervisor and ``dapo-ops classify`` / ``inv logs --errors`` / a dead
supervisor's status run the same rules on the same log (dapo_ops/core/classify/replay.py), and a live run with no
terminal evidence is never shown as a failure (dapo_ops/control/status/look.py ``_evidence_for``).

On main's code ``dapo-ops classify`` on the real storm said ``crash-other`` with no frame and ``_evidence_for`` on a
healthy running log said ``crash-other``: the first two tests and the live test fail there."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from conftest import run_cli

from dapo_ops.control.status import look as statusprobe
from dapo_ops.core import classify
from dapo_ops.core.classify import replay, storm
from dapo_ops.core.logformat import parse_log_time, split_lines

FIX = Path(__file__).resolve().parent / "fixtures"
REAL_STORM = FIX / "real-verl" / "tool-runs" / "f-storm"
STANDIN_STORM = FIX / "storm" / "standin-reward-keyerror.log"
HEALTHY = sorted(FIX.glob("real-verl/*.log")) + sorted(FIX.glob("real-verl/tool-runs/*/train.log"))


def test_dapo_ops_classify_on_the_real_storm_gives_error_storm_at_bad_reward_py_5():
    """The H200 storm's attempt log as kept (gzip): the CLI's verdict is the one the supervisor recorded live."""
    out = run_cli("dapo-ops", "classify", REAL_STORM / "attempt-1.log.gz", "--json")
    assert out.rc == 0, out.stderr
    assert out.stdout.splitlines()[0] == "class: error-storm"
    v = json.loads(out.stdout.split("\n", 2)[2])
    live = json.loads((REAL_STORM / "run.json").read_text())["attempts"][0]["verdict"]
    assert v["cls"] == live["cls"] == "error-storm"
    assert v["detail"]["user_frame"] == live["detail"]["user_frame"] == "bad_reward.py:5"
    assert v["detail"]["exc"] == live["detail"]["exc"] == "KeyError"
    assert v["action_kind"] == live["action_kind"] == "stop"
    assert "bad_reward.py:5" in v["action"]
    # called on the log's own clock: the first traceback at 01:32:01.674, the call ~10 s later (live: 301 in 10.1 s)
    assert v["detail"]["count"] == live["detail"]["count"] == 301
    assert 10.0 <= v["detail"]["span_s"] < 11.0


def test_the_supervisors_end_of_attempt_verdict_is_the_same_rule():
    """classify_file (what escalate.attempt_verdict runs at an attempt's end) on the unpacked log: error-storm too,
    with the exit code of the kill (134) given or not."""
    text = gzip.decompress((REAL_STORM / "attempt-1.log.gz").read_bytes()).decode("utf-8", "replace")
    for code in (None, 134):
        v = classify.classify(text, exit_code=code)
        assert (v.cls, v.detail["user_frame"]) == ("error-storm", "bad_reward.py:5"), code


def test_a_log_without_timestamps_is_judged_by_counts():
    """The stand-in storm with every timestamp removed: no clock, so COUNT_REPEATS tracebacks of one key with no
    step call it; fewer do not."""
    blocks = STANDIN_STORM.read_text().split("\n")
    plain = [
        ln.replace("ERROR:2026-12-02 01:11:31,958:", "ERROR:").replace("INFO:2026-12-02 10:00:00,000:", "INFO:")
        for ln in blocks
    ]
    assert not any(parse_log_time(ln) for ln in plain)
    tb_start = next(i for i, ln in enumerate(plain) if "Error in _run_prompt" in ln)
    tb_end = next(i for i in range(tb_start + 1, len(plain)) if "Error in _run_prompt" in plain[i])
    head, one = plain[:tb_start], plain[tb_start:tb_end]
    few = "\n".join(head + one * (storm.COUNT_REPEATS - 1))
    many = "\n".join(head + one * storm.COUNT_REPEATS)
    assert replay.replay(few).storm is None and not replay.replay(few).clocked
    r = replay.replay(many)
    assert r.storm is not None and r.storm["count"] == storm.COUNT_REPEATS
    assert classify.classify(many).cls == "error-storm"


def test_a_storm_followed_by_a_step_was_no_storm():
    text = gzip.decompress((REAL_STORM / "attempt-1.log.gz").read_bytes()).decode("utf-8", "replace")
    moved_on = text + "\n(TaskRunnerV1 pid=1) step:2 - critic/score/mean:0.5 - timing_s/step:1.0\n"
    assert replay.replay(moved_on).storm is None
    assert classify.classify(moved_on).cls != "error-storm"


def test_no_healthy_or_crashed_real_log_reads_as_a_storm():
    """Every real log we hold but the storm: the replay calls nothing (no false error-storm after the fact)."""
    assert len(HEALTHY) >= 20
    for p in HEALTHY:
        if "f-storm" in str(p):
            continue
        assert replay.replay(p.read_text(errors="replace")).storm is None, p


# ---------------------------------------------------------------- a live run is no failure (logs --errors)


def _healthy_running_tail() -> str:
    """A real healthy run's log cut after its first step line: what ``logs --errors`` reads at step 1 of 4."""
    lines = split_lines((FIX / "real-verl/tool-runs/a-success/train.log").read_text(errors="replace"))
    first = next(i for i, ln in enumerate(lines) if "step:1 -" in ln)
    return "\n".join(lines[: first + 1]) + "\n"


def test_logs_errors_shows_no_failure_for_a_healthy_running_attempt():
    text = _healthy_running_tail()
    assert classify.classify(text).cls == "crash-other"  # the classifier alone: no exit, no completion
    run = {"status": "running", "attempts": [{"n": 1, "started_at": 1.0}]}
    assert statusprobe.attempt_is_live(run, 1)
    assert statusprobe._evidence_for(text, None, live=True) == (None, [])
    # the same text of an attempt that ended (a crash with no evidence) is still shown
    ended = {"status": "failed", "attempts": [{"n": 1, "ended_at": 2.0, "exit_code": 1}]}
    assert not statusprobe.attempt_is_live(ended, 1)
    assert statusprobe._evidence_for(text, None, live=False)[0] == "crash-other"


def test_a_live_attempt_with_terminal_evidence_is_still_shown():
    """A storm in a running attempt (the supervisor has not stopped it yet) is shown live: evidence, not a guess."""
    text = gzip.decompress((REAL_STORM / "attempt-1.log.gz").read_bytes()).decode("utf-8", "replace")
    cls, ev = statusprobe._evidence_for(text, None, live=True)
    assert cls == "error-storm" and any("bad_reward.py" in e for e in ev)


def test_attempt_is_live_reads_the_attempts_end():
    assert not statusprobe.attempt_is_live({"status": "running", "attempts": [{"n": 1, "verdict": {"cls": "hang"}}]}, 1)
    assert not statusprobe.attempt_is_live({"status": "retrying", "attempts": [{"n": 1, "exit_code": 1}]}, 1)
    assert statusprobe.attempt_is_live({"status": "retrying", "attempts": [{"n": 1, "exit_code": 1}, {"n": 2}]}, 2)
    assert not statusprobe.attempt_is_live({"status": "succeeded", "attempts": [{"n": 1}]}, 1)
