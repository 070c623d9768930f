"""Notifications from the real supervisor process (fake verl, no hosts) to a loopback webhook."""

from __future__ import annotations

import pytest

from test_notify import Hooks  # loopback receiver
from test_supervisor import make_run, run_to_end  # the supervisor's own harness (fake verl)

URL_ENV = "DAPO_NOTIFY_URL_0"


@pytest.fixture
def hooks():
    h = Hooks()
    yield h
    h.close()


def _notify(**kw):
    return {"webhooks": [{"kind": "generic", "url_env": URL_ENV}], "timeout_s": 5, **kw}


def _events(hooks):
    return [p["body"]["event"] for p in hooks.posts]


def test_forced_oom_escalation_then_one_failure_message_with_the_verdict(tmp_path, hooks):
    run_dir = make_run(
        tmp_path,
        {"step_time": 0.03, "oom_at": 3, "oom_always": True},
        max_oom_retries=2,
        extra={"notify": _notify(on_escalation=True)},
        secret={URL_ENV: hooks.base + "/hook"},
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "failed"
    assert _events(hooks) == ["escalation", "escalation", "failure"], hooks.posts
    esc, fail = hooks.posts[0]["body"], hooks.posts[-1]["body"]
    assert esc["verdict"] == "oom-device" and "OOM escalation" in esc["text"]
    assert fail["verdict"] == "oom-device" and fail["run_id"] == rec["run_id"] and fail["host"] == "local"
    assert fail["step"] == rec["step"] and fail["log"] == rec["log"] and "run FAILED" in fail["text"]
    # the webhook URL (a secret) is neither on disk nor in the record
    assert hooks.base not in (run_dir / "run.json").read_text()
    assert not (run_dir / "secret.env").exists()


def test_escalations_silent_by_default_and_success_silent_unless_enabled(tmp_path, hooks):
    run_dir = make_run(
        tmp_path, {"step_time": 0.03, "oom_at": 3}, extra={"notify": _notify()}, secret={URL_ENV: hooks.base + "/hook"}
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "succeeded" and len(rec["attempts"]) == 2
    assert hooks.posts == []

    run_dir2 = make_run(
        tmp_path / "b",
        {"step_time": 0.03, "oom_at": None},
        extra={"notify": _notify(on_success=True)},
        secret={URL_ENV: hooks.base + "/hook"},
    )
    rec2 = run_to_end(run_dir2)
    assert rec2["status"] == "succeeded"
    assert _events(hooks) == ["success"]
    assert "run succeeded" in hooks.posts[0]["body"]["text"]


def test_final_failure_message_says_what_ended_the_run_and_carries_the_suggestions(tmp_path, hooks):
    run_dir = make_run(
        tmp_path,
        {"step_time": 0.03, "oom_at": 3, "oom_always": True},
        max_oom_retries=2,
        extra={"notify": _notify()},
        secret={URL_ENV: hooks.base + "/hook"},
    )
    rec = run_to_end(run_dir)
    assert rec["status"] == "failed"
    ended = rec["decision"]["ended"]
    assert (
        ended.startswith("failed: device OOM")
        and "after 2 OOM retries" in ended
        and ended.endswith("at step %s/%s" % (rec["step"], rec["total_steps"]))
    )
    body = hooks.posts[-1]["body"]
    assert body["event"] == "failure" and body["action"] == ended
    assert body["suggestions"] == rec["decision"]["suggestions"] and body["suggestions"]
    assert "action: " + ended in body["text"] and "suggestions:\n- " in body["text"]
    assert "retry" not in body["text"].split("suggestions:")[0].lower(), body["text"]
