"""Start one run's supervisor and answer once verl has started (STDLIB ONLY: shipped in the bundle).

CLI in the container (bare host: its shell), what ``inv launch`` runs after it wrote ``spec.json`` (+ ``secret.env``)
into the run dir (``dapo_ops/control/launch/service.py`` ``start_run``, through ``bundle.run_op``: the one way in)::

    python3 -m dapo_ops.agent.runstart <run_dir> --workdir W --start-wait S --settle S --link-wait S

1. starts ``python3 -m dapo_ops.agent.supervisor <run_dir>`` (this interpreter, this ``PYTHONPATH``: the bundle's)
   in ``W``, in its own session, stdin from ``/dev/null``, stdout + stderr into ``<run_dir>/supervisor.log``, no other
   descriptor inherited: it outlives this op, the ``docker exec`` and the SSH session (the supervisor calls
   ``setsid`` itself too);
2. waits here, reading run.json every :data:`POLL_S` seconds (a local file read), until the supervisor moved the run
   past ``starting`` (it writes ``running`` once verl's process is started,
   ``dapo_ops/agent/supervisor/machine.py``), or it exited, or ``--start-wait`` seconds passed;
3. then watches ``--settle`` seconds more for an immediate failure (a bad override ends verl at once) and up to
   ``--link-wait`` seconds for the SwanLab link (run.json ``swanlab_url``), stopping early at a terminal status;
4. prints ONE JSON line and exits 0: ``{"started": bool, "record": run.json | null, "supervisor_exit": int | null}``
   (``started`` false: the run never left ``starting``; ``supervisor_exit``: the supervisor's exit status when it
   ended before that). Exit :data:`SPAWN_FAILED` (a line on stderr) when the supervisor could not be started at all
   (workdir or run dir missing): nothing runs.

So a launch costs one remote call for the start and its wait instead of a poll per half second (each a full SSH
round trip, ``docker exec`` and Python start). Once this op exits the supervisor's parent is the container's init
(as for every orphan in it), which reaps it when the run is over; an init that reaps nothing (``sleep infinity``)
keeps an ended supervisor as a zombie until the container restarts: it holds no resources and counts as dead
everywhere (:func:`dapo_ops.agent.procs.pid_alive`, :mod:`dapo_ops.agent.procs`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from dapo_ops.agent import runfiles
from dapo_ops.core import runstate

#: seconds between two reads of run.json while waiting (local reads: cheap)
POLL_S = 0.1
#: exit status when the supervisor could not be started (nothing runs)
SPAWN_FAILED = 3


def spawn(run_dir: str, workdir: str) -> "subprocess.Popen[bytes]":
    """Start the supervisor of ``run_dir`` detached (step 1 of the module docstring).

    :raises OSError: ``workdir`` or ``run_dir`` missing, the log not writable.
    """
    with open(os.path.join(run_dir, "supervisor.log"), "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "dapo_ops.agent.supervisor", run_dir],
            cwd=workdir or None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def _pending(rec: Optional[Dict[str, Any]]) -> bool:
    return not rec or rec.get("status") in (None, runstate.RunStatus.STARTING)


def wait(
    run_dir: str,
    exited: Callable[[], Optional[int]],
    *,
    start_wait: float,
    settle: float,
    link_wait: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Dict[str, Any]:
    """Steps 2 and 3 of the module docstring: the answer (``started``, ``record``, ``supervisor_exit``).

    ``exited()``: the supervisor's exit status, None while it runs (``Popen.poll``). Seconds throughout."""
    deadline = clock() + start_wait
    rec = runfiles.read_run(run_dir)
    while _pending(rec):
        code = exited()
        if code is not None:  # it ended before the run started: read once more (it may have written, then exited)
            rec = runfiles.read_run(run_dir)
            if _pending(rec):
                return {"started": False, "record": rec, "supervisor_exit": code}
            break
        if clock() >= deadline:
            return {"started": False, "record": rec, "supervisor_exit": None}
        sleep(POLL_S)
        rec = runfiles.read_run(run_dir)
    assert rec is not None
    settle_end = clock() + settle
    link_end = clock() + link_wait
    while not runstate.RunStatus.of(rec.get("status")).terminal:
        now = clock()
        if now >= settle_end and (rec.get("swanlab_url") or now >= link_end):
            break
        sleep(POLL_S)
        rec = runfiles.read_run(run_dir) or rec
    return {"started": True, "record": rec, "supervisor_exit": None}


def main(argv: Optional[List[str]] = None) -> int:
    """``python3 -m dapo_ops.agent.runstart <run_dir> --workdir W --start-wait S --settle S --link-wait S``."""
    p = argparse.ArgumentParser(prog="python3 -m dapo_ops.agent.runstart")
    p.add_argument("run_dir")
    p.add_argument("--workdir", default="")
    p.add_argument("--start-wait", type=float, required=True)
    p.add_argument("--settle", type=float, required=True)
    p.add_argument("--link-wait", type=float, required=True)
    a = p.parse_args(argv)
    try:
        proc = spawn(a.run_dir, a.workdir)
    except OSError as e:
        sys.stderr.write("could not start the supervisor of %s: %s\n" % (a.run_dir, e))
        return SPAWN_FAILED
    answer = wait(a.run_dir, proc.poll, start_wait=a.start_wait, settle=a.settle, link_wait=a.link_wait)
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - run in the container by control/launch/service.py start_run
    sys.exit(main())
