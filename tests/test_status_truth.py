"""Status tells the truth (issue 29 item 3): a run whose step does not move shows `stalled <duration>` and its last
step time instead of an ETA; a run whose supervisor is gone is read from the attempt's own log (verl goes on writing
attempt-<k>.log; train.log is the supervisor's copy). Pure: control/status/rows.py, statustable.py, agent/runprobe.py."""

from __future__ import annotations

import json

from dapo_ops.agent import runprobe
from dapo_ops.control.status import table as statustable
from dapo_ops.control.status import rows as statusview
from dapo_ops.agent import runfiles


def _run(**kw):
    rec = {
        "run_id": "20261202-100000-abcd",
        "status": "running",
        "step": 1,
        "total_steps": 4,
        "attempt": 1,
        "step_times": [2.0],
        "started_at": 1000.0,
        "last_progress_at": 1010.0,
        "pids": {},
        "attempts": [],
    }
    rec.update(kw)
    return rec


def test_a_run_that_does_not_move_shows_stalled_not_an_eta():
    # the H200 incident: step 1/4 at 1010, steps of ~2 s; the supervisor's stall limit 300 s (its floor)
    run = _run(stall_after_s=300.0)
    fresh = statusview.build_row("gpu", {"run": run, "tail": "", "now": 1015.0, "supervisor_alive": True})
    assert fresh.eta_s == 6.0 and fresh.stalled_s is None and fresh.no_step_s is None
    row = statusview.build_row("gpu", {"run": run, "tail": "", "now": 1010.0 + 301, "supervisor_alive": True})
    assert row.eta_s is None and row.stalled_s == 301.0 and row.last_step_at == 1010.0
    cells = statustable.cells(row)
    assert cells["eta"].startswith("stalled 5m") and "(last step " in cells["eta"]
    js = row.to_json()
    assert js["stalled_s"] == 301.0 and js["eta_s"] is None and js["last_step_at"] == 1010.0
    # an older run.json without the supervisor's limit: no stall is called, only no step for 3 x the step time
    old = statusview.build_row("gpu", {"run": _run(), "tail": "", "now": 1017.0, "supervisor_alive": True})
    assert old.stalled_s is None and old.no_step_s == 7.0 and old.eta_s is None


def test_no_eta_once_the_step_time_cannot_explain_the_wait():
    """A new user's trial: attempt 2 stuck at step 1 (2 s steps, the supervisor's 60 s floor) showed ``running ...
    ETA 10s`` for the first 30 s of its hang (half the floor). Past 3 x the step time the ETA cell and the summary
    line say ``no step for ..`` instead; past the supervisor's own limit (the one threshold), ``stalled``: a later
    trial read ``stalled 33s`` while the state was running and the supervisor calls a stall at 60 s."""
    run = _run(stall_after_s=60.0, total_steps=6)
    row = statusview.build_row("h3", {"run": run, "tail": "", "now": 1022.0, "supervisor_alive": True})
    assert row.eta_s is None and row.no_step_s == 12.0 and row.stalled_s is None
    assert statustable.cells(row)["eta"] == "no step for 12s"
    line = statustable.summary_line(row)
    assert line is not None and "ETA" not in line and "no step for 12s" in line, line
    below = statusview.build_row("h3", {"run": run, "tail": "", "now": 1043.0, "supervisor_alive": True})
    assert below.stalled_s is None and below.no_step_s == 33.0, below
    assert statustable.cells(below)["eta"] == "no step for 33s" and "stalled" not in statustable.cells(below)["eta"]
    later = statusview.build_row("h3", {"run": run, "tail": "", "now": 1070.0, "supervisor_alive": True})
    assert later.stalled_s == 60.0 and "stalled 1m" in (statustable.summary_line(later) or "")
    fresh = statusview.build_row("h3", {"run": run, "tail": "", "now": 1013.0, "supervisor_alive": True})
    assert fresh.eta_s == 10.0 and "ETA 10s" in (statustable.summary_line(fresh) or "")


def test_dead_supervisor_status_reads_the_attempts_own_log(tmp_path):
    runs = tmp_path / "runs"
    rid = "20261202-100000-abcd"
    d = runs / rid
    d.mkdir(parents=True)
    # the supervisor was SIGKILLed at step 3: run.json and train.log stop there; verl went on to step 8
    runfiles.write_json_atomic(
        d / "run.json",
        _run(
            run_id=rid,
            step=3,
            total_steps=12,
            run_dir=str(d),
            log=str(d / "train.log"),
            pids={"supervisor": 2**22 + 7, "verl_pgid": None},
            attempts=[{"n": 1, "log": "attempt-1.log"}],
        ),
    )
    steps = "".join("step:%d - critic/score/mean:0.5 - timing_s/step:2.0\n" % k for k in range(1, 9))
    (d / "train.log").write_text(
        "===== dapo-ops attempt 1 start x features=a =====\n"
        + "".join("step:%d - timing_s/step:2.0\n" % k for k in range(1, 4))
    )
    (d / "attempt-1.log").write_text(steps)
    ans = runprobe.probe_status(str(runs), rid)
    assert ans["supervisor_alive"] is False and ans["log_read"] == str(d / "attempt-1.log")
    row = statusview.build_row("gpu", json.loads(json.dumps(ans)))
    assert row.state == statusview.SUPERVISOR_DEAD and row.step == 8 and row.total == 12
    assert row.log_read.endswith("attempt-1.log")


def test_a_run_that_reached_no_step_says_so_not_a_last_step_age():
    """A new user's trial: `last step 5m00s ago` was shown for a run that had not reached its first step."""
    run = _run(step=None, step_times=[], last_progress_at=1000.0)
    row = statusview.build_row("gpu", {"run": run, "tail": "", "now": 1300.0, "supervisor_alive": True})
    assert row.step is None and statustable.cells(row)["age"] == "no step yet (started 5m00s ago)"
    ended = statusview.build_row("gpu", {"run": dict(run, status="failed"), "tail": "", "now": 1300.0})
    assert statustable.cells(ended)["age"] == "no step (started 5m00s ago)"
    moving = statusview.build_row("gpu", {"run": _run(), "tail": "", "now": 1015.0, "supervisor_alive": True})
    assert statustable.cells(moving)["age"] == "5s ago"


def _killed_supervisor_run(tmp_path, reached=8, total=12, ckpt=None):
    """A run dir whose supervisor was SIGKILLed at step 3 (run.json and train.log stop there) while verl went on to
    step ``reached`` in attempt-1.log (and saved ``global_step_<ckpt>``)."""
    runs = tmp_path / "runs"
    rid = "20261202-100000-abcd"
    d = runs / rid
    (d / "checkpoints").mkdir(parents=True)
    if ckpt:
        (d / "checkpoints" / ("global_step_%d" % ckpt) / "actor").mkdir(parents=True)
        (d / "checkpoints" / ("global_step_%d" % ckpt) / "actor" / "model.pt").write_text("x")
        (d / "checkpoints" / "latest_checkpointed_iteration.txt").write_text(str(ckpt))
    runfiles.write_json_atomic(
        d / "run.json",
        _run(
            run_id=rid,
            step=3,
            total_steps=total,
            run_dir=str(d),
            log=str(d / "train.log"),
            ckpt_dir=str(d / "checkpoints"),
            pids={"supervisor": 2**22 + 7, "verl_pgid": None},
            attempts=[{"n": 1, "log": "attempt-1.log"}],
        ),
    )
    (d / "train.log").write_text(
        "===== dapo-ops attempt 1 start x features=a =====\n"
        + "".join("step:%d - timing_s/step:2.0\n" % k for k in range(1, 4))
    )
    (d / "attempt-1.log").write_text("".join("step:%d - timing_s/step:2.0\n" % k for k in range(1, reached + 1)))
    return runs, rid, d


def test_status_all_and_logs_of_a_killed_supervisors_run_read_the_attempts_own_log(tmp_path, monkeypatch):
    """A new user's trial: after the supervisor was SIGKILLed (verl went on), `inv status --all` showed run.json's
    stale step (and offered a resume of a run verl had finished), `inv logs` showed train.log, which stopped with
    the supervisor. Both read the attempt's own log now, as `inv status` does."""
    from dapo_ops.agent import runlogs
    from dapo_ops.control.status import look as status

    runs, rid, d = _killed_supervisor_run(tmp_path, reached=8, total=12)
    monkeypatch.setattr(status, "fan", lambda chosen, fn, *a, **k: [("gpu", runprobe.probe_list(str(runs)))])
    (row,) = status.collect_rows(["gpu"], all_runs=True)
    assert row.state == statusview.SUPERVISOR_DEAD and row.step == 8 and row.total == 12
    assert row.log_read == str(d / "attempt-1.log")
    assert runlogs.probe_resolve(str(runs), rid)["log"] == str(d / "attempt-1.log")
    assert runlogs.probe_resolve(str(runs), rid, attempt=1)["log"] == str(d / "attempt-1.log")

    # verl finished every step after its supervisor died: no resume is offered (as `inv status` says)
    runs, rid, d = _killed_supervisor_run(tmp_path / "done", reached=12, total=12, ckpt=12)
    (row,) = status.collect_rows(["gpu"], all_runs=True)
    assert row.step == 12 and "verl finished all 12 steps" in row.hint and "--resume" not in row.hint

    # a run whose supervisor lives (or an ended run) is listed from run.json alone: no log is read
    runfiles.write_json_atomic(d / "run.json", dict(runfiles.read_run(str(d)), status="stopped"))
    (item,) = runprobe.probe_list(str(runs))["runs"]
    assert "tail" not in item and "log_read" not in item
    assert runlogs.probe_resolve(str(runs), rid)["log"] == str(d / "train.log")


def test_stop_of_a_killed_supervisors_run_records_the_step_from_the_attempts_own_log(tmp_path):
    """The same trial: `inv stop` closed the run at train.log's step 15 of 40 while verl had finished all 40 (it
    read train.log, which stopped with the supervisor); the record and every later look said 15."""
    from dapo_ops.agent import runstop

    runs, rid, d = _killed_supervisor_run(tmp_path, reached=12, total=12, ckpt=12)
    res = runstop.handle({"op": "stop", "runs_dir": str(runs), "run_id": rid, "kill_grace_s": 1})
    assert res["after"] == "stopped", res
    rec = runfiles.read_run(str(d))
    assert rec["step"] == 12
    row = statusview.build_row("gpu", {"run": rec, "tail": "", "now": 2000.0})
    assert row.ended == "stopped by `inv stop` at step 12/12"


def test_a_checkpoint_save_in_flight_is_said_not_no_step(monkeypatch):
    """``inv status`` said ``no step for 40s`` (JSON ``no_step_s``), later ``stalled``, while verl was saving a
    checkpoint: a long save is no stall. The supervisor reads verl's real save line (a2-success's ``Saving checkpoint
    to .../global_step_2``, the log grammar's parse_save) into the attempt (``saved_step``, ``save_started_at``);
    status now says ``saving checkpoint step 2 for 40s`` until step 2's line, and nothing of a stall."""
    from pathlib import Path

    from dapo_ops.agent.supervisor import follow, record

    log = Path(__file__).parent / "fixtures" / "real-verl" / "tool-runs" / "a2-success" / "train.log"
    save = next(ln for ln in log.read_text(errors="replace").splitlines() if ln.endswith("checkpoints/global_step_2"))
    att = {"n": 1, "started_at": 1000.0}
    run = _run(stall_after_s=60.0, total_steps=6, attempts=[att])
    sc = follow.Scanner(
        run, att, record.RecordWriter("/nonexistent"), follow.LinkFinder({}), lambda u: None, lambda ln: False, {}
    )
    monkeypatch.setattr(follow, "now", lambda: 1012.0)
    sc.scan([save])
    assert att["saved_step"] == 2 and att["save_started_at"] == 1012.0
    row = statusview.build_row("h3", {"run": run, "tail": "", "now": 1052.0, "supervisor_alive": True})
    assert row.no_step_s is None and row.stalled_s is None and not row.stale, row
    assert (row.saving_step, row.saving_s) == (2, 40.0)
    assert statustable.cells(row)["eta"] == "saving checkpoint step 2 for 40s"
    line = statustable.summary_line(row) or ""
    assert "saving checkpoint step 2 for 40s" in line and "no step" not in line and "ETA" not in line, line
    js = row.to_json()
    assert js["saving_step"] == 2 and js["saving_s"] == 40.0 and js["no_step_s"] is None
    # step 2's line came (verl prints it after the save): the save is over, the usual reading again
    tail = "(TaskRunnerV1 pid=1) step:2 - training/global_step:2 - timing_s/step:30.0\n"
    done = statusview.build_row("h3", {"run": run, "tail": tail, "now": 1052.0, "supervisor_alive": True})
    assert done.saving_step is None and done.step == 2
    # an attempt with no save: unchanged (no step for ..)
    plain = statusview.build_row("h3", {"run": _run(stall_after_s=60.0, total_steps=6), "tail": "", "now": 1022.0})
    assert plain.no_step_s == 12.0 and plain.saving_step is None


def test_a_dead_supervisors_row_says_no_stall_and_no_save_it_cannot_know():
    """With the supervisor gone nothing records a save verl starts (the supervisor writes ``saved_step`` from the log
    as it reads it), and the log tail cannot date one: verl's log timestamps are the container's local time. A live
    verl saving its checkpoint showed ``stalled 9m`` beside ``supervisor-dead``, and a save the supervisor recorded
    before it died showed ``saving checkpoint step 2 for 9m`` while verl was not running at all. The row of a dead
    supervisor now says neither: no ETA, the progress cell's ``.. ago`` and the hint's facts only."""
    run = _run(stall_after_s=60.0, total_steps=6)
    probe = {"run": run, "tail": "", "now": 1550.0, "supervisor_alive": False, "verl_alive": True, "verl_pgid": 7}
    row = statusview.build_row("h3", probe)
    assert row.state == "supervisor-dead" and row.eta_s is None
    assert (row.stalled_s, row.no_step_s, row.saving_step) == (None, None, None), row
    assert statustable.cells(row)["eta"] == "-"
    assert row.progress_age_s == 540.0 and "verl still runs" in (row.hint or "")
    saved = _run(stall_after_s=60.0, total_steps=6, attempts=[{"n": 1, "saved_step": 2, "save_started_at": 1012.0}])
    dead = statusview.build_row("h3", dict(probe, run=saved, verl_alive=False))
    assert dead.saving_step is None and "saving" not in statustable.cells(dead)["eta"]
    # the supervisor alive: the same records read as before (stalled; a save in flight)
    assert statusview.build_row("h3", dict(probe, supervisor_alive=True)).stalled_s == 540.0
    assert statusview.build_row("h3", dict(probe, run=saved, supervisor_alive=True)).saving_step == 2
