"""agent/runfiles: atomic JSON writes, run.json / spec.json reads, the one-run-per-container lock, the run list and
the ``runfiles show`` op, on a local runs dir (no hosts); process liveness (agent/procs.pid_alive)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dapo_ops.agent import procs, runfiles

REPO = Path(__file__).resolve().parents[1]


def test_atomic_write_and_read_roundtrip(tmp_path):
    rec = {"a": 1, "nan": float("nan"), "inf": float("inf"), "l": [1.5, float("-inf")]}
    runfiles.write_json_atomic(tmp_path / "run.json", rec)
    data = json.loads((tmp_path / "run.json").read_text())  # strict JSON: non-finite -> null
    assert data == {"a": 1, "nan": None, "inf": None, "l": [1.5, None]}
    assert not (tmp_path / "run.json.tmp").exists()
    assert runfiles.read_run(tmp_path / "missing") is None


def test_atomic_write_on_a_full_disk_keeps_the_last_good_file(tmp_path, monkeypatch):
    """A write that runs out of space (ENOSPC) or is cut short leaves the last good run.json and no
    ``run.json.tmp`` (issue 32: an empty run.json.tmp and a run.json stuck at running)."""
    good = {"status": "running", "step": 3}
    runfiles.write_json_atomic(tmp_path / "run.json", good)
    real_write = os.write

    def short_then_full(fd, data):  # what a filling disk does: a short write, then ENOSPC
        if len(data) > 8:
            return real_write(fd, bytes(data[:8]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(OSError) as e:
        runfiles.write_json_atomic(tmp_path / "run.json", {"status": "failed", "pad": "x" * 4096})
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
    runfiles.write_json_atomic(tmp_path / "run.json", big)
    monkeypatch.setattr(os, "write", real_write)
    assert json.loads((tmp_path / "run.json").read_text()) == big and len(calls) > 1


def _fake_supervisor(run_dir):
    """A process whose argv looks like a supervisor for run_dir (what the lock checks)."""
    code = "import time,sys; time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code, "dapo_ops.agent.supervisor", str(run_dir)])


def test_lock_held_by_live_supervisor_refuses_with_run_id(tmp_path):
    runs = tmp_path / "runs"
    p = _fake_supervisor(runs / "20261129-151200-aaaa")
    try:
        runfiles.acquire_lock(runs, "20261129-151200-aaaa", p.pid, str(runs / "20261129-151200-aaaa"))
        with pytest.raises(runfiles.LockHeld) as ei:
            runfiles.acquire_lock(runs, "20261129-151300-bbbb", os.getpid())
        assert ei.value.run_id == "20261129-151200-aaaa"
        assert "20261129-151200-aaaa" in str(ei.value)
        assert runfiles.active_run(runs)["run_id"] == "20261129-151200-aaaa"
        # release by a non-holder does nothing
        assert runfiles.release_lock(runs, "20261129-151300-bbbb") is False
        assert runfiles.release_lock(runs, "20261129-151200-aaaa") is True
        assert runfiles.active_run(runs) is None
    finally:
        p.kill()
        p.wait()


def test_lock_of_dead_pid_is_stale(tmp_path):
    runs = tmp_path / "runs"
    p = _fake_supervisor(runs / "old")
    runfiles.acquire_lock(runs, "20261129-151200-aaaa", p.pid, str(runs / "old"))
    p.kill()
    p.wait()
    assert runfiles.active_run(runs) is None
    runfiles.acquire_lock(runs, "20261129-151300-bbbb", os.getpid())  # replaces the stale lock
    assert runfiles.read_lock(runs)["run_id"] == "20261129-151300-bbbb"


def test_lock_of_live_non_supervisor_pid_is_stale(tmp_path):
    """PID reuse: the recorded pid lives but is not a supervisor (here: pytest itself)."""
    runs = tmp_path / "runs"
    runfiles.acquire_lock(runs, "20261129-151200-aaaa", os.getpid())
    assert runfiles.active_run(runs) is None
    runfiles.acquire_lock(runs, "20261129-151300-bbbb", os.getpid())
    assert runfiles.read_lock(runs)["run_id"] == "20261129-151300-bbbb"


def test_list_runs_newest_first(tmp_path):
    runs = tmp_path / "runs"
    for rid, st in (("20261129-100000-aaaa", "failed"), ("20261129-110000-bbbb", "succeeded")):
        (runs / rid).mkdir(parents=True)
        runfiles.write_json_atomic(runs / rid / "run.json", {"run_id": rid, "status": st})
    (runs / "20261129-120000-cccc").mkdir()
    (runs / "checkpoints-not-a-run").mkdir()
    got = runfiles.list_runs(runs)
    assert [r["run_id"] for r in got] == ["20261129-120000-cccc", "20261129-110000-bbbb", "20261129-100000-aaaa"]
    assert got[0] == {"run_id": "20261129-120000-cccc", "status": "unknown", "run_dir": str(runs / got[0]["run_id"])}
    assert runfiles.list_runs(tmp_path / "none") == []


def _show(run_dir):
    """``python3 -S -m dapo_ops.agent.runfiles show <run_dir>`` as the launch runs it (the bundle's op)."""
    return subprocess.run(
        [sys.executable, "-S", "-m", "dapo_ops.agent.runfiles", "show", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
    )


def test_the_show_op_prints_run_json_or_one_line(tmp_path):
    rd = tmp_path / "20261129-110000-bbbb"
    rd.mkdir()
    res = _show(rd)
    assert (res.returncode, res.stdout, res.stderr) == (1, "", "no run.json in %s\n" % rd)
    runfiles.write_run(rd, {"run_id": rd.name, "status": "running", "step": float("nan")})
    res = _show(rd)
    assert res.returncode == 0, res.stderr
    rec = json.loads(res.stdout)
    assert rec["run_id"] == rd.name and rec["status"] == "running" and rec["step"] is None and rec["updated_at"]
    (rd / "run.json").write_text("{torn")
    res = _show(rd)
    assert res.returncode == 1 and res.stdout == "" and len(res.stderr.splitlines()) == 1, res.stderr
    bad = subprocess.run(
        [sys.executable, "-S", "-m", "dapo_ops.agent.runfiles", "list", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"]},
    )
    assert bad.returncode == 2 and bad.stderr.startswith("usage: python3 -m dapo_ops.agent.runfiles show")


def test_pid_alive():
    assert procs.pid_alive(os.getpid())
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not procs.pid_alive(p.pid)
    assert not procs.pid_alive(0) and not procs.pid_alive(None)
