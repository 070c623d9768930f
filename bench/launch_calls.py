"""Remote calls of one ``inv launch``: every host command the operator side sends, counted by kind.

    DAPO_BENCH_ID=<n> .venv/bin/python bench/launch_calls.py [--host h1] [--repeat 3] [--link-wait 0]

On an up bench (``sandbox/bench.sh up``), runs the real CLI (``python -m invoke launch -H <host> ...``) in a child
process whose :meth:`dapo_ops.control.remote.target.Target._raw` (the one funnel of every SSH / local host command: ``run``,
``host_run``, ``put_text``, ``container_state``) is wrapped to record each command. Each call is one SSH round trip
(through the host's control master when one serves); ``docker exec`` / ``nsenter`` words count the container entries
inside them, each a process start in the container. After each launch the run is stopped (``inv stop``, not counted).

Prints, per launch, the calls by kind and the wall time of ``inv launch`` (the verl stand-in, scenario
``step_time`` 0.2 s, no SwanLab: the link wait is 0), and the median over ``--repeat`` launches.

Measured 2026-12-02 on bench 20 (1 host; the shared 2-core machine under load), issue 30 items 3 and 5:

| code | host commands per launch | container entries | inv launch (median) |
|---|---|---|---|
| before (6174411: start + run.json polls every 0.5 s) | 13 / 14 / 16, median 14 (7-8 polls) | 12-15 | 7.64 s |
| after (one plan, the ``runstart`` op answers once) | 5 (8 on a fresh bundle) | 4 | 6.09 s (5 launches) |

(both keep the 4 s settle after verl started, most of the wall time; the first launch installs the bundle.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

#: (kind, pattern) in order: the first that matches a host command names it
KINDS = (
    ("start+wait op (runstart)", r"dapo_ops\.agent\.runstart"),
    ("occupancy op", r"dapo_ops\.agent\.occupancy"),
    ("preflight probe op", r"dapo_ops\.agent\.preflight"),
    ("run.json poll (runstate show)", r"dapo_ops\.core\.runstate"),
    ("supervisor start (docker exec -d)", r"dapo_ops\.agent\.supervisor"),
    ("write file (spec.json / secret.env)", r"\.dapo-tmp"),
    ("bundle check / install", r"\.complete|tar\.gz\.b64"),
    ("docker inspect (container state)", r"^docker inspect"),
    ("read a file (cat)", r"\bcat\b"),
)


def kind_of(command: str) -> str:
    for name, rx in KINDS:
        if re.search(rx, command):
            return name
    return "other: " + command[:60]


def child(out: str, args: list[str]) -> int:
    """Run ``inv <args>`` in this process with every host command recorded into ``out`` (JSON list)."""
    from dapo_ops.control.remote import target as target_mod

    calls: list[dict] = []
    orig = target_mod.Target._raw

    def counted(self, command, **kw):
        t0 = time.monotonic()
        try:
            return orig(self, command, **kw)
        finally:
            calls.append({"command": command, "s": time.monotonic() - t0})

    target_mod.Target._raw = counted
    from invoke.main import program  # what `python -m invoke` runs (tests/test_launch_bench.py)

    rc = 0
    try:
        program.run(["invoke", "-r", str(REPO), *args], exit=True)
    except SystemExit as e:
        rc = int(e.code or 0)
    finally:
        Path(out).write_text(json.dumps(calls))
    return rc


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3:])
    from inputs_helpers import make_model, make_parquet

    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="h1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--link-wait", default="0")
    a = ap.parse_args()
    bid = os.environ.get("DAPO_BENCH_ID", "0")
    state = Path(f"/var/tmp/dapo-bench-{bid}")
    runs = state / "hosts" / a.host / "runs"
    inputs = runs / "inputs"
    make_model(inputs / "model", max_pos=32768)
    make_parquet(inputs / "train.parquet")
    make_parquet(inputs / "val.parquet")
    (state / "hosts" / a.host / "sandbox" / "scenario.json").write_text(json.dumps({"step_time": 0.2}))
    cin = "/verl/dapo_runs/inputs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAPO_OPS_", "SWANLAB_"))}
    tmp = Path(tempfile.mkdtemp(prefix="launch-calls-"))
    env.update(DAPO_OPS_INVENTORY=str(state / "hosts.toml"), DAPO_OPS_CONFIG=str(tmp / "none.toml"))
    (tmp / "none.toml").touch(mode=0o600)  # no user config (a named one must exist)
    env["SWANLAB_MODE"] = "disabled"
    flags = ["--model", f"{cin}/model", "--train-file", f"{cin}/train.parquet", "--val-file", f"{cin}/val.parquet"]
    totals, walls = [], []
    for i in range(a.repeat):
        out = tmp / f"calls-{i}.json"
        argv = ["launch", "-H", a.host, *flags, "--steps", "200", "--framework", "fsdp", "--link-wait", a.link_wait]
        t0 = time.monotonic()
        res = subprocess.run(
            [sys.executable, __file__, "--child", str(out), *argv], env=env, cwd=tmp, capture_output=True, text=True
        )
        wall = time.monotonic() - t0
        calls = json.loads(out.read_text()) if out.exists() else []
        m = re.search(r"\b(\d{8}-\d{6}-[0-9a-f]{4})\b", res.stdout + res.stderr)
        if res.returncode != 0 or not m:
            print(f"launch {i + 1} failed (exit {res.returncode}): {(res.stderr or res.stdout).strip()[-300:]}")
            return 1
        subprocess.run(
            [sys.executable, "-m", "invoke", "-r", str(REPO), "stop", "-H", a.host, "--run", m.group(1)],
            env=env,
            cwd=tmp,
            capture_output=True,
        )
        by = Counter(kind_of(c["command"]) for c in calls)
        entries = sum(len(re.findall(r"\bdocker exec\b|\bnsenter\b", c["command"])) for c in calls)
        print(f"launch {i + 1}: {len(calls)} host commands ({entries} container entries), inv launch {wall:.2f} s")
        for k, n in by.most_common():
            print(f"  {n:>3}  {k}")
        totals.append((len(calls), entries))
        walls.append(wall)
    print(
        f"median of {a.repeat}: {statistics.median(t for t, _ in totals):g} host commands (SSH round trips), "
        f"{statistics.median(e for _, e in totals):g} container entries, inv launch {statistics.median(walls):.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
