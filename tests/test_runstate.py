"""runstate: run ids, atomic run.json, the one-run-per-container lock, listing. Pure (no hosts)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.core import runstate

REPO = Path(__file__).resolve().parents[1]


def test_run_id_shape_and_order():
    a = runstate.new_run_id(1764429000.0)
    b = runstate.new_run_id(1764429001.0)
    assert runstate.is_run_id(a) and runstate.is_run_id(b)
    assert a.startswith("20251129-") and a < b
    assert not runstate.is_run_id("20251129-151200")
    assert not runstate.is_run_id(".lock")


def test_atomic_write_and_read_roundtrip(tmp_path):
    rec = {"a": 1, "nan": float("nan"), "inf": float("inf"), "l": [1.5, float("-inf")]}
    runstate.write_json_atomic(tmp_path / "run.json", rec)
    data = json.loads((tmp_path / "run.json").read_text())  # strict JSON: non-finite -> null
    assert data == {"a": 1, "nan": None, "inf": None, "l": [1.5, None]}
    assert not (tmp_path / "run.json.tmp").exists()
    assert runstate.read_run(tmp_path / "missing") is None


def test_atomic_write_on_a_full_disk_keeps_the_last_good_file(tmp_path, monkeypatch):
    """A write that runs out of space (ENOSPC) or is cut short leaves the last good run.json and no
    ``run.json.tmp`` (issue 32: an empty run.json.tmp and a run.json stuck at running)."""
    good = {"status": "running", "step": 3}
    runstate.write_json_atomic(tmp_path / "run.json", good)
    real_write = os.write

    def short_then_full(fd, data):  # what a filling disk does: a short write, then ENOSPC
        if len(data) > 8:
            return real_write(fd, bytes(data[:8]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(OSError) as e:
        runstate.write_json_atomic(tmp_path / "run.json", {"status": "failed", "pad": "x" * 4096})
    monkeypatch.setattr(os, "write", real_write)
    assert e.value.errno == 28
    assert json.loads((tmp_path / "run.json").read_text()) == good
    assert not (tmp_path / "run.json.tmp").exists()

    calls = []

    def short_writes(fd, data):  # a short write that the old single os.write call turned into a torn file
        calls.append(len(data))
        return real_write(fd, bytes(data[:100]))

    monkeypatch.setattr(os, "write", short_writes)
    big = {"status": "failed", "pad": "y" * 1000}
    runstate.write_json_atomic(tmp_path / "run.json", big)
    monkeypatch.setattr(os, "write", real_write)
    assert json.loads((tmp_path / "run.json").read_text()) == big and len(calls) > 1


def test_new_record_has_schema_fields_and_no_env_values():
    spec = {
        "run_id": "20261129-151200-a1b2",
        "host": "h1",
        "container": "verl",
        "mode": "dapo",
        "framework": "fsdp",
        "run_dir": "/verl/dapo_runs/20261129-151200-a1b2",
        "settings": {"steps": 6, "ckpt_dir": "/verl/dapo_runs/x/checkpoints"},
        "features": [{"name": "flash_attn", "source": "default"}],
        "env": {"http_proxy": "http://user:pw@proxy:8080"},
    }
    rec = runstate.new_record(spec, 123, now=10.0)
    for key in (
        "version",
        "run_id",
        "host",
        "container",
        "mode",
        "framework",
        "status",
        "attempt",
        "step",
        "total_steps",
        "step_times",
        "last_progress_at",
        "started_at",
        "updated_at",
        "ended_at",
        "metrics",
        "attempts",
        "features",
        "verdict",
        "decision",
        "pids",
        "swanlab_url",
        "log",
        "ckpt_dir",
        "cluster",
    ):
        assert key in rec, key
    assert rec["status"] == "starting" and rec["total_steps"] == 6 and rec["pids"]["supervisor"] == 123
    assert rec["log"] == "/verl/dapo_runs/20261129-151200-a1b2/train.log"
    assert "pw@proxy" not in json.dumps(rec)
    assert rec["spec"]["env_names"] == ["http_proxy"]


def _fake_supervisor(run_dir):
    """A process whose argv looks like a supervisor for run_dir (what the lock checks)."""
    code = "import time,sys; time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code, "dapo_ops.agent.supervisor", str(run_dir)])


def test_lock_held_by_live_supervisor_refuses_with_run_id(tmp_path):
    runs = tmp_path / "runs"
    p = _fake_supervisor(runs / "20261129-151200-aaaa")
    try:
        runstate.acquire_lock(runs, "20261129-151200-aaaa", p.pid, str(runs / "20261129-151200-aaaa"))
        with pytest.raises(runstate.LockHeld) as ei:
            runstate.acquire_lock(runs, "20261129-151300-bbbb", os.getpid())
        assert ei.value.run_id == "20261129-151200-aaaa"
        assert "20261129-151200-aaaa" in str(ei.value)
        assert runstate.active_run(runs)["run_id"] == "20261129-151200-aaaa"
        # release by a non-holder does nothing
        assert runstate.release_lock(runs, "20261129-151300-bbbb") is False
        assert runstate.release_lock(runs, "20261129-151200-aaaa") is True
        assert runstate.active_run(runs) is None
    finally:
        p.kill()
        p.wait()


def test_lock_of_dead_pid_is_stale(tmp_path):
    runs = tmp_path / "runs"
    p = _fake_supervisor(runs / "old")
    runstate.acquire_lock(runs, "20261129-151200-aaaa", p.pid, str(runs / "old"))
    p.kill()
    p.wait()
    assert runstate.active_run(runs) is None
    runstate.acquire_lock(runs, "20261129-151300-bbbb", os.getpid())  # replaces the stale lock
    assert runstate.read_lock(runs)["run_id"] == "20261129-151300-bbbb"


def test_lock_of_live_non_supervisor_pid_is_stale(tmp_path):
    """PID reuse: the recorded pid lives but is not a supervisor (here: pytest itself)."""
    runs = tmp_path / "runs"
    runstate.acquire_lock(runs, "20261129-151200-aaaa", os.getpid())
    assert runstate.active_run(runs) is None
    runstate.acquire_lock(runs, "20261129-151300-bbbb", os.getpid())
    assert runstate.read_lock(runs)["run_id"] == "20261129-151300-bbbb"


def test_list_runs_newest_first_and_cli(tmp_path):
    runs = tmp_path / "runs"
    for rid, st in (("20261129-100000-aaaa", "failed"), ("20261129-110000-bbbb", "succeeded")):
        (runs / rid).mkdir(parents=True)
        runstate.write_json_atomic(runs / rid / "run.json", {"run_id": rid, "status": st})
    (runs / "20261129-120000-cccc").mkdir()
    (runs / "checkpoints-not-a-run").mkdir()
    got = runstate.list_runs(runs)
    assert [r["run_id"] for r in got] == ["20261129-120000-cccc", "20261129-110000-bbbb", "20261129-100000-aaaa"]
    assert got[0]["status"] == "unknown"
    res = subprocess.run(
        [sys.executable, "-S", "-m", "dapo_ops.core.runstate", "list", str(runs)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
    )
    assert res.returncode == 0, res.stderr
    assert [r["run_id"] for r in json.loads(res.stdout)][1] == "20261129-110000-bbbb"
    res = subprocess.run(
        [sys.executable, "-S", "-m", "dapo_ops.core.runstate", "active", str(runs)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
    )
    assert res.returncode == 0 and json.loads(res.stdout) is None


def test_pid_alive():
    assert runstate.pid_alive(os.getpid())
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not runstate.pid_alive(p.pid)
    assert not runstate.pid_alive(0) and not runstate.pid_alive(None)
