#!/usr/bin/env python3
"""Figures of runs the tool drove (real verl on the device, or the stand-in in a rehearsal), from their run.json.

Per attempt: class, who ended it, teardown (kill start -> every own process gone, incl. the attempt's Ray
daemons), device memory right after the teardown (nvidia-smi), and the OOM reaction: the device-OOM line seen
-> the next attempt's verl process started (target <= 3 s + teardown; the GPU retry delay is 3 s of it).
With ``--state <gpu/lib.sh state prefix>`` also what the tool adds to the wall time: ``inv launch`` called ->
attempt 1's verl started, and the last verl exit -> ``inv watch`` returned (target < 5 s in all).

Usage: ``python3 bench/real_runs.py RUN_JSON [--state /tmp/dapo/state/a]``. Prints a table; never fails a run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _read(p: Path) -> float | None:
    try:
        return float(p.read_text().strip())
    except (OSError, ValueError):
        return None


def figures(rec: dict, launch_t0: float | None = None, watch_t1: float | None = None) -> dict:
    """Pure: run.json dict (+ optional wall-clock marks, seconds since the epoch) -> figures dict."""
    atts = rec.get("attempts") or []
    rows = []
    for i, a in enumerate(atts):
        nxt = atts[i + 1] if i + 1 < len(atts) else None
        oom_at = a.get("oom_line_at")
        rows.append(
            {
                "n": a.get("n"),
                "cls": (a.get("verdict") or {}).get("cls"),
                "killed_by": a.get("killed_by"),
                "exit": a.get("exit_code"),
                "step_reached": a.get("step_reached"),
                "resumed_from": a.get("resumed_from"),
                "verl_s": (a["ended_at"] - a["started_at"]) if a.get("ended_at") and a.get("started_at") else None,
                "teardown_s": a.get("teardown_s"),
                "mem_after_mib": a.get("device_mem_after_mib"),
                "reaction_s": (nxt["started_at"] - oom_at) if (nxt and oom_at) else None,
                "features": ",".join(
                    f["name"] + ("(" + f["source"] + ")" if f["source"].startswith("oom-retry") else "")
                    for f in a.get("features") or []
                ),
                "changes": a.get("setting_changes") or {},
            }
        )
    out = {
        "run_id": rec.get("run_id"),
        "status": rec.get("status"),
        "step": rec.get("step"),
        "total": rec.get("total_steps"),
        "attempts": rows,
    }
    if launch_t0 and atts and atts[0].get("started_at"):
        out["pre_s"] = atts[0]["started_at"] - launch_t0
    if atts and atts[-1].get("ended_at") and rec.get("ended_at"):
        out["record_s"] = rec["ended_at"] - atts[-1]["ended_at"]  # verl exit -> terminal run.json written
    if watch_t1 and atts and atts[-1].get("ended_at"):
        out["post_s"] = watch_t1 - atts[-1]["ended_at"]
    if launch_t0 and watch_t1:
        out["wall_s"] = watch_t1 - launch_t0
    return out


def _f(v, fmt="{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def render(fig: dict) -> str:
    lines = [
        f"run {fig['run_id']}: {fig['status']}, step {fig['step']}/{fig['total']}, {len(fig['attempts'])} attempt(s)"
    ]
    lines.append(
        f"{'n':>2} {'class':>13} {'ended by':>8} {'exit':>4} {'steps':>7} {'verl s':>8} {'teardown s':>10} "
        f"{'OOM->next verl s':>16} {'(3+teardown)':>12} {'mem after MiB':>13}  features / changes"
    )
    for r in fig["attempts"]:
        budget = 3.0 + r["teardown_s"] if r["teardown_s"] is not None else None
        steps = f"{r['resumed_from'] or 0}->{r['step_reached']}"
        lines.append(
            f"{r['n']:>2} {str(r['cls']):>13} {str(r['killed_by'] or 'exit'):>8} {str(r['exit']):>4} "
            f"{steps:>7} {_f(r['verl_s'], '{:.1f}'):>8} {_f(r['teardown_s']):>10} {_f(r['reaction_s']):>16} "
            f"{_f(budget):>12} {str(r['mem_after_mib'] or '-'):>13}  {r['features']} {r['changes'] or ''}"
        )
    if "pre_s" in fig or "post_s" in fig:
        tool = (fig.get("pre_s") or 0.0) + (fig.get("post_s") or 0.0)
        lines.append(
            f"tool overhead: launch->verl started {_f(fig.get('pre_s'))} s + last verl exit->watch returned "
            f"{_f(fig.get('post_s'))} s = {tool:.2f} s (target < 5 s; the watch polls every 2 s, the "
            f"terminal run.json was written {_f(fig.get('record_s'))} s after the exit); "
            f"wall {_f(fig.get('wall_s'), '{:.1f}')} s"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_json", nargs="+")
    ap.add_argument("--state", default="", help="gpu/lib.sh state prefix: <prefix>.launch_t0 / .watch_t1")
    a = ap.parse_args()
    t0 = _read(Path(a.state + ".launch_t0")) if a.state else None
    t1 = _read(Path(a.state + ".watch_t1")) if a.state else None
    for p in a.run_json:
        try:
            rec = json.loads(Path(p).read_text())
        except (OSError, ValueError) as e:
            print(f"{p}: no run.json ({e})")
            continue
        print(render(figures(rec, t0, t1)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
