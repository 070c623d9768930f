#!/usr/bin/env python3
"""Preflight scaling: every preflight check on 1 vs 3 (or 8) sandbox hosts, ratio target <= 1.5.

    DAPO_BENCH_ID=26 .venv/bin/python bench/preflight_fanout.py --counts 1,8 --repeat 3

Brings the bench up to the largest count itself (``sandbox/bench.sh up N``).

Puts a tiny model and two RL parquet files into each host's runs dir (host side of /verl/dapo_runs, so the
checks pass), then runs ``bench/fanout.py --task preflight`` (the remote engineer's scaling harness) with
``dapo_ops.cli.preflight.bench_fn`` as the per-host function (``inproc``: ``run_all`` per host, so every host
composes: no grouping) and ``inv preflight`` as the CLI form. Those runs repeat one command line, so after the
warm-up every container answers the compose from its cache (``warm``). The ``cold`` table that follows times
the CLI with a fresh ``--override trainer.log_val_generations=<n>`` per run: a request no container has
composed, as after any change of settings (the Hydra compose costs ~1.3 s of CPU on this machine).

Cost model per host: ONE round trip (one docker exec of the probe: devices, verl, inputs, disk, and the compose
fingerprint; a docker inspect only when it fails) over the host's reused SSH connection (its control master,
dapo_ops/control/remote/sshmux.py, as ``inv preflight`` does; ``--no-reuse`` times the in-process form over fresh
connections instead). The Hydra compose runs once per group of identical hosts (the first host's exec,
dapo_ops/control/preflight/group.py); a host with another verl config or hydra composes in a second round trip.
Each row also shows the CPU seconds the whole machine spent (controller + every sandbox host: 2 cores shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from inputs_helpers import make_model, make_parquet  # noqa: E402

from dapo_ops.control import inventory  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bid = os.environ.get("DAPO_BENCH_ID", "0")
    ap.add_argument("--counts", default="1,3,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--no-reuse", action="store_true", help="inproc without the control masters (inv preflight reuses)")
    a = ap.parse_args()
    state = Path(f"/var/tmp/dapo-bench-{bid}")
    want = max(int(x) for x in a.counts.split(","))
    if not (state / "hosts.toml").exists() or len(inventory.load(state / "hosts.toml").hosts) < want:
        subprocess.run(["bash", str(REPO / "sandbox" / "bench.sh"), "up", str(want)], check=True,
                       env=dict(os.environ, DAPO_BENCH_ID=bid), stdout=subprocess.DEVNULL)
    inv = inventory.load(state / "hosts.toml")
    for name in inv.hosts:
        base = state / "hosts" / name / "runs" / "pf-inputs"
        make_model(base / "model", max_pos=4096)
        make_parquet(base / "train.parquet", 64)
        make_parquet(base / "val.parquet", 8)
    cin = "/verl/dapo_runs/pf-inputs"
    task_args = (f"--model {cin}/model --train-file {cin}/train.parquet --val-file {cin}/val.parquet --framework fsdp "
                 "--max-response-length 1024 --swanlab-mode disabled")
    argv = [sys.executable, str(REPO / "bench" / "fanout.py"), "--task", "preflight", "--task-args", task_args,
            "--counts", a.counts, "--repeat", str(a.repeat)] + (["--no-cli"] if a.no_cli else []) \
        + ([] if a.no_reuse else ["--reuse"])
    rc = subprocess.call(argv, env=dict(os.environ, DAPO_PREFLIGHT_BENCH_INPUTS=cin))
    if not a.no_cli:
        cold(list(inv.hosts), [int(x) for x in a.counts.split(",")], a.repeat, task_args, str(state / "hosts.toml"))
    return rc


def _busy_ticks() -> int:
    """Busy CPU ticks of the whole machine so far (``/proc/stat`` user+nice+system+irq+softirq)."""
    with open("/proc/stat") as fh:
        f = fh.readline().split()
    return sum(int(f[i]) for i in (1, 2, 3, 6, 7))


def cold(names: list[str], counts: list[int], repeat: int, task_args: str, inv_path: str) -> None:
    """The cold table: ``inv preflight`` on the first N hosts with a request no container has composed yet
    (median wall s and machine CPU s of ``repeat`` runs, counts interleaved)."""
    from rich.console import Console
    from rich.table import Table

    exe = str(Path(sys.executable).parent / "dapo-ops")
    wall: dict[int, list[float]] = {n: [] for n in counts}
    cpu: dict[int, list[float]] = {n: [] for n in counts}
    rcs: dict[int, int] = {n: 0 for n in counts}
    tick = os.sysconf("SC_CLK_TCK")
    seq = int(time.time()) % 100000 * 100
    for _ in range(repeat):
        for n in counts:
            seq += 1
            argv = [exe, "-H", ",".join(names[:n]), "preflight", "--inventory", inv_path, *task_args.split(),
                    "--override", f"trainer.log_val_generations={seq}"]
            c0, t0 = _busy_ticks(), time.perf_counter()
            p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            wall[n].append(time.perf_counter() - t0)
            cpu[n].append((_busy_ticks() - c0) / tick)
            rcs[n] = rcs[n] or p.returncode
    one = statistics.median(wall[counts[0]])
    t = Table(title=f"preflight cold (a new override per run: every compose runs), cli, median of {repeat} "
                    "(target: N hosts <= 1.5x one host)", title_justify="left")
    for col in ("hosts", "wall s", "ratio vs 1 host", "verdict", "machine cpu s", "note"):
        t.add_column(col, justify="left" if col in ("verdict", "note") else "right")
    for n in counts:
        w = statistics.median(wall[n])
        verdict = "" if n == counts[0] else ("ok" if w / one <= 1.5 else "SLOW")
        t.add_row(str(n), f"{w:.2f}", f"{w / one:.2f}", verdict, f"{statistics.median(cpu[n]):.2f}",
                  f"exit {rcs[n]}" if rcs[n] else "")
    Console(width=140).print(t)


if __name__ == "__main__":
    sys.exit(main())
