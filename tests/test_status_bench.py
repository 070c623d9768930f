"""``status`` / ``watch`` on the sandbox hosts: real SSH + docker exec, run dirs written the way the supervisor
writes them (runstate functions, on the host side of the /verl/dapo_runs bind mount), processes inside the
container standing in for the supervisor and the verl process group.

Shared helpers for the logs/stop tests live here too (imported by tests/test_logs_bench.py, test_stop_bench.py).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from dapo_ops.agent import runfiles
from dapo_ops.core import runstate
from dapo_ops.control.remote import bundle as remote_bundle
from dapo_ops.control.remote import sshmux

pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parent.parent
DAPO_OPS = str(REPO / ".venv" / "bin" / "dapo-ops")
RUNS_IN_CONTAINER = "/verl/dapo_runs"

# A stand-in supervisor inside the container (python3 of the image, no dapo_ops): argv names
# dapo_ops.agent.supervisor and the run dir (what the probe checks before signalling), it starts a verl stand-in
# (`sleep`) in its own process group, records both PIDs in run.json, and on SIGTERM stops that group and marks
# the run stopped, as dapo_ops/agent/supervisor/ does.
FAKE_SUPERVISOR = r"""
import json, os, signal, subprocess, sys, time
rd = sys.argv[2]
def update(**kw):
    with open(rd + "/run.json") as fh:
        rec = json.load(fh)
    rec.update(kw)
    rec["updated_at"] = time.time()
    with open(rd + "/run.json.tmp", "w") as fh:
        json.dump(rec, fh)
    os.replace(rd + "/run.json.tmp", rd + "/run.json")
verl = subprocess.Popen(["sleep", "600"], start_new_session=True)
def term(*a):
    os.killpg(verl.pid, signal.SIGTERM)
    verl.wait()
    update(status="stopped", ended_at=time.time(), pids={"supervisor": os.getpid(), "verl_pgid": None})
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
update(pids={"supervisor": os.getpid(), "verl_pgid": verl.pid})
open(rd + "/sup.ready", "w").close()
while True:
    time.sleep(0.2)
"""


def cli(sandbox, *args, timeout=180, check=None):
    """Run ``dapo-ops <args>`` against the sandbox inventory; returns the CompletedProcess (text)."""
    env = dict(os.environ, DAPO_OPS_INVENTORY=str(sandbox.inventory), COLUMNS="250")
    proc = subprocess.run([DAPO_OPS, *args], capture_output=True, text=True, timeout=timeout, env=env)
    if check is not None:
        assert proc.returncode == check, (proc.returncode, proc.stdout, proc.stderr)
    return proc


class Follower:
    """``dapo-ops <args>`` in a subprocess (``logs -f``, ``watch``); stdout lines collected by a reader thread,
    waited on with :meth:`wait_for` (an event with a deadline, never a fixed sleep)."""

    def __init__(self, sandbox, *args):
        env = dict(os.environ, DAPO_OPS_INVENTORY=str(sandbox.inventory))
        self.proc = subprocess.Popen(
            [DAPO_OPS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self.lines: list[str] = []
        self.q: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for ln in self.proc.stdout:
            self.q.put(ln.rstrip("\n"))

    def wait_for(self, pred, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                ln = self.q.get(timeout=0.5)
            except queue.Empty:
                continue
            self.lines.append(ln)
            if pred(ln):
                return ln
        raise AssertionError("not seen within %ss; got %r" % (timeout, self.lines[-10:]))

    def interrupt(self):
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=30)
        while not self.q.empty():
            self.lines.append(self.q.get())
        return rc


def gone_pid(sandbox, host) -> int:
    """A PID that existed in the container and is gone now (a dead supervisor)."""
    return int(sandbox.exec(host, "echo $$", check=True).stdout.strip())


def make_run(
    sandbox,
    host,
    *,
    status="running",
    attempt=1,
    step=None,
    total=10,
    sup_pid=None,
    verl_pgid=None,
    log="",
    attempts_logs=None,
    features=None,
    started_at=None,
    **fields,
):
    """Create a run dir as the supervisor would (runstate.new_record + write_run) on ``host``, with the bundle the
    launch installed for it (remote_bundle.local_install into the runs dir's bind mount).

    :returns: ``(run_id, host_side_run_dir: Path, container_run_dir: str)``.
    """
    now = time.time() if started_at is None else started_at
    rid = runstate.new_run_id(now)
    host_rd = sandbox.runs_dir(host) / rid
    host_rd.mkdir(parents=True)
    remote_bundle.local_install(sandbox.runs_dir(host))
    (host_rd / "checkpoints" / "global_step_2").mkdir(parents=True)
    crd = runstate.run_dir_for(RUNS_IN_CONTAINER, rid)
    spec = {
        "run_id": rid,
        "run_dir": crd,
        "host": host,
        "container": "verl",
        "mode": "dapo",
        "settings": {"steps": total, "ckpt_dir": crd + "/checkpoints"},
        "features": features
        or [{"name": "flash_attn", "source": "default"}, {"name": "dynamic_batch", "source": "default"}],
    }
    rec = runstate.new_record(spec, sup_pid or gone_pid(sandbox, host), now=now - 5)
    rec.update(status=status, attempt=attempt, step=step, **fields)
    rec["pids"]["verl_pgid"] = verl_pgid
    runfiles.write_run(host_rd, rec)
    (host_rd / "train.log").write_text(log)
    for k, text in (attempts_logs or {}).items():
        (host_rd / ("attempt-%d.log" % k)).write_text(text)
    return rid, host_rd, crd


def start_fake_supervisor(sandbox, host, crd, host_rd):
    """Start FAKE_SUPERVISOR detached in the container for run dir ``crd``; waits until it recorded its PIDs."""
    import shlex

    sandbox.exec(
        host,
        "nohup python3 -c %s dapo_ops.agent.supervisor %s >/dev/null 2>&1 </dev/null &"
        % (shlex.quote(FAKE_SUPERVISOR), shlex.quote(crd)),
        check=True,
    )
    deadline = time.time() + 30
    while not (host_rd / "sup.ready").exists():
        assert time.time() < deadline, "fake supervisor did not start"
        time.sleep(0.1)
    return runfiles.read_run(host_rd)["pids"]


def container_pids(sandbox, host) -> dict[int, str]:
    """{pid: comm} of every process in the container."""
    out = sandbox.exec(
        host, "for p in /proc/[0-9]*; do echo ${p#/proc/} $(cat $p/comm 2>/dev/null); done", check=True
    ).stdout
    return {int(a): b for a, _, b in (ln.partition(" ") for ln in out.splitlines() if ln.strip())}


def steps_log(k, first, last, features="flash_attn,dynamic_batch", start=True):
    lines = ["===== dapo-ops attempt %d start 2026-11-29T15:00:00 features=%s =====" % (k, features)] if start else []
    for i in range(first, last + 1):
        lines.append(
            "(TaskRunner pid=41) step:%d - actor/pg_loss:np.float64(-0.01) - critic/score/mean:np.float64(0.%d)"
            " - response_length/mean:%d.0 - perf/throughput:np.float64(1500.5) - timing_s/step:12.5" % (i, i, 800 + i)
        )
        lines.append(
            "(TaskRunner pid=41) Training Progress:  %d%%|##  | %d/10 [00:%02d<01:30, 12.50s/it]" % (i * 10, i, i)
        )
    return "\n".join(lines) + "\n"


def status_json(sandbox, hosts, *args):
    proc = cli(sandbox, "-H", hosts, "status", "--json", *args)
    return proc, json.loads(proc.stdout)


# ------------------------------------------------------------------------------------------ status


def test_status_second_attempt_and_other_host_without_runs(sandbox):
    for h in ("h1", "h2"):
        sandbox.reset(h)
    log = (
        steps_log(1, 1, 4)
        + "===== dapo-ops attempt 1 end exit=1 class=oom-device =====\n"
        + steps_log(2, 3, 5, features="flash_attn,dynamic_batch,offload")
    )
    feats = [
        {"name": "flash_attn", "source": "default"},
        {"name": "dynamic_batch", "source": "default"},
        {"name": "offload", "source": "oom-retry-1"},
    ]
    rid, host_rd, crd = make_run(
        sandbox,
        "h1",
        attempt=2,
        step=4,
        log=log,
        features=feats,
        step_times=[12.0, 13.0, 12.5],
        last_progress_at=time.time(),
        verdict={
            "cls": "oom-device",
            "action": "retry with offload, resume from step 2",
            "hint": "x",
            "evidence": ["NPU out of memory"],
        },
        swanlab_url="https://swanlab.cn/@me/dapo/runs/abc",
    )
    start_fake_supervisor(sandbox, "h1", crd, host_rd)
    proc, rows = status_json(sandbox, "h1,h2")
    assert proc.returncode == 0, proc.stderr
    by = {r["host"]: r for r in rows}
    r = by["h1"]
    assert r["run_id"] == rid and r["state"] == "running" and r["attempt"] == 2
    assert (r["step"], r["total"], r["percent"]) == (5, 10, 50.0)  # from attempt 2's segment of the tail
    assert r["eta_s"] == 5 * 12.5
    assert r["metrics"] == {"critic/score/mean": 0.5, "response_length/mean": 805.0, "perf/throughput": 1500.5}
    assert [f["name"] for f in r["features"] if f["oom_added"]] == ["offload"]
    assert r["verdict"] == "oom-device" and r["swanlab_url"].endswith("/runs/abc")
    assert r["supervisor_alive"] is True and r["verl_alive"] is True and not r["stale"]
    assert by["h2"]["state"] == "no-run"
    table = cli(sandbox, "-H", "h1,h2", "status", check=0).stdout
    line = next(ln for ln in table.splitlines() if rid in ln)
    assert "5/10 (50%)" in line and "+offload(oom-retry-1)" in line and "running" in line


def test_status_dead_supervisor_and_unreachable_host(sandbox):
    sandbox.reset("h1")
    sandbox.reset("h3")
    rid, _, _ = make_run(sandbox, "h1", step=3, log=steps_log(1, 1, 3), last_progress_at=time.time() - 4000)
    sshmux.close_all()  # a kept connection (control master) outlives sshd's listener, as OpenSSH's does
    sandbox.kill_sshd("h3")
    try:
        proc, rows = status_json(sandbox, "h1,h3")
    finally:
        sandbox.start_sshd("h3")
    assert proc.returncode == 1 and "h3" in proc.stderr
    by = {r["host"]: r for r in rows}
    assert by["h1"]["state"] == "supervisor-dead" and by["h1"]["status"] == "running"
    assert by["h1"]["stale"] is True and by["h1"]["progress_age_s"] >= 4000
    assert "is gone" in by["h1"]["hint"]
    assert by["h3"]["state"] == "error" and "refused" in by["h3"]["error"].lower()
    text = cli(sandbox, "-H", "h1", "status").stdout
    assert "supervisor-dead" in text and "is gone but run.json says running" in text


def test_status_all_lists_past_runs_newest_first(sandbox):
    sandbox.reset("h1")
    t = time.time()
    old, _, _ = make_run(sandbox, "h1", status="succeeded", step=10, started_at=t - 7200)
    mid, _, _ = make_run(sandbox, "h1", status="stopped", step=4, started_at=t - 3600)
    new, _, _ = make_run(
        sandbox,
        "h1",
        status="failed",
        step=2,
        started_at=t - 60,
        verdict={"cls": "config-error", "action": "fix the key", "hint": "h"},
    )
    proc, rows = status_json(sandbox, "h1", "--all")
    assert proc.returncode == 0, proc.stderr
    assert [r["run_id"] for r in rows] == [new, mid, old]
    assert [r["state"] for r in rows] == ["failed", "stopped", "succeeded"]
    # --run picks one of them
    _, one = status_json(sandbox, "h1", "--run", mid)
    assert one[0]["run_id"] == mid and one[0]["state"] == "stopped"


def test_status_reads_bounded_tail_of_big_log(sandbox):
    sandbox.reset("h1")
    rid, host_rd, _ = make_run(sandbox, "h1", step=None, log="")
    with open(host_rd / "train.log", "w") as fh:  # 8 MiB of noise, then the last progress
        chunk = ("(WorkerDict pid=7) noise " + "x" * 100 + "\n") * 8192
        for _ in range(9):
            fh.write(chunk)
        fh.write(steps_log(1, 7, 7, start=False))
    _, rows = status_json(sandbox, "h1")
    assert rows[0]["step"] == 7 and rows[0]["log_bytes"] > 8 << 20


# ------------------------------------------------------------------------------------------ watch


def test_watch_prints_state_changes_and_exits_0_on_success(sandbox):
    sandbox.reset("h1")
    rid, host_rd, crd = make_run(sandbox, "h1", step=1, log=steps_log(1, 1, 1))
    pids = start_fake_supervisor(sandbox, "h1", crd, host_rd)
    w = Follower(sandbox, "-H", "h1", "watch", "--interval", "0.3")

    def update(**kw):
        rec = runfiles.read_run(host_rd)
        rec.update(kw)
        runfiles.write_run(host_rd, rec)

    try:
        w.wait_for(lambda ln: ln.startswith("h1: run %s running, attempt 1" % rid))  # it has looked once
        # no event for a step: it is not a state change (step 2 and the retry are seen in one look or two; either
        # way a step line would be printed if steps were events)
        update(step=2)
        update(status="retrying", verdict={"cls": "oom-device", "action": "retry with offload", "hint": "h"})
        w.wait_for(lambda ln: "running -> retrying" in ln)
        update(
            status="running",
            attempt=2,
            features=[
                {"name": "flash_attn", "source": "default"},
                {"name": "dynamic_batch", "source": "default"},
                {"name": "offload", "source": "oom-retry-1"},
            ],
        )
        w.wait_for(lambda ln: "attempt 2 started" in ln)
        update(status="succeeded", step=10, ended_at=time.time())
        w.wait_for(lambda ln: ln.startswith("h1: finished:"), timeout=60)
        rc = w.proc.wait(timeout=60)
    finally:
        if w.proc.poll() is None:
            w.proc.kill()
    err = w.proc.stderr.read()
    assert rc == 0, (w.lines, err)
    out = w.lines
    assert out[0].startswith("h1: run %s running, attempt 1" % rid)
    assert any("attempt 2 started" in ln and "OOM escalation: +offload" in ln for ln in out)
    assert out[-1] == "h1: finished: succeeded at step 10/10"
    assert not any("step 2" in ln for ln in out)
    sandbox.exec("h1", "kill %d" % pids["supervisor"])


def test_watch_failed_stopped_and_dead_supervisor_exit_nonzero(sandbox):
    sandbox.reset("h1")
    make_run(
        sandbox,
        "h1",
        status="failed",
        step=4,
        verdict={
            "cls": "oom-device",
            "action": "stop: memory ladder exhausted (offload, recompute).",
            "hint": "lower max_response_length",
        },
    )
    proc = cli(sandbox, "-H", "h1", "watch", "--interval", "0.2")
    assert proc.returncode == 1
    assert "failed: stop: memory ladder exhausted (offload, recompute) at step 4/10 (oom-device)" in proc.stderr

    sandbox.reset("h1")
    make_run(sandbox, "h1", status="stopped", step=3)
    proc = cli(sandbox, "-H", "h1", "watch", "--interval", "0.2")
    assert proc.returncode == 5 and "stopped by the operator at step 3/10" in proc.stderr

    sandbox.reset("h1")
    make_run(sandbox, "h1", status="running", step=3)
    proc = cli(sandbox, "-H", "h1", "watch", "--interval", "0.2")
    assert proc.returncode == 3 and "supervisor-dead" in proc.stderr


def test_a_container_without_the_bundle_gets_it_on_the_first_look_then_one_command_per_look(sandbox):
    """The bundle op's gate (remote_bundle.run_op): a container whose bundle is gone answers MISSING_RC, the bundle
    is installed and the look retried once; the next look is ONE command (the control master's own count)."""
    from dapo_ops.control.inventory import hosts_file as inventory
    from dapo_ops.control.remote.target import Target

    sandbox.reset("h1")
    rid, _, _ = make_run(sandbox, "h1", step=3, log=steps_log(1, 3, 3))
    bdir = remote_bundle.bundle_dir(RUNS_IN_CONTAINER)
    sandbox.exec("h1", "rm -rf %s" % bdir, check=True)
    h = inventory.load(sandbox.inventory).hosts["h1"]
    t = Target(h, h.container)
    calls = []
    real_run = t.run
    t.run = lambda *a, **kw: calls.append(a[0]) or real_run(*a, **kw)
    try:
        first = remote_bundle.run_op(
            t, "runprobe", [json.dumps({"op": "status", "runs_dir": RUNS_IN_CONTAINER})], site=False, workdir=""
        )
        assert json.loads(first.stdout)["run"]["run_id"] == rid
        # look, install (its own staged file), look
        assert len(calls) == 3 and calls[1].startswith(remote_bundle.install_command(bdir, h.python, "X")[:-1]), calls
        assert sandbox.exec("h1", "test -f %s/dapo_ops/.complete && echo yes" % bdir).stdout.strip() == "yes"
        calls.clear()
        again = remote_bundle.run_op(
            t, "runprobe", [json.dumps({"op": "status", "runs_dir": RUNS_IN_CONTAINER})], site=False, workdir=""
        )
        assert json.loads(again.stdout)["run"]["run_id"] == rid and len(calls) == 1
    finally:
        t.close()
