"""Pure tests (local processes, no hosts) of the one launch rule (dapo_ops.agent.occupancy) and of the Ray session leader
(raysession.run_session, the ``raysession lead`` op) that ends what Ray leaves behind when ``ray start`` ends."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from dapo_ops.agent import raysession
from dapo_ops.core import topology as cluster
from dapo_ops.agent import occupancy
from dapo_ops.agent import procs, runfiles
from dapo_ops.core import raynodes

RID_OLD = "20261201-080000-aaaa"
RID = "20261201-090000-bbbb"


def _wait(pred, timeout=15.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def _gone(pid):
    return not procs.pid_alive(pid)


def _pids_with(marker: bytes):
    return raysession.session_members(-1, marker)


def test_session_leader_ends_what_ray_left_in_its_session_and_outside_it_with_the_marker(tmp_path):
    """``ray start`` (here: sh) leaves a process in the session and one that setsid'ed away; both carry the run's
    marker. Once ``ray start`` exits by itself (a worker that lost its head), the leader ends both."""
    marker = "%s=%s" % (cluster.RAY_RUN_ENV, RID)
    pids = tmp_path / "pids"
    child = f"sleep 300 & echo $! >> {pids}; setsid sleep 301 & echo $! >> {pids}; exit 0"
    env = dict(os.environ, **{cluster.RAY_RUN_ENV: RID})
    other = subprocess.Popen(["sleep", "302"])  # no marker, other session: must survive
    lead = subprocess.Popen(
        ["setsid", sys.executable, "-m", "dapo_ops.agent.raysession", "lead", marker, "sh", "-c", child], env=env
    )
    try:
        assert lead.wait(timeout=30) == 0
        left = [int(x) for x in pids.read_text().split()]
        assert len(left) == 2 and _wait(lambda: all(_gone(p) for p in left)), left
        assert other.poll() is None
    finally:
        other.kill()


def _ray_dir(runs, rid):
    d = Path(raynodes.ray_dir(raynodes.cluster_dir(runs, rid)))
    d.mkdir(parents=True)
    return d


def _start_session(ray_dir, name, info, tmp_path):
    """A stand-in Ray node: a session leader whose argv names ray, with the run's marker, pid file + node file."""
    (ray_dir / f"{name}.json").write_text(json.dumps(info))
    pid_file = ray_dir / f"{name}.pid"
    rid = ray_dir.parent.name
    inner = f"echo $$ > {pid_file}; exec {sys.executable} -c 'import time; time.sleep(300)' ray-stand-in"
    script = tmp_path / f"ray-{name}.sh"
    script.write_text(inner)
    proc = subprocess.Popen(["setsid", "sh", str(script)], env=dict(os.environ, **{cluster.RAY_RUN_ENV: rid}))
    assert _wait(lambda: pid_file.exists() and pid_file.read_text().strip())
    return proc, int(pid_file.read_text())


def test_a_worker_of_a_live_cluster_is_busy_and_one_whose_head_is_gone_is_swept(tmp_path):
    runs = tmp_path / "runs"
    gcs = socket.socket()
    gcs.bind(("127.0.0.1", 0))
    gcs.listen(5)
    port = gcs.getsockname()[1]
    live, _ = _start_session(
        _ray_dir(runs, RID), "h2", {"role": "worker", "head": "h1", "head_address": "127.0.0.1", "port": port}, tmp_path
    )
    # a finished run's worker: its head's GCS no longer listens (port of a closed socket)
    dead_sock = socket.socket()
    dead_sock.bind(("127.0.0.1", 0))
    dead_port = dead_sock.getsockname()[1]
    dead_sock.close()
    old, old_sid = _start_session(
        _ray_dir(runs, RID_OLD),
        "h2",
        {"role": "worker", "head": "h1", "head_address": "127.0.0.1", "port": dead_port},
        tmp_path,
    )
    try:
        assert {s["run_id"] for s in runfiles.ray_sessions(runs, "h2")} == {RID, RID_OLD}
        assert runfiles.ray_sessions(runs, "h3") == []
        occ = occupancy.occupancy(str(runs), "h2", sweep=True)
        assert [r["run_id"] for r in occ["ray"]] == [RID] and occ["ray"][0]["head"] == "h1"
        assert [c["run_id"] for c in occ["cleaned"]] == [RID_OLD]
        old.wait(timeout=20)
        assert _gone(old_sid) and live.poll() is None
        assert occ["active"] is None and occ["verl"] == []
    finally:
        live.kill()
        old.kill()
        gcs.close()


def test_verl_of_an_earlier_run_whose_supervisor_is_gone_makes_the_container_busy(tmp_path):
    runs = tmp_path / "runs"
    rd = runs / RID
    rd.mkdir(parents=True)
    (rd / "run.json").write_text(
        json.dumps({"run_id": RID, "status": "running", "pids": {"supervisor": 999999, "verl_pgid": 4242}})
    )
    verl = subprocess.Popen(["sleep", "300"], env=dict(os.environ, DAPO_OPS_RUN_ID=RID))
    try:
        occ = occupancy.occupancy(str(runs), "h1")
        assert occ["verl"] == [{"run_id": RID, "pids": 1, "pgid": 4242, "status": "running", "resume_settings": {}}]
    finally:
        verl.kill()
        verl.wait()
    assert occupancy.occupancy(str(runs), "h1")["verl"] == []


def test_cli_answers_json(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "dapo_ops.agent.occupancy", str(tmp_path), "h1", "--sweep"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"active": None, "verl": [], "ray": [], "cleaned": []}


def test_what_outlived_a_finished_run_is_swept_not_a_reason_to_refuse(tmp_path):
    runs = tmp_path / "runs"
    rd = runs / RID
    rd.mkdir(parents=True)
    (rd / "run.json").write_text(json.dumps({"run_id": RID, "status": "succeeded", "pids": {"verl_pgid": None}}))
    agent = subprocess.Popen(["sleep", "300"], env=dict(os.environ, DAPO_OPS_RUN_ID=RID))  # e.g. a Ray agent
    try:
        assert occupancy.occupancy(str(runs), "h1")["verl"] == []  # without sweep: only reported
        assert agent.poll() is None
        occ = occupancy.occupancy(str(runs), "h1", sweep=True)
        assert occ["verl"] == [] and occ["cleaned"] == [{"run_id": RID, "processes": 1}]
        assert agent.wait(timeout=10) is not None
    finally:
        agent.kill()
