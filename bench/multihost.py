#!/usr/bin/env python3
"""Ray cluster bring-up and teardown on the sandbox bench (dapo_ops.control.launch.raycluster), 2 or 3 hosts.

    DAPO_BENCH_ID=8 bash sandbox/bench.sh up 3
    DAPO_BENCH_ID=8 .venv/bin/python bench/multihost.py --hosts h1,h2 --repeat 2

Per repeat: ``up`` = :func:`dapo_ops.control.launch.raycluster.start` until every node joined (s); ``head stop`` = ending the
head's ``ray start`` session the way the supervisor does at the end of a run (s); ``workers gone`` = from the head
stop until no Ray process is left on any worker (s; each worker's session leader ends its node after
``cluster.HEAD_GONE_REFUSALS`` refused probes ``cluster.HEAD_PROBE_S`` apart); ratio = workers gone / that bound. Exit 0 always (a benchmark reports, it does not judge CI).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from dapo_ops.core import raynodes  # noqa: E402
from dapo_ops.core import topology as cluster  # noqa: E402
from dapo_ops.control.launch import raycluster as cluster_ops  # noqa: E402
from dapo_ops.control.inventory import hosts_file as inventory  # noqa: E402
from dapo_ops.control.remote import bundle as remote_bundle  # noqa: E402
from dapo_ops.control.remote.target import Target  # noqa: E402

RUN_DIR = raynodes.cluster_dir("/verl/dapo_runs", "bench-multihost")


def ray_left(t: Target) -> int:
    res = t.run("ps -eo args | grep -cE '[r]aylet|[g]cs_server|[r]ay start' || true", timeout=30, check=False)
    try:
        return int((res.stdout or "0").strip() or 0)
    except ValueError:
        return -1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="h1,h2")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    bid = os.environ.get("DAPO_BENCH_ID", "0")
    inv = inventory.load(f"/var/tmp/dapo-bench-{bid}/hosts.toml")
    hosts = [inv.hosts[n] for n in a.hosts.split(",")]
    targets = {h.name: Target(h, h.container) for h in hosts}
    nodes = [cluster.Node(h.name, h.address, h.devices) for h in hosts]
    topo = cluster.plan_topology("dapo", nodes)
    head_t = targets[hosts[0].name]
    rows = []
    for _ in range(a.repeat):
        t0 = time.monotonic()
        handle = cluster_ops.start(
            topo, targets, accelerator=hosts[0].accelerator, python=hosts[0].python, run_dir=RUN_DIR
        )
        up = time.monotonic() - t0
        t1 = time.monotonic()
        # the way the supervisor ends it: the bundle op dapo_ops.agent.raysession stop <pid file> <grace s>
        remote_bundle.run_op(
            head_t,
            "raysession",
            ["stop", handle.nodes[0]["pid_file"], "15"],
            python=hosts[0].python,
            site=False,
            timeout=90,
        )
        head_stop = time.monotonic() - t1
        t2 = time.monotonic()
        gone = None
        while time.monotonic() - t2 < 120:
            if all(ray_left(targets[h.name]) == 0 for h in hosts[1:]):
                gone = time.monotonic() - t2
                break
            time.sleep(0.5)
        cluster_ops.stop(nodes, targets, run_dir=RUN_DIR, python=hosts[0].python)
        rows.append((up, head_stop, gone))
    for t in targets.values():
        t.close()
    table = Table(title=f"Ray cluster on {len(hosts)} sandbox hosts (bench {bid}), {a.repeat} repeats")
    for col in ("measure", "median s", "max s", "ratio to the head-gone bound"):
        table.add_column(col)
    for i, name in enumerate(("up (all nodes joined)", "head session stop", "workers gone after head stop")):
        vals = [r[i] for r in rows if r[i] is not None]
        if not vals:
            table.add_row(name, "timeout", "-", "-")
            continue
        med = statistics.median(vals)
        table.add_row(
            name,
            f"{med:.1f}",
            f"{max(vals):.1f}",
            f"{med / (cluster.HEAD_GONE_REFUSALS * cluster.HEAD_PROBE_S):.2f}" if i == 2 else "-",
        )
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
