"""``inv logs --errors`` after ``inv stop`` (a new-user trial on the sandbox): the stopped attempt read
``attempt 1: crash-other`` with an ordinary step line marked ``>>``. An attempt the operator stopped is no failure
(dapo_ops/control/status/look.py ``attempt_stopped``); a real failure of an earlier attempt is still shown.

The run dirs are made as the supervisor makes them (runstate.new_record, record.new_attempt, the attempt's end as
agent/supervisor/machine.py records it: ``killed_by: "stop"``), or as agent/runstop.py closes a dead supervisor's
run (run.json ``stop``, the attempt never ended); the answer is the agent's own ``errors`` op
(agent/runlogs.py ``probe_logs_tails``). On main's code both tests fail: the stopped attempt says crash-other."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dapo_ops.agent import runfiles, runlogs
from dapo_ops.agent.supervisor import record
from dapo_ops.control.status import look
from dapo_ops.core import runstate
from dapo_ops.core.features import FeatureSet
from dapo_ops.core.logformat import split_lines

FIX = Path(__file__).resolve().parent / "fixtures"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 0 has a total capacity of 79.19 GiB"


def _healthy_tail() -> str:
    """A real healthy run's log cut after its first step line: what verl had written when ``inv stop`` came."""
    lines = split_lines((FIX / "real-verl/tool-runs/a-success/train.log").read_text(errors="replace"))
    first = next(i for i, ln in enumerate(lines) if "step:1 -" in ln)
    return "\n".join(lines[: first + 1]) + "\n"


def _run(runs_dir: Path, attempts: list[tuple[str, dict]], **rec_fields) -> str:
    rid = runstate.new_run_id()
    rd = runstate.run_dir_for(str(runs_dir), rid)
    os.makedirs(rd)
    rec = runstate.new_record({"run_id": rid, "run_dir": rd, "host": "h1", "settings": {"steps": 4}}, 0)
    for k, (log, end) in enumerate(attempts, 1):
        att = record.new_attempt(k, FeatureSet.from_json([]), {}, None, "attempt-%d.log" % k)
        att.update(end)
        rec["attempts"].append(att)
        Path(runstate.RunPaths(rd).attempt_log(k)).write_text(log)
    rec.update(attempt=len(attempts), **rec_fields)
    runfiles.write_run(rd, rec)
    return rid


class _Host:
    name = "h1"


def _errors(monkeypatch, runs_dir: Path) -> tuple[str, int]:
    monkeypatch.setattr(
        look,
        "probe",
        lambda target, req, timeout=0: runlogs.probe_logs_tails(str(runs_dir), req["run_id"], attempt=req["attempt"]),
    )
    return look.errors_text(_Host(), "", 0, "")  # type: ignore[arg-type]


STOPPED = {"status": "stopped", "ended_at": 3.0, "step": 1}
DECISION = {"action": "stop", "reason": "stopped by the operator", "ended": "stopped by the operator at step 1/4"}


def test_an_attempt_stopped_by_inv_stop_is_no_failure_and_an_earlier_oom_still_shows(monkeypatch, tmp_path):
    _run(
        tmp_path,
        [
            (
                _healthy_tail() + OOM + "\n",
                {"ended_at": 1.0, "exit_code": 1, "verdict": {"cls": "oom-device", "evidence": [OOM]}},
            ),
            (_healthy_tail(), {"ended_at": 2.0, "exit_code": -15, "killed_by": "stop"}),
        ],
        decision=DECISION,
        **STOPPED,
    )
    text, n = _errors(monkeypatch, tmp_path)
    lines = text.splitlines()
    a2 = next(i for i, ln in enumerate(lines) if " attempt 2: " in ln)
    assert lines[a2].endswith("attempt 2: %s =====" % look.STOPPED_ATTEMPT), text
    assert "crash-other" not in text
    assert " attempt 1: oom-device =====" in text and any(ln.startswith(">> ") and OOM in ln for ln in lines[:a2])
    assert not [ln for ln in lines[a2:] if ln.startswith(">> ")]  # no step line taken for evidence
    assert n == 1 and any("stopped by the operator at step 1/4" in ln for ln in lines[a2 + 1 :]), text


@pytest.mark.parametrize("verdict", [None, {"cls": "oom-device", "evidence": [OOM]}])
def test_a_dead_supervisors_run_closed_by_inv_stop(monkeypatch, tmp_path, verdict):
    """agent/runstop.py marks run.json ``stopped`` with ``stop``; the attempt never got an end. A verdict the
    supervisor did record for it (it judged the attempt before it died) is still shown."""
    log = _healthy_tail() + (OOM + "\n" if verdict else "")
    _run(
        tmp_path,
        [(log, {"verdict": verdict})],
        stop={"at": 3.0, "by": "dapo-ops stop", "supervisor": "dead"},
        **STOPPED,
    )
    text, n = _errors(monkeypatch, tmp_path)
    if verdict:
        assert " attempt 1: oom-device =====" in text and n == 1
    else:
        assert text.splitlines() == [text.split(" attempt 1")[0] + " attempt 1: %s =====" % look.STOPPED_ATTEMPT]
        assert n == 0


def test_attempt_stopped_reads_what_the_supervisor_and_runstop_record():
    assert look.attempt_stopped({"status": "stopped", "attempts": [{"n": 1, "killed_by": "stop"}]}, 1)
    assert look.attempt_stopped({"status": "stopped", "attempts": [{"n": 1, "exit_code": 1}, {"n": 2}]}, 2)
    assert not look.attempt_stopped({"status": "stopped", "attempts": [{"n": 1, "exit_code": 1}, {"n": 2}]}, 1)
    assert not look.attempt_stopped({"status": "failed", "attempts": [{"n": 1, "exit_code": 1}]}, 1)
    assert not look.attempt_stopped({"status": "stopped", "attempts": [{"n": 1, "verdict": {"cls": "hang"}}]}, 1)
