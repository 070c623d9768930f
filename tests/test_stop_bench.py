"""``stop`` on the sandbox hosts: a live supervisor gets SIGTERM and stops its verl group itself; a dead
supervisor's verl process group is killed by stop; only the run's own PIDs; checkpoints and logs kept;
idempotent; ``--run`` across hosts."""

from __future__ import annotations

import time

import pytest

from dapo_ops.agent import runfiles
from test_status_bench import cli, container_pids, make_run, start_fake_supervisor, status_json, steps_log

pytestmark = pytest.mark.bench


def wait_gone(sandbox, host, pids, timeout=20):
    deadline = time.time() + timeout
    while set(pids) & set(container_pids(sandbox, host)):
        assert time.time() < deadline, "processes %s still alive" % pids
        time.sleep(0.3)


def test_stop_live_supervisor_then_idempotent(sandbox):
    sandbox.reset("h1")
    rid, rd, crd = make_run(sandbox, "h1", step=3, log=steps_log(1, 1, 3))
    pids = start_fake_supervisor(sandbox, "h1", crd, rd)
    proc = cli(sandbox, "-H", "h1", "stop", check=0)
    assert proc.stdout.strip() == (
        "h1: run %s running -> stopped (SIGTERM supervisor pid %d); checkpoints and "
        "logs kept" % (rid, pids["supervisor"])
    )
    wait_gone(sandbox, "h1", [pids["supervisor"], pids["verl_pgid"]])
    rec = runfiles.read_run(rd)
    assert rec["status"] == "stopped"
    assert (rd / "checkpoints" / "global_step_2").is_dir() and (rd / "train.log").stat().st_size > 0
    again = cli(sandbox, "-H", "h1", "stop", check=0)
    assert again.stdout.strip() == "h1: run %s already stopped; nothing to stop" % rid
    _, rows = status_json(sandbox, "h1")
    assert rows[0]["state"] == "stopped" and rows[0]["eta_s"] is None and not rows[0]["stale"]


def test_stop_dead_supervisor_kills_only_the_recorded_group(sandbox):
    sandbox.reset("h1")
    # an unrelated process in the container (not in the run's group) and the run's verl group leader
    other = int(
        sandbox.exec("h1", "nohup setsid sleep 600 >/dev/null 2>&1 </dev/null & echo $!", check=True).stdout.strip()
    )
    verl = int(
        sandbox.exec(
            "h1", "nohup setsid sh -c 'sleep 600 & sleep 600' >/dev/null 2>&1 </dev/null & echo $!", check=True
        ).stdout.strip()
    )
    rid, rd, _ = make_run(sandbox, "h1", step=5, verl_pgid=verl, log=steps_log(1, 1, 5))
    _, rows = status_json(sandbox, "h1")
    assert rows[0]["state"] == "supervisor-dead" and rows[0]["verl_alive"] is True
    assert "still runs (pgid %d)" % verl in rows[0]["hint"]
    proc = cli(sandbox, "-H", "h1", "stop", check=0)
    assert "SIGTERM verl process group %d (3 processes)" % verl in proc.stdout
    assert "marked run.json stopped" in proc.stdout
    wait_gone(sandbox, "h1", [verl])
    assert other in container_pids(sandbox, "h1")
    rec = runfiles.read_run(rd)
    assert rec["status"] == "stopped" and rec["stop"]["supervisor"] == "dead"
    assert (rd / "checkpoints" / "global_step_2").is_dir()
    assert "already stopped" in cli(sandbox, "-H", "h1", "stop", check=0).stdout
    sandbox.exec("h1", "kill %d" % other)


def test_stop_run_id_across_hosts_and_nothing_to_stop(sandbox):
    for h in ("h1", "h2"):
        sandbox.reset(h)
    keep, keep_rd, keep_crd = make_run(sandbox, "h1", step=1, log=steps_log(1, 1, 1))
    keep_pids = start_fake_supervisor(sandbox, "h1", keep_crd, keep_rd)
    rid, rd, _ = make_run(sandbox, "h2", step=2)
    proc = cli(sandbox, "-H", "h1,h2", "stop", "--run", rid, check=0)
    # h2's run has a run.json that says running and no supervisor process: stop says what it was (supervisor-dead)
    assert proc.stdout.strip().startswith("h2: run %s supervisor-dead -> stopped" % rid)
    assert runfiles.read_run(rd)["status"] == "stopped"
    assert runfiles.read_run(keep_rd)["status"] == "running"
    assert keep_pids["supervisor"] in container_pids(sandbox, "h1")
    missing = cli(sandbox, "-H", "h1,h2", "stop", "--run", "20200101-000000-abcd")
    assert missing.returncode == 1 and "no host has run 20200101-000000-abcd" in missing.stderr
    sandbox.reset("h2")
    none = cli(sandbox, "-H", "h2", "stop", check=0)
    assert "no runs in /verl/dapo_runs" in none.stderr
    cli(sandbox, "-H", "h1", "stop", check=0)
