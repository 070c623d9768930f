"""fanout.py without hosts: parallelism, per-host error capture, deadline, one table row per host, exit code."""

from __future__ import annotations

import io
import threading

from dapo_ops.core import policy
from dapo_ops.control.remote import fanout
from dapo_ops.control.remote.fanout import Row
from dapo_ops.control.inventory.model import Host
from dapo_ops.control.remote.errors import RemoteError

HOSTS = [Host(name=f"h{i}", address=f"192.0.2.{10 + i}") for i in range(1, 4)]


def test_hosts_run_concurrently():
    barrier = threading.Barrier(3, timeout=30)  # only passes if all three functions are running at once

    def fn(t):
        barrier.wait()
        return {"x": t.host.name}

    results = fanout.run(HOSTS, fn, timeout=60)
    assert [r.row.cells["x"] for r in results] == ["h1", "h2", "h3"]
    assert fanout.exit_code(results) == 0


def test_failures_are_captured_per_host_and_others_still_report():
    def fn(t):
        if t.host.name == "h2":
            raise RemoteError("refused", "h2", "connection to root@192.0.2.12:22 refused")
        if t.host.name == "h3":
            raise KeyError("bug")
        return Row({"x": "fine"})

    results = fanout.run(HOSTS, fn, timeout=60)
    assert [(r.host.name, r.ok, r.row.kind) for r in results] == [
        ("h1", True, ""),
        ("h2", False, "refused"),
        ("h3", False, "error"),
    ]
    assert fanout.exit_code(results) == 1
    assert fanout.summary(results) == "2 of 3 hosts failed: h2 (refused), h3 (error)"


def test_overall_deadline_reports_the_slow_host_and_does_not_wait_for_it():
    release = threading.Event()

    def fn(t):
        if t.host.name == "h3":
            release.wait(60)
        return {}

    try:
        results = fanout.run(HOSTS, fn, timeout=0.5)
    finally:
        release.set()
    assert [r.ok for r in results] == [True, True, False]
    assert results[2].row.kind == "timeout" and "0.5 s" in results[2].row.message


def test_table_has_exactly_one_line_per_host_even_with_multiline_messages():
    def fn(t):
        if t.host.name == "h2":
            return Row(
                {"python": "3.11.7\n"},
                ok=False,
                kind="verl-missing",
                message="Traceback (most recent call last):\n  File x\nModuleNotFoundError: No module " + "x" * 150,
            )
        return {"python": "3.11.7"}

    results = fanout.run(HOSTS, fn, timeout=60)
    buf = io.StringIO()
    fanout.render(results, ["python"], title="hosts", file=buf)
    lines = buf.getvalue().splitlines()
    for h in ("h1", "h2", "h3"):
        rows = [ln for ln in lines if f" {h} " in ln]
        assert len(rows) == 1, buf.getvalue()
    (h2,) = [ln for ln in lines if " h2 " in ln]
    assert "FAIL verl-missing" in h2 and "ModuleNotFoundError" in h2


def test_empty_host_list():
    assert fanout.run([], lambda t: {}, timeout=1) == []


def test_a_hung_host_does_not_keep_the_process_alive_after_the_deadline():
    import subprocess
    import sys

    code = (
        "import time; from dapo_ops.control.remote import fanout; from dapo_ops.control.inventory.hosts_file import Host; "
        "r = fanout.run([Host(name='h1', address='192.0.2.1')], lambda t: time.sleep(3600), timeout=0.2); "
        "print(r[0].row.kind)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "timeout", out.stderr


def test_a_refusal_line_reaches_the_user_whole(monkeypatch):
    """A new user's trial: the launch's SwanLab refusal (cloud mode, no DNS in the container) lost the end of its fix
    ("... or use --swanlab-mode offline (swanlab sync later) (--skip-pref...") to fanout's 300-character cut."""
    from types import SimpleNamespace

    from dapo_ops.control.launch import service as svc
    from dapo_ops.control.launch import refusals as launch_errors
    from dapo_ops.control.preflight import checks as preflight_checks
    from dapo_ops.control.preflight.network import tracker_check

    dns = "cannot resolve api.swanlab.cn: Temporary failure in name resolution"
    probe = {"http": {"swanlab": {"url": "https://api.swanlab.cn", "reachable": False, "kind": "dns", "error": dns}}}
    monkeypatch.setattr(svc, "refuse_if_busy", lambda *a, **k: None)
    monkeypatch.setattr(preflight_checks, "quick", lambda *a, **k: [tracker_check(probe)])

    def fn(t):  # what cli/launch.py's per-host function does with a refusal
        t = SimpleNamespace(host=t.host, container_state=lambda: SimpleNamespace(running=True), container="verl")
        try:
            svc.quick_checks(t, SimpleNamespace(spec={"python": "python3"}), False)
        except launch_errors.LaunchRefused as e:
            return Row(ok=False, kind=e.kind, message=str(e))

    (r,) = fanout.run(HOSTS[:1], fn, timeout=60)
    assert len(r.row.message) > 300 and "\n" not in r.row.message
    assert r.row.message.startswith("h1: preflight swanlab failed: SwanLab host https://api.swanlab.cn not reachable")
    assert dns in r.row.message
    assert r.row.message.endswith("or use " + policy.SWANLAB_OFFLINE_WORDS + " (--skip-preflight to launch anyway)"), (
        r.row.message
    )
    # a bug's exception text is still bounded (it can be anything)
    (b,) = fanout.run(HOSTS[:1], lambda t: (_ for _ in ()).throw(ValueError("x" * 1000)), timeout=60)
    assert b.row.kind == "error" and len(b.row.message) == fanout.BUG_TEXT_LIMIT


def test_launch_json_of_a_run_that_failed_at_once_names_its_run_id(capsys):
    """A second new user's trial: `inv launch --override actor_rollout_ref.actor.loss_agg_mode=bar --json` printed
    ``"run_id": null`` for a run that existed (its error line named it; its logs and the suggested `--resume` need
    it); a host that started nothing keeps null."""
    import json

    import pytest
    from invoke.exceptions import Exit

    from dapo_ops.cli.launch import _print_results
    from dapo_ops.control.remote.fanout import HostResult, Row

    rid = "20261207-234746-6bbc"
    failed = Row(ok=False, kind="failed", message=f"run {rid} failed at once: config-error: ...", data={"run_id": rid})
    refused = Row(ok=False, kind="refused", message="h2: refused")
    with pytest.raises(Exit) as e:
        _print_results([HostResult(HOSTS[0], failed, 1.0), HostResult(HOSTS[1], refused, 1.0)], [], json_=True)
    assert e.value.code == 1
    out = json.loads(capsys.readouterr().out)
    assert [(o["host"], o["run_id"], o["state"]) for o in out] == [("h1", rid, "failed"), ("h2", None, "failed")]
