"""Training health on the sandbox (issue 42 items 4 and 6), through the real CLI, SSH, docker and the supervisor:

- data that runs out at verl's epoch limit: the stand-in ends the loop at ``rows // train_batch_size x
  trainer.total_epochs`` with exit 0 and no final line, as verl 0.9.1's V1 loop does
  (verl/trainer/ppo/v1/trainer_base.py:467, :522, :765); ``inv launch`` refuses such ``--steps`` in one line
  (preflight's data-feed check), runs it with ``--allow-short-data``, and the run's final status is the true
  verdict (``failed``, ``data-ran-out``: "ended at step 8 of 10: the training data ran out after 1 epoch"), never
  ``succeeded``; ``inv status`` says it;
- a healthy running run under ``inv logs --errors`` shows no failure header (on main's code the live attempt's log,
  classified with no exit code, showed ``===== <run> attempt 1: crash-other =====``).
"""

from __future__ import annotations

import pytest

from supervisor_helpers import wait_for
from test_launch_bench import host_ready, inv, launch, read_run, wait_end  # noqa: F401  (host_ready: a fixture)

pytestmark = pytest.mark.bench


def test_data_that_runs_out_is_refused_then_ends_with_the_true_verdict(sandbox, host_ready):  # noqa: F811
    """512 rows // batch 64 = 8 steps per epoch; one epoch; --steps 10."""
    host_ready("h1", {"step_time": 1.0})  # 8 s: the launch sees the run live first
    short = ("--steps", "10", "--framework", "fsdp", "--override", "trainer.total_epochs=1", "--save-freq", "4")
    res, _ = launch(host_ready, "h1", *short)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode != 0, res.stdout
    assert any(
        "--steps 10 is more than the data feeds: 512 rows // batch 64 = 8 step(s)/epoch x 1 epochs = 8 steps" in ln
        for ln in lines
    ), res.stderr
    assert not [p for p in sandbox.runs_dir("h1").iterdir() if p.name[:2] == "20"], "a refused launch made a run"

    res, rid = launch(host_ready, "h1", *short, "--allow-short-data")
    assert res.returncode == 0 and rid, res.stderr
    rec = wait_end(sandbox, "h1", rid)
    assert rec["status"] == "failed", rec
    assert rec["verdict"]["cls"] == "data-ran-out" and rec["verdict"]["detail"]["epochs"] == 1, rec["verdict"]
    assert rec["step"] == 8 and rec["total_steps"] == 10 and len(rec["attempts"]) == 1
    assert rec["attempts"][0]["exit_code"] == 0
    assert rec["decision"]["ended"] == "failed: ended at step 8 of 10: the training data ran out after 1 epoch"
    status = inv(host_ready, "status", "-H", "h1")
    said = " ".join(status.stdout.split())  # status wraps its lines at the output width (fanout.output_width)
    assert "ended at step 8 of 10: the training data ran out after 1 epoch" in said, status.stdout
    assert "succeeded" not in status.stdout


def test_a_healthy_running_run_under_logs_errors_shows_no_failure(sandbox, host_ready):  # noqa: F811
    host_ready("h2", {"step_time": 0.5})
    res, rid = launch(host_ready, "h2", "--steps", "40", "--framework", "fsdp")
    assert res.returncode == 0 and rid, res.stderr
    try:
        wait_for(lambda: (read_run(sandbox, "h2", rid).get("step") or 0) >= 3, 120, f"step 3 of run {rid}", 0.2)
        errs = inv(host_ready, "logs", "--errors", "-H", "h2")
        assert read_run(sandbox, "h2", rid).get("status") == "running"  # still live after the look
        assert "=====" not in errs.stdout and "crash-other" not in errs.stdout + errs.stderr, errs
        assert errs.returncode == 0, errs.stderr
    finally:
        inv(host_ready, "stop", "-H", "h2", "--run", rid)
