"""Golden agreement of the three readers of a training log (pure, no hosts).

Every handed case and variant (tests/cases/), every real verl 0.9.1 log (tests/fixtures/real-verl/*.log and its
tool runs' train.log) and a real log carrying SwanLab's folded banner (tests/fixtures/log-grammar/) goes through

- the supervisor: :class:`dapo_ops.agent.supervisor.follow.Scanner` (what ``Supervisor`` runs on each attempt's
  output: lines into run.json progress ``step``, ``total_steps``, the attempt's ``resumed_from``, ``swanlab_url``),
  fed the lines of the last attempt as ``follow.Follower`` splits them (on ``\\r`` and ``\\n``);
- the status view: :func:`dapo_ops.control.status.rows.parse_tail` and :func:`~dapo_ops.control.status.rows.build_row`
  on the log as the probe's tail (a run.json without progress, so the row's facts come from the log);
- the classifier: :func:`dapo_ops.core.classify.classify`'s ``detail`` (``step``, ``total``);

and they must agree on the last step, the total, the resume step and the SwanLab link, and equal the recorded
facts (tests/fixtures/log-grammar/golden.json: a drift of the shared grammar, dapo_ops/core/logformat.py, moves all
readers at once and is caught there; the real logs' facts are checked against tests/test_real_verl.py's table).
Regenerate the record after a deliberate grammar change: ``.venv/bin/python tests/test_log_grammar_golden.py``.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

import pytest

from dapo_ops.agent.supervisor import follow, record
from dapo_ops.control.status import rows as statusview
from dapo_ops.core import classify, health, logformat

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "fixtures" / "log-grammar" / "golden.json"
FIELDS = ("step", "total", "resume", "link")


def log_files() -> list[str]:
    """Every log the golden test reads, as paths relative to tests/."""
    pats = (
        "cases/handed/*.log",
        "cases/variants/*.log",
        "fixtures/real-verl/*.log",
        "fixtures/real-verl/tool-runs/*/train.log",
        "fixtures/log-grammar/*.log",
    )
    return sorted(str(p.relative_to(TESTS)) for pat in pats for p in TESTS.glob(pat))


def read(rel: str) -> str:
    return (TESTS / rel).read_text(encoding="utf-8", errors="replace")


def last_attempt(text: str) -> str:
    """The output of the last attempt in a train.log (after its ``===== dapo-ops attempt <k> start`` line)."""
    m = None
    for m in re.finditer(r"(?m)^.*===== dapo-ops attempt \d+ start", text):
        pass
    return text[m.start() :] if m else text


def supervisor_facts(text: str) -> dict:
    rec: dict = {}
    att: dict = {"n": 1}
    with tempfile.TemporaryDirectory() as tmp:
        scanner = follow.Scanner(
            rec,
            att,
            record.RecordWriter(tmp),
            follow.LinkFinder({}),
            lambda url: rec.__setitem__("swanlab_url", url),
            lambda _line: False,
        )
        scanner.scan(re.split(r"[\r\n]", last_attempt(text)))  # as follow.Follower hands the attempt's lines
    return {
        "step": rec.get("step"),
        "total": rec.get("total_steps"),
        "resume": att.get("resumed_from"),
        "link": rec.get("swanlab_url"),
    }


def status_view_facts(text: str) -> dict:
    tail = statusview.parse_tail(text)
    row = statusview.build_row(
        "h1", {"run": {"run_id": "r", "status": "running", "attempt": 1}, "tail": text, "now": 1.0}
    )
    # the row's step falls back to the tqdm bar when no metrics line was printed yet; the metrics step is the fact
    assert row.step == (tail.step if tail.step is not None else tail.bar_step)
    assert row.total == (tail.total if tail.total is not None else tail.bar_total)
    assert row.swanlab_url == tail.swanlab_url
    return {
        "step": tail.step,
        "total": tail.total,
        "resume": tail.resumed_from,
        "link": tail.swanlab_url,
        "bar_total": tail.bar_total,
    }


def classifier_facts(text: str) -> dict:
    d = classify.classify(text).detail
    return {"step": d.get("step"), "total": d.get("total"), "bad_step": d.get("bad_step")}


def facts(rel: str) -> dict:
    """The agreed facts of one log; raises AssertionError naming the readers that disagree."""
    text = read(rel)
    sup, sv, cl = supervisor_facts(text), status_view_facts(text), classifier_facts(text)
    for k in FIELDS:
        assert sup[k] == sv[k], "%s: supervisor %s=%r, status view %r" % (rel, k, sup[k], sv[k])
    # a diverged verdict's step is the step reached (core.health.step_reached: the last healthy step below its
    # bad_step), of the same last logged step the supervisor read
    want = sup["step"] if cl["bad_step"] is None else health.step_reached(sup["step"], cl["bad_step"])
    assert cl["step"] == want, "%s: classifier step %r, supervisor %r (want %r)" % (rel, cl["step"], sup["step"], want)
    # the classifier's total is the Total-training-steps line, else the progress bar's total (as the status row's)
    want_total = sup["total"] if sup["total"] is not None else sv["bar_total"]
    assert cl["total"] == want_total, "%s: classifier total %r, log says %r" % (rel, cl["total"], want_total)
    return {k: sup[k] for k in FIELDS}


FILES = log_files()
RECORDED = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize("rel", FILES)
def test_the_three_readers_agree_and_match_the_record(rel):
    assert facts(rel) == RECORDED.get(rel), "%s: facts differ from %s" % (rel, GOLDEN.name)


def test_the_record_covers_every_log_and_every_kind_of_fact():
    assert sorted(RECORDED) == FILES
    assert sum(1 for r in FILES if r.startswith("cases/handed/")) == 35
    for k in FIELDS:  # the agreement means something only where the facts are there
        assert sum(1 for v in RECORDED.values() if v[k] is not None) >= 2, k


def test_real_logs_record_matches_what_real_verl_printed():
    sys.path.insert(0, str(TESTS))
    from test_real_verl import RUNS

    for name, (steps, total, resume, _saves, _rc) in RUNS.items():
        rec = RECORDED["fixtures/real-verl/" + name]
        assert rec == {"step": steps[-1] if steps else None, "total": total, "resume": resume, "link": None}, name
    url = (
        "http://192.0.2.10:8000/@team/dapo-ops-a-rather-long-project-name-that-folds-the-url-twice/runs/"
        "abcdefghijklmnopqrstu"
    )
    assert RECORDED["fixtures/log-grammar/verl-run-1-with-swanlab-banner.log"] == {
        "step": 3,
        "total": 3,
        "resume": None,
        "link": url,
    }


def test_the_shared_grammar_is_what_each_reader_uses():
    """The readers hold no line regex of their own for these facts (a copy would drift)."""
    assert statusview.parse_metrics_line is logformat.parse_metrics_line
    assert statusview.normalise_line is logformat.normalise_line
    assert follow.parse_metrics_line is logformat.parse_metrics_line
    # no regex of its own for the total, resume and save lines: the grammar's parse functions
    assert getattr(follow, "TOTAL_RE", logformat.TOTAL_RE) is logformat.TOTAL_RE
    assert getattr(follow, "RESUME_RE", logformat.RESUME_RE) is logformat.RESUME_RE
    assert follow.parse_total is logformat.parse_total and follow.parse_resume is logformat.parse_resume
    assert follow.parse_save is logformat.parse_save
    from dapo_ops.agent import notify

    assert notify.LinkScanner is logformat.LinkScanner


if __name__ == "__main__":  # regenerate the record (after a deliberate grammar change; review the diff)
    GOLDEN.write_text(json.dumps({rel: facts(rel) for rel in FILES}, indent=1, sort_keys=True) + "\n")
    print("wrote %s (%d logs)" % (GOLDEN, len(FILES)))
