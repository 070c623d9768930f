#!/usr/bin/env python3
"""Error-storm benchmark (no hosts: the real supervisor process with a fake verl on this machine; issue 29).

1. **Healthy logs** (``--healthy``, the measurement behind ``dapo_ops/core/classify/storm.py``'s thresholds): per
   log we hold (tests/fixtures/real-verl: the 8 H200 runs + the tool runs; tests/cases: 35 public reports and their
   variants), the most tracebacks of one key (innermost exception type + innermost frame) with no step between them.
2. **Time to verdict**: a fake verl prints 2 steps, then verl 0.9.1's reward-function storm (the stand-in's traceback
   shape, ``sandbox/verl_standin/verl/_standin/reward.py``, with a real KeyError raised by ``gpu/bad_reward.py``) at
   the H200's rate (29 tracebacks/s, 133 KB/s); time from the first traceback written to run.json's terminal verdict.
   Target: < 120 s. The verdict must name ``bad_reward.py:5``; no second attempt.
3. **Supervisor CPU at a storm's rate**: the same storm at the H200's byte rate (``--kb-s``, 133 KB/s) with detection
   held off (spans of 10^9 s) for ``--seconds``;
   utime+stime of the supervisor from /proc. Target: < 5 % of a core. train.log's bound is lowered to a 256 KiB burst here so the window runs capped (the default 16 MiB lasts 2 min at this rate).

``--write-fixture PATH`` writes the storm log the pure test replays (tests/fixtures/storm/).
Usage: ``.venv/bin/python bench/storm.py [--seconds 30] [--rate 29] [--healthy]``. Prints tables.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dapo_ops.core.classify.storm import repeats_without_progress  # noqa: E402
from dapo_ops.agent import runfiles  # noqa: E402
from dapo_ops.core.logformat import parse_metrics_line, split_lines  # noqa: E402
from reaction import make_run, proc_cpu_rss, start  # noqa: E402  (bench/reaction.py: the same supervisor harness)

PREFIX = "\x1b[36m(AgentLoopWorkerTQ pid=52211)\x1b[0m "


def storm_block() -> list[str]:
    """One failed session's lines as verl 0.9.1 logs them (Ray-prefixed), from a real KeyError of
    gpu/bad_reward.py (its 41st call)."""
    spec = importlib.util.spec_from_file_location(
        "standin_reward", REPO / "sandbox/verl_standin/verl/_standin/reward.py"
    )
    rw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rw)
    fn = rw.load(str(REPO / "gpu/bad_reward.py"), "compute_score")
    kw = {"data_source": "math_dapo", "solution_str": "x", "ground_truth": "42", "extra_info": {}}
    exc = None
    for _ in range(41):
        try:
            fn(**kw)
        except KeyError as e:
            exc = e
    lines = rw.traceback_lines(exc, "5f1c2d3e", 52211, 52277, "10.0.0.2")
    return [PREFIX + ln.replace(str(REPO / "gpu"), "/tmp/dapo") for ln in lines]  # the device's copy (gpu/lib.sh)


def storm_log(n: int) -> str:
    head = [
        "\x1b[36m(TaskRunnerV1 pid=51000)\x1b[0m INFO:2026-12-02 10:00:00,000:Total training steps: 4",
        "\x1b[36m(TaskRunnerV1 pid=51000)\x1b[0m step:1 - critic/score/mean:0.5 - timing_s/step:2.0",
    ]
    return "\n".join(head + storm_block() * n) + "\n"


FAKE = r"""
import json, os, sys, time
a = json.loads(sys.argv[1]); cfg = a["cfg"]
block = open(cfg["block"]).read()
def out(s):
    sys.stdout.write(s); sys.stdout.flush()
out("Total training steps: 4\n")
for k in (1, 2):
    time.sleep(0.5)
    out("step:%d - critic/score/mean:0.5 - timing_s/step:0.5\n" % k)
out("FAKE_T storm %r\n" % time.time())
t0 = time.time(); n = 0
while time.time() - t0 < cfg["seconds"]:
    n += 1
    out(block)
    time.sleep(max(0.0, t0 + n / cfg["rate"] - time.time()))
"""

STORM_FACTORY = "bench_storm_factory:factory"
FACTORY = r"""
import json, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
def factory(spec, fs, changes=None):
    cfg = json.load(open(os.path.join(spec["run_dir"], "bench.json")))
    return [sys.executable, os.path.join(HERE, "bench_storm_verl.py"), json.dumps({"cfg": cfg})]
"""


def first_storm_t(log: Path) -> float | None:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("FAKE_T storm "):
            return float(line.split()[2])
    return None


def to_verdict(root: Path, rate: float, tun: dict) -> dict:
    run_dir = make_run(root, {"block": str(root / "block.txt"), "rate": rate, "seconds": 600, "steps": 4}, tun)
    p = start(root, run_dir, STORM_FACTORY)
    p.wait(timeout=300)
    rec = runfiles.read_run(run_dir)
    t_first = first_storm_t(run_dir / "attempt-1.log")
    v = rec.get("verdict") or {}
    return {
        "status": rec["status"],
        "cls": v.get("cls"),
        "user_frame": (v.get("detail") or {}).get("user_frame"),
        "attempts": len(rec["attempts"]),
        "to_verdict_s": rec["ended_at"] - t_first if t_first else None,
        "count": (v.get("detail") or {}).get("count"),
    }


def cpu_at_rate(root: Path, rate: float, seconds: float, tun: dict) -> dict:
    tun = dict(tun, storm_min_span_s=1e9, storm_slow_span_s=1e9, log_burst_bytes=float(256 << 10))
    run_dir = make_run(root, {"block": str(root / "block.txt"), "rate": rate, "seconds": seconds + 5, "steps": 4}, tun)
    p = start(root, run_dir, STORM_FACTORY)
    alog = run_dir / "attempt-1.log"
    end = time.time() + 60
    while time.time() < end and (not alog.exists() or first_storm_t(alog) is None):
        time.sleep(0.1)
    time.sleep(1.0)
    c0, t0 = proc_cpu_rss(p.pid)[0], time.time()
    a0, l0 = alog.stat().st_size, (run_dir / "train.log").stat().st_size
    time.sleep(seconds)
    c1, t1 = proc_cpu_rss(p.pid)[0], time.time()
    a1, l1 = alog.stat().st_size, (run_dir / "train.log").stat().st_size
    p.terminate()
    p.wait(timeout=120)
    return {
        "cpu_pct": 100.0 * (c1 - c0) / (t1 - t0),
        "verl_kb_s": (a1 - a0) / (t1 - t0) / 1e3,
        "train_kb_s": (l1 - l0) / (t1 - t0) / 1e3,
    }


def healthy() -> None:
    sets = {
        "real-verl H200 runs": glob.glob(str(REPO / "tests/fixtures/real-verl/*.log")),
        "tool runs (H200)": glob.glob(str(REPO / "tests/fixtures/real-verl/tool-runs/*/train.log")),
        "public reports + variants": [p for p in glob.glob(str(REPO / "tests/cases/**/*.log"), recursive=True)],
    }
    print("most tracebacks of one key (exception type + innermost frame) with no step between them")
    print(f"{'log set':>26} {'logs':>5} {'with tb':>8} {'max repeats':>12}")
    for name, paths in sets.items():
        worst, with_tb = 0, 0
        for p in paths:
            best = repeats_without_progress(split_lines(Path(p).read_text(errors="replace")), parse_metrics_line)
            with_tb += bool(best)
            worst = max([worst] + list(best.values()))
        print(f"{name:>26} {len(paths):>5} {with_tb:>8} {worst:>12}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="CPU window at the storm's rate (s)")
    ap.add_argument("--rate", type=float, default=29.0, help="tracebacks per second (the H200's: 29)")
    ap.add_argument("--kb-s", type=float, default=133.0, help="log rate of the CPU window (the H200's: 64 MB / 8 min)")
    ap.add_argument("--healthy", action="store_true", help="only the measurement over the logs we hold")
    ap.add_argument("--write-fixture", default=None, help="write a storm log of 60 tracebacks to this path")
    a = ap.parse_args()
    if a.write_fixture:
        Path(a.write_fixture).write_text(storm_log(60))
        return 0
    healthy()
    if a.healthy:
        return 0
    tun = {
        "poll_interval_s": 0.25,
        "oom_grace_s": 1.0,
        "kill_grace_s": 15.0,
        "retry_delay_s": 0.0,
        "write_interval_s": 1.0,
    }
    with tempfile.TemporaryDirectory(prefix="dapo-storm-") as d:
        root = Path(d)
        (root / "bench_storm_verl.py").write_text(FAKE)
        (root / "bench_storm_factory.py").write_text(FACTORY)
        (root / "block.txt").write_text("\n".join(storm_block()) + "\n")
        tv = to_verdict(root, a.rate, tun)
        block_bytes = len(("\n".join(storm_block()) + "\n").encode())
        cpu = cpu_at_rate(root, a.kb_s * 1e3 / block_bytes, a.seconds, tun)
    print()
    print(f"storm at {a.rate:.0f} tracebacks/s: first traceback -> verdict")
    print(
        f"{'status':>8} {'class':>12} {'user frame':>16} {'attempts':>9} {'tracebacks':>11} {'s':>7} "
        f"{'target s':>9} {'ratio':>6}"
    )
    s = tv["to_verdict_s"] or float("nan")
    print(
        f"{tv['status']:>8} {str(tv['cls']):>12} {str(tv['user_frame']):>16} {tv['attempts']:>9} "
        f"{str(tv['count']):>11} {s:7.1f} {120.0:9.1f} {s / 120.0:6.2f}"
    )
    print()
    print(
        f"supervisor CPU over {a.seconds:.0f} s of the storm (detection held off): verl writes "
        f"{cpu['verl_kb_s']:.0f} KB/s, train.log grows {cpu['train_kb_s']:.1f} KB/s (the cap)"
    )
    print(f"{'metric':>12} {'value':>8} {'target':>8} {'ratio':>6}")
    print(f"{'cpu % core':>12} {cpu['cpu_pct']:8.2f} {5.0:8.2f} {cpu['cpu_pct'] / 5.0:6.2f}")
    ok = (
        tv["cls"] == "error-storm"
        and tv["user_frame"] == "bad_reward.py:5"
        and tv["attempts"] == 1
        and s < 120
        and cpu["cpu_pct"] < 5.0
    )
    print("\nwithin targets" if ok else "\nOUTSIDE targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
