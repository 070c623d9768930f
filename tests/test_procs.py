"""dapo_ops.agent.procs: ending own processes (SIGTERM, grace, SIGKILL), re-listed each round. Pure: local
processes only."""

from __future__ import annotations

import subprocess
import sys

from dapo_ops.agent import procs

IGNORE_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"
)
PLAIN = "import time; print('ready', flush=True); time.sleep(600)"


def _spawn(code: str, **kw) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, **kw)
    assert p.stdout.readline() == b"ready\n"  # its signal disposition is set
    return p


def _live(ps):
    return [p.pid for p in ps if p.poll() is None]


def test_sigterm_is_enough_for_processes_that_obey_it():
    ps = [_spawn(PLAIN), _spawn(PLAIN)]
    try:
        assert procs.terminate(lambda: _live(ps), grace_s=10) == []
        assert _live(ps) == [] and all(p.returncode == -15 for p in ps)
    finally:
        for p in ps:
            p.kill()


def test_what_ignores_sigterm_gets_sigkill_and_a_late_one_is_listed_too():
    first = _spawn(PLAIN)
    ps = [first]
    calls = []

    def listed():
        calls.append(1)
        if len(calls) == 2:  # appears while the first SIGTERM round waits (Ray respawning a worker)
            ps.append(_spawn(IGNORE_TERM))
        return _live(ps)

    try:
        killed = procs.terminate(listed, grace_s=0.5, kill_wait_s=5)
        assert killed == [ps[1].pid]
        assert _live(ps) == [] and first.returncode == -15 and ps[1].returncode == -9
    finally:
        for p in ps:
            p.kill()


def test_stop_process_group_ends_the_group_and_reaps_the_leader():
    leader = _spawn(IGNORE_TERM, start_new_session=True)
    try:
        killed = procs.stop_process_group(leader, leader.pid, None, grace_s=0.3)
        assert killed == [leader.pid] and leader.returncode == -9
        assert procs.own_processes(leader.pid, None) == []
    finally:
        leader.kill()


def test_own_processes_finds_the_environment_marker_outside_the_group():
    marker = b"DAPO_OPS_RUN_ID=test-procs-%d" % id(object())
    env = {"PATH": "/usr/bin:/bin", marker.split(b"=")[0].decode(): marker.split(b"=", 1)[1].decode()}
    p = _spawn(PLAIN, start_new_session=True, env=env)
    try:
        assert procs.own_processes(None, marker) == [p.pid]
        assert procs.own_processes(None, marker + b"0") == []
    finally:
        p.kill()
        p.wait()
