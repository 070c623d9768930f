"""Issue 44's last three minors (operator pass 4, third part): one test per item, each run against project code and
each failing on the code before its fix. Pure, except the notifier item, which runs the real supervisor process on
fake verl (tests/supervisor_helpers.py) against a loopback webhook; no host, no sandbox bench."""

from __future__ import annotations

import io
import re
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ 3. failed webhook sends reach run.json and status


@pytest.fixture
def hooks():
    from test_notify import Hooks  # the loopback webhook receiver

    h = Hooks()
    yield h
    h.close()


def test_failed_webhook_sends_are_recorded_in_run_json_without_the_url(tmp_path, hooks):
    """A webhook that answers HTTP 500 was only a supervisor.log line; run.json ``notify_failures`` now records each
    failed send (when, which event, the webhook kind, the error) and never the URL or its token."""
    from test_supervisor import make_run, run_to_end

    token = "tok-5f3a9c"
    run_dir = make_run(
        tmp_path,
        {"step_time": 0.03, "oom_at": 3},  # one OOM escalation, then success
        extra={
            "notify": {
                "webhooks": [{"kind": "generic", "url_env": "DAPO_NOTIFY_URL_0"}],
                "timeout_s": 5,
                "on_escalation": True,
                "on_success": True,
            }
        },
        secret={"DAPO_NOTIFY_URL_0": hooks.base + "/status500?token=" + token},
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded"
    assert [p["body"]["event"] for p in hooks.posts] == ["escalation", "success"]
    nf = rec["notify_failures"]
    assert nf["total"] == 2, nf
    assert [(x["event"], x["kind"]) for x in nf["recent"]] == [("escalation", "generic"), ("success", "generic")]
    assert all(x["error"].startswith("HTTP 500") and isinstance(x["at"], float) for x in nf["recent"]), nf
    text = (run_dir / "run.json").read_text()
    assert hooks.base not in text and token not in text and "DAPO_NOTIFY_URL_0" not in json.dumps(nf)


def test_the_failures_list_is_bounded_and_keeps_counting():
    from dapo_ops.agent.supervisor import record

    rec: dict = {}
    for i in range(record.MAX_NOTIFY_FAILURES + 3):
        record.note_notify_failures(rec, "hang", [{"kind": "feishu", "error": "HTTP %d" % i, "line": "x"}], float(i))
    nf = rec["notify_failures"]
    assert nf["total"] == record.MAX_NOTIFY_FAILURES + 3
    assert len(nf["recent"]) == record.MAX_NOTIFY_FAILURES
    assert nf["recent"][-1] == {
        "at": float(record.MAX_NOTIFY_FAILURES + 2),
        "event": "hang",
        "kind": "feishu",
        "error": "HTTP %d" % (record.MAX_NOTIFY_FAILURES + 2),
    }
    record.note_notify_failures(rec, "hang", [], 99.0)  # nothing failed: nothing changes
    assert rec["notify_failures"]["total"] == record.MAX_NOTIFY_FAILURES + 3


def _status_row(notify_failures):
    from dapo_ops.control.status import rows as sv

    run = {
        "run_id": "20261129-150000-abcd",
        "status": "succeeded",
        "attempt": 2,
        "step": 10,
        "total_steps": 10,
        "started_at": 900.0,
        "ended_at": 1000.0,
        "pids": {"supervisor": 10, "verl_pgid": 11},
        "decision": {"ended": "succeeded: 10/10 steps"},
    }
    if notify_failures is not None:
        run["notify_failures"] = notify_failures
    return sv.build_row("h1", {"run": run, "tail": "", "now": 1010.0, "supervisor_alive": False, "verl_alive": False})


def test_status_shows_failed_webhook_sends_in_one_line_and_json_carries_them():
    """``inv status`` said nothing of failed notifications: one line now, with the count and the last kind and error;
    ``--json`` carries the record."""
    from dapo_ops.cli import status as cli_status
    from dapo_ops.control.status import rows as sv

    nf = {
        "total": 2,
        "recent": [
            {"at": 950.0, "event": "escalation", "kind": "generic", "error": "HTTP 500 Internal Server Error"},
            {"at": 999.0, "event": "success", "kind": "generic", "error": "HTTP 500 Internal Server Error"},
        ],
    }
    row = _status_row(nf)
    line = sv.notify_line(row)
    assert line == (
        "h1 20261129-150000-abcd: notify: 2 webhook sends failed (last: generic: HTTP 500 Internal Server Error); "
        "each is in supervisor.log"
    )
    assert row.to_json()["notify_failures"] == nf
    buf = io.StringIO()
    cli_status.render_table([row], out=buf, width=200)
    assert [ln for ln in buf.getvalue().splitlines() if "notify:" in ln] == [line]
    quiet = _status_row(None)  # no failures: no line, null in --json
    assert sv.notify_line(quiet) is None and quiet.to_json()["notify_failures"] is None


# ------------------------------------------------------------------ 2. the demo clears its OOM cue; .ci/run's benches


def test_the_demo_clears_its_oom_cue_when_it_ends(tmp_path, monkeypatch):
    """``make demo`` left h1 cued to OOM at step 8, so the README's next ``inv launch -H h1`` hit it again. The
    demo's own code path (tasks.py ``demo``, its commands stubbed) launches with the cue and leaves ``{}`` behind,
    also when a step of the demo fails."""
    from conftest import repo_module
    from invoke import Context
    from invoke.exceptions import Exit

    tasks = repo_module("tasks.py")
    state = tmp_path / "dapo-bench-7"
    (state / "hosts" / "h1" / "sandbox").mkdir(parents=True)
    cue = state / "hosts" / "h1" / "sandbox" / "scenario.json"
    seen = {}

    def fake_sh(argv, *, check=True, env=None):
        import subprocess

        if "launch" in argv:
            seen["at_launch"] = json.loads(cue.read_text())
        rc = 1 if seen.get("fail") and "watch" in argv else 0
        if check and rc:
            raise Exit("failed", code=rc)
        return subprocess.CompletedProcess(argv, rc)

    monkeypatch.setattr(tasks.os, "geteuid", lambda: 0)
    monkeypatch.setattr(tasks, "bench_state", lambda bid: state)
    monkeypatch.setattr(tasks, "_sh", fake_sh)
    tasks.demo.body(Context(), bench_id="7")
    assert seen["at_launch"]["failure"]["kind"] == "oom-device" and seen["at_launch"]["failure"]["step"] == 8
    assert json.loads(cue.read_text()) == {}  # a healthy stand-in (sandbox/README.md "scenario.json")

    seen.clear()
    seen["fail"] = True
    with pytest.raises(Exit):
        tasks.demo.body(Context(), bench_id="7")
    assert seen["at_launch"]["failure"]["step"] == 8 and json.loads(cue.read_text()) == {}


def test_ci_run_has_its_own_benches_and_the_readme_says_how_to_run_both():
    """``.ci/run`` defaulted to bench 0, the demo's, and tore benches 0-3 down on exit: its default base is 100 now,
    its teardown covers its own range only, and the README says how to run the demo and the tests at once."""
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^export DAPO_BENCH_ID=\$\{DAPO_BENCH_ID:-100\}$", ci, re.M), "default bench base is not 100"
    teardown = ci[ci.index("teardown() {") : ci.index("trap teardown EXIT")]
    assert "DAPO_BENCH_ID + k" in teardown and "for k in 0 " not in teardown, teardown
    assert "bench.sh down" in teardown
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`.ci/run` benches 100-103" in readme and "`make demo` uses bench 0" in readme
    assert "beside a demo run `DAPO_BENCH_ID=100 make test`" in readme


# ------------------------------------------------------------------ 1. logs -f says a silent link, as watch does


def test_logs_follow_says_a_silent_link_once_as_watch_does():
    """``inv logs -f`` printed nothing while a link was down for 25 s, where ``inv watch`` says ``... (still
    watching)``. The follow now hears a heartbeat; after SILENT_S seconds with neither a line nor a heartbeat it
    prints watch's line (one rule: watch.still_watching), once per silence, and goes on."""
    import threading

    from dapo_ops.cli import logs as cli_logs
    from dapo_ops.control.status import rows as sv
    from dapo_ops.control.status import watch as watchloop

    out = io.StringIO()
    w = cli_logs.LineWriter("", threading.Lock(), out, host="h1")
    w.write("step:3 - loss:0.5" + cli_logs.HEARTBEAT)  # a heartbeat inside a half-written line does not split it
    w.write(" - score:0.2\n")
    assert out.getvalue() == "step:3 - loss:0.5 - score:0.2\n"
    t0 = w.heard_at
    assert w.silence(t0 + cli_logs.SILENT_S - 1) is None  # a quiet log with its heartbeat: nothing to say
    line = w.silence(t0 + 25)
    assert line == "h1: unreachable: no answer for 25 s (link down?) (still watching)"
    assert w.silence(t0 + 40) is None  # once per silence
    w.write(cli_logs.HEARTBEAT)  # the link is back (heartbeat only: nothing printed) ...
    assert out.getvalue() == "step:3 - loss:0.5 - score:0.2\n"
    assert w.silence(w.heard_at + cli_logs.SILENT_S) is not None  # ... and the next silence is said again

    # the same rule as watch's line for an unreachable host
    first = sv.build_row("h1", {"run": {"run_id": "r1", "status": "running", "started_at": 1.0}, "tail": "", "now": 2})
    lost = sv.StatusRow(host="h1", state=sv.ERROR, error="h1: unreachable: timed out")
    wl = watchloop.Watch([type("H", (), {"name": "h1"})()])
    wl.see([first])
    assert wl.see([lost]) == [watchloop.still_watching("h1: unreachable: timed out")]
    assert line == watchloop.still_watching("h1: unreachable: no answer for 25 s (link down?)")


def test_the_follow_script_sends_its_heartbeat(tmp_path):
    """The follow command itself (FOLLOW_SCRIPT, run here by sh on a local file, the supervisor pid a live one)
    sends the heartbeat while the log is quiet, and ends when its stdin closes (the SSH client went away)."""
    import os
    import select
    import subprocess

    from dapo_ops.agent import runlogs

    log = tmp_path / "train.log"
    log.write_text("step:1\n")
    script = runlogs.FOLLOW_SCRIPT  # the bundle op `runlogs follow` runs it (issue 46: it was cli/logs.py's)
    p = subprocess.Popen(
        ["sh", "-c", script, str(log), "5", str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        got = b""
        while b"\x00" not in got:  # waits on the event: the heartbeat byte (every HEARTBEAT_S seconds)
            ready, _, _ = select.select([p.stdout], [], [], 60)  # a guard against the old script (no heartbeat)
            assert ready, "no heartbeat in 60 s: %r" % got
            b = os.read(p.stdout.fileno(), 4096)
            assert b, "the follow ended without a heartbeat: %r" % got
            got += b
        assert got.replace(b"\x00", b"") == b"step:1\n"
        p.stdin.close()  # the client went away: the script kills its tail and exits
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
