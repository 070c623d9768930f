"""One "step reached" (a new user's trial): a NaN at step 3 ended "at step 2/20" (the last healthy step) but a bad lr
diverging at step 2 also ended "at step 2/20" (the bad step counted); supervisor.log's summary wrote ``step reached
None/3``; ``inv status``'s ``grad_norm a -> b (step N)`` lagged its step column. Now
:func:`dapo_ops.core.health.step_reached` is the one definition: the ending line, the summary, run.json's step and
status's step column read it, and status brings the trend up to the log's step. Pure: record.end_run, rows."""

from __future__ import annotations

from dapo_ops.agent.supervisor import record
from dapo_ops.control.status import rows
from dapo_ops.core import health
from dapo_ops.core.runstate import RunStatus


def _diverged(bad_step: int, metric: str) -> dict:
    return {"cls": "diverged", "action": "stop", "detail": {"bad_step": bad_step, "metric": metric}}


def _end(step, total, verdict):
    rec = {
        "step": step,
        "total_steps": total,
        "attempts": [{"n": 1, "features": [], "step_reached": step, "verdict": verdict}],
    }
    decision = {"action": "stop", "reason": "diverged again after one retry: stopped"}
    record.end_run(rec, RunStatus.FAILED, verdict, decision)
    return rec, decision


def test_the_last_healthy_step_whichever_line_the_bad_value_came_on():
    nan_rec, nan = _end(2, 20, _diverged(3, "actor/grad_norm"))  # verl's skip print before step 3's line
    lr_rec, lr = _end(2, 20, _diverged(2, "actor/lr"))  # the bad lr on step 2's own line
    assert nan["ended"].endswith("at step 2/20") and "step reached 2/20" in nan["summary"]
    assert lr["ended"].endswith("at step 1/20") and "step reached 1/20" in lr["summary"], lr
    assert lr_rec["step"] == 1 and lr["tried"][0]["step_reached"] == 1 and nan_rec["step"] == 2
    first, fd = _end(1, 20, _diverged(1, "actor/lr"))  # bad at step 1: no healthy step
    assert first["step"] is None and fd["ended"].endswith("before the first step")
    assert "no step reached yet (of 20)" in fd["summary"]


def test_no_step_never_prints_none():
    _, d = _end(None, 3, {"cls": "hang", "action": "stop", "detail": {}})
    assert "None" not in d["summary"] and "no step reached yet (of 3)" in d["summary"], d["summary"]
    assert health.reached_text(None, None) == "no step reached yet (of ?)"
    assert health.step_reached(0) is None and health.step_reached(5) == 5 and health.step_reached(5, 3) == 2


def test_status_counts_the_same_step_and_brings_the_trend_to_the_logs_step():
    bad_line = "(TaskRunner pid=1) step:2 - actor/lr:50.0 - actor/grad_norm:0.9 - timing_s/step:1.0\n"
    run = {
        "run_id": "20261207-100000-abcd",
        "status": "failed",
        "step": 1,
        "total_steps": 20,
        "attempt": 1,
        "started_at": 1.0,
        "verdict": _diverged(2, "actor/lr"),
        "pids": {},
    }
    row = rows.build_row("h3", {"run": run, "tail": bad_line, "now": 9.0, "supervisor_alive": False})
    assert row.step == 1, row.step  # the log's bad step 2 is no step reached
    trend = {
        "metric": "actor/grad_norm",
        "first": 0.8,
        "last": 0.7,
        "step": 4,
        "shown": "grad_norm 0.8 -> 0.7 (step 4)",
    }
    live = dict(run, status="running", verdict=None, step=4, health={"trend": trend}, last_progress_at=5.0)
    line5 = "(TaskRunner pid=1) step:5 - actor/grad_norm:0.6 - timing_s/step:1.0\n"
    row = rows.build_row("h3", {"run": live, "tail": line5, "now": 6.0, "supervisor_alive": True})
    assert row.step == 5 and row.health["shown"] == "grad_norm 0.8 -> 0.6 (step 5)", row.health
