"""core/runstate: run ids, the run.json record, the lock record and the supervisor-argv rule. Pure: no file, no
process (the machine side is tests/test_runfiles.py)."""

import json

from dapo_ops.core import runstate


def test_run_id_shape_and_order():
    a = runstate.new_run_id(1764429000.0)
    b = runstate.new_run_id(1764429001.0)
    assert runstate.is_run_id(a) and runstate.is_run_id(b)
    assert a.startswith("20251129-") and a < b
    assert not runstate.is_run_id("20251129-151200")
    assert not runstate.is_run_id(".lock")


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


def test_strict_json_and_the_lock_record():
    assert runstate.json_safe({1: float("nan"), "l": (1.5, float("-inf"), float("inf"))}) == {
        "1": None,
        "l": [1.5, None, None],
    }
    assert runstate.lock_record("/r/", "20261129-151200-aaaa", "12", None, 5.0) == {
        "run_id": "20261129-151200-aaaa",
        "pid": 12,
        "run_dir": "/r/20261129-151200-aaaa",
        "since": 5.0,
    }


def test_run_ids_newest_first_leave_other_names_out():
    names = ["20261129-100000-aaaa", ".lock", "checkpoints", "20261129-120000-cccc", ".cluster", "20261129-110000-bbbb"]
    assert runstate.run_ids_newest_first(names) == [
        "20261129-120000-cccc",
        "20261129-110000-bbbb",
        "20261129-100000-aaaa",
    ]


def test_a_supervisor_argv_for_its_run_dir_and_not_a_recycled_pid():
    argv = b"python3\0-m\0dapo_ops.agent.supervisor\0/verl/dapo_runs/20261129-151200-aaaa\0"
    assert runstate.is_supervisor_argv(argv)
    assert runstate.is_supervisor_argv(argv, "/verl/dapo_runs/20261129-151200-aaaa/")
    assert runstate.is_supervisor_argv(argv, "/other/mount/20261129-151200-aaaa")  # same run dir, another mount
    assert not runstate.is_supervisor_argv(argv, "/verl/dapo_runs/20261129-151300-bbbb")
    assert not runstate.is_supervisor_argv(b"sleep\x00600\x00")  # a PID recycled after a container restart
