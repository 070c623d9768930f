#!/usr/bin/env python3
"""Fan-out scaling: wall time of a fan-out task on 1 host vs N hosts of the sandbox bench, in one run.

    DAPO_BENCH_ID=2 .venv/bin/python bench/fanout.py --counts 1,3,8 --repeat 3

Brings the bench up to the largest host count first (``sandbox/bench.sh up N``; ``--no-up`` skips counts the
bench lacks instead). Each row shows the median 1-minute load average while it was measured (shared machine).

Two measurements per host count (median of ``--repeat`` runs, after one warm-up):

- ``inproc``: :func:`dapo_ops.control.remote.fanout.run` of the task's per-host function (what the task does after parsing);
- ``cli``: the whole ``dapo-ops -H h1,..,hN <task>`` process (Python start-up + imports included).

Target: time(N hosts) <= 1.5 x time(1 host). Exit 0 always (a benchmark reports, it does not judge CI).

Hook for other fan-out tasks (e.g. preflight): ``--task preflight --task-args "--model /m ..."`` times the CLI
form; the in-process form is timed with the task's per-host function: :func:`preflight_host` for ``preflight``,
``dapo_ops.cli.<task>.check_host(target)`` where it exists (``dapo_ops/cli/hosts.py``); otherwise only ``cli`` is
reported.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from dapo_ops.control.remote import fanout  # noqa: E402
from dapo_ops.control.inventory import hosts_file as inventory  # noqa: E402

TARGET_RATIO = 1.5


#: container dir holding ``model/``, ``train.parquet``, ``val.parquet`` for :func:`preflight_host`
PREFLIGHT_INPUTS_ENV = "DAPO_PREFLIGHT_BENCH_INPUTS"


def preflight_host(target):
    """Per-host function of ``--task preflight``: every check (compose included) of a DAPO draft whose inputs live
    in ``$DAPO_PREFLIGHT_BENCH_INPUTS`` (default ``/verl/dapo_runs/pf-inputs``; made by ``bench/preflight_fanout.py``),
    drafted as the launch drafts (:func:`dapo_ops.control.launch.service.draft_for`). SwanLab off (no network wait in
    a timing)."""
    from dapo_ops.control.launch import service as svc
    from dapo_ops.control.swanlab_settings import SwanlabSettings
    from dapo_ops.control.preflight.checks import run_all
    from dapo_ops.control.preflight.result import FAIL
    from dapo_ops.control.remote.fanout import Row

    base = os.environ.get(PREFLIGHT_INPUTS_ENV, "/verl/dapo_runs/pf-inputs").rstrip("/")
    settings = {
        "model": f"{base}/model",
        "train_file": f"{base}/train.parquet",
        "val_file": f"{base}/val.parquet",
        "framework": "fsdp",
        "steps": 4,
        "save_freq": 2,
        "max_prompt_length": 512,
        "max_response_length": 1024,
    }
    req = svc.LaunchRequest(mode="dapo", settings=settings, sw=SwanlabSettings(mode="disabled"))
    draft = svc.draft_for(svc.LaunchFacts(host=target.host, run_id="20261129-000000-bnch"), req)
    checks = run_all(target, draft)
    bad = [c for c in checks if c.status == FAIL]
    return Row(ok=not bad, kind="preflight" if bad else "", message=str(bad[0]) if bad else "", data={"checks": checks})


def per_host_fn(task: str):
    if task == "preflight":
        return preflight_host
    mod = importlib.import_module(f"dapo_ops.cli.{task}")
    return getattr(mod, "check_host", None)


def time_inproc(hosts, fn, reuse: bool = False) -> tuple[float, float, int, float]:
    """(wall s, controller CPU s of this process, failed hosts, sum of the per-host times s) for one fan-out.
    A serial fan-out would have wall ~= the sum of per-host times. ``reuse``: over each host's control master
    (``Target.reuse``, what ``status`` and ``preflight`` do)."""
    c0, t0 = time.process_time(), time.perf_counter()
    res = fanout.run(hosts, fn, timeout=120, reuse=reuse)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, sum(not r.ok for r in res), sum(r.seconds for r in res)


def time_cli(names: list[str], task: str, task_args: str, inv_path: str, repeat: int) -> tuple[float, int]:
    argv = [
        str(Path(sys.executable).parent / "dapo-ops"),
        "-H",
        ",".join(names),
        task,
        "--inventory",
        inv_path,
        *shlex.split(task_args),
    ]
    times, rc = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        times.append(time.perf_counter() - t0)
        rc = rc or p.returncode
    return statistics.median(times), rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bid = os.environ.get("DAPO_BENCH_ID", "0")
    ap.add_argument(
        "--inventory",
        default=f"/var/tmp/dapo-bench-{bid}/hosts.toml",
        help="hosts.toml of the bench (default: the DAPO_BENCH_ID bench's)",
    )
    ap.add_argument("--counts", default="1,3,8", help="host counts to time (those above the bench size are skipped)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (median reported)")
    ap.add_argument("--task", default="hosts", help="fan-out task to time (default: hosts)")
    ap.add_argument("--task-args", default="", help="extra task flags for the cli form")
    ap.add_argument("--no-cli", action="store_true", help="skip the whole-process measurement")
    ap.add_argument("--no-up", action="store_true", help="do not bring the bench up to the largest count")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="inproc: run over each host's reused SSH connection (control master), as the task does",
    )
    a = ap.parse_args()

    want = max(int(x) for x in a.counts.split(","))
    have = len(inventory.load(a.inventory).hosts) if os.path.exists(a.inventory) else 0
    if not a.no_up and have < want:
        subprocess.run(
            ["bash", str(REPO / "sandbox" / "bench.sh"), "up", str(want)],
            check=True,
            env=dict(os.environ, DAPO_BENCH_ID=bid),
            stdout=subprocess.DEVNULL,
        )

    inv = inventory.load(a.inventory)
    all_hosts = list(inv.hosts.values())
    counts = [n for n in (int(x) for x in a.counts.split(",")) if n <= len(all_hosts)]
    skipped = [x for x in a.counts.split(",") if int(x) > len(all_hosts)]
    fn = per_host_fn(a.task)

    if fn is not None:  # warm-up: imports, first connections, page cache on the hosts
        fanout.run(all_hosts[: max(counts)], fn, timeout=120, reuse=a.reuse)

    # interleave host counts within each repeat so load drift on the shared machine hits all counts alike
    inproc: dict[int, list[float]] = {n: [] for n in counts}
    cli: dict[int, list[float]] = {n: [] for n in counts}
    cpu_s: dict[int, list[float]] = {n: [] for n in counts}
    serial_s: dict[int, list[float]] = {n: [] for n in counts}
    notes: dict[tuple[int, str], str] = {}
    loads: dict[tuple[int, str], list[float]] = {}
    load0 = os.getloadavg()[0]
    for _ in range(a.repeat):
        for n in counts:
            hosts = all_hosts[:n]
            if fn is not None:
                loads.setdefault((n, "inproc"), []).append(os.getloadavg()[0])
                t, cpu, failed, serial = time_inproc(hosts, fn, reuse=a.reuse)
                inproc[n].append(t)
                cpu_s[n].append(cpu)
                serial_s[n].append(serial)
                if failed:
                    notes[(n, "inproc")] = f"{failed} failed"
            if not a.no_cli:
                loads.setdefault((n, "cli"), []).append(os.getloadavg()[0])
                t, rc = time_cli([h.name for h in hosts], a.task, a.task_args, a.inventory, 1)
                cli[n].append(t)
                if rc:
                    notes[(n, "cli")] = f"exit {rc}"
    load1 = os.getloadavg()[0]
    rows = []
    for mode, data in (("inproc", inproc), ("cli", cli)):
        if not data[counts[0]]:
            continue
        one = statistics.median(data[counts[0]])
        for n in counts:
            t = statistics.median(data[n])
            cpu = f"{statistics.median(cpu_s[n]):.2f}" if mode == "inproc" else ""
            serial = f"{statistics.median(serial_s[n]):.2f}" if mode == "inproc" else ""
            ld = f"{statistics.median(loads[(n, mode)]):.1f}"
            rows.append((a.task, n, mode, t, t / one, serial, cpu, ld, notes.get((n, mode), "")))

    how = ", inproc over reused connections" if a.reuse else ""
    table = Table(
        title=f"fan-out scaling, median of {a.repeat}{how} (target: N hosts <= {TARGET_RATIO}x one host)",
        title_justify="left",
    )
    for col in (
        "task",
        "hosts",
        "mode",
        "wall s",
        "ratio vs 1 host",
        "verdict",
        "sum of per-host s",
        "controller cpu s",
        "load",
        "note",
    ):
        table.add_column(col, justify="left" if col in ("task", "mode", "verdict", "note") else "right")
    for task, n, mode, t, ratio, serial, cpu, ld, note in rows:
        verdict = "" if n == 1 else ("ok" if ratio <= TARGET_RATIO else "SLOW")
        table.add_row(task, str(n), mode, f"{t:.2f}", f"{ratio:.2f}", verdict, serial, cpu, ld, note)
    Console(width=140).print(table)
    print(
        f"machine: {os.cpu_count()} CPUs shared by the controller and every sandbox host (sshd, dockerd, the "
        f"container's python); load average {load0:.1f} -> {load1:.1f} during the run"
    )
    if skipped:
        print(
            f"skipped host counts {', '.join(skipped)}: the bench has {len(all_hosts)} hosts "
            f"(DAPO_BENCH_ID={bid} bash sandbox/bench.sh up {max(int(x) for x in skipped)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
