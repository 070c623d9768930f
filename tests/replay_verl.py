"""Test equipment: a "verl" that replays REAL verl 0.9.1 output, and one that leaks Ray-like daemons.

``factory(spec, features, setting_changes)`` (``overrides.build_command``'s signature) returns
``[python, this file, <run_dir>]``; the behaviour of attempt ``k`` (``$DAPO_OPS_ATTEMPT``) is entry ``k-1`` of
``<run_dir>/replay.json``'s ``attempts``:

``{"log": "<path of a real log>", "exit": 1, "hang": false, "leak": false}``

The log's bytes are written to stdout as they are (ANSI, ``\\r`` redraws and all), a line at a time; then the
process exits with ``exit`` or, with ``hang``, sleeps (the peers of a real OOM block in a collective). With
``leak`` it first starts two detached "Ray daemons" with a clean environment (no ``DAPO_OPS_RUN_ID``):
one whose argv names this attempt's ``$RAY_TMPDIR`` (``--session_dir=<RAY_TMPDIR>/ray/session_x``, as raylet
and gcs_server do) and one naming ``<RAY_TMPDIR>-other`` (another run's cluster); their pids go to
``<run_dir>/leak-<k>.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def factory(spec, features, setting_changes=None):
    return [sys.executable, HERE, spec["run_dir"]]


def _daemon(session_dir: str) -> int:
    code = "import time\nwhile True: time.sleep(1)\n"
    p = subprocess.Popen(
        ["/usr/bin/env", "-i", sys.executable, "-c", code, "--session_dir=" + session_dir],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return p.pid


def main() -> int:
    run_dir = sys.argv[1]
    k = int(os.environ.get("DAPO_OPS_ATTEMPT", "1"))
    cfg = json.load(open(os.path.join(run_dir, "replay.json")))["attempts"][k - 1]
    if cfg.get("leak"):
        rtd = os.environ["RAY_TMPDIR"]
        pids = {"own": _daemon(rtd + "/ray/session_x"), "other": _daemon(rtd + "-other/ray/session_y")}
        with open(os.path.join(run_dir, "leak-%d.json" % k), "w") as fh:
            json.dump(pids, fh)
    out = sys.stdout.buffer
    with open(cfg["log"], "rb") as fh:
        for line in fh:
            out.write(line)
            out.flush()
    if cfg.get("hang"):
        time.sleep(3600)
    return int(cfg.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
