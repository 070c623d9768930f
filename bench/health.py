#!/usr/bin/env python3
"""Training-health benchmark (issue 42 item 1; no hosts).

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

Usage: ``.venv/bin/python bench/health.py [--runs 3] [--kb-s 133]``. Prints the figures (bench/health.md).
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

from dapo_ops.agent.supervisor import follow, record  # noqa: E402
from dapo_ops.core import classify, health  # noqa: E402
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
        if t0 is not None and rec.get("status") in ("failed", "succeeded", "stopped"):
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kb-s", type=float, default=133.0)
    a = ap.parse_args()
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


if __name__ == "__main__":
    sys.exit(main())
