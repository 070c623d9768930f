#!/usr/bin/env python3
"""Run-health benchmark (no hosts: the real supervisor process with a fake verl on this machine; issue 42).

One function per fault kind, each returning one row of figures; ``main`` prints a table per kind.

* **Stalls** (:func:`stall_after_step`; kind ``stall-after-step-1`` and, for comparison, a stall after step 5): a
  fake verl logs steps of ``--step-s`` seconds (verl 0.9.1's step line: ``timing_s/step``, ``timing_s/gen``,
  ``training/global_step``; verl/trainer/ppo/v1/trainer_base.py:473, :1935), then after step N goes silent with its
  processes alive (two actor ranks parked in a collective: ``all_reduce`` of a module at ``torch/distributed/
  distributed_c10d.py``, so the supervisor's py-spy dumps read that frame: cause ``collective``, one retry). Measured: time from the last step line
  written (the fake's own stamp) to the supervisor's stall verdict (attempt 1's ``ended_at`` in run.json: the
  stack dumps and the teardown included), the limit it recorded (``stall_after_s``: 5 x the longest step, at least
  ``stall_floor_s``), the silence it saw when it called it (``idle_s``), and the verdict's cause. Targets: the
  limit is max(floor, 5 x step 1's ``timing_s/step``), never HANG_TIMEOUT (3600 s here); verdict - last step <=
  limit + poll + dumps + teardown (< limit + 30 s); cause ``collective`` and the retry finishes the run.

Usage: ``.venv/bin/python bench/health_stall.py [--repeats 2] [--step-s 0.3] [--floor-s 60] [--kinds stall-after-step-1]``.
Prints tables; exit 1 when a row misses its target. Figures: bench/health.md "Stalls".
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from dapo_ops.agent import runfiles  # noqa: E402
from dapo_ops.agent.supervisor.stall import STALL_FACTOR  # noqa: E402
from reaction import FACTORY, FAKE_HEAD, make_run, stamps, start  # noqa: E402  (bench/reaction.py: the same supervisor harness)

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="runs per stall kind")
    ap.add_argument("--step-s", type=float, default=0.3, help="step time of the fake verl (s)")
    ap.add_argument("--floor-s", type=float, default=60.0, help="the supervisor's stall_floor_s (s)")
    ap.add_argument("--kinds", default="", help="comma-separated kinds to run (default: all of %s)" % ", ".join(KINDS))
    a = ap.parse_args()
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


if __name__ == "__main__":
    sys.exit(main())
