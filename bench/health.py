#!/usr/bin/env python3
"""Training-health benchmark (issue 42; no hosts): one section per fault kind.

1. **Time to verdict for divergence**: the real supervisor process on ``tests/fake_verl.py`` cued ``diverge_at``
   (the workers' ``WARN: grad_norm is not finite: nan`` of verl/workers/engine/fsdp/transformer_impl.py:824 and NaN in
   the step line, every attempt). Seconds from the first bad line written to attempt 1's verdict in run.json, and to
   the run's terminal ``diverged`` verdict (one retry from the checkpoint before the bad step included). Target:
   well within the issue's 10 minutes.
2. **CPU of the watch at a storm's log rate**: the real storm log (tests/fixtures/real-verl/tool-runs/f-storm/
   attempt-1.log.gz, the H200's reward storm) fed through the supervisor's line reader (``follow.Scanner``, which
   runs ``dapo_ops/core/health.py`` on every line) in this process, with the watch on and with it stubbed out;
   CPU seconds per second of log at the H200's storm rate (``--kb-s``, 133 KB/s, bench/storm.py). Target: < 5 % of
   a core for the whole line reader.

3. * **Stalls** (:func:`stall_after_step`; kind ``stall-after-step-1`` and, for comparison, a stall after step 5): a
   fake verl logs steps of ``--step-s`` seconds (verl 0.9.1's step line: ``timing_s/step``, ``timing_s/gen``,
   ``training/global_step``; verl/trainer/ppo/v1/trainer_base.py:473, :1935), then after step N goes silent with its
   processes alive (two actor ranks parked in a collective: ``all_reduce`` of a module at ``torch/distributed/
   distributed_c10d.py``, so the supervisor's py-spy dumps read that frame: cause ``collective``, one retry). Measured: time from the last step line
   written (the fake's own stamp) to the supervisor's stall verdict (attempt 1's ``ended_at`` in run.json: the
   stack dumps and the teardown included), the limit it recorded (``stall_after_s``: 5 x the longest step, at least
   ``stall_floor_s``), the silence it saw when it called it (``idle_s``), and the verdict's cause. Targets: the
   limit is max(floor, 5 x step 1's ``timing_s/step``), never HANG_TIMEOUT (3600 s here); verdict - last step <=
   limit + poll + dumps + teardown (< limit + 30 s); cause ``collective`` and the retry finishes the run.

Usage: ``.venv/bin/python bench/health.py [divergence] [--runs 3] [--kb-s 133]`` (1 and 2), ``.venv/bin/python
bench/health.py stall [--repeats 2] [--step-s 0.3] [--floor-s 60] [--kinds stall-after-step-1]`` (3). Prints the
figures (bench/health.md); ``stall`` exits 1 when a row misses its target.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from dapo_ops.agent.supervisor import follow, record  # noqa: E402
from dapo_ops.core import classify, health  # noqa: E402
from dapo_ops.core.runstate import RunStatus  # noqa: E402
from dapo_ops.agent import runfiles  # noqa: E402
from dapo_ops.agent.supervisor.stall import STALL_FACTOR  # noqa: E402
from reaction import FACTORY, FAKE_HEAD, make_run, stamps, start  # noqa: E402  (bench/reaction.py: the same supervisor harness)
from supervisor_helpers import new_run  # noqa: E402

STORM = REPO / "tests/fixtures/real-verl/tool-runs/f-storm/attempt-1.log.gz"


def time_to_verdict(root: Path) -> tuple[float, float]:
    """(first bad line -> attempt 1's verdict, -> the run's terminal verdict), seconds."""
    wd = root / "wd"
    wd.mkdir(parents=True, exist_ok=True)
    run_dir = new_run(
        root, steps=12, workdir=wd, files={"fake.json": {"diverge_at": 5, "save_freq": 1, "step_time": 0.5}}
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]))
    with open(run_dir / "supervisor.log", "ab") as log:
        p = subprocess.Popen(
            [sys.executable, "-m", "dapo_ops.agent.supervisor", str(run_dir), "--command-factory", "fake_verl:factory"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    alog = run_dir / "attempt-1.log"
    t0 = t1 = None
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if t0 is None and alog.exists() and b"grad_norm is not finite" in alog.read_bytes():
            t0 = time.monotonic()
        try:
            rec = json.loads((run_dir / "run.json").read_text())
        except (OSError, ValueError):
            rec = {}
        atts = rec.get("attempts") or []
        if t0 is not None and t1 is None and atts and atts[0].get("verdict"):
            t1 = time.monotonic()
        if t0 is not None and RunStatus.of(rec.get("status")).terminal:
            assert rec["verdict"]["cls"] == "diverged", rec["verdict"]
            p.wait(timeout=30)
            return t1 - t0, time.monotonic() - t0
        time.sleep(0.02)
    p.kill()
    raise SystemExit("no verdict within 120 s: " + (run_dir / "supervisor.log").read_text()[-2000:])


def scan_cpu(lines: list[str], watch_on: bool) -> float:
    """CPU seconds of ``follow.Scanner.scan`` over ``lines`` (watch stubbed out when not ``watch_on``)."""
    with tempfile.TemporaryDirectory() as d:
        rec = {"attempts": []}
        att = {"n": 1, "started_at": time.time()}
        sc = follow.Scanner(
            rec, att, record.RecordWriter(d), follow.LinkFinder({}), lambda u: None, classify.is_device_oom_line
        )
        if not watch_on:
            sc.health.feed_line = lambda line: None  # type: ignore[method-assign]
            sc.health.feed = lambda step, m: None  # type: ignore[method-assign]
        sc.storm = {"held": True}  # detection held off, as bench/storm.py's CPU window does
        c0 = time.process_time()
        for i in range(0, len(lines), 200):
            sc.scan(lines[i : i + 200])
        return time.process_time() - c0


#: the fake verl of the stall kinds: ``cfg`` = {"steps", "stall_after", "step_s", "ranks"}; attempt 1 stalls after
#: step ``stall_after``: no output, the driver alive, ``ranks`` child processes titled as Ray's actor ranks
#: (``ray::WorkerDict...``) parked in a collective-named frame; a later attempt runs to the end
STALL_FAKE = (
    FAKE_HEAD
    + r"""
for step in range(1, cfg["steps"] + 1):
    st = cfg["step_s"] if attempt == 1 else min(cfg["step_s"], 0.3)  # the retry only has to finish
    time.sleep(st)
    out("step:%d - training/global_step:%d - critic/score/mean:0.3 - timing_s/gen:%.4f - timing_s/update_actor:%.4f"
        " - timing_s/step:%.4f" % (step, step, st * 0.55, st * 0.3, st))
    if attempt == 1 and step == cfg["stall_after"]:
        out("FAKE_T last_step %r" % time.time())
        d = os.path.join(os.environ["FAKE_ROOT"], "torch", "distributed")
        os.makedirs(d, exist_ok=True)
        for f, text in (("torch/__init__.py", ""), ("torch/distributed/__init__.py", ""),
                        ("torch/distributed/distributed_c10d.py",
                         "import time\n\n\ndef all_reduce(tensor, group=None):\n    while True:\n"
                         "        time.sleep(1)\n")):
            open(os.path.join(os.environ["FAKE_ROOT"], f), "w").write(text)
        import subprocess
        code = "from torch.distributed import distributed_c10d as d; d.all_reduce(None)"
        env = dict(os.environ, PYTHONPATH=os.environ["FAKE_ROOT"])
        for _ in range(cfg["ranks"]):
            subprocess.Popen(["ray::WorkerDict.actor_rollout_update_actor", "-c", code], executable=sys.executable,
                             env=env)
        while True:  # the driver: ray.get() on ranks that never answer
            time.sleep(1)
"""
)


#: the stall kinds: the step after which attempt 1 stalls
KINDS = {"stall-after-step-1": 1, "stall-after-step-5": 5}


def stall_after_step(
    root: Path, tunables: dict, step_s: float, stall_after: int, steps: int = 8, ranks: int = 2
) -> dict:
    """One run whose attempt 1 stalls after step ``stall_after`` (steps of ``step_s`` s). Returns ``{"status",
    "attempts", "last_to_verdict_s", "stall_after_s", "idle_s", "overshoot_s" (idle - limit: the poll),
    "after_call_s" (verdict - last step - idle: the py-spy dumps and the teardown), "cause", "frame"}``."""
    run_dir = make_run(root, {"steps": steps, "stall_after": stall_after, "step_s": step_s, "ranks": ranks}, tunables)
    p = start(root, run_dir)
    p.wait(timeout=900)
    rec = runfiles.read_run(run_dir)
    a1 = rec["attempts"][0]
    last = stamps(run_dir / "attempt-1.log")["last_step"]
    d = (a1.get("verdict") or {}).get("detail") or {}
    verdict_s = a1["ended_at"] - last
    return {
        "status": rec["status"],
        "attempts": len(rec["attempts"]),
        "killed_by": a1.get("killed_by"),
        "last_to_verdict_s": verdict_s,
        "stall_after_s": d.get("stall_after_s"),
        "idle_s": d.get("idle_s"),
        "overshoot_s": (d.get("idle_s") or 0) - (d.get("stall_after_s") or 0),
        "after_call_s": verdict_s - (d.get("idle_s") or 0),
        "cause": d.get("cause"),
        "frame": d.get("frame"),
    }


def stall_main(argv: list[str]) -> int:
    """``bench/health.py stall ...``: the stall kinds (3 below)."""
    ap = argparse.ArgumentParser(prog="bench/health.py stall")
    ap.add_argument("--repeats", type=int, default=2, help="runs per stall kind")
    ap.add_argument("--step-s", type=float, default=0.3, help="step time of the fake verl (s)")
    ap.add_argument("--floor-s", type=float, default=60.0, help="the supervisor's stall_floor_s (s)")
    ap.add_argument("--kinds", default="", help="comma-separated kinds to run (default: all of %s)" % ", ".join(KINDS))
    a = ap.parse_args(argv)
    tun = {
        "poll_interval_s": 0.25,
        "oom_grace_s": 1.0,
        "kill_grace_s": 5.0,
        "retry_delay_s": 0.0,
        "write_interval_s": 1.0,
        "stall_floor_s": a.floor_s,
    }
    kinds = {k: v for k, v in KINDS.items() if not a.kinds or k in a.kinds.split(",")}
    rows: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="dapo-health-") as d:
        root = Path(d)
        (root / "bench_fake_verl.py").write_text(STALL_FAKE.replace('os.environ["FAKE_ROOT"]', repr(str(root))))
        (root / "bench_factory.py").write_text(FACTORY)
        for kind, n in kinds.items():
            rows[kind] = [stall_after_step(root, tun, a.step_s, n) for _ in range(a.repeats)]
    print(
        f"Stalls: last step line -> stall verdict (attempt 1 ended), steps of {a.step_s} s, stall_floor_s "
        f"{a.floor_s:.0f}, hang_timeout_s 3600, poll_interval_s {tun['poll_interval_s']}"
    )
    print(
        f"{'kind':<20} {'run':>3} {'limit s':>8} {'idle s':>7} {'overshoot s':>11} {'dumps+teardown s':>16} "
        f"{'last->verdict s':>15} {'cause':<12} {'status':<10}"
    )
    ok = True
    for kind, rs in rows.items():
        for i, r in enumerate(rs, 1):
            print(
                f"{kind:<20} {i:>3} {r['stall_after_s'] or 0:8.1f} {r['idle_s'] or 0:7.1f} {r['overshoot_s']:11.2f} "
                f"{r['after_call_s']:16.2f} {r['last_to_verdict_s']:15.2f} {str(r['cause']):<12} "
                f"{r['status']}/{r['attempts']}"
            )
            lim = r["stall_after_s"] or 0
            want = min(3600.0, max(a.floor_s, STALL_FACTOR * a.step_s))  # 5 x the longest step, floored, capped
            ok = ok and r["killed_by"] == "stall" and lim == want and r["last_to_verdict_s"] < lim + 30
            ok = ok and r["cause"] == "collective" and r["status"] == "succeeded"
    print("\nwithin targets" if ok else "\nOUTSIDE targets")
    return 0 if ok else 1


def divergence_main(argv: list[str]) -> int:
    """``bench/health.py [divergence] ...``: 1 and 2 below."""
    ap = argparse.ArgumentParser(prog="bench/health.py divergence")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kb-s", type=float, default=133.0)
    a = ap.parse_args(argv)
    print("1. divergence: first bad line -> verdict (s), real supervisor + tests/fake_verl.py, 0.5 s steps")
    rows = []
    for i in range(a.runs):
        with tempfile.TemporaryDirectory() as d:
            first, final = time_to_verdict(Path(d))
        rows.append((first, final))
        print(f"   run {i + 1}: attempt 1 stopped + verdict {first:.2f} s; terminal diverged (one retry) {final:.2f} s")
    print("   median: %.2f s / %.2f s" % (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)))
    raw = gzip.decompress(STORM.read_bytes())
    lines = [ln for ln in raw.decode("utf-8", "replace").replace("\r", "\n").split("\n")]
    log_s = len(raw) / (a.kb_s * 1e3)
    on = min(scan_cpu(lines, True) for _ in range(3))
    off = min(scan_cpu(lines, False) for _ in range(3))
    print(f"2. storm log {len(raw) / 1e6:.1f} MB, {len(lines)} lines = {log_s:.0f} s at {a.kb_s:.0f} KB/s")
    print(f"   line reader with the watch: {on:.3f} CPU s = {100 * on / log_s:.2f} % of a core")
    print(f"   line reader, watch stubbed: {off:.3f} CPU s = {100 * off / log_s:.2f} % of a core")
    print(f"   the watch's own share: {100 * (on - off) / log_s:.3f} % of a core")
    assert health.HealthWatch().feed_line("WARN: grad_norm is not finite: nan") is not None
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["stall"]:
        return stall_main(argv[1:])
    return divergence_main(argv[1:] if argv[:1] == ["divergence"] else argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
