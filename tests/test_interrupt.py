"""Ctrl-C (KeyboardInterrupt) in a task: ONE stderr line and exit 130, never a traceback nor invoke's silent exit 1.

Each test runs the real ``inv`` program (invoke's ``program.run()`` over tasks.py, as ``python -m invoke`` does)
in a subprocess whose driver first makes one call inside the task raise KeyboardInterrupt, or raise SIGINT on the
process itself, at a known point (see :data:`DRIVER`); no host is contacted. The real Ctrl-C of a launch waiting
on a sandbox host is in tests/test_launch_bench.py (``test_ctrl_c_while_launch_waits``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from config_helpers import no_config

from dapo_ops.control.launch import service as svc
from dapo_ops.control.launch import refusals as launch_errors
from dapo_ops.core import defaults

REPO = Path(__file__).resolve().parents[1]

#: argv[1] = what raises: ``inventory`` (inventory.load raises KeyboardInterrupt: before any host is contacted),
#: ``start`` (the per-host launch records run RUN on its host as launch_one's start_run does, then SIGINTs its own
#: process from the fan-out thread, so the main thread is interrupted while it waits, as a real Ctrl-C; any other
#: host tries its start 2 s later),
#: ``loading`` (the task module's import raises). The rest is the ``inv`` command line.
DRIVER = r"""
import os, signal, sys, time
what, argv = sys.argv[1], sys.argv[2:]
if what == "inventory":
    from dapo_ops.control.inventory import hosts_file as inventory
    def load(*a, **k):
        raise KeyboardInterrupt
    inventory.load = load
elif what == "start":
    from dapo_ops.control.launch import service as launch
    def launch_one(target, req):
        if target.host.name != "h1":  # a slower host: reaches its start 2 s after h1's Ctrl-C
            time.sleep(2)
            if req.progress.begin(target.host.name, "20261201-120000-ffff"):
                print("h2 started after the Ctrl-C", file=sys.stderr)
            time.sleep(30)
        assert req.progress.begin(target.host.name, "20261201-120000-abcd")
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
    launch.launch_one = launch_one
elif what == "loading":
    class Interrupt:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "dapo_ops.cli.status":
                raise KeyboardInterrupt
    sys.meta_path.insert(0, Interrupt)
from invoke.main import program
program.run(["inv", "-r", REPO] + argv)
""".replace("REPO", repr(str(REPO)))

INVENTORY = """[defaults]
user = "root"
container = "verl"
accelerator = "npu"
devices = 8
[hosts.h1]
address = "192.0.2.1"
[hosts.h2]
address = "192.0.2.2"
"""
INPUTS = ["--model", "/m", "--train-file", "/t.parquet", "--val-file", "/v.parquet"]


def drive(tmp_path, what: str, *argv: str) -> subprocess.CompletedProcess:
    (tmp_path / "hosts.toml").write_text(INVENTORY)
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("DAPO_OPS_", "SWANLAB_"))}
    env.update(
        DAPO_OPS_INVENTORY=str(tmp_path / "hosts.toml"),
        DAPO_OPS_CONFIG=no_config(tmp_path),
        SWANLAB_MODE="disabled",
    )
    return subprocess.run(
        [sys.executable, "-c", DRIVER, what, *argv], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )


def one_line(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 130, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_status_interrupted_is_one_line_exit_130(tmp_path):
    line = one_line(drive(tmp_path, "inventory", "status", "-H", "h1"))
    assert line == "interrupted: status stopped before it finished (Ctrl-C)"


def test_every_task_gets_the_line(tmp_path):
    # one code path for all tasks (dapo_ops/cli/__init__.py _one_line_interrupts): a fan-out task of another module
    line = one_line(drive(tmp_path, "inventory", "preflight", "-H", "h1"))
    assert line.startswith("interrupted: preflight stopped")


def test_launch_interrupted_before_a_start_says_nothing_started(tmp_path):
    line = one_line(drive(tmp_path, "inventory", "launch", "-H", "h1", *INPUTS))
    assert line == "interrupted: nothing was started (Ctrl-C before any run's supervisor was started)"


def test_launch_interrupted_after_a_start_names_run_host_and_undo(tmp_path):
    res = drive(tmp_path, "start", "launch", "-H", "h1", *INPUTS, "--skip-preflight")
    line = one_line(res)
    assert line == (
        "interrupted: run 20261201-120000-abcd may have started on h1 (its supervisor is detached): "
        "`inv status -H h1`, `inv stop -H h1`"
    )
    assert res.stdout == ""


def test_launch_interrupt_names_only_the_hosts_whose_start_began(tmp_path):
    # h1 begins its start and SIGINTs; h2 had not reached its start when the line was decided: not named
    line = one_line(drive(tmp_path, "start", "launch", "-H", "h1,h2", "--independent", *INPUTS, "--skip-preflight"))
    assert line == (
        "interrupted: run 20261201-120000-abcd may have started on h1 (its supervisor is detached): "
        "`inv status -H h1`, `inv stop -H h1`"
    )


def test_interrupt_while_loading_the_tasks(tmp_path):
    line = one_line(drive(tmp_path, "loading", "status", "-H", "h1"))
    assert line == "interrupted while loading the tasks (Ctrl-C); nothing was run"


def test_progress_after_cancel_refuses_every_start():
    p = svc.LaunchProgress()
    assert p.begin("h1", "20261201-120000-abcd")
    assert p.cancel() == {"h1": "20261201-120000-abcd"}
    assert not p.begin("h2", "20261201-120000-ffff")
    assert p.cancel() == {"h1": "20261201-120000-abcd"}


def test_start_run_after_cancel_writes_nothing():
    # the target has nothing but its host: any write, start or read on it would raise AttributeError
    p = svc.LaunchProgress()
    p.cancel()
    target = SimpleNamespace(host=SimpleNamespace(name="h2"))
    spec = {"run_id": "20261201-120000-ffff", "python": "python3"}
    plan = SimpleNamespace(spec=spec, run_spec=defaults.RunSpec.read(spec), run_dir="/r/x")  # as a Plan holds both
    with pytest.raises(launch_errors.LaunchRefused) as e:
        svc.start_run(target, plan, {}, link_wait=0, progress=p)
    assert e.value.kind == "interrupted"
    assert str(e.value) == "h2: launch interrupted before run 20261201-120000-ffff was started; nothing was started"
