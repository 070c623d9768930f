"""Cost of the tracker check in ``inv launch``'s quick checks: one sandbox host, in-process, alternating rounds.

    DAPO_BENCH_ID=<n> .venv/bin/python bench/launch_checks.py [--host h1] [--repeat 9]

Times :func:`dapo_ops.control.launch.service.quick_checks` (container state, the occupancy rule, the quick preflight probe:
the round trips every launch makes before it writes anything) on an up bench (``sandbox/bench.sh up``), over a
fresh SSH connection each time as a launch has it:

- ``no tracker``: ``quick_checks(..., req=None)``, cloud-mode probe view: what launch did before the tracker check;
- ``cloud, tracker up``: cloud mode with ``SWANLAB_HOST`` on a plain HTTP server on the bench bridge (a reachable
  self-hosted SwanLab): the same round trips, the probe also GETs ``<host>/api`` from the container;
- ``local mode``: ``--swanlab-mode local``: no GET (nothing to reach).

Prints a table of medians and the ratio to ``no tracker`` (taken per round: the machine is shared).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from dapo_ops.control.inventory import hosts_file as inventory  # noqa: E402
from dapo_ops.control import swanlab_settings as swanlab_cfg  # noqa: E402
from dapo_ops.control.launch import service as svc  # noqa: E402
from dapo_ops.control.remote.target import Target  # noqa: E402
from inputs_helpers import make_model, make_parquet  # noqa: E402


class _Swan(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


def main() -> int:
    import os

    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="h1")
    ap.add_argument("--repeat", type=int, default=9)
    a = ap.parse_args()
    bid = os.environ.get("DAPO_BENCH_ID", "0")
    state = Path(f"/var/tmp/dapo-bench-{bid}")
    inv = inventory.load(state / "hosts.toml")
    h = inv.hosts[a.host]
    runs = state / "hosts" / a.host / "runs"  # the host side of the container's /verl/dapo_runs (tests/conftest.py)
    inputs = runs / "bench-inputs"
    make_model(inputs / "model", max_pos=32768)
    make_parquet(inputs / "train.parquet")
    make_parquet(inputs / "val.parquet")
    bridge = f"198.51.{100 + int(bid)}.1"
    srv = ThreadingHTTPServer((bridge, 0), _Swan)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://{bridge}:{srv.server_address[1]}"
    cin = "/verl/dapo_runs/bench-inputs"
    st = {
        "model": f"{cin}/model",
        "train_file": f"{cin}/train.parquet",
        "val_file": f"{cin}/val.parquet",
        "framework": "fsdp",
        "steps": 3,
        "max_response_length": 1024,
    }
    cloud = swanlab_cfg.resolve(
        {"SWANLAB_MODE": "cloud", "SWANLAB_API_KEY": "sk-bench-0000", "SWANLAB_HOST": url}, {}, stdin_isatty=False
    )
    local = swanlab_cfg.resolve({"SWANLAB_MODE": "local"}, {}, stdin_isatty=False)
    cases = {"no tracker": (cloud, False), "cloud, tracker up": (cloud, True), "local mode": (local, True)}
    times: dict[str, list[float]] = {k: [] for k in cases}

    def once(sw, with_req: bool) -> float:
        req = svc.LaunchRequest(mode="dapo", settings=st, sw=sw)
        view = svc.draft_for(svc.LaunchFacts(host=h, run_id="20261201-000000-bnch"), req)
        with Target(h) as t:
            t0 = time.monotonic()
            facts = svc.quick_checks(t, view, False, req if with_req else None)
            dt = time.monotonic() - t0
        got = (facts.get("probe") or {}).get("http") or {}
        assert bool(got) == (with_req and sw.mode == "cloud"), got
        return dt

    for k, (sw, w) in cases.items():  # warm-up: bundle installed, page cache
        once(sw, w)
    for _ in range(a.repeat):
        for k, (sw, w) in cases.items():
            times[k].append(once(sw, w))
    srv.shutdown()
    base = times["no tracker"]
    print(f"quick_checks on {a.host}, {a.repeat} rounds (seconds, median; ratio per round to 'no tracker')")
    print(f"{'case':<20} {'median s':>9} {'min s':>7} {'ratio':>6}")
    for k, v in times.items():
        ratio = statistics.median(x / b for x, b in zip(v, base))
        print(f"{k:<20} {statistics.median(v):>9.3f} {min(v):>7.3f} {ratio:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
