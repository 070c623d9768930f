"""bench.sh and `inv sandbox.*` argument handling: one-line errors, no bench needed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import repo_module
from invoke import Context
from invoke.exceptions import Exit

REPO = Path(__file__).resolve().parent.parent
BENCH_SH = REPO / "sandbox" / "bench.sh"


def repo_tasks():
    """The repository's tasks.py, where the sandbox tasks live (outside the installed package)."""
    return repo_module("tasks.py")


def bench(*args, env=None, user=None):
    cmd = ["bash", str(BENCH_SH), *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to nobody")
def test_without_root_one_line_and_nonzero():
    p = bench("up", "3", user=65534)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "needs root" in p.stderr and p.stdout == ""


@pytest.mark.parametrize("bid", ["x", "156", "-1"])
def test_invalid_bench_id(bid):
    p = bench("status", env={"DAPO_BENCH_ID": bid})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "DAPO_BENCH_ID" in p.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="bench.sh checks root first")
def test_usage_and_bad_host_count():
    p = bench("frobnicate")
    assert p.returncode == 2 and "usage:" in p.stderr
    p = bench("up", "zero", env={"DAPO_BENCH_ID": "154"})
    assert p.returncode == 2 and "host count" in p.stderr
    assert not Path("/var/tmp/dapo-bench-154").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="bench.sh checks root first")
def test_status_of_a_bench_that_is_not_up():
    p = bench("status", env={"DAPO_BENCH_ID": "153"})
    assert p.returncode == 3 and "not up" in p.stdout


def test_sandbox_tasks_have_long_flags_only():
    ns = repo_tasks().namespace(["sandbox.up"])
    up = ns.collections["sandbox"]["up"]
    args = {a.name: a for a in up.get_arguments()}
    assert set(args) == {"hosts", "bench_id"}
    assert args["hosts"].kind is int and args["hosts"].default == 3
    assert all(len(n) > 1 for a in args.values() for n in a.names)  # no -h shadowing --help
    assert set(ns.collections["sandbox"].task_names) >= {"up", "down", "status"}


@pytest.mark.skipif(os.geteuid() != 0, reason="bench.sh checks root first")
def test_status_task_exit_code_when_not_up():
    sb = repo_tasks()

    base = int(os.environ.get("DAPO_BENCH_ID", "1"))  # this session's own benches: base .. base + workers
    idle = next(i for i in (152, 60, 30) if not base <= i <= base + 8)  # bench.sh takes ids 0..155
    with pytest.raises(Exit) as ei:
        sb.status(Context(), bench_id=idle)
    assert ei.value.code == 3
