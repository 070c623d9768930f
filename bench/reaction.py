#!/usr/bin/env python3
"""Supervisor benchmark (no hosts: a fake verl on this machine).

1. **OOM reaction**: time from a device-OOM line being written by attempt 1 (whose process then hangs, as the
   peer ranks of a real OOM do in a collective) to attempt 2's process starting. Split into detection (line
   written -> supervisor starts the kill), teardown (kill -> process group gone), and the deliberate
   device-release wait (``retry_delay_s``, 0 here). Target: <= 3 s + teardown.
2. **Follow cost**: supervisor CPU (% of one core, utime+stime from /proc) and peak RSS while the training log
   grows at 1 MiB/s (Ray-prefixed worker lines + one metrics line per second). Target: < 2 % and < 50 MiB.

Usage: ``.venv/bin/python bench/reaction.py [--seconds 20] [--rate-mib 1] [--repeats 3]``. Prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dapo_ops.core import features  # noqa: E402
from dapo_ops.agent import runfiles  # noqa: E402
from dapo_ops.core import runstate  # noqa: E402

#: the head of every fake verl here and in bench/health.py: its ``cfg`` (argv[1]), attempt, ``out()`` and start stamp
FAKE_HEAD = r"""
import json, os, sys, time
a = json.loads(sys.argv[1])
cfg = a["cfg"]
attempt = int(os.environ.get("DAPO_OPS_ATTEMPT", "0"))
def out(s):
    sys.stdout.write(s + "\n"); sys.stdout.flush()
out("FAKE_T start %r attempt=%d" % (time.time(), attempt))
out("Total training steps: %d" % cfg["steps"])
"""

FAKE = (
    FAKE_HEAD
    + r"""
if cfg["mode"] == "oom" and attempt == 1:
    time.sleep(1.0)
    out("step:1 - critic/score/mean:0.1 - timing_s/step:1.0")
    out("FAKE_T oom %r" % time.time())
    out("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.25 GiB of which 1.02 GiB is free.")
    time.sleep(600)
    sys.exit(1)
if cfg["mode"] == "oom":
    sys.exit(0)
# follow-cost mode: rate bytes/s of worker noise, one metrics line per second
line = "(WorkerDict pid=4711, ip=10.0.0.2) " + "x" * 164 + "\n"
per_tick = max(1, int(cfg["rate"] / len(line) / 50))
t0 = time.time(); step = 0; nxt = t0 + 1
while time.time() - t0 < cfg["seconds"]:
    sys.stdout.write(line * per_tick); sys.stdout.flush()
    if time.time() >= nxt:
        step += 1; nxt += 1
        out("step:%d - actor/pg_loss:np.float64(-0.01) - critic/score/mean:np.float64(0.3) - "
            "response_length/mean:812.0 - perf/throughput:1234.5 - timing_s/step:1.0" % step)
    time.sleep(0.02)
"""
)

FACTORY = r"""
import json, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
def factory(spec, fs, changes=None):
    cfg = json.load(open(os.path.join(spec["run_dir"], "bench.json")))
    return [sys.executable, os.path.join(HERE, "bench_fake_verl.py"), json.dumps({"cfg": cfg})]
"""


def make_run(root: Path, cfg: dict, tunables: dict) -> Path:
    """A run dir whose spec runs the fake verl that ``cfg`` (its ``bench.json``; ``steps`` the run's total) drives
    under the supervisor with ``tunables`` (shared by bench/storm.py)."""
    rid = runstate.new_run_id()
    run_dir = root / "runs" / rid
    run_dir.mkdir(parents=True)
    fs = features.resolve(None)
    spec = {
        "version": 1,
        "run_id": rid,
        "host": "local",
        "container": "none",
        "mode": "dapo",
        "framework": "fsdp",
        "profile": "0.9",
        "accelerator": "gpu",
        "workdir": str(root),
        "python": sys.executable,
        "run_dir": str(run_dir),
        "settings": {"steps": cfg["steps"], "ckpt_dir": str(run_dir / "checkpoints")},
        "features": fs.to_json(),
        "disabled_features": [],
        "max_oom_retries": 2,
        "hang_timeout_s": 3600,
        "env": {},
        "notify": {},
        "supervisor": tunables,
    }
    runfiles.write_json_atomic(run_dir / "spec.json", spec)
    (run_dir / "bench.json").write_text(json.dumps(cfg))
    return run_dir


def start(root: Path, run_dir: Path, factory: str = "bench_factory:factory") -> subprocess.Popen:
    """The detached supervisor of ``run_dir`` with ``factory`` (``module:function`` under ``root``) as its verl."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(root)]))
    return subprocess.Popen(
        [sys.executable, "-m", "dapo_ops.agent.supervisor", str(run_dir), "--command-factory", factory],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=open(run_dir / "supervisor.log", "ab"),
        stderr=subprocess.STDOUT,
    )


def stamps(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("FAKE_T "):
            _, what, t = line.split()[:3]
            out[what] = float(t)
    return out


def reaction(root: Path, tunables: dict) -> dict:
    run_dir = make_run(root, {"mode": "oom", "steps": 2}, tunables)
    p = start(root, run_dir)
    p.wait(timeout=120)
    rec = runfiles.read_run(run_dir)
    s1 = stamps(run_dir / "attempt-1.log")
    s2 = stamps(run_dir / "attempt-2.log")
    a1 = rec["attempts"][0]
    total = s2["start"] - s1["oom"]
    teardown = a1["ended_at"] - (s1["oom"] + tunables["oom_grace_s"])  # kill start .. group gone (+ detection jitter)
    return {
        "status": rec["status"],
        "total_s": total,
        "detect_s": tunables["oom_grace_s"],
        "teardown_s": max(0.0, teardown),
        "overhead_s": total - tunables["retry_delay_s"],
    }


def proc_cpu_rss(pid: int) -> tuple[float, int]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / tck
    rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return cpu, rss


def follow_cost(root: Path, seconds: float, rate: float, tunables: dict) -> dict:
    run_dir = make_run(root, {"mode": "noise", "steps": 10**6, "seconds": seconds, "rate": rate}, tunables)
    p = start(root, run_dir)
    # wait for attempt 1 to run, then measure over the steady window
    end = time.time() + 30
    while time.time() < end and not (run_dir / "attempt-1.log").exists():
        time.sleep(0.05)
    time.sleep(1.0)
    c0, _ = proc_cpu_rss(p.pid)
    t0 = time.time()
    size0 = (run_dir / "train.log").stat().st_size
    peak = 0
    while time.time() - t0 < seconds - 2.5:
        _, rss = proc_cpu_rss(p.pid)
        peak = max(peak, rss)
        time.sleep(0.25)
    c1, rss = proc_cpu_rss(p.pid)
    t1 = time.time()
    size1 = (run_dir / "train.log").stat().st_size
    peak = max(peak, rss)
    p.wait(timeout=120)
    rec = runfiles.read_run(run_dir)
    return {
        "cpu_pct": 100.0 * (c1 - c0) / (t1 - t0),
        "rss_mib": peak / 2**20,
        "log_mib_s": (size1 - size0) / (t1 - t0) / 2**20,
        "steps_seen": rec.get("step"),
        "status": rec["status"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="follow-cost window (s)")
    ap.add_argument("--rate-mib", type=float, default=1.0, help="log growth (MiB/s)")
    ap.add_argument("--repeats", type=int, default=3, help="OOM reaction repeats")
    a = ap.parse_args()
    tun = {
        "poll_interval_s": 0.25,
        "oom_grace_s": 1.0,
        "kill_grace_s": 15.0,
        "retry_delay_s": 0.0,
        "write_interval_s": 1.0,
    }
    with tempfile.TemporaryDirectory(prefix="dapo-reaction-") as d:
        root = Path(d)
        (root / "bench_fake_verl.py").write_text(FAKE)
        (root / "bench_factory.py").write_text(FACTORY)
        rs = [reaction(root, tun) for _ in range(a.repeats)]
        fc = follow_cost(root, a.seconds, a.rate_mib * 2**20, tun)
    print(
        "OOM reaction (OOM line written -> next attempt's process started), retry_delay_s=0, "
        f"oom_grace_s={tun['oom_grace_s']}, poll_interval_s={tun['poll_interval_s']}"
    )
    print(f"{'run':>4} {'total s':>8} {'grace s':>8} {'teardown s':>11} {'total/(3s+teardown)':>20}")
    for i, r in enumerate(rs, 1):
        print(
            f"{i:>4} {r['total_s']:8.2f} {r['detect_s']:8.2f} {r['teardown_s']:11.2f} "
            f"{r['total_s'] / (3.0 + r['teardown_s']):20.2f}"
        )
    print()
    print(
        f"follow cost while the log grows at {fc['log_mib_s']:.2f} MiB/s for {a.seconds:.0f} s "
        f"({fc['steps_seen']} metrics lines parsed)"
    )
    print(f"{'metric':>14} {'value':>8} {'target':>8} {'ratio':>6}")
    print(f"{'cpu % core':>14} {fc['cpu_pct']:8.2f} {2.0:8.2f} {fc['cpu_pct'] / 2.0:6.2f}")
    print(f"{'peak RSS MiB':>14} {fc['rss_mib']:8.1f} {50.0:8.1f} {fc['rss_mib'] / 50.0:6.2f}")
    ok = all(r["total_s"] <= 3.0 + r["teardown_s"] for r in rs) and fc["cpu_pct"] < 2.0 and fc["rss_mib"] < 50
    print("\nwithin targets" if ok else "\nOUTSIDE targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
