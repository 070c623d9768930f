#!/usr/bin/env python3
"""Preflight scaling: every preflight check on 1 vs 3 (or 8) sandbox hosts, ratio target <= 1.5.

    DAPO_BENCH_ID=26 .venv/bin/python bench/preflight_fanout.py --counts 1,8 --repeat 3

Brings the bench up to the largest count itself (``sandbox/bench.sh up N``).

Puts a tiny model and two RL parquet files into each host's runs dir (host side of /verl/dapo_runs, so the
checks pass), then runs ``bench/fanout.py --task preflight`` (the remote engineer's scaling harness) with
``dapo_ops.cli.preflight.bench_fn`` as the per-host function and ``inv preflight`` as the CLI form.
Per host preflight is ONE round trip (one docker exec running the probe and the Hydra compose; a docker inspect
only when it fails) over the host's reused SSH connection (its control master, dapo_ops/control/remote/sshmux.py,
as ``inv preflight`` does; ``--no-reuse`` times the in-process form over fresh connections instead).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
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
    return subprocess.call(argv, env=dict(os.environ, DAPO_PREFLIGHT_BENCH_INPUTS=cin))


if __name__ == "__main__":
    sys.exit(main())
