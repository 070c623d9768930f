#!/usr/bin/env python3
"""Preflight scaling: every preflight check on 1 vs 3 (or 8) sandbox hosts, ratio target <= 1.5.

    DAPO_BENCH_ID=26 .venv/bin/python bench/preflight_fanout.py --counts 1,8 --repeat 3

Brings the bench up to the largest count itself (``sandbox/bench.sh up N``).

Puts a tiny model and two RL parquet files into each host's runs dir (host side of /verl/dapo_runs, so the
checks pass), then runs ``bench/fanout.py --task preflight`` (the remote engineer's scaling harness) with
``bench/fanout.py``'s ``preflight_host`` as the per-host function (``inproc``: ``run_all`` per host, so every host
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

from dapo_ops.control.inventory import hosts_file as inventory  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bid = os.environ.get("DAPO_BENCH_ID", "0")
    ap.add_argument("--counts", default="1,3,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true")
    ap.add_argument("--floor-only", action="store_true", help="the exec floor table alone")
    ap.add_argument("--no-reuse", action="store_true", help="inproc without the control masters (inv preflight reuses)")
    a = ap.parse_args()
    state = Path(f"/var/tmp/dapo-bench-{bid}")
    want = max(int(x) for x in a.counts.split(","))
    if not (state / "hosts.toml").exists() or len(inventory.load(state / "hosts.toml").hosts) < want:
        subprocess.run(
            ["bash", str(REPO / "sandbox" / "bench.sh"), "up", str(want)],
            check=True,
            env=dict(os.environ, DAPO_BENCH_ID=bid),
            stdout=subprocess.DEVNULL,
        )
    inv = inventory.load(state / "hosts.toml")
    for name in inv.hosts:
        base = state / "hosts" / name / "runs" / "pf-inputs"
        make_model(base / "model", max_pos=4096)
        make_parquet(base / "train.parquet", 64)
        make_parquet(base / "val.parquet", 8)
    cin = "/verl/dapo_runs/pf-inputs"
    task_args = (
        f"--model {cin}/model --train-file {cin}/train.parquet --val-file {cin}/val.parquet --framework fsdp "
        "--max-response-length 1024 --swanlab-mode disabled"
    )
    argv = (
        [
            sys.executable,
            str(REPO / "bench" / "fanout.py"),
            "--task",
            "preflight",
            "--task-args",
            task_args,
            "--counts",
            a.counts,
            "--repeat",
            str(a.repeat),
        ]
        + (["--no-cli"] if a.no_cli else [])
        + ([] if a.no_reuse else ["--reuse"])
    )
    rc = 0 if a.floor_only else subprocess.call(argv, env=dict(os.environ, DAPO_PREFLIGHT_BENCH_INPUTS=cin))
    if not (a.no_cli or a.floor_only):
        cold(list(inv.hosts), [int(x) for x in a.counts.split(",")], a.repeat, task_args, str(state / "hosts.toml"))
    floor(inv, [int(x) for x in a.counts.split(",")], a.repeat, task_args, str(state / "hosts.toml"))
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

    exe = exe_dapo_ops()
    wall: dict[int, list[float]] = {n: [] for n in counts}
    cpu: dict[int, list[float]] = {n: [] for n in counts}
    rcs: dict[int, int] = {n: 0 for n in counts}
    tick = os.sysconf("SC_CLK_TCK")
    seq = int(time.time()) % 100000 * 100
    for _ in range(repeat):
        for n in counts:
            seq += 1
            argv = [
                exe,
                "-H",
                ",".join(names[:n]),
                "preflight",
                "--inventory",
                inv_path,
                *task_args.split(),
                "--override",
                f"trainer.log_val_generations={seq}",
            ]
            c0, t0 = _busy_ticks(), time.perf_counter()
            p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            wall[n].append(time.perf_counter() - t0)
            cpu[n].append((_busy_ticks() - c0) / tick)
            rcs[n] = rcs[n] or p.returncode
    one = statistics.median(wall[counts[0]])
    t = Table(
        title=f"preflight cold (a new override per run: every compose runs), cli, median of {repeat} "
        "(target: N hosts <= 1.5x one host)",
        title_justify="left",
    )
    for col in ("hosts", "wall s", "ratio vs 1 host", "verdict", "machine cpu s", "note"):
        t.add_column(col, justify="left" if col in ("verdict", "note") else "right")
    for n in counts:
        w = statistics.median(wall[n])
        verdict = "" if n == counts[0] else ("ok" if w / one <= 1.5 else "SLOW")
        t.add_row(
            str(n),
            f"{w:.2f}",
            f"{w / one:.2f}",
            verdict,
            f"{statistics.median(cpu[n]):.2f}",
            f"exit {rcs[n]}" if rcs[n] else "",
        )
    Console(width=140).print(t)


def floor(inv, counts: list[int], repeat: int, task_args: str, inv_path: str) -> None:
    """The exec floor: ``docker exec <container> true`` alone on the first N hosts at once, over each host's
    reused connection (``fanout.run(..., reuse=True)``, the path ``inv preflight`` takes), median wall s and machine
    CPU s of ``repeat`` runs. Every preflight pays exactly one such exec per host (the probe runs in it); what the
    execs alone cost on N hosts minus on 1 host is added to any N-host preflight on this machine, so the lowest
    CLI ratio the warm preflight can reach here is ``(cli_1 + exec_N - exec_1) / cli_1`` (cli_1: the warm
    1-host CLI wall, measured again here in the same rounds) even with a probe that costs nothing."""
    from rich.console import Console
    from rich.table import Table

    from dapo_ops.control.remote import fanout

    def noop_exec(target):
        target.run("true", check=True, timeout=60)
        return None

    hosts = list(inv.hosts.values())
    tick = os.sysconf("SC_CLK_TCK")
    wall: dict[int, list[float]] = {n: [] for n in counts}
    cpu: dict[int, list[float]] = {n: [] for n in counts}
    fanout.run(hosts[: max(counts)], noop_exec, timeout=120, reuse=True)  # warm the control masters
    cli1 = [exe_dapo_ops(), "-H", hosts[0].name, "preflight", "--inventory", inv_path, *task_args.split()]
    subprocess.run(cli1, capture_output=True, timeout=600)  # its compose answered from the cache from now on
    cli: list[float] = []
    for _ in range(max(repeat, 3)):
        t0 = time.perf_counter()
        subprocess.run(cli1, capture_output=True, timeout=600)
        cli.append(time.perf_counter() - t0)
        for n in counts:
            c0, t0 = _busy_ticks(), time.perf_counter()
            res = fanout.run(hosts[:n], noop_exec, timeout=120, reuse=True)
            wall[n].append(time.perf_counter() - t0)
            cpu[n].append((_busy_ticks() - c0) / tick)
            bad = [r for r in res if not r.ok]
            if bad:
                raise SystemExit(f"exec floor: {bad[0].host}: {bad[0].message}")
    one = statistics.median(wall[counts[0]])
    t = Table(
        title=f"exec floor: `docker exec <c> true` alone on N hosts at once, reused connections, median of "
        f"{max(repeat, 3)} (what every N-host preflight pays on this machine before its probe runs)",
        title_justify="left",
    )
    for col in ("hosts", "wall s", "ratio vs 1 host", "machine cpu s", "cpu s per host", "adds to an N-host run s"):
        t.add_column(col, justify="right")
    for n in counts:
        w = statistics.median(wall[n])
        c = statistics.median(cpu[n])
        t.add_row(str(n), f"{w:.2f}", f"{w / one:.2f}", f"{c:.2f}", f"{c / n:.3f}", f"{w - one:.2f}")
    Console(width=140).print(t)
    c1, add = statistics.median(cli), statistics.median(wall[counts[-1]]) - one
    print(
        f"machine: {os.cpu_count()} CPUs shared by every sandbox host; warm 1-host CLI {c1:.2f} s (same rounds): the "
        f"lowest warm {counts[-1]}-host CLI ratio one docker exec per host allows here is ({c1:.2f} + {add:.2f}) / "
        f"{c1:.2f} = {(c1 + add) / c1:.2f} (target 1.5), before the probe's own CPU"
    )


def exe_dapo_ops() -> str:
    return str(Path(sys.executable).parent / "dapo-ops")


if __name__ == "__main__":
    sys.exit(main())
