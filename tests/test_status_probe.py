"""The in-container probe (dapo_ops.agent.runprobe) run in its shipped form, the bundle op line
(``remote_bundle.op_line``: ``python3 -S -m dapo_ops.agent.runprobe`` from an installed bundle, no site-packages, no
PYTHONPATH of ours) against a local runs dir, with real processes standing in for the supervisor and the verl process
group. No hosts needed."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dapo_ops.agent import runprobe as remote_probe
from dapo_ops.agent import runlogs
from dapo_ops.control.remote import bundle as remote_bundle
from dapo_ops.control.status.look import PROBE_OPS
from dapo_ops.control.status import rows as statusview
from dapo_ops.agent import runfiles
from dapo_ops.core import runstate
from supervisor_helpers import wait_for

# A stand-in supervisor: its argv names dapo_ops.agent.supervisor and the run dir (what runfiles.is_supervisor_pid
# checks); on SIGTERM it stops its verl process group and marks run.json stopped, as the real one does.
FAKE_SUPERVISOR = r"""
import os, signal, sys, time
sys.path.insert(0, sys.argv[3])
from dapo_ops.agent import runfiles
run_dir = sys.argv[2]
def term(*a):
    rec = runfiles.read_run(run_dir)
    try:
        os.killpg(rec["pids"]["verl_pgid"], signal.SIGTERM)
    except ProcessLookupError:
        pass
    rec["status"] = "stopped"; rec["ended_at"] = time.time()
    runfiles.write_run(run_dir, rec)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
open(os.path.join(run_dir, "sup.ready"), "w").close()
while True:
    signal.pause()
"""

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module", autouse=True)
def bundle(tmp_path_factory):
    global BUNDLE
    BUNDLE = remote_bundle.local_install(tmp_path_factory.mktemp("bundle"))
    return BUNDLE


BUNDLE = None


def probe(req):
    """One request run as shipped: the bundle op that answers its op (control/status/look.PROBE_OPS), ``-S``, cwd /."""
    return _run_op(req)[0]


def _run_op(req, python_flags=""):
    op = PROBE_OPS[req.get("op", "status")]
    line = remote_bundle.op_line(BUNDLE, sys.executable, op, [json.dumps(req)], site=False)
    if python_flags:
        line = line.replace("-m dapo_ops.agent.", python_flags + " -m dapo_ops.agent.")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=120, env=env, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out.stderr


def test_the_probe_runs_from_the_bundle_alone(tmp_path):
    # the shipped form imports the bundle's copy: -S (no site-packages, so not this checkout's install), cwd /
    line = remote_bundle.op_line(BUNDLE, sys.executable, "runprobe", ["{}"], site=False)
    line = line.replace("-m dapo_ops.agent.runprobe", "-c 'import dapo_ops.agent.runprobe as p; print(p.__file__)'")
    out = subprocess.run(
        ["sh", "-c", line],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert out.stdout.strip() == os.path.join(BUNDLE, "dapo_ops", "agent", "runprobe.py"), out.stderr


def test_a_missing_bundle_is_its_own_exit_code_and_mark(tmp_path):
    line = remote_bundle.op_line(str(tmp_path / "nope"), sys.executable, "runprobe", ["{}"], site=False)
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60)
    assert out.returncode == remote_bundle.MISSING_RC and remote_bundle.MISSING_MARK in out.stderr
    assert out.stdout == ""


def _imported(req):
    """(answer, dapo_ops modules the op process imported) of one request run as shipped, ``-X importtime``."""
    ans, err = _run_op(req, "-X importtime")
    mods = [ln.rsplit("|", 1)[-1].strip() for ln in err.splitlines() if ln.startswith("import time:")]
    return ans, [m for m in mods if m.startswith("dapo_ops")]


def test_a_status_look_loads_only_the_probe_and_run_state_and_each_op_its_own_module(tmp_path):
    rid, _ = make_run(str(tmp_path), status="succeeded")
    ans, mods = _imported({"op": "status", "runs_dir": str(tmp_path), "run_id": rid})
    assert ans["run"]["run_id"] == rid
    assert sorted(mods) == [
        "dapo_ops",
        "dapo_ops.agent",
        "dapo_ops.agent.procs",
        "dapo_ops.agent.runfiles",
        "dapo_ops.core",
        "dapo_ops.core.raynodes",
        "dapo_ops.core.runstate",
    ], mods
    # stop / resolve: their own op module (run as __main__) on the probe's helpers; errors are one-line answers
    for op, other in (("stop", "dapo_ops.agent.runlogs"), ("resolve", "dapo_ops.agent.runstop")):
        ans, mods = _imported({"op": op, "runs_dir": str(tmp_path), "run_id": "20200101-000000-ffff"})
        assert ans == {
            "error": "no run 20200101-000000-ffff in %s; list runs with `inv status --all`" % tmp_path,
            "run_id": "20200101-000000-ffff",
        }  # the run asked for (a Ray worker host has no dir of it)
        assert "dapo_ops.agent.runprobe" in mods and other not in mods, mods
    # an op sent to a module that does not answer it is a one-line answer, not a traceback
    line = remote_bundle.op_line(BUNDLE, sys.executable, "runprobe", [json.dumps({"op": "stop"})], site=False)
    out = subprocess.run(
        ["sh", "-c", line],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert json.loads(out.stdout) == {"error": "unknown probe op 'stop' (this module answers status, list)"}


def make_run(runs_dir, status="running", attempt=1, sup_pid=None, verl_pgid=None, log="", now=None):
    """A run dir as the supervisor writes it; ``now`` (Unix seconds) is the start time its run id names."""
    rid = runstate.new_run_id(now)
    rd = runstate.run_dir_for(runs_dir, rid)
    os.makedirs(rd)
    spec = {
        "run_id": rid,
        "run_dir": rd,
        "host": "h1",
        "container": "verl",
        "settings": {"steps": 10},
        "features": [{"name": "flash_attn", "source": "default"}],
    }
    rec = runstate.new_record(spec, sup_pid or 0)
    rec.update(status=status, attempt=attempt)
    rec["started_at"] -= 5  # processes started just before are the run's own
    rec["pids"]["verl_pgid"] = verl_pgid
    runfiles.write_run(rd, rec)
    with open(os.path.join(rd, "train.log"), "w") as fh:
        fh.write(log)
    return rid, rd


def gone_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_status_reads_only_a_bounded_tail(tmp_path):
    big = "x" * 100 + "\n"
    log = big * 20000 + "step:7 - critic/score/mean:0.5 - perf/throughput:10\n"
    rid, rd = make_run(str(tmp_path), sup_pid=gone_pid(), log=log)
    p = probe({"op": "status", "runs_dir": str(tmp_path), "tail_bytes": 4096})
    assert len(p["tail"].encode()) <= 4096
    assert p["log_bytes"] == len(log)
    row = statusview.build_row("h1", p)
    assert row.run_id == rid and row.step == 7 and row.state == "supervisor-dead"


def test_current_run_is_lock_holder_then_newest(tmp_path):
    a, _ = make_run(str(tmp_path), status="succeeded", now=time.time() - 60)  # run ids name their start second
    b, _ = make_run(str(tmp_path), status="failed")
    assert probe({"op": "status", "runs_dir": str(tmp_path)})["run"]["run_id"] == b
    runfiles.write_json_atomic(tmp_path / ".lock", {"run_id": a, "pid": gone_pid()})
    assert probe({"op": "status", "runs_dir": str(tmp_path)})["run"]["run_id"] == a
    lst = probe({"op": "list", "runs_dir": str(tmp_path)})
    assert [r["run"]["run_id"] for r in lst["runs"]] == [b, a]
    assert "error" in probe({"op": "status", "runs_dir": str(tmp_path), "run_id": "20200101-000000-ffff"})
    assert probe({"op": "status", "runs_dir": str(tmp_path / "none")})["run"] is None


def test_stop_with_dead_supervisor_kills_own_group_and_is_idempotent(tmp_path):
    verl = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        rid, rd = make_run(str(tmp_path), sup_pid=gone_pid(), verl_pgid=verl.pid)
        p = probe({"op": "status", "runs_dir": str(tmp_path)})
        assert p["supervisor_alive"] is False and p["verl_alive"] is True
        res = probe({"op": "stop", "runs_dir": str(tmp_path), "kill_grace_s": 5})
        assert res["before"] == "running" and res["after"] == "stopped"
        assert any("SIGTERM verl process group %d" % verl.pid in a for a in res["actions"])
        assert verl.wait(timeout=10) == -signal.SIGTERM
        rec = runfiles.read_run(rd)
        assert rec["status"] == "stopped" and rec["stop"]["supervisor"] == "dead"
        assert os.path.exists(os.path.join(rd, "train.log"))
        again = probe({"op": "stop", "runs_dir": str(tmp_path)})
        assert again["already"] is True and again["after"] == "stopped"
    finally:
        if verl.poll() is None:
            verl.kill()


def test_inv_stop_of_a_run_whose_supervisor_died_says_supervisor_dead_not_running(tmp_path, monkeypatch):
    """``inv stop`` on a run whose supervisor was dead said "running -> stopped" (a new user's trial): run.json's
    status, not what the run was. The probe says whether the supervisor was alive; the line says supervisor-dead."""
    from types import SimpleNamespace

    from dapo_ops.control.status import look
    from dapo_ops.control.status import stop

    rid, rd = make_run(str(tmp_path), sup_pid=gone_pid())
    res = probe({"op": "stop", "runs_dir": str(tmp_path), "kill_grace_s": 5})
    assert res["before"] == "running" and res["supervisor_alive"] is False and res["after"] == "stopped"
    monkeypatch.setattr(look, "fan", lambda chosen, fn, timeout, ct=None: [("h1", res)])
    (out,) = stop.stop_runs([SimpleNamespace(name="h1")])
    assert out.kind == "stopped" and f"h1: run {rid} supervisor-dead -> stopped (" in out.message, out.message
    live = dict(res, supervisor_alive=True)
    monkeypatch.setattr(look, "fan", lambda chosen, fn, timeout, ct=None: [("h1", live)])
    assert f"run {rid} running -> stopped (" in stop.stop_runs([SimpleNamespace(name="h1")])[0].message


def test_stop_after_the_supervisor_died_records_the_step_verl_reached(tmp_path):
    """The supervisor was killed at step 3 (its run.json says so), verl trained on to step 6: stop records 6."""
    log = "".join("(TaskRunner pid=4) step:%d - actor/pg_loss:0.1 - timing_s/step:1.0\n" % k for k in range(1, 7))
    rid, rd = make_run(str(tmp_path), sup_pid=gone_pid(), log=log)
    rec = runfiles.read_run(rd)
    rec["step"] = 3
    runfiles.write_run(rd, rec)
    res = probe({"op": "stop", "runs_dir": str(tmp_path)})
    assert res["after"] == "stopped" and runfiles.read_run(rd)["step"] == 6


def test_a_resume_closes_a_dead_supervisors_run_as_failed_not_as_stopped_by_inv_stop(tmp_path):
    """``inv launch --resume`` closes the run it continues (its supervisor died): nobody ran ``inv stop``, so the
    run is failed, says its supervisor died, and the stop record names the resume (issue 32 item 4)."""
    rid, rd = make_run(str(tmp_path), sup_pid=gone_pid())
    res = probe({"op": "stop", "runs_dir": str(tmp_path), "run_id": rid, "by": "`inv launch --resume %s`" % rid})
    assert res["after"] == "failed"
    rec = runfiles.read_run(rd)
    assert rec["status"] == "failed" and rec["stop"]["by"] == "`inv launch --resume %s`" % rid
    assert rec["decision"]["ended"].startswith("failed: its supervisor (pid ")
    assert "died" in rec["decision"]["ended"] and "inv stop" not in rec["decision"]["ended"]
    row = statusview.build_row(
        "h1", {"run": rec, "tail": "", "now": time.time(), "supervisor_alive": False, "verl_alive": False}
    )
    assert row.ended == rec["decision"]["ended"] and "inv stop" not in (row.hint or "")


def test_stop_terminates_live_supervisor(tmp_path):
    verl = subprocess.Popen(["sleep", "300"], start_new_session=True)
    rid, rd = make_run(str(tmp_path), verl_pgid=verl.pid)
    sup = subprocess.Popen([sys.executable, "-c", FAKE_SUPERVISOR, "dapo_ops.agent.supervisor", rd, REPO])
    try:
        rec = runfiles.read_run(rd)
        rec["pids"]["supervisor"] = sup.pid
        runfiles.write_run(rd, rec)
        wait_for(lambda: os.path.exists(os.path.join(rd, "sup.ready")), 30, "the stand-in supervisor's ready file")
        assert probe({"op": "status", "runs_dir": str(tmp_path)})["supervisor_alive"] is True
        res = probe({"op": "stop", "runs_dir": str(tmp_path), "run_id": rid})
        assert res["actions"][0] == "SIGTERM supervisor pid %d" % sup.pid
        assert sup.wait(timeout=10) == 0 and verl.wait(timeout=10) == -signal.SIGTERM
        assert runfiles.read_run(rd)["status"] == "stopped"
    finally:
        for p in (sup, verl):
            if p.poll() is None:
                p.kill()


def test_stop_never_touches_a_foreign_group(tmp_path):
    # a process group that existed before the run started (a recycled pgid) is not the run's
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        rid, rd = make_run(str(tmp_path), sup_pid=gone_pid(), verl_pgid=other.pid)
        rec = runfiles.read_run(rd)
        rec["started_at"] = time.time() + 3600
        runfiles.write_run(rd, rec)
        res = probe({"op": "stop", "runs_dir": str(tmp_path)})
        assert res["actions"] == ["marked run.json stopped"]
        assert other.poll() is None
    finally:
        other.kill()


def test_errors_and_resolve(tmp_path):
    rid, rd = make_run(str(tmp_path), sup_pid=gone_pid(), log="a\n")
    for k, text in (
        (1, "step:1 - x:1\nRuntimeError: NPU out of memory. Tried to allocate 4.64 GiB\n"),
        (2, "step:2 - x:1\n"),
    ):
        with open(os.path.join(rd, "attempt-%d.log" % k), "w") as fh:
            fh.write(text)
    r = probe({"op": "resolve", "runs_dir": str(tmp_path), "attempt": 2})
    assert r["log"].endswith("attempt-2.log") and r["attempts"] == [1, 2]
    assert "no attempt 5" in probe({"op": "resolve", "runs_dir": str(tmp_path), "attempt": 5})["error"]
    e = probe({"op": "errors", "runs_dir": str(tmp_path)})
    assert [x["attempt"] for x in e["logs"]] == [1, 2]
    assert "NPU out of memory" in runlogs.decode_tail(e["logs"][0])


@pytest.mark.parametrize("size", [0, 10, 5000])
def test_read_tail_drops_cut_line(tmp_path, size):
    p = tmp_path / "f.log"
    p.write_text("y" * size + "\nlast line\n")
    text, n, _ = remote_probe.read_tail(str(p), 64)
    assert n == size + 11
    assert text.endswith("last line\n") and ("y" not in text or size < 64)


def test_stop_also_ends_processes_carrying_the_run_id(tmp_path):
    # a Ray worker that left the verl process group (setsid) but carries DAPO_OPS_RUN_ID (set by the supervisor)
    rid, rd = make_run(str(tmp_path), sup_pid=gone_pid())
    stray = subprocess.Popen(["sleep", "300"], start_new_session=True, env=dict(os.environ, DAPO_OPS_RUN_ID=rid))
    other = subprocess.Popen(["sleep", "300"], start_new_session=True, env=dict(os.environ, DAPO_OPS_RUN_ID=rid + "0"))
    try:
        assert probe({"op": "status", "runs_dir": str(tmp_path)})["verl_alive"] is True
        res = probe({"op": "stop", "runs_dir": str(tmp_path), "kill_grace_s": 5})
        assert res["actions"][0] == "SIGTERM 1 processes with DAPO_OPS_RUN_ID=%s" % rid
        assert stray.wait(timeout=10) == -signal.SIGTERM
        assert other.poll() is None
    finally:
        for p in (stray, other):
            if p.poll() is None:
                p.kill()


def test_unreadable_run_json_is_one_line_error(tmp_path):
    rid, rd = make_run(str(tmp_path), sup_pid=gone_pid())
    with open(os.path.join(rd, "run.json"), "w") as fh:
        fh.write("{not json")
    ans = probe({"op": "status", "runs_dir": str(tmp_path)})
    assert ans["error"].startswith("unreadable run record under %s" % tmp_path) and "\n" not in ans["error"]
