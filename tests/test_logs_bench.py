"""``logs`` on the sandbox hosts: --lines, --attempt, --errors, several hosts prefixed, and --follow across an
attempt boundary and a rotation, stopped with Ctrl-C (SIGINT) without leaving a tail in the container; --follow
ending by itself when the run ends (succeeded / failed / stopped, a dead supervisor), with ``inv watch``'s ending
line and exit code, at once for a run that already ended, and through the head of a multi-host run."""

from __future__ import annotations

import os
import re
import threading
import time

import pytest

from dapo_ops.agent import runfiles
from supervisor_helpers import wait_for
from test_status_bench import Follower, cli, container_pids, make_run, start_fake_supervisor, steps_log

pytestmark = pytest.mark.bench

OOM_TRACE = """\
(TaskRunner pid=417) step:3 - actor/pg_loss:0.0042 - critic/score/mean:0.3
(TaskRunner pid=417) Training Progress:  30%|###       | 3/10 [06:12<51:34, 372.07s/it]
(WorkerDict pid=4926) some unrelated worker chatter
Traceback (most recent call last):
  File "/verl/verl/trainer/ppo/ray_trainer.py", line 1196, in _update_actor
    actor_output = self.actor_rollout_wg.update_actor(batch)
ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.actor_rollout_update_actor() (pid=4926, ip=192.0.2.41)
  File "/verl/verl/workers/actor/dp_actor.py", line 523, in update_policy
    loss.backward()
RuntimeError: NPU out of memory. Tried to allocate 4.64 GiB (NPU 3; 60.96 GiB total capacity; 52.18 GiB already allocated; 3.02 GiB free; 56.84 GiB reserved in total by PyTorch)

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""


def test_lines_attempt_and_hosts_prefixed(sandbox):
    for h in ("h1", "h2"):
        sandbox.reset(h)
    a1 = steps_log(1, 1, 4) + "===== dapo-ops attempt 1 end exit=1 class=oom-device =====\n"
    a2 = steps_log(2, 3, 6)
    _, rd1, _ = make_run(sandbox, "h1", attempt=2, log=a1 + a2, attempts_logs={1: a1, 2: a2})
    _, rd2, _ = make_run(sandbox, "h2", attempt=1, log=steps_log(1, 1, 2))
    want = (a1 + a2).splitlines()[-3:]
    assert cli(sandbox, "-H", "h1", "logs", "--lines", "3", check=0).stdout.splitlines() == want
    assert (
        cli(sandbox, "-H", "h1", "logs", "--attempt", "1", "-n", "1000", check=0).stdout.splitlines() == a1.splitlines()
    )
    bad = cli(sandbox, "-H", "h1", "logs", "--attempt", "5")
    assert bad.returncode == 1 and "has no attempt 5 (attempts: 1,2)" in bad.stderr
    both = cli(sandbox, "-H", "h1,h2", "logs", "-n", "2", check=0).stdout.splitlines()
    assert both == ["h1 | " + ln for ln in want[-2:]] + ["h2 | " + ln for ln in steps_log(1, 1, 2).splitlines()[-2:]]


def test_errors_shows_evidence_with_context_across_attempts(sandbox):
    sandbox.reset("h1")
    noise = "".join("(WorkerDict pid=9) chatter %d\n" % i for i in range(200))
    a1 = steps_log(1, 1, 2) + noise + OOM_TRACE + "===== dapo-ops attempt 1 end exit=1 class=oom-device =====\n"
    a2 = steps_log(2, 3, 10) + "===== dapo-ops attempt 2 end exit=0 class=success =====\n"
    rid, _, _ = make_run(sandbox, "h1", attempt=2, log=a1 + a2, attempts_logs={1: a1, 2: a2})
    proc = cli(sandbox, "-H", "h1", "logs", "--errors", check=0)
    out = proc.stdout
    assert "===== %s attempt 1: oom-device =====" % rid in out
    assert ">> RuntimeError: NPU out of memory. Tried to allocate 4.64 GiB" in out
    assert "    loss.backward()" in out  # context before the evidence line
    assert "chatter 100" not in out  # far from any evidence
    assert "attempt 2" not in out  # the successful attempt has no evidence
    one = cli(sandbox, "-H", "h1", "logs", "--errors", "--attempt", "2")
    assert one.returncode == 0 and one.stdout == "" and "no failure evidence" in one.stderr


def test_follow_across_attempt_boundary_and_rotation_then_ctrl_c(sandbox):
    sandbox.reset("h1")
    rid, rd, crd = make_run(sandbox, "h1", attempt=1, log=steps_log(1, 1, 2))
    start_fake_supervisor(sandbox, "h1", crd, rd)  # a live run: followed until Ctrl-C
    f = Follower(sandbox, "-H", "h1", "logs", "-f", "-n", "2")
    try:
        f.wait_for(lambda ln: "step:2 -" in ln)
        with open(rd / "train.log", "a") as fh:  # the supervisor ends attempt 1 and starts attempt 2
            fh.write("===== dapo-ops attempt 1 end exit=1 class=oom-device =====\n")
            fh.write(steps_log(2, 2, 3, features="flash_attn,dynamic_batch,offload"))
            fh.write(
                "Training Progress:  35%|## | 3/10 [00:04<01:25, 12.40s/it]\r"
                "Training Progress:  40%|## | 4/10 [00:05<01:20, 12.30s/it]\n"
            )
        f.wait_for(lambda ln: ln.startswith("===== dapo-ops attempt 2 start"))
        f.wait_for(lambda ln: "step:3 -" in ln)
        os.rename(rd / "train.log", rd / "train.log.1")  # rotation: a new file under the same name
        (rd / "train.log").write_text("after rotation: step:4 - x:1\n")
        f.wait_for(lambda ln: ln.startswith("after rotation"))
    finally:
        rc = f.interrupt()
    assert rc == 130  # a Ctrl-C, as `inv watch` and a shell say it (the README: "exit code as `inv watch`")
    err = [ln for ln in f.proc.stderr.read().splitlines() if ln.strip()]
    assert len(err) == 1 and "interrupted; the run goes on" in err[0] and "inv logs -f -H h1" in err[0], err
    # a tqdm redraw (\r) shows as its last state, one whole line
    assert "Training Progress:  40%|## | 4/10 [00:05<01:20, 12.30s/it]" in f.lines
    assert not any("35%" in ln for ln in f.lines)
    # tail's rotation notes never split a log line (tail's stderr joins its stdout in the container)
    assert not any(ln.startswith("tail: ") and "step:" in ln for ln in f.lines), f.lines
    wait_for(lambda: "tail" not in container_pids(sandbox, "h1").values(), 30, "the remote tail gone after Ctrl-C", 0.5)


def test_follow_two_hosts_never_interleaves_mid_line(sandbox):
    for h in ("h1", "h2"):
        sandbox.reset(h)
    rds = {}
    for h in ("h1", "h2"):
        _, rds[h], crd = make_run(sandbox, h, log="start %s\n" % h)
        start_fake_supervisor(sandbox, h, crd, rds[h])
    f = Follower(sandbox, "-H", "h1,h2", "logs", "-f", "-n", "1")
    try:
        started = set()
        f.wait_for(
            lambda ln: (started.add(ln) if ln in ("h1 | start h1", "h2 | start h2") else None) or len(started) == 2
        )

        def burst(h):
            with open(rds[h] / "train.log", "a") as fh:
                for i in range(300):
                    fh.write("%s line-%d %s\n" % (h, i, "x" * 300))
                    if i % 50 == 0:
                        fh.flush()

        ts = [threading.Thread(target=burst, args=(h,)) for h in ("h1", "h2")]
        [t.start() for t in ts]
        [t.join() for t in ts]
        seen = set()
        f.wait_for(lambda ln: (seen.add(ln[:2]) if "line-299 " in ln else None) or len(seen) == 2, timeout=60)
    finally:
        assert f.interrupt() == 130  # Ctrl-C: as `inv watch` says it
    pat = re.compile(r"^(h[12]) \| (h[12]) line-\d+ x{300}$|^(h[12]) \| start (h[12])$")
    body = [ln for ln in f.lines if ln]
    for ln in body:
        m = pat.match(ln)
        assert m and len({g for g in m.groups() if g}) == 1, ln
    assert sum(1 for ln in body if "line-" in ln) == 600


def _finish(sandbox, host, rd, pids, *, status, ended, verdict=None):
    """The supervisor's last steps: run.json says how the run ended, then the supervisor (and its verl) exit."""
    rec = runfiles.read_run(rd)
    rec.update(
        status=status,
        ended_at=time.time(),
        step=4,
        total_steps=10,
        decision={
            "action": "done" if status == "succeeded" else "stop",
            "ended": ended,
            "reason": ended,
            "suggestions": [],
        },
        verdict=verdict,
    )
    runfiles.write_run(rd, rec)
    sandbox.exec(host, "kill -9 %d -%d" % (pids["supervisor"], pids["verl_pgid"]), check=True)


@pytest.mark.parametrize("status,code", [("succeeded", 0), ("failed", 1)])
def test_follow_ends_when_the_run_ends_with_watchs_line_and_code(sandbox, status, code):
    sandbox.reset("h1")
    rid, rd, crd = make_run(sandbox, "h1", attempt=1, log=steps_log(1, 1, 3))
    pids = start_fake_supervisor(sandbox, "h1", crd, rd)
    f = Follower(sandbox, "-H", "h1", "logs", "-f", "-n", "2")
    try:
        f.wait_for(lambda ln: "step:3 -" in ln)
        with open(rd / "train.log", "a") as fh:
            fh.write(steps_log(1, 4, 4, start=False) + "the last line before the end\n")
        f.wait_for(lambda ln: ln == "the last line before the end")
        ended = (
            "succeeded at step 4/10" if status == "succeeded" else "failed: device OOM after 2 OOM retries at step 4/10"
        )
        verdict = None if status == "succeeded" else {"cls": "oom-device", "action": "stop", "evidence": []}
        _finish(sandbox, "h1", rd, pids, status=status, ended=ended, verdict=verdict)
        last = f.wait_for(lambda ln: ln.startswith("h1: run "), timeout=30)
        rc = f.proc.wait(timeout=30)
    finally:
        if f.proc.poll() is None:
            f.interrupt()
    want = "h1: run %s %s" % (rid, ended) + (" (oom-device)" if status == "failed" else "")
    assert last == want, f.lines
    assert rc == code
    assert f.lines[-2] == "the last line before the end"  # every line of the log, then the one ending line
    assert "tail" not in container_pids(sandbox, "h1").values()


def test_follow_of_a_run_that_already_ended_returns_at_once(sandbox):
    sandbox.reset("h2")
    rid, rd, crd = make_run(sandbox, "h2", attempt=1, log=steps_log(1, 1, 3))
    _finish(
        sandbox,
        "h2",
        rd,
        start_fake_supervisor(sandbox, "h2", crd, rd),
        status="stopped",
        ended="stopped by `inv stop` at step 4/10",
    )
    # a look, not a follow: the command ends by itself (cli's bound: a follow of an ended run would never end), with
    # no tail following the log in the container
    out = cli(sandbox, "-H", "h2", "logs", "-f", "-n", "2", timeout=60)
    assert out.returncode == 5, (out.stdout, out.stderr)  # inv watch: 5 = stopped
    assert "tail" not in container_pids(sandbox, "h2").values()
    assert out.stdout.splitlines() == steps_log(1, 1, 3).splitlines()[-2:] + [
        "h2: run %s stopped by `inv stop` at step 4/10" % rid
    ]
    # a supervisor that died without saying how the run ended: its last lines and watch's dead-supervisor line
    sandbox.reset("h2")
    rid, rd, _ = make_run(sandbox, "h2", attempt=1, log=steps_log(1, 1, 2))
    out = cli(sandbox, "-H", "h2", "logs", "-f", "-n", "1", timeout=60)
    assert out.returncode == 3, (out.stdout, out.stderr)
    lines = out.stdout.splitlines()
    assert lines[0] == steps_log(1, 1, 2).splitlines()[-1] and len(lines) == 2, lines
    assert lines[1].startswith("h2: run %s " % rid) and "inv launch -H h2 --resume %s" % rid in lines[1], lines


def test_follow_through_the_head_of_a_multi_host_run_ends_with_it(sandbox):
    for h in ("h1", "h2"):
        sandbox.reset(h)
    rid, rd, crd = make_run(
        sandbox,
        "h1",
        attempt=1,
        log=steps_log(1, 1, 2),
        cluster={"hosts": ["h1", "h2"], "nodes": 2, "head": "h1", "port": 6379},
    )
    pids = start_fake_supervisor(sandbox, "h1", crd, rd)
    f = Follower(sandbox, "-H", "h1,h2", "logs", "-f", "-n", "1")
    try:
        f.wait_for(lambda ln: "Training Progress:  20%|##  | 2/10" in ln)  # one log (the head's): no host prefix
        _finish(sandbox, "h1", rd, pids, status="succeeded", ended="succeeded at step 4/10")
        last = f.wait_for(lambda ln: ln.startswith("h1: run "), timeout=30)
        rc = f.proc.wait(timeout=30)
    finally:
        if f.proc.poll() is None:
            f.interrupt()
    assert last == "h1: run %s succeeded at step 4/10" % rid and rc == 0, f.lines
    assert not any(ln.startswith("h2 | ") for ln in f.lines)  # the worker has no log of its own: the head's is it
    assert "Ray worker of run %s (head h1)" % rid in f.proc.stderr.read()
