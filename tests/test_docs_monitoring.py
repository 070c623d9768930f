"""docs/workflow.md "Monitoring" says what the code does (issue 32 minors / issue 29): the status layout below a
width, the ``stalled <duration>`` state, the resume-redo line and the verdicts that are not crashes (error storm,
disk full, external kill). Each figure and wording is taken from the code, so a change there fails here."""

from __future__ import annotations

import re
from pathlib import Path

from dapo_ops.agent.supervisor import diskspace, stall
from dapo_ops.core.classify import storm
from dapo_ops.control.status import table as statustable
from dapo_ops.control.status import rows as statusview
from dapo_ops.core import ladder

DOC = (Path(__file__).resolve().parents[1] / "docs" / "workflow.md").read_text()
MON = " ".join(DOC.split("## 6. Monitoring", 1)[1].split("\n## ", 1)[0].split())


def _fmt(x: float) -> str:
    return "%g" % x


def test_the_monitoring_section_describes_the_narrow_layout_with_the_codes_labels():
    assert "one block per run" in MON and "host <whole run id> state" in MON
    for key in ("eta", "resp_len", "tput", "age"):
        assert statustable.LABELS[key] in MON, key
    from dapo_ops.control.remote import fanout

    assert "default %d" % fanout.PIPE_WIDTH in MON and "wider when a row needs it" in MON


def test_the_monitoring_section_describes_stalled_with_the_codes_limits():
    row = statusview.StatusRow(
        host="h1", run_id="r", state="running", status="running", stalled_s=432.0, last_step_at=1.0
    )
    cell = statustable.cells(row)["eta"]
    assert cell.startswith("stalled 7m12s (last step ") and "`stalled 7m12s (last step 14:03:27)`" in MON, cell
    assert "for the supervisor's own stall limit (run.json `stall_after_s`, the one threshold of a stall" in MON
    assert statusview.stalled_after({"stall_after_s": 600}) == 600.0  # the supervisor's own
    assert statusview.stalled_after({}) is None and "a run.json without it never shows `stalled`" in MON
    assert "`stall_factor` (%s)" % _fmt(stall.STALL_FACTOR) in MON
    assert "`stall_floor_s` (%s s)" % _fmt(stall.STALL_FLOOR_S) in MON


def test_the_monitoring_section_quotes_the_resume_redo_lines():
    assert statusview.redo_line(10, 7) in MON and statusview.redo_line(10, 10) in MON


def test_the_monitoring_section_names_the_new_verdicts_with_the_codes_figures():
    assert "`error-storm`" in MON
    assert "%d times over at least %s s" % (storm.MIN_REPEATS, _fmt(storm.MIN_SPAN_S)) in MON
    assert "%d times over at least %s s" % (storm.SLOW_REPEATS, _fmt(storm.SLOW_SPAN_S)) in MON
    assert "%d KiB free" % (diskspace.LOW_BYTES >> 10) in MON
    d = ladder._crash_stop(None, {"cause": "disk-full", "path": "<runs_dir>"}, {})
    assert d.reason in MON, d.reason
    d = ladder._crash_stop(None, {"external": True, "exit_code": 137}, {})
    assert d.reason in MON, d.reason
    assert re.search(r"external kill .*exit 137/143", MON)


def test_a_run_that_did_no_step_is_not_called_checkpointed():
    """An error storm at step 0 read "a resume redoes no step (step 0 is checkpointed)": nothing was checkpointed."""
    line = statusview.redo_line(0, None)
    assert "checkpointed" not in line and "starts at step 1" in line, line
    assert statusview.redo_line(5, 5) == "a resume redoes no step (step 5 is checkpointed)"
