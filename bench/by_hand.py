#!/usr/bin/env python3
"""What the tool adds to a run's wall time: the SAME verl command a tool run's attempt 1 ran, run by hand.

Rebuilds attempt 1's argv from the run's ``spec.json`` exactly as the supervisor does
(``overrides.build_command(spec, features)``), points it at a fresh checkpoint dir / hydra dir (appended
overrides: the last value wins in Hydra), runs it in the spec's workdir with the environment the supervisor gives
verl (this process's environment + the inventory host's ``env`` table + the spec's ``env`` + ``PYTHONUNBUFFERED``),
and compares wall times::

    by hand:   verl started -> verl exited
    the tool:  `inv launch` called -> `inv watch` returned   (gpu/lib.sh state marks, seconds since the epoch)

Usage: ``python3 bench/by_hand.py RUN_DIR --state /tmp/dapo/state/a --inventory /tmp/dapo/hosts.toml [--host gpu]
[--log OUT/by-hand.log]``. Prints a table (never a pass/fail assertion).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dapo_ops.core import features
from dapo_ops.control.inventory import hosts_file as inventory
from dapo_ops.core import overrides  # noqa: E402


def by_hand_argv(spec: dict, ckpt_dir: str, hydra_dir: str) -> list[str]:
    fs = features.FeatureSet.from_json(spec.get("features") or [], spec.get("disabled_features") or ())
    return overrides.build_command(spec, fs) + [f"trainer.default_local_dir={ckpt_dir}", f"hydra.run.dir={hydra_dir}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--state", required=True, help="gpu/lib.sh state prefix of the tool run (<p>.launch_t0, .watch_t1)")
    ap.add_argument("--inventory", required=True)
    ap.add_argument("--host", default="gpu")
    ap.add_argument("--log", default="")
    ap.add_argument("--timeout", type=float, default=560)
    a = ap.parse_args()
    run_dir = Path(a.run_dir)
    spec = json.loads((run_dir / "spec.json").read_text())
    rec = json.loads((run_dir / "run.json").read_text())
    host = inventory.load(a.inventory).hosts[a.host]
    work = Path(tempfile.mkdtemp(prefix="by-hand-", dir=str(run_dir.parent)))
    argv = by_hand_argv(spec, str(work / "checkpoints"), str(work / "hydra"))
    env = dict(os.environ)
    env.update(host.env or {})
    env.update({k: str(v) for k, v in (spec.get("env") or {}).items()})
    env["PYTHONUNBUFFERED"] = "1"
    log = Path(a.log) if a.log else work / "verl.log"
    t0 = time.time()
    with open(log, "wb") as fh:
        try:
            rc = subprocess.run(
                argv,
                cwd=spec.get("workdir") or None,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=a.timeout,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    hand = time.time() - t0
    t_launch = float(Path(a.state + ".launch_t0").read_text())
    t_watch = float(Path(a.state + ".watch_t1").read_text())
    tool = t_watch - t_launch
    att = rec["attempts"][0]
    verl_tool = att["ended_at"] - att["started_at"]
    print(f"same verl command by hand vs through the tool (run {rec['run_id']}, {rec['status']}; by hand rc={rc})")
    print(f"{'what':>34} {'seconds':>9}")
    print(f"{'by hand: verl start -> exit':>34} {hand:9.1f}")
    print(f"{'tool: inv launch -> inv watch end':>34} {tool:9.1f}")
    print(f"{'tool: its verl start -> exit':>34} {verl_tool:9.1f}")
    print(f"{'added by the tool (tool - hand)':>34} {tool - hand:9.1f}   target < 5 s")
    print(f"{'outside verl (tool - its verl)':>34} {tool - verl_tool:9.1f}   (no verl-to-verl run noise)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
